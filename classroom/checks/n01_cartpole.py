"""Notebook 01's checks (milestone 1): mirrored noise, Adam and the training loop on CartPole."""
from __future__ import annotations

import numpy as np

from .. import wire
from .base import (_array, _call, _dtype, _fail, _observe, _register, answers)


@_register("antithetic_noise", "M1", 1, "01_cartpole",
           forbidden=("es.noise",), reference=())
def antithetic_noise(fn, rng):
    """A float64 array (population, dim); rows 2k and 2k+1 are +eps_k and -eps_k; drawn from the
    generator passed in, in the one call the contract gives (rng.standard_normal((population // 2,
    dim)), row k is eps_k)."""
    RNG = wire.RNG
    population, dim = 2 * int(rng.integers(3, 10)), int(rng.integers(3, 9))
    s1, s2 = (int(v) for v in rng.choice(2 ** 31, 2, replace=False))
    value = _call(fn, RNG(s1), population, dim)
    a = _array(value, (population, dim), "antithetic_noise")
    _dtype(value, np.float64, "antithetic_noise")
    if not np.allclose(a[0::2], -a[1::2]):
        half = population // 2
        if np.allclose(a[:half], -a[half:]):
            _fail("antithetic_noise: mirrored as two blocks (all +eps, then all -eps); here member 2k gets +eps_k "
                  "and member 2k+1 gets -eps_k, so that every pair stays in one chunk of workers")
        _fail("antithetic_noise: members 2k and 2k+1 must be mirrored (+eps_k and -eps_k)")
    if np.allclose(a[0], a[2]) or np.allclose(a[0], -a[2]):
        _fail("antithetic_noise: different pairs got the same noise")
    b = np.asarray(_call(fn, RNG(s1), population, dim))
    c = np.asarray(_call(fn, RNG(s2), population, dim))
    if not np.array_equal(a, b) or np.array_equal(a, c):
        _fail("antithetic_noise: draw from the generator you are given (same seed -> same noise), not np.random")
    if not np.allclose(a[0::2], np.random.default_rng(s1).standard_normal((population // 2, dim))):
        _fail("antithetic_noise: mirrored, but not the draws the contract gives: take eps_k as row k of one call, "
              "rng.standard_normal((population // 2, dim)), and draw nothing else from rng (your training loop "
              "draws from the same generator)")


@_register("adam_update", "M1", 2, "01_cartpole",
           forbidden=("es.optimizers", "es.Adam", "es.SGD"), reference=("adam_update",))
def adam_update(fn, rng):
    """Three Adam ascent steps (betas 0.9, 0.999, epsilon 1e-8, bias correction), in float64;
    each parameter within lr / 1000 of them. One parameter's three gradients are exactly 0: there
    m = v = 0, and only epsilon keeps the step from 0 / 0 (nan). Another's are small (0.005 to
    0.02, one sign): there sqrt(v) (v not bias-corrected) is below 1.1e-3, small enough that
    epsilon inside the square root, sqrt(v + 1e-8), moves it by more than lr / 1000."""
    dim, lr = int(rng.integers(3, 8)), float(rng.uniform(0.01, 0.2))
    theta = rng.standard_normal(dim).astype(np.float32)
    grads = rng.standard_normal((3, dim))
    small, zero = (int(i) for i in rng.choice(dim, 2, replace=False))
    grads[:, small] = rng.choice([-1.0, 1.0]) * rng.uniform(0.005, 0.02, 3)
    grads[:, zero] = 0.0
    grads = [g.astype(np.float32) for g in grads]
    want = answers("adam_update", theta, grads, lr)
    got, state = theta.copy(), None
    for g in grads:
        got, state = _call(fn, got, g, state, lr)
        got = _array(got, (dim,), "adam_update")
    near = lambda name: np.max(np.abs(got - want[name])) <= lr / 1000      # noqa: E731
    if near("right"):
        return
    if not np.isfinite(got[zero]) and np.all(np.isfinite(np.delete(got, zero))):
        _fail(f"adam_update: parameter {zero}, whose three gradients are 0, became {got[zero]}: m = v = 0 there, and "
              "m / sqrt(v) is 0 / 0; you left epsilon out: divide by sqrt(v) + epsilon (1e-8)")
    if near("descends"):
        _fail("adam_update: it descends; ES maximises the return, so add the step")
    if near("no_bias_correction"):
        _fail("adam_update: no bias correction; scale by sqrt(1 - beta2**t) / (1 - beta1**t)")
    if near("epsilon_in_sqrt"):
        _fail("adam_update: epsilon inside the square root; divide by sqrt(v) + epsilon, as the contract's update "
              "does (they differ where the gradients are small)")
    _fail(f"adam_update: off by up to {np.max(np.abs(got - want['right'])):.3g} (more than lr / 1000) after three steps")


@_register("train_cartpole", "M1", 3, "01_cartpole",
           forbidden=("es.train", "es.training", "es.api", "es.optimize", "es.OpenES", "es.strategy",
                      "es.optimizers", "es.Adam", "es.SGD", "es.config_for", "es.evaluators", "es.parallel",
                      "es.noise", "es.shaping"), reference=("train_cartpole", "train_cartpole_steps"))
def train_cartpole(fn, rng):
    """train_cartpole(seed) -> linear policy parameters (10 floats, es.policies.MLPPolicy(4, 2, ())
    layout), trained from two fresh seeds and one of them again: the same seed gives the same
    parameters, other seeds other ones, and the global np.random state is neither seeded nor
    drawn from. Then the five steps, against the answer key's loop (each parameter within 1e-6,
    a margin for sums in another order): the center after 3 updates from the first seed, naming
    the mistake whose center it is; the centers both full runs return; a run at lr 0.05 from a
    seed whose center reaches a mean of 475 before every start gives 500 (it stops too early if
    it stops on the mean). Last, each run solves CartPole-v1 (mean return >= 475 on seeds
    1000..1019)."""
    from es.envs import EnvProblem
    a, b = (int(v) for v in rng.choice(2 ** 31, 2, replace=False))
    runs, raw, g = {}, {}, int(rng.integers(2 ** 31))
    for seed in (a, b):
        reply = _observe(fn, seed, global_seed=g, draw_after=True)
        params = np.asarray(reply["value"], dtype=np.float32).ravel()
        if params.size != 10:
            _fail(f"train_cartpole: expected 10 parameters (4x2 weights + 2 biases), got {params.size}")
        if reply["after"] != np.random.RandomState(g).random_sample():
            _fail("train_cartpole: it uses the global np.random state (it seeds it or draws from it); draw every "
                  "random number from the generator built from the seed, never np.random.*")
        runs[seed], raw[seed] = params, np.asarray(reply["value"], dtype=np.float64).ravel()
    if np.array_equal(runs[a], runs[b]):
        _fail(f"train_cartpole: seeds {a} and {b} gave the same parameters; it ignores its seed (or returns "
              "parameters fixed in advance): train from np.random.default_rng(seed)")
    if not np.array_equal(np.asarray(_call(fn, a), dtype=np.float32).ravel(), runs[a]):
        _fail(f"train_cartpole: two runs from seed {a} gave different parameters; draw every random number "
              "from the generator built from the seed, never np.random.*")
    steps = answers("train_cartpole_steps", a, 3)
    got = np.asarray(_call(fn, a, 3), dtype=np.float64).ravel()
    if not _same_center(got, steps["right"]):
        _blame_loop(got, steps, f"after 3 updates from seed {a} (train_cartpole({a}, 3))")
    for seed in (a, b):
        run = answers("train_cartpole", seed, 60, 256, 0.2, 0.3)
        if not _same_center(raw[seed], run["right"]):
            _blame_loop(raw[seed], run, f"trained from seed {seed} on the defaults ({len(run['log']) - 1} updates)")
    for _ in range(30):            # a seed whose run at lr 0.05 passes a mean of 475 before it stops (most do)
        seed = int(rng.integers(2 ** 31))
        run = answers("train_cartpole", seed, 60, 256, 0.2, 0.05)
        if np.any(run["log"][:-1] >= 475):
            break
    got = np.asarray(_call(fn, seed, 60, 256, 0.2, 0.05), dtype=np.float64).ravel()
    if not _same_center(got, run["right"]):
        _blame_loop(got, run, f"trained from seed {seed} at lr 0.05 (train_cartpole({seed}, 60, 256, 0.2, 0.05))")
    cartpole = EnvProblem("CartPole-v1", hidden=())
    for seed, params in runs.items():
        returns, _ = cartpole.play(params, np.arange(1000, 1020))
        if returns.mean() < 475:
            _fail(f"train_cartpole: trained from seed {seed}, the policy scores {returns.mean():.1f} on seeds "
                  "1000..1019, below 475")


def _same_center(got, want) -> bool:
    """The same center up to the order of float sums (1e-6 of the largest parameter, at least 1e-6)."""
    return got.shape == np.shape(want) and np.max(np.abs(got - want)) <= 1e-6 * max(1.0, np.max(np.abs(want)))


_LOOP_MISTAKES = {
    "noise_first": "it draws the noise before the start states; each generation draws `starts` first (step 1), "
                   "then the noise (step 4), from the one generator: the order of the draws is the run",
    "fixed_starts": "it draws the start states once for the whole run; draw new `starts` every generation (step 1)",
    "starts_g": "it plays generation g's members on starts[g]; every member plays starts[0] of this generation's "
                "starts (step 4)",
    "no_sigma": "it leaves 1 / sigma out of the gradient: grad = noise.T @ z / (population * sigma) (step 5)",
    "descends": "it steps down the gradient; ES climbs: center = center + lr * grad (step 5)",
    "stop_475": "it stops when the center's mean return reaches 475; step 3 stops only when every start state "
                "gives 500, center_scores.min() >= 500",
}


def _blame_loop(got, key, when):
    """Fail naming the mistake whose center ``got`` is: one of ``key``'s named ones, or stopping
    when the mean reaches 475 (a center the run logged before it stopped)."""
    for mistake, words in _LOOP_MISTAKES.items():
        if mistake in key and _same_center(got, key[mistake]):
            _fail(f"train_cartpole: {when}, your center is the one a loop gets where {words}")
    for mean, center in zip(key.get("log", [])[:-1], key.get("centers", [])[:-1]):
        if mean >= 475 and _same_center(got, center):
            _fail(f"train_cartpole: {when}, your loop stopped too early, at a center whose mean return was {mean:.1f} "
                  "on its generation's starts (not all 500): step 3 stops only when center_scores.min() >= 500, on "
                  "the starts drawn at step 1 of the same generation, before the update")
    _fail(f"train_cartpole: {when}, your center is off by up to {np.max(np.abs(got - key['right'])):.3g} from the "
          "five steps' (more than 1e-6): the cell above plots your loop from seed 0 against the five steps' curve, "
          "and where they part is where your loop departs from the steps (it calls your antithetic_noise: its "
          "check must pass first)")
