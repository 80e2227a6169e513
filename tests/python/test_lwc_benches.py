"""lwC's experiments through the real native driver: each runs, proves its
work in params, and stores through `isobench run`.  The checks are counts,
statuses, labels and proofs (fault counts, monitored calls, verified
signatures), never how long anything took."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import REPO, Isobench, limit

ISOB = REPO / "build" / "isob"
RUN_TIMEOUT = limit(900)


def isob(*args: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    p = subprocess.run([str(ISOB), *args], capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert "Traceback" not in p.stderr
    return p, [json.loads(l) for l in p.stdout.splitlines() if l.strip()]


def results(lines: list[dict]) -> list[dict]:
    return [l for l in lines if l["type"] == "result"]


@pytest.fixture(autouse=True)
def _built():
    if not ISOB.exists():
        pytest.fail(f"{ISOB} is missing: run `make` (make test builds it first)")


def test_list_json_names_the_benchmarks():
    p, lines = isob("list", "--json")
    assert p.returncode == 0
    benches = {b["name"]: b for b in lines[0]["benchmarks"]}
    for name in ("lwc-create", "lwc-switch", "refmon", "lwc-sign"):
        assert name in benches and benches[name]["needs_mechanism"] is False
    assert "lwc" in {m["name"] for m in lines[0]["mechanisms"]}


def test_lwc_switch_one_way_and_round_trip_apart():
    p, lines = isob("lwc-switch", "--quick", "--n", "400", "--placement", "same-cpu",
                    "--primitive", "lwc,process-futex,uthread")
    assert p.returncode == 0, p.stderr
    rs = results(lines)
    got = {(r["params"]["variant"], r["params"]["per"]) for r in rs}
    assert got == {(v, per) for v in ("lwc", "process-futex", "uthread")
                   for per in ("one-way", "round-trip")}
    for r in rs:
        assert r["status"] == "ok", r["reason"]
        p_ = r["params"]
        # The other side ran once per switch to it.
        assert p_["b_ran"] == p_["round_trips"] > 0
        assert r["unit"] in ("tsc_ticks", "ns")
        if p_["per"] == "one-way":
            # Both directions of every round trip, one sample each.
            assert p_["method"] == "timestamps handed across"
            assert len(r["samples"]) == 2 * p_["round_trips"]


def test_lwc_switch_unknown_variant_is_usage():
    p, _ = isob("lwc-switch", "--quick", "--primitive", "lwc,fibre")
    assert p.returncode == 2
    assert [l for l in p.stderr.splitlines() if l] == [
        "isob: error: lwc-switch: unknown variant 'fibre' (lwc, process, process-futex, thread, "
        "ucontext, uthread; see isob --help)"]


def test_lwc_create_proves_dirty_pages():
    p, lines = isob("lwc-create", "--quick")
    assert p.returncode == 0, p.stderr
    rs = results(lines)
    seen = set()
    for r in rs:
        v = r["params"]["variant"]
        seen.add(v)
        assert r["status"] in ("ok", "skipped"), r["reason"]
        if r["status"] == "skipped":
            # Only what the kernel may lack, or a heap the machine has no
            # room for now; the reason says which.
            assert (v in ("soft-dirty", "uffd-wp") or
                    (v == "all" and "MemAvailable" in r["reason"])), r["reason"]
            continue
        assert {"dirty_pages", "heap_mib", "thp"} <= set(r["params"])
        if v in ("lwc", "fork", "soft-dirty", "uffd-wp"):
            assert r["params"]["minflt_min"] >= r["params"]["dirty_pages"]
            assert len(r["samples"]) == r["params"]["reps"]
        if v == "cow-fault":
            assert r["params"]["minflt"] >= r["params"]["pages"] == len(r["samples"])
    assert {"lwc", "fork", "vfork", "posix_spawn", "pthread", "cow-fault"} <= seen
    heaps = {1, 64} - {r["params"]["heap_mib"] for r in rs if r["params"]["variant"] == "all"}
    cells = {(r["params"]["heap_mib"], r["params"]["dirty_pages"]) for r in rs
             if r["params"]["variant"] == "lwc"}
    assert cells == {(h, d) for h in heaps for d in (0, 1, 16, 256, 4096)}


def test_refmon_monitors_see_every_call():
    p, lines = isob("refmon", "--quick")
    assert p.returncode == 0, p.stderr
    rs = results(lines)
    assert {r["params"]["config"] for r in rs} == {"native", "inline", "seccomp", "broker",
                                                  "ptrace", "lwc-mon"}
    for r in rs:
        p_ = r["params"]
        if p_["config"] == "seccomp" and p_["call"] == "open+close":
            # A filter cannot read a path: seccomp refuses every open.
            assert r["status"] == "skipped" and "cannot read a path" in r["reason"]
            continue
        assert r["status"] == "ok", r["reason"]
        assert p_["calls"] == 10000 and len(r["samples"]) == 3
        if p_["config"] != "native":
            assert p_["probe"] == "Operation not permitted"
        if p_["config"] in ("broker", "ptrace", "lwc-mon"):
            assert p_["monitored_calls"] == p_["monitored_expected"]
        # The ways around a monitor of openat: refused by every isolating
        # monitor, through where nothing isolates.
        refused = p_["config"] not in ("native", "inline")
        assert ("opened" not in p_["bypass"]) == refused, p_
        if refused:
            assert p_["bypass"].endswith("openat2: Operation not permitted"), p_
    inline = next(r for r in rs if r["params"]["config"] == "inline")
    assert inline["params"]["isolation"].startswith("none")


def test_lwc_sign_verifies_every_signature():
    p, lines = isob("lwc-sign", "--quick")
    assert p.returncode == 0, p.stderr
    rs = results(lines)
    assert [r["params"]["variant"] for r in rs] == ["in-process", "lwc"]
    for r in rs:
        assert r["status"] == "ok", r["reason"]
        assert r["params"]["verified"] == r["params"]["signatures"] == len(r["samples"]) == 10000


def test_isobench_run_stores_lwc_switch(tmp_path):
    ib = Isobench(tmp_path)
    ib.env["ISOBENCH_ISOB"] = str(ISOB)
    doc, p = ib.json("run", "lwc-switch", "--quick", "--n", "200", "--placement", "same-cpu",
                     "--json")
    assert p.returncode == 0, p.stderr
    stored = [r for r in doc["results"] if r["benchmark"] == "lwc-switch"]
    assert len(stored) == 12  # six variants, one-way and round trip each
    assert all(r["status"] == "ok" for r in stored)
    shown, p = ib.json("show", "--json")
    assert p.returncode == 0
    assert sum(r["benchmark"] == "lwc-switch" for r in shown["results"]) == 12
