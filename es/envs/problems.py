"""Problems of the core: a gymnasium environment played by an ``MLPPolicy``, and any Python
function. A problem turns a matrix of parameter vectors into episode returns
(``es.interfaces.Problem``); an environment problem is rebuilt from its JSON ``spec`` in any
worker process or machine."""
from __future__ import annotations

import os

import gymnasium as gym
import numpy as np

from ..errors import ESError
from ..interfaces import Problem
from ..policies import MLPPolicy
from .cartpole import run_cartpole_batch
from .gym_loop import run_gym_episodes


class EnvProblem(Problem):
    """A gymnasium environment played by an ``MLPPolicy``."""

    def __init__(self, env_id: str, hidden=(16,), max_steps: int | None = None):
        self.env_id, self.max_steps = env_id, max_steps
        try:
            env = gym.make(env_id)
        except Exception as exc:  # gymnasium raises several error types for bad ids / missing extras
            raise ESError(f"cannot create environment {env_id!r}: {exc}") from None
        space = env.action_space
        obs_dim = int(np.prod(env.observation_space.shape))
        if isinstance(space, gym.spaces.Discrete):
            self.policy = MLPPolicy(obs_dim, int(space.n), hidden, discrete=True)
        elif isinstance(space, gym.spaces.Box):
            self.policy = MLPPolicy(obs_dim, int(np.prod(space.shape)), hidden, discrete=False,
                                    low=space.low.ravel(), high=space.high.ravel())
        else:
            raise ESError(f"{env_id}: action space {space} is not supported (Discrete or Box only)")
        self._env = env
        limit = env.spec.max_episode_steps if env.spec is not None else None
        # Most env steps one episode can take: the bound a worker's reported length must respect.
        self.episode_cap = min(x for x in (max_steps, limit) if x is not None) if (max_steps or limit) else None
        self.batched = env_id == "CartPole-v1"    # a whole generation is one array computation
        self.chunks_per_worker = 1 if self.batched else 3
        self.hidden = tuple(hidden)

    @property
    def num_params(self) -> int:
        return self.policy.num_params

    def spec(self) -> dict:
        return {"kind": "env", "env_id": self.env_id, "hidden": list(self.hidden), "max_steps": self.max_steps,
                "policy": self.policy.spec()}

    def initial_params(self, seed: int) -> np.ndarray:
        return self.policy.initial_params(seed)

    def run_episodes(self, params, rows, seeds):
        """One episode per ``(rows[k], seeds[k])`` with ``params[rows[k]]``: returns, lengths."""
        if self.batched:
            return run_cartpole_batch(self.policy, params, rows, seeds, self.max_steps)
        return run_gym_episodes(self._env, self.policy, params, rows, seeds, self.max_steps)

    def play(self, params, seeds):
        """Play the real gymnasium environment (one at a time) with one parameter vector."""
        seeds = np.asarray(seeds, dtype=np.int64)
        return run_gym_episodes(self._env, self.policy, np.asarray(params)[None, :], np.zeros(len(seeds), dtype=np.int64), seeds)

    def play_random(self, seeds):
        """Returns of a uniformly random policy on the same seeds (the baseline)."""
        out = []
        for seed in np.asarray(seeds, dtype=np.int64):
            self._env.reset(seed=int(seed))
            self._env.action_space.seed(int(seed))
            total, done = 0.0, False
            while not done:
                _, r, term, trunc, _ = self._env.step(self._env.action_space.sample())
                total, done = total + float(r), term or trunc
            out.append(total)
        return np.array(out)

    def frames(self, params, seed: int, max_frames: int = 1000):
        """RGB frames of one episode (for GIFs)."""
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")  # headless: no sound device to complain about
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        env = gym.make(self.env_id, render_mode="rgb_array")
        layers = self.policy.unflatten(np.asarray(params, dtype=np.float32)[None, :])
        obs, _ = env.reset(seed=int(seed))
        frames, done = [env.render()], False
        while not done and len(frames) < max_frames:
            a = self.policy.forward(layers, np.asarray(obs, dtype=np.float32).reshape(1, -1))[0]
            obs, _, term, trunc, _ = env.step(int(a) if self.policy.discrete else a)
            frames.append(env.render())
            done = term or trunc
        env.close()
        return frames


class FunctionProblem(Problem):
    """Any ``f(params, seed) -> float`` to maximise: the Python API's custom problems."""

    def __init__(self, f, num_params: int, x0=None):
        self.f, self._num_params = f, int(num_params)
        self.x0 = None if x0 is None else np.asarray(x0, dtype=np.float32).ravel()

    @property
    def num_params(self) -> int:
        return self._num_params

    def spec(self) -> dict:
        return {"kind": "function", "name": getattr(self.f, "__name__", "f"), "num_params": self._num_params}

    def initial_params(self, seed: int) -> np.ndarray:
        return self.x0.copy() if self.x0 is not None else np.zeros(self._num_params, dtype=np.float32)

    def play(self, params, seeds):
        return self.run_episodes(np.asarray(params)[None, :], np.zeros(len(seeds), dtype=np.int64), seeds)

    def run_episodes(self, params, rows, seeds):
        out = np.array([float(self.f(params[r], int(s))) for r, s in zip(rows, seeds)], dtype=np.float64)
        return out, np.zeros(len(out), dtype=np.int64)
