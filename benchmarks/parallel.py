"""joblib workers against one process, on a light and a heavy task. One JSON line per task and
worker count: task, workers, seconds_per_generation, speedup (against 1 worker, same run).

* light: CartPole-v1, population 256 (the batched evaluator; a generation is ~25 ms of
  sequential steps). 2 workers as a user gets them (adaptive), and forced to dispatch.
* heavy: Pong (dense policy), population 64 and the center, episodes capped at 1000 steps, a
  fresh policy. Every process steps its games on one thread (``pong.games``), so 1 worker is
  1 core. Against it, in the same run: the machine's ceiling, the same games stepped bare
  (a constant action, no policy, no ES) in 1 and in 2 processes. ``efficiency`` is the
  2-worker ES speed-up over that bare 2-process speed-up: what the pool itself costs
  (dispatch, serialization, a worker idle while the other finishes its chunk).

    python benchmarks/parallel.py [--generations 3] [--rounds 3]
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
from es.training import one_blas_thread  # noqa: E402


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


def bare_steps_per_s(seconds: float) -> float:
    """Agent steps/s of 32 Pong games in this process with a constant action: the emulator and
    the preprocessing alone, what an ES generation cannot beat."""
    from pong.env import downsample_batch, stack_batch
    from pong.games import PongGames
    games, constant = PongGames(32, downsample_batch, stack_batch), lambda e, obs: np.zeros(len(e), np.int64)
    games.play(constant, np.arange(32), max_steps=1)          # build the 32 games before timing
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        _, lengths = games.play(constant, np.arange(32) + steps, max_steps=200)
        steps += int(lengths.sum())
    return steps / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--generations", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--chunks-per-worker", type=int, nargs="+", default=[None],
                    help="heavy task: even chunks per worker to compare (default: the guided chunks es.parallel cuts)")
    ap.add_argument("--skip-light", action="store_true")
    args = ap.parse_args()
    rows = []

    cart = EnvProblem("CartPole-v1", hidden=())
    # Interleave the three ways, one generation-batch at a time, so that drift on a shared
    # machine hits them alike.
    evaluators = {"in-process": LocalEvaluator(cart),
                  "adaptive": ParallelEvaluator(cart, workers=2),
                  "forced": ParallelEvaluator(cart, workers=2, adaptive=False)}
    light = {k: [] for k in evaluators}
    for _ in range(0 if args.skip_light else 3):
        for name, ev in evaluators.items():
            light[name].append(seconds_per_generation(cart, ev, 256, 0.3, args.generations, warmup=2)[0])
    base = float(np.median(light["in-process"])) if light["in-process"] else None
    for name, ev in evaluators.items():
        if base is None:
            ev.close()
            continue
        spg = float(np.median(light[name]))
        mode = name if name != "adaptive" else f"adaptive (chose {ev.mode})"
        rows.append({"task": "light", "workers": 1 if name == "in-process" else 2, "mode": mode,
                     "seconds_per_generation": spg, "speedup": base / spg})
        ev.close()

    from joblib import Parallel, delayed
    from pong.problem import PongProblem
    spec = {"type": "pong_dense", "band": 6, "hidden": []}
    splits = args.chunks_per_worker
    heavy = {"bare_1": [], "bare_2": [], "es_1": [], **{("es_2", c): [] for c in splits}}
    with Parallel(n_jobs=2) as pool:
        pool(delayed(bare_steps_per_s)(0.5) for _ in range(2))          # workers up before timing
        for _ in range(args.rounds):
            heavy["bare_1"].append(bare_steps_per_s(10.0))
            heavy["bare_2"].append(sum(pool(delayed(bare_steps_per_s)(10.0) for _ in range(2))))
            for key in ["es_1", *[("es_2", c) for c in splits]]:
                pong = PongProblem(spec, max_steps=1000)
                ev = LocalEvaluator(pong) if key == "es_1" else \
                    ParallelEvaluator(pong, workers=2, adaptive=False, chunks_per_worker=key[1])
                with one_blas_thread():      # as es.train runs every generation
                    heavy[key].append(seconds_per_generation(pong, ev, 64, 0.05, args.generations)[1])
                ev.close()
                pong.close()
    med = {k: float(np.median(v)) for k, v in heavy.items()}
    ceiling = [b2 / b1 for b1, b2 in zip(heavy["bare_1"], heavy["bare_2"])]
    for c in splits:
        speedup = [e2 / e1 for e1, e2 in zip(heavy["es_1"], heavy[("es_2", c)])]
        eff = [s / b for s, b in zip(speedup, ceiling)]
        rows.append({"task": "heavy", "workers": 2, "mode": "forced", "chunks_per_worker": c or "guided",
                     "bare_steps_per_s_1": med["bare_1"], "bare_steps_per_s_2": med["bare_2"],
                     "es_steps_per_s_1": med["es_1"], "es_steps_per_s_2": med[("es_2", c)],
                     "bare_ceiling": float(np.median(ceiling)), "speedup": float(np.median(speedup)),
                     "efficiency": float(np.median(eff)), "efficiency_range": [float(min(eff)), float(max(eff))]})
    for row in rows:
        print(json.dumps({"benchmark": "parallel", **row}))


if __name__ == "__main__":
    main()
