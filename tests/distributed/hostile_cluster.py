"""The cluster the hostile-network tests attack: a master and honest workers in this process
(threads, so that a run takes a second or two), liars if asked, and two clients with the
master's and a worker's credentials for the attacker. Shared by ``test_hostile.py``,
``test_hostile_workers.py`` and ``test_scaling.py``."""
import threading
import time

import numpy as np
import redis

import es
from es.distributed import protocol as P
from es.distributed.master import RedisEvaluator
from es.distributed.worker import run_worker
from es.training import make_problem_for

from clean_runs import clean_center


CHUNKS = 8


def small(**kw):
    base = dict(seed=2, generations=4, reward_goal=1e9, population=64)
    base.update(kw)
    return es.config_for("cartpole", **base)


class Cluster:
    """A master (this thread), honest workers and optional liars (threads), an attacker with
    the master's credentials (``admin``: what anyone has on a server without roles) and one
    with a worker's (``rogue``)."""

    def __init__(self, server, cfg, workers=2, liars=(), start_workers=True, **evaluator):
        self.server, self.cfg, self.logs, self.worker_logs = server, cfg, [], []
        self.admin = redis.Redis.from_url(server.master_url)
        self.rogue = redis.Redis.from_url(server.worker_url)
        self.problem = make_problem_for(cfg)
        evaluator.setdefault("lease_seconds", 1.0)
        self.ev = RedisEvaluator(self.problem, server.master_url, chunks=CHUNKS, log=self.logs.append, **evaluator)
        self.stop = threading.Event()
        self.threads = []
        self.liars = list(liars)
        self.n_workers = workers
        if start_workers:
            self.start_workers()

    def start_workers(self):
        for tamper in [None] * self.n_workers + self.liars:
            t = threading.Thread(target=run_worker, args=(self.server.worker_url,),
                                 kwargs=dict(log=self.worker_logs.append, tamper=tamper, stop=self.stop), daemon=True)
            t.start()
            self.threads.append(t)

    def train(self):
        try:
            return es.train(self.cfg, self.problem, evaluator=self.ev, final_eval=False)
        finally:
            self.stop.set()
            for t in self.threads:
                t.join(10)

    def task(self, generation=0, timeout=30):
        """The decoded task record once this master is on ``generation`` (or later): a record
        an earlier run left on the database does not count."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            rec = self.admin.hgetall(P.TASK)
            if rec and rec.get(b"run", b"").decode() == self.ev.run and int(rec[b"generation"]) >= generation:
                return {k.decode(): v for k, v in rec.items()}
            time.sleep(0.002)
        raise AssertionError(f"the master never reached generation {generation}")

    def train_during(self, generation, attack):
        """``train()`` with ``attack(task_record)`` run in a thread once ``generation`` is
        published (``train`` sets ``stop`` when it ends, which ends a lasting attack too)."""
        t = self.during(generation, attack)
        result = self.train()
        t.join()
        return result

    def during(self, generation, attack):
        """Run ``attack(task_record)`` in a thread once ``generation`` is published."""
        def go():
            attack(self.task(generation))
        t = threading.Thread(target=go, daemon=True)
        t.start()
        return t

    def logged(self, fragment):
        return [m for m in self.logs if fragment in m]


def assert_identical(result, cfg):
    assert np.array_equal(result.center, clean_center(cfg)), "the run diverged from the single-process run"

