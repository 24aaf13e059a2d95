"""Pong throughput: env steps/s of full ES generations (population 64 + the center, episodes
capped at 1000 agent steps, the training defaults) against the bare vector environment in the
same run; also the time per observation of the dense, conv, objects and keypoints policies'
batched forward pass (one observation of a real game for each of 128 members, as in a
training step). Prints one JSON line.

* ``bare_vector_steps_per_s``: ale-py's ``AtariVectorEnv`` (C++ threads on every core, ALE's
  own sticky actions) stepping 65 games with a constant action: the emulator's ceiling here,
  with no policy, no ES and no per-episode seeding.
* ``es_steps_per_s`` (the checkpoint, by default the shipped agent, with its own policy: its
  games run to the cap) and ``fresh_es_steps_per_s`` (a fresh dense policy, the default:
  games end after ~820 steps): generations as
  ``python -m es train pong --workers 2`` plays them, ALE/Pong-v5's own games (``pong.games``)
  in 2 worker processes; ``*_ratio_vs_bare`` divides by the bare vector env.
* ``in_process_*``: the same generations in this one process (one core).
* ``bare_games_steps_per_s``: ``pong.games`` alone in this process, constant action (32 games of
  equal length).
* ``policy_play_ratio_vs_same_games_replayed``: one generation's episodes played with the
  policy in this process against the same games replayed from the recorded actions without it
  (``same_games_replayed``): the share of the time that is the games, with the same slots busy.
* ``keypoints*_us_per_observation_in_games``: the keypoints policy's forward pass over
  consecutive steps of 32 real games, as training plays them: ``blas`` (each stack of 4 frames
  summed again) against ``taps`` (per-frame sums; the memo reuses the frames of the previous
  step); ``keypoints_windows6_taps``: six windows (``--pull windows``), per frame only;
  ``keypoints_windows6_vbn_taps``: the same with ``--head-inputs vbn``;
  ``keypoints_windows6_motion_vbn_taps``: on frames+motion, and ``..._mix6_taps`` with
  ``--mix 6``.
  What these compute once per member and episode (vbn's statistics, the windows' pull field)
  is left out of the per-step figure and measured as ``*_us_per_member_episode``.
  ``--conv taps`` plays a keypoints checkpoint that way in the ES generations too.

The machine's load drifts, so the measurements run in ``--rounds`` interleaved rounds and each
ratio is the median of its per-round ratios.

    python benchmarks/pong.py [--checkpoint pong/agent.npz] [--rounds 3] [--generations 1] [--conv taps]
"""
import _common  # noqa: F401

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from es import seeding  # noqa: E402
from es.evaluators import LocalEvaluator  # noqa: E402
from es.optimizers import Adam  # noqa: E402
from es.play import load_agent  # noqa: E402
from es.parallel import ParallelEvaluator  # noqa: E402
from es.strategy import OpenES  # noqa: E402
from es.training import one_blas_thread  # noqa: E402
from pong.env import downsample_batch, make_pong_vector, stack_batch  # noqa: E402
from pong.games import PongGames  # noqa: E402
from pong.keypoints import PongKeypointsPolicy  # noqa: E402
from pong.policy import PongConvPolicy, PongDensePolicy, PongObjectsPolicy  # noqa: E402
from pong.problem import PongProblem  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def bare_vector(num_envs: int, seconds: float = 5.0) -> float:
    env = make_pong_vector(num_envs)            # every core, ALE's sticky actions
    env.reset()
    action = np.zeros(num_envs, dtype=np.int64)
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        env.step(action)
        steps += num_envs
    rate = steps / (time.perf_counter() - t0)
    env.close()
    return rate


def bare_games(seconds: float = 5.0) -> float:
    games, constant = PongGames(32, downsample_batch, stack_batch), lambda e, obs: np.zeros(len(e), np.int64)
    games.play(constant, np.arange(32), max_steps=1)
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        steps += int(games.play(constant, np.arange(32) + steps, max_steps=200)[1].sum())
    return steps / (time.perf_counter() - t0)


def game_observations(rows: int) -> np.ndarray:
    """``rows`` observations of real games (game 0 on, paddle moved up and down): the keypoints
    policy's cost depends on how much of a frame differs from the field, so noise would not do."""
    seen = []

    def choose(episodes, obs):
        seen.append(obs.copy())
        return np.full(len(episodes), (len(seen) // 7) % 3)
    PongGames(4, downsample_batch, stack_batch).play(choose, np.arange(4), max_steps=rows // 4 + 40)
    return np.concatenate(seen[40:])[:rows]


def policy_us_per_observation(policy, rows: int = 128, repeats: int = 20) -> float:
    """Microseconds per (member, observation) row of one batched forward pass on game frames."""
    layers = perturbed_layers(policy, rows)
    obs = game_observations(rows)
    policy.forward(layers, obs)
    t0 = time.perf_counter()
    for _ in range(repeats):
        policy.forward(layers, obs)
    return (time.perf_counter() - t0) / (repeats * rows) * 1e6


def game_steps(rows: int, steps: int) -> list:
    """``(episodes, observation)`` of ``steps`` consecutive steps of ``rows`` real games, after
    40 steps (paddle moved up and down)."""
    seen = []

    def choose(episodes, obs):
        seen.append((episodes.copy(), obs.copy()))
        return np.full(len(episodes), (len(seen) // 7) % 3)
    PongGames(rows, downsample_batch, stack_batch).play(choose, np.arange(rows), max_steps=steps + 40)
    return seen[40:40 + steps]


def perturbed_layers(policy, rows: int):
    """``rows`` members around seed 0's initial parameters (noise 0.05, generator 0), unflattened."""
    rng = np.random.default_rng(0)
    return policy.unflatten(policy.initial_params(0)[None]
                            + 0.05 * rng.standard_normal((rows, policy.num_params), np.float32))


def policy_us_per_observation_in_games(policy, rows: int = 32, steps: int = 60, repeats: int = 5) -> float:
    """Microseconds per (member, observation) over ``steps`` consecutive steps of ``rows`` real
    games, as a game is played: a policy with a memo (keypoints, conv taps) reuses the frames of
    the previous step; best of ``repeats``."""
    seen = game_steps(rows, steps)
    layers = perturbed_layers(policy, rows)
    best = float("inf")
    for _ in range(repeats):
        memo = policy.new_memo() if isinstance(policy, PongKeypointsPolicy) else None
        if memo is not None:
            # what a member computes once per episode (vbn's statistics over the reference batch,
            # the windows' pull field) is paid once per 1,000-4,000 steps in training, not per 60:
            # done before the clock starts, on frames no step shows again (policy_us_per_member_episode
            # measures it)
            policy.forward(layers, seen[0][1][:, ::-1], memo, seen[0][0])
        t0 = time.perf_counter()
        for episodes, obs in seen:
            policy.forward(layers, obs, memo, episodes) if memo is not None else policy.forward(layers, obs)
        best = min(best, time.perf_counter() - t0)
    return best / (len(seen) * rows) * 1e6


def policy_us_per_member_episode(policy, rows: int = 8, repeats: int = 3) -> float:
    """Microseconds per member of what a keypoints policy computes once per episode (vbn's
    statistics over the 64 reference observations; a windows policy's pull field): the first
    step of a new episode less a later step of the same games."""
    seen = game_steps(rows, 2)
    layers = perturbed_layers(policy, rows)
    first, later = float("inf"), float("inf")
    for _ in range(repeats):
        memo = policy.new_memo()
        t0 = time.perf_counter()
        policy.forward(layers, seen[0][1], memo, seen[0][0])
        t1 = time.perf_counter()
        policy.forward(layers, seen[1][1], memo, seen[1][0])
        first, later = min(first, t1 - t0), min(later, time.perf_counter() - t1)
    return (first - later) / rows * 1e6


def same_games_replayed(problem, center, population: int, seed: int = 0, sigma: float = 0.1):
    """A generation's episodes (``population`` members around ``center`` and the center, each
    on its own game seed) played in this process with the policy, their actions recorded; then
    the same games replayed from the recorded actions with no policy. The same emulator steps
    with the same slots busy, so ``replay / play`` is the share of a generation's time that is
    the games themselves: the bare games of *these* episodes, whose lengths differ (a long game
    finishes alone in its slot while every step still pays a call's fixed cost), where
    ``bare_games`` plays 32 games of equal length. Returns (env steps, play s, replay s)."""
    rng = np.random.default_rng(seed)
    rows = (center[None] + sigma * rng.standard_normal((population, len(center)))).astype(np.float32)
    rows = np.concatenate([center[None].astype(np.float32), rows])
    seeds = 900_000 + np.arange(len(rows))
    games = problem._games_for(len(rows))
    actions = [[] for _ in rows]

    def record(episodes, chosen):
        for e, x in zip(episodes.tolist(), np.asarray(chosen).tolist()):
            actions[e].append(x)
    t0 = time.perf_counter()
    _, lengths = problem._play(rows, np.arange(len(rows)), seeds, problem.max_steps, record=record)
    played = time.perf_counter() - t0
    step = np.zeros(len(rows), dtype=np.int64)

    def replay(episodes, obs):
        a = np.array([actions[e][step[e]] for e in episodes.tolist()])
        step[episodes] += 1
        return a
    t0 = time.perf_counter()
    _, again = games.play(replay, seeds, problem.max_steps)
    replayed = time.perf_counter() - t0
    assert np.array_equal(lengths, again), "the replay played other games"
    return int(lengths.sum()), played, replayed


def es_generations(evaluator, center, population: int, generations: int, start: int = 1):
    """(env steps, seconds, longest episode) of ``generations`` ES generations from ``center``."""
    strategy = OpenES(center, Adam(center.size, 0.01), population=population, sigma=0.05, seed=0)
    steps, seconds, longest = 0, 0.0, 0
    for g in range(generations):
        seeds = seeding.episode_seeds(0, start + g, 1)
        t0 = time.perf_counter()
        res = evaluator.evaluate(strategy.ask(), seeds, seeds)
        strategy.tell(res.returns)
        seconds += time.perf_counter() - t0
        steps += int(res.lengths.sum()) + res.center_length
        longest = max(longest, int(res.lengths.max()), res.center_length)
    return steps, seconds, longest


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--population", type=int, default=64)
    ap.add_argument("--checkpoint", default=str(ROOT / "pong" / "agent.npz"),
                    help="the trained parameters to measure (default: the shipped agent)")
    ap.add_argument("--generations", type=int, default=1, help="ES generations per round and starting point")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--conv", choices=("as-trained", "taps"), default="as-trained",
                    help="a keypoints checkpoint: play it with the sums it trained with, or per frame with the "
                         "memo (pong.keypoints.frame_keypoints; the same parameters, rounded per frame)")
    args = ap.parse_args()
    rounds = []
    with one_blas_thread():
        problem = PongProblem(max_steps=1000)
        agent_problem, trained, _ = load_agent(args.checkpoint)
        spec = dict(agent_problem.policy_spec)
        if args.conv == "taps":
            if spec["type"] != "pong_keypoints":
                ap.error(f"--conv taps applies to a keypoints checkpoint, not {spec['type']}")
            spec["conv"] = "taps"
        agent_problem = PongProblem(spec, max_steps=1000)     # its policy, the same cap
        fresh = problem.initial_params(0)
        workers = ParallelEvaluator(problem, workers=2, adaptive=False)
        agent_workers = ParallelEvaluator(agent_problem, workers=2, adaptive=False)
        local = LocalEvaluator(agent_problem)
        # Workers up and every game slot a measured generation uses built: training builds them
        # once, at the start of a run, and each is a ROM load. Until 2026-11-29 the agent's
        # evaluators were warmed with 8 members, so round 1 built games inside its clocks (the
        # pixel agent at population 64, one chunk per worker: 28 in each worker, 23 here).
        for evaluator, params in ((workers, fresh), (agent_workers, trained), (local, trained)):
            es_generations(evaluator, params, args.population, 1, start=0)
        for _ in range(args.rounds):
            r = {"bare": bare_vector(args.population + 1), "bare_games": bare_games()}
            r["trained"] = es_generations(agent_workers, trained, args.population, args.generations)
            r["fresh"] = es_generations(workers, fresh, args.population, args.generations)
            r["in_process"] = es_generations(local, trained, args.population, args.generations)
            r["replay"] = same_games_replayed(agent_problem, trained, args.population, seed=len(rounds))
            rounds.append(r)
        workers.close()
        agent_workers.close()
        problem.close()
        agent_problem.close()
        forward = {}
        for name, policy in (("dense", PongDensePolicy()), ("conv", PongConvPolicy()), ("objects", PongObjectsPolicy()),
                             ("keypoints", PongKeypointsPolicy())):
            forward.update({f"{name}_params": policy.num_params,
                            f"{name}_us_per_observation": policy_us_per_observation(policy)})
        # keypoints as games play them, step after step: BLAS sums over each stack of 4 frames
        # against per-frame sums with the memo (2 keypoints on frames; 3 on frames+motion; 6
        # windows and a head of 8, alone, with vbn, on frames+motion, and with --mix 6; per frame
        # only)
        windows = {"pull": "windows", "keypoints": 6, "hidden": (8,)}
        for name, options, convs in (("keypoints", {"keypoints": 2, "hidden": (16,)}, ("blas", "taps")),
                                     ("keypoints_motion3", {"keypoints": 3, "hidden": (16,), "motion": True},
                                      ("blas", "taps")),
                                     ("keypoints_windows6", windows, ("taps",)),
                                     ("keypoints_windows6_vbn", {**windows, "vbn": True}, ("taps",)),
                                     ("keypoints_windows6_motion_vbn", {**windows, "vbn": True, "motion": True},
                                      ("taps",)),
                                     ("keypoints_windows6_motion_vbn_mix6",
                                      {**windows, "vbn": True, "motion": True, "mix": 6}, ("taps",))):
            for conv in convs:
                policy = PongKeypointsPolicy(**options, pull_scale=0.25, conv=conv)
                forward[f"{name}_{conv}_us_per_observation_in_games"] = policy_us_per_observation_in_games(policy)
                if policy.vbn or policy.pull == "windows":
                    forward[f"{name}_{conv}_us_per_member_episode"] = policy_us_per_member_episode(policy)

    def rate(r, key):
        return r[key][0] / r[key][1]

    def median(fn):
        return float(np.median([fn(r) for r in rounds]))

    def span(fn):
        return [float(min(fn(r) for r in rounds)), float(max(fn(r) for r in rounds))]
    episodes = args.generations * (args.population + 1)
    print(json.dumps({
        "benchmark": "pong", "population": args.population, "rounds": args.rounds, "checkpoint": args.checkpoint,
        "checkpoint_policy": agent_problem.policy_spec["type"], "conv": args.conv,
        "bare_vector_steps_per_s": median(lambda r: r["bare"]),
        "bare_games_steps_per_s": median(lambda r: r["bare_games"]),
        "es_steps_per_s": median(lambda r: rate(r, "trained")),
        "ratio_vs_bare": median(lambda r: rate(r, "trained") / r["bare"]),
        "ratio_range": span(lambda r: rate(r, "trained") / r["bare"]),
        "seconds_per_generation": median(lambda r: r["trained"][1] / args.generations),
        "mean_episode_steps": rounds[0]["trained"][0] / episodes,
        "fresh_es_steps_per_s": median(lambda r: rate(r, "fresh")),
        "fresh_ratio_vs_bare": median(lambda r: rate(r, "fresh") / r["bare"]),
        "fresh_ratio_range": span(lambda r: rate(r, "fresh") / r["bare"]),
        "fresh_mean_episode_steps": rounds[0]["fresh"][0] / episodes, "fresh_longest_episode": rounds[0]["fresh"][2],
        "in_process_es_steps_per_s": median(lambda r: rate(r, "in_process")),
        "in_process_ratio_vs_bare_games": median(lambda r: rate(r, "in_process") / r["bare_games"]),
        "in_process_ratio_vs_bare_games_range": span(lambda r: rate(r, "in_process") / r["bare_games"]),
        # the same episodes with and without the policy: what the policy itself costs a generation
        "policy_play_ratio_vs_same_games_replayed": median(lambda r: r["replay"][2] / r["replay"][1]),
        "policy_play_ratio_range": span(lambda r: r["replay"][2] / r["replay"][1]),
        "replayed_mean_episode_steps": rounds[0]["replay"][0] / (args.population + 1), **forward}))


if __name__ == "__main__":
    main()
