"""Pong throughput: env steps/s of full ES generations (population 64 + the center, 1000-step
episodes, the training defaults) against the bare vector environment stepping the same
number of games with a constant action, in the same run; also the time per observation of
the dense and the conv policy's batched forward pass (one observation for each of 128
members, as in a training step). Prints one JSON line.

Two starting points are measured: the shipped agent (``ratio_vs_bare``; its games run to
the 1000-step cap, as in 370 of the 387 generations of the shipped run) and a fresh policy
(``fresh_ratio_vs_bare``; generation 0, where games end after ~820 steps on average while
the longest runs 1000). The episodes queue for a few game slots (about four episodes per
slot, ``PongProblem.slots_for``) stepped in two alternating batches, so a slot whose game
ends takes the next episode instead of idling. The bare env is measured at the same number of
slots (``bare_steps_per_s``) and at one slot per episode, the old layout
(``bare_steps_per_s_one_slot_per_episode``); ``*_ratio_vs_best_bare`` divides by the faster of
the two. Bare rates are measured before and after the ES runs and averaged (the machine's load
drifts).

    python benchmarks/pong.py [--num-envs 128] [--checkpoint pong/agent.npz]
"""
import _common  # noqa: F401

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

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

ROOT = Path(__file__).resolve().parents[1]


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


def es_generations(problem, center, population: int, generations: int):
    """(env steps, seconds, longest episode) of ``generations`` ES generations from ``center``."""
    strategy = OpenES(center, Adam(problem.num_params, 0.01), population=population, sigma=0.05, seed=0)
    evaluator = LocalEvaluator(problem)
    steps, seconds, longest = 0, 0.0, 0
    for g in range(generations):
        seeds = noise.episode_seeds(0, g + 1, 1)
        t0 = time.perf_counter()
        res = evaluator.evaluate(strategy.ask(), seeds, seeds)
        strategy.tell(res.returns)
        seconds += time.perf_counter() - t0
        steps += int(res.lengths.sum()) + res.center_length
        longest = max(longest, int(res.lengths.max()), res.center_length)
    return steps, seconds, longest


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--num-envs", type=int, default=128)
    ap.add_argument("--population", type=int, default=64)
    ap.add_argument("--checkpoint", default=str(ROOT / "pong" / "agent.npz"),
                    help="the trained parameters to measure (default: the shipped agent)")
    ap.add_argument("--generations", type=int, default=2)
    args = ap.parse_args()
    with one_blas_thread():
        problem = PongProblem(num_envs=args.num_envs)
        episodes_per_generation = args.population + 1
        # Build the vector env for the population + the center before timing (~0.1 s per game).
        slots = problem._vector(episodes_per_generation).num_envs
        wide = min(args.num_envs, episodes_per_generation)
        before = bare(slots, 5.0), bare(wide, 5.0)
        trained = es.checkpoint.load_checkpoint(args.checkpoint)[0]
        t_steps, t_seconds, _ = es_generations(problem, trained, args.population, args.generations)
        f_steps, f_seconds, f_longest = es_generations(problem, problem.initial_params(0), args.population,
                                                       args.generations)
        problem.close()
        after = bare(slots, 5.0), bare(wide, 5.0)
        bare_rate, bare_wide = (before[0] + after[0]) / 2, (before[1] + after[1]) / 2
        best = max(bare_rate, bare_wide)
        dense, conv = PongDensePolicy(), PongConvPolicy()
        forward = {"dense_params": dense.num_params, "dense_us_per_observation": policy_us_per_observation(dense),
                   "conv_params": conv.num_params, "conv_us_per_observation": policy_us_per_observation(conv)}
    episodes = args.generations * (args.population + 1)
    print(json.dumps({"benchmark": "pong", "population": args.population, "slots": slots,
                      "checkpoint": args.checkpoint, "bare_steps_per_s": bare_rate,
                      "bare_steps_per_s_one_slot_per_episode": bare_wide,
                      "es_steps_per_s": t_steps / t_seconds, "ratio_vs_bare": t_steps / t_seconds / bare_rate,
                      "ratio_vs_best_bare": t_steps / t_seconds / best,
                      "fresh_ratio_vs_best_bare": f_steps / f_seconds / best,
                      "seconds_per_generation": t_seconds / args.generations,
                      "mean_episode_steps": t_steps / episodes,
                      "fresh_es_steps_per_s": f_steps / f_seconds,
                      "fresh_ratio_vs_bare": f_steps / f_seconds / bare_rate,
                      "fresh_mean_episode_steps": f_steps / episodes, "fresh_longest_episode": f_longest,
                      **forward}))


if __name__ == "__main__":
    main()
