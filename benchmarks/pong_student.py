"""The student's Pong budget: how long notebook 04's training cell runs (2 cores) until its loop
stops at an agent that beats a random player, over several student identifiers, and whether
that agent then passes the grader's test on 20 games it never saw. One JSON line per
identifier, then the medians and maxima.

    python benchmarks/pong_student.py --students ada alan grace --budget 45

The code in the student's place is the notebook's own (``--code notebook``, the default): the
four functions of ``source/04_pong.py``'s answer cells, executed as a student's notebook
would define them, so the figures are those of code written the way the notebook asks, not
of the faster reference in ``pong.env`` (``--code reference``). The loop is the notebook's
(``pong.student.train_until_beats_random`` with the course's settings): the rule on seeds
0..19 every 5 generations once the population's games beat -20, then on 20 unseen games.

Two clocks per identifier (``pong.student.run_minutes``): ``wall_minutes``, what the student
waits for the training cell (generations, the evaluations by the rule, starting the worker
processes), and ``train_minutes``, the generations alone. The grader's test (seeds
1,000,000.., as ``classroom.check.pong_agent`` draws them) runs after the cell and is timed
apart (``grader_minutes``): a student does not wait for it.

    python benchmarks/pong_student.py --code-ratio

times the two codes against each other instead, in one process, alternating (so that other
work on the machine slows both alike): the same Pong games played with the notebook's answer
cells and with the reference, and one ES update each. One JSON line: seconds per game step of
each and their ratio, a figure that does not depend on how busy the machine is.

    python -m classroom release /tmp/kit && python benchmarks/pong_student.py --release /tmp/kit

measures a student's kit instead of this checkout: the loop, the games and the policy are
imported from the release folder (what a student runs), the four functions are still the
notebook's answer cells. Every line carries the machine's 1-minute load average, sampled every
30 s while that identifier trained (``load_mean``, ``load_max``), ``release`` (the folder, or
null for the checkout) and ``loop`` (the file ``pong.student`` was imported from).
"""
import _common  # noqa: F401

import sys  # noqa: E402

if "--release" in sys.argv[:-1]:    # before anything imports pong: the kit's own modules, not this checkout's
    sys.path.insert(0, str(__import__("pathlib").Path(sys.argv[sys.argv.index("--release") + 1]).resolve()))

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from pong.student import StudentCode, beats_random, run_minutes, student_config, train_until_beats_random  # noqa: E402

GRADER_SEEDS = 1_000_000
ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS = ("downsample", "stack_frames", "batched_policy", "es_step")
# The distribution's identifiers: the 8 of the quiet table of 2026-11-25 (docs/benchmarks.md), then 12 more
STUDENTS = ("ada", "alan", "grace", "edsger", "barbara", "student-2", "linus", "hopper",
            "ken", "dennis", "margaret", "niklaus", "frances", "john", "donald", "leslie", "tony", "radia", "guido",
            "bjarne")


def notebook_code(source: Path = ROOT / "source" / "04_pong.py") -> StudentCode:
    """The four functions as notebook 04's answer cells define them: its first code cell (the
    imports) and every code cell with an answer region before section 5, run as a notebook runs
    them (one namespace)."""
    import jupytext     # classroom.build's parse, without importing it: a release has no classroom.build
    text = source.read_text().split("# ## 5. ")[0]
    cells = [c.source for c in jupytext.reads(text, fmt="py:percent").cells if c.cell_type == "code"]
    namespace = {"__name__": "__notebook__"}
    for cell in [cells[0]] + [c for c in cells[1:] if "### BEGIN SOLUTION" in c]:
        exec(compile(cell, str(source), "exec"), namespace)
    return StudentCode(*(namespace[name] for name in FUNCTIONS))


class LoadSampler:
    """The 1-minute load average every ``every`` seconds, in a thread, while a run trains."""

    def __init__(self, every: float = 30.0):
        self.every, self.samples, self._stop = every, [os.getloadavg()[0]], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(self.every):
            self.samples.append(os.getloadavg()[0])

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])
        return {"load_mean": round(statistics.mean(self.samples), 2), "load_max": round(max(self.samples), 2)}


def code_ratio(rounds: int = 5, games: int = 8, cap: int = 1500) -> dict:
    """Seconds per agent step of the same games played with the notebook's code and with the
    reference (one process, alternating, one BLAS thread as in the training loop's worker
    processes), and their ratio."""
    from threadpoolctl import threadpool_limits
    threadpool_limits(1)
    from pong.replay import REFERENCE
    from pong.student import POLICY, play
    notebook = notebook_code()
    params = np.repeat(POLICY.initial_params(1)[None], games, axis=0)
    seconds = {"notebook": 0.0, "reference": 0.0}
    steps = {"notebook": 0, "reference": 0}
    play(REFERENCE, params[:1], [0], 10)                # build the games once, outside the timing
    for r in range(rounds):
        for name, code in (("notebook", notebook), ("reference", REFERENCE))[::1 if r % 2 else -1]:
            t0 = time.perf_counter()
            _, lengths = play(code, params, list(range(100 * r, 100 * r + games)), cap)
            seconds[name] += time.perf_counter() - t0
            steps[name] += int(lengths.sum())
    assert steps["notebook"] == steps["reference"], steps      # the same games, frame for frame
    per = {k: seconds[k] / steps[k] for k in seconds}
    return {"benchmark": "pong_student_code_ratio", "agent_steps": steps["notebook"],
            "us_per_step_notebook": round(per["notebook"] * 1e6, 1),
            "us_per_step_reference": round(per["reference"] * 1e6, 1),
            "ratio": round(per["notebook"] / per["reference"], 3)}


def start_signs(rows: list[dict]) -> dict:
    """What the start of a run looked like, from its record: ``gate_generation``, the first
    generation after which the loop's gate was open (the population's mean over the last 5
    generations above -20; the rule is applied at the next multiple of ``check_every``), and
    ``floor_share_g0_9``, the share of members over generations 0-9 whose fitness was their
    generation's lowest: every one of them lost 21:0 in the shortest game of the generation (tied
    at the minimum), the members that gave the update nothing to tell apart."""
    means = [r["pop_mean"] for r in rows]
    gate = next((g + 1 for g in range(4, len(means)) if np.mean(means[g - 4:g + 1]) > -20.0), None)
    first = [np.asarray(r["returns"]) for r in rows[:10]]
    floor = float(np.mean([(f == f.min()).mean() for f in first])) if first else None
    return {"gate_generation": gate, "floor_share_g0_9": None if floor is None else round(floor, 3)}


def ablation(pairs) -> dict:
    """``["sigma=0.1", ...]`` -> ``{"sigma": 0.1}``, each value of its field's type; an unknown
    name or a value of the wrong type is refused with the names there are."""
    from dataclasses import fields
    from pong.student import StudentConfig
    types = {f.name: f.type for f in fields(StudentConfig) if f.name != "seed"}
    out = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        if name not in types or not value:
            raise SystemExit(f"--set {pair}: expected NAME=VALUE with NAME one of {', '.join(types)}")
        try:
            out[name] = {"int": int, "float": float}[types[name]](value)
        except ValueError:
            raise SystemExit(f"--set {pair}: {name} takes {'an integer' if types[name] == 'int' else 'a number'}") from None
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--students", nargs="+", default=list(STUDENTS), help="identifiers (default: the 20 of STUDENTS)")
    ap.add_argument("--budget", type=float, default=45.0, help="minutes of training before giving up on one")
    ap.add_argument("--generations", type=int, default=None,
                    help="at most this many generations (a budget that does not depend on how busy the machine is)")
    ap.add_argument("--set", nargs="+", default=[], metavar="NAME=VALUE",
                    help="a setting of pong.student.StudentConfig other than the course's (an ablation), e.g. sigma=0.1")
    ap.add_argument("--code", choices=("notebook", "reference"), default="notebook",
                    help="the notebook's answer cells (default) or the reference in pong.env")
    ap.add_argument("--keep", type=Path, default=None, help="keep the run directories under this folder")
    ap.add_argument("--code-ratio", action="store_true", help="time the two codes against each other instead")
    ap.add_argument("--release", type=Path, default=None,
                    help="a student kit (python -m classroom release DIR): run its pong package, not this checkout's")
    args = ap.parse_args()
    import pong.student
    if args.release is not None and not Path(pong.student.__file__).resolve().is_relative_to(args.release.resolve()):
        raise SystemExit(f"pong.student came from {pong.student.__file__}, not from the release {args.release}")
    if args.code_ratio:
        print(json.dumps(code_ratio()), flush=True)
        return
    if args.code == "notebook":
        code = notebook_code()
    else:
        from pong.replay import REFERENCE as code
    chosen = ablation(args.set)         # what the lines call settings: the ablation, not the budget
    settings = {**chosen, **({"generations": args.generations} if args.generations else {})}
    found = []
    for sid in args.students:
        root = Path(tempfile.mkdtemp(prefix="pong-student-")) if args.keep is None else args.keep
        t0, load = time.perf_counter(), LoadSampler()
        config = student_config(sid, **settings)
        verdict, minutes, gens = train_until_beats_random(sid, root / sid, code, budget_minutes=args.budget,
                                                          progress=False, config=config)
        cell, load = time.perf_counter() - t0, load.stop()
        trained = (root / sid / "checkpoint.npz").exists()      # not after --budget 0
        clock = run_minutes(root / sid) if trained else {"wall": 0.0, "train": 0.0}
        ok = verdict is not None and verdict.beats_random
        t1 = time.perf_counter()
        graded = beats_random(code, np.load(root / sid / "checkpoint.npz")["center"],
                              first_seed=GRADER_SEEDS) if ok else None
        rows = pong.student.read_metrics(root / sid)
        row = {"benchmark": "pong_student", "code": args.code, "student": sid, "seed": config.seed,
               "settings": chosen, "cpus": len(os.sched_getaffinity(0)), "beats_random": ok,
               "generations": gens,
               "env_steps": sum(r["env_steps"] for r in rows), **start_signs(rows),
               "wall_minutes": round(clock["wall"], 2), "train_minutes": round(minutes, 2),
               "cell_minutes": round(cell / 60, 2), **load,
               "release": str(args.release) if args.release else None, "loop": pong.student.__file__,
               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "agent_mean": verdict.agent_mean if verdict else None, "agent_ci": verdict.agent_ci if verdict else None,
               "random_mean": verdict.random_mean if verdict else None,
               "random_ci": verdict.random_ci if verdict else None,
               "grader_passes": graded.beats_random if graded else None,
               "grader_agent_mean": graded.agent_mean if graded else None,
               "grader_agent_ci": graded.agent_ci if graded else None,
               "grader_random_mean": graded.random_mean if graded else None,
               "grader_minutes": round((time.perf_counter() - t1) / 60, 2) if graded else None}
        print(json.dumps(row), flush=True)
        good = ok and graded.beats_random
        found.append((clock["wall"], minutes, row["env_steps"], gens) if good else (float("inf"),) * 4)
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)

    def summary(values):
        med, worst = statistics.median(values), max(values)
        return [round(v, 2) if v != float("inf") else None for v in (med, worst)]

    # an identifier that did not pass counts as infinitely slow: the median and maximum say so (null)
    (wall_med, wall_max), (train_med, train_max), (steps_med, steps_max), (gens_med, gens_max) = (
        summary([f[i] for f in found]) for i in range(4))
    print(json.dumps({"benchmark": "pong_student", "code": args.code, "settings": chosen, "students": len(found),
                      "budget_minutes": args.budget, "budget_generations": args.generations,
                      "median_wall_minutes": wall_med, "max_wall_minutes": wall_max,
                      "median_train_minutes": train_med, "max_train_minutes": train_max,
                      "median_env_steps": steps_med, "max_env_steps": steps_max,
                      "median_generations": gens_med, "max_generations": gens_max,
                      "passed": sum(f[0] != float("inf") for f in found)}), flush=True)


if __name__ == "__main__":
    main()
