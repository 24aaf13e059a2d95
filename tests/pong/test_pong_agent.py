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


