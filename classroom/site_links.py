"""Reading a built site back (``site_problems``): every local link, image, script or style
must resolve inside the site (an ``#anchor`` too), and no page or style sheet may load anything
from another host, so that the site works offline, from a static host or from ``file://``."""
from __future__ import annotations

import html.parser
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit


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
