"""Inline questions (CS231n's): a question in the student notebook, a cell the student writes
the answer in, and a reference answer that only the solution and the instructor's feedback
show, for reading by hand (the checks give them no points)."""
import json
from pathlib import Path

import nbformat

from classroom import build, feedback
from classroom.grade import inline_answers
from classroom.records import Student

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "source").glob("[0-9][0-9]_*.py"))
ASKED = {"00_es_from_scratch": ["ranks"], "01_cartpole": ["shaping"], "02_parallel": ["slower"], "03_redis": ["bytes"]}


def test_each_question_has_an_answer_cell_for_the_student_and_a_reference_for_the_solution():
    for name in NOTEBOOKS:
        questions = build.inline_questions(name)
        assert list(questions) == ASKED.get(name, []), name
        student = nbformat.read(str(ROOT / "notebooks" / f"{name}.ipynb"), 4)
        solution = nbformat.read(str(ROOT / "solutions" / f"{name}.ipynb"), 4)
        for qid, q in questions.items():
            assert q["question"].startswith("**Inline question") and q["reference"].startswith("**Reference answer:**")
            [cell] = [c for c in student.cells if f"answer:{qid}" in c.metadata.get("tags", [])]
            assert cell.source == f"{feedback.PROMPT} {feedback.PLACEHOLDER}"
            assert cell.metadata["nbgrader"]["locked"] is False
            assert not any(q["reference"] in c.source for c in student.cells)        # the answer key stays out
            assert any(q["reference"] == c.source for c in solution.cells)
            assert not any(f"answer:{qid}" in c.metadata.get("tags", []) for c in solution.cells)


def test_the_feedback_shows_the_question_the_students_answer_and_the_reference(tmp_path):
    nb = nbformat.read(str(ROOT / "notebooks" / "02_parallel.ipynb"), 4)
    [cell] = [c for c in nb.cells if "answer:slower" in c.metadata.get("tags", [])]
    cell.source = f"{feedback.PROMPT} starting the workers costs more than the work."
    answers = inline_answers("02_parallel", build.student_answers(json.loads(nbformat.writes(nb))))
    blank = inline_answers("02_parallel", build.student_answers(nbformat.read(
        str(ROOT / "notebooks" / "02_parallel.ipynb"), 4)))
    assert [a["id"] for a in answers] == ["slower"] and answers[0]["reference"].startswith("**Reference answer:**")
    for who, given in (("dana", answers), ("eve", blank)):
        s = Student(who, tmp_path / who, "the folder's name")
        s.results = [{"course_notebook": "02_parallel", "submission": str(tmp_path / who / "02_parallel.ipynb"),
                      "checks": [], "answers": given, "status": "graded"}]
        text = feedback.markdown(feedback.blocks(s))
        assert "### Inline questions (no points from the checks: read by hand)" in text
        assert "**Inline question 1.** Why can two jobs take *longer* than one here" in text
        assert "**Reference answer:** A whole CartPole generation" in text
        said = "> Your answer: starting the workers costs more than the work." if who == "dana" else \
            "> Your answer: (no answer written)"
        assert said in text, text
    html = feedback.to_html(feedback.blocks(s), "eve")
    assert "<blockquote>Your answer: (no answer written)</blockquote>" in html


def test_a_long_or_odd_answer_is_cut_and_unknown_ids_are_dropped():
    raw = {"slower": "x" * 10_000, "made-up": "hello", "bytes": 3}
    out = inline_answers("02_parallel", raw)
    assert [a["id"] for a in out] == ["slower"] and len(out[0]["answer"]) == 3000
    assert inline_answers("", raw) == [] and inline_answers("02_parallel", "not a dict")[0]["answer"] == ""
