"""The checks' machinery: the registry (``_register``, ``CHECKS``, ``FORBIDDEN``), where the
answers come from, the verdict, ``ready`` and the helpers every check uses; ``classroom.check``
is what notebooks import."""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import zlib
from pathlib import Path

import numpy as np

from .. import wire

# Each check is declared once, by its ``_register`` line; these tables are derived from them.
# name -> (milestone, points, notebook, names the check needs from the notebook)
CHECKS: dict[str, tuple[str, int, str, tuple[str, ...]]] = {}
# name -> the modules (and names of ``es``) its answer must not use: the reference it asks the
# student to write (the grader scans the student's function for them)
FORBIDDEN: dict[str, tuple[str, ...]] = {}
# name -> the answer key's questions it asks (course repository: classroom.references), () where
# its right answers follow from its inputs alone; a release records their answers
REFERENCE: dict[str, tuple[str, ...]] = {}
SLOW: set[str] = set()          # checks that take minutes (they train or replay a run)
STUDENT_FACING: dict = {}       # name -> the function a notebook calls
EXPECTED = Path(__file__).parents[1] / "expected.json"
# The checks' own files (one module per notebook), which a release and the grader's kernels ship with this one.
CHECK_FILES = tuple(f"classroom/checks/{p.name}" for p in sorted(Path(__file__).parent.glob("*.py")))


class CheckFailed(AssertionError):
    pass


def grades_a_run(name: str) -> bool:
    """Whether check ``name`` grades a training run (it takes the run's folder, or minutes)
    rather than a function of the notebook's."""
    return name in SLOW or "RUN_DIR" in CHECKS[name][3]


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
        from .. import references       # absent from a student release, on purpose
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


def _student_error(exc: BaseException) -> BaseException:
    """The student's own exception with the traceback cut to the student's frames: the check's
    machinery is not their concern."""
    here, tb = str(Path(__file__).parents[1]), exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(here):
        tb = tb.tb_next
    return exc.with_traceback(tb)


def _register(name, milestone, points, notebook, *needs, forbidden: tuple[str, ...], reference: tuple[str, ...],
              slow=False):
    """Declare check ``name``: its milestone, points and notebook, the names it takes from the
    notebook (default: its own name), the modules its answer must not use (``forbidden``, () where
    it calls no function of the student's or no module holds its answer), the answer key's
    questions it asks (``reference``) and whether it takes minutes (``slow``: the grader runs it
    once, fast mode skips it)."""
    for part, value in (("forbidden", forbidden), ("reference", reference)):
        if not isinstance(value, tuple) or not all(isinstance(m, str) and m for m in value):
            raise TypeError(f"check {name}: {part} must be a tuple of names, got {value!r}")

    def wrap(fn):
        CHECKS[name] = (milestone, points, notebook, needs or (name,))
        FORBIDDEN[name], REFERENCE[name] = forbidden, reference
        _RAW[name] = fn
        if slow:
            SLOW.add(name)

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
        STUDENT_FACING[name] = student_facing     # what a notebook calls: check.NAME(...)
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
    names = [n for n in checks_for(notebook) if not grades_a_run(n)]
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
    from ..probe import observe
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


