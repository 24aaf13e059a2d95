"""Before any training: how much of what the winning objects policy reads can a freshly
initialised pixel front end give its head? Plays the shipped agent (``pong/agent.npz``) for
``--steps`` agent steps in each of games 5 and 6, computes each design's head inputs (the
features and their products) on those observations, and fits a ridge regression from them to
each of the objects policy's 44 inputs (its 8 numbers read off the pixels by fixed code and
their products) and to the agent's move (UP +1, DOWN -1, NOOP 0), on every other step, scored
(``R^2``) on the steps between. Then, as ES's first generation would see it: 64 members drawn
around the design's initial parameters at sigma 0.1, and on how many of every 4th step each
picks its most frequent action (1: it ignores the picture). Prints one JSON line per design.

    python scripts/pong_front_end_probe.py [--steps 2500] > docs/runs/pong-front-end/probe.jsonl

A yardstick, not a training signal: nothing here changes a parameter, and the regression's
weights are thrown away. It says which design's features carry the ball at all; ES must still
find how to use them.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from es.checkpoint import load_checkpoint  # noqa: E402
from pong.env import downsample_batch, stack_batch  # noqa: E402
from pong.games import PongGames  # noqa: E402
from pong.keypoints import PULL_SCALE, PongKeypointsPolicy  # noqa: E402
from pong.policy import OBJECT_NAMES, PongDensePolicy, make_pong_policy, object_features  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DESIGNS = {   # name -> (policy, what it is)
    "keypoints, 2, linear pulls (attempt 10)": lambda: PongKeypointsPolicy(2, (16,), pull_scale=PULL_SCALE,
                                                                           conv="taps"),
    "windows, 3": lambda: PongKeypointsPolicy(3, (16,), pull_scale=PULL_SCALE, conv="taps", pull="windows"),
    "windows, 4": lambda: PongKeypointsPolicy(4, (16,), pull_scale=PULL_SCALE, conv="taps", pull="windows"),
    "windows, 6 (attempt 13)": lambda: PongKeypointsPolicy(6, (8,), pull_scale=PULL_SCALE, conv="taps", pull="windows"),
    "windows, 6, vbn (attempt 14)": lambda: PongKeypointsPolicy(6, (8,), pull_scale=PULL_SCALE, conv="taps",
                                                                pull="windows", vbn=True),
    "windows, 4, frames+motion": lambda: PongKeypointsPolicy(4, (16,), True, PULL_SCALE, "taps", "windows"),
    "dense band sums (attempts 1-7)": lambda: PongDensePolicy(6),
    "objects, fixed code (attempt 8, the yardstick)": lambda: make_pong_policy({"type": "pong_objects",
                                                                                "hidden": [16]}),
}


def most_frequent_action_share(policy, obs: np.ndarray, members: int = 64, sigma: float = 0.1) -> float:
    """The mean over ``members`` perturbed members of the share of steps on which each picks its
    most frequent action: near 1 when a perturbation moves the action preference everywhere."""
    rng = np.random.default_rng(0)
    center = policy.initial_params(0)
    shares = []
    for _ in range(members):
        p = (center + sigma * rng.standard_normal(len(center))).astype(np.float32)
        a = policy.forward(policy.unflatten(np.repeat(p[None], len(obs), axis=0)), obs)
        shares.append(np.bincount(a, minlength=3).max() / len(a))
    return float(np.mean(shares))


def r2(x: np.ndarray, y: np.ndarray, ridge: float = 1e-3) -> float:
    """Held-out R^2 of a ridge regression (standardised inputs), fit on even steps, scored on odd."""
    x = np.c_[x, np.ones(len(x))]
    fit = np.arange(len(x)) % 2 == 0
    mu, sd = x[fit].mean(0), x[fit].std(0) + 1e-6
    x = (x - mu) / sd
    x[:, -1] = 1
    w = np.linalg.solve(x[fit].T @ x[fit] + ridge * fit.sum() * np.eye(x.shape[1]), x[fit].T @ y[fit])
    err = x[~fit] @ w - y[~fit]
    return float(1 - (err ** 2).sum() / ((y[~fit] - y[~fit].mean()) ** 2).sum())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2500)
    args = ap.parse_args()
    center, _, _ = load_checkpoint(os.path.join(ROOT, "pong", "agent.npz"))
    agent = make_pong_policy({"type": "pong_objects", "hidden": [16]})
    layers = agent.unflatten(center[None])
    seen = []

    def choose(episodes, obs):
        seen.append(obs.copy())
        return agent.forward(layers, obs)
    PongGames(2, downsample_batch, stack_batch).play(choose, [5, 6], max_steps=args.steps)
    obs = np.concatenate(seen)
    move = agent.forward(layers, obs)
    move = np.where(move == 1, 1.0, np.where(move == 2, -1.0, 0.0))
    targets = agent.features(obs)                          # the objects policy's 44 inputs
    objects = object_features(obs)
    for name, make in DESIGNS.items():
        policy = make()
        if isinstance(policy, PongKeypointsPolicy):
            front = np.repeat(policy.unflatten(policy.initial_params(0)[None])[0][0], len(obs), axis=0)
            x = policy.features(front, obs)
        else:
            x = policy.features(obs)
        share = most_frequent_action_share(policy, obs[::4])
        each = [r2(x, targets[:, i]) for i in range(targets.shape[1]) if targets[:, i].std() > 0]
        print(json.dumps({"design": name, "head_inputs": x.shape[1], "steps": len(obs),
                          "mean_r2_of_objects_inputs": round(float(np.mean(each)), 3),
                          "r2_of_agent_move": round(r2(x, move), 3),
                          "most_frequent_action_share_sigma_0.1": round(share, 3),
                          "r2": {n: round(r2(x, objects[:, i]), 3) for i, n in enumerate(OBJECT_NAMES)}}), flush=True)


if __name__ == "__main__":
    main()
