"""Connecting to Redis: one clear line per set-up mistake, backoff for a lost connection. The
password comes from ``--redis-password-file``, else ``$ES_REDIS_PASSWORD``, else the URL (seen
in ``ps``); no message shows it: URLs are printed as ``user@host:port/db``.
"""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from urllib.parse import urlparse

from ..errors import ESError


def where(url: str) -> str:
    """``user@host:port/db`` of a URL, never its password (also for malformed URLs)."""
    try:
        u = urlparse(url)
        user = f"{u.username}@" if u.username else ""
        return f"{user}{u.hostname}:{u.port or 6379}{u.path or '/0'}"
    except ValueError:
        return "<malformed URL>"


def read_password(password_file=None) -> str | None:
    """The password from a file (first line) or ``$ES_REDIS_PASSWORD``; None if neither."""
    if password_file is not None:
        try:
            text = Path(password_file).read_text()
        except OSError as exc:
            raise ESError(f"cannot read --redis-password-file {password_file}: {exc.strerror or exc}") from None
        if not (first := (text.splitlines() or [""])[0].strip()):
            raise ESError(f"--redis-password-file {password_file} is empty")
        return first
    return os.environ.get("ES_REDIS_PASSWORD") or None


def _redact(text: str, url: str) -> str:
    try:
        secret = urlparse(url).password
    except ValueError:
        secret = None
    return text.replace(secret, "***") if secret else text


class RedisLink:
    """A redis-py client whose calls survive outages: retried with exponential backoff (0.1 s
    doubling to 5 s) for up to ``max_outage`` seconds (``None``: forever)."""

    def __init__(self, url: str, max_outage: float | None = 300.0, log=None, password: str | None = None):
        import redis
        self.url, self.max_outage, self.repairs = url, max_outage, 0
        self.log = log or logging.getLogger(__name__).warning
        password = password or read_password()
        try:
            u = urlparse(url)
            if u.scheme not in ("redis", "rediss"):
                raise ValueError(f"scheme {u.scheme!r} is not redis or rediss")
            u.port  # noqa: B018 -- raises ValueError for a non-numeric port
            db = (u.path or "/0").lstrip("/") or "0"
            if not db.isdigit():
                raise ValueError(f"database {db!r} is not a number")
            kwargs = {"password": password} if password else {}
            self.client = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=30,
                                               retry_on_timeout=False, **kwargs)
        except ValueError as exc:
            reason = _redact(str(exc), url)
            raise ESError(f"bad Redis URL {where(url)}: {reason} "
                          "(expected redis://[USER@]HOST:PORT/DB, or rediss:// for TLS)") from None
        self.has_password = bool(password or urlparse(url).password)
        self.call(self.client.ping)

    def call(self, fn, *args, **kwargs):
        import redis
        delay, start, warned = 0.1, None, False
        while True:
            try:
                out = fn(*args, **kwargs)
                if warned:
                    self.log(f"redis: connection to {where(self.url)} is back")
                return out
            except redis.AuthenticationError as exc:
                raise self._auth_error(str(exc)) from None
            except redis.ResponseError as exc:
                text = str(exc)
                if any(m in text for m in ("NOAUTH", "WRONGPASS", "invalid password", "invalid username")):
                    raise self._auth_error(text) from None
                if "DB index is out of range" in text or "invalid DB index" in text:
                    raise ESError(f"Redis at {where(self.url)}: database {(urlparse(self.url).path or '/0')[1:]} "
                                  "does not exist (the server's 'databases' setting is 16 by default: use /0../15)") from None
                if "NOPERM" in text:
                    raise ESError(f"Redis at {where(self.url)}: this user may not do that ({text}); the master needs "
                                  "the es-master user, workers the es-worker user (see the README's ACL lines)") from None
                raise
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                now = time.monotonic()
                start = start or now
                if self.max_outage is not None and now - start > self.max_outage:
                    raise ESError(f"lost the connection to Redis at {where(self.url)} for {self.max_outage:.0f} s "
                                  f"({exc.__class__.__name__})") from None
                if not warned:
                    self.log(f"redis: connection to {where(self.url)} failed ({exc.__class__.__name__}); "
                             "retrying with backoff")
                    warned = True
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def pipeline(self, build, transaction: bool = False, raise_on_error: bool = True) -> list:
        """``build(pipe)`` queues commands on a fresh pipeline, which is executed through ``call``.
        Each retry builds it again: redis-py empties a pipeline when ``execute`` fails, so
        retrying ``pipe.execute`` itself would send nothing and answer ``[]``."""
        def attempt():
            pipe = self.client.pipeline(transaction=transaction)
            build(pipe)
            return pipe.execute(raise_on_error=raise_on_error)
        return self.call(attempt)

    def repair(self, fn, *args, key: str, **kwargs):
        """``call``, but a key of the wrong type (someone wrote it) is deleted, logged and
        counted in ``repairs``, and the call answers None instead of stopping the run."""
        import redis
        try:
            return self.call(fn, *args, **kwargs)
        except redis.ResponseError as exc:
            self.repaired(exc, key)

    def repaired(self, exc: Exception, key: str) -> None:
        """``exc`` came from ``key`` holding the wrong type: delete it, log and count it (else re-raise)."""
        if "WRONGTYPE" not in str(exc):
            raise exc
        self.repairs += 1
        self.log(f"redis: {key} held the wrong type of value ({exc}); deleted it")
        self.call(self.client.delete, key)

    def _auth_error(self, text: str) -> ESError:
        if not self.has_password:
            return ESError(f"Redis at {where(self.url)} needs a password: set ES_REDIS_PASSWORD, or pass "
                           "--redis-password-file FILE")
        return ESError(f"Redis at {where(self.url)} refused the user or password ({text.split(':')[0].strip()}); "
                       "check ES_REDIS_PASSWORD or --redis-password-file, and the user name in the URL")

    def server_time(self) -> float:
        sec, usec = self.call(self.client.time)
        return sec + usec / 1e6
