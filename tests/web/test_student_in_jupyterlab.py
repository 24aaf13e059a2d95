"""The student's path as a student meets it: JupyterLab in a browser, on a release folder
(``python -m classroom release DIR``). Open 00, type a correct answer into the first gap, run it
and its check cell and read the ``OK`` line; type a planted mistake, run them again and read the
message that names it. Nothing reaches past localhost."""
from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from webtools import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NOTEBOOK = "00_es_from_scratch"
# the planted mistake (tests/classroom's catalogue has it too): the ranks are not centered
RIGHT, WRONG, NAMED = "return ranks / (len(x) - 1) - 0.5", "return ranks / (len(x) - 1)", "forgot to center"
# JupyterLab's settings for the test: every cell in the page (no lazy windowing), no news.
SETTINGS = {"@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
            "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                                "checkForUpdates": False}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """JupyterLab serving a fresh release folder: (base URL, token, the folder)."""
    pytest.importorskip("jupyterlab", reason="JupyterLab is not installed (pip install -r requirements.txt)")
    home = tmp_path_factory.mktemp("lab")
    folder = home / "release"
    made = subprocess.run([sys.executable, "-m", "classroom", "release", str(folder)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert made.returncode == 0, made.stderr[-3000:]
    settings = home / "settings"
    for rel, values in SETTINGS.items():
        (settings / rel).parent.mkdir(parents=True, exist_ok=True)
        (settings / rel).write_text(json.dumps(values))
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(home / "config"), "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
           "IPYTHONDIR": str(home / "ipython"), "JUPYTER_PLATFORM_DIRS": "1",
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    server_log = open(home / "jupyterlab.log", "w")
    lab = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
                            f"--ServerApp.token={token}", f"--ServerApp.root_dir={folder}", "--allow-root",
                            f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={home / 'workspaces'}"],
                           env=env, cwd=folder, stdout=server_log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if lab.poll() is not None or time.monotonic() > deadline:
                lab.kill()
                pytest.fail("JupyterLab did not start:\n" + (home / "jupyterlab.log").read_text()[-3000:])
            time.sleep(0.25)
    yield base, token, folder
    try:      # the server's own shutdown stops the kernels it started
        urllib.request.urlopen(urllib.request.Request(f"{base}/api/shutdown?token={token}", method="POST"), timeout=10)
        lab.wait(20)
    except (OSError, subprocess.TimeoutExpired):
        os.killpg(lab.pid, signal.SIGKILL)
        lab.wait(10)
    server_log.close()


def gap_and_check(notebook: Path) -> tuple[int, int, str]:
    """The first gap's cell index, its check cell's index, and the check's name."""
    cells = nbformat.read(str(notebook), as_version=4).cells
    gap = next(i for i, c in enumerate(cells) if c.metadata.get("nbgrader", {}).get("solution"))
    check = next(i for i in range(gap + 1, len(cells)) if cells[i].metadata.get("nbgrader", {}).get("grade"))
    return gap, check, cells[check].metadata["nbgrader"]["grade_id"]


def answer(gap_id: str) -> str:
    """The reference answer to a gap, as a student would type it (no solution markers)."""
    cells = nbformat.read(str(ROOT / "solutions" / f"{NOTEBOOK}.ipynb"), as_version=4).cells
    source = next(c.source for c in cells if c.metadata.get("nbgrader", {}).get("grade_id") == gap_id)
    return "\n".join(line for line in source.splitlines() if line.strip() not in ("### BEGIN SOLUTION",
                                                                                 "### END SOLUTION"))


def type_into(page, cell, text: str) -> None:
    """Replace a cell's text by typing into its editor, as a student does."""
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(text)
    typed = "\n".join(cell.locator(".cm-line").all_inner_texts())
    assert typed.strip() == text.strip(), typed


def run(page, cell) -> None:
    """Run one code cell with Shift+Enter and wait until its prompt shows an execution count."""
    import re
    from playwright.sync_api import expect
    before = cell.locator(".jp-InputPrompt").inner_text()
    cell.locator(".cm-content").click()
    page.keyboard.press("Shift+Enter")
    expect(cell.locator(".jp-InputPrompt")).not_to_have_text(before, timeout=30000)
    expect(cell.locator(".jp-InputPrompt")).to_have_text(re.compile(r"\[\d+\]"), timeout=120000)


def output_of(cell):
    return cell.locator(".jp-OutputArea-output")


def test_a_student_types_an_answer_reads_ok_then_a_mistake_and_reads_its_name(jupyterlab, browser_pages):
    from playwright.sync_api import expect
    base, token, folder = jupyterlab
    gap, check, name = gap_and_check(folder / f"{NOTEBOOK}.ipynb")
    blank = nbformat.read(str(folder / f"{NOTEBOOK}.ipynb"), as_version=4)
    right = answer(blank.cells[gap].metadata["nbgrader"]["grade_id"])
    assert RIGHT in right, "the planted mistake no longer matches the solution: update RIGHT/WRONG"
    t0 = time.monotonic()
    page = browser_pages.open(f"{base}/lab/tree/{NOTEBOOK}.ipynb?token={token}")
    cells = page.locator(".jp-NotebookPanel:visible .jp-Notebook .jp-Cell")
    expect(cells).to_have_count(len(blank.cells), timeout=60000)
    # the kernel is connected and idle (the status bar names it then)
    expect(page.locator(".jp-StatusBar-Widget, #jp-main-statusbar")).to_contain_text("Python 3 (ipykernel) | Idle",
                                                                                    timeout=60000)
    opened = time.monotonic() - t0
    # the blank gap as released: the banner and NotImplementedError
    assert "YOUR CODE HERE" in "\n".join(cells.nth(gap).locator(".cm-line").all_inner_texts())

    type_into(page, cells.nth(gap), right)
    for i, cell in enumerate(blank.cells[:check + 1]):      # the imports, the answer, its check
        if cell.cell_type == "code":
            run(page, cells.nth(i))
    expect(output_of(cells.nth(check))).to_contain_text(f"OK {name}", timeout=120000)
    ok_line = output_of(cells.nth(check)).first.inner_text().strip()
    assert ok_line.startswith(f"OK {name}: passed"), ok_line

    type_into(page, cells.nth(gap), right.replace(RIGHT, WRONG))
    run(page, cells.nth(gap))
    run(page, cells.nth(check))
    expect(output_of(cells.nth(check))).to_contain_text(NAMED, timeout=120000)
    message = output_of(cells.nth(check)).last.inner_text()
    assert f"OK {name}" not in message and name in message, message
    browser_pages.check()
    print(f"JupyterLab: notebook open with its kernel in {opened:.1f} s; whole path {time.monotonic() - t0:.1f} s; "
          f"the OK line: {ok_line!r}")
