"""What a graded class writes (``write``): the per-student tables, a feedback file per
student (``classroom.feedback``), the gradebook in the course's layout or an LMS's
(``write_gradebook``, ``LMS``), the per-check CSV, the class summary and the closing lines;
all from the class's tally (``records.tally``)."""
from __future__ import annotations

import csv
from pathlib import Path

from .check import CHECKS
from .feedback import write_feedback
from .grade import MILESTONE_MAX, table
from .records import MILESTONES, extras_points, is_ungraded, tallied

EXIT_GRADED, EXIT_UNGRADED = 0, 4

MILESTONE_TITLES = {"M1": "ES in one thread solves CartPole-v1", "M2": "parallel with joblib",
                    "M3": "distributed through Redis", "M4": "Pong better than random"}
LMS = ("course", "canvas", "moodle")     # --csv-format


def write(book, *, as_json=False, log=print, csv_path=None, checks_csv=None, csv_format="course", feedback=None,
          feedback_format="md", wall=0.0, jobs=1) -> int:
    """Write what the class's tally ``book`` holds; the exit status (``EXIT_GRADED``, or
    ``EXIT_UNGRADED`` when a student has an ungraded submission)."""
    if not as_json:
        for t in book:
            for res in t.student.results:
                log(table(res))
    written = []
    if feedback is not None:
        for t in book:
            written.append(write_feedback(t.student, feedback, feedback_format, tally=t))
    if csv_path is not None:
        checks_csv = Path(checks_csv) if checks_csv else Path(csv_path).with_name(Path(csv_path).stem + "-checks.csv")
        write_gradebook(book, csv_path, csv_format)
        write_checks(book, checks_csv)
        written += [Path(csv_path), checks_csv]
    ungraded = [t.student.name for t in book if any(is_ungraded(r) for r in t.student.results)]
    if not as_json:
        log(summary(book, wall, jobs))
        if written:
            parts = [", ".join(str(w) for w in written if w.suffix == ".csv")
                     + (f" ({csv_format}'s layout)" if csv_format != "course" else "")] if csv_path is not None else []
            if feedback is not None:
                parts.append(f"{len(book)} feedback file(s) in {feedback}")
            log("wrote " + " and ".join(parts))
        if ungraded:
            log(f"error: {len(ungraded)} student(s) have ungraded submissions ({', '.join(ungraded[:10])}): the "
                f"grader's own machinery failed on them, so they have no points (status column); fix the cause and "
                f"grade them again (exit status {EXIT_UNGRADED})")
    return EXIT_UNGRADED if ungraded else EXIT_GRADED


def _blank(v):
    return "" if v is None else v


def write_gradebook(book, path, fmt: str = "course") -> None:
    """One row per student of ``book`` (tallies, or Students): ours (``student, M1..M4, total,
    max[, extras], status``), or the layout Canvas or Moodle imports (``LMS``). An ungraded
    milestone is a blank cell."""
    book = tallied(book)
    if fmt == "canvas":
        return _write_canvas(book, path)
    if fmt == "moodle":
        return _write_moodle(book, path)
    cols = ["student", *MILESTONES, "total", "max"] + (["extras"] if extras_points() else []) + ["status"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for t in book:
            w.writerow({k: _blank(v) for k, v in t.totals.items()})


def lms_columns() -> list[tuple[str, str, int]]:
    """(column title, key in ``totals``, points possible) of an LMS export: one per milestone,
    the extras when there are any, the total."""
    cols = [(f"{m}: {MILESTONE_TITLES.get(m, m)}", m, MILESTONE_MAX[m]) for m in MILESTONES]
    if extras_points():
        cols.append(("Extras (bonus)", "extras", extras_points()))
    return cols + [("es-course total", "total", sum(MILESTONE_MAX.values()))]


def _write_canvas(book, path) -> None:
    """Canvas's gradebook CSV (Grades > Import): Student, ID, SIS User ID, SIS Login ID,
    Section, one column per graded item, and the "    Points Possible" row Canvas reads for
    the denominators. The student's identifier (their folder's name) is the SIS Login ID."""
    cols = lms_columns()
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section"] + [c[0] for c in cols])
        w.writerow(["    Points Possible", "", "", "", ""] + [c[2] for c in cols])
        for t in book:
            name = t.student.name
            w.writerow([name, "", "", name, ""] + [_blank(t.totals.get(c[1])) for c in cols])


def _write_moodle(book, path) -> None:
    """Moodle's grade import from a CSV file (Grades > Import > CSV file): a column to
    identify users by (``Username``: map it to username or ID number) and one column per grade
    item (map each to an item, or to a new one)."""
    cols = lms_columns()
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Username"] + [c[0] for c in cols])
        for t in book:
            w.writerow([t.student.name] + [_blank(t.totals.get(c[1])) for c in cols])


def write_checks(book, path) -> None:
    cols = ["student", "notebook", "milestone", "check", "points", "max", "message", "submission", "input_seed",
            "status"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for t in tallied(book):
            for r in t.rows:
                w.writerow([t.student.name, r["notebook"], r["milestone"], r["name"], _blank(r["points"]), r["max"],
                            r["message"], r["submission"], r["input_seed"], r.get("status", "graded")])

def summary(book, wall: float, jobs: int) -> str:
    from .sandbox import describe
    book = tallied(book)
    students = [t.student for t in book]
    n = len(students)
    rows = {t.student.name: t.rows for t in book}
    book = [t.totals for t in book]
    width = max([len("student")] + [len(s.name) for s in students])
    extra = ["extras"] if extras_points() else []
    cell = lambda v, w: f"{'-' if v is None else v:>{w}}"     # noqa: E731  (- : ungraded)
    head = f"{'student':<{width}}  " + "  ".join(f"{m:>4}" for m in MILESTONES) + "  total  max" + \
        ("  extras" if extra else "") + "  status"
    lines = ["", head]
    for b in book:
        lines.append(f"{b['student']:<{width}}  " + "  ".join(cell(b[m], 4) for m in MILESTONES)
                     + f"  {cell(b['total'], 5)}  {b['max']:>3}" + (f"  {cell(b['extras'], 6)}" if extra else "")
                     + f"  {b['status'][:120]}")
    maxes = {**MILESTONE_MAX, "total": sum(MILESTONE_MAX.values()), "extras": extras_points()}
    lines += ["", f"{'milestone':<10} {'mean':>11}  full marks   (over graded students)"]
    for m in [*MILESTONES, "total", *extra]:
        got = [b[m] for b in book if b[m] is not None]
        mean = sum(got) / len(got) if got else float("nan")
        full = sum(v == maxes[m] for v in got)
        lines.append(f"{m:<10} {mean:>6.1f} / {maxes[m]:<2}  {full} of {len(got)}")
    lines += ["", f"{'check':<20} {'milestone':<9} passed"]
    for name, (milestone, _, _, _) in CHECKS.items():
        points = [next(r for r in rows[s.name] if r["name"] == name)["points"] for s in students]
        graded = [p for p in points if p is not None]
        lines.append(f"{name:<20} {milestone:<9} {sum(p > 0 for p in graded)} of {len(graded)}"
                     + (f" ({len(points) - len(graded)} ungraded)" if len(graded) < len(points) else ""))
    graded = sum(len(s.notebooks) for s in students)
    lines.append(f"\ngraded {n} student(s), {graded} notebook(s) in {wall:.0f} s ({wall / max(n, 1):.0f} s per "
                 f"student, {jobs} at a time)")
    kinds: dict[str, int] = {}
    for s in students:
        for r in s.results:
            if r.get("isolation"):
                kinds[r["isolation"]] = kinds.get(r["isolation"], 0) + 1
    for kind, count in sorted(kinds.items()):
        lines.append(f"isolation: {count} notebook(s) graded in kernels with {describe(kind)} ({kind})")
    if "none" in kinds:
        why = next((r.get("isolation_note") for s in students for r in s.results if r.get("isolation_note")), "")
        lines.append(f"warning: kernels ran without the sandbox ({why}): a notebook could reach the grader")
    return "\n".join(lines)
