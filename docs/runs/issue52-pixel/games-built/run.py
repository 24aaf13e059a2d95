"""python run.py WARM from the repository root, with this folder on PYTHONPATH (see output.txt)."""
import sys, os, glob, tempfile
os.environ["ROM_LOAD_COUNTS"] = tempfile.mkdtemp(prefix="rom-loads-")   # the workers inherit it
sys.path[:0] = [".", "benchmarks"]
import importlib.util
spec = importlib.util.spec_from_file_location("pbench", "benchmarks/pong.py")
pb = importlib.util.module_from_spec(spec); spec.loader.exec_module(pb)
from es.play import load_agent
from es.parallel import ParallelEvaluator
from es.evaluators import LocalEvaluator
from pong.problem import PongProblem
import pong.games
warm = int(sys.argv[1])
agent_problem, trained, _ = load_agent("pong/agent-pixels.npz")
p = PongProblem(dict(agent_problem.policy_spec), max_steps=50)
w = ParallelEvaluator(p, workers=2, adaptive=False); local = LocalEvaluator(p)
def counts():
    return {os.path.basename(f): len(open(f).read()) for f in glob.glob(os.path.join(os.environ["ROM_LOAD_COUNTS"], "n.*"))}
pb.es_generations(w, trained, warm, 1, start=0); pb.es_generations(local, trained, warm, 1, start=0)
before = counts()
pb.es_generations(w, trained, 64, 1); a = counts()
pb.es_generations(local, trained, 64, 1); b = counts()
print("warm", warm, "workers' gen:", {k: a[k] - before.get(k, 0) for k in a}, "local gen:", {k: b[k] - a.get(k, 0) for k in b}, "main pid", os.getpid())
w.close()
