"""Server CPU per request (measure/cputime.py, analysis/kit/cpu.py): the /proc
accounting of a process tree, the per-request arithmetic, its interval over
repetitions (shown by simulation to cover the true value as often as it
says), and the kv-server and lwc-serve sections built from synthetic
results whose every figure is known.  Nothing here asserts a speed."""

from __future__ import annotations

import math
import os
import random
import time

import pytest

from serve_helpers import NEEDS_SCHEDSTAT

from isobench.analysis.kit import cpu
from isobench.analysis import summary
from isobench.measure import cputime, kvserver
from isobench.render.families import lwcserve as render_serve
from isobench.render import console

from synthetic_runs import result, summary_of


# ---- measure ----

def test_us_per_request():
    assert cputime.us_per_request(0.5, 100_000) == pytest.approx(5.0)
    assert cputime.us_per_request(0.0, 10) == 0.0
    for cpu_s, n in ((None, 10), (1.0, 0), (1.0, None), (-1.0, 10)):
        assert cputime.us_per_request(cpu_s, n) is None
    assert cputime.busy(0.5, 2.0) == 0.25 and cputime.busy(1.0, 0) is None


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_tree_counts_live_and_reaped_children():
    me = os.getpid()
    before = cputime.tree_cpu(me)
    assert before is not None and before.processes >= 1
    # A child that burns CPU and is reaped: its time moves to our cutime.
    pid = os.fork()
    if pid == 0:
        _burn(0.3)
        os._exit(0)
    os.waitpid(pid, 0)
    # A live child that burns CPU and waits: counted as a process below us.
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        _burn(0.3)
        os.write(w, b"x")
        time.sleep(30)
        os._exit(0)
    os.close(w)
    try:
        assert os.read(r, 1) == b"x"
        after = cputime.tree_cpu(me)
        assert after.processes >= before.processes + 1
        # Both children's 0.6 s, to the clock's 10 ms steps (and our own
        # time only adds).
        assert after.seconds - before.seconds >= 0.6 - 0.05
        # The reaped child's 0.3 s is in clock ticks, kept apart.
        assert after.tick_seconds - before.tick_seconds >= 0.3 - 0.05
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(r)
    assert cputime.tree_cpu(2 ** 22 + 1) is None


@NEEDS_SCHEDSTAT
def test_tree_of_many_short_processes_keeps_their_time():
    # 20 live children of 6 ms of CPU each: 0 clock ticks each, so a sum of
    # /proc/PID/stat ticks would lose them; the scheduler's count keeps them.
    me = os.getpid()
    before = cputime.tree_cpu(me)
    kids, reads = [], []
    try:
        for _ in range(20):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                t = time.process_time()
                while time.process_time() - t < 0.006:
                    pass
                os.write(w, b"x")
                time.sleep(30)
                os._exit(0)
            os.close(w)
            kids.append(pid)
            reads.append(r)
        assert all(os.read(r, 1) == b"x" for r in reads)
        after = cputime.tree_cpu(me)
        assert after.processes >= before.processes + 20
        assert after.seconds - before.seconds >= 20 * 0.006
        # The scheduler counted them to the ns: none of their time is in
        # ticks (this test process's own, with threads that ended, may move
        # by its tick).
        assert after.tick_seconds - before.tick_seconds < 20 * 0.006
    finally:
        for pid in kids:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        for r in reads:
            os.close(r)


def test_kvserver_cpu_params():
    a, b = cputime.TreeCpu(1.0, 2, 0.25), cputime.TreeCpu(1.5, 3, 0.25)
    p = kvserver.cpu_params(a, b, 0.25, 2.0, 100_000)
    assert p["server_cpu_s"] == 0.5 and p["server_cpu_us_per_req"] == 5.0
    assert p["server_cpu_tick_s"] == 0.0
    assert p["client_cpu_us_per_req"] == 2.5 and p["server_busy"] == 0.25
    assert p["client_busy"] == 0.125 and p["server_processes"] == 3
    none = kvserver.cpu_params(None, b, None, 2.0, 100)
    assert none["server_cpu_us_per_req"] is None and none["client_cpu_us_per_req"] is None


# ---- analysis ----

def test_per_request_and_ratio():
    c = cpu.per_request([4.0, 5.0, 6.0, None, 0])
    assert c["reps"] == 3 and c["value"] == pytest.approx((4 * 5 * 6) ** (1 / 3))
    assert c["low"] < c["value"] < c["high"]
    one = cpu.per_request([5.0])
    assert one["low"] is None and "no interval" in cpu.text(one)
    assert cpu.per_request([None]) is None and cpu.text(None) == "-"
    r = cpu.ratio([10.0, 11.0, 12.0], [5.0, 5.5, 6.0])
    assert r["value"] == pytest.approx(2.0) and r["low"] < 2.0 < r["high"]
    assert cpu.ratio([1.0], []) is None
    assert cpu.higher_side([3.0], [2.0]) == "client" and cpu.higher_side([1.0], [2.0]) == "server"
    # The clock's step widens the interval.
    assert cpu.resolution([100_000, 50_000]) == pytest.approx(0.01 * 1e6 / 50_000)
    wide = cpu.per_request([5.0, 5.0, 5.0], step=0.5)
    assert wide["low"] < 5.0 < wide["high"]
    # Identical readings on a stepped clock are not exact: the ratio's
    # interval keeps both sides' steps.
    same = cpu.ratio([5.0, 5.0, 5.0], [2.5, 2.5, 2.5], 0.5, 0.5)
    assert same["low"] < 2.0 < same["high"]
    exact = cpu.ratio([5.0, 5.0, 5.0], [2.5, 2.5, 2.5])
    assert exact["low"] == exact["high"] == pytest.approx(2.0)


def test_the_clock_step_widens_only_what_was_counted_in_ticks():
    # Only the repetitions whose time was partly in ticks move by a step,
    # so the step is that of the fewest requests among them.
    assert cpu.resolution([100_000, 50_000], ticked=[True, False]) == \
        pytest.approx(0.01 * 1e6 / 100_000)
    assert cpu.resolution([100_000, 50_000], ticked=[False, False]) == 0.0
    assert cpu.counted_in_ticks({"server_cpu_tick_s": 0.0}) is False
    assert cpu.counted_in_ticks({"server_cpu_tick_s": 0.02}) is True
    assert cpu.counted_in_ticks({"server_cpu_clock": "schedstat"}) is False
    assert cpu.counted_in_ticks({"server_cpu_clock": "ticks"}) is True
    assert cpu.counted_in_ticks({"server_cpu_clock": "schedstat"}, ends_processes=True) is True
    assert cpu.counted_in_ticks({"server_cpu_clock": "schedstat",
                                 "server_processes_ended": 3}) is True
    # A record from before the split says neither: widened, as it was.
    assert cpu.counted_in_ticks({}) is True


def test_interval_covers_as_often_as_it_says():
    """By simulation: five repetitions of a log-normal CPU per request around
    a true geometric mean of 7 us; the 95% interval must hold 7 in about 95%
    of 2,000 runs (binomial sd ~0.5%: 93.5% to 96.5% is about 3 sd)."""
    rng = random.Random(26)
    true, hits, n = 7.0, 0, 2000
    for _ in range(n):
        xs = [true * math.exp(rng.gauss(0, 0.1)) for _ in range(5)]
        c = cpu.per_request(xs)
        hits += c["low"] <= true <= c["high"]
    assert 0.935 <= hits / n <= 0.965


# ---- sections ----

def _kv(mech: str, us: float, rep: int, **extra) -> dict:
    p = {"server": "memcached" if mech == "memcached" else "isob", "client": "memcaslap",
         "connections": 16, "seconds": 3, "ops_per_s": 50000.0, "ops": 150_000,
         "latency_avg_ns": 300_000.0, "latency_events": 150_000,
         "server_cpu_us_per_req": us * (1 + 0.01 * rep), "client_cpu_us_per_req": 2 * us,
         "server_busy": 0.5, "client_busy": 0.95, **extra}
    return result("kv-server", mech, p, value=300_000, rep=rep)


def test_kv_server_cpu_is_widened_only_by_ticks_it_holds(tmp_path):
    # 1,500 requests: one 10 ms tick is 6.7 us per request, wider than the
    # spread of the values; a server the scheduler counted exactly keeps
    # its plain interval, one with reaped children's ticks is widened.
    res = [_kv(m, 8.0, rep, ops=1_500, server_cpu_tick_s=tick)
           for rep in (1, 2, 3) for m, tick in (("direct", 0.0), ("wasm", 0.02))]
    doc = summary_of(tmp_path, res)
    by = {c["mechanism"]: c["kv_server"] for c in doc["configs"]
          if c["benchmark"] == "kv-server"}
    plain = cpu.per_request([8.0 * (1 + 0.01 * rep) for rep in (1, 2, 3)])
    exact, ticked = by["direct"]["server_cpu"], by["wasm"]["server_cpu"]
    assert (exact["low"], exact["high"]) == pytest.approx((plain["low"], plain["high"]))
    assert exact["step"] == 0.0
    assert ticked["step"] == pytest.approx(0.01 * 1e6 / 1_500)
    assert ticked["low"] < exact["low"] and ticked["high"] > exact["high"]
    # The client's CPU is memcaslap's rusage, in us: never widened.
    assert by["wasm"]["client_cpu"]["step"] == 0.0


def test_kv_server_table_leads_with_cpu_per_request(tmp_path):
    res = [_kv(m, us, rep) for rep in (1, 2, 3)
           for m, us in (("memcached", 4.0), ("direct", 8.0), ("wasm", 12.0))]
    doc = summary_of(tmp_path, res)
    by = {c["mechanism"]: c["kv_server"] for c in doc["configs"]
          if c["benchmark"] == "kv-server"}
    d = by["direct"]
    assert d["server_cpu"]["value"] == pytest.approx(8.0 * (1.01 * 1.02 * 1.03) ** (1 / 3))
    assert d["server_cpu"]["low"] < d["server_cpu"]["value"] < d["server_cpu"]["high"]
    assert d["server_cpu_vs_reference"]["value"] == pytest.approx(2.0)
    assert d["client_costs_more"] and d["saturated"] == "client"
    # memcached is the reference: no ratio to itself, printed as "-".
    assert by["memcached"]["server_cpu_vs_reference"] is None
    assert by["memcached"]["throughput_vs_reference"] is None
    text = console.kv_server_table(doc)
    mc = next(ln for ln in text.splitlines() if ln.startswith("memcached"))
    assert mc.split()[:2] != ["memcached", "1.00"] and " - " in mc
    assert "server CPU" in text and "x memcached" in text and "(higher)" in text
    assert text.index("server CPU") < text.index("ops/s")
    assert f"{d['server_cpu']['value']:.2f} [{d['server_cpu']['low']:.2f}.." in text


def _serve(server: str, session: int, us: float, rep: int) -> dict:
    p = {"server": server, "proto": "memcache", "startup_mb": 0, "session": session,
         "conns": 16, "requests": 1000, "verified": 100_000, "throughput_rps": 50_000.0,
         "samples_every": 100, "client_busy": 0.9, "server_busy": 0.6, "server_processes": 1,
         "latency_max_us": 900.0, "latency_p50_us": 100.0, "latency_p99_us": 500.0,
         "server_cpu_us_per_req": us * (1 + 0.02 * rep), "client_cpu_us_per_req": us / 2}
    r = result("lwc-serve", "-", p, rep=rep, samples=[100_000 + i for i in range(1000)])
    r["counter"] = "loadgen"
    return r


def test_lwc_serve_cpu_is_widened_only_where_ticks_count(tmp_path):
    # loadgen's clock "schedstat": every thread by the scheduler's count;
    # a server that forks per session has its reaped children's in ticks.
    res = []
    for rep in (1, 2, 3):
        for server in ("shared", "fork"):
            r = _serve(server, 16, 6.0, rep)
            r["params"]["verified"] = 1_500
            r["params"]["server_cpu_clock"] = "schedstat"
            res.append(r)
    doc = summary_of(tmp_path, res)
    rows = {r["server"]: r for r in doc["sections"]["lwc-serve"]["serve"][0]["rows"]}
    assert rows["shared"]["server_cpu"]["step"] == 0.0
    assert rows["fork"]["server_cpu"]["step"] == pytest.approx(0.01 * 1e6 / 1_500)
    assert rows["shared"]["client_cpu"]["step"] == 0.0


def test_lwc_serve_rows_carry_cpu_per_request_beside_memcached(tmp_path):
    res = [_serve(s, 16, us, rep) for rep in (1, 2, 3)
           for s, us in (("shared", 6.0), ("rollback", 9.0), ("memcached", 3.0))]
    doc = summary_of(tmp_path, res)
    sec = doc["sections"]["lwc-serve"]
    rows = {r["server"]: r for r in sec["serve"][0]["rows"]}
    assert [r["server"] for r in sec["serve"][0]["rows"]] == ["shared", "rollback", "memcached"]
    assert rows["rollback"]["server_cpu_vs_memcached"]["value"] == pytest.approx(3.0)
    assert rows["memcached"]["server_cpu_vs_memcached"] is None
    assert rows["shared"]["server_cpu"]["reps"] == 3 and not rows["shared"]["client_costs_more"]
    text = render_serve.text(sec, doc)
    assert "server CPU [us/req]" in text and cpu.text(rows["shared"]["server_cpu"]) in text


def _curve(server: str, rate: float, p99_us: float, achieved: float, rep: int,
           knee: bool = False) -> dict:
    xs = [int(50_000 + 10 * i) for i in range(3000)]
    p = {"server": server, "proto": "memcache", "session": 256, "conns": 32,
         "arrival": "poisson", "rate": rate, "requests": 3000, "verified": 3000,
         "throughput_rps": achieved, "achieved_rps": achieved,
         "achieved_ratio": achieved / rate, "knee": knee, "samples_every": 1,
         "client_busy": 0.3, "server_busy": 0.3, "server_processes": 1,
         "latency_p50_us": 60.0, "latency_p99_us": p99_us, "latency_max_us": 2 * p99_us,
         "server_cpu_us_per_req": 5.0 + rep * 0.1, "client_cpu_us_per_req": 2.0,
         "late": 30, "queued": 0, "unsent": 0}
    r = result("lwc-curve", "-", p, rep=rep, samples=xs)
    r["counter"] = "loadgen"
    return r


def test_curve_rows_and_plot(tmp_path):
    res = []
    for rep in (1, 2, 3):
        for server in ("shared", "rollback", "memcached"):
            res += [_curve(server, 2000.0, 100.0, 2000.0, rep),
                    _curve(server, 4000.0, 2000.0, 3000.0, rep, knee=True)]
    doc = summary_of(tmp_path, res)
    sec = doc["sections"]["lwc-serve"]
    curve = sec["curve"]
    assert [(r["server"], r["offered_rps"]) for r in curve] == [
        ("shared", 2000.0), ("shared", 4000.0), ("rollback", 2000.0), ("rollback", 4000.0),
        ("memcached", 2000.0), ("memcached", 4000.0)]
    knee = curve[1]
    assert knee["knee_reps"] == 3 and knee["achieved_ratio"] == pytest.approx(0.75)
    assert knee["late_share"] == pytest.approx(0.01)
    text = render_serve.text(sec, doc)
    assert "latency against offered load" in text and "past (3 of 3 reps)" in text
    assert "1.0%" in text and "late sends" in text
    pytest.importorskip("matplotlib")
    plots = render_serve.plots(sec, doc)
    names = [p.name for p in plots]
    assert "lwc-curve" in names
    fig = plots[names.index("lwc-curve")].figure
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["shared beside memcached", "rollback beside memcached"]
    # memcached's curve is drawn in each panel.
    assert all(any("memcached" in l.get_label() for l in ax.get_lines()) for ax in fig.axes)
