"""Workers for notebook 03's last section: a real ES run on CartPole whose every generation is
gathered by the student's own ``gather`` through a real Redis server.

The course protocol (notebook 03; ``classroom.redis_workers`` serves the check with it), plus
the task the master writes before it queues a generation's jobs:

* ``es:task`` (hash): ``g`` the generation, ``seed`` the run's seed, ``sigma``, ``population``
  and ``center``, the parameters as raw little-endian float32 bytes (``task_fields``).
* ``es:jobs`` (list of JSON ``{"g": generation, "a": first, "b": end}``), ``es:leases`` (hash
  ``"a:b"`` -> ``time.time()`` as text) and ``es:results`` (list of ``encode_result`` payloads).

Members come in mirrored pairs: member ``2k`` plays ``center + sigma * eps_k`` and ``2k + 1``
``center - sigma * eps_k``, with ``eps_k`` from pair ``k``'s own stream (``es.seeding``), so a
worker rebuilds any member from integers. Every member of a generation plays the same start
state (``es.seeding.episode_seeds``). ``member_returns`` is a worker's work on one chunk, and
the same function gives a one-process run to compare with; ``pair_noise`` is the noise the
master rebuilds for its update.

``CartPoleWorkers(url, encode, workers=3, crash=G)`` runs the workers as threads of the
notebook's process, stand-ins for processes on other machines (what they exchange through
Redis is the same), pushing what the student's ``encode_result`` encodes. With ``crash=G``, one
worker dies in generation ``G`` right after it took a job and wrote its lease: the master has
to hand that chunk out again.
"""
from __future__ import annotations

import json
import threading
import time

import numpy as np

from es import seeding
from es.envs.cartpole import run_cartpole_batch
from es.policies import MLPPolicy

TASK, JOBS, LEASES, RESULTS = "es:task", "es:jobs", "es:leases", "es:results"
POLICY = MLPPolicy(4, 2, hidden=())       # notebook 01's linear policy: 10 parameters


def task_fields(generation: int, seed: int, sigma: float, population: int, center) -> dict:
    """What the master writes to ``es:task`` for one generation (``HSET es:task mapping=...``)."""
    return {"g": int(generation), "seed": int(seed), "sigma": repr(float(sigma)), "population": int(population),
            "center": np.asarray(center, dtype="<f4").tobytes()}


def read_task(raw: dict) -> dict:
    """``HGETALL es:task`` (bytes -> bytes) -> the task's values."""
    return {"g": int(raw[b"g"]), "seed": int(raw[b"seed"]), "sigma": float(raw[b"sigma"]),
            "population": int(raw[b"population"]), "center": np.frombuffer(raw[b"center"], dtype="<f4").copy()}


def pair_noise(seed: int, generation: int, population: int, dim: int) -> np.ndarray:
    """float64 ``(population, dim)``: row ``2k`` is ``+eps_k``, row ``2k + 1`` is ``-eps_k``."""
    eps = np.stack([seeding.rng_for(seed, seeding.NOISE, generation, k).standard_normal(dim)
                    for k in range(population // 2)])
    return np.stack([eps, -eps], axis=1).reshape(population, dim)


def member_returns(task: dict, first: int, end: int):
    """(returns float64, lengths int64) of members ``[first, end)`` of the task's generation."""
    center = np.asarray(task["center"], dtype=np.float32)
    noise = pair_noise(task["seed"], task["g"], task["population"], center.size)[first:end]
    params = center.astype(np.float64) + task["sigma"] * noise
    start = seeding.episode_seeds(task["seed"], task["g"], 1)[0]
    return run_cartpole_batch(POLICY, params.astype(np.float32), np.arange(end - first), np.full(end - first, start))


class CartPoleWorkers:
    """``with CartPoleWorkers(url, encode_result) as workers:`` threads serving ``es:jobs``.

    ``taken`` counts, per ``(generation, "a:b")``, how often a job was taken; ``died`` says
    which worker died holding which chunk; ``errors`` holds what went wrong in a worker (an
    ``encode_result`` that raised, say), also printed when the block ends."""

    def __init__(self, url: str, encode, workers: int = 3, crash: int | None = None):
        self.url, self.encode, self.crash = url, encode, crash
        self.taken: dict[tuple[int, str], int] = {}
        self.died: tuple[int, int, str] | None = None
        self.errors: list[str] = []
        self._stop, self._lock = threading.Event(), threading.Lock()
        self._threads = [threading.Thread(target=self._work, args=(i,), daemon=True) for i in range(workers)]

    def __enter__(self) -> "CartPoleWorkers":
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)
        for e in self.errors:
            print(f"a worker failed: {e}")
        return False

    def requeued(self) -> list[tuple[int, str]]:
        """(generation, chunk) of every job taken more than once: handed out again."""
        return sorted(k for k, n in self.taken.items() if n > 1)

    def _work(self, index: int):
        import redis
        r = redis.Redis.from_url(self.url)
        try:
            while not self._stop.is_set():
                got = r.blpop(JOBS, timeout=0.2)
                if got is None:
                    continue
                job = json.loads(got[1])
                g, a, b = int(job["g"]), int(job["a"]), int(job["b"])
                task = read_task(r.hgetall(TASK))
                if task["g"] != g:          # a job of a generation that is over
                    continue
                chunk = f"{a}:{b}"
                r.hset(LEASES, chunk, repr(time.time()))
                with self._lock:
                    self.taken[(g, chunk)] = self.taken.get((g, chunk), 0) + 1
                    dies = self.crash == g and self.died is None
                    if dies:
                        self.died = (index, g, chunk)
                if dies:
                    return                  # dead, holding the chunk and its lease
                returns, lengths = member_returns(task, a, b)
                payload = self.encode(g, a, returns, lengths)
                pipe = r.pipeline()
                pipe.rpush(RESULTS, payload)
                pipe.hdel(LEASES, chunk)
                pipe.execute()
        except Exception as exc:
            if not self._stop.is_set():
                self.errors.append(f"worker {index}: {type(exc).__name__}: {exc}")
        finally:
            r.close()
