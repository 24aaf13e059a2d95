"""Grading one notebook: ``grade(path, ...)``, from the grader's side; a class: ``classroom.gradebook``.

The grader's work lies in four modules: this one starts the isolated child and reads back its
verdict; ``classroom.grading_child`` is the child (the notebook run, then each check);
``classroom.kernels`` starts and stops the notebook's kernels; ``classroom.check_runner``
runs one check against the student's functions in the kernel.

**Where things run.** The grader (this process) starts one child per notebook: ``python -I``
(no current directory, no ``PYTHONPATH`` on its import path), in a private folder of its own
(mode 0700, outside the submission), importing every grader module before any student code
runs. The child runs the notebook headless (nbclient, ``ES_COURSE_FAST=1``, a time limit per
cell, errors allowed) in a kernel that ``classroom.sandbox`` shuts in: its own uid, PID and
mount namespaces, a copy of the submission's folder as its working directory, the support
code read-only and nothing of the grader's. Each check then runs in the child, calling the
student's functions in the kernel (``classroom.remote``) as plain data.

**The verdict's way back.** The child writes its rows to a pipe it inherited (no file, no
name on a command line); nothing in the sandbox can open it. The grader reads the rows only
after the child has exited, its process tree is killed, and no process of the submission's
uid is left (a survivor, however it was started, voids the result); it then keeps only its
own checks, each 0 or its maximum. A hard wall-clock limit (``submission_timeout``) kills
the child, its kernel and everything they started.

A cell that does not finish in time (even one that catches ``KeyboardInterrupt``) is
skipped: the kernel is restarted and the notebook run again without it. A check that fails,
hangs or kills the kernel costs only its own points: the kernel is restarted, the notebook
replayed, and the next check runs. A submission that is not a notebook gets 0 with a message.
"""
from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import PACKAGES
from .check import CHECKS, checks_for

ROOT = Path(__file__).resolve().parents[1]
# The points per milestone: the sum of its checks' declared points (tests/classroom/test_check_declarations.py
# holds them to the assignment's 10, 5, 5 and 10); extras are not a milestone.
MILESTONE_MAX = {m: sum(c[1] for c in CHECKS.values() if c[0] == m)
                 for m in dict.fromkeys(c[0] for c in CHECKS.values() if c[0] != "extras")}
MAX_NOTEBOOK_BYTES = 100 << 20
MAX_RESULT_BYTES = 8 << 20
RUN_FILES = ("config.json", "metrics.jsonl", "centers.npy", "checkpoint.npz")   # what pong.replay reads of a run
PROBE_PACKAGE = "_es_grade"
REFERENCE_HOMES = (*PACKAGES, "solutions", PROBE_PACKAGE)


def notebook_name(nb, path: Path) -> str:
    name = nb.get("metadata", {}).get("es_course", {}).get("notebook") if isinstance(nb, dict) else None
    if isinstance(name, str) and name:
        return name
    m = re.match(r"(\d\d)", Path(path).name)
    for src in sorted({c[2] for c in CHECKS.values()}):
        if m and src.startswith(m.group(1)):
            return src
    return ""


def student_of(path: Path) -> str:
    """Whose notebook, when it is graded on its own (no class folder, no ``--student``):
    nbgrader's ``submitted/<student>/<assignment>/x.ipynb`` gives ``<student>``; otherwise the
    folder holding it. The path is taken as given: a symbolic link is not followed."""
    path = Path(os.path.abspath(path))
    if len(path.parents) > 2 and path.parents[2].name == "submitted":
        return path.parents[1].name
    return path.parent.name



MACHINE_FAULT = "the kernel's environment failed, not the notebook: "


def safe_name(name: str) -> str:
    """``name`` as one folder name of the kernel's working directory."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", str(name))[:100] or "student"


def within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


# ---------------------------------------------------------------- in the grader
def _descendants(pid: int) -> set[int]:
    from .sandbox import process_table, process_tree
    table = process_table()
    sessions = {p: int(fields[3]) for p, fields in table.items()}
    out = process_tree(pid, table) - {pid}
    # Whatever shares a session with the tree (e.g. a daemon a student's code double-forked).
    sids = {sessions.get(p) for p in out | {pid}} - {None, sessions.get(os.getpid())}
    return out | {p for p, s in sessions.items() if s in sids and p != os.getpid()}


def _kill_tree(pid: int) -> list[int]:
    """SIGKILL ``pid``, its descendants and its session, until none is alive; the survivors."""
    from .sandbox import alive, kill_until_gone
    return kill_until_gone(lambda: [p for p in _descendants(pid) | {pid} if alive(p)])


def validate(raw, names: list[str], ungraded: str | None = None) -> list[dict]:
    """The rows the grader accepts: its own checks, each 0 or its maximum, whatever the child
    said; a check the child left ungraded (the grader's machinery failed, ``ungraded`` says how)
    has no points (None), never 0."""
    given = {}
    if isinstance(raw, list):
        given = {r.get("name"): r for r in raw if isinstance(r, dict) and isinstance(r.get("name"), str)}
    rows = []
    for n in names:
        milestone, mx = CHECKS[n][0], CHECKS[n][1]
        r = given.get(n, {})
        points = r.get("points")
        ok = points in (0, mx) and not isinstance(points, bool)
        message = r.get("message") if isinstance(r.get("message"), str) else ""
        if ungraded is not None and not ok:
            row = {"name": n, "milestone": milestone, "points": None, "max": mx,
                   "message": message[:1500] if points is None and message else f"{n}: ungraded: {ungraded[:300]}"}
        else:
            row = {"name": n, "milestone": milestone, "points": points if ok else 0, "max": mx,
                   "message": message[:1500] if ok else f"{n}: not graded (no valid result)"}
        if ok and isinstance(r.get("detail"), str):
            row["detail"] = r["detail"][:1000]
        if ok and isinstance(r.get("pong"), dict):
            row["pong"] = _plain(r["pong"])
        rows.append(row)
    return rows


MAX_ANSWER_CHARS = 3000


def inline_answers(notebook: str, raw) -> list[dict]:
    """The notebook's inline questions, in order, each with the student's answer as the child
    read it (``""`` when there is none; at most ``MAX_ANSWER_CHARS``) and the reference answer:
    ``[{"id", "question", "answer", "reference"}]``, for the feedback, read by hand (no points)."""
    from .build import SOURCES, inline_questions
    if not notebook or not (SOURCES / f"{notebook}.py").exists():
        return []
    given = raw if isinstance(raw, dict) else {}
    out = []
    for qid, q in inline_questions(notebook).items():
        answer = given.get(qid)
        out.append({"id": qid, "question": q.get("question", ""), "reference": q.get("reference", ""),
                    "answer": answer[:MAX_ANSWER_CHARS] if isinstance(answer, str) else ""})
    return out


def _plain(v, depth: int = 0):
    """Numbers, strings, booleans and short lists of them; anything else dropped."""
    if isinstance(v, (bool, int, float)) or v is None:
        return v
    if isinstance(v, str):
        return v[:600]
    if isinstance(v, list) and depth < 2:
        return [_plain(x, depth + 1) for x in v[:40]]
    if isinstance(v, dict) and depth == 0:
        return {str(k)[:40]: _plain(x, depth + 1) for k, x in list(v.items())[:30]}
    return None


def inspect_notebook(path, root=None) -> str | None:
    """Why the file at ``path`` cannot be graded as part of the folder ``root`` (a symbolic link
    that leads out of it, not a regular file, too large); None when it can."""
    path = Path(os.path.abspath(path))
    root = Path(os.path.abspath(root)) if root is not None else path.parent
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return f"{path.name} cannot be read (a broken link, or it vanished)"
    if not within(real, root.resolve()):
        return (f"{path.name} is a symbolic link to {real}, outside the folder {root.name}/ it was submitted in: "
                "submit the notebook itself")
    st = os.stat(real)
    if not stat.S_ISREG(st.st_mode):
        return f"{path.name} is not a regular file"
    if st.st_size > MAX_NOTEBOOK_BYTES:
        return f"{path.name} is larger than {MAX_NOTEBOOK_BYTES >> 20} MB"
    return None


def grade(path, cell_timeout: int = 900, check_timeout: int = 600, submission_timeout: int = 3600,
          seed: int | None = None, only=None, student: str | None = None, *, root=None, how: str | None = None,
          support_path=None) -> dict:
    """Grade one notebook in an isolated child with a hard wall-clock limit. The checks'
    inputs come from ``seed``, drawn fresh when it is None (``result["input_seed"]``); only
    the checks named in ``only`` run when it is given. ``student``: whose it is (default
    ``student_of(path)``); ``root``: the student's folder (default: the notebook's folder),
    which the notebook and its run must not lead out of; ``support_path``: the folder whose
    packages the kernel imports (default: this checkout, without its answer key)."""
    import secrets
    import shutil
    import tempfile
    from . import sandbox
    seed = secrets.randbits(63) if seed is None else int(seed)
    shown, path = str(path), Path(os.path.abspath(path))
    root = Path(os.path.abspath(root)) if root is not None else path.parent
    student = student or student_of(path)
    how = how or ("given with --student" if student != student_of(path) else "the folder holding the notebook")
    isolation, why_not = sandbox.mode()
    out = {"submission": shown, "notebook": "", "student": student, "identity": how, "input_seed": seed,
           "isolation": isolation}
    if why_not:
        out["isolation_note"] = why_not
    t0 = time.monotonic()
    problem = inspect_notebook(path, root)
    if problem:
        out.update(checks=[], total=0, max=0, error=problem, seconds=0.0, status="graded")
        return out
    lease = sandbox.UidLease() if isolation == "namespaces" else None
    private = Path(tempfile.mkdtemp(prefix="es-grade-"))
    r, w = os.pipe()
    left, timed_out, child = [], False, {}
    try:
        args = {"notebook": str(path.resolve()), "folder": str(path.parent), "root": str(root), "student": student,
                "cell_timeout": cell_timeout, "check_timeout": check_timeout, "seed": seed,
                "only": sorted(only) if only is not None else None, "private": str(private), "result_fd": w,
                "uid": lease.uid if lease else None, "isolation": isolation, "how": how,
                "support_path": str(Path(support_path or ROOT).resolve()),
                # never in the kernel's view, even where they lie inside a folder it is given
                "secret": [str(root), str(root.parent), str(private), str(path.parent)],
                "workdir": "/submission/" + "/".join(map(safe_name, [student, *path.parent.relative_to(root).parts]))}
        boot = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from classroom.grading_child import main as _child_main; _child_main()"
        proc = subprocess.Popen([sys.executable, "-I", "-c", boot, json.dumps(args)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(w,),
                                start_new_session=True, cwd=private,
                                env={**os.environ, "JUPYTER_RUNTIME_DIR": str(private / "runtime")})
        os.close(w)
        w = None
        chunks: list[bytes] = []

        def read():
            size = 0
            while True:
                b = os.read(r, 1 << 16)
                if not b:
                    return
                size += len(b)
                if size <= MAX_RESULT_BYTES:
                    chunks.append(b)
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        namespaces: set[str] = set()
        try:
            proc.wait(timeout=submission_timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            if isolation == "bubblewrap":
                namespaces = sandbox.namespaces_below(proc.pid)
            left = _kill_tree(proc.pid)
            proc.wait()
        left += sandbox.kill_namespaces(namespaces)
        if lease is not None:
            left += sandbox.kill_uid(lease.uid)
        reader.join(timeout=10)
        raw = b"".join(chunks) if not reader.is_alive() else b""
        try:
            child = json.loads(raw.decode()) if raw else {}
        except ValueError:
            child = {}
    finally:
        for fd in (r, w):
            if fd is not None:
                os.close(fd)
        shutil.rmtree(private, ignore_errors=True)
        if lease is not None and not sandbox.survivors(lease.uid):
            lease.release()
    if not isinstance(child, dict):
        child = {}
    if left or child.get("survivors"):
        child = {"notebook": child.get("notebook"), "error": "a process the notebook started could not be stopped; "
                 "its result is not used"}
    out["notebook"] = child.get("notebook") if isinstance(child.get("notebook"), str) else ""
    if not child and not timed_out:          # no word from the child: which checks went ungraded?
        out["notebook"] = _name_from_file(path)
    names = checks_for(out["notebook"])
    # Whose failure: the student's (a hang past the limit, a notebook the grader cannot read, a
    # process that will not die: graded, 0 points) or the grader's (no result at all, a fault it
    # reported: ungraded, no points).
    ungraded = child.get("ungraded") if isinstance(child.get("ungraded"), str) else None
    if not child and not timed_out:
        ungraded = (f"the grading process ended without a result (exit status {proc.returncode}: killed, out of "
                    "memory or a full disk?)")
    out["checks"] = validate(child.get("checks"), names, ungraded if not timed_out else None)
    if timed_out:
        for r_ in out["checks"]:
            if not r_["points"]:
                r_["message"] = f"{r_['name']}: not graded: the submission used up its {submission_timeout} s limit"
        out["error"] = f"stopped after {submission_timeout} s (the grading limit per submission)"
        ungraded = None
    elif isinstance(child.get("error"), str):
        out["error"] = child["error"][:300]
        for r_ in out["checks"]:
            if r_["message"].endswith("(no valid result)"):
                r_["message"] = f"{r_['name']}: not graded: {out['error']}"
    if ungraded is not None:
        out["error"] = f"ungraded: {ungraded[:600]}"
    if isinstance(child.get("notes"), list):
        out["notes"] = [str(n)[:300] for n in child["notes"][:20]]
    out["answers"] = inline_answers(out["notebook"], child.get("answers"))
    out["status"] = "graded" if ungraded is None else f"ungraded: {ungraded[:600]}"
    out["total"] = sum(r_["points"] or 0 for r_ in out["checks"])
    out["max"] = sum(r_["max"] for r_ in out["checks"])
    out["seconds"] = round(time.monotonic() - t0, 1)
    return out


def _name_from_file(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            nb = json.load(f)
    except (OSError, ValueError, RecursionError):
        nb = {}
    return notebook_name(nb if isinstance(nb, dict) else {}, path)


def table(result: dict) -> str:
    lines = [f"submission: {result['submission']}" + (f"  ({result['notebook']})" if result.get("notebook") else "")
             + (f"  graded as {result['student']}" if result.get("student") else "")]
    if result.get("error"):
        lines.append(f"  error: {result['error']}")
    for r in result["checks"]:
        status = "" if r["points"] == r["max"] else f"  {r['message']}"
        points = "--" if r["points"] is None else r["points"]
        lines.append(f"  {r['milestone']:<7} {r['name']:<20} {points:>2} / {r['max']:<2}{status}")
    ungraded = str(result.get("status", "graded")).startswith("ungraded")
    lines.append(f"  total {'ungraded' if ungraded else result['total']} / {result['max']}")
    return "\n".join(lines)
