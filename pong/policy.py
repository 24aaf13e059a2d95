"""NumPy Pong policies, evaluated for many population members at once.

Both take uint8 observations ``(rows, 4, 42, 42)`` (as ``AtariVectorEnv`` gives them; multiply
``make_pong``'s floats by 255) and return an index into ``PONG_ACTIONS`` (NOOP, UP, DOWN).
Both subtract Pong's static picture first (``background.npy``: field, walls, 0:0 score; made
by ``scripts/make_pong_background.py``), so that only the ball, the paddles and score changes
send signal: with raw pixels, parameter noise on the ~7000 constant pixels swamps the few
that matter, and every member ends up repeating one action.

* ``PongDensePolicy``: sums each row over bands of ``band`` columns (42 rows x 7 bands x 4
  frames = 1176 features by default), then a linear map (or an MLP) to 3 logits. Rows keep
  full resolution because tracking the ball is a comparison of *heights*; the band that
  holds our paddle (columns 36-41) is kept apart from the rest of the field, so "move
  towards the ball's row" is a linear function of the features.
* ``PongConvPolicy``: two strided convolutions (im2col + batched matmul, each member with its
  own filters) and a linear read-out.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from es.interfaces import Policy
from es.policies import MLPPolicy, split_layers
from es.seeding import INIT, rng_for

BACKGROUND = np.load(Path(__file__).with_name("background.npy")).astype(np.float32)  # (42, 42)
N_ACTIONS = 3


def _check(obs) -> np.ndarray:
    obs = np.asarray(obs)
    if obs.ndim != 4 or obs.shape[1:] != (4, 42, 42):
        raise ValueError(f"expected observations of shape (rows, 4, 42, 42), got {obs.shape}")
    return obs


def _centered(obs: np.ndarray) -> np.ndarray:
    x = _check(obs).astype(np.float32)
    x -= BACKGROUND
    x *= np.float32(1 / 255)
    return x


class PongDensePolicy(Policy):
    def __init__(self, band: int = 6, hidden=()):
        if 42 % band:
            raise ValueError(f"band must divide 42, got {band}")
        self.band, self.hidden = int(band), tuple(int(h) for h in hidden)
        self.num_features = 4 * 42 * (42 // self.band)
        self.head = MLPPolicy(self.num_features, N_ACTIONS, self.hidden)
        self._pool = np.kron(np.eye(42 // self.band), np.ones((self.band, 1))).astype(np.float32) / 255
        self._background = (BACKGROUND @ self._pool).reshape(1, -1)   # pooled, per frame
        self.num_params = self.head.num_params
        self.discrete = True
        self.head_fn = None   # set by PongProblem(head=...): the linear head, computed by the student's code

    def spec(self) -> dict:
        return {"type": "pong_dense", "band": self.band, "hidden": list(self.hidden)}

    def features(self, obs) -> np.ndarray:
        """Band sums of (frame - background) / 255, as one matmul with a pooling matrix (a
        reduction over a 6-wide axis is ~10x slower in NumPy). Sums, not means: the ball is
        one pixel wide and keeps its full strength."""
        obs = _check(obs)
        r = len(obs)
        x = (obs.reshape(-1, 42).astype(np.float32) @ self._pool).reshape(r, 4, -1)
        x -= self._background
        return x.reshape(r, -1)

    def initial_params(self, seed: int) -> np.ndarray:
        return self.head.initial_params(seed)

    def unflatten(self, params):
        return self.head.unflatten(params)

    def forward(self, layers, obs) -> np.ndarray:
        if self.head_fn is not None:          # a notebook's batched_policy(W, b, features)
            (w, b), = layers
            return np.asarray(self.head_fn(w, b[:, 0, :], self.features(obs)))
        return self.head.forward(layers, self.features(obs))


def _patches(x: np.ndarray, k: int, stride: int) -> np.ndarray:
    """im2col on channels-last ``(rows, H, W, C)`` -> ``(rows, H' * W', k * k * C)``."""
    win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(1, 2))[:, ::stride, ::stride]
    r, h, w = win.shape[:3]
    return win.transpose(0, 1, 2, 4, 5, 3).reshape(r, h * w, -1)


class PongConvPolicy(Policy):
    """conv 4x4/2 (4 -> c1) -> ReLU -> conv 4x4/2 (c1 -> c2) -> ReLU -> linear -> 3 logits."""

    def __init__(self, channels=(8, 16)):
        self.channels = tuple(int(c) for c in channels)
        c1, c2 = self.channels
        self.shapes = [(4 * 4 * 4, c1), (4 * 4 * c1, c2), (9 * 9 * c2, N_ACTIONS)]
        self.num_params = sum(a * b + b for a, b in self.shapes)
        self.discrete = True

    def spec(self) -> dict:
        return {"type": "pong_conv", "channels": list(self.channels)}

    def initial_params(self, seed: int) -> np.ndarray:
        rng = rng_for(seed, INIT)
        parts = []
        for i, (a, b) in enumerate(self.shapes):
            w = rng.standard_normal((a, b)) * (np.sqrt(2.0 / a) if i < 2 else 0.01 / np.sqrt(a))
            parts += [w.ravel(), np.zeros(b)]
        return np.concatenate(parts).astype(np.float32)

    def unflatten(self, params):
        return split_layers(params, self.shapes)

    def forward(self, layers, obs) -> np.ndarray:
        x = _centered(obs).transpose(0, 2, 3, 1)           # (rows, 42, 42, 4)
        (w1, b1), (w2, b2), (w3, b3) = layers
        r = len(x)
        h = np.maximum(np.matmul(_patches(x, 4, 2), w1) + b1, 0)          # (rows, 400, c1)
        h = h.reshape(r, 20, 20, -1)
        h = np.maximum(np.matmul(_patches(h, 4, 2), w2) + b2, 0)          # (rows, 81, c2)
        logits = np.matmul(h.reshape(r, 1, -1), w3) + b3
        return logits[:, 0, :].argmax(axis=1)


def make_pong_policy(spec: dict):
    if spec.get("type") == "pong_dense":
        return PongDensePolicy(spec.get("band", 6), spec.get("hidden", ()))
    if spec.get("type") == "pong_conv":
        return PongConvPolicy(spec.get("channels", (8, 16)))
    raise ValueError(f"unknown Pong policy {spec.get('type')!r}")
