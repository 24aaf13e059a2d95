"""Which results may change the center. Evaluation is a pure function of (parameters, seed),
so the master can replay any member and compare bit for bit.

* A worker id is on probation until ``probation`` of its results, evaluated here in full, were
  identical; meanwhile the master's own values are used, so an id that has not earned trust
  cannot change the center and a fresh id per message gains nothing. Each chunk is evaluated
  here at most once per generation: an attacker can at worst slow a run to one process.
* Trusted ids are spot-checked: ``spot_checks`` members per generation (default one per 64)
  in distinct chunks, picked by a generator seeded from ``secrets`` (no worker can predict
  them) and replayed in a thread while the workers work.
* A mismatch bans the id for the run. An error report is reproduced here: a chunk that
  evaluates fine means the report was false and the reporter is banned.
* ``spot_checks=0`` trusts every id that is not banned (a private cluster).
"""
from __future__ import annotations

import math
import secrets
import threading
import time

import numpy as np

from ..errors import ESError
from ..evaluators import evaluate_members


class Verifier:
    def __init__(self, problem, spot_checks: int | None, probation: int, log):
        self.problem, self.spot_checks, self.probation, self.log = problem, spot_checks, int(probation), log
        self._rng = np.random.Generator(np.random.PCG64(secrets.randbits(128)))   # unpredictable
        self.banned: dict = {}   # worker id -> reason
        self.passed: dict = {}   # worker id -> results found identical when evaluated here in full

    def start(self, task, seeds, center_seeds, bounds) -> None:
        """A new generation: the spot checks start replaying in a thread."""
        self.task, self.seeds, self.center_seeds, self.seconds = task, seeds, center_seeds, 0.0
        k = self.spot_checks if self.spot_checks is not None else max(1, math.ceil(task.population / 64))
        self._replay = _Replay(self._spot_check, task, seeds, bounds, min(k, len(bounds)))

    def _spot_check(self, task, seeds, bounds, k) -> dict:
        """member -> (return, length) measured here, for ``k`` members in distinct chunks."""
        if k <= 0:
            return {}
        members = sorted(int(self._rng.integers(*bounds[i])) for i in self._rng.choice(len(bounds), k, replace=False))
        r, l, _, _ = evaluate_members(self.problem, task, members, seeds)
        return {m: (float(r[i]), int(l[i])) for i, m in enumerate(members)}

    def checks(self) -> dict:
        return self._replay.checks()

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
        """How ``res`` differs from the master's own full evaluation ``own``, or else from the
        spot checks in ``[a, b)``; None if it does not."""
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
        self.banned[worker] = why
        self.log(f"redis: banned worker {worker}: {why}")

    def verify_center(self, task, center_seeds, reported: float, reporter) -> float:
        """Replay the center of the last generation here (before a goal stops the run)."""
        _, _, cr, _ = evaluate_members(self.problem, task, [], [], center_seeds)
        if cr != reported and reporter is not None:
            self.ban(reporter, f"reported the center's return as {reported!r}, the master measured {cr!r}")
        return cr


class _Replay:
    """The master's spot checks, in a thread: the master is otherwise idle while it waits for
    results (ALE and NumPy release the GIL)."""

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
