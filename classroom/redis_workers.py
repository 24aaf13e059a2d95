"""Workers for notebook 03's ``gather``: the reference protocol cut to its core, on a real Redis.

The course protocol (the course repository's ``es.distributed.protocol`` without run ids, nonces, digests and roles):

* ``es:jobs`` (list): one JSON job per chunk, ``{"g": generation, "a": first, "b": end}``;
  the chunk's name is ``"a:b"``.
* A worker pops a job (``BLPOP``), sets its lease ``HSET es:leases a:b <time.time()>``, renews it
  while it works, then pushes ``encode_result(g, a, returns,
  lengths)`` onto ``es:results`` and deletes its lease.

``FaultyWorkers`` serves a gather the way a real cluster fails it: before the gather starts,
a result of the previous generation (for a chunk no worker fails) is waiting, and the workers
only start taking jobs after 1.5 leases (so a master that ignores what is still queued hands
it out twice); one worker dies holding a chunk after writing one lease; one dies before
writing any; one chunk's result arrives twice, the second copy with different numbers;
another chunk's worker is slow but alive and keeps renewing its lease; just before one more
chunk's result, and again just after it, comes a result for a chunk not in the bounds that
starts where it does (one member longer or shorter, inside the population), so that a master
that stores it overwrites real results, and one that matches a result to its chunk by its
first member alone takes it for the real one. A chunk handed out again is taken at once by
an idle worker that writes its lease only ``LATE_LEASE`` leases after taking it (a real
worker's moment between BLPOP and HSET, stretched): a master that keeps a requeued chunk's old
queue time sees it lost again at once and pushes it over and over. And a moment after the master's
first ``BLPOP`` of results, a fourth worker takes the stale chunk's job and writes its lease only
``LATE_LEASE`` leases later: a master whose ``queued_at`` does not start at ``time.time()`` (another
clock, or 0) sees it lost at once and pushes it again. A job without the fields section 4's
workers read (``"g"``, this generation, ``"a"`` and ``"b"``) is recorded. Every member's true return
is known, so the check compares exactly; it counts how often each chunk was handed out, and
(``monitor_url``: a user allowed MONITOR) records the server's time of every push of a job,
so that a chunk pushed again sooner than ``lease_seconds`` after its last push is seen, and the
time of the master's first ``BLPOP`` of ``es:results``.
"""
from __future__ import annotations

import json
import threading
import time

import numpy as np

JOBS, RESULTS, LEASES = "es:jobs", "es:results", "es:leases"
LATE_LEASE = 0.6      # leases: how long a worker that took a requeued chunk waits to write its lease


def name(a: int, b: int) -> str:
    return f"{a}:{b}"

class FaultyWorkers:
    def __init__(self, url: str, rng: np.random.Generator, lease_seconds: float = 1.0, encode=None,
                 monitor_url: str | None = None):
        """``encode(generation, first, returns, lengths) -> bytes``: the payload the workers push
        (the grader's answer key, or in a student release the student's own encode_result)."""
        import redis
        self.encode = encode
        self.r = redis.Redis.from_url(url)
        self.monitor_url = monitor_url
        self.pushes: dict[str, list[float]] = {}     # chunk -> server times the master pushed it
        self.lease = float(lease_seconds)
        population = int(rng.integers(24, 48))
        cuts = np.sort(rng.choice(np.arange(2, population - 1), 5, replace=False))
        edges = [0, *map(int, cuts), population]
        self.bounds = [(a, b) for a, b in zip(edges[:-1], edges[1:]) if b > a]
        self.generation = int(rng.integers(5, 10_000))
        self.returns = np.round(rng.standard_normal(population) * 50, 3)
        self.lengths = rng.integers(10, 500, population).astype(np.int64)
        picks = rng.permutation(len(self.bounds))
        # chunk index -> fault; the others are answered at once
        self.fault = {int(picks[0]): "dies_with_lease", int(picks[1]): "dies_without_lease",
                      int(picks[2]): "duplicate", int(picks[3]): "slow", int(picks[5]): "overlap"}
        self.stale = int(picks[4])       # its chunk, answered at once, has a leftover of the last generation
        a, b = self.bounds[int(picks[5])]
        # not in bounds, with the "overlap" chunk's first member (a last chunk has 2 members or more)
        self.unknown = (a, b + 1) if b < population else (a, b - 1)
        self.handed_out = {name(a, b): 0 for a, b in self.bounds}
        # What the master did wrong, as the workers saw it. A chunk requeued between its result
        # and the master reading that result is a harmless duplicate, and is not counted.
        self.working: dict[str, bool] = {}
        self.requeued_live: set[str] = set()
        self.queued_twice: set[str] = set()
        self._stop = threading.Event()
        self._turn = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.errors: list[str] = []
        self.bad_jobs: list[str] = []       # jobs pushed without "g" (this generation), "a" and "b"
        self.gathering: float | None = None     # server time of the master's first BLPOP of es:results
        self._gathering = threading.Event()

    def start(self) -> "FaultyWorkers":
        r = self.r
        r.delete(JOBS, RESULTS, LEASES)
        a, b = self.bounds[self.stale]
        stale = self.returns[a:b] + 1000.0
        r.rpush(RESULTS, self.encode(self.generation - 1, a, stale, self.lengths[a:b]))   # a leftover
        r.rpush(JOBS, *[json.dumps({"g": self.generation, "a": a, "b": b}) for a, b in self.bounds])
        if self.monitor_url:
            ready = threading.Event()
            # not joined by stop(): it ends when the server stops, before the check reads ``pushes``
            threading.Thread(target=self._monitor, args=(ready,), daemon=True).start()
            ready.wait(5)
        for target in (self._work, self._work, self._work, self._early):
            t = threading.Thread(target=target, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def _answer(self, a, b, returns=None):
        returns = self.returns[a:b] if returns is None else returns
        pipe = self.r.pipeline()
        pipe.rpush(RESULTS, self.encode(self.generation, a, returns, self.lengths[a:b]))
        pipe.hdel(LEASES, name(a, b))
        pipe.execute()

    def _rogue(self, r):
        u, v = self.unknown
        r.rpush(RESULTS, self.encode(self.generation, u, self.returns[u:v] + 500.0, self.lengths[u:v]))

    def _take(self, r):
        """The next job, with its lease written in the same transaction that takes it out of the
        queue (the three workers take turns), so the master never sees a live chunk that is
        neither queued nor leased; a real worker has that moment between BLPOP and HSET, and a
        master may requeue it then (a harmless duplicate) but should not be graded on it. The
        queue is read in that transaction too: a copy pushed a moment after the pop (by a master
        that rightly saw the chunk gone and unleased) is not a copy that waited beside it."""
        with self._turn:
            raw = r.lindex(JOBS, 0)      # only workers pop, and they take turns: still the head below
            if raw is None:
                return None
            try:
                job = json.loads(raw)
                a, b = int(job["a"]), int(job["b"])
            except (ValueError, KeyError, TypeError):
                job = None
            if not isinstance(job, dict) or job.get("g") != self.generation:
                self.bad_jobs.append(raw.decode(errors="replace"))     # section 4's workers cannot run it
            if job is None or (a, b) not in self.bounds:
                r.lpop(JOBS)                   # dropped; the check names it
                return None
            chunk = name(a, b)
            self.handed_out[chunk] += 1
            k = self.bounds.index((a, b))
            # a requeued chunk succeeds, with its lease written late
            fault = self.fault.get(k) if self.handed_out[chunk] == 1 else "late_lease"
            if self.working.get(chunk):
                self.requeued_live.add(chunk)      # its worker is alive and renewing the lease
            pipe = r.pipeline(transaction=True)
            if fault not in ("dies_without_lease", "late_lease"):
                pipe.hset(LEASES, chunk, repr(time.time()))
            pipe.lpop(JOBS).lrange(JOBS, 0, -1)
            left = pipe.execute()[-1]
            if any(name(j["a"], j["b"]) == chunk for j in map(json.loads, left)):
                self.queued_twice.add(chunk)       # pushed again while a copy still waited
            # live: its lease was written as it left the queue (a late lease is a moment where
            # the chunk rightly looks lost, and a copy handed out then is not a fault)
            self.working[chunk] = fault is None or fault in ("slow", "duplicate", "overlap")
            return a, b, fault

    def _monitor(self, ready: threading.Event):
        """Every push of a job from now on (only the master pushes them), with the server's time."""
        import re
        import redis
        try:
            with redis.Redis.from_url(self.monitor_url).monitor() as m:
                ready.set()
                for cmd in m.listen():
                    if self._stop.is_set():
                        return
                    text = cmd.get("command", "")
                    head = text.split(" ", 2)
                    if self.gathering is None and len(head) >= 2 and head[0].upper() == "BLPOP" and head[1] == RESULTS:
                        self.gathering = float(cmd["time"])
                        self._gathering.set()
                    if len(head) == 3 and head[0].upper() == "RPUSH" and head[1] == JOBS:
                        for job in re.findall(r"\{[^{}]*\}", text):
                            try:
                                j = json.loads(job)
                                self.pushes.setdefault(name(int(j["a"]), int(j["b"])), []).append(float(cmd["time"]))
                            except (ValueError, KeyError, TypeError):
                                pass
        except Exception as exc:   # the server went away at the end of the check
            ready.set()
            if not self._stop.is_set():
                self.errors.append(f"monitor: {exc.__class__.__name__}: {exc}")

    def pushed_early(self) -> dict[str, float]:
        """chunk -> the shortest time between two of the master's pushes of it, where that is
        less than half a lease (a master that sets ``queued_at`` at each push waits a lease)."""
        out = {}
        for chunk, times in self.pushes.items():
            gaps = np.diff(sorted(times))
            if len(gaps) and gaps.min() < 0.5 * self.lease:
                out[chunk] = float(gaps.min())
        return out

    def pushed_at_start(self) -> tuple[str, float] | None:
        """(chunk, seconds) for the master's first push of a job, when it came less than half a lease
        after its first BLPOP of es:results: before any chunk was queued lease_seconds ago."""
        first = min(((t, chunk) for chunk, times in self.pushes.items() for t in times), default=None)
        if self.gathering is not None and first is not None and first[0] - self.gathering < 0.5 * self.lease:
            return first[1], first[0] - self.gathering
        return None

    def _early(self):
        """A moment after the master's first BLPOP (or a lease after the start, without a monitor),
        takes the stale chunk's job, writes its lease LATE_LEASE leases later, then answers."""
        import redis
        r = redis.Redis(connection_pool=self.r.connection_pool)
        a, b = self.bounds[self.stale]
        try:
            self._gathering.wait(self.lease)
            if self._stop.wait(0.05 * self.lease):
                return
            with self._turn:
                if not r.lrem(JOBS, 1, json.dumps({"g": self.generation, "a": a, "b": b})):
                    return                     # taken already
                self.handed_out[name(a, b)] += 1
                self.working[name(a, b)] = False
            if self._stop.wait(LATE_LEASE * self.lease):
                return
            r.hset(LEASES, name(a, b), repr(time.time()))
            self._answer(a, b)
        except Exception as exc:   # the server went away at the end of the check
            if not self._stop.is_set():
                self.errors.append(f"{exc.__class__.__name__}: {exc}")

    def _work(self):
        import redis
        r = redis.Redis(connection_pool=self.r.connection_pool)
        try:
            self._stop.wait(1.5 * self.lease)    # busy elsewhere: the jobs wait in the queue
            while not self._stop.is_set():
                taken = self._take(r)
                if taken is None:
                    time.sleep(0.02)
                    continue
                a, b, fault = taken
                if fault in ("dies_without_lease", "dies_with_lease"):
                    continue
                if fault == "late_lease":    # taken, not yet leased: to the master it looks lost
                    if self._stop.wait(LATE_LEASE * self.lease):
                        return
                    r.hset(LEASES, name(a, b), repr(time.time()))
                if fault == "slow":          # alive: renews its lease for 2.5 leases, then answers
                    end = time.time() + 2.5 * self.lease
                    while time.time() < end and not self._stop.is_set():
                        r.hset(LEASES, name(a, b), repr(time.time()))
                        time.sleep(self.lease / 10)
                if fault == "overlap":       # a chunk not in bounds, with this one's first member: before its result
                    self._rogue(r)
                self._answer(a, b)
                self.working[name(a, b)] = False
                if fault == "duplicate":     # the same chunk again, from a worker that thought it was lost
                    self._answer(a, b, self.returns[a:b] - 7.0)
                if fault == "overlap":       # and again after it
                    self._rogue(r)
        except Exception as exc:   # the server went away at the end of the check
            if not self._stop.is_set():
                self.errors.append(f"{exc.__class__.__name__}: {exc}")

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(timeout=2)
        try:
            self.r.close()
        except Exception:
            pass

    def chunk_of(self, fault: str) -> str:
        k = next(k for k, f in self.fault.items() if f == fault)
        return name(*self.bounds[k])
