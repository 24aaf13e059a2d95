"""--noise table: perturbations as slices of a shared table built from integers alone."""
import hashlib
import subprocess
import sys

import numpy as np
import pytest

import es
from es import noise, noise_table
from es.errors import ESError
from es.strategy import GenerationTask, OpenES
from es.optimizers import SGD


def test_the_table_is_the_same_in_every_process_and_for_any_thread_count():
    table = noise_table.shared_table()
    assert table.dtype == np.float32 and table.size == noise_table.TABLE_SIZE and not table.flags.writeable
    # Chunk c is drawn by its own generator: what one thread draws alone is what the pool drew.
    for c in (0, 7, noise_table.TABLE_SIZE // noise_table.CHUNK - 1):
        alone = noise.rng_for(noise_table.TABLE_SEED, noise_table.TABLE, c).standard_normal(
            noise_table.CHUNK, dtype=np.float32)
        assert np.array_equal(table[c * noise_table.CHUNK:(c + 1) * noise_table.CHUNK], alone)
    code = ("import hashlib, sys; from es import noise_table; "
            "sys.stdout.write(hashlib.sha256(noise_table.shared_table().tobytes()).hexdigest())")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert other == hashlib.sha256(table.tobytes()).hexdigest()
    assert abs(float(table.mean())) < 1e-3 and abs(float(table.std()) - 1) < 1e-3


def test_members_are_mirrored_slices_at_seeded_offsets():
    dim = 1000
    eps = noise.antithetic_noise(5, 3, np.arange(8), dim, scheme="table")
    assert np.array_equal(eps[0::2], -eps[1::2])
    offsets = noise_table.pair_offsets(5, 3, np.arange(4), dim)
    table = noise_table.shared_table()
    for k, o in enumerate(offsets):
        assert 0 <= o <= table.size - dim and np.array_equal(eps[2 * k], table[o:o + dim])
    assert len(set(offsets.tolist())) == 4
    # A subset of members, in another order, gets the same noise (workers see only their chunk).
    assert np.array_equal(noise.antithetic_noise(5, 3, np.array([7, 2]), dim, scheme="table"), eps[[7, 2]])
    # Other generations and seeds move the offsets.
    assert not np.array_equal(noise_table.pair_offsets(5, 4, np.arange(4), dim), offsets)
    assert not np.array_equal(noise_table.pair_offsets(6, 3, np.arange(4), dim), offsets)


def test_weighted_sum_matches_the_explicit_sum_and_a_plain_loop_bit_for_bit():
    w = np.random.default_rng(0).standard_normal(70).astype(np.float32)
    for anti in (True, False):
        eps = noise.antithetic_noise(9, 4, np.arange(70), 300, anti, scheme="table")
        got = noise.weighted_noise_sum(9, 4, w, 300, anti, scheme="table")
        assert np.allclose(got, w @ eps, atol=1e-4)
    dim = noise_table.GATHER_BELOW + 5   # the slice-per-pair path; the gather path is checked above
    pair_w = w[0::2] - w[1::2]
    loop = np.zeros(dim, np.float32)
    for k, o in enumerate(noise_table.pair_offsets(9, 4, np.arange(35), dim)):
        loop += pair_w[k] * noise_table.shared_table()[o:o + dim]
    assert np.array_equal(noise.weighted_noise_sum(9, 4, w, dim, True, scheme="table"), loop)
    eps = noise.antithetic_noise(9, 4, np.arange(70), dim, scheme="table")
    assert np.allclose(noise.weighted_noise_sum(9, 4, w, dim, True, scheme="table"), w @ eps, atol=1e-4)


def test_the_gradient_estimate_points_uphill():
    """On f(x) = -|x - t|^2 the table's estimate of the gradient must agree with the true one."""
    dim, pop = 200, 2000
    rng = np.random.default_rng(1)
    t, x = rng.standard_normal(dim).astype(np.float32), np.zeros(dim, np.float32)
    s = OpenES(x, SGD(dim, 0.1, momentum=0.0), population=pop, sigma=0.05, seed=3, noise_scheme="table",
               shaping=lambda r: r - r.mean())
    params = s.ask().member_params(np.arange(pop))
    grad = s.gradient(-((params - t) ** 2).sum(axis=1))
    true = 2 * (t - x)
    cosine = grad @ true / np.linalg.norm(grad) / np.linalg.norm(true)
    assert cosine > 0.9, cosine


def test_training_with_the_table_is_bit_identical_for_any_worker_count():
    from es.parallel import ParallelEvaluator
    from es.training import make_problem_for
    cfg = es.config_for("cartpole", seed=4, generations=3, reward_goal=1e9, population=64, noise="table")
    reference = es.train(cfg, final_eval=False)
    problem = make_problem_for(cfg)
    ev = ParallelEvaluator(problem, workers=2, adaptive=False)
    try:
        got = es.train(cfg, problem, evaluator=ev, final_eval=False)
    finally:
        ev.close()
    assert np.array_equal(got.center, reference.center)
    seeds = es.train(es.config_for("cartpole", seed=4, generations=3, reward_goal=1e9, population=64),
                     final_eval=False)
    assert not np.array_equal(seeds.center, reference.center)   # the scheme is part of the run


def test_cartpole_solves_with_the_table():
    result = es.train(es.config_for("cartpole", seed=0, noise="table"))
    assert result.summary["solved"], result.summary


def test_bad_scheme_and_oversized_policy_are_clear_errors():
    with pytest.raises(ESError, match="--noise must be one of seeds, table"):
        es.config_for("cartpole", noise="tabel").validate()
    with pytest.raises(ValueError, match="too few for"):
        OpenES(np.zeros(noise_table.TABLE_SIZE, np.float32), SGD(1, 0.1), population=4, sigma=0.1, seed=0,
               noise_scheme="table")
    with pytest.raises(ValueError, match="noise scheme must be one of"):
        GenerationTask(0, 0, 0.1, True, 4, np.zeros(3, np.float32), "tabel").member_params([0])
