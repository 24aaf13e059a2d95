"""Which of a run's saved centers already beat random by the notebook's rule (seeds 0..19, then the
confirmation set the loop would use at that check), whatever the gate that decides when the loop checks.
From the repository root, on a run kept by ``benchmarks/pong_student.py --keep DIR``:

    python docs/runs/issue52-student/gate_check.py DIR/ID 10 15 20 25
"""
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
import pong_student as benchmark  # noqa: E402
from pong.student import CONFIRM_SEEDS, GAMES, beats_random, read_metrics  # noqa: E402

args = sys.argv[1:]
code = benchmark.notebook_code()
run, gens = args[0], [int(g) for g in args[1:]]
centers = np.load(f"{run}/centers.npy")
rows = read_metrics(run)
for g in gens:
    v = beats_random(code, centers[g], 0, n_jobs=2)
    c = beats_random(code, centers[g], CONFIRM_SEEDS + GAMES * (g // 5), n_jobs=2) if v.beats_random else None
    recent = rows[max(0, g - 5):g]
    print(json.dumps({"run": run, "generation": g,
                      "pop_mean_5": round(float(np.mean([r["pop_mean"] for r in recent])), 3),
                      "center_5": round(float(np.mean([r["center_return"] for r in recent])), 3),
                      "rule": v.beats_random, "agent": v.agent_mean, "agent_ci": [round(x, 2) for x in v.agent_ci],
                      "confirm": None if c is None else c.beats_random,
                      "confirm_agent": None if c is None else c.agent_mean}), flush=True)
