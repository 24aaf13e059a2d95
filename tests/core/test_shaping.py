import numpy as np
import pytest

from es.shaping import centered_ranks, ranks, raw, z_score


def test_centered_ranks_sum_to_zero_and_span_half():
    x = np.random.default_rng(0).standard_normal(101)
    r = centered_ranks(x)
    assert abs(r.sum()) < 1e-5
    assert r.min() == pytest.approx(-0.5) and r.max() == pytest.approx(0.5)


def test_centered_ranks_preserve_order():
    x = np.random.default_rng(1).standard_normal(50)
    r = centered_ranks(x)
    assert np.array_equal(np.argsort(x), np.argsort(r))


def test_ties_get_equal_weights():
    r = centered_ranks([3.0, 1.0, 3.0, 2.0, 3.0])
    assert r[0] == r[2] == r[4]
    assert r[1] < r[3] < r[0]
    assert abs(r.sum()) < 1e-6
    assert np.allclose(ranks([5, 5, 5, 5]), 1.5)


def test_shaping_is_scale_free_for_ranks_only():
    x = np.array([1.0, 10.0, 100.0, 1000.0])
    assert np.array_equal(centered_ranks(x), centered_ranks(np.log(x)))
    assert not np.allclose(z_score(x), z_score(np.log(x)))


def test_z_score_and_raw():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    z = z_score(x)
    assert z.mean() == pytest.approx(0, abs=1e-6) and z.std() == pytest.approx(1, abs=1e-6)
    assert np.array_equal(z_score([2.0, 2.0, 2.0]), np.zeros(3))
    assert np.array_equal(raw(x), x.astype(np.float32))


def test_z_score_of_huge_returns_is_finite_and_scale_free():
    """Returns near 1e300 (a local environment's rewards are not bounded like a worker's):
    std would square them to infinity; the z-scores are those of the same returns scaled down."""
    x = np.array([1.0, 3.0, -2.0, 7.0])
    for scale in (1e160, 1e300):
        assert np.allclose(z_score(x * scale), z_score(x), rtol=1e-6, atol=0)


@pytest.mark.parametrize("fn", [centered_ranks, z_score, raw])
def test_non_finite_returns_are_refused(fn):
    with pytest.raises(ValueError, match="NaN"):
        fn([1.0, float("nan")])


def test_float64_centered_ranks_are_the_float32_ones_before_rounding():
    """One computation, two precisions: the float64 weights (the course's references) round to
    the float32 ones (es's update); ties share their mean rank in both."""
    rng = np.random.default_rng(1)
    for x in (rng.normal(size=33), rng.integers(0, 4, 20).astype(float), np.array([1.0, 1.0, 2.0, 0.0])):
        wide = centered_ranks(x, dtype=np.float64)
        assert wide.dtype == np.float64 and np.array_equal(wide, ranks(x) / (len(x) - 1) - 0.5)
        assert np.array_equal(wide.astype(np.float32), centered_ranks(x))
    assert centered_ranks(np.array([1.0, 1.0, 2.0, 0.0]), dtype=np.float64).tolist() == [0.0, 0.0, 0.5, -0.5]
