"""``python -m es notebooks [--check]``: one source per notebook, two outputs.

Sources are jupytext-style ``py:percent`` files in ``course/`` (text that diffs well):

    # %% [markdown]
    # # Title
    # %% tags=["solution_only"]
    code only the solution notebook shows

Code cells mark graded regions the nbgrader way::

    ### BEGIN SOLUTION
    ...
    ### END SOLUTION

``solutions/NAME.ipynb`` keeps everything (minus the markers); ``notebooks/NAME.ipynb`` replaces
each region by a banner and ``raise NotImplementedError`` at the region's indentation, so a
blank notebook is still valid Python. Cell tags: ``solution_only`` (dropped from the student
notebook), ``student_only`` (dropped from the solution), ``grader`` (dropped from both).
``--check`` exits non-zero when the committed notebooks differ from what the build writes.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES, STUDENT, SOLUTION = ROOT / "course", ROOT / "notebooks", ROOT / "solutions"
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
BANNER = "# ======================= YOUR CODE HERE ======================="
_CELL = re.compile(r"^# %%(?P<rest>.*)$")


def parse(text: str) -> list[dict]:
    """py:percent -> list of {"type": "code"|"markdown", "tags": [...], "source": str}."""
    cells, current = [], None
    for line in text.splitlines():
        m = _CELL.match(line)
        if m:
            rest = m.group("rest")
            tags = json.loads(re.search(r"tags=(\[.*?\])", rest).group(1)) if "tags=" in rest else []
            current = {"type": "markdown" if "[markdown]" in rest else "code", "tags": tags, "lines": []}
            cells.append(current)
        elif current is not None:
            current["lines"].append(line)
    out = []
    for c in cells:
        lines = c.pop("lines")
        while lines and not lines[-1].strip():
            lines.pop()
        if c["type"] == "markdown":
            lines = [l[2:] if l.startswith("# ") else l.lstrip("#") for l in lines]
        out.append({**c, "source": "\n".join(lines)})
    return out


def student_source(source: str, name: str = "") -> str:
    """Replace every solution region by a banner and ``raise NotImplementedError``."""
    out, inside, indent = [], False, ""
    for line in source.splitlines():
        stripped = line.strip()
        if stripped == BEGIN:
            inside, indent = True, line[: len(line) - len(line.lstrip())]
            out += [indent + BANNER, f'{indent}raise NotImplementedError("{name}: your code here")']
        elif stripped == END:
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{name}: {BEGIN} without {END}")
    return "\n".join(out)


def solution_source(source: str) -> str:
    return "\n".join(l for l in source.splitlines() if l.strip() not in (BEGIN, END))


def build_notebook(cells: list[dict], name: str, student: bool) -> dict:
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.metadata.update({"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                        "language_info": {"name": "python"},
                        "es_course": {"notebook": name, "version": "student" if student else "solution"}})
    for c in cells:
        if "grader" in c["tags"] or ("solution_only" in c["tags"] and student) or ("student_only" in c["tags"] and not student):
            continue
        if c["type"] == "markdown":
            cell = nbformat.v4.new_markdown_cell(c["source"])
        else:
            src = student_source(c["source"], name) if student else solution_source(c["source"])
            cell = nbformat.v4.new_code_cell(src)
        cell.metadata = {"tags": [t for t in c["tags"]]} if c["tags"] else {}
        cell.pop("id", None)
        nb.cells.append(cell)
    return nb


def render(nb: dict) -> str:
    import nbformat
    return nbformat.writes(nb, version=4) + "\n"


def outputs() -> dict[Path, str]:
    """Every notebook the build writes, path -> text (deterministic)."""
    out = {}
    for src in sorted(SOURCES.glob("[0-9][0-9]_*.py")):
        cells = parse(src.read_text())
        name = src.stem
        for folder, student in ((STUDENT, True), (SOLUTION, False)):
            nb = build_notebook(cells, name, student)
            for i, cell in enumerate(nb.cells):
                cell["id"] = f"{name}-{i:03d}"   # stable ids, so rebuilding changes nothing
            out[folder / f"{name}.ipynb"] = render(nb)
    return out


def build(check: bool = False, log=print) -> int:
    files = outputs()
    if not files:
        log(f"no notebook sources in {SOURCES}")
        return 1
    if check:
        stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
        for p in stale:
            log(f"out of date: {p.relative_to(ROOT)} (run: python -m es notebooks)")
        if not stale:
            log(f"notebooks up to date ({len(files)} files)")
        return 1 if stale else 0
    for p, text in files.items():
        p.parent.mkdir(exist_ok=True)
        p.write_text(text)
    log(f"wrote {len(files)} notebooks to {STUDENT.relative_to(ROOT)}/ and {SOLUTION.relative_to(ROOT)}/")
    return 0
