# %% [markdown]
# # 00 · Evolution Strategies from scratch
#
# ES needs no backpropagation: perturb the parameters with Gaussian noise, see which
# perturbations scored better, and move towards them. This notebook derives ES's gradient
# estimate, builds it and its fitness shaping, and watches them climb a quadratic. The course
# follows three sources:
#
# * **the paper**: Salimans, Ho, Chen, Sidor and Sutskever (2017), *Evolution Strategies as a
#   Scalable Alternative to Reinforcement Learning*,
#   [arxiv.org/abs/1703.03864](https://arxiv.org/abs/1703.03864);
# * **the blog post**: OpenAI's post on the paper (March 2017),
#   [openai.com/index/evolution-strategies](https://openai.com/index/evolution-strategies/);
# * **OpenAI's starter code**: the code released with the paper,
#   [github.com/openai/evolution-strategies-starter](https://github.com/openai/evolution-strategies-starter),
#   cited by file and lines at commit `951f199`.
#
# **How the checks work.** A check cell follows each function you write
# (`check.centered_ranks(centered_ranks)`): it calls your function on inputs drawn from a seed
# and prints `OK ...`, or names the likely bug and the seed that repeats it
# (`check.centered_ranks(centered_ranks, seed=S)`). The grader runs the same checks on its own
# inputs.
#
# ### The gradient estimate (the log-likelihood trick)
#
# ES samples parameters from a Gaussian, `x = theta + sigma * eps` with `eps ~ N(0, I)`, and
# climbs the *smoothed* objective `J(theta) = E[F(theta + sigma * eps)]`. The gradient of a
# density is the density times the gradient of its log, `grad p = p grad log p`, so
#
# $$\nabla_\theta J = \int F(x)\, \nabla_\theta p(x \mid \theta)\, dx
#   = \mathbb{E}_x\big[F(x)\, \nabla_\theta \log p(x \mid \theta)\big],
# \qquad \nabla_\theta \log p(x \mid \theta) = \frac{x - \theta}{\sigma^2} = \frac{\varepsilon}{\sigma}$$
#
# and averaging over `n` samples `eps_i` gives an unbiased estimate of `grad J`:
#
# $$\hat g = \frac{1}{n\,\sigma} \sum_i F(\theta + \sigma\varepsilon_i)\, \varepsilon_i,
# \qquad \mathbb{E}[\hat g] = \nabla_\theta J .$$
#
# This is the *score-function estimator* (REINFORCE, Williams 1992) applied to the
# *parameters* rather than the policy's actions: it needs the returns `F` only, never their
# gradient.
#
# ### Mirrored (antithetic) pairs
#
# ES draws the noise in pairs `+eps_k, -eps_k`. With `n = 2m` members, `m` pairs, the estimate
# becomes
#
# $$\hat g_{\text{pairs}} = \frac{1}{2m\,\sigma} \sum_{k=1}^{m}
#   \big[F(\theta + \sigma\varepsilon_k) - F(\theta - \sigma\varepsilon_k)\big]\,\varepsilon_k .$$
#
# Expand `F` around `theta` (`H` is its Hessian): `F(theta +- sigma eps) = F(theta) +- sigma
# eps^T grad F + sigma^2/2 eps^T H eps +- O(sigma^3)`. In the difference `F(theta)` and the
# curvature term cancel, leaving `2 sigma eps^T grad F + O(sigma^3)`. Without pairs, the term
# `F(theta) / (n sigma) * sum_i eps_i` stays in the estimate: zero on average, but with a
# standard deviation of `|F(theta)| / (sigma sqrt(n))` per coordinate (section 2 measures it).
#
# ### Shaped weights: what the estimate then estimates
#
# ES usually replaces the raw returns `F_i` by *shaped* weights `w_i`:
#
# $$\hat g = \frac{1}{n\,\sigma} \sum_i w_i\, \varepsilon_i .$$
#
# * A **baseline** `b` (`w_i = F_i - b`) keeps the estimate of `grad J` unbiased, because
#   `E[b eps] = 0`; only its variance changes.
# * **Ranks** (section 1) put `w_i = u(F_i)`, an increasing function of `F` that depends on the
#   whole population. On average the estimate then points along
#
# $$\mathbb{E}\big[u(F(\theta + \sigma\varepsilon))\,\varepsilon\big] / \sigma
#   = \nabla_\theta\, \mathbb{E}\big[u(F(\theta + \sigma\varepsilon))\big],$$
#
#   the gradient of the smoothed *shaped* objective (for a large population, `u(F(x))` is the
#   fraction of the current samples that `x` beats, minus one half), not `grad J`: its
#   direction can differ from `grad J`'s, and section 2 measures when.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

from classroom import check

FAST = os.environ.get("ES_COURSE_FAST") == "1"   # the autograder and CI set it

# %% [markdown]
# ## 1. Fitness shaping: centered ranks
#
# Raw returns make the step depend on the reward's scale, and one lucky outlier can dominate
# it. OpenAI's starter code replaces the returns by centered ranks when its configuration says
# `"return_proc_mode": "centered_rank"` (as
# [`951f199:configurations/humanoid.json`](https://github.com/openai/evolution-strategies-starter/blob/951f19986921135739633fb23e55b2075f66c2e6/configurations/humanoid.json)
# does; [`951f199:es_distributed/es.py` lines 233-234](https://github.com/openai/evolution-strategies-starter/blob/951f19986921135739633fb23e55b2075f66c2e6/es_distributed/es.py#L233-L234)):
# each return's rank, scaled to `[-0.5, 0.5]` so that the worst member gets -0.5, the best
# +0.5, and the weights sum to zero
# ([`compute_centered_ranks`, lines 80-84](https://github.com/openai/evolution-strategies-starter/blob/951f19986921135739633fb23e55b2075f66c2e6/es_distributed/es.py#L80-L84)).
#
# One rule is this course's, not the starter's: **tied returns share the mean of their
# ranks.** The starter's `compute_ranks` ([lines 69-77](https://github.com/openai/evolution-strategies-starter/blob/951f19986921135739633fb23e55b2075f66c2e6/es_distributed/es.py#L69-L77))
# ranks with `x.argsort()`, whose default sort is not stable, so equal returns get different
# ranks in whatever order the sort leaves them. With the mean rank, equal returns get equal
# weights, and a mirrored pair whose two members tie adds nothing to the step. Ties are
# common: CartPole's members often reach the maximum return, and Pong scores whole points.
#
# **`centered_ranks(returns)`**
# * **Input:** `returns`, a one-dimensional float64 array of `n >= 2` returns, ties allowed.
#   Leave it unchanged.
# * **Returns:** a float64 array of shape `(n,)`: `rank_i / (n - 1) - 0.5`, where `rank_i` is
#   the rank of `returns[i]`, counted from $0$ for the smallest to $n - 1$ for the largest, and
#   a group of tied returns all get the mean of the ranks they occupy.
# * **Worked example, with a tie:** `returns = [3.0, 1.0, 3.0, 2.0]`. Sorted: 1.0 (rank 0),
#   2.0 (rank 1), and the two 3.0 occupy ranks 2 and 3, so each gets 2.5. Ranks `[2.5, 0, 2.5,
#   1]`, divided by `n - 1 = 3`, minus 0.5: **`[0.3333, -0.5, 0.3333, -0.1667]`** (sum 0).
# * **The check:** relative error at most 1e-6 against the right weights, on distinct returns
#   with one huge outlier and a few less than $10^{-3}$ apart (rank them as they are: no
#   rounding), then on returns with many ties (a tie spans as many ranks as it has returns,
#   not one); the dtype; `returns` left as it was.
#
# <details><summary>Hint: from returns to ranks</summary>
#
# `np.argsort(x)` gives the *indices* that sort `x`, not each element's rank: with
# `order = np.argsort(x)` and a *float* array `ranks = np.empty(n)`, the ranks are
# `ranks[order] = np.arange(n)`. Then, for each `value` in `np.unique(x)`, the returns equal to
# it (`tied = x == value`) all get `ranks[tied].mean()` (an int array would cut that mean to a
# whole number). Last, `ranks / (n - 1) - 0.5`.
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
# * **Returns:** a float64 array of shape `(dim,)`, the estimate `1 / (n sigma) * sum_i w_i
#   eps_i`. Leave `noise` and `weights` unchanged.
# * **Worked example:** `noise = [[1, 0], [0, 2]]`, `weights = [0.5, -0.5]`, `sigma = 0.5`:
#   `(0.5 * [1, 0] - 0.5 * [0, 2]) / (2 * 0.5)` = **`[0.5, -1.0]`**.
# * **The check:** relative error at most 1e-5, on random noise, weights and sigma; the dtype;
#   `noise` and `weights` left as they were.
#
# Keep the `1 / sigma`: with raw returns as the weights, `F(theta + sigma eps)` differs from
# `F(theta)` by about `sigma eps^T grad F`, and the `1 / sigma` cancels that `sigma` (section 4
# covers ranks). OpenAI's starter code leaves the `1 / sigma` out (`g /=
# returns_n2.size`, [`951f199:es_distributed/es.py` line 247](https://github.com/openai/evolution-strategies-starter/blob/951f19986921135739633fb23e55b2075f66c2e6/es_distributed/es.py#L247))
# and hands `-g` (plus its weight decay) to its optimizer, which minimises ([line 249](https://github.com/openai/evolution-strategies-starter/blob/951f19986921135739633fb23e55b2075f66c2e6/es_distributed/es.py#L249)),
# Adam in the configuration of section 1, whose step does not grow with the gradient's scale
# (notebook 01, section 2).
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
# With raw returns as the weights the estimate is unbiased and its error shrinks like
# `1 / sqrt(n)` on average (each row below is a single draw). Mirrored pairs remove the
# `F(theta)` term, which matters here: `|f(theta)| / sigma` is about ten times `|grad f|`.
#
# **Expected output** (seed 0): `|f(theta)| / sigma = 39.4, |grad f| = 4.0`; relative error
# about 0.24, 0.03, 0.003 with mirrored pairs and about 2.5, 0.06, 0.02 without, for `n` = 100,
# 10,000, 1,000,000.

# %%
solution = np.array([0.5, -0.3])


def f(w):
    return -np.sum((w - solution) ** 2, axis=-1)


def mirrored(rng, n, dim):
    """Members 2k and 2k+1 get +eps_k and -eps_k (interleaved pairs)."""
    half = rng.standard_normal((n // 2, dim))
    noise = np.empty((n, dim))
    noise[0::2], noise[1::2] = half, -half
    return noise


theta, sigma = np.array([-1.0, 1.0]), 0.1
exact = -2 * (theta - solution)
print(f"|f(theta)| / sigma = {abs(f(theta)) / sigma:.1f}, |grad f| = {np.linalg.norm(exact):.1f}")
rng = np.random.default_rng(0)
for n in (100, 10_000) if FAST else (100, 10_000, 1_000_000):
    pairs = mirrored(rng, n, 2)
    plain = rng.standard_normal((n, 2))
    errors = [np.linalg.norm(es_gradient(eps, f(theta + sigma * eps), sigma) - exact) / np.linalg.norm(exact)
              for eps in (pairs, plain)]
    print(f"n = {n:>9,}: relative error {errors[0]:.3f} with mirrored pairs, {errors[1]:.3f} without")

# %% [markdown]
# What ranks do to the direction, measured: on `g(w) = -(w_1^2 + 10 w_2^2)` at
# `theta = (1, 0.3)`, the average of many estimates (`population = 100`, mirrored pairs) with
# raw returns and with your centered ranks (each population ranked on its own), against the
# exact gradient `(-2, -6)`, at a small and a large `sigma`.
#
# **Expected output** (seed 0): `raw returns [-1.974 -5.991]` at both sigmas, 0.2 degrees from
# the exact gradient; ranks 0.0 degrees from it at sigma 0.05 and 14.3 degrees at sigma 0.5.

# %%
def g(w):
    return -(w[..., 0] ** 2 + 10 * w[..., 1] ** 2)


def angle(a, b):
    return np.degrees(np.arccos(np.clip(a @ b / np.linalg.norm(a) / np.linalg.norm(b), -1, 1)))


theta, exact = np.array([1.0, 0.3]), np.array([-2.0, -6.0])
population, repeats = 100, 500 if FAST else 2000
for sigma in (0.05, 0.5):
    rng = np.random.default_rng(0)
    raw, ranked = np.zeros(2), np.zeros(2)
    for _ in range(repeats):
        eps = mirrored(rng, population, 2)
        returns = g(theta + sigma * eps)
        raw += es_gradient(eps, returns, sigma) / repeats
        ranked += es_gradient(eps, centered_ranks(returns), sigma) / repeats
    print(f"sigma {sigma}: raw returns {raw.round(3)} ({angle(raw, exact):.1f} deg from the exact gradient), "
          f"ranks {ranked.round(3)} ({angle(ranked, exact):.1f} deg)")

# %% [markdown] tags=["question:ranks"]
# **Inline question 1.** At the larger `sigma` the average of the rank-shaped estimates points
# away from the exact gradient, while the raw-return estimates do not turn. Why do ranks turn
# the step there and not at the smaller `sigma`? Is an ES that climbs with ranks still
# climbing `g`?

# %% [markdown] tags=["student_only", "answer:ranks"]
# **Your answer:** *(write it here: your instructor reads it; it earns no points from the checks)*

# %% [markdown] tags=["solution_only", "reference:ranks"]
# **Reference answer:** Raw returns estimate the gradient of `E[g(theta + sigma eps)]`, which for
# a quadratic is the exact gradient (the smoothing adds only a constant). Ranks replace `g` by
# `u(g)`, an increasing transform that depends on the population, so the estimate follows the
# gradient of `E[u(g(theta + sigma eps))]` instead. Where `g` is nearly linear within `sigma`
# (the smaller one), `u(g)` depends on `eps` only through `grad g . eps`, and the symmetry of
# the Gaussian keeps the direction. At the larger `sigma` the samples reach where `g` curves,
# and the gradient of the smoothed shaped objective need not be parallel to `grad g`.
# It still climbs `g`: ranks climb the probability that a sample beats the current population,
# and an increasing transform of `g` has the same maxima; only the path differs.

# %% [markdown]
# ## 3. Climbing the quadratic
#
# ES climbs section 2's `f(w) = -|w - solution|^2` with mirrored pairs and your centered
# ranks. The figure shows the reward landscape, three generations' populations (dots) and the
# path of the center (line); the cell prints the center's mean step farther than `sigma` from
# the solution and within it.

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
steps, near = np.linalg.norm(np.diff(path, axis=0), axis=1), np.linalg.norm(path[:-1] - solution, axis=1) < sigma
print(f"center after {len(path) - 1} updates:", theta.round(3), "solution:", solution)
print(f"mean step: {steps[~near].mean():.3f} farther than sigma from the solution, "
      + (f"{steps[near].mean():.3f} within it" if near.any() else "never within it"))

xs, ys = np.meshgrid(np.linspace(-1.3, 1.0, 120), np.linspace(-0.8, 1.3, 120))
fig, ax = plt.subplots(figsize=(6, 5))
ax.contourf(xs, ys, f(np.stack([xs, ys], -1)), levels=30, cmap="viridis")
for gen, pts in snapshots.items():
    ax.scatter(pts[:, 0], pts[:, 1], s=12, label=f"population, generation {gen}")
ax.plot(path[:, 0], path[:, 1], "w.-", lw=1, ms=3, label="center")
ax.plot(*solution, "r*", ms=14, label="solution")
ax.legend(fontsize=8, loc="lower left")
ax.set_title("ES on a quadratic")
plt.show()

# %% [markdown]
# **Expected output:** `center after 150 updates: [ 0.489 -0.321]`, `mean step: 0.147 farther
# than sigma from the solution, 0.030 within it`, and a path that heads almost straight for the
# red star, then jitters around it in shorter steps (section 4 says why).

# %% [markdown]
# ## 4. sigma and the learning rate
#
# With centered ranks the weights no longer carry the reward's scale: the length of a step is
# set by `lr / sigma`. The expected step, where `f` is close to linear within `sigma`, is
# about `0.28 lr / sigma` long whatever the scale of `f`: a member's centered rank is about
# $\Phi(z) - 1/2$, with $z$ its noise along the gradient and $\Phi$ the standard normal's
# cumulative distribution function, and `0.28` is $\mathbb{E}[(\Phi(z) - 1/2)\, z]$. Below: the
# distance to the solution after 150 updates, on a grid of `sigma` and `lr`.
#
# **Expected output** (seed 0):
# ```
# distance to the solution after 150 updates (it starts 1.98 away)
# lr:         0.005  0.05   0.5
# sigma 0.01: 0.052  0.594  6.465   (lr / sigma: 0.5, 5, 50)
# sigma 0.1 : 0.001  0.023  0.836   (lr / sigma: 0.05, 0.5, 5)
# sigma 1.0 : 1.784  0.408  0.011   (lr / sigma: 0.005, 0.05, 0.5)
# ```
# Read it by `lr / sigma`. At 0.5 every `sigma` arrives (0.052, 0.023, 0.011). At 5 and 50 the
# steps, $0.28 \times 5 = 1.4$ long or more, jump across the top and stay far from it (0.594,
# 0.836, 6.465). At 0.005 the run crawls (1.784). At 0.05, 150 steps advance about
# $150 \times 0.28 \times 0.05 = 2.1$ towards the top, just the distance: enough at
# `sigma = 0.1` (0.001), not at `sigma = 1.0` (0.408). There `f` curves within `sigma`: the
# closer the run gets to the top, the more the ranks sort the members by how far their noise
# reaches rather than by its direction, and the shorter the steps. Change `sigma` and you must
# change `lr` with it.

# %%
def distance_after(sigma, lr, updates, population=20, seed=0):
    rng = np.random.default_rng(seed)
    theta = start
    for _ in range(updates):
        noise = mirrored(rng, population, 2)
        theta = theta + lr * es_gradient(noise, centered_ranks(f(theta + sigma * noise)), sigma)
    return np.linalg.norm(theta - solution)


lrs, updates = (0.005, 0.05, 0.5), 150
start = np.array([-1.0, 1.0])
print(f"distance to the solution after {updates} updates (it starts {np.linalg.norm(start - solution):.2f} away)")
print("lr:         " + "  ".join(f"{lr:<5}" for lr in lrs))
for sigma in (0.01, 0.1, 1.0):
    print(f"sigma {sigma:<4}: " + "  ".join(f"{distance_after(sigma, lr, updates):.3f}" for lr in lrs)
          + f"   (lr / sigma: {', '.join(f'{lr / sigma:g}' for lr in lrs)})")
