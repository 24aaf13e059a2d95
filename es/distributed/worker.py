"""``python -m es worker --redis URL [--processes K]``: evaluate chunks for any master.

A worker may start before the master, join or leave at any time. Per job it reads (and
checks) the task record, renews its lease while it works, and sends back returns and episode
lengths. Nothing it reads makes it exit: what it cannot use is logged and skipped or
reported to the master; a key of the wrong type makes it wait for the master's repair.

A worker the master starts itself (``--redis`` with local workers) gets from its environment
an id the master issued (``ES_WORKER_ID``: the master trusts it from its first result) and
the problem to build before it connects (``ES_WARM``); it then says it is ready
(``keys.ready_field``).

Each generation it announces its platform (``platform``) before its first job; where the
master checks results and is of another platform class, it says plainly that its results
cannot be checked, hands the job back and waits for another run.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time

from ..evaluators import evaluate_members
from . import platform as PL
from . import protocol as P
from .connection import RedisLink, where
from .server import die_with_parent


def run_worker(url: str, max_jobs: int | None = None, log=None, password: str | None = None, tamper=None,
               stop: threading.Event | None = None, worker_id: bytes | None = None) -> int:
    """``worker_id``: 8 bytes (default: ``ES_WORKER_ID``, else random)."""
    from ..training import one_blas_thread
    if stop is None:
        die_with_parent()   # started by an embedded master or by run_workers: never outlive it
    with one_blas_thread():
        return _run_worker(url, max_jobs, log, password, tamper, stop, worker_id)


def _own_id() -> bytes:
    """The id the master issued (``ES_WORKER_ID``, 16 hex digits), else a fresh random one."""
    given = os.environ.pop("ES_WORKER_ID", "")       # not passed on to anything this process starts
    try:
        return bytes.fromhex(given) if len(given) == 16 else os.urandom(8)
    except ValueError:
        return os.urandom(8)


def _warm(log) -> dict:
    """The problem named by ``ES_WARM`` (``{"spec": ..., "episodes": k}``), built and warmed
    for ``k`` episodes at once before the first job: spec key -> problem."""
    from ..envs import make_problem
    raw = os.environ.pop("ES_WARM", "")
    if not raw:
        return {}
    try:
        want = json.loads(raw)
        P.validate_spec(want["spec"])
        problem = make_problem(want["spec"])
        problem.warm_up(int(want.get("episodes", 1)))
    except Exception as exc:   # noqa: BLE001 -- the first job builds it again, and reports what fails
        log(f"worker: could not build the problem before the first job ({exc.__class__.__name__}: {exc})")
        return {}
    return {json.dumps(want["spec"], sort_keys=True): problem}


def _run_worker(url, max_jobs=None, log=None, password=None, tamper=None, stop=None, worker_id=None) -> int:
    """``tamper(job, returns, lengths, center) -> (returns, lengths, center)``: a liar (tests, benchmarks)."""
    import redis
    log = log or logging.getLogger(__name__).warning
    from ..envs import make_problem
    wid = worker_id or _own_id()
    problems: dict = _warm(log)
    link = RedisLink(url, max_outage=None, log=log, password=password)
    r, call = link.client, link.call
    cached = None   # (run, nonce, decoded task, the master's platform)
    said: set = set()
    jobs_done = 0
    mine = PL.describe()
    refused = None  # the run whose master cannot verify this worker: its jobs are left to others
    announced = None   # the generation (nonce) whose es:leases holds this worker's platform

    def once(key, msg):
        if key not in said:
            said.add(key)
            log(msg)

    def more() -> bool:      # another job to take (after this many)
        return (max_jobs is None or jobs_done < max_jobs) and not (stop is not None and stop.is_set())

    log(f"worker {wid.hex()} connected to {where(url)}")
    clock = ServerClock(link)
    if problems:       # started by a master, which waits for this before its first generation
        try:
            call(r.hset, P.LEASES, P.ready_field(wid.hex()), json.dumps({"w": wid.hex(), "n": "ready",
                                                                        "t": clock()}))
        except redis.ResponseError as exc:
            log(f"worker {wid.hex()}: could not say it is ready ({exc})")
    item = None    # a job taken with the last result (one round trip for both)
    while more():
        if refused is not None:      # wait for another run (a master of this worker's class)
            try:
                run = call(r.hget, P.TASK, "run")
            except redis.ResponseError:
                run = None
            if run is not None and run.decode(errors="replace") != refused:
                refused = None
            else:
                time.sleep(2.0 if stop is None else 0.2)
                continue
        try:
            item = item or call(r.blpop, P.JOBS, timeout=1)
        except redis.ResponseError as exc:
            once("jobs-type", f"worker {wid.hex()}: cannot pop {P.JOBS} ({exc}); waiting for the master to repair it")
            time.sleep(1.0)
            continue
        if item is None:
            once("waiting", f"worker {wid.hex()}: waiting for work (a master: python -m es train ENV --redis URL)")
            continue
        said.discard("waiting")
        raw, item = item[1], None
        try:
            job = P.decode_job(raw)
        except P.BadPayload as exc:
            log(f"worker {wid.hex()}: dropped a bad job: {exc}")
            continue
        if cached is None or cached[:2] != (job["r"], job["n"]):   # a task not read yet: is it the current one?
            try:
                head = call(r.hmget, P.TASK, "run", "nonce")
            except redis.ResponseError as exc:
                once("task-type", f"worker {wid.hex()}: cannot read {P.TASK} ({exc}); skipping the job")
                continue
            if [h.decode(errors="replace") if h is not None else None for h in head] != [job["r"], job["n"]]:
                continue  # a job of another run or an older generation: the master has moved on
            try:
                record = P.decode_task(call(r.hgetall, P.TASK))
                cached = (job["r"], job["n"], record, PL.decode_or_none(record[4]["platform"]))
            except (P.BadPayload, redis.ResponseError) as exc:
                cached = None
                log(f"worker {wid.hex()}: the task record is unusable ({exc}); telling the master")
                _push(link, P.encode_error(wid, job["r"], job["n"], "00" * 8, job["g"], job["a"],
                                           job["b"] - job["a"], f"task: {exc}"), None, log)
                time.sleep(1.0)
                continue
        (task, spec, seeds, center_seeds, meta), theirs = cached[2:]
        if announced != job["n"]:     # once per generation: a new generation clears es:leases
            try:
                call(r.hset, P.LEASES, PL.field(wid.hex()), PL.encode(mine))
                announced = job["n"]
            except redis.ResponseError as exc:
                once("announce", f"worker {wid.hex()}: could not announce its platform ({exc})")
        if meta["verify"] and theirs is not None and theirs["key"] != mine["key"]:
            log(f"worker {wid.hex()}: the master of run {job['r']} cannot verify this worker, so it will not use "
                f"its results (this is no ban). It checks a result by replaying it, and a replay on another "
                f"platform class may differ in the last bits: {PL.differences(theirs, mine)}. Run this worker on "
                f"a PC of the master's class (the same packages and C math library), or start the master with "
                f"--spot-checks 0 where every worker is yours. Waiting for another run.")
            refusal = f"{PL.REFUSAL} {mine['key']} differs from the master's {theirs['key']}"
            _push(link, P.encode_error(wid, job["r"], job["n"], meta["digest"], job["g"], job["a"], job["b"] - job["a"],
                                       refusal), None, log)
            refused = job["r"]
            continue
        if task.generation != job["g"] or job["b"] > task.population:
            log(f"worker {wid.hex()}: dropped job {P.job_id(job)}: not a chunk of generation {task.generation} "
                f"(population {task.population})")
            continue
        jid = P.job_id(job)
        stop_lease = _heartbeat(link, jid, wid.hex(), job["n"], meta["lease_seconds"] / 4, clock)
        key = json.dumps(spec, sort_keys=True)
        try:
            if key not in problems:
                problems[key] = make_problem(spec)
            out = evaluate_members(problems[key], task, range(job["a"], job["b"]), seeds,
                                   center_seeds if job["c"] else None)
            returns, lengths, center = out[0], out[1], (out[2], out[3]) if job["c"] else None
            if tamper is not None:
                returns, lengths, center = tamper(job, returns, lengths, center)
            payload = P.encode_result(wid, job["r"], job["n"], meta["digest"], job["g"], job["a"], returns, lengths,
                                      center, out.obs)
        except Exception as exc:   # tell the master instead of letting the chunk expire or exiting
            what = "problem" if key not in problems else "evaluation"
            payload = P.encode_error(wid, job["r"], job["n"], meta["digest"], job["g"], job["a"], job["b"] - job["a"],
                                     f"{what}: {exc.__class__.__name__}: {exc}")
            log(f"worker {wid.hex()}: chunk {jid} failed ({exc.__class__.__name__}: {exc}); told the master")
        finally:
            stop_lease()
        jobs_done += 1
        item = _push(link, payload, jid, log, take_next=more())
    return 0


class ServerClock:
    """Redis's TIME without a round trip per heartbeat: the offset to this host's clock,
    measured again every minute (leases are compared with the server's time, not ours)."""

    def __init__(self, link):
        self.link, self.offset, self.measured = link, 0.0, -1e9

    def __call__(self) -> float:
        if time.monotonic() - self.measured > 60:
            self.offset, self.measured = self.link.server_time() - time.time(), time.monotonic()
        return time.time() + self.offset


def _heartbeat(link, jid, worker, nonce, every, clock):
    """Write ``es:leases[jid]`` now and renew it every ``every`` seconds, beside the work (one
    round trip each: the server's time comes from ``clock``). Returns the function that stops
    it, which waits for a write in flight: a lease must never land after the result."""
    stop = threading.Event()

    def beat():
        while True:
            try:
                value = json.dumps({"w": worker, "n": nonce, "t": clock()})
                link.call(link.client.hset, P.LEASES, jid, value)
            except Exception:
                pass   # a missed heartbeat only means the chunk may be handed out twice
            if stop.wait(every):
                return
    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    return lambda: (stop.set(), thread.join())


def _push(link, payload, jid, log, tries: int = 5, take_next: bool = False):
    """Push a result and drop the lease in one transaction (a lease in the hash always means
    "no result yet"); with ``take_next``, take the next job in the same round trip (inside a
    transaction BLPOP does not wait) and return it as BLPOP would, else None. A key of the
    wrong type is retried until the master repairs it."""
    import redis

    def build(pipe):
        pipe.rpush(P.RESULTS, payload)
        if jid is not None:
            pipe.hdel(P.LEASES, jid)
        if take_next:
            pipe.blpop(P.JOBS, timeout=0)
    for attempt in range(tries):
        out = link.pipeline(build, transaction=True, raise_on_error=False)
        if not isinstance(out[0], redis.ResponseError):
            got = out[-1] if take_next else None
            return got if isinstance(got, (list, tuple)) and len(got) == 2 else None
        log(f"redis: could not push a result ({out[0]}); retrying")
        time.sleep(1.0 + attempt)
    log("redis: gave up pushing a result; the master will hand the chunk out again")
    return None


def run_workers(url: str, processes: int, password: str | None = None) -> int:
    """K worker processes (each one core's worth of work); Ctrl-C or SIGTERM stops them all."""
    if processes <= 1:
        return run_worker(url, password=password)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))   # runs the clean-up below: no child outlives us
    die_with_parent()
    env = {**os.environ, "ES_REDIS_URL": url, "ES_PARENT_PID": str(os.getpid())}   # URL: not on the command line
    if password:
        env["ES_REDIS_PASSWORD"] = password
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
