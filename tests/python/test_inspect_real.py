"""`isobench run inspect` against the real native driver (build/isob), in
the style of test_real_isob.py: the contract end to end, asserting sites,
counts and keys, never how long the scan took."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

from conftest import REPO, Isobench

ISOB = REPO / "build" / "isob"


@pytest.fixture
def real(tmp_path) -> Isobench:
    if not ISOB.exists():
        pytest.fail(f"{ISOB} is missing: run `make` (make test builds it first)")
    ib = Isobench(tmp_path)
    ib.env["ISOBENCH_ISOB"] = str(ISOB)
    return ib


def test_run_inspect_finds_the_gate_and_reports_every_site(real):
    doc, p = real.json("run", "inspect", "--quick", "--repeat", "2", "--json")
    (r, *rest) = [r for r in doc["results"] if r["benchmark"] == "inspect"]
    if platform.machine() != "x86_64":
        assert r["status"] == "skipped" and "WRPKRU" in r["reason"]
        return
    assert p.returncode == 0, p.stderr
    assert r["status"] == "ok", r["reason"]
    params = r["params"]
    assert params["target"] == "self"
    assert params["target_exe"].endswith("/isob")
    # Every recorded gate WRPKRU is found where it was recorded, in isob.
    assert params["gate_sites_recorded"] > 0
    assert params["gate_sites_found"] == params["gate_sites_recorded"]
    sites = params["sites"]
    gates = [s for s in sites if s["gate"]]
    assert len(gates) == params["gate_sites_recorded"]
    assert all(s["insn"] == "wrpkru" and s["bytes"] == "0f 01 ef" and
               s["file"] == params["target_exe"] for s in gates)
    assert params["stray_sites"] == len(sites) - len(gates)
    for s in sites:
        assert s["insn"] in ("wrpkru", "xrstor", "xrstors")
        assert s["offset"].startswith("0x") and s["file"]
    # Unscanned mappings carry their reason; they are counted, not clean.
    assert params["mappings_unscanned"] == len(params["unscanned"])
    assert all(u["why"] for u in params["unscanned"])
    assert params["pages"] > 0 and params["bytes_scanned"] > 0
    # The section: the same sites, the cost per page, ERIM's figures beside.
    s = doc["summary"]["sections"]["inspect"]
    (t,) = s["targets"]
    assert t["gates"] == len(gates)
    assert t["per_page"]["value"] > 0 and t["per_page"]["unit"] == "us"
    assert {x["id"] for x in s["published"]} == {"erim-inspect-page-low",
                                                   "erim-inspect-page-high",
                                                   "erim-inspect-total"}
    assert t["same_sites_every_repetition"]


def test_inspect_of_another_process_and_a_bad_pid():
    # isob inspect --pid of a process that is not isob: it scans, no gate sites.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        out = subprocess.run([str(ISOB), "inspect", "--quick", "--pid", str(child.pid)],
                             capture_output=True, text=True, timeout=120)
    finally:
        child.kill()
        child.wait()
    if platform.machine() != "x86_64":
        assert out.returncode == 4
        return
    assert out.returncode == 0, out.stderr
    res = [json.loads(l) for l in out.stdout.splitlines() if '"type":"result"' in l]
    assert res[0]["status"] == "ok" and res[0]["params"]["target"] == "pid"
    assert res[0]["params"]["gate_sites_found"] == 0
    assert "python" in res[0]["params"]["target_exe"]
    bad = subprocess.run([str(ISOB), "inspect", "--pid", "0"], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "--pid" in bad.stderr


def test_inspect_reports_the_strays_mpk_closed():
    """`isob inspect` of itself makes one mpk compartment after finding the
    sites: where mpk runs, libc's pkey_set WRPKRU is reported closed and
    every XRSTOR open; elsewhere, why the closing was not applied."""
    if platform.machine() != "x86_64":
        pytest.skip("no WRPKRU or XRSTOR on this architecture")
    out = subprocess.run([str(ISOB), "inspect", "--quick"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    (r,) = [json.loads(l) for l in out.stdout.splitlines() if '"type":"result"' in l]
    params = r["params"]
    strays = [s for s in params["sites"] if not s["gate"]]
    assert all(s["closed"] is None for s in params["sites"] if s["gate"])
    if params["mpk_closing"] != "applied":
        assert params["mpk_closing_why"]
        assert all(s["closed"] is None for s in strays)
        return
    assert params["mpk_closing_why"] is None
    wrpkru = [s for s in strays if s["insn"] == "wrpkru"]
    assert wrpkru and all(s["closed"] is True for s in wrpkru)
    assert any((s["symbol"] or "").startswith("pkey_set+") for s in wrpkru)
    assert all(s["closed"] is False for s in strays if s["insn"] != "wrpkru")
