"""joblib workers against one process, on a light and a heavy task. One JSON line per task and
worker count: task, workers, seconds_per_generation, speedup (against 1 worker, same run).

* light: CartPole-v1, population 256 (the batched evaluator; a generation is ~25 ms of
  sequential steps). 2 workers as a user gets them (adaptive), and forced to dispatch.
* heavy: Pong (dense policy), population 32, 300-step episodes, ALE on one thread per worker
  (so 1 worker = 1 core). Steps cost ~400 us each here.

    python benchmarks/parallel.py [--generations 4]
"""
import _common  # noqa: F401  (import path)

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import es  # noqa: E402
from es import seeding  # noqa: E402
from es.envs import EnvProblem  # noqa: E402
from es.evaluators import LocalEvaluator  # noqa: E402
from es.optimizers import SGD  # noqa: E402
from es.parallel import ParallelEvaluator  # noqa: E402
from es.strategy import OpenES  # noqa: E402


def seconds_per_generation(problem, evaluator, population, sigma, generations, warmup=1):
    strategy = OpenES(problem.initial_params(0), SGD(problem.num_params, 0.3, momentum=0.0),
                      population=population, sigma=sigma, seed=0, shaping=es.z_score)
    times, steps = [], 0
    for g in range(warmup + generations):
        seeds = seeding.episode_seeds(0, g, 1)
        t0 = time.perf_counter()
        res = evaluator.evaluate(strategy.ask(), seeds, seeds)
        strategy.tell(res.returns)
        if g >= warmup:
            times.append(time.perf_counter() - t0)
            steps += int(res.lengths.sum()) + res.center_length
    return float(np.mean(times)), steps / sum(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--generations", type=int, default=4)
    args = ap.parse_args()
    rows = []

    cart = EnvProblem("CartPole-v1", hidden=())
    # Interleave the three ways, one generation-batch at a time, so that drift on a shared
    # machine hits them alike.
    evaluators = {"in-process": LocalEvaluator(cart),
                  "adaptive": ParallelEvaluator(cart, workers=2, log=lambda m: None),
                  "forced": ParallelEvaluator(cart, workers=2, adaptive=False)}
    light = {k: [] for k in evaluators}
    for _ in range(3):
        for name, ev in evaluators.items():
            light[name].append(seconds_per_generation(cart, ev, 256, 0.3, args.generations, warmup=2)[0])
    base = float(np.median(light["in-process"]))
    for name, ev in evaluators.items():
        spg = float(np.median(light[name]))
        mode = name if name != "adaptive" else f"adaptive (chose {ev.mode})"
        rows.append({"task": "light", "workers": 1 if name == "in-process" else 2, "mode": mode,
                     "seconds_per_generation": spg, "speedup": base / spg})
        ev.close()

    from pong.problem import PongProblem
    spec = {"type": "pong_dense", "band": 6, "hidden": []}
    pong = PongProblem(spec, max_steps=300, threads=1)
    base, rate = seconds_per_generation(pong, LocalEvaluator(pong), 32, 0.05, args.generations)
    pong.close()
    rows.append({"task": "heavy", "workers": 1, "mode": "in-process", "seconds_per_generation": base,
                 "speedup": 1.0, "env_steps_per_s": rate})
    pong = PongProblem(spec, max_steps=300, threads=1)
    ev = ParallelEvaluator(pong, workers=2, adaptive=False)
    spg, rate = seconds_per_generation(pong, ev, 32, 0.05, args.generations)
    ev.close()
    rows.append({"task": "heavy", "workers": 2, "mode": "forced", "seconds_per_generation": spg,
                 "speedup": base / spg, "env_steps_per_s": rate})
    for row in rows:
        print(json.dumps({"benchmark": "parallel", **row}))


if __name__ == "__main__":
    main()
