"""What the web tests share besides fixtures: the repository root, and a process without network."""
from __future__ import annotations

import contextlib
import socket
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def no_network():
    """Within it, this process reaches no host but localhost: a connection or a name lookup
    for another host raises, and is recorded (the list it yields)."""
    attempts = []
    real_connect, real_connect_ex, real_getaddrinfo = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo

    def local(address) -> bool:
        host = address[0] if isinstance(address, tuple) else address
        return not isinstance(host, str) or host in ("127.0.0.1", "::1", "localhost", "") or host.startswith("/")

    def connect(self, address):
        if self.family != socket.AF_UNIX and not local(address):
            attempts.append(address)
            raise OSError(f"no network in this test: connect to {address!r}")
        return real_connect(self, address)

    def connect_ex(self, address):
        if self.family != socket.AF_UNIX and not local(address):
            attempts.append(address)
            raise OSError(f"no network in this test: connect to {address!r}")
        return real_connect_ex(self, address)

    def getaddrinfo(host, *args, **kwargs):
        if not local((host,)):
            attempts.append(host)
            raise socket.gaierror(f"no network in this test: look up {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)
    socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo = connect, connect_ex, getaddrinfo
    try:
        yield attempts
    finally:
        socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo = real_connect, real_connect_ex, real_getaddrinfo
