"""One check, run by the grading child against the student's functions in the kernel
(``run_check``): what the check needs is asked of the kernel as plain data (a callable as a
``Remote``), except what the grader knows better than the notebook (``grader_side``: whose
submission it is, and a private copy of the run it trained); what a Pong check replayed and
played is recorded for the feedback."""
from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from pathlib import Path

from .check import CHECKS, RELEASE_SEEDS, CheckFailed, verdict
from .grade import REFERENCE_HOMES, RUN_FILES, within
from .kernels import GraderFault
from .remote import KernelError, KernelGone, Remote, ask

RESTARTED = "(the kernel was restarted for the next check)"


def run_check(row: dict, execute, check_timeout: int, seed: int, given: dict | None = None) -> str:
    """One check, in this process, on inputs drawn from ``seed``; the student's functions run
    in the kernel. Its message; what the check printed when it passed goes to ``row["detail"]``
    and, for a Pong run, what was replayed and played to ``row["pong"]``. ``given``: what the
    grader knows better than the notebook (whose submission it is, the folder it came in),
    which ``grader_side`` applies."""
    import io
    name = row["name"]
    given = given if given is not None else {}
    deadline = time.monotonic() + check_timeout
    run = lambda source: execute(source, deadline)   # noqa: E731
    printed = io.StringIO()
    record: dict = {}
    try:
        objs = []
        needs = CHECKS[name][3]
        for need in needs:
            kind = ask(run, need, "kind")
            if kind.get("missing"):
                return f"{name}: define {need} (the cell that defines it did not run?)"
            home = str(kind.get("module") or "")
            if kind.get("callable") and home.split(".")[0] in REFERENCE_HOMES:
                return f"{name}: 0 points: {need} is {home}'s function, not one written in the notebook"
            if kind.get("callable"):
                objs.append(Remote(run, need))
                continue
            value = ask(run, need, "get").get("value")
            try:
                objs.append(grader_side(need, value, given))
            except CheckFailed as exc:
                return f"{name}: 0 points: {exc}"
        if "RUN_DIR" in needs and "STUDENT_ID" in needs:
            run_dir, student = objs[needs.index("RUN_DIR")], objs[needs.index("STUDENT_ID")]
            claimed = ask(run, "STUDENT_ID", "get").get("value")
            problem = _identity_problem(Path(run_dir), student, claimed, given)
            if problem:
                record.update(replay="rejected", reason=problem, identity=student)
                return f"{name}: 0 points: {problem}"
            record["identity"] = student
        with _recording(record), contextlib.redirect_stdout(printed):
            verdict(name, objs, seed, repeatable=seed in RELEASE_SEEDS)    # can the student's release repeat it?
        detail = printed.getvalue().strip()
        if detail:
            row["detail"] = detail[:1000]
        return "passed"
    except NotImplementedError:
        return f"{name}: not implemented yet (the cell still raises NotImplementedError)"
    except CheckFailed as exc:
        return str(exc)
    except KernelError as exc:
        ename, _, evalue = str(exc).partition(": ")
        row["raised"] = (ename, evalue, None)      # the machine's fault? (machine_fault)
        return f"{name}: raised {str(exc)[:500]}"
    except KernelGone as exc:
        if exc.reason == "timeout":
            return f"{name}: the check did not finish in {check_timeout} s (an endless loop?) {RESTARTED}"
        return f"{name}: the kernel died during the check (out of memory, or os._exit?) {RESTARTED}"
    except (ImportError, PermissionError) as exc:     # the grader's own imports or files, not the student's
        from .environment import grader_cannot_import
        raise GraderFault(grader_cannot_import(exc, whole=False)) from None
    except Exception as exc:   # the check could not use what came back (a tuple for a dict, ...)
        return (f"{name}: the check could not use what your code returned ({exc.__class__.__name__}: "
                f"{str(exc)[:200]}); compare with the docstring")
    finally:
        if record:
            row["pong"] = record


@contextlib.contextmanager
def _recording(record: dict):
    """While a check runs: what ``pong.replay.verify_run`` replayed and ``pong.student.beats_random``
    played, into ``record`` (for the feedback); the functions themselves are unchanged."""
    import pong.replay as replay_mod
    import pong.student as student_mod
    verify, beats = replay_mod.verify_run, student_mod.beats_random

    def verify_run(*args, **kwargs):
        try:
            replay = verify(*args, **kwargs)
        except Exception as exc:
            record.update(replay="rejected", reason=str(exc)[:500])
            raise
        record.update(replay="replays", generations=int(replay.generations), seconds=round(float(replay.seconds), 1),
                      chain_max_diff=float(replay.chain_max_diff),
                      episodes=[[int(g), int(m), float(a), float(b)] for g, m, a, b in replay.episodes])
        return replay

    def beats_random(*args, **kwargs):
        v = beats(*args, **kwargs)
        record.update(agent_mean=float(v.agent_mean), agent_ci=[float(x) for x in v.agent_ci],
                      random_mean=float(v.random_mean), random_ci=[float(x) for x in v.random_ci],
                      games=len(v.agent_scores), seeds=[int(v.seeds[0]), int(v.seeds[-1])],
                      beats_random=bool(v.beats_random))
        return v

    replay_mod.verify_run, student_mod.beats_random = verify_run, beats_random
    try:
        yield
    finally:
        replay_mod.verify_run, student_mod.beats_random = verify, beats


def grader_side(need: str, value, given: dict):
    """The student's identifier is the grader's, never the notebook's (which a student could set
    to a classmate's). A run directory must lie inside the student's folder, and so must every
    file of it (a symbolic link is followed only to check where it leads); its files are copied
    into the grader's private folder, and the check reads that copy."""
    if need == "STUDENT_ID" and given.get("STUDENT_ID"):
        return given["STUDENT_ID"]
    if need == "RUN_DIR" and given.get("folder") is not None:
        return str(copy_run(value, given))
    return value




def copy_run(value, given: dict) -> Path:
    folder = Path(os.path.abspath(given["folder"]))
    root = Path(os.path.abspath(given.get("root") or folder))
    if not isinstance(value, (str, os.PathLike)):
        raise CheckFailed(f"RUN_DIR must be a path, got {type(value).__name__}")
    shown = str(value)[:100]
    target = Path(os.path.normpath(folder / value))
    real_root = root.resolve()
    if not within(target, root) or not within(target.resolve(), real_root):
        raise CheckFailed(f"RUN_DIR {shown} lies outside your submission folder ({root.name}/); submit the run "
                          "directory inside it, next to the notebook")
    if not target.is_dir():
        raise CheckFailed(f"there is no folder {shown} next to the notebook ({target.relative_to(root.parent)}): "
                          "submit the run directory your notebook trained into")
    private = Path(given.get("private") or folder)
    k = 0
    while (private / f"run{k}").exists():
        k += 1
    copy = private / f"run{k}"
    copy.mkdir(parents=True)
    from pong.replay import MAX_FILE_BYTES
    for name in RUN_FILES:
        p = target / name
        if not os.path.lexists(p):
            continue
        real = p.resolve()
        if not within(real, real_root):
            raise CheckFailed(f"{shown}/{name} is a link to {real}, outside your submission folder: submit the "
                              "run's own files, not links to them")
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            raise CheckFailed(f"{shown}/{name} cannot be read ({exc.strerror})") from None
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise CheckFailed(f"{shown}/{name} is not a regular file")
            (copy / name).write_bytes(f.read(MAX_FILE_BYTES + 1))     # one byte too many: replay refuses it
    return copy


def _identity_problem(run_copy: Path, student: str, claimed, given: dict) -> str | None:
    """Why the run in ``run_copy`` cannot be graded as ``student``'s (its seed is another
    identifier's), said so that the reader knows what to do; None when the seeds agree or
    the configuration cannot be read (the replay then says what is wrong)."""
    from pong.student import student_seed
    try:
        seed = json.loads((run_copy / "config.json").read_text())["seed"]
        if not isinstance(seed, int) or isinstance(seed, bool):
            return None
        mine = student_seed(student)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if seed == mine:
        return None
    how = given.get("how") or "the name of the submission's folder"
    try:
        other = str(claimed).strip() if claimed is not None and student_seed(str(claimed)) == seed else None
    except ValueError:
        other = None
    graded = f"this submission is graded as '{student}' ({how})"
    why = ("each identifier trains with a seed of its own (pong.student.student_seed), so a run can be replayed "
           "only under the identifier it was trained as")
    if other:
        return (f"{graded}, but its run was trained as '{other}' (the notebook's STUDENT_ID): {why}. If '{other}' "
                f"is you, rename the submission folder to {other} or ask your instructor to grade it with "
                f"--student {other}; otherwise train again with STUDENT_ID = '{student}'")
    return (f"{graded}, but its run's seed {seed} is not the seed of '{student}' ({mine})"
            + (f" nor of the notebook's STUDENT_ID '{str(claimed)[:60]}'" if claimed not in (None, "") else "")
            + f": {why}. Train with STUDENT_ID = '{student}'; if the run was trained under another identifier "
            "that is yours, rename the submission folder to it or ask your instructor to grade it with --student "
            "THAT_ID")
