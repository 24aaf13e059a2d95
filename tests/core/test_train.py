import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import es
from es.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[2]


def test_cartpole_is_solved_on_defaults(tmp_path):
    result = es.train(es.config_for("cartpole", seed=0), run_dir=tmp_path / "run")
    s = result.summary
    assert s["solved"] and s["eval_mean"] >= 475 and s["eval_seeds"] == [1000, 1019]
    files = {p.name for p in (tmp_path / "run").iterdir()}
    assert {"config.json", "metrics.jsonl", "checkpoint.npz", "curve.png", "summary.json"} <= files
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == s["generations"]
    row = json.loads(lines[0])
    for key in ("generation", "center_return", "pop_mean", "pop_max", "center_rank", "update_ratio", "env_steps"):
        assert key in row
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    for key in ("solved", "generations", "train_seconds", "env_steps", "eval_mean", "eval_std"):
        assert key in saved


def _config(**kw):
    # A goal that cannot be reached, so every run trains exactly `generations` generations.
    base = dict(seed=3, population=32, generations=8, reward_goal=1e9, eval_episodes=2)
    base.update(kw)
    return es.config_for("cartpole", **base)


def test_resumed_run_is_bit_identical(tmp_path):
    full = es.train(_config(), run_dir=tmp_path / "full", final_eval=False)
    es.train(_config(generations=3), run_dir=tmp_path / "part", final_eval=False)
    resumed = es.train(_config(), run_dir=tmp_path / "part", resume=True, final_eval=False)
    assert np.array_equal(full.center, resumed.center)
    a, meta_a, opt_a = load_checkpoint(tmp_path / "full" / "checkpoint.npz")
    b, meta_b, opt_b = load_checkpoint(tmp_path / "part" / "checkpoint.npz")
    assert np.array_equal(a, b) and meta_a["generation"] == meta_b["generation"] == 8
    assert all(np.array_equal(opt_a[k], opt_b[k]) for k in opt_a)
    rows = [json.loads(l) for l in (tmp_path / "part" / "metrics.jsonl").read_text().splitlines()]
    assert [r["generation"] for r in rows] == list(range(8))
    assert [r["center_return"] for r in rows] == [m["center_return"] for m in full.metrics]


@pytest.mark.slow
def test_kill_minus_nine_then_resume_gives_the_same_parameters(tmp_path):
    args = ["--seed", "4", "--population", "256", "--episodes-per-member", "4", "--generations", "25",
            "--reward-goal", "1e9", "--eval-episodes", "1", "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "es", "train", "cartpole", "--out", str(run), *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline:
        metrics = run / "metrics.jsonl"
        if metrics.exists() and len(metrics.read_text().splitlines()) >= 5:
            break
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = json.loads(load_checkpoint_meta(run))
    assert done < 25, "the run finished before it could be killed; make it longer"
    out = subprocess.run([sys.executable, "-m", "es", "train", "--resume", str(run), "--no-progress"], env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    reference = es.train(_config(seed=4, population=256, episodes_per_member=4, generations=25), final_eval=False)
    assert np.array_equal(load_checkpoint(run)[0], reference.center)


def load_checkpoint_meta(run):
    return json.dumps(load_checkpoint(run)[1]["generation"])


def test_custom_function_api():
    result = es.optimize(lambda p, seed: -float(np.sum((p - 3.0) ** 2)), np.zeros(4), population=32, sigma=0.2,
                         learning_rate=0.1, generations=150)
    assert np.allclose(result.center, 3.0, atol=0.1)
