"""nbgrader interop: the generated notebooks carry nbgrader's cell metadata, and the real
nbgrader (generate_assignment, then autograde) gives each check the points `python -m es
grade` gives it, for a full, a partly wrong and a blank submission."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from classroom.check import CHECKS
from classroom.grade import grade
from child_env import subprocess_env

pytestmark = pytest.mark.slow   # nbgrader's own autograder, a minute or more

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "source").glob("[0-9][0-9]_*.py"))
nbgrader = pytest.importorskip("nbgrader", reason="nbgrader is in requirements.txt")


@pytest.mark.parametrize("folder", ["notebooks", "solutions"])
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_generated_notebooks_carry_valid_nbgrader_metadata_worth_the_graders_points(folder, name):
    from nbgrader.nbgraderformat.v3 import MetadataValidatorV3
    nb = nbformat.read(str(ROOT / folder / f"{name}.ipynb"), 4)
    MetadataValidatorV3().validate_nb(nb)          # raises on a missing grade_id, points, a duplicate id
    meta = [c.metadata["nbgrader"] for c in nb.cells]
    graded = {m["grade_id"]: m["points"] for m in meta if m["grade"]}
    assert graded == {n: c[1] for n, c in CHECKS.items() if c[2] == name}
    assert all(m["locked"] for m in meta if m["grade"])
    solution = [c for c in nb.cells if c.metadata["nbgrader"]["solution"]]
    assert solution and all(c.cell_type == "code" and not c.metadata["nbgrader"]["locked"] for c in solution)
    marker = "### BEGIN SOLUTION" if folder == "solutions" else "YOUR CODE HERE"
    assert all(marker in c.source for c in solution)
    # every other cell is locked, but the inline questions' answer cells, which the student writes in
    answers = [c for c in nb.cells if any(t.startswith("answer:") for t in c.metadata.get("tags", []))]
    assert all(not c.metadata["nbgrader"]["locked"] and c.cell_type == "markdown" for c in answers)
    assert all(m["locked"] for c, m in zip(nb.cells, meta) if not m["grade"] and not m["solution"] and c not in answers)


# The notebook of the round trip, with a mistake on one of its checks for the second student:
# 00, whose gradings take the least time (02's took twice as long: it trains with joblib); the
# metadata test above holds every notebook's points to the grader's.
ROUND_TRIP = {
    "00_es_from_scratch": ("return ranks / (len(x) - 1) - 0.5", "return ranks / (len(x) - 1)"),
}


def test_nbgrader_autograde_agrees_with_es_grade_check_by_check(tmp_path):
    course = tmp_path / "course"
    (course).mkdir()
    (course / "nbgrader_config.py").write_text(
        "c = get_config()\nc.CourseDirectory.course_id = 'es-course'\n"
        f"c.CourseDirectory.root = {str(course)!r}\nc.ExecutePreprocessor.timeout = 600\n")
    env = subprocess_env(ES_COURSE_FAST="1")
    nbg = [sys.executable, "-m", "nbgrader"]
    for name in ROUND_TRIP:
        (course / "source" / name).mkdir(parents=True)
        shutil.copy(ROOT / "solutions" / f"{name}.ipynb", course / "source" / name)
        out = subprocess.run([*nbg, "generate_assignment", name, "--force"], cwd=course, env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stdout + out.stderr
        release = course / "release" / name / f"{name}.ipynb"
        old, new = ROUND_TRIP[name]
        wrong = nbformat.read(str(ROOT / "solutions" / f"{name}.ipynb"), 4)
        [cell] = [c for c in wrong.cells if old in c.source]
        cell.source = cell.source.replace(old, new)
        for student, make in (("full", lambda p: shutil.copy(ROOT / "solutions" / f"{name}.ipynb", p)),
                              ("mistake", lambda p: nbformat.write(wrong, str(p))),
                              ("blank", lambda p: shutil.copy(release, p))):
            target = course / "submitted" / student / name / f"{name}.ipynb"
            target.parent.mkdir(parents=True)
            make(target)
        out = subprocess.run([*nbg, "autograde", name], cwd=course, env=env, capture_output=True, text=True,
                             timeout=900)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]

    from nbgrader.api import Gradebook
    theirs = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for name in ROUND_TRIP:
            for student in ("full", "mistake", "blank"):
                sub = gb.find_submission_notebook(name, name, student)
                theirs[name, student] = {g.cell.name: g.score for g in sub.grades}
    from concurrent.futures import ThreadPoolExecutor
    keys = [(name, student) for name in ROUND_TRIP for student in ("full", "mistake", "blank")]
    with ThreadPoolExecutor(2) as pool:      # two at a time, as `es grade` grades a class
        results = pool.map(lambda k: grade(course / "submitted" / k[1] / k[0] / f"{k[0]}.ipynb", cell_timeout=600),
                           keys)
        ours = {k: {r["name"]: float(r["points"]) for r in res["checks"]} for k, res in zip(keys, results)}
    assert theirs == ours, json.dumps({f"{k[0]}/{k[1]}": [theirs[k], ours[k]] for k in ours}, indent=1)
    for name in ROUND_TRIP:                 # and the three submissions are what they claim to be
        full = {n: float(c[1]) for n, c in CHECKS.items() if c[2] == name}
        assert ours[name, "full"] == full and set(ours[name, "blank"].values()) == {0.0}
        assert 0 < sum(ours[name, "mistake"].values()) < sum(full.values())
