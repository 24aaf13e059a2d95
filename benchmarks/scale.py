"""How the master's costs grow with the work. One JSON line per point, then ``docs/scale.png``.

* ``master_update``: one ``tell()`` (centered ranks, the weighted noise sum, Adam) at
  population 256..16,384 x parameters 10 / 3.5k / 100k / 1M, for both noise schemes
  (``seeds``: every pair's noise drawn again from its seed; ``table``: slices of the shared
  table). Points whose estimate (linear in the population from the previous point) exceeds
  ``--budget`` seconds are printed with ``"skipped": true`` and the estimate.
* ``noise_table``: seconds to build the shared table in a fresh process, and its bytes.
* ``member_noise``: what a worker pays to rebuild one member's perturbation, per scheme.
* ``redis_master``: members per second the master turns around through a real embedded
  server with 1..64 simulated workers on loopback (threads in one other process that answer
  every job at once with zeros: only the master, the server and the protocol are measured),
  population 16,384 in chunks of 32, at 10 and ~92k parameters; bytes per generation in each
  direction counted by the server (CLIENT LIST) for the es-worker connections.

    python benchmarks/scale.py [--budget 20] [--quick] [--replot saved.jsonl]

All on this machine, single-threaded master (BLAS capped at one thread).
"""
from _common import pythonpath  # (and the import path)

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ROWS = []


def emit(row):
    row = {"benchmark": "scale", **row}
    ROWS.append(row)
    print(json.dumps(row), flush=True)


def master_update(populations, dims, budget):
    from es.optimizers import Adam
    from es.strategy import OpenES
    from es import noise_table
    noise_table.shared_table()   # built once per process; its cost is its own row
    for scheme in ("seeds", "table"):
        for dim in dims:
            last = None
            for pop in populations:
                estimate = None if last is None else last[1] * pop / last[0]
                if estimate is not None and estimate > budget:
                    emit({"kind": "master_update", "noise": scheme, "population": pop, "params": dim,
                          "seconds": None, "skipped": True, "estimated_seconds": round(estimate, 2)})
                    continue
                s = OpenES(np.zeros(dim, np.float32), Adam(dim, 0.01), population=pop, sigma=0.02, seed=0,
                           noise_scheme=scheme)
                returns = np.random.default_rng(pop).standard_normal(pop)
                times = []
                while len(times) < 3 and sum(times) < 2.0:
                    t0 = time.perf_counter()
                    s.tell(returns)
                    times.append(time.perf_counter() - t0)
                last = (pop, min(times))
                emit({"kind": "master_update", "noise": scheme, "population": pop, "params": dim,
                      "seconds": min(times)})


def table_build():
    code = ("import time; t=time.perf_counter(); from es import noise_table; "
            "tab = noise_table.shared_table(); print(time.perf_counter() - t, tab.nbytes)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": pythonpath(ROOT)}).stdout.split()
    emit({"kind": "noise_table", "build_seconds": float(out[0]), "bytes": int(out[1]), "cpus": os.cpu_count()})


def member_noise(dims):
    from es import noise
    for dim in dims:
        for scheme in ("seeds", "table"):
            members = np.arange(32)
            noise.antithetic_noise(0, 1, members, dim, scheme=scheme)
            t0 = time.perf_counter()
            noise.antithetic_noise(0, 1, members, dim, scheme=scheme)
            emit({"kind": "member_noise", "noise": scheme, "params": dim,
                  "seconds_per_member": (time.perf_counter() - t0) / len(members)})


# ---- the master through Redis, with simulated workers ----
FARM = r"""
import sys, threading, json, os
from es.distributed import protocol as P
from es.distributed.connection import RedisLink
from es.distributed.worker import _push
url, n = sys.argv[1], int(sys.argv[2])
stop = threading.Event()

def work():
    link = RedisLink(url, max_outage=None, log=lambda m: None)
    r, wid, cached = link.client, os.urandom(8), None
    import numpy as np
    while not stop.is_set():
        item = r.blpop(P.JOBS, timeout=1)
        if item is None:
            continue
        job = P.decode_job(item[1])
        if cached is None or cached[:2] != (job["r"], job["n"]):
            cached = (job["r"], job["n"], P.decode_task(r.hgetall(P.TASK)))
        meta = cached[2][4]
        jid = P.job_id(job)
        r.hset(P.LEASES, jid, json.dumps({"w": wid.hex(), "n": job["n"], "t": link.server_time()}))
        k = job["b"] - job["a"]
        payload = P.encode_result(wid, job["r"], job["n"], meta["digest"], job["g"], job["a"], np.zeros(k),
                                  np.ones(k, np.uint32), (0.0, 1) if job["c"] else None)
        _push(link, payload, jid, lambda m: None)

threads = [threading.Thread(target=work, daemon=True) for _ in range(n)]
for t in threads:
    t.start()
print("ready", flush=True)
sys.stdin.read()
stop.set()
"""


def redis_master(worker_counts, hidden_sets, population=16384, chunk=32, generations=3):
    import redis
    from es import seeding
    from es.distributed.master import RedisEvaluator
    from es.distributed.server import EmbeddedRedis
    from es.envs import EnvProblem
    from es.strategy import GenerationTask
    for hidden in hidden_sets:
        problem = EnvProblem("CartPole-v1", hidden=hidden)
        for n in worker_counts:
            with EmbeddedRedis(admin=True) as server:
                farm = subprocess.Popen([sys.executable, "-c", FARM, server.worker_url, str(n)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": pythonpath(ROOT)})
                try:
                    assert farm.stdout.readline().strip() == "ready"
                    admin = redis.Redis.from_url(server.admin_url)
                    ev = RedisEvaluator(problem, server.master_url, chunks=population // chunk, log=lambda m: None,
                                        spot_checks=0)
                    center = problem.initial_params(0)
                    times, before = [], None
                    for g in range(generations + 1):
                        task = GenerationTask(0, g, 0.1, True, population, center)
                        seeds = seeding.episode_seeds(0, g, 1)
                        if g == 1:
                            before = _worker_bytes(admin)
                        t0 = time.perf_counter()
                        ev.evaluate(task, seeds, seeds)
                        if g >= 1:
                            times.append(time.perf_counter() - t0)
                    after = _worker_bytes(admin)
                    ev.close()
                finally:
                    farm.communicate("", timeout=30)
            seconds = float(np.median(times))
            emit({"kind": "redis_master", "workers": n, "params": problem.num_params, "population": population,
                  "chunks": population // chunk, "seconds_per_generation": seconds,
                  "members_per_second": population / seconds, "ms_per_chunk": 1e3 * seconds / (population // chunk),
                  "bytes_to_workers_per_generation": sum(after[c][1] - before.get(c, (0, 0))[1] for c in after)
                  / generations,
                  "bytes_from_workers_per_generation": sum(after[c][0] - before.get(c, (0, 0))[0] for c in after)
                  / generations})


def _worker_bytes(admin):
    return {c["id"]: (int(c["tot-net-in"]), int(c["tot-net-out"])) for c in admin.client_list()
            if c.get("user") == "es-worker"}


def plot(path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    updates = [r for r in ROWS if r["kind"] == "master_update" and r["seconds"] is not None]
    for i, dim in enumerate(sorted({r["params"] for r in updates})):
        for scheme, style in (("seeds", "--"), ("table", "-")):
            pts = sorted((r["population"], r["seconds"]) for r in updates if r["noise"] == scheme and r["params"] == dim)
            if pts:
                a.plot(*zip(*pts), style, marker="o", color=f"C{i}", label=f"{scheme}, {dim:,} params")
    a.axhline(1.0, color="grey", lw=0.8)
    a.text(260, 1.1, "1 s", color="grey", fontsize=8)
    a.set(xscale="log", yscale="log", xlabel="population", ylabel="seconds per update (one core)",
          title="master update: noise drawn from seeds vs table")
    a.legend(fontsize=7, loc="upper left", ncol=2)
    a.set_ylim(top=300)
    redis_rows = [r for r in ROWS if r["kind"] == "redis_master"]
    for dim in sorted({r["params"] for r in redis_rows}):
        pts = sorted((r["workers"], r["members_per_second"]) for r in redis_rows if r["params"] == dim)
        b.plot(*zip(*pts), marker="o", label=f"{dim:,} params")
    b.set_ylim(bottom=0)
    b.set(xscale="log", xlabel="simulated workers (threads of one process, same 2 cores)", ylabel="members per second",
          title="master through Redis (population 16,384, chunks of 32)")
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget", type=float, default=20.0, help="skip update points estimated above this (s)")
    ap.add_argument("--quick", action="store_true", help="fewer points (a smoke test)")
    ap.add_argument("--plot", default=str(ROOT / "docs" / "scale.png"))
    ap.add_argument("--replot", type=Path, default=None, metavar="JSONL", help="only plot these saved lines")
    args = ap.parse_args()
    if args.replot is not None:
        ROWS.extend(json.loads(line) for line in args.replot.read_text().splitlines() if line.strip())
    elif args.quick:
        master_update([256, 1024], [10, 3531], args.budget)
        redis_master([1, 4], [()], population=2048, generations=1)
    else:
        table_build()
        member_noise([3531, 100_000])
        master_update([256, 1024, 4096, 16384], [10, 3531, 100_000, 1_000_000], args.budget)
        redis_master([1, 2, 4, 8, 16, 32, 64], [(), (300, 300)])
    if args.plot:
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        plot(args.plot)


if __name__ == "__main__":
    main()
