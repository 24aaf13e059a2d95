"""The grader against students who want points without the work (issue 28's attacks and a
held-out battery of the same kinds): none scores a point, none leaves a process behind, and
each says what was refused. The attacks themselves are in ``attacks.py``."""
import json
import re
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import attacks as A
from attacks import needs_sandbox
from classroom.grade import grade, inspect_notebook
from classroom.gradebook import collect, grade_class, totals

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory):
    return A.make_reference_run(tmp_path_factory)


def rows(res):
    return {r["name"]: r for r in res["checks"]}


def left_running(tmp_path: Path) -> list[int]:
    """The live processes an attack made under ``tmp_path`` left running (its path is in their
    command line, so a test running beside this one under xdist is not counted)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmdline = (d / "cmdline").read_bytes()
                if A.MARKER.encode() in cmdline and str(tmp_path).encode() in cmdline:
                    state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state not in ("Z", "X"):
                        out.append(int(d.name))
            except OSError:
                pass
    return out


def graded_class(folder, **kw):
    """``python -m classroom grade`` on a class folder, in this process: {student: Student}."""
    logged = []
    students = {}
    import classroom.gradebook as gb
    real = gb.collect

    def keep(*a, **k):
        found = real(*a, **k)
        students.update({s.name: s for s in found})
        return found
    gb.collect = keep
    try:
        grade_class([folder], log=logged.append, cell_timeout=120, check_timeout=300, **kw)
    finally:
        gb.collect = real
    return students, "\n".join(logged)


# ---------------------------------------------------------------- the verdict's way back
@needs_sandbox
@pytest.mark.slow
def test_a_setsid_daemon_cannot_rewrite_the_verdict_and_is_gone_when_it_is_read(tmp_path):
    """Issue 28: a process in a new session rewrote the result file named on the grading
    process's command line (full marks on a blank notebook). Now the verdict travels through a
    pipe the sandbox cannot see, and the daemon, which ignores SIGTERM and re-forks, is dead."""
    attack = A.setsid_rewrites_the_verdict(tmp_path)
    res = grade(attack.target, cell_timeout=60, check_timeout=30)
    assert res["total"] == 0 and res["isolation"] in ("namespaces", "bubblewrap"), res
    assert not left_running(tmp_path)


@needs_sandbox
@pytest.mark.slow
def test_a_double_forked_daemon_writing_into_every_pipe_earns_nothing_and_is_gone(tmp_path):
    attack = A.double_fork_pipe_writer(tmp_path)
    res = grade(attack.target, cell_timeout=60, check_timeout=30)
    assert res["total"] == 0, res
    assert not left_running(tmp_path)


@pytest.mark.slow
def test_a_result_is_refused_when_a_process_of_the_submission_survives(tmp_path, monkeypatch):
    """If anything of the submission were still running when the rows are read (a process no
    kill reaches), the grader would not use them: here the sweep is made to report a survivor."""
    from classroom import grade as g
    real = g._kill_tree
    monkeypatch.setattr(g, "_kill_tree", lambda pid: real(pid) + [999999])
    res = grade(A.solution("00_es_from_scratch"), cell_timeout=60, check_timeout=30)
    assert res["total"] == 0 and "could not be stopped" in res["error"], res


@needs_sandbox
@pytest.mark.slow
def test_a_pong_package_written_for_the_grader_is_never_imported(tmp_path):
    """Issue 28: a ``pong`` package written into the grading process's working directory faked
    verify_run and beats_random (5/10 on 04 with no agent). Now the grading process runs
    ``python -I`` from a private folder the kernel cannot see, with its modules imported first."""
    attack = A.pong_package_in_the_graders_folder(tmp_path)
    res = grade(attack.target, cell_timeout=120, check_timeout=300)
    r = rows(res)["pong_agent"]
    assert r["points"] == 0 and "no folder pong-run" in r["message"], r
    assert not (ROOT / "pong" / "replay.py").read_text().startswith("\nclass RunRejected")


# ---------------------------------------------------------------- identity
@pytest.mark.slow
def test_a_notebook_linked_to_the_reference_is_refused(tmp_path, reference_run):
    """Issue 28: a notebook that is a link to reference/04_pong.ipynb was graded as "reference"."""
    attack = A.symlinked_notebook_to_reference(tmp_path, reference_run)
    students, log = graded_class(attack.target)
    mallory = students["mallory"]
    [res] = mallory.results
    assert res["total"] == 0 and "symbolic link" in res["error"] and "outside the folder mallory/" in res["error"]
    assert totals(mallory)["M4"] == 0 and "mallory" in log


@needs_sandbox
@pytest.mark.slow
def test_a_nested_folder_named_reference_is_graded_as_its_top_level_student(tmp_path, reference_run):
    """Issue 28: class/mallory/reference/04_pong.ipynb with the reference run was graded as
    "reference". The identity is the top-level folder's; the message says what to do."""
    attack = A.nested_reference_folder(tmp_path, reference_run)
    students, _ = graded_class(attack.target, only={"pong_agent"})
    [res] = students["mallory"].results
    r = rows(res)["pong_agent"]
    assert res["student"] == "mallory" and r["points"] == 0, res
    msg = r["message"]
    assert "graded as 'mallory'" in msg and "trained as 'reference' (the notebook's STUDENT_ID)" in msg, msg
    assert "rename the submission folder to reference" in msg and "--student reference" in msg, msg


@pytest.mark.slow
@pytest.mark.parametrize("build, words", [
    (A.linked_run_files, "is a link to"),
    (A.linked_run_dir, "lies outside your submission folder"),
    (A.run_dir_up_and_out, "lies outside your submission folder"),
], ids=["linked files", "linked folder", "up and out"])
def test_run_files_that_lead_out_of_the_students_folder_are_refused(tmp_path, reference_run, build, words):
    """Held out: a run whose files, or whose folder, lead out of the submission (here to a run
    that would replay for this student) is refused, saying why."""
    attack = build(tmp_path, reference_run, "reference")
    target = attack.kwargs.get("root", attack.target)
    students, _ = graded_class(target, only={"pong_agent"}, **({"student": "reference"} if "root" in attack.kwargs
                                                               else {}))
    [res] = students["reference"].results
    r = rows(res)["pong_agent"]
    assert r["points"] == 0 and words in r["message"], r


def test_a_fifo_or_a_device_in_a_run_is_refused_without_waiting(tmp_path):
    from classroom.check import CheckFailed
    from classroom.check_runner import copy_run
    run = tmp_path / "me" / "pong-run"
    run.mkdir(parents=True)
    os.mkfifo(run / "metrics.jsonl")
    given = {"folder": tmp_path / "me", "root": tmp_path / "me", "private": tmp_path / "private"}
    t0 = time.monotonic()
    with pytest.raises(CheckFailed, match="not a regular file"):
        copy_run("pong-run", given)
    (run / "metrics.jsonl").unlink()
    os.symlink("/dev/zero", run / "metrics.jsonl")
    with pytest.raises(CheckFailed, match="outside your submission folder"):
        copy_run("pong-run", given)
    assert time.monotonic() - t0 < 5


@pytest.mark.slow
def test_a_notebook_linked_to_a_classmates_earns_the_linker_nothing(tmp_path):
    attack = A.notebook_linked_to_a_classmates(tmp_path)
    students, _ = graded_class(attack.target)
    assert totals(students["alice"])["M1"] == 4
    [res] = students["mallory"].results
    assert res["total"] == 0 and "outside the folder mallory/" in res["error"]


def test_identity_is_the_top_level_folder_whatever_is_nested(tmp_path):
    for path in ("class/alice/ps4/deep/04_pong.ipynb", "class/bob/reference/01_cartpole.ipynb",
                 "class/carol/00_es_from_scratch.ipynb"):
        A.notebook(A.blank(Path(path).stem), tmp_path / path)
    found = {s.name: s for s in collect([tmp_path / "class"])}
    assert sorted(found) == ["alice", "bob", "carol"]
    assert found["bob"].notebooks["01_cartpole"].parent.name == "reference"
    assert "top-level folder" in found["bob"].how
    sub = tmp_path / "course" / "submitted"
    A.notebook(A.blank("00_es_from_scratch"), sub / "dave" / "ps1" / "00_es_from_scratch.ipynb")
    A.notebook(A.blank("01_cartpole"), sub / "erin" / "ps1" / "01_cartpole.ipynb")
    assert [s.name for s in collect([tmp_path / "course"])] == ["dave", "erin"]
    assert [s.name for s in collect([sub / "dave" / "ps1"])] == ["dave"]
    assert [s.name for s in collect([sub / "dave"], student="someone")] == ["someone"]


def test_a_huge_notebook_is_refused_without_being_read(tmp_path):
    path = tmp_path / "me" / "00_es_from_scratch.ipynb"
    path.parent.mkdir()
    with open(path, "wb") as f:
        f.truncate(200 << 20)             # sparse: 200 MB of nothing
    assert "larger than 100 MB" in inspect_notebook(path)


# ---------------------------------------------------------------- the answer key
@needs_sandbox
@pytest.mark.slow
def test_running_the_solutions_found_through_the_package_earns_nothing(tmp_path):
    """Issue 28: a notebook ran the cells of solutions/01_cartpole.ipynb found through the
    course package's folder (6/6). The kernel's view of the support code has no solutions/."""
    attack = A.runs_the_solutions(tmp_path)
    res = grade(attack.target, cell_timeout=300, check_timeout=120)
    assert res["total"] == 0, res


def written_bytecode(*modules: Path) -> list[Path]:
    """Each module's ``.pyc`` where Python puts it, written unless it is there (whatever
    PYTHONDONTWRITEBYTECODE says): the ones there now."""
    import importlib.util
    import py_compile
    out = []
    for module in modules:
        pyc = Path(importlib.util.cache_from_source(str(module)))
        if not pyc.is_file():
            try:
                py_compile.compile(str(module), cfile=str(pyc), doraise=True)
            except (OSError, py_compile.PyCompileError):
                continue
        out.append(pyc)
    return out


@needs_sandbox
@pytest.mark.slow
@pytest.mark.parametrize("build", [A.finds_an_answer_key_anywhere, A.reads_the_compiled_answer_key, A.sees_the_grader,
                                   A.writes_outside_its_folder],
                         ids=["answer key anywhere", "its bytecode", "sees the grader", "writes outside"])
def test_what_the_kernel_cannot_reach(tmp_path, build):
    """Held out: a notebook whose centered_ranks is right only if the kernel reached the answer
    key (any checkout on the machine, its bytecode, the git history), the grading process, or
    could write into the support code or site-packages."""
    if build is A.reads_the_compiled_answer_key:     # the bytecode is there, as on an instructor's machine
        compiled = written_bytecode(ROOT / "classroom" / "references.py", ROOT / "pong" / "replay.py")
        if not compiled:
            pytest.skip("the answer key has no bytecode here and this user cannot write it")
    attack = build(tmp_path)
    res = grade(attack.target, cell_timeout=60, check_timeout=30)
    assert rows(res)["centered_ranks"]["points"] == 0, res
    assert "the attack did not work" in rows(res)["centered_ranks"]["message"]


@needs_sandbox
@pytest.mark.slow
def test_a_classmates_folder_is_out_of_reach(tmp_path):
    attack = A.reads_a_classmates_folder(tmp_path)
    res = grade(attack.target, cell_timeout=60, check_timeout=30, **attack.kwargs)
    assert rows(res)["centered_ranks"]["points"] == 0, res


@needs_sandbox
@pytest.mark.slow
def test_a_kernel_that_kills_what_it_sees_cannot_touch_a_classmates_grading(tmp_path):
    """Held out: graded next to an honest classmate (two at a time), a kernel that SIGKILLs every
    grading process it can see changes nothing for the classmate."""
    A.kills_what_it_sees(tmp_path)
    A.notebook(A.solution("00_es_from_scratch"), tmp_path / "alice" / "00_es_from_scratch.ipynb")
    students, _ = graded_class(tmp_path, jobs=2)
    assert totals(students["alice"])["M1"] == 4
    assert totals(students["mallory"])["M1"] == 0


@needs_sandbox
@pytest.mark.slow
def test_delegating_to_the_reference_scores_nothing_when_the_support_code_lacks_it(tmp_path):
    """The kernel imports only ``support_path``: with support code that has no reference
    implementation (as the student release will be), a function that reaches es.shaping through
    sys.modules scores nothing, and the honest solution still scores full marks."""
    support = tmp_path / "release"
    shutil.copytree(ROOT / "classroom", support / "classroom", ignore=shutil.ignore_patterns("__pycache__"))
    (support / "es").mkdir()
    (support / "es" / "__init__.py").write_text('"""The release\'s es: no reference implementations."""\n')
    attack = A.delegates_to_the_reference_unseen(tmp_path / "a")
    res = grade(attack.target, cell_timeout=60, check_timeout=30, support_path=support)
    assert rows(res)["centered_ranks"]["points"] == 0, res
    honest = grade(A.solution("00_es_from_scratch"), cell_timeout=60, check_timeout=30, support_path=support)
    assert honest["total"] == honest["max"] == 4, honest


# ---------------------------------------------------------------- the sandbox itself
@needs_sandbox
def test_the_kernel_runs_as_its_own_user_in_its_own_namespaces(tmp_path):
    """A real kernel started the grader's way: its uid is not the grader's, it sees only its own
    processes, a writable copy of the submission's folder, the support code read-only and
    without solutions/, and none of the grader's files."""
    import nbformat as nbf
    from classroom import sandbox
    from classroom.kernels import KernelFactory, notebook_client
    sub = tmp_path / "class" / "alice"
    sub.mkdir(parents=True)
    (sub / "notes.txt").write_text("mine")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    isolation = sandbox.mode()[0]
    lease = sandbox.UidLease() if isolation == "namespaces" else None
    uid = lease.uid if lease else None
    probe = ("import os, json, es\nroot = os.path.dirname(os.path.dirname(es.__file__))\n"
             "def can_write(p):\n    try:\n        open(p, 'w').close(); os.unlink(p); return True\n"
             "    except OSError:\n        return False\n"
             "print(json.dumps({'uid': os.getuid(), 'pids': sorted(int(p) for p in os.listdir('/proc') if p.isdigit()),"
             " 'cwd': os.getcwd(), 'files': sorted(os.listdir('.')), 'solutions': os.listdir(os.path.join(root, "
             "'solutions')), 'write_root': can_write(os.path.join(root, 'x')), 'write_here': can_write('x'),"
             f" 'private': os.path.exists({str(private)!r}), 'class': os.path.exists({str(tmp_path / 'class')!r})}}))")
    run = nbf.v4.new_notebook(cells=[nbf.v4.new_code_cell(probe)])
    client = notebook_client(run, 0, 60, private)
    kernels = KernelFactory(private, uid, ROOT, sub, "/submission/alice", isolation, [],
                             secret=[str(tmp_path / "class"), str(private)])
    try:
        kernels.start(client)
        client.execute_cell(run.cells[0], 0)
    finally:
        kernels.stop(client)
        if lease:
            lease.release()
    seen = json.loads("".join(o.get("text", "") for o in run.cells[0].outputs))
    if lease:
        assert seen["uid"] == lease.uid != 0
        assert not sandbox.survivors(lease.uid)
    else:                                               # bubblewrap: a uid of its own inside a user namespace
        from classroom.bubblewrap import KERNEL_UID
        assert seen["uid"] == KERNEL_UID != os.getuid()
        assert kernels.namespaces and not sandbox.namespace_members(kernels.namespaces)
    assert seen["pids"] == [1, 2], seen                 # its init and itself
    assert seen["cwd"] == "/submission/alice" and seen["files"] == ["notes.txt"]
    assert seen["solutions"] == [] and not seen["write_root"] and seen["write_here"]
    assert not seen["private"] and not seen["class"]
    assert not kernels.survived


# ---------------------------------------------------------------- checkpoints
def _npz_with(tmp_path, members: dict) -> Path:
    import io
    import zipfile
    path = tmp_path / "checkpoint.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, (shape, data) in members.items():
            buf = io.BytesIO()
            np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": shape})
            z.writestr(name, buf.getvalue() + data)
    return path


def test_a_checkpoint_whose_header_claims_more_than_it_holds_is_refused(tmp_path):
    from es.checkpoint import load_checkpoint
    from es.errors import ESError
    path = _npz_with(tmp_path, {"center.npy": ((10 ** 10,), b"\0" * 16), "meta.npy": ((1,), b"\0" * 4)})
    with pytest.raises(ESError, match="not an array of the size it holds"):
        load_checkpoint(path)


def test_a_checkpoint_of_many_members_is_refused_by_what_they_inflate_to(tmp_path):
    import zipfile
    from es.checkpoint import load_checkpoint
    from es.errors import ESError
    path = tmp_path / "checkpoint.npz"
    zero = bytes(8 << 20)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for k in range(8):
            z.writestr(f"opt_{k}.npy", zero)
    assert path.stat().st_size < 1 << 20
    with pytest.raises(ESError, match="inflates to more than 50 MB"):
        load_checkpoint(path, max_bytes=50 << 20)


@pytest.mark.slow
def test_a_3_mb_checkpoint_that_inflates_to_3_gb_is_refused_before_it_is_read(tmp_path, reference_run):
    """Issue 28: the 50 MB limit applied to the file, and a 3 MB checkpoint.npz inflating to 3 GB
    was read whole. Now the replay refuses it from the zip's directory, in a process that never
    grows past a few hundred MB."""
    import zipfile
    run = tmp_path / "run"
    shutil.copytree(reference_run, run)
    with zipfile.ZipFile(run / "checkpoint.npz", "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        with z.open("center.npy", "w", force_zip64=True) as f:
            import io
            buf = io.BytesIO()
            np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": (3 << 28,)})
            f.write(buf.getvalue())
            zero = bytes(64 << 20)
            for _ in range(48):            # 3 GB
                f.write(zero)
    assert (run / "checkpoint.npz").stat().st_size < 4 << 20
    code = ("import resource, sys, time, numpy as np\nfrom pong.replay import RunRejected, verify_run\nt = time.time()\n"
            f"try:\n    verify_run({str(run)!r}, 'reference', np.random.default_rng(0))\n    print('accepted')\n"
            "except RunRejected as e:\n    print('rejected:', e)\n"
            "print(time.time() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    said, numbers = out.stdout.strip().splitlines()
    seconds, maxrss_kb = map(float, numbers.split())
    assert said.startswith("rejected:") and "inflates to more than 50 MB" in said, out.stdout + out.stderr
    assert seconds < 5 and maxrss_kb < 500_000, numbers


# ---------------------------------------------------------------- resisted before, kept so
def _rejected(run, match):
    from pong.replay import RunRejected, verify_run
    with pytest.raises(RunRejected, match=match):
        verify_run(run, "reference", np.random.default_rng(1))


@pytest.mark.slow
def test_corrupt_pickled_and_sparse_run_files_are_refused(tmp_path, reference_run):
    run = tmp_path / "run"
    shutil.copytree(reference_run, run)
    good = (run / "checkpoint.npz").read_bytes()
    (run / "checkpoint.npz").write_bytes(good[: len(good) // 2])
    _rejected(run, "corrupt")
    np.savez(run / "checkpoint.npz", center=np.array([object()], dtype=object), meta=np.array("{}"))
    _rejected(run, "corrupt|not an array")                      # a pickled array is never unpickled
    with open(run / "checkpoint.npz", "wb") as f:
        f.truncate(1 << 30)                                   # 1 GB, sparse
    _rejected(run, "larger than 50 MB")
    (run / "checkpoint.npz").write_bytes(good)
    with open(run / "metrics.jsonl", "ab") as f:
        f.truncate(1 << 30)
    _rejected(run, "larger than 50 MB")


@needs_sandbox
@pytest.mark.slow
def test_forged_verdict_and_summary_files_change_nothing(tmp_path, reference_run):
    """A run with beats_random.json and summary.json claiming an agent that beats random: the
    grader replays and plays the games itself."""
    folder = tmp_path / "class" / "reference"
    nb = A.notebook(A.solution("04_pong"), folder / "04_pong.ipynb")
    shutil.copytree(reference_run, folder / "pong-run")
    verdict = {"generation": 1, "agent_mean": 21.0, "agent_ci": [20.0, 21.0], "random_mean": -21.0,
               "random_ci": [-21.0, -20.0], "seeds": [0, 19], "agent_scores": [21.0] * 20,
               "random_scores": [-21.0] * 20}
    (folder / "pong-run" / "beats_random.json").write_text(json.dumps(verdict))
    (folder / "pong-run" / "summary.json").write_text(json.dumps({"solved": True, "beats_random": True}))
    res = grade(nb, cell_timeout=120, check_timeout=600, only={"pong_agent"}, student="reference", root=folder)
    r = rows(res)["pong_agent"]
    assert r["points"] == 0 and "does not beat random yet" in r["message"], r
    assert r["pong"]["replay"] == "replays" and r["pong"]["beats_random"] is False


# ---------------------------------------------------------------- the planted bug that escaped
KEEPS_OLD_TIME = ("            queued_at[chunk] = time.time()\n", "")


@pytest.mark.slow
def test_gather_names_a_requeued_chunk_that_keeps_its_old_queue_time_on_every_seed(monkeypatch):
    """Issue 28's planted bug that escaped: a requeued chunk keeps its old queue time, so it looks
    lost again at once and is requeued over and over. Caught, with its message, on 6 seeds; the
    solution passes on the same seeds."""
    import contextlib
    import io
    from classroom import check
    monkeypatch.setenv("ES_COURSE_FAST", "1")
    monkeypatch.chdir(ROOT / "source")
    src = (ROOT / "source" / "03_redis.py").read_text()
    assert KEEPS_OLD_TIME[0] in src
    from concurrent.futures import ThreadPoolExecutor
    gathers = {}
    for bug in (False, True):
        text = src.replace(*KEEPS_OLD_TIME) if bug else src
        text = "\n".join(line for line in text.split("# ## 4. ")[0].splitlines() if not line.startswith("check."))
        for seed in range(6):        # a namespace each: the check swaps the course's helpers into its globals
            namespace = {"__name__": "__main__"}
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(text, "03_redis", "exec"), namespace)
            gathers[bug, seed] = namespace["gather"]

    def verdict(key):
        try:
            check.gather(gathers[key], seed=key[1])
            return None
        except check.CheckFailed as exc:
            return str(exc)
    with ThreadPoolExecutor(3) as pool:     # each check mostly waits on its leases (1 s): 6 s of CPU in 50 s
        said = dict(zip(gathers, pool.map(verdict, gathers)))
    for (bug, seed), message in said.items():
        if not bug:
            assert message is None, (seed, message)
        else:
            assert message and re.search("pushed to es:jobs again .* set a requeued chunk's queued_at to now",
                                         message), (seed, message)


@pytest.mark.slow
def test_the_grader_takes_the_gather_points_of_a_requeue_that_keeps_its_old_time(tmp_path):
    nb = A.notebook(A.solution("03_redis"), tmp_path / "carol" / "03_redis.ipynb", replace=KEEPS_OLD_TIME)
    res = grade(nb, cell_timeout=120, check_timeout=120)
    r = rows(res)
    assert r["gather"]["points"] == 0 and "pushed to es:jobs again" in r["gather"]["message"], r["gather"]
    assert res["total"] == res["max"] - 2, res
