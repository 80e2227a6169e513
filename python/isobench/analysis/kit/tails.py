"""Tail quantiles (p99, p99.9) of per-request latencies, printed only where
the samples can carry them.

A q-quantile is an estimate only when enough samples lie beyond it: with n
samples about n(1 - q) do, and the top one, two or five order statistics
are the maximum by another name.  The rule here: qN is given when
n(1 - q) >= MIN_TAIL (10 samples beyond it: p99 then needs 1,000
samples, p99.9 10,000); below that the section gives the maximum and says
so, `max (n=114)`.

The interval of a quantile is distribution-free, from order statistics
(Hahn, Meeker and Escobar, Statistical Intervals, 2nd ed., the
distribution-free intervals for a quantile): with B the
number of samples below the population q-quantile, B ~ Binomial(n, q), and
[x(l), x(u)] covers it with probability P(l <= B <= u - 1).  The ranks are
the innermost ones that still reach the level on both sides (each tail at
most (1 - level) / 2).

The ranks assume independent samples; the requests of one run are not
quite (a queue carries a slow moment over to the next requests), so one
run's interval is optimistic.  Over repetitions (fresh processes) the
estimate is the median of the repetitions' quantiles and the interval the
envelope of their order-statistic intervals (from the lowest lower end to
the highest upper end), which holds each repetition's own uncertainty and
the spread between them.  A configuration some of whose repetitions failed has a censored
latency: the requests of a failed repetition have no latency, so the
quantile over the others is a lower bound ("at least").
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

from ...core import stats

# Samples that must lie beyond a quantile for it to be printed.
MIN_TAIL = 10

ORDER_STATISTICS = "order statistics of the quantile (binomial ranks)"
ENVELOPE = ("median over repetitions; interval: the envelope of the repetitions' "
            "order-statistic intervals")


def enough(n: int, q: float) -> bool:
    """Whether n samples carry the q-quantile: n(1 - q) >= MIN_TAIL."""
    # n(1 - q) in floating point: 10,000 x (1 - 0.999) is 9.9999...
    return n * (1.0 - q) >= MIN_TAIL - 1e-9


def needed(q: float) -> int:
    """The fewest samples that carry the q-quantile."""
    return math.ceil(MIN_TAIL / (1.0 - q) - 1e-9)


def _log_pmf(n: int, k: int, q: float) -> float:
    return (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
            + k * math.log(q) + (n - k) * math.log1p(-q))


def quantile_ranks(n: int, q: float, level: float = stats.CI_LEVEL) -> tuple[int, int, float] | None:
    """1-based ranks (l, u) of the order-statistic interval of the q-quantile
    of n samples, and its coverage P(l <= B <= u - 1), B ~ Binomial(n, q).

    None when a side cannot reach the level within the samples (the lower
    end would be below x(1) or the upper above x(n))."""
    if n < 1 or not 0.0 < q < 1.0:
        return None
    tail = (1.0 - level) / 2.0
    # The binomial's mass lies within 12 standard deviations of nq; terms
    # beyond add less than 1e-30 together.
    sd = math.sqrt(n * q * (1.0 - q))
    lo_k, hi_k = max(0, int(n * q - 12 * sd) - 1), min(n, int(n * q + 12 * sd) + 2)
    cdf, below = 0.0, {}
    for k in range(lo_k, hi_k + 1):
        cdf += math.exp(_log_pmf(n, k, q))
        below[k] = cdf  # P(B <= k)
    # l: the largest rank with P(B <= l - 1) <= tail.
    l = 0
    for k in range(lo_k, hi_k + 1):
        if below[k] <= tail:
            l = k + 1
        else:
            break
    # u: the smallest rank with P(B >= u) <= tail, i.e. P(B <= u - 1) >= 1 - tail.
    u = None
    for k in range(lo_k, hi_k + 1):
        if below[k] >= 1.0 - tail:
            u = k + 1
            break
    if l < 1 or u is None or u > n:
        return None
    cover = below[u - 1] - (below[l - 1] if l - 1 >= lo_k else 0.0)
    return l, u, cover


@dataclass(frozen=True)
class Tail:
    """One q-quantile of one set of samples, or its maximum where the
    samples do not carry it (enough False: value is the maximum)."""

    q: float
    value: float | None
    interval: tuple[float, float] | None
    n: int
    enough: bool
    method: str
    maximum: float | None = None

    def as_dict(self) -> dict:
        d = asdict(self)
        d["interval"] = list(self.interval) if self.interval else None
        return d


def tail_of(xs: Sequence[float], q: float, n: int | None = None,
            level: float = stats.CI_LEVEL) -> Tail:
    """The q-quantile of sorted xs with its order-statistic interval.

    n: the number of samples the quantile stands for, where xs are a
    systematic subsample of them (the interval is then the subsample's,
    wider than the whole set's would be); by default len(xs)."""
    m = len(xs)
    n = m if n is None else n
    if m == 0:
        return Tail(q, None, None, n, False, "no samples")
    top = float(xs[-1])
    if not enough(n, q):
        return Tail(q, top, None, n, False, "the maximum: too few samples for "
                    f"the {q:g}-quantile (it needs {needed(q):,})", top)
    ranks = quantile_ranks(m, q, level)
    iv = (float(xs[ranks[0] - 1]), float(xs[ranks[1] - 1])) if ranks else None
    return Tail(q, stats.percentile_sorted(xs, q), iv, n, True, ORDER_STATISTICS, top)


def over_repetitions(tails: Sequence[Tail]) -> dict | None:
    """The repetitions' tails combined: the median of their values, the
    envelope of their intervals, the smallest n; the median of their maxima
    when any repetition's samples do not carry the quantile."""
    tails = [t for t in tails if t.value is not None]
    if not tails:
        return None
    ok = all(t.enough for t in tails)
    if not ok and any(t.maximum is None for t in tails):
        return None
    vals = sorted(t.value if ok else t.maximum for t in tails)
    ivs = [t.interval for t in tails]
    iv = ([min(i[0] for i in ivs), max(i[1] for i in ivs)]
          if ok and all(i is not None for i in ivs) else None)
    return {"q": tails[0].q, "value": stats.percentile_sorted(vals, 0.5), "interval": iv,
            "n": min(t.n for t in tails), "reps": len(tails), "enough": ok,
            "max": not ok, "method": ENVELOPE if len(tails) > 1 else tails[0].method}
