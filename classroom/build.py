"""``python -m es notebooks [--check]``: one source per notebook, two outputs.

Sources are jupytext ``py:percent`` files in ``source/`` (text that diffs well), read with
jupytext:

    # %% [markdown]
    # # Title
    # %% tags=["solution_only"]
    code only the solution notebook shows

Code cells mark graded regions the nbgrader way::

    ### BEGIN SOLUTION
    ...
    ### END SOLUTION

``solutions/NAME.ipynb`` keeps everything, markers included, so that it is also nbgrader's
*source* version; ``notebooks/NAME.ipynb`` replaces each region by a banner and ``raise
NotImplementedError`` at the region's indentation, so a blank notebook is still valid Python.
Cell tags: ``solution_only`` (dropped from the student notebook), ``student_only`` (dropped
from the solution), ``grader`` (dropped from both). Inline questions (CS231n's, answered in
words, read by hand): a Markdown cell tagged ``question:ID``, the student's answer cell tagged
``answer:ID`` (and ``student_only``; the one cell a student edits that is not code), and the
reference answer tagged ``reference:ID`` (and ``solution_only``); ``inline_questions`` reads
them for the grader's feedback.

Both carry nbgrader cell metadata (``nbgrader_metadata``): a cell with a solution region is
a solution cell; a cell that is one call ``check.NAME(...)`` is an autograded cell with
``grade_id`` NAME and the check's points, so nbgrader's totals are ``python -m es grade``'s,
unless NAME is in ``check.UNGRADED`` (a check a student runs for their own sake, worth no
points); every other cell is locked. ``--check`` exits non-zero when the committed notebooks differ
from what the build writes (outputs aside: the solutions are committed executed, by
``--execute``, and keep their outputs while their source is unchanged).
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES, STUDENT, SOLUTION = ROOT / "source", ROOT / "notebooks", ROOT / "solutions"
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
BANNER = "# ======================= YOUR CODE HERE ======================="


def parse(text: str) -> list[dict]:
    """py:percent (jupytext) -> list of {"type": "code"|"markdown", "tags": [...], "source": str}."""
    import jupytext
    nb = jupytext.reads(text, fmt="py:percent")
    return [{"type": c.cell_type, "tags": list(c.metadata.get("tags", [])), "source": c.source} for c in nb.cells]


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


def graded_check(source: str) -> str | None:
    """NAME if the cell is one call ``check.NAME(...)`` (comments aside), else None."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return None
    if len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Call):
        f = body[0].value.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "check":
            return f.attr
    return None


def nbgrader_metadata(cell: dict, name: str, index: int) -> dict:
    """nbgrader (schema 3) metadata of one source cell of notebook ``name``."""
    from .check import CHECKS, UNGRADED
    meta = {"schema_version": 3, "grade": False, "solution": False, "locked": True, "grade_id": f"{name}-{index:03d}"}
    check = graded_check(cell["source"]) if cell["type"] == "code" else None
    if check is not None and check not in UNGRADED:      # UNGRADED: a check a student runs, worth no points
        if check not in CHECKS or CHECKS[check][2] != name:
            raise ValueError(f"{name}: cell {index} calls check.{check}, which is not a check of this notebook")
        meta.update(grade=True, grade_id=check, points=CHECKS[check][1])
    elif cell["type"] == "code" and any(l.strip() == BEGIN for l in cell["source"].splitlines()):
        meta.update(solution=True, locked=False)
    elif answer_id(cell["tags"]) is not None:
        meta.update(locked=False)          # the student writes their answer in it
    return meta


def _tagged(tags, kind: str) -> str | None:
    return next((t.split(":", 1)[1] for t in tags if t.startswith(kind + ":")), None)


def answer_id(tags) -> str | None:
    """ID of an inline question's answer cell (tag ``answer:ID``), else None."""
    return _tagged(tags, "answer")


def inline_questions(name: str) -> dict[str, dict]:
    """The inline questions of notebook ``name``, in order: ID -> {"question", "reference"}
    (Markdown text), read from its source."""
    out: dict[str, dict] = {}
    for cell in parse((SOURCES / f"{name}.py").read_text()):
        for kind in ("question", "reference"):
            qid = _tagged(cell["tags"], kind)
            if qid is not None:
                out.setdefault(qid, {})[kind] = cell["source"]
    return out


def student_answers(nb) -> dict[str, str]:
    """ID -> the text of each inline question's answer cell in a student's notebook (tag
    ``answer:ID``), as written."""
    out = {}
    for cell in nb.get("cells", []) if isinstance(nb, dict) else []:
        tags = cell.get("metadata", {}).get("tags", []) if isinstance(cell.get("metadata"), dict) else []
        qid = answer_id(tags) if isinstance(tags, list) and all(isinstance(t, str) for t in tags) else None
        if qid is not None and cell.get("cell_type") == "markdown":
            source = cell.get("source", "")
            out[qid] = "".join(source) if isinstance(source, list) else str(source)
    return out


def build_notebook(cells: list[dict], name: str, student: bool) -> dict:
    import nbformat
    from .check import checks_for
    nb = nbformat.v4.new_notebook()
    nb.metadata.update({"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                        "language_info": {"name": "python"},
                        "es_course": {"notebook": name, "version": "student" if student else "solution"}})
    graded = []
    for i, c in enumerate(cells):
        if "grader" in c["tags"] or ("solution_only" in c["tags"] and student) or ("student_only" in c["tags"] and not student):
            continue
        if c["type"] == "markdown":
            cell = nbformat.v4.new_markdown_cell(c["source"])
        else:
            cell = nbformat.v4.new_code_cell(student_source(c["source"], name) if student else c["source"])
        cell.metadata = {"tags": list(c["tags"])} if c["tags"] else {}
        cell.metadata["nbgrader"] = nbgrader_metadata(c, name, i)
        if cell.metadata["nbgrader"]["grade"]:
            graded.append(cell.metadata["nbgrader"]["grade_id"])
        cell.pop("id", None)
        nb.cells.append(cell)
    want = checks_for(name)
    if sorted(graded) != sorted(want):
        raise ValueError(f"{name}: the check cells are {sorted(graded)}, the grader's checks {sorted(want)}; "
                         "each check needs exactly one cell that only calls it")
    return nb


def render(nb: dict) -> str:
    import nbformat
    return nbformat.writes(nb, version=4) + "\n"


def _stamped(text: str) -> str:
    """The notebook with ``es_course.built``: a digest of its source cells, so that a later build
    can tell a file it wrote (untouched, or only run) from one someone edited."""
    import hashlib
    import nbformat
    nb = nbformat.reads(text, as_version=4)
    nb.metadata["es_course"]["built"] = hashlib.sha256(without_outputs(text).encode()).hexdigest()[:16]
    return render(nb)


def outputs(names=None) -> dict[Path, str]:
    """Every notebook the build writes (or those of the sources ``names``), path -> text
    (deterministic)."""
    out = {}
    for src in sorted(SOURCES.glob("[0-9][0-9]_*.py")):
        if names is not None and src.stem not in names:
            continue
        cells = parse(src.read_text())
        name = src.stem
        for folder, student in ((STUDENT, True), (SOLUTION, False)):
            nb = build_notebook(cells, name, student)
            for i, cell in enumerate(nb.cells):
                cell["id"] = f"{name}-{i:03d}"   # stable ids, so rebuilding changes nothing
            out[folder / f"{name}.ipynb"] = _stamped(render(nb))
    return out


def without_outputs(text: str) -> str:
    """A notebook's text with outputs, execution counts, the run record and the build stamp
    removed: what the build writes, for comparing an executed or edited notebook with it."""
    import nbformat
    nb = nbformat.reads(text, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata.pop("es_course_run", None)
    nb.metadata.get("es_course", {}).pop("built", None)
    return render(nb)


def _same_source(path: Path, text: str) -> bool:
    return path.exists() and without_outputs(path.read_text()) == without_outputs(text)


def edited(path: Path) -> bool:
    """Has someone changed this notebook's cells since a build wrote it? (Outputs from running it
    are not edits.) A notebook without the build's stamp counts as edited."""
    import hashlib
    import nbformat
    try:
        text = path.read_text()
        stamp = nbformat.reads(text, as_version=4).metadata.get("es_course", {}).get("built")
    except Exception:       # not a notebook at all: someone's file
        return True
    return stamp != hashlib.sha256(without_outputs(text).encode()).hexdigest()[:16]


def _outputs_kept(old: str, new: str) -> str | None:
    """``new`` with the outputs and run record of the executed ``old``, when only text
    (Markdown) cells differ: the code that produced the outputs is the same. Else None."""
    import nbformat
    a, b = nbformat.reads(old, as_version=4), nbformat.reads(new, as_version=4)
    code_a = [c for c in a.cells if c.cell_type == "code"]
    code_b = [c for c in b.cells if c.cell_type == "code"]
    if [(c.source, c.metadata) for c in code_a] != [(c.source, c.metadata) for c in code_b]:
        return None
    for x, y in zip(code_a, code_b):
        y.outputs, y.execution_count = x.outputs, x.execution_count
    if "es_course_run" in a.metadata:
        b.metadata["es_course_run"] = a.metadata["es_course_run"]
    return render(b)


def write_notebooks(files: dict[Path, str], force: bool = False, log=print) -> list[Path]:
    """Write each notebook unless that would lose someone's work: a notebook whose cells were
    edited since the build wrote it stays as it is (``force`` overwrites it). An executed
    notebook of an unchanged source keeps its outputs. Returns the files left alone."""
    kept = []
    for p, text in files.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.exists():
            if _same_source(p, text):
                continue                # unchanged (its outputs, if it was run, stay)
            if edited(p) and not force:
                kept.append(p)
                continue
            old = p.read_text()
            if '"output_type"' in old:
                kept_outputs = _outputs_kept(old, text)
                if kept_outputs is not None:
                    text = kept_outputs
                    log(f"{p}: text cells changed; its code and outputs are kept")
                else:
                    log(f"{p}: source changed, outputs dropped (python -m classroom notebooks --execute)")
        p.write_text(text)
    for p in kept:
        log(f"left alone: {p} (edited since it was built; --force overwrites it)")
    return kept


def build(check: bool = False, log=print, execute: bool = False, only=None, force: bool = False,
          names=None) -> int:
    """Write (or with ``check``, compare) every notebook, or those of the sources ``names``;
    ``--execute`` runs the solutions in full (not fast) mode and commits their outputs (``only``:
    the names to run)."""
    files = outputs(names)
    if not files:
        log(f"no notebook sources in {SOURCES}" + (f" named {', '.join(names)}" if names else ""))
        return 1
    if check:
        stale = [p for p, text in files.items() if not _same_source(p, text)]
        for p in stale:
            log(f"out of date: {p.relative_to(ROOT)} (run: python -m classroom notebooks)")
        if not stale:
            log(f"notebooks up to date ({len(files)} files)")
        return 1 if stale else 0
    kept = write_notebooks(files, force, log)
    log(f"wrote {len(files) - len(kept)} notebooks to {STUDENT.relative_to(ROOT)}/ and {SOLUTION.relative_to(ROOT)}/")
    if execute:
        for p in sorted(q for q in files if q.parent == SOLUTION and (only is None or q.stem in only)):
            execute_solution(p, log)
    return 0


def execute_solution(path: Path, log=print, timeout: int = 7200) -> float:
    """Run one solution notebook top to bottom in full mode, in its folder, and write it back
    with its outputs and ``es_course_run`` (seconds, ok). Raises if a cell fails."""
    import os
    import time
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(str(path), as_version=4)
    metadata = dict(nb.metadata)        # the kernel's version details would change it on every machine
    env_fast = os.environ.pop("ES_COURSE_FAST", None)
    t0 = time.perf_counter()
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    finally:
        if env_fast is not None:
            os.environ["ES_COURSE_FAST"] = env_fast
    seconds = time.perf_counter() - t0
    nb.metadata = nbformat.from_dict({**metadata, "es_course_run": {"mode": "full", "seconds": round(seconds, 1)}})
    path.write_text(render(nb))
    log(f"executed {path.relative_to(ROOT)} in {seconds:.0f} s")
    return seconds
