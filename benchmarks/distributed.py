"""Redis: traffic per member, speed against joblib, the cost of the master's spot checks,
and how fast a lying worker is caught. Prints one JSON line.

* bytes: CartPole-v1, population 256, 2 worker processes, 6 generations. The server's own
  per-connection counters (CLIENT LIST ``tot-net-in`` / ``tot-net-out``) of the connections
  of the ``es-worker`` user alone: ``bytes_in_per_member_per_generation`` (workers -> Redis)
  and ``bytes_out_per_generation`` (Redis -> workers, chiefly the task record). The master
  logs in as ``es-master``, so none of its traffic is counted.
* speed: Pong (dense), population 32, 300-step episodes, 2 local workers with one ALE thread
  each, through Redis and through joblib, seconds per generation in the same run.
* spot checks: Pong, population 64, 300-step episodes, 2 local workers, default spot checks
  (1 member replayed by the master each generation) against none, same run:
  ``spot_check_overhead`` = seconds per generation with / without - 1 (noisy on a shared
  machine), ``spot_check_share`` = the master's seconds replaying members / seconds per
  generation with spot checks (what the checks cost where the master has its own core).
* lying workers: CartPole, population 256, 8 chunks, 2 honest workers and 1 liar (threads),
  default spot checks, 5 trials each: a liar on every result, and a liar on 1 result in 10.
  ``*_generations_to_ban`` (mean; generation of the ban, 0-based), ``*_lies_in_updates``
  (lies accepted into an update before the ban, total over trials).

    python benchmarks/distributed.py
"""
import _common  # noqa: F401

import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import redis  # noqa: E402

import es  # noqa: E402
from es import seeding  # noqa: E402
from es.distributed import protocol as P  # noqa: E402
from es.distributed.master import RedisEvaluator  # noqa: E402
from es.distributed.server import EmbeddedRedis  # noqa: E402
from es.distributed.worker import run_worker  # noqa: E402
from es.optimizers import SGD  # noqa: E402
from es.parallel import ParallelEvaluator  # noqa: E402
from es.strategy import OpenES  # noqa: E402
from es.training import make_problem_for  # noqa: E402


def workers(url, n):
    return [subprocess.Popen([sys.executable, "-m", "es", "worker"], env={**os.environ, "ES_REDIS_URL": url},
                             stderr=subprocess.DEVNULL) for _ in range(n)]


def run(problem, evaluator, population, sigma, generations, warmup=1):
    strategy = OpenES(problem.initial_params(0), SGD(problem.num_params, 0.3, momentum=0.0), population=population,
                      sigma=sigma, seed=0, shaping=es.z_score)
    times = []
    for g in range(warmup + generations):
        seeds = seeding.episode_seeds(0, g, 1)
        t0 = time.perf_counter()
        strategy.tell(evaluator.evaluate(strategy.ask(), seeds, seeds).returns)
        if g >= warmup:
            times.append(time.perf_counter() - t0)
    return float(np.mean(times))


def worker_traffic(admin):
    """client id -> (bytes in, bytes out) of every es-worker connection."""
    return {c["id"]: (int(c["tot-net-in"]), int(c["tot-net-out"])) for c in admin.client_list()
            if c.get("user") == "es-worker"}


def traffic(out):
    from es.envs import EnvProblem
    cart = EnvProblem("CartPole-v1", hidden=())
    generations, population = 6, 256
    with EmbeddedRedis(admin=True) as server:
        procs = workers(server.worker_url, 2)
        admin = redis.Redis.from_url(server.admin_url)
        try:
            ev = RedisEvaluator(cart, server.master_url, chunks=8, log=lambda m: None, spot_checks=0)
            run(cart, ev, population, 0.3, 1, warmup=1)          # workers connected and warm
            before = worker_traffic(admin)
            run(cart, ev, population, 0.3, generations, warmup=0)
            after = worker_traffic(admin)
            ev.close()
        finally:
            for p in procs:
                p.kill()
    assert set(before) <= set(after), "a worker connection closed during the measurement"
    worker_in = sum(after[c][0] - before.get(c, (0, 0))[0] for c in after)
    worker_out = sum(after[c][1] - before.get(c, (0, 0))[1] for c in after)
    out.update(bytes_in_per_member_per_generation=worker_in / (population * generations),
               bytes_out_per_generation=worker_out / generations, worker_connections=len(after),
               cartpole_population=population, cartpole_generations=generations,
               center_bytes=4 * cart.num_params)


def pong_speed(out):
    from pong.problem import PongProblem
    spec = {"type": "pong_dense", "band": 6, "hidden": []}
    pong = PongProblem(spec, max_steps=300, threads=1)
    ev = ParallelEvaluator(pong, workers=2, adaptive=False)
    t_joblib = run(pong, ev, 32, 0.05, 3, warmup=3)   # warm: each worker has built its vector envs
    ev.close()
    with EmbeddedRedis() as server:
        procs = workers(server.worker_url, 2)
        try:
            ev = RedisEvaluator(pong, server.master_url, chunks=2, log=lambda m: None, spot_checks=0)
            t_redis = run(pong, ev, 32, 0.05, 3, warmup=3)
            times, spent = {}, []
            real = ev.evaluate

            def timed(*a):
                res = real(*a)
                spent.append(res.info["spot_check_seconds"])
                return res
            ev.evaluate = timed
            for k in (0, None, 0, None):       # interleaved: the machine's load drifts
                ev.spot_checks = k
                times.setdefault(k, []).append(run(pong, ev, 64, 0.05, 2, warmup=0))
            ev.close()
        finally:
            for p in procs:
                p.kill()
    out.update(pong_seconds_per_generation_joblib=t_joblib, pong_seconds_per_generation_redis=t_redis,
               speedup_vs_joblib=t_joblib / t_redis,
               pong_seconds_per_generation_spot_checks=float(np.mean(times[None])),
               pong_seconds_per_generation_no_spot_checks=float(np.mean(times[0])),
               spot_check_overhead=float(np.mean(times[None]) / np.mean(times[0]) - 1),
               spot_check_share=float(np.sum(spent) / (np.sum(times[None]) * 2)))


def liar_trial(rate, trial, generations=12):
    import hashlib
    rng = np.random.default_rng(trial)
    lies = set()   # (generation, chunk, digest of the returns it lied with)

    def tamper(job, returns, lengths, center):
        if rng.random() < rate:
            returns = returns + 100.0
            lies.add((job["g"], P.job_id(job), hashlib.sha256(returns.tobytes()).hexdigest()[:16]))
        return returns, lengths, center
    cfg = es.config_for("cartpole", seed=trial, generations=generations, reward_goal=1e9, population=256)
    with EmbeddedRedis() as server:
        stop = threading.Event()
        threads = [threading.Thread(target=run_worker, args=(server.worker_url,), daemon=True,
                                    kwargs=dict(log=lambda m: None, tamper=t, stop=stop)) for t in (None, None, tamper)]
        for t in threads:
            t.start()
        problem = make_problem_for(cfg)
        ev = RedisEvaluator(problem, server.master_url, chunks=8, lease_seconds=1.0, log=lambda m: None)
        result = es.train(cfg, problem, evaluator=ev, final_eval=False)
        stop.set()
        for t in threads:
            t.join(10)
    banned_at = next((m["generation"] for m in result.metrics if m["banned"]), None)
    reached = sum(1 for g, j, _, d in ev.accepted if (g, j, d) in lies)
    return banned_at, reached, len(lies)


def liars(out, trials=5):
    for name, rate in (("always", 1.0), ("one_in_ten", 0.1)):
        rows = [liar_trial(rate, t) for t in range(trials)]
        caught = [b for b, _, _ in rows if b is not None]
        out[f"liar_{name}_caught"] = f"{len(caught)}/{trials}"
        out[f"liar_{name}_generations_to_ban"] = float(np.mean(caught)) if caught else None
        out[f"liar_{name}_lies_in_updates"] = int(sum(r for _, r, _ in rows))
        out[f"liar_{name}_lies_told"] = int(sum(n for _, _, n in rows))


def main():
    out = {"benchmark": "distributed"}
    traffic(out)
    liars(out)
    pong_speed(out)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
