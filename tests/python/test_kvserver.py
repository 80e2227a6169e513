"""kv-server: parsing memcaslap's output (a real capture), and one real run of
`isobench run kv-server -m direct` against memcached and `isob serve`.

Nothing here asserts a speed or a ratio: only that the numbers exist, are
positive and end up in the store, the table and the JSON, and that no server
process outlives the run, even one stopped by SIGTERM (counted among the
run's own descendants by fixtures/reaper.py, never by name).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from isobench.measure import kvserver
from isobench.core.records import Result

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ISOB = REPO / "build" / "isob"
# A real capture: `memcaslap -s 127.0.0.1:P -t 2s -T 1 -c 16 -w 1k -S 1s`
# against `memcached -t 1`, escape sequences (screen clears) included.
CAPTURE = HERE / "fixtures" / "memcaslap_output.txt"


def test_parse_capture():
    m = kvserver.parse_memcaslap(CAPTURE.read_text())
    assert m.ops == 98520 and m.ops_per_s == 49254 and m.run_s == 2.0
    assert m.counters["cmd_get"] == 88661 and m.counters["get_misses"] == 0
    t = m.total
    assert (t.events, t.min_us, t.max_us, t.avg_us, t.std_us) == (98504, 15, 12256, 325, 1001.02)
    assert t.dist == {4: 1, 5: 113, 6: 6080, 7: 62202, 8: 22692, 9: 1426, 10: 319, 11: 588,
                      12: 3336, 13: 1419, 14: 328}
    # Two one-second periods in the Total table.
    assert len(m.period_avg_us) == 2 and all(v > 0 for v in m.period_avg_us)


def test_percentile_buckets():
    t = kvserver.parse_memcaslap(CAPTURE.read_text()).total
    # Cumulative counts: bucket 7 (64, 128] us reaches past half of 98504.
    assert t.percentile_bucket(0.50) == (64.0, 128.0)
    assert t.percentile_bucket(0.95) == (2048.0, 4096.0)
    assert t.percentile_bucket(0.99) == (4096.0, 8192.0)
    assert kvserver.Latency().percentile_bucket(0.5) is None


def test_result_from_capture_is_valid():
    m = kvserver.parse_memcaslap(CAPTURE.read_text())
    r = kvserver.result_from("memcached", kvserver.base_params("memcached", 2, (0, 1)), m)
    assert isinstance(r, Result) and r.status == "ok" and r.unit == "ns"
    assert r.params["ops_per_s"] == 49254 and r.params["latency_p50_hi_ns"] == 128000
    assert list(r.samples) == [int(v * 1000) for v in m.period_avg_us]


def test_garbage_gives_nothing():
    m = kvserver.parse_memcaslap("servers: x\nnothing useful\n")
    assert m.ops_per_s is None and m.total is None and m.period_avg_us == []


NEEDS_SERVERS = pytest.mark.skipif(
    not (ISOB.is_file() and all(shutil.which(t) for t in ("memcached", "memcaslap", "taskset"))),
    reason="needs build/isob, memcached, memcaslap and taskset")


@NEEDS_SERVERS
def test_run_kv_server_end_to_end(isobench):
    # Under the reaper: the processes left behind are counted among the
    # run's own descendants only, never by name across the machine.
    run = isobench.start("run", "kv-server", "-m", "direct", "--quick", "--seconds", "1",
                         "--repeat", "1", "--json", "-q", ISOBENCH_ISOB=str(ISOB))
    report, p = run.finish()
    assert p.returncode == 0, p.stderr
    assert report["left"] == [], "a server or client outlived the run"
    doc = json.loads(p.stdout)
    by_mech = {r["mechanism"]: r for r in doc["results"]}
    assert set(by_mech) == {"memcached", "direct"}
    for mech, server in (("memcached", "memcached"), ("direct", "isob")):
        r = by_mech[mech]
        assert r["benchmark"] == "kv-server" and r["status"] == "ok" and r["unit"] == "ns"
        assert r["params"]["server"] == server and r["params"]["client"] == "memcaslap"
        assert r["params"]["connections"] == 16 and r["params"]["seconds"] == 1
        assert r["params"]["ops_per_s"] > 0 and r["params"]["latency_avg_ns"] > 0
        assert r["params"]["latency_source"]
        assert r["n"] >= 1
        # Server CPU per request: its tree's CPU seconds over memcaslap's ops.
        cpu_p = r["params"]
        assert cpu_p["server_cpu_us_per_req"] == pytest.approx(
            cpu_p["server_cpu_s"] * 1e6 / cpu_p["ops"], rel=1e-2, abs=1e-2)
        assert cpu_p["server_processes"] >= 1 and cpu_p["client_cpu_s"] >= 0
    rows = {c["mechanism"]: c["kv_server"] for c in doc["summary"]["configs"]}
    assert set(rows) == {"memcached", "direct"}
    assert rows["direct"]["throughput_vs_reference"]["value"] > 0
    # Each job recorded the load around it and the CPUs it pinned.
    assert [j["mechanism"] for j in doc["jobs"]] == ["memcached", "direct"]
    for j in doc["jobs"]:
        assert j["status"] == "done" and j["load"]["wall_s"] > 0
        assert j["load"]["pinned_cpus"] == sorted({by_mech[j["mechanism"]]["params"][k]
                                                   for k in ("server_cpu", "client_cpu")})
    # The text table of the same run.
    show = isobench("show", ISOBENCH_ISOB=str(ISOB))
    assert show.returncode == 0 and "isob+direct" in show.stdout and "x memcached" in show.stdout
    assert "server CPU" in show.stdout


@NEEDS_SERVERS
def test_sigterm_stops_servers_and_client(isobench):
    run = isobench.start("run", "kv-server", "-m", "direct", "--seconds", "30", "-q",
                         ISOBENCH_ISOB=str(ISOB))
    # Wait (bounded) until memcached is being measured: its job is open.
    for _ in range(1200):
        if isobench.db.exists() and _jobs(isobench.db):
            break
        time.sleep(0.05)
    os.kill(run.pid, signal.SIGTERM)
    report, p = run.finish()
    assert p.returncode == 143, p.stderr
    assert report["left"] == [], report["left"]
    with sqlite3.connect(isobench.db) as conn:
        assert conn.execute("SELECT status, end_reason FROM runs").fetchone() == (
            "interrupted", "SIGTERM")


def _jobs(db):
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("SELECT id FROM jobs").fetchall()
    except sqlite3.Error:
        return []


def test_kv_server_listed(isobench):
    doc, p = isobench.json("list", "--json", "--skip-isolation")
    bench = {b["name"]: b for b in doc["benchmarks"]}
    assert bench["kv-server"]["needs_mechanism"] is True
