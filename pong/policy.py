"""NumPy Pong policies, evaluated for many population members at once.

All take uint8 observations ``(rows, 4, 42, 42)`` (as ``AtariVectorEnv`` gives them; multiply
``make_pong``'s floats by 255) and return an index into ``PONG_ACTIONS`` (NOOP, UP, DOWN).
All subtract Pong's static picture first (``background.npy``: field, walls, 0:0 score; made
by the course repository's ``scripts/make_pong_background.py``), so that only the ball, the paddles and score changes
send signal: with raw pixels, parameter noise on the ~7000 constant pixels swamps the few
that matter, and every member ends up repeating one action.

* ``PongDensePolicy``: sums each row over bands of ``band`` columns (42 rows x 7 bands x 4
  frames = 1176 features by default), then a linear map (or an MLP) to 3 logits. Rows keep
  full resolution because tracking the ball is a comparison of *heights*; the band that
  holds our paddle (columns 36-41) is kept apart from the rest of the field, so "move
  towards the ball's row" is a linear function of the features.
* ``PongConvPolicy``: two strided convolutions (im2col + a per-member product, each member
  with its own filters) and a linear read-out.
* ``PongObjectsPolicy``: where the objects are, read off the pixels by fixed code (the ball's
  position and velocity, both paddles' heights, ours' speed: centroids of the frames minus the
  background), their pairwise products, then an MLP (or a linear map) to 3 logits. The
  products make "where will the ball cross my column" (height + velocity x distance) a
  linear function of the features; the MLP can fold it at the walls. ES learns all of the
  weights; nothing about how to play is written in.
* ``PongKeypointsPolicy`` (``pong/keypoints.py``): learns where to look as well: learned
  filters and a spatial soft-argmax find the positions its read-out uses.
"""
from __future__ import annotations

import numpy as np

from es import exact
from es.interfaces import Policy
from es.policies import MLPPolicy, split_layers
from es.seeding import INIT, rng_for

from .keypoints import PongKeypointsPolicy
from .pixels import BACKGROUND, N_ACTIONS  # noqa: F401 -- BACKGROUND re-exported
from .pixels import BACKGROUND_INT as _BACKGROUND_INT
from .pixels import check_obs as _check


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
        # 0/1 pooling: integer pixels give integer band sums, exact in float32 in any order a
        # BLAS kernel adds them, so the features have the same bits on every CPU (one rounding: / 255)
        self._pool = np.kron(np.eye(42 // self.band), np.ones((self.band, 1))).astype(np.float32)
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
        x *= np.float32(1 / 255)
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
        # einsum, not matmul: BLAS's bits depend on the CPU (es.exact)
        h = np.maximum(np.einsum("rpi,rio->rpo", _patches(x, 4, 2), w1) + b1, 0)   # (rows, 400, c1)
        h = h.reshape(r, 20, 20, -1)
        h = np.maximum(np.einsum("rpi,rio->rpo", _patches(h, 4, 2), w2) + b2, 0)   # (rows, 81, c2)
        logits = exact.rows_times_matrices(h.reshape(r, -1), w3) + b3[:, 0, :]
        return logits.argmax(axis=1)


# Object features. Field rows 7..37 lie between the walls (rows 4-6 and 38-41 hold the walls,
# rows 0-3 the score); in 42 columns our paddle covers 36-37, the opponent's 4-5 and the ball
# flies over 6..35 between them (it crosses the paddle columns only when it is hit or missed).
FIELD_ROWS, BALL_COLS, OUR_COLS, THEIR_COLS = (7, 38), (6, 36), (36, 38), (4, 6)
VISIBLE_MASS = 20             # below this much |frame - background| an object counts as absent
OBJECT_NAMES = ("ball_seen", "ball_y", "ball_x", "ball_vy", "ball_vx", "paddle_y", "paddle_vy", "opponent_y")
_STEPS = np.array([-1.5, -0.5, 0.5, 1.5], dtype=np.float64)      # the 4 frames' times, centred


def _centroid(mass: np.ndarray, coords: np.ndarray):
    """(centroid, total mass) along the last axis of integer-valued ``mass``. Every sum is of
    integers (exact in float64), so the one rounding is the division: the same bits on any
    CPU and for any batch."""
    total = mass.sum(axis=-1)
    return (mass * coords).sum(axis=-1) / np.maximum(total, 1.0), total


def _slope(v: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """Least-squares slope of ``v`` over the 4 frames, per step, using the frames where the
    object is seen (at least 2, else 0)."""
    w = seen.astype(np.float64)
    n = w.sum(axis=-1)
    t_mean = (w * _STEPS).sum(axis=-1) / np.maximum(n, 1)
    v_mean = (w * v).sum(axis=-1) / np.maximum(n, 1)
    dt = (_STEPS - t_mean[:, None]) * w
    var = (dt * (_STEPS - t_mean[:, None])).sum(axis=-1)
    slope = (dt * (v - v_mean[:, None])).sum(axis=-1) / np.maximum(var, 1e-9)
    return np.where(n >= 2, slope, 0.0)


def object_features(obs) -> np.ndarray:
    """``(rows, 4, 42, 42)`` uint8 -> ``(rows, 8)`` float64 (``OBJECT_NAMES``), scaled to about
    [-2, 2]: positions as (pixel - 22) / 10, velocities in pixels per agent step (the ball's x
    moves ~1 per step, its y up to ~2, our paddle up to ~4, so that one is divided by 3). A
    ball that is not seen in the newest frame has position and velocity 0."""
    obs = _check(obs)
    r0, r1 = FIELD_ROWS
    x = np.abs(obs[:, :, r0:r1].astype(np.int16) - _BACKGROUND_INT[r0:r1]).astype(np.float64)  # (rows, 4, 31, 42)
    rows = np.arange(r0, r1, dtype=np.float64)
    ball = x[..., BALL_COLS[0]:BALL_COLS[1]]
    by, ball_mass = _centroid(ball.sum(axis=-1), rows)
    bx, _ = _centroid(ball.sum(axis=-2), np.arange(*BALL_COLS, dtype=np.float64))
    py, paddle_mass = _centroid(x[..., OUR_COLS[0]:OUR_COLS[1]].sum(axis=-1), rows)
    ey, _ = _centroid(x[..., THEIR_COLS[0]:THEIR_COLS[1]].sum(axis=-1), rows)
    ball_seen, paddle_seen = ball_mass > VISIBLE_MASS, paddle_mass > VISIBLE_MASS
    now = ball_seen[:, 3]
    both = paddle_seen[:, 2] & paddle_seen[:, 3]
    f = np.stack([now.astype(np.float64),
                  np.where(now, (by[:, 3] - 22) / 10, 0.0),
                  np.where(now, (bx[:, 3] - 22) / 10, 0.0),
                  np.where(now, _slope(by, ball_seen), 0.0),
                  np.where(now, _slope(bx, ball_seen), 0.0),
                  np.where(paddle_seen[:, 3], (py[:, 3] - 22) / 10, 0.0),
                  np.where(both, (py[:, 3] - py[:, 2]) / 3, 0.0),
                  (ey[:, 3] - 22) / 10], axis=1)
    return f


_PAIRS = np.triu_indices(len(OBJECT_NAMES))


def quadratic_features(f: np.ndarray) -> np.ndarray:
    """``(rows, k)`` -> ``(rows, k + k (k + 1) / 2)``: the features and all their pairwise
    products (squares included)."""
    return np.concatenate([f, f[:, _PAIRS[0]] * f[:, _PAIRS[1]]], axis=1)


class PongObjectsPolicy(Policy):
    """Object features (``object_features``) and their products -> an MLP -> 3 logits."""

    def __init__(self, hidden=(16,)):
        self.hidden = tuple(int(h) for h in hidden)
        k = len(OBJECT_NAMES)
        self.num_features = k + k * (k + 1) // 2
        self.head = MLPPolicy(self.num_features, N_ACTIONS, self.hidden)
        self.num_params = self.head.num_params
        self.discrete = True

    def spec(self) -> dict:
        return {"type": "pong_objects", "hidden": list(self.hidden)}

    def features(self, obs) -> np.ndarray:
        return quadratic_features(object_features(obs)).astype(np.float32)

    def initial_params(self, seed: int) -> np.ndarray:
        return self.head.initial_params(seed)

    def unflatten(self, params):
        return self.head.unflatten(params)

    def forward(self, layers, obs) -> np.ndarray:
        return self.head.forward(layers, self.features(obs))


def make_pong_policy(spec: dict):
    if spec.get("type") == "pong_dense":
        return PongDensePolicy(spec.get("band", 6), spec.get("hidden", ()))
    if spec.get("type") == "pong_conv":
        return PongConvPolicy(spec.get("channels", (8, 16)))
    if spec.get("type") == "pong_objects":
        return PongObjectsPolicy(spec.get("hidden", (16,)))
    if spec.get("type") == "pong_keypoints":
        return PongKeypointsPolicy(spec.get("keypoints", 2), spec.get("hidden", (16,)), spec.get("motion", False),
                                   spec.get("pull_scale", 1.0), spec.get("conv", "blas"), spec.get("pull", "linear"),
                                   spec.get("vbn", False), spec.get("mix", 0))
    raise ValueError(f"unknown Pong policy {spec.get('type')!r}")
