"""The course: notebook sources in ``course/``, the build (``build.py``), the checks a student
runs (``es.check``) and the autograder (``grade.py``)."""
