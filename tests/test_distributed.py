"""Milestone 3 with a real redis-server on a free loopback port."""
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import es
from es.checkpoint import load_checkpoint
from es.distributed import protocol as P
from es.distributed.master import RedisEvaluator
from es.distributed.server import EmbeddedRedis
from es.errors import ESError
from es.train import make_problem_for

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.fixture()
def server():
    with EmbeddedRedis() as s:
        yield s


def start_workers(url, n):
    return [subprocess.Popen([sys.executable, "-m", "es", "worker"], env={**ENV, "ES_REDIS_URL": url},
                             stderr=subprocess.PIPE, text=True) for _ in range(n)]


def stop(procs):
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def config(**kw):
    base = dict(seed=2, generations=4, reward_goal=1e9, population=64)
    base.update(kw)
    return es.config_for("cartpole", **base)


def run_master(url, cfg, run_dir=None, resume=False, chunks=8, lease=10.0, log=None):
    problem = make_problem_for(cfg)
    ev = RedisEvaluator(problem, url, chunks=chunks, lease_seconds=lease, log=log)
    try:
        return es.train(cfg, problem, run_dir=run_dir, resume=resume, evaluator=ev, final_eval=False)
    finally:
        ev.close()


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_same_parameters_as_one_process_for_any_worker_count(server, workers):
    reference = es.train(config(), final_eval=False)
    procs = start_workers(server.url, workers)
    try:
        got = run_master(server.url, config(), chunks=7)   # uneven chunks: completion order varies
    finally:
        stop(procs)
    assert np.array_equal(got.center, reference.center)
    assert [m["center_return"] for m in got.metrics] == [m["center_return"] for m in reference.metrics]


def test_kill_minus_nine_of_a_worker_mid_generation(server):
    cfg = config(population=512, episodes_per_member=4, generations=3)
    reference = es.train(cfg, final_eval=False)
    procs = start_workers(server.url, 2)
    process_of = {p.stderr.readline().split()[1]: p for p in procs}   # each worker prints its id first
    import redis
    r = redis.Redis.from_url(server.url)
    logs = []
    out = {}
    master = threading.Thread(target=lambda: out.update(res=run_master(server.url, cfg, chunks=4, lease=1.0,
                                                                       log=logs.append)))
    master.start()
    try:
        # Freeze a worker that holds a lease, then check it still holds it: the result push and
        # the lease removal are one transaction, so its chunk is unfinished and must be requeued.
        deadline, victim = time.time() + 60, None
        while victim is None and time.time() < deadline:
            for jid, value in r.hgetall(P.LEASES).items():
                holder = process_of[json.loads(value)["w"]]
                os.kill(holder.pid, signal.SIGSTOP)
                still = r.hget(P.LEASES, jid)
                if still is not None and json.loads(still)["w"] == json.loads(value)["w"]:
                    victim = holder
                    break
                os.kill(holder.pid, signal.SIGCONT)
        assert victim, "no worker was ever caught holding a chunk"
        os.kill(victim.pid, signal.SIGKILL)
        master.join(120)
    finally:
        stop(procs)
    assert not master.is_alive()
    assert np.array_equal(out["res"].center, reference.center)
    assert any("requeued chunk" in m for m in logs), logs
    assert sum(m.get("requeued", 0) for m in out["res"].metrics) >= 1


def test_master_killed_and_resumed(server, tmp_path):
    cfg = ["--seed", "5", "--generations", "12", "--reward-goal", "1e9", "--population", "512",
           "--episodes-per-member", "2", "--eval-episodes", "1", "--no-progress"]
    reference = es.train(config(seed=5, generations=12, population=512, episodes_per_member=2), final_eval=False)
    procs = start_workers(server.url, 2)
    run = tmp_path / "run"
    try:
        master = subprocess.Popen([sys.executable, "-m", "es", "train", "cartpole", "--redis", server.url,
                                   "--out", str(run), *cfg], env=ENV, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline:
            m = run / "metrics.jsonl"
            if m.exists() and len(m.read_text().splitlines()) >= 3:
                break
            time.sleep(0.01)
        master.kill()
        master.wait()
        assert load_checkpoint(run)[1]["generation"] < 12, "finished before the kill; make the run longer"
        out = subprocess.run([sys.executable, "-m", "es", "train", "--resume", str(run), "--redis", server.url,
                              "--no-progress"], env=ENV, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
    finally:
        stop(procs)
    assert np.array_equal(load_checkpoint(run)[0], reference.center)


def test_bad_payloads_are_dropped_with_a_warning(server):
    import redis
    r = redis.Redis.from_url(server.url)
    good = P.encode_result(b"\x00" * 8, 0, 0, np.zeros(8), np.zeros(8, np.uint32))
    r.rpush(P.RESULTS,
            b"garbage!" * 8,
            P.encode_result(b"\x01" * 8, 7, 0, np.zeros(8), np.zeros(8, np.uint32)),           # wrong generation
            P.encode_result(b"\x02" * 8, 0, 0, np.full(8, np.nan), np.zeros(8, np.uint32)),    # non-finite
            good[:HEADER_END] + b"\x00" * (P.MAX_RESULT_BYTES + 1),                              # oversized
            P.encode_result(b"\x03" * 8, 0, 3, np.zeros(5), np.zeros(5, np.uint32)))            # not a chunk
    reference = es.train(config(), final_eval=False)
    logs = []
    procs = start_workers(server.url, 2)
    try:
        got = run_master(server.url, config(), log=logs.append)
    finally:
        stop(procs)
    assert np.array_equal(got.center, reference.center)
    dropped = [m for m in logs if "dropped a result" in m]
    assert len(dropped) == 5, logs
    for fragment in ("bad magic", "generation 7", "non-finite", "exceeds", "not a chunk"):
        assert any(fragment in m for m in dropped), (fragment, dropped)


HEADER_END = P.HEADER.size


def test_wrong_password_is_a_clear_error_with_status_2(server):
    bad = f"redis://:wrong-password@127.0.0.1:{server.port}/0"
    for argv in (["worker", "--redis", bad], ["train", "cartpole", "--redis", bad, "--out", "/tmp/never-written"]):
        out = subprocess.run([sys.executable, "-m", "es", *argv], env=ENV, capture_output=True, text=True, timeout=60)
        assert out.returncode == 2, out.stderr
        last = out.stderr.strip().splitlines()[-1]
        assert "refused the password" in last or "needs a password" in last, out.stderr
    with pytest.raises(ESError, match="Python function"):
        RedisEvaluator(es.envs.FunctionProblem(lambda p, s: 0.0, 2), server.url)


def test_payload_round_trip_and_size():
    raw = P.encode_result(b"abcdefgh", 3, 32, np.arange(32.0), np.arange(32, dtype=np.uint32), (1.5, 7))
    assert len(raw) == P.HEADER.size + 12 * 32 + 12
    res = P.decode_result(raw)
    assert res["generation"] == 3 and res["first"] == 32 and res["center"] == (1.5, 7)
    assert np.array_equal(res["returns"], np.arange(32.0))


def test_requeue_rule():
    """Requeue a pending chunk that is not in the queue, was queued a lease ago or more, and has
    had no heartbeat for a lease or more (the rule the course's check grades against)."""
    from es.distributed.master import chunks_to_requeue
    queued_at = {"alive": 0.0, "dead": 0.0, "in_queue": 0.0, "just_queued": 9.5, "never_taken": 0.0,
                 "at_the_limit": 5.0}
    leases = {"alive": 9.0, "dead": 2.0, "at_the_limit": 5.0}
    got = chunks_to_requeue(queued_at, {"in_queue"}, leases, 10.0, 5.0)
    assert got == {"dead", "never_taken", "at_the_limit"}


def test_redis_restart_mid_run_is_survived(tmp_path):
    """The server dies and comes back empty on the same port: both sides retry, the master
    publishes its generation again, and the run ends where a single process ends."""
    cfg = config(population=512, episodes_per_member=4, generations=6)
    reference = es.train(cfg, final_eval=False)
    server = EmbeddedRedis().start()
    procs = start_workers(server.url, 2)
    logs, out = [], {}
    master = threading.Thread(target=lambda: out.update(res=run_master(server.url, cfg, chunks=4, lease=1.0,
                                                                       log=logs.append)))
    master.start()
    try:
        import redis
        r = redis.Redis.from_url(server.url)
        deadline = time.time() + 60
        while time.time() < deadline and int(r.hget(P.TASK, "generation") or 0) < 2:
            time.sleep(0.01)
        server.stop()
        time.sleep(1.0)
        server = EmbeddedRedis(port=server.port, password=server.password).start()
        master.join(180)
    finally:
        stop(procs)
        server.stop()
    assert not master.is_alive() and "res" in out, logs
    assert np.array_equal(out["res"].center, reference.center)
    assert any("retrying with backoff" in m for m in logs)
