"""``--dask local`` (a LocalCluster of --workers processes) or ``--dask tcp://SCHEDULER:8786``:
the same evaluation on a Dask cluster, for users who outgrow one Redis (a scheduler for
hundreds of hosts, restarts of dead workers' tasks, adaptive clusters, a dashboard).

Each generation's task is encoded as for Redis (``protocol.encode_task``), scattered once,
and each chunk returns a ``protocol.encode_result`` payload checked like a Redis result, so
a run is bit-identical to a single process. Trust: the cluster must be private (Dask pickles
the function it runs, and anyone who reaches the scheduler runs code on the workers; use its
TLS on shared networks). Workers are not spot-checked; a result failing the checks stops the run.
"""
from __future__ import annotations

import json
import logging
import os
import secrets
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..errors import ESError
from ..evaluators import GenerationResult, evaluate_center, evaluate_members, member_obs, put_obs
from ..interfaces import Evaluator
from ..parallel import _problem, chunk_bounds, dispatch_order, guided_bounds   # _problem: built once per process
from . import protocol as P

_WORKER_ID = os.urandom(8)


def evaluate_chunk(record: dict, first: int, end: int, with_center: bool) -> bytes:
    """Worker side: members ``[first, end)`` of the task ``record`` (and the center)."""
    task, spec, seeds, center_seeds, meta = P.decode_task(record)
    problem = _problem(json.dumps(spec, sort_keys=True), None)      # and one BLAS thread from then on
    r, lengths, cr, cl, obs = evaluate_members(problem, task, np.arange(first, end), seeds,
                                               center_seeds if with_center else None)
    return P.encode_result(_WORKER_ID, meta["run"], meta["nonce"], meta["digest"], task.generation, first, r, lengths,
                           (cr, cl) if with_center else None, obs)


def warm_worker(spec_json: str, episodes: int) -> int:
    """Worker side: build the problem and what ``episodes`` episodes at once need, before timing."""
    _problem(spec_json, None).warm_up(episodes)
    return os.getpid()


class DaskEvaluator(Evaluator):
    name = "dask"
    untrusted = False   # a private cluster (see Trust above)

    def __init__(self, problem, address: str = "local", workers: int | None = None, chunks: int | None = None,
                 log=None):
        spec = problem.spec()
        if spec.get("kind") == "function":
            raise ESError("--dask needs an environment problem (a JSON spec every worker can rebuild)")
        P.validate_spec(spec)
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError:
            raise ESError("--dask needs dask.distributed: pip install -r requirements.txt") from None
        self.problem, self.spec, self.log = problem, spec, log or logging.getLogger(__name__).warning
        self.episode_cap = getattr(problem, "episode_cap", None)
        self.run = secrets.token_hex(8)
        self._cluster = None
        self._center_pool = ThreadPoolExecutor(1, thread_name_prefix="es-center")
        if address == "local":
            n = workers or os.cpu_count() or 1
            # One thread per worker process: environments and NumPy use the cores themselves.
            self._cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                                         silence_logs=logging.ERROR)
            self.client = Client(self._cluster)
            where = f"a local cluster of {n} worker processes"
        else:
            if not address.startswith(("tcp://", "tls://", "ucx://", "ws://", "wss://")):
                raise ESError(f"--dask takes 'local' or a scheduler address like tcp://HOST:8786, got {address!r}")
            try:
                self.client = Client(address, timeout="20s")
            except (OSError, TimeoutError) as exc:
                raise ESError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
            where = f"the Dask scheduler at {address}"
        self.workers = max(1, len(self.client.scheduler_info().get("workers", {})))
        self.chunks = int(chunks) if chunks else None
        self.log(f"dask: evaluating on {where} ({self.workers} workers, "
                 f"{self.chunks or 'guided'} chunks per generation)")

    def bounds(self, population: int) -> list[tuple[int, int]]:
        """``chunks`` even chunks if given; else one per worker for a batched problem, guided ones otherwise."""
        if self.chunks:
            return chunk_bounds(population, self.chunks)
        if self.problem.chunks_per_worker == 1:
            return chunk_bounds(population, self.workers)
        return guided_bounds(population, self.workers)

    def warm_up(self, population: int, episodes: int, center_episodes: int) -> None:
        """Every worker builds the problem and its games before the first generation is timed."""
        largest = max(b - a for a, b in self.bounds(population)) * episodes + center_episodes
        self.client.run(warm_worker, json.dumps(self.spec, sort_keys=True), largest)
        self.problem.warm_up(center_episodes)

    def evaluate(self, task, seeds, center_seeds) -> GenerationResult:
        from dask.distributed import as_completed
        g, pop = task.generation, task.population
        cap = self.episode_cap or 2 ** 32 - 1
        nonce = secrets.token_hex(8)
        record = P.encode_task(task, self.spec, seeds, center_seeds, run=self.run, nonce=nonce, max_length=cap,
                               lease_seconds=60.0)
        digest = P.task_digest(record)
        [shared] = self.client.scatter([record], broadcast=True, hash=False)   # one future for the whole record
        bounds = self.bounds(pop)
        # The center: played here while the workers play the members (with --chunks: by the last chunk).
        has_center = center_seeds is not None and len(center_seeds) > 0
        here = has_center and not self.chunks
        own = self._center_pool.submit(evaluate_center, self.problem, task, center_seeds) if here else None
        with_center = [has_center and not here and i == len(bounds) - 1 for i in range(len(bounds))]
        # Submitted largest first (the center's chunk first): Dask runs earlier submissions first.
        futures = {self.client.submit(evaluate_chunk, shared, *bounds[i], with_center[i], pure=False, retries=2):
                   (*bounds[i], with_center[i]) for i in dispatch_order(bounds)}
        returns, lengths = np.full(pop, np.nan), np.zeros(pop, dtype=np.int64)
        obs = member_obs(task, pop)
        d = 0 if obs is None else obs[0].shape[1]
        center = (None, 0)
        caps = (min(2 ** 32 - 1, cap * len(seeds)),
                min(2 ** 32 - 1, cap * (len(center_seeds) if center_seeds is not None else 0)))
        try:
            for fut in as_completed(futures):
                a, b, c = futures[fut]
                try:
                    raw = fut.result()
                except Exception as exc:   # the evaluation itself failed (after Dask's retries)
                    raise ESError(f"dask: members {a}..{b - 1} of generation {g} failed: "
                                  f"{exc.__class__.__name__}: {exc}") from None
                try:
                    res = P.decode_result(raw, caps[0], caps[1], obs_dim=d)
                    if (res["run"], res["nonce"], res["digest"], res["generation"], res["first"], res["count"],
                            res["center"] is not None) != (self.run, nonce, digest, g, a, b - a, c):
                        raise P.BadPayload("it does not match its task")
                except P.BadPayload as exc:
                    raise ESError(f"dask: a bad result for members {a}..{b - 1} of generation {g}: {exc}") from None
                returns[a:b], lengths[a:b] = res["returns"], res["lengths"]
                put_obs(obs, a, b, res["obs"])
                if c:
                    center = res["center"]
        finally:
            for fut in futures:
                fut.release()
            shared.release()
            if own is not None:
                center = own.result()
        return GenerationResult(returns, lengths, center[0], center[1], {"chunks": len(bounds)}, obs)

    def close(self):
        self._center_pool.shutdown(wait=True)
        try:
            self.client.close()
        finally:
            if self._cluster is not None:
                self._cluster.close()
