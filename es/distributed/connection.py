"""Connecting to Redis: a clear error for a wrong password, backoff for a lost connection."""
from __future__ import annotations

import sys
import time
from urllib.parse import urlparse

from ..errors import ESError


def where(url: str) -> str:
    u = urlparse(url)
    return f"{u.hostname}:{u.port or 6379}"


class RedisLink:
    """A redis-py client whose calls survive outages: retried with exponential backoff (0.1 s
    doubling to 5 s) for up to ``max_outage`` seconds (``None``: forever)."""

    def __init__(self, url: str, max_outage: float | None = 300.0, log=None):
        import redis
        self.url, self.max_outage = url, max_outage
        self.log = log or (lambda m: print(m, file=sys.stderr))
        try:
            self.client = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=30,
                                               retry_on_timeout=False)
        except ValueError as exc:
            raise ESError(f"bad Redis URL {url!r}: {exc} (expected redis://:PASSWORD@HOST:PORT/DB or rediss://...)") from None
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
                raise ESError(f"Redis at {where(self.url)} refused the password ({exc}); "
                              "check the password in the URL (redis://:PASSWORD@HOST:PORT/DB)") from None
            except redis.ResponseError as exc:
                if "NOAUTH" in str(exc) or "WRONGPASS" in str(exc):
                    raise ESError(f"Redis at {where(self.url)} needs a password ({exc}); "
                                  "give it in the URL: redis://:PASSWORD@HOST:PORT/DB") from None
                raise
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                now = time.monotonic()
                start = start or now
                if self.max_outage is not None and now - start > self.max_outage:
                    raise ESError(f"lost the connection to Redis at {where(self.url)} for {self.max_outage:.0f} s "
                                  f"({exc.__class__.__name__}: {exc})") from None
                if not warned:
                    self.log(f"redis: connection to {where(self.url)} failed ({exc.__class__.__name__}); "
                             "retrying with backoff")
                    warned = True
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def server_time(self) -> float:
        sec, usec = self.call(self.client.time)
        return sec + usec / 1e6
