"""NumPy policies with a flat parameter vector, evaluated for many members at once: a policy
stores no parameters; ``forward(layers, obs)`` takes per-row weights that ``unflatten`` builds
from a ``(rows, num_params)`` matrix, so one batched product serves every member."""
from __future__ import annotations

import numpy as np

from . import exact, registry
from .interfaces import Policy
from .seeding import INIT, rng_for


def split_layers(params: np.ndarray, shapes) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(rows, num_params)`` -> per layer ``(W (rows, in, out), b (rows, 1, out))``, for layer
    shapes ``[(in, out), ...]`` laid out as W then b, layer after layer."""
    params = np.asarray(params, dtype=np.float32)
    num_params = sum(a * b + b for a, b in shapes)
    if params.ndim != 2 or params.shape[1] != num_params:
        raise ValueError(f"expected parameters of shape (rows, {num_params}), got {params.shape}")
    layers, i = [], 0
    for a, b in shapes:
        w = params[:, i:i + a * b].reshape(-1, a, b)
        i += a * b
        layers.append((np.ascontiguousarray(w), np.ascontiguousarray(params[:, None, i:i + b])))
        i += b
    return layers


class MLPPolicy(Policy):
    """Fully connected tanh network. Discrete actions: argmax of the logits. Continuous
    actions: tanh output scaled to ``[low, high]``.

    ``hidden=()`` is a linear policy. Layout of the flat vector: for each layer its weights
    ``(in, out)`` row-major, then its biases ``(out,)``.
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden=(16,), discrete: bool = True,
                 low=None, high=None):
        self.obs_dim, self.act_dim, self.hidden, self.discrete = int(obs_dim), int(act_dim), tuple(int(h) for h in hidden), bool(discrete)
        sizes = [self.obs_dim, *self.hidden, self.act_dim]
        self.shapes = [(a, b) for a, b in zip(sizes[:-1], sizes[1:])]
        self.num_params = sum(a * b + b for a, b in self.shapes)
        self.low = None if low is None else np.asarray(low, dtype=np.float32)
        self.high = None if high is None else np.asarray(high, dtype=np.float32)

    def spec(self) -> dict:
        out = {"type": "mlp", "obs_dim": self.obs_dim, "act_dim": self.act_dim, "hidden": list(self.hidden),
               "discrete": self.discrete}
        if self.low is not None:
            out.update(low=self.low.tolist(), high=self.high.tolist())
        return out

    def initial_params(self, seed: int) -> np.ndarray:
        """Normalised-column init (OpenAI's ``normc``): each unit's incoming weights have norm 1,
        0.01 for the last layer so the first policy is nearly indifferent; biases zero."""
        rng = rng_for(seed, INIT)
        parts = []
        for i, (a, b) in enumerate(self.shapes):
            w = rng.standard_normal((a, b))
            w *= (0.01 if i == len(self.shapes) - 1 else 1.0) / np.sqrt(np.square(w).sum(axis=0, keepdims=True))
            parts += [w.ravel(), np.zeros(b)]
        return np.concatenate(parts).astype(np.float32)

    def unflatten(self, params: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        return split_layers(params, self.shapes)

    def forward(self, layers, obs: np.ndarray) -> np.ndarray:
        """Actions for ``obs (rows, obs_dim)``, row ``r`` using the weights of row ``r``."""
        h = np.asarray(obs, dtype=np.float32).reshape(len(obs), -1)
        for j, (w, b) in enumerate(layers):
            # Per-row products and tanh from es.exact, not matmul and np.tanh: their bits
            # depend on the CPU (BLAS kernel, SIMD level), and a worker's return must not.
            h = exact.rows_times_matrices(h, w) + b[:, 0, :]
            if j < len(layers) - 1:
                h = exact.tanh(h)
        if self.discrete:
            return h.argmax(axis=1)
        a = exact.tanh(h)
        if self.low is not None:
            a = self.low + (a + 1) * 0.5 * (self.high - self.low)
        return a

    def act(self, params: np.ndarray, obs: np.ndarray):
        """One action for one observation (the slow path for a single environment)."""
        a = self.forward(self.unflatten(np.asarray(params)[None, :]), np.asarray(obs)[None, :])[0]
        return int(a) if self.discrete else a


def make_policy(spec: dict):
    """A policy from its spec: the core's ``mlp`` or a plug-in's type (e.g. Pong's)."""
    return registry.policy_factory(spec.get("type"))(spec)


registry.register_policy("mlp", lambda s: MLPPolicy(s["obs_dim"], s["act_dim"], s.get("hidden", ()),
                                                     s.get("discrete", True), s.get("low"), s.get("high")))
