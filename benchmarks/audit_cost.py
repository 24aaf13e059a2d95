"""What the defences against lying workers cost when no one lies: the spot checks at
the default target (``--catch-within 442``: each member of a worker the master did not start
replayed with probability 1/64.5, more for ids with few verified members), probation, and the
rollback book-keeping (the state before every generation a later ban could send the run back
to, kept in memory and in the checkpoint). Against the same run with ``--spot-checks 0
--probation 0`` (every id trusted at once, nothing replayed; the book-keeping stays, and is
timed on its own below).

The user's case: ``python -m es train pong --redis URL`` (the CLI master, a run directory,
checkpoints) and 2 ``python -m es worker`` processes it did not start (fresh ids) on an
embedded server; dense Pong, population 128, 500-step cap; both ways alternated ROUNDS times in
the same run; every run must end bit-identical. The steady generation is the median over
generations >= 2 (0 and 1: the workers' first games, probation). Prints one JSON line per
round and one summary line (``ratio``: steady generation with the defences over without).

    python benchmarks/audit_cost.py [GENERATIONS] [ROUNDS]
"""
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import pythonpath  # noqa: E402  (and the import path)

ROOT = Path(__file__).resolve().parents[1]
from es.checkpoint import load_checkpoint  # noqa: E402
from es.distributed.server import EmbeddedRedis  # noqa: E402

GEN = int(sys.argv[1]) if len(sys.argv) > 1 else 6
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 2
WAYS = {"defences": [], "none": ["--spot-checks", "0", "--probation", "0"]}


def one_run(server, extra, tmp):
    env = {**os.environ, "PYTHONPATH": pythonpath(ROOT), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    workers = [subprocess.Popen([sys.executable, "-m", "es", "worker", "--redis", server.worker_url.replace(
        f":{server.worker_password}@", "@")], env={**env, "ES_REDIS_PASSWORD": server.worker_password},
        stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL) for _ in range(2)]
    try:
        out = Path(tmp) / f"run{time.monotonic_ns()}"
        cmd = [sys.executable, "-m", "es", "train", "pong", "--policy", "dense", "--population", "128",
               "--max-steps", "500", "--generations", str(GEN), "--eval-episodes", "1", "--out", str(out),
               "--no-progress", "--json", "--redis", server.master_url.replace(f":{server.password}@", "@"), *extra]
        done = subprocess.run(cmd, capture_output=True, text=True, env={**env, "ES_REDIS_PASSWORD": server.password})
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-3000:])
        metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
        center = load_checkpoint(out / "checkpoint.npz")[0]
        size = (out / "checkpoint.npz").stat().st_size
    finally:
        for p in workers:
            p.terminate()
        for p in workers:
            p.wait()
    return metrics, center, size


def bookkeeping_seconds() -> float:
    """The rollback book-keeping of one generation, alone: a snapshot of the state (dense Pong's
    771 parameters, Adam) and its arrays for the checkpoint, median of 200."""
    import es
    from es.training import _history_arrays, _snapshot, make_problem_for, make_strategy
    cfg = es.config_for("pong", extra={"policy": "dense"}, max_steps=500, population=128)
    problem = make_problem_for(cfg)
    strategy = make_strategy(cfg, problem.initial_params(0))
    state = {"streak": 0, "env_steps": 0, "finished": None}
    times = []
    for _ in range(200):
        t0 = time.perf_counter()
        _history_arrays({0: _snapshot(strategy, None, state, [])})
        times.append(time.perf_counter() - t0)
    problem.close()
    return float(np.median(times))


rows, centers = [], []
with EmbeddedRedis() as server, tempfile.TemporaryDirectory(prefix="es-audit-") as tmp:
    for rnd in range(ROUNDS):
        for way, extra in (WAYS.items() if rnd % 2 == 0 else reversed(WAYS.items())):
            metrics, center, size = one_run(server, extra, tmp)
            centers.append(center)
            steady = [m["seconds"] for m in metrics if m["generation"] >= 2]
            row = {"round": rnd, "way": way, "steady_seconds": float(np.median(steady)),
                   "generation_seconds": [round(m["seconds"], 3) for m in metrics],
                   "spot_checked": [m.get("spot_checked", 0) for m in metrics],
                   "spot_check_seconds": [round(m.get("spot_check_seconds", 0.0), 3) for m in metrics],
                   "checkpoint_bytes": size}
            rows.append(row)
            print(json.dumps(row), flush=True)
assert all(np.array_equal(centers[0], c) for c in centers), "a run differed"
med = {w: float(np.median([r["steady_seconds"] for r in rows if r["way"] == w])) for w in WAYS}
print(json.dumps({"benchmark": "audit_cost", "generations": GEN, "rounds": ROUNDS, "bit_identical": True,
                  "steady_with_defences": med["defences"], "steady_without": med["none"],
                  "ratio": med["defences"] / med["none"],
                  "ratios_per_round": [a["steady_seconds"] / b["steady_seconds"] for a, b in
                                       zip([r for r in rows if r["way"] == "defences"], [r for r in rows if r["way"] == "none"])],
                  "bookkeeping_seconds_per_generation": bookkeeping_seconds(),
                  "date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "load": os.getloadavg()[0]}))
