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
# watches them find the top of the OpenAI blog's quadratic. Each graded cell is followed by a
# check you can run: it compares your function with the reference in `es` on fresh inputs
# and names the likely bug when they disagree.
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
# with `x = theta + sigma * eps`. That is exactly REINFORCE (the score-function estimator of
# policy gradients), applied to a Gaussian over the *parameters* instead of over the actions:
# the whole episode's return `F` plays the role of the reward, and no gradient of `F` (no
# backpropagation through the policy or the environment) is ever needed. Averaging `n`
# samples gives the formula above. Replacing `F` by shaped weights `w_i` (ranks, a baseline)
# changes the estimate's scale and variance, not the direction it points in on average.

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
# `noise` is `(population, dim)`, `weights` the shaped returns `(population,)`. Keep the
# `1 / sigma`: without it the step size silently changes whenever you change `sigma` (OpenAI's
# starter drops it; its users reported it).
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
# `1 / sqrt(n)`, and mirrored pairs (`+eps`, `-eps`) cancel the constant part of `f` and
# shrink it much more.
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
# ## 3. Climbing the blog's quadratic
#
# OpenAI's blog post optimises `f(w) = -|w - solution|^2`. In 2-D we can watch it: the
# background is the reward landscape, the dots are one generation's population, the line is
# the path of the center. Antithetic (mirrored) pairs `+eps, -eps` halve the variance.

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
for g, pts in snapshots.items():
    ax.scatter(pts[:, 0], pts[:, 1], s=12, label=f"population, generation {g}")
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
# is set by `lr / sigma` (the `1 / sigma` of the estimate). A small `sigma` with a large `lr`
# overshoots and wanders; a large `sigma` with a small `lr` crawls (and blurs the landscape).
# Below: the distance to the solution after 150 generations on a grid.
#
# **Expected output** (seed 0; rows sigma, columns lr 0.005, 0.05, 0.5):
# ```
# sigma 0.01:  0.052  0.594  6.465
# sigma 0.1 :  0.001  0.023  0.836
# sigma 1.0 :  1.784  0.408  0.011
# ```
# The best runs lie on a diagonal, `lr` about `sigma / 2`: change `sigma` and you must change
# `lr` with it. The training configs in `es` do the same (`--sigma`, `--learning-rate`).

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
