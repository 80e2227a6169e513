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

Keep each statistic a small pure function over a sorted sequence.  The part
below summarize() -- spread, outliers, bootstrap intervals, ratios, the
Mann-Whitney test -- is described in docs/methodology.md.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import random
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


# ---------------------------------------------------------------------------
# Beyond the summary: spread, tails, outliers, confidence intervals, ratios
# and comparisons.  docs/methodology.md is the prose version of this part.
# ---------------------------------------------------------------------------

# The confidence level of every interval isobench prints.
CI_LEVEL = 0.95
# Bootstrap resamples per interval: enough for stable 2.5/97.5 percentiles
# (their Monte Carlo error is well under the interval's width) and cheap,
# since one resample costs one or two beta draws (see bootstrap_medians).
BOOTSTRAP_RESAMPLES = 2000
# The seed every bootstrap starts from unless told otherwise; it is printed
# and stored with each interval so that anyone can recompute it exactly.
BOOTSTRAP_SEED = 1
# Outlier rule: Iglewicz and Hoaglin's modified z-score, 0.6745 (x - median) / MAD,
# beyond 3.5 in absolute value, i.e. farther than OUTLIER_K unscaled MADs from
# the median.  Outliers are counted and reported, never dropped.
OUTLIER_Z = 3.5
OUTLIER_K = OUTLIER_Z / 0.6745
# Consistency constant: 1.4826 * MAD estimates the standard deviation of
# normal data; the robust CV below uses it so that it reads like a CV.
MAD_TO_SIGMA = 1.4826
# Below this many values a Mann-Whitney test (and any claim of significance)
# is not worth much: a warning is attached (pyperf warns below the same count).
MIN_VALUES_FOR_TEST = 9


def stdev(xs: Sequence[float]) -> float | None:
    """Sample standard deviation (n - 1 in the denominator); None below 2 values."""
    if len(xs) < 2:
        return None
    m = mean(xs)
    return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def cv(xs: Sequence[float]) -> float | None:
    """Coefficient of variation, stdev / mean; None below 2 values or for a zero mean.

    It is tail-sensitive: one 10 ms interrupt among 5000 samples of 5 us
    makes it several hundred percent.  robust_cv is what the checks use.
    """
    s = stdev(xs)
    m = mean(xs) if xs else 0
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
        mean_ad = math.fsum(abs(x - med) for x in xs) / len(xs) if xs else 0.0
        scale = OUTLIER_Z * 1.253314 * mean_ad
        rule = f"MAD = 0: |x - median| > {OUTLIER_Z} * 1.2533 * mean absolute deviation"
    if scale == 0:
        return Outliers(0, 0, med, med, "all samples equal: no outliers")
    lo, hi = med - scale, med + scale
    low = bisect.bisect_left(xs, lo)
    high = len(xs) - bisect.bisect_right(xs, hi)
    return Outliers(low, high, lo, hi, rule)


def _seeded(seed: int | str | None, *key: object) -> random.Random:
    """A generator seeded from a base seed and a key: each interval gets its own
    stream, and the same (seed, key) always gives the same interval."""
    text = repr((BOOTSTRAP_SEED if seed is None else seed, *key))
    return random.Random(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little"))


def bootstrap_medians(xs: Sequence[float], resamples: int, rng: random.Random) -> list[float]:
    """Medians of `resamples` bootstrap resamples of sorted xs, drawn exactly and cheaply.

    A resample is n draws with replacement, i.e. xs[floor(n * U_i)] for n
    uniform U_i.  Its k-th smallest value is therefore xs[floor(n * U_(k))],
    and the k-th order statistic of n uniforms is Beta(k, n - k + 1).  So one
    beta draw gives the median of a resample of odd size, and for even n the
    next order statistic follows as U_(k) + (1 - U_(k)) * Beta(1, n - k).
    The cost does not grow with n: no resample is ever materialised.
    """
    n = len(xs)
    if n == 0:
        raise ValueError("bootstrap of no samples")
    k = (n + 1) // 2  # 1-based rank of the (lower) median

    def at(u: float) -> float:
        return float(xs[min(int(n * u), n - 1)])

    out = []
    for _ in range(resamples):
        u = rng.betavariate(k, n - k + 1)
        if n % 2:
            out.append(at(u))
        else:
            v = u + (1.0 - u) * rng.betavariate(1, n - k)
            out.append((at(u) + at(v)) / 2.0)
    return out


@dataclass(frozen=True)
class Interval:
    """A bootstrap percentile interval and everything needed to recompute it."""

    low: float
    high: float
    level: float
    resamples: int
    seed: int | str

    def as_dict(self) -> dict:
        return asdict(self)


def percentile_interval(values: Sequence[float], level: float = CI_LEVEL) -> tuple[float, float]:
    xs = sorted(values)
    tail = (1.0 - level) / 2.0
    return percentile_sorted(xs, tail), percentile_sorted(xs, 1.0 - tail)


def median_ci(xs: Sequence[float], seed: int | str | None = None, key: object = (),
              resamples: int = BOOTSTRAP_RESAMPLES, level: float = CI_LEVEL) -> Interval:
    """Bootstrap percentile CI of the median of sorted xs."""
    seed = BOOTSTRAP_SEED if seed is None else seed
    meds = bootstrap_medians(xs, resamples, _seeded(seed, "median", key))
    lo, hi = percentile_interval(meds, level)
    return Interval(lo, hi, level, resamples, seed)


@dataclass(frozen=True)
class Description:
    """Everything isobench reports about one set of samples (see the field docs
    in docs/methodology.md).  ci is None when it was not asked for."""

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
    ci: Interval | None

    def as_dict(self) -> dict:
        d = asdict(self)
        if self.outliers is not None:
            d["outliers"] = {**asdict(self.outliers), "count": self.outliers.count}
        return d


def describe(samples: Sequence[int | float], ci: bool = True, seed: int | str | None = None,
             key: object = (), resamples: int = BOOTSTRAP_RESAMPLES) -> Description:
    """The full description of samples; ci=False skips the bootstrap (checks need no CI)."""
    if not samples:
        return Description(0, *([None] * 13))
    xs = sorted(samples)
    med = percentile_sorted(xs, 0.5)
    mad = mad_sorted(xs, med)
    return Description(
        n=len(xs), min=xs[0], max=xs[-1], median=med,
        p5=percentile_sorted(xs, 0.05), p95=percentile_sorted(xs, 0.95),
        p99=percentile_sorted(xs, 0.99), mad=mad, mean=mean(xs), stdev=stdev(xs), cv=cv(xs),
        robust_cv=robust_cv(med, mad), outliers=outliers_sorted(xs, med, mad),
        ci=median_ci(xs, seed, key, resamples) if ci else None)


# ---- ratios and overheads: ONE rule, used everywhere ----

class ZeroBaseline(ValueError):
    """A ratio was asked of a baseline of zero (a damaged or degenerate result)."""


def ratio(x: float, baseline: float) -> float:
    """x relative to its baseline: ratio = x / baseline (1.0 = as fast as the baseline)."""
    if baseline == 0:
        raise ZeroBaseline("ratio to a zero baseline")
    return x / baseline


def overhead(x: float, baseline: float) -> float:
    """overhead = ratio - 1 (0.25 = 25% slower than the baseline; -0.1 = 10% faster)."""
    return ratio(x, baseline) - 1.0


def geomean(values: Sequence[float]) -> float:
    """Geometric mean: the only average isobench takes of ratios.

    An arithmetic mean of ratios depends on which side is the baseline
    (Fleming and Wallace, CACM 1986); the geometric mean does not.
    """
    if not values:
        raise ValueError("geometric mean of nothing")
    if any(v <= 0 for v in values):
        raise ValueError("geometric mean of a non-positive ratio")
    return math.exp(math.fsum(math.log(v) for v in values) / len(values))


GEOMETRIC_MEAN = "geometric-mean"


def aggregate_ratios(values: Sequence[float]) -> dict:
    """The geometric mean of ratios as a record that says how it was computed;
    the soundness checks read the "method" field of such records."""
    return {"of": "ratio", "method": GEOMETRIC_MEAN, "value": geomean(values), "n": len(values)}


# ---- comparing two sets of samples ----

@dataclass(frozen=True)
class MannWhitney:
    """Two-sided Mann-Whitney U test, normal approximation with tie and continuity
    correction.  u is U of the first sample; effect is U / (n1 n2), the probability
    that a value of the first sample exceeds one of the second (ties count half)."""

    u: float
    z: float
    p: float
    n1: int
    n2: int
    effect: float


def _ranks(values: Sequence[float]) -> tuple[list[float], float]:
    """Average ranks (1-based) in the order given, and the tie term sum(t^3 - t)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    ties = 0.0
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        avg = (i + j) / 2.0 + 1.0
        for k in range(i, j + 1):
            ranks[order[k]] = avg
        t = j - i + 1
        ties += t ** 3 - t
        i = j + 1
    return ranks, ties


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> MannWhitney:
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        raise ValueError("Mann-Whitney U of an empty sample")
    ranks, ties = _ranks(list(a) + list(b))
    u1 = math.fsum(ranks[:n1]) - n1 * (n1 + 1) / 2.0
    mu = n1 * n2 / 2.0
    n = n1 + n2
    var = n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:
        # Every value equal: no evidence of any difference.
        return MannWhitney(u1, 0.0, 1.0, n1, n2, u1 / (n1 * n2))
    d = u1 - mu
    z = (d - math.copysign(0.5, d)) / math.sqrt(var) if d else 0.0
    p = min(1.0, math.erfc(abs(z) / math.sqrt(2.0)))
    return MannWhitney(u1, z, p, n1, n2, u1 / (n1 * n2))


def ratio_of_medians_ci(base: Sequence[float], other: Sequence[float],
                        seed: int | str | None = None, key: object = (),
                        resamples: int = BOOTSTRAP_RESAMPLES,
                        level: float = CI_LEVEL) -> Interval:
    """Bootstrap CI of median(other) / median(base), both sorted, resampled independently."""
    seed = BOOTSTRAP_SEED if seed is None else seed
    rng = _seeded(seed, "ratio", key)
    mb = bootstrap_medians(base, resamples, rng)
    mo = bootstrap_medians(other, resamples, rng)
    lo, hi = percentile_interval([o / b for o, b in zip(mo, mb) if b != 0], level)
    return Interval(lo, hi, level, resamples, seed)


@dataclass(frozen=True)
class Comparison:
    """other against base: ratio of medians with its CI, and the MWU test."""

    ratio: float
    ci: Interval
    test: MannWhitney
    warnings: tuple[str, ...]


def compare_samples(base: Sequence[float], other: Sequence[float],
                    seed: int | str | None = None, key: object = ()) -> Comparison:
    b, o = sorted(base), sorted(other)
    warnings = []
    for name, xs in (("first", b), ("second", o)):
        if len(xs) < MIN_VALUES_FOR_TEST:
            warnings.append(f"the {name} side has {len(xs)} value{'s' if len(xs) != 1 else ''}, "
                            f"fewer than {MIN_VALUES_FOR_TEST}: the test and the interval "
                            "mean little; repeat the measurement")
    r = ratio(percentile_sorted(o, 0.5), percentile_sorted(b, 0.5))
    return Comparison(r, ratio_of_medians_ci(b, o, seed, key), mann_whitney_u(b, o),
                      tuple(warnings))


def between_cv(medians: Sequence[float]) -> float | None:
    """Spread BETWEEN repetitions: the CV of the per-repetition medians (None below 2)."""
    return cv(list(medians))


def normalized_ratio_ci(a: Sequence[float], a_base: Sequence[float], b: Sequence[float],
                        b_base: Sequence[float], seed: int | str | None = None, key: object = (),
                        resamples: int = BOOTSTRAP_RESAMPLES,
                        level: float = CI_LEVEL) -> Interval:
    """Bootstrap CI of (median(b) / median(b_base)) / (median(a) / median(a_base)).

    Each run is normalized to its own baseline, so two machines compare by
    what isolation costs on each; all four medians are resampled
    independently, so the baselines' uncertainty is in the interval too.
    Every argument is sorted.
    """
    seed = BOOTSTRAP_SEED if seed is None else seed
    rng = _seeded(seed, "normalized", key)
    ma, mab, mb, mbb = (bootstrap_medians(xs, resamples, rng) for xs in (a, a_base, b, b_base))
    values = [(y / yb) / (x / xb) for x, xb, y, yb in zip(ma, mab, mb, mbb) if x and xb and yb]
    lo, hi = percentile_interval(values, level)
    return Interval(lo, hi, level, resamples, seed)
