"""The course: the build, the solutions (full marks), the blank notebooks (0, with a message
per check), planted student mistakes (each loses exactly its check's points), and a grader
that survives hanging checks and broken files."""
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from es.course.check import CHECKS
from es.course import build
from es.course.grade import grade

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "course").glob("[0-9][0-9]_*.py"))


def test_committed_notebooks_are_what_the_build_writes():
    out = subprocess.run([sys.executable, "-m", "es", "notebooks", "--check"], capture_output=True, text=True,
                         cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr


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
            (ROOT / "course" / f"{name}.py").read_text()).count("### BEGIN SOLUTION")


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
    assert per == {"M1": 10, "M2": 5, "M3": 5, "M4": 10, "extras": 3}


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_solutions_score_full_marks(name):
    res = grade(ROOT / "solutions" / f"{name}.ipynb", cell_timeout=600)
    assert res["total"] == res["max"] > 0, json.dumps(res["checks"], indent=1)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_blank_notebooks_score_zero_with_a_message_per_check(name):
    res = grade(ROOT / "notebooks" / f"{name}.ipynb", cell_timeout=600)
    assert res["total"] == 0 and res["max"] > 0
    for row in res["checks"]:
        assert "not implemented yet" in row["message"] or "define" in row["message"], row


# (notebook, text in the solution, the student's mistake, the check that must catch it, words of its message)
MISTAKES = [
    ("00_es_from_scratch", "return ranks / (len(x) - 1) - 0.5", "return ranks / (len(x) - 1)",
     "centered_ranks", "forgot to center"),
    ("00_es_from_scratch", "return noise.T @ weights / (len(weights) * sigma)", "return noise.T @ weights / len(weights)",
     "es_gradient", "divided by the population but not by sigma"),
    ("01_cartpole", "step = lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m / (np.sqrt(v) + 1e-8)",
     "step = lr * m / (np.sqrt(v) + 1e-8)", "adam_update", "no bias correction"),
    ("02_parallel", "return np.random.default_rng([seed, generation, member]).standard_normal(dim)",
     "np.random.seed(seed + generation + member)\n    return np.random.standard_normal(dim)",
     "member_noise", "global np.random state"),
    ("02_parallel", "delayed(evaluate_members)(center, sigma, seed, generation, a, b)",
     "delayed(evaluate_members)(center, sigma, seed, generation, 0, b - a)", "parallel_returns", "same noise in every job"),
    ("03_redis", ['"<f8"', "12 + 8 * count"], ['"<f4"', "12 + 4 * count"], "result_codec", "float32"),
    ("03_redis", "if chunk in in_queue or now - t < lease_seconds:", "if now - t < lease_seconds:",
     "chunks_to_requeue", "still waiting in the queue"),
    ("05_extras", "sigma = sigma * np.exp(lr_sigma / 2 * (w @ (s ** 2 - 1)))",
     "sigma = sigma + lr_sigma / 2 * (w @ (s ** 2 - 1))", "snes_step", "multiplicatively"),
]


def planted(tmp_path, name, old, new):
    """The solution with a student's mistake: each `old` text (in one cell) becomes `new`."""
    nb = nbformat.read(str(ROOT / "solutions" / f"{name}.ipynb"), 4)
    for o, n in zip(*((old, new) if isinstance(old, list) else ([old], [new]))):
        hits = [c for c in nb.cells if o in c.source]
        assert len(hits) == 1, f"{o!r} not found in exactly one cell of {name}"
        hits[0].source = hits[0].source.replace(o, n)
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(nb, str(path))
    return path


@pytest.mark.parametrize("name, old, new, check, words", MISTAKES, ids=[m[3] for m in MISTAKES])
def test_a_planted_mistake_costs_exactly_its_checks_points(tmp_path, name, old, new, check, words):
    res = grade(planted(tmp_path, name, old, new), cell_timeout=600)
    row = next(r for r in res["checks"] if r["name"] == check)
    assert row["points"] == 0 and words in row["message"], row
    assert res["total"] == res["max"] - row["max"], json.dumps(res["checks"], indent=1)


def test_a_hanging_check_costs_only_its_points(tmp_path):
    path = planted(tmp_path, "00_es_from_scratch", "x = np.asarray(returns, dtype=np.float64)",
                   "while True:\n        pass")
    res = grade(path, cell_timeout=5, check_timeout=3)
    rows = {r["name"]: r for r in res["checks"]}
    assert rows["centered_ranks"]["points"] == 0 and "did not finish" in rows["centered_ranks"]["message"]
    assert rows["es_gradient"]["points"] == rows["es_gradient"]["max"]


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
