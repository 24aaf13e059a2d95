"""``python -m es worker --redis URL [--processes K]``: evaluate chunks for any master.

A worker may start before the master (it waits), join or leave at any time. It reads the
task record for each job's generation (verifying its checksum), renews its lease while it
works, and sends back only returns and episode lengths.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

from ..evaluators import evaluate_members
from . import protocol as P
from .connection import RedisLink, where


def run_worker(url: str, max_jobs: int | None = None, log=None) -> int:
    from ..train import one_blas_thread
    with one_blas_thread():
        return _run_worker(url, max_jobs, log)


def _run_worker(url: str, max_jobs: int | None = None, log=None) -> int:
    log = log or (lambda m: print(m, file=sys.stderr, flush=True))
    from ..envs import make_problem
    link = RedisLink(url, max_outage=None, log=log)
    r, call = link.client, link.call
    wid = os.urandom(8)
    problems: dict = {}
    cached = None   # (generation, sha256, decoded task)
    waiting_said, jobs_done = False, 0
    log(f"worker {wid.hex()} connected to {where(url)}")
    while max_jobs is None or jobs_done < max_jobs:
        item = call(r.blpop, P.JOBS, timeout=1)
        if item is None:
            if not waiting_said:
                log(f"worker {wid.hex()}: waiting for work (a master: python -m es train ENV --redis URL)")
                waiting_said = True
            continue
        waiting_said = False
        try:
            job = P.decode_job(item[1])
            head = call(r.hmget, P.TASK, "generation", "sha256")
            if head[0] is None or int(head[0]) != job["g"]:
                continue  # a job of an older generation: the master has moved on
            if cached is None or cached[:2] != (job["g"], head[1]):
                cached = (job["g"], head[1], P.decode_task(call(r.hgetall, P.TASK)))
            task, spec, seeds, center_seeds = cached[2]
            lease_seconds = float(call(r.hget, P.TASK, "lease_seconds") or 10.0)
        except P.BadPayload as exc:
            log(f"worker {wid.hex()}: dropped a bad job or task record: {exc}")
            continue
        key = json.dumps(spec, sort_keys=True)
        if key not in problems:
            problems[key] = make_problem(spec)
        jid = P.job_id(job)
        stop = threading.Event()

        def heartbeat():
            while True:
                try:
                    call(r.hset, P.LEASES, jid, json.dumps({"w": wid.hex(), "t": link.server_time()}))
                except Exception:
                    pass
                if stop.wait(lease_seconds / 4):
                    return
        beat = threading.Thread(target=heartbeat, daemon=True)
        beat.start()
        members = range(job["a"], min(job["b"], task.population))
        try:
            out = evaluate_members(problems[key], task, members, seeds, center_seeds if job["c"] else None)
            payload = P.encode_result(wid, job["g"], job["a"], out[0], out[1], (out[2], out[3]) if job["c"] else None)
        except Exception as exc:   # tell the master instead of letting the chunk expire forever
            payload = P.encode_error(wid, job["g"], job["a"], len(members), f"{exc.__class__.__name__}: {exc}")
        finally:
            stop.set()
            beat.join()
        # One transaction: a lease in the hash always means "no result yet" (a retry after a
        # lost reply may push a duplicate, which the master drops).
        call(lambda: r.pipeline(transaction=True).rpush(P.RESULTS, payload).hdel(P.LEASES, jid).execute())
        jobs_done += 1
    return 0


def run_workers(url: str, processes: int) -> int:
    """K worker processes (each one core's worth of work); Ctrl-C stops them all."""
    if processes <= 1:
        return run_worker(url)
    # SIGTERM must run the clean-up below, or the children outlive us.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    env = {**os.environ, "ES_REDIS_URL": url}   # not on the command line, where ps shows it
    procs = [subprocess.Popen([sys.executable, "-m", "es", "worker", "--processes", "1"], env=env)
             for _ in range(processes)]
    try:
        while all(p.poll() is None for p in procs):
            time.sleep(0.5)
        return max(p.returncode or 0 for p in procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
