"""Which results may change the center; evaluation is a pure function of (parameters, seed),
so the master replays and compares bit for bit. A worker id is on probation until
``probation`` of its results, evaluated here in full, were identical; meanwhile the master's
values are used, so an untrusted id cannot change the center and a fresh id per message
gains nothing (a chunk is evaluated here at most once per generation: at worst a run slows
to one process). Trusted ids are spot-checked: ``spot_checks`` members per generation
(default one per 64), in distinct chunks, picked unpredictably (``secrets``). A mismatch bans
the id. ``spot_checks=0`` trusts every id not banned (a private cluster).
"""
from __future__ import annotations

import math
import secrets
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..errors import ESError
from ..evaluators import evaluate_members


class Verifier:
    def __init__(self, problem, spot_checks: int | None, probation: int, log):
        self.problem, self.spot_checks, self.probation, self.log = problem, spot_checks, int(probation), log
        self._rng = np.random.Generator(np.random.PCG64(secrets.randbits(128)))   # unpredictable
        self.banned: dict = {}   # worker id -> reason
        self.passed: dict = {}   # worker id -> results found identical when evaluated here in full
        self._pool = ThreadPoolExecutor(1)   # spot checks run while the master waits (ALE, NumPy release the GIL)

    def start(self, task, seeds, center_seeds, bounds) -> None:
        """A new generation: the spot checks start replaying in a thread."""
        self.task, self.seeds, self.center_seeds, self.seconds, self.spot_seconds = task, seeds, center_seeds, 0.0, 0.0
        k = self.spot_checks if self.spot_checks is not None else max(1, math.ceil(task.population / 64))
        self._replay = self._pool.submit(self._spot_check, task, seeds, bounds, min(k, len(bounds)))

    def _spot_check(self, task, seeds, bounds, k) -> dict:
        """member -> (return, length) measured here, for ``k`` members in distinct chunks."""
        if k <= 0:
            return {}
        t0 = time.perf_counter()
        members = sorted(int(self._rng.integers(*bounds[i])) for i in self._rng.choice(len(bounds), k, replace=False))
        r, l, _, _ = evaluate_members(self.problem, task, members, seeds)
        self.spot_seconds = time.perf_counter() - t0
        return {m: (float(r[i]), int(l[i])) for i, m in enumerate(members)}

    def checks(self) -> dict:
        try:
            return self._replay.result()
        except Exception as exc:  # noqa: BLE001 -- the master's own environment failed
            raise ESError(f"the master could not replay its spot checks: {exc.__class__.__name__}: {exc}") from None

    def trusted(self, worker: str) -> bool:
        return worker not in self.banned and (self.spot_checks == 0 or self.passed.get(worker, 0) >= self.probation)

    def evaluate(self, a: int, b: int, center: bool) -> dict:
        """Chunk ``[a, b)`` (and the center) evaluated here, as a result; exceptions propagate."""
        self.checks()   # the replay thread uses the same problem: let it finish first
        t0 = time.perf_counter()
        r, l, cr, cl = evaluate_members(self.problem, self.task, range(a, b), self.seeds,
                                        self.center_seeds if center else None)
        self.seconds += time.perf_counter() - t0
        return {"returns": r, "lengths": l, "center": (cr, cl) if center else None, "worker": "master"}

    def lie(self, res: dict, a: int, b: int, own: dict | None = None) -> str | None:
        """How ``res`` differs from the master's evaluation ``own``, else the spot checks; or None."""
        checks = {m: (float(own["returns"][m - a]), int(own["lengths"][m - a])) for m in range(a, b)} if own else \
            {m: v for m, v in self.checks().items() if a <= m < b}
        for m, (want_r, want_l) in checks.items():
            got_r, got_l = float(res["returns"][m - a]), int(res["lengths"][m - a])
            if got_r != want_r or got_l != want_l:
                return (f"member {m} of generation {self.task.generation} returned {got_r!r} in {got_l} steps, "
                        f"the master measured {want_r!r} in {want_l}")
        if own and own["center"] != res["center"]:
            return f"the center returned {res['center']}, the master measured {own['center']}"
        return None

    def vouch(self, worker: str) -> None:
        self.passed[worker] = n = self.passed.get(worker, 0) + 1
        if n == self.probation:
            self.log(f"redis: worker {worker} passed probation ({n} result(s) evaluated here in full)")

    def ban(self, worker: str, why: str) -> None:
        self.log(f"redis: banned worker {worker}: {self.banned.setdefault(worker, why)}")

    def verify_center(self, task, center_seeds, reported: float, reporter) -> float:
        """Replay the center of the last generation here (before a goal stops the run)."""
        _, _, cr, _ = evaluate_members(self.problem, task, [], [], center_seeds)
        if cr != reported and reporter is not None:
            self.ban(reporter, f"reported the center's return as {reported!r}, the master measured {cr!r}")
        return cr
