"""lwc-serve and lwc-conns (measure/lwcserve.py): the sweep's points, the
descriptor limit refused up front, real servers under isob loadgen with
every process gone afterwards, and the section's tables and plot.

Nothing here asserts a speed or a ratio: only that the points exist, that
every reply was verified, that the counts add up and that the section shows
what the results hold.  The real runs use a reduced sweep (one variant,
one or two lengths, a fraction of a second each) so the file stays well
under a minute.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from isobench.analysis.families import lwcserve as section
from isobench.analysis.kit import runs
from isobench.analysis import sections, summary
from isobench.measure import lwcserve, proc
from isobench.measure.driver import _catalog_from
from isobench.core.records import NO_MECHANISM, Result
from isobench.render.families import lwcserve as render
from isobench.render.kit import table
from isobench.render import report
from isobench.store import Store
from isobench.render import console
from isobench.render import figures

HERE = Path(__file__).resolve().parent
ISOB = HERE.parents[1] / "build" / "isob"

NEEDS_ISOB = pytest.mark.skipif(not ISOB.is_file(), reason="needs build/isob (make build)")


def test_points_cover_the_sweep():
    full = list(lwcserve.serve_points(quick=False))
    # Every mode over every variant, and memcached over its own protocol.
    assert len(full) == len(lwcserve.VARIANTS) * 5 * 10 + 10
    assert sorted({p[3] for p in full}) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 4096]
    assert {p[0] for p in full} == {"shared", "fork", "prefork", "rollback", "per-connection",
                                    "memcached"}
    assert {(p[1], p[2]) for p in full if p[0] == "memcached"} == {("memcache", 0)}
    assert {(p[1], p[2]) for p in full} == {("memcache", 0), ("http", 0), ("memcache", 64)}
    quick = list(lwcserve.serve_points(quick=True))
    assert 0 < len(quick) < len(full) and {p[3] for p in quick} == {1, 16, 256, 4096}
    conns = list(lwcserve.conns_points(quick=False))
    assert sorted({c for _, c in conns}) == [16, 64, 256, 1024, 4096]
    assert {s for s, _ in conns} == {"per-connection", "direct", "memcached"}
    assert len(list(lwcserve.conns_points(quick=True))) < len(conns)


def test_rollback_totals_read_from_the_servers_last_line():
    out = ("isob serve: listening on 127.0.0.1:1 (mechanism direct), session rollback, http\n"
           "isob serve: rollback by uffd: 4 sessions rolled back, 50.0 us and 3.0 pages ...\n"
           'isob serve: rollback {"type": "rollback", "method": "uffd", "workers": 2, '
           '"sessions": 4, "pages": 12, "ranges": 5, "ns": 200000, "unmapped": 0, '
           '"failed": 0, "verified": 0, "mismatched": 0}\n')
    t = lwcserve.rollback_totals(out)
    assert t["rollback_method"] == "uffd" and t["rollback_sessions"] == 4
    assert t["rollback_us_per_session"] == 50.0 and t["rollback_pages_per_session"] == 3.0
    # fork copies no pages back: none per session, rather than a false 0.
    fork = out.replace('"uffd"', '"fork"')
    assert lwcserve.rollback_totals(fork)["rollback_pages_per_session"] is None
    # No line (a server that died), or a torn one: nothing.
    assert lwcserve.rollback_totals("isob serve: listening\n") == {}
    assert lwcserve.rollback_totals('isob serve: rollback {"method": "uf\n') == {}


def test_listed_without_a_mechanism():
    cat = _catalog_from({"mechanisms": [], "benchmarks": []})
    for name in ("lwc-serve", "lwc-conns"):
        b = cat.benchmark(name)
        assert b is not None and b.needs_mechanism is False


def test_concurrency_beyond_the_fd_limit_is_skipped_up_front(monkeypatch):
    # 200 descriptors: 16 connections fit, 256 and 1024 do not.
    monkeypatch.setattr(lwcserve, "fd_limit", lambda: 200)
    started = []
    monkeypatch.setattr(lwcserve, "_measure", lambda *a, **k: started.append(a[1]) or
                        Result.failure("lwc-conns", NO_MECHANISM, "stub", params=a[1]))
    out = []
    lwcserve.measure_conns("/nonexistent/isob", True, 0.1, out.append)
    skipped = [r for r in out if r.status == "skipped"]
    assert {r.params["conns"] for r in skipped} == {256, 1024}
    assert len(skipped) == 6
    for r in skipped:
        assert "the limit here is 200" in r.reason and "descriptors" in r.reason
    # Nothing was started for a refused point.
    assert {p["conns"] for p in started} == {16}


@pytest.fixture
def small_sweep(monkeypatch):
    monkeypatch.setattr(lwcserve, "VARIANTS", (("http", 0),))
    monkeypatch.setattr(lwcserve, "QUICK_LENGTHS", (1, 8))
    monkeypatch.setattr(lwcserve, "QUICK_CONCURRENCY", (16,))


def _run(bench: str) -> list[Result]:
    seen = []
    out = lwcserve.run(bench, str(ISOB), True, 0.3, lambda r, a, b: seen.append((r, a, b)))
    assert [r for r, _, _ in seen] == out
    assert all(a <= b for _, a, b in seen)
    return out


def _store(tmp_path: Path, results: list[Result]) -> dict:
    with Store.open(tmp_path / "r.sqlite", create=True) as s:
        run_id = s.begin_run(["isobench", "run", "lwc-serve"], {})
        for r in results:
            s.add_result(run_id, r)
        s.finish_run(run_id, "ok")
        return summary.build(runs.load_run(s, run_id))


@NEEDS_ISOB
def test_lwc_serve_real_run(small_sweep, tmp_path):
    before = set(proc.descendants())
    out = _run("lwc-serve")
    assert set(proc.descendants()) <= before, "a server or loadgen outlived its point"
    assert len(out) == 5 * 2
    for r in out:
        assert r.status == "ok", r.reason
        p = r.params
        assert r.mechanism == NO_MECHANISM and r.counter == "loadgen" and r.unit == "ns"
        assert p["proto"] == "http" and p["conns"] == lwcserve.CONNECTIONS
        # Every request was verified, and sessions of L requests add up.
        assert p["verified"] == p["requests"] > 0 and p["throughput_rps"] > 0
        assert p["sessions_done"] * p["session"] <= p["requests"]
        assert p["latency_p50_us"] <= p["latency_p99_us"] <= p["latency_max_us"]
        assert p["client_busy"] is not None and p["server_busy"] is not None
        # CPU per request: each side's CPU seconds over the verified requests.
        assert p["server_cpu_us_per_req"] == pytest.approx(
            p["server_cpu_s"] * 1e6 / p["verified"], rel=1e-3, abs=1e-3)
        assert p["client_cpu_us_per_req"] == pytest.approx(
            p["client_cpu_s"] * 1e6 / p["verified"], rel=1e-3, abs=1e-3)
        assert len(r.samples) > 0
    # shared serves in one process.  (How many session processes fork and
    # rollback have when the run ends depends on timing: with L = 1 all may
    # be between sessions.)
    assert {r.params["server_processes"] for r in out if r.params["server"] == "shared"} == {1}
    # rollback's totals, from the server's last line: its sessions rolled
    # back (some are still open when the run ends) and what they cost.
    for r in out:
        p = r.params
        if p["server"] != "rollback":
            assert "rollback_method" not in p
            continue
        assert p["rollback_method"] in ("uffd", "softdirty", "fork")
        assert p["rollback_workers"] == lwcserve.CONNECTIONS
        assert 0 < p["rollback_sessions"] <= p["connects"]
        assert p["rollback_us_per_session"] > 0

    doc = _store(tmp_path, out)
    sec = doc["sections"]["lwc-serve"]
    assert [v["proto"] for v in sec["serve"]] == ["http"]
    rows = sec["serve"][0]["rows"]
    assert [(r["server"], r["session"]) for r in rows] == [
        ("shared", 1), ("shared", 8), ("fork", 1), ("fork", 8), ("prefork", 1), ("prefork", 8),
        ("rollback", 1), ("rollback", 8), ("per-connection", 1), ("per-connection", 8)]
    by = {(r.params["server"], r.params["session"]): r.params["throughput_rps"] for r in out}
    for row in rows:
        assert row["throughput_rps"] == pytest.approx(by[(row["server"], row["session"])])
        assert row["saturated"] in ("server", "client", "both", "neither")
        assert row["server_cpu"] is None or row["server_cpu"]["reps"] == 1
    text = console.run_report(doc)
    assert max(map(len, text.splitlines()[:-1])) <= table.WIDTH  # the last: the store path
    assert "lwc-serve: isob serve --session MODE, http" in text and "rollback" in text
    assert "threat model:" in text
    assert "## lwC use cases as servers" in report.render_md(doc, [])
    drawn = [p for p in figures.draw(doc) if p.name == "lwc-serve"]
    assert len(drawn) == 1 and drawn[0].figure is not None


@NEEDS_ISOB
@pytest.mark.skipif(shutil.which("memcached") is None, reason="needs memcached")
def test_lwc_conns_real_run(small_sweep, tmp_path):
    before = set(proc.descendants())
    out = _run("lwc-conns")
    assert set(proc.descendants()) <= before
    assert [r.params["server"] for r in out] == ["per-connection", "direct", "memcached"]
    for r in out:
        assert r.status == "ok", r.reason
        assert r.params["conns"] == 16 and r.params["verified"] == r.params["requests"] > 0
        # Long-lived connections: each opened once, none finished its session.
        assert r.params["connects"] == 16 and r.params["sessions_done"] == 0
    # One process serves every connection of direct and memcached (how many
    # contexts per-connection has when the run ends depends on timing).
    assert out[1].params["server_processes"] == out[2].params["server_processes"] == 1
    doc = _store(tmp_path, out)
    assert [r["server"] for r in doc["sections"]["lwc-serve"]["conns"]] == [
        "per-connection", "direct", "memcached"]


def test_failed_points_are_shown_with_their_reason(tmp_path):
    r = Result.failure("lwc-serve", NO_MECHANISM, "isob loadgen saw 1 error(s), the first: x",
                       params={"server": "fork", "proto": "memcache", "startup_mb": 64,
                               "session": 4})
    doc = _store(tmp_path, [r])
    sec = doc["sections"]["lwc-serve"]
    assert sec["failed"][0]["reason"].startswith("isob loadgen saw 1 error")
    assert "FAILED: server=fork proto=memcache startup_mb=64 session=4" in render.text(sec, doc)


def test_no_section_without_results(tmp_path):
    doc = _store(tmp_path, [])
    assert "lwc-serve" not in doc["sections"]
    assert section.build(runs.RunData(run={}, db="", results=[], configs=[]), {}) is None
    assert ("lwc-serve", section.build) in sections.SECTIONS


def test_saturation_verdicts():
    s = section._saturation
    assert s(0.2, 0.95) == "server" and s(0.95, 0.3) == "client"
    assert s(0.95, 0.95) == "both" and s(0.1, 0.1) == "neither" and s(None, 1.0) == "unknown"


@pytest.mark.parametrize("args, says", [
    (("serve", "-m", "direct", "--session", "bogus"), "--session"),
    (("serve", "-m", "direct", "--startup-mb", "x"), "--startup-mb"),
    (("serve", "-m", "direct", "--preload-keys", "-1"), "--preload-keys"),
])
def test_serve_bad_session_options(isobench, args, says):
    from conftest import assert_one_error_line
    assert says in assert_one_error_line(isobench(*args))


@NEEDS_ISOB
def test_sigterm_mid_run_leaves_no_process(isobench):
    import os
    import signal
    import sqlite3
    import time
    run = isobench.start("run", "lwc-serve", "--seconds", "30", "-q", ISOBENCH_ISOB=str(ISOB))
    # Wait (bounded) until the first point is being measured: a result row
    # never comes before 30 s, so the job row is the sign.
    for _ in range(1200):
        try:
            with sqlite3.connect(isobench.db) as conn:
                if conn.execute("SELECT id FROM jobs").fetchall():
                    break
        except sqlite3.Error:
            pass
        time.sleep(0.05)
    # Most likely into the first point, with a server and loadgen running;
    # the assertion holds whenever the signal lands.
    time.sleep(0.5)
    os.kill(run.pid, signal.SIGTERM)
    report, p = run.finish()
    assert p.returncode == 143, p.stderr
    assert report["left"] == [], report["left"]


def _serve_result(server: str, session: int, latencies_ns: list[int], rep: int,
                  status: str = "ok") -> dict:
    """A stored lwc-serve result whose loadgen figures are those of its samples."""
    from isobench.core import stats
    xs = sorted(latencies_ns)
    p = {"server": server, "proto": "memcache", "startup_mb": 0, "session": session,
         "conns": 16}
    if status == "ok":
        p.update({"requests": len(xs), "verified": len(xs), "throughput_rps": 1000.0 * rep,
                  "samples_every": 1, "client_busy": 0.5, "server_busy": 0.95,
                  "server_processes": 1, "latency_max_us": xs[-1] / 1000.0,
                  **{f"latency_{k}_us": stats.percentile_sorted(xs, q) / 1000.0
                     for k, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99),
                                  ("p999", 0.999))}})
    from synthetic_runs import result
    r = result("lwc-serve", "-", p, rep=rep, samples=latencies_ns, status=status,
               reason=None if status == "ok" else "isob loadgen saw 1 error(s), the first: x")
    r["counter"] = "loadgen"
    return r


def test_tail_quantiles_need_their_samples_and_failed_repetitions_give_bounds(tmp_path):
    import random
    from synthetic_runs import summary_of
    rng = random.Random(5)
    res = []
    for rep in (1, 2, 3):
        # 114 requests: p99 and p99.9 are the maximum; 3,000: p99 is a quantile.
        res.append(_serve_result("fork", 1, [int(rng.expovariate(1 / 50e3)) + 1
                                             for _ in range(114)], rep))
        res.append(_serve_result("shared", 1, [int(rng.expovariate(1 / 50e3)) + 1
                                               for _ in range(3000)], rep))
    res.append(_serve_result("shared", 1, [], 4, status="failed"))
    doc = summary_of(tmp_path, res)
    sec = doc["sections"]["lwc-serve"]
    rows = {r["server"]: r for r in sec["serve"][0]["rows"]}
    fork, shared = rows["fork"], rows["shared"]
    for q in ("p99", "p999"):
        t = fork["latency"][q]
        assert t["max"] and t["n"] == 114 and t["interval"] is None
        assert fork[f"latency_{q}_us"] is None
    # The maximum over repetitions is the median of their maxima.
    maxima = sorted(r["params"]["latency_max_us"] for r in res
                    if r["status"] == "ok" and r["params"]["server"] == "fork")
    assert fork["latency"]["p999"]["value"] == pytest.approx(maxima[1])
    p99 = shared["latency"]["p99"]
    assert p99["enough"] and not p99["max"] and p99["n"] == 3000
    lo, hi = p99["interval"]
    assert lo <= p99["value"] <= hi
    # The median over repetitions of each repetition's own p99.
    mine = sorted(r["params"]["latency_p99_us"] for r in res
                  if r["status"] == "ok" and r["params"]["server"] == "shared")
    assert p99["value"] == pytest.approx(mine[1])
    assert shared["latency"]["p999"]["max"] and shared["latency"]["p999"]["n"] == 3000
    # One of four repetitions of shared failed: bounds, said so.
    assert shared["failed_reps"] == 1 and shared["bound"]["throughput"] == "at most"
    assert fork["failed_reps"] == 0 and fork["bound"] is None
    text = render.text(sec, doc)
    assert max(map(len, text.splitlines())) <= table.WIDTH
    assert "max " in text and "(n=114)" in text and "(n=3,000)" in text
    assert "<= " in text and "BOUND shared L=1: 1 of 4 repetitions failed" in text
    assert "3 (1 failed)" in text


def _points(spec: dict, reps=(1, 2, 3)) -> list[dict]:
    """lwc-serve results: spec maps (server, L) to (throughput, server CPU
    us per request or None, extra params), each repetition 1% off the next."""
    res = []
    for rep in reps:
        for (server, session), (rps, cpu_us, extra) in spec.items():
            r = _serve_result(server, session, [50000 + rep] * 200, rep)
            r["params"]["throughput_rps"] = rps * (1 + 0.01 * (rep - 2))
            if cpu_us is not None:
                r["params"]["server_cpu_us_per_req"] = cpu_us * (1 + 0.01 * (rep - 2))
                # A second's requests: the CPU clock's 10 ms step is 0.1 us of each.
                r["params"]["requests"] = r["params"]["verified"] = 100000
            r["params"].update(extra)
            res.append(r)
    return res


def test_lwc_rollback_claim_is_judged_against_prefork_from_session_length_256(tmp_path):
    # Fig. 2 sets lwC's rollback against Apache prefork, the same workers
    # without it.  rollback at 16k req/s beside prefork's 16.5k reproduces
    # "comparable", however much faster one event loop (shared, 67k) is;
    # L=1 is not judged (the claim is not about it).
    from synthetic_runs import summary_of
    res = _points({("shared", 256): (67000.0, None, {}), ("prefork", 256): (16500.0, None, {}),
                   ("rollback", 256): (16000.0, None, {}), ("shared", 1): (60000.0, None, {}),
                   ("prefork", 1): (15000.0, None, {}), ("rollback", 1): (2000.0, None, {})})
    doc = summary_of(tmp_path, res)
    sec = doc["sections"]["lwc-serve"]
    (v,) = sec["claims"]
    assert v["claim"]["id"] == "lwc-rollback-comparable" and "L=256" in v["what"]
    assert "rollback's speed / prefork's" in v["what"]
    assert v["value"] == pytest.approx(16000 / 16500, rel=1e-3)
    assert v["verdict"] == "reproduces"
    assert "(throughput)" in v["what"]  # no CPU time read: throughput, said so
    text = render.text(sec, doc)
    assert "reproduces" in text and "0.97 [" in text and "Fig. 2" in text
    assert "a clone holds the worker's memory" in " ".join(text.split())


def test_lwc_rollback_claim_reads_server_cpu_per_request_where_there_is_one(tmp_path):
    # prefork's throughput bounded by the client (equal to rollback's),
    # while rollback's server spends 1.6x prefork's CPU per request: the
    # verdict follows the CPU.
    from synthetic_runs import summary_of
    res = _points({("prefork", 256): (100000.0, 4.0, {}),
                   ("rollback", 256): (100000.0, 6.4, {})})
    doc = summary_of(tmp_path, res)
    (v,) = doc["sections"]["lwc-serve"]["claims"]
    assert "server CPU per request" in v["what"]
    assert v["value"] == pytest.approx(4.0 / 6.4, rel=1e-3)
    assert v["verdict"] == "does not reproduce"


def test_lwc_event_claim_sets_a_context_per_connection_against_the_event_loop(tmp_path):
    # The nginx figure: lwc-event (a context per session in the event loop)
    # against nginx (the loop alone): here per-connection against shared.
    from synthetic_runs import summary_of
    # Judged at the session lengths the figure shows (64 to 256) only.
    res = _points({("shared", 256): (67000.0, 4.0, {}),
                   ("per-connection", 256): (20000.0, 16.0, {}),
                   ("per-connection", 16): (5000.0, 40.0, {}),
                   ("shared", 16): (60000.0, 4.5, {}),
                   ("per-connection", 64): (15000.0, 4.2, {}),
                   ("shared", 64): (60000.0, 4.2, {}),
                   ("per-connection", 4096): (30000.0, 8.0, {}),
                   ("shared", 4096): (68000.0, 4.0, {})})
    doc = summary_of(tmp_path, res)
    sec = doc["sections"]["lwc-serve"]
    at64, at256 = sec["claims"]
    assert {at64["claim"]["id"], at256["claim"]["id"]} == {"lwc-event-comparable"}
    assert "L=64: per-connection's speed / shared's" in at64["what"]
    # The claim rests on a switch that is no process switch, which the
    # emulated context lacks: shown, never judged either way.
    assert at64["value"] == pytest.approx(1.0, rel=1e-3) and at64["verdict"] == "not testable here"
    v = at256
    assert "L=256: per-connection's speed / shared's" in v["what"]
    assert v["value"] == pytest.approx(0.25, rel=1e-3) and v["verdict"] == "not testable here"
    text = " ".join(render.text(sec, doc).split())
    assert "Nginx" in text and "isobench's emulation on stock Linux" in text


def test_rollback_against_both_baselines_and_what_a_rollback_costs(tmp_path):
    from synthetic_runs import summary_of
    from isobench.analysis.kit.quantities import published
    rb = {"rollback_method": "uffd", "rollback_us_per_session": 80.0,
          "rollback_pages_per_session": 10.0}
    res = _points({("shared", 256): (90000.0, 4.0, {}), ("prefork", 256): (60000.0, 6.0, {}),
                   ("rollback", 256): (55000.0, 6.6, rb)})
    doc = summary_of(tmp_path, res)
    sec = doc["sections"]["lwc-serve"]
    (c,) = sec["rollback_costs"]
    assert c["session"] == 256 and c["method"] == "uffd"
    assert c["vs_prefork"]["value"] == pytest.approx(1.1, rel=1e-3)
    assert c["vs_shared"]["value"] == pytest.approx(1.65, rel=1e-3)
    assert c["prefork_vs_shared"]["value"] == pytest.approx(1.5, rel=1e-3)
    assert c["vs_prefork"]["low"] < 1.1 < c["vs_prefork"]["high"]
    # Every repetition's rollback took 80 us: no spread, and 80 / 256 per request.
    assert c["rollback_us"]["value"] == pytest.approx(80.0)
    assert c["us_per_request"] == pytest.approx(80.0 / 256)
    fixed, page = (p["value"] for p in published(["lwc-create", "lwc-create-per-dirty-page"]))
    assert (fixed, page) == (87.7, 3.4)
    assert c["pages"] == pytest.approx(10.0) and c["lwc_us"] == pytest.approx(87.7 + 34.0)
    text = render.text(sec, doc)
    assert max(map(len, text.splitlines())) <= table.WIDTH
    assert "memcache, L=256" in text and "1.10 [" in text and "1.65 [" in text
    assert "121.7" in text and "80.0" in text
    md = render.markdown(sec, doc)
    assert "rollback against prefork and shared" in md and "1.50 [" in md


def test_blocked_per_request_and_its_lower_bounds(tmp_path):
    # A server that ends processes as it serves (fork) gives a lower bound,
    # as does one whose processes loadgen saw end; the others their mean.
    from synthetic_runs import summary_of
    res = _points({("prefork", 256): (60000.0, 6.0, {"server_blocked_per_req": 1.0}),
                   ("fork", 256): (30000.0, 9.0, {"server_blocked_per_req": 0.2}),
                   ("shared", 256): (90000.0, 4.0, {"server_blocked_per_req": 0.004,
                                                    "server_processes_ended": 1})})
    doc = summary_of(tmp_path, res)
    sec = doc["sections"]["lwc-serve"]
    rows = {r["server"]: r for v in sec["serve"] for r in v["rows"]}
    assert rows["prefork"]["blocked_per_req"] == {"value": pytest.approx(1.0), "reps": 3,
                                                  "at_least": False}
    assert rows["fork"]["blocked_per_req"]["at_least"] is True
    assert rows["shared"]["blocked_per_req"]["at_least"] is True
    text = render.text(sec, doc)
    assert ">= 0.200" in text and "1.000" in text and "blocked/req" in text
    # In lwc-conns a connection's context lasts the whole run: no bound there.
    conns = []
    for r in _points({("per-connection", 16): (20000.0, 9.0, {"server_blocked_per_req": 0.9})}):
        r["benchmark"] = "lwc-conns"
        del r["params"]["session"]
        r["params"]["conns"] = 16
        conns.append(r)
    (row,) = summary_of(tmp_path / "conns", conns)["sections"]["lwc-serve"]["conns"]
    assert row["blocked_per_req"]["at_least"] is False


def test_curve_rates_and_knee():
    quick = list(lwcserve.curve_rates(True))
    full = list(lwcserve.curve_rates(False))
    assert quick[0] == full[0] == lwcserve.CURVE_START and quick[1] == 2 * quick[0]
    assert len(full) > len(quick) and max(full) <= lwcserve.CURVE_MAX
    knee = lwcserve.past_knee
    assert not knee(1000.0, {"achieved_rps": 950.0, "latency_p99_us": 100.0}, 50.0)
    assert knee(1000.0, {"achieved_rps": 850.0, "latency_p99_us": 100.0}, 50.0)
    assert knee(1000.0, {"achieved_rps": 1000.0, "latency_p99_us": 600.0}, 50.0)
    assert not knee(1000.0, {"achieved_rps": 1000.0, "latency_p99_us": 600.0}, None)


@NEEDS_ISOB
@pytest.mark.skipif(shutil.which("memcached") is None, reason="needs memcached")
def test_lwc_curve_real_run(monkeypatch, tmp_path):
    # Two rates per server, a fraction of a second each.
    monkeypatch.setattr(lwcserve, "CURVE_MAX", lwcserve.CURVE_START * 2)
    before = set(proc.descendants())
    out = _run("lwc-curve")
    assert set(proc.descendants()) <= before
    servers = [r.params["server"] for r in out]
    assert set(servers) == {"shared", "rollback", "memcached"}
    for r in out:
        assert r.status == "ok", r.reason
        p = r.params
        assert p["rate"] in (lwcserve.CURVE_START, 2 * lwcserve.CURVE_START)
        assert p["verified"] == p["requests"] > 0 and p["achieved_rps"] > 0
        assert p["achieved_ratio"] == pytest.approx(p["achieved_rps"] / p["rate"], rel=1e-3)
        assert isinstance(p["knee"], bool) and p["queued"] >= 0 and p["unsent"] >= 0
    # A sweep stops at its knee: nothing after a point marked knee.
    for s in set(servers):
        mine = [r.params for r in out if r.params["server"] == s]
        assert all(not p["knee"] for p in mine[:-1])
    doc = _store(tmp_path, out)
    assert doc["sections"]["lwc-serve"]["curve"]
