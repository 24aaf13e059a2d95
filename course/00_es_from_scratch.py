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
# check you can run: it compares your function with the reference in `es` and names the
# likely bug when they disagree.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

from es.course import check

FAST = os.environ.get("ES_COURSE_FAST") == "1"   # the autograder and CI set it

# %% [markdown]
# ## 1. Fitness shaping: centered ranks
#
# Raw returns make the step size depend on the reward's scale, and one lucky outlier can
# dominate. OpenAI's ES replaces each return by its *rank*, scaled to `[-0.5, 0.5]`: the worst
# member gets -0.5, the best +0.5, and the weights sum to zero. Tied returns share the mean of
# their ranks.

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

# %%
def es_gradient(noise, weights, sigma):
    """(1 / (population * sigma)) * sum_i weights[i] * noise[i]"""
    ### BEGIN SOLUTION
    return noise.T @ weights / (len(weights) * sigma)
    ### END SOLUTION


# %%
check.es_gradient(es_gradient)

# %% [markdown]
# ## 3. Climbing the blog's quadratic
#
# OpenAI's blog post optimises `f(w) = -|w - solution|^2`. In 2-D we can watch it: the
# background is the reward landscape, the dots are one generation's population, the line is
# the path of the center. Antithetic (mirrored) pairs `+eps, -eps` halve the variance.

# %%
solution = np.array([0.5, -0.3])


def f(w):
    return -np.sum((w - solution) ** 2, axis=-1)


rng = np.random.default_rng(0)
theta, sigma, lr, population = np.array([-1.0, 1.0]), 0.1, 0.05, 20
path, snapshots = [theta.copy()], {}
for generation in range(60 if FAST else 150):
    half = rng.standard_normal((population // 2, 2))
    noise = np.concatenate([half, -half])
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
# Things to try: a larger `sigma` (the center gets a blurrier view of the landscape), raw
# returns instead of ranks, no mirrored pairs (more noise per step).
