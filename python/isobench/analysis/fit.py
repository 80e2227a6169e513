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

Pure Python, like stats.py; the tests check both against scipy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

from . import stats

OVER_REPETITIONS = "Student t over the repetitions' estimates"
REGRESSION = "least-squares regression interval within one process: estimate +- t(n-2) x standard error"


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
    half = stats.t_quantile(1.0 - (1.0 - level) / 2.0, line.n - 2) * se
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
    half = stats.t_quantile(1.0 - (1.0 - level) / 2.0, n - 1) * sd / math.sqrt(n)
    return stats.Interval(m - half, m + half, level, OVER_REPETITIONS, n)
