"""`isobench list`: the JSON contract and the isolation column."""

from conftest import assert_one_error_line
from isobench.render import console


def by_name(items):
    return {m["name"]: m for m in items}


def test_list_json_contract(isobench):
    doc, p = isobench.json("list", "--json")
    assert p.returncode == 0, p.stderr
    assert set(doc) >= {"mechanisms", "benchmarks"}
    for m in doc["mechanisms"]:
        assert {"name", "summary", "available", "reason", "isolation"} <= set(m)
        assert isinstance(m["name"], str) and isinstance(m["summary"], str)
        assert isinstance(m["available"], bool)
        assert m["reason"] is None or isinstance(m["reason"], str)
        assert m["isolation"] in ("enforced", "partial", "none", "untested", "failed")
    for b in doc["benchmarks"]:
        assert {"name", "summary"} <= set(b)
    mechs = by_name(doc["mechanisms"])
    assert mechs["direct"]["isolation"] == "none"
    assert mechs["process-futex"]["isolation"] == "enforced"
    assert mechs["mpk"]["available"] is False
    assert mechs["mpk"]["reason"] == "CPU has no PKU"
    assert mechs["mpk"]["isolation"] == "untested"
    assert "test-crash" not in mechs  # test mechanisms only on request
    # kv-server, lwc-serve and lwc-conns are added by the Python side (they
    # drive servers; not isob subcommands).
    assert [b["name"] for b in doc["benchmarks"]] == ["switch", "pingpong", "kv", "kv-server",
                                                      "lwc-serve", "lwc-conns", "lwc-curve"]


def test_isolation_untested_when_the_test_crashes_or_hangs(isobench):
    doc, p = isobench.json("list", "--json", "--timeout", "5", ISOBENCH_TEST_MECHANISMS="1")
    assert p.returncode == 0, p.stderr
    mechs = by_name(doc["mechanisms"])
    assert mechs["test-crash"]["isolation"] == "untested"
    assert "SIGSEGV" in mechs["test-crash"]["isolation_reason"]
    assert mechs["test-hang"]["isolation"] == "untested"
    assert "timed out" in mechs["test-hang"]["isolation_reason"]


def test_failed_isolation_is_loud(isobench):
    p = isobench("list", FAKE_ISOB_LEAKY="1")
    assert p.returncode == 1
    row = next(l for l in p.stdout.splitlines() if l.startswith("leaky"))
    assert "FAILED" in row
    assert "ISOLATION TEST FAILED" in p.stdout
    doc, p = isobench.json("list", "--json", FAKE_ISOB_LEAKY="1")
    assert by_name(doc["mechanisms"])["leaky"]["isolation"] == "failed"


def test_list_table(isobench):
    p = isobench("list")
    assert p.returncode == 0
    assert "process-futex" in p.stdout and "enforced" in p.stdout
    assert "CPU has no PKU" in p.stdout
    assert max(len(line) for line in p.stdout.splitlines()) <= 100


def test_list_fits_100_columns_and_wide_keeps_each_summary_on_its_line():
    from isobench.render.kit import table
    long = "a summary of many words that goes on " * 6
    mechs = [{"name": "process-futex", "available": True, "isolation": "enforced",
              "summary": long.strip()},
             {"name": "mpk", "available": False, "isolation": "untested", "summary": "Intel MPK",
              "reason": "CPU has no PKU " + "(and a long explanation) " * 6}]
    benches = [{"name": "oslat", "needs_mechanism": False, "summary": long.strip()}]
    text = console.list_report(mechs, benches)
    assert max(len(line) for line in text.splitlines()) <= 100
    # The summary continues on the next lines of its column: no word is lost.
    words = " ".join(line[line.index("enforced") + 8:] if line.startswith("process-futex")
                     else line for line in text.splitlines()[3:6]).split()
    assert words[:10] == long.split()[:10]
    assert " ".join(text.split()).count("a summary of many words") == 12
    wide = console.list_report(mechs, benches, wide=True)
    assert any(line.startswith("process-futex") and line.endswith("goes on")
               for line in wide.splitlines())


def test_skip_isolation_runs_no_test(isobench):
    doc, p = isobench.json("list", "--json", "--skip-isolation")
    assert all(m["isolation"] == "untested" for m in doc["mechanisms"])
    assert [c[0] for c in isobench.isob_calls()] == ["list"]


def test_missing_driver(isobench, tmp_path):
    p = isobench("list", ISOBENCH_ISOB=str(tmp_path / "no-such-isob"))
    line = assert_one_error_line(p, 2)
    assert "not found" in line


def test_driver_printing_garbage(isobench):
    p = isobench("list", FAKE_ISOB_LIST_GARBAGE="1")
    assert_one_error_line(p, 1)
