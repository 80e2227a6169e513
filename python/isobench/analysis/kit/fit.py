"""Straight lines and means with their intervals, for the sections that fit
a cost model (lwc-create: create + destroy = intercept + slope x dirty
pages) or average one estimate per repetition.

Two ways to put an interval on a fitted slope, and which one is used:

- **Over repetitions** (two or more isob processes): the line is fitted once
  per repetition, and the interval is Student's t over the repetitions'
  slopes (mean_interval).  The repetition stays the unit of replication, as
  everywhere else in isobench (docs/methodology.md).
- **Within one process** (one repetition): the regression's own interval,
  slope +- t(n - 2) x its standard error, from the scatter of the points
  about the line (line_interval).  It says how well one process's points
  fix the line, not what the next process would measure, and is labelled
  so.

Weighted least squares (weighted_line) carries the same two intervals.  A
cost that spans decades (a few hundred us with no dirty page, tens of ms
with 4,096) has an error that grows with it; weights 1 / y^2 make each
point count by its relative error, so the small-D points are not drowned
by the large ones.

Whether one line describes the points at all is a test of its own
(linearity): with repetitions, the lack-of-fit F test of the line against
the means at each x, the repetitions' scatter about those means as pure
error (Draper and Smith, Applied Regression Analysis, 3rd ed., sec. 2.1);
with one repetition, the F test of the line against a continuous piecewise
line with knots at the segment ends.  Either way a small p says the cost
per unit changes along x, and one slope misdescribes it.

The tests check these against scipy (a test dependency only) and by
simulation; the package itself needs only numpy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Mapping, Sequence

import numpy as np

from ...core import stats, student

OVER_REPETITIONS = "Student t over the repetitions' estimates"
REGRESSION = "least-squares regression interval within one process: estimate +- t(n-2) x standard error"
LACK_OF_FIT = ("lack-of-fit F test: the weighted line against the means at each D, the "
               "repetitions' scatter about them as pure error")
PIECEWISE = ("F test: the weighted line against a continuous piecewise line with knots at "
             "the segment ends (one repetition: no pure error)")

# A segment of a cost curve starts at each swept x from this one on (x = 0,
# 1, 16, 256, 4096 dirty pages: segments 0..16, 16..256, 256..4096).
FIRST_KNOT = 16


@dataclass(frozen=True)
class Line:
    """y = intercept + slope x, by ordinary least squares over n points.

    The standard errors need at least three points (one degree of freedom
    left for the scatter); with two they are None."""

    intercept: float
    slope: float
    n: int
    intercept_se: float | None
    slope_se: float | None

    def as_dict(self) -> dict:
        return asdict(self)

    def at(self, x: float) -> float:
        return self.intercept + self.slope * x


def least_squares(xs: Sequence[float], ys: Sequence[float]) -> Line:
    """The least-squares line through (xs, ys).  At least two distinct x."""
    if len(xs) != len(ys):
        raise ValueError("least squares of unequal lengths")
    n = len(xs)
    if n < 2 or len(set(xs)) < 2:
        raise ValueError("least squares needs at least two distinct x")
    mx = math.fsum(xs) / n
    my = math.fsum(ys) / n
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    sxy = math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys))
    slope = sxy / sxx
    intercept = my - slope * mx
    if n < 3:
        return Line(intercept, slope, n, None, None)
    rss = math.fsum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys))
    s2 = rss / (n - 2)
    return Line(intercept, slope, n, math.sqrt(s2 * (1.0 / n + mx * mx / sxx)),
                math.sqrt(s2 / sxx))


def line_interval(line: Line, which: str, level: float = stats.CI_LEVEL) -> stats.Interval | None:
    """The regression interval of the line's `slope` or `intercept` (None
    with fewer than three points)."""
    se = line.slope_se if which == "slope" else line.intercept_se
    if se is None:
        return None
    est = line.slope if which == "slope" else line.intercept
    half = student.t_quantile(1.0 - (1.0 - level) / 2.0, line.n - 2) * se
    return stats.Interval(est - half, est + half, level, REGRESSION, line.n)


def mean_interval(values: Sequence[float], level: float = stats.CI_LEVEL) -> stats.Interval | None:
    """Student's t interval of the arithmetic mean of values (one per
    repetition); None below MIN_REPS_FOR_INTERVAL values.  Used where a
    value may be negative or zero (a fitted slope or intercept), so the
    geometric mean of stats.geomean_interval does not apply."""
    n = len(values)
    if n < stats.MIN_REPS_FOR_INTERVAL:
        return None
    m = math.fsum(values) / n
    sd = stats.stdev(values) or 0.0
    half = student.t_quantile(1.0 - (1.0 - level) / 2.0, n - 1) * sd / math.sqrt(n)
    return stats.Interval(m - half, m + half, level, OVER_REPETITIONS, n)


# ---- weighted least squares, segments, linearity ----

def weighted_line(xs: Sequence[float], ys: Sequence[float],
                  ws: Sequence[float] | None = None) -> Line:
    """The weighted least-squares line (weights proportional to 1 /
    variance; None: all equal, which is least_squares).  The standard errors
    scale the weighted residuals by their own mean square (n - 2 degrees of
    freedom): weights need only be right relative to each other."""
    x, y = np.asarray(xs, float), np.asarray(ys, float)
    w = np.ones_like(x) if ws is None else np.asarray(ws, float)
    if x.shape != y.shape or x.shape != w.shape:
        raise ValueError("weighted least squares of unequal lengths")
    n = len(x)
    if n < 2 or len(set(xs)) < 2:
        raise ValueError("least squares needs at least two distinct x")
    if np.any(w <= 0) or not np.all(np.isfinite(w)):
        raise ValueError("weights must be positive")
    sw = w.sum()
    mx, my = (w * x).sum() / sw, (w * y).sum() / sw
    sxx = (w * (x - mx) ** 2).sum()
    slope = float((w * (x - mx) * (y - my)).sum() / sxx)
    intercept = float(my - slope * mx)
    if n < 3:
        return Line(intercept, slope, n, None, None)
    s2 = float((w * (y - intercept - slope * x) ** 2).sum()) / (n - 2)
    return Line(intercept, slope, n, math.sqrt(s2 * (1.0 / sw + mx * mx / sxx)),
                math.sqrt(s2 / sxx))


def segments_of(xs: Sequence[float], first: float = FIRST_KNOT) -> list[tuple[float, float]]:
    """The segments (a, b) a swept curve is cut into: from 0 (or the
    smallest x) to the first knot, then between consecutive swept x from
    `first` on.  A sweep that never reaches `first` is one segment."""
    ds = sorted(set(xs))
    if len(ds) < 2:
        return []
    knots = [ds[0]] + [d for d in ds if d >= first and d > ds[0]]
    if len(knots) < 2:
        knots = [ds[0], ds[-1]]
    return list(zip(knots, knots[1:]))


def f_sf(f: float, d1: float, d2: float) -> float:
    """P(F > f) for Fisher's F with (d1, d2) degrees of freedom."""
    if f <= 0:
        return 1.0
    return student.incomplete_beta(d2 / 2.0, d1 / 2.0, d2 / (d2 + d1 * f))


def _wls_rss(X: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    sw = np.sqrt(w)
    beta, *_ = np.linalg.lstsq(X * sw[:, None], y * sw, rcond=None)
    r = (y - X @ beta) * sw
    return float(r @ r)


@dataclass(frozen=True)
class Linearity:
    """Whether one line describes a curve: the test, its statistic, degrees
    of freedom and p (None: not testable, and why)."""

    p: float | None
    f: float | None
    df: tuple[int, int] | None
    method: str

    def as_dict(self) -> dict:
        return asdict(self)


def linearity(groups: Mapping[float, Sequence[float]], knots: Sequence[float] = ()) -> Linearity:
    """The test that y is linear in x, over groups {x: [y of each repetition]},
    weights 1 / (mean y at x)^2 (positive ys).

    Two or more values at some x: the lack-of-fit F test against the means
    (pure error from the repetitions).  Otherwise: the line against the
    continuous piecewise line with these interior knots (a hinge (x - k)+
    per knot), residual error from the piecewise fit."""
    xs_all = sorted(groups)
    means = {x: float(np.mean(groups[x])) for x in xs_all if len(groups[x])}
    xs_all = [x for x in xs_all if x in means]
    m = len(xs_all)
    if m < 3:
        return Linearity(None, None, None, "not testable: fewer than three x")
    if any(v <= 0 for v in means.values()):
        return Linearity(None, None, None, "not testable: a mean at or below zero")
    x = np.array([xx for xx in xs_all for _ in groups[xx]], float)
    y = np.array([v for xx in xs_all for v in groups[xx]], float)
    w = np.array([1.0 / means[xx] ** 2 for xx in xs_all for _ in groups[xx]], float)
    N = len(y)
    line = np.column_stack([np.ones(N), x])
    rss_line = _wls_rss(line, y, w)
    if N > m:
        ybar = np.array([means[xx] for xx in x])
        ss_pe = float((w * (y - ybar) ** 2).sum())
        d1, d2 = m - 2, N - m
        lof = max(rss_line - ss_pe, 0.0)
        if ss_pe <= 0.0:
            return Linearity(0.0 if lof > 1e-12 * rss_line + 1e-300 else 1.0, None, (d1, d2),
                             LACK_OF_FIT + " (no scatter between repetitions)")
        f = (lof / d1) / (ss_pe / d2)
        return Linearity(f_sf(f, d1, d2), f, (d1, d2), LACK_OF_FIT)
    inner = [k for k in knots if xs_all[0] < k < xs_all[-1]]
    p = 2 + len(inner)
    if not inner or m - p < 1:
        return Linearity(None, None, None, "not testable: one repetition and no degree of "
                         "freedom beyond the piecewise line (run with --repeat)")
    pw = np.column_stack([line, *(np.maximum(x - k, 0.0) for k in inner)])
    rss_pw = _wls_rss(pw, y, w)
    d1, d2 = len(inner), m - p
    if rss_pw <= 1e-12 * max(rss_line, 1e-300):
        return Linearity(0.0 if rss_line > 1e-12 else 1.0, None, (d1, d2), PIECEWISE)
    f = ((rss_line - rss_pw) / d1) / (rss_pw / d2)
    return Linearity(f_sf(f, d1, d2), f, (d1, d2), PIECEWISE)
