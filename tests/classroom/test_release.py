"""``python -m classroom release DIR``: what students get holds no answer, imports only itself,
cites only what it holds, checks with the answers it recorded, and never overwrites a
student's edited notebook."""
from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys

import nbformat
import pytest

from classroom.release import FIGURES, READING, SUPPORT, check_release, cited, release, solution_lines


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    target = tmp_path_factory.mktemp("release")
    log = []
    assert release(target, log=log.append) == 0, log
    return target


def test_a_release_has_the_notebooks_support_and_cited_pages_and_nothing_of_the_answer_key(released):
    assert sorted(p.name for p in released.glob("*.ipynb")) == [
        "00_es_from_scratch.ipynb", "01_cartpole.ipynb", "02_parallel.ipynb", "03_redis.ipynb", "04_pong.ipynb",
        "05_extras.ipynb", "06_locomotion.ipynb"]
    for rel in SUPPORT + READING + FIGURES + ["classroom/expected.json", "requirements.txt", "README.md"]:
        assert (released / rel).is_file(), rel
    for absent in ("solutions", "source", "benchmarks", "classroom/references.py", "classroom/grade.py", "es/shaping.py",
                   "pong/env.py", "pong/replay.py", "es/distributed/protocol.py", "docs/pong.md", "docs/design.md"):
        assert not (released / absent).exists(), absent
    assert check_release(released) == []


def copy_of(released, tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(released, dst)
    return dst


def test_check_release_finds_a_solution_line_a_graded_function_a_stray_import_and_a_missing_page(released, tmp_path):
    rel = copy_of(released, tmp_path)
    secret = sorted(solution_lines([p.read_text() for p in rel.glob("*.ipynb")]))
    assert len(secret) > 50, "the student notebooks lack few solution lines: little would be hidden"
    with open(rel / "pong" / "student.py", "a") as f:
        f.write(f"\n{next(line for line in secret if parses(line))}\n")
    (rel / "es" / "helpers.py").write_text("import es.shaping\n\n\ndef centered_ranks(x):\n    return x\n")
    (rel / "docs" / "students.md").unlink()
    problems = "\n".join(check_release(rel))
    assert "pong/student.py holds 1 line(s) of the solutions" in problems
    assert "es/helpers.py defines centered_ranks, a graded function" in problems
    assert "es/helpers.py imports es.shaping, which is not in the release" in problems
    assert re.search(r"04_pong.ipynb cell \d+ cites docs/students.md, which is not in the release", problems)
    assert "README.md cites docs/students.md, which is not in the release" in problems


def test_a_release_cites_only_what_it_holds(released):
    """Every notebook cell and every Markdown document of the release is read; every path, link
    (with its anchor), module name, notebook import and ``python -m`` command in them resolves
    inside the release. The counts show the reader found what there is to resolve."""
    found, missing = cited(released)
    assert missing == [], "\n".join(f"{w}: {k} {r}{why}" for w, k, r, why in missing)
    kinds = {}
    for _, kind, _ in found:
        kinds[kind] = kinds.get(kind, 0) + 1
    assert kinds.get("path", 0) >= 30 and kinds.get("import", 0) >= 30 and kinds.get("module", 0) >= 5 \
        and kinds.get("link", 0) >= 5, kinds
    read = {where.split(" cell ")[0] for where, _, _ in found}
    assert read >= {p.name for p in released.glob("*.ipynb")} | {"README.md", "docs/students.md"}, read
    for ref in [("README.md", "link", "docs/students.md"), ("docs/students.md", "link", "#milestone-4-your-own-pong-agent"),
                ("docs/students.md", "path", "classroom/expected.json"), ("docs/students.md", "path", "pong-run/checkpoint.npz")]:
        assert ref in found, ref


PLANTED_TEXT = """A student reads:
the benchmark `benchmarks/pong_student.py`, the [design](docs/design.md), a
[heading that is not there](docs/students.md#no-such-heading), [outside](../secrets.md),
`python -m es train cartpole`, `python -m jupyter lab`, `python -m no_such_package_here`,
the evaluator `es.parallel`, the class `pong.student.NoSuchThing`, and `pong-run/stolen.npz`;
another project's file linked to its lines, [`starter/es.py`, line 3](https://github.com/o/r/blob/c/starter/es.py#L3),
is no pointer into the release, but that project's `starter/other.py` unlinked is one.
"""


def test_cited_names_every_kind_of_pointer_that_does_not_resolve(released, tmp_path):
    rel = copy_of(released, tmp_path)
    path = rel / "02_parallel.ipynb"
    nb = nbformat.read(str(path), 4)
    nb.cells.append(nbformat.v4.new_markdown_cell(PLANTED_TEXT))
    nb.cells.append(nbformat.v4.new_code_cell("from es.shaping import centered_ranks\nfrom pong.student import nothing"))
    nbformat.write(nb, str(path))
    with open(rel / "docs" / "students.md", "a") as f:
        f.write("\nSee [the instructors' page](instructors.md) and `docs/install.md`.\n")
    with open(rel / "pong" / "games.py", "a") as f:     # support code: its docstrings and comments
        f.write('\n\ndef _planted():\n    """Tested in ``tests/pong/test_replay.py``."""\n'
                '    # see es.noise\n    return 1   # in the course repository: es.strategy (exempt)\n')
    found, missing = cited(rel)
    got = {(where.split(" cell ")[0], kind, ref) for where, kind, ref, _ in missing}
    want = {("02_parallel.ipynb", "path", "benchmarks/pong_student.py"),
            ("02_parallel.ipynb", "link", "docs/design.md"),
            ("02_parallel.ipynb", "link", "docs/students.md#no-such-heading"),
            ("02_parallel.ipynb", "link", "../secrets.md"),
            ("02_parallel.ipynb", "command", "python -m es train"),
            ("02_parallel.ipynb", "command", "python -m no_such_package_here"),
            ("02_parallel.ipynb", "module", "es.parallel"),
            ("02_parallel.ipynb", "module", "pong.student.NoSuchThing"),
            ("02_parallel.ipynb", "path", "pong-run/stolen.npz"),
            ("02_parallel.ipynb", "path", "starter/other.py"),
            ("02_parallel.ipynb", "import", "es.shaping"),
            ("02_parallel.ipynb", "import", "es.shaping.centered_ranks"),
            ("02_parallel.ipynb", "import", "pong.student.nothing"),
            ("docs/students.md", "link", "instructors.md"),
            ("docs/students.md", "path", "docs/install.md"),
            ("pong/games.py", "path", "tests/pong/test_replay.py"),
            ("pong/games.py", "module", "es.noise")}
    assert got == want, (got - want, want - got)
    assert any(kind == "command" and ref == "python -m jupyter lab" for _, kind, ref in found)
    assert len(check_release(rel)) >= len(want)


def parses(line: str) -> bool:
    try:
        ast.parse(line)
    except SyntaxError:
        return False
    return True


@pytest.mark.slow
def test_an_edited_notebook_is_kept_unless_forced(released, tmp_path):
    rel = copy_of(released, tmp_path)
    path = rel / "00_es_from_scratch.ipynb"
    nb = nbformat.read(str(path), 4)
    nb.cells.append(nbformat.v4.new_code_cell("my_work = 1"))
    nbformat.write(nb, str(path))
    log = []
    release(rel, log=log.append)
    assert "my_work = 1" in path.read_text()
    assert "1 edited notebooks left alone" in log[-1]
    release(rel, force=True, log=log.append)
    assert "my_work = 1" not in path.read_text()


ES_STEP = '''
import numpy as np
def es_step(center, noise, fitness, state, sigma, lr, weight_decay):
    n = len(fitness)
    order = np.argsort(fitness, kind="stable")
    ranks = np.empty(n)
    ranks[order] = np.arange(n)
    for value in np.unique(fitness):
        tied = fitness == value
        ranks[tied] = ranks[tied].mean()
    weights = ranks / (n - 1) - 0.5
    grad = noise.T @ weights / (n * sigma) - DECAY * weight_decay * center
    state = state or {"m": np.zeros(len(center)), "v": np.zeros(len(center)), "t": 0}
    t = state["t"] + 1
    m = 0.9 * state["m"] + 0.1 * grad
    v = 0.999 * state["v"] + 0.001 * grad * grad
    step = lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m / (np.sqrt(v) + 1e-8)
    return center + step, {"m": m, "v": v, "t": t}
'''


def run_in_release(released, script: str) -> subprocess.CompletedProcess:
    """``script`` run in the release's own folder, with only the release on the path (no answer key)."""
    return subprocess.run([sys.executable, "-c", script], cwd=released, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(released), "PATH": "/usr/bin:/bin"})


def test_a_release_checks_with_its_recorded_answers_alone(released):
    """In the release's own folder (no answer key importable), a right es_step passes on every
    recorded seed and a mistaken one is named, as with the answer key."""
    script = (f"from classroom import check\n"
              f"assert check.__file__.startswith({str(released)!r}), check.__file__\n"
              "assert type(check.ANSWERS).__name__ == 'Recorded'\n"
              "DECAY = 1.0\n" + ES_STEP +
              "for seed in (11, 22, 33):\n"
              "    check.es_step(es_step, seed=seed)\n"
              "DECAY = 0.0\n"
              "try:\n"
              "    check.es_step(es_step, seed=22)\n"
              "except check.CheckFailed as exc:\n"
              "    print('FAILED', exc)\n")
    out = run_in_release(released, script)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("OK es_step") == 3
    assert "FAILED es_step: no weight decay" in out.stdout


def test_a_failed_check_offers_to_repeat_its_seed_only_where_the_release_can(released):
    """Issue 39: feedback told a student "check.centered_ranks(..., seed=4010941488) repeats
    them", which a release (answers for seeds 11, 22, 33 only) answers with RuntimeError. The
    grader offers the repeat for a recorded seed only, and each message is true in the release."""
    from classroom import check
    messages = {}
    for seed in (22, 4010941488):
        try:
            check.verdict("es_step", [lambda *a, **k: (a[0], a[-1])], seed, repeatable=seed in check.RELEASE_SEEDS)
        except check.CheckFailed as exc:
            messages[seed] = str(exc)
    assert "check.es_step(..., seed=22) repeats them" in messages[22]
    assert "repeats them" not in messages[4010941488] and "your instructor can" in messages[4010941488]
    script = ("from classroom import check\n"
              "for seed, offered in ((22, True), (4010941488, False)):\n"
              "    try:\n"
              "        check.es_step(lambda *a: (a[0], a[-1]), seed=seed)\n"
              "    except check.CheckFailed as exc:\n"
              "        print(seed, 'REPEATS' if 'repeats them' in str(exc) else 'NOT OFFERED')\n"
              "    except RuntimeError as exc:\n"
              "        print(seed, 'CANNOT', exc)\n")
    out = run_in_release(released, script)
    assert out.returncode == 0, out.stderr
    assert "22 REPEATS" in out.stdout and "4010941488 CANNOT" in out.stdout, out.stdout


def test_a_check_that_asks_the_answer_key_nothing_is_offered_again_on_any_seed(released):
    """A fresh read found `check.antithetic_noise` failing on seed 1172161378 with "a student
    release cannot draw them again", though it repeats on any seed (its right answers follow
    from its inputs; the release records nothing for it). Offered here, in the grader's own
    call, and in the release, where the offer is then taken."""
    from classroom import check
    blocks = "lambda rng, p, d: (lambda h: __import__('numpy').concatenate([h, -h]))(rng.standard_normal((p // 2, d)))"
    try:
        check.verdict("antithetic_noise", [eval(blocks)], 1172161378, repeatable=False)    # the grader's call
    except check.CheckFailed as exc:
        assert "check.antithetic_noise(..., seed=1172161378) repeats them" in str(exc), exc
    script = ("from classroom import check\n"
              f"bad = {blocks}\n"
              "for _ in range(2):\n"
              "    try:\n"
              "        check.antithetic_noise(bad, seed=1172161378)\n"
              "    except check.CheckFailed as exc:\n"
              "        print('REPEATS' if 'seed=1172161378) repeats them' in str(exc) else 'NOT OFFERED', str(exc)[:60])\n")
    out = run_in_release(released, script)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("REPEATS") == 2, out.stdout


def test_the_releases_pong_agent_check_passes_a_run_that_beat_random_and_names_what_another_lacks(released, tmp_path):
    """A fresh read: in a release (no pong/replay.py), a folder of a hand-written config.json and
    three empty files printed "it has not beaten random yet" and then "OK pong_agent: passed". Now
    the check fails unless training recorded an agent beating random for the run's checkpoint;
    the solution's own run passes, its line on the agent printed first."""
    from classroom.release import RUN_DIR
    from pong.student import student_seed
    from pathlib import Path
    runs = tmp_path / "runs"
    solution_run = Path(__file__).resolve().parents[2] / "solutions" / RUN_DIR
    shutil.copytree(solution_run, runs / "real")
    shutil.copytree(solution_run, runs / "unverdicted")
    (runs / "unverdicted" / "beats_random.json").unlink()
    (runs / "forged").mkdir()
    (runs / "forged" / "config.json").write_text('{"seed": %d}' % student_seed("alice"))
    for name in ("metrics.jsonl", "centers.npy", "checkpoint.npz"):
        (runs / "forged" / name).touch()
    script = ("import sys\n"        # the editable install would find the course's pong.replay: not in a release
              "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]\n"
              "from classroom import check\n"
              "try:\n"
              "    import pong.replay\n"
              "    print('REPLAY IMPORTABLE')\n"
              "except ImportError:\n"
              "    pass\n"
              "for run, who in (('real', 'reference'), ('unverdicted', 'reference'), ('forged', 'alice')):\n"
              "    try:\n"
              f"        check.pong_agent({str(runs)!r} + '/' + run, who)\n"
              "    except check.CheckFailed as exc:\n"
              "        print('FAILED', run, exc)\n")
    out = run_in_release(released, script)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "REPLAY IMPORTABLE" not in out.stdout, out.stdout
    assert "is complete and trained as 'reference' (30 updates); its agent: agent -17.50" in lines[0], lines
    assert lines[0].endswith("The grader replays the run and plays 20 games on seeds it never saw."), lines
    assert lines[1] == "OK pong_agent: passed (4 points when graded)", lines
    assert lines[2].startswith("FAILED unverdicted pong_agent: ") and "has not beaten random yet" in lines[2], lines
    assert "beats_random.json" in lines[2], lines
    assert lines[3].startswith("FAILED forged pong_agent: ") and "checkpoint.npz is not a checkpoint" in lines[3]
    assert out.stdout.count("OK pong_agent") == 1, out.stdout
