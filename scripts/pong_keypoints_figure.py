"""What a keypoints policy learned to look at: its filters and pulls, its keypoints over real
frames, and each keypoint's track against where the ball and our paddle really are.

    python scripts/pong_keypoints_figure.py CHECKPOINT [--seed 5] [--out docs/pong-keypoints.png]

Plays one game of ALE/Pong-v5 (seed ``--seed``) with the checkpoint's own policy, records the
observations and the keypoints it computed, and reads the objects off the same frames with
the objects policy's fixed code (``pong.policy.object_features``), used here only as the
yardstick. Prints one JSON line: for each keypoint, the correlation of its newest row and
column with the ball's (frames where the ball is in view), with our paddle's and with the
opponent's, and its mean column, so "keypoint 0 follows the ball" is a number, not a reading
of the picture (the opponent's paddle follows the ball's height too: tell them apart by the
column).
"""
import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from es.play import load_agent  # noqa: E402
from pong.env import downsample_batch, stack_batch  # noqa: E402
from pong.games import PongGames  # noqa: E402
from pong.policy import OBJECT_NAMES, object_features  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def record(problem, params, seed: int, steps: int):
    """(observations (T, 4, 42, 42), keypoints (col, row, presence) each (T, k, 4), objects (T, 8))."""
    policy = problem.policy
    layers = policy.unflatten(np.asarray(params, dtype=np.float32)[None])
    front = layers[0][0]
    obs_seen, kps = [], []

    def choose(episodes, obs):
        obs_seen.append(obs[0].copy())
        kps.append([a[0] for a in policy.keypoints_of(front, obs)])
        return policy.forward(layers, obs)
    PongGames(1, downsample_batch, stack_batch).play(choose, [seed], max_steps=steps)
    obs = np.stack(obs_seen)
    col, row, presence = (np.stack([k[i] for k in kps]) for i in range(3))
    return obs, (col, row, presence), object_features(obs)


def tracking(kp, objects) -> dict:
    col, row, presence = kp
    f = dict(zip(OBJECT_NAMES, objects.T))
    seen = f["ball_seen"] == 1
    out = {}
    for k in range(col.shape[1]):
        c, r = (col[:, k, 3] - 20.5) / 10, (row[:, k, 3] - 20.5) / 10

        def corr(a, b, mask):
            return round(float(np.corrcoef(a[mask], b[mask])[0, 1]), 3) if a[mask].std() > 0 and b[mask].std() > 0 else 0.0
        out[f"keypoint_{k}"] = {"ball_row": corr(r, f["ball_y"], seen), "ball_col": corr(c, f["ball_x"], seen),
                                "paddle_row": corr(r, f["paddle_y"], np.ones_like(seen)),
                                "opponent_row": corr(r, f["opponent_y"], np.ones_like(seen)),
                                "mean_col": round(float(col[:, k, 3].mean()), 1),
                                # where it holds something (a windows policy: the ball, while in its stretch)
                                "share_present": round(float((presence[:, k, 3] > 0.5).mean()), 3),
                                "ball_row_where_present": corr(r, f["ball_y"], seen & (presence[:, k, 3] > 0.5)),
                                "ball_col_where_present": corr(c, f["ball_x"], seen & (presence[:, k, 3] > 0.5))}
    return out


def figure(policy, params, obs, kp, objects, out: Path, seed: int):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from pong.keypoints import _unpack, window_columns
    filters, pulls = _unpack(policy.unflatten(np.asarray(params, np.float32)[None])[0][0], policy.keypoints,
                             policy.channels, policy.pull_params)
    k = policy.keypoints
    col, row, presence = kp
    f = dict(zip(OBJECT_NAMES, objects.T))
    colors = plt.cm.tab10(np.arange(k))
    wide = k > 3                      # many keypoints: the frames get a row of their own
    fig = plt.figure(figsize=(12, 10 if wide else 6.5))
    grid = fig.add_gridspec(3, max(k, 2), height_ratios=(1, 2.2, 2)) if wide else fig.add_gridspec(2, max(k, 2) + 2)
    for i in range(k):
        ax = fig.add_subplot(grid[0, i])
        lim = np.abs(filters[0, i]).max()
        # one 3x3 block per channel, side by side: the frame, then (motion) its change
        ax.imshow(np.hstack(filters[0, i].reshape(policy.channels, 3, 3)), cmap="RdBu_r", vmin=-lim, vmax=lim)
        scale = policy.pull_scale
        if policy.pull == "windows":   # the window's centre and half-width, in pixels
            centre, half = (a[0, i] for a in window_columns(pulls, scale))
            where = f"window: columns {centre - half:.0f} to {centre + half:.0f}\nrow pull {scale * pulls[0, i, 2]:+.2f}"
        else:
            where = f"pull col {scale * pulls[0, i, 0]:+.2f}, row {scale * pulls[0, i, 1]:+.2f}"
        ax.set_title(f"keypoint {i}: filter{' (frame | change)' if policy.channels > 1 else ''}\n{where}",
                     fontsize=8, color=colors[i])
        ax.set_xticks([]), ax.set_yticks([])
    t = int(np.argmax(f["ball_seen"][200:] > 0)) + 200 if len(obs) > 200 else len(obs) - 1
    for j, tt in enumerate((t, min(t + 6, len(obs) - 1))):
        if wide:
            half = max(k, 2) // 2
            ax = fig.add_subplot(grid[1, j * half:(j + 1) * half])
        else:
            ax = fig.add_subplot(grid[0, k + j] if k + j < grid.ncols else grid[1, j])
        ax.imshow(obs[tt, 3], cmap="gray")
        for i in range(k):
            ax.plot(col[tt, i, :], row[tt, i, :], "-", color=colors[i], lw=1)
            ax.plot(col[tt, i, 3], row[tt, i, 3], "o", ms=9, mfc="none", mec=colors[i], mew=2)
        ax.set_title(f"step {tt}: circles, each keypoint in the newest frame; lines, its path\n"
                     "over the 4 stacked frames (we are the right paddle)", fontsize=9)
        ax.set_xticks([]), ax.set_yticks([])
    ax = fig.add_subplot(grid[2 if wide else 1, :])
    span = slice(max(0, t - 100), min(len(obs), t + 200))
    steps = np.arange(len(obs))[span]
    ball = np.where(f["ball_seen"] == 1, f["ball_y"] * 10 + 20.5, np.nan)
    # where the objects really are, read by the objects policy's fixed code: grey, told apart by dashes
    ax.plot(steps, ball[span], "k-", lw=3, alpha=0.3, label="the ball's row (measured by fixed code)")
    ax.plot(steps, (f["paddle_y"] * 10 + 20.5)[span], "--", color="0.45", lw=2,
            label="our paddle's row (right; fixed code)")
    ax.plot(steps, (f["opponent_y"] * 10 + 20.5)[span], ":", color="0.45", lw=2,
            label="the opponent's row (left; fixed code)")
    windows = getattr(policy, "pull", "linear") == "windows"
    for i in range(k):   # a window's row where it holds something (presence > 0.5): elsewhere it idles at its centre
        r = np.where(presence[span, i, 3] > 0.5, row[span, i, 3], np.nan) if windows else row[span, i, 3]
        ax.plot(steps, r, "-", color=colors[i], lw=1.2,
                label=f"keypoint {i}'s row" + (" where it holds something" if windows else ""))
    ax.invert_yaxis()
    ax.set_title(f"game {seed}, steps {steps[0]}-{steps[-1]} of the {len(obs)} the correlations are measured on",
                 fontsize=9)
    ax.set_xlabel("agent step")
    ax.set_ylabel("row (pixels)")
    ax.legend(fontsize=8, ncol=2, loc="lower left")
    fig.tight_layout()
    fig.savefig(out, dpi=90)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "pong-keypoints.png")
    args = ap.parse_args()
    problem, params, meta = load_agent(args.checkpoint)
    if problem.policy_spec.get("type") != "pong_keypoints":
        sys.exit(f"{args.checkpoint}: a {problem.policy_spec.get('type')} policy, not pong_keypoints")
    obs, kp, objects = record(problem, params, args.seed, args.steps)
    figure(problem.policy, params, obs, kp, objects, args.out, args.seed)
    print(json.dumps({"checkpoint": str(args.checkpoint), "generation": meta.get("generation"), "seed": args.seed,
                      "steps": len(obs), **tracking(kp, objects), "figure": str(args.out)}))


if __name__ == "__main__":
    main()
