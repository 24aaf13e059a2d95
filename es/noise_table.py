"""Perturbations as slices of one shared table of Gaussian noise (``--noise table``), OpenAI's
way: each pair is an offset into ``TABLE_SIZE`` float32 values built on every host from
``rng_for(TABLE_SEED, TABLE, chunk)``; offsets from ``rng_for(seed, OFFSETS, g)``. Costs and
the bias question: docs/design.md#the-shared-noise-table.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import numpy as np

from .rowsum import add_weighted_rows
from .seeding import OFFSETS, TABLE, rng_for, sequence

TABLE_SIZE = 1 << 25          # float32 values: 128 MiB
CHUNK = 1 << 20               # values drawn per generator
TABLE_SEED = 0                # the same table for every run: offsets carry the run seed


@cache
def shared_table() -> np.ndarray:
    """The read-only noise table, built on first use in this process."""
    table = np.empty(TABLE_SIZE, dtype=np.float32)

    def fill(c):
        rng_for(TABLE_SEED, TABLE, c).standard_normal(dtype=np.float32, out=table[c * CHUNK:(c + 1) * CHUNK])
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        list(pool.map(fill, range(TABLE_SIZE // CHUNK)))
    table.flags.writeable = False
    return table


def check_dim(dim: int) -> None:
    if dim > TABLE_SIZE // 2:
        raise ValueError(f"the noise table holds {TABLE_SIZE:,} values, too few for {dim:,} parameters; "
                         "use --noise seeds")


def pair_offsets(seed: int, generation: int, pairs, dim: int) -> np.ndarray:
    """Offset into the table of each pair index."""
    check_dim(dim)
    pairs = np.asarray(pairs, dtype=np.int64)
    if pairs.size == 0:
        return np.zeros(0, dtype=np.int64)
    words = sequence(seed, OFFSETS, generation).generate_state(
        int(pairs.max()) + 1, dtype=np.uint64)
    return (words[pairs] % np.uint64(TABLE_SIZE - dim + 1)).astype(np.int64)


GATHER_BELOW = 1024   # parameters: below, one fancy-indexed gather per block of pairs beats a slice per pair


def pair_noise(seed: int, generation: int, pairs, dim: int) -> np.ndarray:
    """Noise of the given pair indices, ``(len(pairs), dim)`` float32."""
    table = shared_table()
    offsets = pair_offsets(seed, generation, pairs, dim)
    if dim < GATHER_BELOW:
        return table[offsets[:, None] + np.arange(dim)]
    out = np.empty((len(offsets), dim), dtype=np.float32)
    for row, o in enumerate(offsets):
        out[row] = table[o:o + dim]
    return out


def weighted_pair_sum(seed: int, generation: int, pair_weights, dim: int) -> np.ndarray:
    """``sum_k pair_weights[k] * noise_k``, float32 ``(dim,)``. The order of summation depends
    on ``dim`` only, so the master's update is the same whoever evaluated the members."""
    table = shared_table()
    pair_weights = np.asarray(pair_weights, dtype=np.float32)
    offsets = pair_offsets(seed, generation, np.arange(len(pair_weights)), dim)
    total = np.zeros(dim, dtype=np.float32)
    # One pass over memory per pair, nothing drawn; in pair order, elementwise, so the bits do
    # not depend on the CPU (es.rowsum).
    add_weighted_rows(total, pair_weights, (table[o:o + dim] for o in offsets))
    return total
