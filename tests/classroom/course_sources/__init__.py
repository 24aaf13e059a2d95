"""Where each number a student reads comes from: one module per page (``p_<page>.py``, a list
``CLAIMS`` of ``course_numbers.Claim``), and the helpers those claims use to hold a number to its
source. ``tests/classroom/test_course_claims.py::test_every_number_a_student_reads_has_a_source``
runs them; ``python tests/classroom/course_numbers.py PAGE`` lists what a page still lacks."""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]


def mirrored_lines(repo: Path, commit: str, path: str) -> list | None:
    """The lines of ``path`` at ``commit`` in a local mirror of another project, or None where
    this machine has no mirror or git cannot show it (the citation in the text is then what the
    claim holds). The mirror may belong to another user (an instructor's, read as ``nobody``):
    git is told it is safe to read."""
    import subprocess
    if not Path(repo).exists():
        return None
    out = subprocess.run(["git", "-c", "safe.directory=*", f"--git-dir={repo}", "show", f"{commit}:{path}"],
                         capture_output=True, text=True)
    return out.stdout.splitlines() if out.returncode == 0 else None


@lru_cache(maxsize=None)
def outputs(notebook: str) -> str:
    """Everything the committed executed solution of ``notebook`` printed (its code cells' text
    outputs, in order)."""
    import nbformat
    nb = nbformat.read(str(ROOT / "solutions" / f"{notebook}.ipynb"), as_version=4)
    parts = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            for o in cell.get("outputs", []):
                text = o.get("text") or o.get("data", {}).get("text/plain", "")
                parts.append("".join(text) if isinstance(text, list) else str(text))
    return "\n".join(parts)


def printed(notebook: str, *texts: str) -> None:
    """Each text appears, as written, in what the executed solution of ``notebook`` printed."""
    out = outputs(notebook)
    for text in texts:
        assert text in out, f"{notebook} does not print {text!r}"


@lru_cache(maxsize=None)
def cells(notebook: str) -> tuple:
    """(cell_type, source, tags) of each cell of ``source/<notebook>.py``."""
    import jupytext
    nb = jupytext.reads((ROOT / "source" / f"{notebook}.py").read_text(), fmt="py:percent")
    return tuple((c.cell_type, c.source, tuple(c.metadata.get("tags", []))) for c in nb.cells)


def solution(notebook: str, *names: str, fast: bool = True) -> dict:
    """A namespace holding the solution's definitions of ``names`` (functions or constants): the
    notebook's first code cell (its imports) and every code cell that defines one of them, run in
    order, solution regions included, in fast mode unless ``fast`` is False. Cells that only
    call a check are left out."""
    import os
    from classroom.build import BEGIN, END
    code = [src for kind, src, _ in cells(notebook) if kind == "code"]
    wanted = [code[0]] + [src for src in code[1:]
                          if any(re.search(rf"^(def {n}\(|{n}\s*=)", src, re.M) for n in names)]
    namespace = {"__name__": "__course_sources__"}
    old = os.environ.get("ES_COURSE_FAST")
    os.environ["ES_COURSE_FAST"] = "1" if fast else "0"
    try:
        for src in wanted:
            exec(src.replace(BEGIN, "").replace(END, ""), namespace)
    finally:
        if old is None:
            os.environ.pop("ES_COURSE_FAST", None)
        else:
            os.environ["ES_COURSE_FAST"] = old
    missing = [n for n in names if n not in namespace]
    assert not missing, f"{notebook} defines none of {missing}"
    return namespace


def lines(path: str) -> list:
    """The JSON lines of a committed file (path from the repository root)."""
    return [json.loads(line) for line in (ROOT / path).read_text().splitlines() if line.strip()]


def load(path: str):
    """A committed JSON file (path from the repository root)."""
    return json.loads((ROOT / path).read_text())


def fmt(values, decimals: int) -> str:
    """A list of numbers as the text writes it: ``[0.3333, -0.5]``."""
    return "[" + ", ".join(f"{float(v):.{decimals}f}".rstrip("0").rstrip(".") if decimals else f"{float(v):.0f}"
                           for v in np.ravel(values)) + "]"


def source_of(obj) -> str:
    """The source text of an installed module, class or function (for claims about another
    project's code: the version the course installs)."""
    import inspect
    return inspect.getsource(obj)


def check_points(notebook: str) -> int:
    """The points of a notebook's graded checks."""
    from classroom.check import CHECKS, UNGRADED
    return sum(points for name, (_, points, nb, _) in CHECKS.items() if nb == notebook and name not in UNGRADED)
