"""Grading a class the way an instructor does: ``python -m classroom grade CLASS --csv ... --feedback
...`` gives one row per student with the right totals, a row per student and check, a summary,
a feedback file per student that shows the numbers, and grading one student again on the same
inputs gives the same result. Nothing gradable is an error."""
import csv
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import attacks as A
from classroom.check import CHECKS
from classroom.gradebook import Student, collect
from es.errors import ESError

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "source").glob("[0-9][0-9]_*.py"))
BUG = ("return ranks / (len(x) - 1) - 0.5", "return ranks / (len(x) - 1)")      # carol forgot to center


def cli(*args, timeout=1200, module="classroom"):
    return subprocess.run([sys.executable, "-m", module, "grade", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout)


def build_class(folder: Path) -> Path:
    """A class of four: reference (every notebook of solutions/, with the committed runs
    solutions/pong-run, trained for "reference", and solutions/cheetah-run), blank (every notebook
    as released), bob (notebook 04 full, one folder down, with the run trained for someone
    else: reference's), carol (notebook 00 only, with one planted bug). Each student's notebooks
    that show something new, so the class grades 16 notebooks instead of 28."""
    import shutil
    for name in NOTEBOOKS:
        A.notebook(A.solution(name), folder / "reference" / f"{name}.ipynb")
        A.notebook(A.blank(name), folder / "blank" / f"{name}.ipynb")
    A.notebook(A.solution("04_pong"), folder / "bob" / "work" / "04_pong.ipynb")       # nested: still bob's
    A.notebook(A.solution("00_es_from_scratch"), folder / "carol" / "00_es_from_scratch.ipynb", replace=BUG)
    shutil.copytree(ROOT / "solutions" / "pong-run", folder / "reference" / "pong-run")
    shutil.copytree(ROOT / "solutions" / "pong-run", folder / "bob" / "work" / "pong-run")
    shutil.copytree(ROOT / "solutions" / "cheetah-run", folder / "reference" / "cheetah-run")   # notebook 06's agent
    return folder


@pytest.mark.slow
def test_a_class_of_four_gets_a_row_each_with_the_right_totals_and_feedback_within_10_minutes(tmp_path):
    """Also where the solutions are held to full marks on every check, and the released
    notebooks to 0 with a message per check that says why."""
    folder = build_class(tmp_path / "class")
    t0 = time.monotonic()
    out = cli(folder, "--csv", tmp_path / "gradebook.csv", "--feedback", tmp_path / "feedback")
    seconds = time.monotonic() - t0
    assert out.returncode == 0, out.stderr[-2000:]
    assert seconds < 600, seconds
    book = {r["student"]: r for r in csv.DictReader(open(tmp_path / "gradebook.csv"))}
    # extras: 03's 5, 05's 5 and 06's functions' 5; 06's agent (3) for reference, the one with a cheetah-run
    want = {"blank": [0, 0, 0, 0, 0, 0], "bob": [0, 0, 0, 6, 6, 0], "carol": [2, 0, 0, 0, 2, 0],
            "reference": [10, 5, 5, 10, 30, 18]}
    got = {s: [int(r[c]) for c in ("M1", "M2", "M3", "M4", "total", "extras")] for s, r in book.items()}
    assert got == want, out.stdout[-3000:]
    assert all(r["max"] == "30" for r in book.values())
    checks = list(csv.DictReader(open(tmp_path / "gradebook-checks.csv")))
    assert len(checks) == 4 * len(CHECKS)
    by = {(r["student"], r["check"]): r for r in checks}
    short = [r for (s, _), r in by.items() if s == "reference" and r["points"] != r["max"]]
    assert not short, short
    assert "forgot to center" in by[("carol", "centered_ranks")]["message"]
    assert "no notebook 04_pong.ipynb found in carol/" in by[("carol", "pong_agent")]["message"]
    assert "trained as 'reference' (the notebook's STUDENT_ID)" in by[("bob", "pong_agent")]["message"]
    blank_said = ("not implemented yet", "define", "no folder pong-run",
                  "no folder cheetah-run")   # 06's agent: a blank notebook trained nothing
    unexplained = [r["message"] for (s, _), r in by.items() if s == "blank" and not any(x in r["message"] for x in blank_said)]
    assert not unexplained, unexplained
    # the summary: per milestone the mean and how many got full marks, per check how many passed
    text = out.stdout
    assert re.search(r"M1\s+3\.0 / 10\s+1 of 4", text) and re.search(r"centered_ranks\s+M1\s+1 of 4", text), text[-2500:]
    assert re.search(r"pong_agent\s+M4\s+1 of 4", text)
    assert "graded 4 student(s), 16 notebook(s)" in text     # 7 + 7 + 1 + 1
    files = sorted(p.name for p in (tmp_path / "feedback").iterdir())
    assert files == ["blank.md", "bob.md", "carol.md", "reference.md"]
    ref = (tmp_path / "feedback" / "reference.md").read_text()
    assert "Graded as reference: the name of your top-level folder in the class, reference/." in ref
    assert "95% interval" in ref and "A random player on the same seeds" in ref and "Verdict: beats random" in ref
    bob = (tmp_path / "feedback" / "bob.md").read_text()
    assert "rename the submission folder to reference" in bob and "--student reference" in bob
    blank = (tmp_path / "feedback" / "blank.md").read_text()
    assert "Total: 0 / 30" in blank and blank.count("not implemented yet") >= 10
    print(f"class of 4 graded in {seconds:.0f} s ({seconds / 4:.0f} s per student)")


@pytest.mark.slow
def test_nothing_gradable_exits_non_zero_with_a_message(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "texts").mkdir()
    (tmp_path / "texts" / "notes.txt").write_text("not a notebook")
    (tmp_path / "solution.py").write_text("print('hello')\n")
    for path, words in ((tmp_path / "missing", "does not exist"), (tmp_path / "empty", "nothing to grade"),
                        (tmp_path / "texts", "nothing to grade"), (tmp_path / "solution.py", "nothing to grade")):
        out = cli(path, timeout=120)
        assert out.returncode == 2 and words in out.stderr and len(out.stderr.splitlines()) == 1, (path, out.stderr)
    out = cli(tmp_path / "empty", timeout=120, module="es")            # the alias says the same
    assert out.returncode == 2 and "nothing to grade" in out.stderr


def test_which_notebook_is_graded_and_who_it_belongs_to(tmp_path):
    A.notebook(A.blank("01_cartpole"), tmp_path / "class" / "alice" / "01_cartpole-Copy1.ipynb")
    A.notebook(A.blank("01_cartpole"), tmp_path / "class" / "alice" / "sub" / "01_cartpole.ipynb")
    A.notebook(A.blank("00_es_from_scratch"), tmp_path / "class" / "alice" / "scratch" / "00_mine.ipynb")
    (tmp_path / "class" / "alice" / "linked").symlink_to(ROOT / "solutions")
    [alice] = collect([tmp_path / "class"])
    assert alice.name == "alice" and alice.notebooks["01_cartpole"].name == "01_cartpole.ipynb"
    assert alice.notebooks["00_es_from_scratch"].name == "00_mine.ipynb"
    notes = "\n".join(alice.notes)
    assert "01_cartpole-Copy1.ipynb not graded" in notes and "linked is a symbolic link to a folder" in notes
    with pytest.raises(ESError, match="nothing to grade"):
        collect([ROOT / "README.md"])


@pytest.mark.slow
def test_grading_one_student_again_on_the_same_inputs(tmp_path):
    """The instructor's re-grade: the feedback names the seed and the command; running it gives
    the same messages, the student's identity as given."""
    nb = A.notebook(A.solution("00_es_from_scratch"), tmp_path / "class" / "carol" / "00_es_from_scratch.ipynb",
                    replace=BUG)
    out = cli(tmp_path / "class", "--feedback", tmp_path / "fb", "--json", timeout=300)
    assert out.returncode == 0, out.stderr
    first = json.loads(out.stdout.splitlines()[0])
    feedback = (tmp_path / "fb" / "carol.md").read_text()
    command = re.search(r"python -m classroom grade (\S+) --student carol --input-seed (\d+)", feedback)
    assert command and int(command.group(2)) == first["input_seed"] and Path(command.group(1)) == nb.parent
    again = cli(command.group(1), "--student", "carol", "--input-seed", command.group(2), "--json", timeout=300)
    second = json.loads(again.stdout.splitlines()[0])
    assert [r["message"] for r in second["checks"]] == [r["message"] for r in first["checks"]]
    assert second["student"] == "carol" and "given with --student" in second["identity"]
    assert "[inputs from seed" in second["checks"][0]["message"]


@pytest.mark.slow
def test_a_failure_shows_the_students_own_error_without_grader_frames(tmp_path):
    nb = A.notebook(A.solution("00_es_from_scratch"), tmp_path / "dave" / "00_es_from_scratch.ipynb",
                    replace=("x = np.asarray(returns, dtype=np.float64)",
                             "x = np.asarray(returns, dtype=np.float64)\n    x = x[[len(x)]]"))
    from classroom.grade import grade
    res = grade(nb, cell_timeout=60, check_timeout=30)
    msg = {r["name"]: r["message"] for r in res["checks"]}["centered_ranks"]
    assert "raised IndexError" in msg and "(in centered_ranks, line " in msg and "`x = x[[len(x)]]`" in msg, msg
    assert not any(w in msg for w in ("probe", "_es_grade", "classroom", "Traceback", "site-packages")), msg


def test_html_feedback_shows_every_check_and_escapes_what_students_wrote(tmp_path):
    from classroom.feedback import write_feedback
    s = Student("eve", tmp_path / "class" / "eve", "the name of your top-level folder in the class, eve/", seed=7)
    s.results = [{"submission": str(s.root / "00_es_from_scratch.ipynb"), "course_notebook": "00_es_from_scratch",
                  "input_seed": 7, "seconds": 3.0, "isolation": "namespaces",
                  "checks": [{"name": "centered_ranks", "milestone": "M1", "points": 0, "max": 2,
                              "message": "centered_ranks: raised ValueError: <script>alert(1)</script>"},
                             {"name": "es_gradient", "milestone": "M1", "points": 2, "max": 2, "message": "passed"}]}]
    page = write_feedback(s, tmp_path / "fb", "html").read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page
    for name in CHECKS:
        assert f"<td>{name}</td>" in page
    assert "--input-seed 7" in page and "Total: 2 / 30" in page
