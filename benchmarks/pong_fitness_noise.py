"""How much of a Pong generation's gradient is signal: the population of one generation around
a checkpoint (antithetic, population 64 and ``--sigma`` 0.05 by default, as in training) plays ``--games`` whole
games each, every member the same game seeds (common random numbers, as training does), and
the ES gradient estimate (centered ranks, sum of w_i eps_i) is formed from each game alone
and from the mean of half the games. Prints one JSON line.

* ``per_game_std``: std of one member's score across games (mean over members);
  ``member_share``: the share of the score variance that lies between members (the rest is
  the game seed), what a single game can rank by.
* ``rank_corr_between_games``: Spearman correlation of the members' scores on two games
  (mean over pairs).
* ``grad_cosine_1_game``: cosine between the gradient estimates of two games (mean over
  pairs); ``grad_cosine_{k}_games``: between the estimates from the means of two disjoint
  sets of k games. Two independent estimates g + n1, g + n2 have cosine ~ |g|^2 / (|g|^2 +
  |n|^2): near 0 means the update is mostly noise, and averaging k games per member divides
  |n|^2 by about k.

    python benchmarks/pong_fitness_noise.py [--checkpoint pong/agent.npz] [--sigma 0.05] [--games 4]
"""
import _common  # noqa: F401

import argparse  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from es.play import load_agent  # noqa: E402
from es.shaping import centered_ranks  # noqa: E402
from es.strategy import GenerationTask  # noqa: E402
from es.training import one_blas_thread  # noqa: E402
from pong.problem import PongProblem  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def spearman(x, y) -> float:
    rx, ry = centered_ranks(x), centered_ranks(y)
    return float(np.corrcoef(rx, ry)[0, 1]) if rx.std() > 0 and ry.std() > 0 else None


def cosine(u, v):
    norms = np.linalg.norm(u) * np.linalg.norm(v)
    return float(u @ v / norms) if norms > 0 else None   # every score tied: no direction at all


def mean(values):
    values = [v for v in values if v is not None and np.isfinite(v)]
    return float(np.mean(values)) if values else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", default=str(ROOT / "pong" / "agent.npz"))
    ap.add_argument("--population", type=int, default=64)
    ap.add_argument("--sigma", type=float, default=0.05)
    ap.add_argument("--games", type=int, default=4, help="game seeds every member plays (even, >= 2)")
    ap.add_argument("--max-steps", type=int, default=5000, help="agent steps per game (5000: whole games)")
    ap.add_argument("--seed", type=int, default=7, help="run seed of the generation's noise")
    args = ap.parse_args()
    if args.games < 2 or args.games % 2:
        raise SystemExit("--games must be even and >= 2")
    agent_problem, center, _ = load_agent(args.checkpoint)     # the checkpoint's own policy
    center = center.astype(np.float32)
    task = GenerationTask(seed=args.seed, generation=0, sigma=args.sigma, antithetic=True,
                          population=args.population, center=center)
    members = np.arange(args.population)
    eps = (task.member_params(members) - center) / np.float32(args.sigma)
    game_seeds = 50_000 + np.arange(args.games)
    t0 = time.perf_counter()
    with one_blas_thread():
        problem = PongProblem(agent_problem.policy_spec, max_steps=args.max_steps)
        rows = np.tile(members, args.games)
        seeds = np.repeat(game_seeds, args.population)
        scores, lengths = problem.run_episodes(task.member_params(members), rows, seeds)
        problem.close()
    seconds = time.perf_counter() - t0
    S = np.asarray(scores, dtype=np.float64).reshape(args.games, args.population)   # game x member
    grads = [centered_ranks(s) @ eps for s in S]
    pairs = list(itertools.combinations(range(args.games), 2))
    half = args.games // 2
    split_cos = [cosine(centered_ranks(S[list(a)].mean(0)) @ eps,
                        centered_ranks(S[[g for g in range(args.games) if g not in a]].mean(0)) @ eps)
                 for a in itertools.combinations(range(args.games), half) if 0 in a]
    member_var = S.mean(0).var(ddof=1) - S.var(0, ddof=1).mean() / args.games   # between members, unbiased
    out = {"benchmark": "pong_fitness_noise", "checkpoint": args.checkpoint,
           "policy": agent_problem.policy_spec["type"], "population": args.population,
           "sigma": args.sigma, "games": args.games, "max_steps": args.max_steps,
           "mean_score": float(S.mean()), "game_means": [float(m) for m in S.mean(1)],
           "mean_agent_steps": float(np.mean(lengths)),
           "per_game_std": float(S.std(0, ddof=1).mean()),
           "member_share": float(max(member_var, 0.0) / S.var(ddof=1)),
           "rank_corr_between_games": mean([spearman(S[a], S[b]) for a, b in pairs]),
           "grad_cosine_1_game": mean([cosine(grads[a], grads[b]) for a, b in pairs]),
           "seconds": seconds}
    if half > 1:
        out[f"grad_cosine_{half}_games"] = mean(split_cos)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
