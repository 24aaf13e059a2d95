"""``python -m es grade DIR_OR_NOTEBOOKS... [--json] [--csv FILE] [--feedback DIR] [--jobs N]``.

Each submission is graded in a child process of its own session, with a hard wall-clock
limit (``--submission-timeout``) after which the child, its kernel and everything they
started are killed; the child's and the kernel's output go nowhere (a notebook that writes
to file descriptor 1 cannot put lines into the gradebook), and its rows come back in a file
and are checked against the grader's own list of checks (names, maximum points, points 0 or
the maximum). Submissions are graded in parallel, ``--jobs`` at a time.

Inside the child (``_grade_here``) the notebook runs headless (nbclient) with
``ES_COURSE_FAST=1``, a time limit per cell and errors allowed. A cell that does not finish
in time (even one that catches ``KeyboardInterrupt``) is skipped: the kernel is restarted and
the notebook run again without it. Then every check of that notebook runs in a cell of its
own; a check that fails, hangs or kills the kernel costs only its own points: the kernel is
restarted, the notebook replayed, and the next check runs. A submission that is not a
notebook gets 0 with a message and never crashes the grader.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .check import CHECKS, CheckFailed, checks_for, input_seed, verdict
from .build import ROOT
from .remote import KernelError, KernelGone, Remote, ask

MILESTONE_MAX = {"M1": 10, "M2": 5, "M3": 5, "M4": 10}


def notebook_name(nb, path: Path) -> str:
    name = nb.get("metadata", {}).get("es_course", {}).get("notebook")
    if name:
        return name
    m = re.match(r"(\d\d)", path.name)
    for src in sorted({c[2] for c in CHECKS.values()}):
        if m and src.startswith(m.group(1)):
            return src
    return ""


def student_of(path: Path) -> str:
    """Whose submission: nbgrader's ``submitted/<student>/<assignment>/x.ipynb`` gives
    ``<student>``; otherwise the folder holding the notebook (``submissions/<student>/``)."""
    path = Path(path).resolve()
    if len(path.parents) > 2 and path.parents[2].name == "submitted":
        return path.parents[1].name
    return path.parent.name


def _grade_here(path, cell_timeout: int = 900, check_timeout: int = 600, seed: int = 0, only=None,
                student: str | None = None) -> dict:
    """The grading itself, in this process (``grade`` runs it in an isolated child)."""
    import nbformat
    path = Path(path)
    given = {"STUDENT_ID": student or student_of(path), "folder": path.resolve().parent}
    out = {"submission": str(path), "total": 0, "max": 0, "checks": []}
    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception as exc:   # not JSON, not a notebook, unreadable: a message, not a crash
        out["error"] = f"cannot read {path}: {exc.__class__.__name__}: {str(exc)[:200]}"
        return out
    name = notebook_name(nb, path)
    names = checks_for(name)
    rows = [{"name": n, "milestone": CHECKS[n][0], "points": 0, "max": CHECKS[n][1], "message": ""} for n in names]
    out.update(notebook=name, max=sum(r["max"] for r in rows))
    if not names:
        out["error"] = f"{path.name} is not one of the course notebooks (no checks for {name or 'it'})"
        return out
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    os.environ["ES_COURSE_FAST"] = "1"      # the kernel inherits it (and PYTHONPATH, set by ``grade``)
    cells = [c for c in nb.cells if c.cell_type == "code"]
    skipped: list[int] = []        # student cells that never finished: left out of every replay
    notes: list[str] = []
    run = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c.source) for c in cells])
    client = NotebookClient(run, timeout=cell_timeout, kernel_name="python3", allow_errors=True,
                            interrupt_on_timeout=False, resources={"metadata": {"path": str(path.parent)}})

    def replay():
        """A fresh kernel that has run every student cell that finishes in time."""
        while True:
            client.km = client.create_kernel_manager()
            client.start_new_kernel()
            client.start_new_kernel_client()
            for i, cell in enumerate(run.cells[:len(cells)]):
                if i in skipped:
                    continue
                try:
                    client.execute_cell(cell, i)
                except (CellTimeoutError, DeadKernelError) as exc:
                    skipped.append(i)
                    why = "did not finish in time" if isinstance(exc, CellTimeoutError) else "killed the kernel"
                    notes.append(f"code cell {i + 1} {why}; graded without it")
                    _stop_kernel(client)
                    break
            else:
                return

    def execute(source: str, deadline: float) -> str:
        """Run ``source`` in the kernel before ``deadline``; its printed text."""
        cell = nbformat.v4.new_code_cell(source)
        run.cells.append(cell)
        client.timeout = max(1, int(deadline - time.monotonic()))
        try:
            client.execute_cell(cell, len(run.cells) - 1)
        except CellTimeoutError:
            raise KernelGone("timeout") from None
        except DeadKernelError:
            raise KernelGone("dead") from None
        finally:
            client.timeout = cell_timeout
        return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")

    from .delegation import findings
    delegated = findings([c.source for c in cells], {n: CHECKS[n][3] for n in names})
    try:
        replay()
        for row in rows:
            if only is not None and row["name"] not in only:
                row["message"] = f"{row['name']}: not graded (left out by --checks)"
                continue
            if row["name"] in delegated:
                row["message"] = delegated[row["name"]]
                continue
            row["message"] = _run_check(row, execute, check_timeout, input_seed(seed, row["name"]), given)
            if row["message"] == "passed":
                row["points"] = row["max"]
            elif row["message"].endswith(_GONE):
                _stop_kernel(client)
                replay()                 # the next check gets a kernel in a known state
    except Exception as exc:         # the machinery itself failed: every check not yet graded says why
        for r in rows:
            if not r["message"]:
                r["message"] = f"{r['name']}: not graded: {exc.__class__.__name__}: {str(exc)[:200]}"
    finally:
        _stop_kernel(client)
    out["checks"] = rows
    out["total"] = sum(r["points"] for r in rows)
    if notes:
        out["notes"] = notes
    return out


_GONE = "(the kernel was restarted for the next check)"


def _run_check(row: dict, execute, check_timeout: int, seed: int, given: dict | None = None) -> str:
    """One check, in this process, on inputs drawn from ``seed``; the student's functions run
    in the kernel. Its message. ``given``: what the grader knows better than the notebook (whose
    submission it is, the folder it came in), which ``_grader_side`` applies."""
    name = row["name"]
    deadline = time.monotonic() + check_timeout
    run = lambda source: execute(source, deadline)   # noqa: E731
    try:
        objs = []
        for need in CHECKS[name][3]:
            kind = ask(run, need, "kind")
            if kind.get("missing"):
                return f"{name}: define {need} (the cell that defines it did not run?)"
            home = str(kind.get("module") or "")
            if kind.get("callable") and home.split(".")[0] in ("es", "pong", "solutions"):
                return f"{name}: 0 points: {need} is {home}'s function, not one written in the notebook"
            objs.append(Remote(run, need) if kind.get("callable") else
                        _grader_side(need, ask(run, need, "get").get("value"), given or {}))
        verdict(name, objs, seed)
        return "passed"
    except NotImplementedError:
        return f"{name}: not implemented yet (the cell still raises NotImplementedError)"
    except CheckFailed as exc:
        return str(exc)
    except KernelError as exc:
        return f"{name}: raised {str(exc)[:300]}"
    except KernelGone as exc:
        if exc.reason == "timeout":
            return f"{name}: the check did not finish in {check_timeout} s (an endless loop?) {_GONE}"
        return f"{name}: the kernel died during the check (out of memory, or os._exit?) {_GONE}"
    except Exception as exc:   # the check could not use what came back (a tuple for a dict, ...)
        return (f"{name}: the check could not use what your code returned ({exc.__class__.__name__}: "
                f"{str(exc)[:200]}); compare with the docstring")


def _grader_side(need: str, value, given: dict):
    """The student's identifier is the grader's, never the notebook's (which a student could set
    to a classmate's); a run directory must lie inside the submission's folder."""
    if need == "STUDENT_ID" and given.get("STUDENT_ID"):
        return given["STUDENT_ID"]
    if need == "RUN_DIR" and given.get("folder") is not None:
        folder = Path(given["folder"])
        if not isinstance(value, (str, os.PathLike)):
            raise CheckFailed(f"RUN_DIR must be a path, got {type(value).__name__}")
        target = (folder / value).resolve()
        if not target.is_relative_to(folder):
            raise CheckFailed(f"RUN_DIR {str(value)[:100]} lies outside the submission's folder; submit the run "
                              "directory next to the notebook")
        return str(target)
    return value


def _stop_kernel(client) -> None:
    from jupyter_core.utils import run_sync
    try:
        if client.kc is not None:
            client.kc.stop_channels()
        if client.km is not None:
            run_sync(client.km.shutdown_kernel)(now=True)
    except Exception:
        pass
    client.kc = client.km = None


# ---- isolation: one child process per submission ----
def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    sessions: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
                children.setdefault(int(fields[1]), []).append(int(d.name))
                sessions[int(d.name)] = int(fields[3])
            except (OSError, IndexError, ValueError):
                pass
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            if c not in out:
                out.add(c)
                todo.append(c)
    # Whatever shares a session with the tree (e.g. a daemon a student's code double-forked).
    sids = {sessions.get(p) for p in out | {pid}} - {None, sessions.get(os.getpid())}
    return out | {p for p, s in sessions.items() if s in sids and p != os.getpid()}


def _kill_tree(pid: int) -> None:
    for _ in range(3):                # kill, then look again for anything started meanwhile
        victims = _descendants(pid) | {pid}
        for p in victims:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)


def validate(raw, names: list[str]) -> list[dict]:
    """The rows the grader accepts: its own checks, each 0 or its maximum, whatever the child said."""
    given = {}
    if isinstance(raw, list):
        given = {r.get("name"): r for r in raw if isinstance(r, dict) and isinstance(r.get("name"), str)}
    rows = []
    for n in names:
        milestone, mx = CHECKS[n][0], CHECKS[n][1]
        r = given.get(n, {})
        ok = r.get("points") in (0, mx) and not isinstance(r.get("points"), bool)
        message = r.get("message") if isinstance(r.get("message"), str) else ""
        rows.append({"name": n, "milestone": milestone, "points": r["points"] if ok else 0, "max": mx,
                     "message": message[:500] if ok else f"{n}: not graded (no valid result)"})
    return rows


def grade(path, cell_timeout: int = 900, check_timeout: int = 600, submission_timeout: int = 3600,
          seed: int | None = None, only=None, student: str | None = None) -> dict:
    """Grade one submission in an isolated child with a hard wall-clock limit. The checks'
    inputs come from ``seed``, drawn fresh when it is None (``result["input_seed"]``); only
    the checks named in ``only`` run when it is given."""
    import secrets
    seed = secrets.randbits(63) if seed is None else int(seed)
    shown, path = str(path), Path(path).resolve()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="es-grade-") as tmp:
        result_file = Path(tmp) / "result.json"
        proc = subprocess.Popen([sys.executable, "-m", "classroom.grade", str(path), str(result_file),
                                 str(cell_timeout), str(check_timeout), str(seed),
                                 ",".join(only) if only is not None else "*", student or student_of(path)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True, cwd=tmp,
                                env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                    filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))})
        timed_out = False
        try:
            proc.wait(timeout=submission_timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_tree(proc.pid)
            proc.wait()
        try:
            child = json.loads(result_file.read_text())
        except (OSError, ValueError):
            child = {}
    if not isinstance(child, dict):
        child = {}
    out = {"submission": shown, "notebook": child.get("notebook") if isinstance(child.get("notebook"), str) else ""}
    names = checks_for(out["notebook"])
    out["checks"] = validate(child.get("checks"), names)
    if timed_out:
        for r in out["checks"]:
            if not r["points"]:
                r["message"] = f"{r['name']}: not graded: the submission used up its {submission_timeout} s limit"
        out["error"] = f"stopped after {submission_timeout} s (the grading limit per submission)"
    elif isinstance(child.get("error"), str):
        out["error"] = child["error"][:300]
    elif not child:
        out["error"] = "the grading process ended without a result"
    if isinstance(child.get("notes"), list):
        out["notes"] = [str(n)[:200] for n in child["notes"][:20]]
    out["total"] = sum(r["points"] for r in out["checks"])
    out["max"] = sum(r["max"] for r in out["checks"])
    out["seconds"] = round(time.monotonic() - t0, 1)
    out["input_seed"] = seed
    return out


def table(result: dict) -> str:
    lines = [f"submission: {result['submission']}" + (f"  ({result['notebook']})" if result.get("notebook") else "")]
    if result.get("error"):
        lines.append(f"  error: {result['error']}")
    for r in result["checks"]:
        status = "" if r["points"] == r["max"] else f"  {r['message']}"
        lines.append(f"  {r['milestone']:<7} {r['name']:<20} {r['points']:>2} / {r['max']:<2}{status}")
    lines.append(f"  total {result['total']} / {result['max']}")
    return "\n".join(lines)


def milestone_summary(results: list[dict]) -> str:
    got, mx = {}, {}
    for res in results:
        for r in res["checks"]:
            got[r["milestone"]] = got.get(r["milestone"], 0) + r["points"]
            mx[r["milestone"]] = mx.get(r["milestone"], 0) + r["max"]
    order = [m for m in ("M1", "M2", "M3", "M4", "extras") if m in mx]
    return "milestones: " + "  ".join(f"{m} {got[m]}/{mx[m]}" for m in order) + \
        f"  (course: {', '.join(f'{k} {v}' for k, v in MILESTONE_MAX.items())}, extras on top)"


def expand(paths) -> list[Path]:
    """Notebooks named, and every ``*.ipynb`` under the folders named, in a stable order."""
    out = []
    for p in map(Path, paths):
        out.extend(sorted(q for q in p.rglob("*.ipynb") if ".ipynb_checkpoints" not in q.parts) if p.is_dir() else [p])
    return out


def write_csv(results: list[dict], path) -> None:
    import csv
    names = list(dict.fromkeys(r["name"] for res in results for r in res["checks"]))
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["submission", "notebook", *names, "total", "max", "seconds", "error"])
        for res in results:
            pts = {r["name"]: r["points"] for r in res["checks"]}
            w.writerow([res["submission"], res.get("notebook", ""), *[pts.get(n, "") for n in names],
                        res["total"], res["max"], res.get("seconds", ""), res.get("error", "")])


def write_feedback(result: dict, folder) -> Path:
    """A plain-text report for the student: each check's points and what it found."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    sub = Path(result["submission"])
    target = folder / f"{sub.parent.name}__{sub.stem}.txt" if sub.parent.name else folder / f"{sub.stem}.txt"
    lines = [f"{sub.name}: {result['total']} / {result['max']} points", ""]
    if result.get("error"):
        lines += [f"error: {result['error']}", ""]
    for r in result["checks"]:
        lines.append(f"{r['name']} ({r['milestone']}): {r['points']} / {r['max']}")
        lines.append(f"    {r['message'] or 'passed'}")
    for n in result.get("notes", []):
        lines.append(f"note: {n}")
    if "input_seed" in result:
        lines.append(f"the checks' inputs came from seed {result['input_seed']} (python -m es grade --input-seed "
                     f"{result['input_seed']} grades again on the same inputs)")
    target.write_text("\n".join(lines) + "\n")
    return target


def main(paths, as_json: bool = False, cell_timeout: int = 900, check_timeout: int = 600, log=print,
         csv_path=None, feedback=None, jobs: int | None = None, submission_timeout: int = 3600,
         seed: int | None = None, only=None, student: str | None = None) -> int:
    from concurrent.futures import ThreadPoolExecutor
    files = expand(paths)
    jobs = max(1, jobs or os.cpu_count() or 1)
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=jobs) as pool:   # each submission is its own child process
        results = list(pool.map(lambda p: grade(p, cell_timeout, check_timeout, submission_timeout, seed, only,
                                                        student), files))
    for res in results:
        log(json.dumps(res) if as_json else table(res))
        if feedback is not None:
            write_feedback(res, feedback)
    if csv_path is not None:
        write_csv(results, csv_path)
    if not as_json and len(results) > 1:
        log(milestone_summary(results))
        log(f"graded {len(results)} submissions in {time.monotonic() - t0:.0f} s ({jobs} at a time; "
            f"{sum(r['seconds'] for r in results) / len(results):.1f} s each)")
    return 0


if __name__ == "__main__":   # the isolated child: python -m classroom.grade NOTEBOOK RESULT CELL_S CHECK_S SEED CHECKS|* STUDENT
    _res = _grade_here(sys.argv[1], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
                       None if sys.argv[6] == "*" else set(filter(None, sys.argv[6].split(","))), sys.argv[7])
    Path(sys.argv[2]).write_text(json.dumps(_res))
