"""OpenAI-ES (Salimans et al. 2017): one fixed sigma for every parameter; the optimizer climbs
the gradient estimate.

    strategy = OpenES(center, Adam(len(center), 0.05), population=64, sigma=0.1, seed=0)
    while not done:
        task = strategy.ask()                        # what every worker needs
        returns = [f(p) for p in task.member_params(range(task.population))]
        strategy.tell(returns)                       # shaping, gradient, optimizer step

The gradient keeps the 1/sigma factor OpenAI's starter drops (docs/design.md#the-gradients-1sigma).
"""
from __future__ import annotations

import numpy as np

from .. import noise
from .base import Strategy


class OpenES(Strategy):
    name = "openes"
    summary = "OpenAI-ES, one fixed sigma for every parameter"

    def gradient(self, returns) -> np.ndarray:
        weights = self.weights(returns)
        total = noise.weighted_noise_sum(self.seed, self.generation, weights, self.center.size, self.antithetic,
                                         self.noise_scheme)
        return total / np.float32(self.population * self.sigma)

    def tell(self, returns) -> dict:
        """Update the center from the population's returns; returns what the logs need."""
        grad = self.gradient(returns)
        self.center, ratio = self.optimizer.update(self.center, grad)
        self.generation += 1
        return {"grad_norm": float(np.linalg.norm(grad)), "update_ratio": ratio}
