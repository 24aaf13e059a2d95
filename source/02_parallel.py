# %% [markdown]
# # 02 · ES in parallel with joblib, each job reseeded [+5 points]
#
# The milestone: evaluate a generation in parallel with joblib, **each job independently
# reseeded** ("make sure random variables are independent in each job"). Why it matters:
# processes forked from the master inherit its global NumPy state, so without reseeding every
# worker draws the *same* "random" noise (section 0 shows it).
#
# Section 1 reseeds each job: a generator of its own, built from seeds, in every job. That
# makes the jobs independent, but a member's noise then depends on which job drew it: change
# the number of jobs and the run changes. Section 2 takes the stronger form that `es` uses
# throughout: a stream per *member*, a pure function of `(run seed, generation, member)`.
# Then any number of workers, in any order, gives the same run, bit for bit, and workers only
# exchange seeds and scalar returns.

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
# ## 0. The bug: two forked processes, no reseeding

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
# ## 1. Reseed each job
#
# NumPy's way to give each job its own independent stream: spawn one child `SeedSequence` per
# job from the run's seed and build the job's generator from it (never `np.random.seed`, which
# reseeds one global state shared with every library in the process). Each job then draws the
# noise of its members in order.

# %%
def job_noise(seed, generation, n_jobs, job, count, dim):
    """Noise of the `count` members one job evaluates, from that job's own generator."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, generation]).spawn(n_jobs)[job])
    return rng.standard_normal((count, dim))


two = np.concatenate(Parallel(n_jobs=2)(delayed(job_noise)(0, 0, 2, job, 4, 3) for job in range(2)))
three = np.concatenate(Parallel(n_jobs=2)(delayed(job_noise)(0, 0, 3, job, n, 3) for job, n in enumerate([3, 3, 2])))
print("the two jobs drew different noise:", not np.allclose(two[:4], two[4:]))
print("member 5 with 2 jobs:", two[5].round(3), "| with 3 jobs:", three[5].round(3))

# %% [markdown]
# Independent, but the run now depends on how the population was split: with 3 jobs member 5
# gets other noise than with 2, so the same seed on another machine (or with another
# `n_jobs`) trains a different policy.
#
# ## 2. The stronger form: a stream per member
#
# Build a generator from `(seed, generation, member)` (a `np.random.SeedSequence` takes a list
# of integers) and draw `dim` standard normals. Do not touch the global `np.random` state. Any
# job can then draw any member's noise, and the split no longer matters.

# %%
def member_noise(seed, generation, member, dim):
    ### BEGIN SOLUTION
    return np.random.default_rng([seed, generation, member]).standard_normal(dim)
    ### END SOLUTION


# %%
check.member_noise(member_noise)

# %% [markdown]
# ## 3. A generation in parallel
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
# ## 4. Same answer, any number of workers
#
# A whole CartPole generation is only milliseconds of batched NumPy, so dispatching it costs
# more than it saves: `es`'s joblib evaluator (`es.parallel`) measures both ways and stays
# in-process when that is faster. Heavier environments (Pong) do speed up ~2x on 2 cores
# (`benchmarks/parallel.py` in the course repository).

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
