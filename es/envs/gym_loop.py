"""Any gymnasium environment, one episode at a time (the fallback when no batched
version exists). Each episode starts from ``env.reset(seed=s)``."""
from __future__ import annotations

import numpy as np


def run_gym_episodes(env, policy, params: np.ndarray, rows, seeds, max_steps: int | None = None):
    rows = np.asarray(rows, dtype=np.int64)
    returns = np.zeros(len(rows), dtype=np.float64)
    lengths = np.zeros(len(rows), dtype=np.int64)
    cache = {}
    for k, (row, seed) in enumerate(zip(rows, seeds)):
        if row not in cache:
            cache[row] = policy.unflatten(np.asarray(params, dtype=np.float32)[row:row + 1])
        layers = cache[row]
        obs, _ = env.reset(seed=int(seed))
        total, steps, done = 0.0, 0, False
        while not done:
            a = policy.forward(layers, np.asarray(obs, dtype=np.float32).reshape(1, -1))[0]
            obs, reward, terminated, truncated, _ = env.step(int(a) if policy.discrete else a)
            total += float(reward)
            steps += 1
            done = terminated or truncated or (max_steps is not None and steps >= max_steps)
        returns[k], lengths[k] = total, steps
    return returns, lengths
