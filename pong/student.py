"""The student's Pong run: its configuration, its seed, the one evaluation rule, and a loop
that trains until the agent beats a random player.

**The evaluation rule** (notebook 04, the grader, the README and ``benchmarks/pong_student.py``
all call ``beats_random``, and ``python -m es eval CHECKPOINT --episodes 20`` prints the same
``beats_random``): 20 full games of ``ALE/Pong-v5`` (sticky actions 0.25) with the agent and 20
with a uniformly random player on the same seeds; the agent beats random when the 95%
t-interval of its mean (``es.play.mean_ci95``) lies entirely above the random player's.

**Fitness matches it**: members play whole games, so the score ES climbs is the score it is
judged on. Capped 1000-step windows reward delaying the next lost point, and an agent trained
on them reached -5 per window while losing full games about 18:21 (``pong/README.md``). The
cap of 5000 agent steps ends only games far longer than this stage plays (a fresh policy's
last ~900 steps, a -10 agent's ~3,900); without it, the rare policy that holds the ball in an
endless rally (seen in the third generation of a fresh run) kept one game slot busy for
Pong-v5's whole 27,000 steps while the others waited, a generation 10x its usual time.
Equal scores rank by the game's length (``tie_break="length"``: + 1e-5 per step, never
enough to pass a point): at first every member loses 21:0, and the score alone would rank
them all equal; the one that kept the ball in play longest is the one to follow.

**The run seed comes from the student's identifier**, so each student's run is their own, and
a run is a pure function of (config, seed): ``pong.replay`` checks a submitted one.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

GAME_CAP = 5_000          # agent steps per training game (Pong-v5 itself stops at 27,000)
GAMES = 20                # games per evaluation, for the agent and for the random player
STUDENT_SETTINGS = {"population": 64, "sigma": 0.05, "learning_rate": 0.01, "weight_decay": 0.005,
                    "max_steps": GAME_CAP, "generations": 200, "eval_episodes": GAMES,
                    "record_returns": True, "workers": 2, "extra": {"tie_break": "length"}}


def student_seed(student_id: str) -> int:
    """The run seed of ``student_id`` (case and surrounding spaces ignored): 31 bits of a hash."""
    sid = normalise_id(student_id)
    return int.from_bytes(hashlib.sha256(f"es-course pong:{sid}".encode()).digest()[:4], "big") >> 1


def normalise_id(student_id) -> str:
    sid = str(student_id).strip().lower()
    if not sid or sid in ("your-id-here", "none"):
        raise ValueError("set STUDENT_ID to your own identifier (your login or the id the instructor gave you)")
    return sid


def student_config(student_id: str, **overrides):
    """The course's Pong configuration, seeded for ``student_id``."""
    import es
    settings = {**STUDENT_SETTINGS, **overrides, "seed": student_seed(student_id)}
    return es.config_for("pong", **settings)


def student_problem(config, head=None):
    """The problem ``config`` trains on; ``head`` (notebook 04's ``batched_policy``) computes the
    policy's actions in every game, in this process and in the worker processes."""
    from es.training import make_problem_for
    problem = make_problem_for(config)
    if head is None:
        return problem
    from .problem import PongProblem
    return PongProblem.from_spec(problem.spec(), head=head)


@dataclass
class Verdict:
    agent_mean: float
    agent_ci: tuple
    random_mean: float
    random_ci: tuple
    seeds: tuple
    agent_scores: list
    random_scores: list

    @property
    def beats_random(self) -> bool:
        return self.agent_ci[0] > self.random_ci[1]

    def __str__(self) -> str:
        a, r = self.agent_ci, self.random_ci
        verdict = "beats random" if self.beats_random else "does not beat random yet"
        return (f"agent {self.agent_mean:+.2f} [{a[0]:+.2f}, {a[1]:+.2f}] vs random {self.random_mean:+.2f} "
                f"[{r[0]:+.2f}, {r[1]:+.2f}] over {len(self.agent_scores)} full games (seeds {self.seeds[0]}.."
                f"{self.seeds[-1]}): {verdict}")


def interval(scores) -> tuple:
    from es.play import mean_ci95
    return tuple(mean_ci95(scores)[2])


_RANDOM_CACHE: dict = {}


def _play(job):
    from .problem import PongProblem
    params, seeds = job
    problem = PongProblem()
    if params is None:
        return problem.play_random(seeds).tolist()
    return problem.play(params, seeds)[0].tolist()


def beats_random(params, first_seed: int = 0, games: int = GAMES, n_jobs: int = 2) -> Verdict:
    """The evaluation rule: ``games`` full games with ``params`` and with a random player on
    seeds ``first_seed..``; two processes (agent, random) when ``n_jobs`` > 1."""
    seeds = tuple(range(int(first_seed), int(first_seed) + int(games)))
    params = np.asarray(params, dtype=np.float32)
    cached = _RANDOM_CACHE.get(seeds)
    jobs = [(params, seeds)] + ([] if cached is not None else [(None, seeds)])
    if n_jobs > 1 and len(jobs) > 1:
        from joblib import Parallel, delayed
        results = Parallel(n_jobs=min(n_jobs, len(jobs)))(delayed(_play)(j) for j in jobs)
    else:
        results = [_play(j) for j in jobs]
    agent = results[0]
    rand = cached if cached is not None else results[1]
    _RANDOM_CACHE[seeds] = rand
    return Verdict(float(np.mean(agent)), interval(agent), float(np.mean(rand)), interval(rand), seeds, agent, rand)


def train_until_beats_random(config, run_dir, problem=None, *, check_every: int = 5, first_seed: int = 0,
                             budget_minutes: float | None = None, on_generation=None, progress: bool = False):
    """Train ``check_every`` generations at a time (resuming ``run_dir``, bit-identical to one
    long run) and apply the evaluation rule when the population's games have improved on a
    random player's (mean score above -20 over the last ``check_every`` generations). Stops at
    the first passing checkpoint, at ``config.generations`` or after ``budget_minutes`` of
    training. Returns ``(verdict or None, train_seconds, generations)``; evaluation time is
    not training time."""
    import es
    from es.training import _read_metrics, make_evaluator
    run_dir = Path(run_dir)
    verdict, total = None, int(config.generations)
    passed = run_dir / "beats_random.json"      # the first passing checkpoint's verdict: done
    if (verdict := _recorded_verdict(passed, _generations_done(run_dir))) is not None:
        rows = _read_metrics(run_dir / "metrics.jsonl", 1 << 30)
        print(f"{run_dir} already holds an agent that beats random: {verdict}")
        return verdict, rows[-1]["train_seconds"], len(rows)
    problem = problem if problem is not None else student_problem(config)
    evaluator = make_evaluator(config, problem)   # one for every stretch: its worker processes stay up
    try:
        while True:
            done = _generations_done(run_dir)
            if done >= total:
                break
            config.generations = min(total, done + check_every)
            run = es.train(config, problem, run_dir=run_dir, resume=(run_dir / "checkpoint.npz").exists(),
                           evaluator=evaluator, final_eval=False, on_generation=on_generation, progress=progress)
            rows = _read_metrics(run_dir / "metrics.jsonl", run.summary["generations"])
            seconds = rows[-1]["train_seconds"] if rows else 0.0
            if np.mean([r["pop_mean"] for r in rows[-check_every:]]) > -20.0:
                verdict = beats_random(run.center, first_seed)
                print(f"generation {run.summary['generations']} ({seconds / 60:.1f} min of training): {verdict}",
                      flush=True)
                if verdict.beats_random:
                    passed.write_text(json.dumps({"generation": run.summary["generations"], **asdict(verdict)}) + "\n")
                    break
            if budget_minutes is not None and seconds >= 60 * budget_minutes:
                break
    finally:
        evaluator.close()
        config.generations = total
    rows = _read_metrics(run_dir / "metrics.jsonl", 1 << 30)
    return verdict, (rows[-1]["train_seconds"] if rows else 0.0), len(rows)


def _recorded_verdict(path: Path, generation: int) -> Verdict | None:
    """The verdict recorded for the checkpoint at ``generation``, or None. A record of another
    checkpoint, or one that is not a whole verdict (edited, truncated, an older layout), proves
    nothing: the run goes on as if it were absent."""
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
        if record.pop("generation", None) != generation:
            return None
        verdict = Verdict(**record)
        str(verdict)                            # every field has the type the message needs
        return verdict
    except (OSError, ValueError, TypeError, AttributeError, IndexError, KeyError) as e:
        print(f"{path} is not a whole verdict ({type(e).__name__}: {e}); training goes on as if it were absent")
        return None


def _generations_done(run_dir: Path) -> int:
    if not (run_dir / "checkpoint.npz").exists():
        return 0
    from es.checkpoint import load_checkpoint
    return int(load_checkpoint(run_dir / "checkpoint.npz")[1]["generation"])

