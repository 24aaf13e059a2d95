# %% [markdown]
# # 05 · Extras [++]: a different ES, and a harder landscape
#
# OpenAI-ES keeps one `sigma` for every parameter. Separable Natural Evolution Strategies
# (SNES, Schaul et al. 2011) adapt a `sigma` per parameter from the same samples: directions
# where good members lie far out grow, the others shrink. On Rastrigin's function, full of
# local optima, the two behave very differently. Then the course's pixel Pong agent: you write the
# virtual batch normalization of its inputs (section 3) and see what the trained agent looks at
# (section 4).

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
# gradients grow as `sigma` shrinks, exactly when the search should take *smaller* steps. The
# **natural gradient** divides them by the Fisher information, `1 / sigma_j^2` for `mu_j` and
# `2 / sigma_j^2` for `sigma_j`:
#
# $$\tilde\nabla_{\mu} = \sigma^2 \cdot \frac{1}{\sigma}\sum_i w_i s_i = \sigma \sum_i w_i s_i,
#   \qquad \tilde\nabla_{\sigma} = \frac{\sigma^2}{2} \cdot \frac{1}{\sigma} \sum_i w_i (s_i^2 - 1)
#   = \frac{\sigma}{2} \sum_i w_i (s_i^2 - 1).$$
#
# SNES takes the `sigma` step in `log sigma` (the `exp` below), so `sigma` stays positive. The
# members that scored well pull `mu` towards them, and widen `sigma_j` where they lay far out
# (`s_ij^2 > 1`) or narrow it where they lay close (`s_ij^2 < 1`).
#
# **`snes_step(mu, sigma, s, w, lr_mu, lr_sigma)`**
# * **Inputs:** `mu` and `sigma`, float64 `(dim,)` (`sigma > 0`): the current search
#   distribution; `s`, float64 `(population, dim)`: the standard normal samples (member `i`
#   played `mu + sigma * s[i]`); `w`, float64 `(population,)`: the utilities, the shaped
#   returns (below they sum to zero; the check uses any numbers); `lr_mu`, `lr_sigma`: floats.
# * **Returns:** the pair `(new mu, new sigma)`, float64 `(dim,)` each, in new arrays: leave the
#   arguments as they are (`mu = mu + ...`, not `mu += ...`):
#
# $$\mu' = \mu + \text{lr}_\mu\, \sigma \odot \sum_i w_i\, s_i, \qquad
#   \sigma' = \sigma \odot \exp\Big(\frac{\text{lr}_\sigma}{2} \sum_i w_i\, (s_i^2 - 1)\Big)$$
#
#   (`odot`, the square and `exp`: elementwise). Both use the **old** `sigma`. There is no
#   `1 / population` and no `1 / sigma`: the utilities are already weights, and the natural
#   gradient replaced `1 / sigma` by `sigma`.
# * **Example:** `mu = [0, 0]`, `sigma = [1, 2]`, `s = [[1, 0], [0, 2]]`, `w = [0.5, -0.5]`,
#   `lr_mu = 1`, `lr_sigma = 0.2`: `sum_i w_i s_i = [0.5, -1]`, so `mu' = [0.5, -2]`;
#   `sum_i w_i (s_i^2 - 1) = [0.5, -2]`, so `sigma' = [exp(0.05), 2 exp(-0.2)] = [1.0513, 1.6375]`.
# * **The check:** relative error at most `1e-6` on both, on random inputs; both float64; every
#   argument left as it was; then, for a `mu` in the hundreds and small utilities, the step
#   `mu' - mu` within a relative error of `1e-6` (a computation in float32 loses it).

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
# Both start far from the global maximum at $x = 0$ (`start = np.full(dim, 3.0)`) with the same
# budget of evaluations and share everything but the sigma adaptation: the same samples
# (mirrored pairs from the same seed), the same shaping (`utilities`, below), the same step for
# the center (`lr_mu * sigma * sum_i w_i s_i`, `lr_mu = 1.0`) and the same initial sigma
# (`np.ones(dim)`). With `lr_sigma = 0`, `snes_step` *is* OpenAI-ES with one fixed sigma, so one
# loop runs both, without Adam (it would rescale the two differently).
#
# **The shaping, `utilities(n)`** (Wierstra et al. 2014, the NES paper): sort the members
# best first; member of rank `k = 1..n` gets `max(0, log(n/2 + 1) - log k)`, normalised to sum
# to 1, minus `1/n`. So the best member counts most, the weights fall like a logarithm down to
# the middle, and the worse half all get the same `-1/n`. They sum to 0, and like centered ranks
# they depend only on the order of the scores.
#
# **The sigma step, `(3 + log d) / (5 sqrt d)`**: SNES's default `lr_sigma` (Schaul et al. 2011).
# Here, `d = 10`, it is 0.34: each update multiplies `sigma_j` by
# `exp(0.17 * sum_i w_i (s_ij^2 - 1))`.
#
# **Judged alike:** each at its center (`mu`), on the raw function, and by the center's distance
# from the maximum (mean `|x_j|`). The plot shows the first seed; the lines under it sum up five,
# with a third method: centered ranks (notebook 00's, without its tie rule: the cell asserts that
# no two returns tie) and Adam (notebook 01's `adam_update`, `lr=0.1`) around one fixed
# `sigma=1.0`.

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
    """SNES (lr_sigma > 0), or OpenAI-ES with its one sigma fixed (lr_sigma = 0): per update, the
    center's Rastrigin value, its mean distance from 0 and the mean size of its step."""
    rng = np.random.default_rng(seed)
    mu, sigma, u, score, distance, step = start.copy(), np.ones(dim), utilities(population), [], [], []
    for _ in range(generations):
        s = mirrored(rng)
        w = np.empty(population)
        w[np.argsort(-rastrigin(mu + sigma * s))] = u       # the best member gets u[0]
        new_mu, sigma = snes_step(mu, sigma, s, w, 1.0, lr_sigma)
        step.append(np.abs(new_mu - mu).mean())
        mu = new_mu
        score.append(rastrigin(mu)[0])
        distance.append(np.abs(mu).mean())
    return np.array(score), np.array(distance), np.array(step)


def run_adam(seed, sigma=1.0, lr=0.1):
    """Centered ranks (notebook 00's, without its tie rule) and Adam (notebook 01's adam_update),
    around one fixed sigma."""
    rng = np.random.default_rng(seed)
    center, m, v, score, distance, step = start.copy(), np.zeros(dim), np.zeros(dim), [], [], []
    for t in range(1, generations + 1):
        noise = mirrored(rng)
        returns = rastrigin(center + sigma * noise)
        assert len(np.unique(returns)) == population      # no ties: the tie rule would change nothing
        ranks = np.argsort(np.argsort(returns)) / (population - 1) - 0.5
        grad = noise.T @ ranks / (population * sigma)
        m, v = 0.9 * m + 0.1 * grad, 0.999 * v + 0.001 * grad ** 2
        new_center = center + lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m / (np.sqrt(v) + 1e-8)
        step.append(np.abs(new_center - center).mean())
        center = new_center
        score.append(rastrigin(center)[0])
        distance.append(np.abs(center).mean())
    return np.array(score), np.array(distance), np.array(step)


snes_sigma = (3 + np.log(dim)) / (5 * np.sqrt(dim))
methods = {"SNES (a sigma per coordinate)": lambda seed: run(seed, snes_sigma),
           "OpenAI-ES (one sigma, fixed at 1; otherwise the same)": lambda seed: run(seed, 0.0),
           "centered ranks and Adam (notebooks 00 and 01; lr 0.1), sigma fixed at 1": run_adam}
results = {name: [method(seed) for seed in range(5)] for name, method in methods.items()}
fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
for name, runs in results.items():
    left.plot(runs[0][0], label=name)
    right.plot(runs[0][1], label=name)
left.set(xlabel="update", ylabel="Rastrigin at the center (0 is the maximum)")
right.set(xlabel="update", ylabel="mean |x_j| at the center (0 is the maximum)", yscale="log")
left.legend(fontsize=8)
plt.show()
print(f"the start: Rastrigin {rastrigin(start)[0]:.1f}, mean |x_j| {np.abs(start).mean():.1f}")
for name, runs in results.items():
    finals = [round(float(score[-1]), 2) for score, _, _ in runs]
    far = [round(float(distance[-1]), 2) for _, distance, _ in runs]
    steps = [round(float(step[-100:].mean()), 2) for _, _, step in runs]
    print(f"{name}:\n  seeds 0..4, at the center after {generations} updates: Rastrigin {finals}, "
          f"mean |x_j| {far}\n  mean |step| per coordinate over the last 100 updates: {steps}")

# %% [markdown]
# **Expected output:** from the start (Rastrigin -90.0, every coordinate at 3.0), after 600
# updates SNES's center sits at the global maximum on seed 0 and on a local maximum next to it on
# the other four seeds: Rastrigin `[-0.0, -0.99, -3.98, -1.99, -0.99]`, where one, four, two and
# one coordinates sit at $\pm 1$ instead of $0$ (each costs about $0.99$). OpenAI-ES ends between
# -76 and -120, worse than its start on three seeds of five: its center came closer to 0 (mean
# `|x_j|` between 0.2 and 0.61) but sits on no maximum. One fixed sigma of 1 smooths Rastrigin's
# bumps away: members spread over several bumps see the bowl around 0, not the narrow peak at
# $x = 0$, and its steps stay large (about 0.2 per coordinate over the last 100 updates). SNES
# shrinks each sigma as it closes in, and its steps with it (0.0 at the end). The Adam version
# takes steps ten times smaller (0.02) and ends on no maximum either (-47 to -118).

# %% [markdown]
# ## 3. A policy that learns from the pixels, and its inputs normalized
#
# Your Pong policy in notebook 04 reads features fixed in advance. The course's pixel agent,
# `PongKeypointsPolicy` (`pong/keypoints.py`), learns *where to look*: each of six keypoints
# scores the pixels of its window (a stretch of columns, with a pull up or down the rows; both
# learned) with two learned 3x3 filters, one on the frame and one on its change, and reports
# the expected column and row under a softmax of those scores, in each of the 4 stacked frames. A
# small network, the **head**, turns 495 numbers computed from them (per keypoint its newest
# column and row, their slopes and its presence, then their pairwise products and squares) into
# an action. The gap below needs only its formula.
#
# ### Virtual batch normalization
#
# The head's raw inputs carry offsets that do not depend on the picture: an empty window's
# keypoint sits still at its window's centre, so its column and the products with it barely
# change from frame to frame, yet they are not zero. A member perturbed by ES's noise then
# mostly shifts which action it prefers *everywhere*, and its score says little about how it
# responds to the picture. For its Atari networks the paper used **virtual batch normalization**
# (its section 2.2, after Salimans et al. 2016): batch normalization whose statistics come from a
# *reference batch* of observations chosen once, before training, and fixed. Each member computes
# them with its own parameters on that batch, so they depend on nothing else. The pixel agent
# normalizes its head's inputs this way (`PongKeypointsPolicy(..., vbn=True)`); you write it
# here.
#
# **`virtual_batch_norm(reference, inputs)`**
# * **Inputs:** `reference`, `(R, F)`: the `F` head inputs a member computes on each of the `R`
#   observations of the reference batch; `inputs`, `(k, F)`: the same member's head inputs on
#   `k` observations it meets while it plays; float64 in the check.
# * **Returns:** a new array `(k, F)`, float64 for float64 inputs (leave both arguments as they
#   are): each input minus its feature's mean over the reference batch, divided by its
#   feature's standard deviation there floored at $0.1$, then clipped to $[-5, 5]$:
#
# $$\text{out}_{ij} = \operatorname{clip}\Big(\frac{x_{ij} - m_j}{\max(s_j,\, 0.1)},\; -5,\; 5\Big),
#   \qquad m_j = \frac{1}{R}\sum_r \text{reference}_{rj}, \qquad
#   s_j = \sqrt{\frac{1}{R}\sum_r (\text{reference}_{rj} - m_j)^2}$$
#
#   (`np.std`'s default, the population one). The floor spares a feature that
#   barely varies over the batch (an empty window's column) a division by almost nothing; the
#   clip keeps an input far outside the batch from saturating the head. OpenAI's starter code
#   (linked in notebook 00) does both to observations: its std is `sqrt(max(var, 1e-2))`, at
#   least 0.1
#   ([`951f199:es_distributed/es.py` line 42](https://github.com/openai/evolution-strategies-starter/blob/951f19986921135739633fb23e55b2075f66c2e6/es_distributed/es.py#L42)),
#   and it clips to [-5, 5]
#   ([`951f199:es_distributed/policies.py` line 145](https://github.com/openai/evolution-strategies-starter/blob/951f19986921135739633fb23e55b2075f66c2e6/es_distributed/policies.py#L145)).
# * **Example:** `reference = [[0, 1], [2, 1], [4, 1]]`, `inputs = [[3, 1.05], [40, 0]]`: feature
#   0 has mean 2 and standard deviation 1.633 (the square root of 8/3), feature 1 mean 1 and
#   standard deviation 0, floored to 0.1; so the result is `[[0.6124, 0.5], [5, -5]]` (40 gives
#   23.3 and 0 gives -10, both clipped).
# * **The check:** float64 returned, within a relative error of `1e-6` (float32 statistics lose more), on
#   random inputs with a feature constant over the reference batch, one that barely varies, and
#   inputs far outside the batch; it names a missing floor, `ddof=1`, a missing clip, statistics
#   of `inputs`, the variance floored at 0.1 (instead of the std), float32 statistics, and an argument
#   changed in place.

# %%
def virtual_batch_norm(reference, inputs):
    ### BEGIN SOLUTION
    mean = reference.mean(axis=0)
    std = np.maximum(reference.std(axis=0), 0.1)
    return np.clip((inputs - mean) / std, -5, 5)
    ### END SOLUTION


# %%
check.virtual_batch_norm(virtual_batch_norm)

# %% [markdown]
# ### What it changes
#
# ES's first generation as the pixel agent's run started it: its policy untrained
# (`policy.initial_params(SEED)`, the run's seed), `MEMBERS` members perturbed at the run's
# `SIGMA` around it (mirrored pairs; the noise is this cell's own), each acting on the
# observations of the reference batch (`reference_batch()`), once on its raw
# head inputs and once normalized by your function (here `reference` and `inputs` are the same
# array). For each member the cell counts the share of observations on which it picks its most
# frequent action: a member that picks one action on all of them ignores the picture.

# %%
from pong.keypoints import PULL_SCALE, PongKeypointsPolicy, reference_batch

# the pixel agent's policy (six windows, on the frames and their change, a head of 8), its raw head inputs
policy = PongKeypointsPolicy(6, (8,), motion=True, pull_scale=PULL_SCALE, conv="taps", pull="windows")
observations = reference_batch()                     # uint8 (64, 4, 42, 42)
SEED, SIGMA, MEMBERS = 16, 0.05, 64                 # the pixel agent's run: its seed, sigma and population
center = policy.initial_params(SEED)
half = np.random.default_rng(0).standard_normal((MEMBERS // 2, center.size))
noise = np.stack([half, -half], axis=1).reshape(MEMBERS, center.size)     # mirrored pairs


def most_frequent_share(params, normalized):
    """The share of the observations on which this member picks its most frequent action."""
    (front,), *head = policy.unflatten(np.repeat(params[None].astype(np.float32), len(observations), axis=0))
    inputs = policy.features(front, observations)     # (observations, 495): the head's raw inputs
    if normalized:
        inputs = virtual_batch_norm(inputs, inputs)    # the reference batch, seen with this member's parameters
    actions = policy.head.forward(head, np.asarray(inputs, dtype=np.float32))
    return np.bincount(actions, minlength=3).max() / len(actions)


print(f"{MEMBERS} members at sigma {SIGMA}, each acting on the {len(observations)} observations of the "
      "reference batch:")
for normalized, name in ((False, "raw head inputs"), (True, "normalized head inputs")):
    shares = np.array([most_frequent_share(center + SIGMA * n, normalized) for n in noise])
    many = int(np.sum(shares >= 0.9))
    print(f"  {name}: a member picks its most frequent action on {shares.mean():.0%} of them on average; "
          f"{many} member{'s' * (many != 1)} on at least 90%")

# %% [markdown]
# **Expected output:** with raw head inputs a member picks its most frequent action on 79% of the
# observations on average, and 27 of the 64 members on at least 90% of them; normalized, 55%, and
# no member. Normalized, each member's action changes with the frame far more often, so members
# differ in how they respond to the picture, which ES's scores can then measure.

# %% [markdown]
# ## 4. What the trained pixel agent looks at
#
# The picture below is the course's pixel agent after training. It scores +6.4 a game (points
# won minus points lost) over 20 held-out games (seeds 1,200,000 to 1,200,019), where a random
# player scores -20.15 on the same seeds. Top row: the filters it learned (on the frame, then on
# the change) and each window's columns and row pull. Middle: its keypoints over two frames of a
# real game (circles: each keypoint in the newest frame; lines: its path over the 4 stacked
# frames; we are the right paddle). Its "keypoint `i`" is window `i`'s. Bottom: over
# part of one game, each keypoint's row against where the ball and the paddles really are,
# drawn only on the steps where its window "holds something" (over half its attention on pixels that differ from the
# empty field). The numbers under the picture are measured on 1,500 steps of that game. Before
# you read on: which windows follow the ball, and over which columns?

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
# Windows 1 to 4 (columns 7 to 14, 15 to 22, 19 to 26 and 26 to 33) each hold something on 19%,
# 11%, 15% and 5% of the steps; there their rows follow the ball's (correlations 0.86, 0.93,
# 0.97 and 0.99) and so do their columns (0.93, 0.98, 0.98 and 0.85). Window 0 (columns 0 to 7)
# sits at the opponent's paddle, yet over all steps its row follows the ball's (0.94) more
# closely than the opponent's (0.88); window 5 (columns 35 to 42) sits on our paddle (row
# correlation 0.70). So ES learned, from the pixels, to pass the ball from window to window
# across the field.
