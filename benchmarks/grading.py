"""Grading a class: N students, each a complete submission (the six solution notebooks; the
first student, "reference", also hands in ``solutions/pong-run``, so the class holds one Pong
replay), graded as ``python -m classroom grade CLASS --csv ... --feedback ...`` does, on every
core. Prints one JSON line: wall seconds, seconds per student, and each student's total.

    python benchmarks/grading.py [--students 4] [--jobs N]
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

from classroom.gradebook import grade_class  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.name for p in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))


def run():
    ap = argparse.ArgumentParser()
    ap.add_argument("--students", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        names = ["reference"] + [f"student{i:03d}" for i in range(1, args.students)]
        for name in names:
            folder = Path(tmp) / "class" / name
            folder.mkdir(parents=True)
            for nb in NOTEBOOKS:
                shutil.copy(ROOT / "solutions" / nb, folder / nb)
        shutil.copytree(ROOT / "solutions" / "pong-run", Path(tmp) / "class" / "reference" / "pong-run")
        t0 = time.perf_counter()
        status = grade_class([Path(tmp) / "class"], csv_path=Path(tmp) / "book.csv", feedback=Path(tmp) / "feedback",
                             jobs=args.jobs, log=lambda m: None, cell_timeout=600, check_timeout=600)
        wall = time.perf_counter() - t0
        book = list(csv.DictReader(open(Path(tmp) / "book.csv")))
    print(json.dumps({"benchmark": "grading", "students": len(book), "notebooks": len(book) * len(NOTEBOOKS),
                      "pong_replays": 1, "jobs": args.jobs, "exit_status": status, "wall_seconds": round(wall, 1),
                      "seconds_per_student": round(wall / len(book), 1),
                      "totals": {r["student"]: f"{r['total']}/{r['max']}" for r in book}}))


if __name__ == "__main__":
    run()
