"""The microkernel benchmarks (pingpong's matrix, delegate, sched, and the
mode switch through oslat) through the real native driver: what `isob list
--json` says about them, their bad-input contract, and that small runs give
valid records with the counts and evidence they promise.  Counts, keys and
statuses only; nothing here asserts how long anything took."""

from __future__ import annotations

import json
import resource
import subprocess

import pytest

from conftest import REPO
from isobench.core.records import Result, parse_line

ISOB = REPO / "build" / "isob"


def isob(*args: str, nofile: int | None = None) -> subprocess.CompletedProcess:
    if not ISOB.exists():
        pytest.fail(f"{ISOB} is missing: run `make` (make test builds it first)")

    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    return subprocess.run([str(ISOB), *args], capture_output=True, text=True, timeout=240,
                          preexec_fn=limit)


def results(p: subprocess.CompletedProcess) -> list[Result]:
    out = []
    for line in p.stdout.splitlines():
        obj = parse_line(line)
        if obj["type"] == "result":
            out.append(Result.from_line(obj, None, mechanism="-"))
    return out


def test_list_names_the_benchmarks_and_their_options():
    p = isob("list", "--json")
    assert p.returncode == 0, p.stderr
    benches = {b["name"]: b for b in json.loads(p.stdout)["benchmarks"]}
    expect = {
        "pingpong": {"--primitive", "--payload", "--protect"},
        "delegate": {"--sizes", "--depth", "--variant"},
        "sched": {"--workers", "--variant", "--slice", "--mode", "--cpus"},
    }
    for name, opts in expect.items():
        b = benches[name]
        assert b["needs_mechanism"] is False
        assert {o["name"] for o in b["options"]} == opts
        assert all(o["values"] and o["default"] and o["summary"] for o in b["options"])
    assert benches["pingpong"]["primitives"] == ["futex", "pipe", "socket", "socket-fd", "eventfd", "spin"]
    # switch takes two options of its own: the payloads and the call kinds.
    assert {o["name"] for o in benches["switch"]["options"]} == {"--payload", "--variant"}


@pytest.mark.parametrize("args", [
    ("switch", "-m", "direct", "--protect", "seccomp"),
    ("oslat", "--depth", "2"),
    ("pingpong", "--protect", "ptrace"),
    ("pingpong", "--payload", "65537"),
    ("pingpong", "--primitive", "carrier-pigeon"),
    ("delegate", "--variant", "threads,wormhole"),
    ("delegate", "--sizes", "2G"),
    ("sched", "--workers", "0"),
    ("sched", "--slice", "300"),
    ("sched", "--mode", "cooperative"),
    ("sched", "--placement", "cross-cpu"),
    ("pingpong", "--sizes", "4K"),
])
def test_bad_input_is_one_line_and_exit_2(args):
    p = isob(*args)
    assert p.returncode == 2, (args, p.stderr)
    assert len(p.stderr.strip().splitlines()) == 1, (args, p.stderr)
    assert "Traceback" not in p.stderr and not p.stdout


def test_depth_beyond_the_descriptor_limit_is_refused_with_the_limit():
    p = isob("delegate", "--depth", "1,64", nofile=200)
    assert p.returncode == 2 and not p.stdout
    assert "RLIMIT_NOFILE 200" in p.stderr and "--depth 64" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_pingpong_protected_both_ends_with_the_delta_against_none():
    p = isob("pingpong", "--quick", "--n", "200", "--primitive", "pipe,socket-fd", "--payload", "64",
             "--protect", "seccomp", "--placement", "same-cpu")
    assert p.returncode == 0, p.stderr
    rs = results(p)
    assert [(r.params["protect"], r.params["primitive"]) for r in rs] == [
        ("none", "pipe"), ("none", "socket-fd"), ("seccomp", "pipe"), ("seccomp", "socket-fd")]
    for r in rs:
        assert r.status == "ok" and r.unit in ("tsc_ticks", "cycles", "ns")
        work = r.params["work"]
        assert work["ops"] == work["echoed"] > 0 and work["bad_replies"] == 0
        assert work["full_checks"] > 0 and work["stamp_checks"] > 0
        assert r.params["spread"]["p5"] <= r.params["spread"]["p50"] <= r.params["spread"]["p95"]
    seccomp = [r for r in rs if r.params["protect"] == "seccomp"]
    for r in seccomp:
        ev = r.params["protect_evidence"]
        assert ev["client"]["seccomp_mode"] == 2 and ev["server"]["seccomp_mode"] == 2
        assert r.params["protect_variant"] == "300-args"
        assert r.params["delta_vs_none"]["ratio"] > 0
    fd = next(r for r in rs if r.params["primitive"] == "socket-fd")
    assert fd.params["work"]["fds_named_file_client"] == fd.params["work"]["ops"]
    assert fd.params["work"]["fds_named_file_server"] == fd.params["work"]["ops"]


def test_delegate_small_run_checks_every_hop_and_revokes():
    p = isob("delegate", "--n", "2", "--depth", "3", "--sizes", "64K")
    assert p.returncode == 0, p.stderr
    rs = results(p)
    keys = [(r.params["variant"], r.params["metric"], r.params.get("revoke")) for r in rs]
    assert keys == [("threads", "hop", None), ("threads", "end-to-end", None),
                    ("processes", "hop", None), ("processes", "end-to-end", None),
                    ("processes", "revoke", "truncate"), ("processes", "revoke", "unmap"),
                    ("copies", "hop", None), ("copies", "end-to-end", None)]
    for r in rs:
        assert r.status == "ok" and r.unit == "ns" and r.counter == "clock"
    hop = next(r for r in rs if r.params["variant"] == "copies" and r.params["metric"] == "hop")
    assert len(hop.samples) == 2 * 3 and hop.params["work"]["checksums_verified"] == 6
    assert len(hop.params["work"]["verify_median_ns"]) == 3
    truncate = next(r for r in rs if r.params.get("revoke") == "truncate")
    assert truncate.params["work"]["holders_faulted"] == truncate.params["work"]["holders_probed"] == 3
    assert truncate.params["work"]["fault_expected"] == "SIGBUS"


def test_sched_small_run_accounts_for_all_work():
    p = isob("sched", "--n", "2", "--workers", "3", "--slice", "100", "--variant",
             "threads,processes,seccomp", "--mode", "yield", "--cpus", "one")
    assert p.returncode == 0, p.stderr
    rs = results(p)
    assert [r.params["kind"] for r in rs] == ["threads", "processes", "seccomp"]
    for r in rs:
        assert r.status == "ok" and r.unit == "ns" and len(r.samples) == 2
        w = r.params["work"]
        assert w["slices_done"] == w["slices_expected"] == 2 * 3 * 10
    seccomp = rs[2].params["protect_evidence"]
    assert seccomp["measuring"]["seccomp_mode"] == 2 and seccomp["worker0"]["seccomp_mode"] == 2


def test_mode_switch_runs_none_and_each_confinement_in_one_isob():
    p = isob("oslat", "--quick", "--n", "200", "--primitive", "null-syscall,vdso-clock", "--confine",
             "none,seccomp-allow:300-args,userns")
    assert p.returncode in (0, 4), p.stderr
    rs = results(p)
    cells = [(r.params["confine"], r.params["primitive"]) for r in rs]
    assert cells == [(c, prim) for c in ("none", "seccomp-allow", "userns")
                     for prim in ("null-syscall", "vdso-clock")]
    assert all(r.status in ("ok", "skipped") for r in rs)
    assert rs[0].status == rs[1].status == "ok"
