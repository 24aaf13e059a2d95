# %% [markdown]
# # 03 · Distributed ES through Redis [+5 points]
#
# Several machines share one Redis server. The master writes the current generation's task
# (the center as raw float32 bytes), hands out chunks of members as *leased* jobs, and gathers
# results; workers rebuild the perturbations from seeds and send back only returns and episode
# lengths. Nothing that crosses the network is pickled (a pickle from a stranger can run code),
# and a dead worker's chunk is handed out again when its lease runs out. You write the result
# payload, the lease rule, and the master's loop that gathers a generation with them; section 4
# then runs a real ES training on CartPole whose every generation your `gather` collects.
#
# ### The keys and the messages
#
# Four keys, one run per database (the course protocol: the course's own master adds run ids,
# nonces, digests and access roles on top, section 5):
#
# | key | type | written by | read by | holds |
# |---|---|---|---|---|
# | `es:task` | hash | master, once per generation | workers | `g` (generation), `seed`, `sigma`, `population`, `center` (float32 bytes) |
# | `es:jobs` | list | master (RPUSH) | workers (BLPOP), master (LRANGE, to see what still waits) | one JSON job per chunk, `{"g": 7, "a": 0, "b": 32}`; the chunk's name is `"0:32"` |
# | `es:leases` | hash | workers (HSET on taking a job, again while working; HDEL when done) | master (HGETALL) | chunk name -> the worker's last heartbeat, `time.time()` as text, e.g. `b"1764022531.41"` |
# | `es:results` | list | workers (RPUSH) | master (BLPOP) | `encode_result(...)` payloads, bytes |
#
# ```
#   master (your gather)                 Redis                                      a worker
#   --------------------    ------------------------------------------    --------------------------
#   HSET es:task ...     -->  es:task    g, seed, sigma, center         -->  HGETALL es:task
#   RPUSH es:jobs job    -->  es:jobs    {"g": 7, "a": 0, "b": 32}      -->  BLPOP es:jobs: takes "0:32"
#                             es:leases  "0:32" -> "1764022531.41"      <--  HSET es:leases "0:32" time.time()
#                                                                            ... plays members 0..31 ...
#                             es:results encode_result(7, 0, r, l)      <--  RPUSH es:results payload
#                             es:leases  ("0:32" deleted)               <--  HDEL es:leases "0:32"
#   BLPOP es:results     <--  (0.1 s at most; nothing came?
#   LRANGE es:jobs 0 -1  <--   then look at what still waits
#   HGETALL es:leases    <--   and at the heartbeats, and RPUSH again
#                              the chunks chunks_to_requeue names)
# ```
#
# One chunk's life when its worker dies (lease 1 s):
#
# ```
#   t = 100.0  master  RPUSH "0:32"                       queued_at["0:32"] = 100.0
#   t = 100.1  worker  BLPOP "0:32", HSET lease 100.1 ... and dies: no result, no new heartbeat
#   t = 100.6  master  nothing in 0.1 s; "0:32" queued 0.6 s ago: a worker may still be starting, wait
#   t = 101.2  master  nothing in 0.1 s; "0:32" not in es:jobs, queued 1.2 s ago, lease 1.1 s old:
#                      its worker is dead. RPUSH "0:32" again, queued_at["0:32"] = 101.2
#   t = 101.3  another worker takes it, leases it, RPUSH its result, HDEL its lease
#   t = 101.3  master  BLPOP the result: returns[0:32], lengths[0:32]; "0:32" is done
# ```

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
# **`encode_result(generation, first, returns, lengths)`**
# * **Inputs:** `generation` and `first` (the chunk's first member), ints in `[0, 2**32)`;
#   `returns`, float `(count,)`; `lengths`, ints `(count,)` in `[0, 2**32)` (episode lengths).
# * **Returns:** `bytes`. The course's layout, little-endian: a 12-byte header of three uint32
#   (`generation`, `first`, `count`), then the `count` returns as float64, then the `count`
#   lengths as uint32 (`struct.pack` for the header, `ndarray.tobytes()` for the arrays): 12
#   bytes per member plus the header. Float64 because float32 would lose bits, and the run would
#   no longer be bit-identical to one process.
#
# **`decode_result(payload)`** gives back a dict with the keys `"generation"` and `"first"`
# (ints), `"returns"` (float64 `(count,)`) and `"lengths"` (ints `(count,)`), all exactly what
# was encoded: the master reads them by name.
#
# * **Example:** `encode_result(7, 32, [1.5, -2.0], [10, 20])` is 12 + 16 + 8 = 36 bytes, and
#   decoding it gives `{"generation": 7, "first": 32, "returns": array([ 1.5, -2. ]),
#   "lengths": array([10, 20], dtype=uint32)}`.
# * **The check:** an exact round trip of 20 to 60 members, no pickle, at most 64 + 16 bytes
#   per member.

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
# **`chunks_to_requeue(queued_at, in_queue, leases, now, lease_seconds)`**
# * **Inputs** (chunks are named by strings, `"a:b"` in the protocol; any string here):
#   `queued_at`, a dict chunk -> when the master last pushed it onto `es:jobs` (seconds,
#   `time.time()`), one entry per chunk whose result is not in yet; `in_queue`, a set of the
#   chunks still waiting in `es:jobs`; `leases`, a dict chunk -> the last heartbeat of the
#   worker that took it (seconds, `time.time()`; a chunk nobody leased is absent); `now`, the
#   current `time.time()`; `lease_seconds`, a float.
# * **Returns:** a `set` of chunk names to push again, a subset of `queued_at`'s keys.
# * **The rule:** requeue a chunk when all three hold: it is **not in `in_queue`** (a copy still
#   waits: pushing another makes duplicates); it was **queued at least `lease_seconds` ago**
#   (`now - queued_at[chunk] >= lease_seconds`: a worker may have just taken it and not yet
#   written its lease); and its **lease is missing or at least `lease_seconds` old** (its
#   worker died before writing one, or stopped renewing it).
# * **Units:** every time is `time.time()`, seconds since 1970, the same clock on every
#   machine. `time.monotonic()` counts from an arbitrary point per machine (often the boot):
#   mixed with the workers' `time.time()` heartbeats, a lease's age (`now` minus its stamp) is
#   hugely negative, a dead worker's lease looks fresh forever, and its chunk is never handed
#   out again.
# * **Worked example**, `lease_seconds = 1.0`, `now = 105.0`:
#
# | chunk | `queued_at` | in `in_queue`? | lease | requeue? |
# |---|---|---|---|---|
# | `"0:8"` | 100.0 | yes | none | no: still waiting in the queue |
# | `"8:16"` | 104.5 | no | none | no: queued 0.5 s ago, its worker may not have written its lease yet |
# | `"16:24"` | 100.0 | no | 104.6 | no: lease 0.4 s old, its worker is alive |
# | `"24:32"` | 100.0 | no | 103.2 | **yes**: lease 1.8 s old, its worker is dead |
# | `"32:40"` | 100.0 | no | none | **yes**: taken long ago and never leased, its worker died first |
# | `"40:48"` | 104.0 | no | 104.0 | **yes**: exactly 1.0 s on both counts, at least `lease_seconds` |
#
#   so the answer is `{"24:32", "32:40", "40:48"}`.
# * **The check:** five chunks, one of each kind of the table's first five rows, with times
#   far from the boundary.

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
# Now the loop that uses both, on the keys of the table at the top.
#
# **`gather(url, generation, bounds, lease_seconds, timeout=60.0)`**
# * **Inputs:** `url`, a Redis URL for `redis.Redis.from_url(url)`; `generation`, an int;
#   `bounds`, the generation's chunks in member order, a list of `[first, end)` pairs (lists or
#   tuples of ints) that cover members `0 .. population - 1` once: `bounds[0][0] == 0`, each
#   chunk starts where the one before ended, and `population = bounds[-1][1]`; chunk
#   `(a, b)` is named `f"{a}:{b}"`. `lease_seconds` and `timeout` are seconds (floats).
# * **When it is called, the jobs are already queued:** the master pushed one job per chunk
#   onto `es:jobs` just before (`{"g": generation, "a": a, "b": b}` as JSON), so `gather` starts
#   with every chunk queued at the time it starts. Do not push them again: the copies would
#   wait beside the originals, and the check fails such a gather ("pushed again while a copy
#   still waited in es:jobs").
# * **Returns:** the pair `(returns, lengths)`: float64 `(population,)` and int64
#   `(population,)`, member `m`'s values at index `m`.
# * **Results:** pop with `r.blpop("es:results", timeout=0.1)`, which gives `None` (nothing
#   within 0.1 s) or `(key, payload)`; decode the payload with your `decode_result` and put it at
#   `returns[first:first + count]`. Drop, without failing: a result of another generation (a
#   leftover), one whose chunk `f"{first}:{first + count}"` is not in `bounds`, and a second
#   result of a chunk already in (a worker thought lost may still answer).
# * **Leases:** whenever nothing arrived within the poll, ask your `chunks_to_requeue` which
#   chunks to hand out again, with the chunks whose result is not in yet and when each was last
#   queued (`queued_at`), the chunks still waiting (`r.lrange("es:jobs", 0, -1)`: JSON jobs,
#   bytes; only this generation's count, a leftover job of another generation is no copy of
#   yours), the leases (`r.hgetall("es:leases")`: bytes -> bytes, e.g.
#   `{b"0:32": b"1764022531.41"}`: decode the names, `float()` the times) and `time.time()`.
#   Push each chunk it names back onto `es:jobs` as a job in the same JSON form,
#   `json.dumps({"g": generation, "a": a, "b": b})`, and set its `queued_at` to `time.time()`
#   (otherwise it counts as lost again at once and is pushed over and over).
# * **Give up** with a `TimeoutError` after `timeout` seconds without all results.
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
# ## 4. Your gather trains a policy
#
# A real ES run on CartPole (notebook 01's linear policy, population 256 in 8 chunks of 32,
# sigma 0.2, z-scored returns, SGD step 0.3), through a real Redis server with three workers.
# The workers (`classroom.cartpole_workers`) speak the protocol of the table above, push what
# your `encode_result` encodes, and rebuild every member from integers: member `2k` plays
# `center + sigma * eps_k` and `2k + 1` plays `center - sigma * eps_k`, `eps_k` from its own
# seeded stream (`pair_noise`). For each generation the master (the cell below) writes the task,
# pushes the jobs, calls **your `gather`**, and updates the center from the returns. In
# generation 1 one worker dies holding a chunk: your `gather` must hand it out again.
#
# The workers run as threads of this notebook's process, standing in for processes on other
# machines: what they exchange through Redis is the same. The server is started for the cell
# and stopped after it (`es.distributed.server.EmbeddedRedis`, on 127.0.0.1, a password of its
# own, the workers under an account that can only take jobs, read the task and push results).
# Then the same run in one process, without Redis, must end at the same center, bit for bit:
# only seeds and scalar returns travelled.
#
# **Expected output:** the center's mean return on 32 start states, generation by generation,
# `[9.3, 75.2, 76.2, 476.8, 9.3, 500.0]` (solved after 5 updates; not monotone, as in notebook
# 01); one line `worker ... died holding chunk ... of generation 1; handed out again: True`;
# `identical to one process: True`; a few seconds in all (one lease, 1 s, is spent waiting for
# the dead worker's chunk).

# %%
from es.distributed.server import EmbeddedRedis
from es.envs.cartpole import run_cartpole_batch
from classroom.cartpole_workers import POLICY, CartPoleWorkers, member_returns, pair_noise, task_fields

SEED, POPULATION, SIGMA, LR, CHUNK = 0, 256, 0.2, 0.3, 32
bounds = [(a, a + CHUNK) for a in range(0, POPULATION, CHUNK)]
starts = np.arange(1000, 1032)       # the center's 32 test start states


def es_update(center, generation, returns):
    """z-scored returns, the ES gradient, one SGD step; the center stays float32 (what es:task carries)."""
    noise = pair_noise(SEED, generation, POPULATION, center.size)
    z = (returns - returns.mean()) / (returns.std() + 1e-8)
    return (center + LR * (noise.T @ z) / (POPULATION * SIGMA)).astype(np.float32)


def center_score(center):
    returns, _ = run_cartpole_batch(POLICY, center[None], np.zeros(len(starts), int), starts)
    return returns.mean()


def train(gather_generation, generations=12):
    """The master's loop; ``gather_generation(g, center)`` returns the generation's returns."""
    center, curve = np.zeros(POLICY.num_params, dtype=np.float32), []
    for g in range(generations):
        curve.append(center_score(center))
        if curve[-1] == 500:
            break
        center = es_update(center, g, gather_generation(g, center))
    return center, curve


with EmbeddedRedis() as server, CartPoleWorkers(server.worker_url, encode_result, workers=3, crash=1) as workers:
    master = redis.Redis.from_url(server.master_url)
    master.delete("es:jobs", "es:results", "es:leases")

    def through_redis(g, center):
        master.delete("es:leases")       # last generation's heartbeats (a dead worker's) mean nothing now
        master.hset("es:task", mapping=task_fields(g, SEED, SIGMA, POPULATION, center))
        master.rpush("es:jobs", *[json.dumps({"g": g, "a": a, "b": b}) for a, b in bounds])
        returns, lengths = gather(server.master_url, g, bounds, lease_seconds=1.0, timeout=30.0)
        return returns

    t0 = time.perf_counter()
    center, curve = train(through_redis)
    seconds = time.perf_counter() - t0
    master.close()

print("center's mean return per generation:", [round(float(c), 1) for c in curve], f"({seconds:.1f} s)")
if workers.died:
    worker, g, chunk = workers.died
    print(f"worker {worker} died holding chunk {chunk} of generation {g}; handed out again:",
          (g, chunk) in workers.requeued())


def in_one_process(g, center):
    task = {"g": g, "seed": SEED, "sigma": SIGMA, "population": POPULATION, "center": center}
    return member_returns(task, 0, POPULATION)[0]


single, single_curve = train(in_one_process)
print("identical to one process:", np.array_equal(center, single))
plt.plot(curve, marker="o", label="through Redis, your gather")
plt.plot(single_curve, "x--", label="one process")
plt.xlabel("generation")
plt.ylabel("center's mean return (32 start states)")
plt.legend()
plt.show()

# %% [markdown]
# ## 5. What a real cluster adds
#
# The course's own Redis master and workers (in the es-course repository; its master is the
# answer to this notebook, so a release does not carry it) add what a cluster of strangers'
# machines needs on top of your `gather`: a run id and a nonce per generation against stale
# results from an earlier run, access roles so that a worker can push results but never
# rewrite the task, heartbeats per worker, and spot checks that replay a few members to catch
# a worker that lies about its returns. The protocol stays the one of the table above: only
# seeds, the center and scalar returns travel.

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
