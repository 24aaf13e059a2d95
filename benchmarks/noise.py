"""Cost of rebuilding perturbations from seeds: one generator per antithetic pair against
one per block of 16 pairs (what es.noise does), for a generation of population 256.
Prints one JSON line.

    python benchmarks/noise.py
"""
from _common import one_core  # noqa: I001

one_core()

import json  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from es import noise  # noqa: E402


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
    print(json.dumps(out))


if __name__ == "__main__":
    main()
