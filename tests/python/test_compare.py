"""`isobench compare`: matching, normalization to each run's own direct,
intervals, significance and the geometric mean."""

import pytest

from isobench import compare

from conftest import assert_one_error_line
from fixture_runs import fixture, import_doc, load_doc


def scaled(doc, factor, only=None):
    """The run on a machine `factor` times slower (for mechanism `only`, if given)."""
    for r in doc["results"]:
        if only is None or r["mechanism"] == only:
            r["samples"]["primary"] = [x * factor for x in r["samples"]["primary"]]
    return doc


def test_a_slower_machine_costs_the_same_isolation(tmp_path):
    a = load_doc(tmp_path, fixture("clean_run"), "a.sqlite")
    b = load_doc(tmp_path, scaled(fixture("clean_run"), 2), "b.sqlite")
    res = compare.compare(a, b)
    rows = {(r.a.benchmark, r.a.mechanism, r.a.placement): r for r in res["rows"]}
    assert rows[("switch", "direct", "same-cpu")].basis == compare.ABSOLUTE
    assert rows[("switch", "direct", "same-cpu")].ratio == 2.0
    for key in (("switch", "mpk", "same-cpu"), ("switch", "process-futex", "cross-cpu"),
                ("kv", "mpk", "same-cpu")):
        assert rows[key].basis == compare.NORMALIZED
        assert rows[key].ratio == pytest.approx(1.0)
        assert rows[key].ci.low <= 1.0 <= rows[key].ci.high
    assert res["geomean"][compare.NORMALIZED]["value"] == pytest.approx(1.0)
    assert res["geomean"][compare.NORMALIZED]["method"] == "geometric-mean"
    assert res["geomean"][compare.ABSOLUTE]["value"] == pytest.approx(2.0)


def test_a_costlier_mechanism_shows_in_the_normalized_ratio(tmp_path):
    a = load_doc(tmp_path, fixture("clean_run"), "a.sqlite")
    b = load_doc(tmp_path, scaled(fixture("clean_run"), 3, only="mpk"), "b.sqlite")
    rows = {(r.a.benchmark, r.a.mechanism): r for r in compare.compare(a, b)["rows"]}
    mpk = rows[("switch", "mpk")]
    assert mpk.ratio == pytest.approx(3.0, rel=0.01)
    assert mpk.ci.low > 1.0 and mpk.test.p < 0.001
    assert rows[("switch", "process-futex")].ratio == pytest.approx(1.0)


def test_few_values_warn(tmp_path):
    doc = fixture("clean_run")
    for r in doc["results"]:
        r["samples"]["primary"] = r["samples"]["primary"][:3]
    a = load_doc(tmp_path, doc, "a.sqlite")
    b = load_doc(tmp_path, fixture("clean_run"), "b.sqlite")
    rows = compare.compare(a, b)["rows"]
    assert all(any("fewer than 9" in w for w in r.warnings) for r in rows)


def test_compare_command_across_stores(isobench, tmp_path):
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    import_doc(a, fixture("clean_run"))
    import_doc(b, scaled(fixture("clean_run"), 2))
    doc, p = isobench.json("compare", "1", "latest", "--db", str(a), "--db-b", str(b), "--json")
    assert p.returncode == 0, p.stderr
    assert doc["a"]["db"] == str(a) and doc["b"]["db"] == str(b)
    assert {r["basis"] for r in doc["rows"]} == {"vs direct", "absolute"}
    for r in doc["rows"]:
        assert {"ratio", "ci", "p", "a", "b", "unit", "params"} <= set(r)
    assert doc["bootstrap"]["seed"] == 1
    assert doc["findings"] == {"A": [], "B": []}
    p = isobench("compare", "1", "1", "--db", str(a), "--db-b", str(b))
    assert p.returncode == 0
    assert "geometric mean of B/A" in p.stdout and "95% CI" in p.stdout


def test_compare_same_store_with_fake_runs(isobench):
    isobench("run", "-q", "-m", "direct", "-m", "thread")
    isobench("run", "-q", "-m", "direct", "-m", "thread")
    p = isobench("compare", "1", "2")
    assert p.returncode == 0, p.stderr
    # Identical fake samples: every ratio is exactly 1.
    assert "B/A" in p.stdout and "1.000" in p.stdout


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
