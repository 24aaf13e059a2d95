"""A real browser for the course's web paths: Playwright driving Chromium (Debian's
/usr/bin/chromium, or $ES_COURSE_CHROMIUM), headless, offline.

Every page a test opens goes through ``browser_pages.open``: the browser may reach localhost and
local files only; any other request is aborted and recorded, and ``browser_pages.check`` fails
the test on it, on a console error, an uncaught exception, a failed request or an HTTP error.
When a test fails, each page it opened is saved as a screenshot in
``browser-screenshots/<test name>/`` at the repository root (or $ES_COURSE_SCREENSHOTS/<test>).

Where Chromium or Playwright is missing the browser tests skip, saying which; with
ES_COURSE_REQUIRE_BROWSER=1 (CI sets it once it has installed Chromium) they fail instead.
"""
from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from webtools import ROOT, no_network

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-default-apps", "--mute-audio"]


def chromium_path() -> str | None:
    for path in (os.environ.get("ES_COURSE_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                 shutil.which("chromium-browser"), shutil.which("google-chrome")):
        if path and os.access(path, os.X_OK):
            return path
    return None


def _unavailable(reason: str):
    if os.environ.get("ES_COURSE_REQUIRE_BROWSER") == "1":
        pytest.fail(f"ES_COURSE_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def chromium():
    """A headless Chromium, launched once per session."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("Playwright is not installed (pip install -r requirements.txt)")
    path = chromium_path()
    if path is None:
        _unavailable("no Chromium (apt-get install chromium, or set ES_COURSE_CHROMIUM)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


def is_local(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("file", "data", "blob", "about") or parts.hostname in ("127.0.0.1", "localhost", "::1")


class Pages:
    """The pages one test opened, and everything that went wrong on them."""

    def __init__(self, browser):
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.context.route("**/*", self._route)
        self.pages, self.external, self.errors = [], [], []

    def _route(self, route):
        url = route.request.url
        if is_local(url):
            route.continue_()
        else:                       # nothing leaves this machine: record it, and the test fails on it
            self.external.append(url)
            route.abort()

    def open(self, url: str, wait: str = "load"):
        page = self.context.new_page()
        self.pages.append(page)
        page.on("console", lambda m: self.errors.append(f"{page.url}: console {m.type}: {m.text}")
                if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"{page.url}: uncaught {e}"))
        # a request cut short because the page navigated on (net::ERR_ABORTED) is not a failure;
        # a missing file is: HTTP 404 (below), or net::ERR_FILE_NOT_FOUND from file://
        page.on("requestfailed", lambda r: self.errors.append(f"{page.url}: request failed {r.url} ({r.failure})")
                if is_local(r.url) and "ERR_ABORTED" not in (r.failure or "") else None)
        page.on("response", lambda r: self.errors.append(f"{page.url}: HTTP {r.status} for {r.url}")
                if r.status >= 400 else None)
        page.goto(url, wait_until=wait)
        return page

    def check(self, allow: str | None = None):
        """Fail on any external request, and on any error not matching the ``allow`` pattern."""
        assert not self.external, f"the browser tried the network: {self.external}"
        errors = [e for e in self.errors if not (allow and re.search(allow, e))]
        assert not errors, "\n".join(errors)

    def screenshots(self, folder: Path) -> list[Path]:
        folder.mkdir(parents=True, exist_ok=True)
        saved = []
        for i, page in enumerate(self.pages):
            if page.is_closed():
                continue
            slug = re.sub(r"[^A-Za-z0-9._-]+", "_", urlsplit(page.url).path.strip("/"))[-80:] or "page"
            path = folder / f"{i:02d}-{slug}.png"
            try:
                page.screenshot(path=str(path), full_page=True, timeout=15000)
                saved.append(path)
            except Exception as exc:          # a crashed page: say so, keep the others
                (folder / f"{i:02d}-{slug}.txt").write_text(f"no screenshot: {exc}\n")
        return saved


@pytest.fixture
def browser_pages(chromium):
    pages = Pages(chromium)
    yield pages
    pages.context.close()


def screenshot_folder(item) -> Path:
    base = Path(os.environ.get("ES_COURSE_SCREENSHOTS", ROOT / "browser-screenshots"))
    return base / re.sub(r"[^A-Za-z0-9._-]+", "_", item.name)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed browser test leaves a screenshot of each page it opened, and says where."""
    outcome = yield
    report = outcome.get_result()
    pages = getattr(item, "funcargs", {}).get("browser_pages")
    if report.when == "call" and report.failed and isinstance(pages, Pages) and pages.pages:
        folder = screenshot_folder(item)
        saved = pages.screenshots(folder)
        report.sections.append(("browser screenshots", f"{len(saved)} page(s) saved in {folder}"))


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def serve():
    """serve(folder) -> the URL of a static HTTP server on localhost for that folder (as any
    static host would serve a site), stopped at the end of the session."""
    servers = []

    def start(folder: Path) -> str:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}/"
    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """The course website built once per session from this checkout, with the network blocked:
    (its folder, build_site's report)."""
    for module in ("sphinx", "myst_nb", "furo"):
        pytest.importorskip(module, reason=f"the site needs {module}: pip install -r requirements.txt")
    from classroom.site import build_site
    out = tmp_path_factory.mktemp("site") / "site"
    with no_network() as attempts:
        report = build_site(out)
    assert not attempts, f"the site's build tried the network: {attempts}"
    print(f"\nsite built in {report['seconds']:.1f} s: {len(report['pages'])} pages, {report['files']} files, "
          f"{report['bytes'] / 2**20:.1f} MB")
    return out, report


@pytest.fixture(scope="session")
def served_site(built_site, serve):
    return serve(built_site[0])
