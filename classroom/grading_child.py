"""The grading child (``python -I``, started by ``grade.grade``): it imports every grader
module before any student code runs (``PREIMPORT``), runs the notebook headless in a kernel
of ``classroom.kernels``, then each check (``classroom.check_runner``), restarting and
replaying the kernel after a check that hangs or kills it, and writes its rows to the pipe
it inherited (``main``)."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from .check import CHECKS, checks_for, input_seed
from .check_runner import RESTARTED, run_check
from .grade import MACHINE_FAULT, MAX_NOTEBOOK_BYTES, ROOT, notebook_name, safe_name, student_of
from .kernels import FolderFault, GraderFault, KernelFactory, notebook_client
from .remote import KernelGone


def grade_here(path, cell_timeout: int = 900, check_timeout: int = 600, seed: int = 0, only=None,
                student: str | None = None, *, root=None, folder=None, private=None, uid=None,
                support_path=None, workdir: str | None = None, isolation: str = "none", how: str | None = None,
                secret=()) -> dict:
    """The grading itself, in this process (``grade`` runs it in an isolated child): the
    notebook at ``path`` (a regular file the grader checked), whose student folder is ``root``
    and whose own folder, as submitted, is ``folder``."""
    import nbformat
    path = Path(path)
    folder = Path(folder) if folder is not None else path.parent
    root = Path(root) if root is not None else folder
    private = Path(private) if private is not None else Path(os.getcwd())
    support_path = Path(support_path) if support_path is not None else ROOT
    given = {"STUDENT_ID": student or student_of(path), "folder": folder, "root": root, "private": private,
             "how": how}
    out = {"submission": str(path), "total": 0, "max": 0, "checks": []}
    try:
        if path.stat().st_size > MAX_NOTEBOOK_BYTES:
            raise ValueError(f"larger than {MAX_NOTEBOOK_BYTES >> 20} MB")
        nb = nbformat.read(str(path), as_version=4)
    except Exception as exc:   # not JSON, not a notebook, unreadable: a message, not a crash
        out["error"] = f"cannot read {path.name}: {exc.__class__.__name__}: {str(exc)[:200]}"
        return out
    name = notebook_name(nb, path)
    names = checks_for(name)
    from .build import student_answers
    out["answers"] = student_answers(nb)      # inline questions: read by hand, in the feedback
    rows = [{"name": n, "milestone": CHECKS[n][0], "points": 0, "max": CHECKS[n][1], "message": ""} for n in names]
    out.update(notebook=name, max=sum(r["max"] for r in rows))
    if not names:
        out["error"] = f"{path.name} is not one of the course notebooks (no checks for {name or 'it'})"
        return out
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    cells = [c for c in nb.cells if c.cell_type == "code"]
    skipped: list[int] = []        # student cells that never finished: left out of every replay
    notes: list[str] = []
    run = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c.source) for c in cells])
    workdir = workdir or f"/submission/{safe_name(given['STUDENT_ID'])}"
    kernel = KernelFactory(private, uid, support_path, folder, workdir, isolation, notes, secret)
    ended: list[int] = []          # code cells (1-based) that ended the kernel
    client = notebook_client(run, len(cells), cell_timeout, private)

    def replay():
        """A fresh kernel that has run every student cell that finishes in time."""
        while True:
            kernel.start(client)
            for i, cell in enumerate(run.cells[:len(cells)]):
                if i in skipped:
                    continue
                try:
                    client.execute_cell(cell, i)
                except (CellTimeoutError, DeadKernelError) as exc:
                    skipped.append(i)
                    if isinstance(exc, CellTimeoutError):
                        notes.append(f"code cell {i + 1} did not finish in time; graded without it")
                    else:
                        ended.append(i + 1)
                        notes.append(f"your notebook ended its kernel in code cell {i + 1} (os._exit, a crash or out "
                                     "of memory); graded without that cell")
                    kernel.stop(client)
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
            row["message"] = run_check(row, execute, check_timeout, input_seed(seed, row["name"]), given)
            if row["message"] == "passed":
                row["points"] = row["max"]
            elif ended and " define " in row["message"] and "did not run" in row["message"]:
                row["message"] += (f"; your notebook ended its kernel in code cell {ended[0]}, so it was graded "
                                   "without that cell")
            if row["message"].endswith(RESTARTED):
                kernel.stop(client)
                replay()                 # the next check gets a kernel in a known state
        lost = [r for r in rows if r["points"] != r["max"] and r["name"] not in delegated
                and (only is None or r["name"] in only)]
        raised = [r.pop("raised") for r in rows if "raised" in r]
        cause = machine_fault(client.errors + raised, support_path) if lost else None
        if cause:                        # the machine's failure cost points: ungraded, never 0
            out["ungraded"] = cause[:800]
            for r in lost:
                r["points"], r["message"] = None, f"{r['name']}: ungraded: {cause[:300]}"
    except FolderFault as exc:       # the submission's files keep the kernel from starting: its doing
        for r in rows:
            if not r["message"]:
                r["message"] = f"{r['name']}: 0 points: {exc}"
    except Exception as exc:         # the grader's own machinery failed: ungraded, never 0 points
        why = str(exc) if isinstance(exc, GraderFault) else f"the grader failed: {exc.__class__.__name__}: {str(exc)[:200]}"
        out["ungraded"] = why[:800]
        for r in rows:
            if not r["message"]:
                r["points"], r["message"] = None, f"{r['name']}: ungraded: {why[:300]}"
    finally:
        kernel.stop(client)
    out["checks"] = rows
    out["total"] = sum(r["points"] or 0 for r in rows)
    if kernel.survived:
        out["survivors"] = kernel.survived
    if notes:
        out["notes"] = notes
    return out



def machine_fault(errors, support: Path) -> str | None:
    """Why the errors the student's cells and functions raised in the kernel (``(ename,
    evalue, file of the innermost frame)``) are the machine's fault, or None
    (``environment.blame``)."""
    from .environment import blame, course_modules, notebooks_of
    from .sandbox import HIDE
    needed = None
    for ename, evalue, where in errors:
        if ename not in ("ImportError", "ModuleNotFoundError", "PermissionError"):
            continue
        if needed is None:
            folder = notebooks_of(ROOT / "notebooks", support / "notebooks", support)
            needed = course_modules(support, folder, HIDE) if folder else []
        why = blame(ename, evalue, where, needed, support)
        if why:
            return f"{MACHINE_FAULT}{why[0]}. Fix: {why[1]}"
    return None


PREIMPORT = ("numpy", "nbformat", "nbclient", "jupyter_client.manager", "jupyter_client.kernelspec", "redis",
             "classroom.check", "classroom.remote", "classroom.wire", "classroom.delegation", "classroom.sandbox",
             "classroom.redis_workers", "es.checkpoint", "es.config", "es.training", "es.evaluators", "es.seeding",
             "es.play", "es.shaping", "es.envs", "es.distributed.master", "es.distributed.server", "pong.env",
             "pong.replay", "pong.student", "pong.problem")


def main(argv=None) -> None:
    """The child: ``python -I -c BOOT JSON``; writes its result to the inherited pipe."""
    import importlib
    args = json.loads((argv or sys.argv)[1])
    fd = int(args.pop("result_fd"))
    os.set_inheritable(fd, False)          # no process started from here gets the pipe
    from .quick_start import skip_unused_imports
    skip_unused_imports()
    only = args.pop("only")
    try:
        for module in PREIMPORT:           # before any student code runs: nothing written later shadows them
            importlib.import_module(module)
    except (ImportError, PermissionError) as exc:     # the grader's own modules: ungraded, with the cause
        from .environment import grader_cannot_import
        res = {"ungraded": grader_cannot_import(exc, whole=False)}
        with os.fdopen(fd, "wb") as f:
            f.write(json.dumps(res).encode())
        return
    try:
        res = grade_here(args.pop("notebook"), args.pop("cell_timeout"), args.pop("check_timeout"), args.pop("seed"),
                          None if only is None else set(only), args.pop("student"), **args)
    except BaseException as exc:
        res = {"ungraded": f"the grader failed: {exc.__class__.__name__}: {str(exc)[:300]}"}
    with os.fdopen(fd, "wb") as f:
        f.write(json.dumps(res).encode())
