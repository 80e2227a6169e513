"""Spread, outliers, bootstrap intervals, ratios and the Mann-Whitney test,
on data whose answers are known (or recomputed the slow, obvious way)."""

import math
import random
import statistics

import pytest

from isobench import stats


def test_describe_known_samples():
    d = stats.describe(list(range(1, 101)), ci=False)
    assert (d.n, d.min, d.max, d.median) == (100, 1, 100, 50.5)
    assert d.p99 == pytest.approx(99.01)
    assert d.mad == 25.0
    assert d.stdev == pytest.approx(statistics.stdev(range(1, 101)))
    assert d.cv == pytest.approx(d.stdev / 50.5)
    assert d.robust_cv == pytest.approx(1.4826 * 25 / 50.5)
    assert d.outliers.count == 0 and d.ci is None


def test_outliers_are_counted_never_dropped():
    xs = [100, 101, 99, 100, 102, 98, 100, 101, 99, 100] + [10_000, 1]
    d = stats.describe(xs, ci=False)
    assert d.n == len(xs) and d.max == 10_000 and d.min == 1
    assert (d.outliers.low, d.outliers.high) == (1, 1)


def test_outliers_when_mad_is_zero():
    # A quantized counter: most samples equal, the MAD is 0.
    xs = [52] * 90 + [78] * 9 + [100_000]
    o = stats.describe(xs, ci=False).outliers
    assert stats.mad_sorted(sorted(xs), 52.0) == 0
    assert (o.low, o.high) == (0, 1)
    assert "MAD = 0" in o.rule
    assert stats.describe([5, 5, 5], ci=False).outliers.count == 0


def _brute_force_median_ci(xs, resamples, seed):
    rng = random.Random(seed)
    meds = [statistics.median(rng.choices(xs, k=len(xs))) for _ in range(resamples)]
    return stats.percentile_interval(meds)


@pytest.mark.parametrize("n", [9, 10, 501])
def test_bootstrap_median_matches_brute_force(n):
    rng = random.Random(n)
    xs = sorted(rng.lognormvariate(5, 0.3) for _ in range(n))
    exact = stats.median_ci(xs, seed=3, resamples=4000)
    lo, hi = _brute_force_median_ci(xs, 4000, seed=4)
    width = hi - lo
    # Two Monte Carlo estimates of the same interval: equal within a small
    # part of its width (the endpoints are order statistics of xs).
    assert exact.low == pytest.approx(lo, abs=0.15 * width)
    assert exact.high == pytest.approx(hi, abs=0.15 * width)
    assert exact.low <= statistics.median(xs) <= exact.high


def test_bootstrap_is_seeded_and_recorded():
    xs = sorted(random.Random(1).gauss(0, 1) for _ in range(200))
    a, b = stats.median_ci(xs, seed=7), stats.median_ci(xs, seed=7)
    assert a == b and a.seed == 7 and a.resamples == stats.BOOTSTRAP_RESAMPLES
    assert stats.median_ci(xs, seed=8) != a
    assert stats.median_ci([4.0]).low == stats.median_ci([4.0]).high == 4.0


def test_ratio_overhead_and_geomean():
    assert stats.ratio(150, 100) == 1.5
    assert stats.overhead(150, 100) == pytest.approx(0.5)
    assert stats.overhead(90, 100) == pytest.approx(-0.1)
    # Ratios 2 and 1/2 average to 1 geometrically (the arithmetic mean, 1.25,
    # would call two opposite results a 25% slowdown).
    assert stats.geomean([2.0, 0.5]) == pytest.approx(1.0)
    agg = stats.aggregate_ratios([2.0, 8.0])
    assert agg == {"of": "ratio", "method": "geometric-mean", "value": pytest.approx(4.0), "n": 2}
    for bad in ([], [1.0, 0.0], [-1.0]):
        with pytest.raises(ValueError):
            stats.geomean(bad)
    with pytest.raises(ValueError):
        stats.ratio(1, 0)


def test_mann_whitney_known_values():
    # Completely separated samples: U = 0 for the lower one.
    m = stats.mann_whitney_u([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert (m.u, m.n1, m.n2, m.effect) == (0.0, 5, 5, 0.0)
    # By hand: mu 12.5, sigma^2 = 25/12 * 11, z = (12.5 - 0.5) / sigma
    assert m.z == pytest.approx(-12.0 / math.sqrt(25 / 12 * 11))
    assert m.p == pytest.approx(math.erfc(abs(m.z) / math.sqrt(2)))
    same = stats.mann_whitney_u([3, 3, 3], [3, 3])
    assert (same.p, same.z) == (1.0, 0.0)


def test_mann_whitney_agrees_with_scipy():
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = random.Random(11)
    for n1, n2 in ((8, 12), (50, 60), (300, 200)):
        a = [rng.randint(0, 30) for _ in range(n1)]  # many ties
        b = [rng.randint(4, 34) for _ in range(n2)]
        mine = stats.mann_whitney_u(a, b)
        ref = scipy_stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic",
                                       use_continuity=True)
        assert mine.u == pytest.approx(float(ref.statistic))
        assert mine.p == pytest.approx(float(ref.pvalue), rel=1e-9)


def test_compare_samples_warns_below_nine_values():
    c = stats.compare_samples([10, 11, 12], list(range(20, 40)))
    assert c.ratio == pytest.approx(29.5 / 11)
    assert len(c.warnings) == 1 and "fewer than 9" in c.warnings[0]
    assert c.ci.low <= c.ratio <= c.ci.high
    assert not stats.compare_samples(list(range(9)), list(range(9))).warnings


def test_normalized_ratio_ci_contains_the_ratio():
    rng = random.Random(2)
    a = sorted(rng.gauss(200, 5) for _ in range(400))
    ab = sorted(rng.gauss(100, 3) for _ in range(400))
    b = sorted(rng.gauss(600, 15) for _ in range(400))   # a machine 3x slower...
    bb = sorted(rng.gauss(300, 9) for _ in range(400))   # ...for the baseline too
    ci = stats.normalized_ratio_ci(a, ab, b, bb, seed=1)
    assert ci.low < 1.0 < ci.high


def test_between_cv():
    assert stats.between_cv([100.0]) is None
    assert stats.between_cv([100.0, 100.0]) == 0.0
    assert stats.between_cv([90.0, 110.0]) == pytest.approx(statistics.stdev([90, 110]) / 100)
