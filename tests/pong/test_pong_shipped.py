"""The shipped Pong agent (pong/agent.npz): it loads, it plays, bad files are refused."""
import json
from pathlib import Path

import numpy as np
import pytest

from es.checkpoint import load_checkpoint, save_checkpoint
from es.cli import main
from es.play import load_agent

AGENT = Path(__file__).resolve().parents[2] / "pong" / "agent.npz"
INFO = json.loads(AGENT.with_name("agent.json").read_text())


def test_shipped_agent_loads_with_its_record():
    problem, params, meta = load_agent(AGENT)
    assert problem.spec()["kind"] == "pong" and params.size == problem.num_params
    assert meta["generation"] == INFO["generations"] and meta["env_steps"] == INFO["env_steps"]
    for key in ("command", "seed", "wall_seconds", "env_steps", "eval"):
        assert key in INFO


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


def test_the_shipped_score_is_on_games_the_run_never_trained_on():
    """agent.json's evaluation seeds hold no game seed of any generation of the run, and the
    ship script refuses seeds that do (before it writes anything)."""
    import subprocess
    import sys
    from es.seeding import episode_seeds
    cfg, first = INFO["config"], INFO["eval"]["seed"]
    per_generation = max(cfg["episodes_per_member"], cfg["center_episodes"])    # as es.training draws them
    trained = {int(s) for g in range(INFO["generations"]) for s in episode_seeds(cfg["seed"], g, per_generation)}
    assert not trained & set(range(first, first + INFO["eval"]["episodes"]))
    assert INFO["eval"]["episodes"] >= 20 and INFO["meets_bar"] and INFO["eval"]["agent_mean"] >= 0
    root = AGENT.parents[1]
    before = AGENT.read_bytes()
    out = subprocess.run([sys.executable, str(root / "scripts" / "ship_pong_agent.py"), str(root / "docs" / "runs" /
                          "pong-objects-s9"), "--seed", str(min(trained)), "--episodes", "1"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "trained on" in out.stderr
    assert AGENT.read_bytes() == before
