"""Least squares and its intervals (analysis/kit/fit.py) against scipy, a test
dependency only."""

import math
import random

import pytest

from isobench.analysis.kit import fit

scipy_stats = pytest.importorskip("scipy.stats")


def _points(seed: int, n: int):
    rng = random.Random(seed)
    xs = [0, 1, 16, 256, 4096, 65536][:n] if n <= 6 else [rng.uniform(0, 100) for _ in range(n)]
    ys = [87.7 + 3.4 * x + rng.gauss(0, 5 + 0.01 * x) for x in xs]
    return xs, ys


@pytest.mark.parametrize("seed, n", [(1, 6), (2, 5), (3, 3), (4, 40), (5, 200)])
def test_least_squares_is_scipys(seed, n):
    xs, ys = _points(seed, n)
    line = fit.least_squares(xs, ys)
    ref = scipy_stats.linregress(xs, ys)
    assert line.slope == pytest.approx(ref.slope, rel=1e-9)
    assert line.intercept == pytest.approx(ref.intercept, rel=1e-9, abs=1e-9)
    assert line.slope_se == pytest.approx(ref.stderr, rel=1e-9)
    assert line.intercept_se == pytest.approx(ref.intercept_stderr, rel=1e-9)
    assert line.n == n


@pytest.mark.parametrize("seed, n", [(6, 6), (7, 4), (8, 30)])
def test_the_regression_interval_is_scipys(seed, n):
    xs, ys = _points(seed, n)
    ref = scipy_stats.linregress(xs, ys)
    t = scipy_stats.t.ppf(0.975, n - 2)
    line = fit.least_squares(xs, ys)
    s = fit.line_interval(line, "slope")
    i = fit.line_interval(line, "intercept")
    assert (s.low, s.high) == pytest.approx((ref.slope - t * ref.stderr,
                                             ref.slope + t * ref.stderr), rel=1e-9)
    assert (i.low, i.high) == pytest.approx((ref.intercept - t * ref.intercept_stderr,
                                             ref.intercept + t * ref.intercept_stderr),
                                            rel=1e-9, abs=1e-9)
    assert s.method == fit.REGRESSION and s.n == n and s.level == 0.95


def test_a_line_through_two_points_has_no_interval():
    line = fit.least_squares([0, 10], [5, 25])
    assert (line.intercept, line.slope) == (5, 2)
    assert line.slope_se is None and fit.line_interval(line, "slope") is None


def test_an_exact_line_has_a_zero_width_interval():
    line = fit.least_squares([0, 1, 2, 3], [1, 3, 5, 7])
    iv = fit.line_interval(line, "slope")
    assert (line.slope, line.intercept) == pytest.approx((2, 1))
    assert iv.low == pytest.approx(2) and iv.high == pytest.approx(2)


@pytest.mark.parametrize("xs", [[], [1], [3, 3, 3]])
def test_least_squares_refuses_what_fixes_no_line(xs):
    with pytest.raises(ValueError):
        fit.least_squares(xs, [1.0] * len(xs))


@pytest.mark.parametrize("values", [[3.0, 3.1, 2.9], [-1.0, 2.5], [5.2, 5.1, 5.3, 5.0, 5.6]])
def test_mean_interval_is_scipys(values):
    iv = fit.mean_interval(values)
    n = len(values)
    m = sum(values) / n
    lo, hi = scipy_stats.t.interval(0.95, n - 1, loc=m, scale=scipy_stats.sem(values))
    assert (iv.low, iv.high) == pytest.approx((lo, hi), rel=1e-9)
    assert iv.method == fit.OVER_REPETITIONS and iv.n == n


def test_mean_interval_needs_two_values():
    assert fit.mean_interval([4.0]) is None


# ---- weighted least squares, segments, linearity ----

import numpy as np  # noqa: E402

from isobench.analysis.families import lwc  # noqa: E402
from isobench.core import stats  # noqa: E402

scipy_optimize = pytest.importorskip("scipy.optimize")


@pytest.mark.parametrize("seed, n", [(11, 5), (12, 12), (13, 40)])
def test_weighted_line_is_scipys_weighted_fit(seed, n):
    rng = np.random.default_rng(seed)
    xs = np.sort(rng.uniform(0, 4096, n))
    truth = 300 + 3 * xs
    ys = truth * np.exp(rng.normal(0, 0.05, n))
    ws = 1 / truth ** 2
    line = fit.weighted_line(list(xs), list(ys), list(ws))
    popt, pcov = scipy_optimize.curve_fit(lambda x, a, b: a + b * x, xs, ys, p0=(1, 1),
                                          sigma=1 / np.sqrt(ws), absolute_sigma=False)
    assert (line.intercept, line.slope) == pytest.approx(tuple(popt), rel=1e-6)
    assert line.intercept_se == pytest.approx(math.sqrt(pcov[0, 0]), rel=1e-5)
    assert line.slope_se == pytest.approx(math.sqrt(pcov[1, 1]), rel=1e-5)


def test_equal_weights_are_least_squares():
    xs, ys = _points(3, 6)
    a, b = fit.weighted_line(xs, ys), fit.least_squares(xs, ys)
    assert (a.intercept, a.slope, a.slope_se) == pytest.approx((b.intercept, b.slope, b.slope_se))


@pytest.mark.parametrize("f, d1, d2", [(0.5, 3, 10), (2.0, 2, 1), (6.5, 3, 10), (40.0, 4, 20),
                                       (1.0, 1, 5)])
def test_f_survival_is_scipys(f, d1, d2):
    assert fit.f_sf(f, d1, d2) == pytest.approx(scipy_stats.f.sf(f, d1, d2), rel=1e-8)


def test_segments_start_at_each_swept_d_from_16():
    assert fit.segments_of([0, 1, 16, 256, 4096]) == [(0, 16), (16, 256), (256, 4096)]
    assert fit.segments_of([0, 1, 16, 256, 4096, 65536])[-1] == (4096, 65536)
    assert fit.segments_of([0, 1, 4]) == [(0, 4)]
    assert fit.segments_of([0]) == []


DS = (0, 1, 16, 256, 4096)


def _cost(d: float, kink: float | None) -> float:
    """300 us + 3 us per page, or `kink` us per page beyond 256 pages."""
    if kink is None or d <= 256:
        return 300.0 + 3.0 * d
    return 300.0 + 3.0 * 256 + kink * (d - 256)


def _reps(rng, reps: int, kink: float | None, cv: float = 0.05) -> dict[int, list[float]]:
    return {d: list(_cost(d, kink) * np.exp(rng.normal(0, cv, reps))) for d in DS}


def test_linearity_accepts_a_straight_line_at_its_level():
    # 400 straight lines with 5% lognormal scatter, 3 repetitions: the test
    # rejects at 5% about 5% of them.
    rng = np.random.default_rng(22)
    ps = [fit.linearity(_reps(rng, 3, None), (16, 256)).p for _ in range(400)]
    rate = sum(p < 0.05 for p in ps) / len(ps)
    assert 0.02 <= rate <= 0.09


def test_linearity_rejects_a_kinked_line():
    # 3 us per page up to 256, 6 beyond (the shape lwc-create shows): rejected
    # nearly always at the bad-fit level.
    rng = np.random.default_rng(23)
    ps = [fit.linearity(_reps(rng, 3, 6.0), (16, 256)).p for _ in range(200)]
    assert sum(p < lwc.BAD_FIT_P for p in ps) / len(ps) >= 0.95


def test_linearity_with_one_repetition_uses_the_piecewise_line():
    rng = np.random.default_rng(24)
    straight = [fit.linearity({d: v[:1] for d, v in _reps(rng, 1, None).items()}, (16, 256))
                for _ in range(400)]
    assert all(t.method == fit.PIECEWISE and t.df == (2, 1) for t in straight)
    assert 0.01 <= sum(t.p < 0.05 for t in straight) / 400 <= 0.09
    kinked = fit.linearity({d: [_cost(d, 6.0) * (1 + 0.001 * (i % 2))]
                            for i, d in enumerate(DS)}, (16, 256))
    assert kinked.p < 0.05


def test_linearity_says_why_it_cannot_test():
    assert fit.linearity({0: [1.0], 16: [2.0]}).p is None
    t = fit.linearity({0: [1.0], 16: [2.0], 256: [3.0]}, ())
    assert t.p is None and "--repeat" in t.method


def _cells(groups: dict[int, list[float]]) -> dict[int, dict]:
    """lwc-create cells {D: entry} with these per-repetition medians (us)."""
    return {d: {"to_ns": 1.0, "repetitions": [{"repetition": r + 1, "median": y * 1000}
                                              for r, y in enumerate(ys)]}
            for d, ys in groups.items()}


@pytest.mark.parametrize("reps", [3, 5])
def test_segment_slopes_and_fixed_cost_cover_the_truth(reps):
    # 400 kinked curves with 10% lognormal scatter per point: each segment's
    # interval covers its true cost per page, and the D=0 interval the true
    # fixed cost, in 0.92-0.985 of them (nominal 0.95).
    rng = np.random.default_rng(100 + reps)
    truth = {(0, 16): 3.0, (16, 256): 3.0, (256, 4096): 6.0}
    hits = {k: 0 for k in truth}
    fixed_hits, sims = 0, 400
    for _ in range(sims):
        groups = _reps(rng, reps, 6.0, cv=0.10)
        for sg in lwc.segment_fits(_cells(groups)):
            lo, hi = sg["slope"]["interval"]
            key = (sg["from"], sg["to"])
            # The 0..16 segment's line through 0, 1, 16 is exact for the truth.
            hits[key] += lo <= truth[key] <= hi
        iv = stats.geomean_interval(groups[0])
        fixed_hits += iv.low <= 300.0 <= iv.high
    for key, h in hits.items():
        assert 0.92 <= h / sims <= 0.985, (key, h / sims)
    assert 0.92 <= fixed_hits / sims <= 0.985


def test_the_weighted_line_recovers_a_straight_lines_fixed_cost():
    # The weighted line's intercept (1/y^2 weights) covers the true 300 us,
    # and is narrower than an unweighted line's over the same points, whose
    # fit is dominated by the 4,096-page point's absolute scatter.
    rng = np.random.default_rng(31)
    hits, ratios, sims = 0, [], 300
    for _ in range(sims):
        groups = _reps(rng, 5, None)
        line = lwc.fit_line(_cells(groups))
        lo, hi = line["intercept"]["interval"]
        hits += lo <= 300.0 <= hi
        ols = fit.mean_interval([fit.least_squares(list(DS), [groups[d][r] for d in DS]).intercept
                                 for r in range(5)])
        ratios.append((ols.high - ols.low) / (hi - lo))
    assert 0.92 <= hits / sims <= 0.985
    assert float(np.median(ratios)) > 1.2
