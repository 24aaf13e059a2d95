"""What the course needs from the machine, and whose fault a failure to import it is.

``course_modules``: every module the course notebooks import (read from ``notebooks/*.ipynb``
with ``ast``, never a hand list), and every module that the course's own modules they reach
import, at their top or inside a function (``pong.games`` imports ``ale_py`` only when a game
starts), except imports guarded by ``try: ... except ImportError`` (optional ones). The
preflight imports each in the sandboxed kernel; the grader counts a failure to import one of
them as the machine's, not the student's (``blame``).

Standard library only: the grader's own import failures are reported through this module.
"""
from __future__ import annotations

import ast
import json
import os
import re
import sys
from pathlib import Path

from . import PACKAGES

OWN = PACKAGES          # the course's own packages (the support code)
ENVIRONMENT_ERRORS = ("ImportError", "ModuleNotFoundError", "PermissionError")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _source(cell: str) -> str:
    return "\n".join("#" + line if line.lstrip().startswith(("%", "!")) else line for line in cell.splitlines())


def _file_of(dotted: str, support: Path) -> Path | None:
    p = support.joinpath(*dotted.split("."))
    if (p / "__init__.py").is_file():
        return p / "__init__.py"
    return p.with_suffix(".py") if p.with_suffix(".py").is_file() else None


def _guarded(tree: ast.AST) -> set[int]:
    """The nodes inside ``try`` blocks that catch a failed import (ImportError or wider)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try):
            caught = set()
            for h in node.handlers:
                kinds = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
                caught |= {"*" if k is None else getattr(k, "id", "") for k in kinds}
            if caught & {"ImportError", "ModuleNotFoundError", "Exception", "BaseException", "*"}:
                out |= {id(n) for s in node.body for n in ast.walk(s)}
    return out


def imports_of(source: str, me: str = "", package: bool = False, support: Path | None = None) -> list[str]:
    """The dotted modules ``source`` (the module ``me``) imports without a guard; ``from m
    import x`` counts ``m.x`` too where it is a module of the support code."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    guarded, out = _guarded(tree), []
    base = me.split(".") if package else me.split(".")[:-1]
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            parts = base[:len(base) - node.level + 1] if node.level else []
            module = ".".join(parts + ([node.module] if node.module else []))
            if not module:
                continue
            out.append(module)
            if support is not None and module.split(".")[0] in OWN:
                out += [f"{module}.{a.name}" for a in node.names if _file_of(f"{module}.{a.name}", support)]
    return out


def notebooks_of(*folders) -> Path | None:
    """The first of ``folders`` that holds the course notebooks (a checkout's ``notebooks/``, or
    a release's top folder); None when none does."""
    for folder in folders:
        if any(Path(folder).glob("0[0-9]_*.ipynb")):
            return Path(folder)
    return None


def course_modules(support: Path, notebooks: Path, hide=()) -> list[str]:
    """Every module the notebooks in ``notebooks`` import, and what the support code's modules
    they reach import (top-level or in a function), sorted; the support code's hidden files
    (``hide``, the sandbox's) are neither listed nor followed."""
    hidden = {str(Path(support, h)) for h in hide}
    todo = []
    for path in sorted(Path(notebooks).glob("*.ipynb")):
        nb = json.loads(path.read_text())
        for cell in nb.get("cells", []):
            if cell.get("cell_type") == "code":
                src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
                todo += imports_of(_source(src), support=support)
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen or module == "__future__":
            continue
        if module.split(".")[0] not in OWN:
            seen.add(module)
            continue
        f = _file_of(module, support)
        if f is None or str(f) in hidden:
            continue
        seen.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        todo += imports_of(f.read_text(), module, f.name == "__init__.py", support)
    return sorted(seen)


def installed_locations(support: Path | None = None) -> tuple[str, ...]:
    """Where installed code lives, each ending in ``/``: Python's installation (and a venv's),
    and the support code's own packages."""
    places = {sys.prefix, sys.base_prefix, sys.exec_prefix,
              *[p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")]}
    if support is not None:
        places |= {str(Path(support, p)) for p in OWN}
    return tuple(sorted(os.path.join(p, "") for p in places))


def module_at(path: str) -> str | None:
    """The top-level module a file or folder belongs to (``.../site-packages/numpy/core/x.py``:
    ``numpy``), by the import path of this process; None when it is on none."""
    best = None
    for entry in sys.path:
        entry = os.path.join(os.path.abspath(entry or "."), "")
        if path.startswith(entry) and (best is None or len(entry) > len(best)):
            best = entry
    if best is None:
        return None
    first = path[len(best):].split("/")[0]
    return re.sub(r"(\.cpython.*)?\.(py|pyc|so)$", "", first) or None


def package_folder(module: str) -> str | None:
    """The folder (or file) of the top-level ``module`` as this process finds it."""
    import importlib.util
    try:
        spec = importlib.util.find_spec(module.split(".")[0])
    except (ImportError, ValueError, OSError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return list(spec.submodule_search_locations)[0]
    return spec.origin if spec.has_location else None


def innermost_file(traceback_lines) -> str | None:
    """The file of the innermost frame of an IPython traceback, or None when it is a
    notebook cell (``Cell In[3], line 2``)."""
    text = _ANSI.sub("", "\n".join(traceback_lines or []))
    frames = re.findall(r"(Cell In\[\d+\], line \d+|File (/[^\s:,]+))", text)
    return frames[-1][1] or None if frames else None


def blame(ename: str, evalue: str, where: str | None, needed, support: Path | None) -> tuple[str, str] | None:
    """(cause, fix): why an exception in a graded kernel is the machine's fault, or None when it may be the
    student's. ``where``: the file its innermost frame is in (None: a notebook cell);
    ``needed``: ``course_modules``. The machine's: an ImportError, ModuleNotFoundError or
    PermissionError raised from an installed package or the support code, a module the course
    needs that cannot be found, or an installed file that cannot be read."""
    if ename not in ENVIRONMENT_ERRORS:
        return None
    installed = installed_locations(support)
    raised_there = where is not None and where.startswith(installed)
    evalue = str(evalue)
    denied = re.search(r"Permission denied: '([^'\s]+)'", evalue)
    missing = re.search(r"No module named '([^']+)'", evalue)
    if denied and denied.group(1).startswith(installed):
        path = denied.group(1)
        module = module_at(path) or os.path.basename(path)
        return f"the kernel cannot read {path} (module {module})", fix_unreadable(path, module)
    if missing and any(m == missing.group(1) or m.startswith(missing.group(1) + ".") for m in needed):
        module = missing.group(1)
        return f"the kernel cannot import {module}, which the course notebooks need", fix_missing(module)
    if raised_there and (ename != "PermissionError" or not denied):
        module = missing.group(1) if missing else module_at(where) or where
        return f"{ename}: {evalue[:200]} (raised in {where}, not in the notebook)", fix_missing(module)
    return None


def fix_unreadable(path: str, module: str | None = None) -> str:
    """What to run when a file of ``module`` is closed to the kernel's user."""
    top = package_folder(module) if module else None
    top = top if top and path.startswith(top) else path
    return f"make it readable: chmod -R a+rX {top}   (or install it again under umask 022)"


def fix_missing(module: str) -> str:
    """What to run when the kernel cannot find or read ``module``."""
    where = package_folder(module)
    if where is not None:
        from stat import S_IROTH
        try:
            closed = not os.stat(where).st_mode & S_IROTH
        except OSError:
            closed = False
        if closed:
            return f"it is installed at {where}, which other users cannot read: chmod -R a+rX {where}"
        return (f"it is installed at {where} for the grader; if that is outside Python's installation "
                f"({sys.prefix}), install it there: {sys.executable} -m pip install -r requirements.txt")
    return f"install it into the grading Python: {sys.executable} -m pip install -r requirements.txt"


def grader_cannot_import(exc: BaseException, whole: bool = True) -> str:
    """The one message for the grader's own failed import (no traceback); ``whole``: as a
    command's last words, else as a submission's ``ungraded`` reason."""
    path = getattr(exc, "filename", None) or getattr(exc, "path", None)
    tb, last = exc.__traceback__, None
    while tb is not None:              # the innermost frame: the module whose import failed
        last, tb = tb.tb_frame.f_code.co_filename, tb.tb_next
    module = (getattr(exc, "name", None) or (module_at(str(path)) if path else None)
              or (module_at(last) if last else None) or "a module")
    if isinstance(exc, PermissionError) and path:
        fix = fix_unreadable(str(path), module_at(str(path)))
    else:
        fix = fix_missing(str(module))
    said = " ".join(str(exc).split())[:400]
    if not whole:
        return f"the grader cannot import {module}: {exc.__class__.__name__}: {said}; fix: {fix}"
    return (f"error: the grader cannot import {module}: {exc.__class__.__name__}: {said}\n  fix: {fix}\n"
            "Nothing was graded and nothing was written (exit status 3).")
