"""Every file or folder of this repository that the README files and docs/ cite exists, and is
committed (issue 43: docs/distributed.md cited ``docs/runs/scaling-16core/``, which `.gitignore`'s
``runs/`` kept out of every commit). Data under ``runs/`` folders is added with ``git add -f``."""
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *ROOT.glob("*/README.md"), *(ROOT / "docs").rglob("*.md")])
TOP = ("docs", "pong", "benchmarks", "scripts", "notebooks", "tests", "es", "classroom")
# a path from the repository root, as written in prose or code: docs/runs/x/y.jsonl, benchmarks/z.py
ROOTED = re.compile(r"(?<![\w./-])((?:%s)/[\w./-]*[\w/])" % "|".join(TOP))
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")      # markdown links and images, relative to the page
PLACEHOLDER = re.compile(r"\.\.\.|[{}*<>]|\b[A-Z]{3,}\b")
# cited paths that a command writes, not files of this repository
WRITTEN = {"classroom/expected.json": "written into a student release by `python -m classroom release`"}


def cited(doc: Path):
    """(path as written, resolved path) of what ``doc`` cites in this repository."""
    text = doc.read_text()
    for m in ROOTED.finditer(text):
        raw = m.group(1).rstrip(".")
        if raw not in WRITTEN and not PLACEHOLDER.search(raw) and ("." in raw.rsplit("/", 1)[-1] or raw.endswith("/")):
            yield raw, ROOT / raw
    for m in LINK.finditer(text):
        raw = m.group(1)
        if re.match(r"[a-z]+:", raw) or PLACEHOLDER.search(raw):
            continue
        yield raw, (doc.parent / raw).resolve()


def tracked() -> set:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    files = {ROOT / f for f in out.stdout.splitlines()}
    return files | {p for f in files for p in f.parents}


def test_every_cited_file_exists_and_is_committed():
    have = tracked()
    missing = [f"{doc.relative_to(ROOT)}: {raw}" for doc in DOCS for raw, path in cited(doc)
               if path.resolve() not in have and path not in have]
    assert not missing, "cited but not in the repository:\n  " + "\n  ".join(sorted(set(missing)))


def test_the_check_finds_a_missing_data_file(tmp_path):
    """The check itself: a doc that cites data under a runs/ folder that is not there."""
    doc = tmp_path / "x.md"
    doc.write_text("The lines are in `docs/runs/scaling-16core/scaling.jsonl` and [here](gone.png).\n")
    found = [raw for raw, _ in cited(doc)]
    assert found == ["docs/runs/scaling-16core/scaling.jsonl", "gone.png"]
    assert not (ROOT / found[0]).exists()
