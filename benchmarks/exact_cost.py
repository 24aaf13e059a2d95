"""The cost of CPU-independent forward passes (``es.exact``): seconds per generation of one
process on one core, before (a git ref whose policies used matmul, np.tanh and np.exp) and
after (this checkout), alternated ROUNDS times so that a busy machine slows both alike; the
figure is the ratio of medians. Also the extremes replay's cost in a Redis run with two
worker processes the master did not start. Prints one JSON line per figure.

    python benchmarks/exact_cost.py [--before REF] [--rounds 3] [--only NAME ...]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import pythonpath  # noqa: E402  (and the import path)

ROOT = Path(__file__).resolve().parents[1]

# name -> (config_for arguments, generations timed after one untimed generation)
WORKLOADS = {
    "halfcheetah_mlp": (dict(env="halfcheetah", seed=0, population=32, max_steps=1000, extra={"policy": "mlp"}), 2),
    "halfcheetah_linear": (dict(env="halfcheetah", seed=0, population=32, max_steps=1000), 2),
    "cartpole": (dict(env="cartpole", seed=0), 5),
    "pong_dense": (dict(env="pong", seed=0, population=16, max_steps=600, extra={"num_envs": 16}), 2),
    "pong_keypoints_agent": (dict(env="pong", seed=0, population=16, max_steps=600, hidden=[8], sigma=0.05,
                                  extra={"policy": "keypoints", "keypoints": 6, "inputs": "frames+motion",
                                         "pull": "windows", "head_inputs": "vbn", "num_envs": 16}), 2),
}

TIMER = r'''
import json, sys, time, os
os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
import es
kw, gens = json.loads(sys.argv[1]), int(sys.argv[2])
env = kw.pop("env")
marks = []
cfg = es.config_for(env, generations=gens + 1, reward_goal=1e9, workers=1, eval_episodes=1, **kw)
es.train(cfg, final_eval=False, on_generation=lambda row: marks.append(time.perf_counter()))
print(json.dumps((marks[-1] - marks[0]) / gens))
'''


def seconds_per_generation(tree: Path, name: str) -> float:
    kw, gens = WORKLOADS[name]
    env = {**os.environ, "PYTHONPATH": pythonpath(tree), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", TIMER, json.dumps(kw), str(gens)], cwd=tree, env=env,
                         capture_output=True, text=True, timeout=3600)
    if out.returncode:
        raise SystemExit(f"{name} in {tree}: {out.stderr[-2000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def extremes_cost(generations: int = 8) -> dict:
    """CartPole (population 256, 8 chunks) with two worker processes of fresh ids: members the
    master replayed per generation for the extremes, beside its spot checks, and the share of
    the generation's wall time the master's own replays took."""
    import es
    from es.distributed.master import RedisEvaluator
    from es.distributed.server import EmbeddedRedis
    from es.training import make_problem_for
    cfg = es.config_for("cartpole", seed=0, population=256, generations=generations, reward_goal=1e9)
    with EmbeddedRedis() as server:
        env = {**os.environ, "ES_REDIS_URL": server.worker_url, "PYTHONPATH": pythonpath(ROOT)}
        procs = [subprocess.Popen([sys.executable, "-m", "es", "worker"], env=env, stderr=subprocess.DEVNULL)
                 for _ in range(2)]
        time.sleep(2.0)
        try:
            problem = make_problem_for(cfg)
            ev = RedisEvaluator(problem, server.master_url, chunks=8, log=lambda m: None)
            result = es.train(cfg, problem, evaluator=ev, final_eval=False)
            ev.close()
        finally:
            for p in procs:
                p.kill()
    rows = result.metrics[1:]       # generation 0 is probation
    wall = sum(r["seconds"] for r in rows) if all("seconds" in r for r in rows) else None
    spot = sum(r.get("spot_check_seconds", 0.0) for r in rows)
    return {"figure": "extremes_replay", "population": 256, "generations_after_probation": len(rows),
            "extremes_replayed_per_generation": statistics.mean(r.get("extremes_replayed", 0) for r in rows),
            "spot_checked_per_generation": statistics.mean(r.get("spot_checked", 0) for r in rows),
            "master_replay_seconds_per_generation": round(spot / len(rows), 4),
            "master_replay_share_of_wall": round(spot / wall, 3) if wall else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", default="c3e0bd9^", help="the git ref before es.exact [c3e0bd9^]")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", nargs="*", default=None, help=f"workloads of {', '.join(WORKLOADS)}, or extremes")
    args = ap.parse_args()
    names = args.only or [*WORKLOADS, "extremes"]
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp) / "before"
        subprocess.run(["git", "worktree", "add", "--detach", str(before), args.before], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            for name in (n for n in names if n in WORKLOADS):
                times = {"before": [], "after": []}
                for _ in range(args.rounds):
                    times["before"].append(seconds_per_generation(before, name))
                    times["after"].append(seconds_per_generation(ROOT, name))
                b, a = statistics.median(times["before"]), statistics.median(times["after"])
                print(json.dumps({"figure": "seconds_per_generation", "workload": name, "before": round(b, 4),
                                  "after": round(a, 4), "after_over_before": round(a / b, 3),
                                  "rounds": args.rounds, "before_ref": args.before}), flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT, capture_output=True)
    if "extremes" in names:
        print(json.dumps(extremes_cost()), flush=True)


if __name__ == "__main__":
    main()
