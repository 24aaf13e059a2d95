"""The course's classroom package: in a student release, the checks a student runs
(``check.py``, with one module per notebook in ``checks/``) and the code the notebooks drive;
in the course repository also the notebook sources (``source/``), their build (``build.py``)
and the autograder (``grade.py``)."""

# The course's own top-level packages: a submission may not pass off their functions as its
# answers (the grader), a release's imports of them must resolve inside it (the release), and a
# graded kernel loads them from the grader's support folder (the environment checks).
PACKAGES = ("es", "pong", "locomotion", "classroom")
