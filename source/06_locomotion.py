# %% [markdown]
# # 06 · Extras [++]: ES learns to run (MuJoCo HalfCheetah)
#
# The paper (Salimans et al. 2017) tests ES on simulated robots in MuJoCo (its section 4.1)
# and on Atari. Mania, Guy and Recht (2018, arXiv:1803.07055) showed that a **linear**
# policy learns the robots' tasks with **augmented random search** (ARS), whose version V2
# normalizes the observations (their code,
# [`4c8e24e:code/ars.py`](https://github.com/modestyachts/ARS/blob/4c8e24e0a99cf811030e90680fc29eb94fae8cdd/code/ars.py)
# line 362). Their Table 1 sets each task's return to reach (Hopper 3,120, HalfCheetah 3,430).
# Here ES teaches gymnasium's `HalfCheetah-v5` (a 2D cheetah: 17 observations, 6 joint torques
# in `[-1, 1]`, 1,000 steps an episode, reward = forward speed less a small cost on the
# torques) to run past 3,430, with three functions you write: `merge_stats`, `mean_std` and
# `linear_policy`.
#
# The training loop around them (`classroom.mujoco_runs`, given) plays every member of a
# generation in 2 worker processes, one episode each; it calls your `linear_policy` at every
# step, your `mean_std` once a generation and your `merge_stats` once per member. Its update is
# notebook 04's `es_step` with no weight decay, on mirrored noise.
#
# **What it needs:** the `mujoco` package (`pip install "mujoco==3.3.7"`, in
# `requirements.txt`), and for section 5's video an OpenGL context without a screen:
# on Linux `MUJOCO_GL=egl` (set below) with the EGL and GL libraries and, without a GPU,
# Mesa's software renderer (Debian/Ubuntu: `apt-get install libegl1 libgl1 libgl1-mesa-dri`),
# or `MUJOCO_GL=osmesa` with `libosmesa6`. On macOS, leave `MUJOCO_GL` unset.

# %%
import os
import sys

if sys.platform.startswith("linux"):
    os.environ.setdefault("MUJOCO_GL", "egl")      # offscreen rendering (section 5); read when MuJoCo renders

import matplotlib.pyplot as plt
import numpy as np

from classroom import check
from classroom.mujoco_runs import RunConfig, StudentCode, TASKS, load_metrics, play, rollout_frames, save_gif, train

FAST = os.environ.get("ES_COURSE_FAST") == "1"

# %% [markdown]
# ## 1. Why normalize observations, and how many workers agree on it
#
# A linear policy computes `tanh(x @ W + b)`; ES perturbs every weight by the same `sigma`.
# HalfCheetah's observation mixes joint angles with joint velocities whose spread is many times
# larger, so one `sigma` is too large for some inputs' weights and too small for others'.
# OpenAI's starter code (linked in notebook 00) feeds its MuJoCo policies
# `clip((obs - mean) / std, -5, 5)`
# ([`951f199:es_distributed/policies.py` line 145](https://github.com/openai/evolution-strategies-starter/blob/951f19986921135739633fb23e55b2075f66c2e6/es_distributed/policies.py#L145)),
# `mean` and `std` measured on states of earlier rollouts, and so does this notebook: every
# input then has a comparable scale.
#
# **Many workers, one set of statistics.** Workers do not send the states back (1,000 a member):
# each member reports its states' **count**, **sum** and **sum of squares** (vectors of 17
# floats), and the master adds them up. Sums and counts can be added; means and standard
# deviations cannot (the mean of two workers' means is wrong when they saw different numbers
# of states).
#
# **Frozen within a generation.** Every member of generation `g` normalizes with the
# statistics of generations `0 .. g-1`; generation `g`'s states enter only after it ends, merged
# in member order: the run is the same for any number of workers.
#
# **`merge_stats(a, b)`**
# * **Inputs:** `a` and `b`, each a tuple `(count, total, squares)`: `count` an int (states
#   seen), `total` and `squares` float64 `(obs_dim,)`, the sum of those states and of their
#   elementwise squares.
# * **Returns:** the tuple `(count, total, squares)` of all states of `a` and of `b`, `count` an
#   int, `total` and `squares` float64 arrays; leave `a` and `b` as they are (`total_a += total_b`
#   would change the caller's `a`).
# * **Example:** `a = (2, np.array([1., 4.]), np.array([1., 10.]))` (states `[0, 1]`, `[1, 3]`),
#   `b = (1, np.array([2., 2.]), np.array([4., 4.]))` (state `[2, 2]`):
#   `(3, np.array([3., 6.]), np.array([5., 14.]))`.
# * **The check:** the count an exact int, the sums float64 and within a relative error of
#   1e-12, on workers that saw very different numbers of states, then three workers merged in a
#   row; and `a` and `b` left as they were.

# %%
def merge_stats(a, b):
    """(count, total, squares) of the states of a and of b."""
    ### BEGIN SOLUTION
    count_a, total_a, squares_a = a
    count_b, total_b, squares_b = b
    return count_a + count_b, np.add(total_a, total_b), np.add(squares_a, squares_b)
    ### END SOLUTION


# %%
check.merge_stats(merge_stats)

# %% [markdown]
# **`mean_std(count, total, squares)`**
# * **Inputs:** one `(count, total, squares)` as `merge_stats` returns it, unpacked. The loop
#   merges into `total` and `squares` afterwards: leave them as they are (`total / count`, not
#   `total /= count`).
# * **Returns:** the pair `(mean, std)`, each float64 `(obs_dim,)`: `mean = total / count`,
#   `var = squares / count - mean ** 2` (the population variance: divide by `count`, not
#   `count - 1`), and `std = sqrt(max(var, 1e-4))`: a state variable that never moves has no
#   variance, and dividing by it would blow up (rounding can even leave its `var` a little below
#   zero, where `sqrt` gives `nan`: floor before the square root).
# * **Before any state (`count == 0`):** `mean` all zeros and `std` all ones (the first
#   generation sees the raw observations).
# * **Example:** `(3, np.array([3., 6.]), np.array([5., 14.]))`: `mean = [1, 2]`,
#   `var = [5/3 - 1, 14/3 - 4] = [0.6667, 0.6667]`, `std = [0.8165, 0.8165]`.
# * **The check:** relative error at most 1e-6 and float64, on statistics with a constant
#   state variable (its `var` rounded below zero) and one of small variance (where `sqrt(var + 1e-4)` is off), and on `count == 0`; and
#   `total` and `squares` left as they were.

# %%
def mean_std(count, total, squares):
    """(mean, std) of the states summarised by (count, total, squares)."""
    ### BEGIN SOLUTION
    total, squares = np.asarray(total, dtype=np.float64), np.asarray(squares, dtype=np.float64)
    if count == 0:
        return np.zeros_like(total), np.ones_like(total)
    mu = total / count
    return mu, np.sqrt(np.maximum(squares / count - mu * mu, 1e-4))
    ### END SOLUTION


# %%
check.mean_std(mean_std)

# %% [markdown]
# ## 2. A linear policy for many members at once
#
# A member's parameters are one flat vector of `obs_dim * act_dim + act_dim` numbers (108 for
# HalfCheetah), laid out as `es.policies.MLPPolicy(obs_dim, act_dim, hidden=())` does: first the
# weights `W`, shape `(obs_dim, act_dim)`, **row by row** (`W[i, j]`, from observation `i` to
# action `j`, is entry `i * act_dim + j`), then the biases `b`, `(act_dim,)`. One call serves
# many episodes: row `k` of `params` plays the episode whose observation is row `k` of `obs`.
#
# **`linear_policy(params, obs, mean, std, low, high)`**
# * **Inputs:** `params`, float32 `(k, obs_dim * act_dim + act_dim)`, one member per row;
#   `obs`, float64 `(k, obs_dim)`, the raw observations; `mean`, `std`, float64 `(obs_dim,)`,
#   the frozen statistics of `mean_std`; `low`, `high`, float32 `(act_dim,)`, the action range.
# * **Returns:** the actions, a float32 or float64 array `(k, act_dim)`, row `k` (leave the
#   arguments as they are: the loop passes the same `mean` and `std` at every step):
#
# $$x_k = \text{clip}\Big(\frac{\text{obs}_k - \text{mean}}{\text{std}}, -5, 5\Big), \qquad
#   a_k = \text{low} + \frac{\tanh(x_k W_k + b_k) + 1}{2}\,(\text{high} - \text{low})$$
#
#   The clip bounds the input of a state unlike any seen; `tanh` and the scaling keep every
#   action in range, for any parameters.
# * **Batched:** one operation does all rows: `np.einsum("ki,kij->kj", x, W)` with `W` of shape
#   `(k, obs_dim, act_dim)`, or `(x[:, None, :] @ W)[:, 0, :]` (`@` adds in another order: the
#   expected output below is einsum's). A `linear_policy` that
#   calls `es.policies` gets no points from the grader (the check here does not look for that).
# * **The check:** actions within `1e-5 * (high - low)` of the course's (it computes in float32,
#   as `es.policies.MLPPolicy` does; float64 is fine), for a random number of rows, on
#   observations far enough from the mean that the clip matters, and an asymmetric action range;
#   then one row (shape `(1, act_dim)`: keep the row axis); then it counts the lines of your own code that run for 8 rows and for 64: a line run once per
#   row (a `for` loop, a comprehension, `map` or `np.vectorize` over your own function) fails;
#   and every argument left as it was.

# %%
def linear_policy(params, obs, mean, std, low, high):
    """Actions (k, act_dim) of rows of params (k, obs_dim * act_dim + act_dim) on raw obs (k, obs_dim)."""
    ### BEGIN SOLUTION
    rows, obs_dim = obs.shape
    act_dim = len(low)
    x = np.clip((obs - mean) / std, -5.0, 5.0)
    weights = params[:, :obs_dim * act_dim].reshape(rows, obs_dim, act_dim)
    biases = params[:, obs_dim * act_dim:]
    squashed = np.tanh(np.einsum("ki,kij->kj", x, weights) + biases)
    return low + 0.5 * (squashed + 1.0) * (high - low)
    ### END SOLUTION


# %%
check.linear_policy(linear_policy)

# %% [markdown]
# Your policy at work: three episodes of 1,000 steps with all-zero parameters (every action the
# middle of its range, no torque) and with random parameters (`sigma = 0.5`, on raw observations:
# `np.zeros(17)` as `mean`, `np.ones(17)` as `std`). The cell splits each return: the forward
# reward less the torque cost (0.1 times the actions' sum of squares, every step). **Expected
# output:** returns near 0 for the zero policy. For the random ones, -494, -666 and -1560 (the
# solution's, which sums with `np.einsum`; these episodes are chaotic: sums in another order,
# such as `@`'s, or a float32 policy get others): torque costs of 515,
# 515 and 532, near their most ($0.1 \cdot 6 = 0.6$ a step), and forward rewards of +21, -151
# and -1028: two of the three cheetahs run backwards.

# %%
env_id, shift, threshold = TASKS["halfcheetah"]
dim = 17 * 6 + 6
rng = np.random.default_rng(0)
show = lambda values: ", ".join(f"{v:.1f}" for v in values)      # noqa: E731
for name, params in (("zeros", np.zeros((3, dim), np.float32)),
                     ("random", (0.5 * rng.standard_normal((3, dim))).astype(np.float32))):
    torques = np.zeros(3)      # each episode's torque cost (HalfCheetah's episodes all run to the end)

    def policy_and_cost(*args):
        actions = linear_policy(*args)
        torques[:] += 0.1 * np.sum(np.square(actions), axis=1)
        return actions
    returns, lengths, _, _ = play(env_id, policy_and_cost, params, [0, 1, 2], np.zeros(17), np.ones(17))
    print(f"{name:>6}: returns {show(returns)} = forward {show(returns + torques)} - torques {show(torques)}; "
          f"{lengths[0]} steps each")

# %% [markdown]
# ## 3. Hopper's alive bonus, and why training removes it
#
# Hopper (and Walker2d, Ant, Humanoid) pays a bonus for every step the robot has not fallen:
# 1 a step in `Hopper-v5`, up to 1,000 an episode. A policy that learns to **stand still**
# collects it all, and ES can get stuck there: stepping forward risks a fall that ends the
# episode. Mania et al. train on the return **less the bonus**, a `shift` of 1 a step for
# Hopper (their code,
# [`4c8e24e:code/ars.py`](https://github.com/modestyachts/ARS/blob/4c8e24e0a99cf811030e90680fc29eb94fae8cdd/code/ars.py)
# lines 77 and 399), and so does the loop; every score it reports or compares with the
# threshold adds the bonus back: gymnasium's own return. HalfCheetah cannot fall (its episodes
# all last 1,000 steps): no bonus, shift 0. Below, the zero policy on Hopper. **Expected
# output:** it falls after 129 to 148 steps; its training fitness (the return less the bonus)
# is between -10.9 and -0.3.

# %%
hopper_id, hopper_shift, hopper_threshold = TASKS["hopper"]
r, n, _, _ = play(hopper_id, linear_policy, np.zeros((3, 11 * 3 + 3), np.float32), [0, 1, 2], np.zeros(11),
                  np.ones(11), shift=hopper_shift)
for k in range(3):
    print(f"Hopper, zero policy, seed {k}: {n[k]} steps, gymnasium's return {r[k] + hopper_shift * n[k]:.1f} "
          f"= {hopper_shift * n[k]:.0f} of alive bonus + {r[k]:.1f} (the training fitness)")

# %% [markdown]
# ## 4. Train your cheetah
#
# The settings (`RunConfig`): 64 members (32 mirrored pairs), `sigma = 0.03`, Adam with step
# 0.01, one episode per member (every member and the center on the same seed in a
# generation), 2 worker processes, at most `max_generations=300` generations (if a run ends
# there without passing, add `max_generations=600` to the `RunConfig(...)` call and re-run
# the cell: the run goes on). Training stops when the center's episode reaches 3,430 and
# the center then averages at least 3,450 on 20 held-out episodes (seeds from 1,000,000). The
# grader plays 20 other episodes, whose mean can fall below 3,430 (one agent's return varies
# from episode to episode): its rule is in section 5.
#
# The solution's run (these settings, seed 0) stopped after 73 updates and 4.8 million steps
# (the members' and the center's episodes; the held-out episodes of its checks are not
# counted); the cell prints yours. A call stops after `minutes=20.0` of wall time, and re-running the
# cell resumes the run where it stopped (`cheetah-run/checkpoint.npz`). **Before it trains, the
# cell runs this notebook's three checks again** and refuses to start while one fails.

# %%
RUN_DIR = "cheetah-run"     # hand in this folder next to the notebook
SEED = 0
config = RunConfig(task="halfcheetah", seed=SEED, minutes=20.0)
code = StudentCode(merge_stats, mean_std, linear_policy)
if FAST:   # the grader's fast mode: one small generation in a temporary folder; RUN_DIR is left alone
    import tempfile
    from dataclasses import replace
    with tempfile.TemporaryDirectory() as tmp:
        print(train(code, tmp, replace(config, population=4, max_generations=1, workers=1)))
else:
    check.ready("06_locomotion", globals())
    summary = train(code, RUN_DIR, config)
    print(f"{'reached' if summary['finished'] else 'not yet'}: {summary['updates']} updates, "
          f"{summary['steps']:,} steps, {summary['minutes']:.1f} minutes of training")

# %% [markdown]
# Your curve, read back from `cheetah-run/metrics.jsonl`, and the statistics your run merged.
# **Expected:** the population's mean climbs within the first generations; the center (one
# episode a generation, without noise) may lag at first, then runs ahead: in the solution's run
# it stayed below 11 up to generation 7, while the mean reached 312, and led from generation 9 on.

# %%
rows = load_metrics(RUN_DIR)
if rows:
    gens = [r["generation"] for r in rows]
    plt.plot(gens, [r["pop_mean"] for r in rows], label="population mean")
    plt.plot(gens, [r["pop_max"] for r in rows], label="best member", alpha=0.6)
    plt.plot(gens, [r["center_score"] for r in rows], ".", label="center")
    plt.axhline(threshold, color="k", lw=0.8, ls="--", label=f"threshold {threshold:.0f}")
    plt.xlabel(f"generation ({rows[-1]['seconds'] / 60:.1f} min of training, {rows[-1]['steps']:,} steps)")
    plt.ylabel("return of one 1,000-step episode")
    plt.legend()
    plt.show()
    saved = np.load(f"{RUN_DIR}/checkpoint.npz")
    print(f"{int(saved['count']):,} states merged; std per state variable from {saved['obs_std'].min():.2f} to "
          f"{saved['obs_std'].max():.2f}")
else:
    print(f"no {RUN_DIR}/metrics.jsonl yet: train first")

# %% [markdown]
# ## 5. Watch it run
#
# One episode of your agent (`seed=0`, its first `steps=300` steps, every third one drawn),
# rendered offscreen through the model's `track` camera and saved as `cheetah-run/cheetah.gif`.

# %%
if not FAST and os.path.exists(f"{RUN_DIR}/checkpoint.npz"):
    import time
    from IPython.display import Image, display
    t0 = time.perf_counter()
    frames = rollout_frames(RUN_DIR, linear_policy, seed=0, steps=300, every=3, width=240, height=150)
    gif = save_gif(frames, f"{RUN_DIR}/cheetah.gif", fps=7)
    print(f"{len(frames)} frames rendered with MUJOCO_GL={os.environ.get('MUJOCO_GL')} in "
          f"{time.perf_counter() - t0:.1f} s; {gif} is {os.path.getsize(gif) / 1e6:.2f} MB")
    display(Image(filename=str(gif)))

# %% [markdown]
# The grader plays your checkpoint's center with the course's policy and your run's frozen
# statistics on 20 episodes, on seeds it chooses; it passes unless their mean is significantly
# below 3,430: mean + 1.645 standard errors must reach it (a one-sided test at 5%).

# %%
check.locomotion_agent(RUN_DIR)

# %% [markdown]
# ## 6. What transfers from the paper, and what does not at this scale
#
# * **Observation normalization transfers**, as OpenAI's starter code does it: workers send
#   the count, sum and sum of squares of their states
#   ([`951f199:es_distributed/es.py` lines 379-381](https://github.com/openai/evolution-strategies-starter/blob/951f19986921135739633fb23e55b2075f66c2e6/es_distributed/es.py#L379-L381)),
#   the master adds them up (line 216) and sends the parameters with the statistics in every
#   task (lines 16 and 173-176). Differences include: the starter records the states of a random
#   1% of its rollouts (line 304; `calc_obstat_prob` 0.01 in
#   [`951f199:configurations/humanoid.json` line 3](https://github.com/openai/evolution-strategies-starter/blob/951f19986921135739633fb23e55b2075f66c2e6/configurations/humanoid.json#L3)),
#   this loop every member's; it floors the variance at 1e-2, a std of at least 0.1 (line 42),
#   where `mean_std` floors it at 1e-4; and it adds the sums up in float32 (lines 27-28), this
#   loop in float64.
# * **The network size and the scale do not.** The paper's MuJoCo policies are multilayer
#   perceptrons with two hidden layers of 64 `tanh` units (its section 4.1): 5,702 parameters for
#   HalfCheetah (`es.policies.MLPPolicy(17, 6, (64, 64)).num_params`), against your 108; with 64
#   members, ES's gradient estimate in 5,702 dimensions is far coarser than in 108. The paper ran
#   up to 1,440 parallel workers (its section 2.1); in its Algorithm 2, workers exchange only
#   scalar returns and rebuild each other's perturbations from known seeds (notebook 03). This
#   loop has a master that sends its 2 worker processes each member's parameters, noise
#   included; the starter's master sends the center, and its workers draw the noise (lines
#   355-358).
# * **Hopper and the harder tasks** need the alive bonus shifted out (section 3) and more
#   episodes: in a new cell, under `if not FAST:` as in the training cell, train with
#   `config = RunConfig(task="hopper", population=16, sigma=0.025, learning_rate=0.02,
#   max_generations=1000)` into a folder of its own (`train(code, "hopper-run", config)`,
#   leaving `RUN_DIR` as it is): the Hopper settings of the course's reference
#   package (in the course repository, not in this release), where the center also plays 5
#   episodes a generation and a run starts again after 3M env steps without the goal. This loop
#   does neither and was not measured on Hopper. Such a run is yours to try, not graded: the
#   hand-in stays `cheetah-run/`.
