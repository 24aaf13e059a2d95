"""Pong as an ES problem: play many (member, seed) episodes of ALE/Pong-v5's own games.

An episode's outcome depends only on the member's parameters and its seed, never on which
game slot, process or machine played it: ``pong.games`` starts the episode with seed ``s`` in
exactly the state ``ALE/Pong-v5``'s ``reset(seed=s)`` gives, and ALE applies its own sticky
actions (p = 0.25 per emulator frame). Training, the grader's replay and evaluation (``play``)
all play these games, the dynamics the score is measured on.

Training episodes stop after ``max_steps`` agent steps (fitness = game score so far: points
won minus points lost); ``play`` plays full games (Pong-v5 itself stops at 27,000 steps).
"""
from __future__ import annotations

import numpy as np

from es.interfaces import Problem

from .env import downsample_batch, make_pong, stack_batch
from .games import PongGames, play_random
from .keypoints import PongKeypointsPolicy
from .policy import make_pong_policy


class PongProblem(Problem):
    # Episodes queue for game slots, so small chunks cost little but a dispatch (not so for a
    # keypoints policy: __init__), and a worker that finishes early takes the next chunk instead
    # of idling while the other plays its longest game: chunks shrink towards the end of a
    # generation (es.parallel.guided_bounds).
    chunks_per_worker = 4

    def __init__(self, policy: dict | None = None, max_steps: int = 1000, num_envs: int = 32,
                 head=None, tie_break: str | None = None):
        """``num_envs``: game slots in this process (episodes queue for them; more slots, larger
        policy batches). ``tie_break="length"``: fitness = score + 1e-5 x agent steps, so equal
        scores rank by how long the game lasted and different scores never swap (a game lasts
        < 100,000 steps). ``head``: a function ``(W (rows, features, 3), b (rows, 3), features
        (rows, features)) -> actions`` that replaces the linear dense policy's read-out
        (notebook 04's ``batched_policy``)."""
        self.policy_spec = dict(policy or {"type": "pong_dense", "band": 6, "hidden": []})
        self.policy = make_pong_policy(self.policy_spec)
        if isinstance(self.policy, PongKeypointsPolicy):
            # One chunk per worker (an even cut, as for a batched problem): a keypoints policy's
            # forward pass has a fixed cost per call that each chunk pays at each of its steps,
            # and guided chunks are small (2 to 16 members at population 64 on 2 workers). The
            # shipped pixel agent's 2-worker generations took 12.60 and 14.67 s this way against
            # 13.83 and 17.41 s in guided chunks, with the same returns (docs/runs/issue52-pixel).
            self.chunks_per_worker = 1
        if head is not None:
            if self.policy_spec.get("type") != "pong_dense" or self.policy_spec.get("hidden"):
                raise ValueError("head= replaces the read-out of the linear dense policy only")
            self.policy.head_fn = head
        self.local_only = head is not None     # holds a notebook's function: worker processes get this object
        self.max_steps, self.num_envs = int(max_steps), int(num_envs)
        if tie_break not in (None, "length"):
            raise ValueError(f"tie_break must be None or 'length', got {tie_break!r}")
        self.tie_break = tie_break
        self._games = None

    @classmethod
    def from_spec(cls, spec: dict, head=None) -> "PongProblem":
        # A spec's "threads" is accepted and ignored: every process steps its games on one thread
        # (pong.games).
        return cls(spec.get("policy"), spec.get("max_steps", 1000), spec.get("num_envs", 32), head=head,
                   tie_break=spec.get("tie_break"))

    @property
    def num_params(self) -> int:
        return self.policy.num_params

    @property
    def episode_cap(self) -> int:
        return self.max_steps

    def spec(self) -> dict:
        spec = {"kind": "pong", "env_id": "ALE/Pong-v5", "policy": self.policy_spec, "max_steps": self.max_steps,
                "num_envs": self.num_envs}
        if self.tie_break is not None:
            spec["tie_break"] = self.tie_break
        if self.local_only:
            spec["local_only"] = True
        return spec

    def __getstate__(self):   # games stay behind; each process builds its own
        return {**self.__dict__, "_games": None}

    def initial_params(self, seed: int) -> np.ndarray:
        return self.policy.initial_params(seed)

    def warm_up(self, episodes: int) -> None:
        """Load the ROM into as many game slots as ``episodes`` episodes use (85 ms each)."""
        self._games_for(episodes)

    def _games_for(self, episodes: int) -> PongGames:
        if self._games is None:
            self._games = PongGames(self.num_envs, downsample_batch, stack_batch)
        self._games.warm_up(episodes)
        return self._games

    def _play(self, params, rows, seeds, max_steps, record=None):
        """``record(episodes, actions)``, if given, sees every step's choice (benchmarks/pong.py
        replays them)."""
        self._games_for(0)
        layers_all = self.policy.unflatten(np.asarray(params, dtype=np.float32))
        rows = np.asarray(rows, dtype=np.int64)

        memo = self.policy.new_memo() if isinstance(self.policy, PongKeypointsPolicy) else None

        def choose(episodes, obs):
            layers = [tuple(a[rows[episodes]] for a in layer) for layer in layers_all]
            if memo is not None:          # frames seen at the previous step: reused, same bits
                actions = self.policy.forward(layers, obs, memo, episodes)
            else:
                actions = self.policy.forward(layers, obs)
            if record is not None:
                record(episodes, actions)
            return actions

        return self._games.play(choose, seeds, max_steps)

    def run_episodes(self, params, rows, seeds):
        """One capped episode per ``(rows[k], seeds[k])``; returns (fitness, agent steps)."""
        returns, lengths = self._play(params, rows, seeds, self.max_steps)
        if self.tie_break == "length":
            returns += 1e-5 * lengths
        return returns, lengths

    # ---- full games (evaluation, baseline, GIF) ----
    def play(self, params, seeds, max_steps: int | None = None):
        """Full games of ALE/Pong-v5 (the same games as ``reset(seed=s)``) with ``params``."""
        seeds = np.asarray(seeds, dtype=np.int64)
        return self._play(np.asarray(params, dtype=np.float32)[None, :], np.zeros(len(seeds)), seeds, max_steps)

    def play_random(self, seeds):
        """A uniformly random player over all 6 of Pong-v5's actions, on the same seeds."""
        return play_random(seeds)

    def frames(self, params, seed: int, max_frames: int = 5000, every: int = 2):
        """RGB frames of one full game (every ``every``-th agent step) for a GIF."""
        env = make_pong(render_mode="rgb_array")
        layers = self.policy.unflatten(np.asarray(params, dtype=np.float32)[None, :])
        memo = self.policy.new_memo() if isinstance(self.policy, PongKeypointsPolicy) else None
        obs, _ = env.reset(seed=int(seed))
        frames, done, t = [env.render()], False, 0
        while not done and len(frames) < max_frames:
            x = np.rint(obs[None] * 255).astype(np.uint8)
            a = (self.policy.forward(layers, x, memo, np.zeros(1, np.int64)) if memo is not None
                 else self.policy.forward(layers, x))[0]
            obs, _, term, trunc, _ = env.step(int(a))
            done, t = term or trunc, t + 1
            if t % every == 0 or done:
                frames.append(env.render())
        env.close()
        return frames

    def close(self):
        if self._games is not None:
            self._games.close()
        self._games = None
