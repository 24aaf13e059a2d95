"""Every number a student reads, and where it comes from.

The pages: the markdown of each notebook source (``source/NN_*.py``), docs/students.md, docs/paper.md,
the repository's README.md and the release's README (``classroom.release.README``). Each number in them is one of:

* **math or structure**: inside ``$...$`` / ``$$...$$`` (a formula), or a pointer (notebook 04,
  section 3, step 5, Hint 2, a numbered heading or list item);
* **a constant** of the course, from the one short list ``CONSTANTS`` below (42x42, 4 frames,
  -21..+21 points, the paper's year, ...);
* **printed**: in an ``**Expected output**`` paragraph, every number must be printed by the code
  cell just before or just after it (the committed executed solution's outputs, to the precision
  the text gives);
* **code**: inside a code span or fence that contains code, a number the notebook's own code
  cells (or the check's code) spell the same way;
* **a claim with a source**: a ``Claim`` in ``course_sources/`` (one module per page), a snippet of
  the page with a function that holds its numbers to data, a computation or a cited source.

``unsourced(page)`` lists the numbers that are none of these; the test fails on any.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]

NUMBER = re.compile(r"(?<![\w.\-/])[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-+]?\d+)?%?(?![\w])")

# Definitions and constants: the course's fixed facts, each a pattern a number may sit in.
CONSTANTS = [
    r"42x42(x4)?", r"210x160", r"\b4 (stacked )?frames", r"last 4 frames", r"-21\.\.\+21", r"-21 to \+21",
    r"\b21:0\b", r"\+1 / -1",
    r"Salimans[^.]{0,40}20\d\d", r"\(20\d\d\b", r"et al\.,? 20\d\d", r"Williams 1992", r"20\d\d, (their )?Algorithm 2",
    r"CartPole-v1", r"HalfCheetah-v5", r"Hopper-v5", r"Pong-v5",
    r"Python 3\.11", r"mujoco==3\.3\.7", r"WSL2", r"\bM[1-4]\b",
]
# Pointers into the course: not claims, but places.
STRUCTURE = [
    r"(?i:notebooks?) 0\d(?:(?:, | and | or |-)0\d)*", r"\b0\d-0\d\b", r"\b0\d(?: and 0\d)?(?=[ ,;:)])",
    r"(?i:sections?) \d(?:(?:, | and | to |-)\d)*", r"(?i:steps?) \d\b", r"Hint \d", r"(?i:inline question) \d",
    r"^#+ \d+\.", r"^\s*\d+\. ", r"Milestone \d", r"Algorithm 2",
]


@dataclass
class Claim:
    """A snippet of one page (whitespace-normalized, an exact substring of it) and the function
    that holds its numbers: it raises (an assert) when they are not what its source says.
    ``slow``: the function takes more than a second or two (the fast lane leaves it out)."""
    snippet: str
    holds: Callable[[], object]
    source: str = ""            # what it is held to, in words (a data file, a computation, a cited file and line)
    slow: bool = False


@dataclass
class Page:
    name: str                   # "00_es_from_scratch", "students", "paper", "release-readme"
    cells: list[str]            # markdown cells (one for a docs page), whitespace-normalized
    code: str = ""              # the notebook's code cells (solution version) and its checks' code
    outputs: list[tuple[int, str]] = field(default_factory=list)   # per markdown cell: printed text before/after


def normalize(text: str) -> str:
    return " ".join(text.split())


def _lines(text: str) -> str:
    """Each run of whitespace as one character (a newline where it held one), so that lines keep
    their starts and ``.replace("\\n", " ")`` is ``normalize`` with the same positions."""
    return re.sub(r"\s+", lambda m: "\n" if "\n" in m.group() else " ", text.strip())


def notebook_names() -> list[str]:
    return sorted(p.stem for p in (ROOT / "source").glob("[0-9][0-9]_*.py"))


def _printed(cell) -> str:
    out = []
    for o in cell.get("outputs", []):
        text = o.get("text") or o.get("data", {}).get("text/plain", "")
        out.append("".join(text) if isinstance(text, list) else str(text))
    return "\n".join(out)


@lru_cache(maxsize=None)
def page(name: str) -> Page:
    if name in ("students", "paper"):
        return Page(name, [(ROOT / "docs" / f"{name}.md").read_text()])
    if name == "readme":
        return Page(name, [(ROOT / "README.md").read_text()])
    if name == "release-readme":
        from classroom.release import README
        return Page(name, [README])
    import jupytext
    import nbformat
    nb = jupytext.reads((ROOT / "source" / f"{name}.py").read_text(), fmt="py:percent")
    executed = nbformat.read(str(ROOT / "solutions" / f"{name}.ipynb"), as_version=4)
    printed = {c.source: _printed(c) for c in executed.cells if c.cell_type == "code"}
    cells, around, code = [], [], []
    for i, c in enumerate(nb.cells):
        if c.cell_type == "markdown":
            before = next((printed.get(d.source, "") for d in reversed(nb.cells[:i]) if d.cell_type == "code"), "")
            after = next((printed.get(d.source, "") for d in nb.cells[i + 1:] if d.cell_type == "code"), "")
            cells.append(c.source)
            around.append(before + "\n" + after)
        else:
            code.append(c.source)
    checks = "\n".join(p.read_text() for p in [ROOT / "classroom" / "check.py",
                                                 *sorted((ROOT / "classroom" / "checks").glob("*.py"))])
    return Page(name, cells, "\n".join(code) + "\n" + checks, list(enumerate(around)))


MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$", re.S)
CODE = re.compile(r"```.*?```|`[^`]+`", re.S)
EXPECTED = re.compile(r"\*\*Expected[^*]{0,40}\*\*")


def value(token: str) -> tuple[float, int]:
    """A number as written -> (value, decimals shown)."""
    t = token.replace(",", "").replace("−", "-").rstrip("%")
    decimals = len(t.split(".")[1].split("e")[0]) if "." in t else 0
    return float(t), decimals


def printed_values(text: str) -> list[float]:
    return [value(m.group())[0] for m in NUMBER.finditer(text)]


def is_printed(token: str, printed: list[float]) -> bool:
    v, d = value(token)
    return any(round(p, d) == v for p in printed)


def _spans(pattern, text):
    if isinstance(pattern, str):
        pattern = re.compile(pattern, re.M)
    return [m.span() for m in pattern.finditer(text)]


def _inside(pos, spans):
    return any(a <= pos < b for a, b in spans)


def numbers(text: str):
    """(position, token) of each number in ``text``."""
    return [(m.start(), m.group()) for m in NUMBER.finditer(text)]


def claims_of(name: str) -> list[Claim]:
    import importlib
    return list(importlib.import_module(f"course_sources.p_{name.replace('-', '_')}").CLAIMS)


def unsourced(name: str, claims: list[Claim] | None = None, p: Page | None = None) -> list[str]:
    """Each number of the page ``name`` (or of ``p``) that has no source, with the words around it."""
    p = page(name) if p is None else p
    claims = claims_of(name) if claims is None else claims
    missing = []
    for index, raw in enumerate(p.cells):
        lines = _lines(raw)
        flat = lines.replace("\n", " ")
        covered = []
        for claim in claims:
            start = flat.find(claim.snippet)
            while start >= 0:
                covered.append((start, start + len(claim.snippet)))
                start = flat.find(claim.snippet, start + 1)
        exempt = _spans(MATH, flat) + covered
        for pattern in CONSTANTS + STRUCTURE:      # on the lines (for ^) and on the joined text (across lines)
            exempt += _spans(pattern, lines) + _spans(pattern, flat)
        code_spans = [(a, b) for a, b in _spans(CODE, flat) if re.search(r"[A-Za-z_(=]", flat[a:b])]
        printed = printed_values(p.outputs[index][1]) if p.outputs else []
        expected = bool(EXPECTED.search(flat)) and p.outputs
        code_literals = set(NUMBER.findall(p.code)) if p.code else set()
        for pos, token in numbers(flat):
            if _inside(pos, exempt):
                continue
            if expected and is_printed(token, printed):
                continue
            if _inside(pos, code_spans) and token.lstrip("-+") in {t.lstrip("-+") for t in code_literals}:
                continue
            missing.append(f"{token!r} in ...{flat[max(0, pos - 60):pos + 40]}...")
    return missing


def stale_claims(name: str) -> list[str]:
    """Claims whose snippet is no longer in the page."""
    flats = [normalize(c) for c in page(name).cells]
    return [c.snippet for c in claims_of(name) if not any(c.snippet in f for f in flats)]


PAGES = notebook_names() + ["students", "paper", "readme", "release-readme"]


if __name__ == "__main__":       # python tests/classroom/course_numbers.py [PAGE ...]: what lacks a source
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    for name in sys.argv[1:] or PAGES:
        missing, stale = unsourced(name), stale_claims(name)
        print(f"{name}: {len(missing)} numbers without a source, {len(stale)} claims not on the page")
        for line in missing:
            print("   ", line)
        for snippet in stale:
            print("    stale:", snippet[:100])

__all__ = ["Claim", "PAGES", "page", "unsourced", "stale_claims", "claims_of", "normalize", "is_printed",
           "printed_values", "json"]
