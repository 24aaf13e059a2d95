"""Which results may change the center; evaluation is a pure function of (parameters, seed),
so a result is checked by evaluating it again and comparing bit for bit.

A worker id is on probation until ``probation`` of its results were identical to a trusted
evaluation of the same chunk: the master's own, or a trusted worker's. Meanwhile its results
are held, never used (``master.RedisEvaluator``), so an untrusted id cannot change the center
and a fresh id per message gains nothing. The master's own evaluations run here, in one
background thread, while it goes on receiving (the start of a fresh cluster is not serialized
on the master); each chunk is evaluated here about once per generation (once more where a held
result and a trusted worker's differ: one of them is banned for it), so at worst a run slows
to one process. The master's own workers (``trusted``: ids it issued and handed to the
processes it started) are trusted from their first result.

Trusted ids are spot-checked, member by member: each member of a chunk that an id the master
did not issue returns is replayed here with probability ``rate_for(id)``, independently and
unpredictably (a ``secrets``-seeded generator draws one uniform number per member and
generation, which no worker sees). A mismatch bans the id. The bound (docs/distributed.md,
"Hostile workers"): an id that has told L lies escaped with probability at most (1 - p)^L,
where p = ``rate`` is the floor of every id's rate; the target ``catch_within`` = N sets
p = 1 - DELTA^(1/N), so that a liar is caught by its N-th lie with probability at least
1 - DELTA (default N = 442: p = 1/64.5, the cost of the one member in 64 replayed before). An id
with few verified results is checked more: its rate is max(p, 1/(4 (1 + v))) with v its results
(chunks) found consistent so far, its probation included: 1/8 after probation, the floor after
16 (BOINC's adaptive replication in one line; an honest id costs about 0.6 chunks of extra
replays in all). ``spot_checks=0`` trusts every
id not banned (a private cluster); ``spot_checks=k`` sets p = k / population instead of the
target (about k members a generation, the older meaning of the option). The master's own workers are not spot-checked:
they run its code on its machine, and their ids are secrets (handed through their environment;
the worker role can read neither leases nor results). So the replay runs only in a generation
in which an id the master did not issue is trusted, or becomes trusted; with local workers only
it used to take the master's CPU from them (population 128: two replayed episodes per
generation beside the center's one, where each of 16 workers plays 8).
"""
from __future__ import annotations

import math
import secrets
import time
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from ..errors import ESError
from ..evaluators import evaluate_center, evaluate_members
from ..shaping import ranks


def obs_row(obs, i: int) -> bytes:
    """Member ``i``'s observation sums and squares as bytes (compared bit for bit); b"" without."""
    return b"" if obs is None else obs[0][i].tobytes() + obs[1][i].tobytes()


DELTA = 1e-3          # a liar escapes its target number of lies with at most this probability
EXTREME_SHARE = 64    # the members within ceil(n / 64) ranks of either end are replayed before the update
CATCH_WITHIN = 442    # the default target: caught by its 442nd lie (rate 1/64.5)
NEW_ID_SCALE = 4      # an id with v verified results is replayed at 1/(4 (1 + v)) at least


def rate_for_target(catch_within: int, delta: float = DELTA) -> float:
    """The per-member replay probability p with (1 - p)^catch_within <= delta."""
    if not catch_within >= 1:
        raise ESError(f"the spot checks' target must be at least 1 lie, got {catch_within}")
    return -math.expm1(math.log(delta) / catch_within)


def chunks_to_catch(f: float, n: int, p: float, delta: float = DELTA) -> int:
    """Chunks of ``n`` members within which an id lying on a fraction ``f`` of them is caught with
    probability at least 1 - delta when each member is replayed with probability ``p``:
    the least c with (1 - p)^(ceil(f n) c) <= delta."""
    lies = max(1, math.ceil(f * n - 1e-9))
    return math.ceil(math.log(delta) / (lies * math.log1p(-p)) - 1e-9)   # not 443 for 442.0000000001


def mismatch(generation: int, m: int, got: tuple, want: tuple, by: str) -> str | None:
    """How member ``m``'s ``(return, length, observation statistics)`` as reported, ``got``,
    differs from ``want`` as ``by`` measured it (compared bit for bit); or None."""
    (got_r, got_l, got_obs), (want_r, want_l, want_obs) = got, want
    what = f"member {m} of generation {generation}"
    if got_r != want_r or got_l != want_l:
        return f"{what} returned {got_r!r} in {got_l} steps, {by} measured {want_r!r} in {want_l}"
    if got_obs != want_obs:
        return f"{what} reported observation statistics that differ from what {by} measured"
    return None


def extreme_members(returns, per_side: int) -> np.ndarray:
    """The members whose rank (ties share their mean rank, as ``es.shaping.ranks``) is within
    ``per_side`` of either end: those whose centered-rank weight is within ``per_side / (n - 1)``
    of +-1/2, the largest of an update. A tied block qualifies only as a whole (at most
    ``2 per_side + 1`` members a side), so a lie cannot hide in a tie."""
    r = ranks(np.asarray(returns, dtype=np.float64))
    return np.flatnonzero((r <= per_side) | (r >= len(r) - 1 - per_side))


def extremes_per_side(population: int) -> int:
    return -(-population // EXTREME_SHARE)


class Verifier:
    def __init__(self, problem, spot_checks: int | None, probation: int, log, trusted=(),
                 catch_within: int | None = None):
        self.problem, self.spot_checks, self.probation, self.log = problem, spot_checks, int(probation), log
        self.target = rate_for_target(catch_within or CATCH_WITHIN)
        self.rate = 0.0 if spot_checks == 0 else self.target
        self.verified: dict = {}   # worker id -> its results found consistent with a trusted evaluation
        self.vouched_by: dict = {}   # worker id -> the trusted workers whose results vouched for it
        self._rng = np.random.Generator(np.random.PCG64(secrets.randbits(128)))   # unpredictable
        self.banned: dict = {}   # worker id -> reason
        self.passed: dict = dict.fromkeys(trusted, max(1, self.probation))   # worker id -> results found identical
        self.own = frozenset(trusted)            # ids the master issued to processes it started
        self._replay: Future | None = None
        self._spot_args: tuple = ()
        self._u, self._extra = np.zeros(0), {}
        # The master's own evaluations: spot checks, then chunks, one at a time (one problem, one
        # set of games) while the master goes on receiving (ALE and NumPy release the GIL).
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="es-verify")
        self.seconds = self.spot_seconds = self.center_seconds = 0.0

    def start(self, task, seeds, center_seeds, bounds) -> None:
        """A new generation: the spot checks at the floor rate start replaying in the background."""
        self.task, self.seeds, self.center_seeds = task, seeds, center_seeds
        self.seconds = self.spot_seconds = self.center_seconds = 0.0
        if self.spot_checks:          # the older meaning: about k members a generation
            self.rate = min(1.0, self.spot_checks / task.population)
        self._u = self._rng.random(task.population)    # member m of id w is replayed iff u[m] < rate_for(w)
        self._extra: dict = {}
        members = [int(m) for m in np.flatnonzero(self._u < self.rate)]
        self._spot_args, self._replay = (task, seeds, members), None
        if self._others_trusted():
            self._replay = self._pool.submit(self._spot_check, *self._spot_args)

    def rate_for(self, worker: str) -> float:
        """The probability that each member ``worker`` returns is replayed: more while it has few
        verified results."""
        return 0.0 if self.rate == 0 else max(self.rate, 1.0 / (NEW_ID_SCALE * (1 + self.verified.get(worker, 0))))

    def _others_trusted(self) -> bool:
        """Is an id the master did not issue trusted? Only such ids' results are spot-checked."""
        return any(w not in self.own for w in self._passed_ids())

    def _passed_ids(self):
        """The ids that passed probation and are not banned."""
        return (w for w, n in self.passed.items() if n >= self.probation and w not in self.banned)

    def _spot_check(self, task, seeds, members) -> dict:
        """member -> (return, length, observation statistics) measured here, for ``members``."""
        if not members:
            return {}
        t0 = time.perf_counter()
        r, l, _, _, obs = evaluate_members(self.problem, task, members, seeds)
        self.spot_seconds += time.perf_counter() - t0
        return {m: (float(r[i]), int(l[i]), obs_row(obs, i)) for i, m in enumerate(members)}

    def checks(self) -> dict:
        """The spot checks of this generation; replayed now if none ran yet (a result of an id
        the master did not issue, trusted since the generation began, is checked like any)."""
        if self._replay is None:
            self._replay = self._pool.submit(self._spot_check, *self._spot_args)
        try:
            return self._replay.result()
        except Exception as exc:  # noqa: BLE001 -- the master's own environment failed
            raise ESError(f"the master could not replay its spot checks: {exc.__class__.__name__}: {exc}") from None

    def trusted(self, worker: str) -> bool:
        return worker not in self.banned and (self.spot_checks == 0 or self.passed.get(worker, 0) >= self.probation)

    def any_trusted(self) -> bool:
        """Is any worker id trusted (so that a chunk held for probation may be settled by a peer)?"""
        return self.spot_checks == 0 or any(True for _ in self._passed_ids())

    def submit(self, a: int, b: int, center: bool) -> Future:
        """Chunk ``[a, b)`` (and the center) evaluated here in the background, after what is queued."""
        return self._pool.submit(self._evaluate, self.task, self.seeds, self.center_seeds if center else None, a, b)

    def submit_center(self) -> Future:
        """The center's ``(return, length)`` played here in the background, after the spot checks."""
        def play(task, center_seeds):
            t0 = time.perf_counter()
            cr, cl = evaluate_center(self.problem, task, center_seeds)
            self.center_seconds = time.perf_counter() - t0
            return cr, cl
        return self._pool.submit(play, self.task, self.center_seeds)

    def evaluate(self, a: int, b: int, center: bool) -> dict:
        """Chunk ``[a, b)`` (and the center) evaluated here now, as a result; exceptions propagate."""
        return self.submit(a, b, center).result()

    def _evaluate(self, task, seeds, center_seeds, a, b) -> dict:
        t0 = time.perf_counter()
        r, l, cr, cl, obs = evaluate_members(self.problem, task, range(a, b), seeds, center_seeds)
        if task is self.task:
            self.seconds += time.perf_counter() - t0
        return {"returns": r, "lengths": l, "center": (cr, cl) if center_seeds is not None else None,
                "obs": obs, "worker": "master", "generation": task.generation}

    def measured(self) -> dict:
        """member -> (return, length, observation statistics) the master measured this
        generation so far, without waiting (spot checks)."""
        out = dict(self._extra)
        if self._replay is not None and self._replay.done() and self._replay.exception() is None:
            out.update(self._replay.result())
        return out

    def replay(self, members) -> dict:
        """``members`` played here now: member -> (return, length, observation statistics)."""
        try:
            return self._pool.submit(self._spot_check, self.task, self.seeds, [int(m) for m in members]).result()
        except Exception as exc:  # noqa: BLE001 -- the master's own environment failed
            raise ESError(f"the master could not replay members {list(members)[:8]}: "
                          f"{exc.__class__.__name__}: {exc}") from None

    def checked(self) -> int:
        """How many members were spot-checked this generation (none is replayed to count them)."""
        return (len(self.checks()) if self._replay is not None else 0) + len(self._extra)

    def lie(self, res: dict, a: int, b: int, own: dict | None = None) -> str | None:
        """How ``res`` differs from a trusted evaluation ``own``, else the spot checks; or None.
        The master's own workers' results are not spot-checked (see the module's docstring)."""
        w = res.get("worker")
        if own is None and (w in self.own or w == "master"):
            return None
        if own:
            checks = {m: (float(own["returns"][m - a]), int(own["lengths"][m - a]), obs_row(own.get("obs"), m - a))
                      for m in range(a, b)}
        else:
            rate = self.rate_for(w)
            mine = [m for m in range(a, b) if self._u[m] < rate]
            pre = self.checks() if any(self._u[m] < self.rate for m in mine) else {}
            missing = [m for m in mine if m not in pre and m not in self._extra]
            if missing:   # an id with few verified members: more of its members replayed, now
                self._extra.update(self._pool.submit(self._spot_check, self.task, self.seeds, missing).result())
            checks = {m: pre[m] if m in pre else self._extra[m] for m in mine}
        by = "the master" if own is None or own["worker"] == "master" else f"trusted worker {own['worker']}"
        for m, want in checks.items():
            got = float(res["returns"][m - a]), int(res["lengths"][m - a]), obs_row(res.get("obs"), m - a)
            why = mismatch(self.task.generation, m, got, want, by)
            if why:
                return why
        if own and own["center"] != res["center"]:
            return f"the center returned {res['center']}, a trusted evaluation measured {own['center']}"
        if own is None and w is not None and checks:
            self.verified[w] = self.verified.get(w, 0) + 1
        return None

    def vouch(self, worker: str, by: str = "the master", voucher: str | None = None) -> None:
        """``worker``'s result equalled a trusted evaluation (by ``voucher``, a trusted worker, or
        the master where None)."""
        self.passed[worker] = n = self.passed.get(worker, 0) + 1
        self.verified[worker] = self.verified.get(worker, 0) + 1
        if voucher is not None:
            self.vouched_by.setdefault(worker, set()).add(voucher)
        if n == self.probation:
            self.log(f"redis: worker {worker} passed probation ({n} result(s) identical to {by}'s)")

    def ban(self, worker: str, why: str) -> None:
        """Ban ``worker``; ids that earned trust on its word go back to probation."""
        self.log(f"redis: banned worker {worker}: {self.banned.setdefault(worker, why)}")
        for other, by in self.vouched_by.items():
            if worker in by and other not in self.own and other not in self.banned and self.passed.get(other):
                self.passed[other], self.verified[other] = 0, 0
                self.log(f"redis: worker {other} is on probation again: it was vouched for by banned worker {worker}")

    def verify_center(self, task, center_seeds, reported: float, reporter) -> float:
        """Replay the center of the last generation here (before a goal stops the run)."""
        cr, _ = self._pool.submit(evaluate_center, self.problem, task, center_seeds).result()
        if cr != reported and reporter is not None:
            self.ban(reporter, f"reported the center's return as {reported!r}, the master measured {cr!r}")
        return cr

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
