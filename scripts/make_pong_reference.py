"""Write pong/reference.npz: the reference batch of a keypoints policy's virtual batch
normalization (``--head-inputs vbn``, Salimans et al. 2017 after Salimans et al. 2016): 64
observations (uint8, (64, 4, 42, 42)) of seeded random play, every 25th agent step of games
11..14 (ALE/Pong-v5's own games, ``pong.games``), chosen once and never changed: a member
normalizes its head's inputs by their mean and spread over this batch, computed with its own
parameters. Deterministic; the shipped file is checked against a fresh computation in
tests/pong/test_pong_keypoints.py.

    python scripts/make_pong_reference.py
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pong.env import downsample_batch, stack_batch  # noqa: E402
from pong.games import PongGames  # noqa: E402

GAMES, STEPS, EVERY = (11, 12, 13, 14), 400, 25


def compute_reference() -> np.ndarray:
    rng = np.random.Generator(np.random.PCG64(0))
    seen = {g: [] for g in range(len(GAMES))}

    def choose(episodes, obs):
        for e, o in zip(episodes.tolist(), obs):
            seen[e].append(o.copy())
        return rng.integers(0, 3, len(episodes))
    PongGames(len(GAMES), downsample_batch, stack_batch).play(choose, np.array(GAMES), max_steps=STEPS)
    return np.concatenate([np.stack(seen[g][EVERY - 1::EVERY]) for g in range(len(GAMES))])


if __name__ == "__main__":
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pong", "reference.npz")
    ref = compute_reference()
    assert ref.shape == (64, 4, 42, 42), ref.shape
    np.savez_compressed(out, obs=ref)
    print("wrote", os.path.normpath(out), ref.shape)
