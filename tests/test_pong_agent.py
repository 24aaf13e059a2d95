"""Pong policies and the episode pool."""
import numpy as np
import pytest

from pong.policy import PongConvPolicy, PongDensePolicy
from pong.problem import PongProblem


@pytest.mark.parametrize("policy", [PongDensePolicy(), PongConvPolicy()], ids=["dense", "conv"])
def test_policies_are_batched_per_member(policy):
    rng = np.random.default_rng(0)
    obs = rng.integers(0, 256, (9, 4, 42, 42)).astype(np.uint8)
    params = np.stack([policy.initial_params(i) for i in range(9)])
    params += rng.standard_normal(params.shape).astype(np.float32)
    together = policy.forward(policy.unflatten(params), obs)
    alone = [policy.forward(policy.unflatten(params[i:i + 1]), obs[i:i + 1])[0] for i in range(9)]
    assert list(together) == alone
    assert set(together) <= {0, 1, 2} and len(set(together)) > 1


def test_dense_features_match_a_plain_computation():
    policy = PongDensePolicy()
    obs = np.random.default_rng(1).integers(0, 256, (2, 4, 42, 42)).astype(np.uint8)
    from pong.policy import BACKGROUND
    plain = ((obs - BACKGROUND) / 255.0).reshape(2, 4, 42, 7, 6).sum(-1).reshape(2, -1)
    assert np.allclose(policy.features(obs), plain, atol=1e-5)


def test_episode_outcomes_do_not_depend_on_slots_or_order():
    rng = np.random.default_rng(2)
    a = PongProblem(num_envs=3, max_steps=150)
    params = np.stack([a.initial_params(0)] * 4) + rng.standard_normal((4, a.num_params)).astype(np.float32) * 0.3
    rows, seeds = np.array([0, 1, 2, 3, 0]), np.array([5, 6, 7, 8, 9])
    r1, l1 = a.run_episodes(params, rows, seeds)
    b = PongProblem(num_envs=2, max_steps=150)
    r2, l2 = b.run_episodes(params, rows[::-1], seeds[::-1])
    assert np.array_equal(r1, r2[::-1]) and np.array_equal(l1, l2[::-1])
    assert np.all(l1 == 150) and np.all(r1 <= 0)
    a.close()
    b.close()


def _alone(policy, params, seed, max_steps):
    """The plain reference: one game on its own synchronous env, sticky actions from the seed."""
    from pong.env import PONG_ACTIONS, make_pong_vector
    env = make_pong_vector(1, repeat_action_probability=0.0)
    obs, _ = env.reset()
    sticky = np.random.Generator(np.random.PCG64(int(seed))).random(max_steps) < 0.25
    layers, last, total, t = policy.unflatten(params[None]), PONG_ACTIONS[0], 0.0, 0
    while t < max_steps:
        a = last if sticky[t] else PONG_ACTIONS[policy.forward(layers, obs)[0]]
        obs, r, term, trunc, _ = env.step(np.array([a], dtype=np.int64))
        total, t, last = total + float(r[0]), t + 1, a
        if term[0] or trunc[0]:
            break
    env.close()
    return total, t


@pytest.mark.parametrize("episodes,max_steps", [(3, 1200), (18, 60)], ids=["games-end", "capped-queue"])
def test_the_slot_queue_plays_each_episode_as_if_alone(episodes, max_steps):
    """Whole games (they end before the cap) and capped ones queued over fewer slots in two
    batches: each result equals the game played alone on its own env."""
    problem = PongProblem(max_steps=max_steps)
    n, batch = PongProblem.slots_for(episodes, problem.num_envs)
    assert n < episodes and batch == n // 2
    rng = np.random.default_rng(3)
    params = problem.initial_params(0)[None] + rng.standard_normal((episodes, problem.num_params)).astype(np.float32) * 0.05
    seeds = rng.integers(0, 2 ** 31, episodes)
    got = problem.run_episodes(params, np.arange(episodes), seeds)
    again = problem.run_episodes(params, np.arange(episodes), seeds)     # the env is reused
    problem.close()
    want = [_alone(problem.policy, params[i], seeds[i], max_steps) for i in range(episodes)]
    assert np.array_equal(got[0], [w[0] for w in want]) and np.array_equal(got[1], [w[1] for w in want])
    assert np.array_equal(got[0], again[0]) and np.array_equal(got[1], again[1])
    if max_steps > 1000:
        assert np.all(got[1] < max_steps) and np.all(got[0] == -21)   # real game ends, not the cap


def test_slots_leave_several_episodes_per_slot_and_batches_divide_them():
    assert PongProblem.slots_for(65, 128) == (22, 11)
    assert PongProblem.slots_for(65, 10) == (10, 5)
    assert PongProblem.slots_for(1, 128) == (2, 1)
    assert PongProblem.slots_for(5, 1) == (1, 1)
    for k in range(1, 300):
        n, b = PongProblem.slots_for(k, 64)
        assert 1 <= n <= 64 and n % b == 0 and (n == 1 or n % 2 == 0)


def test_in_process_generations_step_ale_on_every_core_with_the_same_outcomes():
    """A run with workers builds its problem for one ALE thread per worker process. When the
    evaluator finds in-process generations faster, those must not keep that one thread (Pong
    ran at 1,300 instead of 2,400 env steps/s on 2 cores): they use ``in_process()``, whose
    episodes are the same."""
    from es.optimizers import SGD
    from es.parallel import ParallelEvaluator
    from es.strategy import OpenES
    problem = PongProblem(max_steps=60, threads=1)
    alone = problem.in_process()
    assert alone.threads == 0 and alone.spec() == {**problem.spec(), "threads": 0}
    messages = []
    ev = ParallelEvaluator(problem, workers=2, log=messages.append)
    plain = PongProblem(max_steps=60, threads=1)
    try:
        strategy = OpenES(problem.initial_params(0), SGD(problem.num_params, 0.01), population=6, sigma=0.05, seed=0)
        for how in ("local", "parallel"):
            task = strategy.ask()
            got = ev.evaluate(task, [11], [12])
            params = task.member_params(np.arange(6))
            want = plain.run_episodes(np.vstack([params, task.center[None]]), np.arange(7), [11] * 6 + [12])[0]
            assert np.array_equal(np.r_[got.returns, got.center_return], want), how
            strategy.tell(got.returns)
        assert ev._local is not problem and ev._local.threads == 0 and ev._local._vecs
        assert not problem._vecs          # the one-thread problem never played in this process
    finally:
        ev.close()
        plain.close()
