import subprocess
import sys

import numpy as np

from es import noise, seeding
from es.strategy import GenerationTask


def test_antithetic_members_are_mirrored():
    eps = noise.antithetic_noise(7, 3, np.arange(64), 20)
    assert np.array_equal(eps[0::2], -eps[1::2])
    assert not np.allclose(eps[0], eps[2])


def test_plain_sampling_has_no_mirrors():
    eps = noise.antithetic_noise(7, 3, np.arange(8), 20, antithetic=False)
    assert not np.allclose(eps[0], -eps[1])


def test_any_subset_of_members_matches_the_full_population():
    full = noise.antithetic_noise(5, 2, np.arange(100), 33)
    subset = np.array([99, 0, 37, 64, 65, 31, 32])
    assert np.array_equal(noise.antithetic_noise(5, 2, subset, 33), full[subset])


def test_noise_differs_across_generations_and_seeds():
    a = noise.antithetic_noise(0, 0, np.arange(4), 10)
    assert not np.allclose(a, noise.antithetic_noise(0, 1, np.arange(4), 10))
    assert not np.allclose(a, noise.antithetic_noise(1, 0, np.arange(4), 10))


def test_noise_is_identical_when_regenerated_in_another_process():
    here = noise.antithetic_noise(123, 45, np.arange(40), 17)
    code = ("import numpy as np, sys; from es import noise; "
            "sys.stdout.buffer.write(noise.antithetic_noise(123, 45, np.arange(40), 17).tobytes())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True).stdout
    assert np.array_equal(np.frombuffer(out, dtype=np.float32).reshape(40, 17), here)


def test_global_numpy_state_is_never_used():
    np.random.seed(0)
    before = np.random.get_state()[1].copy()
    noise.antithetic_noise(1, 2, np.arange(50), 30)
    noise.weighted_noise_sum(1, 2, np.ones(50), 30)
    seeding.episode_seeds(1, 2, 5)
    assert np.array_equal(np.random.get_state()[1], before)


def test_weighted_sum_matches_explicit_sum():
    w = np.random.default_rng(0).standard_normal(70).astype(np.float32)
    for anti in (True, False):
        eps = noise.antithetic_noise(9, 4, np.arange(70), 25, anti)
        got = noise.weighted_noise_sum(9, 4, w, 25, anti)
        assert np.allclose(got, w @ eps, atol=1e-4)


def test_member_params_are_center_plus_sigma_noise():
    center = np.arange(6, dtype=np.float32)
    task = GenerationTask(seed=3, generation=2, sigma=0.5, antithetic=True, population=10, center=center)
    p = task.member_params(np.arange(10))
    assert np.allclose(p, center + 0.5 * noise.antithetic_noise(3, 2, np.arange(10), 6))
    assert np.allclose(p[0] + p[1], 2 * center, atol=1e-6)


def test_mirrored_interleaves_pairs_and_every_course_loop_mirrors_that_way():
    """``mirrored``: row 2k is +half[k], row 2k+1 is -half[k]. es's own antithetic noise is that,
    bit for bit, and so is each loop that draws its halves from the stream its notebook names
    (those loops ship to students, this module does not, so each writes the mirroring out)."""
    from classroom.cartpole_workers import pair_noise as workers_noise
    from classroom.mujoco_runs import mirrored_noise
    from pong.student import perturbations
    half = np.arange(6.0).reshape(3, 2)
    assert noise.mirrored(half).tolist() == [[0, 1], [0, -1], [2, 3], [-2, -3], [4, 5], [-4, -5]]
    assert np.array_equal(noise.antithetic_noise(3, 4, np.arange(40), 7),
                          noise.mirrored(noise.pair_noise(3, 4, np.arange(20), 7)))
    for draw in (workers_noise, mirrored_noise, perturbations):
        full = draw(3, 4, 12, 5)
        assert full.shape == (12, 5) and np.array_equal(full, noise.mirrored(full[0::2])), draw.__name__
