"""Tail quantiles (analysis/kit/tails.py): printed only where the samples carry
them, with a distribution-free interval whose ranks are scipy's binomial
and whose coverage holds in simulation."""

from __future__ import annotations

import random

import pytest

from isobench.analysis.kit import tails
from isobench.render import console

scipy_stats = pytest.importorskip("scipy.stats")


@pytest.mark.parametrize("n, q, ok", [(114, 0.999, False), (114, 0.99, False),
                                      (999, 0.99, False), (1000, 0.99, True),
                                      (9999, 0.999, False), (10000, 0.999, True),
                                      (20, 0.5, True), (19, 0.5, False)])
def test_a_quantile_needs_ten_samples_beyond_it(n, q, ok):
    assert tails.enough(n, q) is ok


def test_needed_is_the_smallest_n_that_is_enough():
    for q in (0.5, 0.9, 0.99, 0.999):
        n = tails.needed(q)
        assert tails.enough(n, q) and not tails.enough(n - 1, q)


@pytest.mark.parametrize("n, q", [(1000, 0.99), (2000, 0.99), (10000, 0.999), (50, 0.5),
                                  (200, 0.9), (100000, 0.999)])
def test_ranks_are_scipys_binomial(n, q):
    l, u, cover = tails.quantile_ranks(n, q)
    b = scipy_stats.binom(n, q)
    # Each tail at most 2.5%, and neither rank could move inwards.
    assert b.cdf(l - 1) <= 0.025 < b.cdf(l)
    assert b.sf(u - 1) <= 0.025 < b.sf(u - 2)
    assert cover == pytest.approx(b.cdf(u - 1) - b.cdf(l - 1), rel=1e-9)
    assert cover >= 0.95


def test_no_interval_where_the_ranks_leave_the_samples():
    # 100 samples: the upper end of p99's interval would need x(101).
    assert tails.quantile_ranks(100, 0.99) is None


def test_too_few_samples_give_the_maximum_and_say_so():
    xs = sorted(range(1, 115))
    t = tails.tail_of(xs, 0.999)
    assert not t.enough and t.value == 114 and t.interval is None and t.n == 114
    assert "maximum" in t.method and "10,000" in t.method


@pytest.mark.parametrize("dist", ["exponential", "lognormal"])
def test_coverage_of_the_order_statistic_interval(dist):
    # 400 sets of 1,500 samples: the p99's interval covers the true p99 in
    # at least 93% of them (nominal 95%; the ranks make it conservative).
    rng = random.Random(22)
    if dist == "exponential":
        draw, truth = (lambda: rng.expovariate(1.0)), scipy_stats.expon.ppf(0.99)
    else:
        draw, truth = (lambda: rng.lognormvariate(0.0, 1.0)), scipy_stats.lognorm.ppf(0.99, 1.0)
    hits = 0
    for _ in range(400):
        t = tails.tail_of(sorted(draw() for _ in range(1500)), 0.99)
        assert t.enough
        hits += t.interval[0] <= truth <= t.interval[1]
    assert 0.93 <= hits / 400 <= 0.995


def test_over_repetitions_takes_the_median_and_the_envelope():
    ts = [tails.Tail(0.99, v, (v - 1, v + 2), 2000, True, tails.ORDER_STATISTICS, v + 5)
          for v in (10.0, 30.0, 20.0)]
    c = tails.over_repetitions(ts)
    assert c["value"] == 20.0 and c["interval"] == [9.0, 32.0] and c["enough"]
    assert c["n"] == 2000 and c["reps"] == 3 and not c["max"]


def test_over_repetitions_is_a_maximum_when_one_repetition_is_short():
    ts = [tails.Tail(0.999, 50.0, (40.0, 60.0), 20000, True, tails.ORDER_STATISTICS, 90.0),
          tails.Tail(0.999, 70.0, None, 114, False, "max", 70.0)]
    c = tails.over_repetitions(ts)
    # The maxima, never a quantile averaged with a maximum.
    assert c["max"] and not c["enough"] and c["interval"] is None and c["n"] == 114
    assert c["value"] == 80.0


def test_kv_server_p99_needs_a_thousand_timed_requests():
    from isobench.analysis import summary
    from isobench.render.kit import table

    def entry(events):
        return {"repetitions": [{"outputs": {"ops_per_s": 1000.0, "latency_avg_ns": 300e3,
                                             "latency_p50_hi_ns": 256e3,
                                             "latency_p99_hi_ns": 8192e3,
                                             "latency_max_ns": 12256e3,
                                             "latency_events": n}} for n in events]}
    many = summary._kv_server(entry([98504, 97000]), None)
    assert many["latency_p99_enough"] and many["latency_events_min"] == 97000
    few = summary._kv_server(entry([98504, 640]), None)
    assert not few["latency_p99_enough"] and few["latency_events_min"] == 640
    doc = {"configs": [{"benchmark": "kv-server", "mechanism": "direct", "kv_server": few,
                        "repetitions": [{}, {}]}], "results": []}
    text = console.kv_server_table(doc)
    assert "max 12,256 (n=640)" in text or "max 12256 (n=640)" in text
