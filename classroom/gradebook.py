"""A class: ``python -m classroom grade CLASS --csv gradebook.csv --feedback DIR``.

**Who is who.** A folder that holds no notebook itself is a class: each folder in it is one
student, whose identity is that folder's name, whatever is nested inside (``CLASS/alice/
ps4/04_pong.ipynb`` is alice's). nbgrader's course folder works too: ``CLASS/submitted/<student>/
<assignment>/``. A folder that holds notebooks is one student's (its name, or nbgrader's
``submitted/<student>/``); a notebook named on its own is its folder's. ``--student ID`` names
the student of a single submission instead. A notebook or a run file that is a symbolic link
leading out of the student's folder is refused; linked folders are not followed.

**What is graded.** Each student's notebooks, one per course notebook (the one named exactly
like it, ``01_cartpole.ipynb``, when there are several; the others are listed in the
feedback), each in its own isolated child (``classroom.grade.grade``), ``--jobs`` at a time,
the longest first. All notebooks of a student use one input seed, printed in the feedback
with the command that grades the student again on the same inputs.

**First, the sandbox and a preflight.** Where the kernels would get no sandbox, nothing is
graded (exit status 5) unless ``allow_unsandboxed`` (``--allow-unsandboxed``). Then
``classroom.preflight``: one kernel, in the sandbox, imports every module the course needs and
grades a known answer. If it cannot, nothing is graded and nothing is written: exit status 3
and one message that names the cause and the fix.

**What comes out.** One row per student (``student, M1, M2, M3, M4, total, max``, ``extras``
when they carry points: a bonus, not in ``total``, and ``status``), a second CSV with one row
per student and check (with ``status``), a class summary (per milestone the mean and how many
got full marks; per check how many passed; which sandbox the kernels had), and a feedback file
per student (``classroom.feedback``). ``--csv-format canvas`` or ``moodle`` writes the
gradebook in the layout those systems import instead (``LMS``).

**Graded or ungraded.** A failure the student caused (a notebook that ends its kernel,
raises, hangs past the limits, leaves a process behind, cannot be read) is *graded*: 0 for what
it cost, with a message that says what the notebook did. A failure of the grader's own
machinery (a kernel that does not start even in an empty folder, a grading process that died,
an exception in the grader), or of the kernel's environment (a module the course needs that
cannot be imported or read: ``grading_child.machine_fault``) leaves the submission *ungraded*: no
points at all (blank cells, never 0), ``status`` says why, and the exit status is 4. Exit
statuses: 0 every submission graded; 1 the grader failed; 2 bad input (a missing path,
nothing gradable); 3 this machine cannot grade (the preflight, or the grader's own imports);
4 some submissions ungraded; 5 no sandbox, not allowed; 130 interrupted.
"""
from __future__ import annotations

from es.errors import ESError

from .class_grading import grade_each
from .class_report import EXIT_GRADED, EXIT_UNGRADED, LMS, write, write_gradebook  # noqa: F401 (exit statuses)
from .records import Student, tally, totals  # noqa: F401 (what a class is made of)
from .sandbox import EXIT_UNSANDBOXED, NoSandbox  # noqa: F401 (every exit status here)
from .submissions import collect

EXIT_FAILED, EXIT_USAGE, EXIT_PREFLIGHT = 1, 2, 3


def grade_class(paths, *, as_json=False, cell_timeout=900, check_timeout=600, log=print, csv_path=None,
                feedback=None, jobs=None, submission_timeout=3600, seed=None, only=None, student=None,
                feedback_format="md", support_path=None, checks_csv=None, csv_format="course", preflight=True,
                allow_unsandboxed=False) -> int:
    """Grade every student found in ``paths`` in one pass: collect, grade each, tally, write;
    the exit status (``EXIT_*``). Raises ``NoSandbox`` where the kernels would have no isolation
    and ``allow_unsandboxed`` is not given, and ``PreflightFailed`` when the known answer does
    not grade (nothing graded, nothing written)."""
    if csv_format not in LMS:
        raise ESError(f"--csv-format must be one of {', '.join(LMS)}, not {csv_format}")
    students = collect(paths, student)
    if student is not None and len(students) > 1:
        raise ESError(f"--student names one submission; {len(students)} were given")
    wall, jobs = grade_each(students, as_json=as_json, log=log, cell_timeout=cell_timeout, check_timeout=check_timeout,
                            submission_timeout=submission_timeout, jobs=jobs, seed=seed, only=only,
                            support_path=support_path, preflight=preflight, allow_unsandboxed=allow_unsandboxed)
    book = tally(students)
    return write(book, as_json=as_json, log=log, csv_path=csv_path, checks_csv=checks_csv, csv_format=csv_format,
                 feedback=feedback, feedback_format=feedback_format, wall=wall, jobs=jobs)
