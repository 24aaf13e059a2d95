"""The arithmetic of ``benchmarks/scaling.py``: a generation's makespan on workers of given
speeds, and the PREDICTED efficiency (``--predict``) from the per-component costs that
``--parts`` measured. No games, no processes: pure functions of their arguments."""
import numpy as np


def makespan(bounds, order, speeds, us_per_step, steps, per_chunk_s, center_episodes=1):
    """Seconds of a generation whose chunks ``bounds`` are pulled in ``order`` by workers of
    relative ``speeds``: a chunk of k episodes, all ``steps`` long (the cap), takes
    steps * k * us_per_step(k) / speed + per_chunk_s; the last of ``bounds`` also plays the center."""
    import heapq
    free = [(0.0, w) for w in range(len(speeds))]
    heapq.heapify(free)
    end = 0.0
    for i in order:
        k = bounds[i][1] - bounds[i][0] + (center_episodes if i == len(bounds) - 1 else 0)
        cost = us_per_step[min(us_per_step, key=lambda s: abs(s - k))]
        t, w = heapq.heappop(free)
        t += steps * k * cost * 1e-6 / speeds[w] + per_chunk_s
        end = max(end, t)
        heapq.heappush(free, (t, w))
    return end


def fit_line(points):
    """Least-squares (intercept, slope) of ``[(x, y)]``."""
    x, y = np.array(points, dtype=float).T
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept), float(slope)


def predictions(rows, worker_counts=(16,), steps=500, spreads=(0.0, 0.1), trials=200, center_episodes=1,
                flat=True) -> list[dict]:
    """PREDICTED efficiency with N workers, from the per-component costs that ``--parts`` saved
    (``rows``), not measured. A generation with N workers lasts

        max(makespan of the guided chunks on N workers, the master's own episodes)
        + the evaluator's fixed cost per generation + the master's update,

    where the makespan (``makespan``) charges each chunk of k members steps * k * (CPU per
    step of a chunk of k, ``step_cost``) plus the evaluator's cost per chunk (``dispatch``: the
    slope of a 1-step generation's wall time over its chunks, times the workers it was measured
    with, i.e. as if every chunk's overhead fell on a worker; a master-side cost is no larger
    per chunk), workers at speed 1 +- spread; the master plays the center's episodes
    (``center_episodes``) and, for Redis, its spot checks (one member per 64) at the cost of a
    chunk of one, and that CPU is taken from the workers' cores (N workers + the master on N
    cores): time-shared over all of them, or (``..._master_on_one_core``, the pessimistic
    bound) from one. One process: (population + 1) * steps * (CPU per step of a chunk of 32) + the
    master's update. efficiency = T(1) / (N * T(N)): the bare games' speed-up is the unit, so
    what the machine loses with N processes (memory bandwidth, turbo) cancels, as it does in the
    measured efficiency. ``latency_ms``: a worker's round trip to the server made longer, per
    chunk, as ``--parts latency`` measured it (per chunk: the slope over chunks of the delayed
    generation's extra time, times its workers). With ``--parts cpu_share`` lines, the master's
    CPU is the one measured per steady generation (with the server's and Dask's other
    processes'), and each evaluator's workers cost what they spent per env step against joblib's
    workers (Dask's spend more for the same games). Not modelled: the probation of fresh remote ids
    (the master's own workers, which the benchmark starts, are trusted from their first result),
    noise of other users, NUMA. ``flat``: every chunk size at the median CPU per step measured
    (on the 2-core machine the sizes 1..32 differ by less than the measurement's noise; with
    the table as measured, noise alone puts some predictions above 1)."""
    from es.parallel import dispatch_order, guided_bounds
    rng = np.random.default_rng(0)
    out = []
    parts = [r for r in rows if r.get("kind") == "part"]
    for cost_row in (r for r in parts if r["part"] == "step_cost"):
        policy = cost_row["policy"]
        costs = {int(k): v for k, v in cost_row["us_per_step_by_chunk"].items()}
        if flat:      # one cost per step whatever the chunk size: the median of the sizes measured
            costs = dict.fromkeys(costs, float(np.median(list(costs.values()))))
        disp = [r for r in parts if r["part"] == "dispatch"]
        local_ms = next((r["generation_ms"] for r in disp if r["evaluator"] == "in-process"), 0.0)
        per_chunk, fixed = {}, {}
        for way in ("joblib", "redis", "dask"):
            mine = [r for r in disp if r["evaluator"] == way]
            if not mine:
                continue
            n_meas = max(r["workers"] for r in mine)
            intercept, slope = fit_line([(r["chunks"], r["generation_ms"]) for r in mine if r["workers"] == n_meas])
            per_chunk[way] = max(0.0, slope) * n_meas * 1e-3
            fixed[way] = max(0.0, intercept - local_ms / n_meas) * 1e-3
        lat = [r for r in parts if r["part"] == "latency"]
        lat_per_chunk, lat_ms = 0.0, 0.0
        if lat:
            lat_ms = max(r["delay_ms"] for r in lat)
            by = {(r["delay_ms"], r["chunks"]): r["generation_ms"] for r in lat}
            cs = sorted({r["chunks"] for r in lat})
            _, extra_slope = fit_line([(c, by[(lat_ms, c)] - by[(0.0, c)]) for c in cs])
            lat_per_chunk = max(0.0, extra_slope) * lat[0]["workers"] * 1e-3
        # --parts cpu_share: what the master (and the server, Dask's nannies) really spent per steady
        # generation, and the workers' CPU per env step against joblib's for the same work.
        shares = {r["evaluator"]: r for r in parts if r["part"] == "cpu_share"}
        worker_us = {w: r["cpu_s"]["workers"] / (r["steady_generations"] * (r["population"] + center_episodes)
                                                   * r["max_steps"]) * 1e6 for w, r in shares.items()}
        for master in (r for r in parts if r["part"] == "master" and r["policy"] == policy):
            population = master["population"]
            update = 1e-3 * sum(master[k] for k in ("ask_ms", "tell_ms", "checkpoint_ms", "metrics_ms"))
            one = steps * (population + center_episodes) * costs[32] * 1e-6 + update
            for n in worker_counts:
                bounds = guided_bounds(population, n)
                order = dispatch_order(bounds)
                for way in per_chunk:
                    for hosts_delay in ((0.0, 2.0 * lat_ms) if way == "redis" and lat else (0.0,)):
                        spots = -(-population // 64) if way == "redis" else 0
                        own = steps * (center_episodes + spots) * costs[1] * 1e-6
                        factor = 1.0
                        if way in shares and shares[way]["population"] == population:
                            c = shares[way]["cpu_s"]
                            own = (c["master"] + c["server"] + c["other"]) / shares[way]["steady_generations"]
                            factor = worker_us[way] / worker_us.get("joblib", worker_us[way])
                        way_costs = {k: v * factor for k, v in costs.items()}
                        chunk_s = per_chunk[way] + (lat_per_chunk if hosts_delay else 0.0)
                        row = {"kind": "prediction", "predicted": True, "policy": policy, "population": population,
                               "max_steps": steps, "evaluator": way, "workers": n,
                               "round_trip_added_ms": hosts_delay}
                        for spread in spreads:
                            for where in ("shared", "one_core"):
                                effs = []
                                for _ in range(trials if spread else 1):
                                    speeds = 1 + rng.uniform(-spread, spread, n)
                                    span = makespan(bounds, order, speeds, way_costs, steps, chunk_s, center_episodes=0)
                                    # The master's CPU (its episodes) comes off the workers' cores: time-shared
                                    # over all of them (the kernel balancing N + 1 processes), or off one.
                                    if where == "shared":
                                        speeds *= 1 - own / (n * span)
                                    else:
                                        speeds[0] *= max(0.5, 1 - own / span)
                                    span = makespan(bounds, order, speeds, way_costs, steps, chunk_s, center_episodes=0)
                                    effs.append(one / (n * (max(span, own) + fixed[way] + update)))
                                key = f"efficiency_spread_{spread}" + ("" if where == "shared" else "_master_on_one_core")
                                row[key] = round(float(np.mean(effs)), 3)
                        row["inputs"] = {"us_per_step_by_chunk": cost_row["us_per_step_by_chunk"],
                                         "us_per_step_used": "median, every chunk size" if flat else "by chunk size",
                                         "chunks": len(bounds), "chunk_sizes": sorted({b - a for a, b in bounds}),
                                         "per_chunk_ms": round(1e3 * chunk_s, 3),
                                         "fixed_per_generation_ms": round(1e3 * fixed[way], 2),
                                         "master_update_ms": round(1e3 * update, 2),
                                         "master_cpu_per_generation_s": round(own, 3),
                                         "master_cpu_from": "cpu_share" if way in shares else
                                                            f"{center_episodes + spots} episode(s) at the step cost",
                                         "worker_cpu_per_step_vs_joblib": round(factor, 3),
                                         "one_process_generation_s": round(one, 2)}
                        out.append(row)
    return out
