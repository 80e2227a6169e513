"""ERIM's binary inspection: `isobench run inspect` (sites, cost per page
beside ERIM's), its section's statistics by simulation through the
project's own functions, and the stray sites in `isobench list`'s mpk
evidence; against the fake driver (fixtures/fake_isob.py)."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from conftest import assert_one_error_line, load_fake
from isobench.analysis.families import inspect
from isobench.analysis.kit import quantities
from isobench.core import stats

FAKE = load_fake()


def section(doc):
    return doc["summary"]["sections"]["inspect"]


def test_run_inspect_prints_sites_and_cost_beside_erim(isobench):
    p = isobench("run", "inspect", "--quick", FAKE_ISOB_INSPECT="1")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "pkey_set+0x32 at libc.so.6+0x109352" in out
    assert "writes PKRU" in out
    assert "UNSCANNED [vsyscall]" in out
    assert "PUBLISHED ERIM" in out and "3.5 to 6.2" in out  # as Konrad prints them
    # The four sites, each with its file, offset, instruction and role.
    rows = [l.split() for l in out.splitlines() if l.startswith(("/opt/", "/lib/"))]
    assert [(r[0], r[1], r[2], r[-1]) for r in rows] == [
        ("/opt/isob/build/isob", "0x76684", "wrpkru", "gate"),
        ("/opt/isob/build/isob", "0x766ea", "wrpkru", "gate"),
        ("/lib/libc.so.6", "0x109352", "wrpkru", "stray"),
        ("/lib/ld-linux-x86-64.so.2", "0x12254", "xrstor", "stray")]


def test_cost_per_page_is_the_pass_over_its_pages(isobench):
    doc, p = isobench.json("run", "inspect", "--quick", "--repeat", "3", "--json",
                           FAKE_ISOB_INSPECT="1")
    assert p.returncode == 0, p.stderr
    s = section(doc)
    (t,) = s["targets"]
    assert t["pages"] == FAKE.INSPECT_PAGES
    # The fake's passes are INSPECT_US_PER_PAGE us a page (within 1%), in TSC ticks.
    page = t["per_page"]
    assert page["value"] == pytest.approx(FAKE.INSPECT_US_PER_PAGE, rel=0.011)
    assert page["reps"] == 3
    if page["interval"]:  # three processes whose pids fell alike give no spread
        assert page["between"] == "repetitions"
        # (to rounding: a value and its bounds come from the same logs by
        # different sums, and equal passes give a zero-width spread)
        lo, hi = page["interval"]
        assert lo * (1 - 1e-12) <= page["value"] <= hi * (1 + 1e-12)
    assert t["erim_pages_local"]["value"] == pytest.approx(
        page["value"] * inspect.ERIM_PAGES / 1000, rel=1e-9)
    assert (t["gates"], t["strays"]) == (2, 2)
    assert t["same_sites_every_repetition"]
    pub = {x["id"]: x["value"] for x in s["published"]}
    assert pub == {"erim-inspect-page-low": 3.5, "erim-inspect-page-high": 6.2,
                   "erim-inspect-total": 17.7}
    assert s["published_per_page"]["value"] == pytest.approx(17.7e3 / 3918)


def test_pid_is_passed_to_inspect_only(isobench):
    p = isobench("run", "inspect", "--quick", "--pid", "4242", FAKE_ISOB_INSPECT="1")
    assert p.returncode == 0, p.stderr
    runs = [a for a in isobench.isob_calls() if a[:1] == ["inspect"]]
    assert runs and all(a[a.index("--pid") + 1] == "4242" for a in runs)
    p = isobench("run", "switch", "-m", "direct", "--pid", "4242", FAKE_ISOB_INSPECT="1")
    assert_one_error_line(p)
    assert "inspect does" in p.stderr


def test_an_unreadable_mapping_is_unscanned_not_clean(isobench):
    p = isobench("run", "inspect", "--quick", FAKE_ISOB_INSPECT="unscanned")
    assert p.returncode == 0, p.stderr
    assert "UNSCANNED /lib/libc.so.6" in p.stdout
    assert "Input/output error" in p.stdout
    assert "2 unscanned" in " ".join(p.stdout.split())  # notes wrap at 100 columns


def test_a_failed_inspection_is_reported(isobench):
    p = isobench("run", "inspect", "--quick", FAKE_ISOB_INSPECT="fail")
    assert p.returncode == 1
    assert "FAILED" in p.stdout and "Permission denied" in p.stdout


def _entry(medians_ns, pages):
    """A summary entry as summary.py makes it: per-repetition medians in ns
    (to_ns 1) and each repetition's pages among its outputs."""
    reps = [{"repetition": i, "median": m, "outputs": {"pages": pg}}
            for i, (m, pg) in enumerate(zip(medians_ns, pages))]
    return {"to_ns": 1.0, "repetitions": reps, "unit": "ns",
            "headline": {"reps": len(reps), "ns": medians_ns[0],
                         "interval_ns": None, "between": None}}


def test_per_page_interval_covers_the_truth_by_simulation():
    """The interval over repetitions of the time per page covers the true
    value about 95% of the time: 2,000 simulated runs of 5 repetitions with
    log-normal noise on each repetition's median pass."""
    rng = random.Random(21)
    true_us, pages, covered, runs = 4.0, 1358, 0, 2000
    for _ in range(runs):
        med = [true_us * 1000 * pages * rng.lognormvariate(0, 0.1) for _ in range(5)]
        q = inspect.per_page(_entry(med, [pages] * 5))
        lo, hi = q["interval"]
        covered += lo <= true_us <= hi
    assert 0.93 <= covered / runs <= 0.97


def test_per_page_uses_each_repetitions_own_pages():
    q = inspect.per_page(_entry([2_000_000.0, 4_000_000.0], [1000, 2000]))
    # Both are 2 us a page: no spread, whatever the page counts.
    assert q["value"] == pytest.approx(2.0)
    assert q["interval"] == pytest.approx([2.0, 2.0])
    one = inspect.per_page({**_entry([3_000_000.0], [1000]),
                            "headline": {"reps": 1, "ns": 3_000_000.0,
                                         "interval_ns": [2_900_000.0, 3_100_000.0],
                                         "between": "one process"}})
    assert one["value"] == pytest.approx(3.0)
    assert one["interval"] == pytest.approx([2.9, 3.1]) and one["between"] == "one process"
    assert quantities.geomean_of([1.0, 4.0], "us")["value"] == pytest.approx(stats.geomean([1, 4]))


def test_stray_sentences_name_the_site_and_the_attack():
    sites = [{"file": "/lib/libc.so.6", "offset": "0x10", "insn": "wrpkru", "gate": False,
              "symbol": "pkey_set+0x32"},
             {"file": "/x/isob", "offset": "0x20", "insn": "wrpkru", "gate": True},
             {"file": "/x/isob", "offset": "0x30", "insn": "xrstors", "gate": False}]
    lines = inspect.stray_lines(sites)
    assert lines == ["WRPKRU pkey_set+0x32 at libc.so.6+0x10: " + inspect.ATTACKS["wrpkru"]]
    # XRSTORS faults at CPL 3: classified, but no user-mode attack stated.
    assert "privileged" in inspect.classify(sites[2])["attack"]
    assert inspect.classify(sites[1])["attack"] is None


def test_list_states_the_stray_sites_in_the_mpk_evidence(isobench):
    doc, p = isobench.json("list", "--json")
    assert p.returncode == 0, p.stderr
    mechs = {m["name"]: m for m in doc["mechanisms"]}
    cell = mechs["mpk"]["attackers"]["in-process"]
    assert cell["inspection"]["status"] == "ok"
    assert any("pkey_set+0x32 at libc.so.6+0x109352" in s and "writes PKRU" in s
               for s in cell["inspection"]["strays"])
    # The fake's mpk is not available: its evidence stays why not.
    assert cell["evidence"] == "CPU has no PKU"
    # Only the MPK mechanisms carry it.
    assert "inspection" not in mechs["process-futex"]["attackers"]["in-process"]
    p = isobench("list")
    assert p.returncode == 0
    assert "mpk: ERIM's binary inspection of /opt/isob/build/isob" in p.stdout
    assert "2 of 2 recorded gate WRPKRUs, 2 stray sites" in p.stdout


def _matrix_with(fake, mode):
    out = subprocess.run([sys.executable, str(fake.__file__), "inspect", "--quick"],
                         capture_output=True, text=True, env={"FAKE_ISOB_INSPECT": mode})
    lines = [json.loads(l) for l in out.stdout.splitlines()]
    mechs = [{"name": "mpk", "available": True, "attackers": {
                 "in-process": {"verdict": "enforced", "method": "load, store",
                                "evidence": "SEGV_PKUERR"}}},
             {"name": "thread", "available": True, "attackers": {
                 "in-process": {"verdict": "leaks", "method": None, "evidence": None}}}]
    return mechs, inspect.with_inspection(mechs, lines, None)


def test_an_open_callable_stray_makes_the_mpk_cell_leak(fake):
    """with_inspection on a matrix where mpk ran and the scan found libc's
    pkey_set open: one call opens every key, so the cell leaks, its method
    the call; the jump-only XRSTOR is stated as not defended; other
    mechanisms are untouched."""
    mechs, notes = _matrix_with(fake, "1")
    cell = mechs[0]["attackers"]["in-process"]
    assert cell["verdict"] == "leaks"
    assert cell["method"].startswith("untrusted code calls pkey_set (libc.so.6), whose WRPKRU at "
                                     "pkey_set+0x32 at libc.so.6+0x109352 mpk did not close")
    assert cell["evidence"].startswith("SEGV_PKUERR; ")
    assert "open: WRPKRU pkey_set+0x32 at libc.so.6+0x109352: untrusted code that calls" in cell["evidence"]
    assert ("not defended, reached only by a jump into the middle of code with chosen registers: "
            "XRSTOR ld-linux-x86-64.so.2+0x12254") in cell["evidence"]
    assert "inspection" not in mechs[1]["attackers"]["in-process"]
    assert mechs[1]["attackers"]["in-process"]["verdict"] == "leaks"
    assert notes[0].startswith("mpk: ERIM's binary inspection of /opt/isob/build/isob")
    assert "0 of them closed (mpk's closing not applied: CPU has no PKU" in notes[0]


def test_a_closed_stray_leaves_the_measured_verdict(fake):
    """The same scan after mpk's closing: pkey_set's WRPKRU is a trap, the
    cell stays as measured and says what was closed."""
    mechs, notes = _matrix_with(fake, "closed")
    cell = mechs[0]["attackers"]["in-process"]
    assert cell["verdict"] == "enforced" and cell["method"] == "load, store"
    assert ("closed by mpk before create (a trap in its place): WRPKRU pkey_set+0x32 at "
            "libc.so.6+0x109352") in cell["evidence"]
    assert "XRSTOR ld-linux-x86-64.so.2+0x12254" in cell["evidence"]
    assert "1 of them closed by mpk" in notes[0]
    assert "  WRPKRU pkey_set+0x32 at libc.so.6+0x109352: " + inspect.CLOSED in notes


def test_list_says_when_the_inspection_did_not_run(isobench):
    doc, p = isobench.json("list", "--json", FAKE_ISOB_INSPECT="fail")
    assert p.returncode == 0, p.stderr
    cell = {m["name"]: m for m in doc["mechanisms"]}["mpk"]["attackers"]["in-process"]
    assert cell["inspection"]["status"] == "failed"
    assert "Permission denied" in cell["inspection"]["reason"]
    p = isobench("list", FAKE_ISOB_INSPECT="fail")
    assert "ERIM's binary inspection: untested" in p.stdout
