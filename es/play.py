"""Evaluate a checkpoint on the real environment, against a uniformly random policy on the
same seeds, and record a GIF of one episode."""
from __future__ import annotations

import logging
import math

import numpy as np
from PIL import Image

from .checkpoint import load_checkpoint
from .envs import make_problem
from .errors import ESError

log = logging.getLogger(__name__)

# Two-sided 95% quantiles of Student's t for 1..30 degrees of freedom.
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def mean_ci95(values) -> tuple[float, float, list[float]]:
    """Mean, sample std and the 95% t-interval of the mean."""
    v = np.asarray(values, dtype=np.float64)
    mean = float(v.mean())
    if len(v) < 2:
        return mean, 0.0, [mean, mean]
    std = float(v.std(ddof=1))
    t = _T95[len(v) - 2] if len(v) - 1 <= len(_T95) else 1.96
    half = t * std / math.sqrt(len(v))
    return mean, std, [mean - half, mean + half]


def load_agent(path):
    """``(problem, params, meta)`` from a checkpoint or a shipped agent file."""
    center, meta, _ = load_checkpoint(path)
    spec = meta.get("problem")
    if not isinstance(spec, dict):
        raise ESError(f"checkpoint {path} does not say which problem it solves (no 'problem' in its header)")
    if spec.get("kind") == "function":
        raise ESError(f"checkpoint {path} optimised a Python function; there is no environment to play")
    problem = make_problem(spec)
    if problem.num_params != center.size:
        raise ESError(f"checkpoint {path} has {center.size} parameters but its policy needs {problem.num_params}")
    if problem.obs_dim:      # the policy sees observations normalized by the run's statistics
        try:       # imported here: es.obs_norm is the course repository's (it holds notebook 06's answers)
            from .obs_norm import ObsStats, mean_std
        except ImportError:
            raise ESError(f"checkpoint {path} normalizes observations, and es.obs_norm is missing") from None
        try:
            stats = ObsStats.from_array(meta["obs_stats"])
            if stats.total.size != problem.obs_dim:
                raise ValueError(f"{stats.total.size} observation variables, the problem has {problem.obs_dim}")
        except (KeyError, TypeError, ValueError) as exc:
            raise ESError(f"checkpoint {path} lacks valid observation statistics ({exc})") from None
        problem.obs_norm = np.stack(mean_std(stats))
    return problem, center, meta


def evaluate_checkpoint(path, episodes: int = 20, seed: int | None = None, gif=None,
                        random_baseline: bool = True) -> dict:
    if episodes < 1:
        raise ESError(f"--episodes must be >= 1, got {episodes}")
    problem, params, meta = load_agent(path)
    if seed is None:
        seed = int(meta.get("config", {}).get("eval_seed", 0))
    seeds = np.arange(seed, seed + episodes)
    returns, lengths = problem.play(params, seeds)
    out = {"checkpoint": str(path), "env": problem.spec().get("env_id", problem.spec().get("kind")),
           "episodes": episodes, "seed": int(seed)}
    m, s, ci = mean_ci95(returns)
    out.update(agent_mean=m, agent_std=s, agent_ci95=ci, agent_returns=[float(r) for r in returns],
               agent_mean_length=float(np.mean(lengths)))
    log.info(f"agent : {m:8.2f} +- {s:.2f}  (95% CI [{ci[0]:.2f}, {ci[1]:.2f}]) over {episodes} episodes, seeds {seed}..{seed + episodes - 1}")
    if random_baseline:
        r_returns = problem.play_random(seeds)
        rm, rs, rci = mean_ci95(r_returns)
        out.update(random_mean=rm, random_std=rs, random_ci95=rci)
        log.info(f"random: {rm:8.2f} +- {rs:.2f}  (95% CI [{rci[0]:.2f}, {rci[1]:.2f}]) same seeds")
        out["beats_random"] = bool(ci[0] > rci[1])
    if gif:
        frames = problem.frames(params, int(seed))
        write_gif(frames, gif)
        out["gif"] = str(gif)
        log.info(f"wrote {gif} ({len(frames)} frames, seed {seed})")
    return out


def write_gif(frames, path, fps: int = 30) -> None:
    if not frames:
        raise ESError("no frames to write")
    images = [Image.fromarray(np.asarray(f, dtype=np.uint8)) for f in frames]
    try:
        images[0].save(path, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0, optimize=True)
    except OSError as exc:
        raise ESError(f"cannot write GIF {path}: {exc.strerror or exc}") from None
