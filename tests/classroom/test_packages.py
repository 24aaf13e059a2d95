"""The course's own packages are listed once (``classroom.PACKAGES``): the release, the
grader and the environment checks all read that list, and it names every top-level package
the project installs."""
import ast
import tomllib
from pathlib import Path

import classroom
from classroom import environment, grade

ROOT = Path(__file__).resolve().parents[2]


def test_the_list_names_every_package_the_project_installs():
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assert set(classroom.PACKAGES) == {p for p in setup if "." not in p}


def test_the_grader_and_the_environment_checks_use_it():
    assert set(classroom.PACKAGES) <= set(grade.REFERENCE_HOMES)
    assert environment.OWN == classroom.PACKAGES


def test_no_module_spells_the_list_again():
    """A tuple, list or set of string constants naming two or more of the packages, anywhere in
    classroom/ but its __init__.py, is a second copy that will miss the next package."""
    names, copies = set(classroom.PACKAGES), []
    for path in sorted((ROOT / "classroom").rglob("*.py")):
        if path.name == "__init__.py" and path.parent.name == "classroom":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                spelled = {e.value for e in node.elts if isinstance(e, ast.Constant)} & names
                if len(spelled) >= 2:
                    copies.append(f"{path.relative_to(ROOT)}:{node.lineno} {sorted(spelled)}")
    assert not copies, copies
