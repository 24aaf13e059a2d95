"""``python -m classroom site DIR``: the course website, built offline from what is committed.

Pages: the README (the home page), the executed solutions in course order with their outputs as
stored (nothing is run), every page of ``docs/`` and ``pong/README.md``; the blank notebooks and
the executed ones are downloads on each notebook's page. Sphinx reads the pages (MyST-NB for the
notebooks, MyST for Markdown), Furo lays them out, Sphinx's own index answers the search box, and
MathJax 3 draws the math as SVG from one file copied into the site (from the
``sphinx-mathjax-offline`` package): no script, style, font or formula comes from another host,
so the site works from a static host, a USB stick or ``DIR/index.html`` opened in a browser.

The build fails on any Sphinx warning (a link to a missing page or heading, a missing image) and
then reads every page it wrote back (``site_problems``): a local link, image, script or style
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
html_show_search_summary = False      # summaries fetch each page, which a browser refuses from file://
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
/* a wide formula scrolls sideways instead of being cut off */
mjx-container[display="true"] { overflow-x: auto; overflow-y: hidden; max-width: 100%; }
"""
FAVICON = """\
<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><rect width="64" height="64" rx="12" fill="#2a6f97"/>
<text x="32" y="42" font-family="sans-serif" font-size="28" font-weight="bold" fill="#fff" text-anchor="middle">ES</text></svg>
"""


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


def stage(dest: Path, root: Path = ROOT) -> dict:
    """Lay out the site's sources in ``dest``, each at its path in the repository so that the
    README's and the docs' relative links resolve as they do on disk: index.md (the README and
    the navigation), solutions/*.ipynb (the pages), notebooks/*.ipynb (the blank downloads),
    docs/ and every local file a page links to. Returns what was staged."""
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
        text = _README_LINK.sub(lambda m: _to_home(m, page), text)
        pages[page] = text
        if page != "README.md":
            (dest / page).parent.mkdir(parents=True, exist_ok=True)
            (dest / page).write_text(text, encoding="utf-8")
    index = pages["README.md"] + "\n" + _toctree("The course", [f"solutions/{n}" for n in names]) \
        + _toctree("Your path", audiences) + _toctree("Reference", reference)
    (dest / "index.md").write_text(index, encoding="utf-8")
    for folder in ("solutions", "notebooks", "downloads"):
        (dest / folder).mkdir(exist_ok=True)
    for name in names:
        executed, blank = root / "solutions" / f"{name}.ipynb", root / "notebooks" / f"{name}.ipynb"
        shutil.copyfile(executed, dest / "downloads" / executed.name)     # the committed file, byte for byte
        downloads = [f"{{download}}`the executed solution <../downloads/{name}.ipynb>`"]
        if blank.exists():
            shutil.copyfile(blank, dest / "notebooks" / blank.name)
            downloads.insert(0, f"{{download}}`the blank notebook <../notebooks/{name}.ipynb>` (yours to fill)")
        note = ("*This page is the executed solution as committed: its outputs (numbers, curves) are the ones "
                "its last run printed; nothing was run to build it.* Download " + " or ".join(downloads) + ".")
        if name in SHOWCASE:
            note += "\n\n" + showcase(root, *SHOWCASE[name])
        nb = nbformat.read(str(executed), as_version=4)
        for cell in nb.cells:       # a progress widget's stored text is its first frame ("0%"): left out
            if cell.cell_type == "code":
                cell.outputs = [o for o in cell.outputs if WIDGET not in o.get("data", {})]
        nb.cells.insert(1, nbformat.v4.new_markdown_cell(note))
        nbformat.write(nb, str(dest / "solutions" / executed.name))
    static = dest / "_static"
    (static / "mathjax").mkdir(parents=True)
    shutil.copyfile(mathjax_file(), static / "mathjax" / "tex-svg-full.js")
    (static / "site.css").write_text(SITE_CSS, encoding="utf-8")
    (static / "favicon.svg").write_text(FAVICON, encoding="utf-8")
    (dest / "conf.py").write_text(CONF.format(mathjax_config=repr(MATHJAX_CONFIG)), encoding="utf-8")
    return {"notebooks": names, "audiences": audiences, "reference": reference}


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


def build_site(out: Path, root: Path = ROOT) -> dict:
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
        staged = stage(src, root)
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


class _Refs(html.parser.HTMLParser):
    """What one page refers to: (tag, url, loads) per reference, and the ids it defines."""
    LOADS = {("img", "src"), ("script", "src"), ("source", "src"), ("source", "srcset"), ("video", "src"),
             ("video", "poster"), ("audio", "src"), ("iframe", "src"), ("embed", "src"), ("object", "data"),
             ("input", "src"), ("image", "href"), ("use", "href")}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.refs, self.ids, self.styles = [], set(), []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name"):
            if a.get(key) and (key == "id" or tag == "a"):
                self.ids.add(a[key])
        if tag == "link" and a.get("href"):
            rel = (a.get("rel") or "").split()
            self.refs.append((tag, a["href"], not {"canonical", "alternate", "next", "prev", "index", "search",
                                                     "author", "license", "help"} & set(rel)))
        elif tag == "a" and a.get("href"):
            self.refs.append((tag, a["href"], False))
        for (t, key) in self.LOADS:
            if t == tag and a.get(key):
                self.refs.append((tag, a[key].split()[0] if key == "srcset" else a[key], True))
        if a.get("style"):
            self.styles.append(a["style"])
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.styles.append(data)


_CSS_URL = re.compile(r"""url\(\s*['"]?([^'")]+)['"]?\s*\)|@import\s+['"]([^'"]+)['"]""")


def _is_external(url: str) -> bool:
    parts = urlsplit(url)
    return bool(parts.netloc) or parts.scheme not in ("", "file")


def site_problems(site: Path) -> list[str]:
    """Every broken local reference (a link to a missing file or #anchor, a missing image, script
    or style) and every resource a page would load from another host, in a built site."""
    site = Path(site).resolve()
    problems, ids, refs = [], {}, []
    for page in sorted(site.rglob("*.html")):
        parser = _Refs()
        parser.feed(page.read_text(encoding="utf-8", errors="replace"))
        ids[page] = parser.ids
        refs += [(page, tag, url, loads) for tag, url, loads in parser.refs]
        refs += [(page, "style", m[0] or m[1], True) for css in parser.styles for m in _CSS_URL.findall(css)]
    for sheet in sorted(site.rglob("*.css")):
        refs += [(sheet, "css", m[0] or m[1], True) for m in _CSS_URL.findall(sheet.read_text(errors="replace"))]
    for source, tag, url, loads in refs:
        where = source.relative_to(site).as_posix()
        if url.startswith(("mailto:", "javascript:", "data:", "about:")):
            continue
        if _is_external(url):
            if loads:
                problems.append(f"{where}: <{tag}> loads {url} from the network")
            continue
        parts = urlsplit(url)
        target = source if not parts.path else (source.parent / unquote(parts.path)).resolve()
        if target.is_dir():
            target = target / "index.html"
        if not target.is_relative_to(site):
            problems.append(f"{where}: <{tag}> {url} points outside the site")
        elif not target.exists():
            problems.append(f"{where}: <{tag}> {url} does not exist")
        elif parts.fragment and target.suffix == ".html" and target in ids and unquote(parts.fragment) not in ids[target]:
            problems.append(f"{where}: <{tag}> {url}: no #{parts.fragment} in {target.relative_to(site).as_posix()}")
    return problems


def site(out: Path) -> int:
    report = build_site(out)
    mb = report["bytes"] / 2**20
    print(f"built the course website in {out}: {len(report['pages'])} pages, {report['files']} files, "
          f"{mb:.1f} MB, in {report['seconds']:.0f} s")
    print(f"  the course: {', '.join(report['notebooks'])}")
    print(f"  open {Path(out) / 'index.html'} in a browser, or serve the folder from any static host")
    return 0
