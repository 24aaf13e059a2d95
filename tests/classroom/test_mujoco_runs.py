"""Notebook 06's training loop (classroom.mujoco_runs) and its agent check: a run is the same
for any number of workers, and the check passes the committed run only as trained."""
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mujoco")

from classroom import check, references  # noqa: E402
from classroom.mujoco_runs import RunConfig, StudentCode, load_metrics, play, train  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "solutions" / "cheetah-run"


def course_code():
    """The answer key's functions, as a student would pass theirs."""
    merge = references.SOLUTIONS["merge_stats"][0]
    return StudentCode(merge, references.SOLUTIONS["mean_std"][0], references.SOLUTIONS["linear_policy"][0])


@pytest.mark.slow         # starts 2 worker processes: about 6 s
def test_a_run_is_the_same_for_one_and_two_workers_and_resumes_where_it_stopped(tmp_path):
    config = RunConfig(task="hopper", population=6, max_generations=3, workers=1)
    runs = {}
    for workers in (1, 2):
        runs[workers] = tmp_path / f"w{workers}"
        train(course_code(), runs[workers], replace(config, workers=workers), progress=None)
    assert load_metrics(runs[1])[-1]["generation"] == 2
    for key in ("center", "total", "squares", "count", "obs_std"):
        assert np.array_equal(np.load(runs[1] / "checkpoint.npz")[key], np.load(runs[2] / "checkpoint.npz")[key]), key
    strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]     # noqa: E731
    assert strip(load_metrics(runs[1])) == strip(load_metrics(runs[2]))
    # two generations, then a third on re-running: the run that never stopped
    resumed = tmp_path / "resumed"
    train(course_code(), resumed, replace(config, max_generations=2), progress=None)
    train(course_code(), resumed, config, progress=None)
    assert np.array_equal(np.load(resumed / "checkpoint.npz")["center"], np.load(runs[1] / "checkpoint.npz")["center"])
    with pytest.raises(ValueError, match="other sigma"):
        train(course_code(), resumed, replace(config, sigma=0.1), progress=None)


def test_the_loops_ranks_are_es_shapings_centered_ranks():
    """One truth for ranks: the loop's own (the release does not ship es.shaping, which holds
    notebook 00's answer) are es.shaping's centered ranks in float64, bit for bit, tied returns
    sharing their mean rank; rounded, es's float32 weights."""
    from es.shaping import centered_ranks
    from classroom.mujoco_runs import _ranked
    rng = np.random.default_rng(5)
    assert _ranked(np.array([1.0, 1.0, 2.0, 0.0])).tolist() == [0.0, 0.0, 0.5, -0.5]
    for x in (rng.normal(size=64), rng.integers(0, 6, 64).astype(np.float64), np.full(8, 3.0)):
        got = _ranked(x)
        assert got.dtype == np.float64 and np.array_equal(got, centered_ranks(x, dtype=np.float64))
        assert np.array_equal(got.astype(np.float32), centered_ranks(x))


def test_the_loops_update_is_es_math_bit_for_bit():
    """The loop's own Adam and ranks (written out: the release ships neither es.optimizers nor
    es.shaping) are es's, bit for bit: a few updates in a row with tied returns, against
    es.shaping.centered_ranks in float64 and es.optimizers.adam_step."""
    from es.optimizers import adam_step
    from es.shaping import centered_ranks
    from classroom.mujoco_runs import _update, mirrored_noise
    rng = np.random.default_rng(6)
    center, (m, v, t), state = np.zeros(9, np.float32), (np.zeros(9), np.zeros(9), 0), None
    for generation in range(6):
        noise = mirrored_noise(1, generation, 16, 9)
        fitness = rng.integers(0, 4, 16).astype(np.float64)           # 4 values for 16 members: ties
        new, m, v, t = _update(center, noise, fitness, m, v, t, 0.03, 0.01)
        grad = noise.T.astype(np.float64) @ centered_ranks(fitness, dtype=np.float64) / (16 * 0.03)
        want, state = adam_step(center, grad, state, 0.01)
        assert np.array_equal(new, want.astype(np.float32)), generation
        assert np.array_equal(m, state["m"]) and np.array_equal(v, state["v"]) and t == state["t"]
        center = new


def test_the_update_is_notebook_04s_es_step_without_weight_decay():
    """What notebook 06 says of its loop: its update is notebook 04's es_step (the solution's)
    with weight_decay 0, centered ranks with tied returns sharing their mean rank, then Adam;
    a few updates in a row, with ties."""
    import jupytext
    from classroom.build import BEGIN, END
    from classroom.mujoco_runs import _update, mirrored_noise
    nb = jupytext.reads((ROOT / "source" / "04_pong.py").read_text(), fmt="py:percent")
    namespace = {"np": np}
    exec(next(c.source for c in nb.cells if c.cell_type == "code" and "def es_step(" in c.source)
         .replace(BEGIN, "").replace(END, ""), namespace)
    rng = np.random.default_rng(4)
    ours, theirs, state, (m, v, t) = np.zeros(9, np.float32), np.zeros(9), None, (np.zeros(9), np.zeros(9), 0)
    for generation in range(6):
        noise = mirrored_noise(0, generation, 16, 9)
        fitness = rng.integers(0, 5, 16).astype(np.float64)           # 5 values for 16 members: ties
        ours, m, v, t = _update(ours, noise, fitness, m, v, t, 0.03, 0.01)
        theirs, state = namespace["es_step"](theirs, noise.astype(np.float64), fitness, state, 0.03, 0.01, 0.0)
        assert ours.dtype == np.float32 and np.allclose(ours, theirs, rtol=0, atol=1e-6), generation
    assert t == state["t"] == 6


def test_the_policy_plays_the_course_layout():
    """The answer key's policy and the check's (es.policies.MLPPolicy) play the same episode."""
    rng = np.random.default_rng(3)
    params = (0.3 * rng.standard_normal((2, 11 * 3 + 3))).astype(np.float32)
    mean, std = rng.normal(size=11), rng.uniform(0.5, 2, 11)
    a = play("Hopper-v5", course_code().policy, params, [5, 6], mean, std, shift=1.0)
    b = play("Hopper-v5", check._course_policy, params, [5, 6], mean, std, shift=1.0)
    assert all(np.allclose(x, y) for x, y in zip(a, b)) and a[1].min() > 1


@pytest.mark.slow         # 60 episodes of 1,000 steps: about 9 s
@pytest.mark.skipif(not (RUN / "checkpoint.npz").exists(), reason="the executed solution's run is not committed")
def test_the_agent_check_passes_the_committed_run_and_names_what_is_wrong_with_others(tmp_path):
    check.locomotion_agent(str(RUN), seed=1)
    with pytest.raises(check.CheckFailed, match="lacks config.json"):
        check.locomotion_agent(str(tmp_path / "none"), seed=1)
    # a run that has not reached the threshold yet
    early = tmp_path / "early"
    shutil.copytree(RUN, early)
    saved = dict(np.load(early / "checkpoint.npz"))
    np.savez(early / "checkpoint.npz", **{**saved, "finished": False})
    with pytest.raises(check.CheckFailed, match="has not reached 3430 yet"):
        check.locomotion_agent(str(early), seed=1)
    # the center laid out another way (transposed weights) is not the course's agent
    d, a = saved["obs_mean"].size, saved["center"].size // (saved["obs_mean"].size + 1)
    w = saved["center"][:d * a].reshape(d, a).T.ravel()
    np.savez(early / "checkpoint.npz", **{**saved, "center": np.concatenate([w, saved["center"][d * a:]])})
    with pytest.raises(check.CheckFailed, match="differs from the course's"):
        check.locomotion_agent(str(early), seed=1)


RENDER = """
import sys
import numpy as np
from classroom.mujoco_runs import rollout_frames
frames = rollout_frames(sys.argv[1], lambda *a: __import__("classroom.check", fromlist=["x"])._course_policy(*a),
                        steps=6, every=2, width=64, height=48)
a = np.stack(frames)
print(a.shape, float(a.std()))
assert a.shape == (4, 48, 64, 3) and a.std() > 1, (a.shape, a.std())
"""


@pytest.mark.skipif(not (RUN / "checkpoint.npz").exists(), reason="the executed solution's run is not committed")
def test_the_agent_renders_offscreen_with_egl_or_osmesa():
    """What notebook 06's video needs: MuJoCo draws frames without a screen (CI installs Mesa's
    EGL and OSMesa as root and then requires this test to pass: ES_COURSE_REQUIRE_GL=1)."""
    import os
    import subprocess
    import sys
    errors = []
    for backend in ("egl", "osmesa"):
        out = subprocess.run([sys.executable, "-c", RENDER, str(RUN)], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "MUJOCO_GL": backend, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
        if out.returncode == 0:
            return
        errors.append(f"MUJOCO_GL={backend}: {out.stderr.strip().splitlines()[-1:]}")
    if os.environ.get("ES_COURSE_REQUIRE_GL") == "1":
        pytest.fail("no offscreen rendering: " + "; ".join(errors))
    pytest.skip("no offscreen rendering here (apt-get install libegl1 libgl1 libgl1-mesa-dri libosmesa6): " + "; ".join(errors))


def test_the_training_gate_runs_the_three_function_checks_and_not_the_agents(capsys):
    answers = {"merge_stats": references.SOLUTIONS["merge_stats"][0], "mean_std": references.SOLUTIONS["mean_std"][0],
               "linear_policy": references.SOLUTIONS["linear_policy"][0]}
    check.ready("06_locomotion", answers, seeds=1)
    assert "checks passed just now: merge_stats, mean_std, linear_policy" in capsys.readouterr().out
    with pytest.raises(check.CheckFailed, match="linear_policy is not defined"):
        check.ready("06_locomotion", {k: v for k, v in answers.items() if k != "linear_policy"}, seeds=1)
