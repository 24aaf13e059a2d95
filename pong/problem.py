"""Pong as an ES problem: play many (member, seed) episodes on a pool of vector-env slots.

An episode's outcome depends only on the member's parameters and its seed, never on which
slot or batch played it: Pong is deterministic once ALE's sticky actions are off, so the
vector env runs without them and the episode's own seeded generator applies sticky actions
(p = 0.25) in NumPy. Why not ``reset(seed=...)`` per episode: a seeded ALE reset costs
60-130 ms on the 2-core machine (an unseeded one ~3 ms), as much as 250-500 game steps.
The difference: ALE repeats the previous action per emulator frame, here per agent step
(4 frames), a harsher perturbation; evaluation (``play``) uses ALE/Pong-v5's own.

Training episodes stop after ``max_steps`` agent steps (fitness = game score so far: points
won minus points lost, so returning the ball is rewarded because it delays the next lost
point); ``play`` always plays full games of ``ALE/Pong-v5`` itself.
"""
from __future__ import annotations

from collections import deque

import numpy as np

from .env import PONG_ACTIONS, VECTOR_SETTINGS, make_pong, make_pong_vector
from .policy import make_pong_policy


class PongProblem:
    batched = True   # episodes share a vector env: one chunk per worker is best

    def __init__(self, policy: dict | None = None, max_steps: int = 1000, num_envs: int = 128, threads: int = 0):
        self.policy_spec = dict(policy or {"type": "pong_dense", "band": 6, "hidden": []})
        self.policy = make_pong_policy(self.policy_spec)
        self.max_steps, self.num_envs, self.threads = int(max_steps), int(num_envs), int(threads)
        self._vecs: dict = {}

    @classmethod
    def from_spec(cls, spec: dict) -> "PongProblem":
        return cls(spec.get("policy"), spec.get("max_steps", 1000), spec.get("num_envs", 128), spec.get("threads", 0))

    @property
    def num_params(self) -> int:
        return self.policy.num_params

    @property
    def episode_cap(self) -> int:
        return self.max_steps

    def spec(self) -> dict:
        return {"kind": "pong", "env_id": "ALE/Pong-v5", "policy": self.policy_spec, "max_steps": self.max_steps,
                "num_envs": self.num_envs, "threads": self.threads}

    def initial_params(self, seed: int) -> np.ndarray:
        return self.policy.initial_params(seed)

    def _vector(self, episodes: int):
        """A vector env sized so the episodes fill its slots in as few, as full, rounds as
        possible (65 episodes on 32 slots would leave one game playing alone for a round)."""
        rounds = -(-episodes // self.num_envs)
        n = -(-episodes // rounds)
        if n not in self._vecs:   # building costs ~0.1 s per game: keep each size once made
            self._vecs[n] = make_pong_vector(n, self.threads, repeat_action_probability=0.0)
        return self._vecs[n]

    def run_episodes(self, params, rows, seeds):
        """One capped episode per ``(rows[k], seeds[k])``; returns (scores, agent steps)."""
        rows = np.asarray(rows, dtype=np.int64)
        seeds = np.asarray(seeds, dtype=np.int64)
        k = len(rows)
        layers_all = self.policy.unflatten(np.asarray(params, dtype=np.float32))
        # Each episode's sticky-action draws come from its own seed.
        p_sticky = VECTOR_SETTINGS["repeat_action_probability"]
        sticky = np.stack([np.random.Generator(np.random.PCG64(int(s))).random(self.max_steps) < p_sticky
                           for s in seeds]) if k else np.zeros((0, self.max_steps), bool)
        env = self._vector(k)
        n = env.num_envs
        returns = np.zeros(k, dtype=np.float64)
        lengths = np.zeros(k, dtype=np.int64)
        slot_episode = np.full(n, -1, dtype=np.int64)
        queue = deque(range(k))
        first = [queue.popleft() for _ in range(min(n, k))]
        slot_episode[:len(first)] = first
        obs, _ = env.reset()
        layers = self._gather(layers_all, rows, slot_episode)
        actions = np.full(n, PONG_ACTIONS[0], dtype=np.int64)   # last executed action per slot
        while (slot_episode >= 0).any():
            active = slot_episode >= 0
            ep = slot_episode[active]
            chosen = PONG_ACTIONS[self.policy.forward(self._subset(layers, active), obs[active])]
            keep = sticky[ep, lengths[ep]]
            actions[active] = np.where(keep, actions[active], chosen)
            actions[~active] = PONG_ACTIONS[0]
            obs, reward, terminated, truncated, _ = env.step(actions)
            returns[ep] += reward[active]
            lengths[ep] += 1
            done = np.zeros(n, dtype=bool)
            done[active] = terminated[active] | truncated[active] | (lengths[ep] >= self.max_steps)
            if done.any():
                for slot in np.flatnonzero(done):
                    slot_episode[slot] = queue.popleft() if queue else -1
                restart = done & (slot_episode >= 0)
                if restart.any():
                    new_obs, _ = env.reset(options={"reset_mask": restart})
                    obs = obs.copy()
                    obs[restart] = new_obs[restart]
                actions[done] = PONG_ACTIONS[0]   # a new game starts after NOOP, as ALE's does
                layers = self._gather(layers_all, rows, slot_episode)
                # Slots left idle step with NOOP until the last episode ends; their finished
                # games restart on their own and are ignored.
        return returns, lengths

    @staticmethod
    def _gather(layers_all, rows, slot_episode):
        idx = rows[np.maximum(slot_episode, 0)]
        return [tuple(a[idx] for a in layer) for layer in layers_all]

    @staticmethod
    def _subset(layers, active):
        if active.all():
            return layers
        return [tuple(a[active] for a in layer) for layer in layers]

    # ---- full games on ALE/Pong-v5 itself (evaluation, baseline, GIF) ----
    def play(self, params, seeds, max_steps: int | None = None):
        layers = self.policy.unflatten(np.asarray(params, dtype=np.float32)[None, :])
        returns, lengths = [], []
        env = make_pong()
        for seed in np.asarray(seeds, dtype=np.int64):
            obs, _ = env.reset(seed=int(seed))
            total, steps, done = 0.0, 0, False
            while not done:
                a = self.policy.forward(layers, np.rint(obs[None] * 255).astype(np.uint8))[0]
                obs, r, term, trunc, _ = env.step(int(a))
                total, steps = total + float(r), steps + 1
                done = term or trunc or (max_steps is not None and steps >= max_steps)
            returns.append(total)
            lengths.append(steps)
        env.close()
        return np.array(returns), np.array(lengths)

    def play_random(self, seeds):
        """A uniformly random policy over all 6 of Pong-v5's actions, on the same seeds."""
        import gymnasium as gym
        from .env import register
        register()
        env = gym.make("ALE/Pong-v5", obs_type="grayscale")
        out = []
        for seed in np.asarray(seeds, dtype=np.int64):
            env.reset(seed=int(seed))
            env.action_space.seed(int(seed))
            total, done = 0.0, False
            while not done:
                _, r, term, trunc, _ = env.step(env.action_space.sample())
                total, done = total + float(r), term or trunc
            out.append(total)
        env.close()
        return np.array(out)

    def frames(self, params, seed: int, max_frames: int = 5000, every: int = 2):
        """RGB frames of one full game (every ``every``-th agent step) for a GIF."""
        env = make_pong(render_mode="rgb_array")
        layers = self.policy.unflatten(np.asarray(params, dtype=np.float32)[None, :])
        obs, _ = env.reset(seed=int(seed))
        frames, done, t = [env.render()], False, 0
        while not done and len(frames) < max_frames:
            a = self.policy.forward(layers, np.rint(obs[None] * 255).astype(np.uint8))[0]
            obs, _, term, trunc, _ = env.step(int(a))
            done, t = term or trunc, t + 1
            if t % every == 0 or done:
                frames.append(env.render())
        env.close()
        return frames

    def close(self):
        for env in self._vecs.values():
            env.close()
        self._vecs = {}
