"""The course website in a real browser (Chromium), offline: every page loads without a console
error and with its images and math drawn, served from localhost as a static host would and
opened from disk; the navigation walks the course in order and reaches every notebook; the
search box finds "antithetic", each result with a snippet; the home page shows what you
build and leads to notebook 00; notebook 04's long result lines wrap inside the column."""
from __future__ import annotations

import re

import nbformat
import pytest

from classroom.site import AUDIENCES, course_notebooks, reader_markdown
from webtools import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def drawn(page) -> dict:
    """After MathJax has finished: the page's images, broken ones, math nodes and drawn formulas."""
    page.wait_for_function("() => !window.MathJax || (window.MathJax.startup && window.MathJax.startup.promise)")
    page.evaluate("() => window.MathJax ? window.MathJax.startup.promise : null")
    return page.evaluate("""() => {
        const imgs = [...document.images];
        return {images: imgs.length,
                broken: imgs.filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src),
                math: document.querySelectorAll('.math').length,
                formulas: [...document.querySelectorAll('mjx-container svg')]
                          .filter(s => s.getBoundingClientRect().width > 0).length,
                errors: document.querySelectorAll('mjx-merror, [data-mjx-error]').length};
    }""")


def test_every_page_loads_with_its_images_and_math_and_no_console_error(built_site, served_site, browser_pages):
    site, _ = built_site
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    assert len(pages) >= 19
    seen_math = 0
    for rel in pages:
        page = browser_pages.open(served_site + rel)
        state = drawn(page)
        assert not state["broken"], (rel, state["broken"])
        assert state["formulas"] == state["math"] and not state["errors"], (rel, state)
        seen_math += state["math"]
        if rel.startswith("solutions/"):
            assert state["images"] >= 1, rel          # each notebook page shows its plots
    displayed = sum(c.source.count("$$") // 2 for n in course_notebooks()
                    for c in nbformat.read(str(ROOT / "solutions" / f"{n}.ipynb"), as_version=4).cells
                    if c.cell_type == "markdown")
    assert seen_math >= displayed > 0, (seen_math, displayed)
    browser_pages.check()


def test_the_site_works_opened_from_disk(built_site, browser_pages):
    """file://: what a student with the folder on a USB stick and no server gets, search included."""
    site, _ = built_site
    for rel in ("index.html", "solutions/00_es_from_scratch.html", "solutions/04_pong.html"):
        page = browser_pages.open((site / rel).as_uri())
        state = drawn(page)
        assert state["images"] >= 1 and not state["broken"], (rel, state)
        assert state["formulas"] == state["math"], (rel, state)
    page = browser_pages.open((site / "search.html").as_uri() + "?q=antithetic")
    page.locator("ul.search li a").first.wait_for(timeout=20000)
    assert any("01_cartpole.html" in (a.get_attribute("href") or "") for a in page.locator("ul.search li a").all())
    browser_pages.check()


def first_heading(path) -> str:
    if path.suffix == ".ipynb":
        text = nbformat.read(str(path), as_version=4).cells[0].source
    else:
        text = path.read_text()
    return re.sub(r"[`*]", "", reader_markdown(re.search(r"^# (.+)$", text, re.M)[1])).strip()   # as the page shows it


def test_the_navigation_walks_the_course_in_order_and_reaches_every_notebook(served_site, browser_pages):
    page = browser_pages.open(served_site + "index.html")
    notebooks = course_notebooks()
    assert notebooks[-1] == "06_locomotion", notebooks
    want = [first_heading(ROOT / "solutions" / f"{n}.ipynb") for n in notebooks] \
        + [first_heading(ROOT / p) for p in AUDIENCES]
    # the sidebar lists the notebooks 00 -> 06, then the audience pages
    sidebar = page.locator(".sidebar-tree a.reference.internal")
    texts = [t.strip() for t in sidebar.all_inner_texts()]
    assert texts[:len(want)] == want, texts
    # each notebook is a click away from the home page
    for name, title in zip(notebooks, want):
        page.goto(served_site + "index.html")
        page.locator(".sidebar-tree").get_by_role("link", name=title, exact=True).click()
        page.wait_for_url(f"**/solutions/{name}.html")
        assert page.locator("article h1").first.inner_text().strip().rstrip("#").strip() == title
    # "next" from the home page walks the same order
    page.goto(served_site + "index.html")
    walked = []
    for _ in want:
        page.locator("a.next-page").click()
        page.wait_for_load_state()
        walked.append(page.locator("article h1").first.inner_text().strip().rstrip("#").strip())
    assert walked == want
    browser_pages.check()


def test_search_finds_antithetic(served_site, browser_pages):
    page = browser_pages.open(served_site + "index.html")
    box = page.locator("input[name=q]").first
    box.fill("antithetic")
    box.press("Enter")
    page.wait_for_url("**/search.html?q=antithetic*")
    results = page.locator("#search-results li a, ul.search li a")
    results.first.wait_for(timeout=20000)
    hrefs = [results.nth(i).get_attribute("href") for i in range(results.count())]
    assert any("solutions/01_cartpole.html" in h for h in hrefs), hrefs
    page.locator("ul.search li a", has_text="01").first.click()
    page.wait_for_url("**/solutions/01_cartpole.html*")
    assert "antithetic" in page.locator("article").inner_text().lower()
    browser_pages.check()


def test_the_harness_fails_on_a_network_request_a_console_error_and_a_missing_file(tmp_path, serve, browser_pages):
    """The checks above can fail: a page that reaches for another host, logs an error and
    misses an image is caught on all three counts."""
    (tmp_path / "bad.html").write_text('<html><body><img src="https://cdn.example.org/x.png"><img src="gone.png">'
                                       '<script>console.error("boom")</script></body></html>')
    browser_pages.open(serve(tmp_path) + "bad.html")
    with pytest.raises(AssertionError, match="tried the network: .*cdn.example.org"):
        browser_pages.check()
    browser_pages.external.clear()
    with pytest.raises(AssertionError) as err:
        browser_pages.check()
    assert "console error: boom" in str(err.value) and "HTTP 404 for http://127.0.0.1" in str(err.value)


def test_the_landing_page_shows_what_you_build_and_leads_to_notebook_00(served_site, browser_pages):
    page = browser_pages.open(served_site + "index.html")
    figures = page.locator(".landing-figures img")
    assert figures.count() == 2
    boxes = []
    for i in range(2):
        figures.nth(i).scroll_into_view_if_needed()
        assert figures.nth(i).evaluate("i => i.complete && i.naturalWidth > 0"), i
        boxes.append(figures.nth(i).bounding_box())
    assert abs(boxes[0]["y"] - boxes[1]["y"]) < 2 and boxes[0]["x"] + boxes[0]["width"] <= boxes[1]["x"] + 1, boxes
    install = page.locator("div.highlight-bash pre", has_text="pip install -r requirements.txt").first
    assert install.evaluate("p => p.scrollWidth <= p.clientWidth + 1"), "the install commands are cut"
    table = page.locator("table", has_text="what you write").first
    assert table.locator("tbody tr").count() == len(course_notebooks())
    assert "04 · Atari Pong from pixels" in table.inner_text() and "points" not in table.inner_text()
    page.locator("a", has_text="notebook 00").first.click()
    page.wait_for_url("**/solutions/00_es_from_scratch.html*")
    browser_pages.check()


def test_04s_result_lines_wrap_inside_the_column(served_site, browser_pages):
    page = browser_pages.open(served_site + "solutions/04_pong.html")
    pre = page.locator("div.cell_output pre", has_text="30 updates:").first
    pre.scroll_into_view_if_needed()
    state = pre.evaluate("""p => {
        const lh = parseFloat(getComputedStyle(p).lineHeight) || 16;
        const col = p.closest('article').getBoundingClientRect();
        const box = p.getBoundingClientRect();
        return {overflow: p.scrollWidth - p.clientWidth, right: box.right, column: col.right,
                lines: Math.round(box.height / lh), white: getComputedStyle(p).whiteSpace};
    }""")
    assert state["white"] == "pre-wrap" and state["overflow"] <= 1, state
    assert state["right"] <= state["column"] + 1 and state["lines"] >= 3, state
    browser_pages.check()


def test_search_results_show_a_snippet_from_a_server_and_from_disk(built_site, served_site, browser_pages):
    site, _ = built_site
    for url in (served_site + "search.html?q=antithetic", (site / "search.html").as_uri() + "?q=antithetic"):
        page = browser_pages.open(url)
        snippet = page.locator("ul.search li p.context").first
        snippet.wait_for(timeout=20000)
        assert "antithetic" in snippet.inner_text().lower(), (url, snippet.inner_text())
    browser_pages.check()
