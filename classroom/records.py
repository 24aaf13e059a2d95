"""What the grader knows about one student of a class: their submission (``Student``) and
their rows (every check of the course, graded or 0 with why not) and totals."""
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
    """Every check of the course for ``s``: graded, or 0 with why not."""
    graded = {r["name"]: (res, r) for res in s.results for r in res.get("checks", [])}
    rows = []
    for name, (milestone, points, course, _) in CHECKS.items():
        if name in graded:
            res, r = graded[name]
            rows.append({**r, "notebook": course, "submission": res["submission"], "input_seed": res.get("input_seed")})
            continue
        res = next((x for x in s.results if x.get("course_notebook") == course), None)
        why = (f"{name}: not graded: {res['error']}" if res and res.get("error") else
               f"{name}: no notebook {course}.ipynb found in {s.root.name}/")
        rows.append({"name": name, "milestone": milestone, "points": 0, "max": points, "message": why,
                     "notebook": course, "submission": res["submission"] if res else "", "input_seed": s.seed})
    return rows


def totals(s: Student) -> dict:
    rows = student_rows(s)
    got = {m: sum(r["points"] for r in rows if r["milestone"] == m) for m in MILESTONES}
    out = {"student": s.name, **got, "total": sum(got.values()), "max": sum(MILESTONE_MAX.values())}
    if extras_points():
        out["extras"] = sum(r["points"] for r in rows if r["milestone"] not in MILESTONES)
    return out
