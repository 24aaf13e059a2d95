"""MuJoCo locomotion on defaults: env steps, episodes and wall time until the center first
reaches the task's threshold (Mania et al. 2018's; the ES paper's Humanoid figure uses the same
6,000), per seed and the median over seeds, with the published figures beside them.

Each run is ``es.train(es.config_for(TASK, seed=S, workers=W))``: the task's defaults, in
memory. It stops when the center's mean return over its 5 episodes (gymnasium's own reward:
the alive bonus that training shifts out is added back) reaches the threshold, or at
``--minutes`` of wall time. Then the center plays 10 held-out episodes (seeds 10000..10009): a center that
crossed the line once may score below it on average, and the line says so.

    python benchmarks/mujoco.py [--tasks swimmer hopper halfcheetah] [--seeds 3] [--workers 2] [--minutes 30]

Prints one JSON line per run, one per task (medians over its seeds), then the table
(markdown) that docs/locomotion.md shows.
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

# This file is named after the benchmark, and so is the mujoco package: the checkout,
# not this folder, comes first on the path, so that gymnasium's "import mujoco" finds the package.
sys.path[0] = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

import es  # noqa: E402
from locomotion.plugin import TASKS  # noqa: E402

# Salimans et al. 2017, Table 3 (mean of 6 runs, -v1 tasks, two 64-unit tanh layers): timesteps
# ES and TRPO took to TRPO's score at 5M steps. Other targets than ours: printed beside, not compared.
PUBLISHED = {"swimmer": ("to 128", 1.39e6, 4.59e6), "hopper": ("to 3,403", 3.16e7, 4.56e6),
             "halfcheetah": ("to 2,386", 2.88e6, 5.00e6)}


class OutOfTime(Exception):
    pass


def run(task: str, seed: int, workers: int, minutes: float) -> dict:
    cfg = es.config_for(task, seed=seed, workers=workers, generations=100_000)
    threshold = cfg.reward_goal
    t0, rows = time.perf_counter(), []

    def watch(row):
        rows.append(row)
        if time.perf_counter() - t0 > 60 * minutes:
            raise OutOfTime

    try:
        result = es.train(cfg, on_generation=watch)
        summary, reached = result.summary, result.summary["stopped"] == "goal"
        held_out = {"eval_mean": summary["eval_mean"], "eval_std": summary["eval_std"]}
    except OutOfTime:
        reached, held_out = False, {}
    last = rows[-1]
    episodes = len(rows) * (cfg.population * cfg.episodes_per_member + cfg.center_episodes)
    return {"benchmark": "mujoco", "task": task, "seed": seed, "workers": workers, "reached": reached,
            "threshold": threshold, "generations": len(rows), "env_steps": last["env_steps"], "episodes": episodes,
            "train_seconds": round(last["train_seconds"], 1), "wall_seconds": round(time.perf_counter() - t0, 1),
            "best_center": max(r["center_return"] for r in rows), **held_out}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", nargs="+", default=["swimmer", "hopper", "halfcheetah"], choices=list(TASKS))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--minutes", type=float, default=30.0, help="wall-time budget of one run")
    args = ap.parse_args()
    machine = f"{platform.machine()}, {os.cpu_count()} cores"
    table = []
    for task in args.tasks:
        runs = []
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            runs.append(run(task, seed, args.workers, args.minutes))
            print(json.dumps({**runs[-1], "machine": machine}), flush=True)
        done = [r for r in runs if r["reached"]]
        line = {"benchmark": "mujoco", "task": task, "summary": True, "seeds": len(runs), "reached": len(done),
                "machine": machine, "workers": args.workers, "minutes_budget": args.minutes}
        if done:
            for key in ("env_steps", "episodes", "train_seconds"):
                line[f"median_{key}"] = statistics.median(r[key] for r in done)
            line["max_train_seconds"] = max(r["train_seconds"] for r in done)
            line["held_out_means"] = [round(r["eval_mean"], 1) for r in done]
        print(json.dumps(line), flush=True)
        table.append(line)
    print("\n| task | reached | median episodes | median env steps | median wall time | held-out means | "
          "paper: ES, TRPO steps |")
    print("|---|---|---|---|---|---|---|")
    for line in table:
        target, es_steps, trpo_steps = PUBLISHED.get(line["task"], ("", float("nan"), float("nan")))
        paper = f"{target}: {es_steps / 1e6:.2f}M, {trpo_steps / 1e6:.2f}M" if target else "-"
        if line["reached"]:
            print(f"| {line['task']} | {line['reached']}/{line['seeds']} | {line['median_episodes']:,.0f} | "
                  f"{line['median_env_steps']:,.0f} | {line['median_train_seconds'] / 60:.1f} min "
                  f"(max {line['max_train_seconds'] / 60:.1f}) | {line['held_out_means']} | {paper} |")
        else:
            print(f"| {line['task']} | 0/{line['seeds']} | - | - | over {args.minutes:g} min | - | {paper} |")


if __name__ == "__main__":
    main()
