"""How long a contributor waits for the tests: the fast lane (``-m "not slow"``) and the
README's ``python -m pytest``, each run whole from this checkout, with the slowest tests
pytest reports. The goals are 120 s for the fast lane and 20 minutes for the whole suite on
2 cores. Prints one JSON line per lane.

    python benchmarks/test_lanes.py [--lanes fast full] [--workers auto|N] [--slowest 5]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import pythonpath  # noqa: E402  (and the import path)

ROOT = Path(__file__).resolve().parents[1]
LANES = {"fast": ["-m", "not slow"], "full": []}
GOALS = {"fast": 120.0, "full": 1200.0}


def run_lane(lane: str, workers: str, slowest: int) -> dict:
    argv = [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", "-n", workers,
            f"--durations={slowest}", *LANES[lane]]
    env = {**os.environ, "PYTHONPATH": pythonpath(ROOT)}
    load, start = os.getloadavg()[0], time.perf_counter()
    out = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    text = out.stdout + out.stderr
    log = Path(tempfile.gettempdir()) / f"es-course-lane-{lane}-{time.strftime('%Y%m%d-%H%M%S')}.log"
    log.write_text(text)           # the whole output: a failure's message is there
    summary = next((line for line in reversed(text.splitlines()) if re.search(r"\d+ (passed|failed)", line)), "")
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", summary)}
    counts["failures"] = re.findall(r"^(?:FAILED|ERROR) (\S+)", text, re.M)
    durations = [{"seconds": float(s), "test": t} for s, t in
                 re.findall(r"^([0-9.]+)s (?:call|setup|teardown)\s+(\S+)", text, re.M)][:slowest]
    return {"lane": lane, "seconds": round(seconds, 1), "goal_seconds": GOALS[lane], "exit": out.returncode,
            "workers": workers, "cores": len(os.sched_getaffinity(0)), "load_before": round(load, 2),
            "bytecode_cache": not os.environ.get("PYTHONDONTWRITEBYTECODE"),     # off: every import compiles
            "bytecode_present": bytecode_present(), **machine(), **counts, "slowest": durations, "log": str(log)}


def bytecode_present() -> float:
    """The share of this checkout's modules (es, classroom, pong, locomotion) whose .pyc is no
    older than the source file: with PYTHONDONTWRITEBYTECODE set, the rest compile in every
    process that imports them (.ci/run writes them first with compileall)."""
    import importlib.util
    sources = [p for d in ("es", "classroom", "pong", "locomotion") for p in (ROOT / d).rglob("*.py")]
    fresh = 0
    for src in sources:
        pyc = Path(importlib.util.cache_from_source(str(src)))
        fresh += pyc.is_file() and pyc.stat().st_mtime >= src.stat().st_mtime
    return round(fresh / max(len(sources), 1), 3)


def machine() -> dict:
    """What the lane's time depends on besides the tests: the CPU (CI has run on machines of
    different speeds), NumPy's SIMD level and the BLAS kernel as ``es.distributed.platform``
    reports them (X86_V4: AVX-512), and the pytest and pytest-xdist versions (--dist loadgroup
    groups nothing with pytest 9.2 and xdist 3.8: pytest-dev/pytest-xdist#1386)."""
    from importlib.metadata import PackageNotFoundError, version

    from es.distributed.platform import describe
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    versions = {}
    for name in ("pytest", "pytest-xdist"):
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = None
    platform = describe()
    return {"cpu": cpu, "simd": platform["simd"], "blas": platform["blas"], **versions}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lanes", nargs="+", choices=list(LANES), default=list(LANES))
    ap.add_argument("--workers", default="auto", help="pytest-xdist's -n (auto: tests/conftest.py's rule; 0: one process)")
    ap.add_argument("--slowest", type=int, default=5)
    args = ap.parse_args()
    for lane in args.lanes:
        print(json.dumps(run_lane(lane, args.workers, args.slowest)), flush=True)


if __name__ == "__main__":
    main()
