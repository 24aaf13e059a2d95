"""``python -m classroom preflight``: before any student is graded, one kernel, started as the
students' kernels will be (in the sandbox, where this machine has one), grades a known answer. Where it cannot, grading stops (exit status 3, nothing graded, no gradebook) with
one message naming the cause and the fix, instead of writing the grader's own failure down as
every student's zero.

The known answer is a notebook whose single cell imports every module the course notebooks
need (``environment.course_modules``; the first that fails is named, with its file and the
fix) and defines a correct ``centered_ranks``; it is graded exactly as a student's 00 is (same sandbox, same
kernel, the grader's own check on fresh inputs) and must score full marks. ``grade_class``
runs it first, once per process for a given support path and sandbox.

What it names, from what the kernel said and, as root, from a walk over Python's
installation and the support code as an ordinary user:

* a file the kernel's user cannot read (an install or clone made under umask 077);
* no ipykernel in the grading Python;
* a full disk;
* a sandbox that cannot be built where things live;
* anything else, with the kernel's last words.

This module holds a correct answer, so the kernel never sees it (``sandbox.HIDE``).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from es.errors import ESError

from . import PACKAGES

KNOWN_ANSWER = '''\
_es_cannot_import = None
{imports}

def centered_ranks(returns):
    if _es_cannot_import is not None:      # the check's message carries it back to the grader
        raise ImportError(IMPORT_MARKER + "|".join(map(str, _es_cannot_import)))
    import numpy as np
    x = np.asarray(returns, dtype=np.float64)
    n = len(x)
    order = np.argsort(x, kind="stable")
    ranks = np.empty(n)
    ranks[order] = np.arange(n)
    values, inverse = np.unique(x, return_inverse=True)
    ranks = (np.bincount(inverse, weights=ranks) / np.bincount(inverse))[inverse]
    return ranks / (n - 1) - 0.5
'''
IMPORT_MARKER = "@@preflight-import@@"
TRY_IMPORT = """\
try:
    import {module}
except BaseException as _e:
    if _es_cannot_import is None:
        _es_cannot_import = ({module!r}, _e.__class__.__name__, getattr(_e, "filename", None) or "",
                             getattr(_e, "strerror", None) or str(_e)[:150])
"""
CHECK = "centered_ranks"
EXIT_STATUS = 3
_PASSED: set = set()


class PreflightFailed(ESError):
    """The grader's own machinery cannot grade here: nothing is graded."""


@dataclass
class Preflight:
    ok: bool
    isolation: str
    seconds: float
    message: str
    result: dict

    def passed(self) -> str:
        if self.isolation == "none":
            return (f"preflight passed: a known answer scored full marks in a kernel WITHOUT isolation (none: a plain "
                    f"process of this user, no sandbox; {self.seconds:.1f} s)")
        return (f"preflight passed: a known answer scored full marks in a sandboxed kernel ({self.isolation}, "
                f"{self.seconds:.1f} s)")


def known_answer(folder: Path, support_path: Path) -> Path:
    """The known-answer notebook, in ``folder``: it imports every module the course notebooks
    need (``environment.course_modules``), then defines a correct ``centered_ranks``, which
    raises, naming the first module that failed, where one did."""
    import nbformat
    from .environment import course_modules, notebooks_of
    from .grade import ROOT
    from .sandbox import HIDE
    notebooks = notebooks_of(ROOT / "notebooks", support_path / "notebooks", support_path)
    if notebooks is None:
        raise PreflightFailed(f"preflight failed: the course notebooks are in none of {ROOT / 'notebooks'}, "
                              f"{support_path / 'notebooks'} or {support_path}, so what they import cannot be checked. "
                              f"Grade from a checkout or a release (pip install -e ., as requirements.txt does).\n"
                              f"Nothing was graded and no gradebook or feedback was written (exit status {EXIT_STATUS}).")
    imports = "".join(TRY_IMPORT.format(module=m) for m in course_modules(support_path, notebooks, HIDE))
    source = KNOWN_ANSWER.format(imports=imports).replace("IMPORT_MARKER", repr(IMPORT_MARKER))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    nb.metadata["es_course"] = {"notebook": "00_es_from_scratch"}
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o755)
    path = folder / "00_es_from_scratch.ipynb"
    nbformat.write(nb, str(path))
    os.chmod(path, 0o644)
    return path


def run(support_path=None, timeout: int = 300) -> Preflight:
    """Grade the known answer in a sandboxed kernel; ``ok`` when it scores full marks."""
    from .grade import ROOT, grade
    support = Path(support_path or ROOT).resolve()
    t0 = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="es-preflight-"))
    try:
        path = known_answer(tmp / "preflight", support)
        res = grade(path, cell_timeout=timeout, check_timeout=timeout, submission_timeout=timeout, seed=0,
                    only={CHECK}, student="preflight", support_path=support)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    row = next((r for r in res.get("checks", []) if r["name"] == CHECK), None)
    ok = res.get("status") == "graded" and row is not None and row["points"] == row["max"]
    isolation = res.get("isolation", "none")
    message = "" if ok else diagnose(res, row, support, isolation)
    return Preflight(ok, isolation, round(time.monotonic() - t0, 1), message, res)


def ensure(support_path=None, log=None) -> Preflight | None:
    """Run the preflight unless it passed in this process for this support code and sandbox;
    ``PreflightFailed`` with the message when it fails."""
    from .grade import ROOT
    from .sandbox import mode
    key = (str(Path(support_path or ROOT).resolve()), mode()[0])
    if key in _PASSED:
        return None
    p = run(support_path)
    if not p.ok:
        raise PreflightFailed(p.message)
    _PASSED.add(key)
    if log is not None:
        log(p.passed())
    return p


# ---------------------------------------------------------------- naming the cause
def diagnose(res: dict, row: dict | None, support: Path, isolation: str) -> str:
    from .sandbox import describe
    said = res.get("status", "") if str(res.get("status", "")).startswith("ungraded") else ""
    said = said or res.get("error") or (row or {}).get("message") or "no result"
    said = re.sub(r"^ungraded: ", "", str(said))
    cause, fix = _cause(said, support, isolation)
    where = "a kernel without a sandbox" if isolation == "none" else "a kernel in the grader's sandbox"
    return (f"preflight failed: {where} ({isolation}: {describe(isolation)}) could not grade "
            f"a known answer, so every student would get the grader's failure as a zero.\n"
            f"  what happened: {said[:700]}\n  cause: {cause}\n  fix: {fix}\n"
            f"Nothing was graded and no gradebook or feedback was written (exit status {EXIT_STATUS}).")


def _cause(said: str, support: Path, isolation: str) -> tuple[str, str]:
    from .environment import fix_missing, fix_unreadable, module_at
    from .grade import MACHINE_FAULT
    blamed = re.search(re.escape(MACHINE_FAULT) + r"(.*)\. Fix: (.*)", said)
    if blamed:
        return blamed.group(1), blamed.group(2)
    failed = re.search(re.escape(IMPORT_MARKER) + r"([^|]*)\|([^|]*)\|([^|]*)\|(.*)", said)
    if failed:
        module, error, path, message = failed.groups()
        message = re.sub(rf" \(in {CHECK}, line .*$", "", message)        # the known answer's own frame
        needs = f"the kernel cannot import {module}, which the course notebooks import ({error}: {message[:200]})"
        if error == "PermissionError" and path:
            owner = module_at(path) or module
            return (f"{needs}: its user cannot read {path}{_mode_of(path)} (module {owner})",
                    fix_unreadable(path, owner))
        return needs, fix_missing(module)
    missing = re.search(r"No module named '([^']+)'", said)
    if missing and not missing.group(1).startswith("ipykernel"):
        return f"the kernel cannot import {missing.group(1)}", fix_missing(missing.group(1))
    denied = re.search(r"Permission denied: '([^']+)'", said)
    unreadable = denied.group(1) if denied else None
    if unreadable is None and isolation == "namespaces" and "it said" not in said:
        # The kernel died without a word, or the known answer's imports failed: is something the
        # kernel needs closed to other users? (Only what it needs: Python, the support packages.)
        unreadable = first_unreadable([Path(sys.prefix), Path(sys.base_prefix), support,
                                       *[support / p for p in PACKAGES if (support / p).is_dir()]],
                                      descend=(Path(sys.prefix), Path(sys.base_prefix),
                                               *[support / p for p in PACKAGES if (support / p).is_dir()]))
    if unreadable:
        top = next((str(p) for p in (support, Path(sys.prefix), Path(sys.base_prefix))
                    if unreadable == str(p) or unreadable.startswith(str(p) + "/")), os.path.dirname(unreadable))
        how = _mode_of(unreadable)
        from .environment import module_at
        module = module_at(unreadable)
        how += f" (module {module})" if module else ""
        return (f"the kernel's user, an ordinary uid, cannot read {unreadable}{how}: it was installed or cloned under "
                "umask 077, readable by its owner only",
                f"make it readable: chmod -R a+rX {top}   (or install or clone it again under umask 022)")
    if re.search(r"No module named '?ipykernel", said):
        return (f"the grading Python ({sys.executable}) has no ipykernel",
                f"{sys.executable} -m pip install ipykernel   (or pip install -r requirements.txt)")
    if "No space left on device" in said:
        return ("a disk the grader writes to is full (the kernel's copies go to "
                f"{tempfile.gettempdir()})", "free some space, or point TMPDIR at a disk with room")
    if "cannot give the kernel" in said:
        return said, "move Python's installation or the checkout out of /tmp, /dev or /proc themselves"
    if "no kernel could be started" in said or "did not start" in said:
        return ("the kernel process exited before it answered" + (" (what it said is above)" if "it said" in said
                                                                   else ", without a word on its standard error"),
                f"start one by hand to see why: {sys.executable} -m ipykernel_launcher --help")
    return ("the known answer did not score full marks in the grader's sandbox",
            "run `python -m classroom preflight` to repeat this, and read what happened above")


def _mode_of(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return ""
    return f" (mode {st.st_mode & 0o7777:04o}, owner uid {st.st_uid})"


def first_unreadable(roots, descend=None, limit: int = 400_000) -> str | None:
    """The first of ``roots`` (each one bound into the sandbox as it is), or file or folder
    under those of them in ``descend`` (default: all), that a uid other than its owner's and
    group's cannot read, by its mode bits; None when every one can. The folders above each
    root do not count: the sandbox's own are open."""
    from .sandbox import HIDE, compiled_folders
    seen = 0
    descend = {str(p) for p in (roots if descend is None else descend)}
    for root in map(str, roots):
        if not os.path.exists(root):
            continue
        if _closed(root):
            return root
        if not os.path.isdir(root) or root not in descend:
            continue
        # what the kernel never sees: the hidden files, and the bytecode folders beside them
        skip = {os.path.join(root, h) for h in HIDE} | set(compiled_folders(Path(root), HIDE, make=False))
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if os.path.join(dirpath, d) not in skip]
            for name in dirnames + filenames:
                p = os.path.join(dirpath, name)
                if p not in skip and _closed(p):
                    return p
            seen += len(filenames) + len(dirnames)
            if seen > limit:
                return None
    return None


def _closed(path: str) -> bool:
    """Whether "other" users cannot read ``path`` (or, a folder, enter and list it)."""
    import stat
    try:
        st = os.stat(path)
    except OSError:
        return False          # a dangling link: not a permission problem
    need = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(st.st_mode) else 0)
    return st.st_mode & need != need


def main(support_path=None, as_json: bool = False, allow_unsandboxed: bool = False) -> int:
    """``python -m classroom preflight``: 0 passed (in a sandbox, or without one where allowed),
    3 failed, 5 passed or not, but the kernel had no sandbox and that was not allowed."""
    from .sandbox import EXIT_UNSANDBOXED, NoSandbox, unsandboxed
    try:
        warning, refused = unsandboxed(allow_unsandboxed, "preflight"), None
    except NoSandbox as exc:
        warning, refused = None, str(exc)
    p = run(support_path)
    status = EXIT_STATUS if not p.ok else EXIT_UNSANDBOXED if refused else 0
    if as_json:
        print(json.dumps({"ok": p.ok, "isolation": p.isolation, "seconds": p.seconds, "message": p.message,
                          "warning": refused or warning or "", "status": status}))
        return status
    if p.ok:
        print(p.passed())
    else:
        print(p.message, file=sys.stderr)
    if refused or warning:
        print(refused or warning, file=sys.stderr)
    return status
