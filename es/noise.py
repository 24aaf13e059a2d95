"""Perturbations rebuilt from integers alone.

Member ``i`` of generation ``g`` of run ``seed`` always gets the same noise vector, in any
process on any machine, so workers only ever exchange seeds and scalar returns.

How (and why this design):

* Members come in antithetic pairs: member ``2k`` is ``+eps_k`` and member ``2k + 1`` is
  ``-eps_k``. Without antithetic sampling member ``i`` is ``+eps_i``.
* Pair noise is drawn in blocks of ``PAIRS_PER_BLOCK`` pairs. Block ``b`` of generation ``g``
  is the ``(PAIRS_PER_BLOCK, dim)`` float32 matrix drawn by a fresh
  ``np.random.Generator(PCG64(SeedSequence(seed, spawn_key=(NOISE, g, b))))``.
  Any process can rebuild any block with no shared state.

Measured on the 2-core machine (``benchmarks/noise.py``, same run): for a generation of 256
members, one generator per pair costs 3.0 ms at CartPole's 10 parameters and 15 ms at Pong's
3.5k, one generator per block of 16 pairs 0.36 ms and 7.6 ms (8x and 2x less; building a
seeded generator is most of the per-pair cost). OpenAI's starter instead shares a 1 GB noise
table that every host regenerates from seed 123 (minutes of start-up and 1 GB per host);
blocks cost nothing up front and their memory is bounded by the block. A worker evaluating
members ``[a, b)`` regenerates at most two blocks it does not fully use.

The global ``np.random`` state is never touched.

``scheme="table"`` (``--noise table``, ``es.noise_table``) takes each pair's noise from a
shared table instead: the same interface, no drawing, for populations and networks where
drawing would dominate (``benchmarks/scale.py``).
"""
from __future__ import annotations

import numpy as np

from . import noise_table
from .seeding import NOISE, rng_for

PAIRS_PER_BLOCK = 16
SCHEMES = ("seeds", "table")


def noise_block(seed: int, generation: int, block: int, dim: int) -> np.ndarray:
    """Block ``block`` of pair noise: float32 array ``(PAIRS_PER_BLOCK, dim)``."""
    return rng_for(seed, NOISE, generation, block).standard_normal((PAIRS_PER_BLOCK, dim), dtype=np.float32)


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
        block = noise_block(seed, generation, start // PAIRS_PER_BLOCK, dim)
        total += w @ block[:len(w)]
    return total


def _table_module(scheme: str):
    if scheme != "table":
        raise ValueError(f"noise scheme must be one of {', '.join(SCHEMES)}, got {scheme!r}")
    return noise_table
