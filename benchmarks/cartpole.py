"""CartPole-v1 on one core: 5 seeds of `python -m es train cartpole` defaults, in memory.

"Solved": the center's mean return >= 475 over 20 episodes, seeds 1000..1019, on
gymnasium's own CartPole-v1. train_seconds is the training loop only (no solved-check, no
run-directory I/O). Env-only time = env steps / the step rate of a bare gymnasium
CartPole-v1 with a constant action, measured in this same run.

    python benchmarks/cartpole.py [--seeds 5] [--first-seed 0]

Prints one JSON line.
"""
from _common import one_core  # noqa: I001  (pins the core before NumPy starts)

CPU = one_core()

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import gymnasium as gym  # noqa: E402

import es  # noqa: E402


def bare_steps_per_second(seconds: float = 1.0) -> float:
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(1000):
            _, _, term, trunc, _ = env.step(0)
            if term or trunc:
                env.reset()
        steps += 1000
    return steps / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0)
    args = ap.parse_args()
    es.train(es.config_for("cartpole", seed=999, generations=2), final_eval=False)  # warm caches and imports
    bare = bare_steps_per_second()
    runs = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        s = es.train(es.config_for("cartpole", seed=seed)).summary
        runs.append(s)
    bare_after = bare_steps_per_second()
    rate = (bare + bare_after) / 2
    train = [r["train_seconds"] for r in runs]
    ratios = [r["train_seconds"] / (r["env_steps"] / rate) for r in runs]
    print(json.dumps({
        "benchmark": "cartpole", "cpu": CPU, "seeds": [r["seed"] for r in runs],
        "solved": sum(r["solved"] for r in runs),
        "median_train_seconds": statistics.median(train), "min_train_seconds": min(train),
        "max_train_seconds": max(train),
        "median_generations": statistics.median(r["generations"] for r in runs),
        "median_env_steps": statistics.median(r["env_steps"] for r in runs),
        "bare_env_steps_per_s": rate,
        "ratio_env_only": statistics.median(ratios),
        "eval_means": [r["eval_mean"] for r in runs],
        "train_seconds": train,
    }))


if __name__ == "__main__":
    main()
