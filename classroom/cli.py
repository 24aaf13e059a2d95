"""``python -m classroom`` (also ``python -m es notebooks|release|grade``): the course machinery.

    python -m classroom notebooks [--check] [--execute [NAME ...]]   # source/ -> notebooks/, solutions/
    python -m classroom release DIR                                   # what students get, no answer key
    python -m classroom grade SUBMISSIONS... [--csv F] [--feedback D] # grade notebooks or a class
    python -m classroom preflight                                     # can this machine grade? (a known answer)
    python -m classroom site DIR                                      # the course website, built offline

Bad input exits with status 2 and one line on stderr that says what is wrong. ``grade``: 0 when
every submission was graded, 1 when the grader itself failed (a message, no traceback), 3 when
this machine cannot grade (the preflight failed, or the grader cannot import what it needs:
nothing graded, nothing written), 4 when some submissions are ungraded (the grader's own
machinery or the kernel's environment failed on them), 5 when the kernels would run without a
sandbox and ``--allow-unsandboxed`` was not given, 130 when interrupted (docs/instructors.md's
exit table).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from es.errors import ESError

from .quick_start import skip_unused_imports

skip_unused_imports()      # this is a command's process: it reads notebooks, a second sooner


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse's own status for usage errors)
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def add_commands(sub) -> None:
    nbp = sub.add_parser("notebooks", help="build notebooks/ and solutions/ from source/")
    nbp.add_argument("--check", action="store_true", help="exit 1 if the committed notebooks are out of date")
    nbp.add_argument("--execute", nargs="*", default=None, metavar="NAME",
                     help="then run the solution notebooks (all, or the NAMEs given, e.g. 04_pong) in full mode "
                          "and commit their outputs")
    nbp.add_argument("--force", action="store_true",
                     help="also overwrite notebooks whose cells were edited since they were built")
    nbp.add_argument("--only", nargs="+", default=None, metavar="NAME",
                     help="build (and check) only these notebooks, e.g. 04_pong")

    r = sub.add_parser("release", help="write what students get: notebooks, support code, no answer key")
    r.add_argument("dir", type=Path, help="the release folder (nbgrader's release/ASSIGNMENT/, or a course repo)")
    r.add_argument("--force", action="store_true",
                   help="also overwrite notebooks a student edited (never needed for a fresh folder)")

    g = sub.add_parser("grade", help="grade submitted notebooks: one notebook, a student's folder or a class",
                       description="Grade notebooks, a student's folder, or a class folder (one folder per student, "
                                   "or nbgrader's submitted/STUDENT/ASSIGNMENT/): one row per student.")
    g.add_argument("submissions", nargs="+", type=Path,
                   help="notebooks, a student's folder, or a class folder (its folders are the students)")
    g.add_argument("--json", action="store_true", help="one JSON object per graded notebook")
    g.add_argument("--csv", type=Path, default=None, metavar="FILE",
                   help="write the gradebook: one row per student (student, M1..M4, total, max, extras), and "
                        "FILE-checks.csv with one row per student and check")
    g.add_argument("--checks-csv", type=Path, default=None, metavar="FILE",
                   help="where to write the per-check CSV instead of next to --csv")
    g.add_argument("--csv-format", choices=("course", "canvas", "moodle"), default="course",
                   help="the gradebook's layout: ours (with a status column), or the CSV that Canvas (Grades > "
                        "Import) or Moodle (Grades > Import > CSV file) imports; one column per milestone and the total")
    g.add_argument("--feedback", type=Path, default=None, metavar="DIR",
                   help="write a feedback file per student into DIR")
    g.add_argument("--feedback-format", choices=("md", "html"), default="md", help="Markdown or HTML feedback")
    g.add_argument("--jobs", type=int, default=None, help="notebooks graded at once (default: one per core)")
    g.add_argument("--cell-timeout", type=int, default=900, help="seconds per notebook cell")
    g.add_argument("--check-timeout", type=int, default=600, help="seconds per check")
    g.add_argument("--submission-timeout", type=int, default=3600,
                   help="hard limit per notebook: then its kernel and everything it started are killed")
    g.add_argument("--input-seed", type=int, default=None, metavar="N",
                   help="draw the checks' inputs from N (default: fresh for each student; the feedback and --json "
                        "record the seed used, to grade again on the same inputs)")
    g.add_argument("--checks", default=None, metavar="NAME,...",
                   help="run only these checks (the others score 0, marked as left out)")
    g.add_argument("--student", default=None, metavar="ID",
                   help="whose submission this is (one notebook or one folder; Pong runs must carry this "
                        "identifier's seed); default: the student's top-level folder in the class, or nbgrader's "
                        "submitted/ID/")
    g.add_argument("--support-path", type=Path, default=None, metavar="DIR",
                   help="the folder whose packages graded kernels may import (default: this checkout; in the "
                        "sandbox without solutions/, source/, tests/, .git and the answer key; a release folder holds "
                        "no answer key, but without the sandbox a kernel can read any file the grader can)")

    g.add_argument("--allow-unsandboxed", action="store_true",
                   help="grade even where the kernels get no sandbox (not root, no bubblewrap): each kernel is then a "
                        "plain process of this user that can read whatever the grader can; without this flag that "
                        "ends with exit status 5 before anything is graded")

    s = sub.add_parser("site", help="build the course website (the executed notebooks, docs/, the README) offline")
    s.add_argument("dir", type=Path, help="where to write it (new, empty, or a site this command built)")


def add_preflight(sub) -> None:
    p = sub.add_parser("preflight", help="grade a known answer in the kernel students get: can this machine grade?",
                       description="What `grade` does first: one kernel, in the sandbox students' kernels get, imports "
                                   "every module the course notebooks need and grades a known answer. Exit 0 when it "
                                   "scores full marks, 3 with the cause and the fix when not, 5 when the kernel had no "
                                   "sandbox (unless --allow-unsandboxed).")
    p.add_argument("--support-path", type=Path, default=None, metavar="DIR",
                   help="the folder whose packages graded kernels import (as for grade)")
    p.add_argument("--json", action="store_true", help="one JSON line")
    p.add_argument("--allow-unsandboxed", action="store_true",
                   help="exit 0 when the known answer passes in a kernel without a sandbox (default: exit 5 there)")


def cmd_preflight(args) -> int:
    from .preflight import main as preflight
    if args.support_path is not None and not args.support_path.is_dir():
        raise ESError(f"--support-path {args.support_path} is not a folder")
    return preflight(args.support_path, args.json, args.allow_unsandboxed)


def cmd_notebooks(args) -> int:
    from .build import build
    return build(check=args.check, execute=args.execute is not None, only=args.execute or args.only or None,
                 force=args.force, names=args.only)


def cmd_release(args) -> int:
    from .release import release
    return release(args.dir, force=args.force)


def cmd_grade(args) -> int:
    from .check import CHECKS
    if min(args.cell_timeout, args.check_timeout, args.submission_timeout) < 1 or (args.jobs or 1) < 1:
        raise ESError("--cell-timeout, --check-timeout, --submission-timeout and --jobs must be positive")
    only = None if args.checks is None else set(filter(None, args.checks.split(",")))
    if only is not None and (not only or only - set(CHECKS)):
        raise ESError(f"--checks: unknown check(s) {', '.join(sorted(only - set(CHECKS))) or '(none given)'}; "
                      f"the checks are {', '.join(CHECKS)}")
    if args.support_path is not None and not args.support_path.is_dir():
        raise ESError(f"--support-path {args.support_path} is not a folder")
    if args.student is not None and not args.student.strip():
        raise ESError("--student needs an identifier")
    for option, path in (("--csv", args.csv), ("--checks-csv", args.checks_csv)):
        if path is not None and not path.absolute().parent.is_dir():
            raise ESError(f"{option} {path}: the folder {path.absolute().parent} does not exist (nothing graded)")
    from .gradebook import grade_class
    return grade_class(args.submissions, as_json=args.json, cell_timeout=args.cell_timeout,
                       check_timeout=args.check_timeout, csv_path=args.csv, feedback=args.feedback, jobs=args.jobs,
                       submission_timeout=args.submission_timeout, seed=args.input_seed, only=only,
                       student=args.student, feedback_format=args.feedback_format, support_path=args.support_path,
                       checks_csv=args.checks_csv, csv_format=args.csv_format,
                       allow_unsandboxed=args.allow_unsandboxed)


def cmd_site(args) -> int:
    from .site import site
    return site(args.dir)


COMMANDS = {"notebooks": cmd_notebooks, "release": cmd_release, "grade": cmd_grade, "preflight": cmd_preflight,
            "site": cmd_site}


def build_parser(prog: str = "python -m classroom") -> argparse.ArgumentParser:
    p = _Parser(prog=prog, description="The ES course: build the notebooks, grade submissions.",
                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    add_commands(sub)
    add_preflight(sub)
    return p


def main(argv=None, prog: str = "python -m classroom") -> int:
    """The command's exit status; every way it ends has a line in docs/instructors.md's exit
    table, with a message and no traceback."""
    from .environment import grader_cannot_import
    try:
        return _main(argv, prog)
    except (ImportError, PermissionError) as exc:
        if not _importing(exc):
            print(f"error: the grader failed: {exc.__class__.__name__}: {exc} (nothing more was graded or written)",
                  file=sys.stderr)
            return 1
        print(grader_cannot_import(exc), file=sys.stderr)     # the grader's own modules: this machine cannot grade
        return 3
    except Exception as exc:                          # a failure of the grader itself
        print(f"error: the grader failed: {exc.__class__.__name__}: {exc} (nothing more was graded or written; "
              "please report it with the command you ran)", file=sys.stderr)
        return 1


def _importing(exc: BaseException) -> bool:
    """Whether ``exc`` comes from an import (not, say, from writing the gradebook)."""
    if isinstance(exc, ImportError):
        return True
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        tb = tb.tb_next
    return str(getattr(exc, "filename", "")).endswith((".py", ".pyc", ".so"))


def _main(argv, prog: str) -> int:
    import signal
    from es.cli import Terminated, _on_sigterm
    from .sandbox import EXIT_UNSANDBOXED, NoSandbox
    from .preflight import EXIT_STATUS, PreflightFailed
    args = build_parser(prog).parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return COMMANDS[args.command](args)
    except PreflightFailed as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_STATUS
    except NoSandbox as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_UNSANDBOXED
    except ESError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, Terminated):
        print("interrupted", file=sys.stderr)
        return 130
