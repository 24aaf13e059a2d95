"""The master side: hand out one generation as leased chunk jobs and gather the results.

Nothing a single message (or a wrong-typed key) does can stop or stall a run:

* results, errors and leases must carry this run's id and the generation's nonce;
* an error result requeues its chunk (the reporting worker pauses before it asks for more,
  and Redis serves blocked clients first come first served, so an idle peer takes it);
  only ``max_errors`` errors on one chunk end the run, with every message;
* a chunk is queued again when its lease goes silent for ``lease_seconds``, and in any case
  ``chunk_deadline`` seconds after it was queued (a heartbeat cannot keep a chunk forever;
  heartbeats stamped in the future count as none);
* keys of the wrong type are deleted and rebuilt; an altered task record is published again.

Lying workers: evaluation is a pure function of (parameters, seed), so the master replays a
few members itself every generation (``spot_checks``, default one per 64 members, chosen with a generator seeded from
``secrets`` so no worker can predict them) and compares bit for bit. On a mismatch the
worker is banned for the rest of the run, all its results of the generation are discarded
and their chunks requeued. A worker id is on probation until one of its results has passed
a replay: its first result is replayed wherever the spot checks landed, so a worker that
always lies never enters an update. A center return that would stop the run at its goal is
replayed too before it is believed.
"""
from __future__ import annotations

import hashlib
import json
import math
import secrets
import sys
import threading
import time

import numpy as np

from ..errors import ESError
from ..evaluators import GenerationResult, evaluate_members
from ..parallel import EvaluationError, chunk_bounds
from . import protocol as P
from .connection import RedisLink


def chunks_to_requeue(queued_at: dict, in_queue: set, leases: dict, now: float, lease_seconds: float,
                      deadline: float | None = None) -> set:
    """The pending chunks to hand out again: not waiting in the queue, queued at least
    ``lease_seconds`` ago (a worker may have popped it and not written its lease yet), and with
    no heartbeat (``leases``: chunk -> last heartbeat time) in the last ``lease_seconds``; or,
    with a ``deadline``, queued ``deadline`` seconds ago or more whatever its heartbeats say."""
    return {c for c, t in queued_at.items()
            if c not in in_queue and now - t >= lease_seconds
            and (now - leases.get(c, -np.inf) >= lease_seconds or (deadline is not None and now - t >= deadline))}


class RedisEvaluator:
    name = "redis"
    untrusted = True   # train() replays a center that reaches the goal (see verify_center)

    def __init__(self, problem, url: str, chunks: int = 8, lease_seconds: float = 10.0, max_outage: float = 300.0,
                 log=None, spot_checks: int | None = None, chunk_deadline: float | None = None, max_errors: int = 3,
                 password: str | None = None):
        spec = problem.spec()
        from ..envs import rebuildable
        if not rebuildable(spec):
            raise ESError("--redis needs an environment problem: a Python function would have to be pickled to "
                          "travel, and nothing that crosses the network is pickled")
        P.validate_spec(spec)
        self.problem, self.spec, self.chunks, self.lease_seconds = problem, spec, int(chunks), float(lease_seconds)
        self.spot_checks, self.chunk_deadline, self.max_errors = spot_checks, chunk_deadline, int(max_errors)
        self.episode_cap = getattr(problem, "episode_cap", None)
        self.log = log or (lambda m: print(m, file=sys.stderr))
        self.link = RedisLink(url, max_outage=max_outage, log=self.log, password=password)
        self.run = secrets.token_hex(8)              # new for every master process
        self._rng = np.random.Generator(np.random.PCG64(secrets.randbits(128)))   # unpredictable spot checks
        self.banned: dict = {}                       # worker id -> reason
        self.vouched: set = set()                    # worker ids whose results have passed a replay
        self.counts = dict.fromkeys(("dropped", "stale", "banned_results", "errors", "repaired"), 0)   # per generation
        self.accepted: list = []     # (generation, chunk id, worker, returns digest) of every result used
        self._slowest = 0.0                          # seconds from queueing to result, slowest chunk so far

    # ---- helpers ----
    def _drop(self, msg, kind="dropped"):
        self.counts[kind] += 1
        self.log(f"redis: dropped a result: {msg}")

    def _redis(self, fn, *args, key=None, **kwargs):
        """A Redis call; a key of the wrong type (someone wrote it) is deleted, logged, and the
        call answers None instead of stopping the run."""
        import redis
        try:
            return self.link.call(fn, *args, **kwargs)
        except redis.ResponseError as exc:
            if "WRONGTYPE" not in str(exc) or key is None:
                raise
            self.counts["repaired"] += 1
            self.log(f"redis: {key} held the wrong type of value ({exc}); deleted it")
            self.link.call(self.link.client.delete, key)
            return None

    def _deadline(self) -> float:
        if self.chunk_deadline is not None:
            return self.chunk_deadline
        return max(60.0, 5 * self._slowest, 4 * self.lease_seconds)

    # ---- one generation ----
    def _stamp(self, gen: dict) -> None:
        """A new nonce for the generation, and the task record and jobs that carry it. Also
        used to publish again after the record was altered or lost: workers that cached the
        old record see a new nonce and read it afresh; their results for the old one are stale."""
        gen["nonce"] = nonce = secrets.token_hex(8)
        task, g = gen["task"], gen["task"].generation
        gen["record"] = P.encode_task(task, self.spec, gen["seeds"], gen["center_seeds"], run=self.run, nonce=nonce,
                                      max_length=gen["cap"], lease_seconds=self.lease_seconds)
        gen["digest"] = P.task_digest(gen["record"])
        gen["jobs"] = {jid: P.encode_job(self.run, nonce, g, a, b, jid == gen["center_chunk"])
                       for a, b, jid in gen["chunk_of"].values()}

    def evaluate(self, task, seeds, center_seeds) -> GenerationResult:
        g, pop = task.generation, task.population
        bounds = chunk_bounds(pop, self.chunks)
        cap = self.episode_cap or 2 ** 32 - 1     # env steps of one episode, at most
        gen = {"task": task, "seeds": seeds, "center_seeds": center_seeds, "cap": cap,
               "center_chunk": P.job_id({"g": g, "a": bounds[-1][0], "b": bounds[-1][1]}),
               "chunk_of": {a: (a, b, P.job_id({"g": g, "a": a, "b": b})) for a, b in bounds}}
        self._stamp(gen)
        caps = [min(2 ** 32 - 1, cap * len(s)) for s in (seeds, center_seeds if center_seeds is not None else [])]
        chunk_of, center_chunk = gen["chunk_of"], gen["center_chunk"]
        self._publish(gen["record"], list(gen["jobs"].values()), fresh=True)
        now = self.link.server_time()
        queued_at = dict.fromkeys(gen["jobs"], now)
        published = time.monotonic()         # every chunk of the generation is queued at once
        replay = _Replay(self._spot_check, task, seeds, bounds)   # runs while the workers work
        returns = np.full(pop, np.nan)
        lengths = np.zeros(pop, dtype=np.int64)
        done: dict = {}                      # chunk id -> worker
        errors: dict = {}                    # chunk id -> [messages]
        center = None
        requeued, discarded, probation, last_check, last_news = 0, 0, 0, 0.0, time.monotonic()
        waited_since = time.monotonic()
        while len(done) < len(chunk_of):
            item = self._redis(self.link.client.blpop, P.RESULTS, timeout=0.5, key=P.RESULTS)
            if item is not None:
                try:
                    res = P.decode_result(item[1], *caps)
                except P.BadPayload as exc:
                    self._drop(str(exc))
                    continue
                if res["run"] != self.run or res["nonce"] != gen["nonce"] or res["generation"] != g:
                    self._drop(f"stale result (run {res['run']}, generation {res['generation']}, nonce {res['nonce']}) "
                               f"from worker {res['worker']} while on generation {g} of run {self.run}", "stale")
                    continue
                chunk = chunk_of.get(res["first"])
                if chunk is None or chunk[1] - chunk[0] != res["count"]:
                    self._drop(f"members {res['first']}+{res['count']} are not a chunk of generation {g}")
                    continue
                a, b, jid = chunk
                if res["kind"] == 0 and res["digest"] != gen["digest"]:
                    self._drop(f"worker {res['worker']} evaluated an altered task record (digest {res['digest']}, "
                               f"the master's is {gen['digest']})", "stale")
                    continue
                if res["worker"] in self.banned:
                    self._drop(f"worker {res['worker']} is banned ({self.banned[res['worker']]})", "banned_results")
                    if jid not in done:   # it took the job: hand it out again now
                        requeued += self._requeue(jid, gen, queued_at, "its worker is banned")
                    continue
                if jid in done:
                    continue  # a duplicate from a requeued chunk: (generation, member) already in
                if res["kind"] == 1:
                    requeued += self._on_error(res, jid, gen, errors, queued_at, done)
                    continue
                if (jid == center_chunk) != (res["center"] is not None):
                    self._drop(f"chunk {jid} {'lacks' if jid == center_chunk else 'has'} a center return")
                    continue
                checks = replay.checks()
                if self._on_probation(res["worker"]) and not any(a <= m < b for m in checks):
                    checks = {**checks, **self._probation_check(task, seeds, a, b, res["worker"])}
                    probation += 1
                lie = self._compare(checks, a, b, res)
                if lie is not None:
                    lost = [j for j, w in done.items() if w == res["worker"]]
                    self.banned[res["worker"]] = lie
                    self.log(f"redis: banned worker {res['worker']}: {lie}; discarding its {len(lost)} other "
                             f"result(s) of generation {g} and requeueing them")
                    for j in [jid, *lost]:
                        done.pop(j, None)
                        requeued += self._requeue(j, gen, queued_at, "its worker was banned")
                    if center is not None and center[2] == res["worker"]:
                        center = None
                    self.accepted = [e for e in self.accepted if not (e[0] == g and e[2] == res["worker"])]
                    discarded += len(lost) + 1
                    continue
                if any(a <= m < b for m in checks):
                    self.vouched.add(res["worker"])   # it passed a replay: spot checks alone from now on
                returns[a:b], lengths[a:b] = res["returns"], res["lengths"]
                if res["center"] is not None:
                    center = (*res["center"], res["worker"])
                done[jid] = res["worker"]
                self.accepted.append((g, jid, res["worker"], hashlib.sha256(res["returns"].tobytes()).hexdigest()[:16]))
                self._slowest = max(self._slowest, time.monotonic() - published)
                last_news = time.monotonic()
            if time.monotonic() - last_check > min(1.0, self.lease_seconds / 4):
                last_check = time.monotonic()
                requeued += self._requeue_expired(gen, done, queued_at)
            if time.monotonic() - last_news > 30 and time.monotonic() - waited_since > 30:
                waited_since = time.monotonic()
                leases = self._redis(self.link.client.hlen, P.LEASES, key=P.LEASES)
                self.log(f"redis: generation {g}: {len(chunk_of) - len(done)} of {len(chunk_of)} chunks pending, "
                         f"{leases} being worked on; start workers with: python -m es worker --redis URL")
        checks = replay.checks()
        info = {"workers": len(set(done.values())), "requeued": requeued, "spot_checked": len(checks),
                "probation_checks": probation,
                "spot_check_seconds": replay.seconds,
                "discarded": discarded, "banned": len(self.banned), **self.counts}
        self.counts = dict.fromkeys(self.counts, 0)
        self._task, self._center_reporter = task, (center[2] if center else None)
        return GenerationResult(returns, lengths, center[0] if center else None, center[1] if center else 0, info)

    # ---- lying workers ----
    def _spot_check(self, task, seeds, bounds) -> dict:
        """member -> (return, length) measured here, for ``spot_checks`` members in distinct chunks."""
        k = self.spot_checks if self.spot_checks is not None else max(1, math.ceil(task.population / 64))
        k = min(k, len(bounds))
        if k <= 0:
            return {}
        picked = self._rng.choice(len(bounds), size=k, replace=False)
        members = sorted(int(self._rng.integers(*bounds[i])) for i in picked)
        r, l, _, _ = evaluate_members(self.problem, task, members, seeds)
        return {m: (float(r[i]), int(l[i])) for i, m in enumerate(members)}

    def _on_probation(self, worker: str) -> bool:
        """A worker none of whose results has been replayed yet (unless spot checks are off)."""
        return self.spot_checks != 0 and worker not in self.vouched

    def _probation_check(self, task, seeds, a: int, b: int, worker: str) -> dict:
        """One member of chunk [a, b) replayed here, picked unpredictably: the first result of
        each worker id gets one, so a worker that always lies is banned before any of its
        returns enters an update, whatever chunks the spot checks landed in."""
        m = int(self._rng.integers(a, b))
        r, l, _, _ = evaluate_members(self.problem, task, [m], seeds)
        self.log(f"redis: replayed member {m} of worker {worker}'s first result (probation)")
        return {m: (float(r[0]), int(l[0]))}

    @staticmethod
    def _compare(checks, a, b, res):
        for m, (want_r, want_l) in checks.items():
            if a <= m < b:
                got_r, got_l = float(res["returns"][m - a]), int(res["lengths"][m - a])
                if got_r != want_r or got_l != want_l:
                    return (f"member {m} of generation {res['generation']} returned {got_r!r} in {got_l} steps, "
                            f"the master measured {want_r!r} in {want_l}")
        return None

    def verify_center(self, center_seeds, reported: float) -> float:
        """Replay the center of the last generation here (before a goal stops the run)."""
        _, _, cr, _ = evaluate_members(self.problem, self._task, [], [], center_seeds)
        if cr != reported:
            who = self._center_reporter
            self.banned[who] = f"reported the center's return as {reported!r}, the master measured {cr!r}"
            self.log(f"redis: banned worker {who}: {self.banned[who]}")
        return cr

    # ---- errors ----
    def _on_error(self, res, jid, gen, errors, queued_at, done) -> int:
        self.counts["errors"] += 1
        msg = res["message"]
        if self._task_altered(gen):   # e.g. a rewritten problem spec the workers refused
            return self._republish(gen, done, queued_at, "the task record was altered")
        errors.setdefault(jid, []).append(f"worker {res['worker']}: {msg}")
        if len(errors[jid]) >= self.max_errors:
            raise EvaluationError(f"members {jid.split(':', 1)[1].replace(':', '..')} of generation "
                                  f"{gen['task'].generation} failed {len(errors[jid])} times:\n  "
                                  + "\n  ".join(errors[jid]))
        return self._requeue(jid, gen, queued_at, f"worker {res['worker']} reported an error: {msg[:200]}")

    def _task_altered(self, gen) -> bool:
        """Does the stored task record differ from what this master wrote?"""
        stored = self._redis(self.link.client.hgetall, P.TASK, key=P.TASK) or {}
        stored = {k.decode(errors="replace"): v for k, v in stored.items()}
        return not all(stored.get(k) == (v.encode() if isinstance(v, str) else v) for k, v in gen["record"].items())

    # ---- queueing ----
    def _publish(self, record: dict, job_values, fresh: bool) -> None:
        """The task record and the jobs in one MULTI/EXEC. A fresh generation also clears
        leftover leases and results, whatever their type."""
        def write(pipe):
            pipe.multi()
            pipe.delete(P.TASK, P.JOBS, *((P.LEASES, P.RESULTS) if fresh else ()))
            pipe.hset(P.TASK, mapping=record)
            if job_values:
                pipe.rpush(P.JOBS, *job_values)
        self.link.call(self.link.client.transaction, write)

    def _republish(self, gen, done, queued_at, why) -> int:
        """Publish the generation again under a new nonce, with the jobs of its pending chunks."""
        self.counts["repaired"] += 1
        self._stamp(gen)
        pending = [j for j in gen["jobs"] if j not in done]
        self.log(f"redis: {why} (generation {gen['task'].generation}); publishing it again with a new nonce")
        self._publish(gen["record"], [gen["jobs"][j] for j in pending], fresh=False)
        now = self.link.server_time()
        for jid in pending:
            queued_at[jid] = now
        return len(pending)

    def _requeue(self, jid, gen, queued_at, why) -> int:
        self._redis(self.link.client.rpush, P.JOBS, gen["jobs"][jid], key=P.JOBS)
        queued_at[jid] = self.link.server_time()
        self.log(f"redis: requeued chunk {jid} ({why})")
        return 1

    def _requeue_expired(self, gen, done, queued_at) -> int:
        r, record = self.link.client, gen["record"]
        pending = {j: v for j, v in gen["jobs"].items() if j not in done}
        if not pending:
            return 0
        head = self._redis(r.hmget, P.TASK, "run", "nonce", "generation", "sha256", key=P.TASK)
        if head is None or [v.decode(errors="replace") if v is not None else None for v in head] != \
                [record["run"], record["nonce"], record["generation"], record["sha256"]]:
            return self._republish(gen, done, queued_at, "the task record is gone or altered")
        now = self.link.server_time()
        heartbeats, holders = {}, {}
        for key, raw in (self._redis(r.hgetall, P.LEASES, key=P.LEASES) or {}).items():
            try:
                lease = json.loads(raw)
                t = float(lease["t"])
                if lease["n"] != record["nonce"] or not math.isfinite(t) or t > now + self.lease_seconds:
                    continue   # another generation's, or stamped in the future: counts as none
                heartbeats[key.decode()], holders[key.decode()] = t, str(lease["w"])[:16]
            except (ValueError, TypeError, KeyError, UnicodeDecodeError):
                pass   # a malformed lease counts as none
        queued = self._redis(r.lrange, P.JOBS, 0, -1, key=P.JOBS)
        if queued is None:   # the job list was of the wrong type: it is gone, queue every pending chunk
            queued = []
            for jid in pending:
                queued_at[jid] = -np.inf
        queued = set(queued)
        in_queue = {j for j, v in pending.items() if v.encode() in queued}
        deadline = self._deadline()
        due = chunks_to_requeue({j: queued_at[j] for j in pending}, in_queue, heartbeats, now, self.lease_seconds,
                                deadline)
        for jid in (j for j in pending if j in due):
            if jid in heartbeats and now - heartbeats[jid] < self.lease_seconds:
                who = f"past its {deadline:.0f} s deadline though worker {holders[jid]} still sends heartbeats"
            elif jid in heartbeats:
                who = f"worker {holders[jid]} silent for {now - heartbeats[jid]:.1f} s"
            else:
                who = "no worker holds a lease on it"
            self._requeue(jid, gen, queued_at, who)
        return len(due)

    def close(self):
        try:
            self.link.client.close()
        except Exception:
            pass


class _Replay:
    """The master's own evaluation of the spot-checked members, in a thread: the master is
    otherwise idle while it waits for results (ALE and NumPy release the GIL)."""

    def __init__(self, fn, *args):
        self._out, self._error, self.seconds = {}, None, 0.0
        self._thread = threading.Thread(target=self._run, args=(fn, *args), daemon=True)
        self._thread.start()

    def _run(self, fn, *args):
        t0 = time.perf_counter()
        try:
            self._out = fn(*args)
        except Exception as exc:   # the master's own environment failed: checks() says so
            self._error = exc
        self.seconds = time.perf_counter() - t0

    def checks(self) -> dict:
        self._thread.join()
        if self._error is not None:
            raise ESError(f"the master could not replay its spot checks: {self._error.__class__.__name__}: "
                          f"{self._error}")
        return self._out
