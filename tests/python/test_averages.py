"""The average of ratios with its interval over repetitions (analysis/kit/averages.py):
its coverage in simulation, its arithmetic against scipy, the counter-step
term, and columns averaged over the rows they share."""

from __future__ import annotations

import math
import random

import pytest

from isobench.analysis.kit import averages

scipy_stats = pytest.importorskip("scipy.stats")


def _lognormal_rows(rng: random.Random, rows: int, reps: int) -> tuple[list, float]:
    """rows ratios, each of `reps` lognormal repetitions on both sides with
    row-specific centres and spreads (0.02 to 0.3 on the log scale); and the
    true geometric mean of the rows' ratios."""
    out, truth = [], 0.0
    for i in range(rows):
        mx, mb = rng.uniform(4.0, 9.0), rng.uniform(4.0, 9.0)
        sx, sb = rng.choice((0.02, 0.1, 0.3)), rng.choice((0.02, 0.1, 0.3))
        out.append(averages.Row(i, [math.exp(rng.gauss(mx, sx)) for _ in range(reps)],
                                [math.exp(rng.gauss(mb, sb)) for _ in range(reps)]))
        truth += (mx - mb) / rows
    return out, math.exp(truth)


@pytest.mark.parametrize("rows, reps", [(6, 5), (3, 5), (1, 5), (8, 3)])
def test_the_interval_covers_the_true_average_95_percent_of_the_time(rows, reps):
    rng = random.Random(20260 + rows * 10 + reps)
    trials, hits = 2000, 0
    for _ in range(trials):
        rs, truth = _lognormal_rows(rng, rows, reps)
        iv = averages.average_ratio(rs)["interval"]
        hits += iv["low"] <= truth <= iv["high"]
    assert 0.90 <= hits / trials <= 0.99, hits / trials


def test_one_row_is_the_welch_interval_of_its_ratio():
    x, b = [10.0, 11.0, 12.5, 9.8, 10.4], [5.0, 5.3, 4.9, 5.6, 5.1]
    a = averages.average_ratio([averages.Row("r", x, b)])
    lx, lb = [math.log(v) for v in x], [math.log(v) for v in b]
    vx, vb = scipy_stats.tvar(lx) / 5, scipy_stats.tvar(lb) / 5
    df = (vx + vb) ** 2 / (vx ** 2 / 4 + vb ** 2 / 4)
    d = sum(lx) / 5 - sum(lb) / 5
    half = scipy_stats.t.ppf(0.975, df) * math.sqrt(vx + vb)
    assert a["value"] == pytest.approx(math.exp(d), rel=1e-12)
    assert a["interval"]["low"] == pytest.approx(math.exp(d - half), rel=1e-9)
    assert a["interval"]["high"] == pytest.approx(math.exp(d + half), rel=1e-9)
    assert a["interval"]["df"] == pytest.approx(df, rel=1e-9)
    assert a["n"] == 1 and a["method"] == "geometric-mean"


def test_rows_average_their_log_ratios_and_their_variances():
    rows = [averages.Row(0, [2.0, 2.2, 1.9], [1.0, 1.1, 0.95]),
            averages.Row(1, [9.0, 8.0, 10.0, 9.5], [3.0, 3.3, 2.8, 3.1])]
    a = averages.average_ratio(rows)
    logs = [[math.log(v) for v in vs] for r in rows for vs in (r.values, r.base)]
    parts = [scipy_stats.tvar(ls) / len(ls) / 4 for ls in logs]  # 1/m^2, m = 2
    df = sum(parts) ** 2 / sum(p ** 2 / (len(ls) - 1) for p, ls in zip(parts, logs))
    centre = (sum(logs[0]) / 3 - sum(logs[1]) / 3 + sum(logs[2]) / 4 - sum(logs[3]) / 4) / 2
    half = scipy_stats.t.ppf(0.975, df) * math.sqrt(sum(parts))
    assert a["value"] == pytest.approx(math.exp(centre), rel=1e-12)
    assert a["interval"]["low"] == pytest.approx(math.exp(centre - half), rel=1e-9)
    assert a["interval"]["high"] == pytest.approx(math.exp(centre + half), rel=1e-9)
    # The value is the geometric mean of the rows' own ratios.
    assert a["value"] == pytest.approx(math.sqrt(a["ratios"][0] * a["ratios"][1]), rel=1e-12)
    assert a["reps"] == [3, 4]


def test_equal_quantized_values_still_have_a_width():
    # 5 steps against 4 of a 26-tick counter, every repetition alike: the
    # counter step is all that is known, and it is not divided by the reps.
    row = averages.Row("4K", [130.0] * 5, [104.0] * 5, 26.0, 26.0)
    a = averages.average_ratio([row])
    iv = a["interval"]
    assert a["value"] == pytest.approx(1.25)
    assert iv["low"] < 1.25 < iv["high"] and iv["df"] is None  # normal quantile
    sd = math.sqrt(((26 / 130) ** 2 + (26 / 104) ** 2) / 12)
    assert math.log(iv["high"] / 1.25) == pytest.approx(1.959964 * sd, rel=1e-5)
    # The same with ten times the repetitions: no narrower.
    more = averages.average_ratio([averages.Row("4K", [130.0] * 50, [104.0] * 50, 26.0, 26.0)])
    assert more["interval"]["high"] == pytest.approx(iv["high"])
    # Without a counter step, equal values are exactly known.
    exact = averages.average_ratio([averages.Row("x", [2.0] * 3, [1.0] * 3)])
    assert exact["interval"]["low"] == exact["interval"]["high"] == 2.0


def test_a_row_of_one_repetition_leaves_the_average_without_interval():
    a = averages.average_ratio([averages.Row(0, [2.0, 2.1], [1.0, 1.1]),
                                averages.Row(1, [3.0], [1.0, 1.2])])
    assert a["interval"] is None and "1 of 2 row(s) with one repetition" in a["note"]
    assert a["n"] == 2 and a["value"] > 0


def test_rows_with_a_value_not_positive_are_not_averaged():
    assert averages.average_ratio([averages.Row(0, [0.0, 1.0], [1.0, 1.0])]) is None
    a = averages.average_ratio([averages.Row(0, [0.0, 1.0], [1.0, 1.0]),
                                averages.Row(1, [2.0, 2.0], [1.0, 1.0])])
    assert a["n"] == 1 and a["rows"] == [1]


def test_columns_are_averaged_over_the_rows_they_share():
    def row(k, f):
        return averages.Row(k, [f * 1.0, f * 1.02, f * 0.98], [1.0, 1.01, 0.99])
    cols = {"a": [row("4K", 2.0), row("16K", 2.0), row("64K", 8.0)],
            "b": [row("4K", 3.0), row("16K", 3.0)],
            "c": [row("16K", 5.0), row("4K", 5.0), averages.Row("64K", [0.0], [1.0])]}
    s = averages.shared(cols)
    assert s.rows == ["4K", "16K"]
    assert {c: a["n"] for c, a in s.averages.items()} == {"a": 2, "b": 2, "c": 2}
    assert s.averages["a"]["value"] == pytest.approx(2.0, rel=1e-3)
    # a has a third row of its own: its average over all three is kept apart.
    assert set(s.own) == {"a"} and s.own["a"]["n"] == 3
    assert s.own["a"]["value"] == pytest.approx((2.0 * 2.0 * 8.0) ** (1 / 3), rel=1e-3)
    # Fewer shared rows than asked for: no average over them.
    assert averages.shared({"a": cols["a"], "d": [row("64K", 1.0)]}, min_rows=2).averages == {}


def test_includes_one():
    assert averages.includes_one({"low": 0.9, "high": 1.2}) is True
    assert averages.includes_one({"low": 1.01, "high": 1.2}) is False
    assert averages.includes_one(None) is None
