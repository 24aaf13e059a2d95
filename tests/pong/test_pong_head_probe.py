"""scripts/pong_head_probe.py: the figures docs/pong.md quotes on the heads' random walk."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow      # a script in a fresh process that replays a checkpoint's heads (about 7 s)
def test_the_head_probe_reproduces_its_committed_line_for_attempt_14():
    ckpt = "docs/runs/pong-windows6-vbn-s0/checkpoint.npz"
    done = subprocess.run([sys.executable, "scripts/pong_head_probe.py", ckpt], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stdout)
    committed = [json.loads(x) for x in (ROOT / "docs/runs/pong-head-probe/probe.jsonl").read_text().splitlines()]
    assert line == next(c for c in committed if c["checkpoint"] == ckpt)
    # what docs/pong.md says of it: grown as a random walk would, most hidden units saturated
    assert abs(line["w1_rms"] / line["random_walk_rms"] - 1) < 0.05 and line["saturated_share"] > 0.7
    assert line["head_inputs"] == 495
