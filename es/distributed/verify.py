"""Which results may change the center; evaluation is a pure function of (parameters, seed),
so a result is checked by evaluating it again and comparing bit for bit.

A worker id is on probation until ``probation`` of its results were identical to a trusted
evaluation of the same chunk: the master's own, or a trusted worker's. Meanwhile its results
are held, never used (``master.RedisEvaluator``), so an untrusted id cannot change the center
and a fresh id per message gains nothing. The master's own evaluations run here, in one
background thread, while it goes on receiving (the start of a fresh cluster is not serialized
on the master); each chunk is evaluated here at most once per generation, so at worst a run
slows to one process. The master's own workers (``trusted``: ids it issued and handed to the
processes it started) are trusted from their first result.

Trusted ids are spot-checked: ``spot_checks`` members per generation (default one per 64), in
distinct chunks, picked unpredictably (``secrets``). A mismatch bans the id. ``spot_checks=0``
trusts every id not banned (a private cluster). The master's own workers are not spot-checked:
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


def _obs_row(obs, i: int) -> bytes:
    """Member ``i``'s observation sums and squares as bytes (compared bit for bit); b"" without."""
    return b"" if obs is None else obs[0][i].tobytes() + obs[1][i].tobytes()


class Verifier:
    def __init__(self, problem, spot_checks: int | None, probation: int, log, trusted=()):
        self.problem, self.spot_checks, self.probation, self.log = problem, spot_checks, int(probation), log
        self._rng = np.random.Generator(np.random.PCG64(secrets.randbits(128)))   # unpredictable
        self.banned: dict = {}   # worker id -> reason
        self.passed: dict = dict.fromkeys(trusted, max(1, self.probation))   # worker id -> results found identical
        self.own = frozenset(trusted)            # ids the master issued to processes it started
        self._replay: Future | None = None
        self._spot_args: tuple = ()
        # The master's own evaluations: spot checks, then chunks, one at a time (one problem, one
        # set of games) while the master goes on receiving (ALE and NumPy release the GIL).
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="es-verify")
        self.seconds = self.spot_seconds = self.center_seconds = 0.0

    def start(self, task, seeds, center_seeds, bounds) -> None:
        """A new generation: the spot checks start replaying in the background."""
        self.task, self.seeds, self.center_seeds = task, seeds, center_seeds
        self.seconds = self.spot_seconds = self.center_seconds = 0.0
        k = self.spot_checks if self.spot_checks is not None else max(1, math.ceil(task.population / 64))
        self._spot_args, self._replay = (task, seeds, bounds, min(k, len(bounds))), None
        if self._others_trusted():
            self._replay = self._pool.submit(self._spot_check, *self._spot_args)

    def _others_trusted(self) -> bool:
        """Is an id the master did not issue trusted? Only such ids' results are spot-checked."""
        return any(w not in self.own for w in self._passed_ids())

    def _passed_ids(self):
        """The ids that passed probation and are not banned."""
        return (w for w, n in self.passed.items() if n >= self.probation and w not in self.banned)

    def _spot_check(self, task, seeds, bounds, k) -> dict:
        """member -> (return, length, observation statistics) measured here, for ``k`` members in
        distinct chunks."""
        if k <= 0:
            return {}
        t0 = time.perf_counter()
        members = sorted(int(self._rng.integers(*bounds[i])) for i in self._rng.choice(len(bounds), k, replace=False))
        r, l, _, _, obs = evaluate_members(self.problem, task, members, seeds)
        self.spot_seconds = time.perf_counter() - t0
        return {m: (float(r[i]), int(l[i]), _obs_row(obs, i)) for i, m in enumerate(members)}

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

    def checked(self) -> int:
        """How many members were spot-checked this generation (none is replayed to count them)."""
        return len(self.checks()) if self._replay is not None else 0

    def lie(self, res: dict, a: int, b: int, own: dict | None = None) -> str | None:
        """How ``res`` differs from a trusted evaluation ``own``, else the spot checks; or None.
        The master's own workers' results are not spot-checked (see the module's docstring)."""
        if own is None and res.get("worker") in self.own:
            return None
        checks = {m: (float(own["returns"][m - a]), int(own["lengths"][m - a]), _obs_row(own.get("obs"), m - a))
                  for m in range(a, b)} if own else {m: v for m, v in self.checks().items() if a <= m < b}
        for m, (want_r, want_l, want_obs) in checks.items():
            got_r, got_l = float(res["returns"][m - a]), int(res["lengths"][m - a])
            by = "the master" if own is None or own["worker"] == "master" else f"trusted worker {own['worker']}"
            if got_r != want_r or got_l != want_l:
                return (f"member {m} of generation {self.task.generation} returned {got_r!r} in {got_l} steps, "
                        f"{by} measured {want_r!r} in {want_l}")
            if _obs_row(res.get("obs"), m - a) != want_obs:
                return (f"member {m} of generation {self.task.generation} reported observation statistics that "
                        f"differ from what {by} measured")
        if own and own["center"] != res["center"]:
            return f"the center returned {res['center']}, a trusted evaluation measured {own['center']}"
        return None

    def vouch(self, worker: str, by: str = "the master") -> None:
        self.passed[worker] = n = self.passed.get(worker, 0) + 1
        if n == self.probation:
            self.log(f"redis: worker {worker} passed probation ({n} result(s) identical to {by}'s)")

    def ban(self, worker: str, why: str) -> None:
        self.log(f"redis: banned worker {worker}: {self.banned.setdefault(worker, why)}")

    def verify_center(self, task, center_seeds, reported: float, reporter) -> float:
        """Replay the center of the last generation here (before a goal stops the run)."""
        cr, _ = self._pool.submit(evaluate_center, self.problem, task, center_seeds).result()
        if cr != reported and reporter is not None:
            self.ban(reporter, f"reported the center's return as {reported!r}, the master measured {cr!r}")
        return cr

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
