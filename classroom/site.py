"""``python -m classroom site DIR``: the course website, built offline from what is committed.

Pages: the README (the home page), the executed solutions in course order with their outputs as
stored (nothing is run), every page of ``docs/`` and ``pong/README.md``; the blank notebooks and
the executed ones are downloads on each notebook's page. Sphinx reads the pages (MyST-NB for the
notebooks, MyST for Markdown), Furo lays them out, Sphinx's own index answers the search box, and
MathJax 3 draws the math as SVG from one file copied into the site (from the
``sphinx-mathjax-offline`` package): no script, style, font or formula comes from another host,
so the site works from a static host, a USB stick or ``DIR/index.html`` opened in a browser.

Pages are written for a reader, not a grader (``reader_markdown``, ``reader_cell``): no
``[N points]`` in titles, no ``BEGIN/END SOLUTION`` markers in code, no ALE start-up banners
or Redis probation log lines in outputs. The home page opens with what you build (the Pong
GIF, the CartPole curve), where to start and the computer time of each notebook
(``landing``); every notebook page offers the student kit (``python -m classroom release``,
zipped) with the command that installs it. Long output lines and wide formulas wrap or shrink
to the column (``SITE_CSS``), and the search page shows a snippet of each result from the
site's own copy of every page's text (``search_snippets``: a browser refuses to fetch pages
from ``file://``, which is how Sphinx would get them).

The build fails on any Sphinx warning (a link to a missing page or heading, a missing image) and
then reads every page it wrote back (``site_links.site_problems``): a local link, image, script or style
that does not resolve, or anything a page would load from the network, fails it too.
"""
from __future__ import annotations

import html.parser
import io
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

from es.errors import ESError

from .build import ROOT
from .site_links import site_problems

# The navigation, in this order after the course's notebooks (00 -> 05); a page of docs/ not
# named here still gets its page, at the end of the reference section.
AUDIENCES = ["docs/students.md", "docs/instructors.md", "docs/self-learners.md"]
REFERENCE = ["docs/paper.md", "docs/install.md", "docs/cli.md", "docs/distributed.md", "docs/pong.md", "docs/design.md",
             "docs/benchmarks.md", "pong/README.md"]
# The Pong notebook's page shows the shipped agent playing: docs/pong.md's own image, caption and all.
SHOWCASE = {"04_pong": ("docs/pong.md", "pong.gif")}
WIDGET = "application/vnd.jupyter.widget-view+json"
MARKER = ".es-course-site"       # a folder holding it is a site this command built, safe to replace
MATHJAX = ("sphinx-mathjax-offline", "sphinx-mathjax-offline/static/mathjax/tex-svg-full.js")

CONF = '''\
# Written by python -m classroom site: the course website's Sphinx configuration.
project = "es-course"
html_title = "es-course"
root_doc = "index"
extensions = ["myst_nb"]
exclude_patterns = ["notebooks/**", "downloads/**", "_build", "**/.ipynb_checkpoints"]
suppress_warnings = ["myst.header"]   # the notebooks' headings may skip a level
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3              # README#students, design.md#one-generation: GitHub's anchors
myst_update_mathjax = False
nb_execution_mode = "off"             # the stored outputs, as committed: nothing is run
nb_ipywidgets_js = {{}}                 # no widget manager from a CDN (stage() drops widget outputs)
html_theme = "furo"
html_static_path = ["_static"]
html_css_files = ["site.css"]
html_favicon = "_static/favicon.svg"     # a browser asks for /favicon.ico otherwise: a 404 on every page
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None
html_show_search_summary = False      # Sphinx would fetch each page (refused from file://): search_snippets
mathjax_path = "mathjax/tex-svg-full.js"
mathjax3_config = {mathjax_config}
'''
# MathJax 3 on its own file: the TeX the pages hold, drawn as SVG (no web fonts to fetch, which a
# browser refuses from file://), no menu and no speech rule engine (both would load more files).
MATHJAX_CONFIG = {
    "loader": {"load": []},
    "options": {"enableMenu": False, "enableAssistiveMml": True},
    "tex": {"inlineMath": [["\\(", "\\)"]], "displayMath": [["\\[", "\\]"]], "processEscapes": True},
    "svg": {"fontCache": "global"},
}
SITE_CSS = """\
/* a wide formula shrinks to the column instead of being cut off (MathJax 3 cannot break lines) */
mjx-container[display="true"] { overflow-x: auto; overflow-y: hidden; max-width: 100%; }
mjx-container[display="true"] > svg { max-width: 100%; height: auto; }
/* a notebook's output lines wrap at the column's edge, as a terminal would, never cut */
div.cell_output pre, div.output pre { white-space: pre-wrap; overflow-wrap: anywhere; }
/* the home page's pictures of what you build, side by side where there is room */
.landing-figures img { max-width: 48%; vertical-align: top; margin-right: 1%; }
/* search results: the snippet under each title */
ul.search p.context { margin: 0.2em 0 0.8em; color: var(--color-foreground-secondary, #555); }
"""
FAVICON = """\
<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><rect width="64" height="64" rx="12" fill="#2a6f97"/>
<text x="32" y="42" font-family="sans-serif" font-size="28" font-weight="bold" fill="#fff" text-anchor="middle">ES</text></svg>
"""
KIT = "es-course-kit"       # the student kit's zip (a release of the course) and the folder it unpacks to
INSTALL = (f"unzip {KIT}.zip\ncd {KIT}\npython -m pip install -r requirements.txt\n"
           "jupyter lab 00_es_from_scratch.ipynb")     # one command a line: nothing cut at the column's edge
# What a reader page leaves out of a notebook (the grader's markers and machine chatter)
_POINTS = re.compile(r"\s*\[(?:\+?\d+ (?:points?|pts)(?: with notebook \d+)?(?:, \+\d+ extras?)?|\+\+)\]")
_GRADED = re.compile(r" \(\d+ points? when graded\)")
_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")
_CHATTER = re.compile(r"^(?:A\.L\.E: Arcade Learning Environment \(version [^)]*\)|\[Powered by Stella\]"
                      r"|redis: .*\bprobation\b.*)$")


def reader_markdown(text: str) -> str:
    """Markdown as a reader page shows it: without ``[N points]``, ``[+N pts]`` or ``[++]``."""
    return _POINTS.sub("", text)


def reader_cell(cell) -> None:
    """A notebook cell as a reader page shows it (in place): markdown without point markers;
    code without its ``BEGIN/END SOLUTION`` lines; stream outputs without ALE's start-up banner,
    Redis probation log lines or "(N points when graded)", an output left empty dropped;
    widget outputs dropped (their stored text is a first frame, "0%", not what the run did)."""
    if cell.cell_type == "markdown":
        cell.source = reader_markdown(cell.source)
        return
    if cell.cell_type != "code":
        return
    cell.source = "\n".join(line for line in cell.source.splitlines() if line.strip() not in _MARKERS)
    outputs = []
    for out in cell.outputs:
        if WIDGET in out.get("data", {}):
            continue
        if out.get("output_type") == "stream":
            lines = [_GRADED.sub("", line) for line in out.text.splitlines(keepends=True)
                     if not _CHATTER.match(line.rstrip("\n"))]
            if not "".join(lines).strip():
                continue
            out.text = "".join(lines)
        outputs.append(out)
    cell.outputs = outputs


def course_notebooks(root: Path = ROOT) -> list[str]:
    return sorted(p.stem for p in (root / "solutions").glob("[0-9][0-9]_*.ipynb"))


def docs_pages(root: Path = ROOT) -> tuple[list[str], list[str]]:
    """(audience pages, reference pages) in navigation order, paths relative to ``root``."""
    found = {p.relative_to(root).as_posix() for p in (root / "docs").glob("*.md")}
    found |= {p for p in REFERENCE if (root / p).exists()}
    audiences = [p for p in AUDIENCES if p in found]
    named = [p for p in REFERENCE if p in found]
    return audiences, named + sorted(found - set(audiences) - set(named))


def _toctree(caption: str, entries: list[str]) -> str:
    lines = "\n".join(e.removesuffix(".md").removesuffix(".ipynb") for e in entries)
    return f"\n```{{toctree}}\n:hidden:\n:caption: {caption}\n:maxdepth: 1\n\n{lines}\n```\n"


_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _relative(target: str, page: str) -> str:
    return os.path.relpath(target, Path(page).parent.as_posix() or ".")


# a link to a README.md: the repository's own is the home page (index.md) on the site
_README_LINK = re.compile(r"\]\(((?:\.\./)*(?:[\w.-]+/)*README\.md)(?=[)#])")


def _to_home(match: re.Match, page: str) -> str:
    if os.path.normpath(Path(page).parent / match[1]) != "README.md":
        return match[0]            # another folder's README (pong/README.md) is a page of its own
    return match[0].replace(match[1], _relative("index.md", page))


def _local_targets(text: str) -> list[str]:
    """Relative link and image targets of a Markdown text, without their #fragment."""
    out = []
    for target in _LINK.findall(text):
        parts = urlsplit(target)
        if not parts.scheme and not target.startswith("#") and parts.path:
            out.append(unquote(parts.path))
    return out


def stage(dest: Path, root: Path = ROOT, kit: bool | None = None) -> dict:
    """Lay out the site's sources in ``dest``, each at its path in the repository so that the
    README's and the docs' relative links resolve as they do on disk: index.md (the README and
    the navigation), solutions/*.ipynb (the pages), notebooks/*.ipynb (the blank downloads),
    docs/ and every local file a page links to, and (``kit``; by default when ``root`` is this
    repository) the student kit as ``downloads/es-course-kit.zip``. Returns what was staged."""
    import nbformat
    names = course_notebooks(root)
    if not names:
        raise ESError(f"no executed notebooks in {root / 'solutions'}: run python -m classroom notebooks --execute")
    audiences, reference = docs_pages(root)
    readme = (root / "README.md").read_text(encoding="utf-8")
    pages = {"README.md": readme}
    for page in audiences + reference:
        pages[page] = (root / page).read_text(encoding="utf-8")
    # every local file a Markdown page links to, at its own path (a linked .md joins the reference pages)
    todo = list(pages)
    while todo:
        page = todo.pop()
        for target in _local_targets(pages[page]):
            path = (Path(page).parent / target).as_posix()
            source = (root / path).resolve()
            if not source.is_relative_to(root.resolve()) or not source.is_file():
                continue        # Sphinx's own check names it (a missing page or image is a warning)
            rel = source.relative_to(root.resolve()).as_posix()
            if rel in pages or (dest / rel).exists():
                continue
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, dest / rel)
            if rel.endswith(".md"):
                pages[rel] = source.read_text(encoding="utf-8")
                todo.append(rel)
                reference.append(rel)
    for page, text in pages.items():
        text = reader_markdown(_README_LINK.sub(lambda m: _to_home(m, page), text))
        pages[page] = text
        if page != "README.md":
            (dest / page).parent.mkdir(parents=True, exist_ok=True)
            (dest / page).write_text(text, encoding="utf-8")
    for folder in ("solutions", "notebooks", "downloads"):
        (dest / folder).mkdir(exist_ok=True)
    if kit is None:
        kit = root.resolve() == ROOT.resolve()      # a release is written from this repository only
    if kit:
        student_kit(dest / "downloads" / f"{KIT}.zip")
    notebooks = {name: nbformat.read(str(root / "solutions" / f"{name}.ipynb"), as_version=4) for name in names}
    home = landing(root, notebooks, kit)
    for image in LANDING_FIGURES:
        if (root / image).is_file() and not (dest / image).exists():
            (dest / image).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / image, dest / image)
    readme = re.sub(r"^!\[[^\]]*\]\(docs/cartpole-curve\.png\)\n\n(?:\*A trained run[^\n]*\*\n)?", "",
                    pages["README.md"], flags=re.M)      # the landing shows the curve, with its caption
    title = re.search(r"^# .+\n", readme, re.M)
    at = title.end() if title else 0
    index = readme[:at] + "\n" + home + "\n" + readme[at:] + "\n" \
        + _toctree("The course", [f"solutions/{n}" for n in names]) \
        + _toctree("Your path", audiences) + _toctree("Reference", reference)
    (dest / "index.md").write_text(index, encoding="utf-8")
    for name, nb in notebooks.items():
        executed, blank = root / "solutions" / f"{name}.ipynb", root / "notebooks" / f"{name}.ipynb"
        shutil.copyfile(executed, dest / "downloads" / executed.name)     # the committed file, byte for byte
        downloads = [f"{{download}}`the executed solution <../downloads/{name}.ipynb>`"]
        if blank.exists():
            shutil.copyfile(blank, dest / "notebooks" / blank.name)
            downloads.insert(0, f"{{download}}`the blank notebook <../notebooks/{name}.ipynb>` (yours to fill)")
        note = ("*This page is the executed solution as committed: its outputs (numbers, curves) are the ones "
                "its last run printed; nothing was run to build it.* Download " + " or ".join(downloads) + ".")
        if kit:
            note += "\n\n" + kit_note("../downloads")
        if name in SHOWCASE:
            note += "\n\n" + showcase(root, *SHOWCASE[name])
        for cell in nb.cells:
            reader_cell(cell)
        nb.cells.insert(1, nbformat.v4.new_markdown_cell(note))
        nbformat.write(nb, str(dest / "solutions" / executed.name))
    static = dest / "_static"
    (static / "mathjax").mkdir(parents=True)
    shutil.copyfile(mathjax_file(), static / "mathjax" / "tex-svg-full.js")
    (static / "site.css").write_text(SITE_CSS, encoding="utf-8")
    (static / "favicon.svg").write_text(FAVICON, encoding="utf-8")
    (dest / "conf.py").write_text(CONF.format(mathjax_config=repr(MATHJAX_CONFIG)), encoding="utf-8")
    return {"notebooks": names, "audiences": audiences, "reference": reference, "kit": bool(kit)}


# The run folder an executed solution resumed, whose clock is the notebook's training time
TRAINED = {"04_pong": "solutions/pong-run/checkpoint.npz"}


def notebook_title(nb) -> str:
    first = next((c.source for c in nb.cells if c.cell_type == "markdown"), "")
    m = re.search(r"^# (.+)$", first, re.M)
    return reader_markdown(m[1]).strip() if m else ""


def computer_time(root: Path, name: str, nb) -> str:
    """The computer time of a notebook's executed solution, as its run recorded it (2-core machine):
    ``es_course_run.seconds``; for a notebook whose training resumed a run already trained
    (``TRAINED``), that run's own clock as well."""
    seconds = (nb.metadata.get("es_course_run") or {}).get("seconds")
    text = "not recorded" if seconds is None else (f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min")
    run = root / TRAINED[name] if name in TRAINED else None
    if run is not None and run.is_file():
        from es.checkpoint import load_checkpoint
        meta = load_checkpoint(run)[1]
        wall = float(meta.get("wall_seconds", meta.get("train_seconds", 0.0)))
        if seconds is not None and seconds >= wall:        # it trained from scratch: the training is inside
            text = f"{text}, training ({wall / 60:.1f} min) included"
        else:                                              # it resumed a run trained before: add the run's clock
            text = f"training {wall / 60:.1f} min, then {text} for the rest"
    return text


LANDING_FIGURES = {"docs/pong.gif": "An agent playing Pong: the course's shipped agent (right, green) winning a "
                                    "game 21-3",
                   "docs/cartpole-curve.png": "CartPole learning curve: the center's return reaches 500 within 9 "
                                              "generations"}


def landing(root: Path, notebooks: dict, kit: bool) -> str:
    """The top of the home page: what you build, where to start, and each notebook with what
    you write in it and the computer time of its executed solution."""
    from .check import CHECKS, checks_for
    rows, first = [], next(iter(notebooks))
    guides = "; ".join(f"{who}: [{what}]({page})" for page, who, what in (
        ("docs/students.md", "Students of a class", "the students' guide"),
        ("docs/self-learners.md", "reading on your own", "self-learners")) if (root / page).is_file())
    guides = guides[0].upper() + guides[1:] + "." if guides else ""
    for name, nb in notebooks.items():
        writes = [n for c in checks_for(name) for n in CHECKS[c][3] if n.isidentifier() and n.islower()]
        if any(n.isupper() for c in checks_for(name) for n in CHECKS[c][3]):
            writes.append("a trained agent")
        rows.append(f"| [{notebook_title(nb) or name}](solutions/{name}.ipynb) | "
                    f"{', '.join(f'`{w}`' for w in dict.fromkeys(writes)) or '-'} | {computer_time(root, name, nb)} |")
    start = (f"Download the student kit, {{download}}`{KIT}.zip <downloads/{KIT}.zip>` (the blank notebooks, "
             "the support code they import and a `requirements.txt`; no answers), then on Linux with Python 3.11:"
             f"\n\n```bash\n{INSTALL}\n```\n\n" if kit else
             "Take the blank notebooks from `notebooks/` of the repository (`python -m classroom release DIR` writes "
             "a student kit). ")
    build = ""
    if all((root / image).is_file() for image in LANDING_FIGURES):
        build = f"""
## What you build

```{{container}} landing-figures
{chr(10).join(f"![{alt}]({image})" for image, alt in LANDING_FIGURES.items())}
```

*Left: Pong, the last milestone. This is the course's shipped agent (the package's objects policy,
+9.6 points a game); the agent you train yourself in notebook 04 beats a random player, about -19 to
-16 a game against -20.5. Right: CartPole-v1 learned by ES in 9 generations, what notebook 01
builds (`python -m es train cartpole` on its defaults, seed 0).*
"""
    return build + f"""
## Where to start

Start with [notebook {first[:2]}](solutions/{first}.ipynb) and go in order: each builds on the one
before. Each page below is the executed solution, to read; to write the code yourself, fill the blank
notebook: each gap states its function's contract and the cell after it checks your answer and names
your likely mistake. {start}{guides}

| notebook | what you write | computer time of the executed solution (2-core machine) |
|---|---|---|
""" + "\n".join(rows) + """

Reading the text and writing your code come on top of the computer time; notebook 04's section 5
gives the training time as measured samples, with the machines they come from.
"""


def kit_note(downloads: str) -> str:
    return (f"**Work through it yourself**: the student kit, {{download}}`{KIT}.zip <{downloads}/{KIT}.zip>` "
            f"(every blank notebook, the support code, no answers), installs with\n\n```bash\n{INSTALL}\n```")


def student_kit(zip_path: Path) -> Path:
    """The student kit: ``python -m classroom release`` into a temporary folder, zipped under one
    top folder (``es-course-kit/``), files in sorted order with a fixed date."""
    import zipfile
    from .release import release
    with tempfile.TemporaryDirectory(prefix="es-kit-") as tmp:
        folder, said = Path(tmp) / KIT, []
        if release(folder, log=said.append) != 0:
            raise ESError("the student kit (python -m classroom release) did not build:\n  " + "\n  ".join(said))
        with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as z:
            for f in sorted(p for p in folder.rglob("*") if p.is_file()):
                info = zipfile.ZipInfo(f.relative_to(folder.parent).as_posix(), date_time=(2026, 1, 1, 0, 0, 0))
                info.external_attr = (f.stat().st_mode & 0o777) << 16
                z.writestr(info, f.read_bytes(), zipfile.ZIP_DEFLATED)
    return zip_path


def showcase(root: Path, page: str, image: str) -> str:
    """The line of ``page`` that shows ``image``, its path made relative to a notebook's page."""
    text = (root / page).read_text(encoding="utf-8")
    title = re.search(r"^# (.+)$", text, re.M)
    for line in text.splitlines():
        m = re.search(r"!\[([^\]]*)\]\(([^)\s]*%s)\)" % re.escape(image), line)
        if m:
            path = (Path(page).parent / m[2]).as_posix()
            return f"![{m[1]}](../{path})\n\n*{m[1]} (from [{title[1] if title else page}](../{page})).*"
    raise ESError(f"{page} no longer shows {image}: update classroom/site.py's SHOWCASE")


def mathjax_file() -> Path:
    from importlib.metadata import PackageNotFoundError, distribution
    try:
        path = Path(distribution(MATHJAX[0]).locate_file(MATHJAX[1]))
    except PackageNotFoundError:
        path = None
    if path is None or not path.is_file():
        raise ESError(f"MathJax for the site comes from the {MATHJAX[0]} package: pip install \"es-course[docs]\"")
    return path


def build_site(out: Path, root: Path = ROOT, kit: bool | None = None) -> dict:
    """Build the site into ``out`` (created, or replaced if it holds a site this built).
    Returns {"pages", "seconds", "bytes", "files"}; raises ESError on any warning or problem."""
    try:
        from sphinx.application import Sphinx
        from sphinx.errors import SphinxError
        from sphinx.util.docutils import docutils_namespace, patch_docutils
    except ImportError:
        raise ESError("the site needs Sphinx, MyST-NB and Furo: pip install \"es-course[docs]\"") from None
    out = Path(out)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).exists())):
        raise ESError(f"{out} exists and is not a site this command built: give an empty or new folder")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="es-site-") as tmp:
        src, build = Path(tmp) / "src", Path(tmp) / "html"
        src.mkdir()
        staged = stage(src, root, kit)
        warnings = io.StringIO()
        try:
            with patch_docutils(str(src)), docutils_namespace():     # as sphinx-build does: a clean registry each time
                app = Sphinx(str(src), str(src), str(build), str(Path(tmp) / "doctrees"), "html", status=None,
                             warning=warnings, freshenv=True, keep_going=True)
                app.build()
        except SphinxError as exc:
            raise ESError(f"the site did not build: {exc}") from None
        lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln) for ln in warnings.getvalue().splitlines() if ln.strip()]
        if lines or app.statuscode:
            raise ESError("the site did not build cleanly:\n  " + "\n  ".join(
                ln.replace(str(src) + "/", "") for ln in lines[:40]))
        (build / MARKER).write_text("built by python -m classroom site; safe to delete\n")
        for leftover in (".buildinfo", ".buildinfo.bak", "objects.inv"):
            (build / leftover).unlink(missing_ok=True)
        search_snippets(build)
        problems = site_problems(build)
        if problems:
            raise ESError("the site has broken or external references:\n  " + "\n  ".join(problems[:40]))
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(build, out)
    files = [p for p in out.rglob("*") if p.is_file()]
    return {"pages": sorted(p.relative_to(out).as_posix() for p in out.rglob("*.html")),
            "seconds": time.monotonic() - t0, "bytes": sum(p.stat().st_size for p in files),
            "files": len(files), **staged}


class _MainText(html.parser.HTMLParser):
    """A page's main content (``role="main"``) as text, its sections kept as ``<section id>``
    so that a search result's #anchor still finds its own section; scripts, styles and the
    headings' "#" links left out."""
    SKIP = {"script", "style"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out, self._depth, self._skip, self._tags = [], 0, 0, []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if self._depth == 0:
            if a.get("role") == "main":
                self._depth, self._tags = 1, [tag]
            return
        if tag in ("br", "img", "hr", "input", "meta", "link", "wbr"):
            return
        self._tags.append(tag)
        if tag in self.SKIP or "headerlink" in (a.get("class") or "").split():
            self._skip += 1
        elif tag == "section" and a.get("id"):
            self.out.append(f'<section id="{html.escape(a["id"])}">')
        elif tag in ("p", "div", "li", "pre", "tr", "h1", "h2", "h3", "h4"):
            self.out.append(" ")

    def handle_endtag(self, tag):
        if self._depth == 0 or tag not in self._tags:
            return
        while self._tags:
            open_tag = self._tags.pop()
            if open_tag in self.SKIP or (self._skip and open_tag == "a"):
                self._skip = max(0, self._skip - 1)
            if open_tag == "section":
                self.out.append("</section>")
            if open_tag == tag:
                break
        if not self._tags:
            self._depth = 0

    def handle_data(self, data):
        if self._depth and not self._skip:
            self.out.append(html.escape(data, quote=False))

    def text(self) -> str:
        return re.sub(r"\s+", " ", "".join(self.out)).strip()


SNIPPETS_JS = """\
// Search results with a snippet of each page (python -m classroom site). Sphinx's search fetches
// each result's page to cut a snippet from it, which a browser refuses from file://; this page
// carries every page's text (page_texts.js) and answers those requests from it.
(() => {
  DOCUMENTATION_OPTIONS.SHOW_SEARCH_SUMMARY = true;
  const texts = window.ES_PAGE_TEXTS || {};
  const root = new URL(document.documentElement.dataset.content_root || "./", window.location.href).href;
  const realFetch = window.fetch ? window.fetch.bind(window) : null;
  window.fetch = (resource, init) => {
    const url = new URL(typeof resource === "string" ? resource : resource.url, window.location.href);
    const path = url.href.split(/[?#]/)[0];
    const doc = path.startsWith(root) && path.endsWith(".html") ? path.slice(root.length, -5) : null;
    if (doc !== null && Object.prototype.hasOwnProperty.call(texts, doc)) {
      const body = '<div role="main">' + texts[doc] + "</div>";
      return Promise.resolve(new Response(body, {headers: {"Content-Type": "text/html"}}));
    }
    return realFetch ? realFetch(resource, init) : Promise.reject(new Error("fetch is not available"));
  };
})();
"""


def search_snippets(site: Path) -> dict:
    """Give the built search page its snippets: every page's main text in
    ``_static/page_texts.js`` (by Sphinx's document name), ``_static/search_snippets.js`` to
    serve it, both loaded by search.html before Sphinx's search script. Returns the texts."""
    import json
    texts = {}
    for page in sorted(site.rglob("*.html")):
        doc = page.relative_to(site).with_suffix("").as_posix()
        if doc in ("search", "genindex") or doc.startswith("_"):
            continue
        parser = _MainText()
        parser.feed(page.read_text(encoding="utf-8"))
        texts[doc] = parser.text()
    (site / "_static" / "page_texts.js").write_text(
        "window.ES_PAGE_TEXTS = " + json.dumps(texts, ensure_ascii=False, sort_keys=True) + ";\n", encoding="utf-8")
    (site / "_static" / "search_snippets.js").write_text(SNIPPETS_JS, encoding="utf-8")
    search = site / "search.html"
    text = search.read_text(encoding="utf-8")
    anchor = '<script src="_static/searchtools.js'
    if anchor not in text:
        raise ESError("search.html no longer loads _static/searchtools.js: update classroom/site.py's search_snippets")
    tags = '<script src="_static/page_texts.js"></script>\n<script src="_static/search_snippets.js"></script>\n'
    search.write_text(text.replace(anchor, tags + anchor, 1), encoding="utf-8")
    return texts


def site(out: Path) -> int:
    report = build_site(out)
    mb = report["bytes"] / 2**20
    print(f"built the course website in {out}: {len(report['pages'])} pages, {report['files']} files, "
          f"{mb:.1f} MB, in {report['seconds']:.0f} s")
    print(f"  the course: {', '.join(report['notebooks'])}")
    print(f"  open {Path(out) / 'index.html'} in a browser, or serve the folder from any static host")
    return 0
