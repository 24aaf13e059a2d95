"""Issue 33: what many workers need from the Redis master, against a real server. Chunks cut
for the workers known and handed out largest first; the master's own workers trusted from
their first result; a new id's probation settled by a trusted peer or in the background,
never by stopping the master; results drained in one round trip. Every run bit-identical."""
import json
import subprocess
import sys
import threading
import time
from dataclasses import replace

import numpy as np
import pytest

import es
from es.checkpoint import load_checkpoint
from es.distributed import protocol as P
from es.distributed.master import MIN_WORKERS, RedisEvaluator
from es.evaluators import evaluate_members
from es.parallel import guided_bounds
from es.training import make_problem_for
from child_env import subprocess_env
from hostile_cluster import CHUNKS, Cluster, assert_identical, small


def test_local_workers_of_the_master_are_ready_before_generation_0_and_need_no_probation(tmp_path):
    """``--redis --workers 3``: the master issues its workers' ids (trusted from their first
    result), waits until each has built the problem, and no generation evaluates anything on
    the master; the run equals one process."""
    args = ["--seed", "2", "--generations", "3", "--reward-goal", "1e9", "--population", "256"]
    out = subprocess.run([sys.executable, "-m", "es", "train", "cartpole", "--redis", "--workers", "3", *args,
                          "--out", str(tmp_path / "run"), "--no-progress", "--eval-episodes", "1"],
                         env=subprocess_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "started 3 local workers (ready in" in out.stderr
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all(r["probation_checks"] == 0 and r["master_chunks"] == 0 and r["master_seconds"] == 0 for r in rows), rows
    # nor spot checks: the master's own workers are its own code (their ids are secrets it handed them)
    assert all(r["spot_checked"] == 0 and r["spot_check_seconds"] == 0 for r in rows), rows
    reference = es.train(es.config_for("cartpole", seed=2, generations=3, reward_goal=1e9, population=256),
                         final_eval=False)
    assert np.array_equal(load_checkpoint(tmp_path / "run")[0], reference.center)


def test_a_new_id_is_settled_by_a_trusted_peer_while_the_master_evaluates_nothing(server):
    """A fresh id's result is held, its chunk queued again at the front; a trusted worker's
    evaluation of it settles the probation (identical: the id passes), and the master, whose
    own evaluations are made to hang here, is never needed."""
    cfg = small(generations=3)
    trusted = b"\x77" * 8
    c = Cluster(server, cfg, workers=0, start_workers=False, trusted=[trusted.hex()], lease_seconds=30.0)
    hang = threading.Event()
    submitted = []

    def never(a, b, center):
        submitted.append((a, b))
        return c.ev.verify._pool.submit(hang.wait)
    c.ev.verify.submit = never
    newcomer = b"\x5a" * 8
    own = make_problem_for(cfg)

    def attack(rec):
        task, _, seeds, _, _ = P.decode_task(rec)
        a, b = c.ev.bounds(cfg.population)[0]
        returns, lengths = evaluate_members(own, task, range(a, b), seeds)[:2]    # honest, from a fresh id
        c.rogue.rpush(P.RESULTS, P.encode_result(newcomer, rec["run"].decode(), rec["nonce"].decode(),
                                                 P.task_digest(rec), 0, a, returns, lengths.astype(np.uint32), None))
        deadline = time.time() + 30
        while not c.logged("is new") and time.time() < deadline:
            time.sleep(0.01)
        t = threading.Thread(target=es.distributed.worker.run_worker, args=(server.worker_url,), daemon=True,
                             kwargs=dict(log=c.worker_logs.append, stop=c.stop, worker_id=trusted))
        t.start()
        c.threads.append(t)
    t = c.during(0, attack)
    try:
        result = c.train()
    finally:
        hang.set()
    t.join()
    assert_identical(result, cfg)
    assert submitted == [], "the master evaluated a chunk although a trusted peer could"
    assert c.ev.verify.trusted(newcomer.hex()) and result.metrics[0]["vouched"] == 1, c.logs
    # an id the master did not issue is trusted from then on: every later generation draws spot
    # checks (issue 43: each member with probability p, so a generation of 64 may draw none)
    assert c.ev.verify._others_trusted() and all(m["spot_rate"] > 0 for m in result.metrics[1:]), result.metrics
    assert c.logged("identical to trusted worker " + trusted.hex())


def test_the_master_keeps_receiving_while_it_checks_a_fresh_cluster(server):
    """A fresh cluster (no id trusted yet): the master's own evaluation, the root of trust,
    runs in the background; every worker's first result is received while it runs (before,
    the master evaluated each new id's chunk in turn and heard nothing meanwhile)."""
    cfg = small(population=256, generations=2)
    c = Cluster(server, cfg, workers=3, start_workers=False)
    gate = threading.Event()
    real = c.ev.verify._evaluate

    def slow(*args):
        gate.wait(60)
        return real(*args)
    c.ev.verify._evaluate = slow

    def watch(rec):
        c.start_workers()
        deadline = time.time() + 60
        while len(c.logged("is new")) < 3 and time.time() < deadline:
            time.sleep(0.01)
        heard.append(len(c.logged("is new")))
        gate.set()
    heard = []
    t = c.during(0, watch)
    result = c.train()
    t.join()
    assert heard == [3], c.logs
    assert_identical(result, cfg)
    first = result.metrics[0]
    assert first["master_chunks"] < CHUNKS and first["vouched"] >= 3, first
    assert all(m["probation_checks"] == 0 for m in result.metrics[1:]), result.metrics


def test_chunks_are_cut_for_the_workers_heard_and_the_master_plays_the_center(server):
    """A problem played one episode at a time: guided chunks for at least MIN_WORKERS workers,
    then for every worker heard in the last generation; the first job queued is the largest
    chunk; no worker plays the center (the master does, meanwhile). Bit-identical to one process."""
    cfg = es.config_for("Acrobot-v1", seed=3, generations=3, population=64, max_steps=30, reward_goal=1e9,
                        hidden=[4])
    reference = es.train(cfg, final_eval=False)
    problem = make_problem_for(cfg)
    logs, first_jobs = [], []
    ev = RedisEvaluator(problem, server.master_url, log=logs.append, lease_seconds=5.0, spot_checks=0)
    real_publish = ev.board._publish

    def spy(job_values, fresh):
        if fresh:
            first_jobs.append(P.decode_job(job_values[0]))     # RPUSH order: the first popped
        return real_publish(job_values, fresh)
    ev.board._publish = spy
    stop = threading.Event()
    threads = [threading.Thread(target=es.distributed.worker.run_worker, args=(server.worker_url,), daemon=True,
                                kwargs=dict(log=lambda m: None, stop=stop)) for _ in range(6)]
    for t in threads:
        t.start()
    try:
        result = es.train(cfg, problem, evaluator=ev, final_eval=False)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        ev.close()
    assert np.array_equal(result.center, reference.center)
    chunks = [m["chunks"] for m in result.metrics]
    assert chunks[0] == len(guided_bounds(64, MIN_WORKERS))
    heard = result.metrics[0]["workers"]           # spot_checks=0: a private cluster, every id used at once
    assert heard > MIN_WORKERS and chunks[1] == len(guided_bounds(64, heard)), (heard, chunks)
    for job in first_jobs:
        assert job["c"] == 0 and job["b"] == 64 and job["b"] - job["a"] >= 2, job
    assert all(m["center_seconds"] > 0 for m in result.metrics)


def test_a_server_without_blmpop_takes_results_one_at_a_time(server):
    """Redis < 7 has no BLMPOP: the master falls back to BLPOP and the run is the same."""
    import redis
    cfg = small(generations=2)
    c = Cluster(server, cfg)

    def old_server(*args, **kw):
        raise redis.ResponseError("unknown command 'BLMPOP', with args beginning with: ")
    c.ev.link.client.blmpop = old_server
    assert_identical(c.train(), cfg)
    assert not c.ev._blmpop


@pytest.mark.slow
def test_a_straggler_gets_a_backup_and_its_late_result_is_dropped(server):
    """An honest worker that takes 12 s over one chunk of generation 1 (a busy lab PC): once
    no job waits, the chunk is handed out again, the other worker's copy counts, and the
    straggler's late copy is dropped (a duplicate, or stale once the generation is over). The run
    does not wait and stays identical."""
    slow = threading.Event()

    def straggler(job, returns, lengths, center):
        if job["g"] == 1 and not slow.is_set():
            slow.set()
            time.sleep(12)
        return returns, lengths, center
    cfg = small(generations=3)
    c = Cluster(server, cfg, workers=1, liars=[straggler], spot_checks=0)
    result = c.train()
    assert result.metrics[1]["seconds"] < 8, "the run waited for the straggler"
    assert_identical(result, cfg)
    assert slow.is_set() and result.metrics[1]["backups"] == 1 and c.logged("a backup"), c.logs


def test_the_leases_of_another_generation_or_nonce_are_never_running_chunks(server):
    """Backups look at the chunks running now. A generation's first look may find the task
    record gone (the server restarted) and publish it again: the leases the master saw in the
    generation before (or under the old nonce) must not count as running, or a backup is cut
    for a chunk this generation does not have (a crash once seen after a Redis restart)."""
    from es.training import make_strategy
    cfg = small(generations=2)
    c = Cluster(server, cfg, workers=0, start_workers=False)
    bd, problem = c.ev.board, c.problem
    strategy = make_strategy(cfg, np.zeros(problem.num_params, dtype=np.float32))
    seeds = es.seeding.episode_seeds(cfg.seed, 0, cfg.episodes_per_member)

    def hold_a_lease(g):
        bounds = c.ev.bounds(cfg.population)
        bd.open(replace(strategy.ask(), generation=g), seeds, seeds[:1], 500, bounds)
        jid = next(iter(bd.members))
        now = sum(x / d for x, d in zip(c.admin.time(), (1, 1e6)))
        c.admin.hset(P.LEASES, jid, json.dumps({"w": "ab" * 8, "n": bd.nonce, "t": now}))
        return jid
    jid0 = hold_a_lease(0)
    bd.requeue_expired({}, 60.0)
    assert bd.running == {jid0: "ab" * 8}
    jid1 = hold_a_lease(1)
    assert bd.running == {} and jid0 not in bd.members, "generation 0's lease counted in generation 1"
    bd.requeue_expired({}, 60.0)
    assert bd.running == {jid1: "ab" * 8}
    c.admin.delete(P.TASK)                 # the server came back empty: the record is published again
    assert bd.requeue_expired({}, 60.0) == len(bd.members)
    assert bd.running == {}, "a lease under the old nonce counted as running"
