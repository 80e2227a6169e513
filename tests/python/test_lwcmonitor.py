"""lwc-serve --monitor and --doc-bytes (measure/lwcmonitor.py,
analysis/families/lwcmonitor.py): the points, real servers under each reference
monitor with the monitor's count of checked calls, the document sizes in
lwc-serve's own tables, the lwc-monitor section and its plot, and the
options refused where they do not belong.

Nothing here asserts a speed or a ratio: only that every reply was
verified, that the monitor checked two calls per request it served (none:
none), and that the sections show what the results hold.  The real runs
use one or two session lengths of a fraction of a second each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from isobench.analysis.kit import claims, reference, runs
from isobench.analysis.families import lwcmonitor as section
from isobench.analysis import sections, summary
from isobench.core import stats
from isobench.measure import lwcmonitor, lwcserve, proc
from isobench.measure.driver import _catalog_from
from isobench.core.records import NO_MECHANISM, Result
from isobench.render.families import lwcmonitor as render
from isobench.render.kit import table
from isobench.render import report
from isobench.store import Store
from isobench.render import console
from isobench.render import figures

HERE = Path(__file__).resolve().parent
ISOB = HERE.parents[1] / "build" / "isob"

NEEDS_ISOB = pytest.mark.skipif(not ISOB.is_file(), reason="needs build/isob (make build)")


def test_points_and_options():
    pts = list(lwcmonitor.points(True, ["none", "lwc"], [45, 900]))
    assert {(s, m) for s, m, _, _ in pts} == {("shared", "none"), ("shared", "lwc")}
    assert {d for _, _, d, _ in pts} == {45, 900}
    assert {length for *_, length in pts} == set(lwcserve.QUICK_LENGTHS)
    # Without --monitor: lwc-serve's session modes, the document from the store.
    pts = list(lwcmonitor.points(False, [], [900]))
    assert {m for _, m, _, _ in pts} == {None}
    assert {s for s, *_ in pts} == set(lwcserve.MODES)
    assert {length for *_, length in pts} == set(lwcserve.LENGTHS)
    own = lwcmonitor.parse(("--monitor", "none,procsep", "--doc-bytes", "900"))
    assert own == {"--monitor": ("none", "procsep"), "--doc-bytes": ("900",)}
    assert lwcmonitor.wanted(own) and not lwcmonitor.wanted({})
    b = _catalog_from({"mechanisms": [], "benchmarks": []}).benchmark("lwc-serve")
    assert b.option("--monitor").choices() == lwcmonitor.MONITORS
    assert b.option("--doc-bytes").choices() == tuple(map(str, lwcmonitor.DOC_BYTES))


def test_monitor_counts_parsed():
    out = ("isob serve: listening on 127.0.0.1:1 (mechanism direct), session shared, http, "
           "monitor lwc\nisob serve: monitor lwc: 42 system calls checked, 1 refused\n")
    assert lwcmonitor.monitor_counts(out) == (42, 1)
    assert lwcmonitor.monitor_counts("isob serve: Terminated, stopping\n") is None


def _store(tmp_path: Path, results: list[Result]) -> dict:
    with Store.open(tmp_path / "r.sqlite", create=True) as s:
        run_id = s.begin_run(["isobench", "run", "lwc-serve"], {})
        for r in results:
            s.add_result(run_id, r)
        s.finish_run(run_id, "ok")
        return summary.build(runs.load_run(s, run_id))


def _run(options: dict) -> list[Result]:
    seen = []
    out = lwcmonitor.run(str(ISOB), True, 0.3, options, lambda r, a, b: seen.append(r))
    assert seen == out
    return out


@NEEDS_ISOB
def test_every_monitor_real_run(monkeypatch, tmp_path):
    monkeypatch.setattr(lwcmonitor, "QUICK_LENGTHS", (4,))
    before = set(proc.descendants())
    out = _run({"--monitor": lwcmonitor.MONITORS, "--doc-bytes": ("900",)})
    assert set(proc.descendants()) <= before, "a server or loadgen outlived its point"
    assert [r.params["monitor"] for r in out] == list(lwcmonitor.MONITORS)
    for r in out:
        assert r.status == "ok", r.reason
        p = r.params
        assert p["server"] == "shared" and p["proto"] == "http" and p["doc_bytes"] == 900
        assert p["verified"] == p["requests"] > 0
        assert p["denied"] == 0
        if p["monitor"] == "none":
            assert p["monitored_calls"] == 0
        else:
            # openat and pread64 of every GET served: loadgen's count, and
            # at most one request per connection in flight when it stopped.
            assert 2 * p["requests"] <= p["monitored_calls"] <= 2 * (p["requests"] + p["conns"])
        # lwc serves in a context, a second process; procsep has its broker
        # and serves in a confined child (the third).
        assert p["server_processes"] == {"none": 1, "inline": 1, "lwc": 2,
                                         "procsep": 3}[p["monitor"]]

    doc = _store(tmp_path, out)
    assert "lwc-serve" not in doc["sections"]
    sec = doc["sections"]["lwc-monitor"]
    assert [t["doc_bytes"] for t in sec["tables"]] == [900]
    rows = sec["tables"][0]["rows"]
    assert [r["monitor"] for r in rows] == list(lwcmonitor.MONITORS)
    by = {r.params["monitor"]: r.params for r in out}
    for row in rows:
        assert row["throughput_rps"] == pytest.approx(by[row["monitor"]]["throughput_rps"])
        want = by[row["monitor"]]["monitored_calls"] / by[row["monitor"]]["requests"]
        assert row["checked_per_request"] == pytest.approx(want)
        if row["monitor"] != "none":
            assert row["vs_none"] == pytest.approx(
                by[row["monitor"]]["throughput_rps"] / by["none"]["throughput_rps"])
    [claim] = sec["claims"]
    assert claim["value"] == pytest.approx(by["lwc"]["throughput_rps"]
                                           / by["procsep"]["throughput_rps"])
    # --session shared is not lwC's Apache prefork: shown, not judged.
    assert claim["verdict"] == claims.OTHER_CONFIG
    assert "server=shared, the claim's prefork" in claim["why"]
    text = console.run_report(doc)
    assert max(map(len, text.splitlines()[:-1])) <= table.WIDTH
    assert "900-byte document read per GET" in text and "claim: lwC" in text
    assert "## lwC's reference monitors in a server" in report.render_md(doc, [])
    drawn = [p for p in figures.draw(doc) if p.name == "lwc-monitor"]
    assert len(drawn) == 1 and drawn[0].figure is not None


@NEEDS_ISOB
def test_doc_bytes_without_monitor_real_run(monkeypatch, tmp_path):
    monkeypatch.setattr(lwcmonitor, "QUICK_LENGTHS", (4,))
    monkeypatch.setattr(lwcmonitor, "MODES", ("shared", "rollback"))
    out = _run({"--doc-bytes": ("45", "900")})
    assert [(r.params["doc_bytes"], r.params["server"]) for r in out] == [
        (45, "shared"), (45, "rollback"), (900, "shared"), (900, "rollback")]
    for r in out:
        assert r.status == "ok", r.reason
        assert "monitor" not in r.params and r.params["verified"] == r.params["requests"] > 0
    doc = _store(tmp_path, out)
    assert "lwc-monitor" not in doc["sections"]
    serve = doc["sections"]["lwc-serve"]["serve"]
    assert [v["doc_bytes"] for v in serve] == [45, 900]
    assert "http, 16 connections, sessions of L requests, 900-byte document" in " ".join(
        console.run_report(doc).split())


def test_failed_monitor_point_is_shown(tmp_path):
    r = Result.failure("lwc-serve", NO_MECHANISM, "the server did not say what its monitor "
                       "checked: x", params={"server": "shared", "proto": "http",
                                             "monitor": "lwc", "doc_bytes": 45, "session": 4})
    doc = _store(tmp_path, [r])
    assert "lwc-serve" not in doc["sections"]
    sec = doc["sections"]["lwc-monitor"]
    assert ("FAILED: monitor=lwc doc_bytes=45 session=4: the server did not say"
            in render.text(sec, doc))
    assert ("lwc-monitor", section.build) in sections.SECTIONS


@pytest.mark.parametrize("args, says", [
    (("run", "lwc-serve", "--monitor", "seccomp"), "seccomp"),
    (("run", "lwc-serve", "--doc-bytes", "100"), "100"),
    (("run", "switch", "--monitor", "lwc"), "--monitor"),
    (("run", "switch", "--tls"), "--tls"),
])
def test_bad_options_refused(isobench, args, says):
    from conftest import assert_one_error_line
    assert says in assert_one_error_line(isobench(*args))


@NEEDS_ISOB
def test_cli_run_with_monitor(isobench):
    """The command the docs give, against the real driver, one length."""
    p = isobench("run", "lwc-serve", "--quick", "--monitor", "lwc", "--doc-bytes", "900",
                 "--seconds", "0.2", "--json", ISOBENCH_ISOB=str(ISOB))
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    rows = doc["summary"]["sections"]["lwc-monitor"]["tables"][0]["rows"]
    assert {r["monitor"] for r in rows} == {"lwc"}
    assert {r["session"] for r in rows} == set(lwcserve.QUICK_LENGTHS)
    assert all(r["checked_per_request"] >= 2 for r in rows)


@NEEDS_ISOB
def test_tls_real_run(monkeypatch, tmp_path):
    monkeypatch.setattr(lwcmonitor, "QUICK_HANDSHAKES", 20)
    monkeypatch.setattr(lwcmonitor, "QUICK_LENGTHS", (4,))
    before = set(proc.descendants())
    out = _run({"--tls": ("on",)})
    assert set(proc.descendants()) <= before, "a server or tlsload outlived its point"
    out, swept = out[:2], out[2:]
    assert [r.params["tls_key"] for r in out] == list(lwcmonitor.TLS_KEYS)
    # The HTTPS session-length points: every request verified, sessions of 4.
    assert [(r.params["tls_key"], r.params["session"]) for r in swept] == [
        ("process", 4), ("lwc", 4)]
    for r in swept:
        assert r.status == "ok", r.reason
        p = r.params
        assert p["requests"] > 0 and p["throughput_rps"] > 0 and p["conns"] == 16
        assert p["sessions_done"] * 4 <= p["requests"]
    for r in out:
        assert r.status == "ok", r.reason
        p = r.params
        assert p["proto"] == "https" and p["handshakes"] == p["handshakes_done"] == 20
        assert len(r.samples) == 20 and r.counter == "tlsload"
        assert p["handshake_seconds"] > 0 and p["server_cpu_s"] is not None
    doc = _store(tmp_path, out + swept)
    assert "lwc-serve" not in doc["sections"] and "lwc-monitor" not in doc["sections"]
    sec = doc["sections"]["lwc-tls"]
    assert [(r["tls_key"], r["session"]) for r in sec["sweep"]] == [("process", 4), ("lwc", 4)]
    assert sec["sweep"][1]["vs_process"] == pytest.approx(
        swept[1].params["throughput_rps"] / swept[0].params["throughput_rps"])
    rows = sec["tables"][0]["rows"]
    assert [r["tls_key"] for r in rows] == ["process", "lwc"]
    by = {r.params["tls_key"]: r.params for r in out}
    for row in rows:
        assert row["seconds"] == pytest.approx(by[row["tls_key"]]["handshake_seconds"])
        assert row["per_10000_s"] == pytest.approx(row["seconds"] * 10_000 / 20)
        assert row["published_s"] == {"process": 99.7, "lwc": 100.4}[row["tls_key"]]
    [claim] = sec["claims"]
    assert claim["claim"]["id"] == "lwc-tls-free" and claim["verdict"] == claims.NO_INTERVAL
    assert claim["value"] == pytest.approx(by["lwc"]["handshake_seconds"]
                                           / by["process"]["handshake_seconds"])
    text = console.run_report(doc)
    assert max(map(len, text.splitlines()[:-1])) <= table.WIDTH
    assert "claim: lwC: 10,000 SSL handshakes took 99.7 s" in " ".join(text.split())
    assert "## lwC's isolated OpenSSL key" in report.render_md(doc, [])
    assert [p.name for p in figures.draw(doc) if p.name == "lwc-tls"] == ["lwc-tls"]


def test_tls_failure_is_shown(tmp_path):
    r = Result.failure("lwc-serve", NO_MECHANISM, "isob tlsload saw 1 error(s), the first: x",
                       params={"server": "shared", "proto": "https", "tls_key": "lwc",
                               "doc_bytes": 45, "handshakes": 10})
    doc = _store(tmp_path, [r])
    assert "lwc-serve" not in doc["sections"]
    sec = doc["sections"]["lwc-tls"]
    assert "FAILED: tls_key=lwc doc_bytes=45: isob tlsload saw 1 error" in render.tls_text(sec, doc)


@NEEDS_ISOB
def test_cli_run_with_tls(isobench):
    p = isobench("run", "lwc-serve", "--quick", "--tls", "--seconds", "0.2", "--json",
                 ISOBENCH_ISOB=str(ISOB))
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    rows = doc["summary"]["sections"]["lwc-tls"]["tables"][0]["rows"]
    assert [(r["tls_key"], r["handshakes"]) for r in rows] == [
        ("process", lwcmonitor.QUICK_HANDSHAKES), ("lwc", lwcmonitor.QUICK_HANDSHAKES)]
    sweep = doc["summary"]["sections"]["lwc-tls"]["sweep"]
    assert {r["session"] for r in sweep} == set(lwcserve.QUICK_LENGTHS)


def _ok(params: dict, counter: str) -> Result:
    return Result("lwc-serve", NO_MECHANISM, params, "ok", unit="ns", counter=counter,
                  samples=[1000, 1100])


def _monitor_results(lwc_over_procsep: float) -> list[Result]:
    """Three repetitions a side, 1% apart, lwc's throughput the given
    multiple of procsep's."""
    return [_ok({"server": "prefork", "proto": "http", "monitor": mon, "doc_bytes": 45,
                 "session": 4, "throughput_rps": t * f, "requests": 100,
                 "monitored_calls": 200}, "loadgen")
            for mon, t in (("procsep", 1000.0), ("lwc", 1000.0 * lwc_over_procsep))
            for f in (0.99, 1.0, 1.01)]


def _tls_results(lwc_over_process: float, server: str = "shared",
                 key_type: str = "rsa2048") -> list[Result]:
    kt = {} if key_type is None else {"tls_key_type": key_type}  # None: before --tls-key
    return [_ok({"server": server, "proto": "https", "tls_key": key, "doc_bytes": 45, **kt,
                 "handshakes": 100, "handshake_seconds": s * f}, "tlsload")
            for key, s in (("process", 10.0), ("lwc", 10.0 * lwc_over_process))
            for f in (0.99, 1.0, 1.01)]


# lwc-mon's speed rests on a trap that is no process switch, which the
# emulation lacks: whatever the ratio, it is shown and not judged.
@pytest.mark.parametrize("factor, verdict", [(2.0, claims.NOT_TESTABLE),
                                             (1.0, claims.NOT_TESTABLE),
                                             (1.5, claims.NOT_TESTABLE)])
def test_monitor_claim_judged_by_the_claims_rule(tmp_path, factor, verdict):
    doc = _store(tmp_path, _monitor_results(factor))
    sec = doc["sections"]["lwc-monitor"]
    [v] = sec["claims"]
    assert v["claim"]["id"] == section.MONITOR_CLAIM and v["verdict"] == verdict
    assert v["value"] == pytest.approx(factor)
    # The one ratio interval every claim uses, on the same values.
    iv = stats.ratio_interval([1000.0 * factor * f for f in (0.99, 1.0, 1.01)],
                              [1000.0 * f for f in (0.99, 1.0, 1.01)])
    assert (v["interval"]["low"], v["interval"]["high"]) == pytest.approx((iv.low, iv.high))
    text = " ".join(render.text(sec, doc).split())
    assert f"prefork, 45 B, L=4: lwc / procsep {factor:.2f} [" in text and verdict in text
    assert "isobench's emulation on stock Linux" in text
    assert f"{verdict}: the claim rests on" in render.markdown(sec, doc)
    # Each monitor's row says what it stops and what it does not, once per
    # monitor under the tables.
    for row in sec["tables"][0]["rows"]:
        assert row["isolation"] == section.ISOLATION[row["monitor"]]
    for mon in ("procsep", "lwc"):
        line = " ".join(f"{mon}: {section.ISOLATION[mon]}".split())
        assert text.count(line) == 1 and "does not stop" in line


@pytest.mark.parametrize("factor, verdict", [(1.007, claims.REPRODUCES),
                                             (1.5, claims.DOES_NOT)])
def test_tls_claim_judged_by_the_claims_rule(tmp_path, factor, verdict):
    doc = _store(tmp_path, _tls_results(factor))
    sec = doc["sections"]["lwc-tls"]
    [v] = sec["claims"]
    assert v["claim"]["id"] == section.TLS_CLAIM_ID and v["verdict"] == verdict
    assert v["value"] == pytest.approx(factor)
    text = " ".join(render.tls_text(sec, doc).split())
    assert "shared, rsa2048, 45 B: lwc / process 1." in text and verdict in text
    assert "Judged only on lwC's nginx" in text
    assert f"{verdict}: 95% interval" in render.tls_markdown(sec, doc)


def test_tls_published_seconds_come_from_the_reference_rows(tmp_path, monkeypatch):
    refs = {r.id: r for r in reference.load()}
    assert refs["lwc-tls-native"].text() == "99.7" and refs["lwc-tls-key-in-lwc"].text() == "100.4"
    doc = _store(tmp_path, _tls_results(1.0))
    sec = doc["sections"]["lwc-tls"]
    assert [r["published_s"] for r in sec["tables"][0]["rows"]] == [99.7, 100.4]
    assert "took 99.7 s with native nginx and 100.4 s" in sec["claim"] and "+0.7%" in sec["claim"]
    # Change the row: the section follows it.
    import dataclasses
    changed = [dataclasses.replace(r, value=120.0, value_text="120.0")
               if r.id == "lwc-tls-key-in-lwc" else r for r in refs.values()]
    monkeypatch.setattr(reference, "load", lambda *a, **k: changed)
    (tmp_path / "b").mkdir()
    sec = _store(tmp_path / "b", _tls_results(1.0))["sections"]["lwc-tls"]
    assert [r["published_s"] for r in sec["tables"][0]["rows"]] == [99.7, 120.0]
    assert "and 120.0 s with the private-key code" in sec["claim"] and "+20.4%" in sec["claim"]


def test_lwcs_published_seconds_stand_beside_a_full_runs_seconds(tmp_path):
    """reference.csv's lwc-tls rows map onto the points of 10,000
    handshakes: the published table shows the run's seconds in s."""
    import dataclasses
    full = [dataclasses.replace(r, params={**r.params, "handshakes": 10_000})
            for r in _tls_results(1.0)]
    doc = _store(tmp_path, full)
    pub = {p["id"]: p for p in doc["published"]}
    for rid, key in (("lwc-tls-native", "process"), ("lwc-tls-key-in-lwc", "lwc")):
        [local] = pub[rid]["local"]
        assert local["params"]["tls_key"] == key
        assert (local["value"], local["unit"]) == (pytest.approx(10.0, rel=1e-3), "s")
    rows = [r for r in report.published_rows(doc, False) if r[2].startswith("99.7 s")]
    assert len(rows) == 1 and "-: 10.0 s" in rows[0][5]
    # A --quick run (1,000 handshakes) stands beside nothing.
    (tmp_path / "q").mkdir()
    quick = _store(tmp_path / "q", _tls_results(1.0))
    assert not any(p["local"] for p in quick["published"] if p["id"].startswith("lwc-tls"))


# A claim names the configuration it is about (lwC's nginx: one event loop,
# an RSA key) and refuses to judge another: the ratio shown, the difference
# named, no verdict on the claim.  A variant that judged every row would
# call these "reproduces" (1.007 lies within 5%).
@pytest.mark.parametrize("server, key_type, names", [
    ("rollback", "rsa2048", "server=rollback, the claim's shared"),
    ("shared", "ecdsa-p256", "tls_key_type=ecdsa-p256, the claim's rsa2048"),
    ("shared", None, "tls_key_type=None, the claim's rsa2048")])
def test_a_claim_refuses_to_judge_another_configuration(tmp_path, server, key_type, names):
    doc = _store(tmp_path, _tls_results(1.007, server, key_type))
    sec = doc["sections"]["lwc-tls"]
    [v] = sec["claims"]
    assert v["claim"]["id"] == section.TLS_CLAIM_ID
    assert v["verdict"] == claims.OTHER_CONFIG and names in v["why"]
    assert v["value"] == pytest.approx(1.007) and v["interval"] is not None
    assert v["what"].startswith(f"{server}, ")
    text = " ".join(render.tls_text(sec, doc).split())
    assert "not judged (another configuration)" in text and "reproduces" not in text
    assert names in text


@NEEDS_ISOB
def test_monitor_under_prefork_real_run(monkeypatch, tmp_path):
    """lwC's Apache: prefork workers, each with its monitor."""
    monkeypatch.setattr(lwcmonitor, "QUICK_LENGTHS", (4,))
    before = set(proc.descendants())
    out = _run({"--monitor": ("none", "procsep", "lwc"), "--session": ("prefork",)})
    assert set(proc.descendants()) <= before, "a server or loadgen outlived its point"
    for r in out:
        assert r.status == "ok", r.reason
        p = r.params
        assert p["server"] == "prefork" and p["verified"] == p["requests"] > 0
        if p["monitor"] != "none":
            assert 2 * p["requests"] <= p["monitored_calls"] <= 2 * (p["requests"] + p["conns"])
    doc = _store(tmp_path, out)
    [claim] = doc["sections"]["lwc-monitor"]["claims"]
    # The claim's configuration; its property (lwC's switch) the emulation lacks.
    assert claim["verdict"] == claims.NOT_TESTABLE and claim["what"].startswith("prefork, ")


@NEEDS_ISOB
def test_tls_under_rollback_real_run(monkeypatch):
    """Fig. 2's HTTPS panel: rollback workers, the key in each or in a context of each."""
    monkeypatch.setattr(lwcmonitor, "QUICK_HANDSHAKES", 20)
    monkeypatch.setattr(lwcmonitor, "QUICK_LENGTHS", (4,))
    before = set(proc.descendants())
    out = _run({"--tls": ("on",), "--session": ("rollback",), "--tls-key": ("ecdsa-p256",)})
    assert set(proc.descendants()) <= before, "a server or tlsload outlived its point"
    assert [(r.params["tls_key"], r.params.get("session")) for r in out] == [
        ("process", None), ("lwc", None), ("process", 4), ("lwc", 4)]
    for r in out:
        assert r.status == "ok", r.reason
        assert r.params["server"] == "rollback" and r.params["tls_key_type"] == "ecdsa-p256"


def test_options_that_cannot_run_together_are_refused():
    assert "needs --tls" in lwcmonitor.check({"--tls-key": ("rsa2048",)})
    assert "per-connection" in lwcmonitor.check({"--tls": ("on",),
                                                 "--session": ("per-connection",)})
    assert "per-connection" in lwcmonitor.check({"--monitor": ("lwc",),
                                                 "--session": ("per-connection",)})
    assert lwcmonitor.check({"--monitor": ("procsep",), "--session": ("per-connection",)}) is None
