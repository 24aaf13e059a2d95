"""2-worker generations of the shipped pixel agent, guided chunks (before) vs one chunk per worker
(after), interleaved: wall, workers' CPU; returns and lengths must agree."""
import os, sys, time, json
import numpy as np
sys.path.insert(0, __import__("os").path.dirname(__file__))
from workers import kids
from es import seeding
from es.optimizers import Adam
from es.play import load_agent
from es.parallel import ParallelEvaluator
from es.strategy import OpenES
from es.training import one_blas_thread
from pong.problem import PongProblem
with one_blas_thread():
    ap, trained, _ = load_agent("pong/agent-pixels.npz")
    new_p = PongProblem(dict(ap.policy_spec), max_steps=1000)
    old_p = PongProblem(dict(ap.policy_spec), max_steps=1000); old_p.chunks_per_worker = 4
    evs = {"guided": ParallelEvaluator(old_p, workers=2, adaptive=False),
           "one_chunk": ParallelEvaluator(new_p, workers=2, adaptive=False)}
    for name, ev in evs.items():
        print(name, ev.bounds(64))
    def gen(ev, g, pop=64):
        s = OpenES(trained, Adam(trained.size, 0.01), population=pop, sigma=0.05, seed=0)
        seeds = seeding.episode_seeds(0, g, 1)
        k0, t0 = kids(), time.perf_counter()
        r = ev.evaluate(s.ask(), seeds, seeds)
        wall = time.perf_counter() - t0; k1 = kids()
        w = sum(k1[p] - k0.get(p, 0) for p in k1)
        return wall, w, r
    for ev in evs.values():
        gen(ev, 0, 8)
    for g in range(1, 1 + int(sys.argv[1])):
        res = {}
        for name, ev in (evs.items() if g % 2 else reversed(evs.items())):
            wall, w, r = gen(ev, g)
            res[name] = r
            print(json.dumps({"gen": g, "way": name, "wall": round(wall, 2), "workers_cpu": round(w, 2),
                              "steps": int(r.lengths.sum()) + r.center_length, "load": os.getloadavg()}), flush=True)
        a, b = res["guided"], res["one_chunk"]
        print("same results:", np.array_equal(a.returns, b.returns) and np.array_equal(a.lengths, b.lengths)
              and a.center_return == b.center_return, flush=True)
    for ev in evs.values():
        ev.close()
