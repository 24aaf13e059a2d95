"""Notebook 03's checks: the Redis wire (milestone 3) and the paper's Algorithm 2 (extras)."""
from __future__ import annotations

import hashlib
import json

import numpy as np

from .base import (ANSWERS, Answers, CheckFailed, _array, _call, _call_leaving, _dtype, _fail, _observe, _register, answers)


@_register("result_codec", "M3", 1, "03_redis", "encode_result", "decode_result",
           forbidden=("es.distributed",), reference=("result_codec",))
def result_codec(encode_result, decode_result, rng):
    """Round trip of (generation, first, returns, lengths) through bytes, exact, no pickle, with
    integers up to 2**32 - 1; decode_result returns a dict with keys generation, first, returns,
    lengths; the payload's bytes are exactly the course's layout."""
    count = int(rng.integers(20, 60))
    generation, first = int(rng.integers(2 ** 32)), int(rng.integers(2 ** 32))
    returns, lengths = rng.standard_normal(count) * 100, rng.integers(0, 10_000, count)
    lengths[rng.integers(count)] = rng.integers(2 ** 31, 2 ** 32)      # past int32: only uint32 holds it
    want = answers("result_codec", generation, first, returns, lengths)
    payload = _call(encode_result, generation, first, returns, lengths)
    if not isinstance(payload, (bytes, bytearray)):
        _fail(f"encode_result: must return bytes, got {type(payload).__name__}")
    if (payload[:1] == b"\x80" and payload[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05") and payload[-1:] == b".") \
            or b"numpy" in payload:     # a pickle's opening and closing opcodes
        _fail("encode_result: this looks like a pickle; send raw bytes (np.ndarray.tobytes) with a small header")
    out = _call(decode_result, payload)
    keys = ("generation", "first", "returns", "lengths")
    if not isinstance(out, dict):
        kind = "tuple or list" if isinstance(out, (tuple, list)) else type(out).__name__
        _fail(f"decode_result: returned a {kind}, not a dict; return a dict with keys {', '.join(keys)}")
    if any(k not in out for k in keys):
        _fail(f"decode_result: the dict lacks {', '.join(k for k in keys if k not in out)} (keys: {', '.join(keys)})")
    if out["generation"] != generation or out["first"] != first:
        _fail("decode_result: generation or first member came back wrong")
    got = np.asarray(out["returns"], dtype=np.float64)
    if not np.array_equal(got, returns):
        if got.shape == returns.shape and np.allclose(got, returns, rtol=1e-6):
            if any(returns.astype(order).tobytes() in bytes(payload) for order in ("<f8", ">f8")):
                _fail("decode_result: returns lose bits (read back as float32?); the payload holds them as float64, "
                      "read them as float64 so the run stays bit-identical")
            _fail("encode_result: returns lose bits (float32?); send float64 so the run stays bit-identical")
        _fail("decode_result: returns came back different")
    if not np.array_equal(np.asarray(out["lengths"]), lengths):
        _fail("decode_result: lengths came back different (a length may be up to 2**32 - 1: uint32)")
    if not all(isinstance(out[k], (int, np.integer)) and not isinstance(out[k], bool) for k in ("generation", "first")):
        _fail(f"decode_result: generation and first came back as {type(out['generation']).__name__} and "
              f"{type(out['first']).__name__}; the contract says integers")
    _dtype(out["returns"], np.float64, "decode_result returns")
    if not (isinstance(out["lengths"], np.ndarray) and out["lengths"].dtype.kind in "iu"):
        _fail(f"decode_result lengths: returned {getattr(out['lengths'], 'dtype', type(out['lengths']).__name__)}, "
              "the contract says an integer array")
    if hashlib.sha256(bytes(payload)).hexdigest() != want["right"]:
        _fail(f"encode_result: {len(payload)} bytes for {count} members, not the course's layout: little-endian "
              "('<III', '<f8', '<u4'), three uint32 (generation, first, count), the returns as float64, the "
              "lengths as uint32")


@_register("chunks_to_requeue", "M3", 2, "03_redis",
           forbidden=("es.distributed",), reference=("chunks_to_requeue",))
def chunks_to_requeue(fn, rng):
    """chunks_to_requeue(queued_at, in_queue, leases, now, lease_seconds) -> set of chunks, a
    subset of queued_at's keys, as the course's Redis master decides (es.distributed): among them
    a chunk requeued a moment ago that still has its dead worker's old lease (no), and a lease
    of a chunk not in queued_at (never returned)."""
    # eighths of a second: now - (now - lease) is exactly lease, so the boundary is exact
    lease, now = int(rng.integers(24, 240)) / 8, int(rng.integers(8e3, 8e6)) / 8
    old = lambda: now - lease * float(rng.uniform(1.5, 5))       # noqa: E731
    recent = lambda: now - lease * float(rng.uniform(0.05, 0.5))       # noqa: E731
    names = [f"chunk{int(i)}" for i in rng.choice(1000, 9, replace=False)]
    alive, dead, waiting, young, orphan, edge_queued, edge_lease, requeued, done = names
    queued_at = {alive: old(), dead: old(), waiting: old(), young: recent(), orphan: old(), edge_queued: now - lease,
                 edge_lease: old(), requeued: recent()}
    in_queue = {waiting}
    leases = {alive: recent(), dead: old(), edge_lease: now - lease, requeued: old(), done: old()}
    want = set(answers("chunks_to_requeue", queued_at, sorted(in_queue), leases, now, lease)["right"])
    got = _call(fn, dict(queued_at), set(in_queue), dict(leases), now, lease)
    if not isinstance(got, (set, frozenset)):
        _fail(f"chunks_to_requeue: returned a {type(got).__name__}; the contract says a set")
    if got == want:
        return
    if not got <= set(queued_at):
        extra = sorted(got - set(queued_at))[0]
        _fail(f"chunks_to_requeue: returned {extra!r}, which is not in queued_at (its result is in: only its old "
              "lease is left); return a subset of queued_at's keys")
    if waiting in got:
        _fail(f"chunks_to_requeue: {waiting!r} is still waiting in the queue; requeueing it makes duplicates")
    if alive in got:
        _fail(f"chunks_to_requeue: {alive!r} has a fresh heartbeat; its worker is alive")
    if young in got:
        _fail(f"chunks_to_requeue: {young!r} was queued less than lease_seconds ago; a worker may have taken it "
              "and not written its lease yet")
    if requeued in got:
        _fail(f"chunks_to_requeue: {requeued!r} was queued again less than lease_seconds ago and still has its dead "
              "worker's old lease; the worker that took the new copy may not have written its lease yet: requeue "
              "only a chunk queued at least lease_seconds ago, whatever its lease")
    if dead not in got:
        _fail(f"chunks_to_requeue: {dead!r}'s last heartbeat is older than lease_seconds; its worker is dead, "
              "hand it out again")
    if orphan not in got:
        _fail(f"chunks_to_requeue: {orphan!r} left the queue long ago and has no lease; its worker died before "
              "writing one, hand it out again")
    if edge_queued not in got:
        _fail(f"chunks_to_requeue: {edge_queued!r} was queued exactly lease_seconds ago and has no lease; at least "
              "lease_seconds (>=) counts, hand it out again")
    if edge_lease not in got:
        _fail(f"chunks_to_requeue: {edge_lease!r}'s lease is exactly lease_seconds old; at least lease_seconds (>=) "
              "counts, hand it out again")
    _fail(f"chunks_to_requeue: expected {sorted(want)}, got {sorted(got)}")


@_register("gather", "M3", 2, "03_redis",
           forbidden=("es.distributed",), reference=())
def gather(fn, rng):
    """gather(url, generation, bounds, lease_seconds, timeout) -> (returns, lengths), run with the
    course's decode_result and chunks_to_requeue, against
    classroom.redis_workers.FaultyWorkers on a real Redis: a stale result, a result for a chunk not
    in bounds that starts where a real one does (just before that chunk's result and again just after), a
    worker that dies holding a lease, one that dies before writing it, a duplicate result, a
    slow worker that is alive, and one that takes a chunk as the gather begins and writes its
    lease late. The returns must be exact (float64 returns, int64 lengths), each lost chunk handed
    out again (a job with "g", "a" and "b"), the live one and the one just taken never. Then, on a
    chunk nobody takes, it must give up with a TimeoutError after its timeout."""
    from es.distributed.server import EmbeddedRedis
    from ..redis_workers import FaultyWorkers
    lease = 1.0
    with EmbeddedRedis(admin=True) as server:
        key = isinstance(ANSWERS, Answers)      # the answer key is here (not in a student release)
        workers = FaultyWorkers(server.master_url, rng, lease, _payload_encoder(fn),
                                monitor_url=server.admin_url).start()
        try:
            # With the course's decode_result and chunks_to_requeue in place of the notebook's, which
            # have checks of their own: a mistake there costs those points, not these too.
            out, raised = _observe(fn, server.master_url, workers.generation, [list(b) for b in workers.bounds],
                                   lease, 15.0,
           reference=["decode_result", "chunks_to_requeue"] if key else [])["value"], None
        except (CheckFailed, NotImplementedError):
            raise
        except Exception as exc:     # diagnosed below, from what the workers saw
            out, raised = None, exc
        finally:
            workers.stop()
        late = None if raised is not None else _gives_up(fn, server.master_url, workers.generation + 1, lease, key)
    given = workers.handed_out
    said = None if raised is None else str(raised) if type(raised).__name__ == "KernelError" \
        else f"{type(raised).__name__}: {raised}"
    if workers.bad_jobs:
        _fail(f"gather: pushed the job {workers.bad_jobs[0][:120]} onto es:jobs; section 4's workers read its \"g\" "
              f"(this generation, {workers.generation}), \"a\" and \"b\" (without \"g\" they stop with KeyError "
              "'g'): push json.dumps({\"g\": generation, \"a\": a, \"b\": b})")
    if said is not None and not said.startswith("TimeoutError"):
        _fail(f"gather: raised {said[:200]}; drop results of another generation, of chunks not in bounds, "
              "and second results of a chunk already in")
    for fault, why in (("dies_with_lease", "its worker died holding it (the lease stopped being renewed); "
                        "requeue a chunk whose lease is older than lease_seconds"),
                       ("dies_without_lease", "its worker died before writing a lease; requeue a chunk that left "
                        "the queue more than lease_seconds ago and has no lease")):
        if given[workers.chunk_of(fault)] < 2:
            _fail(f"gather: chunk {workers.chunk_of(fault)} was never handed out again: {why} (use chunks_to_requeue "
                  "when no result arrives within the poll)")
    if workers.queued_twice:
        chunk = sorted(workers.queued_twice)[0]
        _fail(f"gather: chunk {chunk} was pushed again while a copy still waited in es:jobs; the master pushed "
              "every job before calling gather (do not push them at its start); pass the queued chunks to "
              "chunks_to_requeue, and set a requeued chunk's queued_at to now")
    first = workers.pushed_at_start()
    if first:
        _fail(f"gather: chunk {first[0]} was pushed to es:jobs again {first[1]:.2f} s after your gather began (its "
              f"first BLPOP), before any chunk was queued lease_seconds ({lease:g} s) ago: a worker had just taken "
              "it and not yet written its lease. Start queued_at at time.time() when gather is called (never "
              "time.monotonic(), another clock: its times are not comparable with time.time()'s)")
    early = workers.pushed_early()
    if early:
        chunk = min(early, key=early.get)
        _fail(f"gather: chunk {chunk} was pushed to es:jobs again {early[chunk]:.2f} s after it was last pushed "
              f"(lease_seconds is {lease:g}): set a requeued chunk's queued_at to now, or it counts as lost again "
              "at once (a worker may have taken it and not written its lease yet) and is requeued over and over")
    if workers.requeued_live:
        _fail(f"gather: chunk {workers.chunk_of('slow')} was handed out again while its worker was alive and "
              "renewing its lease; read the leases from es:leases before deciding")
    if said is not None:
        _fail(f"gather: raised {said[:200]}" + ("; the check passes bounds as lists ([a, b]), and a tuple (a, b) "
              "is not equal to a list: compare chunks by their names f\"{a}:{b}\"" if said.startswith("TimeoutError")
              else ""))
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        _fail("gather: return the pair (returns, lengths)")
    n = len(workers.returns)
    got, lengths = _array(out[0], (n,), "gather returns"), _array(out[1], (n,), "gather lengths", np.int64)
    _dtype(out[0], np.float64, "gather returns")
    _dtype(out[1], np.int64, "gather lengths")
    if np.array_equal(got, workers.returns) and np.array_equal(lengths, workers.lengths):
        if late is not None:
            _fail(f"gather: called with timeout={_GIVE_UP[0]:g} on a chunk whose job nobody takes, {late}; raise "
                  "TimeoutError once timeout seconds have passed without all results")
        return
    a, b = workers.bounds[workers.stale]
    if np.array_equal(got[a:b], workers.returns[a:b] + 1000.0):
        _fail(f"gather: a result of generation {workers.generation - 1} (an earlier one) entered chunk {a}:{b}; drop "
              "results whose generation is not the one being gathered")
    a, b = map(int, workers.chunk_of("overlap").split(":"))
    u, v = workers.unknown
    lo, hi = max(a, u), min(b, v)
    if np.array_equal(got[lo:hi], workers.returns[lo:hi] + 500.0):
        members = f"member {lo}" if hi - lo == 1 else f"members {lo} to {hi - 1}"
        _fail(f"gather: a result for chunk {u}:{v}, which is not in bounds, entered {members} (it came "
              f"just before chunk {a}:{b}'s own result and again just after); a result's chunk is its first member and "
              'its count, f"{first}:{first + count}", not its first member alone: drop it when that chunk is not in bounds')
    a, b = map(int, workers.chunk_of("duplicate").split(":"))
    if np.array_equal(got[a:b], workers.returns[a:b] - 7.0):
        _fail(f"gather: chunk {a}:{b}'s second result replaced its first; once a chunk is in, drop its duplicates")
    bad = int(np.flatnonzero((got != workers.returns) | (lengths != workers.lengths))[0])
    _fail(f"gather: member {bad} came back {got[bad]!r} (length {lengths[bad]}), expected {workers.returns[bad]!r} "
          f"(length {workers.lengths[bad]}); put each result at returns[first:first + count]")


_GIVE_UP = (0.5, 3.0)      # gather's timeout in the check's last call; when a result comes after all


def _gives_up(fn, url, generation, lease, key):
    """``gather`` on one chunk whose job waits and is never taken, with a short timeout: None when
    it raised TimeoutError, else what it did instead. The chunk's result is pushed a few seconds
    later, so that a gather that never gives up returns then rather than hanging."""
    import threading
    import time

    import redis
    timeout, after = _GIVE_UP
    link = redis.Redis.from_url(url)
    link.delete("es:jobs", "es:results", "es:leases")
    link.rpush("es:jobs", json.dumps({"g": generation, "a": 0, "b": 4}))
    payload = _payload_encoder(fn)(generation, 0, np.zeros(4), np.full(4, 10, dtype=np.int64))
    timer = threading.Timer(after, lambda: link.rpush("es:results", payload))
    timer.start()
    t0 = time.monotonic()
    try:
        _observe(fn, url, generation, [[0, 4]], lease, timeout,
                 reference=["decode_result", "chunks_to_requeue"] if key else [])
        took = time.monotonic() - t0
        said = (f"it returned after {took:.1f} s without that chunk's result" if took < after else
                f"it waited on and returned when the result came {after:g} s later")
    except (CheckFailed, NotImplementedError):
        raise
    except Exception as exc:
        said = str(exc) if type(exc).__name__ == "KernelError" else f"{type(exc).__name__}: {exc}"
        said = None if said.startswith("TimeoutError") else f"it raised {said[:200]}"
    finally:
        timer.cancel()
        timer.join()
        link.close()
    return said


def _payload_encoder(gather_fn):
    """What the check's workers push: the answer key's payload; in a student release, where there
    is none, the student's own ``encode_result`` (checked by ``check.result_codec``)."""
    if isinstance(ANSWERS, Answers):
        return ANSWERS.references.result_payload
    encode = getattr(gather_fn, "__globals__", {}).get("encode_result")
    if encode is None:
        _fail("gather: define encode_result first (section 1): the check's workers push what it encodes")
    return encode


# ---------------------------------------------------------------- extras in 03: the paper's Algorithm 2
@_register("seeds_only_update", "extras", 3, "03_redis", "update_from_returns",
           forbidden=("es.noise", "es.noise_table", "es.strategy", "es.OpenES", "es.shaping", "es.optimizers"),
           reference=("seeds_only_update",))
def seeds_only_update(fn, rng):
    """update_from_returns(center, seed, generation, chunk_returns, sigma, lr) -> the next center
    (float32): 12 generations of it in the notebook's process (the master) and in 3 worker
    processes that get the generation-0 center once and then only each generation's returns
    (chunks of unequal sizes, in member order). Every worker must end each generation
    bit-identical to the master, and the master bit-identical to notebook 03's es_update:
    mirrored pair noise rebuilt from (seed, generation, pair), z-scores of the whole population,
    one SGD step in float64, the center cast to float32. (Within 1e-5, not bit for bit: the
    message says so.) The returns are drawn by the check, not played: what is tested is
    that the update needs nothing else."""
    dim, population, generations = int(rng.integers(5, 12)), 2 * int(rng.integers(8, 14)), 12
    seed, sigma, lr = int(rng.integers(2 ** 31)), float(rng.uniform(0.05, 0.3)), float(rng.uniform(0.05, 0.5))
    cuts = np.sort(rng.choice(np.arange(3, population - 2), 2, replace=False))
    bounds = [(0, int(cuts[0])), (int(cuts[0]), int(cuts[1])), (int(cuts[1]), population)]
    center = (rng.standard_normal(dim) * 0.1).astype(np.float32)
    returns, close = [], int(rng.integers(1, generations))
    for g in range(generations):      # each chunk's returns on a scale of its own: per-chunk shaping shows
        r = rng.standard_normal(population) * rng.uniform(1, 50) + rng.uniform(-100, 100)
        r[bounds[1][0]:bounds[1][1]] += float(rng.uniform(20, 60))
        if g == close:                # returns a millionth apart: the z-scores' + 1e-8 changes them by 1%
            r = float(rng.uniform(-100, 100)) + rng.standard_normal(population) * 1e-6
        returns.append([r[a:b].copy() for a, b in bounds])
    want = answers("seeds_only_update", center, seed, returns, sigma, lr)
    reply = _observe(fn, center.copy(), seed, returns, sigma, lr, seeds_only=len(bounds))
    if isinstance(reply["value"], list):
        _fail("update_from_returns: its centers differ in shape from one generation to the next; return the "
              "center, float32 (dim,)")
    master = _array(reply["value"], (generations, dim), "update_from_returns (the master's centers, one per "
                    "generation)")
    scale = np.max(np.abs(want["right"])) + 1e-3
    off = lambda name: np.max(np.abs(master - want[name]), axis=1) / scale      # noqa: E731
    wrong = np.flatnonzero(off("right") > 1e-5)
    if len(wrong):
        g = int(wrong[0])
        for name, why in (
                ("noise_reused", "generation {g} reused generation 0's noise: one generation's noise reused. Rebuild "
                                 "the noise of the generation you are given (rng_for(seed, NOISE, generation, k))"),
                ("previous_noise", "generation {g} used the noise of generation {p}: one generation's noise reused. "
                                   "Rebuild the noise of the generation you are given"),
                ("sign_lost", "member 2k+1 got +eps_k: a pair's sign was lost. Members 2k and 2k+1 play "
                              "+eps_k and -eps_k (mirrored pairs), so row 2k+1 of the noise is -eps_k"),
                ("per_worker", "each worker's chunk of returns was shaped on its own: shaping applied per worker. "
                               "Concatenate the chunks and z-score the whole population at once (a chunk's mean "
                               "and spread are not the population's)"),
                ("ranks", "shaped with centered ranks; this update z-scores the returns, as es_update does"),
                ("raw", "the raw returns weigh the noise; z-score them first"),
                ("no_sigma", "the step is not divided by sigma; grad = noise.T @ z / (population * sigma)"),
                ("no_epsilon", "generation {g}'s returns lie about 1e-6 apart, and it z-scored them without the "
                               "+ 1e-8: divide by returns.std() + 1e-8, as es_update does")):
            if off(name)[g] <= 1e-5:
                _fail("update_from_returns: " + why.format(g=g, p=max(g - 1, 0)))
        _fail(f"update_from_returns: generation {g}'s center is off by {off('right')[g]:.2g} (relative) from the "
              "course's update; rebuild each pair's noise, mirror it, z-score all returns, step by "
              "lr * noise.T @ z / (population * sigma), and return float32")
    _dtype(reply["value"], np.float32, "update_from_returns (the next center)")
    inexact = np.flatnonzero(np.any(master != want["right"], axis=1))
    if len(inexact):
        g = int(inexact[0])
        _fail(f"update_from_returns: generation {g}'s center is {off('right')[g]:.2g} (relative) from the course's "
              "update: close, but not bit for bit as section 4's es_update computes it. Compute the z-scores "
              "with returns.std() + 1e-8 and the step in float64, add it to the float32 center, cast to float32 "
              "once at the end")
    for i, run in enumerate(reply.get("workers") or []):
        if isinstance(run, str):
            _fail(f"update_from_returns: worker process {i + 1} raised {run}")
        got = np.asarray(run)
        if got.shape != master.shape:
            _fail(f"update_from_returns: worker process {i + 1} returned centers of shape {got.shape}, the master "
                  f"{master.shape}")
        differs = np.flatnonzero(np.any(got != np.asarray(reply["value"]), axis=tuple(range(1, got.ndim))))
        if len(differs):
            _fail(f"update_from_returns: worker process {i + 1}, which received only the returns, ended generation "
                  f"{int(differs[0])} at another center than the master (not bit-identical): the update must depend "
                  "on (seed, generation, returns) alone, never on the global np.random state, a clock or what "
                  "this process computed before")


@_register("noise_table", "extras", 2, "03_redis", "make_noise_table", "generation_offsets", "table_noise",
           forbidden=("es.noise_table", "es.noise"), reference=("noise_table", "table_offsets"))
def noise_table(make_noise_table, generation_offsets, table_noise, rng):
    """make_noise_table(seed, size) -> float32 (size,), exactly default_rng(seed).standard_normal(
    size, dtype=np.float32); generation_offsets(seed, generation, pairs, size, dim) -> an integer
    array (pairs,), exactly default_rng([seed, generation]).integers(0, size - dim + 1, pairs);
    table_noise(table, offsets, member, dim) -> float32 (dim,), exactly sign * table[o:o + dim]
    with o = offsets[member // 2] and the sign +1 for an even member, -1 for an odd one, the table
    and the offsets left as they were."""
    seed, size = int(rng.integers(2 ** 31)), int(rng.integers(2000, 5000))
    want = answers("noise_table", seed, size)
    raw = np.asarray(_call(make_noise_table, seed, size))
    if raw.shape != (size,):
        _fail(f"make_noise_table: expected shape (size,) = ({size},), got {raw.shape}")
    if raw.dtype != np.float32:
        _fail(f"make_noise_table: returns {raw.dtype}; the table is float32 (half the memory), drawn as float32: "
              "standard_normal(size, dtype=np.float32)")
    digest = _float32_digest(raw)
    if digest != want["right"]:
        if digest == want["float64_cast"]:
            _fail("make_noise_table: float64 draws cast to float32 are other numbers than float32 draws; draw with "
                  "standard_normal(size, dtype=np.float32)")
        if digest == want["global"]:
            _fail("make_noise_table: not default_rng(seed)'s draws but the legacy generator's "
                  "(np.random.RandomState(seed), or np.random.seed and the global state), which draws other numbers "
                  "from the same seed; build it with np.random.default_rng(seed).standard_normal(size, "
                  "dtype=np.float32)")
        _fail("make_noise_table: not the table np.random.default_rng(seed).standard_normal(size, dtype=np.float32) "
              "draws (every machine must build the same table from the seed)")
    dim, pairs = int(rng.integers(8, 20)), int(rng.integers(12, 24))
    table = rng.standard_normal(3 * dim).astype(np.float32)   # small: the offsets span it, up to its last value
    run, generation = int(rng.integers(2 ** 31)), int(rng.integers(1, 1000))
    offsets = answers("table_offsets", run, generation, pairs, len(table), dim)
    raw = _call(generation_offsets, run, generation, pairs, len(table), dim)
    got = np.asarray(raw)
    if got.shape != (pairs,):
        _fail(f"generation_offsets: expected one offset per pair, shape ({pairs},), got {got.shape}")
    kind = got.dtype
    got = got.astype(np.int64).tolist()
    if got != offsets["right"]:
        if got == offsets["to_the_end"] or max(got) > len(table) - dim:
            _fail(f"generation_offsets: an offset of {max(got)} in a table of {len(table)} values for dim = {dim} runs "
                  "past its end; draw offsets in [0, size - dim]: integers(0, size - dim + 1, pairs)")
        if got == offsets["no_generation"]:
            _fail("generation_offsets: the generation is left out of the generator's key, so every generation plays "
                  "the same noise; draw from default_rng([seed, generation])")
        _fail("generation_offsets: not the offsets np.random.default_rng([seed, generation]).integers(0, size - dim + "
              "1, pairs) draws")
    if not isinstance(raw, np.ndarray) or kind.kind not in "iu":
        _fail(f"generation_offsets: returned {kind if isinstance(raw, np.ndarray) else type(raw).__name__}; the "
              "contract says an integer array: the offsets are ints (slice bounds), the array integers(...) draws")
    right = np.asarray(offsets["right"])
    for member in range(2 * pairs):
        got = np.asarray(_call_leaving(table_noise, ("table", "offsets"), table.copy(), right.copy(), member, dim))
        k, sign = member // 2, 1 - 2 * (member % 2)
        want_noise = sign * table[right[k]:right[k] + dim]
        if got.shape == want_noise.shape and np.array_equal(got, want_noise):
            _dtype(got, np.float32, "table_noise")
            continue
        if got.shape != (dim,):
            _fail(f"table_noise: expected shape (dim,) = ({dim},), got {got.shape}")
        if sign < 0 and np.array_equal(got, -want_noise):
            _fail(f"table_noise: member {member} (odd) got +eps of pair {k}; member 2k+1 plays -eps_k, the slice "
                  "negated: a pair's sign was lost")
        if member < pairs and np.array_equal(got, sign * table[right[member]:right[member] + dim]):
            _fail(f"table_noise: member {member} read offsets[{member}]; a mirrored pair shares one offset, "
                  "offsets[member // 2]")
        _fail(f"table_noise: member {member} differs from sign * table[o:o + dim] with o = offsets[member // 2] = "
              f"{right[k]}")


def _float32_digest(a: np.ndarray) -> str:
    """Shape and bytes of a float32 array (``references.float32_digest``)."""
    return hashlib.sha256(repr(a.shape).encode() + np.ascontiguousarray(a, dtype=np.float32).tobytes()).hexdigest()
