"""Swimmer's attempts, and how long each went without its best center return rising by 10: the
figures behind ``stall_steps`` 1.5M / ``stall_gain`` 10 (locomotion/plugin.py, docs/locomotion.md).

    python docs/runs/issue52-mujoco/stalls.py

An attempt ends by passing (the run stopped at the goal), by a restart, or by hand (the run was
stopped before it ended). The pause is counted as es.training counts it: the env steps since
the generation that last raised the attempt's mark by at least the gain.
"""
import glob
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
GAIN = 10.0


def attempts(run_dir: str) -> list:
    """Per attempt: (rows as (env_steps, center_return), how it ended)."""
    rows = [json.loads(x) for x in open(os.path.join(run_dir, "metrics.jsonl")) if x.strip()]
    summary = os.path.join(run_dir, "summary.json")
    last = "passed" if os.path.exists(summary) and json.load(open(summary))["stopped"] == "goal" else "by hand"
    out = [[]]
    for r in rows:
        if "restart" in r:
            out.append([])
        out[-1].append((r["env_steps"], r["center_return"], r["env_steps"] - r["gen_env_steps"]))
    return [(a, "restart" if i < len(out) - 1 else last) for i, a in enumerate(out)]


def longest_pause(rows: list, gain: float = GAIN) -> float:
    mark, mark_at, pause = None, None, 0
    for steps, score, _ in rows:
        if mark is None or score >= mark + gain:
            mark, mark_at = score, steps
        pause = max(pause, steps - mark_at)
    return pause


def main():
    print("| run | attempt | ended | M steps | best center | longest pause without +10 (M steps) |")
    print("|---|---|---|---|---|---|")
    dirs = sorted(glob.glob(os.path.join(HERE, "runs", "swimmer-*"))) + sorted(glob.glob(os.path.join(HERE, "ablation", "*")))
    for d in dirs:
        for i, (rows, ended) in enumerate(attempts(d)):
            print(f"| {os.path.relpath(d, HERE)} | {i + 1} | {ended} | {(rows[-1][0] - rows[0][2]) / 1e6:.2f} | "
                  f"{max(s for _, s, _ in rows):.0f} | {longest_pause(rows) / 1e6:.2f} |")


if __name__ == "__main__":
    main()
