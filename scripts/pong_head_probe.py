"""Did the head of a keypoints policy learn, or random-walk? For each checkpoint: the root mean
square of the head's first-layer weights, what a pure random walk of Adam's steps would give
(the initial value grown by ``lr x sqrt(steps)`` in quadrature: with a gradient that is mostly
noise, Adam moves every weight by about ``lr`` per generation in a random direction), and how
saturated the hidden units are on the reference batch (the share of pre-activations beyond
+-2, where tanh's slope is below 0.07). One JSON line per checkpoint.

    python scripts/pong_head_probe.py CHECKPOINT [CHECKPOINT ...]

The question behind ``--mix`` (pong/README.md): a head of six windows' keypoints without it reads
495 inputs through 3,968 weights; do those weights follow the score, or drift?
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from es.play import load_agent  # noqa: E402
from pong.keypoints import reference_batch  # noqa: E402


def first_layer(problem, params):
    """(the head's first-layer weights, biases, its inputs on the reference batch)."""
    policy = problem.policy
    layers = policy.unflatten(np.asarray(params, np.float32)[None])
    obs = reference_batch()
    if problem.policy_spec["type"] != "pong_keypoints":                 # the objects policy: no front end
        return layers[0][0][0], layers[0][1][0, 0], policy.features(obs)
    (front,), *rest = layers
    mixer = rest.pop(0) if policy.mix else None
    rows = len(obs)
    f = policy.features(np.repeat(front, rows, 0), obs,
                        mixer=None if mixer is None else tuple(np.repeat(a, rows, 0) for a in mixer))
    return rest[0][0][0], rest[0][1][0, 0], f


def rms(a) -> float:
    return float(np.sqrt(np.mean(np.square(a))))


def probe(path: str) -> dict:
    problem, params, meta = load_agent(path)
    config = meta["config"]
    w1, b1, f = first_layer(problem, params)
    pre = f @ w1 + b1
    if config.get("init"):                                  # a continued run starts from its --init
        start, start_params, _ = load_agent(config["init"])
        w0 = rms(first_layer(start, start_params)[0])
    else:
        w0 = rms(first_layer(problem, problem.policy.initial_params(config["seed"]))[0])
    return {"checkpoint": path, "generation": meta["generation"], "learning_rate": config["learning_rate"],
            "head_inputs": int(w1.shape[0]), "w1_rms": round(rms(w1), 4), "w1_rms_at_start": round(w0, 4),
            "random_walk_rms": round(float(np.sqrt(w0 ** 2 + config["learning_rate"] ** 2 * meta["generation"])), 4),
            "saturated_share": round(float((np.abs(pre) > 2).mean()), 3),
            "median_abs_preactivation": round(float(np.median(np.abs(pre))), 2), "init": config.get("init")}


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(json.dumps(probe(path)))
