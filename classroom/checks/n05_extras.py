"""Notebook 05's checks (extras): SNES and virtual batch normalization."""
from __future__ import annotations

import numpy as np

from .base import (_array, _call_leaving, _close, _dtype, _fail, _register, answers, rel_error)


@_register("snes_step", "extras", 3, "05_extras",
           forbidden=("es.strategy", "es.SNES"), reference=("snes_step",))
def snes_step(fn, rng):
    """Separable NES: the mean moves along sigma * sum_i w_i s_i, sigma is scaled by
    exp(lr_sigma / 2 * sum_i w_i (s_i**2 - 1)); both float64, new arrays (the arguments left as
    they were); then, for mu in the hundreds and small utilities, the step mu' - mu within 1e-6 (float32 loses
    it)."""
    dim, population = int(rng.integers(3, 9)), int(rng.integers(8, 20))
    mu, sigma = rng.standard_normal(dim), np.abs(rng.standard_normal(dim)) + 0.1
    s, w = rng.standard_normal((population, dim)), rng.standard_normal(population)
    lr_mu, lr_sigma = float(rng.uniform(0.2, 1.0)), float(rng.uniform(0.05, 0.3))
    want = answers("snes_step", mu, sigma, s, w, lr_mu, lr_sigma)
    out = _call_leaving(fn, ("mu", "sigma", "s", "w"), mu.copy(), sigma.copy(), s.copy(), w.copy(), lr_mu, lr_sigma)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        _fail("snes_step: return the pair (mu, sigma)")
    _dtype(out[0], np.float64, "snes_step (the new mu)")
    _dtype(out[1], np.float64, "snes_step (the new sigma)")
    got_mu, got_sigma = (_array(v, (dim,), "snes_step") for v in out)
    if not _close(got_mu, want["mu"]):
        if _close(got_mu, want["mu_without_sigma"]):
            _fail("snes_step: the mean update lacks sigma; mu += lr_mu * sigma * sum_i w_i s_i")
        if np.max(np.abs(got_mu - want["mu"])) <= 1e-5 * np.max(np.abs(want["mu"])):     # float32's digits
            _fail(f"snes_step: the mean update is off by a relative error of {rel_error(got_mu, want['mu']):.2g}, more "
                  "than 1e-6: a computation in float32 loses that much; compute in the inputs' float64 (no "
                  "astype(np.float32))")
        _fail("snes_step: the mean update is off; mu += lr_mu * sigma * sum_i w_i s_i")
    if not _close(got_sigma, want["sigma"]):
        if _close(got_sigma, want["sigma_additive"]):
            _fail("snes_step: sigma must be updated multiplicatively (exp), or it can go negative")
        _fail("snes_step: the sigma update is off; sigma *= exp(lr_sigma / 2 * sum_i w_i (s_i**2 - 1))")
    # float32 keeps about 7 digits of mu: with mu in the hundreds and steps near 0.01 it loses the step's 4th digit
    far = rng.uniform(100, 1000, dim) * rng.choice([-1, 1], dim)
    small = 0.01 * rng.standard_normal(population)
    want = answers("snes_step", far, sigma, s, small, lr_mu, lr_sigma)
    out = _call_leaving(fn, ("mu", "sigma", "s", "w"), far.copy(), sigma.copy(), s.copy(), small.copy(), lr_mu, lr_sigma)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        _fail("snes_step: return the pair (mu, sigma)")
    got_mu = _array(out[0], (dim,), "snes_step")
    if rel_error(got_mu - far, want["mu"] - far) > 1e-6:
        _fail(f"snes_step: with mu in the hundreds and small utilities, the step mu' - mu is off by a relative error "
              f"of {rel_error(got_mu - far, want['mu'] - far):.2g}, more than 1e-6: a computation in float32 keeps "
              "about 7 digits of mu and loses the step's; compute in the inputs' float64 (no astype(np.float32))")


@_register("virtual_batch_norm", "extras", 2, "05_extras",
           forbidden=("pong.keypoints", "pong.policy"), reference=("virtual_batch_norm",))
def virtual_batch_norm(fn, rng):
    """virtual_batch_norm(reference (R, F), inputs (k, F)) -> (k, F): clip((inputs - m) / max(s, 0.1), -5, 5),
    m and s the mean and population standard deviation of each feature over the reference batch; float64
    inputs give a float64 array within a relative error of 1e-6 (a float32 computation is off by about 1e-4
    here, and named), both arguments left as they are, on features with offsets, one constant over the batch,
    one that barely varies, and inputs far outside the batch."""
    r, f, k = int(rng.integers(6, 20)), int(rng.integers(5, 12)), int(rng.integers(20, 40))
    offset, scale = rng.uniform(-20, 20, f), rng.uniform(0.5, 5, f)
    reference = offset + scale * rng.standard_normal((r, f))
    inputs = offset + scale * (1.5 * rng.standard_normal((k, f)) + 0.5)    # statistics unlike the batch's
    flat, tiny = rng.choice(f, 2, replace=False)
    reference[:, flat] = offset[flat]                                     # constant over the batch: std 0
    inputs[:, flat] = offset[flat] + rng.choice([-1, 1], k) * rng.uniform(0.05, 0.3, k)
    reference[:, tiny] = offset[tiny] + 0.02 * rng.standard_normal(r)     # std below the floor
    inputs[:, tiny] = offset[tiny] + 0.02 * rng.standard_normal(k)
    others = [j for j in range(f) if j not in (flat, tiny)]
    rows = rng.choice(k, 3, replace=False)
    cols = rng.choice(others, 3)
    inputs[rows, cols] = offset[cols] + rng.choice([-1, 1], 3) * rng.uniform(10, 20, 3) * scale[cols]   # to clip
    want = answers("virtual_batch_norm", reference, inputs)
    out = _call_leaving(fn, ("reference", "inputs"), reference.copy(), inputs.copy())
    got = _array(out, (k, f), "virtual_batch_norm")
    _dtype(out, np.float64, "virtual_batch_norm (on float64 inputs)")
    if _close(got, want["right"]):
        return
    for key, why in (("no_floor", f"feature {flat} is constant over the reference batch (standard deviation 0): "
                                  "floor the std at 0.1, max(std, 0.1), before dividing"),
                     ("sample", "it used the sample std (ddof=1, dividing by R - 1); use the population std over "
                                "the reference batch (np.std's default, dividing by R)"),
                     ("no_clip", "forgot the clip: clip the normalized inputs to [-5, 5]"),
                     ("input_stats", "it took the statistics of the inputs; the mean and std come from the "
                                     "reference batch (`reference`), and `inputs` only get normalized with them"),
                     ("floor_variance", "it floored the variance at 0.1; floor the standard deviation: "
                                        "max(std, 0.1)")):
        if _close(got, want[key]):
            _fail(f"virtual_batch_norm: {why}")
    if np.max(np.abs(got - want["right"])) <= 1e-3:        # normalized values in [-5, 5]: float32's rounding
        _fail(f"virtual_batch_norm: off by a relative error of {rel_error(got, want['right']):.2g} (by at most "
              f"{np.max(np.abs(got - want['right'])):.1g}), more than 1e-6: a computation in float32 loses that much on "
              "these inputs; compute in the inputs' float64 (no astype(np.float32)), and add no epsilon")
    _fail(f"virtual_batch_norm: off by a relative error of {rel_error(got, want['right']):.2g}; compute "
          "clip((inputs - mean) / max(std, 0.1), -5, 5), mean and std of each feature (column) over `reference`")
