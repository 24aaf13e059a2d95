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

    def __init__(self, policy: dict | None = None, max_steps: int = 1000, num_envs: int = 128, threads: int = 0,
                 head=None, tie_break: str | None = None):
        """``tie_break="length"``: fitness = score + 1e-5 x agent steps, so equal scores rank by how
        long the game lasted and different scores never swap (a game lasts < 100,000 steps).
        ``head``: a function ``(W (rows, features, 3), b (rows, 3), features (rows, features)) ->
        actions`` that replaces the linear dense policy's read-out (notebook 04's ``batched_policy``)."""
        self.policy_spec = dict(policy or {"type": "pong_dense", "band": 6, "hidden": []})
        self.policy = make_pong_policy(self.policy_spec)
        if head is not None:
            if self.policy_spec.get("type") != "pong_dense" or self.policy_spec.get("hidden"):
                raise ValueError("head= replaces the read-out of the linear dense policy only")
            self.policy.head_fn = head
        self.max_steps, self.num_envs, self.threads = int(max_steps), int(num_envs), int(threads)
        if tie_break not in (None, "length"):
            raise ValueError(f"tie_break must be None or 'length', got {tie_break!r}")
        self.tie_break = tie_break
        self._vecs: dict = {}

    @classmethod
    def from_spec(cls, spec: dict, head=None) -> "PongProblem":
        return cls(spec.get("policy"), spec.get("max_steps", 1000), spec.get("num_envs", 128), spec.get("threads", 0),
                   head=head, tie_break=spec.get("tie_break"))

    @property
    def num_params(self) -> int:
        return self.policy.num_params

    @property
    def episode_cap(self) -> int:
        return self.max_steps

    def spec(self) -> dict:
        spec = {"kind": "pong", "env_id": "ALE/Pong-v5", "policy": self.policy_spec, "max_steps": self.max_steps,
                "num_envs": self.num_envs, "threads": self.threads}
        if self.tie_break is not None:
            spec["tie_break"] = self.tie_break
        if self.policy.head_fn is not None:
            spec["local_only"] = True   # holds a notebook's function: worker processes get this object itself
        return spec

    def in_process(self) -> "PongProblem":
        """The same problem with ALE stepping on every core: for a process that evaluates
        every member itself. An episode's outcome does not depend on the thread count."""
        if self.threads == 0:
            return self
        return PongProblem.from_spec({**self.spec(), "threads": 0}, head=self.policy.head_fn)

    def __getstate__(self):   # vector envs stay behind; each process builds its own
        return {**self.__dict__, "_vecs": {}}

    def initial_params(self, seed: int) -> np.ndarray:
        return self.policy.initial_params(seed)

    @staticmethod
    def slots_for(episodes: int, num_envs: int) -> tuple[int, int]:
        """(games in the vector env, games per batch) for ``episodes`` episodes.

        Three rounds of episodes per game slot: a slot whose episode ends takes the next one
        from the queue, so slots rarely idle while the last games finish (with one episode per
        slot, a fresh policy's games end after ~820 steps while the longest runs 1000, and every
        finished slot would wait for it). The slot count fills the rounds when games are equally
        long (a trained policy plays to the cap): 65 episodes on 22 slots take 3 rounds with 1
        slot-round empty, where 16 slots would take 5 with one game alone in the last.
        Two batches of half the slots each, stepped alternately: ALE steps one batch while
        NumPy chooses the other's actions. Measured in one run against one slot per episode:
        the same speed for a trained policy, 10-20% faster for a fresh one; 16 slots were 12%
        slower for a trained policy (``benchmarks/pong.py``).
        """
        n = min(num_envs, 2 * -(-episodes // 6))
        if n > 1:
            n -= n % 2
        return n, max(1, n // 2)

    def _vector(self, episodes: int):
        n, batch = self.slots_for(episodes, self.num_envs)
        if (n, batch) not in self._vecs:   # building costs ~0.1 s per game: keep each size once made
            # ALE ends an episode at our cap itself (frames = 4 x agent steps) and resets it in
            # the same step ("SameStep"): a slot's next observation is already its next game's.
            self._vecs[(n, batch)] = make_pong_vector(n, self.threads, repeat_action_probability=0.0, batch_size=batch,
                                                      max_num_frames_per_episode=4 * self.max_steps,
                                                      autoreset_mode="SameStep")
        return self._vecs[(n, batch)]

    def run_episodes(self, params, rows, seeds):
        """One capped episode per ``(rows[k], seeds[k])``; returns (scores, agent steps)."""
        rows = np.asarray(rows, dtype=np.int64)
        seeds = np.asarray(seeds, dtype=np.int64)
        k = len(rows)
        returns, lengths = np.zeros(k, dtype=np.float64), np.zeros(k, dtype=np.int64)
        if k == 0:
            return returns, lengths
        layers_all = self.policy.unflatten(np.asarray(params, dtype=np.float32))
        # Each episode's sticky-action draws come from its own seed.
        p_sticky = VECTOR_SETTINGS["repeat_action_probability"]
        sticky = np.stack([np.random.Generator(np.random.PCG64(int(s))).random(self.max_steps) < p_sticky
                           for s in seeds])
        env = self._vector(k)
        n, batch = env.num_envs, env.batch_size
        slot_episode = np.full(n, -1, dtype=np.int64)
        last_action = np.full(n, PONG_ACTIONS[0], dtype=np.int64)   # executed last, per slot
        fresh = np.ones(n, dtype=bool)       # the slot's next result is its reset observation
        queue, remaining = deque(range(k)), k
        obs, info = env.reset()              # resets every slot, answers for the first batch
        ids, reward, done = info["env_id"], np.zeros(batch), np.zeros(batch, dtype=bool)
        while True:
            for j, slot in enumerate(ids):   # account for the results in hand
                if not fresh[slot]:
                    e = slot_episode[slot]
                    if e < 0:
                        continue             # idle: no episode left for it
                    returns[e] += reward[j]
                    lengths[e] += 1
                    if not done[j]:
                        continue
                    remaining -= 1
                fresh[slot] = False          # a new game starts here (after NOOP, as ALE's does)
                slot_episode[slot] = queue.popleft() if queue else -1
                last_action[slot] = PONG_ACTIONS[0]
            if remaining == 0:
                break
            episode = slot_episode[ids]
            playing = episode >= 0
            actions = np.full(len(ids), PONG_ACTIONS[0], dtype=np.int64)
            if playing.any():
                e, at = episode[playing], ids[playing]
                layers = [tuple(a[rows[e]] for a in layer) for layer in layers_all]
                chosen = PONG_ACTIONS[self.policy.forward(layers, obs[playing])]
                actions[playing] = np.where(sticky[e, lengths[e]], last_action[at], chosen)
                last_action[at] = actions[playing]
            env.send(actions)
            obs, reward, terminated, truncated, info = env.recv()
            ids, done = info["env_id"], terminated | truncated
        for _ in range((n - batch) // batch):   # collect the results in flight: the next reset starts clean
            env.recv()
        if self.tie_break == "length":
            returns += 1e-5 * lengths
        return returns, lengths

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
