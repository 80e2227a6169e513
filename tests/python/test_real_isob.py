"""The CLI against the real native driver (build/isob, built by `make test`
before pytest runs).  These check the contract end to end; they assert
counts, keys and statuses, never how long anything took."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess

import pytest

from conftest import REPO, Isobench, assert_one_error_line

ISOB = REPO / "build" / "isob"


@pytest.fixture
def real(tmp_path) -> Isobench:
    if not ISOB.exists():
        pytest.fail(f"{ISOB} is missing: run `make` (make test builds it first)")
    ib = Isobench(tmp_path)
    ib.env["ISOBENCH_ISOB"] = str(ISOB)
    return ib


# Small sample counts: these tests check plumbing, not speed.
FAST = ("--n", "200")


def test_run_contract_direct_and_process_futex(real):
    doc, p = real.json("run", "switch", "-m", "direct", "-m", "process-futex", "--quick",
                       "--json", *FAST)
    assert p.returncode == 0, p.stderr
    assert set(doc) >= {"run_id", "db", "environment", "results"}
    env = doc["environment"]
    for key in ("cpu_model", "kernel", "hypervisor", "pmu", "tsc_hz"):
        assert key in env
    assert isinstance(env["pmu"], bool)
    results = doc["results"]
    mechs = {r["mechanism"] for r in results}
    assert mechs == {"direct", "process-futex"}
    for r in results:
        for key in ("benchmark", "mechanism", "params", "unit", "counter", "n", "min", "median",
                    "p5", "p95", "mad", "status", "reason"):
            assert key in r, key
        assert r["unit"] in ("ns", "tsc_ticks", "cycles")
        assert r["status"] in ("ok", "skipped", "failed")
    ok = [r for r in results if r["status"] == "ok"]
    # direct: 3 ERIM call kinds + 3 payloads; process-futex: 3 payloads x 2 placements
    # (cross-cpu may be skipped on a one-CPU machine, never failed).
    assert len([r for r in ok if r["mechanism"] == "direct"]) == 6
    pf = [r for r in results if r["mechanism"] == "process-futex"]
    assert {r["params"]["payload"] for r in pf if r["status"] == "ok"} == {0, 64, 4096}
    assert all(r["status"] != "failed" for r in results)
    for r in ok:
        assert r["n"] > 0 and r["min"] <= r["median"] <= r["p95"]
    # Everything is in the one SQLite file the document names.
    con = sqlite3.connect(doc["db"])
    n = con.execute("select count(*) from results where run_id = ?", (doc["run_id"],)).fetchone()[0]
    assert n == len(results)


def test_crash_and_hang_are_contained(real):
    env = {"ISOBENCH_TEST_MECHANISMS": "1"}
    doc, p = real.json("run", "switch", "-m", "direct", "-m", "test-crash", "-m", "test-hang",
                       "--quick", "--json", "--timeout", "10", *FAST, **env)
    assert p.returncode == 1, p.stderr
    by = {}
    for r in doc["results"]:
        by.setdefault(r["mechanism"], []).append(r)
    # The results printed before the crash and the hang are kept...
    for m in ("test-crash", "test-hang"):
        assert any(r["status"] == "ok" for r in by[m]), m
        failed = [r for r in by[m] if r["status"] == "failed"]
        assert len(failed) == 1 and failed[0]["reason"], m
    assert "signal" in [r for r in by["test-crash"] if r["status"] == "failed"][0]["reason"]
    assert "time" in [r for r in by["test-hang"] if r["status"] == "failed"][0]["reason"]
    # ...and so is every result of the mechanisms that behaved.
    assert all(r["status"] == "ok" for r in by["direct"])


def test_list_reports_isolation_from_the_tests(real):
    doc, p = real.json("list", "--json")
    assert p.returncode == 0, p.stderr
    by = {m["name"]: m for m in doc["mechanisms"]}
    assert by["direct"]["isolation"] == "none"
    assert by["process-futex"]["isolation"] == "enforced"
    for m in doc["mechanisms"]:
        assert m["isolation"] in ("enforced", "partial", "none", "untested")
        if not m["available"]:
            assert m["isolation"] == "untested" and m["reason"]
    assert {"switch"} <= {b["name"] for b in doc["benchmarks"]}


PROCESS_MECHANISMS = ("process-futex", "process-spin", "process-pipe", "process-socket", "seccomp")


def test_list_matrix_is_measured_by_the_real_driver(real):
    """The matrix of the real mechanisms on this machine: what the kernel's
    rules make certain is checked; the rest is whatever the probes find."""
    doc, p = real.json("list", "--json")
    assert p.returncode == 0, p.stderr
    by = {m["name"]: m for m in doc["mechanisms"]}
    root = os.geteuid() == 0
    for name in PROCESS_MECHANISMS:
        m = by[name]
        if not m["available"]:
            continue
        cells = m["attackers"]
        assert cells["in-process"]["verdict"] == "enforced", name
        assert "SEGV_MAPERR" in cells["in-process"]["evidence"], name
        assert cells["same-uid"]["verdict"] == "enforced", (name, cells["same-uid"])
        if root:
            assert cells["other-uid"]["verdict"] == "enforced", (name, cells["other-uid"])
            assert m["isolation"] == "enforced", name
            probes = cells["root"].get("probes") or []
            if (cells["root"].get("identity") or {}).get("cap_sys_ptrace"):
                assert cells["root"]["verdict"] == "leaks", name
                assert any(pr["secret_seen"] for pr in probes), name
        else:
            assert cells["other-uid"]["verdict"] == "untested"
            assert "needs root" in cells["other-uid"]["evidence"]
            assert m["isolation"] == "partial", name
    for name in ("direct", "thread", "ucontext", "uthread"):
        assert by[name]["attackers"]["in-process"]["verdict"] == "leaks"
        assert by[name]["isolation"] == "none"
    mp = by["mprotect"]["attackers"]
    assert mp["in-process"]["verdict"] == "enforced" and "SEGV_ACCERR" in mp["in-process"]["evidence"]
    # process_vm_readv respects the page protection; a thread of the caller
    # meets it (or the kernel refuses), it never reads through PROT_NONE.
    vm = next(pr for pr in mp["same-uid"]["probes"] if pr["probe"] == "process_vm_readv")
    assert not vm["secret_seen"] and vm["errno"] == "EFAULT"


def test_bad_input_against_real_driver(real, tmp_path):
    assert_one_error_line(real("run", "nosuchbench"))
    assert_one_error_line(real("run", "switch", "-m", "nosuchmech"))
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"this is not a database" * 100)
    assert_one_error_line(real("run", "switch", "-m", "direct", "--db", str(corrupt)))


def test_isob_rejects_bad_usage_with_one_line():
    import subprocess
    for args in (["switch"], ["switch", "-m", "direct", "--n", "abc"], ["nosuch"],
                 ["switch", "-m", "direct", "--placement", "sideways"]):
        p = subprocess.run([str(ISOB), *args], capture_output=True, text=True, timeout=60)
        assert p.returncode == 2, args
        assert len(p.stderr.strip().splitlines()) == 1, (args, p.stderr)


def test_isob_usage_describes_each_benchmark_option_from_its_table():
    """`isob --help` prints every option a benchmark lists in `isob list
    --json` with that table's own words and default (one source for a
    default), and isob refuses that option for a benchmark that does not
    list it."""
    if not ISOB.exists():
        pytest.fail(f"{ISOB} is missing: run `make` (make test builds it first)")
    listing = json.loads(subprocess.run([str(ISOB), "list", "--json"], capture_output=True,
                                        text=True, timeout=60, check=True).stdout)
    helptext = subprocess.run([str(ISOB), "--help"], capture_output=True, text=True, timeout=60,
                              check=True).stdout
    folded = " ".join(helptext.split())
    described = 0
    for bench in listing["benchmarks"]:
        for opt in bench.get("options") or []:
            line = f"{bench['name']}: {opt['summary']}; {opt['values']} [{opt['default']}]"
            assert " ".join(line.split()) in folded, line
            described += 1
    assert described >= 10  # pingpong, delegate, sched, switch, kv, inspect list theirs
    p = subprocess.run([str(ISOB), "kv", "-m", "direct", "--depth", "2", "--check"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "takes no --depth" in p.stderr


def isolation_line(name: str, **env) -> dict:
    import subprocess
    if not ISOB.exists():
        pytest.fail(f"{ISOB} is missing: run `make` (make test builds it first)")
    p = subprocess.run([str(ISOB), "isolation", "-m", name], capture_output=True, text=True, timeout=120,
                       env={**os.environ, **env})
    assert p.returncode in (0, 1, 4), p.stderr  # 4: skipped here, with the reason
    return json.loads(p.stdout.splitlines()[-1])


def test_the_pre_attached_tracer_is_measured_by_the_real_driver():
    """The fifth column against the real mechanisms: a tracer attached to
    the caller before creation keeps the server dumpable and would read it.
    The naive tracer is named in TracerPid and the server refuses to start;
    the one that rewrites TracerPid to 0 in what its tracees read is not
    found, and reads the secret: the cell leaks.  The deliberately open
    variant (test-traceable, without that refusal) is read by the naive
    tracer too, and an in-process compartment is read through the caller."""
    import platform
    if platform.machine() != "x86_64":
        pytest.skip(f"the pre-attached tracer rewrites x86-64 registers; this is {platform.machine()}")
    line = isolation_line("process-futex")
    assert line["matrix_version"] == 3
    assert line["caller_closed"] is True and line["caller_tracer_pid"] == 0
    assert line["caller_dumpable"] is False
    cells = line["attackers"]
    same = cells["same-uid"]
    assert same["condition"].startswith("for compartments created by a caller non-dumpable at creation")
    assert "the caller's TracerPid at creation: 0" in same["evidence"]
    # The fork window: refused as creation leaves the caller, read from a
    # dumpable one (tests/c/test_fork_window.c races every mechanism).
    assert same["precondition"] == "caller non-dumpable at creation"
    held, window = same["fork_window"]
    assert held["caller_dumpable"] is False and held["verdict"] == "enforced" and held["seen"] > 0, held
    assert window["caller_dumpable"] is True and window["verdict"] == "leaks", window
    assert same["dumpable_caller"] == "leaks" and same["verdict"] == "enforced"
    tracer = cells["pre-attached"]
    if line["yama_ptrace_scope"] not in (None, 0):
        assert tracer["verdict"] == "enforced" and "refused the attach" in tracer["evidence"]
        return
    naive, hiding = tracer["tracers"]
    assert tracer["verdict"] == "leaks", tracer
    # The defence against the naive tracer, still measured.
    assert naive["hides"] is False and naive["verdict"] == "enforced", naive
    assert naive["create_errno"] == "EPERM" and naive["caller_tracer_pid"] > 0
    assert "a tracer that does not hide: attached" in tracer["evidence"]
    assert "creation refused (EPERM)" in tracer["evidence"]
    # The attack on it: the hiding tracer is not found, and reads the secret.
    assert hiding["hides"] is True and hiding["verdict"] == "leaks", hiding
    assert hiding["create_errno"] is None and hiding["caller_tracer_pid"] == 0
    assert hiding["tracerpid_hidden"] >= 2  # the caller's read and the server's
    assert tracer["tracer"]["hides"] is True and tracer["tracer"]["set_dumpable_rewritten"] >= 1
    assert all(pr["secret_seen"] for pr in tracer["probes"])
    assert "the compartment's process" in tracer["evidence"]
    open_line = isolation_line("test-traceable", ISOBENCH_TEST_MECHANISMS="1")
    leak = open_line["attackers"]["pre-attached"]
    assert leak["verdict"] == "leaks", leak
    assert [r["verdict"] for r in leak["tracers"]] == ["leaks", "leaks"]
    assert all(pr["secret_seen"] for pr in leak["probes"])
    assert "the compartment's process" in leak["evidence"]
    direct = isolation_line("direct")["attackers"]["pre-attached"]
    assert direct["verdict"] == "leaks" and "the caller's own process" in direct["evidence"]


def test_mpk_in_process_cell_names_what_it_covers():
    """Measured or not (no PKU here), the in-process cell of the MPK
    mechanisms says it covers loads and stores, not signal frames, set-up's
    open key or the system calls that undo the key (each shown in tests/vm)."""
    for name in ("mpk", "mpk-bridge"):
        cond = isolation_line(name)["attackers"]["in-process"]["condition"]
        assert "loads and stores" in cond and "nor sigreturn frames" in cond, cond
        assert "replaced before create" in cond and "pkey_mprotect to key 0" in cond, cond
        assert "a freed key another thread keeps open" in cond, cond
        assert "mprotect that writes a closed WRPKRU back" in cond, cond


def test_switch_payloads_are_its_own_option(real):
    """switch measures the payloads --payload names, and refuses --sizes;
    a run with -m measures direct beside it, and every ratio is filled."""
    doc, p = real.json("run", "switch", "-m", "uthread", "--payload", "0,256", "--quick",
                       "--repeat", "2", "--json", *FAST)
    assert p.returncode == 0, p.stderr
    entry = [r for r in doc["results"] if r["params"].get("variant") == "entry"]
    assert {r["mechanism"] for r in entry} == {"direct", "uthread"}
    assert {r["params"]["payload"] for r in entry} == {0, 256}
    ratios = [c["ratio"] for c in doc["summary"]["configs"]
              if c["mechanism"] == "uthread" and c["params"].get("variant") == "entry"]
    assert len(ratios) == 2 and all(r is not None and r["value"] > 0 for r in ratios)
    # isob itself: --sizes is not switch's; a payload above 64 KiB is refused.
    for args, says in ((("--sizes", "4K"), "switch: --sizes does not apply"),
                       (("--payload", "70000"), "switch: --payload: '70000' is not")):
        out = subprocess.run([str(ISOB), "switch", "-m", "direct", *args, "--check"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and says in out.stderr, out.stderr


def test_switch_variants_are_its_own_option(real):
    """--variant picks switch's variants: direct measures only the call kinds
    named; mpk runs them behind its gate, or skips with the probe's reason
    where the CPU has no PKU; a mechanism without a gate skips a kind named
    for it and says why; an unknown variant is refused by isob."""
    doc, p = real.json("run", "switch", "-m", "mpk", "--variant", "direct-call,indirect-call",
                       "--quick", "--json", *FAST)
    assert p.returncode == 0, p.stderr
    direct = [r for r in doc["results"] if r["mechanism"] == "direct"]
    assert sorted(r["params"]["variant"] for r in direct) == ["direct-call", "indirect-call"]
    assert all(r["status"] == "ok" for r in direct)
    mpk = [r for r in doc["results"] if r["mechanism"] == "mpk"]
    assert mpk
    if mpk[0]["status"] == "skipped":
        assert len(mpk) == 1 and "PKU" in mpk[0]["reason"], mpk
    else:
        assert sorted(r["params"]["variant"] for r in mpk) == ["direct-call", "indirect-call"]
        assert all(r["status"] == "ok" for r in mpk), mpk
    out = subprocess.run([str(ISOB), "switch", "-m", "uthread", "--variant", "inline,entry",
                          "--payload", "0", "--quick", "--n", "100"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    res = [json.loads(line) for line in out.stdout.splitlines() if '"type":"result"' in line]
    assert [(r["params"]["variant"], r["status"]) for r in res] == [("inline", "skipped"),
                                                                    ("entry", "ok")]
    assert "uthread has no gate to call the inline kind through" in res[0]["reason"]
    out = subprocess.run([str(ISOB), "switch", "-m", "direct", "--variant", "outline", "--check"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "switch: --variant: unknown value 'outline'" in out.stderr
