"""Fitness shaping: pure functions from raw returns to the weights of the gradient estimate.

Each takes a 1-D array of returns (one per population member) and returns float32 weights
of the same length. Ties always get equal weights.
"""
from __future__ import annotations

import numpy as np


def _check(returns) -> np.ndarray:
    x = np.asarray(returns, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"returns must be a 1-D array, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("returns contain NaN or infinity; refusing to shape them")
    return x


def ranks(returns) -> np.ndarray:
    """0-based ranks (0 = lowest); tied values share the mean of their ranks."""
    x = _check(returns)
    order = np.argsort(x, kind="stable")
    sorted_x = x[order]
    # Start index of each run of equal values, and its mean rank.
    starts = np.flatnonzero(np.r_[True, sorted_x[1:] != sorted_x[:-1]])
    ends = np.r_[starts[1:], len(x)]
    mean_rank = (starts + ends - 1) / 2.0
    out = np.empty(len(x), dtype=np.float64)
    out[order] = np.repeat(mean_rank, ends - starts)
    return out


def centered_ranks(returns, dtype=np.float32) -> np.ndarray:
    """Ranks scaled to [-0.5, 0.5]; they sum to zero (OpenAI's ``compute_centered_ranks``).

    Robust to outliers and to the scale of the reward: only the order of returns matters.
    Computed in float64 and returned as ``dtype``: float32 for ``es``'s own update, float64
    where the course's float64 references need them exactly.
    """
    x = _check(returns)
    if len(x) < 2:
        return np.zeros(len(x), dtype=dtype)
    return (ranks(x) / (len(x) - 1) - 0.5).astype(dtype)


def z_score(returns) -> np.ndarray:
    """(returns - mean) / std; all zeros when every return is the same."""
    x = _check(returns)
    big = np.abs(x).max(initial=0.0)
    if big > 1e150:       # std squares the returns (inf beyond ~1e154); a z-score does not depend on the scale
        x = x / big
    std = x.std()
    if std == 0:
        return np.zeros(len(x), dtype=np.float32)
    return ((x - x.mean()) / std).astype(np.float32)


def raw(returns) -> np.ndarray:
    """The returns themselves (the textbook estimator; sensitive to the reward's scale)."""
    return _check(returns).astype(np.float32)


SHAPINGS = {"centered_ranks": centered_ranks, "z_score": z_score, "raw": raw}
