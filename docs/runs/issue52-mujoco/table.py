"""The tables of docs/locomotion.md's "Measured on 2 cores", from this folder's benchmark lines
(``benchmarks/mujoco.py --out``) and each kept run's metrics.jsonl (its attempts: where each
restart began, and the held-out checks).

    python docs/runs/issue52-mujoco/table.py
"""
import json
import os

import stalls       # this folder's: the runs split into attempts at their restarts

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = ("lines-2workers.jsonl", "lines-swimmer-raw-1worker.jsonl", "lines-swimmer-raw-2workers.jsonl",
         "lines-walker2d-ant-2workers.jsonl")


def attempts(run_dir: str) -> list:
    """Per attempt: its env steps and best center (gymnasium's return over the 5 training episodes)."""
    return [(rows[-1][0] - rows[0][2], max(score for _, score, _ in rows)) for rows, _ in stalls.attempts(run_dir)]


def load_at_end(line: dict) -> float:
    """The 1-minute load average as the run ended. Lines written before benchmarks/mujoco.py read
    the load before the run too name it ``load_before``, but read it after the run ended."""
    return line.get("load_after", line.get("load_before", float("nan")))


def main():
    print("| task | seed | normalize | workers | passed | env steps | minutes | restarts | attempts (M steps, best center) "
          "| held-out mean (20) | second 20 | load at the end |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in FILES:
        path = os.path.join(HERE, name)
        if not os.path.exists(path):
            continue
        for line in (json.loads(x) for x in open(path) if x.strip()):
            if line.get("summary"):
                continue
            run_dir = os.path.join(HERE, "runs", f"{line['task']}-{name.split('.')[0]}-seed{line['seed']}")
            tries = attempts(run_dir) if os.path.isdir(run_dir) else []
            tries = "; ".join(f"{s / 1e6:.2f}, {b:,.0f}" for s, b in tries)
            norm = "none" if "raw" in name else "states"
            held = f"{line['eval_mean']:,.1f}" if line["reached"] else "-"
            print(f"| {line['task']} | {line['seed']} | {norm} | {line['workers']} | {'yes' if line['reached'] else 'no'} | "
                  f"{line['env_steps'] / 1e6:.2f}M | {line['train_seconds'] / 60:.1f} | {line['restarts']} | {tries} | "
                  f"{held} | {line['fresh_mean']:,.1f} | {load_at_end(line):.1f} |")


if __name__ == "__main__":
    main()
