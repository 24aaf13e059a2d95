"""OpenAI-ES (Salimans et al. 2017) behind an ask/tell interface.

    strategy = OpenES(center, Adam(len(center), 0.05), population=64, sigma=0.1, seed=0)
    while not done:
        task = strategy.ask()                        # what every worker needs
        returns = [f(p) for p in task.member_params(range(task.population))]
        strategy.tell(returns)                       # shaping, gradient, optimizer step

The gradient keeps the 1/sigma factor OpenAI's starter drops (docs/design.md#the-gradients-1sigma).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import noise
from .noise_table import check_dim
from .optimizers import Optimizer
from .options import OPTIONS
from .shaping import centered_ranks


@dataclass(frozen=True)
class GenerationTask:
    """Everything a worker needs to evaluate any member of one generation."""
    seed: int
    generation: int
    sigma: float
    antithetic: bool
    population: int
    center: np.ndarray  # float32, (dim,)
    noise: str = "seeds"   # es.noise scheme: "seeds" or "table"
    obs_norm: np.ndarray | None = None   # (2, obs_dim) float64: the frozen mean and std (es.obs_norm), or None

    def member_params(self, members) -> np.ndarray:
        """Parameters of the given member ids, ``(len(members), dim)`` float32."""
        members = np.asarray(members, dtype=np.int64)
        if members.size and (members.min() < 0 or members.max() >= self.population):
            raise ValueError(f"member ids must lie in [0, {self.population}), got {members.min()}..{members.max()}")
        eps = noise.antithetic_noise(self.seed, self.generation, members, self.center.size, self.antithetic,
                                     self.noise)
        return self.center[None, :] + np.float32(self.sigma) * eps


def check_hyperparameters(population: int, sigma: float, antithetic: bool) -> None:
    """The options table's rules (es.options), for the Python API: ValueError with the reason."""
    for name, value in (("sigma", sigma), ("population", population)):
        if not OPTIONS[name].valid(value):
            raise ValueError(OPTIONS[name].message(value, flag=False))
    if antithetic and population % 2:
        raise ValueError(f"population must be even with antithetic sampling (members come in +/- pairs), got {population}")


class OpenES:
    def __init__(self, center: np.ndarray, optimizer: Optimizer, *, population: int, sigma: float, seed: int,
                 antithetic: bool = True, shaping: Callable[[np.ndarray], np.ndarray] = centered_ranks,
                 generation: int = 0, noise_scheme: str = "seeds"):
        check_hyperparameters(population, sigma, antithetic)
        if noise_scheme not in noise.SCHEMES:
            raise ValueError(f"noise must be one of {', '.join(noise.SCHEMES)}, got {noise_scheme!r}")
        if noise_scheme == "table":
            check_dim(np.asarray(center).size)
        self.noise_scheme = noise_scheme
        self.center = np.asarray(center, dtype=np.float32).copy()
        self.optimizer, self.population, self.sigma = optimizer, int(population), float(sigma)
        self.seed, self.antithetic, self.shaping, self.generation = int(seed), bool(antithetic), shaping, int(generation)

    def ask(self) -> GenerationTask:
        return GenerationTask(self.seed, self.generation, self.sigma, self.antithetic, self.population,
                              self.center.copy(), self.noise_scheme)

    def gradient(self, returns) -> np.ndarray:
        returns = np.asarray(returns, dtype=np.float64)
        if returns.shape != (self.population,):
            raise ValueError(f"tell() needs one return per member: expected shape ({self.population},), got {returns.shape}")
        weights = self.shaping(returns)
        total = noise.weighted_noise_sum(self.seed, self.generation, weights, self.center.size, self.antithetic,
                                         self.noise_scheme)
        return total / np.float32(self.population * self.sigma)

    def tell(self, returns) -> dict:
        """Update the center from the population's returns; returns what the logs need."""
        grad = self.gradient(returns)
        self.center, ratio = self.optimizer.update(self.center, grad)
        self.generation += 1
        return {"grad_norm": float(np.linalg.norm(grad)), "update_ratio": ratio}
