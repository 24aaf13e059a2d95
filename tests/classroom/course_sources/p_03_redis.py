"""Sources of the numbers on page 03_redis."""
from course_numbers import Claim
from course_sources import *   # noqa: F401,F403  (printed, solution, lines, load, fmt, source_of, check_points)

CLAIMS: list[Claim] = [
]
