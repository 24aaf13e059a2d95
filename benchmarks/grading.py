"""Grading a class: N submissions (copies of the solution notebooks 00, 01, 02, 03 and 05 in
turn, each in a student folder) graded with ``python -m es grade DIR --csv`` on every core.
Prints one JSON line: wall seconds, seconds per submission (wall / N), the mean time each
submission's isolated child took, and whether every submission got full marks.

    python benchmarks/grading.py [--submissions 100] [--jobs N]
"""
import _common  # noqa: F401   (import path)

import argparse  # noqa: E402
import csv  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from classroom.grade import main as grade  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MIX = ["00_es_from_scratch", "01_cartpole", "02_parallel", "03_redis", "05_extras"]


def run():
    ap = argparse.ArgumentParser()
    ap.add_argument("--submissions", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.submissions):
            name = MIX[i % len(MIX)]
            folder = Path(tmp) / "class" / f"student{i:03d}"
            folder.mkdir(parents=True)
            shutil.copy(ROOT / "solutions" / f"{name}.ipynb", folder / f"{name}.ipynb")
        t0 = time.perf_counter()
        grade([Path(tmp) / "class"], csv_path=Path(tmp) / "book.csv", jobs=args.jobs, log=lambda m: None,
              cell_timeout=600, check_timeout=300)
        wall = time.perf_counter() - t0
        book = list(csv.DictReader(open(Path(tmp) / "book.csv")))
    print(json.dumps({"benchmark": "grading", "submissions": len(book), "jobs": args.jobs, "wall_seconds": wall,
                      "seconds_per_submission": wall / len(book),
                      "mean_child_seconds": sum(float(r["seconds"]) for r in book) / len(book),
                      "all_full_marks": all(r["total"] == r["max"] for r in book)}))


if __name__ == "__main__":
    run()
