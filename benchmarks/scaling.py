"""How ES scales with workers, against the machine's own ceiling. One JSON line per point, then
``docs/scaling.png``.

For each worker count N (default 1, 2, 4, ... up to the cores), in the same run and
interleaved round by round (a shared machine drifts; only ratios within a round count):

* ``bare``: N processes stepping the same games as ES (``pong.games``, 32 slots each) with a
  fixed action, no policy, no ES: what the machine can do. Its speed-up over one process is
  the ceiling an ES speed-up is held against.
* ``joblib`` / ``redis`` / ``dask``: ``python -m es train pong --policy P --population POP
  --max-steps 500`` with ``--workers N`` (joblib), ``--redis --workers N`` (embedded server,
  N local workers) or ``--dask local --workers N``, exactly as a user runs it; N = 1 is the
  in-process run all three are compared with. Env steps per second over the steady
  generations (after ``--warmup``); the warm-up generations, the generations in which the
  Redis master checked new workers (probation) and the start-up before generation 0 are
  reported on their own.

``efficiency`` = (ES steps/s with N / ES steps/s with 1) / (bare with N / bare with 1), per
round; the median and the range over rounds are printed. ``worst_generation`` is the slowest
generation of the run (warm-up and probation included) over the steady median: the "no
honest generation above 1.5x" figure.

    python benchmarks/scaling.py                     # 2 cores: N = 1, 2; dense, population 128
    python benchmarks/scaling.py --workers 1 2 4 8 16 --policies dense objects --populations 128 1024
    python benchmarks/scaling.py --parts             # per-component costs (no end-to-end runs)
    python benchmarks/scaling.py --predict parts.jsonl [--workers 4 16 64]   # PREDICTED efficiency from them
    python benchmarks/scaling.py --replot saved.jsonl [predicted.jsonl]

``--root DIR`` runs another checkout's ``es`` (e.g. the commit before a change) with this script.
The prediction's arithmetic is in ``scaling_model.py``, the picture in ``scaling_plot.py``.
"""
from _common import pythonpath  # (and the import path)

import argparse  # noqa: E402
import json  # noqa: E402
import multiprocessing as mp  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from scaling_model import makespan, predictions  # noqa: E402
from scaling_plot import plot  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
UNDER_TEST = str(ROOT)          # the checkout measured (--root)
ROWS: list = []


def emit(row: dict) -> None:
    row = {"benchmark": "scaling", **row}
    ROWS.append(row)
    print(json.dumps(row), flush=True)


# ---------------------------------------------------------------- the bare ceiling
def _bare_process(root, barrier, seconds, max_steps, out):
    """One process: 32 games of ``pong.games`` with a constant action, after a common start."""
    sys.path.insert(0, root)
    from threadpoolctl import threadpool_limits
    threadpool_limits(1)
    from pong.env import downsample_batch, stack_batch
    from pong.games import PongGames
    games, constant = PongGames(32, downsample_batch, stack_batch), lambda e, obs: np.zeros(len(e), np.int64)
    games.play(constant, np.arange(32), max_steps=1)          # the 32 games exist before the clock starts
    barrier.wait()
    steps, t0, seed = 0, time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        _, lengths = games.play(constant, np.arange(32) + seed, max_steps=max_steps)
        steps, seed = steps + int(lengths.sum()), seed + 32
    out.put(steps / (time.perf_counter() - t0))


def bare_steps_per_second(n: int, seconds: float, max_steps: int, root: str) -> float:
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_bare_process, args=(root, barrier, seconds, max_steps, out)) for _ in range(n)]
    for p in procs:
        p.start()
    total = sum(out.get() for _ in procs)
    for p in procs:
        p.join()
    return total


# ---------------------------------------------------------------- ES as a user runs it
def train_command(how: str, n: int, policy: str, population: int, max_steps: int, generations: int,
                  out: str, extra=()) -> list[str]:
    """``python -m es train pong ...`` as a user runs it: ``how`` is joblib, redis or dask (with
    one worker, all three are the in-process run)."""
    cmd = [sys.executable, "-m", "es", "train", "pong", "--policy", policy, "--population", str(population),
           "--max-steps", str(max_steps), "--generations", str(generations), "--workers", str(n),
           "--eval-episodes", "1", "--out", out, "--no-progress", "--json", *extra]
    if n > 1:
        cmd += {"redis": ["--redis"], "dask": ["--dask", "local"]}.get(how, [])
    return cmd


def child_env(root: str) -> dict:
    """The environment of an ES run of the checkout ``root``: its code first, one BLAS thread."""
    return {**os.environ, "PYTHONPATH": pythonpath(root), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def es_run(how: str, n: int, policy: str, population: int, max_steps: int, generations: int, root: str,
           extra=()) -> dict:
    """``python -m es train pong ...``; the metrics of every generation and the wall time."""
    with tempfile.TemporaryDirectory(prefix="es-scaling-") as tmp:
        cmd = train_command(how, n, policy, population, max_steps, generations, f"{tmp}/run", extra)
        env = child_env(root)
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp)
        wall = time.perf_counter() - t0
        if out.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
        metrics = [json.loads(line) for line in Path(f"{tmp}/run/metrics.jsonl").read_text().splitlines()]
        summary = json.loads(out.stdout.strip().splitlines()[-1])
    return {"metrics": metrics, "wall": wall, "summary": summary, "log": out.stderr}


def steady(run: dict, warmup: int) -> dict:
    """Steps/s over the steady generations; warm-up and probation generations on their own."""
    m = run["metrics"]
    probation = [r["generation"] for r in m if r.get("probation_checks")]
    timed = [r for r in m if r["generation"] >= warmup and r["generation"] not in probation]
    if not timed:
        raise RuntimeError("no steady generation: raise --generations")
    seconds = [r["seconds"] for r in timed]
    median = float(np.median(seconds))
    summary = run["summary"]
    return {"steps_per_s": sum(r["gen_env_steps"] for r in timed) / sum(seconds),
            "steady_seconds": median,
            "warmup_seconds": [round(r["seconds"], 3) for r in m if r["generation"] < warmup],
            "in_process_generations": [r["generation"] for r in m if r.get("evaluated") == "local"],
            "handed_over_generations": [r["generation"] for r in m if r.get("evaluated") == "handed over"],
            "probation_generations": probation,
            "probation_seconds": [round(r["seconds"], 3) for r in m if r["generation"] in probation],
            "master_chunks": sum(r.get("master_chunks", 0) for r in m),
            "worst_generation": max(r["seconds"] for r in m) / median,
            "worst_after_first": max([r["seconds"] for r in m if r["generation"] > 0] or [median]) / median,
            "startup_seconds": summary.get("startup_seconds", 0.0) + run["wall"] - summary["train_seconds"]}


def scaling(args) -> None:
    """Round by round: the bare ceiling, ES in one process, then each evaluator with N workers
    for every checkout (``--root``, and ``--compare-root`` for a before/after in one run)."""
    roots = {"new": str(Path(args.root).resolve())}
    if args.compare_root:
        roots = {"before": str(Path(args.compare_root).resolve()), **roots}
    ways = [w for w in args.evaluators if w in ("joblib", "redis", "dask")]
    counts = sorted(set(args.workers) | {1})
    gens = args.warmup + args.generations
    for policy in args.policies:
        for population in args.populations:
            rounds = []
            for r in range(args.rounds):
                got = {}
                for n in counts:
                    # The ceiling is measured next to each ES run (a shared machine drifts within minutes).
                    if n == 1:     # in-process ES is the same code in every checkout
                        got[("bare", 1, "in-process", "new")] = bare_steps_per_second(1, args.bare_seconds,
                                                                                    args.max_steps, roots["new"])
                        run = es_run("in-process", 1, policy, population, args.max_steps, gens, roots["new"])
                        got[("in-process", 1, "new")] = steady(run, args.warmup)
                        emit(_row(got, ("in-process", 1, "new"), got[("in-process", 1, "new")],
                                  {"kind": "round", "round": r, "code": "new", "policy": policy,
                                   "population": population, "max_steps": args.max_steps}))
                        continue
                    for way in ways:
                        for label, root in roots.items():     # before and after side by side
                            got[("bare", n, way, label)] = bare_steps_per_second(n, args.bare_seconds, args.max_steps,
                                                                                roots["new"])
                            run = es_run(way, n, policy, population, args.max_steps, gens, root)
                            got[(way, n, label)] = steady(run, args.warmup)
                            emit(_row(got, (way, n, label), got[(way, n, label)],
                                      {"kind": "round", "round": r, "code": label, "policy": policy,
                                       "population": population, "max_steps": args.max_steps}))
                rounds.append(got)
            for key in rounds[0]:
                if key[0] == "bare":
                    continue
                way, n, label = key
                speed = [_speedup(g, key) for g in rounds]
                bare = [_bare(g, key) for g in rounds]
                eff = [s / b for s, b in zip(speed, bare)]
                worst = [g[key]["worst_generation"] for g in rounds]
                emit({"kind": "point", "code": label, "policy": policy, "population": population,
                      "max_steps": args.max_steps, "evaluator": way, "workers": n, "rounds": len(rounds),
                      "cores": os.cpu_count(), "bare_speedup": round(float(np.median(bare)), 3),
                      "speedup": round(float(np.median(speed)), 3), "efficiency": round(float(np.median(eff)), 3),
                      "efficiency_range": [round(min(eff), 3), round(max(eff), 3)],
                      "worst_generation": round(float(np.median(worst)), 3),
                      "startup_seconds": round(float(np.median([g[key]["startup_seconds"] for g in rounds])), 2)})


def _bare(got, key) -> float:
    """The bare speed-up next to the ES run ``key``: N processes against one."""
    way, n, label = key
    return got[("bare", n, way, label)] / got[("bare", 1, "in-process", "new")] if n > 1 else 1.0


def _speedup(got, key) -> float:
    return got[key]["steps_per_s"] / got[("in-process", 1, "new")]["steps_per_s"]


def _row(got, key, s, head) -> dict:
    way, n, label = key
    bare, speedup = _bare(got, key), _speedup(got, key)
    return {**head, "evaluator": way, "workers": n, "bare_speedup": round(bare, 3),
            "es_steps_per_s": round(s["steps_per_s"]), "speedup": round(speedup, 3),
            "efficiency": round(speedup / bare, 3),
            **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in s.items() if k != "steps_per_s"}}


# ---------------------------------------------------------------- per-component costs (--parts)
def _pong(policy="dense", max_steps=500):
    from pong.plugin import make_problem
    import es
    return make_problem(es.config_for("pong", extra={"policy": policy}, max_steps=max_steps), True)


def _members(policy):
    """Pong (100-step cap) and a generation's task to play members of, one episode each: the
    ES side of the per-step costs; ``play(size)(k)`` plays members k..k+size, warmed once."""
    from es import seeding
    from es.evaluators import evaluate_members
    from es.optimizers import Adam
    from es.strategy import OpenES
    problem = _pong(policy, max_steps=100)
    task = OpenES(problem.initial_params(0), Adam(problem.num_params, 0.01), population=1024, sigma=0.05, seed=0).ask()
    seeds = seeding.episode_seeds(0, 0, 1)

    def play(size):
        evaluate_members(problem, task, np.arange(size), seeds)
        return lambda k: evaluate_members(problem, task, np.arange(size) + k % 512, seeds)[1]
    return problem, play


def _cpu_us_per_step(go, size: int, seconds: float) -> float:
    """CPU microseconds per agent step of ``go(k)`` (the steps of chunk k..k+size) over ``seconds`` of CPU."""
    c0, steps, k = time.process_time(), 0, 0
    while time.process_time() - c0 < seconds:
        steps, k = steps + int(np.sum(go(k))), k + size
    return 1e6 * (time.process_time() - c0) / steps


def part_step_cpu(policies, sizes=(1, 2, 4, 8, 32), seconds=2.0):
    """CPU microseconds per agent step in one process: bare games (a constant action) against
    ES members of one chunk (noise, policy, games), by chunk size. What a worker computes
    beyond the bare games, whatever the machine's load (CPU time, not wall time)."""
    from pong.env import downsample_batch, stack_batch
    from pong.games import PongGames
    constant = lambda e, obs: np.zeros(len(e), np.int64)  # noqa: E731
    for policy in policies:
        problem, play = _members(policy)
        for size in sizes:
            games = PongGames(size, downsample_batch, stack_batch)
            games.play(constant, np.arange(size), max_steps=1)
            es = play(size)
            bare = _cpu_us_per_step(lambda k: games.play(constant, np.arange(size) + k, max_steps=100)[1], size, seconds)
            member = _cpu_us_per_step(es, size, seconds)
            emit({"kind": "part", "part": "step_cpu", "policy": policy, "chunk": size,
                  "bare_us_per_step": round(bare, 1), "es_us_per_step": round(member, 1),
                  "es_over_bare": round(member / bare, 3)})
        problem.close()


def step_costs(policy, sizes=(1, 2, 4, 8, 16, 32), seconds=2.0) -> dict:
    """chunk size -> CPU microseconds per agent step of ES members in one process (one BLAS thread)."""
    problem, play = _members(policy)
    out = {size: _cpu_us_per_step(play(size), size, seconds) for size in sizes}
    problem.close()
    return out


def part_schedule(policies, populations, worker_counts=(2, 4, 8, 16, 64), spreads=(0.0, 0.1, 0.2), steps=500,
                  per_chunk_s=0.002, trials=200):
    """The efficiency a chunk layout allows, from the measured cost per step of each chunk size:
    workers pull chunks; each worker's speed is 1 +- ``spread`` (uniform: a shared or uneven
    machine); efficiency = the ideal time (all the work at the in-process cost per step of 32
    games, spread evenly over the workers' total speed) over the simulated makespan. Layouts:
    ``even-4`` (4 even chunks per worker, the center on the last chunk, handed out last),
    ``even-8-chunks`` (8 chunks whatever the workers), ``guided`` (es's layout: shrinking chunks,
    largest first, the master plays the center)."""
    from es.parallel import chunk_bounds, dispatch_order, guided_bounds
    rng = np.random.default_rng(0)
    for policy in policies:
        costs = step_costs(policy)
        emit({"kind": "part", "part": "step_cost", "policy": policy,
              "us_per_step_by_chunk": {str(k): round(v, 1) for k, v in costs.items()}})
        for population in populations:
            for n in worker_counts:
                layouts = {"even-4": (chunk_bounds(population, 4 * n), None),
                           "even-8-chunks": (chunk_bounds(population, 8), None),
                           "guided": (guided_bounds(population, n), "guided")}
                for spread in spreads:
                    row = {"kind": "part", "part": "schedule", "policy": policy, "population": population,
                           "workers": n, "speed_spread": spread}
                    for name, (bounds, how) in layouts.items():
                        order = dispatch_order(bounds) if how else list(range(len(bounds)))
                        effs = []
                        for _ in range(trials if spread else 1):
                            speeds = 1 + rng.uniform(-spread, spread, n)
                            ideal = steps * (population + 1) * costs[32] * 1e-6 / speeds.sum()
                            effs.append(ideal / makespan(bounds, order, speeds, costs, steps, per_chunk_s,
                                                         center_episodes=0 if how else 1))
                        row[name] = round(float(np.mean(effs)), 3)
                        row[f"{name}_chunks"] = len(bounds)
                    emit(row)


def part_master(policies, populations, repeats=20):
    """The master's own work per generation, outside evaluation: ask, tell (ranks, the noise
    regenerated for the update, Adam), the checkpoint (fsync) and the metrics line."""
    import es
    from es.training import make_strategy, _save, _append_metrics
    for policy in policies:
        problem = _pong(policy)
        for population in populations:
            cfg = es.config_for("pong", population=population, extra={"policy": policy})
            strategy = make_strategy(cfg, problem.initial_params(0))
            rng = np.random.default_rng(0)
            t = {"ask": [], "tell": [], "checkpoint": [], "metrics": []}
            with tempfile.TemporaryDirectory() as tmp:
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    strategy.ask()
                    t1 = time.perf_counter()
                    strategy.tell(rng.standard_normal(population))
                    t2 = time.perf_counter()
                    state = {"streak": 0, "env_steps": 0, "train_seconds": 0.0, "finished": None}
                    _save(Path(tmp), strategy, cfg, problem, state, t2)
                    t3 = time.perf_counter()
                    _append_metrics(Path(tmp) / "metrics.jsonl", {"generation": 0, "returns": None}, t3, state)
                    t4 = time.perf_counter()
                    for k, v in zip(t, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                        t[k].append(v)
            emit({"kind": "part", "part": "master", "policy": policy, "population": population,
                  "params": problem.num_params, **{f"{k}_ms": round(1e3 * float(np.median(v)), 3) for k, v in t.items()}})
        problem.close()


def _dispatch_generation(evaluator, problem, population, generations=4):
    """Median seconds of a generation of 1-step episodes (the work is ~0.4 ms per member)."""
    from es import seeding
    from es.optimizers import Adam
    from es.strategy import OpenES
    strategy = OpenES(problem.initial_params(0), Adam(problem.num_params, 0.01), population=population, sigma=0.05,
                      seed=0)
    times = []
    for g in range(generations + 1):
        seeds = seeding.episode_seeds(0, g, 1)
        t0 = time.perf_counter()
        evaluator.evaluate(strategy.ask(), seeds, seeds)
        times.append(time.perf_counter() - t0)
    return float(np.median(times[1:]))


def part_dispatch(worker_counts, chunk_counts=(8, 32, 128), population=256):
    """What a generation costs beyond its work: CartPole episodes of one step with a policy of
    Pong's size (3,354 parameters), so that the wall time is dispatch, transfer, gathering and
    the workers' per-chunk set-up. joblib, Redis (embedded server, worker processes) and Dask (a
    local cluster) with N workers and C chunks; per chunk = slope over C."""
    from es.parallel import ParallelEvaluator
    from es.evaluators import LocalEvaluator
    from es.envs import EnvProblem
    problem = EnvProblem("CartPole-v1", hidden=(256, 8), max_steps=1)
    local = _dispatch_generation(LocalEvaluator(problem), problem, population)
    emit({"kind": "part", "part": "dispatch", "evaluator": "in-process", "workers": 1, "population": population,
          "generation_ms": round(1e3 * local, 2)})
    for n in worker_counts:
        for c in chunk_counts:
            ev = ParallelEvaluator(problem, workers=n, chunks_per_worker=max(1, c // n), adaptive=False)
            ms = 1e3 * _dispatch_generation(ev, problem, population)
            ev.close()
            emit({"kind": "part", "part": "dispatch", "evaluator": "joblib", "workers": n, "chunks": c,
                  "population": population, "generation_ms": round(ms, 2)})
        for c in chunk_counts:
            ms = 1e3 * _redis_generation(problem, n, c, population)
            emit({"kind": "part", "part": "dispatch", "evaluator": "redis", "workers": n, "chunks": c,
                  "population": population, "generation_ms": round(ms, 2)})
        # benchmarks/distributed.py, first on the path as this script's folder, would shadow dask's
        # ``distributed`` package (here and in the cluster's spawned processes): the folder goes last.
        here = str(Path(__file__).resolve().parent)
        sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != here] + [here]
        from es.distributed.dask_evaluator import DaskEvaluator
        for c in chunk_counts:
            ev = DaskEvaluator(problem, "local", workers=n, chunks=c, log=lambda m: None)
            try:
                _dispatch_generation(ev, problem, population, generations=2)     # every worker warm
                ms = 1e3 * _dispatch_generation(ev, problem, population)
            finally:
                ev.close()
            emit({"kind": "part", "part": "dispatch", "evaluator": "dask", "workers": n, "chunks": c,
                  "population": population, "generation_ms": round(ms, 2)})


def part_latency(delays=(0.0, 2.0), chunk_counts=(8, 32), population=256, workers=2):
    """What a network's latency costs a Redis generation: 1-step generations (the work is
    nothing) with the workers reaching the server directly or through ``scripts/delay_relay.py``
    at ``delay`` ms each way (a round trip 2 x delay longer), on loopback: no root needed."""
    from es.envs import EnvProblem
    problem = EnvProblem("CartPole-v1", hidden=(256, 8), max_steps=1)
    for delay in delays:
        for c in chunk_counts:
            ms = 1e3 * _redis_generation(problem, workers, c, population, delay_ms=delay)
            emit({"kind": "part", "part": "latency", "evaluator": "redis", "workers": workers, "chunks": c,
                  "population": population, "delay_ms": delay, "generation_ms": round(ms, 1)})


def _proc_cpu(root_pid: int, seen: dict) -> None:
    """CPU seconds so far of ``root_pid`` and every process below it (Linux ``/proc``), with
    their command lines, into ``seen``."""
    from classroom.sandbox import process_table, process_tree
    tick, table = os.sysconf("SC_CLK_TCK"), process_table()
    for pid in process_tree(root_pid, table) & table.keys():
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        seen[pid] = ((int(table[pid][11]) + int(table[pid][12])) / tick, cmd)   # utime + stime


def part_cpu_share(worker_counts, evaluators=("joblib", "redis", "dask"), population=128, max_steps=500,
                   warmup=2, generations=3):
    """Where the CPU of the steady generations goes (``python -m es train pong`` as in the
    end-to-end runs; Linux ``/proc``, polled every 0.1 s from the end of generation ``warmup - 1``
    to the end of the run): the N busiest processes below the master are its workers; the rest
    is the master itself (its update, polling, the center and spot checks it plays, the final
    one-episode evaluation), the Redis server, and the rest (Dask's scheduler and nannies,
    joblib's resource tracker). With N workers on N cores the CPU the workers do not get is
    taken from them: ``workers_share`` bounds the efficiency on such a machine."""
    for n in worker_counts:
        for way in evaluators:
            with tempfile.TemporaryDirectory(prefix="es-scaling-") as tmp:
                cmd = train_command(way, n, "dense", population, max_steps, warmup + generations, f"{tmp}/run")
                proc = subprocess.Popen(cmd, env=child_env(UNDER_TEST), cwd=tmp, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
                metrics, base, seen, t0 = Path(f"{tmp}/run/metrics.jsonl"), None, {}, None
                while proc.poll() is None:
                    _proc_cpu(proc.pid, seen)
                    if base is None and metrics.exists() and len(metrics.read_text().splitlines()) >= warmup:
                        base, t0 = dict(seen), time.perf_counter()
                    time.sleep(0.1)
                wall = time.perf_counter() - (t0 or time.perf_counter())
                if proc.returncode != 0 or base is None:
                    raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode})")
            used = {pid: (c - base.get(pid, (0.0,))[0], cmd) for pid, (c, cmd) in seen.items()}
            master = used.pop(proc.pid, (0.0, ""))[0]
            is_server = lambda cmd: "redis-server" in cmd or "valkey" in cmd  # noqa: E731
            server = sum(c for c, cmd in used.values() if is_server(cmd))
            rest = sorted((c for c, cmd in used.values() if not is_server(cmd)), reverse=True)
            workers, other = sum(rest[:n]), sum(rest[n:])
            total = master + server + workers + other
            emit({"kind": "part", "part": "cpu_share", "evaluator": way, "workers": n, "population": population,
                  "max_steps": max_steps, "steady_generations": generations, "wall_s": round(wall, 1),
                  "cpu_s": {"workers": round(workers, 2), "master": round(master, 2), "server": round(server, 2),
                            "other": round(other, 2)},
                  "workers_share": round(workers / total, 3)})


def _redis_generation(problem, n, chunks, population, delay_ms: float = 0.0):
    from es.distributed.master import RedisEvaluator
    from es.distributed.server import EmbeddedRedis
    from es.distributed.server import free_port
    with EmbeddedRedis() as server:
        url, relay = server.worker_url, None
        if delay_ms:
            port = free_port()
            relay = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "delay_relay.py"), "127.0.0.1", str(port),
                                      "127.0.0.1", str(server.port), str(delay_ms)], stdout=subprocess.PIPE, text=True)
            relay.stdout.readline()      # listening
            url = url.replace(f":{server.port}/", f":{port}/")
        env = {**os.environ, "ES_REDIS_URL": url, "PYTHONPATH": pythonpath(UNDER_TEST)}
        procs = [subprocess.Popen([sys.executable, "-m", "es", "worker"], env=env, stderr=subprocess.DEVNULL)
                 for _ in range(n)]
        try:
            ev = RedisEvaluator(problem, server.master_url, chunks=chunks, log=lambda m: None, spot_checks=0)
            _dispatch_generation(ev, problem, population, generations=2)     # every worker connected and warm
            return _dispatch_generation(ev, problem, population)
        finally:
            for p in procs + ([relay] if relay else []):
                p.terminate()
            for p in procs + ([relay] if relay else []):
                p.wait()


# ---------------------------------------------------------------- a prediction from the parts (--predict)
def predict(rows, worker_counts=(16,), **kw) -> None:
    """Emit ``scaling_model.predictions``' lines (its docstring says what the model counts)."""
    for row in predictions(rows, worker_counts, **kw):
        emit(row)


def main():
    cores = os.cpu_count() or 1
    default_workers = [1 << k for k in range(cores.bit_length()) if 1 << k <= cores]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, nargs="+", default=default_workers,
                    help=f"worker counts [{' '.join(map(str, default_workers))}: powers of 2 up to the cores]")
    ap.add_argument("--evaluators", nargs="+", default=["joblib", "redis", "dask"], choices=["joblib", "redis", "dask"])
    ap.add_argument("--policies", nargs="+", default=["dense"], choices=["dense", "objects", "conv"])
    ap.add_argument("--populations", type=int, nargs="+", default=[128])
    ap.add_argument("--max-steps", type=int, default=500)
    ap.add_argument("--generations", type=int, default=3, help="steady generations timed per run [3]")
    ap.add_argument("--warmup", type=int, default=2, help="generations before the steady ones [2]")
    ap.add_argument("--rounds", type=int, default=2, help="repeats, interleaved [2]")
    ap.add_argument("--bare-seconds", type=float, default=8.0, help="seconds of bare games next to each ES run [8]")
    ap.add_argument("--root", default=str(ROOT), help="checkout whose es/ and pong/ are measured [this one]")
    ap.add_argument("--compare-root", default=None, metavar="DIR",
                    help="also measure this checkout (e.g. the commit before a change), interleaved round by round")
    ap.add_argument("--full", action="store_true",
                    help="the whole picture (a many-core machine): dense and objects, populations 128 and 1024, 3 rounds")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "scaling.png")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--replot", type=Path, nargs="+", default=None,
                    help="redraw the picture from saved JSON lines (end-to-end points; --predict lines: hollow)")
    ap.add_argument("--predict", type=Path, default=None, metavar="PARTS",
                    help="PREDICTED efficiency (not measured) from saved --parts lines, at --workers (default 16)")
    ap.add_argument("--parts", nargs="*", default=None, choices=["step_cpu", "master", "dispatch", "schedule", "latency", "cpu_share"],
                    help="per-component costs instead of end-to-end runs (all parts if none named)")
    args = ap.parse_args()
    if args.full:
        args.policies, args.populations, args.rounds = ["dense", "objects"], [128, 1024], max(args.rounds, 3)
    if args.predict is not None:
        sys.path.insert(0, str(Path(args.root).resolve()))
        rows = [json.loads(line) for line in args.predict.read_text().splitlines() if line.startswith("{")]
        counts = [n for n in args.workers if n > 1] if "--workers" in sys.argv else [16]
        predict(rows, counts, steps=args.max_steps)
        return
    if args.parts is not None:
        global UNDER_TEST
        UNDER_TEST = str(Path(args.root).resolve())
        sys.path.insert(0, UNDER_TEST)
        from threadpoolctl import threadpool_limits
        threadpool_limits(1)      # as every ES process runs: one BLAS thread (es.training.one_blas_thread)
        todo = args.parts or ["step_cpu", "master", "dispatch", "schedule", "latency", "cpu_share"]
        if "step_cpu" in todo:
            part_step_cpu(args.policies)
        if "master" in todo:
            part_master(args.policies, args.populations)
        if "dispatch" in todo:
            part_dispatch(sorted(set(args.workers) - {1}) or [2])
        if "schedule" in todo:
            part_schedule(args.policies, args.populations)
        if "latency" in todo:
            part_latency()
        if "cpu_share" in todo:
            part_cpu_share(sorted(set(args.workers) - {1}) or [2], args.evaluators)
        return
    if args.replot is not None:
        rows = [json.loads(line) for f in args.replot for line in f.read_text().splitlines() if line.startswith("{")]
        plot(rows, args.out)
        return
    scaling(args)
    if not args.no_plot:
        plot(ROWS, args.out)


if __name__ == "__main__":
    main()
