"""One generation's jobs on Redis and the leases on them. A chunk is queued again when its
lease is silent for ``lease_seconds``, and ``deadline`` seconds after it was queued whatever
its heartbeats (one from the future, or malformed, counts as none). An altered or lost task
record is published again under a new nonce (results for the old one are stale).
"""
from __future__ import annotations

import secrets

import numpy as np

from . import protocol as P


def chunks_to_requeue(queued_at: dict, in_queue: set, leases: dict, now: float, lease_seconds: float,
                      deadline: float | None = None) -> set:
    """The pending chunks to hand out again: not waiting in the queue, queued at least
    ``lease_seconds`` ago (a worker may have popped it and not written its lease yet), and with
    no heartbeat (``leases``: chunk -> last heartbeat time) in the last ``lease_seconds``; or,
    with a ``deadline``, queued ``deadline`` seconds ago or more whatever its heartbeats say."""
    return {c for c, t in queued_at.items()
            if c not in in_queue and now - t >= lease_seconds
            and (now - leases.get(c, -np.inf) >= lease_seconds or (deadline is not None and now - t >= deadline))}


class Board:
    """``open`` publishes a generation; ``requeue``, ``requeue_expired``, ``republish`` hand chunks out again."""

    def __init__(self, link, run: str, spec: dict, lease_seconds: float, log, platform: str = "", verify: bool = True):
        self.link, self.run, self.spec, self.lease_seconds, self.log = link, run, spec, lease_seconds, log
        self.platform, self.verify = platform, verify      # the master's, published with each task
        self.waiting, self.running = 0, {}        # as of the last requeue_expired

    def open(self, task, seeds, center_seeds, cap: int, bounds, order=None, center_here: bool = False) -> None:
        """Publish a generation: its task record and one job per chunk of ``bounds``, queued in
        ``order`` (indices into ``bounds``; default as listed). The last chunk plays the center,
        unless the master plays it (``center_here``)."""
        g = task.generation
        self.task, self.seeds, self.center_seeds, self.cap = task, seeds, center_seeds, cap
        self.chunk_of = {a: (a, b, P.job_id({"g": g, "a": a, "b": b})) for a, b in bounds}   # first member -> chunk
        self.members = {jid: (a, b) for a, b, jid in self.chunk_of.values()}                  # chunk -> its members
        self.waiting, self.running = 0, {}   # the last generation's leases say nothing of this one
        self.center_chunk = None if center_here else self.chunk_of[bounds[-1][0]][2]
        self.said: set = set()
        self._stamp()
        ids = [self.chunk_of[bounds[i][0]][2] for i in (order if order is not None else range(len(bounds)))]
        now = self._publish([self.jobs[j] for j in ids], fresh=True)
        self.queued_at = dict.fromkeys(self.jobs, now)

    def _stamp(self) -> None:
        self.nonce = secrets.token_hex(8)
        self.record = P.encode_task(self.task, self.spec, self.seeds, self.center_seeds, run=self.run, nonce=self.nonce,
                                    max_length=self.cap, lease_seconds=self.lease_seconds, platform=self.platform,
                                    verify=self.verify)
        self.digest = P.task_digest(self.record)
        self.jobs = {jid: P.encode_job(self.run, self.nonce, self.task.generation, a, b, jid == self.center_chunk)
                     for a, b, jid in self.chunk_of.values()}

    def _publish(self, job_values, fresh: bool) -> float:
        """The task record and the jobs in one MULTI/EXEC; a fresh generation also clears
        leftover leases and results, whatever their type. Returns the server's time of it."""
        def write(pipe):
            pipe.multi()
            pipe.delete(P.TASK, P.JOBS, *((P.LEASES, P.RESULTS) if fresh else ()))
            pipe.hset(P.TASK, mapping=self.record)
            if job_values:
                pipe.rpush(P.JOBS, *job_values)
            pipe.time()
        sec, usec = self.link.call(self.link.client.transaction, write)[-1]
        return sec + usec / 1e6

    def republish(self, done, why: str) -> int:
        """Publish the generation again under a new nonce, with the jobs of its pending chunks."""
        self.link.repairs += 1
        self._stamp()
        pending = [j for j in self.jobs if j not in done]
        self.log(f"redis: {why} (generation {self.task.generation}); publishing it again with a new nonce")
        now = self._publish([self.jobs[j] for j in pending], fresh=False)
        self.queued_at.update(dict.fromkeys(pending, now))
        return len(pending)

    def requeue(self, jid: str, why: str, front: bool = False) -> int:
        """Queue chunk ``jid`` again: at the back, or at the ``front`` (the next worker free takes it)."""
        def build(pipe):
            (pipe.lpush if front else pipe.rpush)(P.JOBS, self.jobs[jid])
            pipe.time()
        got = self.link.repair(self.link.pipeline, build, key=P.JOBS)
        sec, usec = got[-1] if got else self.link.call(self.link.client.time)
        self.queued_at[jid] = sec + usec / 1e6
        self.log(f"redis: requeued chunk {jid} ({why})")
        return 1

    def task_altered(self) -> bool:
        """Does the stored task record differ from what this master wrote?"""
        stored = self.link.repair(self.link.client.hgetall, P.TASK, key=P.TASK) or {}
        stored = {k.decode(errors="replace"): v for k, v in stored.items()}
        return not all(stored.get(k) == (v.encode() if isinstance(v, str) else v) for k, v in self.record.items())

    def leases(self, pending, now: float, raw) -> dict:
        """chunk -> (last heartbeat, worker) for this generation's well-formed leases, from
        ``raw``: the values of ``pending`` in es:leases (``_look``; None: the hash was repaired)."""
        out = {}
        for jid, value in zip(pending, raw or []):
            if value is None:
                continue
            try:
                worker, nonce, t = P.decode_lease(value)
            except P.BadPayload as exc:
                if (jid, value) not in self.said:
                    self.said.add((jid, value))
                    self.log(f"redis: dropped the lease on chunk {jid}: {exc}")
                continue
            if nonce == self.nonce and t <= now + self.lease_seconds:   # else another generation's, or from the future
                out[jid] = (t, worker)
        return out

    def _look(self, pending):
        """The task record's head, the server's time, the pending chunks' leases and the job
        list, in one round trip; a key of the wrong type is repaired and reads as missing."""
        import redis
        out = self.link.pipeline(lambda pipe: pipe.hmget(P.TASK, "run", "nonce", "generation", "sha256").time()
                                 .hmget(P.LEASES, pending).lrange(P.JOBS, 0, -1), raise_on_error=False)
        for i, key in ((0, P.TASK), (2, P.LEASES), (3, P.JOBS)):
            if isinstance(out[i], redis.ResponseError):
                self.link.repaired(out[i], key)
                out[i] = None
        return out

    def requeue_expired(self, done, deadline: float) -> int:
        record = self.record
        pending = [j for j in self.jobs if j not in done]
        if not pending:
            return 0
        head, (sec, usec), raw_leases, queued = self._look(pending)
        if head is None or [v.decode(errors="replace") if v is not None else None for v in head] != \
                [record["run"], record["nonce"], record["generation"], record["sha256"]]:
            self.waiting, self.running = 0, {}   # the leases were under the old nonce: none holds now
            return self.republish(done, "the task record is gone or altered")
        now = sec + usec / 1e6
        leases = self.leases(pending, now, raw_leases)
        if queued is None:   # the job list was of the wrong type: it is gone, queue every pending chunk
            self.queued_at.update(dict.fromkeys(pending, -np.inf))
        self.waiting = len(queued or ())          # jobs in the list, for the master's backups
        self.running = {j: w for j, (_, w) in leases.items()}     # chunk -> worker holding a live lease
        queued = set(queued or ())
        in_queue = {j for j in pending if self.jobs[j].encode() in queued}
        due = chunks_to_requeue({j: self.queued_at[j] for j in pending}, in_queue,
                                {j: t for j, (t, _) in leases.items()}, now, self.lease_seconds, deadline)
        for jid in (j for j in pending if j in due):
            t, holder = leases.get(jid, (-np.inf, None))
            self.requeue(jid, "no worker holds a lease on it" if holder is None else
                         f"worker {holder} silent for {now - t:.1f} s" if now - t >= self.lease_seconds else
                         f"past its {deadline:.0f} s deadline though worker {holder} still sends heartbeats")
        return len(due)
