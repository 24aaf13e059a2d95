"""Notebook 02's checks (milestone 2): each member's own noise, and returns computed in parallel."""
from __future__ import annotations

import numpy as np

from .base import (_call, _dtype, _fail, _observe, _register)


# weights that member_noise tries besides the powers of 10 and of 2: common primes below 2**32
PRIME_WEIGHTS = (31, 101, 1009, 7919, 10007, 65537, 100003, 999983, 1000003, 16777619, 999999937, 1000000007,
                 2147483647)


@_register("member_noise", "M2", 2, "02_parallel",
           forbidden=("es.noise",), reference=())
def member_noise(fn, rng):
    """Noise of one member, float64 (dim,), from (seed, generation, member) alone, never the
    global state; standard normal (a long draw's mean, standard deviation, and shares within 0.5
    of 0 and beyond 2); different (seed, generation, member) never share noise, nor its negation:
    neighbours that a sum, w * seed or w * generation plus member for w a power of 10 or of 2
    below 2**32 or one of PRIME_WEIGHTS, a product (seed 0, generation 0) or digits run together
    (unpadded, or zero-padded to k digits for k = 1 .. 9, a member or a generation of k + 1 digits
    running past its padding) would confuse, and members 2k and 2k + 1 (mirroring is
    evaluate_members' job). Every integer it is called with is below 2**32, the contract's range
    (SeedSequence splits a larger one into 32-bit words, which can collide)."""
    seed, generation, member = int(rng.integers(2 ** 31)), int(rng.integers(1, 500)), int(rng.integers(1000, 5000))
    dim, g = int(rng.integers(4, 10)), int(rng.integers(2 ** 31))
    reply = _observe(fn, seed, generation, member, dim, global_seed=g, draw_after=True)
    a = np.asarray(reply["value"])
    if reply["after"] != np.random.RandomState(g).random_sample():
        _fail("member_noise: it uses the global np.random state (it seeds or draws from it); build a Generator "
              "from (seed, generation, member)")
    if a.shape != (dim,):
        _fail(f"member_noise: expected shape (dim,) = ({dim},), got {a.shape}")
    _dtype(reply["value"], np.float64, "member_noise")
    if not np.array_equal(a, np.asarray(_observe(fn, seed, generation, member, dim, global_seed=g + 1)["value"])):
        _fail("member_noise: it uses the global np.random state (the result changes with it); build a Generator "
              "from (seed, generation, member)")
    if not np.array_equal(a, np.asarray(_call(fn, seed, generation, member, dim))):
        _fail("member_noise: two calls with the same (seed, generation, member) differ")
    long = np.asarray(_call(fn, seed, generation, member, 20_000), dtype=np.float64).ravel()
    if long.size != 20_000 or abs(long.mean()) > 0.05 or abs(long.std() - 1) > 0.05:
        _fail(f"member_noise: with dim=20_000, {long.size} draws with mean {long.mean():.3f} and standard deviation "
              f"{long.std():.3f}; standard normals have mean 0 and standard deviation 1: draw them with "
              "Generator.standard_normal")
    inner, outer = np.mean(np.abs(long) < 0.5), np.mean(np.abs(long) > 2)
    if not (0.36 <= inner <= 0.406 and 0.035 <= outer <= 0.056):      # a normal's: 0.383 and 0.0455, +-6.5 SE
        _fail(f"member_noise: with dim=20_000, {inner:.1%} of the draws lie within 0.5 of 0 and {outer:.1%} beyond "
              "2 (either sign); standard normals put 38.3% and 4.6% there: other distributions (uniform, Laplace) "
              "can have mean 0 and standard deviation 1 too; draw them with Generator.standard_normal")
    seen = {(seed, generation, member): a}
    # neighbours that sums of the three integers would send to the same seed, then those a product
    # (seed 0, generation 0) or digits run together (1|23 and 12|3) would; member - 1 and member + 1:
    # one of them shares member // 2 (mirroring inside member_noise); last, (seed, generation,
    # member + w), which w * generation + member sends where (seed, generation + 1, member) goes, for
    # w a power of 10 or of 2 below 2**32 (every integer stays below 2**32, the contract's range)
    keys = [(seed + ds, generation + dg, member + dm) for ds, dg, dm in (
        (0, 0, 1), (0, 0, -1), (0, 1, 0), (1, 0, 0), (0, 1, -1), (1, -1, 0))]
    keys += [(0, generation, member), (0, generation + 1, member), (seed, 0, member), (seed + 1, 0, member),
             (seed, 1, 23), (seed, 12, 3)]
    weights = sorted({10 ** k for k in range(1, 10)} | {2 ** k for k in range(1, 32)} | set(PRIME_WEIGHTS))
    keys += [(seed, generation, member + w) for w in weights]
    # digits zero-padded to k places, int(f"{seed}{generation:0{k}d}{member:0{k}d}"): a member of k + 1
    # digits runs into the generation's (0, 0, 10**k + r) ~ (0, 1, r), a generation of k + 1 digits
    # into the seed's (0, 10**k + q, member) ~ (1, q, member), whatever the other padding (r, q < 10)
    r, q = member % 10, generation % 10
    padded = {(0, 0, 10 ** k + r): ((0, 1, r), k, "a member") for k in range(1, 10)}
    padded.update({(0, 10 ** k + q, member): ((1, q, member), k, "a generation") for k in range(1, 10)})
    keys += [(0, 1, r), (1, q, member), *padded]
    for key in keys:
        if key in seen:          # (seed + 1, generation - 1, member) is (seed + 1, 0, member) when generation is 1
            continue
        noise = np.asarray(_call(fn, *key, dim))
        match = _first_same_noise(noise, seen)
        if match is not None:
            other, negated = match
            pair = (f"member_noise: {other} and {key} (seed, generation, member) got the same noise"
                    + (", one negated" if negated else ""))
            fix = "give the three integers to default_rng as a list, [seed, generation, member]"
            if key[:2] == other[:2] and key[2] // 2 == other[2] // 2:
                _fail(f"{pair}: members 2k and 2k + 1 share a stream; member_noise gives one stream per integer "
                      "member (the member itself, not member // 2, and never negated): the mirroring is "
                      "evaluate_members' job")
            if negated:
                _fail(f"{pair}; {fix}, and return its draws as they are")
            if padded.get(key, (None,))[0] == other:
                k, what = padded[key][1:]
                _fail(f"{pair}: their digits run together, zero-padded, are the same number: {what} of {k + 1} "
                      f"digits runs past a padding to {k} digit{'s' * (k > 1)} (the integers go up to 2**32 - 1, "
                      f"10 digits); {fix}")
            if sum(key) == sum(other):
                _fail(f"{pair}: they have the same sum seed + generation + member, which a sum (or an xor of "
                      f"small integers) of the three sends to the same generator; {fix}")
            dg, dm = key[1] - other[1], key[2] - other[2]
            if key[0] == other[0] and abs(dg) == 1 and dg * dm < 0:       # w * generation + member, w = |dm|
                w = abs(dm)
                _fail(f"{pair}: {w} * generation + member collide (any such weight below the members' range "
                      f"does, and members go up to 2**32 - 1); {fix}")
            ds = key[0] - other[0]
            if key[1] == other[1] and abs(ds) == 1 and ds * dm < 0:                  # w * seed + member, w = |dm|
                _fail(f"{pair}: {abs(dm)} * seed + member collide (any such weight below the members' range "
                      f"does, and members go up to 2**32 - 1); {fix}")
            if 0 in key[:2] and 0 in other[:2]:
                _fail(f"{pair}: a product such as seed * generation is 0 whenever seed or generation is 0; {fix}")
            if "".join(map(str, key)) == "".join(map(str, other)):
                _fail(f"{pair}: their digits run together are the same number; {fix}")
            _fail(f"{pair}; {fix}")
        seen[key] = noise
    elsewhere = _observe(fn, seed, generation, member, dim, elsewhere=True)["value"]
    if not all(np.array_equal(a, np.asarray(e)) for e in elsewhere):
        _fail("member_noise: another process computed different noise for the same member")


@_register("parallel_returns", "M2", 3, "02_parallel", "parallel_returns", "evaluate_members",
           forbidden=("es.parallel", "es.evaluators", "es.noise", "es.strategy", "es.train", "es.training",
                      "es.api"), reference=())
def parallel_returns(fn, evaluate_members, rng):
    """parallel_returns(center, sigma, seed, generation, population, n_jobs) equals
    evaluate_members(center, sigma, seed, generation, 0, population), float64, for populations that
    are not multiples of n_jobs, with n_jobs chunks, each given the run's seed and generation,
    evaluated in more than one process (the check's recorder of those chunks travels with joblib's
    default backend, loky, not "multiprocessing").
    (The n_jobs given to joblib.Parallel is not seen: with n_jobs chunks, at most n_jobs run at once.)"""
    center = (rng.standard_normal(10) * 0.1).astype(np.float32)
    sigma, seed, generation = float(rng.uniform(0.2, 0.6)), int(rng.integers(2 ** 31)), int(rng.integers(100))
    for n_jobs in (3, 2):
        population = int(rng.choice([p for p in range(11, 24) if p % n_jobs and p % 2]))
        want = np.asarray(_call(evaluate_members, center, sigma, seed, generation, 0, population), dtype=np.float64)
        try:
            reply = _observe(fn, center, sigma, seed, generation, population, n_jobs,
                             spy={"name": "evaluate_members", "args": [2, 3, 4, 5], "delay": 0.4})
        except Exception as exc:
            if "_spy.<locals>" not in str(exc):       # the check's recorder, which only loky's pickler can send
                raise
            _fail("parallel_returns: joblib could not send the check's recorder of evaluate_members (it notes "
                  "which process ran each chunk) to its workers: use joblib's default backend (loky), "
                  "Parallel(n_jobs=n_jobs) with no backend argument")
        got = np.asarray(reply["value"], dtype=np.float64).ravel()
        spied = reply.get("spied", [])          # [pid, seed, generation, first, end] of each call
        for _, s, g, a, b in spied:
            if (s, g) != (seed, generation):
                _fail(f"parallel_returns: each job drew its own noise: the job of members [{a}, {b}) was given seed "
                      f"{s} and generation {g}, not the run's {seed} and {generation}; member m's noise must come "
                      "from member_noise(seed, generation, m // 2) whatever job plays it: give every job the run's "
                      "seed and generation")
        chunks = sorted((a, b) for *_, a, b in spied)
        _blame_chunks(got, want, chunks, population, n_jobs)
        _dtype(reply["value"], np.float64, "parallel_returns")
        if len(chunks) != n_jobs:
            _fail(f"parallel_returns: {len(chunks)} chunk(s) for n_jobs={n_jobs}; split the population into "
                  "n_jobs chunks, one per job")
        if n_jobs > 1 and len({pid for pid, *_ in spied}) < 2:
            _fail(f"parallel_returns: with n_jobs={n_jobs} every chunk ran in one process; pass n_jobs to "
                  "joblib.Parallel (its default backend runs jobs in worker processes)")


def _blame_chunks(got, want, chunks, population, n_jobs):
    where = f"population {population}, n_jobs={n_jobs}"
    if not chunks:
        _fail("parallel_returns: it never called evaluate_members; evaluate each chunk with it")
    if all(a == 0 for a, _ in chunks) and len(chunks) > 1:
        _fail(f"parallel_returns: every job evaluated members from 0 ({where}): the same noise in every job; "
              "give each job its own members [a, b)")
    covered = sum(b - a for a, b in chunks)
    if len(got) < population and covered < population:
        _fail(f"parallel_returns: {len(got)} returns for a {where}: the chunks drop the last "
              f"{population - covered} member(s); np.linspace(0, population, n_jobs + 1).astype(int) gives "
              "bounds that cover every member")
    if len(got) > population or covered > population:
        _fail(f"parallel_returns: {len(got)} returns for a {where}: chunks overlap, a member at each boundary "
              "is evaluated twice; chunks are [a, b) with the next starting at b")
    if got.shape != want.shape:
        _fail(f"parallel_returns: expected one return per member, shape {want.shape}, got {got.shape}")
    if np.array_equal(got, want):
        return
    parts = [want[a:b] for a, b in chunks if b <= population]
    if len(parts) > 1 and np.array_equal(got, np.concatenate(parts[::-1])):
        _fail("parallel_returns: the chunks came back in reverse order; concatenate them in the order of their "
              "bounds (joblib returns results in the order the jobs were given)")
    if sorted(got) == sorted(want):
        _fail("parallel_returns: the right returns in the wrong order; put them back in member order")
    edges = [a for a, _ in chunks] + [chunks[-1][1]]
    if edges[0] != 0 or edges[-1] != population or any(b != a for (_, b), (a, _) in zip(chunks, chunks[1:])):
        _fail(f"parallel_returns: the chunks {chunks} do not cover members [0, {population}) once each, one after "
              "another: a member is evaluated twice or never; check the chunk bounds")
    _fail(f"parallel_returns: differs from evaluate_members over the whole population ({where})")


def _first_same_noise(noise, seen: dict):
    """The first key in ``seen`` (in the order they were drawn) whose noise ``noise`` equals
    within ``np.allclose``'s tolerances, or equals negated: ``(key, negated)``, or None. One
    comparison against all of them at once (the check draws about 80 keys: 3,000 pairs)."""
    keys = list(seen)
    same = [a.shape == noise.shape and a.dtype == noise.dtype and np.isfinite(a).all() for a in seen.values()]
    if keys and all(same) and noise.dtype.kind == "f" and np.isfinite(noise).all():
        was = np.stack(list(seen.values()))
        tol = 1e-8 + 1e-5 * np.abs(was)            # np.allclose(noise, was): |noise - was| <= atol + rtol |was|
        negated = np.all(np.abs(noise + was) <= tol, axis=1)      # np.allclose(noise, -was)
        equal = np.all(np.abs(noise - was) <= tol, axis=1)
        hits = np.flatnonzero(negated | equal)
        return (keys[hits[0]], bool(negated[hits[0]])) if hits.size else None
    for other, was in seen.items():       # mixed shapes or dtypes, or non-finite values: one at a time
        negated = np.allclose(noise, -was)
        if negated or np.allclose(noise, was):
            return other, bool(negated)
    return None
