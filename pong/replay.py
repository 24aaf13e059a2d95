"""Check that a submitted Pong run is the student's own: ES is a pure function of (config, seed).

``verify_run(run_dir, student_id, rng)`` reads ``config.json``, ``metrics.jsonl`` (with each
generation's member returns, ``record_returns``) and ``checkpoint.npz``, and then:

1. **Identity.** The config must be the course's (``pong.student.student_config``) with the run
   seed of ``student_id``: a classmate's run, the shipped agent's run or a fine-tuned one
   (``--init``) are someone else's work.
2. **The chain.** From the seeded initial parameters, every update is recomputed from the
   recorded returns (the noise comes from the seed); the result must be the checkpoint's
   parameters and optimizer state. Editing the checkpoint or a return breaks it.
3. **The returns.** Recorded returns could be invented so that the chain leads anywhere
   (ranking members by how far they move towards a chosen agent). A few (generation, member)
   episodes drawn with ``rng`` are played again with the reference policy and must give
   the recorded score exactly (Pong scores are integers and the episode is deterministic).

What it costs: the chain is noise generation (~20 ms per generation); the episodes are a
few full games. ``pong.student.beats_random`` on unseen seeds then decides the points.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAX_FILE_BYTES = 50 << 20
MAX_GENERATIONS = 2000
CHAIN_TOLERANCE = 1e-6   # relative; 0 on the NumPy build that trained (see replay_chain)


class RunRejected(Exception):
    pass


@dataclass
class Replay:
    generations: int
    center: np.ndarray
    chain_max_diff: float
    episodes: list          # (generation, member, recorded, replayed)
    seconds: float


def _read(path: Path, what: str) -> bytes:
    if not path.is_file():
        raise RunRejected(f"the run directory has no {path.name} ({what})")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise RunRejected(f"{path.name} is larger than {MAX_FILE_BYTES >> 20} MB")
    return path.read_bytes()


def load_run(run_dir, student_id: str):
    """(config, returns per generation, checkpoint center, meta, optimizer state) of a run the
    course's configuration made for ``student_id``; RunRejected says what is wrong."""
    from es.checkpoint import load_checkpoint
    from es.config import ESConfig
    from es.errors import ESError
    from .student import normalise_id, student_config
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunRejected(f"{run_dir} is not a folder: submit the run directory your notebook trained into")
    try:
        raw = json.loads(_read(run_dir / "config.json", "the run's configuration"))
        config = ESConfig.from_dict(raw) if isinstance(raw, dict) else None
    except (ValueError, TypeError, ESError) as exc:
        raise RunRejected(f"config.json is not a run configuration: {str(exc)[:200]}") from None
    if config is None:
        raise RunRejected("config.json is not a run configuration")
    sid = normalise_id(student_id)
    want = student_config(sid)
    if config.seed != want.seed:
        raise RunRejected(f"the run's seed {config.seed} is not {sid}'s ({want.seed}): this run was trained under "
                          "another identifier (a classmate's run, the shipped agent's, or an edited config)")
    if config.init is not None:
        raise RunRejected(f"the run starts from {config.init} (--init): it must start from its own seeded parameters")
    free = {"generations", "workers", "init_sha256"}
    differ = [k for k, v in want.to_dict().items() if k not in free and getattr(config, k) != v]
    if differ:
        raise RunRejected(f"the run's configuration differs from the course's in {', '.join(differ)}; train with "
                          "pong.student.student_config(STUDENT_ID)")
    text = _read(run_dir / "metrics.jsonl", "the generations' returns").decode("utf-8", "replace")
    returns = []
    for n, line in enumerate(text.splitlines()):
        try:
            row = json.loads(line)
        except ValueError:
            raise RunRejected(f"metrics.jsonl line {n + 1} is not JSON") from None
        r = row.get("returns") if isinstance(row, dict) else None
        if not isinstance(r, list) or row.get("generation") != n or len(r) != config.population \
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in r):
            raise RunRejected(f"metrics.jsonl line {n + 1} is not generation {n} with {config.population} returns")
        returns.append(np.array(r, dtype=np.float64))
    _read(run_dir / "checkpoint.npz", "the trained parameters")    # exists, and is not huge
    try:     # nor does it inflate to more than a file may hold
        center, meta, opt = load_checkpoint(run_dir / "checkpoint.npz", max_bytes=MAX_FILE_BYTES)
    except ESError as exc:
        raise RunRejected(str(exc)) from None
    if meta.get("generation") != len(returns) or not 1 <= len(returns) <= MAX_GENERATIONS:
        raise RunRejected(f"the checkpoint is at generation {meta.get('generation')} but metrics.jsonl records "
                          f"{len(returns)} generations (at most {MAX_GENERATIONS})")
    return config, returns, center, meta, opt


def strategy_for(config):
    """(strategy, optimizer, problem) exactly as ``es.train`` builds them for a fresh run."""
    from es.train import make_problem_for, make_strategy
    problem = make_problem_for(config, one_thread=False)
    strategy, optimizer = make_strategy(config, problem.initial_params(config.seed), problem.num_params)
    return strategy, optimizer, problem


def replay_chain(config, returns, sample: set):
    """Every update again from the recorded returns. Returns (final center, optimizer state,
    {generation: task} for the generations in ``sample``, problem). Same code and one BLAS
    thread, as in training, so on the same NumPy build the result is bit for bit the
    checkpoint's."""
    from es.train import one_blas_thread
    strategy, optimizer, problem = strategy_for(config)
    tasks = {}
    with one_blas_thread():
        for g, r in enumerate(returns):
            task = strategy.ask()
            if g in sample:
                tasks[g] = task
            strategy.tell(r)
    return strategy.center, optimizer.state_dict(), tasks, problem


def _rel_diff(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return math.inf
    return float(np.max(np.abs(a - b), initial=0.0) / (1.0 + np.max(np.abs(b), initial=0.0)))


def verify_run(run_dir, student_id: str, rng: np.random.Generator, episodes: int = 6) -> Replay:
    """Raises RunRejected with the reason, or returns what was replayed."""
    import time
    from es import seeding
    from es.evaluators import evaluate_members
    t0 = time.perf_counter()
    config, returns, center, meta, opt = load_run(run_dir, student_id)
    g_count = len(returns)
    picks = [(int(rng.integers(g_count)), int(rng.integers(config.population))) for _ in range(episodes)]
    chain_center, chain_opt, tasks, problem = replay_chain(config, returns, {g for g, _ in picks})
    diff = _rel_diff(chain_center, center)
    opt_diff = max((_rel_diff(v, opt[k]) if k in opt else math.inf for k, v in chain_opt.items()), default=0.0)
    if not max(diff, opt_diff) <= CHAIN_TOLERANCE:
        raise RunRejected(f"the checkpoint is not what the recorded returns lead to from the run's seed "
                          f"(parameters differ by up to {diff:.3g}, optimizer state by {opt_diff:.3g}, relative): "
                          "the checkpoint or the returns were edited, or they come from different runs")
    seen = []
    try:
        for g, m in sorted(set(picks)):
            seeds = seeding.episode_seeds(config.seed, g, max(config.episodes_per_member, config.center_episodes))
            got, _, _, _ = evaluate_members(problem, tasks[g], [m], seeds[:config.episodes_per_member])
            seen.append((g, m, float(returns[g][m]), float(got[0])))
            if got[0] != returns[g][m]:
                raise RunRejected(f"generation {g}, member {m}: the run records a fitness of {returns[g][m]:+.5f}, "
                                  f"but playing that member's game again gives {got[0]:+.5f}: the returns were "
                                  "not played by this run's policies")
    finally:
        if hasattr(problem, "close"):
            problem.close()
    return Replay(g_count, center, diff, seen, time.perf_counter() - t0)
