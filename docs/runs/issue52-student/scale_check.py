"""hopper at sigma 0.05 and learning rate 0.005 (the sigma-0.1 ablation's ratio of step to sigma)
for 4 generations, each generation's 64 fitness values compared with the sigma-0.1 run's
(``hopper-sigma0.1-metrics.jsonl``). From the repository root:

    python docs/runs/issue52-student/scale_check.py
"""
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "benchmarks"))
import pong_student as benchmark  # noqa: E402
from pong.student import read_metrics, student_config, train_until_beats_random  # noqa: E402

run = Path(tempfile.mkdtemp()) / "hopper"
train_until_beats_random("hopper", run, benchmark.notebook_code(), progress=False,
                         config=student_config("hopper", sigma=0.05, learning_rate=0.005, generations=4))
other = [json.loads(line) for line in (HERE / "hopper-sigma0.1-metrics.jsonl").open()][:4]
for a, b in zip(read_metrics(run), other):
    x, y = np.array(a["returns"]), np.array(b["returns"])
    print(f"generation {a['generation']}: " + ("identical" if np.array_equal(x, y) else
                                              f"{(x != y).sum()} of {len(x)} members' fitness differ"))
