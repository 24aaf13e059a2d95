"""What the grader knows about one student of a class: their submission (``Student``) and
their rows (every check of the course, graded or 0 with why not) and totals; a class's tally
(``tally``: each student's rows and totals, computed once for every output)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .check import CHECKS
from .grade import MILESTONE_MAX

MILESTONES = tuple(MILESTONE_MAX)


def extras_points() -> int:
    return sum(c[1] for c in CHECKS.values() if c[0] not in MILESTONES)


@dataclass
class Student:
    """One student's submission: who (``name``, and ``how`` that was decided), the folder
    (``root``), the notebooks to grade (course notebook -> path) and notes for the feedback."""
    name: str
    root: Path
    how: str
    notebooks: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    others: list = field(default_factory=list)      # files named on the command line that are not notebooks
    seed: int = 0
    results: list = field(default_factory=list)


def student_rows(s: Student) -> list[dict]:
    """Every check of the course for ``s``: graded (its points), 0 with why not, or ungraded
    (points None: the grader's machinery failed on it, so no grade is given)."""
    graded = {r["name"]: (res, r) for res in s.results for r in res.get("checks", [])}
    rows = []
    for name, (milestone, points, course, _) in CHECKS.items():
        if name in graded:
            res, r = graded[name]
            rows.append({**r, "notebook": course, "submission": res["submission"], "input_seed": res.get("input_seed"),
                         "status": "graded" if r.get("points") is not None else res.get("status") or "ungraded"})
            continue
        res = next((x for x in s.results if x.get("course_notebook") == course), None)
        if res is not None and is_ungraded(res):
            rows.append({"name": name, "milestone": milestone, "points": None, "max": points,
                         "message": f"{name}: {res['status']}", "notebook": course, "submission": res["submission"],
                         "input_seed": res.get("input_seed"), "status": res["status"]})
            continue
        why = (f"{name}: not graded: {res['error']}" if res and res.get("error") else
               f"{name}: no notebook {course}.ipynb found in {s.root.name}/")
        rows.append({"name": name, "milestone": milestone, "points": 0, "max": points, "message": why,
                     "notebook": course, "submission": res["submission"] if res else "", "input_seed": s.seed,
                     "status": "graded"})
    return rows


def is_ungraded(res: dict) -> bool:
    return str(res.get("status", "graded")).startswith("ungraded")


def status(s: Student) -> str:
    """``graded``, or ``ungraded: REASON`` naming the notebooks the grader could not grade."""
    bad = [res for res in s.results if is_ungraded(res)]
    if not bad:
        return "graded"
    return "ungraded: " + "; ".join(f"{res.get('course_notebook') or Path(res['submission']).name}: "
                                    f"{res['status'][len('ungraded: '):]}" for res in bad)[:1000]


def totals(s: Student) -> dict:
    """Points per milestone, the total and the max; a milestone (and the total) with an
    ungraded check is None: no grade, rather than a grade the student did not earn."""
    rows = student_rows(s)
    got = {m: _sum(r["points"] for r in rows if r["milestone"] == m) for m in MILESTONES}
    out = {"student": s.name, **got, "total": _sum(got.values()), "max": sum(MILESTONE_MAX.values())}
    if extras_points():
        out["extras"] = _sum(r["points"] for r in rows if r["milestone"] not in MILESTONES)
    out["status"] = status(s)
    return out


def _sum(points):
    points = list(points)
    return None if any(p is None for p in points) else sum(points)


@dataclass
class Tally:
    """One student's tally: every check's row (``student_rows``) and the totals (``totals``)."""
    student: Student
    rows: list
    totals: dict


def tally(students) -> list[Tally]:
    """Each student's rows and totals, in the order given: what every output of a class reads."""
    return [Tally(s, student_rows(s), totals(s)) for s in students]


def tallied(book) -> list[Tally]:
    """``book`` as tallies: a ``Student`` is tallied, a ``Tally`` kept."""
    return [t if isinstance(t, Tally) else tally([t])[0] for t in book]
