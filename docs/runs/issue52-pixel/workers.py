"""A 2-worker generation (ParallelEvaluator, adaptive=False, as benchmarks/pong.py) of the agent and
of the fresh dense policy: wall, and CPU seconds of each loky worker (/proc/<pid>/stat) and of this
process (the center, dispatch), per generation; worker_busy from the evaluator."""
import os, sys, time, json, glob
import numpy as np
from es import seeding
from es.optimizers import Adam
from es.play import load_agent
from es.parallel import ParallelEvaluator
from es.strategy import OpenES
from es.training import one_blas_thread
from pong.problem import PongProblem
TCK = os.sysconf("SC_CLK_TCK")
def kids():
    out = {}
    for p in glob.glob("/proc/[0-9]*/stat"):
        try:
            f = open(p).read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(f[1]) == os.getpid():
            out[int(p.split("/")[2])] = (int(f[11]) + int(f[12])) / TCK
    return out
def gen(ev, center, g, pop=64):
    s = OpenES(center, Adam(center.size, 0.01), population=pop, sigma=0.05, seed=0)
    seeds = seeding.episode_seeds(0, g, 1)
    k0, c0, t0 = kids(), time.process_time(), time.perf_counter()
    r = ev.evaluate(s.ask(), seeds, seeds)
    wall, main = time.perf_counter() - t0, time.process_time() - c0
    k1 = kids()
    w = sorted(k1[p] - k0.get(p, 0) for p in k1)
    return dict(wall=round(wall, 2), main_cpu=round(main, 2), worker_cpu=[round(x, 2) for x in w if x > 0.05],
                steps=int(r.lengths.sum()) + r.center_length, busy=r.info.get("worker_busy"), load=os.getloadavg()[0])
with one_blas_thread():
    ap, trained, _ = load_agent("/work/scratch-gap/pong/agent-pixels.npz")
    agent = ParallelEvaluator(PongProblem(dict(ap.policy_spec), max_steps=1000), workers=2, adaptive=False)
    fp = PongProblem(max_steps=1000); fresh = ParallelEvaluator(fp, workers=2, adaptive=False)
    gen(agent, trained, 0, 8); gen(fresh, fp.initial_params(0), 0, 8)
    for g in range(1, 1 + int(sys.argv[1])):
        print("agent", json.dumps(gen(agent, trained, g)), flush=True)
        print("fresh", json.dumps(gen(fresh, fp.initial_params(0), g)), flush=True)
    agent.close(); fresh.close()
