"""The student's Pong budget: minutes of training (2 cores) to the first checkpoint whose
20-game mean beats a random player's with disjoint 95% intervals (``pong.student``'s rule),
over several student identifiers. One JSON line per identifier, then the median.

    python benchmarks/pong_student.py --students s1 s2 s3 --budget 60

Checkpoints are tested every 5 generations once the population's games beat -20 on average;
evaluation runs on held-out seeds (10000..10019) and is not counted as training time.
"""
import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pong.student import student_config, train_until_beats_random  # noqa: E402

HELD_OUT = 10_000


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--students", nargs="+", default=["reference", "student-2", "student-3"])
    ap.add_argument("--budget", type=float, default=60.0, help="minutes of training before giving up on one")
    ap.add_argument("--keep", type=Path, default=None, help="keep the run directories under this folder")
    args = ap.parse_args()
    found = []
    for sid in args.students:
        root = Path(tempfile.mkdtemp(prefix="pong-student-")) if args.keep is None else args.keep
        run_dir = root / sid
        config = student_config(sid)
        t0 = time.perf_counter()
        verdict, seconds, gens = train_until_beats_random(config, run_dir, first_seed=HELD_OUT,
                                                          budget_minutes=args.budget)
        ok = verdict is not None and verdict.beats_random
        row = {"benchmark": "pong_student", "student": sid, "seed": config.seed, "beats_random": ok,
               "train_minutes": round(seconds / 60, 2), "generations": gens,
               "wall_minutes": round((time.perf_counter() - t0) / 60, 2),
               "agent_mean": verdict.agent_mean if verdict else None,
               "agent_ci": verdict.agent_ci if verdict else None,
               "random_mean": verdict.random_mean if verdict else None,
               "random_ci": verdict.random_ci if verdict else None}
        print(json.dumps(row), flush=True)
        found.append(seconds / 60 if ok else float("inf"))
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    med = statistics.median(found)
    print(json.dumps({"benchmark": "pong_student", "students": len(found), "budget_minutes": args.budget,
                      "median_train_minutes": round(med, 2) if med != float("inf") else None,
                      "passed": sum(m != float("inf") for m in found)}), flush=True)


if __name__ == "__main__":
    main()
