"""``python -m classroom site DIR``: the course website is built offline from what is committed,
has a page per notebook (its stored outputs, nothing re-run) and per docs page, in course
order, with downloads that are the committed notebooks; every local reference resolves and
nothing is loaded from the network; a broken link fails the build."""
from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from classroom.site import AUDIENCES, INSTALL, KIT, course_notebooks, reader_cell, reader_markdown, site_problems
from webtools import ROOT, no_network

pytestmark = pytest.mark.slow        # the session's site build takes about a minute (2 busy cores), the student kit included


def text_of(page: Path) -> str:
    """A page's text as a reader sees it: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


def title(notebook: Path) -> str:
    """A notebook's title as its page shows it (without a points marker: reader_markdown)."""
    nb = nbformat.read(str(notebook), as_version=4)
    return reader_markdown(re.search(r"^# (.+)$", nb.cells[0].source, re.M)[1]).strip()


def test_a_page_per_notebook_and_per_docs_page(built_site):
    site, report = built_site
    names = course_notebooks()
    assert names == ["00_es_from_scratch", "01_cartpole", "02_parallel", "03_redis", "04_pong", "05_extras",
                     "06_locomotion"]
    for name in names:
        assert (site / "solutions" / f"{name}.html").is_file(), name
        assert title(ROOT / "solutions" / f"{name}.ipynb") in text_of(site / "solutions" / f"{name}.html")
    for page in sorted((ROOT / "docs").glob("*.md")) + [ROOT / "pong" / "README.md"]:
        rel = page.relative_to(ROOT).with_suffix(".html")
        assert (site / rel).is_file(), rel
        heading = re.search(r"^# (.+)$", page.read_text(), re.M)[1]
        assert re.sub(r"[`*]", "", heading) in text_of(site / rel), rel
    assert (site / "index.html").is_file() and (site / "search.html").is_file() and (site / "searchindex.js").is_file()
    assert "Set up" in text_of(site / "index.html")          # the README is the home page
    print(f"site: {len(report['pages'])} pages, {report['files']} files, {report['bytes'] / 2**20:.1f} MB, "
          f"built in {report['seconds']:.1f} s")


def test_notebook_pages_show_the_stored_outputs_their_plots_and_the_pong_gif(built_site):
    """What a page states is what the committed run printed: every line of every stored text
    output is on the page, and every stored plot is an image of it."""
    site, _ = built_site
    for name in course_notebooks():
        nb = nbformat.read(str(ROOT / "solutions" / f"{name}.ipynb"), as_version=4)
        page = (site / "solutions" / f"{name}.html").read_text(encoding="utf-8")
        shown = text_of(site / "solutions" / f"{name}.html")
        for cell in nb.cells:           # what a reader page shows of them (test_reader_pages_... below)
            reader_cell(cell)
        lines = [line.strip() for c in nb.cells if c.cell_type == "code" for o in c.outputs
                 if o.output_type == "stream" for line in o.text.splitlines() if line.strip()]
        assert lines, name
        missing = [line for line in lines if line not in shown]
        assert not missing, f"{name}: {missing[:3]}"
        plots = sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)
        images = re.findall(r'<img[^>]+src="(\.\./_images/[0-9a-f]{64}\.png)"', page)
        assert len(images) == plots > 0, (name, len(images), plots)
    pong = (site / "solutions" / "04_pong.html").read_text(encoding="utf-8")
    assert '<img alt="The shipped agent' in pong and "../_images/pong.gif" in pong
    assert (site / "_images" / "pong.gif").read_bytes() == (ROOT / "docs" / "pong.gif").read_bytes()
    assert "beats random" in text_of(site / "solutions" / "04_pong.html")
    # notebook 06's video of its agent is the executed solution's own output, shown on its page
    cheetah = (site / "solutions" / "06_locomotion.html").read_text(encoding="utf-8")
    gifs = re.findall(r'<img[^>]+src="\.\./(_images/[0-9a-f]{64}\.gif)"', cheetah)
    assert len(gifs) == 1 and (site / gifs[0]).read_bytes()[:6] == b"GIF89a", gifs
    # a progress widget's stored text is its first frame ("0/200"), not what the run did: left out
    widgets = [o["data"]["text/plain"] for c in nbformat.read(str(ROOT / "solutions" / "04_pong.ipynb"), 4).cells
               if c.cell_type == "code" for o in c.outputs if "application/vnd.jupyter.widget-view+json" in
               o.get("data", {})]
    assert all(w not in text_of(site / "solutions" / "04_pong.html") for w in widgets)


def test_downloads_are_the_committed_blank_and_executed_notebooks(built_site):
    site, _ = built_site
    for name in course_notebooks():
        page = site / "solutions" / f"{name}.html"
        links = re.findall(r'href="(\.\./_downloads/[0-9a-f]+/%s\.ipynb)"' % name, page.read_text())
        got = sorted((page.parent / link).resolve().read_bytes() for link in set(links))
        want = sorted((ROOT / folder / f"{name}.ipynb").read_bytes() for folder in ("notebooks", "solutions"))
        assert got == want, name


def test_the_navigation_is_in_course_order_then_the_audience_pages(built_site):
    site, _ = built_site
    index = (site / "index.html").read_text(encoding="utf-8")
    tree = index[index.index('class="sidebar-tree"'):]
    hrefs = re.findall(r'<a class="reference internal" href="([^"#]+)"', tree)
    notebooks = [f"solutions/{n}.html" for n in course_notebooks()]
    audiences = [p.replace(".md", ".html") for p in AUDIENCES]
    assert hrefs[:len(notebooks) + len(audiences)] == notebooks + audiences, hrefs
    every_doc = {p.relative_to(ROOT).with_suffix(".html").as_posix() for p in (ROOT / "docs").glob("*.md")}
    assert every_doc <= set(hrefs), every_doc - set(hrefs)


def test_every_local_reference_resolves_and_nothing_loads_from_the_network(built_site):
    site, _ = built_site
    assert site_problems(site) == []
    pages = list(site.rglob("*.html"))
    assert len(pages) >= 19
    # the math is drawn from the site's own copy of MathJax
    page = (site / "solutions" / "00_es_from_scratch.html").read_text()
    assert 'src="../_static/mathjax/tex-svg-full.js' in page and page.count('class="math') >= 3


def test_the_check_finds_broken_links_missing_images_anchors_and_network_loads(built_site, tmp_path):
    site = tmp_path / "site"
    shutil.copytree(built_site[0], site)
    gif = site / "_images" / "pong.gif"
    gif.unlink()
    page = site / "docs" / "students.html"
    text = page.read_text()
    text = text.replace("</head>", '<script src="https://cdn.example.org/lib.js"></script>'
                                   '<link rel="stylesheet" href="//fonts.example.org/font.css"></head>')
    text = text.replace("</body>", '<a href="nowhere.html">x</a><a href="design.html#no-such-heading">y</a>'
                                   '<img src="../_images/missing.png"></body>')
    page.write_text(text)
    with open(site / "_static" / "site.css", "a") as f:
        f.write("\n@font-face { src: url(https://fonts.example.org/a.woff2); }\n")
    problems = "\n".join(site_problems(site))
    for words in ("docs/students.html: <script> loads https://cdn.example.org/lib.js from the network",
                  "docs/students.html: <link> loads //fonts.example.org/font.css from the network",
                  "docs/students.html: <a> nowhere.html does not exist",
                  "docs/students.html: <a> design.html#no-such-heading: no #no-such-heading in docs/design.html",
                  "docs/students.html: <img> ../_images/missing.png does not exist",
                  "solutions/04_pong.html: <img> ../_images/pong.gif does not exist",
                  "_static/site.css: <css> loads https://fonts.example.org/a.woff2 from the network"):
        assert words in problems, (words, problems)


def main_text(page: Path) -> str:
    text = page.read_text(encoding="utf-8")
    return html.unescape(re.sub(r"<[^>]+>", "", text[text.index('role="main"'):]))


def test_the_landing_page_shows_what_you_build_where_to_start_and_the_time_per_notebook(built_site):
    site, _ = built_site
    index = (site / "index.html").read_text(encoding="utf-8")
    figures = index[index.index('<div class="landing-figures'):]
    figures = figures[:figures.index("</div>")]
    images = re.findall(r'<img[^>]+src="(_images/[^"]+)"', figures)
    assert images == ["_images/pong.gif", "_images/cartpole-curve.png"], images
    assert (site / images[0]).read_bytes() == (ROOT / "docs" / "pong.gif").read_bytes()
    assert (site / images[1]).read_bytes() == (ROOT / "docs" / "cartpole-curve.png").read_bytes()
    assert index.count('src="_images/cartpole-curve.png"') == 1          # not again further down
    text = main_text(site / "index.html")
    assert text.index("What you build") < text.index("Where to start") < text.index("What this is")
    assert "Start with notebook 00" in text and 'href="solutions/00_es_from_scratch.html"' in index
    assert INSTALL in text
    for name in course_notebooks():
        nb = nbformat.read(str(ROOT / "solutions" / f"{name}.ipynb"), as_version=4)
        row = re.search(r'<tr[^>]*>\s*<td><p><a class="reference internal" href="solutions/%s.html">(.*?)</tr>' % name,
                        index, re.S)
        assert row, name
        cells = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td>(.*?)</td>", row[0], re.S)]
        seconds = (nb.metadata.get("es_course_run") or {}).get("seconds")
        assert seconds is not None and re.search(r"\d+ (s|min)\b", cells[2]), (name, cells)
        shown = f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"
        assert shown in cells[2], (name, cells, seconds)
    print(re.search(r"notebook\s+what you write.*?Reading the text", text, re.S)[0])


def test_every_notebook_page_offers_the_student_kit_and_the_command_that_installs_it(built_site):
    import zipfile
    site, _ = built_site
    kits = set()
    for name in course_notebooks():
        page = site / "solutions" / f"{name}.html"
        links = re.findall(r'href="(\.\./_downloads/[0-9a-f]+/%s\.zip)"' % KIT, page.read_text())
        assert links, name
        kits |= {(page.parent / link).resolve() for link in links}
        assert INSTALL in main_text(page), name
    assert len(kits) == 1
    with zipfile.ZipFile(kits.pop()) as z:
        names = z.namelist()
        assert all(n.startswith(f"{KIT}/") for n in names)
        for name in course_notebooks():        # the blank notebooks, as the build writes them
            assert z.read(f"{KIT}/{name}.ipynb") == (ROOT / "notebooks" / f"{name}.ipynb").read_bytes(), name
        for need in ("requirements.txt", "README.md", "classroom/expected.json", "classroom/check.py",
                     "pong/student.py", "docs/students.md"):
            assert f"{KIT}/{need}" in names, need
        assert not [n for n in names if "/solutions/" in n or n.endswith(("references.py", "/source"))], names
        assert "### BEGIN SOLUTION" not in z.read(f"{KIT}/04_pong.ipynb").decode()


def test_output_lines_and_formulas_wrap_to_the_column_04s_result_lines_included(built_site):
    site, _ = built_site
    css = (site / "_static" / "site.css").read_text()
    assert re.search(r"div\.cell_output pre, div\.output pre \{ white-space: pre-wrap; overflow-wrap: anywhere; \}", css)
    assert 'mjx-container[display="true"] > svg { max-width: 100%; height: auto; }' in css
    page = (site / "solutions" / "04_pong.html").read_text(encoding="utf-8")
    assert "_static/site.css" in page
    # every stored output sits in a <pre> inside an output block, which the rule wraps
    outputs = re.findall(r'<div class="output [^"]*"><div class="highlight"><pre>(.*?)</pre>', page, re.S)
    assert outputs
    long_lines = [line for out in outputs for line in html.unescape(re.sub(r"<[^>]+>", "", out)).splitlines()
                  if len(line) > 100]
    assert any(line.startswith("30 updates: ") and "beats random" in line for line in long_lines), long_lines
    pres = len(re.findall(r"<pre>", page))
    code_pres = len(re.findall(r'<div class="highlight-(?:ipython3|python|bash|default|none)[^"]*"><div class="highlight">'
                               r"<pre>", page))
    assert pres == len(outputs) + code_pres, (pres, len(outputs), code_pres)


def test_reader_pages_hold_no_points_markers_solution_markers_ale_banners_or_probation_lines(built_site):
    site, _ = built_site
    committed = "".join((ROOT / "solutions" / f"{n}.ipynb").read_text() for n in course_notebooks())
    for there in ("### BEGIN SOLUTION", "[+10 points]", "A.L.E: Arcade Learning Environment", "passed probation",
                  "points when graded)"):
        assert there in committed, there          # the notebooks hold them: the pages leave them out
    assert "[10 pts]" in (ROOT / "README.md").read_text()
    for page in sorted(site.rglob("*.html")):
        text = text_of(page)
        if page.parent.name == "solutions":       # (docs/instructors.md explains the markers to authors)
            assert not re.search(r"BEGIN SOLUTION|END SOLUTION|points? when graded", text), page.name
        for pattern in (r"\[\+?\d+ (?:points?|pts)", r"\[\+\+\]", r"A\.L\.E:",
                        r"Powered by Stella", r"redis: evaluated chunk \S+ of worker \w+ in full \(probation\)",
                        r"redis: worker \w+ passed probation"):
            assert not re.search(pattern, text), (page.relative_to(site).as_posix(), pattern)
    # the code itself is all there, only the markers left out
    assert "COLUMNS = np.array(" in text_of(site / "solutions" / "04_pong.html")


def test_search_results_carry_a_snippet_of_each_page_from_file_urls_too(built_site, tmp_path):
    import json
    site, _ = built_site
    search = (site / "search.html").read_text()
    order = [search.index(f'src="_static/{js}') for js in ("documentation_options.js", "page_texts.js",
                                                              "search_snippets.js", "searchtools.js")]
    assert order == sorted(order), order
    raw = (site / "_static" / "page_texts.js").read_text()
    texts = json.loads(raw.removeprefix("window.ES_PAGE_TEXTS = ").removesuffix(";\n"))
    docnames = json.loads(re.search(r'"docnames":(\[[^\]]*\])', (site / "searchindex.js").read_text())[1])
    assert set(docnames) <= set(texts), set(docnames) - set(texts)
    assert "antithetic" in texts["solutions/01_cartpole"] and '<section id="' in texts["solutions/01_cartpole"]
    assert "<script" not in raw and "¶" not in texts["docs/paper"]
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node to run the snippet script outside a browser")
    probe = tmp_path / "probe.js"          # the page's own two scripts, as search.html runs them, then its fetch
    probe.write_text(f"""
globalThis.window = globalThis;
globalThis.DOCUMENTATION_OPTIONS = {{SHOW_SEARCH_SUMMARY: false}};
window.location = {{href: {json.dumps((site / "search.html").as_uri() + "?q=antithetic")}}};
globalThis.document = {{documentElement: {{dataset: {{content_root: ""}}}}}};
globalThis.fetch = () => Promise.reject(new Error("file:// fetch refused"));
require({json.dumps(str(site / "_static" / "page_texts.js"))});
require({json.dumps(str(site / "_static" / "search_snippets.js"))});
fetch({json.dumps((site / "solutions" / "01_cartpole.html").as_uri())}).then(r => r.text()).then(t => {{
  console.log(JSON.stringify({{summary: DOCUMENTATION_OPTIONS.SHOW_SEARCH_SUMMARY, body: t.slice(0, 60000)}}));
}});
""")
    out = subprocess.run([node, str(probe)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["summary"] is True and got["body"].startswith('<div role="main">') and "antithetic" in got["body"]


def small_course(root: Path, readme: str) -> Path:
    """A course of one notebook and one docs page, to build quickly."""
    (root / "solutions").mkdir(parents=True)
    (root / "docs").mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 00 · A notebook\n\n$$x^2$$"),
                                         nbformat.v4.new_code_cell("print(1)", outputs=[
                                             nbformat.v4.new_output("stream", name="stdout", text="1\n")])],
                                  metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"},
                                            "language_info": {"name": "python"}})
    nbformat.write(nb, str(root / "solutions" / "00_small.ipynb"))
    (root / "docs" / "students.md").write_text("# Students\n\nRead [the home page](../README.md).\n")
    (root / "docs" / "pong.md").write_text("# Pong\n\n![The agent](pong.gif)\n")
    (root / "docs" / "pong.gif").write_bytes((ROOT / "docs" / "pong.gif").read_bytes())
    (root / "README.md").write_text(readme)
    return root


def test_a_broken_link_or_missing_image_fails_the_build_naming_it(tmp_path):
    from classroom.site import build_site
    from es.errors import ESError
    readme = "# A course\n\n[students](docs/students.md), [gone](docs/gone.md), ![curve](docs/curve.png)\n"
    root = small_course(tmp_path / "course", readme)
    with no_network(), pytest.raises(ESError) as err:
        build_site(tmp_path / "out", root=root)
    message = str(err.value)
    assert "docs/gone.md" in message and "curve.png" in message, message
    assert not (tmp_path / "out").exists()
    (root / "README.md").write_text("# A course\n\n[students](docs/students.md)\n")
    with no_network():
        report = build_site(tmp_path / "out", root=root)
    assert "solutions/00_small.html" in report["pages"] and site_problems(tmp_path / "out") == []
    assert 'href="../index.html"' in (tmp_path / "out" / "docs" / "students.html").read_text()   # the README is home


def test_the_command_never_replaces_a_folder_it_did_not_build(tmp_path):
    keep = tmp_path / "notes"
    keep.mkdir()
    (keep / "mine.txt").write_text("mine")
    out = subprocess.run([sys.executable, "-m", "classroom", "site", str(keep)], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 2 and "is not a site this command built" in out.stderr, out.stderr
    assert (keep / "mine.txt").read_text() == "mine" and len(list(keep.iterdir())) == 1


def _unshare_net() -> list[str] | None:
    """A command prefix that runs a program in a network namespace of its own (no interface but
    a loopback that is down): as root, or as a user where user namespaces are allowed."""
    if shutil.which("unshare") is None:
        return None
    for prefix in (["unshare", "--net"], ["unshare", "--user", "--map-root-user", "--net"]):
        if subprocess.run(prefix + ["true"], capture_output=True).returncode == 0:
            return prefix
    return None


def test_the_command_builds_with_no_network_at_all(tmp_path):
    """The CLI end to end in a network namespace with no route anywhere."""
    prefix = _unshare_net()
    if prefix is None:
        pytest.skip("unshare --net is not permitted here (needs root or user namespaces)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run(prefix + [sys.executable, "-m", "classroom", "site", str(tmp_path / "site")],
                         capture_output=True, text=True, cwd=ROOT, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "built the course website" in out.stdout and (tmp_path / "site" / "index.html").is_file()
    print(out.stdout.splitlines()[0])
