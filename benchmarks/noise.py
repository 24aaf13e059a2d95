"""Cost of rebuilding perturbations from seeds: one generator per antithetic pair against
one per block of 16 pairs (what es.noise does), for a generation of population 256; and the
master's weighted sum of the noise rows (``weighted_noise_sum``, rows added one by one in a
fixed order: the same bits on any CPU) against the BLAS product it replaced, on the same
blocks, at a few population x parameter sizes. Prints one JSON line.

    python benchmarks/noise.py
"""
from _common import one_core  # noqa: I001

one_core()

import json  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from es import noise  # noqa: E402
from es.rowsum import add_weighted_rows  # noqa: E402


def per_pair(seed, generation, pairs, dim):
    return np.stack([noise.rng_for(seed, noise.NOISE, generation, p).standard_normal(dim, dtype=np.float32)
                     for p in pairs])


def timed(fn, repeat=50):
    fn()
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t0) / repeat


def main():
    out = {"benchmark": "noise", "population": 256}
    for dim in (10, 3531):
        pairs = np.arange(128)
        out[f"per_pair_ms_dim{dim}"] = 1e3 * timed(lambda: per_pair(0, 1, pairs, dim))
        out[f"per_block_ms_dim{dim}"] = 1e3 * timed(lambda: noise.pair_noise(0, 1, pairs, dim))
    out["generator_us"] = 1e6 * timed(lambda: noise.rng_for(0, 0, 1, 2), repeat=2000)
    for population, dim in ((256, 3531), (1024, 3531), (256, 100_000)):
        weights = np.random.default_rng(0).standard_normal(population).astype(np.float32)
        pw = weights[0::2] - weights[1::2]
        per_block = noise.PAIRS_PER_BLOCK
        blocks = [noise.noise_block(0, 1, b, dim) for b in range(len(pw) // per_block)]

        def rows_in_order():
            total = np.zeros(dim, np.float32)
            for b, block in enumerate(blocks):
                add_weighted_rows(total, pw[per_block * b:per_block * (b + 1)], block)

        def blas():
            total = np.zeros(dim, np.float32)
            for b, block in enumerate(blocks):
                total += pw[per_block * b:per_block * (b + 1)] @ block
        key = f"{population}x{dim}"
        repeat = 20 if dim < 10_000 else 5
        out[f"sum_in_order_ms_{key}"] = 1e3 * timed(rows_in_order, repeat)
        out[f"sum_blas_ms_{key}"] = 1e3 * timed(blas, repeat)
        out[f"update_ms_{key}"] = 1e3 * timed(lambda: noise.weighted_noise_sum(0, 1, weights, dim), repeat)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
