"""The sample-level statistics on numpy arrays give the numbers of their
pure-Python definitions, which are kept below as the reference: type-7
percentiles, the unscaled MAD, exact integer means and standard
deviations, the modified z-score outliers.  Inputs: random, tied,
quantized, huge and tiny (n = 0, 1, 2), as lists and as the sorted int64
arrays runs.py hands over."""

from __future__ import annotations

import bisect
import math
import operator
import random

import numpy as np
import pytest

from isobench.core import stats, student


# ---- the reference: the definitions as they were written in pure Python ----

def ref_percentile_sorted(xs, q):
    h = (len(xs) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (h - lo) * (xs[hi] - xs[lo]))


def ref_median(xs):
    return ref_percentile_sorted(sorted(xs), 0.5)


def ref_mad(xs):
    """The obvious way: the median of every absolute deviation."""
    med = ref_median(xs)
    return ref_median([abs(x - med) for x in xs])


def ref_mean(xs):
    total = sum(xs)
    if isinstance(total, float):
        total = math.fsum(xs)
    return total / len(xs)


def ref_stdev(xs):
    n = len(xs)
    if n < 2:
        return None
    total = sum(xs)
    if isinstance(total, int):
        num = n * sum(map(operator.mul, xs, xs)) - total * total
        return math.sqrt(num / (n * (n - 1)))
    m = math.fsum(xs) / n
    return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (n - 1))


def ref_cv(xs):
    s = ref_stdev(xs)
    m = ref_mean(xs) if xs else 0
    return None if s is None or m == 0 else s / m


def ref_outliers(xs, med, mad):
    """(low, high, lower bound, upper bound) of the modified z-score rule."""
    if mad > 0:
        scale = mad * stats.OUTLIER_K
    else:
        mean_ad = math.fsum(abs(x - med) for x in xs) / len(xs) if xs else 0.0
        scale = stats.OUTLIER_Z * 1.253314 * mean_ad
    if scale == 0:
        return 0, 0, med, med
    lo, hi = med - scale, med + scale
    return bisect.bisect_left(xs, lo), len(xs) - bisect.bisect_right(xs, hi), lo, hi


def ref_describe(samples):
    xs = sorted(samples)
    med = ref_percentile_sorted(xs, 0.5)
    mad = ref_mad(xs)
    return {"n": len(xs), "min": xs[0], "max": xs[-1], "median": med,
            "p5": ref_percentile_sorted(xs, 0.05), "p95": ref_percentile_sorted(xs, 0.95),
            "p99": ref_percentile_sorted(xs, 0.99), "mad": mad, "mean": ref_mean(xs),
            "stdev": ref_stdev(xs), "cv": ref_cv(xs),
            "robust_cv": stats.robust_cv(med, mad),
            "outliers": ref_outliers(xs, med, mad)}


# ---- the inputs ----

def _inputs():
    rng = random.Random(22)
    cases = [
        ("one", [7]), ("two", [9, 4]), ("two equal", [3, 3]), ("three", [5, 1, 3]),
        ("all equal", [52] * 40),
        # A quantized counter: most samples on one step, the MAD 0.
        ("quantized", [52] * 90 + [78] * 9 + [100_000]),
        ("quantized even", [26 * rng.choice((2, 3, 3, 3, 4)) for _ in range(1000)]),
        ("tied", [rng.randint(0, 5) for _ in range(101)]),
        ("half median", [1, 2, 2, 3, 10, 11]),
        ("skewed", [round(rng.lognormvariate(8, 1.5)) for _ in range(5001)]),
        ("two modes", [rng.randint(900, 1100) for _ in range(300)]
         + [rng.randint(120_000, 130_000) for _ in range(200)]),
        ("large counts", [2**53, 1, 1]),
        # Squares beyond int64: the exact sums go through Python integers.
        ("huge", [rng.randint(0, 2**40) for _ in range(1001)]),
        ("huge tails", [rng.randint(3 * 10**9, 4 * 10**9) for _ in range(50)] + [5]),
        ("negative", [rng.randint(-1000, 1000) for _ in range(64)]),
        ("floats", [rng.random() * 10 for _ in range(100)]),
        ("float ties", [rng.choice((0.5, 1.25, 2.0)) for _ in range(33)]),
        ("mixed", [rng.choice([rng.randint(0, 20), rng.random() * 10]) for _ in range(11)]),
    ]
    for n in (2, 3, 4, 5, 10, 11, 100, 101):
        for seed in range(5):
            r = random.Random(n * 100 + seed)
            cases.append((f"random n={n} #{seed}", [r.randint(0, 10**6) for _ in range(n)]))
    return cases


CASES = _inputs()


def _as_given(xs, kind):
    """xs as a caller passes it: a list, or a sorted int64 array (runs.py)."""
    if kind == "list":
        return list(xs)
    if all(isinstance(x, int) for x in xs):
        return np.array(sorted(xs), dtype=np.int64)
    return np.array(sorted(xs), dtype=np.float64)


def _same(a, b):
    """Equal numbers, bit for bit where they are floats; ints stay ints."""
    if a is None or b is None:
        return a is b
    if isinstance(b, int) and not isinstance(b, bool):
        return type(a) is int and a == b
    return type(a) is float and (a == b or (math.isnan(a) and math.isnan(b)))


@pytest.mark.parametrize("kind", ["list", "array"])
@pytest.mark.parametrize("name,xs", CASES, ids=[c[0] for c in CASES])
def test_describe_is_the_reference(name, xs, kind):
    got = stats.describe(_as_given(xs, kind))
    ref = ref_describe(xs)
    for field in ("n", "min", "max", "median", "p5", "p95", "p99", "mad", "mean", "stdev",
                  "cv", "robust_cv"):
        g, r = getattr(got, field), ref[field]
        if name == "mixed" and field in ("min", "max"):
            assert g == r  # an array of ints and floats holds floats only
            continue
        assert _same(g, r), (field, g, r)
    o = got.outliers
    assert (o.low, o.high, o.lower_bound, o.upper_bound) == ref["outliers"]


@pytest.mark.parametrize("kind", ["list", "array"])
@pytest.mark.parametrize("name,xs", CASES, ids=[c[0] for c in CASES])
def test_summary_is_the_reference(name, xs, kind):
    s = stats.summarize(_as_given(xs, kind))
    ref = ref_describe(xs)
    assert s.n == ref["n"]
    for field in ("median", "p5", "p95", "mad", "mean"):
        assert _same(getattr(s, field), ref[field]), field
    assert (s.min, s.max) == (ref["min"], ref["max"])


@pytest.mark.parametrize("name,xs", CASES, ids=[c[0] for c in CASES])
def test_each_function_is_the_reference(name, xs):
    arr = _as_given(xs, "array")
    for q in (0.0, 0.05, 0.25, 0.5, 0.95, 0.99, 1.0):
        want = ref_percentile_sorted(sorted(xs), q)
        assert stats.percentile(xs, q) == want
        assert stats.percentile_sorted(arr, q) == want
    assert stats.median(xs) == ref_median(xs) == stats.median(arr[::-1])
    med = ref_median(xs)
    assert stats.mad_sorted(arr, med) == ref_mad(xs) == stats.mad_sorted(sorted(xs), med)
    assert _same(stats.mean(xs), ref_mean(xs)) and _same(stats.mean(arr), ref_mean(xs))
    assert _same(stats.stdev(xs), ref_stdev(xs)) and _same(stats.stdev(arr), ref_stdev(xs))
    assert _same(stats.cv(xs), ref_cv(xs)) and _same(stats.cv(arr), ref_cv(xs))


def test_the_results_are_python_numbers():
    # The summary document is JSON: no numpy scalar may reach it.
    for xs in ([5, 1, 3], np.array([1, 3, 5], dtype=np.int64), np.array([1, 3, 5], dtype=np.uint64),
               [0.5, 2.5]):
        d = stats.describe(xs).as_dict()
        for k, v in d.items():
            if k != "outliers":
                assert v is None or type(v) in (int, float), (k, type(v))
        assert type(stats.median(xs)) is float and type(stats.mean(xs)) is float


def test_empty_samples():
    for xs in ([], (), np.empty(0, dtype=np.int64)):
        assert stats.summarize(xs) == stats.EMPTY
        d = stats.describe(xs)
        assert d.n == 0 and all(v is None for k, v in d.as_dict().items() if k != "n")
        assert stats.stdev(xs) is None and stats.cv(xs) is None
        for f in (stats.median, stats.mean):
            with pytest.raises(ValueError):
                f(xs)
        with pytest.raises(ValueError):
            stats.mad_sorted(xs, 0.0)


def test_one_and_two_samples():
    for kind in ("list", "array"):
        one = stats.describe(_as_given([42], kind))
        assert (one.n, one.min, one.max, one.median, one.mad, one.mean, one.stdev, one.cv) == (
            1, 42, 42, 42.0, 0.0, 42.0, None, None)
        two = stats.describe(_as_given([40, 44], kind))
        assert (two.median, two.mad, two.mean) == (42.0, 2.0, 42.0)
        assert two.stdev == math.sqrt(8) and two.p5 == 40.2


def test_unsorted_arrays_are_sorted_and_left_alone():
    a = np.array([5, 3, 9, 1], dtype=np.int64)
    assert stats.describe(a).median == 4.0
    assert stats.summarize(a).p95 == ref_percentile_sorted([1, 3, 5, 9], 0.95)
    assert a.tolist() == [5, 3, 9, 1]  # the caller's array is not reordered


def test_exact_integer_sums_beyond_int64():
    # 3e9^2 * 10 overflows int64: the squares are summed in Python integers.
    xs = [3 * 10**9 + i for i in range(10)]
    assert stats.stdev(np.array(xs)) == ref_stdev(xs)
    # Values whose sum overflows int64 but not each one.
    big = [2**62, 2**62, 2**62, 1]
    assert stats.mean(np.array(big, dtype=np.int64)) == ref_mean(big)
    # Chunked sums of squares: each chunk fits int64, their total does not.
    rng = random.Random(5)
    mid = [rng.randint(10**8, 2 * 10**8) for _ in range(5000)]
    assert stats.stdev(np.array(mid)) == ref_stdev(mid)


def test_as_dict_is_dataclasses_asdict():
    from dataclasses import asdict
    d = stats.describe([52] * 90 + [78] * 9 + [100_000])
    want = asdict(d)
    want["outliers"] = {**asdict(d.outliers), "count": d.outliers.count}
    assert d.as_dict() == want
    assert stats.describe([]).as_dict() == asdict(stats.describe([]))
    s = stats.summarize([3, 1, 2])
    assert s.as_dict() == asdict(s)


def test_searching_an_integer_array_is_bisect():
    xs = [-5, 0, 0, 3, 3, 3, 7, 2**40]
    arr = np.array(xs, dtype=np.int64)
    for v in (-6, -5, -4.5, 0, 0.0, 0.25, 2.999, 3, 3.0, 3.5, 6.99999, 7, 7.5, 2.0**40,
              2.0**40 + 0.5, 1e30, -1e30, math.inf, -math.inf, 2**70, -(2**70)):
        assert stats._count_below(arr, v) == bisect.bisect_left(xs, v), v
        assert stats._count_below(arr, v, inclusive=True) == bisect.bisect_right(xs, v), v
    fl = np.array([0.5, 1.0, 1.0, 2.5])
    for v in (0.0, 1.0, 1.5, 3.0):
        assert stats._count_below(fl, v) == bisect.bisect_left(fl.tolist(), v)
        assert stats._count_below(fl, v, inclusive=True) == bisect.bisect_right(fl.tolist(), v)


def ref_t_quantile(p, df):
    """The quantile as it was defined: bisection on t_cdf, every step evaluated."""
    if p < 0.5:
        return -ref_t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while student.t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if student.t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


def test_t_quantile_is_the_bisection_bit_for_bit():
    # The bisection decides the steps far from the root without t_cdf; the
    # result must still be the one every step evaluated gives, from heavy
    # tails (df < 1) to the normal limit, and near p = 1/2, where t_cdf
    # itself is least exact.
    rng = random.Random(12)
    dfs = [0.3, 0.5, 1, 1.5, 2, 3.7, 4, 9, 30, 250, 1e4, 1e7] + [
        rng.uniform(0.5, 60) for _ in range(40)]
    ps = [0.5000000001, 0.5001, 0.6, 0.9, 0.975, 0.995, 0.9995, 0.999999] + [
        rng.uniform(0.5, 1) for _ in range(4)]
    for df in dfs:
        for p in ps:
            assert student.t_quantile(p, df) == ref_t_quantile(p, df), (p, df)
            assert student.t_quantile(1 - p, df) == ref_t_quantile(1 - p, df), (p, df)
    assert student.t_quantile(0.5, 7) == ref_t_quantile(0.5, 7)
    with pytest.raises(ValueError):
        student.t_quantile(1.0, 3)


def test_the_newton_root_is_where_t_cdf_reaches_p():
    for df in (0.3, 1, 2, 3.7, 30, 1e4):
        for p in (0.6, 0.975, 0.9995):
            t = student._t_root(p, df)
            assert student.t_cdf(t, df) == pytest.approx(p, rel=1e-12)
    # df = 1 is Cauchy's, df = 2 has a closed form: both known exactly.
    for p in (0.6, 0.975, 0.9995):
        assert student._t_root(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-11)
        a = 4 * p * (1 - p)
        assert student._t_root(p, 2) == pytest.approx((2 * p - 1) * math.sqrt(2 / a), rel=1e-11)


def test_values_beyond_int64_are_not_wrapped():
    # No counter gets there, but a value of 2**63 or more must not turn
    # negative on its way into an int64 array.
    for xs in ([2**63, 1, 5], np.array([2**63, 1, 5], dtype=np.uint64), [2**64 + 1, 3]):
        d = stats.describe(xs)
        assert d.min > 0 and d.max >= 2**63 and d.median > 0
