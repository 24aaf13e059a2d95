"""gymnasium's MuJoCo locomotion tasks (``-v5``) as an ES problem: a continuous-action policy
(linear, or an MLP as in the paper) on normalized observations (``es.obs_norm``).

Every episode of a call runs at once, one environment each: a tick asks the policy for every
running episode's action in one batched product, then steps each environment. An episode's
outcome depends only on its parameters, its seed and the task's frozen observation statistics,
never on the batch or the process it ran in.

Training fitness is the return less ``shift`` per step (Mania et al. 2018): where a task pays
an alive bonus every step (Hopper, Walker2d and Ant 1, Humanoid 5), a policy that stands still
collects the bonus for the whole episode and ES stalls there. ``score`` adds it back: logs,
goals and evaluation report gymnasium's own return.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np

from es.errors import ESError
from es.interfaces import Problem
from es.obs_norm import CLIP
from es.policies import MLPPolicy


class LocomotionProblem(Problem):
    chunks_per_worker = 3

    def __init__(self, env_id: str, hidden=(), max_steps: int | None = None, shift: float = 0.0,
                 normalize: bool = True):
        self.env_id, self.hidden, self.max_steps, self.shift = env_id, tuple(hidden), max_steps, float(shift)
        self.normalize = bool(normalize)
        try:
            env = gym.make(env_id)
        except Exception as exc:   # gymnasium raises several types for a missing mujoco or a bad id
            raise ESError(f"cannot create {env_id!r}: {exc.__class__.__name__}: {exc} "
                          "(MuJoCo tasks need the mujoco package: pip install -r requirements.txt)") from None
        space = env.action_space
        if not isinstance(space, gym.spaces.Box):
            raise ESError(f"{env_id}: a locomotion task needs continuous (Box) actions, got {space}")
        self.state_dim = int(np.prod(env.observation_space.shape))
        # obs_dim > 0 asks training for statistics; without normalization (ARS V1) the policy sees raw states
        self.obs_dim = self.state_dim if self.normalize else 0
        self.policy = MLPPolicy(self.state_dim, int(np.prod(space.shape)), self.hidden, discrete=False,
                                low=space.low.ravel(), high=space.high.ravel())
        limit = env.spec.max_episode_steps if env.spec is not None else None
        self.episode_cap = min(x for x in (max_steps, limit) if x is not None)
        self._envs = [env]
        self.obs_norm = np.stack([np.zeros(self.state_dim), np.ones(self.state_dim)])   # play(): set by training

    @property
    def num_params(self) -> int:
        return self.policy.num_params

    def spec(self) -> dict:
        spec = {"kind": "mujoco", "env_id": self.env_id, "hidden": list(self.hidden), "max_steps": self.max_steps,
                "shift": self.shift, "policy": self.policy.spec()}
        if not self.normalize:     # only then: every spec written before the flag stays as it was
            spec["normalize"] = False
        return spec

    @classmethod
    def from_spec(cls, spec: dict) -> "LocomotionProblem":
        return cls(spec["env_id"], spec.get("hidden", []), spec.get("max_steps"), spec.get("shift", 0.0),
                   spec.get("normalize", True))

    def initial_params(self, seed: int) -> np.ndarray:
        """Zeros, as ARS starts: the first policy's action is the middle of each range, and every
        member's behaviour comes from its perturbation alone."""
        return np.zeros(self.num_params, dtype=np.float32)

    def warm_up(self, episodes: int) -> None:
        self._env_pool(episodes)

    def _env_pool(self, n: int) -> list:
        while len(self._envs) < n:
            self._envs.append(gym.make(self.env_id))
        return self._envs[:n]

    def score(self, fitness: float, steps: float) -> float:
        """gymnasium's return of an episode whose training fitness was ``fitness`` in ``steps`` steps."""
        return fitness + self.shift * steps

    def run_episodes(self, params, rows, seeds, obs_norm=None):
        """One episode per ``(rows[k], seeds[k])``: training fitness (return less ``shift`` a step),
        lengths, and the sums and squares of the states each episode's policy saw."""
        norm = self.obs_norm if obs_norm is None else np.asarray(obs_norm, dtype=np.float64)
        out = self._play(params, rows, seeds, norm, self.shift)
        return out if obs_norm is not None else out[:2]

    def play(self, params, seeds):
        """gymnasium's own return (alive bonus included) with ``obs_norm``, one row of parameters."""
        seeds = np.asarray(seeds, dtype=np.int64)
        return self._play(np.asarray(params)[None, :], np.zeros(len(seeds), dtype=np.int64), seeds,
                          self.obs_norm, 0.0)[:2]

    def _play(self, params, rows, seeds, norm, shift):
        rows, seeds = np.asarray(rows, dtype=np.int64), np.asarray(seeds, dtype=np.int64)
        n, d = len(rows), self.state_dim
        returns, lengths = np.zeros(n), np.zeros(n, dtype=np.int64)
        sums, squares = np.zeros((n, d)), np.zeros((n, d))
        if n == 0:
            return returns, lengths, sums, squares
        mean, std = norm
        weights = self.policy.unflatten(np.asarray(params, dtype=np.float32))
        envs = self._env_pool(n)
        obs = np.stack([np.asarray(env.reset(seed=int(s))[0], dtype=np.float64).ravel() for env, s in zip(envs, seeds)])
        live = np.arange(n)
        layers = [(w[rows], b[rows]) for w, b in weights]
        cap = self.episode_cap
        while live.size:
            o = obs[live]
            sums[live] += o
            squares[live] += o * o
            x = np.clip((o - mean) / std, -CLIP, CLIP).astype(np.float32)
            actions = self.policy.forward(layers, x)
            ended = []
            for j, k in enumerate(live):
                ob, r, term, trunc, _ = envs[k].step(actions[j])
                obs[k] = ob
                returns[k] += r - shift
                lengths[k] += 1
                if term or trunc or lengths[k] >= cap:
                    ended.append(j)
            if ended:      # the batch shrinks only when an episode ends: its rows of weights go with it
                keep = np.setdiff1d(np.arange(live.size), ended)
                live = live[keep]
                layers = [(w[keep], b[keep]) for w, b in layers]
        return returns, lengths, sums, squares

    def play_random(self, seeds):
        """gymnasium's return of uniformly random actions on the same seeds (the baseline)."""
        env, out = self._env_pool(1)[0], []
        for seed in np.asarray(seeds, dtype=np.int64):
            env.reset(seed=int(seed))
            env.action_space.seed(int(seed))
            total, steps, done = 0.0, 0, False
            while not done:
                _, r, term, trunc, _ = env.step(env.action_space.sample())
                total, steps = total + float(r), steps + 1
                done = term or trunc or steps >= self.episode_cap
            out.append(total)
        return np.array(out)

    def frames(self, params, seed: int, max_frames: int = 1000, width: int = 320, height: int = 240):
        """RGB frames of one episode (offscreen rendering: MUJOCO_GL=egl or osmesa without a screen)."""
        # The "track" camera follows the robot (every task here has one): the default loses it in seconds.
        env = gym.make(self.env_id, render_mode="rgb_array", width=width, height=height, camera_name="track")
        layers = self.policy.unflatten(np.asarray(params, dtype=np.float32)[None, :])
        mean, std = self.obs_norm
        obs, _ = env.reset(seed=int(seed))
        frames, done = [env.render()], False
        while not done and len(frames) < max_frames:
            x = np.clip((np.asarray(obs, dtype=np.float64) - mean) / std, -CLIP, CLIP).astype(np.float32)
            obs, _, term, trunc, _ = env.step(self.policy.forward(layers, x[None, :])[0])
            frames.append(env.render())
            done = term or trunc
        env.close()
        return frames

    def close(self) -> None:
        for env in self._envs:
            env.close()
        self._envs = []
