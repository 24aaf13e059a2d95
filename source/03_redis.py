# %% [markdown]
# # 03 · Distributed ES through Redis [+5 points]
#
# Several machines share one Redis server. The master writes the current generation (the
# center as raw float32 bytes with a checksum), hands out chunks of members as *leased* jobs,
# and gathers results; workers rebuild the perturbations from seeds and send back only
# returns and episode lengths. Nothing that crosses the network is pickled (a pickle from a
# stranger can run code), and a dead worker's chunk is handed out again when its lease runs
# out. `es/distributed/protocol.py` is the reference; here you write its payload, its lease
# rule, and the master's loop that gathers a generation with them.

# %%
import json
import os
import struct
import subprocess
import sys
import time

import matplotlib.pyplot as plt
import numpy as np
import redis

from classroom import check

FAST = os.environ.get("ES_COURSE_FAST") == "1"

# %% [markdown]
# ## 1. A result payload without pickle
#
# Pack `generation` and `first` (unsigned 32-bit), the returns as float64 (float32 would lose
# bits and the run would no longer be bit-identical to one process) and the lengths as
# uint32, with `struct` and `ndarray.tobytes()`. About 12 bytes per member.
# `decode_result(payload)` gives back a dict with the keys `"generation"`, `"first"`,
# `"returns"` and `"lengths"` (the master reads them by name).

# %%
def encode_result(generation, first, returns, lengths):
    ### BEGIN SOLUTION
    returns = np.asarray(returns, dtype="<f8")
    lengths = np.asarray(lengths, dtype="<u4")
    return struct.pack("<III", generation, first, len(returns)) + returns.tobytes() + lengths.tobytes()
    ### END SOLUTION


def decode_result(payload):
    ### BEGIN SOLUTION
    generation, first, count = struct.unpack_from("<III", payload)
    returns = np.frombuffer(payload, dtype="<f8", count=count, offset=12)
    lengths = np.frombuffer(payload, dtype="<u4", count=count, offset=12 + 8 * count)
    return {"generation": generation, "first": first, "returns": returns, "lengths": lengths}
    ### END SOLUTION


# %%
check.result_codec(encode_result, decode_result)

# %% [markdown]
# ## 2. Leases: which chunks to hand out again
#
# `queued_at[chunk]` is when the master (re)queued each unfinished chunk, `in_queue` the
# chunks still waiting in the job list, `leases[chunk]` the last heartbeat of the worker that
# took it. Requeue a chunk only if it is not waiting in the queue, it was queued more than
# `lease_seconds` ago (a worker may have just taken it and not yet written its lease), and
# its lease is missing or older than `lease_seconds`.

# %%
def chunks_to_requeue(queued_at, in_queue, leases, now, lease_seconds):
    ### BEGIN SOLUTION
    out = set()
    for chunk, t in queued_at.items():
        if chunk in in_queue or now - t < lease_seconds:
            continue
        if chunk in leases and now - leases[chunk] < lease_seconds:
            continue
        out.add(chunk)
    return out
    ### END SOLUTION


# %%
check.chunks_to_requeue(chunks_to_requeue)

# %% [markdown]
# ## 3. The master's gather
#
# Now the loop that uses both. The course protocol is the reference's cut to its core (no
# run ids, nonces, digests or roles, which `es/distributed/protocol.py` adds):
#
# * the master has pushed one job per chunk onto the list `es:jobs`, as JSON
#   `{"g": generation, "a": first, "b": end}`; a chunk's name is `f"{a}:{b}"`;
# * a worker pops a job, sets its lease `HSET es:leases "a:b" time.time()`, renews it while it
#   works, pushes `encode_result(...)` onto `es:results` and deletes its lease.
#
# Write `gather(url, generation, bounds, lease_seconds, timeout)`: connect
# (`redis.Redis.from_url(url)`), pop results (`r.blpop("es:results", timeout=0.1)` gives
# `None` or `(key, payload)`) and put each at `returns[first:first + count]`. Drop a result of
# another generation, of a chunk not in `bounds`, and a second result of a chunk already in
# (a worker thought lost may still answer). Whenever nothing arrives within the poll, ask your
# `chunks_to_requeue` which chunks to hand out again (the chunks still in `es:jobs` come from
# `r.lrange("es:jobs", 0, -1)`; the leases from `r.hgetall("es:leases")`, bytes to decode),
# push them back and note the time you did. Give up with a `TimeoutError` after `timeout`
# seconds. Return `(returns, lengths)` in member order.
#
# The check runs a real Redis server and three workers that fail the way a cluster does: a
# stale result and one for an unknown chunk are waiting; one worker dies holding a lease,
# one before writing it; one chunk's result arrives twice with different numbers; one worker
# is slow but alive. **Expected:** the check passes in about 4 seconds.
#
# <details><summary>Hint 1: the state to keep</summary>
#
# `queued_at = {chunk: time.time() for each chunk}`: the unfinished chunks and when each was
# last queued. A chunk leaves it when its first result is in; a result for a chunk not in
# `queued_at` is a duplicate (or unknown) and is dropped.
# </details>
#
# <details><summary>Hint 2: the shape of the loop</summary>
#
# `while queued_at:` check the deadline; `got = r.blpop(...)`; if a result came, decode it,
# filter, store, `del queued_at[chunk]`, `continue`; otherwise build `in_queue` and `leases`,
# and for each chunk `chunks_to_requeue` names: `r.rpush("es:jobs", json.dumps({...}))` and
# `queued_at[chunk] = time.time()`.
# </details>

# %%
def gather(url, generation, bounds, lease_seconds, timeout=60.0):
    ### BEGIN SOLUTION
    r = redis.Redis.from_url(url)
    wanted = {f"{a}:{b}": (a, b) for a, b in bounds}
    returns, lengths = np.zeros(bounds[-1][1]), np.zeros(bounds[-1][1], dtype=np.int64)
    queued_at = {chunk: time.time() for chunk in wanted}
    deadline = time.time() + timeout
    while queued_at:
        if time.time() > deadline:
            raise TimeoutError(f"no result for chunks {sorted(queued_at)} after {timeout} s")
        got = r.blpop("es:results", timeout=0.1)
        if got is not None:
            res = decode_result(got[1])
            chunk = f"{res['first']}:{res['first'] + len(res['returns'])}"
            if res["generation"] != generation or chunk not in queued_at:
                continue   # stale, unknown, or a duplicate of a chunk already in
            a, b = wanted[chunk]
            returns[a:b], lengths[a:b] = res["returns"], res["lengths"]
            del queued_at[chunk]
            continue
        in_queue = {f"{job['a']}:{job['b']}" for job in map(json.loads, r.lrange("es:jobs", 0, -1))}
        leases = {k.decode(): float(v) for k, v in r.hgetall("es:leases").items()}
        for chunk in chunks_to_requeue(queued_at, in_queue, leases, time.time(), lease_seconds):
            a, b = wanted[chunk]
            r.rpush("es:jobs", json.dumps({"g": generation, "a": a, "b": b}))
            queued_at[chunk] = time.time()
    r.close()
    return returns, lengths   # in member order
    ### END SOLUTION


# %%
check.gather(gather)

# %% [markdown]
# ## 4. The real thing
#
# The course's own master and workers (in the full es-course package, not in this release: its
# reference master is the answer to this notebook; `python -m es train cartpole --redis ...` and
# `python -m es worker ...`) add what a cluster needs on top of your `gather`: run ids and nonces against
# stale results, ACL roles so that a worker can push results but never rewrite the task,
# heartbeats, spot checks that replay members to catch lying workers. On two PCs: `python -m es
# train cartpole --redis redis://es-master@HOST:6379/0` on one and `python -m es worker --redis
# redis://es-worker@HOST:6379/0` on the others, each with its password in `ES_REDIS_PASSWORD`
# (docs/distributed.md has the server's ACL lines).

# %% tags=["solution_only"]
import es
from es.distributed.master import RedisEvaluator
from es.distributed.server import EmbeddedRedis
from es.training import make_problem_for

config = es.config_for("cartpole", seed=0)
with EmbeddedRedis() as server:
    workers = [subprocess.Popen([sys.executable, "-m", "es", "worker"], env={**os.environ, "ES_REDIS_URL": server.worker_url},
                                stderr=subprocess.DEVNULL) for _ in range(2)]
    try:
        problem = make_problem_for(config)
        result = es.train(config, problem, evaluator=RedisEvaluator(problem, server.master_url))
    finally:
        for w in workers:
            w.kill()
single = es.train(config, final_eval=False)
print("solved:", result.summary["solved"], "| identical to one process:", np.array_equal(result.center, single.center))
plt.plot([m["center_return"] for m in result.metrics], marker="o", label="center, through Redis")
plt.plot([m["center_return"] for m in single.metrics], "x--", label="center, one process")
plt.xlabel("generation")
plt.ylabel("return")
plt.legend()
plt.show()
