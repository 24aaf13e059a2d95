"""Perturbations rebuilt from integers alone: member ``i`` of generation ``g`` of run ``seed``
always gets the same noise vector in any process, so workers exchange only seeds and returns.
Antithetic pairs ``(+eps_k, -eps_k)``, drawn 16 pairs a block by ``rng_for(seed, NOISE, g, b)``;
why blocks, and the measurements: docs/design.md#noise-from-integers.
"""
from __future__ import annotations

import numpy as np

from . import noise_table
from .rowsum import add_weighted_rows
from .seeding import NOISE, rng_for

PAIRS_PER_BLOCK = 16
SCHEMES = ("seeds", "table")


def noise_block(seed: int, generation: int, block: int, dim: int) -> np.ndarray:
    """Block ``block`` of pair noise: float32 array ``(PAIRS_PER_BLOCK, dim)``."""
    return rng_for(seed, NOISE, generation, block).standard_normal((PAIRS_PER_BLOCK, dim), dtype=np.float32)


def mirrored(half: np.ndarray) -> np.ndarray:
    """Mirrored pairs from their positive halves, interleaved: row ``2k`` is ``half[k]`` and row
    ``2k + 1`` is ``-half[k]`` (a pair stays in one chunk of consecutive members). The course's
    loops each draw ``half`` from the stream their notebook's contract names; this is the one
    way they mirror it."""
    half = np.asarray(half)
    return np.stack([half, -half], axis=1).reshape(2 * len(half), *half.shape[1:])


def member_pairs(members: np.ndarray, antithetic: bool) -> tuple[np.ndarray, np.ndarray]:
    """Pair index and sign (+1/-1, float32) of each member id."""
    members = np.asarray(members, dtype=np.int64)
    if antithetic:
        return members // 2, np.where(members % 2 == 0, 1.0, -1.0).astype(np.float32)
    return members, np.ones(len(members), dtype=np.float32)


def pair_noise(seed: int, generation: int, pairs: np.ndarray, dim: int, scheme: str = "seeds") -> np.ndarray:
    """Noise of the given pair indices, ``(len(pairs), dim)`` float32, one block at a time."""
    if scheme != "seeds":
        return _table_module(scheme).pair_noise(seed, generation, pairs, dim)
    pairs = np.asarray(pairs, dtype=np.int64)
    out = np.empty((len(pairs), dim), dtype=np.float32)
    blocks = pairs // PAIRS_PER_BLOCK
    for block in np.unique(blocks):
        rows = np.flatnonzero(blocks == block)
        out[rows] = noise_block(seed, generation, int(block), dim)[pairs[rows] % PAIRS_PER_BLOCK]
    return out


def antithetic_noise(seed: int, generation: int, members: np.ndarray, dim: int, antithetic: bool = True,
                     scheme: str = "seeds") -> np.ndarray:
    """Signed noise of each member id: ``(len(members), dim)`` float32."""
    pairs, signs = member_pairs(members, antithetic)
    return pair_noise(seed, generation, pairs, dim, scheme) * signs[:, None]


def weighted_noise_sum(seed: int, generation: int, weights: np.ndarray, dim: int, antithetic: bool = True,
                       scheme: str = "seeds") -> np.ndarray:
    """``sum_i weights[i] * noise_i`` over members ``0..len(weights)-1``, float32 ``(dim,)``.

    Memory-bounded like OpenAI's ``batched_weighted_sum``: only one block of noise lives at a
    time. Antithetic pairs are folded first (``w+ - w-``), halving the work.
    """
    weights = np.asarray(weights, dtype=np.float32)
    if antithetic:
        pair_weights = weights[0::2] - weights[1::2]
    else:
        pair_weights = weights
    if scheme != "seeds":
        return _table_module(scheme).weighted_pair_sum(seed, generation, pair_weights, dim)
    total = np.zeros(dim, dtype=np.float32)
    for start in range(0, len(pair_weights), PAIRS_PER_BLOCK):
        w = pair_weights[start:start + PAIRS_PER_BLOCK]
        add_weighted_rows(total, w, noise_block(seed, generation, start // PAIRS_PER_BLOCK, dim))
    return total


def weighted_noise_and_square_sums(seed: int, generation: int, weights: np.ndarray, dim: int,
                                   antithetic: bool = True, scheme: str = "seeds") -> tuple[np.ndarray, np.ndarray]:
    """``sum_i weights[i] * noise_i`` and ``sum_i weights[i] * (noise_i**2 - 1)`` over members
    ``0..len(weights)-1`` (SNES's two sums), float32 ``(dim,)`` each, in one pass over the noise,
    a block of pairs at a time. Mirrored members share their square, so a pair's weights add there."""
    weights = np.asarray(weights, dtype=np.float32)
    if antithetic:
        along_weights, square_weights = weights[0::2] - weights[1::2], weights[0::2] + weights[1::2]
    else:
        along_weights = square_weights = weights
    along, spread = np.zeros(dim, dtype=np.float32), np.zeros(dim, dtype=np.float32)
    for start in range(0, len(along_weights), PAIRS_PER_BLOCK):
        stop = min(start + PAIRS_PER_BLOCK, len(along_weights))
        rows = pair_noise(seed, generation, np.arange(start, stop), dim, scheme)
        add_weighted_rows(along, along_weights[start:stop], rows)
        add_weighted_rows(spread, square_weights[start:stop], rows * rows - np.float32(1))
    return along, spread


def _table_module(scheme: str):
    if scheme != "table":
        raise ValueError(f"noise scheme must be one of {', '.join(SCHEMES)}, got {scheme!r}")
    return noise_table
