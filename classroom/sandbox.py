"""The student's kernel in a sandbox: its own user, process and mount namespaces (Linux).

Two ways to build it, the same view from inside (``mode()`` says which this machine allows):

* ``namespaces`` (the grader runs as root): built here, with a uid of its own per submission;
* ``bubblewrap`` (an ordinary user, where user namespaces are allowed): built by bubblewrap
  (``bwrap``, Debian's ``bubblewrap`` package, the sandbox Flatpak uses; ``classroom.bubblewrap``)
  from the same configuration; the kernel's uid is a mapped one inside a user namespace.

What a graded kernel, and every process it starts, can reach:

* **processes**: only its own. The kernel runs in a new PID namespace under a small init that
  does nothing but reap; when the kernel exits, or the process Jupyter launched (the *outer*
  launcher, which the grader kills) dies, init dies and the Linux kernel kills everything left
  in the namespace, however it was started (``setsid``, double fork). Nothing in it can see,
  signal or trace a process outside it.
* **user**: as root, a uid of its own (``UidLease``: one per submission, never root, no
  supplementary groups, ``no_new_privs``), so it can write no file it does not own and open no
  other process's file descriptors; ``survivors(uid)`` finds anything still running under it.
  With bubblewrap, a uid inside a user namespace with no capabilities outside it, ``no_new_privs``
  and no further user namespaces; ``namespace_members`` finds anything still running in it.
* **files**: a new root (a tmpfs) holding only the system directories (``/usr``, ``/etc``, ...)
  and Python's installation read-only (with every site folder on the grader's import path),
  the support code (``support_path``, read-only, without
  ``hide``: the answer key, the instructor's sources, the tests and the git history), the
  grader's probe package read-only, a copy of the submission's folder (its working directory,
  writable), and a private ``/tmp``, ``/dev/shm`` and ``/proc``. The grader's files, its
  results, the class folder with the other students' work (``secret``: hidden even where it lies
  inside a bound folder) and every other checkout on the machine are not in it.

**Order of the mounts.** The private ``/tmp``, ``/dev``, ``/dev/shm`` and ``/proc`` are mounted
first and the binds after them, parents before children, so that no mount covers one made
before it: Python, a virtual environment or the checkout may live under ``/tmp``, ``/dev/shm``,
``/run`` or a home folder (a venv under ``/tmp`` mounted before the private ``/tmp`` would
vanish under it, and every kernel die before it answered). A bind onto one of those private folders itself is
refused (``SandboxError``): it would hand the kernel the machine's own ``/tmp``.

It shares the machine's loopback network (the kernel's channels to the grader and notebook
03's Redis are on it). Where neither way is open, ``mode()`` says why and the grader runs the
kernel as a plain child process (``isolation: none`` in every result).

``python -I -c ...launch()`` is the kernel's command line (``kernel_spec``): it reads its
configuration and Jupyter's connection file, then builds the sandbox (as root) or hands the
same configuration to bubblewrap.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import sys
from pathlib import Path

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWPID = 0x00020000, 0x04000000, 0x08000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = \
    1, 2, 4, 8, 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
UID_BASE, UID_SLOTS = 1_577_000_000, 100_000     # kernel uids: far above any login's
LOCKS = Path("/run/lock/es-course-sandbox") if Path("/run/lock").is_dir() else Path("/tmp/es-course-sandbox")
HIDE = ("solutions", "source", "tests", ".git", "classroom/references.py", "classroom/preflight.py",
        "pong/replay.py")                             # the answer key (and the preflight's known answer), history
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
PROBE_MOUNT = "/run/es-grade"                      # the grader's probe package, inside the sandbox
ENV_KEEP = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
            "ES_COURSE_FAST", "MPLBACKEND")


def _libc():
    import ctypes
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        import ctypes
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(libc, source, target, fstype, flags, data=None) -> None:
    import ctypes
    enc = lambda s: None if s is None else str(s).encode()     # noqa: E731
    _check(libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {source or fstype} on {target}")


_MODE: tuple[str, str] | None = None
PRIVATE = ("/tmp", "/dev", "/dev/shm", "/proc")     # the kernel's own; mounted before any bind
KERNEL_CONNECTION = "/run/es-kernel/connection.json"


class SandboxError(Exception):
    """The sandbox cannot be built as configured (the grader's problem, not the student's)."""


def mode() -> tuple[str, str]:
    """``("namespaces", "")`` where this process (root) can build the sandbox itself,
    ``("bubblewrap", "")`` where an ordinary user can have bubblewrap build it, else
    ``("none", why)``. Tried once per process, by building a throwaway one."""
    global _MODE
    if _MODE is None:
        _MODE = _probe_mode()
    return _MODE


def _probe_mode() -> tuple[str, str]:
    if not sys.platform.startswith("linux"):
        return "none", f"no namespaces on {sys.platform}"
    if os.geteuid() != 0:
        from . import bubblewrap
        why = bubblewrap.unavailable()
        return ("bubblewrap", "") if not why else ("none", f"the grader is not root, and {why}")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:     # pragma: no cover - child
        code = 1
        try:
            os.close(r)
            libc = _libc()
            _check(libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
            _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
            code = 0
        except Exception as exc:
            os.write(w, str(exc).encode()[:300])
        os._exit(code)
    os.close(w)
    why = os.read(r, 400).decode(errors="replace")
    os.close(r)
    _, status = os.waitpid(pid, 0)
    return ("namespaces", "") if status == 0 else ("none", f"namespaces refused ({why or 'unknown'})")


EXIT_UNSANDBOXED = 5
ALLOW_UNSANDBOXED = "ES_COURSE_ALLOW_UNSANDBOXED"      # =1: the same as --allow-unsandboxed


class NoSandbox(Exception):
    """The kernels would run without isolation and the instructor did not allow it: nothing graded."""


def unsandboxed(allow: bool = False, command: str = "grade") -> str | None:
    """Where kernels would run without isolation: the warning; None where they get a sandbox.
    Raises ``NoSandbox`` (exit status 5) unless ``allow`` (``--allow-unsandboxed``, or
    ``ES_COURSE_ALLOW_UNSANDBOXED=1``)."""
    isolation, why = mode()
    if isolation != "none":
        return None
    warning = (f"warning: no sandbox on this machine ({why}): each student's kernel would run WITHOUT isolation, as a "
               "plain process of this user that can read whatever the grader can (the answer key, the other "
               "students' work, the grader's files). Grade as root, or as a user with bubblewrap (apt install "
               "bubblewrap), to give each kernel a sandbox")
    if not (allow or os.environ.get(ALLOW_UNSANDBOXED) == "1"):
        raise NoSandbox(f"{warning}; or pass --allow-unsandboxed to {command} anyway. Nothing was graded "
                        f"(exit status {EXIT_UNSANDBOXED}).")
    return warning + " (allowed by --allow-unsandboxed)"


def describe(isolation: str) -> str:
    """What ``isolation`` (a result's field) means, in a few words."""
    return {"namespaces": "its own uid and namespaces, built by the grader as root",
            "bubblewrap": "user namespaces built by bubblewrap (an ordinary user's sandbox)",
            "none": "no sandbox: a plain child process that can read whatever the grader can"}.get(isolation, isolation)


class UidLease:
    """A uid no other grading on this machine uses while the lease is held (a lock file per uid,
    shared by every grader on the machine); ``release()`` after ``survivors`` found nothing."""

    def __init__(self):
        import fcntl
        import secrets
        LOCKS.mkdir(mode=0o700, parents=True, exist_ok=True)
        start = secrets.randbelow(UID_SLOTS)
        for k in range(UID_SLOTS):
            uid = UID_BASE + (start + k) % UID_SLOTS
            fd = os.open(LOCKS / str(uid), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            if kill_uid(uid):          # a crashed grader's leftovers that will not die: not this one
                os.close(fd)
                continue
            self.uid, self._fd = uid, fd
            return
        raise RuntimeError("no free sandbox uid")

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def survivors(uid: int) -> list[int]:
    """Live (not zombie) processes whose real, effective, saved or filesystem uid is ``uid``."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            status = (d / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        uids = fields.get("Uid", "").split()
        if str(uid) in uids and not fields.get("State", "").strip().startswith(("Z", "X")):
            out.append(int(d.name))
    return out


def kill_uid(uid: int, rounds: int = 20) -> list[int]:
    """SIGKILL every process of ``uid`` until none is left; the ones that would not die."""
    return kill_until_gone(lambda: survivors(uid), rounds)


def kill_until_gone(find, rounds: int = 20) -> list[int]:
    """SIGKILL the pids ``find()`` lists, and again, until it lists none (anything started
    meanwhile is found on the next look); the ones that would not die."""
    import time
    left = find()
    for _ in range(rounds):
        if not left:
            return []
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)
        left = find()
    return left


# ---- the grader's side: what the sandbox holds, and the kernel spec that builds it
def system_binds() -> list[str]:
    """Read-only directories every kernel needs: the system's and Python's installation, with
    every site folder on the grader's import path that lies outside it (a venv made inside
    another venv reaches that one's packages through a .pth file: the kernel must see what
    the grader sees)."""
    out = []
    sites = [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages") and os.path.isdir(p)]
    for p in [*SYSTEM, sys.prefix, sys.base_prefix, sys.exec_prefix, *sites]:
        if os.path.lexists(p) and not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    return out


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def plan_binds(binds, hidden=(), secret=()) -> tuple[list, list]:
    """The binds in the order they are mounted (parents first, so that none covers another) and
    the paths to hide: ``hidden`` plus every ``secret`` (the class folder, the grader's own
    folders) that lies inside a bound folder, at the place where the kernel would see it."""
    out = []
    for src, dst, how in binds:
        dst = os.path.normpath(dst)
        if any(_under(p, dst) for p in PRIVATE) or dst == "/":
            raise SandboxError(f"cannot give the kernel {src} at {dst}: it would cover the kernel's private {dst} "
                               "(move the installation or the checkout out of it)")
        out.append([src, dst, how])
    out.sort(key=lambda b: (b[1].count("/"), b[1]))
    for src, dst, _ in out:
        for h in hidden:
            if _under(dst, h):
                raise SandboxError(f"cannot give the kernel {src}: it lies inside {h}, which the kernel must not see "
                                   "(move it out)")
    hide = list(hidden)
    for s_ in secret:
        s_ = os.path.realpath(s_)
        for src, dst, _ in out:
            real = os.path.realpath(src)
            if _under(s_, real) and s_ != real:       # (a bound folder itself cannot be hidden from its kernel)
                seen = os.path.normpath(dst + s_[len(real):])
                if seen not in hide:
                    hide.append(seen)
    return out, hide


def compiled_folders(support_path: Path, hide=HIDE, make: bool = True) -> list[str]:
    """The ``__pycache__`` folder beside each hidden module: its ``.pyc`` is that module's code,
    as readable as the source (an instructor's checkout writes one the first time the grader
    imports the answer key). Made where missing, so that a ``.pyc`` written while a kernel runs
    lands under the empty folder that covers it, not beside it; where the grader cannot make it,
    no process of the grader's can write a ``.pyc`` there either (``make=False``: only the
    folders there now)."""
    out = []
    for h in hide:
        module = Path(support_path, h)
        if module.suffix != ".py" or not module.is_file():
            continue
        cache = module.parent / "__pycache__"
        try:
            if make and not cache.exists():
                cache.mkdir()
                os.chmod(cache, 0o755)        # as the checkout's folders are, whatever the grader's umask
        except OSError:
            pass
        if cache.is_dir() and str(cache) not in out:
            out.append(str(cache))
    return out


def kernel_spec(folder: Path, *, uid: int | None, support_path: Path, workdir_src: Path, workdir: str,
                probe_dir: Path, hide=HIDE, env: dict | None = None, extra_binds=(), backend: str = "namespaces",
                secret=()) -> str:
    """Write a Jupyter kernel spec (``folder/kernels/es-grade``) whose kernels run in a sandbox
    built by ``backend`` ("namespaces" as root, "bubblewrap" otherwise); returns the kernel
    name. ``workdir_src`` (owned by ``uid``) appears as ``workdir``; ``secret``: folders the
    kernel must not see even where they lie inside a bound one."""
    support_path = Path(support_path).resolve()
    hidden = [str(support_path / h) for h in hide if (support_path / h).exists()] + compiled_folders(support_path, hide)
    binds, hidden = plan_binds(
        [[p, p, "ro"] for p in system_binds()] + [[str(support_path), str(support_path), "ro"]]
        + [[str(probe_dir), PROBE_MOUNT, "ro"], [str(workdir_src), workdir, "rw"]] + [list(b) for b in extra_binds],
        hidden, secret)
    mpl = Path(os.environ.get("MPLCONFIGDIR") or Path.home() / ".cache" / "matplotlib")
    config = {
        "backend": backend, "uid": uid, "root": str(folder / "root"), "python": sys.executable,
        "binds": binds, "hide": hidden, "workdir": workdir, "home": str(folder / "home"),
        "mpl": str(folder / "mpl"),
        "seed_files": {f"/tmp/mpl/{p.name}": str(p) for p in (mpl.glob("fontlist-*.json") if mpl.is_dir() else [])},
        "env": {**{k: os.environ[k] for k in ENV_KEEP if k in os.environ}, **(env or {}),
                "PYTHONPATH": os.pathsep.join([str(support_path), PROBE_MOUNT]),
                "ES_GRADE_INSTALLED": str(support_path)},
    }
    for d in ("root", "home", "mpl"):
        (folder / d).mkdir(exist_ok=True)
        os.chmod(folder / d, 0o755)     # whatever the grader's umask: the kernel's side must be reachable
    (folder / "sandbox.json").write_text(json.dumps(config))
    spec = folder / "kernels" / "es-grade"
    spec.mkdir(parents=True, exist_ok=True)
    root = str(Path(__file__).resolve().parents[1])
    boot = f"import sys; sys.path.insert(0, {root!r}); from classroom.sandbox import launch; launch()"
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-I", "-c", boot, str(folder / "sandbox.json"), "{connection_file}"],
        "display_name": "es-course sandbox", "language": "python", "interrupt_mode": "message"}))
    return "es-grade"


def kernel_env(config) -> dict:
    """The kernel's whole environment: nothing of the grader's but ``config["env"]``."""
    return {**config["env"], "HOME": "/tmp/home", "USER": "student", "LOGNAME": "student", "TMPDIR": "/tmp",
            "PATH": os.pathsep.join([os.path.dirname(config["python"]), "/usr/local/bin", "/usr/bin", "/bin"]),
            "MPLCONFIGDIR": "/tmp/mpl", "IPYTHONDIR": "/tmp/home/.ipython", "JUPYTER_RUNTIME_DIR": "/tmp/home/.jupyter",
            "JUPYTER_CONFIG_DIR": "/tmp/home/.jupyter", "JUPYTER_DATA_DIR": "/tmp/home/.jupyter"}


# ---- which processes belong to a sandbox: by uid (as root) or by PID namespace (bubblewrap)
def pid_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state, ppid, pgrp, session,
    ...); None when the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    fields = stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def process_table() -> dict[int, list[str]]:
    """Every process's ``stat_fields``, by pid."""
    table = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            fields = stat_fields(int(d.name))
            if fields is not None and len(fields) > 3:
                table[int(d.name)] = fields
    return table


def process_tree(pid: int, table: dict[int, list[str]] | None = None) -> set[int]:
    """``pid`` and every process below it."""
    children: dict[int, list[int]] = {}
    for p, fields in (process_table() if table is None else table).items():
        children.setdefault(int(fields[1]), []).append(p)
    out, todo = {pid}, [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def namespaces_below(pid: int) -> set[str]:
    """The PID namespaces, other than this process's, of ``pid`` and the processes below it."""
    return {pid_namespace(p) for p in process_tree(pid)} - {pid_namespace(os.getpid()), None}


def namespace_members(namespaces) -> list[int]:
    """Live processes in any of the PID ``namespaces``."""
    namespaces = set(namespaces)
    if not namespaces:
        return []
    return [int(d.name) for d in Path("/proc").iterdir()
            if d.name.isdigit() and pid_namespace(int(d.name)) in namespaces and alive(int(d.name))]


def kill_namespaces(namespaces, rounds: int = 20) -> list[int]:
    """SIGKILL every process in the PID ``namespaces`` until none is left; the ones that would not die."""
    return kill_until_gone(lambda: namespace_members(namespaces), rounds)


# ---- the launcher: runs as root, as the kernel's command line
def launch(argv=None) -> None:   # pragma: no cover - runs in the launched process (tests drive it)
    argv = sys.argv[1:] if argv is None else argv
    config = json.loads(Path(argv[0]).read_text())
    extra = argv[2:]
    if config.get("backend") == "bubblewrap":
        from . import bubblewrap
        bubblewrap.exec_kernel(config, argv[1], extra, env=kernel_env(config), connection=KERNEL_CONNECTION,
                               system=SYSTEM)      # does not return
    connection = Path(argv[1]).read_text()
    libc = _libc()
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)    # dies with the grader's child
    _check(libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
    alive_r, alive_w = os.pipe()
    init = os.fork()
    if init == 0:
        os.close(alive_w)
        try:
            _init(libc, config, connection, extra, alive_r)
        except BaseException:
            import traceback
            traceback.print_exc()       # to the grader's stderr pipe: what the preflight shows
        finally:
            os._exit(70)
    os.close(alive_r)
    for sig in (signal.SIGINT, signal.SIGTERM):    # passed on to the sandbox (SIGKILL ends it via init's death signal)
        signal.signal(sig, lambda s, f: os.kill(init, signal.SIGKILL))
    while True:
        try:
            _, status = os.waitpid(init, 0)
            break
        except InterruptedError:
            continue
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _init(libc, config, connection, extra, alive_r) -> None:   # pragma: no cover - PID 1 of the sandbox
    import select
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if select.select([alive_r], [], [], 0)[0]:        # the launcher died before the line above
        os._exit(71)
    root, uid = config["root"], int(config["uid"])
    os.umask(0o022)             # whatever the grader's: every folder made on the way must be reachable
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
    _mount(libc, "tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=16m")
    _private_mounts(libc, root)            # first: a bind made before them could vanish under them
    for src, dst, how in config["binds"]:  # parents before children (plan_binds)
        _bind(libc, src, root + dst, how == "ro")
    for path in config["hide"]:                     # an empty, read-only folder in its place
        if os.path.isdir(root + path):
            _mount(libc, "tmpfs", root + path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k,mode=555")
        elif os.path.exists(root + path):
            _mount(libc, "/dev/null", root + path, None, MS_BIND)
    os.makedirs(os.path.dirname(root + KERNEL_CONNECTION), exist_ok=True)
    Path(root + KERNEL_CONNECTION).write_text(connection)
    os.chmod(root + KERNEL_CONNECTION, 0o444)
    home = root + "/tmp/home"
    for d in (home, root + "/tmp/mpl"):
        os.makedirs(d, exist_ok=True)
        os.chown(d, uid, uid)
    for dst, src in config.get("seed_files", {}).items():
        try:
            shutil.copyfile(src, root + dst)
            os.chown(root + dst, uid, uid)
        except OSError:
            pass
    os.chroot(root)
    os.chdir("/")
    env = kernel_env(config)
    kernel = os.fork()
    if kernel == 0:
        try:
            os.closerange(3, 65536)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            import resource
            resource.setrlimit(resource.RLIMIT_NPROC, (1024, 1024))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            os.umask(0o022)
            os.chdir(config["workdir"])
            os.execve(config["python"], [config["python"], "-m", "ipykernel_launcher", "-f",
                                         KERNEL_CONNECTION, *extra], env)
        except BaseException as exc:
            os.write(2, f"the sandbox could not start the kernel {config['python']}: {exc}\n".encode())
        finally:
            os._exit(72)
    os.closerange(3, 65536)
    while True:                                     # reap everything; leave with the kernel
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(0)
        except InterruptedError:
            continue
        if pid == kernel:
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _private_mounts(libc, root: str) -> None:   # pragma: no cover - in the sandbox's init
    """The kernel's own /tmp, /dev (a few device nodes), /dev/shm and /proc."""
    for d, mode_ in (("/tmp", "1777"), ("/dev", "755")):
        os.makedirs(root + d, exist_ok=True)
        _mount(libc, "tmpfs", root + d, "tmpfs", MS_NOSUID | (MS_NODEV if d == "/tmp" else 0),
               f"mode={mode_},size={'1g' if d == '/tmp' else '64k'}")
    for node in ("null", "zero", "full", "random", "urandom"):
        Path(root + "/dev/" + node).touch()
        _mount(libc, "/dev/" + node, root + "/dev/" + node, None, MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, root + "/dev/" + name)
    os.makedirs(root + "/dev/shm")
    _mount(libc, "tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=1g")
    os.makedirs(root + "/proc", exist_ok=True)
    _mount(libc, "proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _bind(libc, src: str, dst: str, read_only: bool) -> None:
    if os.path.islink(src) and src in SYSTEM:       # /bin -> usr/bin on merged-/usr systems
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        os.symlink(os.readlink(src), dst)
        return
    if os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        Path(dst).touch()
    _mount(libc, src, dst, None, MS_BIND | MS_REC)
    flags = MS_BIND | MS_REMOUNT | MS_NOSUID | (MS_RDONLY if read_only else 0)
    try:
        _mount(libc, None, dst, None, flags | MS_NODEV)
    except OSError:     # a mount that must keep its own flags (e.g. /dev-like): read-only is what matters
        _mount(libc, None, dst, None, flags)


def owned_copy(src: Path, dst: Path, uid: int | None, max_file: int = 64 << 20, max_total: int = 512 << 20) -> list[str]:
    """Copy the folder ``src`` to ``dst`` for the kernel (symbolic links as links, never
    followed; files over ``max_file`` and beyond ``max_total`` left out, and listed), owned by
    ``uid``."""
    left_out, total = [], 0
    dst.mkdir(parents=True, exist_ok=True)
    for dirpath, dirnames, filenames in os.walk(src, followlinks=False):
        rel = Path(dirpath).relative_to(src)
        dirnames[:] = [d for d in dirnames if d not in (".ipynb_checkpoints", "__pycache__")]
        (dst / rel).mkdir(exist_ok=True)
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            s, t = Path(dirpath) / name, dst / rel / name
            st = os.lstat(s)
            if stat.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(s), t)
            elif stat.S_ISREG(st.st_mode):
                if st.st_size > max_file or total + st.st_size > max_total:
                    left_out.append(str(rel / name))
                    continue
                total += st.st_size
                shutil.copyfile(s, t, follow_symlinks=False)
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
    if uid is not None:
        for dirpath, dirnames, filenames in os.walk(dst):
            for name in [dirpath] + [os.path.join(dirpath, n) for n in dirnames + filenames]:
                os.lchown(name, uid, uid)
    return left_out
