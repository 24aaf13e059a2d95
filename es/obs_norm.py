"""Observation normalization the paper's way (Salimans et al. 2017, MuJoCo): the policy sees
``clip((obs - mean) / std, -5, 5)``, where ``mean`` and ``std`` are running statistics of the
states the members visited in every generation so far.

What travels is small: each member reports the count, sum and sum of squares of the states it
visited (``2 * obs_dim`` floats beside its return, never parameters), and the master merges
them. The statistics are frozen within a generation (every member of generation ``g`` sees
those of generations ``< g``) and merged in member order, so a run is bit-identical for any
number of workers, processes or machines: a chunk never sums its members' statistics itself.

Pure functions over ``ObsStats`` (count, sum, sum of squares), as ``es.shaping``'s are over
returns: ``merge`` two workers' statistics, ``from_members`` one generation's, ``mean_std`` for
the next generation's policy.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CLIP = 5.0          # normalized observations are clipped to [-CLIP, CLIP] (OpenAI's starter, ARS)
MIN_VAR = 1e-4      # a state variable that never moved is divided by 0.01, not by 0 (its std floor)


@dataclass(frozen=True)
class ObsStats:
    """``count`` states seen; ``total`` and ``squares``: their sum and sum of squares (float64)."""
    count: int
    total: np.ndarray
    squares: np.ndarray

    @classmethod
    def empty(cls, dim: int) -> "ObsStats":
        return cls(0, np.zeros(dim), np.zeros(dim))

    def to_array(self) -> np.ndarray:
        """``[count, total..., squares...]``: what a checkpoint stores (float64: exact up to 2**53 states)."""
        return np.concatenate([[float(self.count)], self.total, self.squares])

    @classmethod
    def from_array(cls, a) -> "ObsStats":
        a = np.asarray(a, dtype=np.float64)
        if a.ndim != 1 or a.size % 2 != 1 or not np.all(np.isfinite(a)) or a[0] < 0 or a[0] != int(a[0]):
            raise ValueError(f"observation statistics must be [count, sums, squares] with a whole count, got {a.shape}")
        d = (a.size - 1) // 2
        return cls(int(a[0]), a[1:1 + d].copy(), a[1 + d:].copy())


def merge(a: ObsStats, b: ObsStats) -> ObsStats:
    """The statistics of both sets of states: counts, sums and sums of squares add."""
    if a.total.shape != b.total.shape:
        raise ValueError(f"cannot merge statistics of {a.total.shape} and {b.total.shape} observations")
    return ObsStats(a.count + b.count, a.total + b.total, a.squares + b.squares)


def from_members(counts, totals, squares) -> ObsStats:
    """One generation's statistics from each member's (rows in member order): added up in that
    order, whatever chunks or workers computed them."""
    counts, totals, squares = np.asarray(counts), np.asarray(totals, np.float64), np.asarray(squares, np.float64)
    out = ObsStats.empty(totals.shape[1])
    for c, t, s in zip(counts, totals, squares):   # one row at a time: the same sums for any chunking
        out = ObsStats(out.count + int(c), out.total + t, out.squares + s)
    return out


def mean_std(stats: ObsStats) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, std)`` of the states seen: ``(0, 1)`` before any, std at least ``sqrt(MIN_VAR)``."""
    if stats.count == 0:
        return np.zeros_like(stats.total), np.ones_like(stats.total)
    mean = stats.total / stats.count
    var = np.maximum(stats.squares / stats.count - mean ** 2, MIN_VAR)
    return mean, np.sqrt(var)


def normalize(obs: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """What the policy sees: ``clip((obs - mean) / std, -CLIP, CLIP)`` as float32."""
    return np.clip((np.asarray(obs, dtype=np.float64) - mean) / std, -CLIP, CLIP).astype(np.float32)
