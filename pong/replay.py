"""Check that a submitted Pong run is the student's own work (the grader's side; it does not
ship in the student release). A run is a pure function of the settings, the seed and the
student's code (``pong.student``), and its record lets the grader check it without running
any of that code:

1. **Identity.** ``config.json`` must be the course's settings with the run seed of the student
   being graded: a classmate's run, the shipped agent's or an edited config are someone else's.
2. **The chain.** ``centers.npy`` holds the parameters before every generation. The first must
   be the seeded initial parameters; each next one must be what the course's ES update makes
   of the one before and that generation's recorded fitness (the noise comes from the seed),
   within ``STEP_TOLERANCE`` of a step (the student's own ``es_step`` computed it, in its own
   floating point); the last must be the checkpoint's. Centers that lead anywhere else, or
   fitness edited to steer them, break it.
3. **The games.** A few (generation, member) games drawn with the grader's generator are played
   again with the course's preprocessing and policy: each must give the recorded fitness
   exactly (Pong is deterministic given the seed; a student's ``downsample`` and
   ``stack_frames`` that pass their checks are exact, so their games are the same games).

``pong.student.beats_random`` on seeds the run never saw then decides the points.
"""
from __future__ import annotations

import json
import math
import time
import zipfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from es import seeding
from es.checkpoint import load_checkpoint
from es.errors import ESError
from es.optimizers import adam_step
from es.shaping import centered_ranks

from .env import downsample_batch, stack_batch
from .student import POLICY, RESUMABLE, StudentCode, StudentConfig, perturbations, play, student_config

MAX_FILE_BYTES = 50 << 20
MAX_GENERATIONS = 2000
STEP_TOLERANCE = 1e-3        # of the learning rate: a center may differ this much from the course's update
FREE = RESUMABLE                     # settings a student may change without changing the run


class RunRejected(Exception):
    pass


@dataclass
class Replay:
    generations: int
    center: np.ndarray
    chain_max_diff: float        # largest deviation from the course's update, in learning rates
    episodes: list               # (generation, member, recorded, replayed)
    seconds: float


def reference_policy(w, b, features):
    return (np.einsum("pf,pfa->pa", features, w) + b).argmax(axis=1)


def reference_es_step(center, noise, fitness, state, sigma, lr, weight_decay):
    """The course's update: centered ranks, the ES gradient with weight decay, one Adam ascent
    step (``es.optimizers.adam_step``: betas 0.9, 0.999, epsilon 1e-8, bias correction), in float64."""
    w = centered_ranks(fitness).astype(np.float64)      # float32 ranks: recorded answers hold these bits
    grad = noise.T.astype(np.float64) @ w / (len(fitness) * sigma) - weight_decay * center.astype(np.float64)
    return adam_step(center, grad, state, lr)


REFERENCE = StudentCode(downsample_batch, stack_batch, reference_policy, reference_es_step)


def _read(path: Path, what: str) -> bytes:
    if path.is_symlink() or not path.is_file():
        raise RunRejected(f"the run directory has no {path.name} ({what})"
                          + (" (it is a symbolic link: submit the file itself)" if path.is_symlink() else ""))
    if path.stat().st_size > MAX_FILE_BYTES:
        raise RunRejected(f"{path.name} is larger than {MAX_FILE_BYTES >> 20} MB")
    return path.read_bytes()


def _centers(path: Path, dim: int) -> np.ndarray:
    """``centers.npy`` checked from its header before any array is read."""
    _read(path, "the parameters before every generation")
    with open(path, "rb") as f:
        try:
            version = np.lib.format.read_magic(f)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read_header(f)
        except (ValueError, OSError) as exc:
            raise RunRejected(f"centers.npy is not a NumPy array file ({exc})") from None
        if dtype != np.float32 or len(shape) != 2 or shape[1] != dim or not 1 <= shape[0] <= MAX_GENERATIONS + 1:
            raise RunRejected(f"centers.npy holds {dtype} {shape}, not float32 (generations + 1, {dim})")
        out = np.fromfile(f, dtype=np.float32, count=shape[0] * dim)
    if out.size != shape[0] * dim or not np.all(np.isfinite(out)):
        raise RunRejected("centers.npy is truncated or has non-finite values")
    return out.reshape(shape)


def load_run(run_dir, student_id: str, settings: StudentConfig | None = None):
    """(config, fitness per generation, centers, checkpoint center) of a run the course's
    settings (``settings``: others, for tests) made for ``student_id``; RunRejected says what is
    wrong and what to do."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunRejected(f"{run_dir} is not a folder: submit the run folder your notebook trained into")
    want = replace(settings, seed=student_config(student_id).seed) if settings else student_config(student_id)
    try:
        raw = json.loads(_read(run_dir / "config.json", "the run's settings"))
    except ValueError:
        raise RunRejected("config.json is not JSON") from None
    if not isinstance(raw, dict) or set(raw) != set(asdict(want)):
        raise RunRejected("config.json is not the settings of a course run (pong.student.StudentConfig)")
    if raw["seed"] != want.seed:
        raise RunRejected(f"this run was trained as another student: its seed {raw['seed']} is not the seed of "
                          f"{student_id!r} ({want.seed}). The grader takes the student from the top-level folder of "
                          "the submission; if that folder is not named like the STUDENT_ID you trained with, rename "
                          "it, or ask your instructor to grade with --student ID")
    differ = [k for k, v in asdict(want).items() if k not in FREE and raw[k] != v]
    if differ:
        raise RunRejected(f"the run's settings differ from the course's in {', '.join(differ)}; train with "
                          "pong.student.train_until_beats_random as notebook 04 does")
    config = want.__class__(**{**asdict(want), **{k: raw[k] for k in FREE if isinstance(raw[k], int)}})
    fitness = []
    for n, line in enumerate(_read(run_dir / "metrics.jsonl", "each generation's fitness").decode(
            "utf-8", "replace").splitlines()):
        try:
            row = json.loads(line)
        except ValueError:
            raise RunRejected(f"metrics.jsonl line {n + 1} is not JSON") from None
        r = row.get("returns") if isinstance(row, dict) else None
        if not isinstance(r, list) or row.get("generation") != n or len(r) != config.population \
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in r):
            raise RunRejected(f"metrics.jsonl line {n + 1} is not generation {n} with {config.population} fitness values")
        fitness.append(np.array(r, dtype=np.float64))
    if not 1 <= len(fitness) <= MAX_GENERATIONS:
        raise RunRejected(f"metrics.jsonl records {len(fitness)} generations (between 1 and {MAX_GENERATIONS})")
    centers = _centers(run_dir / "centers.npy", POLICY.num_params)
    _read(run_dir / "checkpoint.npz", "the trained parameters")
    try:
        center, meta, _ = load_checkpoint(run_dir / "checkpoint.npz", max_bytes=MAX_FILE_BYTES)
    except (ESError, zipfile.BadZipFile) as exc:
        raise RunRejected(str(exc)) from None
    if meta.get("generation") != len(fitness) or len(centers) != len(fitness) + 1:
        raise RunRejected(f"the checkpoint is at generation {meta.get('generation')}, centers.npy has {len(centers)} "
                          f"centers and metrics.jsonl {len(fitness)} generations: they come from different moments")
    return config, fitness, centers, center


def verify_run(run_dir, student_id: str, rng: np.random.Generator, episodes: int = 6,
               settings: StudentConfig | None = None) -> Replay:
    """Raises RunRejected with the reason, or returns what was replayed."""
    t0 = time.perf_counter()
    config, fitness, centers, center = load_run(run_dir, student_id, settings)
    if not np.array_equal(centers[0], POLICY.initial_params(config.seed)):
        raise RunRejected("the run does not start from its seed's initial parameters (centers.npy[0])")
    if not np.array_equal(centers[-1], center):
        raise RunRejected("the checkpoint's parameters are not the last entry of centers.npy")
    worst, state = 0.0, None
    for g, f in enumerate(fitness):
        noise = perturbations(config.seed, g, config.population, centers.shape[1])
        want, state = reference_es_step(centers[g].astype(np.float64), noise, f, state, config.sigma,
                                        config.learning_rate, config.weight_decay)
        diff = float(np.max(np.abs(centers[g + 1] - want))) / config.learning_rate
        worst = max(worst, diff)
        if not diff <= STEP_TOLERANCE:
            raise RunRejected(f"generation {g}: the parameters after it are not the course's ES update of the ones "
                              f"before with the recorded fitness (off by {diff:.3g} learning rates): centers.npy, "
                              "the checkpoint or metrics.jsonl were edited, or es_step is not the notebook's update")
    seen = []
    picks = sorted({(int(rng.integers(len(fitness))), int(rng.integers(config.population))) for _ in range(episodes)})
    for g, m in picks:
        params = centers[g] + np.float32(config.sigma) * perturbations(config.seed, g, config.population,
                                                                       centers.shape[1])[m]
        seed = int(seeding.episode_seeds(config.seed, g, 1)[0])
        score, length = play(REFERENCE, params[None], [seed], config.game_cap)
        got = float(score[0] + 1e-5 * length[0])
        seen.append((g, m, float(fitness[g][m]), got))
        if got != fitness[g][m]:
            raise RunRejected(f"generation {g}, member {m}: the run records a fitness of {fitness[g][m]:+.5f}, but "
                              f"playing that member's game again gives {got:+.5f}: the fitness was not played by this "
                              "run's policies (or downsample / stack_frames / batched_policy are not exact)")
    return Replay(len(fitness), center, worst, seen, time.perf_counter() - t0)
