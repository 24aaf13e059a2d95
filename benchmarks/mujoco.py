"""MuJoCo locomotion on defaults: env steps, episodes and wall time until a run stops at its task's
threshold (Mania et al. 2018's; the ES paper's Humanoid figure uses the same 6,000), per seed and
the median over seeds, with the published figures beside them.

Each run is ``es.train(es.config_for(TASK, seed=S, workers=W))``: the task's defaults. A run stops
when the center's mean return over its 5 episodes (gymnasium's own reward: the alive bonus that
training shifts out is added back) reaches the threshold *and* its mean over 20 held-out episodes
(seeds 10000..10019, never trained on) does too (``confirm_goal``), or at ``--minutes`` of wall
time. Where the task restarts (``restart_steps``, ``stall_steps``), its attempts count together. The line gives
that held-out mean, and the mean over 20 more episodes (seeds 20000..20019) that decided
nothing: a center checked on the same 20 episodes many times is selected on them a little.

    python benchmarks/mujoco.py [--tasks swimmer hopper halfcheetah] [--seeds 5] [--workers 2] [--minutes 30]
                                [--out FILE]   # appends each line; a run already in FILE is not run again

Prints one JSON line per run, one per task (medians over its seeds), then the table
(markdown) that docs/locomotion.md shows.
"""
import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time

import numpy as np
# This file is named after the benchmark, and so is the mujoco package: the checkout,
# not this folder, comes first on the path, so that gymnasium's "import mujoco" finds the package.
sys.path[0] = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

import es  # noqa: E402
from es.play import load_agent  # noqa: E402
from locomotion.plugin import TASKS  # noqa: E402

# Salimans et al. 2017, Table 3 (mean of 6 runs, -v1 tasks, two 64-unit tanh layers): timesteps
# ES and TRPO took to TRPO's score at 5M steps. Other targets than ours: printed beside, not compared.
PUBLISHED = {"swimmer": ("to 128", 1.39e6, 4.59e6), "hopper": ("to 3,403", 3.16e7, 4.56e6),
             "halfcheetah": ("to 2,386", 2.88e6, 5.00e6), "walker2d": ("to 3,830", 3.79e7, 4.81e6)}


class OutOfTime(Exception):
    pass


FRESH_SEED = 20_000


def run(task: str, seed: int, workers: int, minutes: float, keep: str | None = None) -> dict:
    cfg = es.config_for(task, seed=seed, workers=workers, generations=100_000)
    threshold = cfg.reward_goal
    t0, rows = time.perf_counter(), []

    def watch(row):
        rows.append(row)
        if time.perf_counter() - t0 > 60 * minutes:
            raise OutOfTime

    with tempfile.TemporaryDirectory(prefix="mujoco-") as tmp:
        run_dir = os.path.join(keep or tmp, f"{task}-seed{seed}")
        try:
            summary = es.train(cfg, run_dir=run_dir, on_generation=watch).summary
            reached = summary["stopped"] == "goal"
        except OutOfTime:
            summary, reached = {}, False
        wall = time.perf_counter() - t0
        problem, center, _ = load_agent(os.path.join(run_dir, "checkpoint.npz"))
        fresh, _ = problem.play(center, np.arange(FRESH_SEED, FRESH_SEED + cfg.eval_episodes))
        problem.close()
    last = rows[-1]
    episodes = len(rows) * (cfg.population * cfg.episodes_per_member + cfg.center_episodes)
    checks = [r["goal_check"] for r in rows if "goal_check" in r]
    line = {"benchmark": "mujoco", "task": task, "seed": seed, "workers": workers, "reached": reached,
            "threshold": threshold, "generations": len(rows), "env_steps": last["env_steps"],
            "episodes": episodes + cfg.eval_episodes * len(checks),
            "train_seconds": round(last["train_seconds"], 1), "wall_seconds": round(wall, 1),
            "best_center": max(r["center_return"] for r in rows), "goal_checks": len(checks),
            "restarts": sum(1 for r in rows if "restart" in r), "restart_steps": cfg.restart_steps,
            "restart_reasons": [r["restart_reason"] for r in rows if "restart" in r],
            "stall": None if cfg.stall_steps is None else [cfg.stall_steps, cfg.stall_gain],
            "fresh_mean": float(np.mean(fresh)), "fresh_std": float(np.std(fresh)),
            "fresh_seeds": [FRESH_SEED, FRESH_SEED + cfg.eval_episodes - 1]}
    if reached:
        line.update(eval_mean=summary["eval_mean"], eval_std=summary["eval_std"], eval_seeds=summary["eval_seeds"])
    return line


def _done(path: str | None) -> dict:
    """The runs an earlier call already wrote to ``path``: ``(task, seed, workers) -> line``."""
    if not path or not os.path.exists(path):
        return {}
    lines = [json.loads(x) for x in open(path) if x.strip()]
    return {(d["task"], d["seed"], d["workers"]): d for d in lines if not d.get("summary")}


def summarize(task: str, runs: list, machine: str, workers: int, minutes: float) -> dict:
    """Medians over every seed: a seed that did not get there counts with the time and steps it
    used, so where one did not, the median may be a lower bound, and the line says so."""
    done = [r for r in runs if r["reached"]]
    line = {"benchmark": "mujoco", "task": task, "summary": True, "seeds": len(runs), "reached": len(done),
            "machine": machine, "workers": workers, "minutes_budget": minutes,
            "median_is_lower_bound": len(done) < len(runs)}
    for key in ("env_steps", "episodes", "train_seconds"):
        line[f"median_{key}"] = statistics.median(r[key] for r in runs)
    line["max_train_seconds"] = max(r["train_seconds"] for r in runs)
    line["restarts"] = [r["restarts"] for r in runs]
    line["held_out_means"] = [round(r["eval_mean"], 1) if r["reached"] else None for r in runs]
    line["fresh_means"] = [round(r["fresh_mean"], 1) for r in runs]
    return line


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", nargs="+", default=["swimmer", "hopper", "halfcheetah"], choices=list(TASKS))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--minutes", type=float, default=30.0, help="wall-time budget of one run")
    ap.add_argument("--out", help="append each JSON line here; runs already in it are read, not run again")
    ap.add_argument("--keep", help="keep each run's folder (TASK-seedS) under this folder")
    args = ap.parse_args()
    machine = f"{platform.machine()}, {os.cpu_count()} cores"
    earlier, table = _done(args.out), []

    def emit(line):
        print(json.dumps(line), flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(line) + "\n")

    for task in args.tasks:
        runs = []
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            if (task, seed, args.workers) in earlier:
                runs.append(earlier[(task, seed, args.workers)])
                continue
            load_before = os.getloadavg()[0]     # the 1-minute load average: was anything else running?
            line = run(task, seed, args.workers, args.minutes, args.keep)
            runs.append({**line, "machine": machine, "load_before": load_before, "load_after": os.getloadavg()[0]})
            emit(runs[-1])
        table.append(summarize(task, runs, machine, args.workers, args.minutes))
        emit(table[-1])
    print("\n| task | reached | median episodes | median env steps | median minutes (max) | restarts | "
          "held-out means (20 episodes) | paper: ES, TRPO steps |")
    print("|---|---|---|---|---|---|---|---|")
    for line in table:
        target, es_steps, trpo_steps = PUBLISHED.get(line["task"], ("", float("nan"), float("nan")))
        paper = f"{target}: {es_steps / 1e6:.2f}M, {trpo_steps / 1e6:.2f}M" if target else "-"
        bound = "at least " if line["median_is_lower_bound"] else ""
        print(f"| {line['task']} | {line['reached']}/{line['seeds']} | {bound}{line['median_episodes']:,.0f} | "
              f"{bound}{line['median_env_steps']:,.0f} | {bound}{line['median_train_seconds'] / 60:.1f} "
              f"({line['max_train_seconds'] / 60:.1f}) | {line['restarts']} | {line['held_out_means']} | {paper} |")


if __name__ == "__main__":
    main()
