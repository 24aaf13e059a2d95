"""The master side: hand out one generation as leased chunk jobs and gather the results."""
from __future__ import annotations

import json
import sys
import time

import numpy as np

from ..errors import ESError
from ..evaluators import GenerationResult
from ..parallel import EvaluationError, chunk_bounds
from . import protocol as P
from .connection import RedisLink


def chunks_to_requeue(queued_at: dict, in_queue: set, leases: dict, now: float, lease_seconds: float) -> set:
    """The pending chunks to hand out again: not waiting in the queue, queued at least
    ``lease_seconds`` ago (a worker may have popped it and not written its lease yet), and with
    no heartbeat (``leases``: chunk -> last heartbeat time) in the last ``lease_seconds``."""
    return {c for c, t in queued_at.items()
            if c not in in_queue and now - t >= lease_seconds and now - leases.get(c, -np.inf) >= lease_seconds}


class RedisEvaluator:
    name = "redis"

    def __init__(self, problem, url: str, chunks: int = 8, lease_seconds: float = 10.0, max_outage: float = 300.0,
                 log=None):
        spec = problem.spec()
        if spec.get("kind") not in ("env", "pong"):
            raise ESError("--redis needs an environment problem: a Python function would have to be pickled to "
                          "travel, and nothing that crosses the network is pickled")
        self.spec, self.chunks, self.lease_seconds = spec, int(chunks), float(lease_seconds)
        self.log = log or (lambda m: print(m, file=sys.stderr))
        self.link = RedisLink(url, max_outage=max_outage, log=self.log)
        self.dropped = 0

    def _warn(self, msg):
        self.dropped += 1
        self.log(f"redis: dropped a result: {msg}")

    def evaluate(self, task, seeds, center_seeds) -> GenerationResult:
        r, call = self.link.client, self.link.call
        g, pop = task.generation, task.population
        bounds = chunk_bounds(pop, self.chunks)
        jobs = {P.job_id({"g": g, "a": a, "b": b}): P.encode_job(g, a, b, i == len(bounds) - 1)
                for i, (a, b) in enumerate(bounds)}
        record = P.encode_task(task, self.spec, seeds, center_seeds)
        record["lease_seconds"] = repr(self.lease_seconds)
        self._publish(record, jobs.values())
        now = self.link.server_time()
        queued_at = dict.fromkeys(jobs, now)
        chunk_of = {a: (a, b, P.job_id({"g": g, "a": a, "b": b})) for a, b in bounds}
        returns = np.full(pop, np.nan)
        lengths = np.zeros(pop, dtype=np.int64)
        done: set = set()
        center = None
        workers: set = set()
        requeued, last_check, last_news, waited_since = 0, 0.0, time.monotonic(), time.monotonic()
        while len(done) < len(jobs):
            item = call(r.blpop, P.RESULTS, timeout=0.5)
            if item is not None:
                try:
                    res = P.decode_result(item[1])
                except P.BadPayload as exc:
                    self._warn(str(exc))
                    continue
                if res["generation"] != g:
                    self._warn(f"result for generation {res['generation']} from worker {res['worker']} "
                               f"while on generation {g}")
                    continue
                if res["kind"] == 1:
                    raise EvaluationError(f"worker {res['worker']} could not evaluate members {res['first']}.."
                                          f"{res['first'] + res['count'] - 1} of generation {g}: {res['message']}")
                chunk = chunk_of.get(res["first"])
                if chunk is None or chunk[1] - chunk[0] != res["count"]:
                    self._warn(f"members {res['first']}+{res['count']} are not a chunk of generation {g}")
                    continue
                a, b, jid = chunk
                if jid in done:
                    continue  # a duplicate from a requeued chunk: (generation, member) already in
                is_center_chunk = json.loads(jobs[jid])["c"] == 1
                if is_center_chunk != (res["center"] is not None):
                    self._warn(f"chunk {jid} {'lacks' if is_center_chunk else 'has'} a center return")
                    continue
                returns[a:b], lengths[a:b] = res["returns"], res["lengths"]
                if res["center"] is not None:
                    center = res["center"]
                done.add(jid)
                workers.add(res["worker"])
                last_news = time.monotonic()
            if time.monotonic() - last_check > min(1.0, self.lease_seconds / 4):
                last_check = time.monotonic()
                requeued += self._requeue_expired(g, record, jobs, done, queued_at)
            if time.monotonic() - last_news > 30 and time.monotonic() - waited_since > 30:
                waited_since = time.monotonic()
                leases = call(r.hlen, P.LEASES)
                self.log(f"redis: generation {g}: {len(jobs) - len(done)} of {len(jobs)} chunks pending, "
                         f"{leases} being worked on; start workers with: python -m es worker --redis URL")
        info = {"workers": len(workers), "requeued": requeued, "dropped": self.dropped}
        self.dropped = 0
        return GenerationResult(returns, lengths, center[0] if center else None, center[1] if center else 0, info)

    def _publish(self, record: dict, job_values) -> None:
        """The task record and its jobs in one MULTI/EXEC, with no jobs or leases left over."""
        def write(pipe):
            pipe.multi()
            pipe.delete(P.JOBS, P.LEASES)
            pipe.hset(P.TASK, mapping=record)
            pipe.rpush(P.JOBS, *job_values)
        self.link.call(self.link.client.transaction, write)

    def _requeue_expired(self, g, record, jobs, done, queued_at) -> int:
        r, call = self.link.client, self.link.call
        pending = [j for j in jobs if j not in done]
        if not pending:
            return 0
        current = call(r.hget, P.TASK, "generation")
        if current is None or int(current) != g:
            # The server lost its data (a restart without persistence): publish again.
            self.log(f"redis: the task record of generation {g} is gone; publishing it again")
            self._publish(record, [jobs[j] for j in pending])
            now = self.link.server_time()
            for jid in pending:
                queued_at[jid] = now
            return len(pending)
        now = self.link.server_time()
        heartbeats, holders = {}, {}
        for key, raw in call(r.hgetall, P.LEASES).items():
            try:
                lease = json.loads(raw)
                heartbeats[key.decode()], holders[key.decode()] = float(lease["t"]), lease["w"]
            except (ValueError, TypeError, KeyError):
                pass   # a malformed lease counts as none
        queued = set(call(r.lrange, P.JOBS, 0, -1))
        in_queue = {j for j in pending if jobs[j].encode() in queued}
        due = chunks_to_requeue({j: queued_at[j] for j in pending}, in_queue, heartbeats, now, self.lease_seconds)
        for jid in (j for j in pending if j in due):
            call(r.rpush, P.JOBS, jobs[jid])
            queued_at[jid] = now
            who = (f"worker {holders[jid]} silent for {now - heartbeats[jid]:.1f} s" if jid in heartbeats
                   else "no worker took it")
            self.log(f"redis: requeued chunk {jid} ({who})")
        return len(due)

    def close(self):
        try:
            self.link.client.close()
        except Exception:
            pass
