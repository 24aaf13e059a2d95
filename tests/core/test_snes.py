"""SNES, the second strategy: notebook 05's step, trained end to end, its state saved whole
(resume bit-identical), evaluated anywhere with the same bits; and the strategy interface
that checkpoints, resume and rollback go through (old OpenES checkpoints still resume)."""
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import es
from es import noise
from es.checkpoint import load_checkpoint, load_extra
from es.errors import ESError
from es.optimizers import SGD, Adam
from es.strategy import SNES, STRATEGIES, GenerationTask, OpenES
from es.training import make_problem_for, make_strategy

DATA = Path(__file__).parent / "data"


def _config(**kw):
    # A goal that cannot be reached, so every run trains exactly `generations` generations.
    base = dict(seed=3, population=32, generations=6, reward_goal=1e9, eval_episodes=2, strategy="snes")
    base.update(kw)
    return es.config_for("cartpole", **base)


def test_one_snes_step_is_notebook_05s_snes_step():
    references = pytest.importorskip("classroom.references")
    dim, population, lr, lr_sigma = 7, 8, 0.7, 0.3
    center = np.linspace(-1, 1, dim).astype(np.float32)
    strategy = SNES(center, SGD(dim, lr, momentum=0.0), population=population, sigma=0.5, seed=4,
                    sigma_learning_rate=lr_sigma)
    strategy.sigma = np.linspace(0.2, 0.9, dim).astype(np.float32)    # a sigma per parameter, all different
    task = strategy.ask()
    s = noise.antithetic_noise(task.seed, task.generation, np.arange(population), dim)
    assert np.array_equal(task.member_params(np.arange(population)), center + task.sigma * s)
    returns = -np.sum((task.member_params(np.arange(population)) - 0.3) ** 2, axis=1)
    w = strategy.shaping(returns) / population       # the utilities: the shaped returns over the population
    want = references.snes_step(center, task.sigma, s, w, lr, lr_sigma)
    strategy.tell(returns)
    assert np.allclose(strategy.center, want["mu"], rtol=1e-5, atol=1e-6)
    assert np.allclose(strategy.sigma, want["sigma"], rtol=1e-5, atol=1e-7)
    assert strategy.generation == 1 and strategy.sigma.dtype == np.float32


def test_the_options_table_lists_the_strategies_and_the_cli_help_shows_them(capsys):
    from es.cli import main
    from es.options import OPTIONS
    assert OPTIONS["strategy"].choices == tuple(STRATEGIES) and {"openes", "snes"} <= set(STRATEGIES)
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--strategy {openes,snes}" in out and "--sigma-learning-rate" in out
    with pytest.raises(ESError, match="--strategy must be one of openes, snes"):
        es.config_for("cartpole", strategy="cma")


def test_snes_solves_cartpole():
    result = es.train(es.config_for("cartpole", seed=0, strategy="snes"))
    s = result.summary
    assert s["solved"] and s["stopped"] == "goal" and s["generations"] == 16 and s["strategy"] == "snes", s
    assert all(0 < m["sigma_min"] <= m["sigma_max"] for m in result.metrics if m["grad_norm"] is not None)


def test_a_resumed_snes_run_is_bit_identical_sigma_included(tmp_path):
    full = es.train(_config(), run_dir=tmp_path / "full", final_eval=False)
    es.train(_config(generations=3), run_dir=tmp_path / "part", final_eval=False)
    resumed = es.train(_config(), run_dir=tmp_path / "part", resume=True, final_eval=False)
    assert np.array_equal(full.center, resumed.center)
    sigma = [load_extra(tmp_path / d / "checkpoint.npz")["strategy_sigma"] for d in ("full", "part")]
    assert np.array_equal(*sigma) and not np.all(sigma[0] == sigma[0][0]), "sigma must adapt per parameter"
    assert load_checkpoint(tmp_path / "part")[1]["strategy"] == "snes"
    assert [m["center_return"] for m in resumed.metrics] == [m["center_return"] for m in full.metrics]


def test_a_checkpoint_without_its_sigma_or_of_another_strategy_is_refused(tmp_path):
    es.train(_config(generations=2), run_dir=tmp_path / "run", final_eval=False)
    path = tmp_path / "run" / "checkpoint.npz"
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    np.savez(path, **{k: v for k, v in arrays.items() if k != "x_strategy_sigma"})
    with pytest.raises(ESError, match="lacks its sigma per parameter"):
        es.train(_config(), run_dir=tmp_path / "run", resume=True, final_eval=False)
    np.savez(path, **{**arrays, "x_strategy_sigma": np.full(arrays["center"].size, np.nan, np.float32)})
    with pytest.raises(ESError, match="finite positive"):
        es.train(_config(), run_dir=tmp_path / "run", resume=True, final_eval=False)
    np.savez(path, **arrays)
    with pytest.raises(ESError, match="strategy 'snes', this run's is 'openes'"):
        es.train(_config(strategy="openes"), run_dir=tmp_path / "run", resume=True, final_eval=False)


def test_an_openes_checkpoint_written_before_strategies_owned_their_state_resumes_bit_identically(tmp_path):
    """tests/core/data: 3 of 6 generations (cartpole, Adam) checkpointed by the code before the
    strategy interface; the digest is that code's center after all 6."""
    run = tmp_path / "old"
    shutil.copytree(DATA / "openes-run-before-strategies", run)
    config = es.config_for("cartpole", seed=3, population=32, reward_goal=1e9, eval_episodes=2, optimizer="adam",
                           learning_rate=0.05, generations=6)
    assert "strategy" not in json.loads((run / "config.json").read_text())
    resumed = es.train(config, run_dir=run, resume=True, final_eval=False)
    want = "f21c628af805b2239ab632c06104eb6f3b88980f87228a99a66f54542a8353b8"
    assert hashlib.sha256(resumed.center.tobytes()).hexdigest() == want
    assert np.array_equal(resumed.center, es.train(config, final_eval=False).center)


def test_the_state_goes_out_and_back_through_one_interface():
    problem = make_problem_for(_config())
    for name in STRATEGIES:
        a = make_strategy(_config(strategy=name, optimizer="adam"), problem.initial_params(0))
        returns = np.arange(32, dtype=np.float64)
        a.tell(returns)
        b = make_strategy(_config(strategy=name, optimizer="adam"), problem.initial_params(1))
        b.load_state_dict(a.state_dict())
        a.tell(returns[::-1])
        b.tell(returns[::-1])
        assert a.state_dict().keys() == b.state_dict().keys()
        assert all(np.array_equal(v, b.state_dict()[k]) for k, v in a.state_dict().items()), name
    state = a.state_dict()
    for bad in (np.zeros(3, np.float32), state["center"].astype(np.float64)):
        with pytest.raises(ValueError, match="center must be"):
            b.load_state_dict({**state, "center": bad})
    with pytest.raises(ValueError, match="generation"):
        b.load_state_dict({**state, "generation": np.array(-1)})


@pytest.mark.parametrize("sigma, match", [
    (np.ones(4, np.float32), "center's shape"),
    (np.ones(5, np.float64), "float32"),
    (np.array([1, 1, np.nan, 1, 1], np.float32), "finite and positive"),
    (np.array([1, 1, 0, 1, 1], np.float32), "finite and positive"),
    (np.array([1, np.inf, 1, 1, 1], np.float32), "finite and positive"),
])
def test_a_task_refuses_a_sigma_vector_that_does_not_fit(sigma, match):
    with pytest.raises(ValueError, match=match):
        GenerationTask(seed=0, generation=0, sigma=sigma, antithetic=True, population=4,
                       center=np.zeros(5, np.float32))


def test_snes_on_joblib_workers_is_bit_identical_to_one_process():
    from es.parallel import ParallelEvaluator
    config = _config(generations=3, hidden=[4])
    reference = es.train(config, final_eval=False)
    problem = make_problem_for(config)
    ev = ParallelEvaluator(problem, workers=2, adaptive=False)
    try:
        got = es.train(config, problem, evaluator=ev, final_eval=False)
    finally:
        ev.close()
    assert np.array_equal(got.center, reference.center)
    assert [m["sigma_max"] for m in got.metrics] == [m["sigma_max"] for m in reference.metrics]


def test_openes_and_snes_share_one_interface():
    center = np.zeros(3, np.float32)
    for cls in (OpenES, SNES):
        s = cls(center, Adam(3, 0.1), population=4, sigma=0.1, seed=0)
        with pytest.raises(ValueError, match="one return per member"):
            s.tell([1.0, 2.0])
    with pytest.raises(ValueError, match="sigma_learning_rate"):
        SNES(center, Adam(3, 0.1), population=4, sigma=0.1, seed=0, sigma_learning_rate=0.0)


def test_the_python_api_optimises_a_function_with_snes():
    result = es.optimize(lambda p, seed: -float(np.sum((p - 3.0) ** 2)), np.zeros(4), population=32, sigma=0.5,
                         learning_rate=1.0, optimizer="sgd", momentum=0.0, generations=150, strategy="snes")
    assert np.allclose(result.center, 3.0, atol=0.05), result.center
    assert result.summary["strategy"] == "snes"
