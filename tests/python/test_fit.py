"""Least squares and its intervals (analysis/fit.py) against scipy, a test
dependency only."""

import random

import pytest

from isobench.analysis import fit

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
