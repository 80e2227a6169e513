"""`isobench compare`: matching, normalization to each run's own direct,
one Welch t over repetitions for each row's interval, p and verdict (checked
against scipy), no verdict below five repetitions, Holm's correction and the
noise band, like with like, the geometric mean with its interval, the error
rates of the verdicts by simulation, and absolute ratios across machines only
when asked for."""

import copy
import math
import random

import numpy as np
import pytest

from isobench.analysis import compare, summary
from isobench.core import stats
from isobench.render import compare as render_compare
from isobench.render.kit import table

from conftest import assert_one_error_line
from fixture_runs import fixture, import_doc, load_doc


def scaled(doc, factor, only=None):
    """The run on a machine `factor` times slower (for mechanism `only`, if given)."""
    for r in doc["results"]:
        if only is None or r["mechanism"] == only:
            r["samples"]["primary"] = [x * factor for x in r["samples"]["primary"]]
    return doc


def elsewhere(doc, host="bench2"):
    doc["environment"]["hostname"] = host
    return doc


def _doc(tmp_path, run, name):
    return summary.build(load_doc(tmp_path, run, name))


def rows_by(res):
    return {(r.a["benchmark"], r.a["mechanism"], r.a["params"].get("placement")): r
            for r in res["rows"]}


def test_a_slower_machine_costs_the_same_isolation(tmp_path):
    a = _doc(tmp_path, fixture("clean_run"), "a.sqlite")
    b = _doc(tmp_path, elsewhere(scaled(fixture("clean_run"), 2)), "b.sqlite")
    res = compare.compare(a, b)
    rows = rows_by(res)
    for key in (("switch", "mpk", "same-cpu"), ("switch", "process-futex", "cross-cpu"),
                ("kv", "mpk", "same-cpu")):
        assert rows[key].basis == compare.NORMALIZED
        assert rows[key].ratio == pytest.approx(1.0)
        assert rows[key].interval.low <= 1.0 <= rows[key].interval.high
    # direct has no baseline; across machines its absolute ratio is not
    # compared unless asked for.
    assert ("switch", "direct", "same-cpu") not in rows
    assert any("--absolute" in s for s in res["skipped"])
    assert not res["warnings"]
    res = compare.compare(a, b, absolute=True)
    direct = rows_by(res)[("switch", "direct", "same-cpu")]
    assert direct.basis == compare.ABSOLUTE and direct.ratio == pytest.approx(2.0)
    assert res["warnings"] and "across machines" in res["warnings"][0]


def test_the_same_run_twice_contains_one(tmp_path):
    a = _doc(tmp_path, fixture("clean_run"), "a.sqlite")
    res = compare.compare(a, a)
    assert res["same_machine"]
    for r in res["rows"]:
        assert r.ratio == pytest.approx(1.0)
        assert r.interval.low <= 1.0 <= r.interval.high
    # Within one machine, direct compares in absolute terms without asking.
    assert rows_by(res)[("switch", "direct", "same-cpu")].basis == compare.ABSOLUTE


def test_a_costlier_mechanism_shows_in_the_normalized_ratio(tmp_path):
    doc = fixture("clean_run")
    for r in doc["results"]:  # 4 repetitions a side, so that the test can decide
        if r["repetition"] == 2:
            for rep in (3, 4):
                extra = {**fixture_copy(r), "repetition": rep,
                         "samples": {"primary": [x + rep for x in r["samples"]["primary"]]}}
                doc["results"].append(extra)
    a = _doc(tmp_path, doc, "a.sqlite")
    b = _doc(tmp_path, scaled(fixture_copy(doc), 3, only="mpk"), "b.sqlite")
    rows = rows_by(compare.compare(a, b))
    mpk = rows[("switch", "mpk", "same-cpu")]
    assert mpk.ratio == pytest.approx(3.0, rel=0.02)
    assert mpk.interval.low > 1.0 and mpk.test.p < 0.05
    # Four repetitions a side: the ratio and its interval, but no verdict word.
    assert render_compare.verdict_text(mpk, interval=False) == "inconclusive (n=4)"
    futex = rows[("switch", "process-futex", "same-cpu")]
    assert futex.ratio == pytest.approx(1.0)


def fixture_copy(doc):
    return copy.deepcopy(doc)


def five(doc):
    """The run with five repetitions: repetitions 3 to 5 are repetition 2's
    samples shifted by a tick or two, so that the repetitions differ."""
    for r in [r for r in doc["results"] if r["repetition"] == 2]:
        for rep in (3, 4, 5):
            doc["results"].append({**fixture_copy(r), "repetition": rep, "samples": {
                "primary": [x + rep - 3 for x in r["samples"]["primary"]]}})
    return doc


def test_too_few_repetitions_give_no_verdict(tmp_path):
    a = _doc(tmp_path, fixture("clean_run"), "a.sqlite")  # 2 repetitions
    res = compare.compare(a, a)
    for r in res["rows"]:
        assert r.test is not None and r.interval is not None and r.p_holm is None
        assert r.verdict["word"] == "inconclusive" and r.verdict["reason"] == "n=2"
    assert res["correction"]["family"] == 0
    one = fixture("clean_run")
    one["results"] = [r for r in one["results"] if r["repetition"] == 1]
    c = _doc(tmp_path, one, "c.sqlite")
    res = compare.compare(c, c)
    assert all(r.interval is None and r.verdict["word"] == "no interval" for r in res["rows"])


def test_averages_never_pool_placements(tmp_path):
    doc = fixture("clean_run")
    # A second same-cpu mechanism, so that same-cpu has something to average.
    for r in [r for r in doc["results"] if r["mechanism"] == "mpk" and r["benchmark"] == "switch"]:
        doc["results"].append({**fixture_copy(r), "mechanism": "wasm"})
    a = _doc(tmp_path, doc, "a.sqlite")
    b = _doc(tmp_path, scaled(fixture_copy(doc), 2, only="mpk"), "b.sqlite")
    avgs = compare.compare(a, b)["averages"]
    assert [(g["benchmark"], g["population"].get("placement"), g["n"]) for g in avgs] == [
        ("switch", "same-cpu", 3)]
    assert avgs[0]["method"] == "geometric-mean"
    assert avgs[0]["value"] == pytest.approx(2 ** (1 / 3), rel=0.01)


def test_compare_command_across_stores(isobench, tmp_path):
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    import_doc(a, fixture("clean_run"))
    import_doc(b, elsewhere(scaled(fixture("clean_run"), 2)))
    doc, p = isobench.json("compare", "1", "latest", "--db", str(a), "--db-b", str(b), "--json")
    assert p.returncode == 0, p.stderr
    assert doc["a"]["db"] == str(a) and doc["b"]["db"] == str(b)
    assert {r["basis"] for r in doc["rows"]} == {"vs direct"}
    for r in doc["rows"]:
        assert {"ratio", "interval", "p", "a", "b", "unit", "params", "notes"} <= set(r)
    # The clean run holds two repetitions a side: fewer than a full run.
    assert doc["findings"] == {"A": ["few-repetitions"], "B": ["few-repetitions"]}
    p = isobench("compare", "1", "1", "--db", str(a), "--db-b", str(b))
    assert p.returncode == 0
    assert "95% CI" in p.stdout and "absolute ratios" not in p.stdout
    # The machines differ: said once, in words.
    warnings = [l for l in p.stdout.splitlines() if l.startswith("warning:")]
    assert len(warnings) == 1 and "different machines" in warnings[0]
    assert max(map(len, p.stdout.splitlines())) <= 100
    p = isobench("compare", "1", "1", "--db", str(a), "--db-b", str(b), "--absolute")
    assert p.returncode == 0
    assert "warning: absolute ratios across machines" in p.stdout


def test_compare_same_store_with_fake_runs(isobench):
    for _ in range(2):
        isobench("run", "switch", "-q", "-m", "direct", "-m", "thread", "--repeat", "2")
    p = isobench("compare", "1", "2")
    assert p.returncode == 0, p.stderr
    rows = [l for l in p.stdout.splitlines() if l.startswith(("direct ", "thread "))]
    assert rows and all(l.endswith("inconclusive (n=2)") for l in rows)
    assert "no verdict: every row has fewer than 5 repetitions in a group (n=2)" in \
        " ".join(p.stdout.split())
    assert "warning" not in p.stdout


def test_compare_command_counts_the_rows_after_holm(isobench):
    import_doc(isobench.db, five(fixture("clean_run")))
    slower = five(fixture("clean_run"))
    for r in slower["results"]:
        if r["mechanism"] == "mpk" and r["benchmark"] == "switch":
            r["samples"]["primary"] = [x * 3 // 2 for x in r["samples"]["primary"]]
    import_doc(isobench.db, slower)
    p = isobench("compare", "1", "2")
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    assert "'slower' or 'faster' with at least 5 repetitions in every group, a Holm-adjusted p " \
        "below 0.05 over the rows of this compare, and B/A beyond the +-2% noise band." in text
    assert "1 of 6 row(s) differ after Holm's correction over those 6" in text
    assert "1 slower, 0 faster" in text
    assert "switch, each run normalized to its own direct:" in p.stdout
    assert "switch, absolute (B / A):" in p.stdout and "kv, absolute (B / A):" in p.stdout
    doc, p = isobench.json("compare", "1", "2", "--json", "--noise-band", "60")
    assert doc["correction"]["noise_band"] == 0.6 and doc["correction"]["method"] == "Holm"
    assert doc["correction"]["differ"] == 0 and doc["correction"]["within_band"] == 1
    assert all(r["p_holm"] is not None and r["reps"] == 5 for r in doc["rows"])
    assert all(r["p_holm"] >= r["p"] for r in doc["rows"])


@pytest.mark.parametrize("args, needle", [
    (["compare", "1"], "required"),
    (["compare", "1", "9"], "no run 9"),
    (["compare", "1", "1", "--db-b", "/nonexistent/x.sqlite"], "no store"),
    (["compare", "1", "1", "--noise-band", "-1"], "percentage"),
    (["compare", "1", "1", "--noise-band", "abc"], "percentage"),
    (["compare", "1", "1", "--noise-band", "100"], "percentage"),
])
def test_compare_bad_usage(isobench, args, needle):
    import_doc(isobench.db, fixture("clean_run"))
    assert needle in assert_one_error_line(isobench(*args))


def test_nothing_in_common(isobench, tmp_path):
    other = fixture("flawed_run")
    other["results"] = [r for r in other["results"] if r["mechanism"] == "thread"]
    import_doc(isobench.db, fixture("clean_run"))
    import_doc(isobench.db, other)
    p = isobench("compare", "1", "2")
    assert p.returncode == 1
    assert "no results in common" in p.stderr


def test_compare_in_words(tmp_path):
    a = _doc(tmp_path, five(fixture("clean_run")), "a.sqlite")
    slower = five(fixture("clean_run"))
    for r in slower["results"]:
        if r["mechanism"] == "mpk":
            r["samples"]["primary"] = [x * 3 // 2 for x in r["samples"]["primary"]]
    b = _doc(tmp_path, slower, "b.sqlite")
    res = compare.compare(a, b)
    mpk = rows_by(res)[("switch", "mpk", "same-cpu")]
    v = mpk.verdict
    assert v["word"] == "slower" and v["factor"] == pytest.approx(1.5, rel=0.02)
    assert v["low"] <= v["factor"] <= v["high"]
    text = render_compare.verdict_text(mpk)
    assert text.startswith("1.5") and "x slower [" in text
    # The other way round: faster, by the inverse factor and interval.
    back = rows_by(compare.compare(b, a))[("switch", "mpk", "same-cpu")]
    assert back.verdict["word"] == "faster"
    assert back.verdict["factor"] == pytest.approx(v["factor"])
    assert back.verdict["low"] == pytest.approx(v["low"])
    futex = rows_by(res)[("switch", "process-futex", "same-cpu")]
    assert futex.verdict["word"] == "not significant"
    text = render_compare.render(res["rows"], compare.document(a, b, res))
    assert render_compare.verdict_text(mpk, interval=False) in text and "not significant" in text


def test_warnings_when_the_runs_were_not_measured_alike(tmp_path):
    base = fixture("clean_run")
    other = fixture("clean_run")
    for r in base["results"]:
        if r.get("header"):
            r["header"] = {**r["header"], "quick": False, "n": 20000}
    for r in other["results"]:
        if r.get("header"):
            r["header"] = {**r["header"], "quick": True, "n": 5000}
    other["argv"] = [*other["argv"], "--quick"]
    other["environment"]["git"] = {"commit": "f" * 40, "dirty": True}
    a = _doc(tmp_path, base, "a.sqlite")
    b = _doc(tmp_path, other, "b.sqlite")
    diffs = compare.compare(a, b)["differences"]
    assert any("A was a full run and B a --quick run" in d for d in diffs)
    assert any("samples per result differ" in d and "A: n=20000, B: n=5000" in d
               for d in diffs)
    assert any("different commits" in d and "ffffffffffff (dirty)" in d for d in diffs)
    assert not any("different machines" in d for d in diffs)
    assert compare.compare(a, a)["differences"] == []


# ---- synthetic summary documents: the keys compare reads, nothing more ----

def _config(mech, values, source="median", resolution=0.0, medians=None, batched=None,
            placement="same-cpu", payload=0, baseline=True):
    params = {"placement": placement, "payload": payload, "variant": "entry"}
    key = ["switch", mech, placement, payload]
    n = len(values)
    reps = [{"median": (medians[i] if medians else values[i]),
             "batched": (batched[i] if batched else None), "counter_step": 2.0}
            for i in range(n)]
    return {"key": key, "label": f"switch {mech} {placement}", "benchmark": "switch",
            "mechanism": mech, "params": params, "unit": "tsc_ticks", "to_ns": 0.5,
            "role": "baseline" if mech == "direct" else "mechanism", "headline_phase": True,
            "headline": {"value": stats.geomean(values), "source": source,
                         "values": list(values), "resolution": resolution, "reps": n,
                         "interval": None},
            "repetitions": reps,
            "ratio": None if mech == "direct" or not baseline else
            {"to_key": ["switch", "direct", placement, payload], "value": None}}


def synthetic(run_id, direct, mechs, host="bench"):
    """A summary document with one `direct` (a list of repetition values, or
    a config) and mechanisms {name: values or config}, all in one population."""
    configs = [direct if isinstance(direct, dict) else _config("direct", direct)]
    for m, v in mechs.items():
        configs.append(v if isinstance(v, dict) else _config(m, v))
    return {"run": {"run_id": run_id, "db": "synthetic", "argv": [],
                    "environment": {"hostname": host, "cpu_model": "cpu"}},
            "measurement": {}, "configs": configs, "findings": []}


def lognormal(rng, centre, sigma, n):
    return [centre * math.exp(rng.gauss(0.0, sigma)) for _ in range(n)]


def one_row(xa, xab, xb, xbb, band=compare.NOISE_BAND):
    """The row of mechanism m: A's values xa over A's direct xab, B's xb over xbb."""
    # Two machines, so that direct is not compared (in absolute terms) beside m.
    a, b = synthetic(1, xab, {"m": xa}, "bench1"), synthetic(2, xbb, {"m": xb}, "bench2")
    res = compare.compare(a, b, noise_band=band)
    res["docs"] = (a, b)
    return {r.a["mechanism"]: r for r in res["rows"]}["m"], res


# ---- the test: one Welch t for the interval, p and verdict ----

@pytest.mark.parametrize("seed, na, nb", [(1, 5, 5), (2, 3, 7), (3, 10, 4), (4, 2, 2)])
def test_two_groups_are_scipys_welch_test(seed, na, nb):
    sp = pytest.importorskip("scipy.stats")
    rng = random.Random(seed)
    xs, ys = lognormal(rng, 100, 0.1, na), lognormal(rng, 110, 0.3, nb)
    w = compare.welch([(1, compare.Group.of(ys)), (-1, compare.Group.of(xs))])
    ref = sp.ttest_ind([math.log(y) for y in ys], [math.log(x) for x in xs], equal_var=False)
    assert w.t == pytest.approx(ref.statistic, rel=1e-9)
    assert w.df == pytest.approx(ref.df, rel=1e-9)
    assert w.p == pytest.approx(ref.pvalue, rel=1e-7)
    lo, hi = ref.confidence_interval(0.95)
    iv = w.interval()
    assert (math.log(iv.low), math.log(iv.high)) == pytest.approx((lo, hi), rel=1e-8)


def test_an_absolute_row_is_scipys_welch_test(tmp_path):
    """Within one machine direct compares in absolute terms: its row's
    ratio, interval and p are ttest_ind's on the logs."""
    sp = pytest.importorskip("scipy.stats")
    rng = random.Random(7)
    xa, xb = lognormal(rng, 100, 0.05, 6), lognormal(rng, 103, 0.05, 6)
    a = synthetic(1, xa, {"m": lognormal(rng, 200, 0.05, 6)})
    b = synthetic(2, xb, {"m": lognormal(rng, 200, 0.05, 6)})
    row = [r for r in compare.compare(a, b)["rows"] if r.a["mechanism"] == "direct"][0]
    assert row.basis == compare.ABSOLUTE
    ref = sp.ttest_ind(np.log(xb), np.log(xa), equal_var=False)
    assert row.test.p == pytest.approx(ref.pvalue, rel=1e-7)
    assert math.log(row.ratio) == pytest.approx(np.log(xb).mean() - np.log(xa).mean())
    lo, hi = ref.confidence_interval(0.95)
    assert (math.log(row.interval.low), math.log(row.interval.high)) == pytest.approx((lo, hi))


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_the_ratio_of_ratios_is_one_welch_test_over_four_groups(seed):
    """The normalized row: log B/A = mean log b - mean log b's direct -
    mean log a + mean log a's direct, each group's variance its own, and
    Welch-Satterthwaite's df; interval, p and verdict all from that t."""
    sp = pytest.importorskip("scipy.stats")
    rng = random.Random(seed)
    xa, xab = lognormal(rng, 150, 0.04, 6), lognormal(rng, 100, 0.08, 5)
    xb, xbb = lognormal(rng, 180, 0.03, 7), lognormal(rng, 100, 0.06, 6)
    row, _ = one_row(xa, xab, xb, xbb)
    groups = [(1, np.log(xb)), (-1, np.log(xbb)), (-1, np.log(xa)), (1, np.log(xab))]
    est = sum(c * g.mean() for c, g in groups)
    parts = [g.var(ddof=1) / len(g) for _, g in groups]
    se = math.sqrt(sum(parts))
    df = sum(parts) ** 2 / sum(p ** 2 / (len(g) - 1) for p, (_, g) in zip(parts, groups))
    assert row.test.df == pytest.approx(df)
    assert row.ratio == pytest.approx(math.exp(est))
    assert row.test.p == pytest.approx(2 * sp.t.sf(abs(est) / se, df), rel=1e-7)
    q = sp.t.ppf(0.975, df)
    assert row.interval.low == pytest.approx(math.exp(est - q * se), rel=1e-9)
    assert row.interval.high == pytest.approx(math.exp(est + q * se), rel=1e-9)
    # One row: Holm changes nothing, and the verdict agrees with the interval.
    assert row.p_holm == pytest.approx(row.test.p)
    excludes = not row.interval.contains(1.0)
    assert (row.test.p < 0.05) == excludes
    outside = not 1 / 1.02 <= row.ratio <= 1.02
    assert (row.verdict["word"] in compare.DIFFERS) == (excludes and outside)


def test_exact_directs_reduce_to_scipys_two_sample_test():
    """When both directs are exact (equal values, no resolution), the four-group
    test is ttest_ind of a/direct_a against b/direct_b."""
    sp = pytest.importorskip("scipy.stats")
    rng = random.Random(5)
    xa, xb = lognormal(rng, 150, 0.1, 5), lognormal(rng, 200, 0.1, 8)
    row, _ = one_row(xa, [100.0] * 5, xb, [120.0] * 6)
    ref = sp.ttest_ind(np.log(np.array(xb) / 120), np.log(np.array(xa) / 100), equal_var=False)
    assert row.test.t == pytest.approx(ref.statistic)
    assert row.test.p == pytest.approx(ref.pvalue, rel=1e-7)


@pytest.mark.parametrize("df", [1, 1.7, 2, 3.5, 4, 8.2, 17, 30, 120, 5000])
def test_t_quantile_is_scipys(df):
    sp = pytest.importorskip("scipy.stats")
    for p in (0.5, 0.6, 0.9, 0.975, 0.995, 0.9995, 0.025):
        assert compare.t_ppf(p, df) == pytest.approx(sp.t.ppf(p, df), rel=1e-9, abs=1e-12)


def test_holm_adjusts_in_steps():
    # sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 -> 0.06 (monotone)
    assert compare.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert compare.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert compare.holm([]) == []


# ---- verdicts: repetitions, Holm, the noise band ----

@pytest.mark.parametrize("n, word", [(3, "inconclusive (n=3)"), (4, "inconclusive (n=4)"),
                                     (5, "slower")])
def test_no_verdict_below_five_repetitions(n, word):
    rng = random.Random(n)
    row, res = one_row(lognormal(rng, 150, 0.01, n), lognormal(rng, 100, 0.01, n),
                       lognormal(rng, 300, 0.01, n), lognormal(rng, 100, 0.01, n))
    # A factor of 2 with 1% spread: the interval excludes 1 whatever n.
    assert row.interval.low > 1.5 and row.ratio == pytest.approx(2.0, rel=0.05)
    assert render_compare.verdict_text(row, interval=False).endswith(word)
    cells = render_compare._row_cells(row)
    assert cells[5].startswith(table.fmt_sig(row.ratio) + " [")  # the ratio, always shown
    text = render_compare.render(res["rows"], compare.document(*res["docs"], res))
    if n < 5:
        assert row.p_holm is None and res["correction"]["family"] == 0
        assert "no verdict: every row has fewer than 5 repetitions" in text
        assert "slower" not in text.split("\n\n", 1)[1].replace("'slower'", "")
    else:
        assert "1 of 1 row(s) differ after Holm's correction" in text


def test_a_significant_difference_inside_the_noise_band_is_not_slower():
    rng = random.Random(3)
    args = (lognormal(rng, 150, 0.002, 10), lognormal(rng, 100, 0.002, 10),
            [v * 1.01 for v in lognormal(rng, 150, 0.002, 10)], lognormal(rng, 100, 0.002, 10))
    row, res = one_row(*args)
    assert row.p_holm < 0.001 and row.ratio == pytest.approx(1.01, abs=0.003)
    assert row.verdict["word"] == "within noise band"
    assert res["correction"]["within_band"] == 1 and res["correction"]["differ"] == 0
    row, res = one_row(*args, band=0.0)
    assert row.verdict["word"] == "slower" and res["correction"]["differ"] == 1
    row, _ = one_row(*args, band=0.005)
    assert row.verdict["word"] == "slower"
    row, _ = one_row(args[2], args[3], args[0], args[1], band=0.005)
    assert row.verdict["word"] == "faster" and row.verdict["factor"] == pytest.approx(1.01,
                                                                                      abs=0.003)


def test_holm_counts_the_rows_that_differ():
    rng = random.Random(21)
    n = 8
    da, db = lognormal(rng, 100, 0.03, n), lognormal(rng, 100, 0.03, n)
    ma = {f"m{i}": lognormal(rng, 100 + 20 * i, 0.03, n) for i in range(10)}
    mb = {k: lognormal(rng, (100 + 20 * i) * (1.3 if i < 2 else 1.0), 0.03, n)
          for i, k in enumerate(ma)}
    res = compare.compare(synthetic(1, da, ma), synthetic(2, db, mb))
    c = res["correction"]
    assert c["method"] == "Holm" and c["family"] == 11  # ten mechanisms and direct itself
    words = {r.a["mechanism"]: r.verdict["word"] for r in res["rows"]}
    assert words["m0"] == words["m1"] == "slower"
    assert c["differ"] == c["slower"] == 2
    rows = [r for r in res["rows"] if r.test]
    assert sorted(r.p_holm for r in rows) == pytest.approx(
        sorted(compare.holm([r.test.p for r in rows])))
    assert all(r.p_holm >= r.test.p for r in rows)


def test_quantized_values_never_give_a_zero_width_interval():
    a = synthetic(1, _config("direct", [100.0] * 5, resolution=2.0),
                  {"m": _config("m", [104.0] * 5, resolution=2.0)})
    b = synthetic(2, _config("direct", [100.0] * 5, resolution=2.0),
                  {"m": _config("m", [106.0] * 5, resolution=2.0)})
    row = {r.a["mechanism"]: r for r in compare.compare(a, b)["rows"]}["m"]
    assert row.interval.high - row.interval.low > 0.02
    assert row.interval.contains(106 / 104)


# ---- like with like ----

def test_headlines_from_different_estimators_are_compared_by_medians():
    rng = random.Random(4)
    meds_a, meds_b = lognormal(rng, 160, 0.02, 5), lognormal(rng, 160, 0.02, 5)
    # A's headline is the batched estimate, half the median (the reading
    # cost): B's is the median.  Headline to headline, B/A would read 2x.
    a_m = _config("m", [v / 2 for v in meds_a], source="batched", medians=meds_a,
                  batched=[v / 2 for v in meds_a])
    b_m = _config("m", meds_b, source="median", batched=[v / 2 for v in meds_b])
    da, db = lognormal(rng, 100, 0.02, 5), lognormal(rng, 100, 0.02, 5)
    res = compare.compare(synthetic(1, da, {"m": a_m}), synthetic(2, db, {"m": b_m}))
    row = {r.a["mechanism"]: r for r in res["rows"]}["m"]
    assert row.estimators == {"A": "median", "B": "median", "direct_A": "median",
                              "direct_B": "median"}
    assert row.ratio == pytest.approx(1.0, abs=0.05)
    assert row.verdict["word"] != "slower"
    assert any("different estimators (A: batched, B: median)" in n for n in row.notes)
    # Both batched: compared as they are, no note.
    a_b = _config("m", [v / 2 for v in meds_a], source="batched", medians=meds_a,
                  batched=[v / 2 for v in meds_a])
    b_b = _config("m", [v / 2 for v in meds_b], source="batched", medians=meds_b,
                  batched=[v / 2 for v in meds_b])
    row = compare.compare(synthetic(1, da, {"m": a_b}), synthetic(2, db, {"m": b_b}))["rows"][1]
    assert row.estimators["A"] == row.estimators["B"] == "batched" and not row.notes


def test_no_estimator_in_common_is_flagged():
    rng = random.Random(6)
    a_m = _config("m", lognormal(rng, 80, 0.02, 5), source="batched")
    for r in a_m["repetitions"]:
        r["median"] = None
    b_m = _config("m", lognormal(rng, 160, 0.02, 5), source="median")
    da, db = lognormal(rng, 100, 0.02, 5), lognormal(rng, 100, 0.02, 5)
    res = compare.compare(synthetic(1, da, {"m": a_m}), synthetic(2, db, {"m": b_m}))
    row = {r.a["mechanism"]: r for r in res["rows"]}["m"]
    assert row.verdict["word"] == "inconclusive"
    assert render_compare.verdict_text(row) == "inconclusive (estimators differ)"
    assert row.p_holm is None and res["correction"]["family"] == 1  # direct only
    assert any("no estimator in common" in n for n in row.notes)


# ---- the geometric mean over rows ----

def test_the_geometric_mean_has_an_interval_with_a_shared_direct_counted_once():
    sp = pytest.importorskip("scipy.stats")
    rng = random.Random(8)
    n = 6
    da, db = lognormal(rng, 100, 0.05, n), lognormal(rng, 100, 0.08, n)
    ma = {f"m{i}": lognormal(rng, 150 + 10 * i, 0.03, n) for i in range(3)}
    mb = {k: lognormal(rng, 160 + 10 * i, 0.04, n) for i, k in enumerate(ma)}
    res = compare.compare(synthetic(1, da, ma), synthetic(2, db, mb))
    (g,) = [g for g in res["averages"] if g["basis"] == compare.NORMALIZED]
    assert g["n"] == 3 and g["method"] == "geometric-mean"
    rows = [r for r in res["rows"] if r.basis == compare.NORMALIZED]
    assert g["value"] == pytest.approx(stats.geomean([r.ratio for r in rows]))
    # log GM = mean(log b_i) / 3 ... - mean log db + mean log da: each direct
    # once with weight 1, each mechanism with weight 1/3.
    parts = [np.var(np.log(x), ddof=1) / n * w ** 2 for x, w in
             [(da, 1), (db, 1), *[(ma[k], 1 / 3) for k in ma], *[(mb[k], 1 / 3) for k in mb]]]
    se = math.sqrt(sum(parts))
    df = sum(parts) ** 2 / sum(p ** 2 / (n - 1) for p in parts)
    q = sp.t.ppf(0.975, df)
    assert g["interval"]["low"] == pytest.approx(g["value"] * math.exp(-q * se))
    assert g["interval"]["high"] == pytest.approx(g["value"] * math.exp(q * se))
    text = render_compare.render(res["rows"], compare.document(synthetic(1, da, ma),
                                                        synthetic(2, db, mb), res))
    assert "geometric mean of B/A over 3 'vs direct' row(s)" in text and "(n=3 rows" in text


# ---- simulation: the error rates of compare's own verdicts ----

def simulate(n, sigma, compares, effect=1.0, band=compare.NOISE_BAND, rows=10, seed=1,
             sigma_direct=None):
    """Pairs of runs with one direct and `rows` mechanisms each, every
    configuration's repetitions lognormal with log-sd sigma (direct's
    sigma_direct, if given); in B the first
    mechanism costs `effect` times more.  Returns the fraction of compares
    with a false "slower"/"faster" (in any row but the first, or in any row
    when effect is 1: the family-wise error), the same from unadjusted
    p < 0.05 (what Holm corrects), the fraction of unaffected rows with
    p < 0.05 (the test's own calibration), the fraction of compares whose
    first row is found slower (the power), and the coverage of 1 by the
    geometric mean's interval over the rows when effect is 1."""
    rng = random.Random(seed)
    centres = [100.0 * (1.2 + 0.4 * i) for i in range(rows)]
    out = dict.fromkeys(("false", "raw", "row_p", "found", "cover"), 0)
    for _ in range(compares):
        sd = sigma if sigma_direct is None else sigma_direct
        a = synthetic(1, lognormal(rng, 100, sd, n),
                      {f"m{i}": lognormal(rng, c, sigma, n) for i, c in enumerate(centres)},
                      "bench1")
        b = synthetic(2, lognormal(rng, 100, sd, n),
                      {f"m{i}": lognormal(rng, c * (effect if i == 0 else 1.0), sigma, n)
                       for i, c in enumerate(centres)}, "bench2")
        res = compare.compare(a, b, noise_band=band)
        mech = res["rows"]
        assert len(mech) == rows and all(r.basis == compare.NORMALIZED for r in mech)
        clean = mech[1:] if effect != 1.0 else mech
        out["false"] += any(r.verdict["word"] in compare.DIFFERS for r in clean)
        out["raw"] += any(r.test.p < stats.ALPHA for r in clean)
        out["row_p"] += sum(r.test.p < stats.ALPHA for r in clean) / len(clean)
        out["found"] += mech[0].verdict["word"] == "slower"
        if effect == 1.0:
            (g,) = res["averages"]
            out["cover"] += g["interval"]["low"] <= 1.0 <= g["interval"]["high"]
    return {k: v / compares for k, v in out.items()}


def test_identical_runs_give_a_false_difference_in_at_most_one_compare_in_fifteen():
    """Ten rows sharing one direct (two machines, so that direct itself is
    not a row), 5 against 5, no difference: Holm keeps the chance of any
    false "slower"/"faster" in a compare at or below 5% (the band off, so
    that it cannot hide a miscalibrated test), where unadjusted p would
    give one in every three or four compares; each row's own p < 0.05 one
    time in twenty; the geometric mean's interval covers 1 95% of the time."""
    sim = simulate(n=5, sigma=0.05, compares=800, band=0.0)
    assert 0.005 <= sim["false"] <= 0.07
    assert sim["raw"] >= 0.15
    assert 0.03 <= sim["row_p"] <= 0.07
    assert 0.92 <= sim["cover"] <= 0.98
    # A direct five times noisier than the mechanisms: its uncertainty is in
    # every row's test, so the rows still err one time in twenty (a test
    # that took each direct as exact erred in six rows of ten).
    noisy = simulate(n=5, sigma=0.03, sigma_direct=0.15, compares=300, band=0.0, seed=3)
    assert 0.02 <= noisy["row_p"] <= 0.08 and noisy["false"] <= 0.07
    # Three repetitions: never a verdict, though intervals exclude 1 as often.
    sim3 = simulate(n=3, sigma=0.05, compares=200, band=0.0)
    assert sim3["false"] == 0 and sim3["raw"] >= 0.1


def test_a_real_twenty_percent_difference_is_found():
    sim = simulate(n=10, sigma=0.05, compares=200, effect=1.2, seed=2)
    assert sim["found"] >= 0.9
    assert sim["false"] <= 0.1
