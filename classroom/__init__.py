"""The course: notebook sources in ``source/``, the build (``build.py``), the checks a student
runs (``check.py``), the autograder (``grade.py``)."""
