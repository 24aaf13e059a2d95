"""Milestone 2: evaluate a generation in parallel with joblib, bit-identical to one process.

Persistent loky workers, warmed before they are timed; each generation cut into chunks that
shrink towards its end (``guided_bounds``), handed out largest first, while this process plays
the center's episodes; a member's noise is a pure function of ``(seed, generation, member)``,
so any worker count and any chunking give the same run. Why per-job reseeding is not enough,
and when it stays in-process: docs/design.md#parallel-evaluation; where the time goes on
many cores: docs/distributed.md#scaling.
"""
from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from threadpoolctl import threadpool_limits

from .envs import make_problem, rebuildable
from .errors import ESError
from .evaluators import GenerationResult, evaluate_center, evaluate_members, member_obs, put_obs
from .interfaces import Evaluator
from .strategy import GenerationTask


log = logging.getLogger(__name__)


SWITCH = 1.25          # how much faster the other way must be to leave the current one
RECHECK_WITHIN = 1.5   # probe the slower way again only if it was within this factor: a probe of a way
                       # 16x slower would cost 16 generations' time every `recheck` generations
HAND_OVER_SLICES = 8   # while the workers start, members are played here in slices of 1/8 (or 1/N) of a generation
IDLE_REWARM = 240.0    # seconds without parallel work after which workers are warmed again before use
                       # (loky stops workers idle for 300 s)


class EvaluationError(ESError):
    """A member could not be evaluated (environment error, non-finite return)."""


_PROBLEMS: dict = {}


def _problem(key: str | None, problem):
    """The worker's copy of the problem, built once per process; the process's BLAS runs on
    one thread from then on, whatever loky allowed it (cores // workers: 4 threads each for 4
    workers on 16 cores, which made Pong's small matmuls 1.5-5x dearer per step)."""
    if not _PROBLEMS:
        _PROBLEMS["blas"] = threadpool_limits(limits=1, user_api="blas")   # kept: the limit lasts
    if key is None:
        return problem
    if key not in _PROBLEMS:
        _PROBLEMS[key] = make_problem(json.loads(key))
    return _PROBLEMS[key]


def evaluate_chunk(key, problem, fields: dict, center, start: int, stop: int, seeds, center_seeds):
    """Worker side: members ``[start, stop)`` (and the center if ``center_seeds``); returns
    returns, lengths, center return, center length, the members' observation statistics (or
    None) and the seconds it took."""
    t0 = time.perf_counter()
    problem = _problem(key, problem)
    task = GenerationTask(center=np.asarray(center, dtype=np.float32), **fields)
    members = np.arange(start, stop)
    try:
        return (*evaluate_members(problem, task, members, seeds, center_seeds), time.perf_counter() - t0)
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


def guided_bounds(population: int, workers: int, unit: int = 2) -> list[tuple[int, int]]:
    """Chunks for ``workers`` that each take the next chunk when they finish one: rounds of one
    chunk per worker, each round sharing out half of what is left, down to one ``unit`` (an
    antithetic pair). Listed in member order, smallest first; handed out from the end, the
    largest go first and the smallest last, so workers finish within a pair's time of each
    other however their speeds differ (docs/distributed.md#scaling)."""
    if workers <= 1:
        return [(0, population)] if population else []
    left, sizes = -(-population // unit), []
    while left:
        size = -(-left // (2 * workers))
        for _ in range(min(workers, -(-left // size))):
            sizes.append(min(size, left))
            left -= sizes[-1]
    bounds, a = [], 0
    for size in reversed(sizes):
        bounds.append((a, min(a + size * unit, population)))
        a = bounds[-1][1]
    return bounds


def dispatch_order(bounds) -> list[int]:
    """Indices of ``bounds`` in the order they are handed out: the last chunk (the largest of a
    guided layout; where a worker plays the center, the one that does) first."""
    return list(range(len(bounds) - 1, -1, -1))


def warm_worker(key, problem, episodes: int, barrier: str | None = None, workers: int = 1, wait: float = 120.0):
    """Worker side: build the problem and what its first ``episodes`` need (``Problem.warm_up``);
    with a ``barrier`` folder, wait there until ``workers`` processes have arrived, so that
    ``workers`` such jobs warm ``workers`` different processes."""
    problem = _problem(key, problem)
    problem.warm_up(episodes)
    if barrier is not None:
        Path(barrier, str(os.getpid())).touch()
        deadline = time.monotonic() + wait
        while len(os.listdir(barrier)) < workers and time.monotonic() < deadline:
            time.sleep(0.01)
    return os.getpid()


class ParallelEvaluator(Evaluator):
    """joblib (loky) workers, warmed in the background from the start; with ``adaptive`` it
    plays members in this process until they are warm and hands them the rest
    (``_hand_over``), then times a warm generation of theirs against this process's and keeps
    the faster (``_decide``)."""
    name = "joblib"

    def __init__(self, problem, workers: int = 2, chunks_per_worker: int | None = None, adaptive: bool = True,
                 recheck: int = 25):
        if workers < 1:
            raise ESError(f"--workers must be >= 1, got {workers}")
        # An explicit chunks_per_worker cuts even chunks (benchmarks compare them); else the
        # problem's: 1 for batched problems (one array computation per worker), else guided.
        self.guided = chunks_per_worker is None and problem.chunks_per_worker > 1
        self.problem, self.workers = problem, int(workers)
        self.chunks_per_worker = int(chunks_per_worker or problem.chunks_per_worker)
        self.adaptive, self.recheck = adaptive, int(recheck)
        spec = problem.spec()
        # Environments travel as a JSON spec and are rebuilt once per worker; a Python
        # function problem travels as itself (loky pickles it; it never leaves this machine).
        self._key = json.dumps(spec, sort_keys=True) if rebuildable(spec) else None
        # Chunks are our batches (batch_size=1: joblib's auto-batching would hand two chunks to
        # one worker); all are queued at once, the largest first. Arrays under 1 MB are pickled
        # (a center of 100k float32 is 0.4 ms), larger ones go through shared-memory memmaps.
        self._parallel = Parallel(n_jobs=self.workers, backend="loky", batch_size=1, pre_dispatch="all")
        self._parallel.__enter__()
        self._timing = {"local": deque(maxlen=5), "parallel": deque(maxlen=5)}   # seconds per env step
        self._generations = 0
        self._probe = False          # the other way is due to be timed again
        self.mode = "local" if adaptive else "parallel"     # adaptive: in-process until the workers are warm
        self._announced = None
        self._warming = ThreadPoolExecutor(1, thread_name_prefix="es-warm")
        self._center_pool = ThreadPoolExecutor(1, thread_name_prefix="es-center")
        self._warm = None            # the future of the workers' warm-up
        self._warm_episodes = 0      # what they were warmed for
        self._last_parallel = time.monotonic()
        self._time_center = False    # time this process on the center's episodes (workers warmed first)

    # ---- which way
    def bounds(self, population: int) -> list[tuple[int, int]]:
        if self.guided:
            return guided_bounds(population, self.workers)
        return chunk_bounds(population, self.workers * self.chunks_per_worker)

    def _ready(self, episodes: int) -> bool:
        """Are the workers warm for chunks of ``episodes``? If not, warm them in the background."""
        idle = time.monotonic() - self._last_parallel > IDLE_REWARM   # loky stops idle workers
        if self._warm is None or idle or episodes > self._warm_episodes:
            if self._warm is not None and not self._warm.done():
                return False
            self._warm_episodes, self._last_parallel = max(episodes, self._warm_episodes), time.monotonic()
            self._warm = self._warming.submit(self._warm_up, self._warm_episodes)
        if not self._warm.done():
            return False
        self._warm.result()          # a worker that cannot build the problem: say so here
        return True

    def warm(self, episodes: int = 1, timeout: float | None = None) -> None:
        """Start the workers and build the problem in each now, and wait until they are ready
        (e.g. before timing generations); ``episodes``: the chunk size they should be ready for."""
        self._ready(episodes)
        self._warm.result(timeout=timeout)

    def warm_up(self, population: int, episodes: int, center_episodes: int) -> None:
        """Start warming the workers; this process gets ready to play the center. A problem
        played one episode at a time (guided chunks: Pong, gymnasium ids), for which the workers
        are the way, waits here for them, as Redis and Dask do: their start-up is spent before
        generation 0 and reported as start-up (otherwise, at 16 workers, generation 0 lasts 2.76
        steady ones), and this process is timed on the center's episodes it plays meanwhile.
        A batched problem (CartPole) plays in-process while they warm, in the background."""
        self.problem.warm_up(center_episodes)
        if self.adaptive and self.workers > 1:
            self._ready(max(b - a for a, b in self.bounds(population)) * episodes)
            if self.guided:
                self._warm.result()
                self._time_center = True

    def _warm_up(self, episodes: int) -> None:
        problem = None if self._key is not None else self.problem
        with tempfile.TemporaryDirectory(prefix="es-warm-") as barrier:
            self._parallel(delayed(warm_worker)(self._key, problem, episodes, barrier, self.workers)
                           for _ in range(self.workers))

    def _choose(self, episodes: int) -> str:
        """The way of the next generation: members here while the workers start, the rest on
        them (``_hand_over``, which also times this process on a slice when they were warm
        first); then one warm generation each way; then the faster, probing the other every
        ``recheck`` generations when it was close."""
        if self.workers == 1 and self.adaptive:
            return "local"
        if not self.adaptive:
            return "parallel"
        local, par = self._timing["local"], self._timing["parallel"]
        want = self.mode
        if not par or (self._probe and self.mode == "local"):
            want = "parallel"
        elif not local or (self._probe and self.mode == "parallel"):
            want = "local"
        if want == "parallel" and not self._ready(episodes):
            return "hand over"       # the workers are still starting: members here until they are ready
        if want == "local" and not local and self._ready(episodes):
            return "hand over"       # warm before this process was timed: a slice here, the rest on them
        return want

    def evaluate(self, task: GenerationTask, seeds, center_seeds) -> GenerationResult:
        bounds = self.bounds(task.population)
        n_center = len(center_seeds) if center_seeds is not None else 0
        how = self._choose(max(b - a for a, b in bounds) * len(seeds))
        if how == "hand over":
            return self._hand_over(task, seeds, center_seeds)
        if how == "local":
            if not self._timing["local"]:      # this process's environments are built outside the clock
                self.problem.warm_up(task.population * len(seeds) + n_center)
            t0 = time.perf_counter()
            r, l, cr, cl, obs = evaluate_members(self.problem, task, np.arange(task.population), seeds, center_seeds)
        else:
            t0 = time.perf_counter()
            r, l, cr, cl, obs, busy = self._dispatch(task, seeds, center_seeds, bounds)
        seconds = time.perf_counter() - t0
        work = max(int(l.sum()) + cl, task.population)   # env steps, or members for function problems
        self._timing[how].append(seconds / work)
        self._generations += 1
        if how != self.mode:
            self._probe = False      # the other way was timed (a probe, or while the workers warmed)
        if self.adaptive and self._timing["local"] and self._timing["parallel"]:
            self._decide()
        info = {"evaluated": how}
        if how == "parallel":
            info.update(chunks=len(bounds), worker_busy=round(busy / (seconds * self.workers), 3))
        return GenerationResult(r, l, cr, cl, info, obs)

    def _hand_over(self, task: GenerationTask, seeds, center_seeds) -> GenerationResult:
        """The workers are still starting: members are played here a slice at a time until they
        are ready (at least one slice when this process was never timed), then the rest goes
        to them (members are independent: the same returns either way). A whole generation
        played here while they warm, or to time this process, would last about N steady
        generations with N workers (2.4x on 2 cores for Pong, some 16x on 16); handed over, it
        lasts about their start-up. The slices time this process for the choice; the workers
        are timed on a generation they play whole."""
        n, e = task.population, len(seeds)
        step = max(2, 2 * -(-n // (2 * max(HAND_OVER_SLICES, self.workers))))    # whole antithetic pairs
        if not self._timing["local"]:      # this process's environments are built outside the clock
            self.problem.warm_up(step * e)
        returns, lengths = np.zeros(n), np.zeros(n, dtype=np.int64)
        obs = member_obs(task, n)
        a, seconds, timed = 0, 0.0, bool(self._timing["local"])
        while a < n and (not self._warm.done() or not (timed or a)):
            b = min(n, a + step)
            t0 = time.perf_counter()
            returns[a:b], lengths[a:b], _, _, part = evaluate_members(self.problem, task, np.arange(a, b), seeds)
            put_obs(obs, a, b, part)
            seconds += time.perf_counter() - t0
            a = b
        if a:
            self._timing["local"].append(seconds / max(int(lengths[:a].sum()), a))
        info = {"evaluated": "local" if a == n else "handed over", "here": a}
        if a < n:
            self._warm.result()            # a worker that cannot build the problem: say so here
            rest = [(a + x, a + y) for x, y in self.bounds(n - a)]
            t0 = time.perf_counter()
            returns[a:], lengths[a:], cr, cl, part, busy = self._dispatch(task, seeds, center_seeds, rest)
            put_obs(obs, a, n, part)
            info.update(chunks=len(rest), worker_busy=round(busy / ((time.perf_counter() - t0) * self.workers), 3))
        else:
            cr, cl = evaluate_center(self.problem, task, center_seeds)
        self._generations += 1
        if self._timing["local"] and self._timing["parallel"]:
            self._decide()
        return GenerationResult(returns, lengths, cr, cl, info, obs)

    def _decide(self):
        """Take the faster way per env step (the best of each way's last few generations: a
        shared machine's busy moments only ever slow one down); leave the current one only for
        a clearly faster other (``SWITCH``: one busy moment must not move a 2-core run onto
        one core)."""
        local, par = min(self._timing["local"]), min(self._timing["parallel"])
        if self._announced is None:
            self.mode = "parallel" if par < local else "local"
        elif self.mode == "parallel" and local * SWITCH < par:
            self.mode = "local"
        elif self.mode == "local" and par * SWITCH < local:
            self.mode = "parallel"
        close = max(local, par) / min(local, par) < RECHECK_WITHIN
        if close and self.recheck and self._generations % self.recheck == 0:   # workloads change: probe
            self._probe = True
        if self._announced != self.mode:
            ratio = local / par
            if self.mode == "local":
                log.info(f"parallel: in-process evaluation is faster for this workload ({1e6 * local:.2f} us vs "
                         f"{1e6 * par:.2f} us per env step with {self.workers} warm workers); staying in-process. "
                         "A larger population or a heavier environment will use the workers.")
            else:
                log.info(f"parallel: {self.workers} warm workers are {ratio:.2f}x faster than in-process; using them")
            self._announced = self.mode

    def _dispatch(self, task: GenerationTask, seeds, center_seeds, bounds):
        """The members on the workers, the center here meanwhile: this process waits anyway, and
        one worker playing the center's episodes besides its share was the generation's
        straggler (at population 128 on 16 workers: 9 episodes' time where 8 were due)."""
        fields = {"seed": task.seed, "generation": task.generation, "sigma": task.sigma,
                  "antithetic": task.antithetic, "population": task.population, "noise": task.noise,
                  "obs_norm": task.obs_norm}
        seeds = [int(s) for s in seeds]
        problem = None if self._key is not None else self.problem
        # One job at a time runs in this process (joblib's sequential backend), maybe on this very
        # problem object: then the center comes after, not beside it.
        center = self._center_pool.submit(self._timed_center, task, center_seeds) if self.workers > 1 else None
        order = dispatch_order(bounds)
        jobs = [delayed(evaluate_chunk)(self._key, problem, fields, task.center, *bounds[i], seeds, None)
                for i in order]
        try:
            out = dict(zip(order, self._parallel(jobs)))
        finally:
            if center is not None:
                cr, cl = center.result()
        if center is None:
            cr, cl = evaluate_center(self.problem, task, center_seeds)
        self._last_parallel = time.monotonic()     # loky's idle clock starts again
        returns = np.concatenate([out[i][0] for i in range(len(bounds))])
        lengths = np.concatenate([out[i][1] for i in range(len(bounds))])
        obs = None if task.obs_norm is None else \
            tuple(np.concatenate([out[i][4][k] for i in range(len(bounds))]) for k in (0, 1))
        return returns, lengths, cr, cl, obs, sum(o[5] for o in out.values())

    def _timed_center(self, task, center_seeds):
        """The center played here; where the workers were warmed before generation 0, the first
        time also times this process for the choice (per env step, as an in-process generation
        is timed; beside the workers, so if anything it favours them)."""
        t0 = time.perf_counter()
        cr, cl = evaluate_center(self.problem, task, center_seeds)
        if self._time_center and not self._timing["local"] and center_seeds is not None and len(center_seeds):
            # per env step, or per episode for function problems (as ``evaluate`` counts members)
            self._timing["local"].append((time.perf_counter() - t0) / max(cl, len(center_seeds)))
            self._time_center = False
        return cr, cl

    def close(self):
        if self._warm is not None:
            self._warm.cancel()
            try:
                self._warm.result(timeout=180)
            except BaseException:  # noqa: BLE001 -- closing: a failed warm-up has nothing left to say
                pass
        self._warming.shutdown(wait=True)
        self._center_pool.shutdown(wait=True)
        if self._parallel is not None:
            self._parallel.__exit__(None, None, None)
            self._parallel = None
