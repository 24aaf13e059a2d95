"""ALE/Pong-v5's own games, many per process, each episode a pure function of its seed.

Training, the grader's replay and evaluation all play these games. The episode with seed
``s`` is the game that ``gym.make("ALE/Pong-v5").reset(seed=s)`` starts, frame for frame:
frameskip 4, sticky actions with p = 0.25 drawn by ALE itself on every emulator frame, the
same RNG, the same screens (the course repository's ``tests/pong/test_games.py`` plays both side by side).

Why not call ``reset(seed=s)``: ALE seeds a game by reloading the ROM (85 ms on the 2-core
machine, as long as ~250 agent steps). What a seed changes is one thing: ALE's environment
generator, a ``std::mt19937`` seeded with the 32-bit ``ale_seed(s)`` that gymnasium derives
from ``s``. The rest of the start state is the same for every seed. ``ALEInterface.
restoreState`` can set both (0.05 ms): ``StartStates`` takes one seeded start state as a
template and replaces its generator's text (ALE serialises the engine with ``operator<<``:
624 words and the position) with the fresh generator of ``ale_seed(s)``. Once per process it
checks the result byte for byte against a real seeded reload, so an ale-py that serialises
differently fails loudly instead of playing other games.

Episodes are stepped in one thread: ale-py's ``act`` holds the GIL, and a plain loop over
``ALEInterface`` objects runs ~3.5k agent steps/s per core here (the C++ vector env: ~2.5k
per thread, and it cannot restore states). Worker processes give the other cores.

The preprocessing is passed in (``downsample`` and ``stack``, each batched over games):
the course repository's ``pong.env`` has the course's reference; a student's release plays with the student's own
(notebook 04), which must be exact for their run to replay in the grader.
"""
from __future__ import annotations

from collections import deque

import numpy as np

SIZE, STACK = 42, 4        # observations: the last 4 frames, 42x42, oldest first
# Indices into ALE/Pong-v5's minimal action set [NOOP, FIRE, RIGHT, LEFT, RIGHTFIRE, LEFTFIRE].
PONG_ACTIONS = np.array([0, 2, 3], dtype=np.int64)
ACTION_NAMES = ("NOOP", "UP", "DOWN")
FRAMESKIP = 4
STICKY = 0.25               # ALE/Pong-v5's repeat_action_probability, applied by ALE per frame
MAX_FRAMES = 108_000        # ALE/Pong-v5 truncates a game at 27,000 agent steps
TEMPLATE_SEED = 12345       # any seed: the template's generator is replaced


def ale_seed(seed: int) -> int:
    """The 32-bit seed ALE's generator gets from ``AtariEnv.reset(seed=seed)`` (gymnasium's
    ``seed_game``). ALE would take 0xFFFFFFFF (-1 as int32) to mean "seed from the clock";
    here it is a seed like any other (a chance of 2^-32 per episode)."""
    return int(np.random.SeedSequence(int(seed)).generate_state(2)[1])


def _mt19937_text(seed32: int) -> bytes:
    """``std::mt19937(seed32)`` as libstdc++'s ``operator<<`` writes it (what ALE stores)."""
    key = np.random.RandomState(seed32).get_state()[1]      # the same init_genrand as std::mt19937
    return (" ".join(map(str, key.tolist())) + " 624").encode()


def _int32(n: int) -> bytes:
    return int(n).to_bytes(4, "little", signed=True)


def _new_ale(seed32: int):
    import ale_py
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)   # before the first one: no banner per process
    ale = ale_py.ALEInterface()
    ale.setFloat("repeat_action_probability", STICKY)
    ale.setInt("max_num_frames_per_episode", MAX_FRAMES)
    ale.setInt("random_seed", np.int32(np.uint32(seed32)).item())
    ale.loadROM(ale_py.roms.get_rom_path("pong"))
    ale.reset_game()
    return ale


class StartStates:
    """The ALE start state of any seed, built from one template (see the module docstring)."""

    def __init__(self):
        import ale_py
        self._ALEState = ale_py.ALEState
        template = _new_ale(TEMPLATE_SEED).cloneState(include_rng=True).serialize()
        # ALEState::serialize: 6 int32, the emulator state as a length-prefixed string, 2 int32.
        # The emulator state ends with the generator's text, also length-prefixed.
        inner_len = int.from_bytes(template[24:28], "little")
        inner, self._tail = template[28:28 + inner_len], template[28 + inner_len:]
        rng = _mt19937_text(TEMPLATE_SEED)
        if len(self._tail) != 8 or not inner.endswith(_int32(len(rng)) + rng):
            raise RuntimeError("this ale-py serialises its state in a way pong.games does not know; "
                               "pin ale-py 0.12 or teach StartStates the new layout")
        self._head, self._inner_head = template[:24], inner[:-(4 + len(rng))]
        self._check()

    def __call__(self, seed: int):
        rng = _mt19937_text(ale_seed(seed))
        inner = self._inner_head + _int32(len(rng)) + rng
        return self._ALEState(self._head + _int32(len(inner)) + inner + self._tail)

    def _check(self, seed: int = 2024):
        """A used game moved to ``seed``'s start must be byte for byte a fresh seeded reload."""
        want = _new_ale(ale_seed(seed)).cloneState(include_rng=True).serialize()
        ale = _new_ale(TEMPLATE_SEED)
        for a in (3, 2, 0, 3):
            ale.act(ale.getMinimalActionSet()[a])
        ale.reset_game()
        ale.restoreState(self(seed))
        if ale.cloneState(include_rng=True).serialize() != want:
            raise RuntimeError("pong.games: a restored start state differs from ALE's seeded reset; this ale-py "
                               "stores its state differently (pin ale-py 0.12)")


class PongGames:
    """Up to ``slots`` games of ALE/Pong-v5 in this process, fed by a queue of episodes.

    ``play(choose, seeds, max_steps)`` plays one episode per seed: ``choose(episodes, obs)``
    gets the indices of the episodes that need an action and their observations (uint8
    ``(k, 4, 42, 42)``, oldest frame first) and returns an index into ``PONG_ACTIONS`` for each.
    An episode's outcome depends on its seed and on ``choose`` alone, never on the slot, the
    other episodes or the order.
    """

    def __init__(self, slots: int, downsample, stack):
        """``downsample(frames (k, 210, 160) uint8) -> (k, 42, 42) uint8``; ``stack(stacks (k, 4, 42,
        42), frames (k, 42, 42)) -> (k, 4, 42, 42)``: drop each stack's oldest frame, append the new."""
        self.slots, self.downsample, self.stack = int(slots), downsample, stack
        self._ales: list = []
        self._starts = None

    def warm_up(self, episodes: int) -> None:
        """Build the start states and the games ``episodes`` episodes at once would use."""
        self._ensure(episodes)

    def _ensure(self, n: int):
        if self._starts is None:
            self._starts = StartStates()
        while len(self._ales) < min(n, self.slots):
            self._ales.append(_new_ale(TEMPLATE_SEED))
        if self._ales:
            self._actions = self._ales[0].getMinimalActionSet()

    def play(self, choose, seeds, max_steps: int | None = None):
        """(scores, agent steps) of one episode per seed; ``max_steps`` caps an episode (Pong-v5
        itself truncates at 27,000 agent steps)."""
        seeds = np.asarray(seeds, dtype=np.int64)
        k = len(seeds)
        returns, lengths = np.zeros(k, dtype=np.float64), np.zeros(k, dtype=np.int64)
        if k == 0:
            return returns, lengths
        self._ensure(k)
        n = min(k, self.slots)
        ales, acts = self._ales[:n], [self._actions[int(a)] for a in PONG_ACTIONS]
        cap = np.iinfo(np.int64).max if max_steps is None else int(max_steps)
        obs = np.zeros((n, STACK, SIZE, SIZE), dtype=np.uint8)
        screens = np.empty((n, 210, 160), dtype=np.uint8)
        episode = np.full(n, -1, dtype=np.int64)
        queue = deque(range(k))

        def start(slot: int) -> None:
            e = queue.popleft() if queue else -1
            episode[slot] = e
            if e >= 0:
                ale = ales[slot]
                ale.reset_game()                      # previous action NOOP, the start screen
                ale.restoreState(self._starts(seeds[e]))
                ale.getScreenGrayscale(screens[slot])
                first = self.downsample(screens[slot:slot + 1])
                obs[slot] = self.stack(np.zeros((1, STACK, SIZE, SIZE), np.uint8), first)[0]   # 3 empty frames

        for slot in range(n):
            start(slot)
        while True:
            active = np.flatnonzero(episode >= 0)
            if len(active) == 0:
                break
            chosen = np.asarray(choose(episode[active], obs[active]))
            ended = []
            for slot, a in zip(active.tolist(), chosen.tolist()):
                ale, act, reward = ales[slot], acts[a], 0
                for _ in range(FRAMESKIP):            # as AtariEnv.step: 4 calls, ALE's sticky draws in each
                    reward += ale.act(act)
                ale.getScreenGrayscale(screens[slot])
                e = episode[slot]
                returns[e] += reward
                lengths[e] += 1
                if ale.game_over() or lengths[e] >= cap:
                    ended.append(slot)
            obs[active] = self.stack(obs[active], self.downsample(screens[active]))
            for slot in ended:
                start(slot)
        return returns, lengths

    def close(self):
        self._ales = []


def play_random(seeds) -> np.ndarray:
    """Scores of a uniformly random player over all 6 of Pong-v5's actions, one full game of
    ``ALE/Pong-v5`` per seed (the player draws from ``action_space.seed(seed)``)."""
    import ale_py
    import gymnasium as gym
    gym.register_envs(ale_py)
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
