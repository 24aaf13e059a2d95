"""Write pong/background.npy: Pong's static picture at 42x42 (walls, field, 0:0 score), the
per-pixel median of 2000 frames of seeded random play. Policies subtract it so that only the
moving objects (ball, paddles) and score changes send signal. Deterministic; the shipped file
is checked against a fresh computation in tests/test_pong_env.py."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pong.env import make_pong_vector  # noqa: E402


def compute_background(steps: int = 2000) -> np.ndarray:
    env = make_pong_vector(1, num_threads=1)
    obs, _ = env.reset(seed=np.array([0]))
    rng = np.random.Generator(np.random.PCG64(0))
    frames = []
    for _ in range(steps):
        obs, *_ = env.step(np.array([rng.choice([0, 2, 3])], dtype=np.int64))
        frames.append(obs[0, -1].copy())
    env.close()
    return np.median(np.stack(frames), axis=0).round().astype(np.uint8)


if __name__ == "__main__":
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pong", "background.npy")
    np.save(out, compute_background())
    print("wrote", os.path.normpath(out))
