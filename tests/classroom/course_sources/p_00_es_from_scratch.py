"""Sources of the numbers on page 00_es_from_scratch."""
import contextlib
import io
import math
from functools import lru_cache

import numpy as np

from course_numbers import Claim
from course_sources import *   # noqa: F401,F403  (printed, solution, lines, load, fmt, source_of, check_points)

NB = "00_es_from_scratch"
STARTER = "es_distributed/es.py"     # openai/evolution-strategies-starter at 951f199, read by hand


@lru_cache(maxsize=None)
def _ns():
    with contextlib.redirect_stdout(io.StringIO()):        # section 2's cell prints its errors
        return solution(NB, "centered_ranks", "es_gradient", "mirrored", "f", "solution")


BLOG = ("**the blog post**: OpenAI's post on the paper (March 2017), "
        "[openai.com/index/evolution-strategies](https://openai.com/index/evolution-strategies/)")
BLOB = "https://github.com/openai/evolution-strategies-starter/blob/951f19986921135739633fb23e55b2075f66c2e6/"
ES_PY = BLOB + "es_distributed/es.py"
STARTER_RANKS = ("when its configuration says `\"return_proc_mode\": \"centered_rank\"` (as "
                 f"[`951f199:configurations/humanoid.json`]({BLOB}configurations/humanoid.json) does; "
                 f"[`951f199:es_distributed/es.py` lines 233-234]({ES_PY}#L233-L234)): each return's rank, scaled "
                 "to `[-0.5, 0.5]` so that the worst member gets -0.5, the best +0.5, and the weights sum to zero "
                 f"([`compute_centered_ranks`, lines 80-84]({ES_PY}#L80-L84))")
STARTER_TIES = f"The starter's `compute_ranks` ([lines 69-77]({ES_PY}#L69-L77)) ranks with `x.argsort()`"
STARTER_SIGMA = f"(`g /= returns_n2.size`, [`951f199:es_distributed/es.py` line 247]({ES_PY}#L247))"
STARTER_ADAM = (f"and hands `-g` (plus its weight decay) to its optimizer, which minimises ([line 249]({ES_PY}#L249)), Adam in the configuration of section 1, "
                "whose step does not grow with the gradient's scale (notebook 01, section 2)")


def blog_cited():
    assert "https://openai.com/index/evolution-strategies/" in BLOG


def ranks_span_the_interval():
    """The course's centered ranks run from -0.5 (the worst) to +0.5 (the best) and sum to 0,
    as the starter's compute_centered_ranks (ranks / (size - 1) - .5) does on distinct returns."""
    ranks = _ns()["centered_ranks"]
    rng = np.random.default_rng(0)
    for n in (2, 7, 40):
        x = rng.standard_normal(n)
        w = ranks(x)
        assert w[x.argmin()] == -0.5 and w[x.argmax()] == 0.5 and abs(w.sum()) < 1e-12
        assert w.min() == -0.5 and w.max() == 0.5


def starter_ranks_cited():
    assert f"`951f199:{STARTER}` lines 233-234]({ES_PY}#L233-L234)" in STARTER_RANKS
    assert f"`compute_centered_ranks`, lines 80-84]({ES_PY}#L80-L84)" in STARTER_RANKS
    assert f"]({BLOB}configurations/humanoid.json)" in STARTER_RANKS
    ranks_span_the_interval()


def starter_tie_rule_cited():
    assert f"`compute_ranks` ([lines 69-77]({ES_PY}#L69-L77))" in STARTER_TIES and "x.argsort()" in STARTER_TIES


def worked_ranks():
    w = _ns()["centered_ranks"]([3.0, 1.0, 3.0, 2.0])
    ranks = (w + 0.5) * 3
    assert fmt(ranks, 1) == "[2.5, 0, 2.5, 1]", ranks
    assert fmt(w, 4) == "[0.3333, -0.5, 0.3333, -0.1667]", w
    assert abs(w.sum()) < 1e-12


def _tolerance(check_name, fn, tol):
    """The check passes ``fn`` scaled by 1 + tol (a relative error of about tol / 2) and fails it
    scaled by 1 + 3 tol (about 1.5 tol): its tolerance is tol."""
    from classroom import check

    def scaled(factor):
        return lambda *args: np.asarray(fn(*args)) * factor
    with contextlib.redirect_stdout(io.StringIO()):
        for seed in range(3):
            getattr(check, check_name)(scaled(1 + tol), seed=seed)
            try:
                getattr(check, check_name)(scaled(1 + 3 * tol), seed=seed)
            except check.CheckFailed:
                continue
            raise AssertionError(f"check.{check_name} passed a relative error of {1.5 * tol:g}")


def ranks_tolerance():
    _tolerance("centered_ranks", _ns()["centered_ranks"], 1e-6)


def gradient_tolerance():
    _tolerance("es_gradient", _ns()["es_gradient"], 1e-5)


def worked_gradient():
    got = _ns()["es_gradient"](np.array([[1.0, 0], [0, 2]]), np.array([0.5, -0.5]), 0.5)
    by_hand = (0.5 * np.array([1, 0]) - 0.5 * np.array([0, 2])) / (2 * 0.5)
    assert np.allclose(got, [0.5, -1.0]) and np.allclose(by_hand, [0.5, -1.0])


def starter_sigma_cited():
    assert f"`g /= returns_n2.size`, [`951f199:{STARTER}` line 247]({ES_PY}#L247)" in STARTER_SIGMA


def starter_adam_cited():
    """Line 249 is optimizer.update(-g + config.l2coeff * theta); humanoid.json, the one
    configuration at 951f199, names Adam (optimizers.py: step = -a * m / (sqrt(v) + epsilon),
    unchanged when every gradient is scaled alike, as the solution of notebook 01 shows)."""
    assert f"([line 249]({ES_PY}#L249))" in STARTER_ADAM and "configuration of section 1" in STARTER_ADAM
    adam = solution("01_cartpole", "adam_update")["adam_update"]
    rng = np.random.default_rng(0)
    grads = rng.standard_normal((5, 6))
    paths = []
    for scale in (1.0, 50.0):
        theta, state = np.zeros(6), None
        for g in grads:
            theta, state = adam(theta, scale * g, state, 0.01)
        paths.append(theta)
    assert np.allclose(paths[0], paths[1], rtol=1e-4, atol=0), paths      # up to epsilon


def _step_along_gradient(sigma, distance, reps=1000, population=20):
    """The mean step of ranks-shaped ES on the quadratic, along the direction to the top, in
    units of lr / sigma, from ``distance`` away."""
    ns = _ns()
    rng, d = np.random.default_rng(0), np.array([1.0, 0.0])
    theta = ns["solution"] - distance * d
    total = 0.0
    for _ in range(reps):
        eps = ns["mirrored"](rng, population, 2)
        total += ns["es_gradient"](eps, ns["centered_ranks"](ns["f"](theta + sigma * eps)), sigma) @ d * sigma
    return total / reps


def rank_step_length():
    """0.28 = E[(Phi(z) - 1/2) z] (= 1 / (2 sqrt(pi))), and the solution's ES steps about that far
    (in units of lr / sigma) where f is close to linear within sigma."""
    z = np.linspace(-12, 12, 240_001)
    phi = np.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    Phi = 0.5 * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))
    value = np.sum((Phi - 0.5) * z * phi) * (z[1] - z[0])
    assert round(value, 2) == 0.28 and abs(value - 1 / (2 * math.sqrt(math.pi))) < 1e-6
    assert 0.27 <= _step_along_gradient(0.1, 2.0) <= 0.30


def steps_shrink_near_the_top_at_sigma_1():
    far, mid, near = (_step_along_gradient(1.0, d) for d in (2.0, 1.0, 0.5))
    assert far > mid > near and near < 0.6 * 0.28, (far, mid, near)


CLAIMS: list[Claim] = [
    Claim(BLOG, blog_cited, "the blog post's page, cited in the text (its date, March 2017)"),
    Claim(STARTER_RANKS, starter_ranks_cited, "openai/evolution-strategies-starter at 951f199: es_distributed/es.py "
          "lines 80-84 (compute_centered_ranks: ranks / (size - 1) - .5) and 233-234 (used when return_proc_mode is "
          "centered_rank), configurations/humanoid.json (return_proc_mode centered_rank); the interval "
          "recomputed with the solution's centered_ranks"),
    Claim(STARTER_TIES, starter_tie_rule_cited, "openai/evolution-strategies-starter at 951f199, "
          "es_distributed/es.py lines 69-77 (ranks[x.argsort()] = np.arange(len(x)): no averaging of ties)"),
    Claim("`[-0.5, 0.5]`", ranks_span_the_interval, "the solution's centered_ranks on random returns"),
    Claim("`returns = [3.0, 1.0, 3.0, 2.0]`. Sorted: 1.0 (rank 0), 2.0 (rank 1), and the two 3.0 occupy ranks 2 "
          "and 3, so each gets 2.5. Ranks `[2.5, 0, 2.5, 1]`, divided by `n - 1 = 3`, minus 0.5: "
          "**`[0.3333, -0.5, 0.3333, -0.1667]`** (sum 0)", worked_ranks, "the solution's centered_ranks"),
    Claim("relative error at most 1e-6 against the right weights", ranks_tolerance,
          "check.centered_ranks passes a relative error of 5e-7 and fails 1.5e-6"),
    Claim("`noise = [[1, 0], [0, 2]]`, `weights = [0.5, -0.5]`, `sigma = 0.5`: `(0.5 * [1, 0] - 0.5 * [0, 2]) / "
          "(2 * 0.5)` = **`[0.5, -1.0]`**", worked_gradient, "the solution's es_gradient"),
    Claim("relative error at most 1e-5, on random noise", gradient_tolerance,
          "check.es_gradient passes a relative error of 5e-6 and fails 1.5e-5"),
    Claim(STARTER_SIGMA, starter_sigma_cited,
          "openai/evolution-strategies-starter at 951f199, es_distributed/es.py line 247 (g /= returns_n2.size, "
          "no division by noise_stdev)"),
    Claim(STARTER_ADAM, starter_adam_cited,
          "openai/evolution-strategies-starter at 951f199, es_distributed/es.py line 249 (optimizer.update(-g + "
          "config.l2coeff * theta)), configurations/humanoid.json (\"optimizer\": {\"type\": \"adam\"}, the one "
          "configuration), es_distributed/optimizers.py (Adam: step = -a * m / (sqrt(v) + epsilon)); the scale "
          "invariance recomputed with notebook 01's adam_update"),
    Claim("is about `0.28 lr / sigma` long whatever the scale of `f`: a member's centered rank is about "
          "$\\Phi(z) - 1/2$, with $z$ its noise along the gradient and $\\Phi$ the standard normal's cumulative "
          "distribution function, and `0.28` is $\\mathbb{E}[(\\Phi(z) - 1/2)\\, z]$", rank_step_length,
          "the integral computed; the solution's mean step at sigma 0.1, population 20", slow=True),
    Claim("There `f` curves within `sigma`: the closer the run gets to the top, the more the ranks sort the members "
          "by how far their noise reaches rather than by its direction, and the shorter the steps.",
          steps_shrink_near_the_top_at_sigma_1, "the solution's mean step at sigma 1, 2, 1 and 0.5 from the top",
          slow=True),
]
