import numpy as np

from es.policies import MLPPolicy


def test_batched_forward_equals_one_row_at_a_time():
    policy = MLPPolicy(6, 3, (16, 8))
    rng = np.random.default_rng(0)
    params = rng.standard_normal((10, policy.num_params)).astype(np.float32)
    obs = rng.standard_normal((10, 6)).astype(np.float32)
    batched = policy.forward(policy.unflatten(params), obs)
    single = [policy.act(params[i], obs[i]) for i in range(10)]
    assert list(batched) == single


def test_parameter_layout_and_linear_policy():
    policy = MLPPolicy(3, 2, ())
    assert policy.num_params == 3 * 2 + 2
    p = np.zeros(policy.num_params, dtype=np.float32)
    p[3 * 2 + 1] = 1.0  # bias of action 1
    assert policy.act(p, np.zeros(3)) == 1


def test_continuous_policy_respects_bounds():
    policy = MLPPolicy(3, 1, (4,), discrete=False, low=[-2.0], high=[2.0])
    params = np.random.default_rng(0).standard_normal((50, policy.num_params)).astype(np.float32) * 10
    a = policy.forward(policy.unflatten(params), np.random.default_rng(1).standard_normal((50, 3)))
    assert a.shape == (50, 1) and np.all(np.abs(a) <= 2.0)


def test_init_is_seeded_and_small_at_the_output():
    policy = MLPPolicy(4, 2, (16,))
    a, b = policy.initial_params(0), policy.initial_params(0)
    assert np.array_equal(a, b) and not np.array_equal(a, policy.initial_params(1))
