"""The cost of probation (a new worker id's results held until one equals a trusted
evaluation, the master's in the background where no id is trusted yet): a clean CartPole run
(seed 0, GENERATIONS generations, default population, 8 chunks) with 2 worker processes the
master did not start (fresh ids), with ``probation=1`` (the default) and ``probation=0`` (ids
trusted at once), alternated REPEATS times on one embedded server; every run must end
bit-identical. Prints one JSON line.

    python benchmarks/probation_cost.py [GENERATIONS] [REPEATS]
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from _common import pythonpath  # noqa: E402  (and the import path)

ROOT = Path(__file__).resolve().parents[1]
import es
from es.distributed.master import RedisEvaluator
from es.distributed.server import EmbeddedRedis
from es.training import make_problem_for

GEN = int(sys.argv[1]) if len(sys.argv) > 1 else 60
REPEATS = int(sys.argv[2]) if len(sys.argv) > 2 else 6
cfg = es.config_for("cartpole", seed=0, generations=GEN, reward_goal=1e9)
ref = None
rows = []
with EmbeddedRedis() as server:
    env = {**os.environ, "ES_REDIS_URL": server.worker_url, "PYTHONPATH": pythonpath(ROOT)}
    for rep in range(REPEATS):
        for probation in (1, 0):
            procs = [subprocess.Popen([sys.executable, "-m", "es", "worker"], env=env, stderr=subprocess.DEVNULL) for _ in range(2)]
            time.sleep(1.5)   # workers connected before the clock starts
            problem = make_problem_for(cfg)
            ev = RedisEvaluator(problem, server.master_url, chunks=8, log=lambda m: None, probation=probation)
            t0 = time.perf_counter()
            res = es.train(cfg, problem, evaluator=ev, final_eval=False)
            dt = time.perf_counter() - t0
            master = sum(r["master_seconds"] for r in res.metrics)
            ev.close()
            for p in procs: p.terminate()
            for p in procs: p.wait()
            ref = res.center if ref is None else ref
            assert np.array_equal(ref, res.center)
            rows.append((probation, dt, master, res.metrics[0]["probation_checks"]))
med = {p: float(np.median([r[1] for r in rows if r[0] == p])) for p in (1, 0)}
print(json.dumps({"benchmark": "probation_cost", "generations": GEN, "repeats": REPEATS, "bit_identical": True,
                  "seconds_with_probation": med[1], "seconds_without": med[0], "ratio": med[1] / med[0],
                  "master_seconds_with_probation": float(np.median([r[2] for r in rows if r[0] == 1])),
                  "first_generation_probation_checks": int(rows[0][3])}))
