"""The shipped Pong agents (pong/agent.npz, the objects policy; pong/agent-pixels.npz, where
shipped, a policy that learns every number from the pixels): they load, they play, their scores
are on games their runs never trained on, bad files are refused."""
import json
from pathlib import Path

import numpy as np
import pytest

from es.checkpoint import load_checkpoint, save_checkpoint
from es.cli import main
from es.play import load_agent

PONG = Path(__file__).resolve().parents[2] / "pong"
AGENT = PONG / "agent.npz"
INFO = json.loads(AGENT.with_name("agent.json").read_text())
AGENTS = [name for name in ("agent", "agent-pixels") if (PONG / f"{name}.npz").exists()]


@pytest.mark.parametrize("name", AGENTS)
def test_shipped_agent_loads_with_its_record(name):
    info = json.loads((PONG / f"{name}.json").read_text())
    problem, params, meta = load_agent(PONG / f"{name}.npz")
    assert problem.spec()["kind"] == "pong" and params.size == problem.num_params
    assert meta["generation"] == info["generations"] and meta["env_steps"] == info["env_steps"]
    for key in ("command", "seed", "wall_seconds", "env_steps", "eval", "selected_on"):
        assert key in info
    assert info["eval"]["episodes"] >= 20 and info["meets_bar"] and info["eval"]["agent_mean"] >= 0
    assert info["eval"]["beats_random"]


def test_the_pixel_agent_learns_every_number_between_the_frames_and_the_action():
    """Issue 41: pong/agent-pixels.npz is a keypoints policy (learned filters, windows and head;
    no fixed code that locates the ball or the paddles)."""
    if "agent-pixels" not in AGENTS:
        pytest.skip("pong/agent-pixels.npz is not shipped yet (pong/README.md: the attempts)")
    problem, params, _ = load_agent(PONG / "agent-pixels.npz")
    assert problem.policy_spec["type"] == "pong_keypoints" and params.size == problem.policy.num_params


def test_the_pixel_agent_is_the_checkpoint_its_validation_games_chose():
    """pong/agent-pixels.json says how it was chosen: the best of its run's kept checkpoints on
    the validation games, whose scores the run directory holds; the shipped parameters are that
    checkpoint's, bit for bit, and the validation seeds are not the held-out ones."""
    if "agent-pixels" not in AGENTS:
        pytest.skip("pong/agent-pixels.npz is not shipped yet")
    info = json.loads((PONG / "agent-pixels.json").read_text())
    run = PONG.parent / info["command"].split("--out ")[1].split()[0]
    scores = {int(p.stem): json.loads(p.read_text()) for p in (run / "validation").glob("*.json")}
    best = max(scores, key=lambda g: (scores[g]["agent_mean"], g))
    assert best == info["generations"] and f"generation {best} best" in info["selected_on"]
    shipped, _, _ = load_checkpoint(PONG / "agent-pixels.npz")
    kept, _, _ = load_checkpoint(run / "kept" / f"{best}.npz")
    assert np.array_equal(shipped, kept)
    validation = {s["seed"] + i for s in scores.values() for i in range(s["episodes"])}
    first = info["eval"]["seed"]
    assert not validation & set(range(first, first + info["eval"]["episodes"]))


@pytest.mark.slow
def test_shipped_agent_beats_random_on_a_short_check():
    problem, params, _ = load_agent(AGENT)
    seeds = np.arange(3)
    agent, lengths = problem.play(params, seeds)
    random = problem.play_random(seeds)
    assert agent.mean() > random.mean()
    assert lengths.mean() > 1500, "the agent keeps the ball in play far longer than random (~900 steps)"


def test_bad_weights_give_a_clear_error(tmp_path, capsys):
    center, meta, _ = load_checkpoint(AGENT)
    save_checkpoint(tmp_path / "short.npz", center[:-5], {**meta, "num_params": center.size - 5})
    assert main(["eval", str(tmp_path / "short.npz"), "--episodes", "1"]) == 2
    assert "parameters but its policy needs" in capsys.readouterr().err
    (tmp_path / "junk.npz").write_bytes(AGENT.read_bytes()[:100])
    assert main(["eval", str(tmp_path / "junk.npz"), "--episodes", "1"]) == 2
    assert "corrupt" in capsys.readouterr().err


@pytest.mark.parametrize("name", AGENTS)
def test_the_shipped_score_is_on_games_the_run_never_trained_on(name):
    """The record's evaluation seeds hold no game seed of any generation of the run, nor of the
    runs it started from (``--init``: ``started_from``)."""
    from es.seeding import episode_seeds
    info = json.loads((PONG / f"{name}.json").read_text())
    first = info["eval"]["seed"]
    trained = set()
    for run in [info, *info.get("started_from", [])]:
        cfg = run["config"]
        per_generation = max(cfg["episodes_per_member"], cfg["center_episodes"])    # as es.training draws them
        trained |= {int(s) for g in range(run["generations"]) for s in episode_seeds(cfg["seed"], g, per_generation)}
    assert not trained & set(range(first, first + info["eval"]["episodes"]))


def test_the_ship_script_refuses_seeds_the_run_trained_on():
    """... and the ship script refuses seeds that do (before it writes anything)."""
    import subprocess
    import sys
    from es.seeding import episode_seeds
    cfg = INFO["config"]
    per_generation = max(cfg["episodes_per_member"], cfg["center_episodes"])
    trained = {int(s) for g in range(INFO["generations"]) for s in episode_seeds(cfg["seed"], g, per_generation)}
    root = AGENT.parents[1]
    before = AGENT.read_bytes()
    out = subprocess.run([sys.executable, str(root / "scripts" / "ship_pong_agent.py"), str(root / "docs" / "runs" /
                          "pong-objects-s9"), "--seed", str(min(trained)), "--episodes", "1"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "trained on" in out.stderr
    assert AGENT.read_bytes() == before


def _ship(args):
    import subprocess
    import sys
    root = AGENT.parents[1]
    return subprocess.run([sys.executable, str(root / "scripts" / "ship_pong_agent.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_the_ship_script_refuses_seeds_a_run_it_started_from_trained_on():
    """Attempt 15 started from attempt 14's checkpoint (--init): attempt 14's games are trained
    on too, though attempt 15 never played them."""
    from es.seeding import episode_seeds
    run = AGENT.parents[1] / "docs" / "runs" / "pong-windows6-vbn-sigma05"
    _, meta, _ = load_checkpoint(run / "kept" / "110.npz")
    parent = meta["config"]["init"]
    _, parent_meta, _ = load_checkpoint(AGENT.parents[1] / parent)
    seed = int(episode_seeds(parent_meta["config"]["seed"], 3, 1)[0])
    own = {int(s) for g in range(meta["generation"]) for s in episode_seeds(meta["config"]["seed"], g, 1)}
    assert seed not in own
    before = {p: p.read_bytes() for p in PONG.glob("agent-pixels*")}
    out = _ship([run, "--checkpoint", run / "kept" / "110.npz", "--seed", seed, "--episodes", 1, "--name", "agent-pixels"])
    assert out.returncode != 0 and "or the runs it started from trained on" in out.stderr
    assert {p: p.read_bytes() for p in PONG.glob("agent-pixels*")} == before


def test_the_ship_script_refuses_a_run_whose_starting_checkpoint_changed(tmp_path):
    run = AGENT.parents[1] / "docs" / "runs" / "pong-windows6-vbn-sigma05"
    center, meta, _ = load_checkpoint(run / "kept" / "110.npz")
    parent, parent_meta, _ = load_checkpoint(AGENT.parents[1] / meta["config"]["init"])
    meta["config"]["init"] = str(tmp_path / "parent.npz")
    save_checkpoint(tmp_path / "checkpoint.npz", center, meta)
    (tmp_path / "metrics.jsonl").write_text("")
    for changed in (lambda: save_checkpoint(tmp_path / "parent.npz", parent + np.float32(1e-3), parent_meta),
                    lambda: (tmp_path / "parent.npz").write_bytes(b"not a checkpoint")):
        changed()
        out = _ship([tmp_path, "--seed", 1_100_000, "--episodes", 1, "--name", "agent-pixels"])
        assert out.returncode != 0 and "not the checkpoint this run started from" in out.stderr
