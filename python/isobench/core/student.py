"""Student's t distribution: its CDF, density and quantiles, through the
regularized incomplete beta function (Numerical Recipes' continued
fraction), for the intervals over repetitions (stats.py) and the tests
and fits built on them (analysis/compare.py, analysis/kit/fit.py)."""

from __future__ import annotations

import functools
import math
import statistics
import sys

_NORMAL = statistics.NormalDist()


# ---- Student's t, for intervals over repetitions ----

def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    # The continued fraction converges fast on one side of the mean; the
    # symmetry I_x(a, b) = 1 - I_{1-x}(b, a) covers the other.
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df (> 0, not necessarily whole) degrees of freedom."""
    tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_pdf(t: float, df: float) -> float:
    """The density of Student's t with df degrees of freedom at t."""
    return math.exp(math.lgamma((df + 1.0) / 2.0) - math.lgamma(df / 2.0)
                    - 0.5 * math.log(df * math.pi) - (df + 1.0) / 2.0 * math.log1p(t * t / df))


@functools.lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t (bisection on t_cdf; exact to ~1e-12).

    The bisection is the definition; Newton's method on t_cdf (_t_root)
    finds the root first, so that only the steps within a hair of it have
    to evaluate t_cdf: the others are decided by which side of the root
    they fall on, as t_cdf would decide them.  The result is the
    bisection's, bit for bit, from a few evaluations instead of fifty."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"quantile {p} is outside (0, 1)")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    root = _t_root(p, df)
    # How far from the root t_cdf may still misplace a step: it is exact to
    # far better than 1e-13 in probability, except near t = 0, where forming
    # 1 - df / (df + t^2) loses digits (relative error eps * df / t^2 in
    # p - 1/2).  Ten times that, over the density, in t.  Where even that
    # is no small part of p - 1/2, every step evaluates t_cdf.
    err = 1e-13 + 10.0 * (p - 0.5) * sys.float_info.epsilon * df / (root * root or 1e-300)
    margin = 1e-12 * root + err / t_pdf(root, df) if err < 1e-6 * (p - 0.5) else math.inf

    def below(t: float) -> bool:  # t_cdf(t, df) < p
        if t < root - margin:
            return True
        if t > root + margin:
            return False
        return t_cdf(t, df) < p

    lo, hi = 0.0, 1.0
    while below(hi):
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if below(mid):
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


def _t_root(p: float, df: float) -> float:
    """Where t_cdf(t, df) = p, for p >= 1/2: Newton's method from the
    Cornish-Fisher expansion around the normal quantile (Abramowitz and
    Stegun 26.7.5), kept inside a bracket of the root (a step that would
    leave it bisects instead), so it converges for any df > 0."""
    if p == 0.5:
        return 0.0
    z = _NORMAL.inv_cdf(p)
    z2 = z * z
    t = z + (z * (z2 + 1.0) / 4.0
             + z * (z2 * (5.0 * z2 + 16.0) + 3.0) / (96.0 * df)
             + z * (z2 * (z2 * (3.0 * z2 + 19.0) + 17.0) - 15.0) / (384.0 * df * df)) / df
    lo, hi = 0.0, math.inf  # t_cdf(lo) < p <= t_cdf(hi)
    for _ in range(200):
        g = t_cdf(t, df) - p
        if g == 0.0:
            return t
        if g < 0.0:
            lo = t
        else:
            hi = t
        nxt = t - g / t_pdf(t, df)
        if not lo < nxt < hi:
            nxt = (lo + hi) / 2.0 if hi < math.inf else 2.0 * t
        if abs(nxt - t) <= 1e-14 * abs(nxt) or hi - lo <= 1e-15 * hi < math.inf:
            return nxt
        t = nxt
    return t
