"""Issue 32: the grader never writes its own failure down as a student's zero.

It grades wherever Python and the checkout live (under /tmp, a home folder, installed under
umask 077), stops before grading anyone when its own machinery cannot grade a known answer
(exit 3, nothing written), marks a submission it could not grade ``ungraded`` with no points
(exit 4), and still grades, with a message, what a student's notebook broke itself."""
import csv
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import attacks as A
from attacks import needs_sandbox
from classroom import sandbox
from classroom.gradebook import EXIT_PREFLIGHT, EXIT_UNGRADED, grade_class, write_gradebook
from classroom.grade import grade
from classroom.records import Student

ROOT = Path(__file__).resolve().parents[2]
MODE = sandbox.mode()[0]
as_root = pytest.mark.skipif(MODE != "namespaces", reason="needs the root sandbox (the grader runs as root)")


def copy_checkout(dst: Path, private: bool = False) -> Path:
    """This checkout's files (as a clone has them) at ``dst``; ``private``: as a clone made under
    umask 077 has them (files 0600, folders 0700)."""
    shutil.copytree(ROOT, dst, ignore=shutil.ignore_patterns(".git", "__pycache__", "runs", ".pytest_cache",
                                                             "*.egg-info", ".ipynb_checkpoints", ".hypothesis"))
    if private:
        for dirpath, dirnames, filenames in os.walk(dst):
            os.chmod(dirpath, 0o700)
            for f in filenames:
                os.chmod(os.path.join(dirpath, f), 0o600)
    return dst


def venv(dst: Path) -> Path:
    """A virtual environment at ``dst`` over the packages of the Python running the tests (its
    prefix is ``dst``). Not ``--system-site-packages``: from inside a venv, that gives the base
    interpreter's packages, not the venv's (issue 39: a newcomer's venv failed 6 tests with
    "No module named 'gymnasium'"). A .pth file adds this Python's site folders, with their
    own .pth files (editable installs), after the new venv's own."""
    import site
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(dst)], check=True)
    [own] = (dst / "lib").glob("python3*/site-packages")
    folders = [p for p in site.getsitepackages() + [site.getusersitepackages()] if os.path.isdir(p)]
    (own / "es_course_tests.pth").write_text(f"import site; list(map(site.addsitedir, {folders!r}))\n")
    return dst / "bin" / "python"


def a_class(folder: Path, checkout: Path, **students) -> Path:
    """``folder/<student>/`` holding the named solution notebooks of ``checkout``."""
    for name, notebooks in students.items():
        (folder / name).mkdir(parents=True)
        for nb in notebooks:
            shutil.copy(checkout / "solutions" / f"{nb}.ipynb", folder / name)
    return folder


def grade_cli(python, checkout: Path, *args, timeout=900) -> subprocess.CompletedProcess:
    """``python -m classroom grade ARGS`` from ``checkout`` (its classroom, its support code)."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    return subprocess.run([str(python), "-m", "classroom", "grade", *map(str, args), "--cell-timeout", "120"],
                          cwd=checkout, env=env, capture_output=True, text=True, timeout=timeout)


def book(path: Path) -> dict:
    return {r["student"]: r for r in csv.DictReader(open(path))}


# ---------------------------------------------------------------- where things live
@needs_sandbox
@pytest.mark.slow
def test_a_venv_and_a_checkout_under_tmp_grade_a_complete_m1_to_10_of_10(tmp_path):
    """The issue's case: ``python -m venv /tmp/...`` and a clone under /tmp; the kernel used to
    die before it answered (the private /tmp covered both) and the class scored 0 with exit 0."""
    assert str(tmp_path).startswith("/tmp/") or os.environ.get("TMPDIR"), tmp_path
    checkout = copy_checkout(tmp_path / "es-course")
    python = venv(tmp_path / "venv")
    cls = a_class(tmp_path / "class", checkout, alice=["00_es_from_scratch", "01_cartpole"])
    out = grade_cli(python, checkout, cls, "--csv", tmp_path / "gb.csv")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    alice = book(tmp_path / "gb.csv")["alice"]
    assert (alice["M1"], alice["status"]) == ("10", "graded"), alice
    assert f"({MODE})" in out.stdout and "preflight passed" in out.stdout


@needs_sandbox
@pytest.mark.slow
@pytest.mark.parametrize("where", ["/dev/shm", "/run"])
def test_a_venv_and_a_checkout_in_the_kernels_other_private_folders_pass_the_preflight(tmp_path, where):
    """/dev/shm and /run hold private mounts of the sandbox too (its /dev/shm; its connection
    file and probe under /run): what lives there must stay in the kernel's view."""
    if not os.access(where, os.W_OK):
        pytest.skip(f"{where} is not writable here")
    import tempfile
    place = Path(tempfile.mkdtemp(prefix="es-grader-test-", dir=where))
    try:
        checkout = copy_checkout(place / "es-course")
        python = venv(place / "venv")
        out = subprocess.run([str(python), "-m", "classroom", "preflight"], cwd=checkout, capture_output=True,
                             text=True, env={**os.environ, "PYTHONPATH": str(checkout)}, timeout=600)
        assert out.returncode == 0, out.stdout + out.stderr
        assert f"({MODE}," in out.stdout
    finally:
        shutil.rmtree(place, ignore_errors=True)


@needs_sandbox
@pytest.mark.slow
def test_a_clone_made_under_umask_077_stops_at_the_preflight_as_root_and_grades_after_the_fix(tmp_path):
    """As root, the kernel's own uid cannot read a checkout whose files are 0600: grading stops
    before anyone is graded (exit 3, no gradebook), naming the file and the command that fixes
    it; after that command, the same class grades right. As an ordinary user (bubblewrap), the
    kernel reads what its user owns: it grades right at once."""
    checkout = copy_checkout(tmp_path / "es-course", private=True)
    cls = a_class(tmp_path / "class", ROOT, alice=["00_es_from_scratch"])
    out = grade_cli(sys.executable, checkout, cls, "--csv", tmp_path / "gb.csv", "--feedback", tmp_path / "fb")
    if MODE == "namespaces":
        assert out.returncode == EXIT_PREFLIGHT, out.stdout[-2000:] + out.stderr[-3000:]
        assert "preflight failed" in out.stderr and f"cannot read {checkout}/" in out.stderr, out.stderr
        assert f"chmod -R a+rX {checkout}" in out.stderr and "Nothing was graded" in out.stderr
        assert not (tmp_path / "gb.csv").exists() and not (tmp_path / "gb-checks.csv").exists()
        assert not (tmp_path / "fb").exists()
        subprocess.run(["chmod", "-R", "a+rX", str(checkout)], check=True)       # the fix it names
        out = grade_cli(sys.executable, checkout, cls, "--csv", tmp_path / "gb.csv")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert book(tmp_path / "gb.csv")["alice"]["M1"] == "4"


def _broken_venv(tmp_path) -> Path:
    """A venv whose ipykernel cannot run a kernel: an ``ipykernel_launcher`` that exits at once.
    (An unreadable ipykernel, for real: test_grader_environment.py.)"""
    python = venv(tmp_path / "venv")
    [site] = (tmp_path / "venv" / "lib").glob("python3*/site-packages")
    (site / "ipykernel_launcher.py").write_text("import sys\nsys.exit(3)\n")
    return python


@needs_sandbox
@pytest.mark.slow
@pytest.mark.parametrize("how", ["exits at once"])
def test_an_infrastructure_fault_stops_at_the_preflight_with_the_cause_and_no_gradebook(tmp_path, how):
    python = _broken_venv(tmp_path)
    cls = a_class(tmp_path / "class", ROOT, alice=["00_es_from_scratch"], bob=["00_es_from_scratch"])
    out = grade_cli(python, ROOT, cls, "--csv", tmp_path / "gb.csv")
    assert out.returncode == EXIT_PREFLIGHT, out.stdout[-2000:] + out.stderr[-3000:]
    assert "preflight failed" in out.stderr and "no kernel could be started" in out.stderr, out.stderr
    assert "exited before it answered" in out.stderr, out.stderr
    assert "alice" not in out.stdout and not (tmp_path / "gb.csv").exists()


# ---------------------------------------------------------------- the student's doing: graded
@pytest.mark.slow
def test_a_notebook_that_ends_its_kernel_is_graded_with_a_message_and_the_class_is_graded(tmp_path):
    A.notebook(A.solution("00_es_from_scratch"), tmp_path / "class" / "alice" / "00_es_from_scratch.ipynb")
    A.notebook(A.solution("00_es_from_scratch"), tmp_path / "class" / "mallory" / "00_es_from_scratch.ipynb",
               replace=("return ranks / (len(x) - 1) - 0.5",
                        "return ranks / (len(x) - 1) - 0.5\n\n\nimport os\nos._exit(0)"))
    logged = []
    status = grade_class([tmp_path / "class"], csv_path=tmp_path / "gb.csv", cell_timeout=60, check_timeout=30,
                         log=logged.append, jobs=2)
    assert status == 0, "\n".join(logged)
    b = book(tmp_path / "gb.csv")
    assert (b["alice"]["M1"], b["alice"]["status"]) == ("4", "graded")
    assert (b["mallory"]["M1"], b["mallory"]["status"]) == ("2", "graded"), b
    checks = {(r["student"], r["check"]): r for r in csv.DictReader(open(tmp_path / "gb-checks.csv"))}
    ranks = checks[("mallory", "centered_ranks")]
    assert ranks["points"] == "0" and ranks["status"] == "graded"
    assert "your notebook ended its kernel in code cell" in ranks["message"], ranks
    assert checks[("mallory", "es_gradient")]["points"] == "2"


@pytest.mark.slow
def test_a_folder_whose_files_keep_the_kernel_from_starting_is_graded_zero_saying_so(tmp_path):
    """An ``ipykernel_launcher.py`` next to the notebook shadows the module the kernel starts with: the
    kernel starts in an empty folder but not in the student's, so it is the student's doing
    (graded, 0, a message that says which), not the grader's (ungraded)."""
    path = A.notebook(A.solution("00_es_from_scratch"), tmp_path / "alice" / "00_es_from_scratch.ipynb")
    (path.parent / "ipykernel_launcher.py").write_text("raise SystemExit('a launcher of my own')\n")
    res = grade(path, cell_timeout=60, check_timeout=30)
    assert res["status"] == "graded" and res["total"] == 0, res
    for r in res["checks"]:
        assert r["points"] == 0 and "does not start in a copy of your folder" in r["message"], r
        assert "shadows a module" in r["message"]


# ---------------------------------------------------------------- the grader's doing: ungraded
def _canned(path, student=None) -> dict:
    """What ``grade`` returns for a complete 00 (no kernel: these tests are about the gradebook)."""
    return {"submission": str(path), "notebook": "00_es_from_scratch", "student": student, "input_seed": 1,
            "isolation": MODE, "status": "graded", "total": 4, "max": 4, "checks": [
                {"name": "centered_ranks", "milestone": "M1", "points": 2, "max": 2, "message": "passed"},
                {"name": "es_gradient", "milestone": "M1", "points": 2, "max": 2, "message": "passed"}]}


def test_an_exception_in_the_grader_leaves_that_submission_ungraded_never_zero_and_exits_4(tmp_path, monkeypatch):
    import classroom.class_grading as class_grading
    for who in ("alice", "bob"):
        A.notebook(A.solution("00_es_from_scratch"), tmp_path / "class" / who / "00_es_from_scratch.ipynb")

    def flaky(path, *args, **kwargs):
        if Path(path).parent.name == "bob":
            raise OSError(28, "No space left on device")
        return _canned(path, student=Path(path).parent.name)
    monkeypatch.setattr(class_grading, "grade", flaky)     # what grades each notebook of a class
    logged = []
    status = grade_class([tmp_path / "class"], csv_path=tmp_path / "gb.csv", feedback=tmp_path / "fb",
                         log=logged.append, preflight=False)
    assert status == EXIT_UNGRADED
    b = book(tmp_path / "gb.csv")
    assert (b["alice"]["M1"], b["alice"]["total"], b["alice"]["status"]) == ("4", "4", "graded")
    assert (b["bob"]["M1"], b["bob"]["total"]) == ("", ""), b["bob"]             # no grade, never 0
    assert b["bob"]["status"].startswith("ungraded: 00_es_from_scratch: the grader failed: OSError")
    assert "No space left on device" in b["bob"]["status"]
    assert b["bob"]["M2"] == "0"            # nothing was submitted for M2: that stays a graded 0
    rows = [r for r in csv.DictReader(open(tmp_path / "gb-checks.csv")) if r["student"] == "bob"]
    ranks = next(r for r in rows if r["check"] == "centered_ranks")
    assert ranks["points"] == "" and ranks["status"].startswith("ungraded") and "ungraded" in ranks["message"]
    text = "\n".join(logged)
    assert "1 student(s) have ungraded submissions (bob)" in text and "ungraded" in text
    fb = (tmp_path / "fb" / "bob.md").read_text()
    assert "Not graded yet" in fb and "not your code" in fb and "M1 ungraded/10" in fb


@pytest.mark.slow
def test_a_grading_process_killed_from_outside_leaves_the_submission_ungraded(tmp_path):
    """The OOM killer (or anyone) kills the grading process: no result, so no grade."""
    path = A.notebook(A.solution("00_es_from_scratch"), tmp_path / "alice" / "00_es_from_scratch.ipynb")
    marker = str(path).encode()
    done = {}
    t = threading.Thread(target=lambda: done.update(res=grade(path, cell_timeout=60, check_timeout=30)))
    t.start()
    killed = False
    for _ in range(600):
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    cmd = (d / "cmdline").read_bytes()
                except OSError:
                    continue
                if b"_child_main" in cmd and marker in cmd:
                    os.kill(int(d.name), signal.SIGKILL)
                    killed = True
        if killed or not t.is_alive():
            break
        time.sleep(0.05)
    t.join(timeout=120)
    res = done["res"]
    assert killed and res["status"].startswith("ungraded: the grading process ended without a result"), res
    assert all(r["points"] is None for r in res["checks"]) and res["checks"], res


# ---------------------------------------------------------------- the kernel's view
@needs_sandbox
@pytest.mark.slow
def test_a_class_folder_inside_the_support_code_is_out_of_the_kernels_reach(tmp_path):
    """Held out: the class lies inside the checkout the kernel imports from; the support code is
    bound into the kernel read-only, but the class folder in it is hidden (a classmate's work
    would otherwise be one ``open`` away)."""
    support = copy_checkout(tmp_path / "es-course")
    attack = A.reads_a_classmates_folder(support)
    res = grade(attack.target, cell_timeout=60, check_timeout=30, support_path=support, **attack.kwargs)
    r = {x["name"]: x for x in res["checks"]}["centered_ranks"]
    assert r["points"] == 0 and "the attack did not work" in r["message"], res
    assert res["status"] == "graded"


def test_binds_are_mounted_parents_first_and_never_onto_the_kernels_private_folders(tmp_path):
    binds, hidden = sandbox.plan_binds([["/tmp/venv", "/tmp/venv", "ro"], ["/usr", "/usr", "ro"],
                                        ["/x/work", "/submission/a", "rw"], ["/tmp/venv/lib", "/tmp/venv/lib", "ro"]],
                                       secret=["/usr/share/class", "/elsewhere"])
    assert [b[1] for b in binds] == ["/usr", "/submission/a", "/tmp/venv", "/tmp/venv/lib"]
    assert hidden == ["/usr/share/class"]
    for bad in ("/tmp", "/dev", "/dev/shm/", "/proc", "/"):
        with pytest.raises(sandbox.SandboxError, match="cover the kernel's private"):
            sandbox.plan_binds([[bad, bad, "ro"]])
    with pytest.raises(sandbox.SandboxError, match="inside /x/source, which the kernel must not see"):
        sandbox.plan_binds([["/x", "/x", "ro"], ["/x/source/venv", "/x/source/venv", "ro"]], hidden=["/x/source"])


# ---------------------------------------------------------------- what an LMS imports
def _students(tmp_path):
    alice, bob = Student("alice", tmp_path / "alice", "x"), Student("bob", tmp_path / "bob", "x")
    alice.results = [{**_canned(tmp_path / "a.ipynb", student="alice"), "course_notebook": "00_es_from_scratch"}]
    why = "ungraded: the grader failed: OSError: disk full"
    bob.results = [{**_canned(tmp_path / "b.ipynb", student="bob"), "course_notebook": "00_es_from_scratch",
                    "status": why, "checks": [{"name": n, "milestone": "M1", "points": None, "max": m, "message": why}
                                              for n, m in (("centered_ranks", 2), ("es_gradient", 2))]}]
    return [alice, bob]


def test_the_canvas_export_is_canvas_gradebook_layout_with_points_possible(tmp_path):
    write_gradebook(_students(tmp_path), tmp_path / "canvas.csv", "canvas")
    rows = list(csv.reader(open(tmp_path / "canvas.csv")))
    assert rows[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert rows[0][5:] == ["M1: ES in one thread solves CartPole-v1", "M2: parallel with joblib",
                           "M3: distributed through Redis", "M4: Pong better than random", "Extras (bonus)",
                           "es-course total"]
    assert rows[1] == ["    Points Possible", "", "", "", "", "10", "5", "5", "10", "18", "30"]   # extras: 03 5 + 05 5 + 06 8
    assert rows[2] == ["alice", "", "", "alice", "", "4", "0", "0", "0", "0", "4"]
    assert rows[3] == ["bob", "", "", "bob", "", "", "0", "0", "0", "0", ""]       # ungraded: blank, not 0


def test_the_moodle_export_has_a_user_column_and_one_column_per_item(tmp_path):
    write_gradebook(_students(tmp_path), tmp_path / "moodle.csv", "moodle")
    rows = list(csv.reader(open(tmp_path / "moodle.csv")))
    assert rows[0][0] == "Username" and rows[0][-1] == "es-course total" and len(rows[0]) == 7
    assert rows[1] == ["alice", "4", "0", "0", "0", "0", "4"]
    assert rows[2] == ["bob", "", "0", "0", "0", "0", ""]


def test_the_csv_format_flag_is_checked_and_named_in_help():
    out = subprocess.run([sys.executable, "-m", "classroom", "grade", "x", "--csv-format", "blackboard"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2 and "invalid choice: 'blackboard'" in out.stderr
    out = subprocess.run([sys.executable, "-m", "classroom", "grade", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert "--csv-format {course,canvas,moodle}" in out.stdout
