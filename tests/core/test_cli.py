"""What a user sees: the CLI's outputs, files and one-line errors with exit status 2."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from es.cli import main

ROOT = Path(__file__).resolve().parents[2]


def run_main(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, *fragments):
    assert code == 2
    lines = [l for l in err.splitlines() if l.strip() and not l.startswith("run directory")]
    assert len(lines) == 1, err
    for f in fragments:
        assert f in lines[0], lines[0]


@pytest.mark.parametrize("flags, fragment", [
    (["--sigma", "0"], "--sigma must be a positive number"),
    (["--sigma", "-0.1"], "--sigma must be a positive number"),
    (["--population", "1"], "--population must be an integer >= 2"),
    (["--population", "7"], "must be even with antithetic sampling"),
    (["--learning-rate", "0"], "--learning-rate must be a positive number"),
    (["--optimizer", "rmsprop"], "--optimizer: invalid choice: 'rmsprop' (choose from 'adam', 'sgd')"),
    (["--shaping", "softmax"], "--shaping: invalid choice"),
    (["--generations", "0"], "--generations must be"),
    (["--sigma", "abc"], "invalid float value"),
    (["--redis", "--probation", "-1"], "--probation must be >= 0"),
    (["--redis", "--spot-checks", "-2"], "--spot-checks must be >= 0"),
    (["--redis", "--catch-within", "0"], "--catch-within must be >= 1"),
])
def test_bad_hyperparameters_exit_2_with_one_line(capsys, tmp_path, flags, fragment):
    code, _, err = run_main(capsys, "train", "cartpole", "--out", str(tmp_path / "r"), *flags)
    assert_one_line_error(code, err, fragment)
    assert not (tmp_path / "r" / "checkpoint.npz").exists()


def test_odd_population_is_fine_without_antithetic(capsys, tmp_path):
    code, out, _ = run_main(capsys, "train", "cartpole", "--population", "7", "--no-antithetic", "--generations", "2",
                            "--out", str(tmp_path / "r"), "--no-progress", "--eval-episodes", "1")
    assert code == 0 and "trained 2 generations" in out


def test_unknown_environment(capsys, tmp_path):
    code, _, err = run_main(capsys, "train", "NoSuchEnv-v9", "--out", str(tmp_path / "r"))
    assert_one_line_error(code, err, "unknown environment 'NoSuchEnv-v9'")


def test_never_overwrites_a_run_without_resume(capsys, tmp_path):
    run = tmp_path / "r"
    assert run_main(capsys, "train", "cartpole", "--out", str(run), "--no-progress")[0] == 0
    before = (run / "checkpoint.npz").read_bytes()
    code, _, err = run_main(capsys, "train", "cartpole", "--out", str(run), "--no-progress")
    assert_one_line_error(code, err, "already holds a run", "--resume")
    assert (run / "checkpoint.npz").read_bytes() == before


def test_unwritable_out_dir(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code, _, err = run_main(capsys, "train", "cartpole", "--out", str(blocker / "run"))
    assert_one_line_error(code, err, "cannot write to run directory")


def test_resume_errors(capsys, tmp_path):
    code, _, err = run_main(capsys, "train", "--resume", str(tmp_path / "missing"))
    assert_one_line_error(code, err, "config.json")
    run = tmp_path / "r"
    run_main(capsys, "train", "cartpole", "--out", str(run), "--generations", "2", "--reward-goal", "1e9",
             "--no-progress", "--eval-episodes", "1")
    code, _, err = run_main(capsys, "train", "--resume", str(run), "--sigma", "0.05")
    assert_one_line_error(code, err, "cannot change sigma when resuming")


def test_an_environments_own_flags_set_its_extra_belong_to_it_and_stay_fixed_on_resume(capsys, tmp_path, monkeypatch):
    """A plug-in's train flags (``register_env(flags=...)``), on an environment registered here."""
    from es import registry
    cartpole = registry.env("cartpole")
    knobs = []

    def check(config):
        knobs.append(config.extra.get("knob"))

    monkeypatch.setitem(registry._ENVS, "knobpole", registry.EnvEntry(
        "knobpole", cartpole.make_problem, cartpole.defaults, ("KnobPole-v0",), "CartPole with a knob", check,
        (registry.EnvFlag("--knob", "knob", "a setting of knobpole's", int),)))
    code, out, _ = run_main(capsys, "train", "--help")
    assert "knobpole: a setting of knobpole's" in out
    run = tmp_path / "k"
    code, _, err = run_main(capsys, "train", "KnobPole-v0", "--knob", "3", "--out", str(run), "--generations", "1",
                            "--no-progress", "--eval-episodes", "1")
    assert code == 0, err
    assert json.loads((run / "config.json").read_text())["extra"] == {"knob": 3} and 3 in knobs
    code, _, err = run_main(capsys, "train", "--resume", str(run), "--knob", "4")
    assert_one_line_error(code, err, "cannot change --knob when resuming")
    code, _, err = run_main(capsys, "train", "cartpole", "--knob", "3", "--out", str(tmp_path / "c"))
    assert_one_line_error(code, err, "--knob is a knobpole setting; cartpole has no such setting")
    assert not (tmp_path / "c").exists()


def test_missing_and_corrupt_checkpoints(capsys, tmp_path):
    code, _, err = run_main(capsys, "eval", str(tmp_path / "nope.npz"))
    assert_one_line_error(code, err, "checkpoint not found")
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"PK\x03\x04 this is not a zip file")
    code, _, err = run_main(capsys, "eval", str(bad))
    assert_one_line_error(code, err, "is corrupt")
    np.savez(tmp_path / "other.npz", weights=np.zeros(3))
    code, _, err = run_main(capsys, "eval", str(tmp_path / "other.npz"))
    assert_one_line_error(code, err, "not an es-course checkpoint")


def test_truncated_checkpoint_is_refused_on_resume(capsys, tmp_path):
    run = tmp_path / "r"
    run_main(capsys, "train", "cartpole", "--out", str(run), "--generations", "2", "--reward-goal", "1e9",
             "--no-progress", "--eval-episodes", "1")
    data = (run / "checkpoint.npz").read_bytes()
    (run / "checkpoint.npz").write_bytes(data[: len(data) // 2])
    code, _, err = run_main(capsys, "train", "--resume", str(run), "--generations", "4")
    assert_one_line_error(code, err, "corrupt")


@pytest.mark.slow
def test_train_then_eval_with_gif_through_a_real_subprocess(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = tmp_path / "run"
    out = subprocess.run([sys.executable, "-m", "es", "train", "cartpole", "--out", str(run), "--no-progress"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("SOLVED")
    out = subprocess.run([sys.executable, "-m", "es", "eval", str(run / "checkpoint.npz"), "--episodes", "5",
                          "--gif", str(tmp_path / "cartpole.gif")], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["episodes"] == 5 and result["seed"] == 1000
    assert result["agent_mean"] >= 475 and result["agent_mean"] > result["random_mean"] and result["beats_random"]
    from PIL import Image
    with Image.open(tmp_path / "cartpole.gif") as im:
        assert im.n_frames > 10 and im.size == (600, 400)


def test_help_lists_environments():
    out = subprocess.run([sys.executable, "-m", "es", "train", "--help"], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0
    for name in ("cartpole", "acrobot", "pendulum", "pong", "gymnasium id"):
        assert name in out.stdout


def test_init_starts_a_new_run_from_a_checkpoint(tmp_path, capsys):
    from es.checkpoint import load_checkpoint
    code, _, _ = run_main(capsys, "train", "cartpole", "--out", str(tmp_path / "a"), "--no-progress")
    assert code == 0
    start = load_checkpoint(tmp_path / "a")[0]
    # A solved center meets the goal at generation 0, so the new run stops with it unchanged.
    code, out, _ = run_main(capsys, "train", "cartpole", "--init", str(tmp_path / "a"), "--max-steps", "400",
                            "--reward-goal", "400", "--solve-threshold", "400", "--out", str(tmp_path / "b"),
                            "--no-progress")
    assert code == 0 and "SOLVED" in out
    center, meta, _ = load_checkpoint(tmp_path / "b")
    assert np.array_equal(center, start) and meta["generation"] == 0
    config = json.loads((tmp_path / "b" / "config.json").read_text())
    assert config["init"] == str(tmp_path / "a") and len(config["init_sha256"]) == 64
    # resuming it does not reload --init
    code, _, _ = run_main(capsys, "train", "--resume", str(tmp_path / "b"), "--generations", "3", "--no-progress")
    assert code == 0


def test_init_errors(tmp_path, capsys):
    agent = ROOT / "pong" / "agent.npz"
    code, _, err = run_main(capsys, "train", "cartpole", "--init", str(agent), "--out", str(tmp_path / "c"))
    assert_one_line_error(code, err, "parameters, this run's policy needs 10")
    code, _, err = run_main(capsys, "train", "--resume", str(tmp_path / "c"), "--init", str(agent))
    assert_one_line_error(code, err, "--init starts a new run")
    code, _, err = run_main(capsys, "train", "cartpole", "--init", str(tmp_path / "nothing.npz"),
                            "--out", str(tmp_path / "d"))
    assert_one_line_error(code, err, "checkpoint not found")


@pytest.mark.parametrize("order", [1, -1])
def test_a_flag_two_environments_add_takes_either_ones_choices_whatever_order_they_load_in(monkeypatch, order):
    """Pong and the locomotion tasks both add --policy. It used to be whichever registered last
    (pong, by the entry points' order), so another order would have broken the other's flag. Now
    one argument takes both sets of choices, each environment judges its own."""
    from es import cli, registry
    envs = dict(list(registry.envs().items())[::order])
    monkeypatch.setattr(registry, "envs", lambda: envs)
    parser = cli.build_parser()
    assert parser.parse_args(["train", "pong", "--policy", "keypoints"]).extra_policy == "keypoints"
    assert parser.parse_args(["train", "halfcheetah", "--policy", "mlp"]).extra_policy == "mlp"
    assert cli.main(["train", "pong", "--policy", "linear", "--generations", "1"]) == 2
    assert cli.main(["train", "cartpole", "--policy", "dense", "--generations", "1"]) == 2


def test_a_usage_error_names_a_plug_in_that_failed_to_load(tmp_path):
    """Run from a folder holding a pong.py (benchmarks/), `python -m es` imports that file for
    the pong plug-in, which then fails to load: `--policy dense` used to read as a typo (only
    locomotion's choices were left). The error now says why."""
    (tmp_path / "pong.py").write_text("x = 1\n")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-m", "es", "train", "pong", "--policy", "dense"], cwd=tmp_path,
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(root)}, timeout=120)
    assert out.returncode == 2 and "plug-in pong (pong.plugin:register) failed to load" in out.stderr, out.stderr
