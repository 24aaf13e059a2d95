"""--dask: the same evaluation on a dask.distributed cluster, bit-identical to one process."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import es
from es.checkpoint import load_checkpoint
from es.distributed import protocol as P
from es.envs import FunctionProblem
from es.errors import ESError
from es.parallel import guided_bounds
from es.training import make_problem_for

distributed = pytest.importorskip("dask.distributed")
from es.distributed.dask_evaluator import DaskEvaluator, evaluate_chunk  # noqa: E402
from child_env import subprocess_env

ROOT = Path(__file__).resolve().parents[2]
ENV = subprocess_env()


def cartpole(**kw):
    return es.config_for("cartpole", **{"seed": 5, "generations": 3, "reward_goal": 1e9, "population": 64, **kw})


def test_a_local_cluster_is_bit_identical_to_one_process():
    cfg = cartpole()
    reference = es.train(cfg, final_eval=False)
    problem = make_problem_for(cfg)
    ev = DaskEvaluator(problem, "local", workers=2, chunks=5, log=lambda m: None)   # uneven chunks
    try:
        got = es.train(cfg, problem, evaluator=ev, final_eval=False)
    finally:
        ev.close()
    assert np.array_equal(got.center, reference.center)
    assert [m["center_return"] for m in got.metrics] == [m["center_return"] for m in reference.metrics]


@pytest.mark.slow
def test_pong_on_a_local_cluster_matches_one_process():
    cfg = es.config_for("pong", seed=1, generations=1, population=8, max_steps=40, reward_goal=1e9)
    reference = es.train(cfg, make_problem_for(cfg, one_thread=True), final_eval=False)
    problem = make_problem_for(cfg, one_thread=True)
    ev = DaskEvaluator(problem, "local", workers=2, log=lambda m: None)
    try:
        got = es.train(cfg, problem, evaluator=ev, final_eval=False)
    finally:
        ev.close()
    assert np.array_equal(got.center, reference.center)


def test_the_cli_runs_on_a_scheduler_address(tmp_path):
    """``--dask tcp://...``: a cluster someone else started (here a LocalCluster of one process)."""
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        out = subprocess.run([sys.executable, "-m", "es", "train", "cartpole", "--seed", "5", "--generations", "3",
                              "--reward-goal", "1e9", "--population", "64", "--dask", cluster.scheduler_address,
                              "--out", str(tmp_path / "run"), "--no-progress", "--eval-episodes", "1"],
                             env=ENV, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert f"dask: evaluating on the Dask scheduler at {cluster.scheduler_address}" in out.stderr
    assert np.array_equal(load_checkpoint(tmp_path / "run")[0], es.train(cartpole(), final_eval=False).center)


def test_setup_mistakes_are_one_clear_line(tmp_path):
    def run(*argv):
        return subprocess.run([sys.executable, "-m", "es", "train", "cartpole", "--out", str(tmp_path / "x"), *argv],
                              env=ENV, capture_output=True, text=True, timeout=120)
    bad = run("--dask", "bogus:1")
    assert bad.returncode == 2 and "--dask takes 'local' or a scheduler address" in bad.stderr, bad.stderr
    both = run("--dask", "local", "--redis")
    assert both.returncode == 2 and "pick one" in both.stderr, both.stderr
    with pytest.raises(ESError, match="needs an environment problem"):
        DaskEvaluator(FunctionProblem(lambda x, s: 0.0, 3), "local")


def test_a_worker_checks_the_record_it_is_given():
    """The record a Dask worker receives goes through the same allow-list as through Redis."""
    cfg = cartpole()
    problem = make_problem_for(cfg)
    task = es.OpenES(problem.initial_params(0), es.SGD(problem.num_params, 0.1), population=4, sigma=0.1,
                     seed=0).ask()
    record = P.encode_task(task, {"kind": "env", "env_id": "os:system", "hidden": []}, [1], [1], run="ab" * 8,
                           nonce="cd" * 8, max_length=500, lease_seconds=60.0)
    with pytest.raises(P.BadPayload, match="never allowed"):
        evaluate_chunk(record, 0, 4, False)
    record = P.encode_task(task, problem.spec(), [1], [1], run="ab" * 8, nonce="cd" * 8, max_length=500,
                           lease_seconds=60.0)
    res = P.decode_result(evaluate_chunk(record, 0, 4, True), 500, 500)
    assert res["count"] == 4 and res["center"] is not None and res["nonce"] == "cd" * 8


def test_workers_are_warm_before_generation_0_and_the_master_plays_the_center():
    """Issue 33: every Dask worker builds the problem (on one BLAS thread) before the first
    generation is timed; guided chunks; the center is played here. Bit-identical to one process."""
    cfg = es.config_for("Acrobot-v1", seed=3, generations=2, population=32, max_steps=25, reward_goal=1e9,
                        hidden=[4])
    reference = es.train(cfg, final_eval=False)
    problem = make_problem_for(cfg)
    ev = DaskEvaluator(problem, "local", workers=2, log=lambda m: None)

    def built_problems():     # defined here, so that it travels by value: a worker that imported this
        from es import parallel          # module would import a conftest, and the first on its path
        from threadpoolctl import threadpool_info      # may be another folder's (tests/web/)
        return sorted(k for k in parallel._PROBLEMS if k != "blas"), \
            max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")
    try:
        ev.warm_up(cfg.population, cfg.episodes_per_member, cfg.center_episodes)
        key = json.dumps(problem.spec(), sort_keys=True)
        assert all(built == [key] and threads == 1 for built, threads in ev.client.run(built_problems).values())
        got = es.train(cfg, problem, evaluator=ev, final_eval=False)
    finally:
        ev.close()
    assert np.array_equal(got.center, reference.center)
    assert [m["center_return"] for m in got.metrics] == [m["center_return"] for m in reference.metrics]
    assert got.metrics[0]["chunks"] == len(guided_bounds(32, 2))
