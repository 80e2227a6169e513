"""kv's --reading: per-request (two counter readings around every get, the
default) and per-pass (two around a whole pass, divided by its gets: Konrad
2023, section 3.3).  Against the real driver (build/isob) for what each
stores, and against synthetic runs for what the kv section says of each row.
No test asserts how long anything took."""

from __future__ import annotations

import copy

import pytest

from conftest import REPO, Isobench, assert_one_error_line
from fixture_runs import fixture, load_doc

from isobench.analysis.families import kv as kv_analysis
from isobench.analysis import summary
from isobench.render import report

ISOB = REPO / "build" / "isob"


@pytest.fixture
def real(tmp_path) -> Isobench:
    if not ISOB.exists():
        pytest.fail(f"{ISOB} is missing: run `make` (make test builds it first)")
    ib = Isobench(tmp_path)
    ib.env["ISOBENCH_ISOB"] = str(ISOB)
    return ib


def _gets(doc, reading):
    return [r for r in doc["results"] if r["params"]["variant"] == "get"
            and r["params"]["reading"] == reading]


def test_both_readings_on_one_store(real):
    doc, p = real.json("run", "kv", "-m", "direct", "--quick", "--sizes", "4K",
                       "--reading", "per-request,per-pass", "--json")
    assert p.returncode == 0, p.stderr
    res = doc["results"]
    assert all(r["status"] == "ok" for r in res), [r["reason"] for r in res]
    # set and warm-up are always timed per request; one get phase per reading.
    assert sorted((r["params"]["variant"], r["params"]["reading"]) for r in res) == [
        ("get", "per-pass"), ("get", "per-request"), ("set", "per-request"),
        ("warmup", "per-request")]
    [each] = _gets(doc, "per-request")
    [whole] = _gets(doc, "per-pass")
    for r in (each, whole):
        # 4 KiB is 64 entries; every pass reads each once, every reply verified.
        passes = r["params"]["iterations"]
        assert passes >= 3
        assert r["params"]["requests"] == 64 * passes == r["params"]["verified"]
        assert r["params"]["mean"] > 0
    # per-request keeps one sample per get, per-pass one per pass: the pass's
    # count divided by its 64 gets.
    assert each["n"] == 64 * each["params"]["iterations"]
    assert whole["n"] == whole["params"]["iterations"]
    assert whole["min"] > 0 and whole["median"] > 0
    # The section says which one each row is.
    rows = doc["summary"]["sections"]["kv"]["rows"]
    assert sorted(r["reading"] for r in rows) == ["per-pass", "per-request"]
    assert set(doc["summary"]["sections"]["kv"]["readings"]) == {"per-pass", "per-request"}


def test_the_default_is_per_request(real):
    doc, p = real.json("run", "kv", "-m", "direct", "--quick", "--sizes", "4K", "--json")
    assert p.returncode == 0, p.stderr
    assert {r["params"]["reading"] for r in doc["results"]} == {"per-request"}
    [get] = _gets(doc, "per-request")
    assert get["n"] == 64 * get["params"]["iterations"]


@pytest.mark.parametrize("args, says", [
    (("kv", "-m", "direct", "--reading", "per-bogus"), "unknown --reading value 'per-bogus'"),
    (("oslat", "--reading", "per-pass"), "--reading"),
])
def test_a_wrong_reading_is_one_line(real, args, says):
    p = real("run", *args, "--quick")
    assert says in assert_one_error_line(p)
    assert not real.db.exists()


def test_isob_refuses_a_wrong_reading_itself():
    import subprocess
    if not ISOB.exists():
        pytest.fail(f"{ISOB} is missing")
    p = subprocess.run([str(ISOB), "kv", "-m", "direct", "--reading", "per-both"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert p.stderr.strip() == "isob: error: kv: unknown --reading 'per-both' (per-request, per-pass)"


def _run_with_readings(readings):
    """clean_run.json's kv results, once per reading (per-pass: half the
    time); None: as stored before --reading existed."""
    doc = fixture("clean_run")
    kv = [r for r in doc["results"] if r["benchmark"] == "kv"]
    rest = [r for r in doc["results"] if r["benchmark"] != "kv"]
    out = []
    for reading in readings:
        for r in kv:
            r = copy.deepcopy(r)
            if reading is not None:
                r["params"]["reading"] = reading
            if reading == "per-pass":
                r["samples"]["primary"] = [v // 2 for v in r["samples"]["primary"]]
            out.append(r)
    doc["results"] = rest + out
    return doc


def test_section_rows_say_their_reading(tmp_path):
    doc = summary.build(load_doc(tmp_path, _run_with_readings(["per-request", "per-pass"])))
    s = doc["sections"]["kv"]
    by = {(r["mechanism"], r["reading"]): r for r in s["rows"]}
    assert {k[1] for k in by} == {"per-request", "per-pass"}
    assert s["readings"]["per-pass"] == kv_analysis.READINGS["per-pass"]
    # Two readings, two rows per mechanism, each labelled by it.
    assert any("reading=per-pass" in r["label"] for r in s["rows"])
    md = report.render_md(doc, [])
    assert "| reading |" in md and "| per-pass |" in md
    assert "- reading **per-pass**: two counter readings around a whole pass" in md


def test_runs_stored_before_the_option_read_per_request(tmp_path):
    doc = summary.build(load_doc(tmp_path, _run_with_readings([None])))
    s = doc["sections"]["kv"]
    assert {r["reading"] for r in s["rows"]} == {"per-request"}
    assert list(s["readings"]) == ["per-request"]
