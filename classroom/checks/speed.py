"""How fast notebook 04's functions are: a check a student runs that the grader does not grade."""
from __future__ import annotations

import os

import numpy as np

from .base import (CheckFailed, _fail)


# Checks a student runs that the grader does not grade (no points, no nbgrader grade cell): a
# cell that only calls one of these is an ordinary locked cell (course repository: classroom.build.graded_check).
UNGRADED = {"pong_speed"}
SPEED_TARGET = 1.0      # the student's three functions may add at most this much to a game step (ALE's own = 1)


def _best_seconds(fn, *args, budget: float = 0.5, most: int = 20) -> float:
    """The fastest of several calls (the least disturbed by other work on the machine), within
    about ``budget`` seconds; a first call outside the timing warms caches and imports."""
    import time
    fn(*args)
    best, spent, n = float("inf"), 0.0, 0
    while n < most and (n < 3 or spent < budget):
        t0 = time.perf_counter()
        fn(*args)
        took = time.perf_counter() - t0
        best, spent, n = min(best, took), spent + took, n + 1
    return best


def speed_of(downsample, stack_frames, batched_policy, games: int = 4, steps: int = 60, batch: int = 32) -> dict:
    """Microseconds per game step: ALE's own emulation of a step (4 games of ALE/Pong-v5 played
    ``steps`` steps with random actions, preprocessing left out), and each function on what it
    gets in training (``batch`` games' real screens at once; the training loop's calls get about
    half as many), divided by ``batch``. Their ratio does not depend on how fast the machine is."""
    import time
    from pong.games import PongGames
    from pong.student import POLICY
    screens = []

    def keep(frames):
        screens.append(np.array(frames))
        return np.zeros((len(frames), 42, 42), np.uint8)

    play = PongGames(games, keep, lambda stacks, frames: stacks)
    play.warm_up(games)                          # building the games is not a step
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    _, lengths = play.play(lambda episodes, obs: rng.integers(0, 3, len(episodes)), list(range(games)), steps)
    ale = (time.perf_counter() - t0) / lengths.sum()
    frames = np.concatenate(screens[games:])     # the screens after the first step, varied
    frames = frames[np.arange(batch) % len(frames)].copy()
    small = np.asarray(downsample(frames.copy()))
    if small.shape != (batch, 42, 42):
        _fail(f"pong_speed: downsample returned shape {small.shape} for {batch} screens, not ({batch}, 42, 42): "
              "run its check first")
    stacks = np.repeat(small.astype(np.uint8)[:, None], 4, axis=1)
    W = (rng.standard_normal((batch, POLICY.num_features, 3)) * 0.01).astype(np.float32)
    b = np.zeros((batch, 3), np.float32)
    features = POLICY.features(stacks)
    return {"ale": ale * 1e6,
            "downsample": _best_seconds(downsample, frames) / batch * 1e6,
            "stack_frames": _best_seconds(stack_frames, stacks, small) / batch * 1e6,
            "batched_policy": _best_seconds(batched_policy, W, b, features) / batch * 1e6}


SLOW_BECAUSE = {
    "downsample": "a Python loop over pixels, rows or output columns (np.mean of each cell, one at a time), or the "
                  "(160, 42) column weights built inside the function on every call; sum the 5 rows with one "
                  "reshape and do the columns with one matmul by weights built once, outside (the hint in section 1)",
    "stack_frames": "a Python loop over games or frames; one array operation on the whole batch does it",
    "batched_policy": "a Python loop over members, or float64 copies of W (32 x 1176 x 3 numbers) on every call; "
                      "one np.einsum (or a batched matmul) on the float32 arrays as given",
}


def pong_speed(downsample, stack_frames, batched_policy) -> dict:
    """Not graded (no points): is your code fast enough to train on? Times ``downsample``,
    ``stack_frames`` and ``batched_policy`` on what training hands them, per game step, against
    ALE's own emulation of a step measured in the same call (the part of training no code of
    yours can speed up). Passes when the three together add at most ``SPEED_TARGET`` times ALE's
    step, so that training takes at most about twice the notebook's timings; otherwise raises
    CheckFailed naming the slowest function and its usual cause. Returns the microseconds."""
    if os.environ.get("ES_COURSE_FAST") == "1":
        print("SKIPPED pong_speed: timings mean nothing in fast mode (ES_COURSE_FAST=1); not graded")
        return {}
    us = speed_of(downsample, stack_frames, batched_policy)
    yours = us["downsample"] + us["stack_frames"] + us["batched_policy"]
    share = yours / us["ale"]
    line = (f"per game step: downsample {us['downsample']:,.0f} us, stack_frames {us['stack_frames']:,.1f} us, "
            f"batched_policy {us['batched_policy']:,.1f} us; ALE's own emulation of the step {us['ale']:,.0f} us")
    if share <= SPEED_TARGET:
        print(f"OK pong_speed (not graded): your code adds {share:.0%} to each game step (target: at most "
              f"{SPEED_TARGET:.0%}); {line}")
        return us
    slowest = max(SLOW_BECAUSE, key=lambda name: us[name])
    hours = ", hours instead of minutes" if 1 + share >= 4 else ""
    raise CheckFailed(f"pong_speed (not graded): your code adds {share:.1f} times ALE's own time to every game step "
                      f"(target: at most {SPEED_TARGET:.0%}), so training would take about {1 + share:.0f} times "
                      f"as long as this notebook's timings{hours}; {line}. The slowest is "
                      f"{slowest}: usually {SLOW_BECAUSE[slowest]}. Its check asks for exact answers, this one for "
                      "fast ones: make it fast, then run this cell again") from None
