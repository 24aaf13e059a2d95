"""The course: the build, planted student mistakes (each loses exactly its check's points, in
process on 50 seeds and through the real grader where ``graded_in_a_kernel``), and a
grader that survives hanging checks and broken files. (The solutions' full marks and the blank
notebooks' 0 with a message per check: test_class_gradebook's class of four.)"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from classroom.check import CHECKS, checks_for, grades_a_run
from classroom import build
from classroom.grade import grade

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "source").glob("[0-9][0-9]_*.py"))


def test_committed_notebooks_are_what_the_build_writes():
    out = subprocess.run([sys.executable, "-m", "es", "notebooks", "--check"], capture_output=True, text=True,
                         cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr


def test_solutions_are_committed_executed_in_full_mode():
    """A self-learner sees every curve and number without running anything: each solution ran
    top to bottom in full mode (``python -m es notebooks --execute``) without an error."""
    import nbformat
    for name in NOTEBOOKS:
        nb = nbformat.read(str(ROOT / "solutions" / f"{name}.ipynb"), 4)
        assert nb.metadata.get("es_course_run", {}).get("mode") == "full", f"{name}: not executed"
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(c.execution_count for c in code), f"{name}: a cell did not run"
        assert not [o for c in code for o in c.outputs if o.output_type == "error"], f"{name}: a cell failed"


def executed_solution():
    """A solution notebook as the build writes it (``text``), and as if it had been run: its last
    code cell printed "a result" and it carries a run record."""
    text = next(t for p, t in build.outputs().items() if p.parent == build.SOLUTION)
    executed = nbformat.reads(text, as_version=4)
    cell = [c for c in executed.cells if c.cell_type == "code"][-1]
    cell.outputs, cell.execution_count = [nbformat.v4.new_output("stream", text="a result\n")], 7
    executed.metadata["es_course_run"] = {"mode": "full", "seconds": 1.0}
    return text, executed, cell


def test_check_compares_sources_not_outputs(tmp_path):
    text, executed, cell = executed_solution()
    (tmp_path / "nb.ipynb").write_text(build.render(executed))
    assert build._same_source(tmp_path / "nb.ipynb", text)
    cell.source += "\nprint('edited by hand')"
    (tmp_path / "nb.ipynb").write_text(build.render(executed))
    assert not build._same_source(tmp_path / "nb.ipynb", text)


def test_a_text_only_change_keeps_an_executed_notebooks_outputs_a_code_change_drops_them(tmp_path):
    text, executed, _ = executed_solution()
    target = tmp_path / "nb.ipynb"
    target.write_text(build.render(executed))
    rebuilt = nbformat.reads(text, as_version=4)
    [c for c in rebuilt.cells if c.cell_type == "markdown"][0].source += "\n\nA new sentence."
    logged = []
    build.write_notebooks({target: build._stamped(build.render(rebuilt))}, log=logged.append)
    kept = nbformat.read(str(target), 4)
    assert "A new sentence." in [c for c in kept.cells if c.cell_type == "markdown"][0].source
    assert [c for c in kept.cells if c.cell_type == "code"][-1].outputs[0].text == "a result\n"
    assert kept.metadata["es_course_run"]["mode"] == "full" and not build.edited(target), logged
    [c for c in rebuilt.cells if c.cell_type == "code"][-1].source += "\nprint(1)"
    build.write_notebooks({target: build._stamped(build.render(rebuilt))}, log=logged.append)
    assert not any(c.get("outputs") for c in nbformat.read(str(target), 4).cells if c.cell_type == "code")
    assert any("outputs dropped" in line for line in logged)


def test_a_kernel_started_in_notebooks_imports_this_checkout():
    """Jupyter starts a notebook's kernel in the notebook's folder, where `es` is not on the path:
    it must come from `pip install -r requirements.txt` (an editable install of this checkout)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", "import es, pong; print(es.__file__); print(pong.__file__)"],
                         capture_output=True, text=True, cwd=ROOT / "notebooks", env=env)
    assert out.returncode == 0, ("`import es` fails in notebooks/: run `pip install -r requirements.txt` from the "
                                 "repository root (it installs this checkout with `-e .`)\n" + out.stderr)
    assert [Path(f).resolve().parent.parent for f in out.stdout.split()] == [ROOT, ROOT], (
        f"`import es` in notebooks/ finds another checkout: {out.stdout.split()}; "
        "run `pip install -r requirements.txt` in this one")


def test_student_notebooks_are_valid_python_with_banners():
    for name in NOTEBOOKS:
        nb = nbformat.read(str(ROOT / "notebooks" / f"{name}.ipynb"), 4)
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        compile(code, name, "exec")
        assert "### BEGIN SOLUTION" not in code and "YOUR CODE HERE" in code
        assert code.count("raise NotImplementedError") == json.dumps(
            (ROOT / "source" / f"{name}.py").read_text()).count("### BEGIN SOLUTION")


def test_region_keeps_its_indentation():
    src = "def f():\n    x = 1\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n"
    out = build.student_source(src, "t")
    assert "    raise NotImplementedError" in out and "return x" not in out
    compile(out, "t", "exec")


def test_every_check_belongs_to_a_notebook():
    assert {c[2] for c in CHECKS.values()} == set(NOTEBOOKS)
    per = {}
    for milestone, points, _, _ in CHECKS.values():
        per[milestone] = per.get(milestone, 0) + points
    assert per == {"M1": 10, "M2": 5, "M3": 5, "M4": 10, "extras": 18}


# (notebook, text in the solution, the student's mistake, the check that must catch it, words of its message)
RANKS = "return ranks / (len(x) - 1) - 0.5"
ADAM = "step = lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m / (np.sqrt(v) + 1e-8)"
NOISE = "return np.random.default_rng([seed, generation, member]).standard_normal(dim)"
BOUNDS = "bounds = np.linspace(0, population, n_jobs + 1).astype(int)"
JOBS = "delayed(evaluate_members)(center, sigma, seed, generation, a, b)"
AREA = "return np.rint(rows @ COLUMNS / 800).astype(np.uint8)"
POLICY = 'return (np.einsum("pf,pfa->pa", features, W) + b).argmax(axis=1)'
STACK = "return np.concatenate([stacks[:, 1:], frames[:, None]], axis=1)"
GRAD = "grad = noise.T @ weights / (n * sigma) - weight_decay * center"
MERGE = "return count_a + count_b, np.add(total_a, total_b), np.add(squares_a, squares_b)"
STD = "return mu, np.sqrt(np.maximum(squares / count - mu * mu, 1e-4))"
SQUASH = 'squashed = np.tanh(np.einsum("ki,kij->kj", x, weights) + biases)'
SCALE = "return low + 0.5 * (squashed + 1.0) * (high - low)"
OFFSETS = "return np.random.default_rng([seed, generation]).integers(0, size - dim + 1, pairs)"
VBN_STD, VBN_OUT = "std = np.maximum(reference.std(axis=0), 0.1)", "return np.clip((inputs - mean) / std, -5, 5)"
MISTAKES = [
    ("00_es_from_scratch", RANKS, "return ranks / (len(x) - 1)", "centered_ranks", "forgot to center"),
    ("00_es_from_scratch", RANKS, "return ranks / len(x) - 0.5", "centered_ranks", "divided the ranks by n"),
    ("00_es_from_scratch", "ranks[order] = np.arange(len(x))", "ranks = order.astype(float)", "centered_ranks",
     "argsort gives the indices"),
    ("00_es_from_scratch", RANKS, "return (x - x.min()) / (x.max() - x.min()) - 0.5", "centered_ranks", "min-max"),
    ("00_es_from_scratch", "ranks[tied] = ranks[tied].mean()", "pass", "centered_ranks", "ties must share"),
    ("00_es_from_scratch", "ranks[tied] = ranks[tied].mean()", "ranks[tied] = ranks[tied].min()", "centered_ranks",
     "tied returns got their lowest rank"),
    ("00_es_from_scratch", "ranks[tied] = ranks[tied].mean()", "ranks[tied] = ranks[tied].max()", "centered_ranks",
     "tied returns got their highest rank"),
    ("00_es_from_scratch", RANKS, "return 0.5 - ranks / (len(x) - 1)", "centered_ranks", "reversed"),
    ("00_es_from_scratch", "x = np.asarray(returns, dtype=np.float64)",
     "x = np.asarray(returns, dtype=np.float64)\n    x -= x.mean()", "centered_ranks",
     "changed its argument `returns` in place"),
    # centered_ranks returns a float64 array, and its ranks are floats (an int array truncates a mean rank)
    ("00_es_from_scratch", RANKS, "return (ranks / (len(x) - 1) - 0.5).astype(np.float32)", "centered_ranks",
     "says an array of float64"),
    ("00_es_from_scratch", RANKS, "return list(ranks / (len(x) - 1) - 0.5)", "centered_ranks", "returned list"),
    ("00_es_from_scratch", "ranks = np.empty(len(x))", "ranks = np.empty(len(x), dtype=int)", "centered_ranks",
     "the ranks array is an int array"),
    # distinct returns closer than 1e-3 must not tie; dense ranks (one rank per distinct return) are not mean ranks
    ("00_es_from_scratch", "x = np.asarray(returns, dtype=np.float64)", "x = np.round(np.asarray(returns, dtype=np.float64), 2)",
     "centered_ranks", "differ (by"),
    ("00_es_from_scratch", RANKS, "u, inv = np.unique(x, return_inverse=True)\n    return inv / (len(u) - 1) - 0.5",
     "centered_ranks", "dense ranks"),
    ("00_es_from_scratch", "return noise.T @ weights / (len(weights) * sigma)",
     "return (noise.T @ weights / (len(weights) * sigma)).astype(np.float32)", "es_gradient",
     "says an array of float64"),
    ("00_es_from_scratch", "return noise.T @ weights / (len(weights) * sigma)", "return noise.T @ weights / len(weights)",
     "es_gradient", "divided by the population but not by sigma"),
    ("00_es_from_scratch", "return noise.T @ weights / (len(weights) * sigma)", "return noise.T @ weights / sigma",
     "es_gradient", "forgot to divide by the population"),
    ("00_es_from_scratch", "return noise.T @ weights / (len(weights) * sigma)",
     "return noise.T @ weights / (len(weights) * sigma ** 2)", "es_gradient", "divided by sigma twice"),
    ("00_es_from_scratch", "return noise.T @ weights / (len(weights) * sigma)",
     "noise *= weights[:, None]\n    return noise.sum(axis=0) / (len(weights) * sigma)", "es_gradient",
     "changed its argument `noise` in place"),
    ("01_cartpole", "out[0::2], out[1::2] = half, -half",
     "out[:population // 2], out[population // 2:] = half, -half", "antithetic_noise", "two blocks"),
    # train_cartpole draws its noise with the student's antithetic_noise, so it is not reproducible either
    ("01_cartpole", "half = rng.standard_normal((population // 2, dim))",
     "half = np.random.standard_normal((population // 2, dim))", "antithetic_noise", "not np.random",
     {"train_cartpole": "never np.random"}),
    ("01_cartpole", "half = rng.standard_normal((population // 2, dim))",
     "half = rng.standard_normal((dim, population // 2)).T", "antithetic_noise", "not the draws the contract gives",
     {"train_cartpole": "from the five steps'"}),
    # a float64 array (float32 noise leaves train_cartpole within its 1e-6 of the answer key's loop)
    ("01_cartpole", "    return out", "    return out.astype(np.float32)", "antithetic_noise",
     "returned dtype float32"),
    ("01_cartpole", ADAM, "step = lr * m / (np.sqrt(v) + 1e-8)", "adam_update", "no bias correction"),
    ("01_cartpole", "return theta + step, {", "return theta - step, {", "adam_update", "it descends"),
    ("01_cartpole", ADAM, "step = lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m / np.sqrt(v + 1e-8)",
     "adam_update", "epsilon inside the square root"),
    ("01_cartpole", ADAM, "step = lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m / np.sqrt(v)",
     "adam_update", "you left epsilon out"),
    ("01_cartpole", "rng = np.random.default_rng(seed)\n    center", "rng = np.random.default_rng(0)\n    center",
     "train_cartpole", "it ignores its seed"),
    ("01_cartpole", "noise = antithetic_noise(rng, population, policy.num_params)",
     "noise = antithetic_noise(np.random.default_rng(), population, policy.num_params)", "train_cartpole",
     "gave different parameters"),
    ("01_cartpole", "center = center + lr * grad", "center = center - lr * grad", "train_cartpole",
     "it steps down the gradient"),
    # the five steps, against the answer key's loop
    ("01_cartpole", ["        noise = antithetic_noise(rng, population, policy.num_params)\n",
                     "starts = rng.integers(0, 2 ** 31, 128)\n"],
     ["", "noise = antithetic_noise(rng, population, policy.num_params)\n        starts = rng.integers(0, 2 ** 31, 128)\n"],
     "train_cartpole", "draws the noise before the start states"),
    ("01_cartpole", "    for g in range(generations):\n        starts = rng.integers(0, 2 ** 31, 128)\n",
     "    starts = rng.integers(0, 2 ** 31, 128)\n    for g in range(generations):\n", "train_cartpole",
     "draws the start states once"),
    ("01_cartpole", "int(starts[0])", "int(starts[g])", "train_cartpole", "on starts[g]"),
    ("01_cartpole", "grad = noise.T @ weights / (population * sigma)", "grad = noise.T @ weights / population",
     "train_cartpole", "leaves 1 / sigma out"),
    ("01_cartpole", "if center_scores.min() >= 500:", "if center_scores.mean() >= 475:", "train_cartpole",
     "center_scores.min() >= 500"),
    # reproducible (the global state is seeded from the seed), but not from the generator it was given
    ("01_cartpole", ["rng = np.random.default_rng(seed)\n    center", "starts = rng.integers(0, 2 ** 31, 128)"],
     ["np.random.seed(seed)\n    rng = np.random.default_rng(seed)\n    center",
      "starts = np.random.randint(0, 2 ** 31, 128)"], "train_cartpole", "global np.random state"),
    ("02_parallel", NOISE, "np.random.seed(seed + generation + member)\n    return np.random.standard_normal(dim)",
     "member_noise", "global np.random state"),
    ("02_parallel", NOISE, "return np.random.default_rng(seed + generation + member).standard_normal(dim)",
     "member_noise", "the same sum seed + generation + member"),
    ("02_parallel", NOISE, "return np.random.default_rng(seed * 10**6 + generation * 1000 + member).standard_normal(dim)",
     "member_noise", "got the same noise"),
    ("02_parallel", NOISE, "return np.random.default_rng(seed * generation + member).standard_normal(dim)",
     "member_noise", "a product such as seed * generation is 0"),
    ("02_parallel", NOISE, 'return np.random.default_rng(int(f"{seed}{generation}{member}")).standard_normal(dim)',
     "member_noise", "their digits run together are the same number"),
    ("02_parallel", JOBS, "delayed(evaluate_members)(center, sigma, seed, generation, 0, b - a)", "parallel_returns",
     "same noise in every job"),
    ("02_parallel", BOUNDS, "bounds = np.arange(n_jobs + 1) * (population // n_jobs)", "parallel_returns",
     "drop the last"),
    ("02_parallel", "return np.concatenate(chunks)", "return np.concatenate(chunks[::-1])", "parallel_returns",
     "reverse order"),
    ("02_parallel", JOBS, "delayed(evaluate_members)(center, sigma, seed, generation, a, b + 1)", "parallel_returns",
     "chunks overlap"),
    ("02_parallel", "chunks = Parallel(n_jobs=n_jobs)", "chunks = Parallel(n_jobs=1)", "parallel_returns",
     "every chunk ran in one process"),
    ("02_parallel", BOUNDS, "bounds = np.linspace(0, population, 3).astype(int)", "parallel_returns",
     "2 chunk(s) for n_jobs=3"),
    ("02_parallel", NOISE, "return np.random.default_rng([seed, generation, member]).standard_normal(dim, dtype=np.float32)",
     "member_noise", "says an array of float64"),
    ("02_parallel", "return np.concatenate(chunks)", "return np.concatenate(chunks).astype(np.float32)",
     "parallel_returns", "says an array of float64"),
    ("02_parallel", NOISE, "e = np.random.default_rng([seed, generation, member // 2]).standard_normal(dim)\n"
     "    return -e if member % 2 else e", "member_noise", "the mirroring is evaluate_members' job"),
    ("02_parallel", NOISE, "return np.random.default_rng([seed, generation, member]).uniform(-1, 1, dim)",
     "member_noise", "standard normals have mean 0"),
    ("02_parallel", "chunks = Parallel(n_jobs=n_jobs)", 'chunks = Parallel(n_jobs=n_jobs, backend="multiprocessing")',
     "parallel_returns", "use joblib's default backend (loky)"),
    # a weight below the members' range, non-normal draws of unit variance, a seed per job (section 1's idea)
    ("02_parallel", NOISE, "return np.random.default_rng([seed, 10000 * generation + member]).standard_normal(dim)",
     "member_noise", "10000 * generation + member collide"),
    ("02_parallel", NOISE, "return np.random.default_rng([seed, generation, member]).laplace(0, 0.5 ** 0.5, dim)",
     "member_noise", "standard normals put"),
    # weights and zero-padded digits that collide: a common prime, a member or a generation past its padding
    ("02_parallel", NOISE, "return np.random.default_rng(seed * 1_000_003 + generation * 1009 + member).standard_normal(dim)",
     "member_noise", "1009 * generation + member collide"),
    ("02_parallel", NOISE, "return np.random.default_rng([seed * 1_000_003 + member, generation]).standard_normal(dim)",
     "member_noise", "1000003 * seed + member collide"),
    ("02_parallel", NOISE, 'return np.random.default_rng(int(f"{seed}{generation:04d}{member:06d}")).standard_normal(dim)',
     "member_noise", "a member of 7 digits runs past a padding to 6 digits"),
    ("02_parallel", NOISE, 'return np.random.default_rng(int(f"{seed}{generation:03d}{member:010d}")).standard_normal(dim)',
     "member_noise", "a generation of 4 digits runs past a padding to 3 digits"),
    ("02_parallel", JOBS, "delayed(evaluate_members)(center, sigma, seed + a, generation, a, b)", "parallel_returns",
     "each job drew its own noise"),
    ("03_redis", ['"<f8"', "12 + 8 * count"], ['"<f4"', "12 + 4 * count"], "result_codec", "float32"),
    ("03_redis", 'return {"generation": generation, "first": first, "returns": returns, "lengths": lengths}',
     "return generation, first, returns, lengths", "result_codec", "not a dict"),
    ("03_redis", 'return struct.pack("<III", generation, first, len(returns)) + returns.tobytes() + lengths.tobytes()',
     "import pickle\n    return pickle.dumps((generation, first, returns, lengths))", "result_codec", "pickle"),
    ("03_redis", "if chunk in in_queue or now - t < lease_seconds:", "if now - t < lease_seconds:",
     "chunks_to_requeue", "still waiting in the queue"),
    ("03_redis", "if chunk in in_queue or now - t < lease_seconds:", "if chunk in in_queue:",
     "chunks_to_requeue", "not written its lease yet"),
    ("03_redis", "        for chunk in chunks_to_requeue(queued_at, in_queue, leases, time.time(), lease_seconds):",
     "        for chunk in []:", "gather", "never handed out again"),
    ("03_redis", 'if res["generation"] != generation or chunk not in queued_at:', "if chunk not in wanted:", "gather",
     "drop results of another generation"),
    ("03_redis", """in_queue = {f"{job['a']}:{job['b']}" for job in map(json.loads, r.lrange("es:jobs", 0, -1))}""",
     "in_queue = set()", "gather", "still waited in es:jobs"),
    # notebook 03's contracts: the types they name, and gather's timeout
    ("03_redis", 'generation, first, count = struct.unpack_from("<III", payload)',
     'generation, first, count = struct.unpack_from("<III", payload)\n    generation = float(generation)',
     "result_codec", "the contract says integers"),
    # big-endian, decoded into native arrays
    ("03_redis", ['"<', "offset=12)", "offset=12 + 8 * count)"],
     ['">', "offset=12).astype(float)", "offset=12 + 8 * count).astype(np.int64)"], "result_codec",
     "not the course's layout"),
    ("03_redis", 'dtype="<u4", count=count, offset=12 + 8 * count)', 'dtype="<i4", count=count, offset=12 + 8 * count)',
     "result_codec", "a length may be up to 2**32 - 1"),
    ("03_redis", "now - t < lease_seconds:", "now - t <= lease_seconds:", "chunks_to_requeue",
     "queued exactly lease_seconds ago"),
    ("03_redis", "now - leases[chunk] < lease_seconds:", "now - leases[chunk] <= lease_seconds:", "chunks_to_requeue",
     "lease is exactly lease_seconds old"),
    ("03_redis", ['if res["generation"] != generation or chunk not in queued_at:', "a, b = wanted[chunk]\n            returns",
                  "del queued_at[chunk]"],
     ['if res["generation"] != generation or chunk in wanted and chunk not in queued_at:',
      'a, b = res["first"], res["first"] + len(res["returns"])\n            returns', "queued_at.pop(chunk, None)"],
     "gather", "is not in bounds"),
    ("03_redis", 'returns = np.frombuffer(payload, dtype="<f8", count=count, offset=12)',
     'returns = list(np.frombuffer(payload, dtype="<f8", count=count, offset=12))', "result_codec",
     "the contract says an array of float64"),
    ("03_redis", 'lengths = np.frombuffer(payload, dtype="<u4", count=count, offset=12 + 8 * count)',
     'lengths = np.frombuffer(payload, dtype="<u4", count=count, offset=12 + 8 * count).astype(np.float64)',
     "result_codec", "the contract says an integer array"),
    ("03_redis", "    return out\n", "    return sorted(out)\n", "chunks_to_requeue", "the contract says a set"),
    # a stale lease requeues whatever the queue age; a lease of a chunk whose result is in is returned
    ("03_redis", "if chunk in in_queue or now - t < lease_seconds:",
     "if chunk in in_queue or (chunk not in leases and now - t < lease_seconds):", "chunks_to_requeue",
     "still has its dead worker's old lease"),
    ("03_redis", "    return out\n",
     "    return out | {c for c in leases if now - leases[c] >= lease_seconds and c not in in_queue}\n",
     "chunks_to_requeue", "not in queued_at"),
    ("03_redis", 'returns = np.frombuffer(payload, dtype="<f8", count=count, offset=12)',
     'returns = np.frombuffer(payload, dtype="<f8", count=count, offset=12).astype(np.float32)', "result_codec",
     "decode_result: returns lose bits"),
    # a result matched to its chunk by its first member alone: a longer result starting there is taken for it
    ("03_redis", ["chunk = f\"{res['first']}:{res['first'] + len(res['returns'])}\"", "a, b = wanted[chunk]\n            returns"],
     ["chunk = next((c for c in wanted if c.split(\":\")[0] == str(res[\"first\"])), None)",
      'a, b = res["first"], res["first"] + len(res["returns"])\n            returns'], "gather", "not its first member alone"),
    ("03_redis", "returns, lengths = np.zeros(bounds[-1][1]), np.zeros(bounds[-1][1], dtype=np.int64)",
     "returns, lengths = np.zeros(bounds[-1][1], dtype=np.float32), np.zeros(bounds[-1][1], dtype=np.int64)",
     "gather", "returned dtype float32, the contract says an array of float64"),
    ("03_redis", "returns, lengths = np.zeros(bounds[-1][1]), np.zeros(bounds[-1][1], dtype=np.int64)",
     "returns, lengths = np.zeros(bounds[-1][1]), np.zeros(bounds[-1][1])", "gather",
     "the contract says an array of int64"),
    ("03_redis", "        if time.time() > deadline:", "        if False:", "gather", "raise TimeoutError once"),
    # a requeued job without "g" (section 4's workers stop on it); queued_at on another clock than time.time()
    ("03_redis", 'r.rpush("es:jobs", json.dumps({"g": generation, "a": a, "b": b}))',
     'r.rpush("es:jobs", json.dumps({"a": a, "b": b}))', "gather", "section 4's workers read"),
    ("03_redis", "queued_at = {chunk: time.time() for chunk in wanted}",
     "queued_at = {chunk: time.monotonic() for chunk in wanted}", "gather", "Start queued_at at time.time()"),
    # notebook 03's extras: the paper's Algorithm 2 and the shared noise table
    ("03_redis", "seeding.rng_for(seed, seeding.NOISE, generation, k)", "seeding.rng_for(seed, seeding.NOISE, 0, k)",
     "seeds_only_update", "one generation's noise reused"),
    ("03_redis", "noise[0::2], noise[1::2] = eps, -eps", "noise[0::2], noise[1::2] = eps, eps", "seeds_only_update",
     "a pair's sign was lost"),
    ("03_redis", "weights = (returns - returns.mean()) / (returns.std() + 1e-8)",
     "weights = np.concatenate([(r - np.mean(r)) / (np.std(r) + 1e-8) for r in chunk_returns])",
     "seeds_only_update", "shaping applied per worker"),
    ("03_redis", "sign = 1 if member % 2 == 0 else -1", "sign = 1", "noise_table", "a pair's sign was lost"),
    ("03_redis", OFFSETS, OFFSETS.replace("size - dim + 1", "size"), "noise_table", "past its end"),
    ("03_redis", OFFSETS, OFFSETS.replace("[seed, generation]", "seed"), "noise_table", "generation is left out"),
    ("03_redis", "standard_normal(size, dtype=np.float32)", "standard_normal(size).astype(np.float32)", "noise_table",
     "float64 draws"),
    ("03_redis", "start = offsets[member // 2]", "start = offsets[member]", "noise_table", "shares one offset"),
    ("03_redis", "return (np.asarray(center, dtype=np.float32) + step).astype(np.float32)",
     "return np.asarray(center, dtype=np.float32) + step", "seeds_only_update", "the contract says an array of float32"),
    ("03_redis", OFFSETS, OFFSETS + ".astype(float)", "noise_table", "the offsets are ints"),
    ("03_redis", OFFSETS, OFFSETS + ".tolist()", "noise_table", "the contract says an integer array"),
    ("03_redis", "return sign * table[start:start + dim]", "return sign * table[start:start + dim].astype(np.float64)",
     "noise_table", "table_noise: returned dtype float64"),
    ("03_redis", "return sign * table[start:start + dim]",
     "noise = table[start:start + dim]\n    if sign < 0:\n        noise *= -1\n    return noise", "noise_table",
     "changed its argument `table` in place"),
    ("03_redis", "step = lr * (noise.T @ weights) / (population * sigma)",
     "step = (lr * (noise.T @ weights) / (population * sigma)).astype(np.float32)", "seeds_only_update",
     "not bit for bit"),
    ("03_redis", "weights = (returns - returns.mean()) / (returns.std() + 1e-8)",
     "weights = (returns - returns.mean()) / returns.std()", "seeds_only_update", "without the + 1e-8"),
    ("03_redis", 'raise TimeoutError(f"no result for chunks {sorted(queued_at)} after {timeout} s")', "break",
     "gather", "without that chunk's result"),
    ("03_redis", "return np.random.default_rng(seed).standard_normal(size, dtype=np.float32)",
     "return np.random.RandomState(seed).standard_normal(size).astype(np.float32)", "noise_table",
     "np.random.RandomState(seed)"),
    ("04_pong", AREA, "return rows @ COLUMNS / 800 / 255", "downsample", "without dividing by 255"),
    ("04_pong", AREA, AREA + ".transpose(0, 2, 1)", "downsample", "transposed"),
    ("04_pong", AREA, "return np.floor(rows @ COLUMNS / 800 + 0.5).astype(np.uint8)", "downsample",
     "rounding difference"),
    ("04_pong", AREA, "return frames[:, ::5, np.linspace(0, 159, 42).astype(int)]", "downsample",
     "a few sampled pixels per output"),
    ("04_pong", AREA, "return (rows @ COLUMNS / 800).astype(np.uint8)", "downsample", "truncated"),
    ("04_pong", AREA, "return np.rint(np.rint(rows / 5) @ COLUMNS / 160).astype(np.uint8)", "downsample",
     "round once, at the end"),
    ("04_pong", AREA, "return np.rint(rows @ COLUMNS / 800)", "downsample", "return uint8 gray levels"),
    ("04_pong", "rows = frames.reshape(len(frames), 42, 5, 160).sum(axis=2, dtype=np.int64)",
     "rows = frames[:, 0::5] + frames[:, 1::5] + frames[:, 2::5] + frames[:, 3::5] + frames[:, 4::5]", "downsample",
     "wrapped around"),
    ("04_pong", AREA, "return np.rint(rows / 5 @ (COLUMNS / 42) / (160 / 42)).astype(np.uint8)", "downsample",
     "all where a mean is exactly a half"),
    ("04_pong", STACK, "return np.concatenate([frames[:, None], stacks[:, :-1]], axis=1)", "stack_frames",
     "newest frame went first"),
    ("04_pong", STACK, "out = np.zeros(stacks.shape)\n    out[:, :3] = stacks[:, 1:]\n    out[:, 3] = frames\n    return out",
     "stack_frames", "the contract says an array of uint8"),
    ("04_pong", STACK, "stacks[:, :3] = stacks[:, 1:]\n    stacks[:, 3] = frames\n    return stacks", "stack_frames",
     "changed its argument `stacks` in place"),
    ("04_pong", "weights = ranks / (n - 1) - 0.5", "weights = fitness - fitness.mean()", "es_step", "raw fitness"),
    ("04_pong", "weights = ranks / (n - 1) - 0.5", "weights = (fitness - fitness.mean()) / fitness.std()", "es_step",
     "standardised fitness"),
    ("04_pong", GRAD, "grad = noise.T @ weights / (n * sigma)", "es_step", "no weight decay"),
    ("04_pong", 'state = state or {"m"', 'state = {"m"', "es_step", "start from zero on every call"),
    ("04_pong", GRAD, "grad = noise.T @ weights / n - weight_decay * center", "es_step", "not divided by sigma"),
    ("04_pong", GRAD, GRAD.replace("- weight_decay", "+ weight_decay"), "es_step", "weight decay has the wrong sign"),
    ("04_pong", ADAM, "step = lr * m / (np.sqrt(v) + 1e-8)", "es_step", "without bias correction"),
    ("04_pong", "return center + step, {", "return center - step, {", "es_step", "it descends"),
    ("04_pong", "ranks[tied] = ranks[tied].mean()", "pass", "es_step", "ties share the mean"),
    # OpenAI's starter weighs mirrored pairs (es.py lines 242-247): the same sum on mirrored noise, not on the check's
    ("04_pong", GRAD, "grad = noise[0::2].T @ (weights[0::2] - weights[1::2]) / (n * sigma) - weight_decay * center",
     "es_step", "reads the noise as mirrored pairs"),
    ("04_pong", 'v = 0.999 * state["v"] + 0.001 * grad * grad',
     'v = np.maximum(0.999 * state["v"] + 0.001 * grad * grad, state["v"])', "es_step", "AMSGrad"),
    ("04_pong", ADAM, "step = lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m / np.sqrt(v + 1e-8)", "es_step",
     "inside the square root"),
    ("04_pong", ['state = state or {"m"', 'return center + step, {"m": m, "v": v, "t": t}'],
     ['state = dict(zip("mvt", state)) if state else {"m"', "return center + step, (m, v, t)"], "es_step",
     "the state is a tuple"),
    ("04_pong", POLICY, 'return np.einsum("pf,pfa->pa", features, W).argmax(axis=1)', "batched_policy",
     "ignores the bias"),
    ("04_pong", POLICY, "return (features @ W[0] + b[0]).argmax(axis=1)", "batched_policy", "member 0's weights"),
    ("04_pong", POLICY, POLICY.replace(".argmax(axis=1)", ".argmax(axis=1).astype(float)"), "batched_policy",
     "return integer actions"),
    ("04_pong", POLICY, 'return 2 - (np.einsum("pf,pfa->pa", features, W) + b)[:, ::-1].argmax(axis=1)',
     "batched_policy", "ties go to the lowest"),
    ("04_pong", POLICY, 'return (np.einsum("pf,pfa->pa", features.astype(np.float16), W.astype(np.float16)) '
     '+ b.astype(np.float16)).argmax(axis=1)', "batched_policy", "computed in float16"),
    ("04_pong", POLICY, "return np.array([np.argmax(features[p] @ W[p] + b[p]) for p in range(len(W))])",
     "batched_policy", "loops over the members in Python"),
    ("05_extras", "sigma = sigma * np.exp(lr_sigma / 2 * (w @ (s ** 2 - 1)))",
     "sigma = sigma + lr_sigma / 2 * (w @ (s ** 2 - 1))", "snes_step", "multiplicatively"),
    ("05_extras", "mu = mu + lr_mu * sigma * (w @ s)", "mu = mu + lr_mu * (w @ s)", "snes_step", "lacks sigma"),
    ("05_extras", "mu = mu + lr_mu * sigma * (w @ s)", "mu += lr_mu * sigma * (w @ s)", "snes_step",
     "changed its argument `mu` in place"),
    ("05_extras", "return mu, sigma", "return mu.astype(np.float32), sigma.astype(np.float32)", "snes_step",
     "an array of float64"),
    ("05_extras", "mu = mu + lr_mu * sigma * (w @ s)",
     "mu = (mu.astype(np.float32) + np.float32(lr_mu) * sigma.astype(np.float32) * (w.astype(np.float32) @ "
     "s.astype(np.float32))).astype(np.float64)", "snes_step", "a computation in float32"),
    ("05_extras", VBN_STD, "std = reference.std(axis=0)", "virtual_batch_norm", "floor the std at 0.1"),
    ("05_extras", VBN_STD, "std = np.maximum(reference.std(axis=0, ddof=1), 0.1)", "virtual_batch_norm",
     "sample std"),
    ("05_extras", VBN_OUT, "return (inputs - mean) / std", "virtual_batch_norm", "forgot the clip"),
    ("05_extras", ["mean = reference.mean(axis=0)", VBN_STD],
     ["mean = inputs.mean(axis=0)", "std = np.maximum(inputs.std(axis=0), 0.1)"], "virtual_batch_norm",
     "statistics of the inputs"),
    ("05_extras", VBN_STD, "std = np.sqrt(np.maximum(reference.var(axis=0), 0.1))", "virtual_batch_norm",
     "floored the variance"),
    ("05_extras", VBN_OUT, "inputs -= mean\n    inputs /= std\n    return np.clip(inputs, -5, 5)",
     "virtual_batch_norm", "changed its argument `inputs` in place"),
    ("05_extras", VBN_OUT, "return np.clip((inputs - mean) / std, -5, 5).astype(np.float32)", "virtual_batch_norm",
     "returned dtype float32"),
    ("05_extras", ["mean = reference.mean(axis=0)", VBN_OUT],
     ["reference, inputs = reference.astype(np.float32), inputs.astype(np.float32)\n    mean = reference.mean(axis=0)",
      "return np.clip((inputs - mean) / std, -5, 5).astype(np.float64)"], "virtual_batch_norm",
     "a computation in float32"),
    ("06_locomotion", MERGE, "return count_a, np.add(total_a, total_b), np.add(squares_a, squares_b)", "merge_stats",
     "forgot to add the counts"),
    ("06_locomotion", MERGE, "return count_a + count_b, (total_a + total_b) / 2, (squares_a + squares_b) / 2",
     "merge_stats", "averaged the sums"),
    ("06_locomotion", MERGE, "return count_a + count_b, total_b, squares_b", "merge_stats", "the last worker only"),
    ("06_locomotion", MERGE, "return count_a + count_b, np.add(total_a, total_b), np.add(total_a, total_b) ** 2",
     "merge_stats", "do not square the merged sum"),
    ("06_locomotion", MERGE, "total_a += total_b\n    squares_a += squares_b\n    return count_a + count_b, total_a, squares_a",
     "merge_stats", "changed its argument `a` in place"),
    ("06_locomotion", MERGE, "return count_a + count_b, np.add(total_a, total_b).astype(np.float32), "
     "np.add(squares_a, squares_b).astype(np.float32)", "merge_stats", "an array of float64"),
    ("06_locomotion", MERGE, "return float(count_a + count_b), np.add(total_a, total_b), np.add(squares_a, squares_b)",
     "merge_stats", "the contract says an int"),
    ("06_locomotion", STD, "return mu, np.sqrt(squares / count - mu * mu)", "mean_std", "floor the variance at 1e-4"),
    ("06_locomotion", STD, "return mu, np.maximum(squares / count - mu * mu, 1e-4)", "mean_std",
     "returned the variance"),
    ("06_locomotion", STD, "return mu, np.sqrt(np.maximum(squares / count, 1e-4))", "mean_std", "left out the mean"),
    ("06_locomotion", STD, "return mu, np.maximum(np.sqrt(np.maximum(squares / count - mu * mu, 0)), 1e-4)",
     "mean_std", "floored the std"),
    ("06_locomotion", STD, "return mu, np.sqrt(np.maximum((squares - count * mu * mu) / (count - 1), 1e-4))",
     "mean_std", "divided by count - 1"),
    ("06_locomotion", STD, "return mu, np.maximum(np.sqrt(squares / count - mu * mu), 1e-2)", "mean_std",
     "the square root of that is nan"),
    ("06_locomotion", STD, "return mu.astype(np.float32), np.sqrt(np.maximum(squares / count - mu * mu, 1e-4))",
     "mean_std", "an array of float64"),
    ("06_locomotion", STD, "return mu, np.sqrt(squares / count - mu * mu + 1e-4)", "mean_std",
     "added 1e-4 to the variance"),
    ("06_locomotion", "if count == 0:", "if False:", "mean_std", "with count 0"),
    ("06_locomotion", "mu = total / count", "total /= count\n    mu = total", "mean_std",
     "changed its argument `total` in place"),
    ("06_locomotion", "x = np.clip((obs - mean) / std, -5.0, 5.0)", "x = (obs - mean) / std", "linear_policy",
     "forgot the clip"),
    ("06_locomotion", "x = np.clip((obs - mean) / std, -5.0, 5.0)", "x = obs", "linear_policy",
     "ignores mean and std"),
    ("06_locomotion", SQUASH, 'squashed = np.einsum("ki,kij->kj", x, weights) + biases', "linear_policy",
     "forgot the tanh"),
    ("06_locomotion", SCALE, "return squashed", "linear_policy", "forgot to scale"),
    ("06_locomotion", "x = np.clip((obs - mean) / std, -5.0, 5.0)", "std += 1e-8\n    x = np.clip((obs - mean) / std, -5.0, 5.0)",
     "linear_policy", "changed its argument `std` in place"),
    ("06_locomotion", SCALE, "return list(low + 0.5 * (squashed + 1.0) * (high - low))", "linear_policy",
     "the contract says an array"),
    ("06_locomotion", SCALE, "return squashed * high", "linear_policy", "only when low = -high"),
    ("06_locomotion", "weights = params[:, :obs_dim * act_dim].reshape(rows, obs_dim, act_dim)",
     "weights = params[:, :obs_dim * act_dim].reshape(rows, act_dim, obs_dim).transpose(0, 2, 1)", "linear_policy",
     "transposed weights"),
    ("06_locomotion", SQUASH, "squashed = np.tanh(np.array([x[r] @ weights[r] + biases[r] for r in range(rows)]))",
     "linear_policy", "loops over the rows in Python"),
]
# The checks that grade a run (check.grades_a_run) have no row: Pong's agent check replays a run
# and plays full games (tests/pong/test_pong_student.py grades it; the planted mistakes in 04 are
# its functions'), and 06's grades the committed run next to the solution (test_class_gradebook's
# reference student), which a planted submission in a fresh folder lacks.
RUNS = {name for name in CHECKS if grades_a_run(name)}


def edits(mistake) -> list[tuple[str, str]]:
    """A mistake's (text in the solution, the student's text) pairs."""
    old, new = mistake[1], mistake[2]
    return list(zip(old, new)) if isinstance(old, list) else [(old, new)]


def planted(tmp_path, name, pairs, quick=False):
    """The solution with a student's mistakes: each old text (in one cell) becomes the new one.
    ``quick``: only its quick sections' cells (``quick_cells``), as a student who deleted the rest."""
    nb = nbformat.read(str(ROOT / "solutions" / f"{name}.ipynb"), 4)
    for o, n in pairs:
        hits = [c for c in nb.cells if c.cell_type == "code" and o in c.source]
        assert len(hits) == 1, f"{o!r} not found in exactly one cell of {name}"
        hits[0].source = hits[0].source.replace(o, n)
    if quick:
        headings = [c.source.split("\n")[0] if c.cell_type == "markdown" else None for c in nb.cells]
        nb.cells = [c for c, keep in zip(nb.cells, quick_cells(name, headings)) if keep]
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(nb, str(path))
    return path


# checks that train or start processes: their mistakes are graded in a kernel only, not 50 times in process
NOT_IN_PROCESS = ("train_cartpole", "parallel_returns", "gather")


def also_costs(mistake) -> dict:
    """The other checks a mistake must cost, each with words its message must hold (a row's
    optional sixth field)."""
    return mistake[5] if len(mistake) > 5 else {}


def costs(mistake) -> set:
    """The checks a mistake must cost: its own and those it also names."""
    return {mistake[3], *also_costs(mistake)}


def graded_in_a_kernel(i: int) -> bool:
    """Is ``MISTAKES[i]`` graded by the real grader in a kernel? Every mistake that costs a check
    which trains or starts processes, and the first mistake of every other check (the grader's
    path from a student's cell to each check). The rest are held in process on 50 input seeds,
    with the notebook's other checks passing (``test_each_planted_mistake_is_named_...``)."""
    mistake = MISTAKES[i]
    first = next(j for j, m in enumerate(MISTAKES) if m[3] == mistake[3])
    return bool(costs(mistake) & set(NOT_IN_PROCESS)) or i == first


def submissions(notebook):
    """The kernel-graded mistakes in ``notebook`` packed into as few submissions as possible,
    never two on one check (nor on a check that another mistake also costs): a student's notebook
    with several mistakes, ``[{check taken}, [mistake index]]``."""
    bins = []
    for i, mistake in enumerate(MISTAKES):
        if mistake[0] != notebook or not graded_in_a_kernel(i):
            continue
        taken = costs(mistake)
        for b in bins:
            if not b[0] & taken:
                b[0].update(taken)
                b[1].append(i)
                break
        else:
            bins.append([taken, [i]])
    return bins


_GRADED: dict[str, dict] = {}      # notebook -> what graded_mistakes returned for it


def graded_mistakes(notebook, tmp_path_factory):
    """Every submission of planted mistakes in ``notebook`` graded once, on the cells of its quick
    sections (``quick_cells``: every function a check calls is defined there, and the sections
    that train or start servers would only add minutes), two at a time as a class would be:
    mistake index -> (its submission's result, the checks that submission's mistakes cost). Once
    per notebook and process: the tests of one notebook share an xdist group, so the notebooks'
    gradings spread over the workers."""
    if notebook not in _GRADED:
        from concurrent.futures import ThreadPoolExecutor
        jobs = []
        for k, (taken, members) in enumerate(submissions(notebook)):
            pairs = [pair for i in members for pair in edits(MISTAKES[i])]
            jobs.append((planted(tmp_path_factory.mktemp(f"submission{k}"), notebook, pairs, quick=True), taken,
                         members))
        only = [n for n in checks_for(notebook) if n not in RUNS]
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda j: grade(j[0], cell_timeout=600, only=only), jobs))
        _GRADED[notebook] = {i: (res, taken) for res, (_, taken, members) in zip(results, jobs) for i in members}
    return _GRADED[notebook]


def test_there_are_at_least_25_planted_mistakes_covering_every_function_check():
    assert len(MISTAKES) >= 25
    assert {m[3] for m in MISTAKES} == set(CHECKS) - RUNS


@pytest.mark.slow
@pytest.mark.parametrize("i", [pytest.param(i, marks=pytest.mark.xdist_group(f"mistakes:{m[0]}"), id=f"{m[3]}:{m[4]}")
                               for i, m in enumerate(MISTAKES) if graded_in_a_kernel(i)])
def test_a_planted_mistake_costs_exactly_its_checks_points_with_a_message_naming_it(tmp_path_factory, i):
    name, _, _, check, words, *_ = MISTAKES[i]
    res, taken = graded_mistakes(name, tmp_path_factory)[i]
    rows = {r["name"]: r for r in res["checks"]}
    for c, w in {check: words, **also_costs(MISTAKES[i])}.items():
        assert rows[c]["points"] == 0 and w in rows[c]["message"], rows[c]
    # the other mistakes of the submission cost their own checks; every check no mistake touched scores
    others = sum(r["max"] for r in res["checks"] if r["name"] not in RUNS | taken)
    assert res["total"] == others, json.dumps(res["checks"], indent=1)


@pytest.mark.slow
def test_a_hanging_check_costs_only_its_points(tmp_path):
    # it hangs when the check calls it, not in the notebook's own cells (each would cost a cell_timeout)
    path = planted(tmp_path, "00_es_from_scratch", [("x = np.asarray(returns, dtype=np.float64)",
                                                     "import sys\n    while sys._getframe(1).f_globals.get("
                                                     "'__name__') != '__main__':\n        pass\n"
                                                     "    x = np.asarray(returns, dtype=np.float64)")])
    res = grade(path, cell_timeout=5, check_timeout=3)
    rows = {r["name"]: r for r in res["checks"]}
    assert rows["centered_ranks"]["points"] == 0 and "did not finish" in rows["centered_ranks"]["message"]
    assert rows["es_gradient"]["points"] == rows["es_gradient"]["max"]


@pytest.mark.slow
def test_broken_submissions_never_crash_the_grader(tmp_path):
    bad = tmp_path / "01_cartpole.ipynb"
    bad.write_text("{ this is not json")
    out = subprocess.run([sys.executable, "-m", "es", "grade", str(bad), str(ROOT / "README.md"), "--json"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(l) for l in out.stdout.splitlines()]
    assert all(r["total"] == 0 and "error" in r for r in rows)
    for key in ("submission", "total", "max", "checks"):
        assert key in rows[0]


@pytest.mark.slow
@pytest.mark.parametrize("notebook", sorted({m[0] for m in MISTAKES if m[3] not in NOT_IN_PROCESS}))
def test_each_planted_mistake_is_named_on_50_input_seeds_in_process(monkeypatch, notebook):
    """The checks' inputs are fresh in every grading run, so a planted mistake must be caught,
    with its message, whatever the seed: 50 seeds each, run in this process on the course
    sources (the slow checks, which train or start processes, are graded in a kernel above).
    And it costs only its own checks: the notebook's other checks pass beside it (seed 0)."""
    import contextlib
    import io
    from classroom import check
    monkeypatch.setenv("ES_COURSE_FAST", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(ROOT / "source")
    missed, solution = [], None

    def run_cells(cells, namespace):
        code = "\n".join(line for line in "".join(cells).splitlines() if not line.startswith("check."))
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code, notebook, "exec"), namespace)
        return namespace

    for mistake in MISTAKES:
        name, _, _, name_of_check, words, *_ = mistake
        if name != notebook or name_of_check in NOT_IN_PROCESS:
            continue
        # The solution's quick sections run once; a mistake's namespace is theirs with the cells
        # it edits run again over it (its functions replace the solution's; 05's sections take
        # 3 s to run, 13 times).
        if solution is None:
            cells = quick_cell_sources(name, (ROOT / "source" / f"{name}.py").read_text())
            solution = run_cells(cells, {"__name__": "__main__"})
        edited = []
        for cell in cells:
            new = cell
            for o, n in edits(mistake):
                new = new.replace(o, n)
            if new != cell:
                edited.append(new)
        assert edited, f"{name_of_check} ({words}): its text is in no quick cell of {name}"
        namespace = run_cells(edited, dict(solution))
        fn = getattr(check, name_of_check)
        for seed in range(50):
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    fn(*[namespace[n] for n in CHECKS[name_of_check][3]], seed=seed)
                missed.append(f"{name_of_check} ({words}), seed {seed}: passed")
            except check.CheckFailed as exc:
                if words not in str(exc):
                    missed.append(f"{name_of_check} ({words}), seed {seed}: {exc}")
        also = also_costs(mistake)
        for other in checks_for(name):
            if other == name_of_check or other in NOT_IN_PROCESS or grades_a_run(other):
                continue
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    getattr(check, other)(*[namespace[n] for n in CHECKS[other][3]], seed=0)
                if other in also:
                    missed.append(f"{name_of_check} ({words}): {other} passed; it should cost it too")
            except check.CheckFailed as exc:
                if other not in also or also[other] not in str(exc):
                    missed.append(f"{name_of_check} ({words}) also cost {other}: {exc}")
    assert not missed, "\n".join(missed[:20])


def quick_cells(name: str, headings) -> list[bool]:
    """Which of a notebook's cells are in its quick sections, from each cell's heading (a markdown
    cell's first line, None for code): the sections that do not train, start servers, fork
    workers or time things. 04 up to section 5, 03 all but sections 0 (a server), 4 (training
    through it), 6 (worker processes), 8 (the course's master) and section 7's timing of the
    noise table, the others up to section 4."""
    keep, flags = True, []
    for heading in headings:
        number = re.match(r"## (\d+)\. ", heading or "")
        if number:
            n = int(number.group(1))
            keep = n < 5 if name == "04_pong" else n not in (0, 4, 6, 8) if name == "03_redis" else n < 4
        elif (heading or "").startswith("### What the table costs"):
            keep = False
        flags.append(keep)
    return flags


def quick_cell_sources(name: str, src: str) -> list[str]:
    """The cells of a notebook's source (jupytext, ``source/``) in its quick sections."""
    cells = re.split(r"(?m)^(?=# %%)", src)
    headings = [c.split("\n")[1][2:] if c.startswith("# %% [markdown]") else None for c in cells]
    return [c for c, keep in zip(cells, quick_cells(name, headings)) if keep]


def quick_sections(name: str, src: str) -> str:
    """A notebook's source (jupytext, ``source/``) with only its quick sections' cells."""
    return "".join(quick_cell_sources(name, src))


def test_the_quick_sections_of_03_keep_its_functions_and_drop_its_servers():
    src = quick_sections("03_redis", (ROOT / "source" / "03_redis.py").read_text())
    assert all(f"def {f}(" in src for f in ("encode_result", "chunks_to_requeue", "gather", "update_from_returns",
                                            "make_noise_table", "table_noise"))
    assert "EmbeddedRedis()" not in src and "mp.get_context" not in src and "best_of_3" not in src


def test_a_release_asked_for_a_seed_it_did_not_record_says_which_it_has():
    from classroom.check import Recorded
    answers = Recorded({"centered_ranks": {"11": [], "22": []}})
    answers.context = ("centered_ranks", 5)
    with pytest.raises(RuntimeError, match="recorded answers for seeds 11, 22 only, not 5.*--input-seed"):
        answers("centered_ranks", [1.0, 2.0])


def test_a_squeezed_linear_policy_fails_its_one_row_case():
    # not a MISTAKES row: notebook 06's own Hopper cell stops on it before the checks run in process
    import numpy as np
    from classroom import check, references
    right = references.SOLUTIONS["linear_policy"][0]
    with pytest.raises(check.CheckFailed, match="keep the row axis"):
        check.linear_policy(lambda *args: np.squeeze(right(*args)), seed=1)
