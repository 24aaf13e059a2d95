"""Optimizers that *ascend* a gradient estimate. One ``_compute_step`` per class.

Weight decay is an L2 penalty on the parameters, folded into the gradient as in OpenAI's
starter (``-weight_decay * theta``), never subtracted from the fitness (penalising the fitness
mixes the penalty into the ranks; estool's issue #15 shows it).

The classes keep float32 state for the strategy's update; ``adam_step`` is the course's Adam as
a pure float64 function: the notebooks' update, which the grader's replay of a Pong run and the
answer key call (notebook 06's loop ships to students without this module and writes it out;
tests hold the two equal bit for bit).
"""
from __future__ import annotations

import math

import numpy as np


class Optimizer:
    name = "base"
    slots: tuple = ()      # float32 state arrays, saved and restored with ``t``

    def __init__(self, dim: int, learning_rate: float, weight_decay: float = 0.0):
        self.dim, self.learning_rate, self.weight_decay = int(dim), float(learning_rate), float(weight_decay)
        self.t = 0

    def update(self, theta: np.ndarray, gradient: np.ndarray) -> tuple[np.ndarray, float]:
        """New parameters and the update ratio ``|step| / |theta|`` (OpenAI's health signal)."""
        self.t += 1
        g = gradient - np.float32(self.weight_decay) * theta if self.weight_decay else gradient
        step = self._compute_step(g.astype(np.float32))
        norm = float(np.linalg.norm(theta))
        ratio = float(np.linalg.norm(step)) / norm if norm > 0 else float("inf")
        return (theta + step).astype(np.float32), ratio

    def _compute_step(self, g: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"t": np.array(self.t, dtype=np.int64), **{k: getattr(self, k).copy() for k in self.slots}}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.t = int(state["t"])
        for k in self.slots:
            setattr(self, k, np.asarray(state[k], dtype=np.float32).copy())


class SGD(Optimizer):
    """Gradient ascent with momentum: ``v = m v + (1 - m) g``; ``step = lr v``."""
    name, slots = "sgd", ("v",)

    def __init__(self, dim, learning_rate, momentum=0.9, weight_decay=0.0):
        super().__init__(dim, learning_rate, weight_decay)
        self.momentum = float(momentum)
        self.v = np.zeros(self.dim, dtype=np.float32)

    def _compute_step(self, g):
        m = np.float32(self.momentum)
        self.v = m * self.v + (np.float32(1) - m) * g
        return np.float32(self.learning_rate) * self.v


class Adam(Optimizer):
    """Adam (Kingma & Ba) with bias correction folded into the step size."""
    name, slots = "adam", ("m", "v")

    def __init__(self, dim, learning_rate, beta1=0.9, beta2=0.999, epsilon=1e-8, weight_decay=0.0):
        super().__init__(dim, learning_rate, weight_decay)
        self.beta1, self.beta2, self.epsilon = float(beta1), float(beta2), float(epsilon)
        self.m = np.zeros(self.dim, dtype=np.float32)
        self.v = np.zeros(self.dim, dtype=np.float32)

    def _compute_step(self, g):
        b1, b2 = np.float32(self.beta1), np.float32(self.beta2)
        a = self.learning_rate * np.sqrt(1 - self.beta2 ** self.t) / (1 - self.beta1 ** self.t)
        self.m = b1 * self.m + (1 - b1) * g
        self.v = b2 * self.v + (1 - b2) * (g * g)
        return (np.float32(a) * self.m / (np.sqrt(self.v) + np.float32(self.epsilon))).astype(np.float32)


def adam_moments(m, v, grad):
    """Adam's two moving averages after one more gradient, in float64 with the course's betas
    (0.9, 0.999). The weights are the literals 0.1 and 0.001 the notebooks write: ``1 - 0.9`` is
    0.09999999999999998 in float64, and recorded runs and answers hold these bits."""
    return 0.9 * m + 0.1 * grad, 0.999 * v + 0.001 * grad * grad


def adam_rate(learning_rate: float, t: int) -> float:
    """Adam's step size at step ``t`` (from 1), both bias corrections folded in."""
    return learning_rate * math.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)


def adam_step(theta, grad, state, learning_rate: float):
    """One Adam *ascent* step, a pure function: ``(theta + step, new state)``, where the state is
    ``{"m", "v", "t"}`` (``None`` before the first step) and is never changed in place; float64,
    betas 0.9 and 0.999, epsilon 1e-8 outside the square root."""
    grad = np.asarray(grad, dtype=np.float64)
    state = state or {"m": np.zeros(grad.shape), "v": np.zeros(grad.shape), "t": 0}
    t = state["t"] + 1
    m, v = adam_moments(np.asarray(state["m"]), np.asarray(state["v"]), grad)
    return theta + adam_rate(learning_rate, t) * m / (np.sqrt(v) + 1e-8), {"m": m, "v": v, "t": t}


OPTIMIZERS = {"adam": Adam, "sgd": SGD}


def make_optimizer(name: str, dim: int, learning_rate: float, momentum: float = 0.9, weight_decay: float = 0.0) -> Optimizer:
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; choose one of {sorted(OPTIMIZERS)}")
    return OPTIMIZERS[name](dim, learning_rate, weight_decay=weight_decay, **({"momentum": momentum} if name == "sgd" else {}))
