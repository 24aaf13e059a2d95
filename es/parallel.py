"""Milestone 2: evaluate a generation in parallel with joblib, bit-identical to one process.

Persistent loky workers, chunks aligned to the noise blocks, arrays through shared-memory
memmaps; a member's noise is a pure function of ``(seed, generation, member)``, so any worker
count gives the same run. Why per-job reseeding is not enough, and when it stays in-process:
docs/design.md#parallel-evaluation.
"""
from __future__ import annotations

import json
import logging
import time

import numpy as np
from joblib import Parallel, delayed

from .envs import make_problem, rebuildable
from .errors import ESError
from .evaluators import GenerationResult, evaluate_members
from .interfaces import Evaluator
from .strategy import GenerationTask


log = logging.getLogger(__name__)


SWITCH = 1.25     # how much faster the other way must be to leave the current one


class EvaluationError(ESError):
    """A member could not be evaluated (environment error, non-finite return)."""


_PROBLEMS: dict = {}


def _problem(key: str | None, problem):
    """The worker's copy of the problem, built once per process."""
    if key is None:
        return problem
    if key not in _PROBLEMS:
        _PROBLEMS[key] = make_problem(json.loads(key))
    return _PROBLEMS[key]


def evaluate_chunk(key, problem, fields: dict, center, start: int, stop: int, seeds, center_seeds):
    """Worker side: members ``[start, stop)`` (and the center if ``center_seeds``)."""
    problem = _problem(key, problem)
    task = GenerationTask(center=np.asarray(center, dtype=np.float32), **fields)
    members = np.arange(start, stop)
    try:
        return evaluate_members(problem, task, members, seeds, center_seeds)
    except Exception as exc:  # find the member that fails, so the message can name it
        for m in members:
            try:
                evaluate_members(problem, task, [m], seeds)
            except Exception as one:
                raise EvaluationError(f"member {m} of generation {task.generation} (run seed {task.seed}, episode "
                                      f"seeds {list(map(int, seeds))}) failed: {one.__class__.__name__}: {one}") from None
        raise EvaluationError(f"generation {task.generation} (run seed {task.seed}) failed: "
                              f"{exc.__class__.__name__}: {exc}") from None


def chunk_bounds(population: int, chunks: int, align: int = 32) -> list[tuple[int, int]]:
    """Contiguous chunks of whole antithetic pairs, aligned to noise blocks where possible."""
    size = -(-population // chunks)
    size = -(-size // align) * align if population >= align * chunks else size + size % 2
    return [(a, min(a + size, population)) for a in range(0, population, size)]


class ParallelEvaluator(Evaluator):
    name = "joblib"

    def __init__(self, problem, workers: int = 2, chunks_per_worker: int | None = None, adaptive: bool = True,
                 recheck: int = 25):
        if workers < 1:
            raise ESError(f"--workers must be >= 1, got {workers}")
        if chunks_per_worker is None:
            chunks_per_worker = problem.chunks_per_worker
        self.problem, self.workers, self.chunks_per_worker = problem, int(workers), int(chunks_per_worker)
        self.adaptive, self.recheck = adaptive, int(recheck)
        spec = problem.spec()
        # Environments travel as a JSON spec and are rebuilt once per worker; a Python
        # function problem travels as itself (loky pickles it; it never leaves this machine).
        self._key = json.dumps(spec, sort_keys=True) if rebuildable(spec) else None
        self._parallel = Parallel(n_jobs=self.workers, backend="loky", max_nbytes=0)
        self._parallel.__enter__()
        self._timing = {"local": None, "parallel": None}
        self._generations = 0
        self.mode = "parallel"
        self._announced = None

    def _choose(self) -> str:
        if not self.adaptive:
            return "parallel"
        n = self._generations
        if n == 0:
            return "local"
        if n == 1:
            return "parallel"
        if self.recheck and n % self.recheck == 0:   # workloads change: probe the other way
            return "parallel" if self.mode == "local" else "local"
        return self.mode

    def evaluate(self, task: GenerationTask, seeds, center_seeds) -> GenerationResult:
        how = self._choose()
        t0 = time.perf_counter()
        if how == "local":
            r, l, cr, cl = evaluate_members(self.problem, task, np.arange(task.population), seeds, center_seeds)
        else:
            r, l, cr, cl = self._dispatch(task, seeds, center_seeds)
        seconds = time.perf_counter() - t0
        work = max(int(l.sum()) + cl, task.population)   # env steps, or members for function problems
        self._timing[how] = seconds / work
        self._generations += 1
        if self.adaptive and None not in self._timing.values():
            self._decide()
        return GenerationResult(r, l, cr, cl)

    def _decide(self):
        """Take the faster way per env step; leave the current one only for a clearly faster other
        (``SWITCH``: one busy moment must not move a 2-core run onto one core)."""
        local, par = self._timing["local"], self._timing["parallel"]
        if self._announced is None:
            self.mode = "parallel" if par < local else "local"
        elif self.mode == "parallel" and local * SWITCH < par:
            self.mode = "local"
        elif self.mode == "local" and par * SWITCH < local:
            self.mode = "parallel"
        if self._announced != self.mode:
            ratio = local / par
            if self.mode == "local":
                log.info(f"parallel: in-process evaluation is faster for this workload ({1e6 * local:.2f} us vs "
                         f"{1e6 * par:.2f} us per env step with {self.workers} workers); staying in-process. "
                         "A larger population or a heavier environment will use the workers.")
            else:
                log.info(f"parallel: {self.workers} workers are {ratio:.2f}x faster than in-process; using them")
            self._announced = self.mode

    def _dispatch(self, task: GenerationTask, seeds, center_seeds):
        fields = {"seed": task.seed, "generation": task.generation, "sigma": task.sigma,
                  "antithetic": task.antithetic, "population": task.population, "noise": task.noise}
        seeds = [int(s) for s in seeds]
        center_seeds = [int(s) for s in center_seeds] if center_seeds is not None else []
        bounds = chunk_bounds(task.population, self.workers * self.chunks_per_worker)
        problem = None if self._key is not None else self.problem
        jobs = [delayed(evaluate_chunk)(self._key, problem, fields, task.center, a, b, seeds,
                                        center_seeds if i == len(bounds) - 1 else None)
                for i, (a, b) in enumerate(bounds)]
        out = self._parallel(jobs)
        returns = np.concatenate([o[0] for o in out])
        lengths = np.concatenate([o[1] for o in out])
        return returns, lengths, out[-1][2], out[-1][3]

    def close(self):
        if self._parallel is not None:
            self._parallel.__exit__(None, None, None)
            self._parallel = None
