"""The liars' battery, in threads: CartPole, population 256, 12 generations, the master with
the CLI's chunking (it plays the center), 2 honest workers and a liar that answers its first job
honestly, then lies on one member per chunk ("one") or on every member ("every"); seeds FIRST..LAST-1.
Prints per run whether the final center equals the clean single-process run, the ids banned,
the liar's results still used, and the rollbacks (stderr).

    python benchmarks/liar_battery.py FIRST LAST one,every
"""
import sys, threading, numpy as np, es
from es.distributed.server import EmbeddedRedis
from es.distributed.master import RedisEvaluator
from es.distributed.worker import run_worker
from es.training import make_problem_for

def run(trial, mode):
    cfg = es.config_for("cartpole", seed=trial, population=256, generations=12, reward_goal=1e9)
    ref = es.train(cfg, final_eval=False).center
    with EmbeddedRedis() as s:
        logs = []
        pb = make_problem_for(cfg)
        ev = RedisEvaluator(pb, s.master_url, lease_seconds=1.0, log=logs.append)
        stop = threading.Event()
        calls = []
        def liar(job, r, l, c):
            calls.append(job["g"])
            if len(calls) == 1: return r, l, c
            r = r.copy()
            if mode == "one": r[0] += 1.0
            else: r = r + 1.0
            return r, l, c
        ts = []
        for t in [None, None, liar]:
            th = threading.Thread(target=run_worker, args=(s.worker_url,), kwargs=dict(log=lambda m: None, tamper=t, stop=stop), daemon=True)
            th.start(); ts.append(th)
        try:
            res = es.train(cfg, pb, evaluator=ev, final_eval=False)
        finally:
            stop.set()
        bans = [m for m in logs if "banned worker" in m]
        gens_banned = [row["generation"] for row in res.metrics if row["banned"]]
        same = np.array_equal(res.center, ref)
        liar_acc = [(g, j) for g, j, w, d in ev.accepted if w in ev.banned]
        print(res.summary.get("rollbacks"), file=sys.stderr)
        print(trial, mode, "identical" if same else "DIFFERS", "first ban row", gens_banned[:1], "banned", list(ev.banned), "liar accepted", liar_acc[:10], flush=True)
        for m in bans: print("   ", m[:200])
for trial in range(int(sys.argv[1]), int(sys.argv[2])):
    for mode in sys.argv[3].split(","):
        run(trial, mode)
