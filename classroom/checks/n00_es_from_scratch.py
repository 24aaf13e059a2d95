"""Notebook 00's checks (milestone 1): centered ranks and the ES gradient."""
from __future__ import annotations

import numpy as np

from .base import (_array, _call_leaving, _close, _dtype, _fail, _register, answers, rel_error)


@_register("centered_ranks", "M1", 2, "00_es_from_scratch",
           forbidden=("es.shaping", "es.centered_ranks", "es.z_score"), reference=("centered_ranks",))
def centered_ranks(fn, rng):
    """Tolerance 1e-6 against the course's centered ranks, on distinct returns with an outlier
    and a few closer than 1e-3 (one pair 1e-9 apart, four returns 1e-4 apart: rounding the returns
    or comparing them with a tolerance ties them), then on returns with ties; a float64 array;
    the returns left as they were."""
    n = int(rng.integers(9, 30))
    x = rng.choice(10_000, n, replace=False) / 100 - 50      # multiples of 0.01
    x[rng.integers(n)] = 1e4                      # an outlier: min-max scaling squashes the rest
    near = x[rng.choice(np.flatnonzero(x < 1e4), 2, replace=False)]
    x = rng.permutation(np.concatenate([x, [near[0] + 1e-9], near[1] + 1e-4 * np.arange(1, 4)]))
    n = len(x)
    ties = rng.integers(-3, 4, n + 8).astype(np.float64)      # 7 values, n + 8 returns: ties
    values, counts = np.unique(ties, return_counts=True)
    if not np.any(counts % 2 == 0):       # make a tie group of even size: its mean rank is a half (2.5)
        ties[np.flatnonzero(ties == values[0])[0]] = values[1]
    want, want_ties = answers("centered_ranks", x), answers("centered_ranks", ties)
    value = _call_leaving(fn, ("returns",), x.copy())
    got = _array(value, (n,), "centered_ranks")
    if not _close(got, want["right"]):
        _blame_ranks(got, x, want)
    _dtype(value, np.float64, "centered_ranks")
    got = _array(_call_leaving(fn, ("returns",), ties.copy()), (n + 8,), "centered_ranks")
    if _close(got, want_ties["right"]):
        return
    if any(np.ptp(got[ties == v]) > 1e-9 for v in np.unique(ties)):
        _fail("centered_ranks: tied returns got different weights; ties must share the mean of their ranks")
    ranks = want_ties["ranks"]
    distinct, dense = np.unique(ties, return_inverse=True)
    if _close(got, dense / (len(distinct) - 1) - 0.5):
        _fail("centered_ranks: dense ranks (each distinct return one rank, as np.unique's inverse gives): a tie "
              "must span as many ranks as it has returns and share their mean, so that ties do not shrink the "
              "others' ranks (in [3.0, 1.0, 3.0, 2.0] the two 3.0 get 2.5, not 2)")
    if _close(got, np.floor(ranks) / (n + 7) - 0.5) and np.any(ranks % 1):      # int ranks: 2.5 stored as 2
        half = ranks[ranks % 1 > 0][0]
        _fail(f"centered_ranks: tied returns got a whole-number rank: the ranks array is an int array, so the mean "
              f"rank {half:g} was truncated to {half // 1:g}; make it a float array (np.empty(n) is float64)")
    for side, which in (("left", "lowest"), ("right", "highest")):
        rank = np.searchsorted(np.sort(ties), ties, side=side) - (side == "right")   # each tie's lowest or highest
        if _close(got, rank / (n + 7) - 0.5):
            _fail(f"centered_ranks: tied returns got their {which} rank, not the mean of their ranks")
    _blame_ranks(got, ties, want_ties)


def _blame_ranks(got, x, want):
    n, ranks = len(x), want["ranks"]
    span = x.max() - x.min()
    groups = np.unique(np.round(got, 12), return_inverse=True)[1]       # returns that got one weight
    if groups.max() + 1 < len(np.unique(x)):
        merged = np.bincount(groups, ranks) / np.bincount(groups)       # each group: the mean of its ranks
        if _close(got, merged[groups] / (n - 1) - 0.5):
            a, b = next(u[:2] for u in (np.unique(x[groups == v]) for v in range(len(merged))) if len(u) > 1)
            _fail(f"centered_ranks: returns {a:.12g} and {b:.12g} differ (by {b - a:.1g}) but got the "
                  "same weight, as ties: only equal returns tie; rank the returns as they are (no rounding, no "
                  "tolerance, no float32)")
    if _close(got, ranks / (n - 1)):
        _fail("centered_ranks: values span [0, 1]; forgot to center the ranks (subtract 0.5 so they sum to zero)")
    if _close(got, ranks / n - 0.5) or _close(got, (ranks + 1) / n - 0.5):
        _fail("centered_ranks: divided the ranks by n; divide by n - 1 so the worst gets -0.5, the best +0.5, "
              "and they sum to zero")
    if _close(got, -want["right"]):
        _fail("centered_ranks: the order is reversed; the best return must get +0.5")
    if _close(got, (x - x.min()) / span - 0.5) or _close(got, (x - x.min()) / span):
        _fail("centered_ranks: scaled the returns (min-max) instead of ranking them; one outlier then squashes "
              "every other weight to the same value: use each return's rank")
    if _close(got, (x - x.mean()) / x.std(), 1e-4):
        _fail("centered_ranks: these are z-scores of the returns; rank them instead")
    order = want["argsort"]
    if _close(got, order / (n - 1) - 0.5) or _close(got, order / (n - 1)):
        _fail("centered_ranks: used np.argsort(x) as the ranks; argsort gives the indices that sort x, not each "
              "return's rank (the rank is the argsort of the argsort, or ranks[order] = arange(n))")
    if abs(got.sum()) > 1e-6:
        _fail(f"centered_ranks: weights sum to {got.sum():.3g}, not 0")
    _fail(f"centered_ranks: relative error {rel_error(got, want['right']):.2g} > 1e-6 against the reference")


@_register("es_gradient", "M1", 2, "00_es_from_scratch",
           forbidden=("es.strategy", "es.noise", "es.OpenES"), reference=("es_gradient",))
def es_gradient(fn, rng):
    """The ES gradient estimate from noise, weights and sigma, tolerance 1e-5, a float64 array;
    noise and weights left as they were."""
    population, dim = 2 * int(rng.integers(10, 30)), int(rng.integers(3, 12))
    noise = rng.standard_normal((population, dim))
    weights = rng.standard_normal(population)
    sigma = float(rng.uniform(0.02, 0.5))
    want = answers("es_gradient", noise, weights, sigma)["right"]
    value = _call_leaving(fn, ("noise", "weights"), noise.copy(), weights.copy(), sigma)
    got = _array(value, (dim,), "es_gradient")
    if _close(got, want, 1e-5):
        _dtype(value, np.float64, "es_gradient")
        return
    if _close(got, want * sigma, 1e-5):
        _fail("es_gradient: off by a factor sigma; divided by the population but not by sigma")
    if _close(got, want * population, 1e-5):
        _fail("es_gradient: off by a factor of the population size; forgot to divide by the population")
    if _close(got, -want, 1e-5):
        _fail("es_gradient: wrong sign; the estimate must point towards higher returns")
    if _close(got, want / sigma, 1e-5):
        _fail("es_gradient: divided by sigma twice (sigma ** 2); the noise is already in units of sigma")
    _fail(f"es_gradient: relative error {rel_error(got, want):.2g} > 1e-5 against the reference")
