"""Summary statistics of raw samples, in pure Python.

Definitions (they are part of the results' meaning, so they are fixed here):

- Percentiles use linear interpolation between closest ranks, the method
  numpy calls "linear" and Hyndman & Fan call type 7: for sorted samples
  x[0..n-1] and a fraction q, let h = (n - 1) * q; the percentile is
  x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)]).
  The median is the 50th percentile, which equals the usual median.
- MAD is the median absolute deviation from the median, UNSCALED (no 1.4826
  factor): it is a spread in the samples' own unit, not an estimate of sigma.
- mean is the arithmetic mean; it is reported but tails make it fragile, which
  is why the tables lead with the median.

An empty sample set has n = 0 and every other field None.

This module is meant to grow (confidence intervals, bootstrap): keep each
statistic a small pure function over a sorted sequence.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence


@dataclass(frozen=True)
class Summary:
    n: int
    min: int | float | None
    max: int | float | None
    median: float | None
    p5: float | None
    p95: float | None
    mad: float | None
    mean: float | None

    def as_dict(self) -> dict:
        return asdict(self)


EMPTY = Summary(n=0, min=None, max=None, median=None, p5=None, p95=None, mad=None, mean=None)


def percentile_sorted(xs: Sequence[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) of already sorted xs, linear interpolation."""
    if not xs:
        raise ValueError("percentile of no samples")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} is outside [0, 1]")
    h = (len(xs) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (h - lo) * (xs[hi] - xs[lo]))


def percentile(xs: Sequence[float], q: float) -> float:
    return percentile_sorted(sorted(xs), q)


def median(xs: Sequence[float]) -> float:
    return percentile(xs, 0.5)


def mad_sorted(xs: Sequence[float], med: float) -> float:
    """Unscaled median absolute deviation of sorted xs around their median."""
    return median([abs(x - med) for x in xs])


def mean(xs: Sequence[float]) -> float:
    if not xs:
        raise ValueError("mean of no samples")
    # Integer samples (counts) are summed exactly and divided once, so the mean
    # is correctly rounded however large the counts; floats go through fsum.
    if all(isinstance(x, int) for x in xs):
        return sum(xs) / len(xs)
    return math.fsum(xs) / len(xs)


def summarize(samples: Sequence[int | float]) -> Summary:
    if not samples:
        return EMPTY
    xs = sorted(samples)
    med = percentile_sorted(xs, 0.5)
    return Summary(
        n=len(xs),
        min=xs[0],
        max=xs[-1],
        median=med,
        p5=percentile_sorted(xs, 0.05),
        p95=percentile_sorted(xs, 0.95),
        mad=mad_sorted(xs, med),
        mean=mean(xs),
    )
