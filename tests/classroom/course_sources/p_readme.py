"""Sources of the numbers on page readme (the repository's README.md): the milestones' points
(the grader's maximum and its checks' points, as on the release's README), the CartPole run of
its main command (run again: a second), and each row of its results table, held to the run
record the row names."""
from __future__ import annotations

import statistics
from functools import lru_cache

from course_numbers import Claim
from course_sources import *   # noqa: F401,F403  (printed, solution, lines, load, fmt, source_of, check_points)
from course_sources import ROOT, lines, load
from course_sources.p_release_readme import SOURCE, milestone

LOCOMOTION = "docs/runs/issue52-mujoco/lines-2workers.jsonl"
SWIMMER = "docs/runs/issue52-mujoco/lines-swimmer-raw-2workers.jsonl"


@lru_cache(maxsize=None)
def _cartpole_run():
    import es
    config = es.config_for("cartpole")
    return config, es.train(config)


def _cartpole():
    """``python -m es train cartpole`` on its defaults: a linear policy, solved on the held-out
    episodes after 9 generations (the run is a pure function of its seed: the same on any machine)."""
    import gymnasium
    config, result = _cartpole_run()
    assert config.hidden == [] and config.seed == 0
    assert gymnasium.make("CartPole-v1").observation_space.shape == (4,)       # 4 x 2 weights + 2 biases = 10
    summary = result.summary
    assert [m["center_return"] for m in result.metrics].index(500.0) == 8      # within 9 generations
    assert (summary["num_params"], summary["generations"], summary["env_steps"]) == (10, 9, 375055), summary
    assert (summary["eval_mean"], summary["eval_episodes"], summary["solve_threshold"]) == (500.0, 20, 475.0)
    assert summary["solved"] and summary["eval_seeds"][0] > 0        # not the training episodes' seeds


def _course_agent():
    run = load("solutions/pong-run/beats_random.json")
    assert run["generation"] == 30 and len(run["seeds"]) == 20 and run["seeds"] == list(range(20))
    assert (f"{run['agent_mean']:.1f}", f"{run['random_mean']:.2f}") == ("-17.5", "-20.25"), run


def _shipped(path: str, mean: str, ci: list, random: str, hours: str, params: int, read_off: int | None = None):
    """A shipped Pong agent's row: its record's held-out evaluation and hours, its parameters;
    ``read_off``: how many numbers the objects policy's fixed code reads off the frames."""
    def holds():
        import numpy as np
        from pong.policy import OBJECT_NAMES
        assert read_off is None or len(OBJECT_NAMES) == read_off
        agent = load(path)
        e = agent["eval"]
        assert e["episodes"] == 20 and f"+{e['agent_mean']:.1f}" == mean, e
        assert [f"{v:.1f}" for v in e["agent_ci95"]] == ci and f"{e['random_mean']}" == random, e
        assert f"{agent['wall_seconds'] / 3600:.{len(hours.split('.')[1])}f}" == hours
        assert agent["machine"].startswith("2 cores") and agent.get("started_from", []) == []
        held_out = range(e["seed"], e["seed"] + e["episodes"])
        assert not set(held_out) & set(_validation(agent["selected_on"]))      # held out from the choice too
        with np.load(ROOT / path.replace(".json", ".npz")) as z:
            assert z["center"].size == params
    return holds


def _validation(selected_on: str) -> range:
    """The game seeds the checkpoint was chosen on, from the record's words ("seeds 600000..600039",
    "validation games 800000..800019")."""
    import re
    first, last = re.search(r"(\d+)\.\.(\d+)", selected_on).groups()
    return range(int(first), int(last) + 1)


def _cheetah_run():
    """Notebook 06's HalfCheetah, as its executed solution trained it (classroom.mujoco_runs)."""
    config, rows = load("solutions/cheetah-run/config.json"), lines("solutions/cheetah-run/metrics.jsonl")
    assert (config["task"], config["workers"], config["confirm_episodes"]) == ("halfcheetah", 2, 20), config
    assert rows[-1]["generation"] == len(rows) - 1 == 73 and "confirmed" in rows[-1]
    assert f"{rows[-1]['confirmed']:,.1f}" == "3,458.6" and f"{rows[-1]['seconds'] / 60:.1f}" == "6.4", rows[-1]
    import es
    assert es.config_for("halfcheetah").reward_goal == 3430.0


def _locomotion(task: str, passed: int, median: str, most: str, held_out: tuple[str, str], restarted: int,
                record: str = LOCOMOTION):
    """A row of benchmarks/mujoco.py's record (es.config_for's defaults, 2 worker processes, seeds
    0..4): how many passed on 20 held-out episodes within 30 minutes, the median and most minutes
    of training, the lowest and highest held-out mean, and how many seeds needed a restart."""
    def holds():
        import es
        config = es.config_for(task, seed=0)                  # the benchmark trains the task's defaults
        assert config.confirm_goal and config.eval_episodes == 20 and config.restart_steps is not None
        seeds = [r for r in lines_of(record) if r["task"] == task and not r.get("summary")]
        assert [r["seed"] for r in seeds] == list(range(5)) and {r["workers"] for r in seeds} == {2}
        stall = None if config.stall_steps is None else [config.stall_steps, config.stall_gain]
        assert all(r["threshold"] == config.reward_goal and r["restart_steps"] == config.restart_steps
                   and r.get("stall") == stall for r in seeds)
        done = [r for r in seeds if r["reached"]]
        assert len(done) == passed and all(r["train_seconds"] <= 30 * 60 for r in done)
        assert all(r["eval_seeds"] == [10_000, 10_019] and r["eval_mean"] >= config.reward_goal for r in done)
        minutes = [r["train_seconds"] / 60 for r in seeds]
        assert (f"{statistics.median(minutes):.1f}", f"{max(minutes):.1f}") == (median, most), minutes
        means = [r["eval_mean"] for r in done]
        assert (f"{min(means):,.1f}", f"{max(means):,.1f}") == held_out, means
        assert sum(r["restarts"] > 0 for r in seeds) == restarted
    return holds


def lines_of(path: str) -> list:
    """The JSON lines of a benchmark's record (the table printed after them left out)."""
    import json
    return [json.loads(line) for line in (ROOT / path).read_text().splitlines() if line.startswith("{")]


CLAIMS: list[Claim] = [
    Claim("the center's return reaches 500 within 9 generations", _cartpole,
          "es.train(es.config_for('cartpole')): its metrics, the curve's data"),
    Claim("on its defaults, seed 0", _cartpole, "es.config_for('cartpole').seed"),
    Claim("M1 [10 pts] CartPole in one thread", milestone("M1", 10), SOURCE),
    Claim("M2 [+5 pts] in parallel", milestone("M2", 5), SOURCE),
    Claim("M3 [+5 pts] through Redis", milestone("M3", 5), SOURCE),
    Claim("M4 [+10 pts] your own Pong agent", milestone("M4", 10), SOURCE),
    Claim("| 4 state variables, linear (10 parameters) | 9 generations, 375,055 steps | 500.0 over 20 held-out "
          "episodes (solved: at least 475) |", _cartpole, "es.train(es.config_for('cartpole')): its summary"),
    Claim("| 30 updates | -17.5 a game, a random player -20.25, over 20 games |", _course_agent,
          "solutions/pong-run/beats_random.json"),
    Claim("8 numbers that fixed code reads off the frames (771 parameters) | 2.4 hours on 2 cores | +9.6 a game "
          "(95% CI [7.2, 12.0]), a random player -20.8, over 20 held-out games |",
          _shipped("pong/agent.json", "+9.6", ["7.2", "12.0"], "-20.8", "2.4", 771, read_off=8),
          "pong/agent.json (eval, wall_seconds, machine, selected_on) and pong/agent.npz's center"),
    Claim("(4,121 parameters) | 2.57 hours on 2 cores | +6.4 a game (95% CI [3.7, 9.1]), a random player -20.15, "
          "over 20 held-out games |",
          _shipped("pong/agent-pixels.json", "+6.4", ["3.7", "9.1"], "-20.15", "2.57", 4121),
          "pong/agent-pixels.json (eval, wall_seconds, machine, started_from, selected_on) and "
          "pong/agent-pixels.npz's center"),
    Claim("| 73 updates, 6.4 minutes, 2 worker processes | 3,458.6 over 20 held-out episodes (the threshold: 3,430) |",
          _cheetah_run, "solutions/cheetah-run (config.json, metrics.jsonl) and es.config_for('halfcheetah')"),
    Claim("| median 4.2 minutes on 2 cores, some beside another run (at most 16.7); 1 of 5 seeds started again once | 5 of 5 seeds past 3,430 "
          "on 20 held-out episodes within 30 minutes (3,432.1 to 3,633.0) |",
          _locomotion("halfcheetah", 5, "4.2", "16.7", ("3,432.1", "3,633.0"), 1),
          f"{LOCOMOTION} and es.config_for('halfcheetah')"),
    Claim("| median 12.0 minutes on 2 cores, some beside another run (at most 20.5); 3 of 5 seeds started again once | 5 of 5 seeds past 3,120 "
          "on 20 held-out episodes within 30 minutes (3,139.4 to 3,200.2) |",
          _locomotion("hopper", 5, "12.0", "20.5", ("3,139.4", "3,200.2"), 3), f"{LOCOMOTION} and es.config_for('hopper')"),
    Claim("| raw observations, linear | median 3.8 minutes on 2 cores (at most 7.6); 1 of 5 seeds started again once | "
          "5 of 5 seeds past 325 on 20 held-out episodes within 30 minutes (325.6 to 331.1) |",
          _locomotion("swimmer", 5, "3.8", "7.6", ("325.6", "331.1"), 1, SWIMMER),
          f"{SWIMMER} and es.config_for('swimmer')"),
]
