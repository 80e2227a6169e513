"""Summary statistics of raw samples, vectorized on numpy.

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

Keep each statistic a small pure function over a sorted sequence.  A
sequence may be a list or a numpy array (runs.py hands the samples over as
sorted int64 arrays, which is what makes a run of millions of samples quick
to summarize); the results are the same Python numbers either way: sums of
integer samples are exact, sums of floats correctly rounded (math.fsum),
and order statistics are taken, never estimated.  The part below
summarize() -- spread, outliers, order-statistic intervals, intervals over
repetitions, ratios, the Mann-Whitney test -- is described in
docs/methodology.md.  Its distributions (binomial, Student's t, the exact
U distribution) are computed here from the standard library's math module;
numpy is the only package the module needs, and the tests check the
distributions against scipy.
"""

from __future__ import annotations

import bisect
import functools
import math
import operator
import statistics
import sys
from dataclasses import asdict, dataclass, fields
from statistics import NormalDist
from typing import Sequence

import numpy as np

from .student import t_quantile


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
        return _flat(self)


def _flat(obj) -> dict:
    """asdict of a dataclass of plain numbers, without its deep copies."""
    return {f.name: getattr(obj, f.name) for f in fields(obj)}


EMPTY = Summary(n=0, min=None, max=None, median=None, p5=None, p95=None, mad=None, mean=None)


# Integer sums are taken in int64 while they cannot overflow, beyond in
# Python integers: either way exactly.
_INT64_MAX = 2**63 - 1


def as_array(xs: Sequence[float]) -> np.ndarray:
    """xs as a one-dimensional numpy array, without a copy where it already is
    one: int64 for integers (counter samples stay below 2**63), float64
    otherwise."""
    a = np.asarray(xs)
    if a.dtype.kind == "u" and a.size and int(a.max()) > _INT64_MAX:
        a = a.astype(np.float64)  # beyond int64: no counter measures that long
    elif a.dtype.kind == "i" and a.dtype != np.int64 or a.dtype.kind in "ub":
        a = a.astype(np.int64)
    elif a.dtype.kind not in "if":
        a = a.astype(np.float64)  # Python integers beyond int64 end up here
    return a.reshape(-1)


def sorted_array(xs: Sequence[float]) -> np.ndarray:
    """xs as a sorted array (see as_array); one already sorted is not sorted again."""
    a = as_array(xs)
    if a.size > 1 and not bool(np.all(a[1:] >= a[:-1])):
        a = np.sort(a)
    return a


def _bound(a: np.ndarray) -> int:
    """The largest |x| of a non-empty int64 array."""
    return max(abs(int(a.min())), abs(int(a.max())))


def _int_sum(a: np.ndarray, big: int | None = None) -> int:
    """The exact sum of an int64 array, as a Python integer; big bounds |x|."""
    if a.size == 0:
        return 0
    big = _bound(a) if big is None else big
    if big * a.size <= _INT64_MAX:
        return int(a.sum())
    return sum(a.tolist())


def _int_sum_of_squares(a: np.ndarray, big: int | None = None) -> int:
    """The exact sum of x * x over an int64 array, as a Python integer: in
    int64 chunks short enough not to overflow, added up in Python."""
    if a.size == 0:
        return 0
    big = _bound(a) if big is None else big
    if big == 0:
        return 0
    if big * big > _INT64_MAX:
        xs = a.tolist()
        return sum(map(operator.mul, xs, xs))
    chunk = _INT64_MAX // (big * big)
    if chunk >= a.size:
        return int(np.dot(a, a))
    if a.size // chunk < 64:
        return sum(int(np.dot(c, c)) for c in (a[i:i + chunk] for i in range(0, a.size, chunk)))
    return sum(np.add.reduceat(a * a, np.arange(0, a.size, chunk)).tolist())


def _fsum(a: np.ndarray) -> float:
    """math.fsum of a float array: correctly rounded, as the definitions ask."""
    return math.fsum(a.tolist())


def _total(a: np.ndarray) -> int | float:
    """The sum of an array: exact for integers, correctly rounded for floats."""
    return _int_sum(a) if a.dtype.kind == "i" else _fsum(a)


def percentile_sorted(xs: Sequence[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) of already sorted xs, linear interpolation."""
    if len(xs) == 0:
        raise ValueError("percentile of no samples")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} is outside [0, 1]")
    h = (len(xs) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (h - lo) * (xs[hi] - xs[lo]))


def percentile(xs: Sequence[float], q: float) -> float:
    return percentile_sorted(sorted_array(xs), q)


def median(xs: Sequence[float]) -> float:
    return percentile(xs, 0.5)


def _kth_deviation(xs: Sequence[float], med: float, pos: int, k: int) -> float:
    """The k-th smallest (0-based) |x - med| of sorted xs, where xs[:pos] <= med
    <= xs[pos:].  The deviations are two sorted runs -- med - xs[pos-1-i] and
    xs[pos+j] - med -- so the k-th of their union is found by bisecting how
    many come from the left run, without building either."""
    nl, nr = pos, len(xs) - pos
    left = lambda i: med - xs[pos - 1 - i]
    right = lambda j: xs[pos + j] - med
    lo, hi = max(0, k + 1 - nr), min(k + 1, nl)
    while lo < hi:
        i = (lo + hi) // 2        # take i + 1 from the left run?
        if left(i) < right(k - i):
            lo = i + 1
        else:
            hi = i
    i = lo  # i values come from the left run, k + 1 - i from the right
    cands = []
    if i > 0:
        cands.append(left(i - 1))
    if k + 1 - i > 0:
        cands.append(right(k - i))
    return float(max(cands))


def _count_below(xs: Sequence[float], v: float, inclusive: bool = False) -> int:
    """How many of sorted xs are < v (<= v when inclusive): bisect_left, or
    bisect_right, of lists and numpy arrays alike."""
    if not isinstance(xs, np.ndarray):
        return (bisect.bisect_right if inclusive else bisect.bisect_left)(xs, v)
    side = "right" if inclusive else "left"
    if xs.dtype.kind == "i" and math.isfinite(v):
        # Integers below v (or up to it) are those below ceil(v) (up to
        # floor(v)): searched as an integer, so that numpy does not turn the
        # whole array into floats first.
        k = math.floor(v) if inclusive else math.ceil(v)
        return 0 if k < -_INT64_MAX - 1 else (
            xs.size if k > _INT64_MAX else int(np.searchsorted(xs, np.int64(k), side=side)))
    return int(np.searchsorted(xs, v, side=side))


def mad_sorted(xs: Sequence[float], med: float) -> float:
    """Unscaled median absolute deviation of sorted xs around their median,
    with the same interpolation as percentile_sorted.  O(log n): the k-th
    deviation is selected from two sorted runs, never computed for all."""
    n = len(xs)
    if n == 0:
        raise ValueError("MAD of no samples")
    pos = _count_below(xs, med)
    h = (n - 1) * 0.5
    lo = math.floor(h)
    a = _kth_deviation(xs, med, pos, lo)
    if h == lo:
        return a
    return a + (h - lo) * (_kth_deviation(xs, med, pos, lo + 1) - a)


def mean(xs: Sequence[float]) -> float:
    a = as_array(xs)
    if a.size == 0:
        raise ValueError("mean of no samples")
    # Integer samples (counts) are summed exactly and divided once, so the mean
    # is correctly rounded however large the counts; floats go through fsum.
    return _total(a) / a.size


def summarize(samples: Sequence[int | float]) -> Summary:
    xs = sorted_array(samples)
    if xs.size == 0:
        return EMPTY
    med = percentile_sorted(xs, 0.5)
    return Summary(
        n=int(xs.size),
        min=xs[0].item(),
        max=xs[-1].item(),
        median=med,
        p5=percentile_sorted(xs, 0.05),
        p95=percentile_sorted(xs, 0.95),
        mad=mad_sorted(xs, med),
        mean=mean(xs),
    )


# ---------------------------------------------------------------------------
# Beyond the summary: spread, outliers, intervals, ratios and comparisons.
# docs/methodology.md is the prose version of this part.
# ---------------------------------------------------------------------------

# The confidence level of every interval isobench prints, and the level a
# difference must reach to be called significant.
CI_LEVEL = 0.95
ALPHA = 1.0 - CI_LEVEL
# Outlier rule: Iglewicz and Hoaglin's modified z-score, 0.6745 (x - median) / MAD,
# beyond 3.5 in absolute value, i.e. farther than OUTLIER_K unscaled MADs from
# the median.  Outliers are counted and reported, never dropped.
OUTLIER_Z = 3.5
OUTLIER_K = OUTLIER_Z / 0.6745
# Consistency constant: 1.4826 * MAD estimates the standard deviation of
# normal data; the robust CV below uses it so that it reads like a CV.
MAD_TO_SIGMA = 1.4826
# Below this many repetitions there is no interval between processes: one
# process says nothing about the next.
MIN_REPS_FOR_INTERVAL = 2
# Fewer repetitions than this in any group of a comparison, and it gets no
# verdict word (compare.py): 3 values estimate the spread between processes
# with 2 degrees of freedom, too few to trust either the interval's width or
# the normality of the logs it assumes (the README's advice: cite full runs).
MIN_REPS_FOR_VERDICT = 5


def stdev(xs: Sequence[float]) -> float | None:
    """Sample standard deviation (n - 1 in the denominator); None below 2 values."""
    a = as_array(xs)
    return _stdev(a, _total(a)) if a.size >= 2 else None


def _stdev(a: np.ndarray, total: int | float, big: int | None = None) -> float | None:
    """stdev of a, whose sum (_total) is given; big bounds |x| if known."""
    n = int(a.size)
    if n < 2:
        return None
    if a.dtype.kind == "i":
        # Integer samples: n * sum(x^2) - sum(x)^2 is exact in integers, so
        # this one pass loses nothing, however many samples there are.
        num = n * _int_sum_of_squares(a, big) - total * total
        return math.sqrt(num / (n * (n - 1)))
    d = a - total / n
    return math.sqrt(_fsum(d * d) / (n - 1))


def cv(xs: Sequence[float]) -> float | None:
    """Coefficient of variation, stdev / mean; None below 2 values or for a zero mean.

    It is tail-sensitive: one 10 ms interrupt among 5000 samples of 5 us
    makes it several hundred percent.  robust_cv is what the checks use.
    """
    a = as_array(xs)
    return _cv(stdev(a), mean(a) if a.size else 0)


def _cv(s: float | None, m: float) -> float | None:
    return None if s is None or m == 0 else s / m


def robust_cv(med: float | None, mad: float | None) -> float | None:
    """1.4826 * MAD / median: a CV made of robust parts; None for a zero median."""
    if med is None or mad is None or med == 0:
        return None
    return MAD_TO_SIGMA * mad / abs(med)


@dataclass(frozen=True)
class Outliers:
    """Samples far from the median (see OUTLIER_K); counted, never removed."""

    low: int
    high: int
    lower_bound: float | None
    upper_bound: float | None
    rule: str

    @property
    def count(self) -> int:
        return self.low + self.high


def outliers_sorted(xs: Sequence[float], med: float, mad: float) -> Outliers:
    """Count outliers in sorted xs by the modified z-score.

    When more than half the samples are equal (MAD = 0, common with a
    quantized counter), the MAD says nothing; Iglewicz and Hoaglin's
    fallback then scales by the mean absolute deviation (1.2533 * MeanAD
    estimates sigma like 1.4826 * MAD does).
    """
    if mad > 0:
        scale, rule = mad * OUTLIER_K, f"|x - median| > {OUTLIER_K:.2f} MAD"
    else:
        mean_ad = _sum_abs_deviation(as_array(xs), med) / len(xs) if len(xs) else 0.0
        scale = OUTLIER_Z * 1.253314 * mean_ad
        rule = f"MAD = 0: |x - median| > {OUTLIER_Z} * 1.2533 * mean absolute deviation"
    if scale == 0:
        return Outliers(0, 0, med, med, "all samples equal: no outliers")
    lo, hi = med - scale, med + scale
    low = _count_below(xs, lo)
    high = len(xs) - _count_below(xs, hi, inclusive=True)
    return Outliers(low, high, lo, hi, rule)


def _sum_abs_deviation(a: np.ndarray, med: float) -> float:
    """math.fsum(|x - med| for x in a), correctly rounded.  Integer samples
    below 2**52 with a median on a whole or half value (always, for a median
    of integers) have |2x - 2 med| exactly in integers, and half their exact
    sum, rounded once, is what fsum gives."""
    twice = 2.0 * med
    if (a.dtype.kind == "i" and a.size and twice.is_integer() and abs(twice) < 2.0**52
            and max(abs(int(a.min())), abs(int(a.max()))) < 2**51):
        return float(_int_sum(np.abs(2 * a - int(twice)))) / 2.0
    return _fsum(np.abs(a - med))


@dataclass(frozen=True)
class Description:
    """What isobench reports about the spread of one set of samples (see the
    field docs in docs/methodology.md).  Descriptive only: no interval here."""

    n: int
    min: float | None
    max: float | None
    median: float | None
    p5: float | None
    p95: float | None
    p99: float | None
    mad: float | None
    mean: float | None
    stdev: float | None
    cv: float | None
    robust_cv: float | None
    outliers: Outliers | None

    def as_dict(self) -> dict:
        d = _flat(self)
        if self.outliers is not None:
            d["outliers"] = {**_flat(self.outliers), "count": self.outliers.count}
        return d


def describe(samples: Sequence[int | float]) -> Description:
    return describe_sorted(sorted_array(samples))


def describe_sorted(xs: np.ndarray) -> Description:
    """describe of samples already sorted in an array (see as_array)."""
    xs = as_array(xs)
    if xs.size == 0:
        return Description(0, *([None] * 12))
    med = percentile_sorted(xs, 0.5)
    mad = mad_sorted(xs, med)
    big = max(abs(xs[0].item()), abs(xs[-1].item())) if xs.dtype.kind == "i" else None
    total = _int_sum(xs, big) if big is not None else _fsum(xs)
    m, s = total / xs.size, _stdev(xs, total, big)
    return Description(
        n=int(xs.size), min=xs[0].item(), max=xs[-1].item(), median=med,
        p5=percentile_sorted(xs, 0.05), p95=percentile_sorted(xs, 0.95),
        p99=percentile_sorted(xs, 0.99), mad=mad, mean=m, stdev=s, cv=_cv(s, m),
        robust_cv=robust_cv(med, mad), outliers=outliers_sorted(xs, med, mad))


# ---- intervals ----

@dataclass(frozen=True)
class Interval:
    """An interval and how it was made.

    level is the coverage the method attains (an order-statistic interval
    attains a little more than asked, never less); n the number of values
    it rests on; quantized that it was widened to +-step because the data
    could not resolve anything finer (see median_interval)."""

    low: float
    high: float
    level: float
    method: str
    n: int
    quantized: bool = False

    def as_dict(self) -> dict:
        return asdict(self)

    def contains(self, v: float) -> bool:
        return self.low <= v <= self.high


def _log_binom_pmf(n: int, k: int) -> float:
    return (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
            - n * math.log(2.0))


@functools.lru_cache(maxsize=4096)
def median_ranks(n: int, level: float = CI_LEVEL) -> tuple[int, int, float] | None:
    """1-based ranks (l, u) of the order-statistic interval of a median, and its coverage.

    [x(l), x(u)] with u = n + 1 - l covers the population median with
    probability 1 - 2 P(B <= l - 1), B ~ Binomial(n, 1/2), whatever the
    distribution (ties only make it more conservative).  l is the largest
    rank whose coverage still reaches the level; None when even [x(1), x(n)]
    does not (n < 6 at 95%).
    """
    if n < 1:
        return None
    tail = (1.0 - level) / 2.0
    # Walk up the binomial from below: P(B <= l) is the probability that
    # fewer than l + 1 values fall below the median.  Terms more than 12
    # standard deviations below n/2 add less than 1e-32 together, so the
    # walk starts there: exact, and fast for a million samples.
    start = max(0, int(n / 2 - 12 * math.sqrt(n) / 2))
    cdf, l = 0.0, start
    for k in range(start, n // 2 + 1):
        nxt = cdf + math.exp(_log_binom_pmf(n, k))
        if nxt > tail:
            break
        cdf, l = nxt, k + 1
    if l == 0:
        return None
    return l, n + 1 - l, 1.0 - 2.0 * cdf


def median_interval(xs: Sequence[float], step: float = 0.0,
                    level: float = CI_LEVEL) -> Interval | None:
    """The distribution-free interval of the median of sorted xs (see median_ranks).

    A counter that advances in steps makes the samples of a short region
    pile up on a few values, and the interval can collapse onto one of them.
    That is the counter's resolution speaking, not certainty: when the
    interval spans at most one step it is reported as median +- step and
    flagged quantized, never with zero width.
    """
    ranks = median_ranks(len(xs), level)
    if ranks is None:
        return None
    l, u, cover = ranks
    lo, hi = float(xs[l - 1]), float(xs[u - 1])
    if step > 0 and hi - lo <= step:
        med = percentile_sorted(xs, 0.5)
        return Interval(med - step, med + step, cover, "order statistics of the median",
                        len(xs), quantized=True)
    return Interval(lo, hi, cover, "order statistics of the median", len(xs))


_NORMAL = statistics.NormalDist()


@dataclass(frozen=True)
class LogGroup:
    """Repetition values of one configuration on the log scale: their mean,
    sample variance (the part that shrinks with n) and count, and the
    systematic variance their resolution implies (the part that does not).

    A value read from a counter that advances in steps (or a batched value
    step/K apart) is known only to +-resolution/2 whatever the number of
    repetitions: when every repetition reads the same quantized value, their
    mean carries the same error.  That term, (resolution / x)^2 / 12 on the
    log scale (the variance of a uniform error over one step), is therefore
    kept apart from the sample variance and never divided by n."""

    mean: float
    var: float
    n: int
    sys: float = 0.0

    @classmethod
    def of(cls, values: Sequence[float], resolution: float = 0.0) -> "LogGroup":
        """values must be positive.  resolution: the step the values were
        measured in (0 for none)."""
        logs = [math.log(v) for v in values]
        m = math.fsum(logs) / len(logs)
        var = (math.fsum((x - m) ** 2 for x in logs) / (len(logs) - 1)) if len(logs) > 1 else 0.0
        sys = (resolution / math.exp(m)) ** 2 / 12.0 if resolution > 0 else 0.0
        return cls(m, var, len(values), sys)


def normal_quantile(p: float) -> float:
    return NormalDist().inv_cdf(p)


def systematic_half_width(sys_terms: Sequence[float], level: float = CI_LEVEL) -> float:
    """Half-width on the log scale that covers the quantization errors of
    the given groups (their variances (resolution / x)^2 / 12) at level.

    One uniform error of width w is within +-level * w / 2 with probability
    level: in standard deviations (w / sqrt 12), level * sqrt 3.  A sum of
    two or more is close enough to normal (two equal uniforms: +-1.96 sd
    covers 96.4%) to take the normal quantile."""
    terms = [v for v in sys_terms if v > 0]
    if not terms:
        return 0.0
    k = level * math.sqrt(3.0) if len(terms) == 1 else normal_quantile(0.5 + level / 2.0)
    return k * math.sqrt(math.fsum(terms))


@dataclass(frozen=True)
class LogEstimate:
    """sum(sign * mean log) over groups, with the parts of its uncertainty:
    se the standard error of the statistical part (Welch), df its
    Welch-Satterthwaite degrees of freedom (inf when it is zero), sys_half
    the half-width the groups' quantization adds at the level asked
    (systematic_half_width), n the values it rests on.  One test for an
    interval, a verdict and a p: t = centre / se on df, with the
    systematic part as a floor that no number of repetitions removes."""

    centre: float
    se: float
    df: float
    sys_half: float
    n: int


def log_estimate(terms: Sequence[tuple[int, LogGroup]],
                 level: float = CI_LEVEL) -> LogEstimate | None:
    """The estimate behind log_interval (None below MIN_REPS_FOR_INTERVAL a group)."""
    if any(g.n < MIN_REPS_FOR_INTERVAL for _, g in terms):
        return None
    centre = math.fsum(sign * g.mean for sign, g in terms)
    parts = [g.var / g.n for _, g in terms]
    var = math.fsum(parts)
    df = math.inf
    if var > 0.0:
        df = var ** 2 / math.fsum(p ** 2 / (g.n - 1) for p, (_, g) in zip(parts, terms) if p > 0)
    return LogEstimate(centre, math.sqrt(var), df,
                       systematic_half_width([g.sys for _, g in terms], level),
                       sum(g.n for _, g in terms))


def log_interval(terms: Sequence[tuple[int, LogGroup]], level: float = CI_LEVEL,
                 method: str = "") -> Interval | None:
    """exp of an interval of sum(sign * mean log) over groups.

    One group (+1): the interval of a geometric mean.  Two (+1, -1): of a
    ratio of geometric means.  Four: of a ratio of ratios (compare).  The
    statistical part is Welch's t (Welch-Satterthwaite degrees of freedom)
    on the sample variances divided by n; the systematic part (quantization,
    LogGroup.sys) is not divided by n, and the two half-widths add in
    quadrature (systematic_half_width).  Every group needs at least
    MIN_REPS_FOR_INTERVAL values, else None.  Equal values without a
    resolution give a zero-width interval (the `zero-width` check says so).
    """
    e = log_estimate(terms, level)
    if e is None:
        return None
    stat = t_quantile(1.0 - (1.0 - level) / 2.0, e.df) * e.se if e.se > 0 else 0.0
    half = math.hypot(stat, e.sys_half)
    return Interval(math.exp(e.centre - half), math.exp(e.centre + half), level, method, e.n)


def geomean_interval(values: Sequence[float], resolution: float = 0.0,
                     level: float = CI_LEVEL) -> Interval | None:
    """Student t interval of the geometric mean of positive repetition
    values, widened by their resolution (log_interval)."""
    if len(values) < MIN_REPS_FOR_INTERVAL or any(v <= 0 for v in values):
        return None
    return log_interval([(1, LogGroup.of(values, resolution))], level,
                        "t interval of the geometric mean over repetitions")


def ratio_interval(values: Sequence[float], base: Sequence[float], resolution: float = 0.0,
                   base_resolution: float = 0.0, level: float = CI_LEVEL) -> Interval | None:
    """Welch t interval of geomean(values) / geomean(base), repetitions as the
    unit, widened by both sides' resolution (log_interval)."""
    if (len(values) < MIN_REPS_FOR_INTERVAL or len(base) < MIN_REPS_FOR_INTERVAL
            or any(v <= 0 for v in (*values, *base))):
        return None
    return log_interval([(1, LogGroup.of(values, resolution)),
                         (-1, LogGroup.of(base, base_resolution))], level,
                        "Welch t interval of the log ratio over repetitions")


def difference_interval(values: Sequence[float], base: Sequence[float], resolution: float = 0.0,
                        base_resolution: float = 0.0,
                        level: float = CI_LEVEL) -> Interval | None:
    """Welch t interval of mean(values) - mean(base), two independent sets of
    repetition values (one per process), on the linear scale: what one
    configuration adds to another (a gate around a call minus the plain
    call).  The statistical part is Welch's t on the sample variances over
    n (Welch-Satterthwaite degrees of freedom); each side's resolution (the
    step its values were read in) adds a systematic variance
    resolution^2 / 12 that no number of repetitions divides, combined as
    log_interval combines it (systematic_half_width).  None below
    MIN_REPS_FOR_INTERVAL values a side.  The difference itself is
    difference(values, base); tests/python/test_difference.py shows the
    coverage by simulation."""
    if len(values) < MIN_REPS_FOR_INTERVAL or len(base) < MIN_REPS_FOR_INTERVAL:
        return None
    centre = difference(values, base)
    parts, dfs = [], []
    for xs in (values, base):
        m = math.fsum(xs) / len(xs)
        var = math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1)
        parts.append(var / len(xs))
        dfs.append(len(xs) - 1)
    var = math.fsum(parts)
    df = math.inf
    if var > 0.0:
        df = var ** 2 / math.fsum(p ** 2 / d for p, d in zip(parts, dfs) if p > 0)
    stat = t_quantile(1.0 - (1.0 - level) / 2.0, df) * math.sqrt(var) if var > 0 else 0.0
    sys_half = systematic_half_width([r * r / 12.0 for r in (resolution, base_resolution)],
                                     level)
    half = math.hypot(stat, sys_half)
    return Interval(centre - half, centre + half, level,
                    "Welch t interval of the difference of means over repetitions",
                    len(values) + len(base))


def difference(values: Sequence[float], base: Sequence[float]) -> float:
    """mean(values) - mean(base): the central value difference_interval is
    built around (the arithmetic mean, as a difference of durations adds)."""
    if not values or not base:
        raise ValueError("difference of nothing")
    return math.fsum(values) / len(values) - math.fsum(base) / len(base)


# ---- ratios and overheads: ONE rule, in units.py; averages of them here ----

def geomean(values: Sequence[float]) -> float:
    """Geometric mean: the only average isobench takes of ratios (and of
    repetitions of one configuration).

    An arithmetic mean of ratios depends on which side is the baseline
    (Fleming and Wallace, CACM 1986); the geometric mean does not.
    """
    if not values:
        raise ValueError("geometric mean of nothing")
    if any(v <= 0 for v in values):
        raise ValueError("geometric mean of a non-positive value")
    if all(v == values[0] for v in values):
        return float(values[0])  # exactly, not through exp(log(v)) and its rounding
    return math.exp(math.fsum(math.log(v) for v in values) / len(values))


GEOMETRIC_MEAN = "geometric-mean"


def aggregate_ratios(values: Sequence[float]) -> dict:
    """The geometric mean of ratios as a record that says how it was computed."""
    return {"of": "ratio", "method": GEOMETRIC_MEAN, "value": geomean(values), "n": len(values)}


def between_cv(values: Sequence[float]) -> float | None:
    """Spread BETWEEN repetitions: the CV of the per-repetition values (None below 2)."""
    return cv(list(values))


# ---- modes: repetitions that measured different things ----

# Two neighbouring repetition values (sorted) belong to different groups
# when the larger is at least MODES_MIN_FACTOR times the smaller and neither
# lies within the other process's own p5..p95 of its samples; or, whatever
# the spreads, when it is MODES_FACTOR times the smaller.  Processes of one
# mode scatter by a few percent between them and overlap in their samples;
# a server that stays awake between calls, or a wake-up that is skipped,
# moves a whole process by factors (127,582 against 975 ticks).
MODES_MIN_FACTOR = 1.5
MODES_FACTOR = 10.0
# ... and, below MODES_FACTOR, when that gap is this many times every gap
# left within the groups: processes that scatter widely but evenly (30% on
# the log scale) are one population, not as many modes as processes.
MODES_GAP_RATIO = 4.0


@dataclass(frozen=True)
class Mode:
    """One group of repetitions: how many, their geometric mean and range,
    and their positions in the sequence given to modes()."""

    count: int
    value: float
    low: float
    high: float
    members: tuple[int, ...]

    def as_dict(self) -> dict:
        return {**asdict(self), "members": list(self.members)}


def _separated(a: int, b: int, values: Sequence[float],
               spreads: Sequence[tuple[float, float] | None] | None) -> bool:
    """Whether values[b] (the larger) and values[a] lie outside each other's
    own p5..p95 (True where a spread is unknown)."""
    sa = spreads[a] if spreads else None
    sb = spreads[b] if spreads else None
    above = sa is None or sa[1] is None or values[b] > sa[1]
    below = sb is None or sb[0] is None or values[a] < sb[0]
    return above and below


def modes(values: Sequence[float], spreads: Sequence[tuple[float, float] | None] | None = None,
          min_factor: float = MODES_MIN_FACTOR, factor: float = MODES_FACTOR,
          gap_ratio: float = MODES_GAP_RATIO) -> list[Mode]:
    """The groups positive repetition values fall into, smallest first; one
    group (or none, for no values) when they are one population.

    spreads[i]: (p5, p95) of the samples of the process values[i] came from,
    or None.  Sorted, two neighbours are in separate groups when their ratio
    is at least `factor`; or when it is at least `min_factor`, each lies
    outside the other's own p5..p95, and the gap (on the log scale) is at
    least `gap_ratio` times every gap left within the groups (of which there
    must be one: values that are each their own group are one population
    scattered widely, as far as they can tell)."""
    if not values:
        return []
    order = sorted(range(len(values)), key=values.__getitem__)
    gaps = [math.log(values[b] / values[a]) if values[a] > 0 else math.inf
            for a, b in zip(order, order[1:])]
    sure = [g >= math.log(factor) for g in gaps]
    maybe = [not s and g >= math.log(min_factor) and _separated(a, b, values, spreads)
             for s, g, a, b in zip(sure, gaps, order, order[1:])]
    # The most candidate gaps (largest first) that are each gap_ratio times
    # every gap left within the groups; at least one gap must be left, or
    # nothing says what "within" is (every process its own group).
    cands = sorted((i for i, m in enumerate(maybe) if m), key=lambda i: -gaps[i])
    chosen: set[int] = set()
    for k in range(1, len(cands) + 1):
        top = set(cands[:k])
        rest = [g for i, g in enumerate(gaps) if not sure[i] and i not in top]
        if rest and gaps[cands[k - 1]] >= gap_ratio * max(rest):
            chosen = top
    cut = [s or i in chosen for i, s in enumerate(sure)]
    groups: list[list[int]] = [[order[0]]]
    for c, b in zip(cut, order[1:]):
        if c:
            groups.append([b])
        else:
            groups[-1].append(b)
    out = []
    for g in groups:
        vs = [values[i] for i in g]
        out.append(Mode(len(g), geomean(vs), min(vs), max(vs), tuple(sorted(g))))
    return out


def main_mode(groups: Sequence[Mode]) -> Mode:
    """The group that stands for a configuration of several: the one with
    most repetitions; of equal ones, the lowest (a cost measured without the
    extra regime)."""
    return max(groups, key=lambda m: (m.count, -m.value))


def thin_quantile(q: float, n: int, min_beyond: int = 10) -> bool:
    """Whether the q-quantile of n samples rests on fewer than min_beyond
    samples beyond it (n (1 - q) < 10 for an upper quantile, n q for a
    lower one): it is then little more than the extreme sample."""
    return n * min(q, 1.0 - q) < min_beyond
