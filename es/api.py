"""Optimise any black-box function with the same loop the CLI uses."""
from __future__ import annotations

import numpy as np

from .config import ESConfig
from .envs import FunctionProblem
from .training import train


def optimize(f, x0, *, seed: int = 0, population: int = 64, sigma: float = 0.1, learning_rate: float = 0.05,
             generations: int = 100, optimizer: str = "adam", shaping: str = "centered_ranks",
             reward_goal: float | None = None, run_dir=None, progress: bool = False, workers: int = 1, **kwargs):
    """Maximise ``f(params, seed) -> float`` from ``x0``; returns a ``TrainResult``. ``seed``
    changes each generation (the same for every member): common random numbers for a noisy ``f``."""
    x0 = np.asarray(x0, dtype=np.float32).ravel()
    config = ESConfig(env="function", seed=seed, population=population, sigma=sigma, learning_rate=learning_rate,
                      generations=generations, optimizer=optimizer, shaping=shaping, reward_goal=reward_goal,
                      hidden=[], workers=workers, eval_episodes=1, **kwargs)
    return train(config, FunctionProblem(f, x0.size, x0), run_dir=run_dir, progress=progress)
