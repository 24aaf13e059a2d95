"""The student's Pong budget: minutes of training (2 cores) until notebook 04's loop stops at an
agent that beats a random player, over several student identifiers, and whether that agent
then passes the grader's test on 20 games it never saw. One JSON line per identifier, then
the median and the maximum.

    python benchmarks/pong_student.py --students s1 s2 s3 s4 s5 --budget 45

The loop is the notebook's (``pong.student.train_until_beats_random`` with the course's
settings and the reference code in the student's place): the rule on seeds 0..19 every 5
generations once the population's games beat -20. The grader's test then plays seeds
1,000,000.. (as ``classroom.check.pong_agent`` draws them, from 1e6 up); evaluation time is
not training time.
"""
import _common  # noqa: F401

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from pathlib import Path  # noqa: E402

from pong.replay import REFERENCE  # noqa: E402
from pong.student import beats_random, student_config, train_until_beats_random  # noqa: E402

GRADER_SEEDS = 1_000_000


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--students", nargs="+", default=["reference", "student-2", "student-3", "student-4", "student-5"])
    ap.add_argument("--budget", type=float, default=45.0, help="minutes of training before giving up on one")
    ap.add_argument("--keep", type=Path, default=None, help="keep the run directories under this folder")
    args = ap.parse_args()
    found = []
    for sid in args.students:
        root = Path(tempfile.mkdtemp(prefix="pong-student-")) if args.keep is None else args.keep
        t0 = time.perf_counter()
        verdict, minutes, gens = train_until_beats_random(sid, root / sid, REFERENCE, budget_minutes=args.budget,
                                                          progress=False)
        ok = verdict is not None and verdict.beats_random
        graded = beats_random(REFERENCE, np.load(root / sid / "checkpoint.npz")["center"],
                              first_seed=GRADER_SEEDS) if ok else None
        row = {"benchmark": "pong_student", "student": sid, "seed": student_config(sid).seed, "beats_random": ok,
               "train_minutes": round(minutes, 2), "generations": gens,
               "wall_minutes": round((time.perf_counter() - t0) / 60, 2),
               "agent_mean": verdict.agent_mean if verdict else None, "agent_ci": verdict.agent_ci if verdict else None,
               "random_ci": verdict.random_ci if verdict else None,
               "grader_passes": graded.beats_random if graded else None,
               "grader_agent_mean": graded.agent_mean if graded else None,
               "grader_agent_ci": graded.agent_ci if graded else None}
        print(json.dumps(row), flush=True)
        found.append(minutes if ok and graded.beats_random else float("inf"))
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    med, worst = statistics.median(found), max(found)
    print(json.dumps({"benchmark": "pong_student", "students": len(found), "budget_minutes": args.budget,
                      "median_train_minutes": round(med, 2) if med != float("inf") else None,
                      "max_train_minutes": round(worst, 2) if worst != float("inf") else None,
                      "passed": sum(m != float("inf") for m in found)}), flush=True)


if __name__ == "__main__":
    main()
