"""MuJoCo locomotion as a plug-in: continuous actions on normalized observations, the
statistics merged from every member in member order, bit-identical for any evaluator."""
import json
import subprocess
import sys

import numpy as np
import pytest

import es
from es import seeding
from es.checkpoint import load_checkpoint
from es.distributed import protocol as P
from es.obs_norm import ObsStats, mean_std
from es.parallel import ParallelEvaluator
from es.play import load_agent
from es.strategy import GenerationTask
from es.training import make_problem_for
from child_env import subprocess_env

pytest.importorskip("mujoco")
from locomotion.problem import LocomotionProblem  # noqa: E402

ENV = subprocess_env()


def small(env="halfcheetah", **kw):
    """A few short generations: what the identity tests need, in seconds."""
    return es.config_for(env, **{"seed": 3, "generations": 3, "population": 8, "max_steps": 40,
                                 "reward_goal": 1e9, **kw})


def test_an_episode_is_the_same_alone_or_in_any_batch():
    p = LocomotionProblem("Hopper-v5", [8], max_steps=60, shift=1.0)
    params = np.random.default_rng(0).normal(0, 0.3, (3, p.num_params)).astype(np.float32)
    norm = np.stack([np.full(p.obs_dim, 0.1), np.full(p.obs_dim, 2.0)])
    rows, seeds = np.array([0, 1, 2, 1]), np.array([5, 6, 7, 8])
    together = p.run_episodes(params, rows, seeds, obs_norm=norm)
    for k in range(4):
        alone = p.run_episodes(params, rows[k:k + 1], seeds[k:k + 1], obs_norm=norm)
        for a, b in zip(alone, together):
            assert np.asarray(a[0]).tobytes() == np.asarray(b[k]).tobytes()
    assert np.array_equal(together[1], [len(x) for x in [range(int(n)) for n in together[1]]])
    # the counts of the statistics are the steps: every state the policy acted on
    assert np.all(together[2][:, 0] != 0) and np.all(together[3] >= 0)


def test_the_alive_bonus_is_dropped_in_training_and_added_back_in_the_score():
    p = LocomotionProblem("Hopper-v5", [], max_steps=80, shift=1.0)
    center = np.random.default_rng(1).normal(0, 0.2, p.num_params).astype(np.float32)
    fitness, steps = p.run_episodes(center[None, :], [0], [11])
    ret, steps2 = p.play(center, [11])
    assert steps[0] == steps2[0]
    assert p.score(fitness[0], steps[0]) == pytest.approx(ret[0], rel=1e-12)
    assert fitness[0] == pytest.approx(ret[0] - steps[0], rel=1e-12)


def test_the_statistics_are_frozen_within_a_generation_and_merged_after_it():
    """Generation 0 plays with (0, 1); generation 1 with the mean and std of generation 0's
    members' states, merged in member order."""
    cfg = small(generations=2)
    rows = es.train(cfg, final_eval=False).metrics
    after_0 = es.train(small(generations=1), final_eval=False).center
    p = make_problem_for(cfg)

    def generation(g, center, norm):
        task = GenerationTask(cfg.seed, g, cfg.sigma, True, cfg.population, center, obs_norm=norm)
        return es.evaluators.evaluate_members(p, task, range(cfg.population), seeding.episode_seeds(cfg.seed, g, 1))

    r0, l0, _, _, (sums, squares) = generation(0, p.initial_params(cfg.seed), np.stack(mean_std(ObsStats.empty(p.obs_dim))))
    assert rows[0]["pop_mean"] == r0.mean()
    stats = ObsStats(int(l0.sum()), sums.sum(axis=0), squares.sum(axis=0))
    r1 = generation(1, after_0, np.stack(mean_std(stats)))[0]
    assert rows[1]["pop_mean"] == pytest.approx(r1.mean(), rel=1e-12)
    assert rows[1]["pop_mean"] != generation(1, after_0, np.stack(mean_std(ObsStats.empty(p.obs_dim))))[0].mean()


def test_joblib_workers_are_bit_identical_to_one_process():
    cfg = small()
    reference = es.train(cfg, final_eval=False)
    problem = make_problem_for(cfg)
    ev = ParallelEvaluator(problem, workers=2, chunks_per_worker=3, adaptive=False)
    try:
        got = es.train(cfg, problem, evaluator=ev, final_eval=False)
    finally:
        ev.close()
    assert got.center.tobytes() == reference.center.tobytes()
    assert [m["center_return"] for m in got.metrics] == [m["center_return"] for m in reference.metrics]


@pytest.mark.slow
def test_redis_and_dask_workers_are_bit_identical_to_one_process(tmp_path):
    pytest.importorskip("dask.distributed")
    from es.distributed.dask_evaluator import DaskEvaluator
    from es.distributed.master import RedisEvaluator
    from es.distributed.server import EmbeddedRedis
    cfg = small(generations=2)
    reference = es.train(cfg, final_eval=False)
    with EmbeddedRedis() as server:
        procs = [subprocess.Popen([sys.executable, "-m", "es", "worker"], env={**ENV, "ES_REDIS_URL": server.worker_url},
                                  stderr=subprocess.DEVNULL) for _ in range(2)]
        try:
            problem = make_problem_for(cfg)
            ev = RedisEvaluator(problem, server.url, chunks=3, lease_seconds=10.0, spot_checks=2)
            try:
                redis_run = es.train(cfg, problem, evaluator=ev, final_eval=False)
            finally:
                ev.close()
        finally:
            for p in procs:
                p.kill()
                p.wait()
    problem = make_problem_for(cfg)
    ev = DaskEvaluator(problem, "local", workers=2, chunks=3, log=lambda m: None)
    try:
        dask_run = es.train(cfg, problem, evaluator=ev, final_eval=False)
    finally:
        ev.close()
    assert redis_run.center.tobytes() == reference.center.tobytes()
    assert dask_run.center.tobytes() == reference.center.tobytes()


def test_a_resumed_run_is_bit_identical_and_eval_plays_with_the_runs_statistics(tmp_path):
    cfg = small(generations=4)
    whole = es.train(cfg, run_dir=tmp_path / "whole", final_eval=False)
    es.train(small(generations=2), run_dir=tmp_path / "cut", final_eval=False)
    resumed = es.train(cfg, run_dir=tmp_path / "cut", resume=True, final_eval=False)
    assert resumed.center.tobytes() == whole.center.tobytes()
    meta = load_checkpoint(tmp_path / "whole")[1]
    assert meta["obs_stats"] == load_checkpoint(tmp_path / "cut")[1]["obs_stats"]
    problem, center, _ = load_agent(tmp_path / "whole")
    stats = ObsStats.from_array(meta["obs_stats"])
    steps = sum(m["gen_env_steps"] for m in whole.metrics)     # the members' states and the center's episodes'
    center_cap = 40 * cfg.center_episodes * len(whole.metrics)  # (at most 40 steps each)
    assert steps - center_cap <= stats.count < steps
    assert problem.obs_norm.tobytes() == np.stack(mean_std(stats)).tobytes()


def _result(obs, count=2, d=3):
    return P.encode_result(b"w" * 8, "0" * 16, "1" * 16, "2" * 16, 0, 0, np.zeros(count), np.ones(count), None, obs)


def test_a_results_statistics_travel_as_raw_bytes_and_a_hostile_one_is_refused():
    sums, squares = np.arange(6.0).reshape(2, 3), np.ones((2, 3))
    got = P.decode_result(_result((sums, squares)), 10, 10, obs_dim=3)
    assert got["obs"][0].tobytes() == sums.tobytes() and got["obs"][1].tobytes() == squares.tobytes()
    for bad, why in (((sums, -squares), "negative squares"), ((sums * np.nan, squares), "non-finite"),
                     ((sums, squares * 1e31), "over")):
        with pytest.raises(P.BadPayload, match=why):
            P.decode_result(_result(bad), 10, 10, obs_dim=3)
    with pytest.raises(P.BadPayload, match="expected"):    # statistics missing, or for another obs_dim
        P.decode_result(_result(None), 10, 10, obs_dim=3)
    with pytest.raises(P.BadPayload, match="expected"):
        P.decode_result(_result((sums, squares)), 10, 10, obs_dim=4)


def test_a_task_record_carries_the_frozen_statistics_and_refuses_a_zero_std():
    norm = np.stack([np.arange(3.0), np.full(3, 0.5)])
    task = GenerationTask(1, 2, 0.1, True, 8, np.zeros(5, np.float32), obs_norm=norm)
    record = P.encode_task(task, {"kind": "mujoco", "env_id": "Hopper-v5", "hidden": []}, [1], [2], run="a" * 16,
                           nonce="b" * 16, max_length=10, lease_seconds=1.0)
    assert P.decode_task(record)[0].obs_norm.tobytes() == norm.tobytes()
    changed = {**record, "obs_norm": np.stack([norm[0], norm[1] * 2]).tobytes()}
    assert P.task_digest(changed) != P.task_digest(record)     # results computed under other statistics are stale
    for raw in (np.stack([norm[0], np.zeros(3)]).tobytes(), b"\0" * 7):
        with pytest.raises(P.BadPayload, match="obs_norm"):
            P.decode_task({**record, "obs_norm": raw})


def test_a_worker_that_lies_only_about_the_states_it_saw_is_caught_by_a_trusted_evaluation():
    from es.distributed.verify import Verifier
    cfg = small()
    problem = make_problem_for(cfg)
    v = Verifier(problem, spot_checks=1, probation=1, log=lambda m: None)
    task = GenerationTask(cfg.seed, 0, cfg.sigma, True, cfg.population, problem.initial_params(0),
                          obs_norm=np.stack([np.zeros(problem.obs_dim), np.ones(problem.obs_dim)]))
    v.start(task, [7], None, [(0, 4), (4, 8)])
    own = v.evaluate(0, 4, False)
    honest = {**own, "worker": "w1"}
    assert v.lie(honest, 0, 4, own=own) is None
    sums, squares = own["obs"]
    forged = {**honest, "obs": (sums + 1e-9, squares)}
    assert "observation statistics" in v.lie(forged, 0, 4, own=own)
    v.close()


def test_a_center_over_the_line_stops_the_run_only_if_its_held_out_mean_is_over_it_too():
    # Every center crosses a goal of -1e9 on its 5 training episodes; none reaches 1e9 held out.
    kept_on = es.train(small(reward_goal=-1e9, solve_threshold=1e9))
    assert kept_on.summary["stopped"] == "generations" and not kept_on.summary["solved"]
    assert [("goal_check" in m) for m in kept_on.metrics] == [True] * 3
    # Over the line held out: it stops where it looked, and its final check is that same check
    # (the same 20 episodes, with this generation's statistics merged in).
    stopped = es.train(small(reward_goal=-1e9, solve_threshold=-1e9))
    assert stopped.summary["stopped"] == "goal" and stopped.summary["generations"] == 1
    assert stopped.summary["eval_mean"] == stopped.metrics[0]["goal_check"]
    assert stopped.summary["eval_episodes"] == 20
    # The check's episodes count as env steps: 20 more episodes of at most 40 steps.
    unchecked = es.train(small(reward_goal=-1e9, confirm_goal=False))
    assert unchecked.summary["stopped"] == "goal" and "goal_check" not in unchecked.metrics[0]
    extra = stopped.summary["env_steps"] - unchecked.summary["env_steps"]
    assert 20 <= extra <= 20 * 40


def test_a_restart_starts_again_from_zeros_and_fresh_statistics_and_a_resumed_run_goes_on_bit_identical(tmp_path):
    plain = es.train(small(generations=3), final_eval=False)
    never = es.train(small(generations=3, restart_steps=10**9), final_eval=False)
    assert never.center.tobytes() == plain.center.tobytes() and never.summary["restarts"] == 0
    # One env step an attempt: generations 1 and 2 each start again, from zeros and no statistics.
    seen = []
    whole = es.train(small(generations=3, restart_steps=1), run_dir=tmp_path / "whole", final_eval=False,
                     on_generation=lambda row: seen.append(row.get("restart")))
    assert seen == [None, 1, 2] and whole.summary["restarts"] == 2
    es.train(small(generations=1, restart_steps=1), run_dir=tmp_path / "cut", final_eval=False)
    resumed = es.train(small(generations=3, restart_steps=1), run_dir=tmp_path / "cut", resume=True, final_eval=False)
    assert resumed.center.tobytes() == whole.center.tobytes() and resumed.summary["restarts"] == 2
    meta = load_checkpoint(tmp_path / "whole")[1]
    assert (meta["restarts"], meta["attempt_from"]) == (2, whole.metrics[1]["env_steps"])
    # The last attempt saw one generation's states only, and started from zeros with its own noise:
    # one generation from zeros at generation 2, not generation 0 again.
    last = whole.metrics[2]["gen_env_steps"]
    assert last - 40 * 5 <= ObsStats.from_array(meta["obs_stats"]).count < last
    assert np.abs(whole.center).max() <= 1.0001 * 0.01 < np.abs(plain.center).max()   # one Adam step of 0.01
    assert whole.center.tobytes() != es.train(small(generations=1), final_eval=False).center.tobytes()


def test_an_attempt_whose_best_stops_rising_starts_again_and_a_resumed_run_counts_the_same_stall(tmp_path):
    plain = es.train(small(generations=5), final_eval=False)
    never = es.train(small(generations=5, stall_steps=10**9, stall_gain=1e9), final_eval=False)
    assert never.center.tobytes() == plain.center.tobytes() and never.summary["restarts"] == 0
    # A rise of 1e9 never comes: the attempt's first generation sets its mark, the next one plays
    # from it (its steps are the stall), and the one after starts again.
    seen = []
    whole = es.train(small(generations=5, stall_steps=1, stall_gain=1e9), run_dir=tmp_path / "whole",
                     final_eval=False, on_generation=lambda row: seen.append(row.get("restart_reason")))
    assert seen == [None, None, "stall", None, "stall"] and whole.summary["restarts"] == 2
    meta = load_checkpoint(tmp_path / "whole")[1]
    assert meta["best_mark"] == whole.metrics[4]["center_return"]
    assert meta["best_mark_at"] == whole.metrics[4]["env_steps"]
    # Cut just after a restart: the resumed run must not count the stall from the run's start.
    es.train(small(generations=3, stall_steps=1, stall_gain=1e9), run_dir=tmp_path / "cut", final_eval=False)
    resumed = es.train(small(generations=5, stall_steps=1, stall_gain=1e9), run_dir=tmp_path / "cut",
                       resume=True, final_eval=False)
    assert resumed.center.tobytes() == whole.center.tobytes() and resumed.summary["restarts"] == 2
    # With no gain asked for, any center at least as good as the mark moves it; one generation
    # without that (here: one env step) starts the attempt again.
    rising = es.train(small(generations=6, stall_steps=1), final_eval=False)
    expected, mark, rose = [], None, True
    for m in rising.metrics:
        expected.append(not rose)
        mark = None if not rose else mark
        rose = mark is None or m["center_return"] >= mark
        mark = m["center_return"] if rose else mark
    assert [("restart" in m) for m in rising.metrics] == expected and 0 < sum(expected) < 5
    from es.errors import ESError
    with pytest.raises(ESError, match="--stall-gain must be a non-negative number"):
        es.config_for("swimmer", stall_gain=-1.0).validate()


def test_without_normalization_the_policy_sees_raw_states_and_the_run_keeps_no_statistics(tmp_path):
    from es.errors import ESError
    from locomotion.plugin import validate_spec
    raw = {"policy": "linear", "normalize": "none"}
    es.train(small(env="swimmer", extra=raw), run_dir=tmp_path / "raw")
    meta = load_checkpoint(tmp_path / "raw")[1]
    assert "obs_stats" not in meta and meta["problem"]["normalize"] is False
    problem, center, _ = load_agent(tmp_path / "raw")
    assert (problem.obs_dim, problem.state_dim) == (0, 8) and center.any()
    # Raw states are states normalized by mean 0 and std 1 (a fresh normalizing problem's).
    seeds = [5, 6]
    assert np.array_equal(problem.play(center, seeds)[0], LocomotionProblem("Swimmer-v5", (), 40).play(center, seeds)[0])
    with pytest.raises(ESError, match="--normalize must be states or none"):
        es.train(small(env="swimmer", extra={"policy": "linear", "normalize": "off"}))
    with pytest.raises(ValueError, match="normalize must be true or false"):
        validate_spec({**problem.spec(), "normalize": 1})
