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

from planted_mistakes import MISTAKES

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


# The checks that grade a run (check.grades_a_run) have no row in MISTAKES: Pong's agent check replays a run
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
