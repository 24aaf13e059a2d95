"""The Pong policies' ablations, read off the runs' own metrics: for each run in ``docs/runs`` that
trained a Pong policy from scratch with attempt 8's settings (population 64, sigma 0.1, Adam
0.03, 4000-step cap, equal scores ranked by length), the population's mean score and the
center's score over blocks of 30 generations ("population / center"), and the env steps and
hours to reach the last (hours on the 2-core machine, shared with other jobs to different
degrees: compare generations and env steps, not hours). The
runs differ in one design choice at a time where they can:

- objects (attempt 8): positions read off the pixels by fixed code, the yardstick;
- keypoints, pull scale 1 (attempt 9) against 0.25 (attempt 10): how much the pulls may move;
- keypoints on frames, 2 keypoints (attempt 10) against frames+motion, 3 keypoints (attempt 11);
- frames+motion with 2 keypoints and a head of 8 (attempt 12, 595 parameters): a smaller search;
- six windows along the columns, a head of 8 (attempt 13) against the same with virtual batch
  normalization of the head's inputs (attempt 14): the same seed, one choice apart.

    python scripts/pong_ablations.py [--block 30] [--until 120]

Prints a Markdown table (docs/pong.md, "Ablations", is this output; a test compares them).
"""
import argparse
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RUNS = [("objects (attempt 8)", "pong-objects-s9"),
        ("keypoints, pull scale 1 (attempt 9)", "pong-keypoints-s11"),
        ("keypoints, frames, 2 keypoints (attempt 10)", "pong-keypoints-s0"),
        ("keypoints, frames+motion, 3 keypoints (attempt 11)", "pong-keypoints-motion3-s0"),
        ("keypoints, frames+motion, 2 keypoints, hidden 8 (attempt 12)", "pong-keypoints-motion2-h8-s3"),
        ("windows, 6 keypoints, hidden 8 (attempt 13)", "pong-windows6-s0"),
        ("windows, 6 keypoints, hidden 8, vbn (attempt 14)", "pong-windows6-vbn-s0")]


def table(block: int = 30, until: int = 120) -> str:
    starts = list(range(0, until, block))
    head = "| design | " + " | ".join(f"gens {a}-{a + block - 1}" for a in starts) + " | params | env steps, hours to gen " \
           f"{until - 1} |"
    lines = [head, "|---" * (len(starts) + 3) + "|"]
    for name, folder in RUNS:
        path = ROOT / "docs" / "runs" / folder / "metrics.jsonl"
        if not path.exists():
            continue
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        cells = []
        for a in starts:
            seg = [r for r in rows if a <= r["generation"] < a + block]
            cells.append(f"{np.mean([r['pop_mean'] for r in seg]):.2f} / {np.mean([r['center_return'] for r in seg]):.2f}"
                         if len(seg) == block else "-")
        from es.play import load_agent
        problem, params, _ = load_agent(str(path.parent / "checkpoint.npz"))
        upto = [r for r in rows if r["generation"] < until]
        steps = (f"{upto[-1]['env_steps'] / 1e6:.1f}M, {upto[-1]['train_seconds'] / 3600:.2f} h" if len(upto) == until
                 else "-")
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {len(params):,} | {steps} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--block", type=int, default=30)
    ap.add_argument("--until", type=int, default=120)
    args = ap.parse_args()
    print(table(args.block, args.until))


if __name__ == "__main__":
    main()
