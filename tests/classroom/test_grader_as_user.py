"""Issue 32: most instructors are not root. As an ordinary user, where the machine allows user
namespaces and bubblewrap is installed, graded kernels get the same sandbox: the grader's
attack tests pass there too (the answer key and the other students' work out of the kernel's
reach, nothing left running, the verdict out of its hands).

Run from a root test run (CI's), through ``as_user`` (a private mount namespace and the uid of
``nobody``); skipped, with the reason, where that cannot be arranged."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

import as_user

ROOT = Path(__file__).resolve().parents[2]
# The tests that need the sandbox (``needs_sandbox``), and the "where things live" cases.
AS_USER = [
    "tests/classroom/test_grader_attacks.py::test_the_kernel_runs_as_its_own_user_in_its_own_namespaces",
    "tests/classroom/test_grader_attacks.py::test_a_setsid_daemon_cannot_rewrite_the_verdict_and_is_gone_when_it_is_read",
    "tests/classroom/test_grader_attacks.py::test_a_double_forked_daemon_writing_into_every_pipe_earns_nothing_and_is_gone",
    "tests/classroom/test_grader_attacks.py::test_a_pong_package_written_for_the_grader_is_never_imported",
    "tests/classroom/test_grader_attacks.py::test_running_the_solutions_found_through_the_package_earns_nothing",
    "tests/classroom/test_grader_attacks.py::test_what_the_kernel_cannot_reach",
    "tests/classroom/test_grader_attacks.py::test_a_classmates_folder_is_out_of_reach",
    "tests/classroom/test_grader_attacks.py::test_a_kernel_that_kills_what_it_sees_cannot_touch_a_classmates_grading",
    "tests/classroom/test_grader_attacks.py::test_delegating_to_the_reference_scores_nothing_when_the_support_code_lacks_it",
    "tests/classroom/test_grader_faults.py::test_a_venv_and_a_checkout_under_tmp_grade_a_complete_m1_to_10_of_10",
    "tests/classroom/test_grader_faults.py::test_a_clone_made_under_umask_077_stops_at_the_preflight_as_root_and_grades_after_the_fix",
    "tests/classroom/test_grader_faults.py::test_an_infrastructure_fault_stops_at_the_preflight_with_the_cause_and_no_gradebook[exits at once]",
    "tests/classroom/test_grader_faults.py::test_a_class_folder_inside_the_support_code_is_out_of_the_kernels_reach",
    # issue 39: each module the course needs, closed to the kernel's user (and here to the grader's own)
    *[f"tests/classroom/test_grader_environment.py::test_a_module_the_course_needs_closed_to_the_kernel_never_costs_a_"
      f"complete_notebook_points[{m}]" for m in ("numpy", "matplotlib", "joblib", "gymnasium", "ale_py", "ipykernel",
                                                 "jupyter_client", "es")],
    # (gymnasium: closed to nobody, the grader cannot import it itself; the test above covers that)
    "tests/classroom/test_grader_environment.py::test_a_module_that_fails_while_grading_leaves_the_submission_"
    "ungraded_naming_it[matplotlib]",
]


@pytest.fixture(scope="module")
def ordinary_user(tmp_path_factory):
    why = as_user.available()
    if why:
        pytest.skip(f"cannot run as an ordinary user here: {why}")
    base = tmp_path_factory.mktemp("nobody")
    out = as_user.run([sys.executable, "-c", "import os; from classroom.sandbox import mode; print(os.getuid(), *mode())"],
                      cwd=ROOT, base=base)
    uid, _, rest = out.stdout.strip().partition(" ")
    if out.returncode != 0 or uid == "0":
        pytest.fail(f"could not run as nobody: {out.stdout[-500:]} {out.stderr[-2000:]}")
    if not rest.startswith("bubblewrap"):
        pytest.skip(f"no sandbox for an ordinary user on this machine: {rest}")
    return base


@pytest.mark.slow
def test_the_graders_attack_tests_pass_as_an_ordinary_user_in_bubblewrap(ordinary_user):
    out = as_user.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", "-x", *AS_USER],
                      cwd=ROOT, base=ordinary_user, env={"PYTHONDONTWRITEBYTECODE": "1"})
    (ordinary_user / "pytest.log").write_text(out.stdout + out.stderr)
    tail = out.stdout[-6000:] + out.stderr[-3000:]
    assert out.returncode == 0, tail
    counts = dict((k, int(v)) for v, k in re.findall(r"(\d+) (passed|failed|skipped|error)", out.stdout.splitlines()[-1]))
    assert counts.get("passed", 0) >= len(AS_USER) and not counts.get("skipped"), tail
