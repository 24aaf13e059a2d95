"""What the course's pages claim, held to what they cite: notebook 05's comparison of SNES with
OpenAI-ES (one thing differs, both judged alike, the numbers its text states) and the table of
the paper's elements (docs/paper.md)."""
import contextlib
import io
import re
from pathlib import Path

import jupytext
import matplotlib
import numpy as np
import pytest

from classroom.build import BEGIN, END

matplotlib.use("Agg")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def notebook_05():
    """Notebook 05's code cells run in full mode as the solution runs them (checks left out):
    (namespace, printed text, markdown text)."""
    nb = jupytext.reads((ROOT / "source" / "05_extras.py").read_text(), fmt="py:percent")
    namespace, out = {"__name__": "__main__"}, io.StringIO()
    with contextlib.redirect_stdout(out):
        for cell in nb.cells:
            if cell.cell_type == "code" and not cell.source.startswith("check."):
                exec(cell.source.replace(BEGIN, "").replace(END, ""), namespace)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    return namespace, out.getvalue(), markdown


def test_05_openai_es_is_snes_with_its_sigma_frozen_on_the_same_samples(notebook_05):
    ns, _, _ = notebook_05
    assert ns["generations"] == 600 and ns["population"] == 40
    # one loop for both: lr_sigma = 0 keeps sigma at its initial 1, every other input the same
    mu, sigma = np.zeros(3), np.ones(3)
    s, w = np.random.default_rng(1).standard_normal((4, 3)), np.array([0.4, 0.1, -0.25, -0.25])
    frozen = ns["snes_step"](mu, sigma, s, w, 1.0, 0.0)
    assert np.array_equal(frozen[1], sigma) and np.allclose(frozen[0], sigma * (w @ s))
    u = ns["utilities"](40)
    assert abs(u.sum()) < 1e-12 and np.all(np.diff(u) <= 0)
    assert np.allclose(u[20:], -1 / 40)            # the worse half all get -1/n, as the text says
    assert round(ns["snes_sigma"], 2) == 0.34


def test_05_states_the_numbers_it_prints(notebook_05):
    ns, printed, markdown = notebook_05
    markdown = " ".join(markdown.split())
    finals = {name: [float(score[-1]) for score, *_ in runs] for name, runs in ns["results"].items()}
    far = {name: [float(d[-1]) for _, d, _ in runs] for name, runs in ns["results"].items()}
    steps = {name: [float(s[-100:].mean()) for *_, s in runs] for name, runs in ns["results"].items()}
    snes, fixed, adam = finals.values()
    snes_far, fixed_far, _ = far.values()
    assert "`[-0.0, -0.99, -3.98, -1.99, -0.99]`" in markdown and str([round(v, 2) for v in snes]) in printed
    assert [round(v, 2) for v in snes] == [-0.0, -0.99, -3.98, -1.99, -0.99]
    # "at the global maximum on seed 0 and on a local maximum next to it on the other four seeds: ... one,
    # four, two and one coordinates sit at +-1 instead of 0": SNES's centers, coordinate by coordinate
    off, step = [], ns["snes_step"]
    for seed in range(5):        # run() returns the center's score and distance: catch its last center too
        centers = []
        ns["snes_step"] = lambda *a: centers.append(step(*a)) or centers[-1]
        try:
            score, *_ = ns["run"](seed, ns["snes_sigma"])
        finally:
            ns["snes_step"] = step
        mu = centers[-1][0]
        assert round(float(score[-1]), 2) == round(snes[seed], 2)
        assert np.allclose(np.abs(mu), np.round(np.abs(mu)), atol=0.02) and np.abs(mu).max() < 1.5, mu
        off.append(int(np.sum(np.round(np.abs(mu)) == 1)))
    assert off == [0, 1, 4, 2, 1], off
    assert "one, four, two and one coordinates sit at $\\pm 1$ instead of $0$" in markdown
    assert "ends between -76 and -120" in markdown and round(max(fixed)) == -76 and round(min(fixed)) == -120
    start = ns["rastrigin"](ns["start"])[0]
    assert start == pytest.approx(-90) and "the start: Rastrigin -90.0, mean |x_j| 3.0" in printed
    assert "worse than its start on three seeds of five" in markdown and sum(f < start for f in fixed) == 3
    assert "(mean `|x_j|` between 0.2 and 0.61) but sits on no maximum" in markdown
    assert (round(min(fixed_far), 2), round(max(fixed_far), 2)) == (0.2, 0.61)
    # "sits on no maximum": each fixed-sigma center scores far below Rastrigin at its nearest integer point
    for seed in range(5):
        centers = []
        ns["snes_step"] = lambda *a: centers.append(step(*a)) or centers[-1]
        try:
            score, *_ = ns["run"](seed, 0.0)
        finally:
            ns["snes_step"] = step
        mu = centers[-1][0]
        assert score[-1] < ns["rastrigin"](np.round(mu))[0] - 10, (seed, mu)
    # "its steps stay large (about 0.2 ...)", SNES's "(0.0 at the end)", Adam's "ten times smaller (0.02)"
    snes_steps, fixed_steps, adam_steps = steps.values()
    assert "its steps stay large (about 0.2 per coordinate over the last 100 updates)" in markdown
    assert all(round(s, 1) == 0.2 for s in fixed_steps) and all(round(s, 1) == 0.0 for s in snes_steps)
    assert "takes steps ten times smaller (0.02)" in markdown and all(round(s, 2) == 0.02 for s in adam_steps)
    assert 7 < np.mean(fixed_steps) / np.mean(adam_steps) < 13
    assert "(-47 to -118)" in markdown and round(max(adam)) == -47 and round(min(adam)) == -118
    assert max(snes_far) < min(fixed_far) + 0.25


def test_05s_executed_solution_shows_these_numbers():
    import nbformat
    nb = nbformat.read(str(ROOT / "solutions" / "05_extras.ipynb"), as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "Rastrigin [-0.0, -0.99, -3.98, -1.99, -0.99]" in text, text[-600:]


def test_05s_vbn_section_prints_what_it_states(notebook_05):
    """Section 3's measurement, run again as the solution runs it: the raw and normalized shares and the
    members on at least 90%, as the expected output states them."""
    _, printed, markdown = notebook_05
    markdown = " ".join(markdown.split())
    raw = re.search(r"raw head inputs: .* on (\d+)% of them on average; (\d+) members? on at least 90%", printed)
    vbn = re.search(r"normalized head inputs: .* on (\d+)% of them on average; (\d+) members? on at least 90%",
                    printed)
    assert raw and vbn, printed[-600:]
    assert (f"a member picks its most frequent action on {raw[1]}% of the observations on average, and {raw[2]} of "
            f"the 64 members on at least 90% of them; normalized, {vbn[1]}%, and no member") in markdown
    assert int(vbn[2]) == 0 and int(raw[1]) > int(vbn[1]) + 20


# The figure section's numbers (section 4: its windows, shares, correlations, the agent's score) are held
# by the Claims of tests/classroom/course_sources/p_05_extras.py, to the figure's own run
# (docs/runs/pong-windows6-motion-vbn-s16/figure.json, its checkpoint) and pong/agent-pixels.json.


# ---------------------------------------------------------------- docs/paper.md
ELEMENTS = ["the estimator", "antithetic (mirrored) pairs", "centered ranks", "weight decay",
            "seeds-only communication", "the shared noise table", "virtual batch normalization", "the episode cap",
            "frame-skip invariance", "MuJoCo locomotion", "Atari", "scaling"]


def paper_rows() -> dict[str, list[str]]:
    text = (ROOT / "docs" / "paper.md").read_text()
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\| \*\*(.+?)\*\*", line)
        if m:
            rows[m[1]] = [c.strip() for c in line.strip().strip("|").split("|")[1:]]
    return rows


def test_the_paper_table_has_a_row_for_each_element_and_says_where_each_is_taught():
    from classroom.check import CHECKS
    rows = paper_rows()
    assert list(rows) == ELEMENTS
    for name, (paper, where, reproduces) in rows.items():
        assert paper and where and reproduces, name
        # what the paper does names its source: the paper's section, or the starter's file and line
        assert re.search(r"\((?:section|Table|Figure) \d|`es_distributed/\w+\.py` lines? \d", paper), name
        for nb in re.findall(r"notebooks? (0\d)", where):
            assert list((ROOT / "source").glob(f"{nb}_*.py")), (name, nb)
        for check in re.findall(r"`(\w+)`, graded", where):      # a graded function is a check's
            assert any(check in needs or check == c for c, (_, _, _, needs) in CHECKS.items()), (name, check)
    assert rows["virtual batch normalization"][1].startswith("notebook 05, section 3 (`virtual_batch_norm`, graded")
    assert rows["frame-skip invariance"][1].startswith("**not taught, not measured**")


def section_of(notebook: str, number: int) -> str:
    """The text of section ``number`` of a notebook's source (markdown and code), to its next section."""
    text = next((ROOT / "source").glob(f"{notebook}_*.py")).read_text()
    parts = re.split(r"^# ## (\d+)\.", text, flags=re.M)
    return next(body for n, body in zip(parts[1::2], parts[2::2]) if int(n) == number)


def test_every_page_the_paper_table_cites_holds_the_figure_it_cites():
    """Every page, file and notebook section the table points to exists and holds what the table
    says is there; the figures themselves are held by the claims of course_sources/p_paper.py."""
    text = (ROOT / "docs" / "paper.md").read_text()
    for target in re.findall(r"\]\(([^)#]+)", text):
        assert re.match(r"https://", target) or (ROOT / "docs" / target).resolve().is_file(), target
    for path in re.findall(r"`((?:docs|pong|solutions|es)/[\w./-]+)`", text):
        assert (ROOT / path).exists(), path
    assert "check.virtual_batch_norm(" in section_of("05", 3)
    assert "check.noise_table(" in section_of("03", 7)
    assert "mirrored pairs" in section_of("00", 2) and "without" in section_of("00", 2)
    assert re.search(r"z-scores? against (centered )?ranks", section_of("01", 5).splitlines()[0])
    assert "check.seeds_only_update(update_from_returns" in section_of("03", 5) and "CartPole" in section_of("03", 6)


# ---------------------------------------------------------------- notebook 04's settings, and why
# Section 5's reasons (sigma's share of changed actions), its timings and its expected curve are
# Claims now, held to solutions/pong-run and docs/runs/pong-student-release:
# tests/classroom/course_sources/p_04_pong.py (run by test_every_number_a_student_reads_has_a_source).
# (The weight decay's 0.04% pull and the busy runs' 20.8 and 52.7 minutes left the page.)
def test_04s_run_claims_are_held_by_the_page_ledger():
    import course_numbers
    snippets = " ".join(c.snippet for c in course_numbers.claims_of("04_pong"))
    for words in ("first 900 steps of game seed 0, picks another action than the center on 18% of them",
                  "3.6 to 10.8 minutes of training", "`reference`: -19.99", "generation 17 (11 for `linus`",
                  "**At most 200 updates**"):
        assert words in snippets, words


# ---------------------------------------------------------------- benchmarks/pong_student.py --release
def run_benchmark(*args, cwd=ROOT):
    import os
    import subprocess
    import sys
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "pong_student.py"), *args], capture_output=True,
                          text=True, timeout=600, cwd=cwd, env=env)


@pytest.mark.slow
def test_the_kit_benchmark_runs_the_kits_own_loop_and_records_the_load(tmp_path):
    import json
    from classroom.release import release
    kit = tmp_path / "kit"
    assert release(kit, log=lambda *a: None) == 0
    out = run_benchmark("--release", str(kit), "--students", "ada", "--budget", "0", "--keep", str(tmp_path / "runs"))
    assert out.returncode == 0, out.stderr[-2000:]
    row = json.loads(out.stdout.splitlines()[0])
    assert row["release"] == str(kit) and row["student"] == "ada" and row["generations"] == 0
    assert row["loop"] == str(kit / "pong" / "student.py")
    assert row["load_mean"] >= 0 and row["load_max"] >= row["load_mean"] and row["date"].endswith("UTC")


def test_the_kit_benchmark_refuses_a_folder_that_is_not_a_release(tmp_path):
    out = run_benchmark("--release", str(tmp_path), "--students", "ada", "--budget", "0")
    assert out.returncode != 0 and f"not from the release {tmp_path}" in out.stderr, out.stderr[-2000:]


def test_the_benchmark_runs_an_ablation_under_its_own_settings_and_refuses_an_unknown_one(tmp_path, monkeypatch):
    import importlib.util
    import json
    out = run_benchmark("--students", "ada", "--set", "sigma=0.1", "population=32", "--generations", "7",
                        "--budget", "0", "--keep", str(tmp_path))
    assert out.returncode == 0, out.stderr[-2000:]
    row = json.loads(out.stdout.splitlines()[0])
    assert row["settings"] == {"sigma": 0.1, "population": 32} and row["env_steps"] == 0
    saved = json.loads((tmp_path / "ada" / "config.json").read_text())     # the run itself holds them
    assert (saved["sigma"], saved["population"], saved["generations"]) == (0.1, 32, 7)
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))                  # its _common
    spec = importlib.util.spec_from_file_location("pong_student_benchmark", ROOT / "benchmarks" / "pong_student.py")
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    for bad, words in (("sigmaa=0.1", "NAME one of population, sigma"), ("population=1.5", "population takes an integer"),
                       ("seed=3", "NAME one of")):
        with pytest.raises(SystemExit, match=words):
            benchmark.ablation([bad])
    # how a run started, read off its record: the kit's linus run (committed) opened the loop's gate
    # after generation 20 and was checked, and passed, at 25
    linus = [json.loads(line) for line in (ROOT / "docs/runs/pong-student-release/linus-metrics.jsonl").open()]
    assert benchmark.start_signs(linus) == {"gate_generation": 21, "floor_share_g0_9": 0.286}
    assert benchmark.start_signs([]) == {"gate_generation": None, "floor_share_g0_9": None}


# ---------------------------------------------------------------- every number a student reads
import course_numbers as numbers       # noqa: E402  (tests/classroom is on sys.path)


@pytest.mark.parametrize("page", numbers.PAGES)
def test_every_number_a_student_reads_has_a_source(page):
    """Each number on the page is math, a pointer, a course constant, printed by the cell its
    'Expected output' paragraph sits beside, a literal of the notebook's code, or a Claim in
    course_sources/ whose function holds it (run here, but for the slow ones)."""
    assert not numbers.stale_claims(page), "claims whose snippet the page no longer has"
    missing = numbers.unsourced(page)
    assert not missing, f"{len(missing)} numbers without a source on {page}:\n" + "\n".join(missing)
    for claim in numbers.claims_of(page):
        if not claim.slow:
            claim.holds()


@pytest.mark.slow
@pytest.mark.parametrize("page", numbers.PAGES)
def test_the_slow_claims_hold(page):
    for claim in numbers.claims_of(page):
        if claim.slow:
            claim.holds()


def test_a_number_without_a_source_is_found():
    """The rule at work on a made-up page: a claim in prose, an expected output the cell does not
    print and a code span the code lacks are found; a pointer, a constant, a printed number and a
    code literal are not."""
    page = numbers.Page("made-up", [
        "## 2. Section 3 of notebook 04, on 42x42 frames: the run took 7.3 minutes.",
        "**Expected output:** `loss 0.125, then 0.5` after `rng.integers(0, 128)` and `np.zeros(999)`; gain -2.5.",
    ], code="rng.integers(0, 128)", outputs=[(0, ""), (1, "loss 0.1249\ngain 2.5\n")])
    missing = [m.split(" in ")[0] for m in numbers.unsourced("made-up", [], page)]
    assert missing == ["'7.3'", "'0.5'", "'999'", "'-2.5'"], missing      # a printed 2.5 is no source for -2.5
    claim = numbers.Claim("the run took 7.3 minutes", lambda: None)
    assert [m.split(" in ")[0] for m in numbers.unsourced("made-up", [claim], page)] == ["'0.5'", "'999'", "'-2.5'"]
