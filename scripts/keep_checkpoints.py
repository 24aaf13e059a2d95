"""Keep a copy of a training run's checkpoint every N generations, beside the run.

The trainer keeps only its latest checkpoint (written atomically each generation); choosing a
Pong agent by its validation games needs the earlier ones too. Run this beside the trainer:

    python scripts/keep_checkpoints.py runs/NAME --every 10

It polls the run, and each time the checkpoint's generation is a multiple of ``--every`` copies
the bytes it read (after checking that they load) to ``runs/NAME/kept/<generation>.npz``. It
stops after ``--idle`` seconds without a new checkpoint (the trainer stopped or finished).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from es.checkpoint import load_checkpoint  # noqa: E402
from es.errors import ESError  # noqa: E402


def generation_of(data: bytes, scratch: Path) -> int:
    scratch.write_bytes(data)
    _, meta, _ = load_checkpoint(scratch)
    return int(meta["generation"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--poll", type=float, default=3.0)
    ap.add_argument("--idle", type=float, default=900.0, help="stop after this many seconds without a new checkpoint")
    args = ap.parse_args(argv)
    kept = args.run / "kept"
    kept.mkdir(exist_ok=True)
    scratch = kept / ".reading.npz"
    last_change, last_mtime = time.monotonic(), None
    while time.monotonic() - last_change < args.idle:
        path = args.run / "checkpoint.npz"
        try:
            mtime = path.stat().st_mtime_ns
        except FileNotFoundError:
            mtime = None
        if mtime is not None and mtime != last_mtime:
            last_mtime, last_change = mtime, time.monotonic()
            try:
                data = path.read_bytes()
                g = generation_of(data, scratch)
            except (OSError, ESError):
                last_mtime = None      # replaced while read: read it again
                time.sleep(0.2)
                continue
            if g % args.every == 0 and not (kept / f"{g}.npz").exists():
                (kept / f"{g}.npz").write_bytes(data)
                print(f"kept generation {g}", flush=True)
        time.sleep(args.poll)
    scratch.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
