"""SNES over the network: its sigma per parameter travels in the task record as raw float32
bytes (never a pickle), a run is bit-identical to one process on Redis workers and on a Dask
cluster, and a record whose sigma vector does not fit is refused with a clear reason."""
import subprocess
import sys

import numpy as np
import pytest

import es
from es.distributed import protocol as P
from es.distributed.master import RedisEvaluator
from es.training import make_problem_for
from child_env import subprocess_env
from clean_runs import clean_center


def snes(**kw):
    return es.config_for("cartpole", **{"seed": 6, "generations": 3, "reward_goal": 1e9, "population": 32,
                                        "strategy": "snes", **kw})


def _record(sigma=None):
    config = snes()
    strategy = es.training.make_strategy(config, make_problem_for(config).initial_params(0))
    if sigma is not None:
        strategy.sigma = sigma
    rec = P.encode_task(strategy.ask(), {"kind": "env", "env_id": "CartPole-v1", "hidden": []}, [1, 2], [3],
                        run="ab" * 8, nonce="cd" * 8, max_length=500, lease_seconds=1.0)
    return {k.encode(): v for k, v in rec.items()}, strategy


def test_the_sigma_vector_travels_as_raw_bytes_and_comes_back_bit_for_bit():
    sigma = np.linspace(0.01, 2.0, 10).astype(np.float32)
    rec, strategy = _record(sigma)
    assert rec[b"sigma"] == "" and rec[b"sigma_vector"] == sigma.astype("<f4").tobytes()
    task = P.decode_task(rec)[0]
    assert task.sigma.dtype == np.float32 and np.array_equal(task.sigma, sigma)
    members = np.arange(32)
    assert np.array_equal(task.member_params(members), strategy.ask().member_params(members))
    changed = {**rec, b"sigma_vector": (sigma * 2).tobytes()}
    assert P.task_digest(changed) != P.task_digest(rec), "results of another sigma must not count"


@pytest.mark.parametrize("field, value, match", [
    (b"sigma_vector", b"\0" * 36, "sigma vector has 36 bytes, the center's 10 parameters need 40"),
    (b"sigma_vector", np.full(10, np.nan, "<f4").tobytes(), "finite"),
    (b"sigma_vector", np.r_[np.ones(9), np.inf].astype("<f4").tobytes(), "finite"),
    (b"sigma_vector", np.zeros(10, "<f4").tobytes(), r"in \[1e-12, 1e6\]"),
    (b"sigma_vector", "text", "raw bytes"),
    (b"sigma", "0.1", "both one sigma and a sigma vector"),
])
def test_a_task_record_with_a_sigma_vector_that_does_not_fit_is_refused(field, value, match):
    rec, _ = _record()
    with pytest.raises(P.BadPayload, match=match):
        P.decode_task({**rec, field: value})


def test_snes_on_redis_worker_processes_is_bit_identical_to_one_process(server):
    config = snes()
    procs = [subprocess.Popen([sys.executable, "-m", "es", "worker"], env={**subprocess_env(), "ES_REDIS_URL":
                                                                           server.worker_url},
                              stderr=subprocess.DEVNULL) for _ in range(2)]
    problem = make_problem_for(config)
    ev = RedisEvaluator(problem, server.url, chunks=5, lease_seconds=10.0, log=lambda m: None)
    try:
        got = es.train(config, problem, evaluator=ev, final_eval=False)
    finally:
        ev.close()
        for p in procs:
            p.kill()
            p.wait()
    assert np.array_equal(got.center, clean_center(config))
    assert sum(m["workers"] for m in got.metrics) >= 1, [(m["workers"], m["master_chunks"]) for m in got.metrics]


@pytest.mark.slow
def test_snes_on_a_dask_cluster_is_bit_identical_to_one_process():
    pytest.importorskip("dask.distributed")
    from es.distributed.dask_evaluator import DaskEvaluator
    config = snes()
    problem = make_problem_for(config)
    ev = DaskEvaluator(problem, "local", workers=2, chunks=5, log=lambda m: None)
    try:
        got = es.train(config, problem, evaluator=ev, final_eval=False)
    finally:
        ev.close()
    assert np.array_equal(got.center, clean_center(config))
