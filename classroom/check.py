"""Checks a student runs after each graded cell, and the autograder runs the same ones.

    from classroom import check
    check.centered_ranks(centered_ranks)         # prints one line "OK ..." or raises CheckFailed

Every check draws its inputs from a seed, compares what the student's function returns with
what it should, with a stated tolerance, and when they differ says which mistake the numbers
point to. A failure names its seed; ``check.NAME(fn, seed=S)`` repeats it.

Where "what it should" comes from (``answers``): in the instructor's checkout (the course
repository) and in the grader, the answer key (``classroom.references``) on fresh inputs for each grading run, so an
answer computed for other inputs cannot pass. A student release has no answer key: it carries
the answers to the questions its checks ask on a few fixed seeds (``expected.json``, written
by ``python -m classroom release``), and ``check.NAME(fn)`` draws one of those seeds.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import zlib
from pathlib import Path

import numpy as np

from . import wire

# name -> (milestone, points, notebook, names the check needs from the notebook)
CHECKS: dict[str, tuple[str, int, str, tuple[str, ...]]] = {}
EXPECTED = Path(__file__).with_name("expected.json")


class CheckFailed(AssertionError):
    pass


def checks_for(notebook: str) -> list[str]:
    """The checks of one notebook, in the order they run."""
    return [name for name, (_, _, nb, _) in CHECKS.items() if nb == notebook]


def rel_error(x, y) -> float:
    """CS231n's relative error: max |x - y| / max(|x| + |y|)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    return float(np.max(np.abs(x - y) / np.maximum(1e-8, np.abs(x) + np.abs(y))))


def input_seed(run_seed: int, name: str) -> int:
    """The seed of one check's inputs in a grading run (a student can pass it back as ``seed=``)."""
    return int(np.random.SeedSequence([int(run_seed), zlib.crc32(name.encode())]).generate_state(1)[0])


# ---------------------------------------------------------------- where the answers come from
def _digest(args) -> str:
    return hashlib.sha256(wire.dumps(list(args)).encode()).hexdigest()[:16]


def _uint8_digest(a: np.ndarray) -> str:
    """Shape and bytes of a uint8 array (``references.uint8_digest``): answers a release records
    as 32 bytes instead of the array."""
    return hashlib.sha256(repr(a.shape).encode() + np.ascontiguousarray(a, dtype=np.uint8).tobytes()).hexdigest()


class Answers:
    """The answer key itself (the course repository's ``classroom.references``); with ``record``, it also keeps every
    question asked and its answer, per (check, seed), for a release's ``expected.json``."""

    def __init__(self, references, record: bool = False):
        self.references, self.recorded, self._record, self.context = references, {}, record, None
        self.asked = 0             # questions asked since verdict began this check

    def __call__(self, question: str, *args) -> dict:
        self.asked += 1
        answer = getattr(self.references, question)(*args)
        if self._record:
            check, seed = self.context
            self.recorded.setdefault(check, {}).setdefault(str(seed), []).append(
                [question, _digest(args), wire.dumps(answer)])
        return answer

    def seeds(self, name: str):
        return None            # any seed: the answer key answers every question


class Recorded:
    """The answers a release recorded: the same questions in the same order, on the same seeds."""

    def __init__(self, data: dict):
        self.data, self.context, self._next, self.asked = data, None, 0, 0

    def __call__(self, question: str, *args) -> dict:
        self.asked += 1
        check, seed = self.context
        asked = self.data.get(check, {}).get(str(seed), [])
        if not asked:
            raise RuntimeError(f"check.{check}: this release recorded answers for seeds "
                               f"{', '.join(map(str, self.seeds(check) or [])) or 'none'} only, not {seed}; the grader's "
                               "seed is repeated by your instructor (python -m classroom grade ... --input-seed)")
        if self._next >= len(asked) or asked[self._next][:2] != [question, _digest(args)]:
            raise RuntimeError(f"check.{check}: its inputs on seed {seed} are not those this release recorded answers "
                               "for; the release's classroom/ folder and its expected.json belong together")
        self._next += 1
        return wire.loads(asked[self._next - 1][2])

    def seeds(self, name: str):
        """The seeds this release answers check ``name``'s questions on; None for a check that
        asked none when the release was made (its right answers follow from its inputs alone, so
        any seed repeats it)."""
        return [int(s) for s in self.data[name]] if name in self.data else None


def _load_answers():
    """The answer key where there is one (the instructor's checkout, the grader); else the
    answers a student release recorded."""
    try:
        from . import references        # absent from a student release, on purpose
    except ImportError:
        references = None
    if not hasattr(references, "result_payload"):   # absent, or emptied (a graded kernel's sandbox)
        return Recorded(json.loads(EXPECTED.read_text()) if EXPECTED.exists() else {})
    return Answers(references)


ANSWERS = _load_answers()


def answers(question: str, *args) -> dict:
    return ANSWERS(question, *args)


RELEASE_SEEDS = (11, 22, 33)     # the seeds a release records answers for (course repository: classroom.release)


def verdict(name: str, objs, seed: int, repeatable: bool | None = None) -> None:
    """Run check ``name`` on the student's objects with inputs from ``seed``; raises CheckFailed.
    The message offers ``check.NAME(..., seed=S)`` only where it ``repeatable`` (default: where
    these answers answer that seed); the grader passes whether a student release can. A check
    that failed before asking the answer key anything fails the same way on any seed in a
    release too: it is always offered."""
    ANSWERS.context = (name, int(seed))
    ANSWERS.asked = 0
    if isinstance(ANSWERS, Recorded):
        ANSWERS._next = 0
    try:
        _RAW[name](*objs, rng=np.random.default_rng(seed))
    except CheckFailed as exc:
        known = ANSWERS.seeds(name)
        if repeatable is None:
            repeatable = known is None or int(seed) in known
        repeatable = repeatable or ANSWERS.asked == 0
        how = (f"check.{name}(..., seed={seed}) repeats them" if repeatable else
               "a student release cannot draw them again (its answers cover seeds "
               f"{', '.join(map(str, RELEASE_SEEDS))}); your instructor can, with the feedback's command")
        raise CheckFailed(f"{exc} [inputs from seed {seed}: {how}]") from None


_RAW = {}
_SLOW: set[str] = set()       # checks that take minutes (they train or replay a run)


def _student_error(exc: BaseException) -> BaseException:
    """The student's own exception with the traceback cut to the student's frames: the check's
    machinery is not their concern."""
    here, tb = str(Path(__file__).parent), exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(here):
        tb = tb.tb_next
    return exc.with_traceback(tb)


def _register(name, milestone, points, notebook, *needs, slow=False):
    def wrap(fn):
        CHECKS[name] = (milestone, points, notebook, needs or (name,))
        _RAW[name] = fn
        if slow:
            _SLOW.add(name)

        def student_facing(*args, seed=None):
            if slow and os.environ.get("ES_COURSE_FAST") == "1":     # the grader runs its own, once
                print(f"SKIPPED {name}: takes minutes; fast mode (ES_COURSE_FAST=1) leaves it to the grader")
                return
            if seed is None:
                known = ANSWERS.seeds(name)
                seed = int(np.random.default_rng().choice(known)) if known else secrets.randbits(32)
            try:
                verdict(name, args, int(seed))
            except CheckFailed as exc:
                message = str(exc)
            except Exception as exc:               # the student's code raised: show their traceback only
                raise _student_error(exc) from None
            else:
                print(f"OK {name}: passed ({points} point{'s' * (points != 1)} when graded)")
                return
            raise CheckFailed(message) from None   # the message says what is wrong and how to repeat it
        student_facing.__doc__, student_facing.__name__ = fn.__doc__, name
        return student_facing
    return wrap


def _fail(msg):
    raise CheckFailed(msg)


def ready(notebook: str, namespace: dict, seeds: int = 3) -> None:
    """Run every quick check of ``notebook`` again, now, on the functions in ``namespace`` (the
    notebook's ``globals()``), on ``seeds`` input seeds each (in a student release: every seed
    it recorded): returns when all pass, else raises CheckFailed naming each one that fails.

    Notebook 04 calls it before training: a run takes minutes, and a run made with code that
    fails its checks is not the course's run (the grader cannot replay it: 0 points), so the
    cell refuses to start rather than let a student find out at the end. Running the checks
    again, rather than remembering that their cells once printed OK, also catches a function
    redefined since."""
    names = [n for n in checks_for(notebook) if n not in _SLOW and "RUN_DIR" not in CHECKS[n][3]]   # not the run's
    failed = []
    for name in names:
        missing = [n for n in CHECKS[name][3] if n not in namespace]
        if missing:
            failed.append(f"check.{name}: {', '.join(missing)} is not defined (run its cell)")
            continue
        known = ANSWERS.seeds(name)
        for seed in known or [secrets.randbits(32) for _ in range(seeds)]:
            try:
                verdict(name, [namespace[n] for n in CHECKS[name][3]], int(seed))
            except CheckFailed as exc:
                failed.append(f"check.{name}: {exc}")
                break
            except Exception as exc:           # the student's code raised
                failed.append(f"check.{name}: your code raised {type(exc).__name__}: {str(exc)[:200]}")
                break
    if failed:
        raise CheckFailed("not starting: this notebook's checks must pass first, and these fail now:\n  "
                          + "\n  ".join(failed) + "\nFix each function until its check cell prints OK, then run "
                          "this cell again.") from None
    print(f"checks passed just now: {', '.join(names)}")


def _observe(fn, *args, **opts) -> dict:
    """Call a student's function: here (a notebook checking itself), or, when graded, in the
    student's kernel through the grader's proxy (the course repository's ``classroom.remote``), which only ever hands
    back plain data. ``RNG(seed)`` arguments become ``np.random.default_rng(seed)`` on the
    side that runs the function. ``opts`` ask for more than the value (``classroom.probe.observe``)."""
    if hasattr(fn, "observe"):          # the student's kernel, through the grader (course repository)
        return fn.observe(*args, **opts)
    from .probe import observe
    args = [a.make() if isinstance(a, wire.RNG) else a for a in args]
    return observe(fn, args, getattr(fn, "__globals__", {}), **opts)


def _call(fn, *args):
    return _observe(fn, *args)["value"]


def _call_leaving(fn, names, *args):
    """``fn(*args)``, failing when it changed an argument its contract says to leave as it is:
    ``names[i]`` names argument ``i`` for the message (None: it may change, as a generator does)."""
    seen = _observe(fn, *args, changed=True)
    for i in seen.get("changed", []):
        if i < len(names) and names[i]:
            _fail(f"{_name_of(fn)}: it changed its argument `{names[i]}` in place; leave the caller's arrays as "
                  "they are and build new ones (`a = a + b`, not `a += b`)")
    return seen["value"]


def _name_of(fn) -> str:
    return str(getattr(fn, "__name__", "") or getattr(fn, "name", "") or "your function")


def _dtype(value, dtype, what):
    """Fail unless ``value`` is an array of ``dtype``, as the contract says."""
    got = getattr(value, "dtype", None)
    if got is None or got != np.dtype(dtype):      # (np.dtype(None) is float64: None would pass a float64 rule)
        _fail(f"{what}: returned {'dtype ' + str(got) if got is not None else type(value).__name__}, the contract "
              f"says an array of {np.dtype(dtype)}")


def _array(value, shape, what, dtype=np.float64):
    got = np.asarray(value)
    if got.shape != tuple(shape):
        _fail(f"{what}: expected shape {tuple(shape)}, got {got.shape}")
    return got.astype(dtype)


def _close(got, want, tol=1e-6) -> bool:
    got = np.asarray(got, dtype=np.float64)
    return got.shape == np.shape(want) and rel_error(got, want) <= tol


# ---------------------------------------------------------------- milestone 1 (00, 01)
@_register("centered_ranks", "M1", 2, "00_es_from_scratch")
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


@_register("es_gradient", "M1", 2, "00_es_from_scratch")
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


@_register("antithetic_noise", "M1", 1, "01_cartpole")
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


@_register("adam_update", "M1", 2, "01_cartpole")
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


@_register("train_cartpole", "M1", 3, "01_cartpole")
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


# ---------------------------------------------------------------- milestone 2 (02)
# weights that member_noise tries besides the powers of 10 and of 2: common primes below 2**32
PRIME_WEIGHTS = (31, 101, 1009, 7919, 10007, 65537, 100003, 999983, 1000003, 16777619, 999999937, 1000000007,
                 2147483647)


@_register("member_noise", "M2", 2, "02_parallel")
def member_noise(fn, rng):
    """Noise of one member, float64 (dim,), from (seed, generation, member) alone, never the
    global state; standard normal (a long draw's mean, standard deviation, and shares within 0.5
    of 0 and beyond 2); different (seed, generation, member) never share noise, nor its negation:
    neighbours that a sum, w * seed or w * generation plus member for w a power of 10 or of 2
    below 2**32 or one of PRIME_WEIGHTS, a product (seed 0, generation 0) or digits run together
    (unpadded, or zero-padded to k digits for k = 1 .. 9, a member or a generation of k + 1 digits
    running past its padding) would confuse, and members 2k and 2k + 1 (mirroring is
    evaluate_members' job). Every integer it is called with is below 2**32, the contract's range
    (SeedSequence splits a larger one into 32-bit words, which can collide)."""
    seed, generation, member = int(rng.integers(2 ** 31)), int(rng.integers(1, 500)), int(rng.integers(1000, 5000))
    dim, g = int(rng.integers(4, 10)), int(rng.integers(2 ** 31))
    reply = _observe(fn, seed, generation, member, dim, global_seed=g, draw_after=True)
    a = np.asarray(reply["value"])
    if reply["after"] != np.random.RandomState(g).random_sample():
        _fail("member_noise: it uses the global np.random state (it seeds or draws from it); build a Generator "
              "from (seed, generation, member)")
    if a.shape != (dim,):
        _fail(f"member_noise: expected shape (dim,) = ({dim},), got {a.shape}")
    _dtype(reply["value"], np.float64, "member_noise")
    if not np.array_equal(a, np.asarray(_observe(fn, seed, generation, member, dim, global_seed=g + 1)["value"])):
        _fail("member_noise: it uses the global np.random state (the result changes with it); build a Generator "
              "from (seed, generation, member)")
    if not np.array_equal(a, np.asarray(_call(fn, seed, generation, member, dim))):
        _fail("member_noise: two calls with the same (seed, generation, member) differ")
    long = np.asarray(_call(fn, seed, generation, member, 20_000), dtype=np.float64).ravel()
    if long.size != 20_000 or abs(long.mean()) > 0.05 or abs(long.std() - 1) > 0.05:
        _fail(f"member_noise: with dim=20_000, {long.size} draws with mean {long.mean():.3f} and standard deviation "
              f"{long.std():.3f}; standard normals have mean 0 and standard deviation 1: draw them with "
              "Generator.standard_normal")
    inner, outer = np.mean(np.abs(long) < 0.5), np.mean(np.abs(long) > 2)
    if not (0.36 <= inner <= 0.406 and 0.035 <= outer <= 0.056):      # a normal's: 0.383 and 0.0455, +-6.5 SE
        _fail(f"member_noise: with dim=20_000, {inner:.1%} of the draws lie within 0.5 of 0 and {outer:.1%} beyond "
              "2 (either sign); standard normals put 38.3% and 4.6% there: other distributions (uniform, Laplace) "
              "can have mean 0 and standard deviation 1 too; draw them with Generator.standard_normal")
    seen = {(seed, generation, member): a}
    # neighbours that sums of the three integers would send to the same seed, then those a product
    # (seed 0, generation 0) or digits run together (1|23 and 12|3) would; member - 1 and member + 1:
    # one of them shares member // 2 (mirroring inside member_noise); last, (seed, generation,
    # member + w), which w * generation + member sends where (seed, generation + 1, member) goes, for
    # w a power of 10 or of 2 below 2**32 (every integer stays below 2**32, the contract's range)
    keys = [(seed + ds, generation + dg, member + dm) for ds, dg, dm in (
        (0, 0, 1), (0, 0, -1), (0, 1, 0), (1, 0, 0), (0, 1, -1), (1, -1, 0))]
    keys += [(0, generation, member), (0, generation + 1, member), (seed, 0, member), (seed + 1, 0, member),
             (seed, 1, 23), (seed, 12, 3)]
    weights = sorted({10 ** k for k in range(1, 10)} | {2 ** k for k in range(1, 32)} | set(PRIME_WEIGHTS))
    keys += [(seed, generation, member + w) for w in weights]
    # digits zero-padded to k places, int(f"{seed}{generation:0{k}d}{member:0{k}d}"): a member of k + 1
    # digits runs into the generation's (0, 0, 10**k + r) ~ (0, 1, r), a generation of k + 1 digits
    # into the seed's (0, 10**k + q, member) ~ (1, q, member), whatever the other padding (r, q < 10)
    r, q = member % 10, generation % 10
    padded = {(0, 0, 10 ** k + r): ((0, 1, r), k, "a member") for k in range(1, 10)}
    padded.update({(0, 10 ** k + q, member): ((1, q, member), k, "a generation") for k in range(1, 10)})
    keys += [(0, 1, r), (1, q, member), *padded]
    for key in keys:
        if key in seen:          # (seed + 1, generation - 1, member) is (seed + 1, 0, member) when generation is 1
            continue
        noise = np.asarray(_call(fn, *key, dim))
        for other, was in seen.items():
            negated = np.allclose(noise, -was)
            if negated or np.allclose(noise, was):
                pair = (f"member_noise: {other} and {key} (seed, generation, member) got the same noise"
                        + (", one negated" if negated else ""))
                fix = "give the three integers to default_rng as a list, [seed, generation, member]"
                if key[:2] == other[:2] and key[2] // 2 == other[2] // 2:
                    _fail(f"{pair}: members 2k and 2k + 1 share a stream; member_noise gives one stream per integer "
                          "member (the member itself, not member // 2, and never negated): the mirroring is "
                          "evaluate_members' job")
                if negated:
                    _fail(f"{pair}; {fix}, and return its draws as they are")
                if padded.get(key, (None,))[0] == other:
                    k, what = padded[key][1:]
                    _fail(f"{pair}: their digits run together, zero-padded, are the same number: {what} of {k + 1} "
                          f"digits runs past a padding to {k} digit{'s' * (k > 1)} (the integers go up to 2**32 - 1, "
                          f"10 digits); {fix}")
                if sum(key) == sum(other):
                    _fail(f"{pair}: they have the same sum seed + generation + member, which a sum (or an xor of "
                          f"small integers) of the three sends to the same generator; {fix}")
                dg, dm = key[1] - other[1], key[2] - other[2]
                if key[0] == other[0] and abs(dg) == 1 and dg * dm < 0:       # w * generation + member, w = |dm|
                    w = abs(dm)
                    _fail(f"{pair}: {w} * generation + member collide (any such weight below the members' range "
                          f"does, and members go up to 2**32 - 1); {fix}")
                ds = key[0] - other[0]
                if key[1] == other[1] and abs(ds) == 1 and ds * dm < 0:                  # w * seed + member, w = |dm|
                    _fail(f"{pair}: {abs(dm)} * seed + member collide (any such weight below the members' range "
                          f"does, and members go up to 2**32 - 1); {fix}")
                if 0 in key[:2] and 0 in other[:2]:
                    _fail(f"{pair}: a product such as seed * generation is 0 whenever seed or generation is 0; {fix}")
                if "".join(map(str, key)) == "".join(map(str, other)):
                    _fail(f"{pair}: their digits run together are the same number; {fix}")
                _fail(f"{pair}; {fix}")
        seen[key] = noise
    elsewhere = _observe(fn, seed, generation, member, dim, elsewhere=True)["value"]
    if not all(np.array_equal(a, np.asarray(e)) for e in elsewhere):
        _fail("member_noise: another process computed different noise for the same member")


@_register("parallel_returns", "M2", 3, "02_parallel", "parallel_returns", "evaluate_members")
def parallel_returns(fn, evaluate_members, rng):
    """parallel_returns(center, sigma, seed, generation, population, n_jobs) equals
    evaluate_members(center, sigma, seed, generation, 0, population), float64, for populations that
    are not multiples of n_jobs, with n_jobs chunks, each given the run's seed and generation,
    evaluated in more than one process (the check's recorder of those chunks travels with joblib's
    default backend, loky, not "multiprocessing").
    (The n_jobs given to joblib.Parallel is not seen: with n_jobs chunks, at most n_jobs run at once.)"""
    center = (rng.standard_normal(10) * 0.1).astype(np.float32)
    sigma, seed, generation = float(rng.uniform(0.2, 0.6)), int(rng.integers(2 ** 31)), int(rng.integers(100))
    for n_jobs in (3, 2):
        population = int(rng.choice([p for p in range(11, 24) if p % n_jobs and p % 2]))
        want = np.asarray(_call(evaluate_members, center, sigma, seed, generation, 0, population), dtype=np.float64)
        try:
            reply = _observe(fn, center, sigma, seed, generation, population, n_jobs,
                             spy={"name": "evaluate_members", "args": [2, 3, 4, 5], "delay": 0.4})
        except Exception as exc:
            if "_spy.<locals>" not in str(exc):       # the check's recorder, which only loky's pickler can send
                raise
            _fail("parallel_returns: joblib could not send the check's recorder of evaluate_members (it notes "
                  "which process ran each chunk) to its workers: use joblib's default backend (loky), "
                  "Parallel(n_jobs=n_jobs) with no backend argument")
        got = np.asarray(reply["value"], dtype=np.float64).ravel()
        spied = reply.get("spied", [])          # [pid, seed, generation, first, end] of each call
        for _, s, g, a, b in spied:
            if (s, g) != (seed, generation):
                _fail(f"parallel_returns: each job drew its own noise: the job of members [{a}, {b}) was given seed "
                      f"{s} and generation {g}, not the run's {seed} and {generation}; member m's noise must come "
                      "from member_noise(seed, generation, m // 2) whatever job plays it: give every job the run's "
                      "seed and generation")
        chunks = sorted((a, b) for *_, a, b in spied)
        _blame_chunks(got, want, chunks, population, n_jobs)
        _dtype(reply["value"], np.float64, "parallel_returns")
        if len(chunks) != n_jobs:
            _fail(f"parallel_returns: {len(chunks)} chunk(s) for n_jobs={n_jobs}; split the population into "
                  "n_jobs chunks, one per job")
        if n_jobs > 1 and len({pid for pid, *_ in spied}) < 2:
            _fail(f"parallel_returns: with n_jobs={n_jobs} every chunk ran in one process; pass n_jobs to "
                  "joblib.Parallel (its default backend runs jobs in worker processes)")


def _blame_chunks(got, want, chunks, population, n_jobs):
    where = f"population {population}, n_jobs={n_jobs}"
    if not chunks:
        _fail("parallel_returns: it never called evaluate_members; evaluate each chunk with it")
    if all(a == 0 for a, _ in chunks) and len(chunks) > 1:
        _fail(f"parallel_returns: every job evaluated members from 0 ({where}): the same noise in every job; "
              "give each job its own members [a, b)")
    covered = sum(b - a for a, b in chunks)
    if len(got) < population and covered < population:
        _fail(f"parallel_returns: {len(got)} returns for a {where}: the chunks drop the last "
              f"{population - covered} member(s); np.linspace(0, population, n_jobs + 1).astype(int) gives "
              "bounds that cover every member")
    if len(got) > population or covered > population:
        _fail(f"parallel_returns: {len(got)} returns for a {where}: chunks overlap, a member at each boundary "
              "is evaluated twice; chunks are [a, b) with the next starting at b")
    if got.shape != want.shape:
        _fail(f"parallel_returns: expected one return per member, shape {want.shape}, got {got.shape}")
    if np.array_equal(got, want):
        return
    parts = [want[a:b] for a, b in chunks if b <= population]
    if len(parts) > 1 and np.array_equal(got, np.concatenate(parts[::-1])):
        _fail("parallel_returns: the chunks came back in reverse order; concatenate them in the order of their "
              "bounds (joblib returns results in the order the jobs were given)")
    if sorted(got) == sorted(want):
        _fail("parallel_returns: the right returns in the wrong order; put them back in member order")
    edges = [a for a, _ in chunks] + [chunks[-1][1]]
    if edges[0] != 0 or edges[-1] != population or any(b != a for (_, b), (a, _) in zip(chunks, chunks[1:])):
        _fail(f"parallel_returns: the chunks {chunks} do not cover members [0, {population}) once each, one after "
              "another: a member is evaluated twice or never; check the chunk bounds")
    _fail(f"parallel_returns: differs from evaluate_members over the whole population ({where})")


# ---------------------------------------------------------------- milestone 3 (03)
@_register("result_codec", "M3", 1, "03_redis", "encode_result", "decode_result")
def result_codec(encode_result, decode_result, rng):
    """Round trip of (generation, first, returns, lengths) through bytes, exact, no pickle, with
    integers up to 2**32 - 1; decode_result returns a dict with keys generation, first, returns,
    lengths; the payload's bytes are exactly the course's layout."""
    count = int(rng.integers(20, 60))
    generation, first = int(rng.integers(2 ** 32)), int(rng.integers(2 ** 32))
    returns, lengths = rng.standard_normal(count) * 100, rng.integers(0, 10_000, count)
    lengths[rng.integers(count)] = rng.integers(2 ** 31, 2 ** 32)      # past int32: only uint32 holds it
    want = answers("result_codec", generation, first, returns, lengths)
    payload = _call(encode_result, generation, first, returns, lengths)
    if not isinstance(payload, (bytes, bytearray)):
        _fail(f"encode_result: must return bytes, got {type(payload).__name__}")
    if (payload[:1] == b"\x80" and payload[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05") and payload[-1:] == b".") \
            or b"numpy" in payload:     # a pickle's opening and closing opcodes
        _fail("encode_result: this looks like a pickle; send raw bytes (np.ndarray.tobytes) with a small header")
    out = _call(decode_result, payload)
    keys = ("generation", "first", "returns", "lengths")
    if not isinstance(out, dict):
        kind = "tuple or list" if isinstance(out, (tuple, list)) else type(out).__name__
        _fail(f"decode_result: returned a {kind}, not a dict; return a dict with keys {', '.join(keys)}")
    if any(k not in out for k in keys):
        _fail(f"decode_result: the dict lacks {', '.join(k for k in keys if k not in out)} (keys: {', '.join(keys)})")
    if out["generation"] != generation or out["first"] != first:
        _fail("decode_result: generation or first member came back wrong")
    got = np.asarray(out["returns"], dtype=np.float64)
    if not np.array_equal(got, returns):
        if got.shape == returns.shape and np.allclose(got, returns, rtol=1e-6):
            if any(returns.astype(order).tobytes() in bytes(payload) for order in ("<f8", ">f8")):
                _fail("decode_result: returns lose bits (read back as float32?); the payload holds them as float64, "
                      "read them as float64 so the run stays bit-identical")
            _fail("encode_result: returns lose bits (float32?); send float64 so the run stays bit-identical")
        _fail("decode_result: returns came back different")
    if not np.array_equal(np.asarray(out["lengths"]), lengths):
        _fail("decode_result: lengths came back different (a length may be up to 2**32 - 1: uint32)")
    if not all(isinstance(out[k], (int, np.integer)) and not isinstance(out[k], bool) for k in ("generation", "first")):
        _fail(f"decode_result: generation and first came back as {type(out['generation']).__name__} and "
              f"{type(out['first']).__name__}; the contract says integers")
    _dtype(out["returns"], np.float64, "decode_result returns")
    if not (isinstance(out["lengths"], np.ndarray) and out["lengths"].dtype.kind in "iu"):
        _fail(f"decode_result lengths: returned {getattr(out['lengths'], 'dtype', type(out['lengths']).__name__)}, "
              "the contract says an integer array")
    if hashlib.sha256(bytes(payload)).hexdigest() != want["right"]:
        _fail(f"encode_result: {len(payload)} bytes for {count} members, not the course's layout: little-endian "
              "('<III', '<f8', '<u4'), three uint32 (generation, first, count), the returns as float64, the "
              "lengths as uint32")


@_register("chunks_to_requeue", "M3", 2, "03_redis")
def chunks_to_requeue(fn, rng):
    """chunks_to_requeue(queued_at, in_queue, leases, now, lease_seconds) -> set of chunks, a
    subset of queued_at's keys, as the course's Redis master decides (es.distributed): among them
    a chunk requeued a moment ago that still has its dead worker's old lease (no), and a lease
    of a chunk not in queued_at (never returned)."""
    # eighths of a second: now - (now - lease) is exactly lease, so the boundary is exact
    lease, now = int(rng.integers(24, 240)) / 8, int(rng.integers(8e3, 8e6)) / 8
    old = lambda: now - lease * float(rng.uniform(1.5, 5))       # noqa: E731
    recent = lambda: now - lease * float(rng.uniform(0.05, 0.5))       # noqa: E731
    names = [f"chunk{int(i)}" for i in rng.choice(1000, 9, replace=False)]
    alive, dead, waiting, young, orphan, edge_queued, edge_lease, requeued, done = names
    queued_at = {alive: old(), dead: old(), waiting: old(), young: recent(), orphan: old(), edge_queued: now - lease,
                 edge_lease: old(), requeued: recent()}
    in_queue = {waiting}
    leases = {alive: recent(), dead: old(), edge_lease: now - lease, requeued: old(), done: old()}
    want = set(answers("chunks_to_requeue", queued_at, sorted(in_queue), leases, now, lease)["right"])
    got = _call(fn, dict(queued_at), set(in_queue), dict(leases), now, lease)
    if not isinstance(got, (set, frozenset)):
        _fail(f"chunks_to_requeue: returned a {type(got).__name__}; the contract says a set")
    if got == want:
        return
    if not got <= set(queued_at):
        extra = sorted(got - set(queued_at))[0]
        _fail(f"chunks_to_requeue: returned {extra!r}, which is not in queued_at (its result is in: only its old "
              "lease is left); return a subset of queued_at's keys")
    if waiting in got:
        _fail(f"chunks_to_requeue: {waiting!r} is still waiting in the queue; requeueing it makes duplicates")
    if alive in got:
        _fail(f"chunks_to_requeue: {alive!r} has a fresh heartbeat; its worker is alive")
    if young in got:
        _fail(f"chunks_to_requeue: {young!r} was queued less than lease_seconds ago; a worker may have taken it "
              "and not written its lease yet")
    if requeued in got:
        _fail(f"chunks_to_requeue: {requeued!r} was queued again less than lease_seconds ago and still has its dead "
              "worker's old lease; the worker that took the new copy may not have written its lease yet: requeue "
              "only a chunk queued at least lease_seconds ago, whatever its lease")
    if dead not in got:
        _fail(f"chunks_to_requeue: {dead!r}'s last heartbeat is older than lease_seconds; its worker is dead, "
              "hand it out again")
    if orphan not in got:
        _fail(f"chunks_to_requeue: {orphan!r} left the queue long ago and has no lease; its worker died before "
              "writing one, hand it out again")
    if edge_queued not in got:
        _fail(f"chunks_to_requeue: {edge_queued!r} was queued exactly lease_seconds ago and has no lease; at least "
              "lease_seconds (>=) counts, hand it out again")
    if edge_lease not in got:
        _fail(f"chunks_to_requeue: {edge_lease!r}'s lease is exactly lease_seconds old; at least lease_seconds (>=) "
              "counts, hand it out again")
    _fail(f"chunks_to_requeue: expected {sorted(want)}, got {sorted(got)}")


@_register("gather", "M3", 2, "03_redis")
def gather(fn, rng):
    """gather(url, generation, bounds, lease_seconds, timeout) -> (returns, lengths), run with the
    course's decode_result and chunks_to_requeue, against
    classroom.redis_workers.FaultyWorkers on a real Redis: a stale result, a result for a chunk not
    in bounds that starts where a real one does (just before that chunk's result and again just after), a
    worker that dies holding a lease, one that dies before writing it, a duplicate result, a
    slow worker that is alive, and one that takes a chunk as the gather begins and writes its
    lease late. The returns must be exact (float64 returns, int64 lengths), each lost chunk handed
    out again (a job with "g", "a" and "b"), the live one and the one just taken never. Then, on a
    chunk nobody takes, it must give up with a TimeoutError after its timeout."""
    from es.distributed.server import EmbeddedRedis
    from .redis_workers import FaultyWorkers
    lease = 1.0
    with EmbeddedRedis(admin=True) as server:
        key = isinstance(ANSWERS, Answers)      # the answer key is here (not in a student release)
        workers = FaultyWorkers(server.master_url, rng, lease, _payload_encoder(fn),
                                monitor_url=server.admin_url).start()
        try:
            # With the course's decode_result and chunks_to_requeue in place of the notebook's, which
            # have checks of their own: a mistake there costs those points, not these too.
            out, raised = _observe(fn, server.master_url, workers.generation, [list(b) for b in workers.bounds],
                                   lease, 15.0, reference=["decode_result", "chunks_to_requeue"] if key else [])["value"], None
        except (CheckFailed, NotImplementedError):
            raise
        except Exception as exc:     # diagnosed below, from what the workers saw
            out, raised = None, exc
        finally:
            workers.stop()
        late = None if raised is not None else _gives_up(fn, server.master_url, workers.generation + 1, lease, key)
    given = workers.handed_out
    said = None if raised is None else str(raised) if type(raised).__name__ == "KernelError" \
        else f"{type(raised).__name__}: {raised}"
    if workers.bad_jobs:
        _fail(f"gather: pushed the job {workers.bad_jobs[0][:120]} onto es:jobs; section 4's workers read its \"g\" "
              f"(this generation, {workers.generation}), \"a\" and \"b\" (without \"g\" they stop with KeyError "
              "'g'): push json.dumps({\"g\": generation, \"a\": a, \"b\": b})")
    if said is not None and not said.startswith("TimeoutError"):
        _fail(f"gather: raised {said[:200]}; drop results of another generation, of chunks not in bounds, "
              "and second results of a chunk already in")
    for fault, why in (("dies_with_lease", "its worker died holding it (the lease stopped being renewed); "
                        "requeue a chunk whose lease is older than lease_seconds"),
                       ("dies_without_lease", "its worker died before writing a lease; requeue a chunk that left "
                        "the queue more than lease_seconds ago and has no lease")):
        if given[workers.chunk_of(fault)] < 2:
            _fail(f"gather: chunk {workers.chunk_of(fault)} was never handed out again: {why} (use chunks_to_requeue "
                  "when no result arrives within the poll)")
    if workers.queued_twice:
        chunk = sorted(workers.queued_twice)[0]
        _fail(f"gather: chunk {chunk} was pushed again while a copy still waited in es:jobs; the master pushed "
              "every job before calling gather (do not push them at its start); pass the queued chunks to "
              "chunks_to_requeue, and set a requeued chunk's queued_at to now")
    first = workers.pushed_at_start()
    if first:
        _fail(f"gather: chunk {first[0]} was pushed to es:jobs again {first[1]:.2f} s after your gather began (its "
              f"first BLPOP), before any chunk was queued lease_seconds ({lease:g} s) ago: a worker had just taken "
              "it and not yet written its lease. Start queued_at at time.time() when gather is called (never "
              "time.monotonic(), another clock: its times are not comparable with time.time()'s)")
    early = workers.pushed_early()
    if early:
        chunk = min(early, key=early.get)
        _fail(f"gather: chunk {chunk} was pushed to es:jobs again {early[chunk]:.2f} s after it was last pushed "
              f"(lease_seconds is {lease:g}): set a requeued chunk's queued_at to now, or it counts as lost again "
              "at once (a worker may have taken it and not written its lease yet) and is requeued over and over")
    if workers.requeued_live:
        _fail(f"gather: chunk {workers.chunk_of('slow')} was handed out again while its worker was alive and "
              "renewing its lease; read the leases from es:leases before deciding")
    if said is not None:
        _fail(f"gather: raised {said[:200]}" + ("; the check passes bounds as lists ([a, b]), and a tuple (a, b) "
              "is not equal to a list: compare chunks by their names f\"{a}:{b}\"" if said.startswith("TimeoutError")
              else ""))
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        _fail("gather: return the pair (returns, lengths)")
    n = len(workers.returns)
    got, lengths = _array(out[0], (n,), "gather returns"), _array(out[1], (n,), "gather lengths", np.int64)
    _dtype(out[0], np.float64, "gather returns")
    _dtype(out[1], np.int64, "gather lengths")
    if np.array_equal(got, workers.returns) and np.array_equal(lengths, workers.lengths):
        if late is not None:
            _fail(f"gather: called with timeout={_GIVE_UP[0]:g} on a chunk whose job nobody takes, {late}; raise "
                  "TimeoutError once timeout seconds have passed without all results")
        return
    a, b = workers.bounds[workers.stale]
    if np.array_equal(got[a:b], workers.returns[a:b] + 1000.0):
        _fail(f"gather: a result of generation {workers.generation - 1} (an earlier one) entered chunk {a}:{b}; drop "
              "results whose generation is not the one being gathered")
    a, b = map(int, workers.chunk_of("overlap").split(":"))
    u, v = workers.unknown
    lo, hi = max(a, u), min(b, v)
    if np.array_equal(got[lo:hi], workers.returns[lo:hi] + 500.0):
        members = f"member {lo}" if hi - lo == 1 else f"members {lo} to {hi - 1}"
        _fail(f"gather: a result for chunk {u}:{v}, which is not in bounds, entered {members} (it came "
              f"just before chunk {a}:{b}'s own result and again just after); a result's chunk is its first member and "
              'its count, f"{first}:{first + count}", not its first member alone: drop it when that chunk is not in bounds')
    a, b = map(int, workers.chunk_of("duplicate").split(":"))
    if np.array_equal(got[a:b], workers.returns[a:b] - 7.0):
        _fail(f"gather: chunk {a}:{b}'s second result replaced its first; once a chunk is in, drop its duplicates")
    bad = int(np.flatnonzero((got != workers.returns) | (lengths != workers.lengths))[0])
    _fail(f"gather: member {bad} came back {got[bad]!r} (length {lengths[bad]}), expected {workers.returns[bad]!r} "
          f"(length {workers.lengths[bad]}); put each result at returns[first:first + count]")


_GIVE_UP = (0.5, 3.0)      # gather's timeout in the check's last call; when a result comes after all


def _gives_up(fn, url, generation, lease, key):
    """``gather`` on one chunk whose job waits and is never taken, with a short timeout: None when
    it raised TimeoutError, else what it did instead. The chunk's result is pushed a few seconds
    later, so that a gather that never gives up returns then rather than hanging."""
    import threading
    import time

    import redis
    timeout, after = _GIVE_UP
    link = redis.Redis.from_url(url)
    link.delete("es:jobs", "es:results", "es:leases")
    link.rpush("es:jobs", json.dumps({"g": generation, "a": 0, "b": 4}))
    payload = _payload_encoder(fn)(generation, 0, np.zeros(4), np.full(4, 10, dtype=np.int64))
    timer = threading.Timer(after, lambda: link.rpush("es:results", payload))
    timer.start()
    t0 = time.monotonic()
    try:
        _observe(fn, url, generation, [[0, 4]], lease, timeout,
                 reference=["decode_result", "chunks_to_requeue"] if key else [])
        took = time.monotonic() - t0
        said = (f"it returned after {took:.1f} s without that chunk's result" if took < after else
                f"it waited on and returned when the result came {after:g} s later")
    except (CheckFailed, NotImplementedError):
        raise
    except Exception as exc:
        said = str(exc) if type(exc).__name__ == "KernelError" else f"{type(exc).__name__}: {exc}"
        said = None if said.startswith("TimeoutError") else f"it raised {said[:200]}"
    finally:
        timer.cancel()
        timer.join()
        link.close()
    return said


def _payload_encoder(gather_fn):
    """What the check's workers push: the answer key's payload; in a student release, where there
    is none, the student's own ``encode_result`` (checked by ``check.result_codec``)."""
    if isinstance(ANSWERS, Answers):
        return ANSWERS.references.result_payload
    encode = getattr(gather_fn, "__globals__", {}).get("encode_result")
    if encode is None:
        _fail("gather: define encode_result first (section 1): the check's workers push what it encodes")
    return encode


# ---------------------------------------------------------------- extras in 03: the paper's Algorithm 2
@_register("seeds_only_update", "extras", 3, "03_redis", "update_from_returns")
def seeds_only_update(fn, rng):
    """update_from_returns(center, seed, generation, chunk_returns, sigma, lr) -> the next center
    (float32): 12 generations of it in the notebook's process (the master) and in 3 worker
    processes that get the generation-0 center once and then only each generation's returns
    (chunks of unequal sizes, in member order). Every worker must end each generation
    bit-identical to the master, and the master bit-identical to notebook 03's es_update:
    mirrored pair noise rebuilt from (seed, generation, pair), z-scores of the whole population,
    one SGD step in float64, the center cast to float32. (Within 1e-5, not bit for bit: the
    message says so.) The returns are drawn by the check, not played: what is tested is
    that the update needs nothing else."""
    dim, population, generations = int(rng.integers(5, 12)), 2 * int(rng.integers(8, 14)), 12
    seed, sigma, lr = int(rng.integers(2 ** 31)), float(rng.uniform(0.05, 0.3)), float(rng.uniform(0.05, 0.5))
    cuts = np.sort(rng.choice(np.arange(3, population - 2), 2, replace=False))
    bounds = [(0, int(cuts[0])), (int(cuts[0]), int(cuts[1])), (int(cuts[1]), population)]
    center = (rng.standard_normal(dim) * 0.1).astype(np.float32)
    returns, close = [], int(rng.integers(1, generations))
    for g in range(generations):      # each chunk's returns on a scale of its own: per-chunk shaping shows
        r = rng.standard_normal(population) * rng.uniform(1, 50) + rng.uniform(-100, 100)
        r[bounds[1][0]:bounds[1][1]] += float(rng.uniform(20, 60))
        if g == close:                # returns a millionth apart: the z-scores' + 1e-8 changes them by 1%
            r = float(rng.uniform(-100, 100)) + rng.standard_normal(population) * 1e-6
        returns.append([r[a:b].copy() for a, b in bounds])
    want = answers("seeds_only_update", center, seed, returns, sigma, lr)
    reply = _observe(fn, center.copy(), seed, returns, sigma, lr, seeds_only=len(bounds))
    if isinstance(reply["value"], list):
        _fail("update_from_returns: its centers differ in shape from one generation to the next; return the "
              "center, float32 (dim,)")
    master = _array(reply["value"], (generations, dim), "update_from_returns (the master's centers, one per "
                    "generation)")
    scale = np.max(np.abs(want["right"])) + 1e-3
    off = lambda name: np.max(np.abs(master - want[name]), axis=1) / scale      # noqa: E731
    wrong = np.flatnonzero(off("right") > 1e-5)
    if len(wrong):
        g = int(wrong[0])
        for name, why in (
                ("noise_reused", "generation {g} reused generation 0's noise: one generation's noise reused. Rebuild "
                                 "the noise of the generation you are given (rng_for(seed, NOISE, generation, k))"),
                ("previous_noise", "generation {g} used the noise of generation {p}: one generation's noise reused. "
                                   "Rebuild the noise of the generation you are given"),
                ("sign_lost", "member 2k+1 got +eps_k: a pair's sign was lost. Members 2k and 2k+1 play "
                              "+eps_k and -eps_k (mirrored pairs), so row 2k+1 of the noise is -eps_k"),
                ("per_worker", "each worker's chunk of returns was shaped on its own: shaping applied per worker. "
                               "Concatenate the chunks and z-score the whole population at once (a chunk's mean "
                               "and spread are not the population's)"),
                ("ranks", "shaped with centered ranks; this update z-scores the returns, as es_update does"),
                ("raw", "the raw returns weigh the noise; z-score them first"),
                ("no_sigma", "the step is not divided by sigma; grad = noise.T @ z / (population * sigma)"),
                ("no_epsilon", "generation {g}'s returns lie about 1e-6 apart, and it z-scored them without the "
                               "+ 1e-8: divide by returns.std() + 1e-8, as es_update does")):
            if off(name)[g] <= 1e-5:
                _fail("update_from_returns: " + why.format(g=g, p=max(g - 1, 0)))
        _fail(f"update_from_returns: generation {g}'s center is off by {off('right')[g]:.2g} (relative) from the "
              "course's update; rebuild each pair's noise, mirror it, z-score all returns, step by "
              "lr * noise.T @ z / (population * sigma), and return float32")
    _dtype(reply["value"], np.float32, "update_from_returns (the next center)")
    inexact = np.flatnonzero(np.any(master != want["right"], axis=1))
    if len(inexact):
        g = int(inexact[0])
        _fail(f"update_from_returns: generation {g}'s center is {off('right')[g]:.2g} (relative) from the course's "
              "update: close, but not bit for bit as section 4's es_update computes it. Compute the z-scores "
              "with returns.std() + 1e-8 and the step in float64, add it to the float32 center, cast to float32 "
              "once at the end")
    for i, run in enumerate(reply.get("workers") or []):
        if isinstance(run, str):
            _fail(f"update_from_returns: worker process {i + 1} raised {run}")
        got = np.asarray(run)
        if got.shape != master.shape:
            _fail(f"update_from_returns: worker process {i + 1} returned centers of shape {got.shape}, the master "
                  f"{master.shape}")
        differs = np.flatnonzero(np.any(got != np.asarray(reply["value"]), axis=tuple(range(1, got.ndim))))
        if len(differs):
            _fail(f"update_from_returns: worker process {i + 1}, which received only the returns, ended generation "
                  f"{int(differs[0])} at another center than the master (not bit-identical): the update must depend "
                  "on (seed, generation, returns) alone, never on the global np.random state, a clock or what "
                  "this process computed before")


@_register("noise_table", "extras", 2, "03_redis", "make_noise_table", "generation_offsets", "table_noise")
def noise_table(make_noise_table, generation_offsets, table_noise, rng):
    """make_noise_table(seed, size) -> float32 (size,), exactly default_rng(seed).standard_normal(
    size, dtype=np.float32); generation_offsets(seed, generation, pairs, size, dim) -> an integer
    array (pairs,), exactly default_rng([seed, generation]).integers(0, size - dim + 1, pairs);
    table_noise(table, offsets, member, dim) -> float32 (dim,), exactly sign * table[o:o + dim]
    with o = offsets[member // 2] and the sign +1 for an even member, -1 for an odd one, the table
    and the offsets left as they were."""
    seed, size = int(rng.integers(2 ** 31)), int(rng.integers(2000, 5000))
    want = answers("noise_table", seed, size)
    raw = np.asarray(_call(make_noise_table, seed, size))
    if raw.shape != (size,):
        _fail(f"make_noise_table: expected shape (size,) = ({size},), got {raw.shape}")
    if raw.dtype != np.float32:
        _fail(f"make_noise_table: returns {raw.dtype}; the table is float32 (half the memory), drawn as float32: "
              "standard_normal(size, dtype=np.float32)")
    digest = _float32_digest(raw)
    if digest != want["right"]:
        if digest == want["float64_cast"]:
            _fail("make_noise_table: float64 draws cast to float32 are other numbers than float32 draws; draw with "
                  "standard_normal(size, dtype=np.float32)")
        if digest == want["global"]:
            _fail("make_noise_table: not default_rng(seed)'s draws but the legacy generator's "
                  "(np.random.RandomState(seed), or np.random.seed and the global state), which draws other numbers "
                  "from the same seed; build it with np.random.default_rng(seed).standard_normal(size, "
                  "dtype=np.float32)")
        _fail("make_noise_table: not the table np.random.default_rng(seed).standard_normal(size, dtype=np.float32) "
              "draws (every machine must build the same table from the seed)")
    dim, pairs = int(rng.integers(8, 20)), int(rng.integers(12, 24))
    table = rng.standard_normal(3 * dim).astype(np.float32)   # small: the offsets span it, up to its last value
    run, generation = int(rng.integers(2 ** 31)), int(rng.integers(1, 1000))
    offsets = answers("table_offsets", run, generation, pairs, len(table), dim)
    raw = _call(generation_offsets, run, generation, pairs, len(table), dim)
    got = np.asarray(raw)
    if got.shape != (pairs,):
        _fail(f"generation_offsets: expected one offset per pair, shape ({pairs},), got {got.shape}")
    kind = got.dtype
    got = got.astype(np.int64).tolist()
    if got != offsets["right"]:
        if got == offsets["to_the_end"] or max(got) > len(table) - dim:
            _fail(f"generation_offsets: an offset of {max(got)} in a table of {len(table)} values for dim = {dim} runs "
                  "past its end; draw offsets in [0, size - dim]: integers(0, size - dim + 1, pairs)")
        if got == offsets["no_generation"]:
            _fail("generation_offsets: the generation is left out of the generator's key, so every generation plays "
                  "the same noise; draw from default_rng([seed, generation])")
        _fail("generation_offsets: not the offsets np.random.default_rng([seed, generation]).integers(0, size - dim + "
              "1, pairs) draws")
    if not isinstance(raw, np.ndarray) or kind.kind not in "iu":
        _fail(f"generation_offsets: returned {kind if isinstance(raw, np.ndarray) else type(raw).__name__}; the "
              "contract says an integer array: the offsets are ints (slice bounds), the array integers(...) draws")
    right = np.asarray(offsets["right"])
    for member in range(2 * pairs):
        got = np.asarray(_call_leaving(table_noise, ("table", "offsets"), table.copy(), right.copy(), member, dim))
        k, sign = member // 2, 1 - 2 * (member % 2)
        want_noise = sign * table[right[k]:right[k] + dim]
        if got.shape == want_noise.shape and np.array_equal(got, want_noise):
            _dtype(got, np.float32, "table_noise")
            continue
        if got.shape != (dim,):
            _fail(f"table_noise: expected shape (dim,) = ({dim},), got {got.shape}")
        if sign < 0 and np.array_equal(got, -want_noise):
            _fail(f"table_noise: member {member} (odd) got +eps of pair {k}; member 2k+1 plays -eps_k, the slice "
                  "negated: a pair's sign was lost")
        if member < pairs and np.array_equal(got, sign * table[right[member]:right[member] + dim]):
            _fail(f"table_noise: member {member} read offsets[{member}]; a mirrored pair shares one offset, "
                  "offsets[member // 2]")
        _fail(f"table_noise: member {member} differs from sign * table[o:o + dim] with o = offsets[member // 2] = "
              f"{right[k]}")


def _float32_digest(a: np.ndarray) -> str:
    """Shape and bytes of a float32 array (``references.float32_digest``)."""
    return hashlib.sha256(repr(a.shape).encode() + np.ascontiguousarray(a, dtype=np.float32).tobytes()).hexdigest()


# ---------------------------------------------------------------- milestone 4 (04)
@_register("downsample", "M4", 2, "04_pong")
def downsample(fn, rng):
    """downsample(frames (k, 210, 160) uint8) -> (k, 42, 42) uint8: each output the exact mean of
    the 5 x 160/42 input cells it covers, rounded to the nearest integer, halves to even; exact
    (your run replays in the grader only if your frames are the course's), also on frames where
    many means are exactly halves."""
    k = int(rng.integers(2, 4))
    frames = rng.integers(0, 256, (k, 210, 160)).astype(np.uint8)
    while True:      # 3 frames of gray levels 0, 10, ..., 250: about 130 means exactly a half (random ones: 4 a frame)
        ties = (rng.integers(0, 26, (3, 210, 160)) * 10).astype(np.uint8)
        if answers("downsample_halves", ties)["halves"] >= 100:
            break
    frames = np.concatenate([frames, ties])
    want = answers("downsample", frames)
    raw = np.asarray(_call(fn, frames.copy()))
    if raw.shape == (42, 42):
        _fail("downsample: it returned one frame; it takes a batch (k, 210, 160) and returns (k, 42, 42)")
    got = _array(raw, (k + 3, 42, 42), "downsample")
    if raw.dtype != np.uint8:
        if got.max() <= 1.0 + 1e-6 and np.max(np.abs(got * 255 - want["right"])) <= 0.51:
            _fail(f"downsample: returns {raw.dtype} in [0, 1]; return the uint8 gray levels (0..255) the games "
                  "use, without dividing by 255")
        _fail(f"downsample: returns {raw.dtype}; return uint8 gray levels 0..255")
    if np.array_equal(got, want["right"]):
        return
    if np.array_equal(got, want["transposed"]):
        _fail("downsample: rows and columns are swapped (each frame is transposed); rows shrink by 5 (210 -> 42), "
              "columns by 160/42")
    if _uint8_digest(got) == want["wrapped"]:
        _fail("downsample: the sums of 5 rows wrapped around: uint8 arithmetic keeps only the sum modulo 256 "
              "(200 + 100 gives 44); sum the rows in a wider integer type (sum(axis=..., dtype=np.int64))")
    if _uint8_digest(got) == want["truncated"]:
        _fail("downsample: the means are truncated (astype(np.uint8) cuts 17.9 to 17); round to the nearest "
              "integer first, halves to even (np.rint)")
    off = np.abs(got - want["right"].astype(np.float64))
    at_halves = want["halves"]                            # where the exact mean is a half (N % 800 == 400)
    if off.max() <= 1 and not (off[~at_halves] > 0).any():
        _fail(f"downsample: {int((off > 0).sum())} gray levels differ by 1, all where a mean is exactly a half: a "
              "rounding difference (floating point lands on either side of .5, or halves were rounded up). Compute "
              "each mean exactly (sum the 5 rows as integers, weigh the columns in 42ths: every output is N / 800 "
              "with N an integer) and round once, halves to even (np.rint of N / 800)")
    if off.max() <= 1:
        _fail(f"downsample: {int((off[~at_halves] > 0).sum())} gray levels differ by 1 where the mean is not a half; "
              "round once, at the end (np.rint of the exact mean), not the row sums or partial means along the way")
    _fail(f"downsample: differs from area averaging by up to {off.max():.0f} gray levels; average all the input "
          "pixels each output covers (5 rows x 3.81 columns), each weighed by the part it covers: a few sampled "
          "pixels per output (nearest or interpolated) miss thin objects such as the ball")


@_register("stack_frames", "M4", 1, "04_pong")
def stack_frames(fn, rng):
    """stack_frames(stacks (k, 4, 42, 42), frames (k, 42, 42)) -> (k, 4, 42, 42) uint8, a new
    array (the inputs left as they are): each stack without its oldest frame, then the new one
    (oldest first)."""
    k = int(rng.integers(2, 6))
    stacks = rng.integers(0, 256, (k, 4, 42, 42)).astype(np.uint8)
    frames = rng.integers(0, 256, (k, 42, 42)).astype(np.uint8)
    want = answers("stack_frames", stacks, frames)
    got = np.asarray(_call_leaving(fn, ("stacks", "frames"), stacks.copy(), frames.copy()))
    if got.shape == (4, 42, 42):
        _fail("stack_frames: it returned one stack; it takes k stacks and k frames and returns (k, 4, 42, 42)")
    got = _array(got, (k, 4, 42, 42), "stack_frames", got.dtype)
    _dtype(got, np.uint8, "stack_frames")
    digest = _uint8_digest(got)
    if digest == want["right"]:
        return
    if digest == want["newest_first"]:
        _fail("stack_frames: the newest frame went first; here frames are oldest first, newest at index 3")
    _fail("stack_frames: expected each stack's last three frames, then its new frame")


FLOAT16 = ("batched_policy: its actions are those of logits computed in float16, which cannot tell apart two logits "
           "near 512 that differ by 1/64; compute in the inputs' float32 (or float64)")


@_register("batched_policy", "M4", 1, "04_pong")
def batched_policy(fn, rng):
    """batched_policy(W (P, F, 3), b (P, 3), features (P, F)) -> actions (P,), member p with
    W[p] and b[p], ties to the lowest index, with no Python loop over members: the lines of the
    student's own code run for 64 members do not exceed those for 8 by 56 (64 - 8) or more."""
    def draw(members):
        while True:       # inputs where the bias and each member's own weights change actions
            W, x = rng.standard_normal((members, features, 3)), rng.standard_normal((members, features))
            b = rng.standard_normal((members, 3)) * np.sqrt(features)
            want = answers("batched_policy", W, b, x)
            if (want["right"] != want["no_bias"]).mean() > 0.3 and (want["right"] != want["member_0"]).mean() > 0.3:
                return W, b, x, want

    def tied(members):    # float32 inputs, small integers: every logit exact, whatever the order of the sums
        x = rng.integers(-3, 4, (members, features)).astype(np.float32)
        W = rng.integers(-3, 4, (members, features, 3)).astype(np.float32)
        b = rng.integers(504, 521, (members, 3)).astype(np.float32)
        for p in range(members):      # two actions i < j tie on top, or all three, or j leads by 1/64
            i, j = sorted(rng.choice(3, 2, replace=False))
            W[p, :, j], b[p, j], b[p, 3 - i - j] = W[p, :, i], b[p, i] + (p % 3 == 2) / 64, b[p, i] - 500
            if p % 3 == 1:
                W[p], b[p] = W[p, :, i:i + 1], b[p, i]
        return W, b, x

    members, features = int(rng.integers(20, 40)), int(rng.integers(8, 24))
    W, b, x, want = draw(members)
    got = np.asarray(_call(fn, W, b, x))
    if got.shape == (members,) and not np.issubdtype(got.dtype, np.integer):
        _fail(f"batched_policy: returned dtype {got.dtype}; return integer actions (the games look each action up "
              "by index): np.argmax gives them")
    got = _array(got, (members,), "batched_policy", np.int64)
    if not np.array_equal(got, want["right"]):
        if np.array_equal(got, want["no_bias"]):
            _fail("batched_policy: it ignores the bias b; logits are features @ W[p] + b[p]")
        if np.array_equal(got, want["member_0"]):
            _fail("batched_policy: every member used member 0's weights; member p must use W[p], b[p]")
        if np.array_equal(got, want["float16"]):
            _fail(FLOAT16)
        _fail(f"batched_policy: {int((got != want['right']).sum())} of {members} actions differ from the argmax of "
              "member p's logits")
    W, b, x = tied(members)
    want = answers("batched_policy", W, b, x)
    got = _array(np.asarray(_call(fn, W, b, x)), (members,), "batched_policy", np.int64)
    if not np.array_equal(got, want["right"]):
        if np.array_equal(got, want["ties_high"]):
            _fail("batched_policy: where logits tie, it picks the highest index; ties go to the lowest, as np.argmax "
                  "does")
        if np.array_equal(got, want["float16"]):
            _fail(FLOAT16)
        _fail(f"batched_policy: {int((got != want['right']).sum())} of {members} actions differ from the argmax of "
              "member p's logits, on float32 inputs where logits tie (ties go to the lowest index) or lie 1/64 apart")
    lines = [_observe(fn, *draw(m)[:3], count_lines=True)["lines"] for m in (8, 64)]
    if lines[1] - lines[0] >= 56:
        _fail(f"batched_policy: it loops over the members in Python ({lines[0]} lines run for 8 members, "
              f"{lines[1]} for 64); one batched operation (np.einsum or a batched matmul) does them all at once")


@_register("es_step", "M4", 2, "04_pong")
def es_step(fn, rng):
    """es_step(center, noise, fitness, state, sigma, lr, weight_decay) -> (center, state): six
    updates in a row (each its own noise and fitness, with ties; the noise not mirrored) with the
    state carried over as the run's checkpoint saves it (a dict of arrays and numbers; a tuple
    fails), each parameter after each update within lr / 1000 of the course's update (the one the
    grader's replay holds your run to). Two columns of the noise are the check's own: one whose
    gradient is large on the first update and then small (AMSGrad's max(v) shows), one whose
    gradient is small throughout (epsilon inside the square root shows)."""
    updates = 6
    dim, population = int(rng.integers(5, 15)), 2 * int(rng.integers(5, 12))
    sigma, lr, decay = float(rng.uniform(0.02, 0.2)), float(rng.uniform(0.005, 0.05)), float(rng.uniform(0.2, 1.0))

    def fitness_with_ties():
        f = rng.choice(10_000, population, replace=False) / 100 - 50
        f[rng.integers(population)] = 1e3        # an outlier: raw fitness as weights follows it alone
        f[1::4] = f[0::4][:len(f[1::4])]          # ties (two members that played the same game): they share a rank
        return f

    far = lambda name: np.max(np.abs(want[name] - want["right"]))      # noqa: E731
    for _ in range(50):     # inputs on which every mistake below ends far from the right update
        center = rng.standard_normal(dim) * 3.0 / sigma     # weight decay comparable to the ES term
        noises = [rng.standard_normal((population, dim)).astype(np.float32) for _ in range(updates)]
        fitnesses = [fitness_with_ties() for _ in range(updates)]
        center[:2] = 0.0
        for k, (noise, fitness) in enumerate(zip(noises, fitnesses)):
            up = np.sign(fitness - np.median(fitness))       # noise.T @ weights of this column: about population / 4
            noise[:, 0] = (30.0 if k == 0 else 0.0) * 4 * sigma * up     # a gradient of 30, then the decay's alone
            noise[:, 1] = 0.01 * 4 * sigma * up                          # a gradient of about 0.01 on every update
        want = answers("es_step", center, noises, fitnesses, sigma, lr, decay)
        if min(far(k) for k in want if k not in ("right", "amsgrad", "epsilon_in_sqrt")) > lr / 20 \
                and min(far("amsgrad"), far("epsilon_in_sqrt")) > lr / 400:
            break
    got, state, centers = center.copy(), None, []
    for noise, fitness in zip(noises, fitnesses):
        out = _call(fn, got.copy(), noise.copy(), fitness.copy(), state, sigma, lr, decay)   # training passes a copy
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            _fail("es_step: return the pair (new center, state)")
        got, state = _array(out[0], (dim,), "es_step"), _as_saved(out[1])
        centers.append(got)
    centers = np.stack(centers)
    off = lambda name: np.max(np.abs(centers - want[name]))      # noqa: E731
    if off("right") <= lr / 1000:
        return
    for name, why in (("raw_fitness", "it weights the noise by the raw fitness; use centered ranks (robust to "
                                      "outliers such as one long rally)"),
                      ("z_score", "it weights the noise by standardised fitness ((f - mean) / std); use centered "
                                  "ranks: one outlier still sets the scale of a z-score"),
                      ("no_decay", "no weight decay; subtract weight_decay * center from the gradient"),
                      ("state_not_carried", "Adam's m, v and t start from zero on every call; return the new state "
                                            "and use the state you are given (None only on the first call)"),
                      ("no_sigma", "the gradient is not divided by sigma: noise.T @ w / (population * sigma)"),
                      ("decay_added", "weight decay has the wrong sign; subtract weight_decay * center from the "
                                      "gradient (it pulls the parameters towards 0)"),
                      ("no_bias_correction", "Adam without bias correction; scale by sqrt(1 - 0.999**t) / "
                                             "(1 - 0.9**t), with t counting from 1 and carried in the state"),
                      ("descends", "it descends; ES maximises the fitness, so add the step"),
                      ("ties_apart", "tied fitness values got different ranks; ties share the mean of their ranks "
                                     "(two members that played the same game tie)"),
                      ("pairs", "it reads the noise as mirrored pairs (noise[0::2] weighed by w[0::2] - w[1::2]); "
                                "the check's rows are independent draws, not mirrored: weigh every row, "
                                "noise.T @ weights (on mirrored noise it is the same sum)"),
                      ("amsgrad", "v never decreases (AMSGrad's max(v_old, v_new)); this Adam keeps v_t = 0.999 "
                                  "v_(t-1) + 0.001 g^2 as it is, even when it shrinks"),
                      ("epsilon_in_sqrt", "the 1e-8 is inside the square root; Adam divides by sqrt(v) + 1e-8")):
        if off(name) <= lr / 1000:
            _fail(f"es_step: {why}")
    k = int(np.argmax(np.max(np.abs(centers - want["right"]), axis=1) > lr / 1000))
    _fail(f"es_step: off by up to {off('right'):.3g} (more than lr / 1000) after update {k + 1} of {updates}, and "
          "not by one of the usual mistakes; compare each line with the update written out above: centered ranks "
          "(ties shared), noise.T @ weights (every row: the check's noise is not mirrored) / (n * sigma) - "
          "weight_decay * center, Adam with bias correction")


def _as_saved(state):
    """es_step's state as the run's checkpoint saves it and a resumed run reads it back
    (``pong.student.state_to_arrays``, ``state_from_arrays``): the check passes that on, so a
    state the checkpoint cannot hold fails here, not after a generation of training."""
    from pong.student import state_from_arrays, state_to_arrays
    if isinstance(state, (tuple, list)):
        _fail("es_step: the state is a tuple (or a list); return it as a dict of arrays and numbers, e.g. "
              "{'m': m, 'v': v, 't': t}: your run's checkpoint saves it by name, and a resumed run reads it back")
    try:
        return state_from_arrays(state_to_arrays(state))
    except ValueError as exc:
        _fail(f"es_step: {exc}")


@_register("pong_agent", "M4", 4, "04_pong", "RUN_DIR", "STUDENT_ID", slow=True)
def pong_agent(run_dir, student_id, rng):
    """The run in ``run_dir`` is ``student_id``'s own (the course repository's ``pong.replay.verify_run``: the course's
    settings with their seed; every center the course's update of the one before; sampled
    games played again with identical fitness), and its agent beats a random player by
    ``pong.student.beats_random`` on 20 full games on seeds it never saw."""
    try:
        from pong.replay import REFERENCE, RunRejected, verify_run    # the grader's side: not in a release
    except ImportError:
        return _pong_agent_here(run_dir, student_id)
    from pong.student import beats_random
    try:
        replay = verify_run(run_dir, student_id, rng)
    except (RunRejected, ValueError) as exc:
        _fail(f"pong_agent: 0 points: {exc}")
    first = int(rng.integers(1_000_000, 2 ** 31 - 100))
    result = beats_random(REFERENCE, replay.center, first_seed=first)
    if not result.beats_random:
        _fail(f"pong_agent: your run replays, but its agent does not beat random yet: {result}; train on "
              "(re-running the training cell resumes the run)")
    print(f"pong_agent: the run replays ({replay.generations} updates, {len(replay.episodes)} games played "
          f"again, {replay.seconds:.0f} s); {result}")


def _pong_agent_here(run_dir, student_id):
    """A student release cannot replay a run (that needs the answer key): it checks that the run
    is complete, trained for ``student_id``, and that training recorded an agent beating random
    for its last checkpoint (``beats_random.json``, which the training cell writes when an agent
    passes the rule twice); it fails otherwise, and says what the grader will do."""
    from es.checkpoint import load_checkpoint
    from pong.student import _recorded_verdict, normalise_id, student_seed
    run_dir = Path(run_dir)
    files = ("config.json", "metrics.jsonl", "centers.npy", "checkpoint.npz")
    missing = [f for f in files if not (run_dir / f).is_file()]
    if missing:
        _fail(f"pong_agent: {run_dir} lacks {', '.join(missing)}: train first (the training cell writes them)")
    try:
        seed = json.loads((run_dir / "config.json").read_text()).get("seed")
    except (ValueError, AttributeError):
        _fail(f"pong_agent: {run_dir}/config.json is not the training cell's; train (or delete {run_dir} and train)")
    if seed != student_seed(student_id):
        _fail(f"pong_agent: {run_dir} was trained as another student (seed {seed}), not {normalise_id(student_id)!r}")
    try:
        generation = int(load_checkpoint(run_dir / "checkpoint.npz")[1]["generation"])
    except Exception as exc:       # es.checkpoint.ESError, or a header without its generation
        _fail(f"pong_agent: {run_dir}/checkpoint.npz is not a checkpoint of the training cell ({exc}); train (or "
              f"delete {run_dir} and train)")
    verdict = _recorded_verdict(run_dir / "beats_random.json", generation)
    if verdict is None or not verdict.beats_random:
        _fail(f"pong_agent: {run_dir} is trained as {normalise_id(student_id)!r} ({generation} updates), but its "
              f"agent has not beaten random yet: no {run_dir}/beats_random.json recording that this checkpoint "
              "beats random (the training cell writes it when an agent passes the rule twice); train on "
              "(re-running the training cell resumes the run)")
    print(f"pong_agent: {run_dir} is complete and trained as {normalise_id(student_id)!r} ({generation} updates); its "
          f"agent: {verdict}. The grader replays the run and plays 20 games on seeds it never saw.")


# ---------------------------------------------------------------- not graded: how fast (04)
# Checks a student runs that the grader does not grade (no points, no nbgrader grade cell): a
# cell that only calls one of these is an ordinary locked cell (course repository: classroom.build.graded_check).
UNGRADED = {"pong_speed"}
SPEED_TARGET = 1.0      # the student's three functions may add at most this much to a game step (ALE's own = 1)


def _best_seconds(fn, *args, budget: float = 0.5, most: int = 20) -> float:
    """The fastest of several calls (the least disturbed by other work on the machine), within
    about ``budget`` seconds; a first call outside the timing warms caches and imports."""
    import time
    fn(*args)
    best, spent, n = float("inf"), 0.0, 0
    while n < most and (n < 3 or spent < budget):
        t0 = time.perf_counter()
        fn(*args)
        took = time.perf_counter() - t0
        best, spent, n = min(best, took), spent + took, n + 1
    return best


def speed_of(downsample, stack_frames, batched_policy, games: int = 4, steps: int = 60, batch: int = 32) -> dict:
    """Microseconds per game step: ALE's own emulation of a step (4 games of ALE/Pong-v5 played
    ``steps`` steps with random actions, preprocessing left out), and each function on what it
    gets in training (``batch`` games' real screens at once; the training loop's calls get about
    half as many), divided by ``batch``. Their ratio does not depend on how fast the machine is."""
    import time
    from pong.games import PongGames
    from pong.student import POLICY
    screens = []

    def keep(frames):
        screens.append(np.array(frames))
        return np.zeros((len(frames), 42, 42), np.uint8)

    play = PongGames(games, keep, lambda stacks, frames: stacks)
    play.warm_up(games)                          # building the games is not a step
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    _, lengths = play.play(lambda episodes, obs: rng.integers(0, 3, len(episodes)), list(range(games)), steps)
    ale = (time.perf_counter() - t0) / lengths.sum()
    frames = np.concatenate(screens[games:])     # the screens after the first step, varied
    frames = frames[np.arange(batch) % len(frames)].copy()
    small = np.asarray(downsample(frames.copy()))
    if small.shape != (batch, 42, 42):
        _fail(f"pong_speed: downsample returned shape {small.shape} for {batch} screens, not ({batch}, 42, 42): "
              "run its check first")
    stacks = np.repeat(small.astype(np.uint8)[:, None], 4, axis=1)
    W = (rng.standard_normal((batch, POLICY.num_features, 3)) * 0.01).astype(np.float32)
    b = np.zeros((batch, 3), np.float32)
    features = POLICY.features(stacks)
    return {"ale": ale * 1e6,
            "downsample": _best_seconds(downsample, frames) / batch * 1e6,
            "stack_frames": _best_seconds(stack_frames, stacks, small) / batch * 1e6,
            "batched_policy": _best_seconds(batched_policy, W, b, features) / batch * 1e6}


SLOW_BECAUSE = {
    "downsample": "a Python loop over pixels, rows or output columns (np.mean of each cell, one at a time), or the "
                  "(160, 42) column weights built inside the function on every call; sum the 5 rows with one "
                  "reshape and do the columns with one matmul by weights built once, outside (the hint in section 1)",
    "stack_frames": "a Python loop over games or frames; one array operation on the whole batch does it",
    "batched_policy": "a Python loop over members, or float64 copies of W (32 x 1176 x 3 numbers) on every call; "
                      "one np.einsum (or a batched matmul) on the float32 arrays as given",
}


def pong_speed(downsample, stack_frames, batched_policy) -> dict:
    """Not graded (no points): is your code fast enough to train on? Times ``downsample``,
    ``stack_frames`` and ``batched_policy`` on what training hands them, per game step, against
    ALE's own emulation of a step measured in the same call (the part of training no code of
    yours can speed up). Passes when the three together add at most ``SPEED_TARGET`` times ALE's
    step, so that training takes at most about twice the notebook's timings; otherwise raises
    CheckFailed naming the slowest function and its usual cause. Returns the microseconds."""
    if os.environ.get("ES_COURSE_FAST") == "1":
        print("SKIPPED pong_speed: timings mean nothing in fast mode (ES_COURSE_FAST=1); not graded")
        return {}
    us = speed_of(downsample, stack_frames, batched_policy)
    yours = us["downsample"] + us["stack_frames"] + us["batched_policy"]
    share = yours / us["ale"]
    line = (f"per game step: downsample {us['downsample']:,.0f} us, stack_frames {us['stack_frames']:,.1f} us, "
            f"batched_policy {us['batched_policy']:,.1f} us; ALE's own emulation of the step {us['ale']:,.0f} us")
    if share <= SPEED_TARGET:
        print(f"OK pong_speed (not graded): your code adds {share:.0%} to each game step (target: at most "
              f"{SPEED_TARGET:.0%}); {line}")
        return us
    slowest = max(SLOW_BECAUSE, key=lambda name: us[name])
    hours = ", hours instead of minutes" if 1 + share >= 4 else ""
    raise CheckFailed(f"pong_speed (not graded): your code adds {share:.1f} times ALE's own time to every game step "
                      f"(target: at most {SPEED_TARGET:.0%}), so training would take about {1 + share:.0f} times "
                      f"as long as this notebook's timings{hours}; {line}. The slowest is "
                      f"{slowest}: usually {SLOW_BECAUSE[slowest]}. Its check asks for exact answers, this one for "
                      "fast ones: make it fast, then run this cell again") from None


# ---------------------------------------------------------------- extras (05)
@_register("snes_step", "extras", 3, "05_extras")
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


@_register("virtual_batch_norm", "extras", 2, "05_extras")
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


# ---------------------------------------------------------------- extras (06)
def _stats_out(out, d, what):
    if not isinstance(out, (tuple, list)) or len(out) != 3:     # (graded, a tuple comes back as a list)
        _fail(f"{what}: return the tuple (count, total, squares)")
    count = np.asarray(out[0])
    if count.shape != () or not np.isfinite(count) or float(count) != int(count):
        _fail(f"{what}: the count must be a whole number, got {out[0]!r}")
    if count.dtype.kind not in "iu":
        _fail(f"{what}: the count is a {type(out[0]).__name__} ({out[0]!r}); the contract says an int (add the two "
              "counts as they are)")
    return int(count), _array(out[1], (d,), f"{what}'s total"), _array(out[2], (d,), f"{what}'s squares")


@_register("merge_stats", "extras", 2, "06_locomotion")
def merge_stats(fn, rng):
    """merge_stats((count, total, squares), (count, total, squares)) -> (count, total, squares):
    counts, sums and sums of squares add, the count an int, the sums float64 arrays (a and b left
    as they were). The count exact, the sums within 1e-12 relative error, for two workers that saw very
    different numbers of states, then for a third merged in."""
    d = int(rng.integers(5, 18))

    def stats(n):
        x = rng.standard_normal((n, d)) * rng.uniform(0.1, 10, d) + rng.uniform(-3, 3, d)
        return [n, x.sum(axis=0), (x * x).sum(axis=0)]

    a, b = stats(int(rng.integers(200, 1000))), stats(int(rng.integers(5, 40)))
    c = stats(int(rng.integers(50, 150)))
    for first, second in ((a, b), (None, c)):
        if first is None:        # a third worker merged into the right merge of the first two
            first = [want["count"], want["total"], want["squares"]]
        want = answers("merge_stats", first, second)
        out = _call_leaving(fn, ("a", "b"), tuple(first), tuple(second))
        count, total, squares = _stats_out(out, d, "merge_stats")
        if count != want["count"]:
            if count in (first[0], second[0]):
                _fail(f"merge_stats: the count is {count}, one worker's; forgot to add the counts "
                      f"({first[0]} + {second[0]} = {want['count']} states in all)")
            _fail(f"merge_stats: the count is {count}, expected {first[0]} + {second[0]} = {want['count']}")
        _dtype(out[1], np.float64, "merge_stats's total")
        _dtype(out[2], np.float64, "merge_stats's squares")
        for got, key, name in ((total, "total", "sums"), (squares, "squares", "sums of squares")):
            if rel_error(got, want[key]) <= 1e-12:
                continue
            if _close(got, want[f"averaged_{key}"], 1e-9):
                _fail(f"merge_stats: it averaged the {name} instead of adding them; the {name} of all states add "
                      "(so do the counts): averages cannot be merged when workers saw different numbers of states")
            if key == "total" and _close(got, want["weighted_total"], 1e-9):
                _fail("merge_stats: it returned the count-weighted mean of the sums; merge_stats keeps sums, not "
                      "means: add them (mean_std divides by the count later)")
            if _close(got, want[f"last_{key}"], 1e-12) or (key == "total" and _close(got, want["first_total"], 1e-12)):
                _fail(f"merge_stats: it kept one worker's {name} (the statistics of the last worker only); add "
                      "both workers'")
            if key == "squares" and _close(got, want["squared_total"], 1e-9):
                _fail("merge_stats: squares are the sums of squares of the states; add the two workers' squares, "
                      "do not square the merged sum")
            _fail(f"merge_stats: the {name} are off by a relative error of {rel_error(got, want[key]):.2g}; "
                  f"add the two workers' {name}")


@_register("mean_std", "extras", 1, "06_locomotion")
def mean_std(fn, rng):
    """mean_std(count, total, squares) -> (mean, std): mean = total / count, std =
    sqrt(max(squares / count - mean**2, 1e-4)), float64; (0, 1) for count 0. Relative error 1e-6, on
    statistics with a constant state variable (its variance rounded below 0) and one whose variance is 0.01 to 1 (where
    sqrt(var + 1e-4) is off by more than 1e-6), then on count 0; total and squares left as they were (the
    training loop merges into them afterwards)."""
    d, n = int(rng.integers(4, 12)), int(rng.integers(20, 500))
    x = rng.standard_normal((n, d)) * rng.uniform(0.05, 20, d) + rng.uniform(-3, 3, d)
    j, k = (int(i) for i in rng.choice(d, 2, replace=False))
    x[:, k] = rng.standard_normal(n) * rng.uniform(0.1, 1) + rng.uniform(-3, 3)   # a small variance, 0.01 to 1
    for _ in range(100):    # a state variable that never moves, its variance rounded below 0 (its sqrt: nan)
        x[:, j] = rng.uniform(-2, 2)
        total, squares = x.sum(axis=0), (x * x).sum(axis=0)
        if squares[j] / n - (total[j] / n) ** 2 < 0:
            break
    want = answers("mean_std", n, total, squares)
    out = _call_leaving(fn, ("count", "total", "squares"), n, total.copy(), squares.copy())
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        _fail("mean_std: return the pair (mean, std)")
    got_mean, got_std = (_array(v, (d,), "mean_std") for v in out)
    _dtype(out[0], np.float64, "mean_std (the mean)")
    _dtype(out[1], np.float64, "mean_std (the std)")
    if not _close(got_mean, want["mean"]):
        _fail("mean_std: the mean is off; mean = total / count")
    if not _close(got_std, want["std"]):
        if _close(got_std, want["variance"]):
            _fail("mean_std: it returned the variance; std is its square root")
        if _close(got_std, want["no_mean_squared"]):
            _fail("mean_std: it left out the mean: var = squares / count - mean**2, not squares / count")
        if _close(got_std, want["sample"]):
            _fail("mean_std: it divided by count - 1; these are all the states seen: divide by count")
        if _close(got_std, want["added_floor"]):
            _fail(f"mean_std: state variable {k} has a small variance and got std {got_std[k]:.6g}: it added 1e-4 to "
                  "the variance; floor it instead: std = sqrt(max(var, 1e-4))")
        if np.all(np.isfinite(got_std)) and _close(got_std, want["std_floor"]):
            _fail(f"mean_std: state variable {j} never moves and got std {got_std[j]:.2g}: it floored the std at "
                  "1e-4; floor the variance at 1e-4 (std at least 0.01)")
        if not np.isfinite(got_std[j]):
            _fail(f"mean_std: state variable {j} never moves and got std {got_std[j]}: rounding leaves its variance "
                  f"squares / count - mean**2 at {squares[j] / n - (total[j] / n) ** 2:.1g}, below 0, and the square "
                  "root of that is nan; floor the variance at 1e-4 before the square root: std = sqrt(max(var, 1e-4))")
        if got_std[j] < 1e-3:
            _fail(f"mean_std: state variable {j} never moves and got std {got_std[j]:.2g} (dividing by it blows "
                  "up); floor the variance at 1e-4: std = sqrt(max(var, 1e-4))")
        _fail("mean_std: the std is off; std = sqrt(max(squares / count - mean**2, 1e-4))")
    want = answers("mean_std", 0, np.zeros(d), np.zeros(d))
    out = _call_leaving(fn, ("count", "total", "squares"), 0, np.zeros(d), np.zeros(d))
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        _fail("mean_std: return the pair (mean, std)")
    got_mean, got_std = (_array(v, (d,), "mean_std with count 0") for v in out)
    if not (np.array_equal(got_mean, want["mean"]) and np.array_equal(got_std, want["std"])):
        _fail(f"mean_std: with count 0 (no state seen yet, the first generation) return mean 0 and std 1, got mean "
              f"{got_mean[:3]}... and std {got_std[:3]}...")


@_register("linear_policy", "extras", 2, "06_locomotion")
def linear_policy(fn, rng):
    """linear_policy(params (k, d*a + a) float32, obs (k, d), mean, std, low, high) -> (k, a):
    low + (tanh(clip((obs - mean) / std, -5, 5) @ W_k + b_k) + 1) / 2 * (high - low), W_k row
    k's first d*a numbers as (d, a) row by row, then b_k; within 1e-5 * (high - low) of the
    course's; and the Python lines it runs (outside installed packages) do not grow with the rows:
    a `for` loop or a comprehension over rows fails (a loop inside map or np.vectorize runs none of
    those lines and is not caught)."""
    d, a = int(rng.integers(3, 12)), int(rng.integers(2, 6))

    def draw(k):
        for _ in range(50):      # inputs on which every mistake below is far from the right actions
            mean, std = rng.uniform(-2, 2, d), rng.uniform(0.1, 3, d)
            z = rng.standard_normal((k, d)) * 1.5
            far = rng.random((k, d)) < 0.15
            z[far] = rng.choice([-1, 1], int(far.sum())) * rng.uniform(6, 20, int(far.sum()))
            obs = mean + std * z
            params = (rng.standard_normal((k, d * a + a)) * 0.25).astype(np.float32)
            low = (-rng.uniform(0.2, 1.0, a)).astype(np.float32)
            high = rng.uniform(0.5, 2.0, a).astype(np.float32)
            want = answers("linear_policy", params, obs, mean, std, low, high)
            span = (high - low).astype(np.float64)
            if min(np.max(np.abs(want[key] - want["right"]) / span) for key in want if key != "right") > 1e-3:
                break
        return (params, obs, mean, std, low, high), want, span

    k = int(rng.integers(5, 40))
    args, want, span = draw(k)
    out = _call_leaving(fn, ("params", "obs", "mean", "std", "low", "high"), *[np.array(x) for x in args])
    if not isinstance(out, np.ndarray):
        _fail(f"linear_policy: returned a {type(out).__name__}, the contract says an array (k, act_dim)")
    got = np.asarray(out)
    if got.shape != (k, a):
        _fail(f"linear_policy: expected actions of shape ({k}, {a}) (one row per row of params), got {got.shape}")
    got = got.astype(np.float64)
    near = lambda key: bool(np.all(np.abs(got - want[key]) <= 1e-5 * span))     # noqa: E731
    if not near("right"):
        for key, why in (("no_clip", "forgot the clip: normalized observations are clipped to [-5, 5]"),
                         ("raw_obs", "it ignores mean and std: normalize, (obs - mean) / std, then clip"),
                         ("no_tanh", "forgot the tanh: squash x @ W + b with tanh before scaling it to the range"),
                         ("no_tanh_unclipped", "forgot the tanh: squash x @ W + b with tanh before scaling it "
                                               "to the range"),
                         ("no_scaling", "forgot to scale tanh's [-1, 1] to [low, high]: "
                                        "low + (tanh(...) + 1) / 2 * (high - low)"),
                         ("times_high", "tanh(...) * high is the range only when low = -high; scale as "
                                        "low + (tanh(...) + 1) / 2 * (high - low)"),
                         ("transposed", "transposed weights: W is (obs_dim, act_dim) row by row, entry i * act_dim "
                                        "+ j from observation i to action j (reshape(k, obs_dim, act_dim))"),
                         ("bias_first", "the biases come after the weights: params[:, :obs_dim * act_dim] is W, "
                                        "the last act_dim numbers are b"),
                         ("row_0", "every row used row 0's parameters; row k of params plays row k of obs")):
            if near(key):
                _fail(f"linear_policy: {why}")
        _fail(f"linear_policy: actions off by up to {np.max(np.abs(got - want['right']) / span):.2g} of the range "
              "(more than 1e-5), and not by one of the usual mistakes; compare with the formula above")
    one = np.asarray(_call(fn, *[np.array(x[:1]) if i < 2 else np.array(x) for i, x in enumerate(args)]))
    if one.shape != (1, a):
        _fail(f"linear_policy: for a single row it returned shape {one.shape}, expected (1, {a}): keep the row axis "
              "(no np.squeeze); the loop calls it with one row when one episode is left")
    lines = [_observe(fn, *[np.array(x) for x in draw(m)[0]], count_lines=True)["lines"] for m in (8, 64)]
    if lines[1] - lines[0] >= 56:
        _fail(f"linear_policy: it loops over the rows in Python ({lines[0]} lines run for 8 rows, {lines[1]} for "
              "64); one batched operation (np.einsum or a batched matmul) does them all at once")


def _course_policy(params, obs, mean, std, low, high):
    """The course's locomotion policy (``es.policies.MLPPolicy`` with no hidden layer on clipped
    normalized observations), what ``locomotion_agent`` plays a student's center with."""
    from es.policies import MLPPolicy
    net = MLPPolicy(obs.shape[1], len(low), (), discrete=False, low=low, high=high)
    return net.forward(net.unflatten(params), np.clip((obs - mean) / std, -5, 5).astype(np.float32))


@_register("locomotion_agent", "extras", 3, "06_locomotion", "RUN_DIR")
def locomotion_agent(run_dir, rng):
    """The run in ``run_dir`` (notebook 06's ``cheetah-run``) reached its task's threshold, and
    its center, played by the course's policy with the run's frozen statistics on 20 episodes on
    seeds that training never used, is not significantly below the threshold: their mean plus
    1.645 standard errors (a one-sided test at 5%) reaches it. Training confirmed the center
    20 above the threshold on 20 other episodes, so an agent as trained passes."""
    from .mujoco_runs import HELD_OUT, TASKS, load_metrics, play
    run_dir = Path(run_dir)
    missing = [f for f in ("config.json", "metrics.jsonl", "checkpoint.npz") if not (run_dir / f).is_file()]
    if missing:
        _fail(f"locomotion_agent: {run_dir} lacks {', '.join(missing)}: train first (section 4 writes them)")
    try:
        task = json.loads((run_dir / "config.json").read_text())["task"]
        with np.load(run_dir / "checkpoint.npz") as saved:
            center, finished = saved["center"].astype(np.float32), bool(saved["finished"])
            mean, std = saved["obs_mean"].astype(np.float64), saved["obs_std"].astype(np.float64)
        rows = load_metrics(run_dir)
    except Exception as exc:
        _fail(f"locomotion_agent: {run_dir}'s files cannot be read ({exc.__class__.__name__}: {str(exc)[:100]}); "
              "train again into a new folder")
    if task not in TASKS:
        _fail(f"locomotion_agent: {run_dir} trained {task!r}, not one of {', '.join(TASKS)}")
    env_id, shift, threshold = TASKS[task]
    if not finished:
        best = max((r["center_score"] for r in rows), default=float("nan"))
        _fail(f"locomotion_agent: {run_dir} has not reached {threshold:.0f} yet (best center {best:.0f} in "
              f"{len(rows)} generations): train on (re-running the training cell resumes the run)")
    dim = center.size
    obs_dim = mean.size
    if obs_dim == 0 or dim % (obs_dim + 1) or std.shape != mean.shape:
        _fail(f"locomotion_agent: {run_dir}'s checkpoint does not hold a linear policy and its statistics")
    seeds = rng.integers(2 * HELD_OUT, 2 ** 31 - 1, 20)
    returns, lengths, _, _ = play(env_id, _course_policy, np.repeat(center[None, :], len(seeds), 0), seeds, mean, std)
    scores = returns + shift * lengths                 # gymnasium's own returns (an alive bonus added back)
    score, error = float(np.mean(scores)), float(np.std(scores, ddof=1) / np.sqrt(len(scores)))
    if score + 1.645 * error < threshold:
        _fail(f"locomotion_agent: the agent scores {score:.0f} +- {error:.0f} (standard error) on 20 new episodes "
              f"(seeds {seeds[0]}, ...), significantly below {threshold:.0f}, played by the course's policy with the "
              "run's statistics; if training confirmed it above the threshold, your linear_policy differs from the "
              "course's (check.linear_policy says how)")
    print(f"locomotion_agent: the {task} agent scores {score:.0f} +- {error:.0f} (standard error) on 20 new episodes "
          f"(threshold {threshold:.0f})")
