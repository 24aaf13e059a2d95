# %% [markdown]
# # 01 · ES in one thread solves CartPole-v1 [10 points with notebook 00]
#
# A linear policy is plenty for CartPole: 4 observations -> 2 action logits, 10 parameters in
# the layout of `es.policies.MLPPolicy(4, 2, ())` (the 4x2 weights row by row, then the 2
# biases). You write the sampling (antithetic noise), an optimizer (Adam) and the training
# loop; `es` provides a batched CartPole, so that a whole population plays at once.
#
# "Solved" = the mean return of your final parameters is at least 475 on gymnasium's
# `CartPole-v1` with seeds 1000..1019.
#
# The two helpers below are given. `cartpole_returns(params, episode_seed)`: `params` is
# `(population, 10)` (any float; played as float32), every row plays one episode from the same
# start state `episode_seed` (an int); returns float64 `(population,)`, each between 1 and 500.
# `center_returns(center, episode_seeds)`: one parameter vector `(10,)` on each start state in
# `episode_seeds`; returns float64 `(len(episode_seeds),)`.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

from classroom import check
from es.envs.cartpole import run_cartpole_batch
from es.policies import MLPPolicy

FAST = os.environ.get("ES_COURSE_FAST") == "1"
policy = MLPPolicy(4, 2, hidden=())


def cartpole_returns(params, episode_seed):
    """Return of each row of `params` (population, 10) on one shared start state."""
    params = np.asarray(params, dtype=np.float32)
    rows = np.arange(len(params))
    returns, _ = run_cartpole_batch(policy, params, rows, np.full(len(params), episode_seed))
    return returns


def center_returns(center, episode_seeds):
    """Returns of one parameter vector on several start states, in one batch."""
    seeds = np.asarray(episode_seeds)
    returns, _ = run_cartpole_batch(policy, np.asarray(center, np.float32)[None], np.zeros(len(seeds), int), seeds)
    return returns


# %% [markdown]
# ## 1. Antithetic noise
#
# **`antithetic_noise(rng, population, dim)`**
# * **Inputs:** `rng`, a `np.random.Generator`; `population`, an even int; `dim`, an int.
# * **Returns:** a float64 array `(population, dim)`: row `2k` is `+eps_k`, row `2k + 1` is
#   `-eps_k`.
# * **The random stream:** draw the `eps_k` with **one** call,
#   `rng.standard_normal((population // 2, dim))` (row `k` is `eps_k`). Your training loop
#   draws from the same generator, so any other draw here changes the run, and your curve in
#   section 3 is no longer the expected one.
# * **Example:** `population = 4`, `dim = 2`, and the call returns `[[1, 2], [3, 4]]`: the
#   noise is `[[1, 2], [-1, -2], [3, 4], [-3, -4]]`.
# * **The check:** the dtype; rows `2k` and `2k + 1` mirrored (not two blocks, all `+eps` then all
#   `-eps`: pairs stay together when workers split the population into chunks), pairs
#   different from each other, the same seed giving the same noise and another seed other
#   noise, and the `eps_k` those of the one call above. It sees only what you return, not
#   what else you draw: the expected curve of section 3 does.
#
# <details><summary>Hint: interleaving</summary>
#
# Draw `half = rng.standard_normal((population // 2, dim))` once; `out[0::2] = half` and
# `out[1::2] = -half` put each pair side by side.
# </details>

# %%
def antithetic_noise(rng, population, dim):
    """(population, dim): row 2k is +eps_k and row 2k + 1 is -eps_k, the eps_k drawn in one
    call, rng.standard_normal((population // 2, dim)), and nothing else drawn from rng."""
    ### BEGIN SOLUTION
    half = rng.standard_normal((population // 2, dim))
    out = np.empty((population, dim))
    out[0::2], out[1::2] = half, -half
    return out
    ### END SOLUTION


# %%
check.antithetic_noise(antithetic_noise)

# %% [markdown]
# ## 2. Adam, for gradient *ascent*
#
# **`adam_update(theta, grad, state, lr)`**
# * **Inputs:** `theta`, the parameters, float `(dim,)` (float32 or float64); `grad`, the
#   gradient estimate `(dim,)` to *climb*; `state`, `None` on the first call and afterwards
#   whatever your previous call returned; `lr`, the step size (a float).
# * **Returns:** the pair `(new theta (dim,), new state)`; the state is yours to shape (it must
#   hold `m`, `v` and `t`; a dict `{"m": m, "v": v, "t": t}` is simplest).
# * **The update**, with `t` the number of calls so far (this one included), `beta1 = 0.9`,
#   `beta2 = 0.999`, `epsilon = 1e-8`, and `m`, `v` starting at zero:
#
# $$m_t = \beta_1 m_{t-1} + (1 - \beta_1)\, g, \qquad v_t = \beta_2 v_{t-1} + (1 - \beta_2)\, g^2,
#   \qquad \theta_t = \theta_{t-1} + \text{lr}\,\frac{\sqrt{1 - \beta_2^t}}{1 - \beta_1^t}\,
#   \frac{m_t}{\sqrt{v_t} + \epsilon}$$
#
#   (Kingma and Ba's bias corrections folded into the step size; *plus*: ES climbs).
# * **Worked example:** the first step moves every parameter by almost exactly `lr` in the
#   direction of its gradient's sign: `m = 0.1 g`, `v = 0.001 g^2`, and the step is
#   `lr * sqrt(0.001) / 0.1 * 0.1 g / (sqrt(0.001) |g| + 1e-8)`. With `theta = [0, 0]`,
#   `grad = [2, -0.5]`, `lr = 0.1`: **`[0.1, -0.1]`** (to 1e-6).
# * **The check:** three steps in a row from `state = None`, each parameter within `lr / 1000`
#   of the right values. One parameter's gradients are all $0$: there `m = v = 0`, and without
#   `epsilon` the step is $0 / 0$ (nan). Another's are small, where `epsilon` inside the square
#   root, `np.sqrt(v + 1e-8)`, moves the step too far. It cannot see AMSGrad (a running maximum
#   of `v`): over three steps `v` shrinks too little for that to move a step by `lr / 1000`
#   (notebook 04's check, over six updates, does).

# %%
def adam_update(theta, grad, state, lr):
    """One Adam step up the gradient: (new theta (dim,), {"m": m, "v": v, "t": t}); state is
    None on the first call; betas 0.9 and 0.999, epsilon 1e-8, bias corrections in the step."""
    ### BEGIN SOLUTION
    if state is None:
        state = {"m": np.zeros_like(grad), "v": np.zeros_like(grad), "t": 0}
    t = state["t"] + 1
    m = 0.9 * state["m"] + 0.1 * grad
    v = 0.999 * state["v"] + 0.001 * grad * grad
    step = lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m / (np.sqrt(v) + 1e-8)
    return theta + step, {"m": m, "v": v, "t": t}
    ### END SOLUTION


# %%
check.adam_update(adam_update)

# %% [markdown]
# ## 3. The training loop
#
# **`train_cartpole(seed, generations=60, population=256, sigma=0.2, lr=0.3, log=None,
# optimizer=None, shaping=None)`** returns the trained parameters (the `MLPPolicy(4, 2, ())`
# layout above). `log`, when given, is a list: append the center's mean return (a float) at
# the start of each generation, so that a run that stops after `k` updates logs `k + 1`
# values, the first the untrained center's. `optimizer`, when given, is a function like your
# `adam_update`. `shaping`, when given, is a function `returns -> weights` used in step 5
# instead of the z-score (section 5 passes notebook 00's ranks).
#
# Start from `center = np.zeros(10)` and `rng = np.random.default_rng(seed)`; every random
# number of the run comes from `rng`, in this order, so the same seed gives the same run. Each
# generation:
#
# 1. `starts = rng.integers(0, 2**31, 128)`: the start states (episode seeds) the center plays.
# 2. `center_scores = center_returns(center, starts)`; append `center_scores.mean()` to `log`
#    (if given), **before** the update.
# 3. Stop (`break`) if `center_scores.min() >= 500`: the center balanced to the end from every
#    start.
# 4. `noise = antithetic_noise(rng, population, 10)`; evaluate `center + sigma * noise` with
#    `cartpole_returns` on `starts[0]` (every member on the same start state: common random
#    numbers).
# 5. z-score the returns, `z = (returns - returns.mean()) / (returns.std() + 1e-8)` (or `z =
#    shaping(returns)` when `shaping` is given), estimate the gradient `grad = noise.T @ z /
#    (population * sigma)` and update: plain SGD, `center = center + lr * grad`, when
#    `optimizer` is `None`; otherwise `center, state = optimizer(center, grad, state, lr)`,
#    with `state = None` before the first generation.
#
# After the last generation (or the `break`), return the center.
#
# **The check** trains from two seeds it draws, one of them twice, on the defaults: the same seed
# must give the same parameters, the two seeds different ones, and the loop must neither seed
# nor draw from the global `np.random` state. Then it holds your loop to the five steps (each
# parameter within 1e-6 of the answer key's loop): the center after 3 updates
# (`train_cartpole(seed, 3)`), the centers both full runs return, and a run at `lr = 0.05`
# whose center reaches a mean of 475 before it solves (the stop of step 3). Last, each run
# must solve CartPole-v1 (above). It does not look at `log`, `optimizer` or `shaping`: the
# expected outputs do, of section 3 (`log`), section 4 (`optimizer`) and section 5
# (`shaping`).
#
# Each notebook runs on its own: notebook 00's `centered_ranks` and `es_gradient` are not
# defined here; the gradient is the one line of step 5, and section 5 compares z-scores with
# ranks.
#
# <details><summary>Hint: the whole loop</summary>
#
# A `for g in range(generations)` loop with the five steps in order; `break` at step 3.
# </details>

# %%
def train_cartpole(seed, generations=60, population=256, sigma=0.2, lr=0.3, log=None, optimizer=None,
                   shaping=None):
    """The trained parameters (10,): the five steps above, every random number from
    np.random.default_rng(seed) in their order; log (a list) gets the center's mean return each
    generation, before the update; SGD unless optimizer is given; shaping replaces the z-score."""
    ### BEGIN SOLUTION
    rng = np.random.default_rng(seed)
    center = np.zeros(policy.num_params)
    state = None
    for g in range(generations):
        starts = rng.integers(0, 2 ** 31, 128)
        center_scores = center_returns(center, starts)
        if log is not None:
            log.append(center_scores.mean())
        if center_scores.min() >= 500:
            break
        noise = antithetic_noise(rng, population, policy.num_params)
        returns = cartpole_returns(center + sigma * noise, int(starts[0]))
        weights = (returns - returns.mean()) / (returns.std() + 1e-8)
        if shaping is not None:
            weights = shaping(returns)
        grad = noise.T @ weights / (population * sigma)
        if optimizer is None:
            center = center + lr * grad
        else:
            center, state = optimizer(center, grad, state, lr)
    return center
    ### END SOLUTION


# %% [markdown]
# Before the check: your loop from seed 0 on the defaults (SGD), plotted against the curve the
# five steps give (`EXPECTED_CURVE`, dashed). The cell says whether yours is the same (to
# `atol=0.05`) and how many updates the run took (`updates_to_solve`, used again below).
#
# **Expected output:** `your curve, seed 0: [9.4, 94.7, 284.0, 292.4, 90.9, 398.9, 26.9, 500.0]`,
# `the same as the expected curve: True`, `solved after 7 updates`.
#
# Where your curve departs from the dashed one is where your loop departs from the five steps.

# %%
def updates_to_solve(log):
    """The updates a run made before it stopped solved (its log holds one value more), or None
    when it ran out of generations."""
    return len(log) - 1 if log[-1] >= 500 else None


EXPECTED_CURVE = [9.4, 94.7, 284.0, 292.4, 90.9, 398.9, 26.9, 500.0]
curve = []
params = train_cartpole(0, log=curve)
plt.plot(curve, marker="o", label="your loop, seed 0")
plt.plot(EXPECTED_CURVE, "k--", alpha=0.5, label="expected (the five steps)")
plt.xlabel("generation")
plt.ylabel("center's mean return (128 start states)")
plt.title("CartPole-v1, plain SGD")
plt.legend()
plt.show()
print("your curve, seed 0:", [round(float(c), 1) for c in curve])
print("the same as the expected curve:", len(curve) == len(EXPECTED_CURVE) and np.allclose(curve, EXPECTED_CURVE, atol=0.05))
print(f"solved after {updates_to_solve(curve)} updates")

# %%
check.train_cartpole(train_cartpole)   # trains from two seeds it draws, and one of them twice

# %% [markdown]
# ## 4. Your Adam at work
#
# The same loop, seed 0, stepping with your `adam_update` at `lr = 0.1` instead of SGD at
# `lr = 0.3`. Adam's first steps move every parameter by about `lr` (the worked example of
# section 2), whatever the gradient's size, so its `lr` is in parameter units, not a multiple
# of the gradient.
#
# **Expected output:** `Adam's curve, seed 0: [9.4, 13.9, 109.1, 150.3, 281.4, 500.0]`,
# `solved after 5 updates`.

# %%
adam_curve = []
train_cartpole(0, lr=0.1, log=adam_curve, optimizer=adam_update)
plt.plot(curve, marker="o", label="SGD, lr 0.3")
plt.plot(adam_curve, marker="s", label="your adam_update, lr 0.1")
plt.xlabel("generation")
plt.ylabel("center's mean return (128 start states)")
plt.legend()
plt.show()
print("Adam's curve, seed 0:", [round(float(c), 1) for c in adam_curve])
print(f"solved after {updates_to_solve(adam_curve)} updates")


# %% [markdown]
# ## 5. z-scores against ranks, measured
#
# The cell trains seeds 0..9 (three seeds in fast mode) with z-scores and with notebook 00's
# centered ranks (`ranks` below, written another way), everything else the same (SGD), and
# prints the updates each run took (`None`: not solved in `generations=60`). Ranks spread
# evenly over $[-0.5, 0.5]$, a standard deviation of about $1/\sqrt{12} \approx 0.29$, where
# z-scores have $1$: the third line gives ranks `lr = 0.3 * sqrt(12)`, weights with the same
# spread as the z-scores'.
#
# **Expected output:**
# ```
# updates to solve, seeds 0..9
#              z-scores, lr 0.30: [7, 2, 8, 7, 7, 6, 5, 2, 8, 8]
#        centered ranks, lr 0.30: [11, 10, 12, 11, 11, 11, 12, 11, 12, 9]
#        centered ranks, lr 1.04: [19, 14, 20, 20, 28, 22, 22, 14, 17, 14]
# ```
# On these seeds z-scores solve CartPole in fewer updates than ranks at either `lr`, and the
# larger `lr` makes ranks slower, not faster: the spread of their weights is not what ranks
# lack.


# %%
def ranks(returns):
    """Centered ranks in [-0.5, 0.5], tied returns sharing the mean of their ranks."""
    values, inverse, counts = np.unique(returns, return_inverse=True, return_counts=True)
    mean_rank = np.cumsum(counts) - (counts + 1) / 2          # the mean 0-based rank of each distinct return
    return mean_rank[inverse] / (len(returns) - 1) - 0.5


seeds = range(3 if FAST else 10)
print(f"updates to solve, seeds {seeds[0]}..{seeds[-1]}")
for name, shaping, lr in (("z-scores", None, 0.3), ("centered ranks", ranks, 0.3),
                         ("centered ranks", ranks, 0.3 * np.sqrt(12))):
    counts = []
    for seed in seeds:
        log = []
        train_cartpole(seed, lr=lr, log=log, shaping=shaping)
        counts.append(updates_to_solve(log))
    print(f"{name + f', lr {lr:.2f}':>31}: {counts}")

# %% [markdown] tags=["question:shaping"]
# **Inline question 1.** Ranks are the default in notebooks 00 and 04 (Pong), z-scores here.
# From what the cell above measured and what you know of CartPole's returns, when would you
# choose each?

# %% [markdown] tags=["student_only", "answer:shaping"]
# **Your answer:** *(write it here: your instructor reads it; it earns no points from the checks)*

# %% [markdown] tags=["solution_only", "reference:shaping"]
# **Reference answer:** Z-scores keep how much better a member did: on CartPole a member that
# balances to the end while the rest of the population falls early gets a large weight, so the
# step follows the few members that found the trick; there the cell above measured z-scores
# ahead. Ranks keep only the order: the same for any increasing rescaling of the reward, and one
# lucky episode gets no more than the top place, where its z-score can take most of the step.
# That matters where returns are heavy-tailed or one episode's luck is large, at the cost of
# flattening real differences: there ranks are the safer default.
