"""Grading one notebook: ``grade(path, ...)``; a class: ``main`` (``classroom.gradebook``).

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

import contextlib
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
from .check import CHECK_FILES, CHECKS, RELEASE_SEEDS, CheckFailed, checks_for, input_seed, verdict
from .remote import KernelError, KernelGone, Remote, ask

ROOT = Path(__file__).resolve().parents[1]
MILESTONE_MAX = {"M1": 10, "M2": 5, "M3": 5, "M4": 10}
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


# ---------------------------------------------------------------- in the child
def _grade_here(path, cell_timeout: int = 900, check_timeout: int = 600, seed: int = 0, only=None,
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
    kernel = _KernelFactory(private, uid, support_path, folder, workdir or f"/submission/{_safe(given['STUDENT_ID'])}",
                            isolation, notes, secret)
    ended: list[int] = []          # code cells (1-based) that ended the kernel
    client = _client(run, len(cells), cell_timeout, private)

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
            row["message"] = _run_check(row, execute, check_timeout, input_seed(seed, row["name"]), given)
            if row["message"] == "passed":
                row["points"] = row["max"]
            elif ended and " define " in row["message"] and "did not run" in row["message"]:
                row["message"] += (f"; your notebook ended its kernel in code cell {ended[0]}, so it was graded "
                                   "without that cell")
            if row["message"].endswith(_GONE):
                kernel.stop(client)
                replay()                 # the next check gets a kernel in a known state
        lost = [r for r in rows if r["points"] != r["max"] and r["name"] not in delegated
                and (only is None or r["name"] in only)]
        raised = [r.pop("raised") for r in rows if "raised" in r]
        cause = _machine_fault(client.errors + raised, support_path) if lost else None
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


MACHINE_FAULT = "the kernel's environment failed, not the notebook: "


def _machine_fault(errors, support: Path) -> str | None:
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


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", str(name))[:100] or "student"


def _client(run, student_cells: int, cell_timeout: int, private: Path):
    """An nbclient that keeps no output of the student's cells (a notebook that prints
    gigabytes fills nothing) and at most ``MAX_RESULT_BYTES`` of a probe cell's."""
    from nbclient import NotebookClient

    class Client(NotebookClient):
        def output(self, outs, msg, display_id, cell_index):
            if cell_index < student_cells and msg.get("msg_type") == "error" and len(self.errors) < 50:
                from .environment import innermost_file
                c = msg.get("content", {})
                self.errors.append((str(c.get("ename", ""))[:100], str(c.get("evalue", ""))[:500],
                                    innermost_file(c.get("traceback"))))
            if cell_index < student_cells or msg.get("msg_type") != "stream":
                return None
            if sum(len(o.get("text", "")) for o in outs) > MAX_RESULT_BYTES:
                return None
            return super().output(outs, msg, display_id, cell_index)

    client = Client(run, timeout=cell_timeout, allow_errors=True, interrupt_on_timeout=False,
                    resources={"metadata": {"path": str(private)}})
    client.errors = []            # (ename, evalue, file of the innermost frame) of the student's cells' errors
    return client


class GraderFault(Exception):
    """The grader's own machinery failed (a kernel that does not start even in an empty
    folder, a sandbox that cannot be built): the submission is *ungraded*, never 0 points."""


class FolderFault(Exception):
    """The kernel starts in an empty folder but not in a copy of the submission's: the
    submission's own files broke it (a ``numpy.py`` that shadows NumPy, say): graded, 0 points."""


class _NoKernel(Exception):
    pass


BOOT_MARKER = "@@ES-BOOT@@"


def boot_source(files=()) -> str:
    """A cell the grader runs in every new kernel before any student cell: can the kernel
    import the grader's probe, and read the support code's ``files`` (the grader lists the
    ones it sees)? Nothing of the support code or NumPy is executed (a notebook may set things
    up before it imports them)."""
    return f"""def _es_boot():
    import importlib.util, json
    try:
        import {PROBE_PACKAGE}.probe
        for name in ("{PROBE_PACKAGE}.wire", "numpy"):
            spec = importlib.util.find_spec(name)
            if spec is None:
                return {{"error": "ModuleNotFoundError: no module named " + name}}
            if spec.has_location and spec.origin:
                open(spec.origin, "rb").close()
        for path in {list(map(str, files))!r}:
            open(path, "rb").close()
        return {{"ok": True}}
    except BaseException as exc:
        return {{"error": exc.__class__.__name__ + ": " + str(exc)}}
print("{BOOT_MARKER}" + __import__("json").dumps(_es_boot()), flush=True)
del _es_boot"""


SUPPORT_FILES = ("es/__init__.py", "classroom/__init__.py", "classroom/check.py", *CHECK_FILES, "classroom/wire.py")


class _KernelFactory:
    """Starts the notebook's kernels: in ``classroom.sandbox`` (uid ``uid`` as root, or
    bubblewrap) when ``isolation`` says so, else as a plain child process; either way in a fresh
    copy of the submission's folder, with ``support_path`` and the grader's probe on its import
    path. A kernel that does not start (or cannot import the grader's probe) is tried once more
    in an empty folder: if that one starts, the submission's files are to blame
    (``FolderFault``), else the grader's machinery (``GraderFault``)."""

    def __init__(self, private: Path, uid, support_path: Path, folder: Path, workdir: str, isolation: str, notes,
                 secret=()):
        from . import sandbox
        self.private, self.uid, self.support, self.folder = private, uid, support_path, folder
        self.workdir, self.isolation, self.notes, self.survived, self.count = workdir, isolation, notes, [], 0
        self.secret, self.namespaces, self.stderr = tuple(secret), set(), None
        probe = private / "probe" / PROBE_PACKAGE
        probe.mkdir(parents=True, exist_ok=True)
        for name in ("probe.py", "wire.py"):
            (probe / name).write_bytes((Path(__file__).parent / name).read_bytes())
        (probe / "__init__.py").write_text("")
        for p in (probe.parent, probe, *probe.iterdir()):     # the kernel's to read, whatever the grader's umask
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        self.sandbox = sandbox

    def start(self, client) -> None:
        try:
            self._start(client, self.folder)
            return
        except _NoKernel as exc:
            first = str(exc)
        self.stop(client)
        try:
            self._start(client, None)          # an empty folder: the submission's files, or the machinery?
        except _NoKernel as exc:
            self.stop(client)
            raise GraderFault(f"no kernel could be started for grading: {exc}") from None
        self.stop(client)
        try:                                   # once more in the submission's folder: a passing hiccup is no one's fault
            self._start(client, self.folder)
            return
        except _NoKernel:
            self.stop(client)
        raise FolderFault(f"the kernel does not start in a copy of your folder ({first[:300]}), though it starts in an "
                          "empty folder: a file in your folder shadows a module Python or the kernel needs (a numpy.py, "
                          "an es/ folder, ...); rename it")

    def _start(self, client, folder) -> None:
        from jupyter_client.kernelspec import KernelSpecManager
        from jupyter_client.manager import AsyncKernelManager
        self.count += 1
        kdir = self.private / f"kernel{self.count}"
        work = kdir / "work"
        jailed = self.isolation in ("namespaces", "bubblewrap")
        if folder is None:
            work.mkdir(parents=True)
            if self.uid is not None and self.isolation == "namespaces":
                os.chown(work, self.uid, self.uid)
            left = []
        else:
            left = self.sandbox.owned_copy(folder, work, self.uid if self.isolation == "namespaces" else None)
        os.chmod(kdir, 0o755)
        if left and self.count == 1:
            self.notes.append(f"left out of the kernel's copy of the folder (too large): {', '.join(left[:5])}")
        env = {"ES_COURSE_FAST": "1", "MPLBACKEND": "module://matplotlib_inline.backend_inline"}
        if jailed:
            try:
                name = self.sandbox.kernel_spec(kdir, uid=self.uid, support_path=self.support, workdir_src=work,
                                                workdir=self.workdir, probe_dir=self.private / "probe", env=env,
                                                backend=self.isolation, secret=self.secret)
            except self.sandbox.SandboxError as exc:
                raise GraderFault(str(exc)) from None
            ksm = KernelSpecManager(kernel_dirs=[str(kdir / "kernels")])
            cwd = str(self.private)
        else:
            name = "es-grade-plain"
            spec = kdir / "kernels" / name
            spec.mkdir(parents=True)
            pythonpath = os.pathsep.join([str(self.support), str(self.private / "probe")])
            spec.joinpath("kernel.json").write_text(json.dumps({
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "es-course", "language": "python", "interrupt_mode": "message",
                "env": {**env, "PYTHONPATH": pythonpath, "ES_GRADE_INSTALLED": str(self.support)}}))
            ksm = KernelSpecManager(kernel_dirs=[str(kdir / "kernels")])
            cwd = str(work)
        self.stderr = _Tail()
        client.km = AsyncKernelManager(kernel_name=name, kernel_spec_manager=ksm)
        process = None
        try:
            try:
                client.start_new_kernel(cwd=cwd, stderr=self.stderr.fd)
                process = getattr(client.km.provisioner, "process", None)
            finally:
                self.stderr.close_writer()
            client.start_new_kernel_client()
        except Exception as exc:
            raise _NoKernel(_said(exc, self.stderr) + _exit_status(process)) from None
        if self.isolation == "bubblewrap":
            self.namespaces |= self.sandbox.namespaces_below(client.km.provisioner.pid)
        reply = self._boot(client)
        if "error" in reply:
            raise _NoKernel(f"in the kernel: {reply['error']}")

    def _boot(self, client) -> dict:
        import nbformat
        from nbclient.exceptions import CellTimeoutError, DeadKernelError
        cell = nbformat.v4.new_code_cell(boot_source([self.support / f for f in SUPPORT_FILES
                                                       if (self.support / f).is_file()]))
        client.nb.cells.append(cell)
        try:
            client.execute_cell(cell, len(client.nb.cells) - 1)
        except (CellTimeoutError, DeadKernelError) as exc:
            return {"error": f"the kernel died or hung at start ({exc.__class__.__name__}){_last_words(self.stderr)}"}
        text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
        for line in text.splitlines():
            if line.startswith(BOOT_MARKER):
                try:
                    reply = json.loads(line[len(BOOT_MARKER):])
                    return reply if isinstance(reply, dict) else {"error": "unreadable"}
                except ValueError:
                    break
        errors = [f"{o.get('ename')}: {o.get('evalue')}" for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        return {"error": errors[0] if errors else "the kernel did not answer the grader's first request"}

    def stop(self, client) -> None:
        import shutil
        _stop_kernel(client)
        if self.isolation == "namespaces" and self.uid is not None:
            left = self.sandbox.kill_uid(self.uid)
            if left:
                self.survived = left
        if self.isolation == "bubblewrap" and self.namespaces:
            left = self.sandbox.kill_namespaces(self.namespaces)
            if left:
                self.survived = left
        if self.stderr is not None:
            self.stderr.close()
        shutil.rmtree(self.private / f"kernel{self.count}" / "work", ignore_errors=True)


class _Tail:
    """A pipe for a kernel's standard error, drained by a thread that keeps its last 8 kB
    (what a kernel that dies at start says; a notebook writing gigabytes fills nothing)."""

    KEEP = 8192

    def __init__(self):
        self._r, self.fd = os.pipe()
        self.text = b""
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while True:
            try:
                b = os.read(self._r, 1 << 16)
            except OSError:
                return
            if not b:
                return
            self.text = (self.text + b)[-self.KEEP:]

    def close_writer(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def last(self, wait: float = 0.0) -> str:
        self._thread.join(timeout=wait)
        return self.text.decode(errors="replace")

    def close(self) -> None:
        self.close_writer()
        self._thread.join(timeout=2)
        if not self._thread.is_alive():
            try:
                os.close(self._r)
            except OSError:
                pass


def _last_words(tail) -> str:
    """The end of a kernel's standard error, for a message: ``; it said: ...``."""
    if tail is None:
        return ""
    lines = [line for line in tail.last(wait=1.0).strip().splitlines() if line.strip()]
    return f"; it said: {' | '.join(lines[-3:])[:600]}" if lines else ""


def _exit_status(process) -> str:
    """``; the kernel's process exited with status N`` where it has exited."""
    try:
        code = process.wait(timeout=2)
    except Exception:
        return ""
    return f"; the kernel's process exited with status {code}"


def _said(exc: Exception, tail) -> str:
    return f"{exc.__class__.__name__}: {str(exc)[:200]}{_last_words(tail)}"


_GONE = "(the kernel was restarted for the next check)"


def _run_check(row: dict, execute, check_timeout: int, seed: int, given: dict | None = None) -> str:
    """One check, in this process, on inputs drawn from ``seed``; the student's functions run
    in the kernel. Its message; what the check printed when it passed goes to ``row["detail"]``
    and, for a Pong run, what was replayed and played to ``row["pong"]``. ``given``: what the
    grader knows better than the notebook (whose submission it is, the folder it came in),
    which ``_grader_side`` applies."""
    import io
    name = row["name"]
    given = given if given is not None else {}
    deadline = time.monotonic() + check_timeout
    run = lambda source: execute(source, deadline)   # noqa: E731
    printed = io.StringIO()
    record: dict = {}
    try:
        objs = []
        needs = CHECKS[name][3]
        for need in needs:
            kind = ask(run, need, "kind")
            if kind.get("missing"):
                return f"{name}: define {need} (the cell that defines it did not run?)"
            home = str(kind.get("module") or "")
            if kind.get("callable") and home.split(".")[0] in REFERENCE_HOMES:
                return f"{name}: 0 points: {need} is {home}'s function, not one written in the notebook"
            if kind.get("callable"):
                objs.append(Remote(run, need))
                continue
            value = ask(run, need, "get").get("value")
            try:
                objs.append(_grader_side(need, value, given))
            except CheckFailed as exc:
                return f"{name}: 0 points: {exc}"
        if "RUN_DIR" in needs and "STUDENT_ID" in needs:
            run_dir, student = objs[needs.index("RUN_DIR")], objs[needs.index("STUDENT_ID")]
            claimed = ask(run, "STUDENT_ID", "get").get("value")
            problem = _identity_problem(Path(run_dir), student, claimed, given)
            if problem:
                record.update(replay="rejected", reason=problem, identity=student)
                return f"{name}: 0 points: {problem}"
            record["identity"] = student
        with _recording(record), contextlib.redirect_stdout(printed):
            verdict(name, objs, seed, repeatable=seed in RELEASE_SEEDS)    # can the student's release repeat it?
        detail = printed.getvalue().strip()
        if detail:
            row["detail"] = detail[:1000]
        return "passed"
    except NotImplementedError:
        return f"{name}: not implemented yet (the cell still raises NotImplementedError)"
    except CheckFailed as exc:
        return str(exc)
    except KernelError as exc:
        ename, _, evalue = str(exc).partition(": ")
        row["raised"] = (ename, evalue, None)      # the machine's fault? (_machine_fault)
        return f"{name}: raised {str(exc)[:500]}"
    except KernelGone as exc:
        if exc.reason == "timeout":
            return f"{name}: the check did not finish in {check_timeout} s (an endless loop?) {_GONE}"
        return f"{name}: the kernel died during the check (out of memory, or os._exit?) {_GONE}"
    except (ImportError, PermissionError) as exc:     # the grader's own imports or files, not the student's
        from .environment import grader_cannot_import
        raise GraderFault(grader_cannot_import(exc, whole=False)) from None
    except Exception as exc:   # the check could not use what came back (a tuple for a dict, ...)
        return (f"{name}: the check could not use what your code returned ({exc.__class__.__name__}: "
                f"{str(exc)[:200]}); compare with the docstring")
    finally:
        if record:
            row["pong"] = record


@contextlib.contextmanager
def _recording(record: dict):
    """While a check runs: what ``pong.replay.verify_run`` replayed and ``pong.student.beats_random``
    played, into ``record`` (for the feedback); the functions themselves are unchanged."""
    import pong.replay as replay_mod
    import pong.student as student_mod
    verify, beats = replay_mod.verify_run, student_mod.beats_random

    def verify_run(*args, **kwargs):
        try:
            replay = verify(*args, **kwargs)
        except Exception as exc:
            record.update(replay="rejected", reason=str(exc)[:500])
            raise
        record.update(replay="replays", generations=int(replay.generations), seconds=round(float(replay.seconds), 1),
                      chain_max_diff=float(replay.chain_max_diff),
                      episodes=[[int(g), int(m), float(a), float(b)] for g, m, a, b in replay.episodes])
        return replay

    def beats_random(*args, **kwargs):
        v = beats(*args, **kwargs)
        record.update(agent_mean=float(v.agent_mean), agent_ci=[float(x) for x in v.agent_ci],
                      random_mean=float(v.random_mean), random_ci=[float(x) for x in v.random_ci],
                      games=len(v.agent_scores), seeds=[int(v.seeds[0]), int(v.seeds[-1])],
                      beats_random=bool(v.beats_random))
        return v

    replay_mod.verify_run, student_mod.beats_random = verify_run, beats_random
    try:
        yield
    finally:
        replay_mod.verify_run, student_mod.beats_random = verify, beats


def _grader_side(need: str, value, given: dict):
    """The student's identifier is the grader's, never the notebook's (which a student could set
    to a classmate's). A run directory must lie inside the student's folder, and so must every
    file of it (a symbolic link is followed only to check where it leads); its files are copied
    into the grader's private folder, and the check reads that copy."""
    if need == "STUDENT_ID" and given.get("STUDENT_ID"):
        return given["STUDENT_ID"]
    if need == "RUN_DIR" and given.get("folder") is not None:
        return str(_copy_run(value, given))
    return value


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _copy_run(value, given: dict) -> Path:
    folder = Path(os.path.abspath(given["folder"]))
    root = Path(os.path.abspath(given.get("root") or folder))
    if not isinstance(value, (str, os.PathLike)):
        raise CheckFailed(f"RUN_DIR must be a path, got {type(value).__name__}")
    shown = str(value)[:100]
    target = Path(os.path.normpath(folder / value))
    real_root = root.resolve()
    if not _within(target, root) or not _within(target.resolve(), real_root):
        raise CheckFailed(f"RUN_DIR {shown} lies outside your submission folder ({root.name}/); submit the run "
                          "directory inside it, next to the notebook")
    if not target.is_dir():
        raise CheckFailed(f"there is no folder {shown} next to the notebook ({target.relative_to(root.parent)}): "
                          "submit the run directory your notebook trained into")
    private = Path(given.get("private") or folder)
    k = 0
    while (private / f"run{k}").exists():
        k += 1
    copy = private / f"run{k}"
    copy.mkdir(parents=True)
    from pong.replay import MAX_FILE_BYTES
    for name in RUN_FILES:
        p = target / name
        if not os.path.lexists(p):
            continue
        real = p.resolve()
        if not _within(real, real_root):
            raise CheckFailed(f"{shown}/{name} is a link to {real}, outside your submission folder: submit the "
                              "run's own files, not links to them")
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            raise CheckFailed(f"{shown}/{name} cannot be read ({exc.strerror})") from None
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise CheckFailed(f"{shown}/{name} is not a regular file")
            (copy / name).write_bytes(f.read(MAX_FILE_BYTES + 1))     # one byte too many: replay refuses it
    return copy


def _identity_problem(run_copy: Path, student: str, claimed, given: dict) -> str | None:
    """Why the run in ``run_copy`` cannot be graded as ``student``'s (its seed is another
    identifier's), said so that the reader knows what to do; None when the seeds agree or
    the configuration cannot be read (the replay then says what is wrong)."""
    from pong.student import student_seed
    try:
        seed = json.loads((run_copy / "config.json").read_text())["seed"]
        if not isinstance(seed, int) or isinstance(seed, bool):
            return None
        mine = student_seed(student)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if seed == mine:
        return None
    how = given.get("how") or "the name of the submission's folder"
    try:
        other = str(claimed).strip() if claimed is not None and student_seed(str(claimed)) == seed else None
    except ValueError:
        other = None
    graded = f"this submission is graded as '{student}' ({how})"
    why = ("each identifier trains with a seed of its own (pong.student.student_seed), so a run can be replayed "
           "only under the identifier it was trained as")
    if other:
        return (f"{graded}, but its run was trained as '{other}' (the notebook's STUDENT_ID): {why}. If '{other}' "
                f"is you, rename the submission folder to {other} or ask your instructor to grade it with "
                f"--student {other}; otherwise train again with STUDENT_ID = '{student}'")
    return (f"{graded}, but its run's seed {seed} is not the seed of '{student}' ({mine})"
            + (f" nor of the notebook's STUDENT_ID '{str(claimed)[:60]}'" if claimed not in (None, "") else "")
            + f": {why}. Train with STUDENT_ID = '{student}'; if the run was trained under another identifier "
            "that is yours, rename the submission folder to it or ask your instructor to grade it with --student "
            "THAT_ID")


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


PREIMPORT = ("numpy", "nbformat", "nbclient", "jupyter_client.manager", "jupyter_client.kernelspec", "redis",
             "classroom.check", "classroom.remote", "classroom.wire", "classroom.delegation", "classroom.sandbox",
             "classroom.redis_workers", "es.checkpoint", "es.config", "es.training", "es.evaluators", "es.seeding",
             "es.play", "es.shaping", "es.envs", "es.distributed.master", "es.distributed.server", "pong.env",
             "pong.replay", "pong.student", "pong.problem")


def _child_main(argv=None) -> None:
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
        res = _grade_here(args.pop("notebook"), args.pop("cell_timeout"), args.pop("check_timeout"), args.pop("seed"),
                          None if only is None else set(only), args.pop("student"), **args)
    except BaseException as exc:
        res = {"ungraded": f"the grader failed: {exc.__class__.__name__}: {str(exc)[:300]}"}
    with os.fdopen(fd, "wb") as f:
        f.write(json.dumps(res).encode())


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
    if not _within(real, root.resolve()):
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
                "workdir": "/submission/" + "/".join(map(_safe, [student, *path.parent.relative_to(root).parts]))}
        boot = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from classroom.grade import _child_main; _child_main()"
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
