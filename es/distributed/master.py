"""The master: hand out a generation as leased chunk jobs (``leases``) and gather the results,
each checked (``protocol``) and trusted only as far as ``verify`` allows. Nothing a message or
a wrong-typed key does can stop, stall or steer a run: results must carry this run's id and
the generation's nonce; a malformed one for a pending chunk (not finite, over
``protocol.MAX_RETURN``, ...) bans its sender and the chunk is evaluated again; an error
report ends the run only if the master reproduces it.

Probation without serializing a fresh cluster: a result of an id not yet trusted is held,
its chunk is queued again at the front (so that a trusted worker may evaluate it) and, where
no trusted id exists yet or no trusted result comes within a lease time, the master
evaluates the chunk in the background. The first trusted evaluation is used and settles
what was held: identical, the id earns trust and its other held results are released;
different, it is banned. Stragglers: once no job waits, a chunk running much longer than the
generation's finished chunks took per member is handed out again (a backup); the first result
counts, the late one is a duplicate. Chunks shrink towards a generation's end (``guided_bounds``) for
the workers the master knows of: its own and those it heard from in the last generation; the
master plays the center's episodes itself meanwhile (with ``chunks`` given: the last chunk's
worker does, as before).

A ban may come chunks after the banned id's first lie: the master notes, per id it did not
issue, the first generation that used one of its results, and ``rollback`` tells the training
loop to go back to the state before it and play the generations since again.
Before the update, the extreme ranks an id it did not issue returned are replayed here
(``_lie_at_the_extremes``). A result is checked only within the master's platform class
(``platform``): one of another class is never used, and never a ban.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import secrets
import time

import numpy as np

from ..errors import ESError
from ..evaluators import GenerationResult, member_obs, put_obs
from ..interfaces import Evaluator
from ..parallel import EvaluationError, chunk_bounds, dispatch_order, guided_bounds
from . import platform as PL
from . import protocol as P
from .connection import RedisLink
from .leases import Board, chunks_to_requeue  # noqa: F401 -- chunks_to_requeue: the classroom's reference
from .verify import Verifier, obs_row, extreme_members, extremes_per_side, mismatch

COUNTS = ("dropped", "stale", "banned_results", "errors", "repaired", "unverifiable")
MIN_WORKERS = 4        # chunks are cut for at least this many workers until more are heard from
MAX_HELD = 8           # results held per chunk for probation; more are dropped
BACKUP_AFTER = 2.0     # a chunk still running this many times longer than expected is handed out again
DRAIN = 256            # results taken from the list in one round trip


class RedisEvaluator(Evaluator):
    name = "redis"
    untrusted = True   # returns come over the network: train() asks verify_center before a goal stops the run

    def __init__(self, problem, url: str, chunks: int | None = None, lease_seconds: float = 10.0,
                 max_outage: float = 300.0, log=None, spot_checks: int | None = None,
                 chunk_deadline: float | None = None, probation: int = 1, password: str | None = None,
                 workers: int = 0, trusted=(), backup_after: float | None = BACKUP_AFTER,
                 catch_within: int | None = None):
        """``chunks``: that many even chunks per generation; None: guided chunks for the workers
        known (``workers`` started by the caller, and every id heard from in the last
        generation). ``trusted``: worker ids the caller issued to its own processes.
        ``backup_after``: a chunk running this many times longer than expected is handed out
        again once (None: never; ``chunk_deadline`` and the leases still apply). ``catch_within``:
        the spot checks' target, a liar caught by its that-many-th lie (``verify``)."""
        spec = problem.spec()
        from ..envs import rebuildable
        if not rebuildable(spec):
            raise ESError("--redis needs an environment problem: a Python function would have to be pickled to "
                          "travel, and nothing that crosses the network is pickled")
        P.validate_spec(spec)
        self.problem, self.chunks, self.chunk_deadline = problem, chunks, chunk_deadline
        self.backup_after = backup_after
        self.expected_workers = int(workers)
        self.episode_cap = getattr(problem, "episode_cap", None)
        self.log = log or logging.getLogger(__name__).warning
        self.link = RedisLink(url, max_outage=max_outage, log=self.log, password=password)
        self.run = secrets.token_hex(8)              # new for every master process
        self.verify = Verifier(problem, spot_checks, probation, self.log, trusted, catch_within)
        # Platform classes: a result is checked only against evaluations of its own class, and
        # the master's evaluations are of its class; a worker of another cannot be checked.
        self.platform = PL.describe()
        self.platforms: dict = {}                    # worker id -> its announced description, or None
        self._classes_said = None
        self.board = Board(self.link, self.run, spec, float(lease_seconds), self.log, PL.encode(self.platform),
                           self.checks_results)
        self.banned = self.verify.banned             # worker id -> reason
        self.counts = dict.fromkeys(COUNTS, 0)       # per generation
        self.accepted: list = []     # (generation, chunk id, worker, returns digest) of every result used
        self._slowest = 0.0                          # seconds from queueing to result, slowest chunk so far
        self._heard: set = set()                     # worker ids with a result in the last generation
        self._new_ids: set = set()                   # ids whose probation was announced
        self._blmpop = True                          # the server has BLMPOP (Redis >= 7)
        # Rollback: the first generation in which each id the master did not issue had a result
        # used; a ban sends the run back to the generation before (``rollback``).
        self.first_unchecked: dict = {}              # worker id -> generation
        self._rollback, self._rollback_ids = None, set()

    @property
    def checks_results(self) -> bool:
        """Are results checked at all (not ``spot_checks=0``, a private cluster)?"""
        return self.verify.spot_checks != 0

    def bounds(self, population: int) -> list[tuple[int, int]]:
        """This generation's chunks: ``chunks`` even ones if given; else one even chunk per worker
        (at least 8) for a batched problem, guided chunks for the known workers otherwise."""
        if self.chunks:
            return chunk_bounds(population, self.chunks)
        known = max(self.expected_workers, len(self._heard), MIN_WORKERS)
        if self.problem.chunks_per_worker == 1:
            return chunk_bounds(population, max(8, known))
        return guided_bounds(population, known)

    def warm_up(self, population: int, episodes: int, center_episodes: int) -> None:
        """The master gets ready to play the center and its spot checks."""
        self.problem.warm_up(center_episodes)

    def wait_for_workers(self, ids, timeout: float = 120.0) -> float:
        """Wait until the workers ``ids`` (hex) have said they are ready (``keys.ready_field``);
        seconds waited. Workers that are late are logged, not waited for beyond ``timeout``."""
        t0, ids = time.monotonic(), list(ids)
        fields = [P.ready_field(w) for w in ids]
        while ids:
            ready = self.link.repair(self.link.client.hmget, P.LEASES, fields, key=P.LEASES) or [None] * len(ids)
            ids, fields = [w for w, v in zip(ids, ready) if v is None], [f for f, v in zip(fields, ready) if v is None]
            if ids and time.monotonic() - t0 > timeout:
                self.log(f"redis: {len(ids)} local worker(s) not ready after {timeout:.0f} s; starting without them")
                break
            if ids:
                time.sleep(0.02)
        return time.monotonic() - t0

    def _drop(self, msg, kind="dropped"):
        self.counts[kind] += 1
        self.log(f"redis: dropped a result: {msg}")

    def _deadline(self) -> float:
        return self.chunk_deadline or max(60.0, 5 * self._slowest, 4 * self.board.lease_seconds)

    # ---- one generation ----
    def evaluate(self, task, seeds, center_seeds) -> GenerationResult:
        g, pop, bd = task.generation, task.population, self.board
        bounds = self.bounds(pop)
        cap = self.episode_cap or 2 ** 32 - 1     # env steps of one episode, at most
        self._caps = [min(2 ** 32 - 1, cap * len(s)) for s in (seeds, center_seeds if center_seeds is not None else [])]
        self.verify.start(task, seeds, center_seeds, bounds)
        here = not self.chunks and center_seeds is not None and len(center_seeds) > 0   # the master plays the center
        bd.open(task, seeds, center_seeds, cap, bounds, dispatch_order(bounds), center_here=here)
        self._published = time.monotonic()   # every chunk of the generation is queued at once
        self._returns, self._lengths = np.full(pop, np.nan), np.zeros(pop, dtype=np.int64)
        self._obs = member_obs(task, pop)
        self._obs_dim = 0 if self._obs is None else self._obs[0].shape[1]
        self._done, self._center = {}, None   # chunk id -> worker; (return, length, worker)
        center = self.verify.submit_center() if here else None
        self._held, self._wanted, self._own = {}, {}, {}   # chunk id -> [(worker, result)]; -> time; -> future
        self._heard_now: set = set()
        self._started, self._per_member, self._backed = {}, 0.0, set()   # chunk -> first seen running; seconds
        self._info = dict.fromkeys(("requeued", "discarded", "probation_checks", "vouched", "master_chunks",
                                    "backups", "late", "extremes_replayed"), 0)
        last_check, last_news = 0.0, time.monotonic()
        self._truth: dict = {}       # member -> what the master measured (extremes replayed)
        try:
            while True:
                while len(self._done) < len(bd.chunk_of) or (center is not None and not center.done()):
                    for raw in self._pop_results(0.05 if self._own else 0.5):
                        if self._receive(raw):
                            last_news = time.monotonic()
                    if self._own and self._collect_own():
                        last_news = time.monotonic()
                    if time.monotonic() - last_check > min(1.0, bd.lease_seconds / 4):
                        last_check = time.monotonic()
                        self._info["requeued"] += bd.requeue_expired(self._done, self._deadline())
                        self._evaluate_unsettled()
                        self._back_up()
                    if time.monotonic() - last_news > 30:
                        last_news = time.monotonic()
                        self.log(f"redis: generation {g}: {len(bd.chunk_of) - len(self._done)} of {len(bd.chunk_of)} "
                                 "chunks pending; start workers with: python -m es worker --redis URL")
                if not self._lie_at_the_extremes():
                    break              # else its teller was banned and its chunks are queued again
        finally:
            for fut in self._own.values():
                fut.cancel()       # not started: not needed any more; one running is left to finish
        if center is not None:
            try:
                cr, cl = center.result()
            except Exception as exc:   # noqa: BLE001 -- the master's own environment failed
                raise EvaluationError(f"the master could not play the center of generation {g}: "
                                      f"{exc.__class__.__name__}: {exc}") from None
            self._center = (cr, cl, "master")
        self._heard = self._heard_now or self._heard
        self._say_classes()
        info = {"workers": len(set(self._done.values()) - {"master"}), "chunks": len(bounds), **self._info,
                "held": sum(map(len, self._held.values())), "spot_checked": self.verify.checked(), "spot_rate": self.verify.rate,
                "spot_check_seconds": self.verify.spot_seconds, "center_seconds": self.verify.center_seconds,
                "master_seconds": self.verify.seconds,
                "banned": len(self.banned), **self.counts, "repaired": self.counts["repaired"] + self.link.repairs}
        self.counts, self.link.repairs = dict.fromkeys(COUNTS, 0), 0
        self._task, c = task, self._center
        self._center_reporter = c[2] if c and c[2] != "master" else None
        return GenerationResult(self._returns, self._lengths, c[0] if c else None, c[1] if c else 0, info, self._obs)

    def _pop_results(self, timeout: float) -> list:
        """The results waiting (up to ``DRAIN``, one round trip), or after up to ``timeout`` s the first to come."""
        r = self.link.client
        if self._blmpop:
            try:
                got = self.link.repair(r.blmpop, timeout, 1, P.RESULTS, direction="LEFT", count=DRAIN, key=P.RESULTS)
                return got[1] if got else []
            except Exception as exc:   # noqa: BLE001 -- a server older than Redis 7: one result a round trip
                if "unknown command" not in str(exc).lower():
                    raise
                self._blmpop = False
        item = self.link.repair(r.blpop, P.RESULTS, timeout=max(timeout, 0.01), key=P.RESULTS)
        return [item[1]] if item is not None else []

    def _receive(self, raw) -> bool:
        """Judge one payload from the result list; True if it completed a chunk."""
        bd, g = self.board, self.board.task.generation
        try:
            res = P.decode_result(raw, *self._caps, obs_dim=self._obs_dim)
        except P.BadPayload as exc:
            self._drop(str(exc))
            h, chunk = exc.header, bd.chunk_of.get(exc.header["first"]) if exc.header else None
            if not (chunk and (h["run"], h["nonce"], h["digest"], h["generation"], h["count"]) ==
                    (bd.run, bd.nonce, bd.digest, g, chunk[1] - chunk[0])):
                return False
            self._ban(h["worker"], f"sent a malformed result ({exc})")
            if chunk[2] not in self._done:
                self._want(chunk[2], f"its result from worker {h['worker']} was malformed")
            return False
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
        if self._unverifiable(w, res, jid):
            return False
        if w not in self.banned:
            self._heard_now.add(w)
        if jid in self._done:
            self._info["late"] += 1
            if res["kind"] == 0 and w not in self.banned and not self.verify.trusted(w):
                self._settle_one(w, res, a, b, self._used(a, b, jid))   # a late copy still tells whether w is honest
            return False  # a duplicate from a requeued chunk: (generation, member) already in
        if res["kind"] == 1:
            return self._on_error(res, a, b, jid)
        if w in self.banned:
            self._drop(f"worker {w} is banned ({self.banned[w]})", "banned_results")
            self._want(jid, f"worker {w} is banned")
            return False
        if not self.verify.trusted(w):
            self._hold(w, res, a, b, jid)
            return False
        return self._trusted(res, a, b, jid)

    def _lie_at_the_extremes(self) -> bool:
        """Before the update: replay every member of an id the master did not issue whose rank is
        among the extremes (``verify.extreme_members``), the largest weights of the update; a
        difference bans its id (True: its chunks are queued again). So a lie that gives a member
        one of the largest weights is caught in the generation it is told."""
        if not self.checks_results:
            return False
        owner = {}
        for jid, w in self._done.items():
            if w != "master" and w not in self.verify.own:
                a, b = self.board.members[jid]
                owner.update(dict.fromkeys(range(a, b), w))
        n = len(self._returns)
        suspects = [int(m) for m in extreme_members(self._returns, extremes_per_side(n)) if int(m) in owner]
        if not suspects:
            return False
        self._truth.update({m: v for m, v in self.verify.measured().items() if m not in self._truth})
        todo = [m for m in suspects if m not in self._truth]
        if todo:
            self._truth.update(self.verify.replay(todo))
            self._info["extremes_replayed"] += len(todo)
        for m in suspects:
            got = float(self._returns[m]), int(self._lengths[m]), obs_row(self._obs, m)
            why = mismatch(self.board.task.generation, m, got, self._truth[m], "the master")
            if why:
                self._ban(owner[m], f"{why} (one of the extreme ranks, replayed before the update)")
                return True
        return False

    def _platform_of(self, w: str):
        """The platform ``w`` announced (read at its first result of the run), or None."""
        if w not in self.platforms:
            raw = self.link.repair(self.link.client.hget, P.LEASES, PL.field(w), key=P.LEASES)
            try:
                self.platforms[w] = PL.decode(raw) if raw is not None else None
            except P.BadPayload as exc:
                self.log(f"redis: worker {w} announced an unreadable platform ({exc}); checked as the master's class")
                self.platforms[w] = None
        return self.platforms[w]

    def _unverifiable(self, w: str, res: dict, jid: str) -> bool:
        """A refusal, or a result of another platform class than the master's while results are
        checked: never used, never a ban (its last bits may differ honestly); the chunk is
        queued again at the front."""
        desc = self._platform_of(w)
        refused = res["kind"] == 1 and res["message"].startswith(PL.REFUSAL)
        other = self.checks_results and desc is not None and desc["key"] != self.platform["key"]
        if not (refused or other):
            return False
        if jid not in self._done and w not in self.banned:
            self.counts["unverifiable"] += 1
            self._info["requeued"] += self.board.requeue(jid, f"worker {w} is of another platform class", front=True)
        return True

    def _say_classes(self) -> None:
        """One line, when it changes: which platform classes joined and how each is checked."""
        groups: dict = {}
        for w, desc in self.platforms.items():
            if w not in self.banned:
                d = desc or self.platform
                groups.setdefault(d["key"], (d, []))[1].append(desc or {})
        summary = sorted((k, len(v[1])) for k, v in groups.items())
        if not groups or summary == self._classes_said:
            return
        self._classes_said = summary
        parts = []
        for key, (d, members) in sorted(groups.items(), key=lambda kv: kv[0] != self.platform["key"]):
            kernels = sorted({m.get("blas", "?") for m in members})
            simd = sorted({m.get("simd", "?") for m in members})
            if key == self.platform["key"]:
                how = ("checked against the master's replays (the same bits on every BLAS kernel and SIMD level)"
                       if self.checks_results else "trusted without checks (--spot-checks 0)")
            else:
                how = ("cannot be checked: no trusted evaluation of its class, so its results are not used (no ban)"
                       if self.checks_results else "trusted without checks (--spot-checks 0): its bits may differ")
            parts.append(f"[{PL.label(d)}{' (the master)' if key == self.platform['key'] else ''}: "
                         f"{len(members)} worker(s), BLAS {', '.join(kernels)}, SIMD {', '.join(simd)}: {how}]")
        self.log("redis: platform classes: " + " ".join(parts))

    def _back_up(self) -> None:
        """Hand out again, once, a chunk that has run ``backup_after`` times longer than the
        quickest finished chunk of this generation took per member (at least a second), when no
        job waits (a worker is idle)."""
        if not self.backup_after:
            return
        now, bd = time.monotonic(), self.board
        for jid in bd.running:
            self._started.setdefault(jid, now)
        if bd.waiting or not self._per_member:
            return
        for jid, worker in bd.running.items():
            if jid in self._done or jid in self._backed:
                continue
            a, b = bd.members[jid]
            expected = self._per_member * (b - a)
            if now - self._started[jid] > max(self.backup_after * expected, 1.0):
                self._backed.add(jid)
                self._info["backups"] += bd.requeue(jid, f"a backup: worker {worker} has run it "
                                                         f"{now - self._started[jid]:.1f} s, {expected:.1f} s expected",
                                                    front=True)

    # ---- trust
    def _trusted(self, res, a, b, jid) -> bool:
        """A trusted id's result (spot-checked) or the master's: used, and it settles what was held."""
        if res["worker"] != "master":
            if not self.verify.trusted(res["worker"]):    # banned, or back on probation, since
                self._want(jid, f"worker {res['worker']} is not trusted any more")
                return False
            lie = self.verify.lie(res, a, b)
            if lie:
                self._ban(res["worker"], lie)
                self._want(jid, "its worker was banned")
                return False
        self._accept(res, a, b, jid)
        for w, held in self._held.pop(jid, []):
            if jid not in self._done:     # the reference was a liar's, found out by this loop: hold again
                self._held.setdefault(jid, []).append((w, held))
                continue
            self._settle_one(w, held, a, b, self._used(a, b, jid))
        return jid in self._done

    def _hold(self, w, res, a, b, jid) -> None:
        """A result of an id on probation: kept aside until a trusted evaluation of its chunk."""
        held = self._held.setdefault(jid, [])
        if len(held) >= MAX_HELD:
            self._drop(f"chunk {jid} already has {MAX_HELD} results waiting for a trusted evaluation")
            return
        held.append((w, res))
        self._info["probation_checks"] += 1
        if w not in self._new_ids:
            self._new_ids.add(w)
            self.log(f"redis: worker {w} is new: its results wait for a trusted evaluation of their chunks "
                     f"(probation: {self.verify.probation})")
        self._want(jid, f"worker {w} is on probation")

    def _want(self, jid, why: str) -> None:
        """Chunk ``jid`` needs a trusted evaluation: queued again at the front for the workers and,
        where no id is trusted yet, evaluated by the master in the background (once)."""
        if jid in self._wanted or jid in self._done:
            return
        self._wanted[jid] = time.monotonic()
        self._info["requeued"] += self.board.requeue(jid, why, front=True)
        if not self.verify.any_trusted():
            self._evaluate_here(jid)

    def _evaluate_here(self, jid) -> None:
        if jid not in self._own and jid not in self._done:
            a, b = self.board.members[jid]
            self._own[jid] = self.verify.submit(a, b, jid == self.board.center_chunk)

    def _evaluate_unsettled(self) -> None:
        """Chunks that waited a lease time for a trusted worker are evaluated by the master."""
        now = time.monotonic()
        for jid, t in list(self._wanted.items()):
            if jid not in self._done and (now - t >= self.board.lease_seconds or not self.verify.any_trusted()):
                self._evaluate_here(jid)

    def _collect_own(self) -> bool:
        """The master's finished evaluations: used as trusted results."""
        done = False
        for jid, fut in list(self._own.items()):
            if not fut.done():
                continue
            del self._own[jid]
            try:
                res = fut.result()
            except Exception as exc:   # noqa: BLE001 -- the master's own environment failed
                raise EvaluationError(f"the master could not evaluate chunk {jid}: {exc.__class__.__name__}: {exc}") from None
            if jid not in self._done and res["generation"] == self.board.task.generation:
                a, b = self.board.members[jid]
                self._info["master_chunks"] += 1
                done = self._trusted(res, a, b, jid) or done
        return done

    def _settle_one(self, w, held, a, b, trusted) -> None:
        """Compare a held result with a trusted one: the id earns trust, or is banned. Where the
        trusted one is a worker's, a difference does not say who lied (a worker trusted since
        may lie now): the master evaluates the chunk and bans whichever differs from its own."""
        if w in self.banned:
            return
        lie = self.verify.lie(held, a, b, own=trusted)
        if lie and trusted["worker"] != "master":
            jid = self.board.chunk_of[a][2]
            own = self.verify.evaluate(a, b, held["center"] is not None)
            self._info["master_chunks"] += 1
            other = self.verify.lie(trusted, a, b, own=own)
            if other:
                self._ban(trusted["worker"], other)
                if jid not in self._done:
                    self._trusted(own, a, b, jid)
            lie, trusted = self.verify.lie(held, a, b, own=own), own
        if lie:
            self._ban(w, lie)
            return
        self._info["vouched"] += 1
        by = "the master" if trusted["worker"] == "master" else f"trusted worker {trusted['worker']}"
        self.verify.vouch(w, by, voucher=None if trusted["worker"] == "master" else trusted["worker"])
        for jid in list(self._held):      # its other held results count as a trusted id's now
            if not self.verify.trusted(w):    # not yet, or banned by one of them (this loop)
                break
            entries = self._held.get(jid, [])
            mine = [r for x, r in entries if x == w]
            if mine and jid not in self._done:
                self._held[jid] = [(x, r) for x, r in entries if x != w]
                a2, b2 = self.board.members[jid]
                self._trusted(mine[0], a2, b2, jid)

    def _used(self, a, b, jid) -> dict:
        """The values used for a finished chunk, as a result."""
        center = self._center[:2] if jid == self.board.center_chunk and self._center else None
        return {"returns": self._returns[a:b], "lengths": self._lengths[a:b], "center": center,
                "obs": None if self._obs is None else (self._obs[0][a:b], self._obs[1][a:b]), "worker": self._done[jid]}

    def _accept(self, res, a, b, jid) -> bool:
        self._returns[a:b], self._lengths[a:b] = res["returns"], res["lengths"]
        put_obs(self._obs, a, b, res["obs"])
        if res["center"] is not None:
            self._center = (*res["center"], res["worker"])
        self._done[jid] = res["worker"]
        if res["worker"] != "master" and res["worker"] not in self.verify.own:
            self.first_unchecked.setdefault(res["worker"], self.board.task.generation)
        self.accepted.append((self.board.task.generation, jid, res["worker"],
                              hashlib.sha256(res["returns"].tobytes()).hexdigest()[:16]))
        now = time.monotonic()
        self._slowest = max(self._slowest, now - self._published)
        if res["worker"] != "master":      # the quickest chunk's seconds per member: one taken at once
            rate = (now - self._published) / max(1, b - a)
            self._per_member = min(self._per_member or rate, rate)
        return True

    def _ban(self, worker, why) -> None:
        """Ban ``worker``; its other results of this generation are discarded and requeued, and
        where it had results used in an earlier generation the run goes back (``rollback``).
        The same for ids that were trusted on its word (on probation again)."""
        before = {w for w in self.verify.passed if self.verify.trusted(w)}
        if worker not in self.banned:
            self.verify.ban(worker, why)
        revoked = {w for w in before if not self.verify.trusted(w)} - {worker}
        self._discard(worker, banned=True)
        for w in revoked:
            self._discard(w, banned=False)

    def _discard(self, worker, banned: bool) -> None:
        """Drop what ``worker`` gave this generation; note the rollback its earlier results need."""
        g = self.board.task.generation
        first = self.first_unchecked.get(worker)
        if first is not None and first < g:
            self._rollback = first if self._rollback is None else min(self._rollback, first)
            self._rollback_ids.add(worker)
        lost = [j for j, who in self._done.items() if who == worker]
        for j in lost:
            self._done.pop(j)
            self._info["requeued"] += self.board.requeue(j, "its worker was banned" if banned else
                                                         "its worker is on probation again")
        if banned:
            for j, entries in self._held.items():
                self._held[j] = [(x, r) for x, r in entries if x != worker]
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
        return self._trusted(own, a, b, jid)

    def verify_center(self, center_seeds, reported: float) -> float:
        if self._center_reporter is None and self._center is not None and self._center[2] == "master":
            return reported        # played here
        w = self._center_reporter
        cr = self.verify.verify_center(self._task, center_seeds, reported, w)
        first = self.first_unchecked.get(w)
        if w in self.banned and first is not None:   # this generation's results may be its too: go back
            self._rollback = first if self._rollback is None else min(self._rollback, first)
            self._rollback_ids.add(w)
        return cr

    # ---- rollback and replay
    def rollback(self):
        """``(generation, ids)`` where a ban found that ids whose results were used since
        ``generation`` lied or were trusted on a liar's word: the caller goes back to the state
        before ``generation`` and evaluates again from there (the same tasks: every result
        is a function of (seed, generation, member)). None when nothing is to be replayed."""
        if self._rollback is None:
            return None
        g, ids = self._rollback, sorted(self._rollback_ids)
        self._rollback, self._rollback_ids = None, set()
        self.first_unchecked = {w: x for w, x in self.first_unchecked.items() if x < g}
        self.accepted = [e for e in self.accepted if e[0] < g]
        return g, ids

    def oldest_unchecked(self) -> int | None:
        """The first generation a later ban could send the run back to (None: no such result)."""
        live = [g for w, g in self.first_unchecked.items() if w not in self.banned]
        return min(live) if live else None

    def audit_state(self) -> dict:
        """What a resumed master needs to roll back for ids of the run before it (JSON)."""
        return {"first_unchecked": dict(self.first_unchecked), "banned": dict(self.banned)}

    def load_audit_state(self, state: dict) -> None:
        self.first_unchecked.update({str(w): int(g) for w, g in state.get("first_unchecked", {}).items()})
        for w, why in state.get("banned", {}).items():
            self.banned.setdefault(str(w), str(why))

    def close(self):
        self.verify.close()
        with contextlib.suppress(Exception):
            self.link.client.close()
