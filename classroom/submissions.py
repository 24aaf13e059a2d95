"""Who is who in a class (``collect``): the students found in the paths an instructor names,
each with the notebooks to grade, one per course notebook, and notes for the feedback (see
``classroom.gradebook`` for the rules)."""
from __future__ import annotations

import json
import os
from pathlib import Path

from es.errors import ESError

from .grade import notebook_name, student_of
from .records import Student


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
