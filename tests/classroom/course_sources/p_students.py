"""Sources of the numbers on page students (docs/students.md): the points from the checks
(``classroom.check.CHECKS``) and the grader's maxima (``classroom.grade.MILESTONE_MAX``), the
seeds and the rule from the code that applies them, the random player's score from the
committed record of notebook 04's run."""
import inspect
import re

from course_numbers import Claim
from course_sources import *   # noqa: F401,F403  (printed, solution, lines, load, fmt, source_of, check_points)
from course_sources import cells, check_points, load

def points(notebook: str, milestone: str | None = None, extras: bool = False) -> int:
    """The points of a notebook's graded checks: those of ``milestone`` or of its extras."""
    from classroom.check import CHECKS, UNGRADED
    return sum(p for name, (m, p, nb, _) in CHECKS.items()
               if nb == notebook and name not in UNGRADED and (m == "extras") == extras
               and (milestone is None or m == milestone))


def _points():
    from classroom.grade import MILESTONE_MAX
    m1 = points("00_es_from_scratch", "M1") + points("01_cartpole", "M1")
    milestones = {"M1": m1, "M2": points("02_parallel", "M2"), "M3": points("03_redis", "M3"),
                  "M4": points("04_pong", "M4")}
    assert milestones == MILESTONE_MAX, (milestones, MILESTONE_MAX)
    extras = {nb: points(nb, extras=True) for nb in ("03_redis", "05_extras", "06_locomotion")}
    everything = sum(check_points(nb) for nb in
                     ("00_es_from_scratch", "01_cartpole", "02_parallel", "03_redis", "04_pong", "05_extras",
                      "06_locomotion"))
    assert everything == sum(MILESTONE_MAX.values()) + sum(extras.values())       # no check left out
    return (f"Points: M1 = {m1} (notebooks 00 and 01), M2 = {MILESTONE_MAX['M2']}, M3 = {MILESTONE_MAX['M3']}, "
            f"M4 = {MILESTONE_MAX['M4']}; the extras add {sum(extras.values())} on top (03: {extras['03_redis']}; "
            f"05: {extras['05_extras']}; 06: {extras['06_locomotion']})")


POINTS = ("Points: M1 = 10 (notebooks 00 and 01), M2 = 5, M3 = 5, M4 = 10; the extras add 18 on top (03: 5; 05: 5; "
          "06: 8)")


def _points_hold():
    assert _points() == POINTS, _points()


def _extras_sections():
    """The sections of notebook 03 whose checks are extras."""
    from classroom.check import CHECKS
    extras = {name for name, (m, _, nb, _) in CHECKS.items() if nb == "03_redis" and m == "extras"}
    section, found = None, set()
    for kind, src, _ in cells("03_redis"):
        heading = re.search(r"^## (\d+)\.", src, re.M) if kind == "markdown" else None
        if heading:
            section = heading.group(1)
        for name in extras:
            if kind == "code" and re.search(rf"^check\.{name}\(", src, re.M):
                found.add(section)
    assert found == {"5", "7"}, found


def _halfcheetah():
    from classroom.mujoco_runs import TASKS
    assert TASKS["halfcheetah"][2] == 3430.0


def _seeds():
    from classroom import check, release
    assert check.RELEASE_SEEDS == release.RECORDED_SEEDS == (11, 22, 33)


def _rule():
    """20 games each, the first check on seeds 0..19, the confirmation and the grader on new seeds,
    a 95% t-interval; the random player's score on 0..19 from the record of notebook 04's run."""
    from classroom import check
    from es.play import _T95, mean_ci95
    from pong import student
    assert student.GAMES == 20
    assert inspect.signature(student.beats_random).parameters["games"].default == student.GAMES
    assert inspect.signature(student.train_until_beats_random).parameters["first_seed"].default == 0
    assert "beats_random(code, run.center, CONFIRM_SEEDS + GAMES" in inspect.getsource(student.train_until_beats_random)
    assert "beats_random(REFERENCE, replay.center, first_seed=first)" in inspect.getsource(check._RAW["pong_agent"])
    assert "95% t-interval" in mean_ci95.__doc__ and round(_T95[student.GAMES - 2], 3) == 2.093   # t(0.975, 19)
    run = load("solutions/pong-run/beats_random.json")
    assert run["seeds"] == list(range(20)) and f"{run['random_mean']:.2f}" == "-20.25"


CLAIMS: list[Claim] = [
    Claim("M3; sections 5 to 7 extras (graded checks in 5 and 7)", _extras_sections, "the sections of source/03_redis.py whose checks "
          "classroom.check registers as extras"),
    Claim("then your functions train MuJoCo's HalfCheetah past 3,430", _halfcheetah,
          "classroom.mujoco_runs.TASKS (the threshold training stops at)"),
    Claim("on the input seeds 11, 22 and 33 (`classroom/expected.json`)", _seeds,
          "classroom.check.RELEASE_SEEDS, classroom.release.RECORDED_SEEDS"),
    Claim("twice: on seeds 0..19, then on 20 games it has never seen (the first agent to pass on 0..19", _rule,
          "pong.student.train_until_beats_random and beats_random"),
    Claim("20 full games of `ALE/Pong-v5` with your agent and 20 with a uniformly random player on the same seeds; "
          "your agent beats random when the 95% t-interval of its mean lies entirely above the random player's. The "
          "random player scores -20.25 on seeds 0..19.", _rule,
          "pong.student (GAMES, beats_random), es.play.mean_ci95, solutions/pong-run/beats_random.json"),
    Claim("plays your agent on 20 games on seeds it never saw", _rule, "classroom.check.pong_agent -> beats_random"),
    Claim(POINTS, _points_hold, "classroom.check.CHECKS (points, milestone, notebook) and classroom.grade.MILESTONE_MAX"),
]
