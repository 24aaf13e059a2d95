"""The master: hand out a generation as leased chunk jobs (``leases``) and gather the results,
each checked (``protocol``) and trusted only as far as ``verify`` allows. Nothing a message or
a wrong-typed key does can stop, stall or steer a run: results must carry this run's id and
the generation's nonce; a malformed one for a pending chunk (not finite, over
``protocol.MAX_RETURN``, ...) bans its sender and the master evaluates the chunk; an error
report ends the run only if the master reproduces it.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import secrets
import time

import numpy as np

from ..errors import ESError
from ..evaluators import GenerationResult
from ..interfaces import Evaluator
from ..parallel import EvaluationError, chunk_bounds
from . import protocol as P
from .connection import RedisLink
from .leases import Board, chunks_to_requeue  # noqa: F401 -- chunks_to_requeue: the classroom's reference
from .verify import Verifier

COUNTS = ("dropped", "stale", "banned_results", "errors", "repaired")


class RedisEvaluator(Evaluator):
    name = "redis"
    untrusted = True   # returns come over the network: train() asks verify_center before a goal stops the run

    def __init__(self, problem, url: str, chunks: int = 8, lease_seconds: float = 10.0, max_outage: float = 300.0,
                 log=None, spot_checks: int | None = None, chunk_deadline: float | None = None, probation: int = 1,
                 password: str | None = None):
        spec = problem.spec()
        from ..envs import rebuildable
        if not rebuildable(spec):
            raise ESError("--redis needs an environment problem: a Python function would have to be pickled to "
                          "travel, and nothing that crosses the network is pickled")
        P.validate_spec(spec)
        self.problem, self.chunks, self.chunk_deadline = problem, int(chunks), chunk_deadline
        self.episode_cap = getattr(problem, "episode_cap", None)
        self.log = log or logging.getLogger(__name__).warning
        self.link = RedisLink(url, max_outage=max_outage, log=self.log, password=password)
        self.run = secrets.token_hex(8)              # new for every master process
        self.board = Board(self.link, self.run, spec, float(lease_seconds), self.log)
        self.verify = Verifier(problem, spot_checks, probation, self.log)
        self.banned = self.verify.banned             # worker id -> reason
        self.counts = dict.fromkeys(COUNTS, 0)       # per generation
        self.accepted: list = []     # (generation, chunk id, worker, returns digest) of every result used
        self._slowest = 0.0                          # seconds from queueing to result, slowest chunk so far

    def _drop(self, msg, kind="dropped"):
        self.counts[kind] += 1
        self.log(f"redis: dropped a result: {msg}")

    def _deadline(self) -> float:
        return self.chunk_deadline or max(60.0, 5 * self._slowest, 4 * self.board.lease_seconds)

    # ---- one generation ----
    def evaluate(self, task, seeds, center_seeds) -> GenerationResult:
        g, pop, bd = task.generation, task.population, self.board
        bounds = chunk_bounds(pop, self.chunks)
        cap = self.episode_cap or 2 ** 32 - 1     # env steps of one episode, at most
        self._caps = [min(2 ** 32 - 1, cap * len(s)) for s in (seeds, center_seeds if center_seeds is not None else [])]
        bd.open(task, seeds, center_seeds, cap, bounds)
        self.verify.start(task, seeds, center_seeds, bounds)
        self._published = time.monotonic()   # every chunk of the generation is queued at once
        self._returns, self._lengths = np.full(pop, np.nan), np.zeros(pop, dtype=np.int64)
        self._done, self._center = {}, None   # chunk id -> worker; (return, length, worker)
        self._info = dict.fromkeys(("requeued", "discarded", "probation_checks"), 0)
        last_check, last_news = 0.0, time.monotonic()
        while len(self._done) < len(bd.chunk_of):
            item = self.link.repair(self.link.client.blpop, P.RESULTS, timeout=0.5, key=P.RESULTS)
            if item is not None and self._receive(item[1]):
                last_news = time.monotonic()
            if time.monotonic() - last_check > min(1.0, bd.lease_seconds / 4):
                last_check = time.monotonic()
                self._info["requeued"] += bd.requeue_expired(self._done, self._deadline())
            if time.monotonic() - last_news > 30:
                last_news = time.monotonic()
                self.log(f"redis: generation {g}: {len(bd.chunk_of) - len(self._done)} of {len(bd.chunk_of)} chunks "
                         "pending; start workers with: python -m es worker --redis URL")
        info = {"workers": len(set(self._done.values()) - {"master"}), **self._info,
                "spot_checked": len(self.verify.checks()), "spot_check_seconds": self.verify.spot_seconds,
                "master_seconds": self.verify.seconds, "banned": len(self.banned), **self.counts,
                "repaired": self.counts["repaired"] + self.link.repairs}
        self.counts, self.link.repairs = dict.fromkeys(COUNTS, 0), 0
        self._task, c = task, self._center
        self._center_reporter = c[2] if c and c[2] != "master" else None
        return GenerationResult(self._returns, self._lengths, c[0] if c else None, c[1] if c else 0, info)

    def _receive(self, raw) -> bool:
        """Judge one payload from the result list; True if it completed a chunk."""
        bd, g = self.board, self.board.task.generation
        try:
            res = P.decode_result(raw, *self._caps)
        except P.BadPayload as exc:
            self._drop(str(exc))
            h, chunk = exc.header, bd.chunk_of.get(exc.header["first"]) if exc.header else None
            if not (chunk and (h["run"], h["nonce"], h["digest"], h["generation"], h["count"]) ==
                    (bd.run, bd.nonce, bd.digest, g, chunk[1] - chunk[0])):
                return False
            self._ban(h["worker"], f"sent a malformed result ({exc})")
            if chunk[2] in self._done:
                return False
            self.log(f"redis: the master evaluates chunk {chunk[2]} itself")
            return self._accept(self.verify.evaluate(chunk[0], chunk[1], chunk[2] == bd.center_chunk), *chunk)
        w = res["worker"]
        if res["run"] != bd.run or res["nonce"] != bd.nonce or res["generation"] != g:
            self._drop(f"stale result (run {res['run']}, generation {res['generation']}, nonce {res['nonce']}) "
                       f"from worker {w} while on generation {g} of run {bd.run}", "stale")
            return False
        chunk = bd.chunk_of.get(res["first"])
        if chunk is None or chunk[1] - chunk[0] != res["count"]:
            self._drop(f"members {res['first']}+{res['count']} are not a chunk of generation {g}")
            return False
        a, b, jid = chunk
        if res["kind"] == 0 and res["digest"] != bd.digest:
            self._drop(f"worker {w} evaluated an altered task record (digest {res['digest']}, the master's is "
                       f"{bd.digest})", "stale")
            return False
        if res["kind"] == 0 and (jid == bd.center_chunk) != (res["center"] is not None):
            self._drop(f"chunk {jid} {'lacks' if jid == bd.center_chunk else 'has'} a center return")
            return False
        if jid in self._done:
            return False  # a duplicate from a requeued chunk: (generation, member) already in
        if res["kind"] == 1:
            return self._on_error(res, a, b, jid)
        if w in self.banned:
            self._drop(f"worker {w} is banned ({self.banned[w]}); the master evaluates chunk {jid}", "banned_results")
            return self._accept(self.verify.evaluate(a, b, jid == bd.center_chunk), a, b, jid)
        if not self.verify.trusted(w):    # probation: evaluated here in full, the master's values are used
            self._info["probation_checks"] += 1
            own = self.verify.evaluate(a, b, jid == bd.center_chunk)
            self.log(f"redis: evaluated chunk {jid} of worker {w} in full (probation)")
            lie = self.verify.lie(res, a, b, own)
            if lie:
                self._ban(w, lie)
            else:
                self.verify.vouch(w)
            return self._accept(own, a, b, jid)
        lie = self.verify.lie(res, a, b)
        if lie:
            self._ban(w, lie)
            self._info["requeued"] += self.board.requeue(jid, "its worker was banned")
            return False
        return self._accept(res, a, b, jid)

    def _accept(self, res, a, b, jid) -> bool:
        self._returns[a:b], self._lengths[a:b] = res["returns"], res["lengths"]
        if res["center"] is not None:
            self._center = (*res["center"], res["worker"])
        self._done[jid] = res["worker"]
        self.accepted.append((self.board.task.generation, jid, res["worker"],
                              hashlib.sha256(res["returns"].tobytes()).hexdigest()[:16]))
        self._slowest = max(self._slowest, time.monotonic() - self._published)
        return True

    def _ban(self, worker, why) -> None:
        """Ban ``worker``; its other results of this generation are discarded and requeued."""
        g = self.board.task.generation
        if worker not in self.banned:
            self.verify.ban(worker, why)
        lost = [j for j, who in self._done.items() if who == worker]
        for j in lost:
            self._done.pop(j)
            self._info["requeued"] += self.board.requeue(j, "its worker was banned")
        if self._center is not None and self._center[2] == worker:
            self._center = None
        self.accepted = [e for e in self.accepted if not (e[0] == g and e[2] == worker)]
        self._info["discarded"] += len(lost)

    def _on_error(self, res, a, b, jid) -> bool:
        """An error report: publish an altered task record again, or evaluate the chunk here: the run
        ends if that fails too; else the report was false, the reporter banned, the values the master's."""
        self.counts["errors"] += 1
        bd, w, msg = self.board, res["worker"], res["message"]
        self.log(f"redis: worker {w} reported an error: {msg[:200]} (chunk {jid})")
        if bd.task_altered():   # e.g. a rewritten problem spec the workers refused
            self._info["requeued"] += bd.republish(self._done, "the task record was altered")
            return False
        try:
            own = self.verify.evaluate(a, b, jid == bd.center_chunk)
        except Exception as exc:
            raise EvaluationError(f"members {a}..{b - 1} of generation {bd.task.generation} failed on worker {w}: "
                                  f"{msg}\n  and here: {exc.__class__.__name__}: {exc}") from None
        self.log(f"redis: false error report from worker {w}: the master evaluated chunk {jid} without error")
        self._ban(w, f"false error report on chunk {jid}: {msg[:200]}")
        return self._accept(own, a, b, jid)

    def verify_center(self, center_seeds, reported: float) -> float:
        return self.verify.verify_center(self._task, center_seeds, reported, self._center_reporter)

    def close(self):
        with contextlib.suppress(Exception):
            self.link.client.close()
