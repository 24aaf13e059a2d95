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

LOCOMOTION = "docs/runs/mujoco-2core/benchmark-halfcheetah-hopper.txt"


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


def _locomotion(task: str, reached: int, minutes: str, threshold: float, held_out: list[str]):
    def holds():
        import es
        rows = [r for r in lines_of(LOCOMOTION) if r["task"] == task]
        summary = next(r for r in rows if r.get("summary"))
        seeds = [r for r in rows if not r.get("summary")]
        config = es.config_for(task, seed=0)                  # the benchmark trains the task's defaults
        assert config.hidden == [] and config.extra.get("policy") == "linear" and config.reward_goal == threshold
        assert (summary["seeds"], summary["reached"], summary["workers"], summary["minutes_budget"]) == \
            (3, reached, 2, 30.0) and len(seeds) == 3 and sum(r["reached"] for r in seeds) == reached
        assert all(r["wall_seconds"] <= 30 * 60 for r in seeds if r["reached"])
        median = statistics.median(r["train_seconds"] for r in seeds if r["reached"])
        assert median == summary["median_train_seconds"] and f"{median / 60:.1f}" == minutes, median
        # the held-out means (10 episodes each) of the seeds that reached the threshold in training
        assert [f"{r['eval_mean']:,.1f}" for r in seeds if r["reached"]] == held_out
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
    Claim("| 73 updates, 6.4 minutes on 2 cores | 3,458.6 over 20 held-out episodes (the threshold: 3,430) |",
          _cheetah_run, "solutions/cheetah-run (config.json, metrics.jsonl) and es.config_for('halfcheetah')"),
    Claim("| median 4.7 minutes on 2 cores to reach 3,430 in training | 3 of 3 seeds reached it within 30 minutes; "
          "on 10 held-out episodes 2 of 3 did (3,448.0, 3,420.3, 3,470.5) |",
          _locomotion("halfcheetah", 3, "4.7", 3430.0, ["3,448.0", "3,420.3", "3,470.5"]),
          f"{LOCOMOTION} and es.config_for('halfcheetah')"),
    Claim("| median 2.9 minutes on 2 cores to reach 3,120 in training, over the 2 seeds that did | 2 of 3 seeds "
          "reached it within 30 minutes; on 10 held-out episodes they scored 3,114.4 and 3,112.9, just below it |",
          _locomotion("hopper", 2, "2.9", 3120.0, ["3,114.4", "3,112.9"]), f"{LOCOMOTION} and es.config_for('hopper')"),
]
