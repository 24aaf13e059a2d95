# %% [markdown]
# # 02 · ES in parallel with joblib [+5 points]
#
# The course's advice: "make sure random variables are independent in each job". The
# classic fix, `np.random.seed()` at the top of each job, is not enough:
#
# * **no reseeding**: processes forked from the master inherit its global NumPy state, so
#   every worker draws the *same* "random" noise;
# * **`np.random.seed(job_id)`**: workers differ, but a member's noise now depends on which
#   job evaluated it, so changing the number of workers changes the run.
#
# The fix used throughout `es`: a member's noise is a pure function of
# `(run seed, generation, member)`, drawn from its own `np.random.Generator`. Then any number
# of workers, in any order, gives the same result, and workers only exchange seeds and
# scalar returns.

# %%
import multiprocessing as mp
import os
import time

import matplotlib.pyplot as plt
import numpy as np
from joblib import Parallel, delayed

from classroom import check
from es.envs.cartpole import run_cartpole_batch
from es.policies import MLPPolicy

FAST = os.environ.get("ES_COURSE_FAST") == "1"
policy = MLPPolicy(4, 2, hidden=())

# %% [markdown]
# First, the bug itself: two forked processes, no reseeding.

# %%
def draw(queue):
    queue.put(np.random.standard_normal(3))


ctx = mp.get_context("fork")
queue = ctx.Queue()
np.random.seed(0)
procs = [ctx.Process(target=draw, args=(queue,)) for _ in range(2)]
for p in procs:
    p.start()
a, b = queue.get(), queue.get()
for p in procs:
    p.join()
print("worker 1:", a.round(3), "\nworker 2:", b.round(3), "\nidentical:", np.array_equal(a, b))

# %% [markdown]
# ## 1. Noise from integers alone
#
# Build a generator from `(seed, generation, member)` (a `np.random.SeedSequence` takes a list
# of integers) and draw `dim` standard normals. Do not touch the global `np.random` state.

# %%
def member_noise(seed, generation, member, dim):
    ### BEGIN SOLUTION
    return np.random.default_rng([seed, generation, member]).standard_normal(dim)
    ### END SOLUTION


# %%
check.member_noise(member_noise)

# %% [markdown]
# ## 2. A generation in parallel
#
# `evaluate_members` plays members `[first, end)` on the generation's shared start state.
# Split the population into `n_jobs` contiguous chunks, evaluate them with joblib, and put
# the returns back in member order. Only integers and the center go to the workers; only
# returns come back.
#
# <details><summary>Hint: chunk bounds</summary>
#
# `np.linspace(0, population, n_jobs + 1).astype(int)` gives `n_jobs + 1` edges that cover
# every member once, remainder included; `Parallel(n_jobs=n_jobs)(delayed(evaluate_members)(...,
# a, b) for a, b in zip(edges[:-1], edges[1:]))` returns the chunks in that order.
# </details>

# %%
def evaluate_members(center, sigma, seed, generation, first, end):
    params = np.stack([center + sigma * member_noise(seed, generation, m, center.size) for m in range(first, end)])
    episode_seed = int(np.random.SeedSequence([seed, generation]).generate_state(1)[0])
    returns, _ = run_cartpole_batch(policy, params.astype(np.float32), np.arange(len(params)),
                                    np.full(len(params), episode_seed))
    return returns


def parallel_returns(center, sigma, seed, generation, population, n_jobs):
    ### BEGIN SOLUTION
    bounds = np.linspace(0, population, n_jobs + 1).astype(int)
    chunks = Parallel(n_jobs=n_jobs)(delayed(evaluate_members)(center, sigma, seed, generation, a, b)
                                     for a, b in zip(bounds[:-1], bounds[1:]))
    return np.concatenate(chunks)
    ### END SOLUTION


# %%
check.parallel_returns(parallel_returns, evaluate_members)

# %% [markdown]
# ## 3. Same answer, any number of workers
#
# A whole CartPole generation is only milliseconds of batched NumPy, so dispatching it costs
# more than it saves: `es.parallel.ParallelEvaluator` measures both ways and stays in-process
# when that is faster. Heavier environments (Pong) do speed up ~2x on 2 cores
# (`benchmarks/parallel.py`).

# %%
center = np.zeros(policy.num_params)
population = 64 if FAST else 512
timings = {}
for n_jobs in (1, 2):
    t0 = time.perf_counter()
    r = parallel_returns(center, 0.5, 0, 0, population, n_jobs)
    timings[n_jobs] = time.perf_counter() - t0
    print(f"{n_jobs} job(s): {timings[n_jobs]:.3f} s, mean return {r.mean():.2f}")
plt.bar([str(k) for k in timings], list(timings.values()))
plt.xlabel("jobs")
plt.ylabel("seconds for one generation")
plt.show()
