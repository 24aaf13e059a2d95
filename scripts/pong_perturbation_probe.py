"""How much does a member differ from its center, by where its noise falls? For each
checkpoint: one game (seed 5, 600 steps, the center playing), then 12 perturbations at sigma 0.1
of the front end alone (a keypoints policy's filters and pulls) and 12 of the head alone; prints
the median share of steps on which the member's action differs from the center's and, for the
front end, how far its newest keypoints move (median, pixels). One JSON line per checkpoint.

    python scripts/pong_perturbation_probe.py CHECKPOINT [CHECKPOINT ...]

A question about the keypoints runs (pong/README.md): is sigma 0.1, tuned for the objects policy's
head, too rough on a learned front end, so that the population mostly measures broken
keypoints? Where the front end's perturbations change as many actions as the head's, no.
"""
import sys, json
import os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import numpy as np
from es.play import load_agent
from pong.keypoints import PongKeypointsPolicy
from pong.games import PongGames
from pong.env import downsample_batch, stack_batch
for ck in sys.argv[1:]:
    prob, params, meta = load_agent(ck)
    pol = prob.policy
    params = np.asarray(params, np.float32)
    layers = pol.unflatten(params[None])
    seen = []
    def choose(ep, obs):
        seen.append(obs.copy()); return pol.forward(layers, obs)
    PongGames(1, downsample_batch, stack_batch).play(choose, [5], max_steps=600)
    obs = np.concatenate(seen)
    T = len(obs)
    tiled = lambda v: pol.unflatten(np.repeat(v[None], T, 0))
    L0 = tiled(params)
    base_a = pol.forward(L0, obs)
    base_kp = pol.keypoints_of(L0[0][0], obs) if isinstance(pol, PongKeypointsPolicy) else None
    rng = np.random.default_rng(0)
    nf = pol.num_front if isinstance(pol, PongKeypointsPolicy) else 0
    out = {}
    for part, sl in (("front", slice(0, nf)), ("head", slice(nf, None))):
        acts, moves = [], []
        for _ in range(12):
            eps = np.zeros_like(params); eps[sl] = rng.standard_normal(eps[sl].shape)
            l2 = tiled(params + 0.1 * eps)
            a = pol.forward(l2, obs)
            acts.append((a != base_a).mean())
            if part == "front" and base_kp is not None:
                kp = pol.keypoints_of(l2[0][0], obs)
                moves.append(np.median(np.hypot(kp[0][..., 3] - base_kp[0][..., 3], kp[1][..., 3] - base_kp[1][..., 3])))
        out[part] = {"actions_differ": round(float(np.median(acts)), 3), "keypoint_moves_px_median": round(float(np.median(moves)), 2) if moves else None}
    print(json.dumps({"checkpoint": ck, "generation": meta.get("generation"), "front_params": nf, "head_params": pol.num_params - nf, **out}))
