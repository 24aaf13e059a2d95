# %% [markdown]
# # 02 · ES in parallel with joblib, each job reseeded [+5 points]
#
# The milestone: evaluate a generation in parallel with joblib, **each job independently
# reseeded**. The course's original assignment (Practical_RL's
# [`week01_intro/project_starter_evolution_strategies.ipynb`](https://github.com/yandexdataschool/Practical_RL/blob/6f7fa8bc521af3d6bb47833c4670f44740f26aa6/week01_intro/project_starter_evolution_strategies.ipynb),
# *Tips on implementation*) says: "For joblib, make sure random variables are independent in
# each job", and suggests `np.random.seed()` at the start of each job: seeded from the
# operating system, the jobs are independent, but no run can be repeated. Section 0 shows how
# easily jobs draw the *same* "random" noise.
#
# Section 1 builds each job a generator from seeds: independent jobs, but a member's noise
# depends on which job drew it, so another number of jobs gives another run. Section 2 gives
# each *member* a stream, a pure function of `(run seed, generation, member)`: any number of
# workers, in any order, gives the same run, bit for bit. Section 5 measures what parallelism
# buys on your cores.
#
# **Systems.** The course is tested on Linux. On Windows, work in WSL2 (Ubuntu): section 0's
# second half needs the `fork` start method (the cell says so and moves on), and notebook 03's
# Redis server has no Windows build.

# %%
import multiprocessing as mp
import os
import sys
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
# ## 0. The bug: the same noise in every job
#
# With `n_jobs > 1`, joblib's default backend, `loky` (section 3), runs jobs in worker
# processes and sends each job a copy of its arguments: jobs handed one `Generator`, or one
# seed, draw the same noise. The workers' global `np.random` states are their own: the
# master's `np.random.seed(0)` does not reach them. A process started with `fork` begins as a
# copy of the master, global state included; on Linux with Python 3.11, `fork` is
# `multiprocessing`'s default, which joblib's `"multiprocessing"` backend uses (joblib 1.6.0,
# module `joblib.parallel`, line 1304).
#
# **Expected output:** for `loky`, `identical: False` for the global state and `True` for one
# `Generator` and for the same seed; for `fork`, `True` all three times (on a system that
# cannot fork, a line saying so).

# %%
def draw(rng, seed):
    """Two normals from each: the global state, the Generator received, a generator built from `seed`."""
    return np.random.standard_normal(2), rng.standard_normal(2), np.random.default_rng(seed).standard_normal(2)


def show(start, jobs):
    for name, one, two in zip(("global state", "one Generator", "same seed"), *jobs):
        print(f"{start}, {name:13}: {one.round(3)} and {two.round(3)}, identical: {np.array_equal(one, two)}")


np.random.seed(0)
rng = np.random.default_rng(0)
show("loky", Parallel(n_jobs=2)(delayed(draw)(rng, 0) for _ in range(2)))     # joblib's default backend

if "fork" in mp.get_all_start_methods():
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=lambda: queue.put(draw(rng, 0))) for _ in range(2)]
    for p in procs:
        p.start()
    jobs = [queue.get(), queue.get()]
    for p in procs:
        p.join()
    show("fork", jobs)
else:      # Windows
    print("this system cannot fork processes: forked workers would print identical: True three times")

# %% [markdown]
# ## 1. Reseed each job
#
# NumPy's way to give each job its own stream: spawn one child `SeedSequence` per job from the
# run's seed and build the job's generator from it (NumPy's guide, [Parallel random number
# generation](https://numpy.org/doc/stable/reference/random/parallel.html)). Never
# `np.random.seed`: it reseeds "the singleton RandomState instance" (its docstring), the
# global state every user of `np.random` in the process shares.
#
# **Expected output:** `the two jobs drew different noise: True`, then the noise of member 5
# with 2 jobs and with 3 jobs: two different rows.

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
# Independent, but a member's noise depends on how the population was split (the two rows
# above): the same seed with another `n_jobs` trains a different policy.
#
# ## 2. The stronger form: a stream per member
#
# **`member_noise(seed, generation, member, dim)`**
# * **Inputs:** four non-negative ints, the first three below $2^{32}$. The check asks for members
#   in the billions: a stream whose cost grows with `member` (`SeedSequence(...).spawn(member + 1)`,
#   or drawing `member + 1` rows) will not finish.
# * **Returns:** a float64 array of shape `(dim,)`, standard normal, a pure function of `(seed,
#   generation, member)`: the same in every call and in every process, and different for any
#   other triple.
# * **How:** build a generator from the list `[seed, generation, member]` and draw `dim`
#   standard normals. `np.random.default_rng` passes a *list* of non-negative integers to
#   `SeedSequence`, which mixes every integer of it (their docstrings); each integer below
#   $2^{32}$ is one entry of that list, so two different triples are two different inputs: the
#   list is what keeps every triple's stream apart. Never touch the global `np.random` state
#   (neither seed it nor draw from it).
# * **Mirroring is not yours:** `evaluate_members` (section 3) asks `member_noise` for *pair*
#   `k = m // 2` and negates that noise for an odd member `m` (notebook 01's mirrored pairs).
#   Your function gives one stream per integer `member`, never negated.
# * **The corner:** one integer made from the three can collide. A sum gives `(0, 1, 2)` and
#   `(0, 2, 1)` the same noise; `seed * generation + member` gives every generation the same
#   noise when `seed == 0`; digits run together, `int(f"{seed}{generation}{member}")`, make
#   `(0, 1, 23)` and `(0, 12, 3)` one member; weights, `1000003 * seed + 1009 * generation +
#   member`, make `(0, 1, 0)` and `(0, 0, 1009)` one; zero-padded digits,
#   `int(f"{seed}{generation:04d}{member:06d}")`, make `(0, 1, 0)` and `(0, 0, 1000000)` one (a
#   member of 7 digits runs past its padding).
# * **The check:** the shape and the dtype; a long draw's mean near $0$, standard deviation
#   near $1$, and shares of draws within $0.5$ of $0$ and beyond $\pm 2$ near a normal's; a
#   triple twice, in this process and in another; the global state neither used nor changed.
#   Then triples that these mixes confuse, none equal to another nor to its negation: a sum, a
#   product (`seed == 0` and `generation == 0` among them), digits run together;
#   `(seed, generation, member + w)` against `(seed, generation + 1, member)` and
#   `(seed + 1, generation, member)` ($w$ times the generation or the seed, plus the member) for
#   $w$ a power of $10$ or of $2$ below $2^{32}$ or one of the primes in `check.PRIME_WEIGHTS`
#   ($31$ to $2^{31} - 1$); digits zero-padded to $k$ places, $k = 1, \dots, 9$, with a member
#   or a generation of $k + 1$ digits; members `2k` and `2k + 1`. A mix it does not try may
#   still collide: only the list is sure.

# %%
def member_noise(seed, generation, member, dim):
    """float64 (dim,) standard normals, a pure function of (seed, generation, member): a
    generator built from the list [seed, generation, member], never the global np.random state."""
    ### BEGIN SOLUTION
    return np.random.default_rng([seed, generation, member]).standard_normal(dim)
    ### END SOLUTION


# %%
check.member_noise(member_noise)

# %% [markdown]
# ## 3. A generation in parallel
#
# `evaluate_members(center, sigma, seed, generation, first, end)` (given, below) plays members
# `[first, end)` on the generation's shared start state and returns their returns, float64
# `(end - first,)`. Member `m` plays `center + sigma * s * member_noise(seed, generation, m //
# 2, dim)` with `s = +1` for an even `m` and `s = -1` for an odd one: mirrored pairs.

# %%
def evaluate_members(center, sigma, seed, generation, first, end):
    signs = 1 - 2 * (np.arange(first, end) % 2)          # +1 for member 2k, -1 for member 2k + 1
    params = np.stack([center + sigma * s * member_noise(seed, generation, m // 2, center.size)
                       for s, m in zip(signs, range(first, end))])
    episode_seed = int(np.random.SeedSequence([seed, generation]).generate_state(1)[0])
    returns, _ = run_cartpole_batch(policy, params.astype(np.float32), np.arange(len(params)),
                                    np.full(len(params), episode_seed))
    return returns


# %% [markdown]
# **`parallel_returns(center, sigma, seed, generation, population, n_jobs)`**
# * **Inputs:** `center` a float array of shape `(policy.num_params,)`, `sigma` a float, the
#   ints `seed`, `generation`, `population` (not necessarily a multiple of `n_jobs`),
#   `n_jobs >= 1`.
# * **Returns:** float64 `(population,)` in member order, **bit for bit** what
#   `evaluate_members(center, sigma, seed, generation, 0, population)` returns.
# * **How:** split the members into `n_jobs` contiguous chunks `[a, b)` that cover each
#   member once, evaluate each chunk with `evaluate_members` in a joblib job, and concatenate
#   the results in member order.
# * **Processes, not threads:** `Parallel(n_jobs=n_jobs)` with joblib's default backend,
#   `loky`, which runs jobs in worker *processes* (`DEFAULT_BACKEND = "loky"`: joblib 1.6.0,
#   module `joblib.parallel`, line 64). Threads share the interpreter's lock: Python code in
#   them does not run in parallel.
# * **The corner:** 11 members in 3 jobs. `np.linspace(0, 11, 4).astype(int)` is
#   `[0, 3, 7, 11]`: chunks `[0, 3)`, `[3, 7)`, `[7, 11)`.
# * **The check:** the dtype; two populations (odd, not multiples of `n_jobs`) with `n_jobs` 3
#   and 2, each equal to `evaluate_members` over the whole population, bit for bit, in
#   `n_jobs` chunks given the run's `seed` and `generation`; it records which process ran each
#   chunk, and with `n_jobs > 1` chunks that all ran in one process (`Parallel(n_jobs=1)`,
#   `prefer="threads"`, `backend="threading"`) fail, as does `backend="multiprocessing"`, which
#   cannot send the recorder. It does not see the `n_jobs` you give `Parallel`.
#
# <details><summary>Hint: chunk bounds</summary>
#
# `np.linspace(0, population, n_jobs + 1).astype(int)` gives `n_jobs + 1` edges that cover
# every member once; `Parallel(n_jobs=n_jobs)(delayed(evaluate_members)(..., a, b) for a, b
# in zip(edges[:-1], edges[1:]))` returns the chunks in that order.
# </details>

# %%
def parallel_returns(center, sigma, seed, generation, population, n_jobs):
    """float64 (population,) in member order, bit for bit evaluate_members(center, sigma, seed,
    generation, 0, population): n_jobs contiguous chunks [a, b), each evaluated by
    evaluate_members in a joblib worker process (the default backend)."""
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
# Section 2's claim, tested on your function: one generation's returns with 1, 2, 3 and 4 jobs
# must be identical, bit for bit (`np.array_equal`), or the cell stops.
#
# **Expected output:** four lines with the same mean return, `identical for 1, 2, 3 and 4
# jobs: True`, and your machine's times. On work this small more jobs may well be slower.

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

# %% [markdown] tags=["question:slower"]
# **Inline question 1.** Why can two jobs take *longer* than one here, when each job has half
# the members to play? What would have to change for two jobs to win?

# %% [markdown] tags=["student_only", "answer:slower"]
# **Your answer:** *(write it here: your instructor reads it; it earns no points from the checks)*

# %% [markdown] tags=["solution_only", "reference:slower"]
# **Reference answer:** A whole CartPole generation is a fraction of a second of batched NumPy.
# Two jobs add costs one process never pays: starting or waking workers, sending them the
# function, its arguments and the returns, waiting for the slower chunk; these can cost more
# than the work, and on few cores the workers compete with the notebook's process.
# Two jobs win when each chunk's work far outlasts the dispatch: larger populations or long
# episodes, such as section 5's Pong games.

# %% [markdown]
# ## 5. Scaling, measured: Pong on your cores
#
# Parallelism can pay where a generation is long (on 2 cores, or a busy machine, the speed-up
# may stay below 1): one generation of Pong games (notebook 04's, a
# linear policy on band sums of 42x42 frames) over one worker, the powers of two below your
# core count, and all your cores, with `members, steps = (8, 30) if FAST else (32, 300)` (the
# population, each game's cap on agent steps). Two measurements per worker count:
#
# * **ES:** the members play their games, a chunk per worker (your `parallel_returns`'s work,
#   with games instead of CartPole).
# * **The bare games:** the same games with a fixed action instead of the policy: the
#   machine's own speed-up on these games, a reference for ES's, not a ceiling (the policy's
#   work may scale better than the games').
#
# **Speed-up** is steps per second with N workers over steps per second with one;
# **efficiency** is the ES speed-up over the bare games' speed-up. Steps per second are
# medians of two rounds, after an untimed one in which each worker builds its games.
#
# **Expected output:** a line per worker count (steps per second, speed-ups, efficiency) and
# a picture: your machine's numbers, which hold only while nothing else competes for its
# cores. An efficiency above $1$ means ES scaled better than the bare games (or the timings
# are noisy).

# %%
from joblib import parallel_config
from threadpoolctl import threadpool_limits

from pong.games import PongGames
from pong.policy import PongDensePolicy

PONG = PongDensePolicy()          # band sums of the 4 frames -> 3 action logits, 3,531 parameters
PICK = np.linspace(0, 159, 42).round().astype(int)


def shrink(frames):
    """(k, 210, 160) -> (k, 42, 42): every 5th row, 42 evenly spaced columns (notebook 04 averages)."""
    return frames[:, ::5][:, :, PICK]


def push(stacks, frames):
    """Each stack without its oldest frame, then the new one."""
    out = np.roll(stacks, -1, axis=1)
    out[:, -1] = frames
    return out


def worker_games():
    """This process's 32 games, built once (emulators take seconds to build). Kept on the
    process's main module, not in a global of this cell: joblib sends a function with the
    globals it names, and emulators cannot be sent."""
    home = sys.modules["__main__"]
    if not hasattr(home, "pong_games"):
        home.pong_games = PongGames(32, shrink, push)
    return home.pong_games


def play_games(params, seed, steps, bare):
    """One game per row of `params`, every game from the start state `seed`, at most `steps`
    agent steps; `bare`: a fixed action instead of the policy. Returns the steps played."""
    layers = PONG.unflatten(params)

    def choose(episodes, obs):
        if bare:
            return np.zeros(len(episodes), dtype=np.int64)
        return PONG.forward([(w[episodes], b[episodes]) for w, b in layers], obs)

    _, lengths = worker_games().play(choose, np.full(len(params), seed), max_steps=steps)
    return int(lengths.sum())


def steps_per_second(n_jobs, params, steps, bare):
    bounds = np.linspace(0, len(params), n_jobs + 1).astype(int)
    t0 = time.perf_counter()
    with parallel_config(backend="loky", inner_max_num_threads=1):    # one BLAS thread per worker
        played = Parallel(n_jobs=n_jobs)(delayed(play_games)(params[a:b], 7, steps, bare)
                                         for a, b in zip(bounds[:-1], bounds[1:]))
    return sum(played) / (time.perf_counter() - t0)


cores = os.cpu_count() or 1
counts = sorted({1, cores} | {2 ** i for i in range(1, 8) if 2 ** i < cores})
members, steps = (8, 30) if FAST else (32, 300)
params = 0.01 * np.random.default_rng(0).standard_normal((members, PONG.num_params)).astype(np.float32)
speed = {(n, bare): [] for n in counts for bare in (False, True)}
with threadpool_limits(1):        # one BLAS thread in this process too (one worker runs here)
    for n in counts:
        steps_per_second(n, params, 1, False)             # each worker builds its games, before the clock
        for _ in range(2):                                # two rounds, ES and the bare games interleaved
            for bare in (False, True):
                speed[n, bare].append(steps_per_second(n, params, steps, bare))
es_up = {n: np.median(speed[n, False]) / np.median(speed[1, False]) for n in counts}
bare_up = {n: np.median(speed[n, True]) / np.median(speed[1, True]) for n in counts}
for n in counts:
    print(f"{n:>3} worker(s): ES {np.median(speed[n, False]):7,.0f} steps/s (speed-up {es_up[n]:.2f}), bare games "
          f"{np.median(speed[n, True]):7,.0f} steps/s ({bare_up[n]:.2f}), efficiency {es_up[n] / bare_up[n]:.2f}")

plt.figure(figsize=(6, 4))
plt.plot(counts, counts, "k:", label="ideal")
plt.plot(counts, [bare_up[n] for n in counts], "s--", label="bare games (a reference)")
plt.plot(counts, [es_up[n] for n in counts], "o-", label="ES")
plt.xticks(counts)
plt.xlabel("workers")
plt.ylabel("speed-up over 1 worker")
plt.title(f"your machine: {cores} core(s)")
plt.legend()
plt.show()

# %% [markdown]
# **What limits each.** Between N workers and N times the speed stand:
#
# * **The machine** (the bare games' curve): N processes share the memory bus and the caches,
#   a CPU may run slower with more cores busy, and other programs take cores away.
# * **Dispatch and the slowest chunk.** Each round the master hands work to N processes and
#   waits for the last one. These costs weigh more the less work each worker gets (try
#   `members, steps = 32, 60`).
# * **Threads you did not ask for.** NumPy's linear algebra (BLAS) may start a thread per core
#   in every process, all competing for the same cores. By default joblib allows each worker
#   process `max(cpu_count() // n_jobs, 1)` of them (joblib 1.6.0, module
#   `joblib._parallel_backends`, line 230). The cell gives every process one:
#   `threadpool_limits(1)` here, `parallel_config(backend="loky", inner_max_num_threads=1)`
#   in the workers.
# * **Communication**, once the workers are other machines. This cell sends each worker its
#   members' parameters (`params[a:b]`), `parallel_returns` the center; in the paper's
#   Algorithm 2 the workers exchange only scalar returns and each rebuilds the noise and the
#   update from the seeds (notebook 03, sections 5 and 6).
