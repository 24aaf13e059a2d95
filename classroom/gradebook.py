"""A class: ``python -m classroom grade CLASS --csv gradebook.csv --feedback DIR``.

**Who is who.** A folder that holds no notebook itself is a class: each folder in it is one
student, whose identity is that folder's name, whatever is nested inside (``CLASS/alice/
ps4/04_pong.ipynb`` is alice's). nbgrader's course folder works too: ``CLASS/submitted/<student>/
<assignment>/``. A folder that holds notebooks is one student's (its name, or nbgrader's
``submitted/<student>/``); a notebook named on its own is its folder's. ``--student ID`` names
the student of a single submission instead. A notebook or a run file that is a symbolic link
leading out of the student's folder is refused; linked folders are not followed.

**What is graded.** Each student's notebooks, one per course notebook (the one named exactly
like it, ``01_cartpole.ipynb``, when there are several; the others are listed in the
feedback), each in its own isolated child (``classroom.grade.grade``), ``--jobs`` at a time,
the longest first. All notebooks of a student use one input seed, printed in the feedback
with the command that grades the student again on the same inputs.

**First, the sandbox and a preflight.** Where the kernels would get no sandbox, nothing is
graded (exit status 5) unless ``allow_unsandboxed`` (``--allow-unsandboxed``). Then
``classroom.preflight``: one kernel, in the sandbox, imports every module the course needs and
grades a known answer. If it cannot, nothing is graded and nothing is written: exit status 3
and one message that names the cause and the fix.

**What comes out.** One row per student (``student, M1, M2, M3, M4, total, max``, ``extras``
when they carry points: a bonus, not in ``total``, and ``status``), a second CSV with one row
per student and check (with ``status``), a class summary (per milestone the mean and how many
got full marks; per check how many passed; which sandbox the kernels had), and a feedback file
per student (``classroom.feedback``). ``--csv-format canvas`` or ``moodle`` writes the
gradebook in the layout those systems import instead (``LMS``).

**Graded or ungraded.** A failure the student caused (a notebook that ends its kernel,
raises, hangs past the limits, leaves a process behind, cannot be read) is *graded*: 0 for what
it cost, with a message that says what the notebook did. A failure of the grader's own
machinery (a kernel that does not start even in an empty folder, a grading process that died,
an exception in the grader), or of the kernel's environment (a module the course needs that
cannot be imported or read: ``grading_child.machine_fault``) leaves the submission *ungraded*: no
points at all (blank cells, never 0), ``status`` says why, and the exit status is 4. Exit
statuses: 0 every submission graded; 1 the grader failed; 2 bad input (a missing path,
nothing gradable); 3 this machine cannot grade (the preflight, or the grader's own imports);
4 some submissions ungraded; 5 no sandbox, not allowed; 130 interrupted.
"""
from __future__ import annotations

import csv
import json
import os
import secrets
import time
from pathlib import Path

from es.errors import ESError

from .check import CHECKS, checks_for
from .feedback import write_feedback
from .grade import MILESTONE_MAX, grade, notebook_name, student_of, table, validate
from .records import MILESTONES, Student, extras_points, is_ungraded, student_rows, totals
from .sandbox import EXIT_UNSANDBOXED, NoSandbox, unsandboxed  # noqa: F401 (every exit status here)

EXIT_GRADED, EXIT_FAILED, EXIT_USAGE, EXIT_PREFLIGHT, EXIT_UNGRADED = 0, 1, 2, 3, 4

MILESTONE_TITLES = {"M1": "ES in one thread solves CartPole-v1", "M2": "parallel with joblib",
                    "M3": "distributed through Redis", "M4": "Pong better than random"}
LMS = ("course", "canvas", "moodle")     # --csv-format

NOTEBOOKS = sorted({c[2] for c in CHECKS.values()})
# seconds a notebook's grading takes, roughly, to start the longest first
EXPECTED = {"04_pong": 200, "03_redis": 20, "01_cartpole": 12, "02_parallel": 12, "00_es_from_scratch": 7}


def _walk(root: Path, notes: list) -> list[Path]:
    """Every ``*.ipynb`` under ``root``, linked folders not followed (and noted)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        keep = []
        for d in sorted(dirnames):
            if d in (".ipynb_checkpoints", "__pycache__") or d.startswith("."):
                continue
            if os.path.islink(os.path.join(dirpath, d)):
                rel = Path(dirpath, d).relative_to(root.parent)
                notes.append(f"{rel} is a symbolic link to a folder: not followed (submit the files themselves)")
                continue
            keep.append(d)
        dirnames[:] = keep
        out.extend(Path(dirpath) / f for f in sorted(filenames) if f.endswith(".ipynb"))
    return out


def _name_of(path: Path) -> str:
    try:
        if path.is_file() and path.stat().st_size < 100 << 20:
            with open(path, "rb") as f:
                nb = json.load(f)
            return notebook_name(nb if isinstance(nb, dict) else {}, path)
    except (OSError, ValueError, RecursionError):
        pass
    return notebook_name({}, path)


def _student(name: str, root: Path, how: str, files: list[Path]) -> Student:
    s = Student(name, root, how)
    found: dict[str, list[Path]] = {}
    for f in files:
        course = _name_of(f)
        if course:
            found.setdefault(course, []).append(f)
        else:
            s.notes.append(f"{f.relative_to(root.parent)} is not one of the course notebooks: not graded")
    for course, paths in sorted(found.items()):
        exact = [p for p in paths if p.name == f"{course}.ipynb"]
        pick = sorted(exact or paths, key=lambda p: (len(p.relative_to(root).parts), str(p)))[0]
        s.notebooks[course] = pick
        for p in paths:
            if p != pick:
                s.notes.append(f"{p.relative_to(root.parent)} not graded: {pick.relative_to(root.parent)} was "
                               f"graded for {course} (one notebook per assignment, the one named {course}.ipynb)")
    return s


def collect(paths, student: str | None = None) -> list[Student]:
    """The students found in ``paths`` (see the module's docstring); ESError when a path does
    not exist or nothing gradable is found."""
    students: list[Student] = []
    for p in map(Path, paths):
        p = Path(os.path.abspath(p))
        if not os.path.lexists(p):
            raise ESError(f"{p} does not exist: nothing graded (name a notebook, a student's folder or a class folder)")
        if p.is_dir():          # a link named by the instructor is followed; links inside submissions are not
            if student is not None:
                students.append(_student(student, p, f"given with --student; the submission is {p.name}/", _walk(p, [])))
                continue
            direct = any(f.suffix == ".ipynb" for f in p.iterdir() if f.is_file())
            if (p / "submitted").is_dir() and not direct:
                p = p / "submitted"                      # nbgrader's course folder
            one = None                                    # (student, their folder, how) for a single submission
            if p.name != "submitted" and p.parent.name == "submitted":
                one = (p.name, p, f"nbgrader's submitted/{p.name}/")
            elif p.name != "submitted" and p.parent.parent.name == "submitted":
                one = (p.parent.name, p.parent, f"nbgrader's submitted/{p.parent.name}/")
            elif direct and p.name != "submitted":
                one = (p.name, p, f"the name of the submission's folder, {p.name}/")
            if one is not None:
                notes: list = []
                s = _student(one[0], one[1], one[2], _walk(p, notes))
                s.notes[:0] = notes
                students.append(s)
                continue
            for sub in sorted(q for q in p.iterdir() if not q.name.startswith(".") and q.is_dir()):
                notes = []
                s = _student(sub.name, sub, f"the name of your top-level folder in the class, {sub.name}/",
                             _walk(sub, notes))
                s.notes[:0] = notes
                students.append(s)
            continue
        who = student or student_of(p)
        how = ("given with --student" if student else f"nbgrader's submitted/{who}/" if who != p.parent.name
               else f"the name of the folder holding the notebook, {who}/")
        root = p.parent.parent if who != p.parent.name and p.parent.parent.name == who else p.parent
        s = next((x for x in students if x.name == who and x.root == root), None) or Student(who, root, how)
        if s not in students:
            students.append(s)
        if p.suffix == ".ipynb":
            course = _name_of(p) or p.stem
            if course in s.notebooks:
                s.notes.append(f"{p.name} not graded: {s.notebooks[course].name} was graded for {course}")
            else:
                s.notebooks[course] = p
        else:
            s.others.append(p)
    names = [s.name for s in students]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice and student is None:
        raise ESError(f"two submissions would be graded as {', '.join(twice)}: grade them one at a time, with --student")
    if not any(s.notebooks for s in students):
        given = ", ".join(str(p) for p in paths)
        raise ESError(f"nothing to grade in {given}: no notebook (.ipynb) found; name notebooks, a student's folder "
                      "or a class folder (one folder per student)")
    return students


def grade_class(paths, *, as_json=False, cell_timeout=900, check_timeout=600, log=print, csv_path=None,
                feedback=None, jobs=None, submission_timeout=3600, seed=None, only=None, student=None,
                feedback_format="md", support_path=None, checks_csv=None, csv_format="course", preflight=True,
                allow_unsandboxed=False) -> int:
    """Grade every student found in ``paths``; the exit status (``EXIT_*``). Raises
    ``NoSandbox`` where the kernels would have no isolation and ``allow_unsandboxed`` is not
    given, and ``PreflightFailed`` when the known answer does not grade (nothing graded,
    nothing written)."""
    from concurrent.futures import ThreadPoolExecutor
    if csv_format not in LMS:
        raise ESError(f"--csv-format must be one of {', '.join(LMS)}, not {csv_format}")
    students = collect(paths, student)
    if student is not None and len(students) > 1:
        raise ESError(f"--student names one submission; {len(students)} were given")
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
    for s in students:
        order = {c: i for i, c in enumerate(NOTEBOOKS)}
        s.results.sort(key=lambda r: order.get(r.get("course_notebook"), 99))
        for p in s.others:
            res = {"submission": str(p), "notebook": "", "student": s.name, "checks": [], "total": 0, "max": 0,
                   "error": f"{p.name} is not a notebook (.ipynb): not graded"}
            s.results.append(res)
            if as_json:
                log(json.dumps(res))
    if not as_json:
        for s in students:
            for res in s.results:
                log(table(res))
    written = []
    if feedback is not None:
        for s in students:
            written.append(write_feedback(s, feedback, feedback_format))
    if csv_path is not None:
        checks_csv = Path(checks_csv) if checks_csv else Path(csv_path).with_name(Path(csv_path).stem + "-checks.csv")
        write_gradebook(students, csv_path, csv_format)
        write_checks(students, checks_csv)
        written += [Path(csv_path), checks_csv]
    ungraded = [s.name for s in students if any(is_ungraded(r) for r in s.results)]
    if not as_json:
        log(summary(students, wall, jobs))
        if written:
            parts = [", ".join(str(w) for w in written if w.suffix == ".csv")
                     + (f" ({csv_format}'s layout)" if csv_format != "course" else "")] if csv_path is not None else []
            if feedback is not None:
                parts.append(f"{len(students)} feedback file(s) in {feedback}")
            log("wrote " + " and ".join(parts))
        if ungraded:
            log(f"error: {len(ungraded)} student(s) have ungraded submissions ({', '.join(ungraded[:10])}): the "
                f"grader's own machinery failed on them, so they have no points (status column); fix the cause and "
                f"grade them again (exit status {EXIT_UNGRADED})")
    return EXIT_UNGRADED if ungraded else EXIT_GRADED


def _blank(v):
    return "" if v is None else v


def write_gradebook(students, path, fmt: str = "course") -> None:
    """One row per student: ours (``student, M1..M4, total, max[, extras], status``), or the
    layout Canvas or Moodle imports (``LMS``). An ungraded milestone is a blank cell."""
    if fmt == "canvas":
        return _write_canvas(students, path)
    if fmt == "moodle":
        return _write_moodle(students, path)
    cols = ["student", *MILESTONES, "total", "max"] + (["extras"] if extras_points() else []) + ["status"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for s in students:
            w.writerow({k: _blank(v) for k, v in totals(s).items()})


def lms_columns() -> list[tuple[str, str, int]]:
    """(column title, key in ``totals``, points possible) of an LMS export: one per milestone,
    the extras when there are any, the total."""
    cols = [(f"{m}: {MILESTONE_TITLES.get(m, m)}", m, MILESTONE_MAX[m]) for m in MILESTONES]
    if extras_points():
        cols.append(("Extras (bonus)", "extras", extras_points()))
    return cols + [("es-course total", "total", sum(MILESTONE_MAX.values()))]


def _write_canvas(students, path) -> None:
    """Canvas's gradebook CSV (Grades > Import): Student, ID, SIS User ID, SIS Login ID,
    Section, one column per graded item, and the "    Points Possible" row Canvas reads for
    the denominators. The student's identifier (their folder's name) is the SIS Login ID."""
    cols = lms_columns()
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section"] + [c[0] for c in cols])
        w.writerow(["    Points Possible", "", "", "", ""] + [c[2] for c in cols])
        for s in students:
            book = totals(s)
            w.writerow([s.name, "", "", s.name, ""] + [_blank(book.get(c[1])) for c in cols])


def _write_moodle(students, path) -> None:
    """Moodle's grade import from a CSV file (Grades > Import > CSV file): a column to
    identify users by (``Username``: map it to username or ID number) and one column per grade
    item (map each to an item, or to a new one)."""
    cols = lms_columns()
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Username"] + [c[0] for c in cols])
        for s in students:
            book = totals(s)
            w.writerow([s.name] + [_blank(book.get(c[1])) for c in cols])


def write_checks(students, path) -> None:
    cols = ["student", "notebook", "milestone", "check", "points", "max", "message", "submission", "input_seed",
            "status"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for s in students:
            for r in student_rows(s):
                w.writerow([s.name, r["notebook"], r["milestone"], r["name"], _blank(r["points"]), r["max"],
                            r["message"], r["submission"], r["input_seed"], r.get("status", "graded")])


def summary(students, wall: float, jobs: int) -> str:
    from .sandbox import describe
    n = len(students)
    book = [totals(s) for s in students]
    rows = {s.name: student_rows(s) for s in students}
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
