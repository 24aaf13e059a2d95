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
#
# **Systems.** The course is tested on Linux. On macOS everything it installs has wheels, but
# it is not tested there. On Windows, work in WSL2 (Ubuntu): section 0 needs the `fork` start
# method, which Windows lacks (the cell says so and moves on), and notebook 03's Redis server
# has no Windows build. joblib itself (sections 1 to 4) runs anywhere: its default backend,
# `loky`, starts fresh worker processes rather than forking.

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
#
# `fork` copies the master process, global NumPy state included, so both workers draw the
# same numbers. **Expected output:** two identical rows, `identical: True`.

# %%
def draw(queue):
    queue.put(np.random.standard_normal(3))


if "fork" in mp.get_all_start_methods():
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
else:      # Windows: no fork (processes start fresh, with fresh global state); the lesson stands
    print("this system cannot fork processes (Windows): forked workers would print the same numbers twice")

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
# **`member_noise(seed, generation, member, dim)`**
# * **Inputs:** four non-negative ints (`seed` and `member` up to `2**31`).
# * **Returns:** float64 `(dim,)`, standard normal, a pure function of `(seed, generation,
#   member)`: the same in every call and in every process, and different for any other triple.
# * **How:** build a generator from the three integers (`np.random.default_rng` and
#   `np.random.SeedSequence` take a *list* of integers) and draw `dim` standard normals. Do not
#   touch the global `np.random` state (neither seed it nor draw from it).
# * **The corner:** `(0, 1, 2)` and `(0, 2, 1)` are different members. A seed made by adding
#   the three integers (or any formula that can collide) gives them the same noise; a list
#   keeps them apart.
# * **The check:** a triple twice, in this process and in another; nine neighbouring triples
#   (including those sums and weighted sums confuse), all different; the global state neither
#   used nor changed.

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
# `evaluate_members(center, sigma, seed, generation, first, end)` (given) plays members
# `[first, end)` on the generation's shared start state and returns their returns, float64
# `(end - first,)`.
#
# **`parallel_returns(center, sigma, seed, generation, population, n_jobs)`**
# * **Inputs:** `center` float `(10,)`, `sigma` a float, the ints `seed`, `generation`,
#   `population` (any size, not necessarily a multiple of `n_jobs`), `n_jobs >= 1`.
# * **Returns:** float64 `(population,)` in member order, **bit for bit** what
#   `evaluate_members(center, sigma, seed, generation, 0, population)` returns.
# * **How:** split the members into `n_jobs` contiguous chunks `[a, b)` that cover each
#   member once, evaluate each chunk with `evaluate_members` in a joblib job, and concatenate
#   the results in member order. Only integers and the center go to the workers; only returns
#   come back.
# * **Processes, not threads:** use `Parallel(n_jobs=n_jobs)` with joblib's default backend
#   (`loky`, worker *processes*). The check records which process evaluated each chunk: with
#   `n_jobs > 1`, chunks that all ran in one process (`n_jobs=1`, or
#   `Parallel(..., prefer="threads")` / `backend="threading"`) fail with "every chunk ran in
#   one process". Threads share the interpreter's lock: Python code in them does not run in
#   parallel.
# * **The corner:** 11 members in 3 jobs. `np.linspace(0, 11, 4).astype(int)` is
#   `[0, 3, 7, 11]`: chunks `[0, 3)`, `[3, 7)`, `[7, 11)`.
# * **The check:** two populations (odd, not multiples of `n_jobs`) with `n_jobs` 3 and 2.
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
# The claim of section 2, tested on your function: one generation's returns with 1, 2, 3 and 4
# jobs must be identical, bit for bit (`np.array_equal`, not "close"), and the cell stops if
# they are not.
#
# **Expected output:** four lines with the same mean return, `identical for 1, 2, 3 and 4
# jobs: True`, and the times. On 2 cores, 2 jobs are usually *not* faster here: a whole
# CartPole generation is milliseconds of batched NumPy, less than dispatching it to other
# processes costs (the course's own evaluator measures both and stays in-process when that is
# faster). Heavier work gains: a Pong generation (notebook 04), tens of seconds, runs about 2.1
# times as fast in 2 processes as in 1 on 2 cores (measured in the course repository's
# benchmarks). More than 2 because the bare games themselves ran 2.12 times as fast in 2
# processes there: one process alone leaves part of its core idle while it waits on ALE.

# %%
center = np.zeros(policy.num_params)
population = 64 if FAST else 512
timings, results = {}, {}
for n_jobs in (1, 2, 3, 4):
    t0 = time.perf_counter()
    results[n_jobs] = parallel_returns(center, 0.5, 0, 0, population, n_jobs)
    timings[n_jobs] = time.perf_counter() - t0
    print(f"{n_jobs} job(s): {timings[n_jobs]:.3f} s, mean return {results[n_jobs].mean():.2f}")
same = all(np.array_equal(results[1], r) for r in results.values())
print("identical for 1, 2, 3 and 4 jobs:", same)
assert same, "the returns depend on the number of jobs: check member_noise and the chunk bounds"
plt.bar([str(k) for k in timings], list(timings.values()))
plt.xlabel("jobs")
plt.ylabel("seconds for one generation")
plt.show()
