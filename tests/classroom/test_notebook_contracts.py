"""What the notebooks promise around their gaps: notebook 04's training cell refuses to start
until its checks pass, and notebook 03's last section trains through Redis with the student's
own gather, ending where one process does."""
import contextlib
import io
from pathlib import Path

import numpy as np
import pytest

from classroom import check
from classroom.build import BEGIN, parse

ROOT = Path(__file__).resolve().parents[2]


def answers_of(name: str, before: str) -> dict:
    """The namespace of a notebook's first code cell and its answer cells before ``before``,
    as a student's kernel holds it once those cells ran."""
    cells = [c["source"] for c in parse((ROOT / "source" / f"{name}.py").read_text().split(before)[0])
             if c["type"] == "code"]
    namespace = {"__name__": "__main__"}
    for cell in [cells[0]] + [c for c in cells[1:] if BEGIN in c]:
        exec(compile(cell, name, "exec"), namespace)
    return namespace


@pytest.fixture(scope="module")
def pong_answers():
    return answers_of("04_pong", "# ## 5. ")


def test_the_training_gate_passes_the_answers_and_refuses_a_failing_or_missing_function(pong_answers, monkeypatch):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        check.ready("04_pong", pong_answers)
    assert "checks passed just now: downsample, stack_frames, batched_policy, es_step" in out.getvalue()

    def tuple_state(center, noise, fitness, state, sigma, lr, weight_decay):
        new, state = pong_answers["es_step"](center, noise, fitness, state and dict(zip("mvt", state)), sigma, lr,
                                             weight_decay)
        return new, (state["m"], state["v"], state["t"])

    broken = {**pong_answers, "es_step": tuple_state}
    del broken["stack_frames"]
    with pytest.raises(check.CheckFailed) as refused:
        check.ready("04_pong", broken)
    message = str(refused.value)
    assert message.startswith("not starting: this notebook's checks must pass first")
    assert "check.stack_frames: stack_frames is not defined" in message
    assert "check.es_step: es_step: the state is a tuple" in message
    assert "downsample" not in message and "batched_policy" not in message

    def raises(*args):
        raise NotImplementedError("04_pong: your code here")
    with pytest.raises(check.CheckFailed, match="check.batched_policy: your code raised NotImplementedError"):
        check.ready("04_pong", {**pong_answers, "batched_policy": raises})


def test_the_pong_agent_check_is_not_part_of_the_gate():
    """It replays a run (minutes): the gate runs the quick checks only."""
    assert "pong_agent" in check.checks_for("04_pong") and "pong_agent" in check.SLOW


def test_a_state_the_checkpoint_cannot_hold_fails_es_step_with_its_reason(pong_answers):
    def object_state(center, noise, fitness, state, sigma, lr, weight_decay):
        new, state = pong_answers["es_step"](center, noise, fitness, state and {k: v for k, v in state.items()
                                                                                 if k != "note"}, sigma, lr,
                                             weight_decay)
        return new, {**state, "note": None}
    with pytest.raises(check.CheckFailed, match="holds 'note', which is not an array or a number"):
        check.es_step(object_state, seed=5)


def test_notebook_03s_run_through_redis_with_the_students_gather_ends_where_one_process_does():
    """Section 4's run, shortened: three workers (one dies holding a chunk in generation 1),
    the notebook's own encode_result, decode_result and gather; the same centers as without
    Redis, and the dead worker's chunk handed out again."""
    import json
    import redis
    from classroom.cartpole_workers import CartPoleWorkers, member_returns, pair_noise, task_fields
    from es.distributed.server import EmbeddedRedis
    ns = answers_of("03_redis", "# ## 4. ")
    seed, population, sigma = 3, 64, 0.2
    bounds = [(a, a + 16) for a in range(0, population, 16)]

    def update(center, g, returns):
        z = (returns - returns.mean()) / (returns.std() + 1e-8)
        return (center + 0.3 * pair_noise(seed, g, population, center.size).T @ z / (population * sigma)).astype(np.float32)

    centers = {"redis": np.zeros(10, np.float32), "one": np.zeros(10, np.float32)}
    with EmbeddedRedis() as server, CartPoleWorkers(server.worker_url, ns["encode_result"], workers=3,
                                                    crash=1) as workers:
        master = redis.Redis.from_url(server.master_url)
        for g in range(3):
            master.delete("es:leases")
            master.hset("es:task", mapping=task_fields(g, seed, sigma, population, centers["redis"]))
            master.rpush("es:jobs", *[json.dumps({"g": g, "a": a, "b": b}) for a, b in bounds])
            returns, lengths = ns["gather"](server.master_url, g, bounds, 0.5, 20.0)
            task = {"g": g, "seed": seed, "sigma": sigma, "population": population, "center": centers["one"]}
            want, want_lengths = member_returns(task, 0, population)
            assert np.array_equal(returns, want) and np.array_equal(lengths, want_lengths), g
            centers = {"redis": update(centers["redis"], g, returns), "one": update(centers["one"], g, want)}
        master.close()
    assert np.array_equal(centers["redis"], centers["one"])
    assert workers.died is not None and workers.died[1] == 1 and (1, workers.died[2]) in workers.requeued()
    assert workers.errors == []


@pytest.fixture(scope="module")
def redis_answers():
    """Notebook 03's functions up to section 8, without running its servers or processes."""
    return answers_of("03_redis", "# ## 8. ")


def test_notebook_03s_update_from_returns_is_section_4s_es_update_bit_for_bit(redis_answers):
    """Section 6's claim: workers that get only the returns end at section 4's center."""
    from classroom.cartpole_workers import member_returns, pair_noise
    seed, population, sigma, lr = 0, 256, 0.2, 0.3
    rng = np.random.default_rng(1)
    center = (rng.standard_normal(10) * 0.1).astype(np.float32)
    for g in range(4):
        task = {"g": g, "seed": seed, "sigma": sigma, "population": population, "center": center}
        returns = member_returns(task, 0, population)[0]
        z = (returns - returns.mean()) / (returns.std() + 1e-8)
        want = (center + lr * (pair_noise(seed, g, population, 10).T @ z) / (population * sigma)).astype(np.float32)
        got = redis_answers["update_from_returns"](center, seed, g, [returns[:96], returns[96:160], returns[160:]],
                                                   sigma, lr)
        assert got.dtype == np.float32 and np.array_equal(got, want), g
        center = got


def test_the_seeds_only_check_fails_a_worker_that_ends_elsewhere_than_the_master(redis_answers):
    """Right in the master's process, off in a worker process: the check names the worker and
    the generation (the bit-identity the paper's Algorithm 2 needs)."""
    import os
    master_pid, right = os.getpid(), redis_answers["update_from_returns"]

    def elsewhere_off(center, seed, generation, chunk_returns, sigma, lr):
        new = right(center, seed, generation, chunk_returns, sigma, lr)
        return new if os.getpid() == master_pid or generation < 3 else np.nextafter(new, np.float32(np.inf))
    with pytest.raises(check.CheckFailed, match=r"worker process 1, which received only the returns, ended "
                                                r"generation 3 at another center than the master"):
        check.seeds_only_update(elsewhere_off, seed=4)


def test_the_noise_tables_slices_are_the_tables_values_mirrored_in_pairs(redis_answers):
    table = redis_answers["make_noise_table"](5, 1000)
    assert table.dtype == np.float32 and np.array_equal(table, redis_answers["make_noise_table"](5, 1000))
    offsets = redis_answers["generation_offsets"](5, 3, 8, len(table), 100)
    assert offsets.min() >= 0 and offsets.max() <= 900
    assert not np.array_equal(offsets, redis_answers["generation_offsets"](5, 4, 8, len(table), 100))
    for member in range(16):
        noise = redis_answers["table_noise"](table, offsets, member, 100)
        pair = table[offsets[member // 2]:offsets[member // 2] + 100]
        assert noise.dtype == np.float32 and np.array_equal(noise, pair if member % 2 == 0 else -pair)


def test_the_bytes_per_generation_cell_counts_what_the_text_says(redis_answers):
    ns = answers_of("03_redis", "# ## 7. ")          # its cell is in section 6, outside the answers
    cells = [c["source"] for c in parse((ROOT / "source" / "03_redis.py").read_text()) if c["type"] == "code"]
    exec(compile(next(c for c in cells if c.startswith("def bytes_per_generation")).split("\n\nworkers = ")[0],
                 "03", "exec"), ns)
    assert ns["bytes_per_generation"](1440, 2880, 10) == (8 * 2880 * 1441, 1440 * 40 + 8 * 2880)
    only, center = ns["bytes_per_generation"](1440, 2880, 1_000_000)
    assert round(only / 1e6, 1) == 33.2 and round(center / 1e6, 1) == 5760.0


# ---------------------------------------------------------------- 04: is the student's code fast enough?
def per_pixel_downsample(frames):
    """Exact (it passes check.downsample) and slow: a Python loop over the 42 x 42 output pixels."""
    frames = np.asarray(frames, dtype=np.uint8)
    weights = np.array([[max(0, min(160 * (j + 1), 42 * (c + 1)) - max(160 * j, 42 * c)) for j in range(42)]
                        for c in range(160)], dtype=np.float64)
    out = np.empty((len(frames), 42, 42), dtype=np.uint8)
    for i, frame in enumerate(frames):
        rows = frame.reshape(42, 5, 160).sum(axis=1, dtype=np.int64)
        for r in range(42):
            for j in range(42):
                out[i, r, j] = np.rint(rows[r] @ weights[:, j] / 800)
    return out


def per_weight_policy(W, b, features):
    """Right actions, one multiplication at a time in Python."""
    actions = []
    for p in range(len(features)):
        logits = [sum(features[p][f] * W[p][f][a] for f in range(features.shape[1])) + b[p][a] for a in range(3)]
        actions.append(int(np.argmax(logits)))
    return np.array(actions)


def test_the_speed_check_passes_the_notebooks_answers(pong_answers, capsys):
    us = check.pong_speed(pong_answers["downsample"], pong_answers["stack_frames"], pong_answers["batched_policy"])
    out = capsys.readouterr().out
    assert out.startswith("OK pong_speed (not graded): your code adds ") and "ALE's own emulation" in out, out
    assert sum(us[k] for k in ("downsample", "stack_frames", "batched_policy")) < 0.5 * us["ale"], us
    print(out)


def test_an_exact_per_pixel_downsample_passes_its_check_and_fails_the_speed_check_named(pong_answers, capsys):
    check.downsample(per_pixel_downsample, seed=3)           # exact: the graded check cannot tell
    assert capsys.readouterr().out.startswith("OK downsample")
    with pytest.raises(check.CheckFailed) as slow:
        check.pong_speed(per_pixel_downsample, pong_answers["stack_frames"], pong_answers["batched_policy"])
    message = str(slow.value)
    assert message.startswith("pong_speed (not graded): your code adds "), message
    assert "The slowest is downsample: usually a Python loop over pixels" in message, message
    assert "hours instead of minutes" in message
    print(message)


def test_a_policy_that_multiplies_one_number_at_a_time_fails_the_speed_check_named(pong_answers):
    check.batched_policy(per_weight_policy, seed=3)
    with pytest.raises(check.CheckFailed, match="The slowest is batched_policy: usually a Python loop over members"):
        check.pong_speed(pong_answers["downsample"], pong_answers["stack_frames"], per_weight_policy)


def test_the_speed_check_is_worth_no_points_skips_in_fast_mode_and_gates_training(monkeypatch, capsys):
    from classroom.build import build_notebook, parse
    assert "pong_speed" in check.UNGRADED and "pong_speed" not in check.CHECKS
    cells = parse((ROOT / "source" / "04_pong.py").read_text())
    nb = build_notebook(cells, "04_pong", student=True)
    speed = [c for c in nb.cells if c.source.startswith("check.pong_speed(downsample, stack_frames, batched_policy);")]
    assert len(speed) == 1 and speed[0].metadata["nbgrader"]["grade"] is False, speed
    assert speed[0].metadata["nbgrader"]["locked"] is True and "points" not in speed[0].metadata["nbgrader"]
    training = next(c for c in nb.cells if "train_until_beats_random(STUDENT_ID, RUN_DIR, code)" in c.source)
    assert training.source.index("check.ready(") < training.source.index("check.pong_speed(") \
        < training.source.index("train_until_beats_random(STUDENT_ID, RUN_DIR")
    monkeypatch.setenv("ES_COURSE_FAST", "1")
    assert check.pong_speed(None, None, None) == {}
    assert capsys.readouterr().out.startswith("SKIPPED pong_speed")
