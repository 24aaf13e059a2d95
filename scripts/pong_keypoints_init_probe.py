"""Before any training: does a freshly initialised keypoints policy already have a keypoint that
follows the ball? Per design (frames or frames+motion, 2 or 3 keypoints) and initial seed, plays
one game (seed ``--game``, ``--steps`` agent steps, the initial policy choosing) and prints one
JSON line: the best keypoint's correlation with the ball's column and row (best = the largest
sum of the two) and every keypoint's (column, row, mean column). The yardstick is the objects
policy's fixed code, as in ``scripts/pong_keypoints_figure.py``.

    python scripts/pong_keypoints_init_probe.py [--seeds 6] [--game 5] [--steps 800] > init.jsonl

A keypoint that follows the ball's column is what docs/runs/pong-keypoints-s0 never found; the
ES gradient can only sharpen what the population's perturbations already see.
"""
import argparse
import json
import os
import sys
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pong.keypoints import PULL_SCALE, PongKeypointsPolicy  # noqa: E402
from pong_keypoints_figure import record, tracking  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=6, help="initial seeds 0..N-1")
    ap.add_argument("--game", type=int, default=5)
    ap.add_argument("--steps", type=int, default=800)
    args = ap.parse_args()
    for motion in (False, True):
        for k in (2, 3):
            for seed in range(args.seeds):
                policy = PongKeypointsPolicy(k, (16,), motion=motion, pull_scale=PULL_SCALE)
                obs, kp, objects = record(types.SimpleNamespace(policy=policy), policy.initial_params(seed),
                                          args.game, args.steps)
                t = tracking(kp, objects)
                best = max(t.values(), key=lambda v: v["ball_col"] + v["ball_row"])
                print(json.dumps({"motion": motion, "k": k, "seed": seed, "best_ball_col": best["ball_col"],
                                  "best_ball_row": best["ball_row"],
                                  "all": {n: (v["ball_col"], v["ball_row"], v["mean_col"]) for n, v in t.items()}}),
                      flush=True)


if __name__ == "__main__":
    main()
