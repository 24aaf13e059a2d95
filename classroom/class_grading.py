"""Grading each notebook of a class (``grade_each``): first the sandbox and the preflight,
then every student's notebooks, each in its own isolated child (``classroom.grade.grade``),
``jobs`` at a time, the longest first, all of a student's on one input seed; the results go
into each ``Student``, in course order, with a row for each file that is not a notebook."""
from __future__ import annotations

import json
import os
import secrets
import time
from concurrent.futures import ThreadPoolExecutor

from .check import CHECKS, checks_for
from .grade import grade, validate
from .sandbox import unsandboxed

NOTEBOOKS = sorted({c[2] for c in CHECKS.values()})
# seconds a notebook's grading takes, roughly, to start the longest first
EXPECTED = {"04_pong": 200, "03_redis": 20, "01_cartpole": 12, "02_parallel": 12, "00_es_from_scratch": 7}


def grade_each(students, *, as_json=False, log=print, cell_timeout=900, check_timeout=600, submission_timeout=3600,
               jobs=None, seed=None, only=None, support_path=None, preflight=True, allow_unsandboxed=False):
    """Grade every notebook of ``students`` into their ``results``; (seconds it took, jobs).
    Raises ``NoSandbox`` where the kernels would have no isolation and ``allow_unsandboxed`` is
    not given, and ``PreflightFailed`` when the known answer does not grade."""
    warning = unsandboxed(allow_unsandboxed)
    if warning and not as_json:
        log(warning)
    if preflight:
        from . import preflight as pre
        pre.ensure(support_path, log=None if as_json else log)
    jobs = max(1, jobs or os.cpu_count() or 1)
    for s in students:
        s.seed = secrets.randbits(63) if seed is None else int(seed)
    tasks = [(s, course, path) for s in students for course, path in s.notebooks.items()]
    tasks.sort(key=lambda t: -EXPECTED.get(t[1], 10))
    t0 = time.monotonic()

    def one(task):
        s, course, path = task
        try:
            res = grade(path, cell_timeout, check_timeout, submission_timeout, s.seed, only, s.name, root=s.root,
                        how=s.how, support_path=support_path)
        except Exception as exc:        # the grader's own failure: this submission is ungraded, the class goes on
            why = f"the grader failed: {exc.__class__.__name__}: {str(exc)[:300]}"
            res = {"submission": str(path), "notebook": course, "student": s.name, "input_seed": s.seed,
                   "checks": validate([], checks_for(course), why), "total": 0,
                   "max": sum(CHECKS[n][1] for n in checks_for(course)), "error": f"ungraded: {why}",
                   "status": f"ungraded: {why}"}
        res["course_notebook"] = course
        return s, res

    with ThreadPoolExecutor(max_workers=jobs) as pool:   # each notebook is its own child process
        for s, res in pool.map(one, tasks):
            s.results.append(res)
            if as_json:
                log(json.dumps(res))
    wall = time.monotonic() - t0
    order = {c: i for i, c in enumerate(NOTEBOOKS)}
    for s in students:
        s.results.sort(key=lambda r: order.get(r.get("course_notebook"), 99))
        for p in s.others:
            res = {"submission": str(p), "notebook": "", "student": s.name, "checks": [], "total": 0, "max": 0,
                   "error": f"{p.name} is not a notebook (.ipynb): not graded"}
            s.results.append(res)
            if as_json:
                log(json.dumps(res))
    return wall, jobs
