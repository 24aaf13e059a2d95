"""Sources of the numbers on page release_readme (``classroom.release.README``): each milestone's
points are the grader's maximum (``classroom.grade.MILESTONE_MAX``) and the sum of its checks'
points (``classroom.check.CHECKS``); the table names every notebook the release holds."""
import re

from course_numbers import Claim, notebook_names
from course_sources import *   # noqa: F401,F403  (printed, solution, lines, load, fmt, source_of, check_points)


def milestone(name: str, points: int):
    def holds():
        from classroom.check import CHECKS, UNGRADED
        from classroom.grade import MILESTONE_MAX
        from classroom.release import README
        of_checks = sum(p for check, (m, p, _, _) in CHECKS.items() if m == name and check not in UNGRADED)
        assert MILESTONE_MAX[name] == of_checks == points, (name, MILESTONE_MAX[name], of_checks, points)
        listed = re.findall(r"`(\d\d_\w+)\.ipynb`", README)
        assert listed == notebook_names(), listed                # every notebook, in order, once
    return holds


SOURCE = "classroom.grade.MILESTONE_MAX and the points of classroom.check.CHECKS of that milestone"

CLAIMS: list[Claim] = [
    Claim("M1: ES in one thread solves CartPole-v1 (10 points)", milestone("M1", 10), SOURCE),
    Claim("M2: the same in parallel with joblib, each job reseeded (5 points)", milestone("M2", 5), SOURCE),
    Claim("M3: distributed through Redis (5 points)", milestone("M3", 5), SOURCE),
    Claim("better than a random player (10 points)", milestone("M4", 10), SOURCE),
]
