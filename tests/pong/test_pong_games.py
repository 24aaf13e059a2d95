"""One set of dynamics: the games training, the grader's replay and evaluation play are
ALE/Pong-v5's own, frame for frame, for the same seeds."""
from pathlib import Path

import numpy as np
import pytest

from pong.env import downsample, downsample_batch, make_pong, stack_batch
from pong.games import PongGames, StartStates, _new_ale, ale_seed

ROOT = Path(__file__).resolve().parents[2]


def gym_game(seed, act, max_steps=None):
    """(observations as uint8, rewards, terminated) of one ALE/Pong-v5 game: reset(seed=seed)."""
    env = make_pong()
    obs, _ = env.reset(seed=int(seed))
    frames, rewards, t = [np.rint(obs * 255).astype(np.uint8)], [], 0
    while True:
        obs, r, term, trunc, _ = env.step(int(act(t, frames[-1])))
        frames.append(np.rint(obs * 255).astype(np.uint8))
        rewards.append(r)
        t += 1
        if term or trunc or (max_steps is not None and t >= max_steps):
            break
    env.close()
    return np.array(frames), np.array(rewards), bool(term)


@pytest.mark.parametrize("seeds,max_steps", [pytest.param([0, 1, 987654321], None, marks=pytest.mark.slow),
                                             ([5, 6, 7, 8, 9], 300)], ids=["whole-games", "queued-capped"])
def test_games_are_ale_pong_v5_frame_for_frame(seeds, max_steps):
    """Random actions from a seeded generator per game, both ways: every observation, reward
    and the end are the same, also when games queue for fewer slots than episodes."""
    actions = {s: np.random.default_rng(s).integers(0, 3, 30_000) for s in seeds}
    seen = {i: [] for i in range(len(seeds))}

    def choose(episodes, obs):
        out = []
        for e, o in zip(episodes, obs):
            out.append(actions[seeds[e]][len(seen[e])])
            seen[e].append(o.copy())
        return np.array(out)

    games = PongGames(2, downsample_batch, stack_batch)
    returns, lengths = games.play(choose, seeds, max_steps)
    for i, s in enumerate(seeds):
        frames, rewards, ended = gym_game(s, lambda t, _: actions[s][t], max_steps)
        assert lengths[i] == len(rewards) and returns[i] == rewards.sum()
        assert np.array_equal(np.array(seen[i]), frames[:-1]), f"seed {s}"
        if max_steps is None:
            assert ended and returns[i] <= -15         # a random player's whole game


def test_a_restored_start_is_byte_for_byte_a_seeded_reset():
    starts = StartStates()
    for seed in (0, 3, 2 ** 40 + 1):
        want = _new_ale(ale_seed(seed)).cloneState(include_rng=True).serialize()
        ale = _new_ale(1)
        for _ in range(50):
            ale.act(ale.getMinimalActionSet()[2])
        ale.reset_game()
        ale.restoreState(starts(seed))
        assert ale.cloneState(include_rng=True).serialize() == want


def test_downsample_is_exact_area_averaging():
    """Every output is the exact mean of the 5 x 160/42 cells it covers, rounded half to even."""
    from fractions import Fraction
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (210, 160)).astype(np.uint8)
    frame[:5, :4] = 0                # output (0, 0) weighs columns 0-2 by 42 and column 3 by 34 (in 42ths):
    frame[0, 0], frame[0, 3] = 14, 18    # (42 x 14 + 34 x 18) / 800 = 1.5 exactly, which rounds to 2
    got = downsample(frame)
    assert got[0, 0] == 2
    for i, j in [(0, 0), (0, 41), (17, 20), (41, 41)]:
        total = Fraction(0)
        for c in range(160):
            overlap = max(0, min((j + 1) * 160, 42 * (c + 1)) - max(j * 160, 42 * c))
            total += Fraction(overlap) * int(frame[5 * i:5 * i + 5, c].sum())
        exact = total / 800
        assert got[i, j] == round(exact), (i, j, exact)    # Python's round: halves to even


@pytest.mark.slow
def test_the_shipped_agent_scores_the_same_in_training_games_and_in_ale_pong_v5():
    """A fixed (trained) policy: whole games through PongProblem (training, replay, eval) and
    through gymnasium's ALE/Pong-v5 give the same scores and lengths, seed by seed."""
    from es.play import load_agent
    problem, center, _ = load_agent(ROOT / "pong" / "agent.npz")     # with the policy it was trained with
    seeds = [100, 101, 102, 103]
    scores, lengths = problem.play(center, seeds)
    layers = problem.policy.unflatten(center[None])
    for s, score, length in zip(seeds, scores, lengths):
        _, rewards, _ = gym_game(s, lambda t, obs: problem.policy.forward(layers, obs[None])[0])
        assert (rewards.sum(), len(rewards)) == (score, length)


def test_a_generation_replayed_from_its_recorded_actions_plays_the_same_games():
    """``benchmarks/pong.py``'s yardstick for what the policy costs: the same episodes replayed
    without it must be the same games (same lengths, which the function asserts), or the ratio
    would compare different work."""
    import importlib.util
    import sys
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("pong_benchmark", root / "benchmarks" / "pong.py")
        bench = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench)
    finally:
        sys.path.remove(str(root / "benchmarks"))
    from pong.problem import PongProblem
    problem = PongProblem({"type": "pong_keypoints", "keypoints": 3, "hidden": [4], "pull_scale": 0.25,
                           "conv": "taps", "pull": "windows"}, max_steps=120, num_envs=3)
    steps, played, replayed = bench.same_games_replayed(problem, problem.initial_params(0), population=4)
    assert 5 * 30 < steps <= 5 * 120 and played > 0 and replayed > 0
