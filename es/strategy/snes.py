"""Separable Natural Evolution Strategies (SNES; Schaul et al. 2011, Wierstra et al. 2014): a
sigma per parameter, adapted from the same samples as the center. Notebook 05 teaches the step
(``snes_step``); here the utilities are the shaped returns over the population,
``w = shaping(returns) / population``, so that ``--shaping`` and ``--learning-rate`` keep the
scale they have for OpenES, and the center's step goes through the optimizer: with
``--optimizer sgd --momentum 0`` it is notebook 05's ``mu + lr_mu * sigma * sum_i w_i s_i``.
"""
from __future__ import annotations

import math

import numpy as np

from .. import noise
from .base import Strategy


def default_sigma_learning_rate(dim: int) -> float:
    """SNES's step for log sigma (Schaul et al. 2011): ``(3 + ln d) / (5 sqrt d)``."""
    return (3 + math.log(dim)) / (5 * math.sqrt(dim))


class SNES(Strategy):
    name = "snes"
    summary = "separable NES, a sigma per parameter adapted from the samples (notebook 05)"

    def __init__(self, center, optimizer, *, sigma_learning_rate: float | None = None, **kwargs):
        super().__init__(center, optimizer, **kwargs)
        self.sigma = np.full(self.center.size, self.sigma, dtype=np.float32)   # --sigma is where each one starts
        self.sigma_learning_rate = (default_sigma_learning_rate(self.center.size) if sigma_learning_rate is None
                                    else float(sigma_learning_rate))
        if not (math.isfinite(self.sigma_learning_rate) and self.sigma_learning_rate > 0):
            raise ValueError(f"sigma_learning_rate must be a positive number, got {sigma_learning_rate!r}")

    @classmethod
    def from_config(cls, config, center, **settings):
        return super().from_config(config, center, sigma_learning_rate=config.sigma_learning_rate, **settings)

    def tell(self, returns) -> dict:
        """notebook 05's step: the center along ``sigma * sum_i w_i s_i`` (through the optimizer),
        then ``sigma *= exp(lr_sigma / 2 * sum_i w_i (s_i^2 - 1))``, both from the old sigma."""
        w = self.weights(returns) / np.float32(self.population)
        along, spread = noise.weighted_noise_and_square_sums(self.seed, self.generation, w, self.center.size,
                                                             self.antithetic, self.noise_scheme)
        grad = self.sigma * along
        self.center, ratio = self.optimizer.update(self.center, grad)
        self.sigma = (self.sigma * np.exp(np.float32(self.sigma_learning_rate / 2) * spread)).astype(np.float32)
        self.generation += 1
        return {"grad_norm": float(np.linalg.norm(grad)), "update_ratio": ratio,
                "sigma_min": float(self.sigma.min()), "sigma_max": float(self.sigma.max())}

    def state_dict(self) -> dict[str, np.ndarray]:
        return {**super().state_dict(), "sigma": self.sigma.copy()}

    def load_state_dict(self, state: dict) -> None:
        if "sigma" not in state:
            raise ValueError("the snes state lacks its sigma per parameter (a checkpoint of another strategy?)")
        sigma = np.asarray(state["sigma"])
        if sigma.dtype != np.float32 or sigma.shape != self.center.shape or not (
                np.all(np.isfinite(sigma)) and np.all(sigma > 0)):
            raise ValueError(f"the snes sigma must be {self.center.size} finite positive float32 values, got "
                             f"{sigma.dtype} {sigma.shape}")
        super().load_state_dict(state)
        self.sigma = sigma.copy()
