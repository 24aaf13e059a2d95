"""Issue 39: no broken machine grades a student.

With any one module the course needs unreadable to the kernel's user (numpy, matplotlib,
joblib, gymnasium, ale_py, ipykernel, jupyter_client, the course's own ``es``), grading a
class gives every complete notebook its full marks, or ends with a non-zero exit status, the
cause, and no ``graded`` row below full marks. Each case is made for real: the package is
copied into a virtual environment and closed there with chmod, and a class is graded with
that environment's Python, as root and (``test_grader_as_user.py``) as the ordinary user
``nobody`` with bubblewrap. Also here: the grader's own failed imports (a message and exit 3,
no traceback), and a machine without a sandbox (exit 5 unless ``--allow-unsandboxed``)."""
import csv
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import as_user
from attacks import needs_sandbox
from classroom import sandbox
from classroom.environment import course_modules
from test_grader_faults import a_class, book, copy_checkout, grade_cli, venv

ROOT = Path(__file__).resolve().parents[2]
MODE = sandbox.mode()[0]
NEEDED = ["numpy", "matplotlib", "joblib", "gymnasium", "ale_py", "ipykernel", "jupyter_client", "es"]


def close(folder: Path) -> Path:
    """Make the package ``folder`` unreadable to every user but root: its files mode 000, its
    folders 0700 (root, and so the grader as root, still reads them; a kernel's uid does not).
    The folder itself stays 0755: a folder Python cannot look into is skipped as a namespace
    package and the same package found further down the path (the running Python's copy)."""
    for dirpath, dirnames, filenames in os.walk(folder):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), 0o700)
        for f in filenames:
            os.chmod(os.path.join(dirpath, f), 0)
    os.chmod(folder, 0o755)
    return folder


def closed(tmp_path: Path, module: str) -> tuple[Path, Path, Path]:
    """(Python, checkout, the closed folder): a venv over this Python's packages in which
    ``module``'s package is a closed copy (``es``: a copy of the checkout with ``es/`` closed)."""
    python = venv(tmp_path / "venv")
    if module == "es":
        checkout = copy_checkout(tmp_path / "es-course")
        return python, checkout, close(checkout / "es")
    [site] = (tmp_path / "venv" / "lib").glob("python3*/site-packages")
    spec = importlib.util.find_spec(module)
    source = Path(list(spec.submodule_search_locations)[0])
    shutil.copytree(source, site / module)
    if source.with_name(module + ".libs").is_dir():            # numpy's shared libraries, beside it
        shutil.copytree(source.with_name(module + ".libs"), site / (module + ".libs"))
    return python, ROOT, close(site / module)


def no_graded_row_below_full_marks(checks_csv: Path) -> None:
    for r in csv.DictReader(open(checks_csv)):
        if r["status"] == "graded" and r["check"] in ("centered_ranks", "es_gradient", "antithetic_noise",
                                                       "adam_update", "train_cartpole"):
            assert r["points"] == r["max"], r


# ---------------------------------------------------------------- what the course needs
def test_the_modules_the_course_needs_come_from_the_notebooks_and_the_code_they_reach(tmp_path):
    from classroom.sandbox import HIDE
    needed = course_modules(ROOT, ROOT / "notebooks", HIDE)
    for m in ("numpy", "matplotlib.pyplot", "joblib", "redis", "es.envs.cartpole", "pong.student", "classroom.check"):
        assert m in needed, m                              # imported by a notebook
    for m in ("gymnasium", "ale_py", "PIL", "tqdm.auto", "es.seeding", "pong.games"):
        assert m in needed, m                              # imported by the support code they reach (ale_py: in a function)
    assert "pong.replay" not in needed and "classroom.references" not in needed     # hidden from the kernel
    # derived, never a hand list: a notebook that imports something new adds it; a guarded import does not
    (tmp_path / "nb").mkdir()
    shutil.copy(ROOT / "notebooks" / "00_es_from_scratch.ipynb", tmp_path / "nb")
    import nbformat
    nb = nbformat.read(str(tmp_path / "nb" / "00_es_from_scratch.ipynb"), 4)
    nb.cells.append(nbformat.v4.new_code_cell("import colorsys\ntry:\n    import not_needed\nexcept ImportError:\n    pass"))
    nbformat.write(nb, str(tmp_path / "nb" / "00_es_from_scratch.ipynb"))
    mine = course_modules(ROOT, tmp_path / "nb", HIDE)
    assert "colorsys" in mine and "not_needed" not in mine


def test_the_tests_venvs_see_the_packages_of_the_python_running_the_tests(tmp_path):
    """Issue 39's newcomer: from inside a venv, ``--system-site-packages`` gives the base
    interpreter's packages, not the venv's, and the grader tests failed on "No module named
    'gymnasium'". ``venv`` builds on the running Python's own site folders."""
    python = venv(tmp_path / "v")
    out = subprocess.run([str(python), "-c", "import sys, gymnasium, ipykernel, nbclient, redis; print(sys.prefix)"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == str(tmp_path / "v"), out.stderr[-2000:]


# ---------------------------------------------------------------- a module closed to the kernel's user
@needs_sandbox
@pytest.mark.slow
@pytest.mark.parametrize("module", NEEDED)
def test_a_module_the_course_needs_closed_to_the_kernel_never_costs_a_complete_notebook_points(tmp_path, module):
    """The issue's trial: with matplotlib unreadable the class was graded with exit 0 and a
    complete 00+01 written down as M1 2. Now: full marks, or a non-zero exit naming the closed
    folder, no traceback, and no graded row below full marks. As root the grader reads
    everything and the preflight stops it (exit 3) naming the module's file and the chmod that
    opens it; as an ordinary user the grader may fail to import it itself (exit 3, the same)."""
    python, checkout, folder = closed(tmp_path, module)
    cls = a_class(tmp_path / "class", ROOT, alice=["00_es_from_scratch", "01_cartpole"])
    out = grade_cli(python, checkout, cls, "--csv", tmp_path / "gb.csv", "--feedback", tmp_path / "fb")
    said = out.stdout[-3000:] + out.stderr[-3000:]
    assert "Traceback" not in out.stderr, said
    if out.returncode == 0:
        assert book(tmp_path / "gb.csv")["alice"]["M1"] == "10", said
        return
    assert out.returncode in (3, 4), said
    assert f"{folder}/" in out.stderr or f"{folder}/" in out.stdout, said          # which module, where
    assert "chmod -R a+rX" in said or "pip install" in said, said                  # and the fix
    if (tmp_path / "gb-checks.csv").exists():
        no_graded_row_below_full_marks(tmp_path / "gb-checks.csv")
    if MODE == "namespaces":
        assert out.returncode == 3 and "preflight failed" in out.stderr, said
        assert "chmod -R a+rX /" in out.stderr and f"(module {module})" in out.stderr, said
        assert not (tmp_path / "gb.csv").exists() and not (tmp_path / "fb").exists()


GRADE_WITHOUT_PREFLIGHT = ("import sys\nfrom classroom.gradebook import grade_class\n"
                           "sys.exit(grade_class([sys.argv[1]], csv_path=sys.argv[2], preflight=False, cell_timeout=120,"
                           " check_timeout=120))")


@needs_sandbox
@pytest.mark.slow
@pytest.mark.parametrize("module", ["matplotlib", "gymnasium"])
def test_a_module_that_fails_while_grading_leaves_the_submission_ungraded_naming_it(tmp_path, module):
    """Past the preflight (it is skipped here, as if the machine broke after it): matplotlib
    fails in the notebook's own first cell, gymnasium inside the support code (es.envs.cartpole)
    or the grader. The complete notebook loses no points: ungraded, exit 4, the module named."""
    python, checkout, folder = closed(tmp_path, module)
    if module == "gymnasium" and not os.access(folder / "__init__.py", os.R_OK):
        pytest.skip("closed to this user, the grader cannot import gymnasium itself (exit 3: the test above)")
    cls = a_class(tmp_path / "class", ROOT, alice=["00_es_from_scratch", "01_cartpole"])
    out = subprocess.run([str(python), "-c", GRADE_WITHOUT_PREFLIGHT, str(cls), str(tmp_path / "gb.csv")],
                         cwd=checkout, env={**os.environ, "PYTHONPATH": str(checkout)}, capture_output=True, text=True,
                         timeout=900)
    said = out.stdout[-3000:] + out.stderr[-3000:]
    assert out.returncode == 4, said
    alice = book(tmp_path / "gb.csv")["alice"]
    assert alice["M1"] == "" and alice["status"].startswith("ungraded"), alice
    assert str(folder) in alice["status"], alice
    no_graded_row_below_full_marks(tmp_path / "gb-checks.csv")


# ---------------------------------------------------------------- the grader's own imports
@pytest.mark.parametrize("command", [["classroom", "grade"], ["es", "grade"], ["classroom", "preflight"]])
def test_a_grader_that_cannot_import_what_it_needs_says_so_without_a_traceback(tmp_path, command):
    """A venv without the course's packages (the README's install step skipped): one message
    naming the module and the fix, exit 3, nothing written."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    cls = a_class(tmp_path / "class", ROOT, alice=["00_es_from_scratch"])
    args = [str(cls), "--csv", str(tmp_path / "gb.csv")] if command[1] == "grade" else []
    out = subprocess.run([str(tmp_path / "bare" / "bin" / "python"), "-m", *command, *args], cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert out.returncode == 3, out.stdout + out.stderr
    assert "Traceback" not in out.stderr and "cannot import" in out.stderr, out.stderr
    assert "pip install -r requirements.txt" in out.stderr, out.stderr
    said = "Nothing was run" if command[0] == "es" else "the grader cannot import"     # es knows nothing of grading
    assert said in out.stderr, out.stderr
    assert not (tmp_path / "gb.csv").exists()


# ---------------------------------------------------------------- no sandbox
@pytest.fixture(scope="module")
def nobody_without_bubblewrap(tmp_path_factory):
    """An ordinary user whose PATH finds no bubblewrap: kernels would run without a sandbox."""
    why = as_user.available()
    if why:
        pytest.skip(f"cannot run as an ordinary user here: {why}")
    return tmp_path_factory.mktemp("nobody-plain")


@pytest.mark.slow
def test_without_a_sandbox_preflight_and_grade_stop_with_exit_5_unless_allowed(nobody_without_bubblewrap):
    base = nobody_without_bubblewrap
    cls = a_class(base / "class", ROOT, alice=["00_es_from_scratch"])
    env = {"PATH": "/nonexistent", "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}

    def run(*args):
        return as_user.run([sys.executable, "-m", "classroom", *map(str, args)], cwd=ROOT, base=base, env=env,
                           timeout=600)
    out = run("preflight")
    assert out.returncode == 5, out.stdout + out.stderr
    assert "preflight passed" in out.stdout and "WITHOUT isolation" in out.stdout and "sandboxed" not in out.stdout
    assert "no sandbox on this machine" in out.stderr and "--allow-unsandboxed" in out.stderr
    out = run("preflight", "--allow-unsandboxed")
    assert out.returncode == 0 and "WITHOUT isolation" in out.stdout, out.stdout + out.stderr
    out = run("grade", cls, "--csv", base / "tmp" / "gb.csv")
    assert out.returncode == 5 and "Nothing was graded (exit status 5)" in out.stderr, out.stdout + out.stderr
    assert "alice" not in out.stdout and not (base / "tmp" / "gb.csv").exists()
    out = run("grade", cls, "--csv", base / "tmp" / "gb.csv", "--allow-unsandboxed")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "WITHOUT isolation" in out.stdout and "warning: kernels ran without the sandbox" in out.stdout
    assert book(base / "tmp" / "gb.csv")["alice"]["M1"] == "4"


# ---------------------------------------------------------------- the grader's own failures
@pytest.mark.slow
def test_a_gradebook_that_cannot_be_written_ends_with_exit_1_and_a_message_not_a_traceback(tmp_path):
    """A failure of the grader itself (here: writing the gradebook where no file can be made)
    is exit 1 with one line; a --csv in a folder that does not exist is bad input, before any
    grading (exit 2)."""
    cls = a_class(tmp_path / "class", ROOT, alice=["00_es_from_scratch"])
    out = grade_cli(sys.executable, ROOT, cls, "--csv", tmp_path / "nowhere" / "gb.csv")
    assert out.returncode == 2 and "does not exist (nothing graded)" in out.stderr, out.stderr
    assert "alice" not in out.stdout
    out = grade_cli(sys.executable, ROOT, cls, "--csv", "/proc/gb.csv", "--allow-unsandboxed")
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    assert out.stderr.startswith("error: the grader failed: ") and "gb.csv" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
