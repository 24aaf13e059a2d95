"""The course's classroom package: in a student release, the checks a student runs
(``check.py``) and the code the notebooks drive; in the course repository also the notebook
sources (``source/``), their build (``build.py``) and the autograder (``grade.py``)."""
