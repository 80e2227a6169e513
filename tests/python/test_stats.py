"""Summary statistics on samples whose answers are known exactly."""

import pytest

from isobench.core import stats


def test_summary_of_known_samples():
    s = stats.summarize([10, 1, 7, 3, 5, 9, 2, 8, 4, 6])  # 1..10, shuffled
    assert s.n == 10
    assert s.min == 1 and s.max == 10
    assert s.median == 5.5
    # linear interpolation: h = 9 * 0.05 = 0.45 -> 1 + 0.45 * (2 - 1)
    assert s.p5 == pytest.approx(1.45)
    # h = 9 * 0.95 = 8.55 -> 9 + 0.55 * (10 - 9)
    assert s.p95 == pytest.approx(9.55)
    # |x - 5.5| = 0.5, 0.5, 1.5, 1.5, ..., 4.5, 4.5 -> median 2.5
    assert s.mad == 2.5
    assert s.mean == 5.5


def test_odd_count_and_outlier():
    s = stats.summarize([100, 102, 101, 103, 10_000])
    assert s.median == 102.0
    assert s.mad == 1.0            # unscaled: deviations 2, 0, 1, 1, 9898
    assert s.mean == pytest.approx(2081.2)
    assert s.p95 == pytest.approx(103 + 0.8 * (10_000 - 103))


def test_single_sample():
    s = stats.summarize([42])
    assert (s.n, s.min, s.max, s.median, s.p5, s.p95, s.mad, s.mean) == (1, 42, 42, 42, 42, 42, 0, 42)


def test_empty_is_all_none():
    s = stats.summarize([])
    assert s.n == 0
    assert all(v is None for k, v in s.as_dict().items() if k != "n")


def test_percentile_edges():
    xs = [3, 1, 2]
    assert stats.percentile(xs, 0.0) == 1.0
    assert stats.percentile(xs, 1.0) == 3.0
    assert stats.percentile(xs, 0.25) == 1.5
    with pytest.raises(ValueError):
        stats.percentile(xs, 1.5)
    with pytest.raises(ValueError):
        stats.percentile([], 0.5)


def test_mean_of_large_counts_is_correctly_rounded():
    # A float running sum would lose the 1s next to 2**53.
    xs = [2**53, 1, 1]
    assert stats.mean(xs) == (2**53 + 2) / 3
    assert stats.summarize(xs).mean == (2**53 + 2) / 3
