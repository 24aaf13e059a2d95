"""The notebook's kernels, as the grading child starts them: in ``classroom.sandbox`` (or a
plain child process), in a fresh copy of the submission's folder, booted with a first cell
that proves the kernel can import the grader's probe (``KernelFactory``); an nbclient that
keeps no output of the student's cells (``notebook_client``); and who is to blame when a
kernel does not start (``GraderFault``: the machinery, ungraded; ``FolderFault``: the
submission's files, 0 points)."""
from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

from .check import CHECK_FILES
from .grade import MAX_RESULT_BYTES, PROBE_PACKAGE


def notebook_client(run, student_cells: int, cell_timeout: int, private: Path):
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


class KernelFactory:
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
        stop_kernel(client)
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



def stop_kernel(client) -> None:
    from jupyter_core.utils import run_sync
    try:
        if client.kc is not None:
            client.kc.stop_channels()
        if client.km is not None:
            run_sync(client.km.shutdown_kernel)(now=True)
    except Exception:
        pass
    client.kc = client.km = None
