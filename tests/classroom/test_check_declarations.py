"""Each graded check is declared once, by its ``_register`` line in ``classroom/checks/``: its
notebook, milestone, points, the names it takes, the modules its answer must not use, the answer
key's questions it asks and whether it is slow (its planted mistakes are rows of
``planted_mistakes.MISTAKES``, at least one per check that does not grade a run, which a test
in test_build_and_grade ties). The grader's tables are derived from those lines; these tests
fail when a declaration lacks a part, says something untrue, or a table stops being derived."""
import importlib
from pathlib import Path

import pytest

from classroom import PACKAGES, check, delegation, references
from classroom.release import record_answers
from classroom.grade import MILESTONE_MAX

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENT = {"M1": 10, "M2": 5, "M3": 5, "M4": 10}      # the course's four graded milestones


def test_every_check_declares_every_part():
    assert check.CHECKS and set(check.FORBIDDEN) == set(check.CHECKS) == set(check.REFERENCE)
    assert check.SLOW <= set(check.CHECKS)
    notebooks = {p.stem for p in (ROOT / "source").glob("[0-9][0-9]_*.py")}
    for name, (milestone, points, notebook, needs) in check.CHECKS.items():
        assert milestone in (*ASSIGNMENT, "extras"), name
        assert isinstance(points, int) and points > 0, name
        assert notebook in notebooks, name
        assert needs and all(isinstance(n, str) and n for n in needs), name
        assert isinstance(check.FORBIDDEN[name], tuple), name
        for question in check.REFERENCE[name]:
            assert callable(getattr(references, question, None)), (name, question)


def test_a_declaration_without_what_its_answer_must_not_use_is_refused():
    with pytest.raises(TypeError, match="forbidden"):
        check._register("a_new_check", "extras", 1, "05_extras", reference=())
    with pytest.raises(TypeError, match="forbidden must be a tuple"):
        check._register("a_new_check", "extras", 1, "05_extras", forbidden=["es.noise"], reference=())
    with pytest.raises(TypeError, match="reference"):
        check._register("a_new_check", "extras", 1, "05_extras", forbidden=())
    assert "a_new_check" not in check.CHECKS


@pytest.mark.parametrize("name", sorted(check.FORBIDDEN))
def test_each_forbidden_name_is_one_of_ours_and_exists(name):
    """A typo (``es.noize``) would forbid nothing: each entry is a module or a name of a package."""
    for dotted in check.FORBIDDEN[name]:
        assert dotted.split(".")[0] in PACKAGES, (name, dotted)
        try:
            importlib.import_module(dotted)
        except ModuleNotFoundError:
            package, _, attribute = dotted.rpartition(".")
            assert hasattr(importlib.import_module(package), attribute), (name, dotted)


def test_the_tables_are_derived_from_the_declarations():
    assert delegation.FORBIDDEN is check.FORBIDDEN
    assert MILESTONE_MAX == {m: sum(c[1] for c in check.CHECKS.values() if c[0] == m) for m in ASSIGNMENT}
    assert MILESTONE_MAX == ASSIGNMENT


@pytest.mark.parametrize("notebook", sorted({c[2] for c in check.CHECKS.values()}))
def test_each_declared_check_is_run_in_its_notebook(notebook):
    source = (ROOT / "source" / f"{notebook}.py").read_text()
    for name in check.checks_for(notebook):
        assert f"check.{name}(" in source, f"{notebook} never runs check.{name}"


def test_a_declared_check_is_a_name_of_the_check_module():
    """``check.NAME(...)`` works from the declaration alone: no list of names to keep by hand."""
    for name in check.CHECKS:
        assert getattr(check, name).__name__ == name


def test_each_check_asks_the_answer_key_exactly_the_questions_it_declares():
    """The release records answers by running the key's solution of each check that asks
    questions; a check that asks one it does not declare, or declares one it never asks, fails."""
    assert set(references.SOLUTIONS) == {name for name, asked in check.REFERENCE.items() if asked}
    recorded = record_answers(seeds=(11,))
    for name in references.SOLUTIONS:
        asked = {question for question, *_ in recorded[name]["11"]}
        assert asked == set(check.REFERENCE[name]), name
