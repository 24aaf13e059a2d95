"""Milestone 3 under a hostile network, against a real Redis server with ACL roles: what
reaches the master and the keys (malformed and stale results, keys rewritten with the wrong
type, the task record altered, forged jobs, faked heartbeats, error reports) and what the
worker role may not do. Workers that lie and what the worker role writes:
``test_hostile_workers.py``.

Each attack is performed for real. Every run must finish bit-identical to a single process
with the same seed, with each event logged.
"""
import json
import sys
import time

import numpy as np
import pytest
import redis

from es.distributed import protocol as P
from es.parallel import EvaluationError, chunk_bounds

from hostile_cluster import CHUNKS, Cluster, assert_identical, small


# ------------------------------------------------------------------ 30+ hostile results
def hostile_results(rec, pop, cap):
    """(name, payload, the reason the master must log) for one generation's task record."""
    run, nonce, g = rec["run"].decode(), rec["nonce"].decode(), int(rec["generation"])
    digest = P.task_digest(rec)
    bounds = chunk_bounds(pop, CHUNKS)
    (a, b), (ca, cb) = bounds[0], bounds[-1]
    n = b - a
    c1, c2 = [(x, y - x) for x, y in bounds[1:3]]   # chunk 0 is evaluated by the master after the first bad body
    W = b"\xee" * 8

    def res(run=run, nonce=nonce, digest=digest, g=g, a=a, n=n, returns=None, lengths=None, center=None):
        returns = np.zeros(n) if returns is None else returns
        lengths = np.ones(n, np.uint32) if lengths is None else lengths
        return P.encode_result(W, run, nonce, digest, g, a, returns, lengths, center)

    ok = res()
    ones = np.ones(n, np.uint32)
    with_lengths = lambda v: res(lengths=np.where(np.arange(n) == 3, v, 1).astype(np.uint32))   # noqa: E731
    return [
        ("garbage", b"garbage!" * 8, "bad magic"),
        ("empty", b"", "shorter than its header"),
        ("truncated header", ok[:20], "shorter than its header"),
        ("bad magic", b"XXXX" + ok[4:], "bad magic"),
        ("unknown kind", ok[:4] + bytes([7]) + ok[5:], "unknown result kind 7"),
        ("center flag 2", ok[:41] + bytes([2]) + ok[42:], "center flag 2"),
        ("earlier run (stale run id)", res(run="ab" * 8), "stale result"),
        ("earlier generation (stale nonce)", res(nonce="cd" * 8), "stale result"),
        ("generation number off", res(g=g + 5), "stale result"),
        ("evaluated an altered task", res(digest="ef" * 8), "altered task record"),
        ("first member not a chunk start", res(a=a + 1), "not a chunk"),
        ("member count not a chunk", res(n=n - 2), "not a chunk"),
        ("members past the population", res(a=pop, n=4), "not a chunk"),
        ("body cut short", ok[:-4], "bytes of data"),
        ("body too long", ok + b"\0" * 4, "bytes of data"),
        ("count 2**32-1", ok[:37] + b"\xff\xff\xff\xff" + ok[41:], "bytes of data"),
        ("NaN return", res(returns=np.where(np.arange(n) == 2, np.nan, 0.0)), "non-finite returns"),
        ("+inf return", res(returns=np.where(np.arange(n) == 2, np.inf, 0.0)), "non-finite returns"),
        ("-inf return", res(returns=np.full(n, -np.inf)), "non-finite returns"),
        ("length 0xFFFFFFFF", with_lengths(0xFFFFFFFF), "exceeds the cap"),
        ("length cap + 1", with_lengths(cap + 1), "exceeds the cap"),
        ("center on a chunk without it", res(center=(1.0, 1)), "has a center return"),
        ("center missing", res(a=ca, n=cb - ca), "lacks a center return"),
        ("NaN center", res(a=ca, n=cb - ca, center=(np.nan, 1)), "non-finite center"),
        ("center length over the cap", res(a=ca, n=cb - ca, center=(0.0, 0xFFFFFFFF)), "center length"),
        ("over the size cap", ok + b"\0" * P.MAX_RESULT_BYTES, f"exceeds {P.MAX_RESULT_BYTES}"),
        ("error with a 5 kB message", P.encode_error(W, run, nonce, digest, g, a, n, "x") + b"y" * 5000,
         "error message of"),
        ("error of an earlier run", P.encode_error(W, "ab" * 8, nonce, digest, g, a, n, "boom"), "stale result"),
        ("error for the current generation", P.encode_error(W, run, nonce, digest, g, *c1, "forged failure"),
         "reported an error: forged failure"),
        ("error on another chunk", P.encode_error(W, run, nonce, digest, g, *c2, "forged again"),
         "reported an error: forged again"),
        ("an error on a chunk the master evaluated already", P.encode_error(W, run, nonce, digest, g, *c1, "again"),
         None),
        ("lengths all 0xFFFFFFFF", res(lengths=np.full(n, 0xFFFFFFFF, np.uint32)), "exceeds the cap"),
        ("returns as float32 bytes", ok[:P.HEADER.size] + np.zeros(n, np.float32).tobytes() + ones.tobytes(),
         "bytes of data"),
    ]


def test_thirty_hostile_results_are_dropped_and_the_run_stays_identical(server):
    """Every payload is pushed while the master waits on generation 0 (workers start after),
    so each is judged against the live run; the log names each one's flaw, in order."""
    cfg = small()
    c = Cluster(server, cfg, start_workers=False)
    pushed = []

    def attack(rec):
        cases = hostile_results(rec, cfg.population, cap=500)
        for _, payload, _ in cases:
            c.rogue.rpush(P.RESULTS, payload)        # the worker role may push results
        pushed.extend(cases)
        time.sleep(0.5)
        c.start_workers()
    result = c.train_during(0, attack)
    assert len(pushed) >= 30
    assert_identical(result, cfg)
    events = [m for m in c.logs if "dropped a result" in m or "reported an error" in m]
    expected = [case for case in pushed if case[2] is not None]   # a duplicate of a finished chunk is ignored
    for (name, _, reason), line in zip(expected, events):
        assert reason in line, (name, reason, line)
    assert len(events) >= len(expected), c.logs
    row = result.metrics[0]
    assert row["errors"] == 2 and row["stale"] == 5 and row["dropped"] == len(expected) - 7
    # Header-valid lies ban their sender; both false error reports were evaluated by the master.
    assert "ee" * 8 in c.ev.banned and len(c.logged("false error report")) == 2, c.logs


@pytest.mark.slow
def test_stale_results_of_an_earlier_run_on_the_same_database_are_dropped(server):
    """A seed-11 run's honest generation-0 results (what a worker of a crashed run pushes late)
    arrive while a seed-12 run waits on its generation 0 with the same chunk layout: before
    run ids, they were taken and the run diverged."""
    old = small(seed=11)
    recorded = []

    def record(job, returns, lengths, center):
        recorded.append((job, returns.copy(), lengths.copy(), center))
        return returns, lengths, center
    c_old = Cluster(server, old, workers=0, liars=[record])
    c_old.train()
    old_rec = {"run": c_old.ev.run}
    payloads = [P.encode_result(b"\x11" * 8, job["r"], job["n"], "00" * 8, job["g"], job["a"], r, l, ctr)
                for job, r, l, ctr in recorded if job["g"] == 0]
    assert payloads and old_rec["run"]
    new = small(seed=12)
    c = Cluster(server, new, start_workers=False)

    def replay(rec):
        c.rogue.rpush(P.RESULTS, *payloads)
        time.sleep(0.3)
        c.start_workers()
    result = c.train_during(0, replay)
    assert_identical(result, new)
    assert len(c.logged(f"stale result (run {old_rec['run']}")) == len(payloads)


# ------------------------------------------------------------------ keys and the task record
def _wrong_type(key, write):
    def attack(c, rec):
        c.admin.delete(key)
        write(c.admin)
    return attack


KEY_ATTACKS = {
    "results is a string": (_wrong_type(P.RESULTS, lambda r: r.set(P.RESULTS, "x")), "es:results held the wrong type"),
    "jobs is a hash": (_wrong_type(P.JOBS, lambda r: r.hset(P.JOBS, "x", "y")), "es:jobs held the wrong type"),
    "leases is a list": (_wrong_type(P.LEASES, lambda r: r.rpush(P.LEASES, "x")), "es:leases held the wrong type"),
    "task is a list": (_wrong_type(P.TASK, lambda r: r.rpush(P.TASK, "x")), "es:task held the wrong type"),
    "generation not an integer": (lambda c, rec: c.admin.hset(P.TASK, "generation", "zz"), "publishing it again with a new nonce"),
    "center bytes replaced (checksum mismatch)": (
        lambda c, rec: c.admin.hset(P.TASK, "center", b"\0" * len(rec["center"])), "publishing it again with a new nonce"),
    "center and checksum replaced together": (
        lambda c, rec: c.admin.hset(P.TASK, mapping={"center": b"\0" * len(rec["center"]),
                                                     "sha256": __import__("hashlib").sha256(
                                                         b"\0" * len(rec["center"])).hexdigest()}),
        "publishing it again with a new nonce"),
    "problem spec imports a module (env_id 'this:Env')": (
        lambda c, rec: c.admin.hset(P.TASK, "problem", json.dumps({"kind": "env", "env_id": "this:Env",
                                                                    "hidden": []})), "publishing it again with a new nonce"),
    "problem spec with 10**6 Pong games": (
        lambda c, rec: c.admin.hset(P.TASK, "problem", json.dumps({"kind": "pong", "num_envs": 10 ** 6, "policy": {
            "type": "pong_dense"}})), "publishing it again with a new nonce"),
    "lease_seconds 1e18": (lambda c, rec: c.admin.hset(P.TASK, "lease_seconds", "1e18"), "publishing it again with a new nonce"),
    "population 2**40": (lambda c, rec: c.admin.hset(P.TASK, "population", str(2 ** 40)), "publishing it again with a new nonce"),
    "seeds not JSON": (lambda c, rec: c.admin.hset(P.TASK, "seeds", "[1,"), "publishing it again with a new nonce"),
}


# The fast lane keeps one attack of each kind (a key of the wrong type, a field that does not
# parse, a center and its checksum, a spec that would import); the full suite runs them all.
FAST_KEY_ATTACKS = ("results is a string", "generation not an integer", "center and checksum replaced together",
                    "problem spec imports a module (env_id 'this:Env')")


@pytest.mark.parametrize("name", [name if name in FAST_KEY_ATTACKS else pytest.param(name, marks=pytest.mark.slow)
                                  for name in KEY_ATTACKS])
def test_rewritten_keys_and_task_records_are_repaired(server, name):
    """With the master's credentials (what anyone has on a server without ACL roles): the
    master repairs the key or publishes the task again; workers refuse what they must not
    build and report instead of exiting."""
    attack, expect = KEY_ATTACKS[name]
    cfg = small(population=512, episodes_per_member=2, generations=2)     # the attack is on generation 0
    c = Cluster(server, cfg, workers=2, start_workers=False)

    def then_workers(rec):   # before any worker has read the task of generation 0
        attack(c, rec)
        c.start_workers()
    result = c.train_during(0, then_workers)
    assert_identical(result, cfg)
    assert c.logged(expect), c.logs
    assert "this" not in sys.modules or name != "problem spec imports a module (env_id 'this:Env')"


SIGMA_ATTACKS = {"one value short": lambda raw: raw[:-4],
                 "NaN": lambda raw: np.full(len(raw) // 4, np.nan, "<f4").tobytes(),
                 "zero": lambda raw: bytes(len(raw))}


@pytest.mark.parametrize("name", list(SIGMA_ATTACKS))
def test_an_altered_sigma_vector_is_refused_and_the_snes_run_stays_identical(server, name):
    """SNES's sigma per parameter is part of the task record: one rewritten with the master's
    credentials is refused by the workers (and the task published again), never used."""
    cfg = small(strategy="snes", population=32)
    c = Cluster(server, cfg, workers=2, start_workers=False)

    def then_workers(rec):
        c.admin.hset(P.TASK, "sigma_vector", SIGMA_ATTACKS[name](rec["sigma_vector"]))
        c.start_workers()
    result = c.train_during(0, then_workers)
    assert_identical(result, cfg)
    assert c.logged("publishing it again with a new nonce"), c.logs
    assert any("sigma vector" in m for m in c.worker_logs), c.worker_logs


def test_forged_jobs_are_dropped_by_workers(server):
    """Jobs with members past the population, another run's id, or malformed fields: honest
    workers drop them and say so, nothing reaches the master as an error."""
    cfg = small()
    c = Cluster(server, cfg, start_workers=False)

    def forge(rec):
        run, nonce, g = rec["run"].decode(), rec["nonce"].decode(), int(rec["generation"])
        c.admin.lpush(P.JOBS, P.encode_job(run, nonce, g, 60, 200, False),      # past the population
                      P.encode_job("ab" * 8, nonce, g, 0, 8, False),              # another run
                      json.dumps({"r": run, "n": nonce, "g": g, "a": -1, "b": 8, "c": 0}),
                      json.dumps({"r": run, "n": nonce, "g": True, "a": 0, "b": 8, "c": 0}),
                      b"\xff\xfe not json")
        c.start_workers()
    result = c.train_during(0, forge)
    assert_identical(result, cfg)
    assert sum("dropped a bad job" in m for m in c.worker_logs) == 3, c.worker_logs
    assert any("not a chunk of generation 0" in m for m in c.worker_logs)
    assert all(m.get("errors", 0) == 0 for m in result.metrics)


def test_a_fake_heartbeat_from_the_future_does_not_hold_a_chunk(server):
    """A rogue worker pops a job and writes a lease stamped 1e18: the master treats it as no
    heartbeat and hands the chunk out again after one lease time."""
    cfg = small()
    c = Cluster(server, cfg, start_workers=False)

    def steal(rec):
        _, raw = c.rogue.blpop(P.JOBS)
        job = P.decode_job(raw)
        c.rogue.hset(P.LEASES, P.job_id(job), json.dumps({"w": "ff" * 8, "n": job["n"], "t": 1e18}))
        c.start_workers()
    result = c.train_during(0, steal)
    assert_identical(result, cfg)
    assert c.logged("no worker holds a lease"), c.logs


def _hold_a_chunk_forever(c):
    """The attack: pop a job, then renew a valid lease on it forever without answering."""
    def hold(rec):
        _, raw = c.rogue.blpop(P.JOBS)
        job = P.decode_job(raw)
        c.start_workers()
        while not c.stop.is_set():
            sec, usec = c.rogue.time()
            c.rogue.hset(P.LEASES, P.job_id(job), json.dumps({"w": "ff" * 8, "n": job["n"], "t": sec + usec / 1e6}))
            time.sleep(0.1)
    return hold


@pytest.mark.slow
def test_a_heartbeat_that_never_ends_meets_the_chunk_deadline(server):
    """A rogue worker pops a job and renews a valid lease forever without answering: the
    chunk's absolute deadline hands it out again. Backups are off here: they would hand the
    chunk out first (the next test); the deadline is what is left when a backup's holder
    stalls too."""
    cfg = small()
    c = Cluster(server, cfg, start_workers=False, chunk_deadline=2.0, backup_after=None)
    result = c.train_during(0, _hold_a_chunk_forever(c))
    assert_identical(result, cfg)
    assert c.logged("deadline though worker ffffffffffffffff still sends heartbeats"), c.logs
    assert not c.logged("a backup"), c.logs


@pytest.mark.slow
def test_a_heartbeat_that_never_ends_is_overtaken_by_a_backup(server):
    """The same attack with backups on (the default): once no job waits, the held chunk is
    handed out again as a backup, well before its deadline, and the run stays identical."""
    cfg = small()
    c = Cluster(server, cfg, start_workers=False, chunk_deadline=30.0)
    result = c.train_during(0, _hold_a_chunk_forever(c))
    assert_identical(result, cfg)
    assert c.logged("a backup: worker ffffffffffffffff"), c.logs
    assert not c.logged("deadline though"), c.logs
    assert result.metrics[0]["backups"] >= 1 and result.metrics[0]["seconds"] < 20


def test_workers_that_cannot_evaluate_are_banned_and_the_master_evaluates_their_chunks(server):
    """A chunk that fails on every worker (here: evaluation raises) but not on the master: each
    report is reproduced here, found false, its reporter banned; the run ends identical."""
    cfg = small(generations=2)

    def broken(job, returns, lengths, center):
        raise RuntimeError("box2d is not installed on this host")
    c = Cluster(server, cfg, workers=0, liars=[broken, broken])
    assert_identical(c.train(), cfg)
    assert len(c.ev.banned) == 2 and c.logged("false error report"), c.logs
    assert not any("Traceback" in m for m in c.worker_logs)


def test_a_real_error_ends_the_run_quickly_with_the_workers_message(server):
    """An error the master reproduces (its own evaluation fails too) ends the run at once with
    the worker's message and its own."""
    cfg = small()

    def broken(job, returns, lengths, center):
        raise RuntimeError("the environment crashed")
    c = Cluster(server, cfg, workers=0, liars=[broken], spot_checks=0)

    def crash(*args):
        raise RuntimeError("the environment crashed here too")
    c.problem.run_episodes = crash
    t0 = time.time()
    with pytest.raises(EvaluationError, match="the environment crashed") as err:
        c.train()
    assert "crashed here too" in str(err.value) and time.time() - t0 < 5


def test_three_forged_error_reports_from_fresh_ids_do_not_end_the_run(server):
    """Issue 28: three forged reports on one chunk from three fresh ids ended the run (exit 2)
    though the chunk evaluates fine. Now the first is reproduced, found false and banned; the
    others are duplicates of a finished chunk."""
    cfg = small()
    c = Cluster(server, cfg, start_workers=False)

    def attack(rec):
        a, b = chunk_bounds(cfg.population, CHUNKS)[0]
        for i in range(3):
            c.rogue.rpush(P.RESULTS, P.encode_error(bytes([i + 1]) * 8, rec["run"].decode(), rec["nonce"].decode(),
                                                    P.task_digest(rec), 0, a, b - a, "forged failure"))
        c.start_workers()
    result = c.train_during(0, attack)
    assert_identical(result, cfg)
    assert "01" * 8 in c.ev.banned and c.logged("false error report"), c.logs


# ------------------------------------------------------------------ roles
@pytest.mark.slow
def test_the_worker_role_cannot_rewrite_the_task_or_push_jobs(server):
    w = redis.Redis.from_url(server.worker_url)
    m = redis.Redis.from_url(server.master_url)
    m.hset(P.TASK, "generation", "0")
    m.rpush(P.JOBS, "job")
    forbidden = [lambda: w.hset(P.TASK, "generation", "1"), lambda: w.delete(P.TASK), lambda: w.rpush(P.JOBS, "x"),
                 lambda: w.lpush(P.JOBS, "x"), lambda: w.hset(P.JOBS, "x", "y"), lambda: w.blpop(P.RESULTS, 1),
                 lambda: w.hgetall(P.LEASES), lambda: w.set("es:other", 1), lambda: w.flushall(),
                 lambda: w.config_get("*"), lambda: w.eval("return 1", 0), lambda: w.rpush(P.TASK, "x"),
                 lambda: w.rename(P.TASK, "es:x"), lambda: w.hset(P.RESULTS, "x", "y")]
    for i, call in enumerate(forbidden):
        with pytest.raises(redis.exceptions.NoPermissionError):
            call()
    assert w.hget(P.TASK, "generation") == b"0"
    assert w.blpop(P.JOBS, 1) == (P.JOBS.encode(), b"job")
    assert w.rpush(P.RESULTS, b"r") == 1
    assert w.hset(P.LEASES, "0:0:8", "{}") == 1 and w.hdel(P.LEASES, "0:0:8") == 1
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis(host=server.host, port=server.port).ping()   # the default user is off



def test_the_docs_show_the_acl_lines_the_embedded_server_uses():
    from pathlib import Path
    from es.distributed.server import acl_lines
    readme = (Path(__file__).resolve().parents[2] / "docs" / "distributed.md").read_text()
    for line in acl_lines("MASTER_PW", "WORKER_PW"):
        assert line in readme.splitlines(), line
