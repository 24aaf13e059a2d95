"""The README's table, from the benchmark's lines in this folder (python table.py)."""
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "benchmarks"))
import pong_student as benchmark  # noqa: E402
RATE_2026_11_25 = 8746.6     # agent steps/s of the quiet 2-core machine's linus run (1,868,282 steps in 3.56 min)


def lines(name):
    return [json.loads(line) for line in (HERE / name).open() if line.startswith("{") and '"student"' in line]


def table(rows):
    print("| identifier | generations | env steps | gate opened after | floor share, gen. 0-9 | train minutes here "
          "| minutes at 8,747 steps/s | grader's 20 games |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:          # how each run started, from its record (the earliest lines did not carry it)
        r.update(benchmark.start_signs([json.loads(x) for x in (HERE / f"{r['student']}-metrics.jsonl").open()]))
        print(f"| {r['student']} | {r['generations']} | {r['env_steps']:,} | {r.get('gate_generation', '')} | "
              f"{r.get('floor_share_g0_9', '')} | {r['train_minutes']:.1f} | {r['env_steps'] / RATE_2026_11_25 / 60:.1f} | "
              f"{r['grader_agent_mean']:+.2f}, {'passes' if r['grader_passes'] else 'fails'} |")
    steps = [r["env_steps"] for r in rows]
    print(f"\nmedian {statistics.median(steps):,.0f} env steps, maximum {max(steps):,} "
          f"({statistics.median(steps) / RATE_2026_11_25 / 60:.1f} and {max(steps) / RATE_2026_11_25 / 60:.1f} minutes at "
          f"8,747 steps/s); generations median {statistics.median(r['generations'] for r in rows)}, "
          f"maximum {max(r['generations'] for r in rows)}")


if __name__ == "__main__":
    table(lines("baseline.jsonl"))
