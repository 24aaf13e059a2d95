"""Pong throughput: env steps/s of a full ES generation (population 64 + the center, 1000-step
episodes, the training defaults) against the bare vector environment stepping the same
number of games with a constant action, in the same run; also the time per observation of
the dense and the conv policy's batched forward pass (one observation for each of 128
members, as in a training step). Prints one JSON line.

    python benchmarks/pong.py [--num-envs 128] [--sigma 0.05]
"""
import _common  # noqa: F401

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import es  # noqa: E402
from es import noise  # noqa: E402
from es.evaluators import LocalEvaluator  # noqa: E402
from es.optimizers import Adam  # noqa: E402
from es.strategy import OpenES  # noqa: E402
from es.train import one_blas_thread  # noqa: E402
from pong.env import make_pong_vector  # noqa: E402
from pong.policy import PongConvPolicy, PongDensePolicy  # noqa: E402
from pong.problem import PongProblem  # noqa: E402


def bare(num_envs: int, seconds: float = 10.0) -> float:
    env = make_pong_vector(num_envs, repeat_action_probability=0.0)
    env.reset()
    action = np.zeros(num_envs, dtype=np.int64)
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        env.step(action)
        steps += num_envs
    rate = steps / (time.perf_counter() - t0)
    env.close()
    return rate


def policy_us_per_observation(policy, rows: int = 128, repeats: int = 20) -> float:
    """Microseconds per (member, observation) row of one batched forward pass."""
    rng = np.random.default_rng(0)
    params = policy.initial_params(0)[None] + 0.05 * rng.standard_normal((rows, policy.num_params), np.float32)
    layers = policy.unflatten(params)
    obs = rng.integers(0, 256, (rows, 4, 42, 42), dtype=np.uint8)
    policy.forward(layers, obs)
    t0 = time.perf_counter()
    for _ in range(repeats):
        policy.forward(layers, obs)
    return (time.perf_counter() - t0) / (repeats * rows) * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--num-envs", type=int, default=128)
    ap.add_argument("--population", type=int, default=64)
    ap.add_argument("--checkpoint", default=None, help="start from these parameters (default: a fresh policy)")
    ap.add_argument("--generations", type=int, default=2)
    args = ap.parse_args()
    with one_blas_thread():
        problem = PongProblem(num_envs=args.num_envs)
        center = problem.initial_params(0)
        if args.checkpoint:
            center = es.checkpoint.load_checkpoint(args.checkpoint)[0]
        strategy = OpenES(center, Adam(problem.num_params, 0.01), population=args.population, sigma=0.05, seed=0)
        evaluator = LocalEvaluator(problem)
        seeds = noise.episode_seeds(0, 0, 1)
        evaluator.evaluate(strategy.ask(), seeds, seeds)      # builds the vector env
        slots = next(iter(problem._vecs))
        steps, seconds = 0, 0.0
        for g in range(args.generations):
            seeds = noise.episode_seeds(0, g + 1, 1)
            t0 = time.perf_counter()
            res = evaluator.evaluate(strategy.ask(), seeds, seeds)
            strategy.tell(res.returns)
            seconds += time.perf_counter() - t0
            steps += int(res.lengths.sum()) + res.center_length
        problem.close()
        es_rate = steps / seconds
        bare_rate = bare(slots)
        dense, conv = PongDensePolicy(), PongConvPolicy()
        forward = {"dense_params": dense.num_params, "dense_us_per_observation": policy_us_per_observation(dense),
                   "conv_params": conv.num_params, "conv_us_per_observation": policy_us_per_observation(conv)}
    print(json.dumps({"benchmark": "pong", "population": args.population, "slots": slots,
                      "es_steps_per_s": es_rate, "bare_steps_per_s": bare_rate, "ratio_vs_bare": es_rate / bare_rate,
                      "seconds_per_generation": seconds / args.generations,
                      "mean_episode_steps": steps / (args.generations * (args.population + 1)),
                      "start": args.checkpoint or "fresh policy", **forward}))


if __name__ == "__main__":
    main()
