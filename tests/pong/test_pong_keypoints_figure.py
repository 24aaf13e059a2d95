"""scripts/pong_keypoints_figure.py, which draws docs/pong-windows.png and notebook 05's figure:
it runs on a committed checkpoint and prints the numbers docs/pong.md quotes."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINT = ROOT / "docs" / "runs" / "pong-windows6-vbn-sigma05" / "kept" / "110.npz"


@pytest.mark.slow
def test_the_figure_script_draws_a_windows_policy_and_prints_its_tracking(tmp_path):
    out = tmp_path / "windows.png"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "pong_keypoints_figure.py"), str(CHECKPOINT),
                           "--seed", "5", "--steps", "260", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stdout.strip().splitlines()[-1])
    assert line["generation"] == 110 and line["steps"] == 260 and line["seed"] == 5
    assert out.stat().st_size > 20_000 and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    windows = [line[f"keypoint_{i}"] for i in range(6)]
    assert all(0 <= w["share_present"] <= 1 and -1 <= w["ball_row"] <= 1 for w in windows)
    assert windows[5]["mean_col"] > 30 and windows[0]["mean_col"] < 10   # our paddle's side, the opponent's
