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

# The machinery, then the checks, one module per notebook: importing one registers its checks
# (CHECKS, FORBIDDEN), and each becomes a name of this module, ``check.NAME``.
from .checks import base as _base  # noqa: E402
globals().update({k: v for k, v in vars(_base).items() if not k.startswith("__") and k != "ANSWERS"})
from .checks import (n00_es_from_scratch, n01_cartpole, n02_parallel, n03_redis, n04_pong,  # noqa: E402,F401
                     speed, n05_extras, n06_locomotion)
globals().update(_base.STUDENT_FACING)
from .checks.n01_cartpole import _same_center  # noqa: E402,F401
from .checks.n02_parallel import PRIME_WEIGHTS  # noqa: E402,F401
from .checks.n06_locomotion import _course_policy  # noqa: E402,F401
from .checks.speed import SLOW_BECAUSE, SPEED_TARGET, UNGRADED, pong_speed, speed_of  # noqa: E402,F401


def __getattr__(name):
    """``check.ANSWERS`` is always the machinery's current one (the release swaps it there while
    it records answers), never a copy taken at import."""
    if name == "ANSWERS":
        return _base.ANSWERS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
