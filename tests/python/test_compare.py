"""`isobench compare`: matching, normalization to each run's own direct,
intervals and tests over repetitions, one population per average, and
absolute ratios across machines only when asked for."""

import pytest

from isobench.analysis import compare, summary

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
    assert mpk.interval.low > 1.0
    assert mpk.test.p < 0.05 and mpk.test.method == "exact"
    futex = rows[("switch", "process-futex", "same-cpu")]
    assert futex.ratio == pytest.approx(1.0)


def fixture_copy(doc):
    import copy
    return copy.deepcopy(doc)


def test_too_few_repetitions_give_no_p(tmp_path):
    a = _doc(tmp_path, fixture("clean_run"), "a.sqlite")  # 2 repetitions
    res = compare.compare(a, a)
    for r in res["rows"]:
        assert r.test is None
        assert any("cannot reach p < 0.05" in n for n in r.notes)
    one = fixture("clean_run")
    one["results"] = [r for r in one["results"] if r["repetition"] == 1]
    c = _doc(tmp_path, one, "c.sqlite")
    res = compare.compare(c, c)
    assert all(r.interval is None for r in res["rows"])


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
    isobench("run", "-q", "-m", "direct", "-m", "thread", "--repeat", "2")
    isobench("run", "-q", "-m", "direct", "-m", "thread", "--repeat", "2")
    p = isobench("compare", "1", "2")
    assert p.returncode == 0, p.stderr
    # Identical fake samples: every ratio is exactly 1, so no difference
    # is significant.
    rows = [l for l in p.stdout.splitlines() if l.startswith("switch ")]
    assert rows and all("not significant" in l for l in rows)
    assert "warning" not in p.stdout


@pytest.mark.parametrize("args, needle", [
    (["compare", "1"], "required"),
    (["compare", "1", "9"], "no run 9"),
    (["compare", "1", "1", "--db-b", "/nonexistent/x.sqlite"], "no store"),
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
    a = _doc(tmp_path, fixture("clean_run"), "a.sqlite")
    slower = fixture("clean_run")
    for r in slower["results"]:
        if r["mechanism"] == "mpk":
            r["samples"]["primary"] = [x * 3 // 2 for x in r["samples"]["primary"]]
    b = _doc(tmp_path, slower, "b.sqlite")
    res = compare.compare(a, b)
    mpk = rows_by(res)[("switch", "mpk", "same-cpu")]
    v = mpk.verdict
    assert v["word"] == "slower" and v["factor"] == pytest.approx(1.5, rel=0.02)
    assert v["low"] <= v["factor"] <= v["high"]
    assert compare.verdict_text(mpk).startswith("1.5") and "x slower [" in compare.verdict_text(mpk)
    # The other way round: faster, by the inverse factor and interval.
    back = rows_by(compare.compare(b, a))[("switch", "mpk", "same-cpu")]
    assert back.verdict["word"] == "faster"
    assert back.verdict["factor"] == pytest.approx(v["factor"])
    assert back.verdict["low"] == pytest.approx(v["low"])
    futex = rows_by(res)[("switch", "process-futex", "same-cpu")]
    assert futex.verdict["word"] == "not significant"
    text = compare.render(res["rows"], compare.document(a, b, res))
    assert "x slower [" in text and "not significant" in text


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
