"""es.obs_norm: the statistics merge the way the paper's workers' do, and merging in member
order makes them independent of how the members were cut into chunks."""
import numpy as np
import pytest

from es.obs_norm import CLIP, ObsStats, from_members, mean_std, merge, normalize


def stats_of(x):
    x = np.asarray(x, dtype=np.float64)
    return ObsStats(len(x), x.sum(axis=0), (x * x).sum(axis=0))


def test_two_workers_merged_equal_one_that_saw_everything():
    rng = np.random.default_rng(0)
    a, b = rng.normal(3, 2, (500, 4)), rng.normal(-1, 0.5, (300, 4))
    mean, std = mean_std(merge(stats_of(a), stats_of(b)))
    both = np.vstack([a, b])
    np.testing.assert_allclose(mean, both.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(std, both.std(axis=0), rtol=1e-9)


def test_members_merged_in_order_give_the_same_bits_for_any_chunking():
    rng = np.random.default_rng(1)
    totals, squares = rng.normal(size=(64, 5)) * 1e3, rng.random((64, 5)) * 1e6
    counts = rng.integers(1, 1000, 64)
    whole = from_members(counts, totals, squares)
    for cut in ([0, 64], [0, 7, 30, 64], list(range(0, 65, 2))):
        parts = [(counts[a:b], totals[a:b], squares[a:b]) for a, b in zip(cut[:-1], cut[1:])]
        again = from_members(np.concatenate([p[0] for p in parts]), np.vstack([p[1] for p in parts]),
                             np.vstack([p[2] for p in parts]))
        assert again.count == whole.count
        assert again.total.tobytes() == whole.total.tobytes() and again.squares.tobytes() == whole.squares.tobytes()


def test_before_any_state_the_policy_sees_raw_observations_and_a_still_variable_is_not_divided_by_zero():
    mean, std = mean_std(ObsStats.empty(3))
    assert mean.tolist() == [0, 0, 0] and std.tolist() == [1, 1, 1]
    mean, std = mean_std(stats_of([[1.0, 2.0, 5.0]] * 10))
    assert np.all(std > 0) and np.all(np.isfinite(normalize([[1.0, 2.0, 5.0]], mean, std)))
    assert normalize([[1e9, -1e9, 0]], np.zeros(3), np.ones(3)).tolist() == [[CLIP, -CLIP, 0]]


def test_a_checkpoint_array_round_trips_and_a_broken_one_is_refused():
    s = stats_of(np.random.default_rng(2).normal(size=(9, 3)))
    back = ObsStats.from_array(s.to_array())
    assert back.count == 9 and back.total.tobytes() == s.total.tobytes()
    for bad in ([1.5, 0, 0], [-1, 0, 0], [1, np.nan, 0], [1, 0]):
        with pytest.raises(ValueError):
            ObsStats.from_array(bad)
