"""Notebook 06's training loop: OpenAI-ES on a gymnasium MuJoCo task (``-v5``) with the
student's own functions, ``merge_stats``, ``mean_std`` and ``policy`` (a linear policy on
clipped normalized observations, tanh-squashed to the action range).

What it does, the paper's way (Salimans et al. 2017, and Mania et al. 2018's linear
policies): every generation's members play with the same frozen observation statistics
(``mean_std`` of the states seen in earlier generations); each member reports the count, sum
and sum of squares of the states it visited; the master merges them with ``merge_stats`` in
member order, so the run is the same for any number of workers. The ES update is notebook 04's
``es_step`` with no weight decay: centered ranks of the members' returns (ties share their mean
rank, as notebook 00's ``centered_ranks`` has them), then Adam; the noise is mirrored, drawn from
``(seed, generation)``. This module ships in the student release, and the package's modules that
hold these three (notebooks 00's and 01's answers) do not: it writes them out, and the course's
tests hold them bit for bit equal to the package's.

Files in ``run_dir`` (what ``check.locomotion_agent`` grades): ``config.json`` (the task and
settings), ``metrics.jsonl`` (a line per generation; its scores, ``center_score``, ``pop_mean``
and ``pop_max``, are gymnasium's own returns: the alive bonus that training shifts out is
added back), ``checkpoint.npz`` (the center and the frozen mean and std it plays with, the
merged statistics, Adam's state: re-running resumes).
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

# name: (gymnasium id, alive bonus a step, threshold: Mania, Guy, Recht 2018, arXiv:1803.07055, Table 1)
TASKS = {"halfcheetah": ("HalfCheetah-v5", 0.0, 3430.0), "hopper": ("Hopper-v5", 1.0, 3120.0)}
HELD_OUT = 1_000_000        # the confirmation episodes' first seed (training's are below it)
# A center is confirmed when its mean over 20 held-out episodes reaches the threshold + MARGIN. A
# trained agent's return varies from episode to episode: the margin keeps an agent confirmed by
# luck out, and the grader (check.locomotion_agent) plays 20 new episodes and fails an agent only
# when their mean is significantly below the threshold.
MARGIN = 20.0


@dataclass(frozen=True)
class RunConfig:
    task: str = "halfcheetah"
    seed: int = 0
    population: int = 64        # 32 mirrored pairs
    sigma: float = 0.03
    learning_rate: float = 0.01
    max_generations: int = 300
    minutes: float = 20.0       # wall-clock budget of one call (re-running resumes)
    workers: int = 2
    confirm_episodes: int = 20  # the center must reach the threshold + MARGIN on these held-out seeds too


# What a run is (resuming keeps them); the budget (max_generations, minutes) and workers may change.
RUN_DEFINED = ("task", "seed", "population", "sigma", "learning_rate", "confirm_episodes")


class StudentCode:
    """The student's three functions, as the workers call them."""

    def __init__(self, merge_stats, mean_std, policy):
        self.merge_stats, self.mean_std, self.policy = merge_stats, mean_std, policy


# ---------------------------------------------------------------- episodes (in a worker)
_ENVS: dict[str, list] = {}


def _envs(env_id: str, n: int) -> list:
    import gymnasium as gym
    pool = _ENVS.setdefault(env_id, [])
    while len(pool) < n:
        pool.append(gym.make(env_id))
    return pool[:n]


def play(env_id, policy, params, seeds, mean, std, shift=0.0):
    """One episode per row of ``params`` (float32 ``(k, num_params)``) with seed ``seeds[k]``,
    all at once: each tick, one call ``policy(params[live], obs[live], mean, std, low, high)``.
    Returns each episode's return less ``shift`` a step, its length, and the count, sum and
    sum of squares of the states its policy saw (float64)."""
    params, seeds = np.asarray(params, dtype=np.float32), np.asarray(seeds, dtype=np.int64)
    k = len(params)
    envs = _envs(env_id, k)
    low, high = envs[0].action_space.low, envs[0].action_space.high
    obs = np.stack([np.asarray(e.reset(seed=int(s))[0], dtype=np.float64) for e, s in zip(envs, seeds)])
    returns, lengths = np.zeros(k), np.zeros(k, dtype=np.int64)
    sums, squares = np.zeros_like(obs), np.zeros_like(obs)
    live = np.arange(k)
    while live.size:
        o = obs[live]
        sums[live] += o
        squares[live] += o * o
        actions = np.asarray(policy(params[live], o.copy(), mean, std, low, high), dtype=np.float64)
        if actions.shape != (live.size, low.size):
            raise ValueError(f"policy returned shape {actions.shape} for {live.size} rows, expected "
                             f"({live.size}, {low.size})")
        done = np.zeros(live.size, dtype=bool)
        for j, i in enumerate(live):
            ob, r, term, trunc, _ = envs[i].step(actions[j])
            obs[i] = ob
            returns[i] += r - shift
            lengths[i] += 1
            done[j] = term or trunc
        live = live[~done]
    return returns, lengths, sums, squares


def _play_chunk(env_id, policy, params, seeds, mean, std, shift):
    from threadpoolctl import threadpool_limits
    with threadpool_limits(1):
        return play(env_id, policy, params, seeds, mean, std, shift)


# ---------------------------------------------------------------- the ES step (notebook 04's es_step)
def mirrored_noise(seed: int, generation: int, population: int, dim: int) -> np.ndarray:
    """Mirrored pairs, interleaved: row 2k is +eps_k, row 2k + 1 is -eps_k (float32)."""
    half = np.random.default_rng([seed, generation]).standard_normal((population // 2, dim)).astype(np.float32)
    return np.stack([half, -half], axis=1).reshape(population, dim)


def _ranked(fitness: np.ndarray) -> np.ndarray:
    """Centered ranks in [-0.5, 0.5], tied returns sharing their mean rank, in float64: notebook
    00's ``centered_ranks``."""
    f = np.asarray(fitness, dtype=np.float64)
    below = (f[None, :] < f[:, None]).sum(axis=1)          # members with a lower return
    tied = (f[None, :] == f[:, None]).sum(axis=1) - 1      # other members with the same return
    return (below + 0.5 * tied) / (len(f) - 1) - 0.5


def _update(center, noise, fitness, m, v, t, sigma, lr):
    """One ES update, notebook 04's ``es_step`` with no weight decay: the centered ranks of the
    members' fitness weigh their noise, ``g = noise.T @ weights / (population * sigma)``, and
    Adam steps the center up ``g``. Returns the center (float32) and Adam's ``m, v, t``."""
    grad = noise.T.astype(np.float64) @ _ranked(fitness) / (len(fitness) * sigma)
    return _adam(center, grad, m, v, t, lr)


def _adam(center, grad, m, v, t, lr):
    """One Adam ascent step in float64 (betas 0.9, 0.999, epsilon 1e-8); the center in float32."""
    t += 1
    m = 0.9 * m + 0.1 * grad
    v = 0.999 * v + 0.001 * grad * grad
    return (center + lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m / (np.sqrt(v) + 1e-8)).astype(np.float32), \
        m, v, t


# ---------------------------------------------------------------- the run
def train(code: StudentCode, run_dir, config: RunConfig = RunConfig(), progress=print) -> dict:
    """Train until the center reaches the task's threshold on the generation's episode and then
    the threshold + ``MARGIN`` on average over ``confirm_episodes`` held-out ones; or for
    ``max_generations``, or ``minutes`` of this call.
    Re-running with the same ``run_dir`` resumes. Returns the run's summary: ``generations``
    played, ``updates`` made (one fewer once finished: the generation whose center was confirmed
    makes none), ``steps``, ``minutes`` of training, whether it ``finished``."""
    from joblib import Parallel, delayed
    env_id, shift, threshold = TASKS[config.task]
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    probe = _envs(env_id, 1)[0]
    obs_dim, act_dim = probe.observation_space.shape[0], probe.action_space.shape[0]
    dim = obs_dim * act_dim + act_dim
    ckpt = run_dir / "checkpoint.npz"
    if ckpt.exists():
        saved = np.load(ckpt)
        before = json.loads((run_dir / "config.json").read_text())
        changed = [k for k in RUN_DEFINED if before.get(k) != getattr(config, k)]
        if changed:
            raise ValueError(f"{run_dir} holds a run with other {', '.join(changed)}; choose another folder")
        (run_dir / "config.json").write_text(json.dumps(asdict(config), indent=1) + "\n")
        center, m, v, t = saved["center"], saved["m"], saved["v"], int(saved["t"])
        stats = (int(saved["count"]), saved["total"], saved["squares"])
        generation, seconds, steps = int(saved["generation"]), float(saved["seconds"]), int(saved["steps"])
        finished = bool(saved["finished"])
    else:
        (run_dir / "config.json").write_text(json.dumps(asdict(config), indent=1) + "\n")
        (run_dir / "metrics.jsonl").write_text("")
        center, m, v, t = np.zeros(dim, np.float32), np.zeros(dim), np.zeros(dim), 0
        stats = (0, np.zeros(obs_dim), np.zeros(obs_dim))
        generation, seconds, steps, finished = 0, 0.0, 0, False
    n, bounds = config.population, np.linspace(0, config.population, config.workers + 1).astype(int)
    start = time.perf_counter()
    with Parallel(n_jobs=config.workers) as pool:
        while not finished and generation < config.max_generations \
                and time.perf_counter() - start < 60 * config.minutes:
            t0 = time.perf_counter()
            mean, std = (np.asarray(x, dtype=np.float64) for x in code.mean_std(*stats))   # frozen: this generation
            noise = mirrored_noise(config.seed, generation, n, dim)
            params = np.vstack([center[None, :] + np.float32(config.sigma) * noise, center[None, :]])
            seed = np.random.default_rng([config.seed, generation, 7]).integers(HELD_OUT)
            seeds = np.full(n + 1, seed)                       # every member and the center: one episode, one seed
            cuts = [*bounds[:-1], n + 1]                       # the center goes with the last chunk
            parts = pool(delayed(_play_chunk)(env_id, code.policy, params[a:b], seeds[a:b], mean, std, shift)
                         for a, b in zip(cuts[:-1], cuts[1:]))
            returns, lengths, sums, squares = (np.concatenate(x) for x in zip(*parts))
            for i in range(n):                                 # member order: the same for any workers
                stats = code.merge_stats(stats, (int(lengths[i]), sums[i], squares[i]))
            scores = returns + shift * lengths                  # gymnasium's own returns (the bonus added back)
            score = float(scores[n])
            confirmed = None
            if score >= threshold:                              # reached: confirm on held-out episodes
                held = HELD_OUT + config.confirm_episodes * generation + np.arange(config.confirm_episodes)
                r, _, _, _ = play(env_id, code.policy, np.repeat(center[None, :], len(held), 0), held, mean, std)
                confirmed = float(r.mean())
                finished = confirmed >= threshold + MARGIN
            if not finished:                                    # the center that reached it is the agent
                center, m, v, t = _update(center, noise, returns[:n], m, v, t, config.sigma, config.learning_rate)
            steps += int(lengths.sum())
            seconds += time.perf_counter() - t0
            row = {"generation": generation, "center_score": score, "pop_mean": float(scores[:n].mean()),
                   "pop_max": float(scores[:n].max()), "steps": steps, "seconds": round(seconds, 2)}
            if confirmed is not None:
                row["confirmed"] = confirmed
            generation += 1
            with open(run_dir / "metrics.jsonl", "a") as f:
                f.write(json.dumps(row) + "\n")
            np.savez(ckpt, center=center, obs_mean=mean, obs_std=std, m=m, v=v, t=t, count=stats[0],
                     total=stats[1], squares=stats[2], generation=generation, seconds=seconds, steps=steps,
                     finished=finished)
            if progress is not None and (generation % 10 == 0 or finished):
                progress(f"generation {generation}: center {score:.0f}, population mean {row['pop_mean']:.0f}, "
                         f"{seconds / 60:.1f} min" + (f", held-out {confirmed:.0f}" if confirmed is not None else ""))
    return {"finished": finished, "generations": generation, "updates": t, "minutes": seconds / 60, "steps": steps,
            "threshold": threshold}


def load_metrics(run_dir) -> list[dict]:
    path = Path(run_dir) / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def save_gif(frames, path, fps: int = 30) -> Path:
    """RGB frames as an animated GIF (Pillow)."""
    from PIL import Image
    images = [Image.fromarray(np.asarray(f)) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0,
                   optimize=True)
    return Path(path)


def rollout_frames(run_dir, policy, seed: int = 0, steps: int = 1000, every: int = 2, width: int = 320,
                   height: int = 200) -> list:
    """The agent of ``run_dir`` playing one episode, rendered offscreen (MuJoCo needs an OpenGL
    context: ``MUJOCO_GL=egl`` with a GPU driver or libEGL, ``osmesa`` with libOSMesa, in
    software); the first ``steps`` steps, every ``every``-th frame."""
    import gymnasium as gym
    config = json.loads((Path(run_dir) / "config.json").read_text())
    saved = np.load(Path(run_dir) / "checkpoint.npz")
    env = gym.make(TASKS[config["task"]][0], render_mode="rgb_array", width=width, height=height,
                   camera_name="track")      # the model's camera that follows the robot
    obs, _ = env.reset(seed=seed)
    frames, done, k = [env.render()], False, 0
    low, high = env.action_space.low, env.action_space.high
    while not done and k < steps:
        a = policy(saved["center"][None, :], np.asarray(obs, dtype=np.float64)[None, :], saved["obs_mean"],
                   saved["obs_std"], low, high)[0]
        obs, _, term, trunc, _ = env.step(np.asarray(a, dtype=np.float64))
        done, k = term or trunc, k + 1
        if k % every == 0:
            frames.append(env.render())
    env.close()
    return frames
