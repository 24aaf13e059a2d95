"""Pong throughput: env steps/s of full ES generations (population 64 + the center, 1000-step
episodes, the training defaults) against the bare vector environment stepping the same
number of games with a constant action, in the same run; also the time per observation of
the dense and the conv policy's batched forward pass (one observation for each of 128
members, as in a training step). Prints one JSON line.

Two starting points are measured: the shipped agent (``ratio_vs_bare``; its games run to
the 1000-step cap, as in 370 of the 387 generations of the shipped run) and a fresh policy
(``fresh_ratio_vs_bare``; generation 0, where games end after ~820 steps on average while
the longest runs 1000). The episodes queue for a few game slots (three rounds of episodes
per slot, ``PongProblem.slots_for``) stepped in two alternating batches, so a slot whose game
ends takes the next episode instead of idling. ``workers_ratio_vs_bare``: the trained
agent's generations through two worker processes on one ALE thread each, the other way
``es train pong --workers 2`` may choose (the in-process way is ``ratio_vs_bare``'s, on every
core since the evaluator uses ``PongProblem.in_process()``).

The reference ("bare") is the vector env stepping one game per episode (65 games) with a
constant action, synchronously: what the ratio meant before, when training used that
layout. ``*_vs_bare_async`` divides instead by the same env in the async layout training now
uses, with a constant action: the emulator's ceiling here. The machine's load drifts, so the
measurements run in ``--rounds`` interleaved rounds (bare, trained generation, fresh
generation, trained generation on workers, bare async) and each ratio is the median of its
per-round ratios.

    python benchmarks/pong.py [--num-envs 128] [--checkpoint pong/agent.npz] [--rounds 3]
"""
import _common  # noqa: F401

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import es  # noqa: E402
from es import seeding  # noqa: E402
from es.evaluators import LocalEvaluator  # noqa: E402
from es.optimizers import Adam  # noqa: E402
from es.parallel import ParallelEvaluator  # noqa: E402
from es.strategy import OpenES  # noqa: E402
from es.training import one_blas_thread  # noqa: E402
from pong.env import make_pong_vector  # noqa: E402
from pong.policy import PongConvPolicy, PongDensePolicy  # noqa: E402
from pong.problem import PongProblem  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def bare(num_envs: int, seconds: float = 10.0, batch_size: int | None = None) -> float:
    """Env steps/s of ``num_envs`` games with a constant action: synchronous, or async in
    batches of ``batch_size`` (send/recv, as training steps them)."""
    batch = batch_size or num_envs
    env = make_pong_vector(num_envs, repeat_action_probability=0.0, batch_size=batch)
    env.reset()
    action = np.zeros(batch, dtype=np.int64)
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        if batch == num_envs:
            env.step(action)
        else:
            env.send(action)
            env.recv()
        steps += batch
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


def es_generations(problem, center, population: int, generations: int, evaluator=None):
    """(env steps, seconds, longest episode) of ``generations`` ES generations from ``center``
    (in this process, or through ``evaluator``)."""
    strategy = OpenES(center, Adam(problem.num_params, 0.01), population=population, sigma=0.05, seed=0)
    evaluator = evaluator or LocalEvaluator(problem)
    steps, seconds, longest = 0, 0.0, 0
    for g in range(generations):
        seeds = seeding.episode_seeds(0, g + 1, 1)
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
    ap.add_argument("--generations", type=int, default=1, help="ES generations per round and starting point")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rounds = []
    with one_blas_thread():
        problem = PongProblem(num_envs=args.num_envs)
        episodes = args.population + 1
        # Build the vector env for the population + the center before timing (~0.1 s per game).
        env = problem._vector(episodes)
        slots, batch = env.num_envs, env.batch_size
        wide = min(args.num_envs, episodes)
        trained = es.checkpoint.load_checkpoint(args.checkpoint)[0]
        fresh = problem.initial_params(0)
        # What `es train pong --workers 2` does when its workers win the choice: two processes,
        # each stepping its half of the games on one ALE thread (warmed up before timing).
        one_thread = PongProblem(num_envs=args.num_envs, threads=1)
        workers = ParallelEvaluator(one_thread, workers=2, adaptive=False)
        es_generations(one_thread, fresh, args.population, 1, workers)
        for _ in range(args.rounds):
            r = {"bare": bare(wide, 5.0)}
            r["trained"] = es_generations(problem, trained, args.population, args.generations)
            r["fresh"] = es_generations(problem, fresh, args.population, args.generations)
            r["workers"] = es_generations(one_thread, trained, args.population, args.generations, workers)
            r["bare_async"] = bare(slots, 5.0, batch)
            rounds.append(r)
        workers.close()
        problem.close()
        dense, conv = PongDensePolicy(), PongConvPolicy()
        forward = {"dense_params": dense.num_params, "dense_us_per_observation": policy_us_per_observation(dense),
                   "conv_params": conv.num_params, "conv_us_per_observation": policy_us_per_observation(conv)}

    def rate(r, key):
        steps, seconds, _ = r[key]
        return steps / seconds

    def median(fn):
        return float(np.median([fn(r) for r in rounds]))
    n_episodes = args.generations * episodes
    print(json.dumps({
        "benchmark": "pong", "population": args.population, "rounds": args.rounds, "slots": slots, "batch": batch,
        "bare_games": wide, "checkpoint": args.checkpoint,
        "bare_steps_per_s": median(lambda r: r["bare"]), "bare_async_steps_per_s": median(lambda r: r["bare_async"]),
        "es_steps_per_s": median(lambda r: rate(r, "trained")),
        "ratio_vs_bare": median(lambda r: rate(r, "trained") / r["bare"]),
        "ratio_vs_bare_async": median(lambda r: rate(r, "trained") / r["bare_async"]),
        "seconds_per_generation": median(lambda r: r["trained"][1] / args.generations),
        "workers_es_steps_per_s": median(lambda r: rate(r, "workers")),
        "workers_ratio_vs_bare": median(lambda r: rate(r, "workers") / r["bare"]),
        "mean_episode_steps": rounds[0]["trained"][0] / n_episodes,
        "fresh_es_steps_per_s": median(lambda r: rate(r, "fresh")),
        "fresh_ratio_vs_bare": median(lambda r: rate(r, "fresh") / r["bare"]),
        "fresh_ratio_vs_bare_async": median(lambda r: rate(r, "fresh") / r["bare_async"]),
        "fresh_ratio_range": [min(rate(r, "fresh") / r["bare"] for r in rounds),
                              max(rate(r, "fresh") / r["bare"] for r in rounds)],
        "ratio_range": [min(rate(r, "trained") / r["bare"] for r in rounds),
                        max(rate(r, "trained") / r["bare"] for r in rounds)],
        "fresh_mean_episode_steps": rounds[0]["fresh"][0] / n_episodes,
        "fresh_longest_episode": rounds[0]["fresh"][2], **forward}))


if __name__ == "__main__":
    main()
