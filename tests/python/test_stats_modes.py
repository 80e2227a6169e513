"""The interval's systematic part (quantization counted once) and the modes
test, on values whose answers are known; the statistical part against scipy."""

import math
import random

import pytest

from isobench.core import stats

scipy_stats = pytest.importorskip("scipy.stats")


def test_the_step_is_not_divided_by_the_repetitions():
    # Equal quantized values: the interval is the step's, whatever n.
    five = stats.geomean_interval([78.0] * 5, resolution=26)
    fifty = stats.geomean_interval([78.0] * 50, resolution=26)
    assert (five.low, five.high) == (fifty.low, fifty.high)
    half = 0.95 * 26 / 2 / 78          # one uniform error of one step, at 95%
    assert five.low == pytest.approx(78 * math.exp(-half), rel=1e-12)
    assert five.high == pytest.approx(78 * math.exp(half), rel=1e-12)


def test_the_two_parts_add_in_quadrature():
    rng = random.Random(4)
    vals = [rng.lognormvariate(math.log(500), 0.05) for _ in range(5)]
    logs = [math.log(v) for v in vals]
    lo, hi = scipy_stats.t.interval(0.95, 4, loc=sum(logs) / 5, scale=scipy_stats.sem(logs))
    stat = (hi - lo) / 2
    sys = 0.95 * 26 / 2 / math.exp(sum(logs) / 5)
    iv = stats.geomean_interval(vals, resolution=26)
    assert math.log(iv.high / iv.low) / 2 == pytest.approx(math.hypot(stat, sys), rel=1e-9)
    # Without a resolution: scipy's t interval exactly.
    plain = stats.geomean_interval(vals)
    assert plain.low == pytest.approx(math.exp(lo), rel=1e-9)


def test_a_ratio_of_two_quantized_sides_takes_the_normal_quantile_of_their_sum():
    iv = stats.ratio_interval([130.0] * 5, [104.0] * 5, 26, 26)
    sd = math.sqrt((26 / 130) ** 2 / 12 + (26 / 104) ** 2 / 12)
    half = scipy_stats.norm.ppf(0.975) * sd
    assert iv.low == pytest.approx(1.25 * math.exp(-half), rel=1e-9)
    assert iv.high == pytest.approx(1.25 * math.exp(half), rel=1e-9)


def test_a_ratio_of_quantized_sides_covers_its_truth():
    # Each side a whole-step reading of a truth placed anywhere in its step,
    # the same in every repetition: the systematic case.
    rng = random.Random(9)
    hits, trials = 0, 4000
    for _ in range(trials):
        a, b = rng.uniform(80, 160), rng.uniform(80, 160)
        qa, qb = 26 * round(a / 26), 26 * round(b / 26)
        hits += stats.ratio_interval([qa] * 5, [qb] * 5, 26, 26).contains(a / b)
    assert 0.93 <= hits / trials <= 0.995


def test_equal_values_without_a_resolution_have_zero_width():
    # What the `zero-width` check catches.
    iv = stats.geomean_interval([78.0] * 5)
    assert iv.low == iv.high == 78.0


def test_modes_by_factor_alone():
    groups = stats.modes([127582.0, 975.0, 132145.0])
    assert [(m.count, m.members) for m in groups] == [(1, (1,)), (2, (0, 2))]
    assert groups[1].value == pytest.approx(math.sqrt(127582 * 132145))
    assert stats.main_mode(groups) is groups[1]


def test_modes_below_the_factor_need_separate_spreads():
    # uthread 0 B: four processes at 52 ticks and one at 104.
    values = [52.0, 53.0, 104.0, 51.0, 52.0]
    tight = [(v * 0.95, v * 1.05) for v in values]
    assert [m.count for m in stats.modes(values, tight)] == [4, 1]
    # The same values from processes whose samples overlap: one population.
    wide = [(v * 0.4, v * 2.2) for v in values]
    assert [m.count for m in stats.modes(values, wide)] == [5]


def test_an_even_scatter_is_one_population():
    # Processes 1.6x apart each, never overlapping: no gap stands out.
    values = [100.0, 160.0, 256.0, 410.0]
    tight = [(v * 0.98, v * 1.02) for v in values]
    assert len(stats.modes(values, tight)) == 1
    # One gap four times the others does.
    values = [100.0, 110.0, 121.0, 300.0]
    assert [m.count for m in stats.modes(values, [(v * 0.98, v * 1.02) for v in values])] == \
        [3, 1]


def test_one_value_or_none():
    assert stats.modes([]) == []
    assert [m.count for m in stats.modes([5.0])] == [1]
    assert stats.main_mode(stats.modes([1.0, 1.0, 50.0, 50.0])).value == 1.0  # tie: the lower


@pytest.mark.parametrize("q, n, thin", [(0.999, 114, True), (0.99, 1000, False),
                                        (0.99, 999, True), (0.95, 200, False),
                                        (0.05, 199, True), (0.5, 20, False)])
def test_thin_quantiles(q, n, thin):
    assert stats.thin_quantile(q, n) is thin


def test_log_estimate_is_welchs_with_the_floor_apart():
    rng = random.Random(6)
    x = [rng.lognormvariate(math.log(300), 0.04) for _ in range(5)]
    base = [rng.lognormvariate(math.log(100), 0.08) for _ in range(6)]
    e = stats.log_estimate([(1, stats.LogGroup.of(x, 2)), (-1, stats.LogGroup.of(base, 2))])
    ref = scipy_stats.ttest_ind([math.log(v) for v in x], [math.log(v) for v in base],
                                equal_var=False)
    assert e.centre / e.se == pytest.approx(ref.statistic, rel=1e-9)
    assert e.df == pytest.approx(ref.df, rel=1e-9)
    assert e.sys_half > 0
    equal = stats.log_estimate([(1, stats.LogGroup.of([78.0] * 5, 26))])
    assert (equal.se, equal.df) == (0.0, math.inf) and equal.sys_half > 0
