# %% [markdown]
# # 05 · Extras [++]: a different ES, and a harder landscape
#
# OpenAI-ES keeps one `sigma` for every parameter. Separable Natural Evolution Strategies
# (SNES, Schaul et al. 2011) adapt a `sigma` per parameter from the same samples: directions
# where good members lie far out grow, the others shrink. On Rastrigin's function, full of
# local optima, the two behave very differently.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

from classroom import check

FAST = os.environ.get("ES_COURSE_FAST") == "1"

# %% [markdown]
# ## 1. One SNES step
#
# ### Where the step comes from: the natural gradient
#
# SNES searches with a Gaussian whose coordinates are independent, each with its own spread:
# member `i` is `x_i = mu + sigma * s_i` (elementwise), `s_i ~ N(0, I)`. It climbs
# `J(mu, sigma) = E[F(x)]` with notebook 00's log-likelihood trick, now for both `mu` and
# `sigma`. Per coordinate `j`, `log p(x) = -log sigma_j - (x_j - mu_j)^2 / (2 sigma_j^2) + const`,
# so
#
# $$\frac{\partial \log p}{\partial \mu_j} = \frac{s_j}{\sigma_j}, \qquad
#   \frac{\partial \log p}{\partial \sigma_j} = \frac{s_j^2 - 1}{\sigma_j},$$
#
# and with utilities `w_i` in place of `F(x_i)` (as ranks replaced `F` in notebook 00) the
# estimates are `sum_i w_i s_i / sigma` and `sum_i w_i (s_i^2 - 1) / sigma`. These plain
# gradients are badly scaled: they grow as `sigma` shrinks, exactly when the search should take
# *smaller* steps. The **natural gradient** fixes that: it divides by the Fisher information,
# how much the distribution changes per unit of each parameter, `1 / sigma_j^2` for `mu_j` and
# `2 / sigma_j^2` for `sigma_j`:
#
# $$\tilde\nabla_{\mu} = \sigma^2 \cdot \frac{1}{\sigma}\sum_i w_i s_i = \sigma \sum_i w_i s_i,
#   \qquad \tilde\nabla_{\sigma} = \frac{\sigma^2}{2} \cdot \frac{1}{\sigma} \sum_i w_i (s_i^2 - 1)
#   = \frac{\sigma}{2} \sum_i w_i (s_i^2 - 1).$$
#
# A step `lr_sigma` along `tilde grad_sigma` changes `sigma` by a *fraction* of itself,
# `sigma * (1 + lr_sigma / 2 * sum_i w_i (s_i^2 - 1))`; SNES takes that step in `log sigma`
# (the exponential form below), so `sigma` stays positive however large the step. The
# members that scored well pull `mu` towards them, and widen `sigma_j` where they lay far out
# (`s_ij^2 > 1`) or narrow it where they lay close (`s_ij^2 < 1`).
#
# **`snes_step(mu, sigma, s, w, lr_mu, lr_sigma)`**
# * **Inputs:** `mu` and `sigma`, float64 `(dim,)` (`sigma > 0`): the current search
#   distribution; `s`, float64 `(population, dim)`: the standard normal samples (member `i`
#   played `mu + sigma * s[i]`); `w`, float64 `(population,)`: the utilities, the shaped
#   returns, already normalised (below they sum to zero; the check uses any numbers); `lr_mu`,
#   `lr_sigma`: floats.
# * **Returns:** the pair `(new mu, new sigma)`, float64 `(dim,)` each (new arrays):
#
# $$\mu' = \mu + \text{lr}_\mu\, \sigma \odot \sum_i w_i\, s_i, \qquad
#   \sigma' = \sigma \odot \exp\Big(\frac{\text{lr}_\sigma}{2} \sum_i w_i\, (s_i^2 - 1)\Big)$$
#
#   (`odot`, the square and `exp`: elementwise). Both use the **old** `sigma`. There is no
#   `1 / population` and no `1 / sigma`: the utilities are already weights, and the natural
#   gradient's `sigma` replaced the plain gradient's `1 / sigma`.
# * **Example:** `mu = [0, 0]`, `sigma = [1, 2]`, `s = [[1, 0], [0, 2]]`, `w = [0.5, -0.5]`,
#   `lr_mu = 1`, `lr_sigma = 0.2`: `sum_i w_i s_i = [0.5, -1]`, so `mu' = [0.5, -2]`;
#   `sum_i w_i (s_i^2 - 1) = [0.5, -2]`, so `sigma' = [exp(0.05), 2 exp(-0.2)] = [1.0513, 1.6375]`.
# * **The check:** relative error at most 1e-6 on both, on random inputs.

# %%
def snes_step(mu, sigma, s, w, lr_mu, lr_sigma):
    ### BEGIN SOLUTION
    mu = mu + lr_mu * sigma * (w @ s)
    sigma = sigma * np.exp(lr_sigma / 2 * (w @ (s ** 2 - 1)))
    return mu, sigma
    ### END SOLUTION


# %%
check.snes_step(snes_step)

# %% [markdown]
# ## 2. OpenAI-ES against SNES on Rastrigin, made to differ in one thing
#
# Both start far from the global maximum at 0 (every coordinate at 3) with the same budget
# of evaluations, and to compare *sigma adaptation* and nothing else, everything else is
# shared: the same samples (mirrored pairs from the same seed), the same shaping (`utilities`,
# below), the same step for the center (`lr_mu * sigma * sum_i w_i s_i`, SGD with step 1: what
# OpenAI-ES's plain gradient `sum_i w_i s_i / sigma` becomes when scaled by its Fisher
# information `sigma^2`, section 1) and the same initial sigma, 1. With `lr_sigma = 0`,
# `snes_step` *is* OpenAI-ES with one fixed sigma, so one loop runs both. Adam is left out of
# both: SNES's step is its own, and Adam would rescale the two differently.
#
# **The shaping, `utilities(n)`** (Wierstra et al. 2014, the NES paper): sort the members
# best first; member of rank `k = 1..n` gets `max(0, log(n/2 + 1) - log k)`, normalised to sum
# to 1, minus `1/n`. So the best member counts most, the weights fall like a logarithm down to
# the middle, and the worse half all get the same `-1/n`: which of two bad members was worse
# does not matter. They sum to 0 (a population of equal scores moves nothing), and like
# centered ranks they depend on the order of the scores only, never on their size.
#
# **The sigma step, `(3 + log d) / (5 sqrt d)`**: SNES's default `lr_sigma` (Schaul et al. 2011;
# Wierstra et al. 2014, Table 1), found by its authors on benchmark functions. It shrinks as the
# dimension `d` grows; here, `d = 10`, it is 0.34: `sigma_j` changes by at most a factor
# `exp(0.17 * sum_i w_i (s_ij^2 - 1))` per generation.
#
# **Judged alike:** each at its center (`mu`), on the raw function, and by how far the center
# lies from the maximum (mean `|x_j|`): a center can sit in the right valley and still score
# badly on a function this bumpy. Seed 0 is plotted; seeds 0..4 are summed up under the plot,
# with a third line, OpenAI-ES as notebooks 00-01 run it (centered ranks, Adam with step 0.1,
# sigma fixed at 1).

# %%
def rastrigin(x):
    x = np.atleast_2d(x)
    return -(10 * x.shape[1] + np.sum(x ** 2 - 10 * np.cos(2 * np.pi * x), axis=1))


def utilities(n):
    ranks = np.log(n / 2 + 1) - np.log(np.arange(1, n + 1))
    u = np.maximum(0, ranks)
    return u / u.sum() - 1 / n


dim, population, generations = 10, 40, 150 if FAST else 600
start = np.full(dim, 3.0)


def mirrored(rng):
    """Member 2k: +s_k, member 2k + 1: -s_k, as in notebook 01."""
    half = rng.standard_normal((population // 2, dim))
    return np.stack([half, -half], axis=1).reshape(population, dim)


def run(seed, lr_sigma):
    """SNES (lr_sigma > 0), or OpenAI-ES with its one sigma fixed (lr_sigma = 0): the center's
    Rastrigin value and its mean distance from 0, per generation."""
    rng = np.random.default_rng(seed)
    mu, sigma, u, score, distance = start.copy(), np.ones(dim), utilities(population), [], []
    for _ in range(generations):
        s = mirrored(rng)
        w = np.empty(population)
        w[np.argsort(-rastrigin(mu + sigma * s))] = u       # the best member gets u[0]
        mu, sigma = snes_step(mu, sigma, s, w, 1.0, lr_sigma)
        score.append(rastrigin(mu)[0])
        distance.append(np.abs(mu).mean())
    return np.array(score), np.array(distance)


def run_adam(seed, sigma=1.0, lr=0.1):
    """OpenAI-ES as notebooks 00-01 train: centered ranks, Adam, one fixed sigma."""
    rng = np.random.default_rng(seed)
    center, m, v, score, distance = start.copy(), np.zeros(dim), np.zeros(dim), [], []
    for t in range(1, generations + 1):
        noise = mirrored(rng)
        ranks = np.argsort(np.argsort(rastrigin(center + sigma * noise))) / (population - 1) - 0.5
        grad = noise.T @ ranks / (population * sigma)
        m, v = 0.9 * m + 0.1 * grad, 0.999 * v + 0.001 * grad ** 2
        center = center + lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m / (np.sqrt(v) + 1e-8)
        score.append(rastrigin(center)[0])
        distance.append(np.abs(center).mean())
    return np.array(score), np.array(distance)


snes_sigma = (3 + np.log(dim)) / (5 * np.sqrt(dim))
methods = {"SNES (a sigma per coordinate)": lambda seed: run(seed, snes_sigma),
           "OpenAI-ES (one sigma, fixed at 1; otherwise the same)": lambda seed: run(seed, 0.0),
           "OpenAI-ES as notebooks 00-01 (centered ranks, Adam 0.1, sigma 1)": run_adam}
results = {name: [method(seed) for seed in range(5)] for name, method in methods.items()}
fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
for name, runs in results.items():
    left.plot(runs[0][0], label=name)
    right.plot(runs[0][1], label=name)
left.set(xlabel="generation", ylabel="Rastrigin at the center (0 is the maximum)")
right.set(xlabel="generation", ylabel="mean |x_j| at the center (0 is the maximum)", yscale="log")
left.legend(fontsize=8)
plt.show()
for name, runs in results.items():
    finals = [round(float(score[-1]), 2) for score, _ in runs]
    far = [round(float(distance[-1]), 2) for _, distance in runs]
    print(f"{name}:\n  seeds 0..4, at the center after {generations} generations: Rastrigin {finals}, "
          f"mean |x_j| {far}")

# %% [markdown]
# **Expected output:** after 600 generations (fast mode: 150), SNES ends at or next to the
# global maximum on every seed (Rastrigin `[-0.0, -0.99, -3.98, -1.99, -0.99]`: 0 is the maximum,
# and its local maxima near integer points are worth `-sum(x_j**2)`, so -0.99 is one coordinate
# off by one). OpenAI-ES with everything else the same ends between -76 and -120, *worse* than
# its start (-90), yet its center has come from 3 to 0.2-0.6 per coordinate: it found the
# right valley. One fixed sigma of 1 smooths Rastrigin's bumps away (that is why it finds the
# valley), but then its steps stay as large as its sigma and the center can never settle into
# the narrow peak at 0. SNES shrinks each coordinate's sigma as it closes in. The course's Adam
# version behaves like the fixed-sigma one (-47 to -118): with one sigma, the optimizer does not
# change the picture.
#
# More ideas: adapt OpenAI-ES's single `sigma` with the 1/5th success rule; novelty search
# (reward behaviours no one has seen yet) for deceptive mazes; run CMA-ES (`pip install cma`)
# on the same function and compare evaluations to reach -10.

# %% [markdown]
# ## 3. What a policy that learns from the pixels looks at
#
# Your Pong agent in notebook 04 reads band sums of the frames; the course's best Pong agent
# reads 8 numbers that fixed code pulls off the pixels. A third policy (`--policy keypoints`
# in `pong/keypoints.py`) learns *where to look*. It has two parts. The **front end** finds
# positions: six keypoints, and keypoint `i` looks through window `i`, a stretch of columns
# whose centre and width ES learns (pixels outside it get much lower scores, so the keypoint
# sees mostly its own vertical strip), plus a learned bias up or down the rows (the figure's
# "row pull"). Each keypoint scores every pixel of a frame with two learned 3x3 filters, one on
# the frame and one on its change since the previous frame, takes a softmax over the 1,764
# pixels, and reports the expected column and row under it (a "spatial soft-argmax"), over
# the 4 stacked frames, so also how fast it moves. The **head**, a small network, turns these
# positions and their products into an action. At the start the six windows tile the field
# evenly and every filter is the identity: nothing in that start knows where the ball or the
# paddles are. ES learns the front end's 126 numbers (6 x (2 x 9 filter weights + 3 for the
# window)) together with the head (4,121 parameters in all).
#
# The picture below is the course's pixel agent (shipped in the course repository, not in this
# release): training run 16 of the course's numbered record of Pong attempts, 230
# generations, 2.57 hours on 2 cores, its keypoints reading the frames and their change since
# the previous frame. It scores +6.4 a game (points won minus points lost) over 20 held-out
# games, game seeds used neither in training nor to choose the checkpoint, where a random
# player scores -20.15. Top row: the filters it learned (on the frame, then on the change) and
# each window's columns. Middle: its keypoints over two frames of a real game (circles: each
# keypoint in the newest frame; lines: its path over the 4 stacked frames; we are the right
# paddle). Bottom: each keypoint's row against where the ball and the paddles really are
# (measured by fixed code), drawn only on the steps where its window "holds something" (over
# half its attention on pixels that differ from the empty field); game 5, steps 100 to 399 of
# the 1,500 the numbers below are measured on. Before you read on: which windows follow the
# ball, and over which columns does the policy see it?

# %%
import os
import matplotlib.pyplot as plt

figure = next((os.path.join(d, "docs", "pong-windows.png") for d in (".", "..")
               if os.path.exists(os.path.join(d, "docs", "pong-windows.png"))), None)
if figure:
    plt.figure(figsize=(13, 7))
    plt.imshow(plt.imread(figure))
    plt.axis("off")
    plt.show()
else:
    print("pong-windows.png is not in docs/ here: the keypoints figure is not shown")

# %% [markdown]
# Windows 1 to 4 (columns 7 to 14, 15 to 22, 19 to 26 and 26 to 33) each hold the ball while
# it crosses their stretch of the field, on 19%, 11%, 15% and 5% of the steps; there their
# rows follow the ball's (correlations 0.86, 0.93, 0.97 and 0.99) and so do their columns
# (0.93, 0.98, 0.98 and 0.85). Window 0 (columns 0 to 7) sits at the opponent's paddle, yet
# over all steps its row follows the ball's (0.94) more closely than the opponent's (0.88); window 5 (columns 35 to 42) sits on our paddle (row correlation 0.70). So ES learned,
# from the pixels, to pass the ball from window to window across the whole field, up to seven
# columns before our paddle. The best pixel policy before it (attempts 14 and 15, -6.1 a game)
# saw the ball only near the opponent and in the middle, about columns 15 to 24, its window on
# columns 30 to 36 holding something on 0.3% of the steps. To win, a policy needs to predict
# where the ball will cross our paddle's column: in the course's record of hand-written
# controllers (the record of Pong attempts, section "What a policy must compute", in the
# course repository, not in this release), those that follow the ball's height score about
# -9, and one that aims at the crossing point wins, over 4 to 8 games each.
