# %% [markdown]
# # 00 · Evolution Strategies from scratch
#
# ES needs no backpropagation: perturb the parameters with Gaussian noise, see which
# perturbations scored better, and move towards them. With `n` perturbations
# `eps_i ~ N(0, I)` of size `sigma` and their (shaped) scores `w_i`, the gradient of the
# *smoothed* objective `E[F(theta + sigma * eps)]` is estimated by
#
# $$\nabla \approx \frac{1}{n\,\sigma} \sum_i w_i\, \varepsilon_i$$
#
# This notebook builds the two pieces (fitness shaping and the gradient estimate) and
# watches them find the top of the OpenAI blog's quadratic.
#
# **How the checks work.** Each function you write is followed by a check cell, e.g.
# `check.centered_ranks(centered_ranks)`. It calls your function on inputs drawn from a seed
# and compares what it returns with the right answers at a stated tolerance: it prints one
# line `OK ...`, or names the likely bug and the seed that repeats it
# (`check.centered_ranks(centered_ranks, seed=S)`). The grader runs the same checks on inputs
# of its own.
#
# ### Where the estimate comes from (the log-likelihood trick)
#
# ES searches with a Gaussian over parameters, `x ~ N(theta, sigma^2 I)`, and maximises
# `J(theta) = E_x[F(x)]`. The density's gradient is the density times the gradient of its
# log, `grad p = p grad log p`, so
#
# $$\nabla_\theta J = \int F(x)\, \nabla_\theta p(x \mid \theta)\, dx
#   = \mathbb{E}_x\big[F(x)\, \nabla_\theta \log p(x \mid \theta)\big],
# \qquad \nabla_\theta \log p(x \mid \theta) = \frac{x - \theta}{\sigma^2} = \frac{\varepsilon}{\sigma}$$
#
# with `x = theta + sigma * eps`. The gradient of a log-density, `grad log p`, is called the
# *score*, and this way of estimating a gradient the *score-function estimator*. Reinforcement
# learning knows it as REINFORCE (Williams 1992), where the distribution is the policy's over
# *actions* and each action's score is weighed by the return. ES applies it to a Gaussian over
# the *parameters* instead: the whole episode's return `F` plays the role of the reward, and
# no gradient of `F` (no backpropagation through the policy or the environment) is ever
# needed. Averaging `n` samples gives the formula above with `w_i = F(theta + sigma eps_i)`.
#
# ### Mirrored (antithetic) pairs
#
# ES draws the noise in pairs `+eps_k, -eps_k`. With `n = 2m` members, `m` pairs, the formula
# above becomes
#
# $$\hat g_{\text{pairs}} = \frac{1}{2m\,\sigma} \sum_{k=1}^{m}
#   \big[F(\theta + \sigma\varepsilon_k) - F(\theta - \sigma\varepsilon_k)\big]\,\varepsilon_k .$$
#
# Expand `F` around `theta` (Taylor, with `H` the Hessian: the matrix of `F`'s second
# derivatives at `theta`): `F(theta +- sigma eps) = F(theta) +- sigma eps^T grad F +
# sigma^2/2 eps^T H eps +- O(sigma^3)`. In the difference the constant `F(theta)` and the
# curvature term cancel, leaving `2 sigma eps^T grad F + O(sigma^3)`, so
# `g_pairs = (1/m) sum_k eps_k eps_k^T grad F + O(sigma^2)`: its only noise is how far the
# sample covariance of the `eps_k` is from the identity. Without pairs, the term
# `F(theta) / (n sigma) * sum_i eps_i` stays in the estimate: zero on average, but with a
# standard deviation of `|F(theta)| / (sigma sqrt(n))` per coordinate, which is large whenever
# the returns are large next to `sigma |grad F|` (section 2 measures it).
#
# ### Shaped weights: a baseline keeps the direction, ranks do not (and that is fine)
#
# ES rarely uses `F` itself as the weights. Subtracting a **baseline** `b` (`w_i = F_i - b`)
# changes nothing on average, because `E[b eps] = 0`: the estimate stays unbiased and only its
# variance changes. **Ranks** (section 1) are different: `w_i = u(F_i)`, an increasing
# function of `F` that depends on the whole population (the worst member gets -0.5, the best
# +0.5). On average the estimate then points along
#
# $$\mathbb{E}\big[u(F(\theta + \sigma\varepsilon))\,\varepsilon\big] / \sigma
#   = \nabla_\theta\, \mathbb{E}\big[u(F(\theta + \sigma\varepsilon))\big],$$
#
# the gradient of the smoothed *shaped* objective, where `u(F(x))` is, for a large population,
# the fraction of the current samples that `x` beats, minus one half. That is not `grad J`,
# and its direction differs from `grad J`'s in general: the estimate is no longer an unbiased
# estimate of `grad J`. Why that is fine:
#
# * Where `F` is close to linear within `sigma`, the directions agree exactly: if
#   `F(theta + sigma eps) = F(theta) + sigma g^T eps`, then `u(F)` depends on `eps` only
#   through `g^T eps`, and by the symmetry of the Gaussian `E[u(F) eps]` is parallel to `g`,
#   for *any* increasing `u`. Only the length changes (it no longer carries `F`'s units).
# * Where `F` curves within `sigma`, ranks climb the probability that a sample beats the
#   current population: still uphill for `F`, towards the same tops (an increasing transform
#   of `F` has the same maxima).
# * In exchange the step is immune to one lucky outlier, the same whether `F` is in points,
#   points cubed or dollars (any increasing transform of `F` trains identically), and sized
#   by the learning rate alone.
#
# Section 2 measures both facts on a quadratic with your functions.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

from classroom import check

FAST = os.environ.get("ES_COURSE_FAST") == "1"   # the autograder and CI set it

# %% [markdown]
# ## 1. Fitness shaping: centered ranks
#
# Raw returns make the step size depend on the reward's scale, and one lucky outlier can
# dominate. OpenAI's ES replaces each return by its *rank*, scaled to `[-0.5, 0.5]`: the worst
# member gets -0.5, the best +0.5, and the weights sum to zero. Tied returns share the mean of
# their ranks.
#
# **`centered_ranks(returns)`**
# * **Input:** `returns`, a 1-D array (or list) of `n >= 2` real numbers, ties allowed. Leave
#   it unchanged.
# * **Returns:** a float64 array of shape `(n,)`: with `rank_i` the 0-based rank of
#   `returns[i]` (0 for the smallest, `n - 1` for the largest; a group of tied returns all get
#   the mean of the ranks they occupy), `rank_i / (n - 1) - 0.5`.
# * **Worked example, with a tie:** `returns = [3.0, 1.0, 3.0, 2.0]`. Sorted: 1.0 (rank 0),
#   2.0 (rank 1), and the two 3.0 occupy ranks 2 and 3, so each gets 2.5. Ranks `[2.5, 0, 2.5,
#   1]`, divided by `n - 1 = 3`, minus 0.5: **`[0.3333, -0.5, 0.3333, -0.1667]`** (sum 0).
# * **The check:** relative error at most 1e-6 against the right weights, on distinct returns
#   with one huge outlier, then on returns with many ties.
#
# <details><summary>Hint: from returns to ranks</summary>
#
# `np.argsort(x)` gives the *indices* that sort `x`, not each element's rank: the ranks are
# `ranks[order] = np.arange(n)`. Then each group of equal returns gets its mean rank, and
# `ranks / (n - 1) - 0.5` spans `[-0.5, 0.5]`.
# </details>

# %%
def centered_ranks(returns):
    """Returns -> weights in [-0.5, 0.5] that sum to 0; ties share their mean rank."""
    ### BEGIN SOLUTION
    x = np.asarray(returns, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x))
    for value in np.unique(x):              # ties: the mean of their ranks
        tied = x == value
        ranks[tied] = ranks[tied].mean()
    return ranks / (len(x) - 1) - 0.5
    ### END SOLUTION


# %%
check.centered_ranks(centered_ranks)

# %% [markdown]
# ## 2. The gradient estimate
#
# **`es_gradient(noise, weights, sigma)`**
# * **Inputs:** `noise`, float64 `(n, dim)`, row `i` is `eps_i` (member `i` played
#   `theta + sigma * noise[i]`); `weights`, float64 `(n,)`, the shaped returns `w_i`;
#   `sigma > 0`, a float.
# * **Returns:** float64 `(dim,)`, the estimate `1 / (n sigma) * sum_i w_i eps_i`.
# * **Worked example:** `noise = [[1, 0], [0, 2]]`, `weights = [0.5, -0.5]`, `sigma = 0.5`:
#   `(0.5 * [1, 0] - 0.5 * [0, 2]) / (2 * 0.5)` = **`[0.5, -1.0]`**.
# * **The check:** relative error at most 1e-5, on random noise, weights and sigma.
#
# Keep the `1 / sigma`: it is what makes the estimate a gradient. With raw returns as the
# weights, each `F(theta + sigma eps)` differs from `F(theta)` by about `sigma eps^T grad F`,
# and only that difference survives the average (the `F(theta)` part averages to zero), so the
# `1 / sigma` cancels that `sigma` and the estimate tends to `grad F` whatever `sigma` is: drop
# it, and the step grows and shrinks with `sigma` (OpenAI's starter drops it; its users
# reported it). With
# ranks (section 1's weights) no `sigma` comes from the weights, so the step is `lr / sigma`
# times a size of its own (section 4): then a change of `sigma` changes the step either way,
# and `lr` must follow it.
#
# <details><summary>Hint: one matrix product</summary>
#
# The estimate is `1 / (n sigma) * sum_i w_i eps_i`: with `noise` as rows, that sum is
# `noise.T @ weights`.
# </details>

# %%
def es_gradient(noise, weights, sigma):
    """(1 / (population * sigma)) * sum_i weights[i] * noise[i]"""
    ### BEGIN SOLUTION
    return noise.T @ weights / (len(weights) * sigma)
    ### END SOLUTION


# %%
check.es_gradient(es_gradient)

# %% [markdown]
# Your estimate against the exact gradient. For `f(w) = -|w - solution|^2` the smoothed
# objective is `-|theta - solution|^2 - 2 sigma^2`, so its gradient is `-2 (theta - solution)`.
# With raw returns as the weights the estimate is unbiased; its error shrinks like
# `1 / sqrt(n)`. Mirrored pairs (`+eps`, `-eps`) remove the `F(theta)` term (the equation
# above): here `|f(theta)| / sigma = 39` against `|grad f| = 4`, so without pairs the error
# starts about ten times larger.
#
# **Expected output** (seed 0): relative error about 0.24, 0.03, 0.003 with mirrored pairs
# and about 2.5, 0.06, 0.02 without, for `n` = 100, 10,000, 1,000,000.

# %%
solution = np.array([0.5, -0.3])


def f(w):
    return -np.sum((w - solution) ** 2, axis=-1)


def mirrored(rng, n, dim):
    """Members 2k and 2k+1 get +eps_k and -eps_k (interleaved pairs, as everywhere in es)."""
    half = rng.standard_normal((n // 2, dim))
    noise = np.empty((n, dim))
    noise[0::2], noise[1::2] = half, -half
    return noise


theta, sigma = np.array([-1.0, 1.0]), 0.1
exact = -2 * (theta - solution)
rng = np.random.default_rng(0)
for n in (100, 10_000) if FAST else (100, 10_000, 1_000_000):
    pairs = mirrored(rng, n, 2)
    plain = rng.standard_normal((n, 2))
    errors = [np.linalg.norm(es_gradient(eps, f(theta + sigma * eps), sigma) - exact) / np.linalg.norm(exact)
              for eps in (pairs, plain)]
    print(f"n = {n:>9,}: relative error {errors[0]:.3f} with mirrored pairs, {errors[1]:.3f} without")

# %% [markdown]
# What ranks do to the direction, measured: on `g(w) = -(w_1^2 + 10 w_2^2)` at
# `theta = (1, 0.3)` (exact gradient `(-2, -6)`), the average of many estimates (population 100,
# mirrored pairs, each population shaped on its own, as ES does) with raw returns and with your
# centered ranks. With `sigma = 0.05`, `g` is nearly linear within reach and both point the
# same way; with `sigma = 0.5` it curves within reach and the ranks' direction turns away.
#
# **Expected output** (seed 0): angle to the exact gradient about 0.2 degrees with raw returns
# for both sigmas (what is left of the sampling noise); with ranks about 0 degrees at sigma
# 0.05 and about 14 degrees at sigma 0.5.
# (The lengths differ too: ranks carry no units of `g`.)

# %%
def g(w):
    return -(w[..., 0] ** 2 + 10 * w[..., 1] ** 2)


def angle(a, b):
    return np.degrees(np.arccos(np.clip(a @ b / np.linalg.norm(a) / np.linalg.norm(b), -1, 1)))


theta, exact = np.array([1.0, 0.3]), np.array([-2.0, -6.0])
for sigma in (0.05, 0.5):
    rng = np.random.default_rng(0)
    repeats = 500 if FAST else 2000
    raw, ranked = np.zeros(2), np.zeros(2)
    for _ in range(repeats):
        eps = mirrored(rng, 100, 2)
        returns = g(theta + sigma * eps)
        raw += es_gradient(eps, returns, sigma) / repeats
        ranked += es_gradient(eps, centered_ranks(returns), sigma) / repeats
    print(f"sigma {sigma}: raw returns {raw.round(3)} ({angle(raw, exact):.1f} deg from the exact gradient), "
          f"ranks {ranked.round(3)} ({angle(ranked, exact):.1f} deg)")

# %% [markdown] tags=["question:ranks"]
# **Inline question 1.** At `sigma = 0.5` the average of the rank-shaped estimates points
# about 14 degrees away from the exact gradient, while the raw-return estimates do not turn.
# Why do ranks turn the step here and not at `sigma = 0.05`? Is an ES that climbs with ranks
# still climbing `g`?

# %% [markdown] tags=["student_only", "answer:ranks"]
# **Your answer:** *(write it here: your instructor reads it; it earns no points from the checks)*

# %% [markdown] tags=["solution_only", "reference:ranks"]
# **Reference answer:** Raw returns estimate the gradient of `E[g(theta + sigma eps)]`, which for
# a quadratic is the exact gradient (the smoothing adds only a constant). Ranks replace `g` by
# `u(g)`, an increasing transform that depends on the population, so the estimate follows the
# gradient of `E[u(g(theta + sigma eps))]` instead. Where `g` is nearly linear within `sigma`
# (0.05 here), `u(g)` depends on `eps` only through `grad g . eps`, and the symmetry of the
# Gaussian keeps the direction. At `sigma = 0.5` the samples reach where `g` curves: the ranks
# keep only the members' order, not their values, and the gradient of the smoothed shaped
# objective need not be parallel to `grad g`. It still climbs `g`: ranks climb the probability
# that a sample beats the current population, which rises toward the same top (an increasing
# transform of `g` has the same maxima); only the path differs.

# %% [markdown]
# ## 3. Climbing the blog's quadratic
#
# OpenAI's blog post optimises `f(w) = -|w - solution|^2`. In 2-D we can watch it: the
# background is the reward landscape, the dots are one generation's population, the line is
# the path of the center. Each generation uses mirrored pairs and your centered ranks.

# %%
rng = np.random.default_rng(0)
theta, sigma, lr, population = np.array([-1.0, 1.0]), 0.1, 0.05, 20
path, snapshots = [theta.copy()], {}
for generation in range(60 if FAST else 150):
    noise = mirrored(rng, population, 2)
    returns = f(theta + sigma * noise)
    if generation in (0, 10, 30):
        snapshots[generation] = theta + sigma * noise
    theta = theta + lr * es_gradient(noise, centered_ranks(returns), sigma)
    path.append(theta.copy())
path = np.array(path)
print("center after training:", theta.round(3), "solution:", solution)

xs, ys = np.meshgrid(np.linspace(-1.3, 1.0, 120), np.linspace(-0.8, 1.3, 120))
fig, ax = plt.subplots(figsize=(6, 5))
ax.contourf(xs, ys, f(np.stack([xs, ys], -1)), levels=30, cmap="viridis")
for gen, pts in snapshots.items():
    ax.scatter(pts[:, 0], pts[:, 1], s=12, label=f"population, generation {gen}")
ax.plot(path[:, 0], path[:, 1], "w.-", lw=1, ms=3, label="center")
ax.plot(*solution, "r*", ms=14, label="solution")
ax.legend(fontsize=8, loc="lower left")
ax.set_title("ES on the blog's quadratic")
plt.show()

# %% [markdown]
# **Expected output:** `center after training: [ 0.489 -0.321]` (150 generations; within a
# few hundredths of the solution for any seed), and a path that heads almost straight for
# the red star, then jitters around it: with ranks the step does not shrink near the top.
#
# ## 4. sigma and the learning rate
#
# With centered ranks the weights no longer carry the reward's scale, so the size of a step
# is set by `lr / sigma` (the `1 / sigma` of the estimate). Too large a ratio overshoots and
# jitters around the top at that step length; too small a one crawls and does not arrive. A
# large `sigma` also blurs the landscape. Below: the distance to the solution after 150
# generations on a grid.
#
# **Expected output** (seed 0; rows sigma, columns lr 0.005, 0.05, 0.5):
# ```
# sigma 0.01:  0.052  0.594  6.465
# sigma 0.1 :  0.001  0.023  0.836
# sigma 1.0 :  1.784  0.408  0.011
# ```
# Where `f` is close to linear within `sigma`, the expected step with centered ranks is
# `0.28 lr / sigma` long (`0.28 = E[(Phi(z) - 1/2) z]` for a standard normal `z`, with `Phi`
# its cumulative distribution function: a member's centered rank is about `Phi(z) - 1/2` where
# `z` is its noise along the gradient), whatever the scale of `f`. The start is 2 away from the solution. The good runs (distance below 0.06) have
# `lr / sigma` between 0.05 and 0.5; a ratio of 5 or more jitters far from the top (0.594,
# 0.836, 6.465); at 0.05 or less, 150 steps of at most `0.28 lr / sigma` barely cover the
# distance or fall short (0.408, 1.784 at sigma 1). Change `sigma` and you must change `lr`
# with it.

# %%
def distance_after(sigma, lr, generations=150, population=20, seed=0):
    rng = np.random.default_rng(seed)
    theta = np.array([-1.0, 1.0])
    for _ in range(generations):
        noise = mirrored(rng, population, 2)
        theta = theta + lr * es_gradient(noise, centered_ranks(f(theta + sigma * noise)), sigma)
    return np.linalg.norm(theta - solution)


for sigma in (0.01, 0.1, 1.0):
    print(f"sigma {sigma:<4}: " + "  ".join(f"{distance_after(sigma, lr):.3f}" for lr in (0.005, 0.05, 0.5)))

# %% [markdown]
# Things to try: raw returns instead of ranks (the step then grows with the reward's scale),
# no mirrored pairs (more noise per step), a population of 200.
