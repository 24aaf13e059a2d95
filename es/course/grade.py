"""``python -m es grade SUBMISSION.ipynb [...] [--json]``: the autograder.

It executes a submission headless (nbclient, a time limit per cell, errors allowed so one
broken cell does not stop the rest) with ``ES_COURSE_FAST=1``, then runs, inside the same
kernel, every check of ``es.check`` that belongs to that notebook, each with its own time
limit. A check that fails, raises or hangs costs only its own points; a submission that is
not a notebook, or whose kernel dies, gets 0 with a message and never crashes the grader.
"""
from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

from ..check import CHECKS, CheckFailed
from .build import ROOT

MARKER = "@@ES-GRADE@@"
MILESTONE_MAX = {"M1": 10, "M2": 5, "M3": 5, "M4": 10}


def checks_for(notebook: str) -> list[str]:
    return [name for name, (_, _, nb, _) in CHECKS.items() if nb == notebook]


def run_checks(namespace: dict, names: list[str], seconds: int = 600) -> list[dict]:
    """Runs inside the student's kernel: each check in isolation, with a time limit."""
    from .. import check as module

    def on_alarm(*_):
        raise TimeoutError
    results = []
    for name in names:
        milestone, points, _, needs = CHECKS[name]
        row = {"name": name, "milestone": milestone, "points": 0, "max": points, "message": ""}
        missing = [n for n in needs if n not in namespace]
        if missing:
            row["message"] = f"{name}: define {', '.join(missing)} (the cell that defines it did not run?)"
            results.append(row)
            continue
        old = signal.signal(signal.SIGALRM, on_alarm)
        signal.alarm(seconds)
        try:
            getattr(module, name).raw(*[namespace[n] for n in needs])
            row["points"], row["message"] = points, "passed"
        except NotImplementedError:
            row["message"] = f"{name}: not implemented yet (the cell still raises NotImplementedError)"
        except CheckFailed as exc:
            row["message"] = str(exc)
        except TimeoutError:
            row["message"] = f"{name}: the check did not finish in {seconds} s (an endless loop?)"
        except BaseException as exc:  # a student's code may raise anything, even SystemExit
            row["message"] = f"{name}: raised {exc.__class__.__name__}: {str(exc)[:200]}"
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
        results.append(row)
    return results


def notebook_name(nb, path: Path) -> str:
    name = nb.get("metadata", {}).get("es_course", {}).get("notebook")
    if name:
        return name
    m = re.match(r"(\d\d)", path.name)
    for src in sorted({c[2] for c in CHECKS.values()}):
        if m and src.startswith(m.group(1)):
            return src
    return ""


def grade(path, cell_timeout: int = 900, check_timeout: int = 600) -> dict:
    import nbformat
    path = Path(path)
    out = {"submission": str(path), "total": 0, "max": 0, "checks": []}
    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception as exc:   # not JSON, not a notebook, unreadable: a message, not a crash
        out["error"] = f"cannot read {path}: {exc.__class__.__name__}: {str(exc)[:200]}"
        return out
    name = notebook_name(nb, path)
    names = checks_for(name)
    rows = [{"name": n, "milestone": CHECKS[n][0], "points": 0, "max": CHECKS[n][1], "message": ""} for n in names]
    out.update(notebook=name, max=sum(r["max"] for r in rows))
    if not names:
        out["error"] = f"{path.name} is not one of the course notebooks (no checks for {name or 'it'})"
        return out
    nb.cells.append(nbformat.v4.new_code_cell(
        "import json as _json\nfrom es.course.grade import run_checks as _run_checks\n"
        f"print({MARKER!r} + _json.dumps(_run_checks(globals(), {names!r}, {int(check_timeout)})))"))
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError
    env_before = {k: os.environ.get(k) for k in ("ES_COURSE_FAST", "PYTHONPATH")}
    os.environ["ES_COURSE_FAST"] = "1"
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env_before["PYTHONPATH"]]))
    try:
        client = NotebookClient(nb, timeout=cell_timeout, kernel_name="python3", allow_errors=True,
                                interrupt_on_timeout=True, resources={"metadata": {"path": str(path.parent)}})
        client.execute()
        text = "".join(o.get("text", "") for o in nb.cells[-1].get("outputs", []) if o.get("output_type") == "stream")
        line = next((l for l in text.splitlines() if l.startswith(MARKER)), None)
        if line is None:
            raise RuntimeError("the grading cell printed nothing (did the notebook exit or restart the kernel?)")
        rows = json.loads(line[len(MARKER):])
    except DeadKernelError:
        for r in rows:
            r["message"] = f"{r['name']}: the notebook's kernel died (out of memory, or os._exit?)"
    except Exception as exc:
        for r in rows:
            r["message"] = f"{r['name']}: not graded: {exc.__class__.__name__}: {str(exc)[:200]}"
    finally:
        for k, v in env_before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    out["checks"] = rows
    out["total"] = sum(r["points"] for r in rows)
    return out


def table(result: dict) -> str:
    lines = [f"submission: {result['submission']}" + (f"  ({result['notebook']})" if result.get("notebook") else "")]
    if result.get("error"):
        lines.append(f"  error: {result['error']}")
    for r in result["checks"]:
        status = "" if r["points"] == r["max"] else f"  {r['message']}"
        lines.append(f"  {r['milestone']:<7} {r['name']:<20} {r['points']:>2} / {r['max']:<2}{status}")
    lines.append(f"  total {result['total']} / {result['max']}")
    return "\n".join(lines)


def milestone_summary(results: list[dict]) -> str:
    got, mx = {}, {}
    for res in results:
        for r in res["checks"]:
            got[r["milestone"]] = got.get(r["milestone"], 0) + r["points"]
            mx[r["milestone"]] = mx.get(r["milestone"], 0) + r["max"]
    order = [m for m in ("M1", "M2", "M3", "M4", "extras") if m in mx]
    return "milestones: " + "  ".join(f"{m} {got[m]}/{mx[m]}" for m in order) + \
        f"  (course: {', '.join(f'{k} {v}' for k, v in MILESTONE_MAX.items())}, extras on top)"


def main(paths, as_json: bool = False, cell_timeout: int = 900, check_timeout: int = 600, log=print) -> int:
    results = []
    for p in paths:
        res = grade(p, cell_timeout, check_timeout)
        results.append(res)
        log(json.dumps(res) if as_json else table(res))
    if not as_json and len(results) > 1:
        log(milestone_summary(results))
    return 0
