"""Pong observations: 42x42 grayscale, the last 4 frames, channel-first, float32 in [0, 1].

Two builders that feed a policy the *same* observations:

* ``make_pong(seed)``: a gymnasium environment on ``ALE/Pong-v5`` itself (what the score is
  measured on) with our preprocessing in NumPy.
* ``make_pong_vector(n)``: ale-py's ``AtariVectorEnv`` stepping ``n`` games in C++ threads with
  the same preprocessing built in (for training throughput).
  ``tests/test_pong_env.py`` checks that both give identical frames for the same actions.

Choices, and how they differ from the course's original wrapper (``PongDeterministic-v0``
for the old gym API, crop rows 34:194, PIL bilinear resize, unweighted RGB mean, newest frame
first, 3 zero frames after reset):

===================  ======================================  ==============================
choice               here                                    original
===================  ======================================  ==============================
game                 ALE/Pong-v5: frameskip 4, sticky        PongDeterministic-v0: frameskip
                     actions 0.25 (its defaults)             4, sticky actions 0.25 (v0)
grayscale            ALE's luminance palette                 unweighted mean of R, G, B
crop                 none: the full 210x160 frame            rows 34:194 (no score, walls)
resize               area average (OpenCV INTER_AREA, what   PIL bilinear
                     AtariVectorEnv does), rounded to uint8
frame order          oldest first, newest at index 3         newest at index 0
after reset          3 zero frames, then the first frame     same
value range          float32 in [0, 1]                       same
actions              policy picks NOOP, RIGHT (up), LEFT     all 6
                     (down); FIRE adds nothing in Pong
===================  ======================================  ==============================

The crop and order follow ``AtariVectorEnv``, which has neither a crop option nor newest-
first stacking: one preprocessing for training and evaluation beats a closer copy of the
original. The score digits stay in view; a policy can learn to ignore them.
"""
from __future__ import annotations

from collections import deque

import gymnasium as gym
import numpy as np

from .games import ACTION_NAMES, PONG_ACTIONS, SIZE, STACK  # noqa: F401 -- re-exported

# AtariVectorEnv settings that reproduce ALE/Pong-v5 (its defaults differ: no sticky actions,
# max-pooled frames, up to 30 no-ops and FIRE on reset, clipped rewards).
VECTOR_SETTINGS = dict(img_height=SIZE, img_width=SIZE, grayscale=True, stack_num=STACK, frameskip=4,
                       maxpool=False, noop_max=0, use_fire_reset=False, reward_clipping=False,
                       episodic_life=False, repeat_action_probability=0.25)


def _column_weights() -> np.ndarray:
    """``(160, 42)`` integers: how many 42ths of input column ``c`` output column ``j`` covers."""
    w = np.zeros((160, SIZE))
    for j in range(SIZE):
        lo, hi = j * 160, (j + 1) * 160              # output column j spans [lo, hi) / 42 input columns
        for c in range(lo // SIZE, -(-hi // SIZE)):
            w[c, j] = max(0, min(hi, SIZE * (c + 1)) - max(lo, SIZE * c))
    return w.astype(np.float32)


_COLUMNS = _column_weights()


def downsample_batch(frames: np.ndarray) -> np.ndarray:
    """``(k, 210, 160)`` uint8 grayscale -> ``(k, 42, 42)`` uint8 by area averaging, rounded to
    the nearest integer (halves to even, as ``np.rint``).

    Exact: rows shrink by exactly 5 (an integer sum), columns by 160/42 (integer weights in
    42ths), so every output is an integer ``N`` over 5 x 160 = 800, and float32 holds ``N``
    (< 2^24) and every partial sum exactly, whatever order BLAS adds them in. One rounding,
    of ``N / 800``, is the only one. (OpenCV's ``INTER_AREA``, what ale-py's vector env uses,
    agrees except where a pixel's average is exactly a half.)
    """
    frames = np.asarray(frames)
    k = len(frames)
    rows = frames.reshape(k * SIZE, 5, 160).sum(axis=1, dtype=np.uint16).astype(np.float32)
    return np.rint((rows @ _COLUMNS) / np.float32(800)).reshape(k, SIZE, SIZE).astype(np.uint8)


def stack_batch(stacks: np.ndarray, frames: np.ndarray) -> np.ndarray:
    """``(k, 4, 42, 42)`` stacks and ``(k, 42, 42)`` new frames -> the stacks with their oldest
    frame dropped and the new one last (oldest first, as ``AtariVectorEnv`` stacks)."""
    return np.concatenate([np.asarray(stacks)[:, 1:], np.asarray(frames)[:, None]], axis=1)


def downsample(frame: np.ndarray) -> np.ndarray:
    """One 210x160 uint8 grayscale frame -> 42x42 uint8 (see ``downsample_batch``)."""
    return downsample_batch(np.asarray(frame)[None])[0]


class PongPreprocessing(gym.Wrapper):
    """Grayscale 210x160 frames -> float32 ``(4, 42, 42)`` in [0, 1], oldest frame first."""

    def __init__(self, env: gym.Env, seed: int | None = None):
        super().__init__(env)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (STACK, SIZE, SIZE), np.float32)
        self.action_space = gym.spaces.Discrete(len(PONG_ACTIONS))
        self._frames: deque = deque(maxlen=STACK)
        self._first_seed = seed

    def _obs(self) -> np.ndarray:
        return np.stack(self._frames).astype(np.float32) / 255.0

    def reset(self, *, seed=None, options=None):
        if seed is None and self._first_seed is not None:
            seed, self._first_seed = self._first_seed, None
        frame, info = self.env.reset(seed=seed, options=options)
        self._frames.extend([np.zeros((SIZE, SIZE), np.uint8)] * (STACK - 1) + [downsample(frame)])
        return self._obs(), info

    def step(self, action):
        frame, reward, terminated, truncated, info = self.env.step(int(PONG_ACTIONS[int(action)]))
        self._frames.append(downsample(frame))
        return self._obs(), reward, terminated, truncated, info


def register() -> None:
    import ale_py
    gym.register_envs(ale_py)


def make_pong(seed: int | None = None, **options) -> gym.Env:
    """``ALE/Pong-v5`` with the preprocessing above. ``options`` go to ``gym.make`` (e.g.
    ``render_mode="rgb_array"`` or ``repeat_action_probability=0.0``). ``seed`` seeds the
    first reset. Actions are 0 = NOOP, 1 = UP, 2 = DOWN."""
    register()
    return PongPreprocessing(gym.make("ALE/Pong-v5", obs_type="grayscale", **options), seed=seed)


def make_pong_vector(num_envs: int, num_threads: int = 0, **overrides):
    """``num_envs`` Pong games stepped in C++ threads; observations uint8 ``(n, 4, 42, 42)``
    (divide by 255 for ``make_pong``'s values). Actions are ALE action ids (see
    ``PONG_ACTIONS``)."""
    from ale_py.vector_env import AtariVectorEnv
    return AtariVectorEnv("pong", num_envs=num_envs, num_threads=num_threads, **{**VECTOR_SETTINGS, **overrides})
