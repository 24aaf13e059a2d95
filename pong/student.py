"""The student's Pong run (notebook 04): the course's settings, a seed from the student's
identifier, a training loop around the student's own code, and the one evaluation rule.

This module ships in the student release, so it holds no reference implementation of a
graded function: the four functions a student writes in notebook 04 come in as a
``StudentCode`` and do the work (``downsample`` and ``stack_frames`` build the observations
``pong.games`` hands out, ``batched_policy`` picks every action of every game,
``es_step`` updates the parameters). The loop around them is plumbing: perturbations from
seeds, games in two worker processes, a record that lets the grader replay the run, resuming.

**The record** (``RUN_DIR``): ``config.json`` (the settings and the run seed),
``metrics.jsonl`` (per generation: every member's fitness, as ``es_step`` got it),
``centers.npy`` (the parameters before every generation and after the last), and
``checkpoint.npz`` (the center and the state of ``es_step``, to resume). Two clocks, summed
over every session that trained the run: ``train_seconds`` (the generations alone) and
``wall_seconds`` (what the student waited: the generations, the evaluations by the rule and
starting the worker processes; ``run_minutes`` reads both). The grader's ``pong.replay``
(in the course repository) checks it: the identity, each center against the course's update of the one before, and a
few recorded games played again.

**Fitness** is the score of a whole game (capped at ``GAME_CAP`` agent steps; points won minus
points lost), plus 1e-5 per step the game lasted, never enough to pass a point: at first every
member loses 21:0, and the one that kept the ball in play longest is the one to follow.

**The evaluation rule** (notebook 04, the grader, the course repository's ``benchmarks/pong_student.py``): 20 full
games of ``ALE/Pong-v5`` with the agent and 20 with a uniformly random player on the same
seeds; the agent beats random when the 95% t-interval of its mean (``es.play.mean_ci95``,
the interval the course repository's ``python -m es eval`` prints) lies entirely above the random player's.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Callable

import numpy as np
from joblib import Parallel, delayed
from tqdm.auto import tqdm

from es import seeding
from es.checkpoint import load_checkpoint, save_checkpoint
from es.play import mean_ci95
from es.policies import split_layers

from .games import PONG_ACTIONS, PongGames, play_random
from .policy import PongDensePolicy

GAMES = 20            # games per evaluation, for the agent and for the random player
RESUMABLE = {"generations", "check_every", "workers"}   # may change between sessions: the run stays the same
POLICY = PongDensePolicy()      # band features (1176) -> 3 action logits: W (1176, 3) and b (3,)


@dataclass(frozen=True)
class StudentConfig:
    """The course's settings; ``seed`` comes from the student's identifier."""
    seed: int
    population: int = 64
    sigma: float = 0.05
    learning_rate: float = 0.01
    weight_decay: float = 0.005
    game_cap: int = 5_000       # agent steps per training game (Pong-v5 itself stops at 27,000)
    generations: int = 200      # at most; training stops at the first agent that beats random
    check_every: int = 5        # generations between evaluations, once the population beats -20
    workers: int = 2


@dataclass(frozen=True)
class StudentCode:
    """The four functions of notebook 04 (see there for what each takes and returns)."""
    downsample: Callable        # (k, 210, 160) uint8 -> (k, 42, 42) uint8
    stack_frames: Callable      # (k, 4, 42, 42), (k, 42, 42) -> (k, 4, 42, 42)
    batched_policy: Callable    # W (P, F, 3), b (P, 3), features (P, F) -> actions (P,)
    es_step: Callable           # (center, noise, fitness, state, sigma, lr, weight_decay) -> (center, state)


def normalise_id(student_id) -> str:
    sid = str(student_id).strip().lower()
    if not sid or sid in ("your-id-here", "none"):
        raise ValueError("set STUDENT_ID to your own identifier (your login or the id the instructor gave you)")
    return sid


def student_seed(student_id: str) -> int:
    """The run seed of ``student_id`` (case and surrounding spaces ignored): 31 bits of a hash."""
    return int.from_bytes(hashlib.sha256(f"es-course pong:{normalise_id(student_id)}".encode()).digest()[:4],
                          "big") >> 1


def student_config(student_id: str, **overrides) -> StudentConfig:
    return StudentConfig(seed=student_seed(student_id), **overrides)


def identity_note(student_id: str, folder=None) -> str:
    """What the grader will check, said before training starts (notebook 04 prints it)."""
    sid, folder = normalise_id(student_id), Path(folder or Path.cwd())
    note = (f"Training as {sid!r} (run seed {student_seed(sid)}). The grader replays this run only for {sid!r}: "
            f"it takes the student from the top-level folder of your submission (CLASS/{sid}/...), or from "
            f"--student {sid}.")
    if normalise_id(folder.name) != sid:
        note += (f" This notebook runs in {folder.name!r}: when you hand it in, put it with its run folder in a "
                 f"folder named {sid!r}, or tell your instructor to grade it with --student {sid}.")
    return note


def perturbations(seed: int, generation: int, population: int, dim: int) -> np.ndarray:
    """Mirrored noise of one generation, ``(population, dim)`` float32: member 2k is +eps_k and
    member 2k+1 is -eps_k, every eps_k from the generation's own seeded stream."""
    half = seeding.rng_for(seed, seeding.NOISE, generation).standard_normal((population // 2, dim), dtype=np.float32)
    return np.stack([half, -half], axis=1).reshape(population, dim)


# ---- games ----
_GAMES: PongGames | None = None     # per process: building 32 games costs seconds


def play(code: StudentCode, params, seeds, cap: int | None = None):
    """One game per row of ``params`` on the matching seed: (score, agent steps)."""
    global _GAMES
    params = np.asarray(params, dtype=np.float32)
    if _GAMES is None:
        _GAMES = PongGames(32, code.downsample, code.stack_frames)
    _GAMES.downsample, _GAMES.stack = code.downsample, code.stack_frames
    (w, b), = split_layers(params, [(POLICY.num_features, 3)])

    def choose(episodes, obs):
        actions = np.asarray(code.batched_policy(w[episodes], b[episodes, 0], POLICY.features(obs)))
        if actions.shape != (len(episodes),) or not np.isin(actions, (0, 1, 2)).all():
            raise ValueError(f"batched_policy returned {actions!r:.80}; expected one action in 0, 1, 2 per member")
        return actions.astype(np.int64)

    return _GAMES.play(choose, seeds, cap)


def _chunk(code, config: StudentConfig, center, generation, first, end, seeds, with_center):
    noise = perturbations(config.seed, generation, config.population, center.size)[first:end]
    params = center[None, :] + np.float32(config.sigma) * noise
    if with_center:
        params = np.vstack([params, center[None, :]])
    scores, lengths = play(code, params, np.repeat(seeds[:1], len(params)), config.game_cap)
    return scores + 1e-5 * lengths, lengths


def evaluate_generation(code, config, center, generation, parallel):
    """Fitness of every member and of the center on the generation's game seed."""
    seeds = seeding.episode_seeds(config.seed, generation, 1)
    step = max(2, config.population // (2 * config.workers))
    bounds = [(a, min(a + step, config.population)) for a in range(0, config.population, step)]
    jobs = [delayed(_chunk)(code, config, center, generation, a, b, seeds, i == len(bounds) - 1)
            for i, (a, b) in enumerate(bounds)]
    out = parallel(jobs) if parallel is not None else [j[0](*j[1], **j[2]) for j in jobs]
    fitness, lengths = np.concatenate([o[0] for o in out]), np.concatenate([o[1] for o in out])
    return fitness[:-1], lengths[:-1], float(fitness[-1]), int(lengths[-1])


# ---- the evaluation rule ----
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


_RANDOM_CACHE: dict = {}
CONFIRM_SEEDS = 500_000       # confirmation games: never the notebook's 0..19, never the grader's 1,000,000..


def beats_random(code: StudentCode, params, first_seed: int = 0, games: int = GAMES, n_jobs: int = 2) -> Verdict:
    """The evaluation rule on seeds ``first_seed..``: the agent (played with ``code``) and a
    random player, in two processes when ``n_jobs`` > 1."""
    seeds = tuple(range(int(first_seed), int(first_seed) + int(games)))
    params = np.asarray(params, dtype=np.float32)[None, :].repeat(len(seeds), axis=0)
    agent_job = delayed(play)(code, params, seeds)
    if seeds not in _RANDOM_CACHE:
        jobs = [agent_job, delayed(play_random)(seeds)]
        agent, rand = Parallel(n_jobs=min(n_jobs, 2))(jobs) if n_jobs > 1 else [j[0](*j[1]) for j in jobs]
        _RANDOM_CACHE[seeds] = [float(x) for x in rand]
    else:
        agent = play(code, params, seeds)
    scores = [float(x) for x in agent[0]]
    rand = _RANDOM_CACHE[seeds]
    return Verdict(float(np.mean(scores)), tuple(mean_ci95(scores)[2]), float(np.mean(rand)),
                   tuple(mean_ci95(rand)[2]), seeds, scores, rand)


# ---- the run ----
class StudentRun:
    """A run directory: start it, resume it bit for bit, append one generation at a time."""

    def __init__(self, run_dir, config: StudentConfig):
        self.dir, self.config = Path(run_dir), config
        self.dir.mkdir(parents=True, exist_ok=True)
        saved, fixed = self.dir / "config.json", {k: v for k, v in asdict(config).items() if k not in RESUMABLE}
        try:
            before = json.loads(saved.read_text()) if saved.exists() else None
        except ValueError:
            before = {}
        if before is not None and (not isinstance(before, dict) or
                                   {k: v for k, v in before.items() if k not in RESUMABLE} != fixed):
            raise ValueError(f"{self.dir} holds a run with other settings ({saved}); use another RUN_DIR, or delete "
                             "the folder to start over")
        saved.write_text(json.dumps(asdict(config), indent=2) + "\n")
        if (self.dir / "checkpoint.npz").exists():
            center, meta, state = load_checkpoint(self.dir / "checkpoint.npz")
            self.generation, self.train_seconds = int(meta["generation"]), float(meta["train_seconds"])
            self.wall_seconds = float(meta.get("wall_seconds", self.train_seconds))   # older runs: training only
            self.state = state_from_arrays(state)
            self.centers = list(np.load(self.dir / "centers.npy")[:self.generation + 1])
            self.rows = read_metrics(self.dir)[:self.generation]
            if len(self.centers) != self.generation + 1 or not np.array_equal(self.centers[-1], center):
                raise ValueError(f"{self.dir}: centers.npy does not match checkpoint.npz; delete the folder to start over")
        else:
            self.generation, self.train_seconds, self.wall_seconds, self.state, self.rows = 0, 0.0, 0.0, None, []
            self.centers = [POLICY.initial_params(config.seed)]

    @property
    def center(self) -> np.ndarray:
        return self.centers[-1]

    def step(self, code: StudentCode, parallel, clock=None) -> dict:
        """One generation; ``clock()`` gives the run's wall seconds so far (the record keeps it)."""
        c, g, t0 = self.config, self.generation, time.perf_counter()
        fitness, lengths, center_fitness, center_length = evaluate_generation(code, c, self.center, g, parallel)
        noise = perturbations(c.seed, g, c.population, self.center.size)
        new, state = code.es_step(self.center.copy(), noise, fitness.copy(), self.state, c.sigma, c.learning_rate,
                                  c.weight_decay)
        new = np.asarray(new)
        if new.shape != self.center.shape or not np.all(np.isfinite(new)):
            raise ValueError(f"es_step returned parameters of shape {new.shape} (expected {self.center.shape}, all "
                             "finite); check it with check.es_step")
        self.centers.append(new.astype(np.float32))
        self.state, self.generation = state, g + 1
        self.train_seconds += time.perf_counter() - t0
        row = {"generation": g, "returns": fitness.tolist(), "pop_mean": float(fitness.mean()),
               "pop_max": float(fitness.max()), "center_return": center_fitness,
               "env_steps": int(lengths.sum()) + center_length, "train_seconds": self.train_seconds}
        if clock is not None:
            self.wall_seconds = clock()
            row["wall_seconds"] = self.wall_seconds
        self.rows.append(row)
        self._save()
        return row

    def save_clock(self, wall_seconds: float):
        """Record the wall clock after work that is not a generation (an evaluation)."""
        self.wall_seconds = float(wall_seconds)
        if self.generation:
            self._save()

    def _save(self):
        with open(self.dir / "metrics.jsonl", "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in self.rows)
        tmp = self.dir / "centers.npy.tmp"
        with open(tmp, "wb") as f:
            np.save(f, np.stack(self.centers))
        os.replace(tmp, self.dir / "centers.npy")
        save_checkpoint(self.dir / "checkpoint.npz", self.center, {"generation": self.generation,
                        "train_seconds": self.train_seconds, "wall_seconds": self.wall_seconds,
                        "num_params": int(self.center.size),
                        "problem": {"kind": "pong", "env_id": "ALE/Pong-v5", "policy": POLICY.spec(),
                                    "max_steps": self.config.game_cap}}, state_to_arrays(self.state))


def state_to_arrays(state) -> dict:
    """``es_step``'s state as the checkpoint saves it: a dict of named numeric arrays (``None``,
    before the first update, saves nothing). Anything else raises ValueError: the checkpoint
    could not hold it, and a resumed run could not read it back."""
    if state is None or (isinstance(state, dict) and not state):
        return {}
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise ValueError(f"es_step's state is a {type(state).__name__}; it must be a dict of arrays and numbers "
                         "with names as keys (e.g. {'m': m, 'v': v, 't': t}): the checkpoint saves it by name")
    arrays = {k: np.asarray(v) for k, v in state.items()}
    odd = [k for k, a in arrays.items() if a.dtype.kind not in "biuf"]
    if odd:
        raise ValueError(f"es_step's state holds {', '.join(repr(k) for k in odd)}, which is not an array or a "
                         "number; the checkpoint saves arrays and numbers only")
    return arrays


def state_from_arrays(arrays: dict):
    """What ``state_to_arrays`` saved, as ``es_step`` gets it back when a run resumes: 0-d
    arrays become Python numbers."""
    if not arrays:
        return None
    return {k: (v.item() if v.ndim == 0 else v) for k, v in arrays.items()}


def read_metrics(run_dir) -> list[dict]:
    path = Path(run_dir) / "metrics.jsonl"
    rows = []
    for line in (path.read_text().splitlines() if path.exists() else []):
        try:
            rows.append(json.loads(line))
        except ValueError:
            break      # a line cut short by a crash: the checkpoint is older
    return rows


def train_until_beats_random(student_id: str, run_dir, code: StudentCode, *, budget_minutes: float | None = None,
                             first_seed: int = 0, progress: bool = True, config: StudentConfig | None = None):
    """Train (resuming ``run_dir``) until the agent beats random on seeds ``first_seed..`` and
    again on 20 seeds it never saw (from ``CONFIRM_SEEDS``, new ones at each check), for at
    most ``config.generations`` generations or ``budget_minutes`` of training. The rule is
    applied every ``check_every`` generations once the population's games beat -20 on average.
    Returns ``(verdict or None, minutes of training, generations)``; evaluation is not training
    (``run_minutes(run_dir)["wall"]`` is the time on the clock, evaluations included)."""
    t0 = time.perf_counter()
    config = config or student_config(student_id)
    run = StudentRun(run_dir, config)
    passed = run.dir / "beats_random.json"
    verdict = _recorded_verdict(passed, run.generation)
    if verdict is not None:
        print(f"{run.dir} already holds an agent that beats random: {verdict}")
        return verdict, run.train_seconds / 60, run.generation
    wall_before = run.wall_seconds
    clock = lambda: wall_before + time.perf_counter() - t0      # noqa: E731 -- this session's time, added
    bar = tqdm(total=config.generations, initial=run.generation, unit="gen", desc=f"Pong {normalise_id(student_id)}",
               disable=not progress)
    with Parallel(n_jobs=config.workers) as parallel:
        while run.generation < config.generations:
            if budget_minutes is not None and run.train_seconds >= 60 * budget_minutes:
                break
            row = run.step(code, parallel, clock)
            bar.update(1)
            bar.set_postfix_str(f"population {row['pop_mean']:.2f} | best {row['pop_max']:.1f} | "
                                f"{run.train_seconds / 60:.1f} min")
            recent = run.rows[-config.check_every:]
            if run.generation % config.check_every == 0 and np.mean([r["pop_mean"] for r in recent]) > -20.0:
                verdict = beats_random(code, run.center, first_seed)
                bar.write(f"generation {run.generation} ({run.train_seconds / 60:.1f} min of training): {verdict}")
                run.save_clock(clock())
                if verdict.beats_random:
                    # Picked for passing on these 20 games, the agent was picked partly for its luck
                    # on them; 20 games it never saw (as the grader's will be) must agree.
                    confirm = beats_random(code, run.center, CONFIRM_SEEDS + GAMES * (run.generation // config.check_every))
                    bar.write(f"  and on 20 games it never saw: {confirm}")
                    run.save_clock(clock())
                    if confirm.beats_random:
                        passed.write_text(json.dumps({"generation": run.generation, **asdict(verdict)}) + "\n")
                        break
                verdict = None
    bar.close()
    run.save_clock(clock())
    return verdict, run.train_seconds / 60, run.generation


def run_minutes(run_dir) -> dict:
    """``{"train": ..., "wall": ...}``: minutes of training, and minutes on the clock (training,
    evaluations and starting processes), summed over every session of the run in ``run_dir``."""
    _, meta, _ = load_checkpoint(Path(run_dir) / "checkpoint.npz")
    train = float(meta["train_seconds"])
    return {"train": train / 60, "wall": float(meta.get("wall_seconds", train)) / 60}


def _recorded_verdict(path: Path, generation: int) -> Verdict | None:
    """The verdict recorded for the checkpoint at ``generation``, or None. A record of another
    checkpoint, or one that is not a whole verdict (edited, truncated, an older layout), proves
    nothing: the run goes on as if it were absent."""
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
        if record.pop("generation", None) != generation or set(record) != {f.name for f in fields(Verdict)}:
            return None
        verdict = Verdict(**record)
        str(verdict)                            # every field has the type the message needs
        return verdict
    except (OSError, ValueError, TypeError, AttributeError, IndexError, KeyError) as e:
        print(f"{path} is not a whole verdict ({type(e).__name__}: {e}); training goes on as if it were absent")
        return None


__all__ = ["StudentCode", "StudentConfig", "Verdict", "beats_random", "identity_note", "perturbations", "play",
           "run_minutes", "state_from_arrays", "state_to_arrays", "student_config", "student_seed",
           "train_until_beats_random", "PONG_ACTIONS"]
