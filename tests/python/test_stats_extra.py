"""Spread, outliers, intervals, ratios and the Mann-Whitney test, on data
whose answers are known, and against scipy (a test dependency only)."""

import math
import random
import statistics

import pytest

from isobench.analysis.kit import units
from isobench.core import ranktest, stats, student

scipy_stats = pytest.importorskip("scipy.stats")


def test_describe_known_samples():
    d = stats.describe(list(range(1, 101)))
    assert (d.n, d.min, d.max, d.median) == (100, 1, 100, 50.5)
    assert d.p99 == pytest.approx(99.01)
    assert d.mad == 25.0
    assert d.stdev == pytest.approx(statistics.stdev(range(1, 101)))
    assert d.cv == pytest.approx(d.stdev / 50.5)
    assert d.robust_cv == pytest.approx(1.4826 * 25 / 50.5)
    assert d.outliers.count == 0


def test_outliers_are_counted_never_dropped():
    xs = [100, 101, 99, 100, 102, 98, 100, 101, 99, 100] + [10_000, 1]
    d = stats.describe(xs)
    assert d.n == len(xs) and d.max == 10_000 and d.min == 1
    assert (d.outliers.low, d.outliers.high) == (1, 1)


def test_outliers_when_mad_is_zero():
    # A quantized counter: most samples equal, the MAD is 0.
    xs = [52] * 90 + [78] * 9 + [100_000]
    o = stats.describe(xs).outliers
    assert stats.mad_sorted(sorted(xs), 52.0) == 0
    assert (o.low, o.high) == (0, 1)
    assert "MAD = 0" in o.rule
    assert stats.describe([5, 5, 5]).outliers.count == 0


# ---- the order-statistic interval of a median (within one process) ----

@pytest.mark.parametrize("n", [6, 7, 10, 15, 20, 57, 100, 1001, 20000])
def test_median_ranks_agree_with_the_binomial(n):
    l, u, cover = stats.median_ranks(n)
    assert u == n + 1 - l
    # Coverage of [x(l), x(u)] is 1 - 2 P(B <= l - 1), B ~ Binomial(n, 1/2):
    # at least 95%, and one rank further in it would fall below.
    assert cover == pytest.approx(1 - 2 * scipy_stats.binom.cdf(l - 1, n, 0.5), rel=1e-9)
    assert cover >= 0.95
    assert 1 - 2 * scipy_stats.binom.cdf(l, n, 0.5) < 0.95


def test_too_few_values_for_a_median_interval():
    assert stats.median_ranks(5) is None
    assert stats.median_interval([1, 2, 3, 4, 5]) is None


def test_median_interval_covers_the_median_95_times_in_100():
    rng = random.Random(4)
    hits, trials = 0, 2000
    for _ in range(trials):
        xs = sorted(rng.expovariate(1.0) for _ in range(31))
        iv = stats.median_interval(xs)
        hits += iv.low <= math.log(2) <= iv.high  # the exponential's median
    assert 0.94 <= hits / trials <= 0.985


def test_a_quantized_median_is_never_exact():
    # Samples on a counter that steps by 26: the order statistics collapse
    # onto one value, which is the counter's resolution, not certainty.
    xs = sorted([78] * 900 + [104] * 100)
    iv = stats.median_interval(xs, step=26)
    assert (iv.low, iv.high, iv.quantized) == (52.0, 104.0, True)
    # Unquantized data keep their order-statistic interval.
    iv = stats.median_interval(sorted(range(1000)), step=1)
    assert not iv.quantized and iv.high - iv.low > 1


# ---- Student's t and intervals over repetitions ----

@pytest.mark.parametrize("df", [1, 2, 3.5, 4, 9, 30, 250])
def test_t_quantile_agrees_with_scipy(df):
    for p in (0.6, 0.9, 0.975, 0.995):
        assert student.t_quantile(p, df) == pytest.approx(scipy_stats.t.ppf(p, df), rel=1e-9)
        assert student.t_cdf(student.t_quantile(p, df), df) == pytest.approx(p, rel=1e-9)


@pytest.mark.parametrize("n", [2, 3, 5, 12])
def test_geomean_interval_width_is_scipys(n):
    rng = random.Random(n)
    reps = [rng.lognormvariate(math.log(5000), 0.05) for _ in range(n)]
    iv = stats.geomean_interval(reps)
    logs = [math.log(v) for v in reps]
    lo, hi = scipy_stats.t.interval(0.95, n - 1, loc=statistics.mean(logs),
                                    scale=scipy_stats.sem(logs))
    assert (iv.low, iv.high) == (pytest.approx(math.exp(lo), rel=1e-9),
                                 pytest.approx(math.exp(hi), rel=1e-9))
    assert iv.n == n and iv.level == 0.95


def test_geomean_interval_covers_95_times_in_100():
    # Synthetic repetitions: each process's value varies by ~5% around the
    # truth; the interval over 5 of them must cover it about 95% of the time.
    rng = random.Random(11)
    truth, hits, trials = 1000.0, 0, 3000
    for _ in range(trials):
        reps = [rng.lognormvariate(math.log(truth), 0.05) for _ in range(5)]
        hits += stats.geomean_interval(reps).contains(truth)
    assert 0.935 <= hits / trials <= 0.965


def test_pooling_samples_would_understate_the_interval():
    # The pseudo-replication this replaces: 5 processes whose medians differ
    # by ~5%, 5000 samples each.  Pooled, the median's interval is a fraction
    # of a percent wide; over the repetitions it is several percent.
    rng = random.Random(2)
    medians = [rng.lognormvariate(math.log(1000), 0.05) for _ in range(5)]
    pooled = sorted(rng.gauss(m, 20) for m in medians for _ in range(5000))
    narrow = stats.median_interval(pooled)
    wide = stats.geomean_interval(medians)
    assert (narrow.high - narrow.low) / 1000 < 0.01
    assert (wide.high - wide.low) / 1000 > 0.05


def test_equal_repetitions_of_a_quantized_value_still_have_width():
    iv = stats.geomean_interval([78.0] * 5, resolution=26)
    assert iv.low < 78.0 < iv.high
    assert stats.geomean_interval([78.0] * 5).low == 78.0  # no resolution given: exact


def test_ratio_interval_is_welchs_on_the_logs():
    rng = random.Random(5)
    x = [rng.lognormvariate(math.log(300), 0.04) for _ in range(5)]
    base = [rng.lognormvariate(math.log(100), 0.08) for _ in range(6)]
    iv = stats.ratio_interval(x, base)
    ref = scipy_stats.ttest_ind([math.log(v) for v in x], [math.log(v) for v in base],
                                equal_var=False).confidence_interval(0.95)
    assert iv.low == pytest.approx(math.exp(ref.low), rel=1e-9)
    assert iv.high == pytest.approx(math.exp(ref.high), rel=1e-9)
    assert iv.contains(stats.geomean(x) / stats.geomean(base))


def test_ratio_interval_covers_95_times_in_100():
    rng = random.Random(7)
    hits, trials = 0, 3000
    for _ in range(trials):
        x = [rng.lognormvariate(math.log(150), 0.05) for _ in range(5)]
        base = [rng.lognormvariate(math.log(100), 0.03) for _ in range(5)]
        hits += stats.ratio_interval(x, base).contains(1.5)
    assert 0.935 <= hits / trials <= 0.97


def test_one_repetition_has_no_interval_between_processes():
    assert stats.geomean_interval([5.0]) is None
    assert stats.ratio_interval([5.0], [1.0, 1.1]) is None
    assert stats.geomean_interval([5.0, -1.0]) is None  # logs of non-positive values


def test_same_values_twice_give_an_interval_around_one():
    rng = random.Random(3)
    a = [rng.lognormvariate(0, 0.05) for _ in range(5)]
    base = [rng.lognormvariate(-1, 0.05) for _ in range(5)]
    g = [(1, stats.LogGroup.of(a)), (-1, stats.LogGroup.of(base)),
         (-1, stats.LogGroup.of(a)), (1, stats.LogGroup.of(base))]
    iv = stats.log_interval(g)
    assert iv.low < 1.0 < iv.high


# ---- ratios and averages ----

def test_ratio_overhead_and_geomean():
    assert units.ratio(150, 100) == 1.5
    assert units.overhead(150, 100) == pytest.approx(0.5)
    assert units.overhead(90, 100) == pytest.approx(-0.1)
    # Ratios 2 and 1/2 average to 1 geometrically (the arithmetic mean, 1.25,
    # would call two opposite results a 25% slowdown).
    assert stats.geomean([2.0, 0.5]) == pytest.approx(1.0)
    assert stats.geomean([3000.0]) == 3000.0
    agg = stats.aggregate_ratios([2.0, 8.0])
    assert agg == {"of": "ratio", "method": "geometric-mean", "value": pytest.approx(4.0), "n": 2}
    for bad in ([], [1.0, 0.0], [-1.0]):
        with pytest.raises(ValueError):
            stats.geomean(bad)
    with pytest.raises(ValueError):
        units.ratio(1, 0)


def test_unit_conversion():
    assert units.to_ns(2600, "tsc_ticks", 2.6e9) == pytest.approx(1000)
    assert units.to_ns(5, "ns", None) == 5
    assert units.to_ns(5, "cycles", 2.6e9) is None
    assert units.to_ns(5, "tsc_ticks", None) is None
    assert units.convert(2.0, "us", "ns") == 2000.0
    assert units.convert(2.0, "us", "cycles") is None


# ---- the Mann-Whitney test on repetitions ----

def test_mann_whitney_known_values():
    m = ranktest.mann_whitney_u([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert (m.u, m.n1, m.n2, m.effect, m.method) == (0.0, 5, 5, 0.0, "exact")
    # The most extreme of C(10, 5) = 252 orderings, on either side.
    assert m.p == pytest.approx(2 / 252)
    same = ranktest.mann_whitney_u([3, 3, 3], [3, 3])
    assert (same.p, same.z) == (1.0, 0.0)


def test_mann_whitney_agrees_with_scipy():
    rng = random.Random(11)
    for n1, n2 in ((4, 4), (5, 7), (8, 12), (20, 25)):
        a = [rng.gauss(0, 1) for _ in range(n1)]  # no ties: exact
        b = [rng.gauss(0.8, 1) for _ in range(n2)]
        mine = ranktest.mann_whitney_u(a, b)
        ref = scipy_stats.mannwhitneyu(a, b, alternative="two-sided", method="exact")
        assert mine.method == "exact"
        assert mine.u == pytest.approx(float(ref.statistic))
        assert mine.p == pytest.approx(float(ref.pvalue), rel=1e-9)
    for n1, n2 in ((8, 12), (50, 60), (300, 200)):
        a = [rng.randint(0, 30) for _ in range(n1)]  # many ties: normal approximation
        b = [rng.randint(4, 34) for _ in range(n2)]
        mine = ranktest.mann_whitney_u(a, b)
        ref = scipy_stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic",
                                       use_continuity=True)
        assert mine.method == "normal approximation"
        assert mine.p == pytest.approx(float(ref.pvalue), rel=1e-9)


def test_the_test_needs_enough_repetitions():
    # 3 against 3 can never give p < 0.05 (the most extreme ordering gives
    # 2/20 = 0.1); 4 against 4 can (2/70).
    assert not ranktest.test_possible(3, 3)
    assert ranktest.test_possible(4, 4) and ranktest.test_possible(3, 5)
    assert ranktest.min_reps_for_test() == 4
    assert ranktest.smallest_p(3, 3) == pytest.approx(0.1)


def test_between_cv():
    assert stats.between_cv([100.0]) is None
    assert stats.between_cv([100.0, 100.0]) == 0.0
    assert stats.between_cv([90.0, 110.0]) == pytest.approx(statistics.stdev([90, 110]) / 100)


def test_mad_and_stdev_agree_with_the_obvious_way():
    # mad_sorted selects from two sorted runs and stdev sums integers
    # exactly; both must equal the slow, obvious computation.
    rng = random.Random(9)
    for n in (1, 2, 3, 4, 5, 10, 11, 100, 101):
        for _ in range(50):
            xs = sorted(rng.choice([rng.randint(0, 20), rng.random() * 10]) for _ in range(n))
            med = stats.percentile_sorted(xs, 0.5)
            assert stats.mad_sorted(xs, med) == pytest.approx(
                stats.median([abs(x - med) for x in xs]))
            if n > 1:
                assert stats.stdev(xs) == pytest.approx(statistics.stdev(xs))
    big = [rng.randint(0, 2**40) for _ in range(1001)]
    assert stats.stdev(big) == pytest.approx(statistics.stdev(big), rel=1e-12)
