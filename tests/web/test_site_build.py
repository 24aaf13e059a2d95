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

from classroom.site import AUDIENCES, course_notebooks, site_problems
from webtools import ROOT, no_network

pytestmark = pytest.mark.slow        # the session's site build takes ~5-15 s


def text_of(page: Path) -> str:
    """A page's text as a reader sees it: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


def title(notebook: Path) -> str:
    nb = nbformat.read(str(notebook), as_version=4)
    return re.search(r"^# (.+)$", nb.cells[0].source, re.M)[1].strip()


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
