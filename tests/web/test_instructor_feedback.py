"""The instructor's path in a browser: grade a student's Pong notebook with
``python -m classroom grade --feedback-format html``, open the feedback file (from disk, as an
instructor or a student would) and find the Pong numbers the grader measured: the agent's mean
and interval, the random player's, the unseen seeds and the verdict."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from webtools import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_html_feedback_shows_the_pong_numbers_the_grader_measured(tmp_path, browser_pages):
    student = tmp_path / "class" / "reference"
    student.mkdir(parents=True)
    shutil.copyfile(ROOT / "solutions" / "04_pong.ipynb", student / "04_pong.ipynb")
    shutil.copytree(ROOT / "solutions" / "pong-run", student / "pong-run")   # held to full marks by the class test
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "classroom", "grade", str(tmp_path / "class"), "--checks", "pong_agent",
                          "--input-seed", "5", "--feedback", str(tmp_path / "feedback"), "--feedback-format", "html",
                          "--json"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)
    graded = time.monotonic() - t0
    assert out.returncode == 0, out.stderr[-3000:]
    [result] = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    pong = next(c for c in result["checks"] if c["name"] == "pong_agent")["pong"]
    feedback = tmp_path / "feedback" / "reference.html"
    assert feedback.is_file(), sorted(p.name for p in (tmp_path / "feedback").iterdir())

    t1 = time.monotonic()
    page = browser_pages.open(feedback.as_uri())
    assert page.locator("h1").first.inner_text().strip() == "Feedback for reference"
    heading = page.get_by_role("heading", name="Your Pong run")
    heading.wait_for()
    section = heading.evaluate("""h => { let t = '', n = h.nextElementSibling;
        while (n && !/^H[1-3]$/.test(n.tagName)) { t += n.innerText + '\\n'; n = n.nextElementSibling; } return t; }""")
    numbers = {"agent mean": pong["agent_mean"], "agent interval low": pong["agent_ci"][0],
               "agent interval high": pong["agent_ci"][1], "random mean": pong["random_mean"],
               "random interval low": pong["random_ci"][0], "random interval high": pong["random_ci"][1]}
    for what, value in numbers.items():
        assert f"{value:.2f}" in section, (what, value, section)
    assert f"{pong['seeds'][0]}..{pong['seeds'][1]}" in section, section
    assert ("beats random" if pong["beats_random"] else "does not beat random") in section, section
    assert "Total:" in page.locator("body").inner_text()
    browser_pages.check()
    print(f"graded in {graded:.0f} s; feedback read in the browser in {time.monotonic() - t1:.1f} s: "
          f"agent {pong['agent_mean']:+.2f} vs random {pong['random_mean']:+.2f}")
