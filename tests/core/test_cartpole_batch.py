"""The batched CartPole is gymnasium's CartPole-v1, bit for bit."""
import gymnasium as gym
import numpy as np

from es.envs.cartpole import constants, physics_step, reset_states, run_cartpole_batch
from es.envs.gym_loop import run_gym_episodes
from es.policies import MLPPolicy


def test_trajectories_are_bit_identical_to_gymnasium():
    c = constants()
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(0)
    forces = np.array([-c["force_mag"], c["force_mag"]])
    for seed in range(60):
        obs, _ = env.reset(seed=seed)
        x, xd, th, thd = [a.copy() for a in reset_states(np.array([seed]))]
        for _ in range(500):
            assert np.array_equal(np.array([x[0], xd[0], th[0], thd[0]], dtype=np.float32), obs)
            # random actions on odd seeds, a balancing heuristic on even ones (long episodes)
            a = int(rng.integers(2)) if seed % 2 else int(obs[2] + 0.5 * obs[3] > 0)
            obs, _, term, trunc, _ = env.step(a)
            assert bool(physics_step(x, xd, th, thd, forces[np.array([a])], c)[0]) == term
            if term or trunc:
                break


def test_batched_returns_equal_gymnasium_returns_for_a_population():
    policy = MLPPolicy(4, 2, (8,))
    rng = np.random.default_rng(1)
    params = rng.standard_normal((12, policy.num_params)).astype(np.float32)
    rows = np.repeat(np.arange(12), 3)
    seeds = np.tile([5, 6, 7], 12)
    batched, lengths = run_cartpole_batch(policy, params, rows, seeds)
    looped, looped_lengths = run_gym_episodes(gym.make("CartPole-v1"), policy, params, rows, seeds)
    assert np.array_equal(batched, looped)
    assert np.array_equal(lengths, looped_lengths)
    assert lengths.max() > 50  # some members balance for a while: the test is not trivial


def test_a_members_return_does_not_depend_on_its_batch():
    policy = MLPPolicy(4, 2, ())
    params = np.random.default_rng(2).standard_normal((40, policy.num_params)).astype(np.float32)
    seeds = np.arange(40) % 3
    together, _ = run_cartpole_batch(policy, params, np.arange(40), seeds)
    alone = np.concatenate([run_cartpole_batch(policy, params, np.array([i]), seeds[i:i + 1])[0] for i in range(40)])
    assert np.array_equal(together, alone)
