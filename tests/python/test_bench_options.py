"""`isobench run`'s options of some benchmarks only (oslat --confine,
pingpong --protect, --primitive and the microkernel options): validated
against what the fake driver lists before anything runs, passed only to the
benchmarks that take them, and oslat's confinements one job each in the
seeded order.  Against fixtures/fake_isob.py with FAKE_ISOB_UKERNEL=1."""

from __future__ import annotations

import pytest

from conftest import assert_one_error_line

UK = {"FAKE_ISOB_UKERNEL": "1"}


def _runs(isobench, bench):
    return [c for c in isobench.isob_calls() if c[:1] == [bench]]


@pytest.mark.parametrize("args, says", [
    (("oslat", "--confine", "bogus"), "unknown confinement 'bogus'"),
    (("oslat", "--confine", "ptrace:nope"), "confinement ptrace has no variant 'nope'"),
    (("oslat", "--confine", "all,none"), "--confine all stands alone"),
    (("oslat", "--confine", "none,,ptrace"), "argument --confine"),
    (("oslat", "--confine", "pt\u0433ace"), "is not a name"),
    (("oslat", "--primitive", "null-sys"), "unknown primitive 'null-sys' for oslat"),
    (("pingpong", "--protect", "ptrace"), "unknown --protect value 'ptrace' for pingpong"),
    (("pingpong", "--protect", "seccomp-allow:9"), "unknown --protect value"),
    (("pingpong", "--payload", "1,x"), "argument --payload"),
    (("switch", "--confine", "none"), "--confine: none of the benchmarks asked for"),
    (("switch", "-m", "direct", "--depth", "3"), "--depth: none of the benchmarks asked for"),
    (("delegate", "sched", "--variant", "copies"), "unknown --variant value 'copies' for sched"),
    (("sched", "--mode", "sometimes"), "unknown --mode value 'sometimes'"),
])
def test_bad_values_are_one_line_and_exit_2(isobench, args, says):
    p = isobench("run", *args, **UK)
    line = assert_one_error_line(p)
    assert says in line
    # Refused before a store was opened or anything measured.
    assert not isobench.db.exists()
    assert not [c for c in isobench.isob_calls(checks=True) if c[:1] == [args[0]]]


def test_isob_check_refusal_is_usage_before_any_store(isobench):
    p = isobench("run", "delegate", "--depth", "5000", **UK,
                 FAKE_ISOB_CHECK_REFUSE="delegate: --depth: '5000' is not from 1 to 4096")
    line = assert_one_error_line(p)
    assert line == "isobench: error: delegate: --depth: '5000' is not from 1 to 4096"
    assert not isobench.db.exists()
    checks = [c for c in isobench.isob_calls(checks=True) if c[-1:] == ["--check"]]
    assert checks == [["delegate", "--depth", "5000", "--check"]]
    assert not _runs(isobench, "delegate")


def test_options_reach_only_the_benchmarks_that_take_them(isobench):
    p = isobench("run", "delegate", "sched", "--variant", "threads", "--depth", "1,4",
                 "--workers", "2", "--placement", "same-cpu", "--sizes", "4K", **UK)
    assert p.returncode == 0, p.stderr
    assert _runs(isobench, "delegate") == [["delegate", "--placement", "same-cpu", "--sizes",
                                            "4K", "--depth", "1,4", "--variant", "threads"]]
    # sched takes --variant and --workers, and refuses --placement and --sizes.
    assert _runs(isobench, "sched") == [["sched", "--variant", "threads", "--workers", "2"]]
    # Each benchmark was asked first, with the options its jobs get.
    checks = [c for c in isobench.isob_calls(checks=True) if c[-1:] == ["--check"]]
    assert sorted(c[0] for c in checks) == ["delegate", "sched"]


def test_oslat_runs_one_job_per_confinement_in_the_seeded_order(isobench):
    doc, p = isobench.json("run", "oslat", "--confine", "seccomp-allow:300-args,ptrace",
                           "--primitive", "null-syscall", "--repeat", "3", "--seed", "7",
                           "--json", **UK)
    assert p.returncode == 0, p.stderr
    runs = _runs(isobench, "oslat")
    confs = [c[c.index("--confine") + 1] for c in runs]
    # none is added (every slowdown is against it), each confinement one job
    # per repetition, every repetition the same set.
    assert len(confs) == 9
    for rep in range(3):
        assert sorted(confs[3 * rep:3 * rep + 3]) == ["none", "ptrace", "seccomp-allow:300-args"]
    assert len({tuple(confs[3 * r:3 * r + 3]) for r in range(3)}) > 1  # shuffled
    assert all(c[c.index("--primitive") + 1] == "null-syscall" for c in runs)
    # The same seed gives the same order.
    isobench.argv_log.unlink()
    isobench("run", "oslat", "--confine", "seccomp-allow:300-args,ptrace", "--primitive",
             "null-syscall", "--repeat", "3", "--seed", "7", **UK)
    assert [c[c.index("--confine") + 1] for c in _runs(isobench, "oslat")] == confs
    # The run records what each benchmark was given.
    assert doc["options"]["benchmark_options"]["oslat"]["--confine"] == [
        "none", "seccomp-allow:300-args", "ptrace"]
    section = doc["summary"]["sections"]["oslat"]
    assert [c["label"] for c in section["columns"]] == ["none", "seccomp-allow:300-args",
                                                        "ptrace"]


def test_oslat_default_is_every_confinement_available_and_says_so(isobench):
    p = isobench("run", "oslat", "--primitive", "pipe", **UK)
    assert p.returncode == 0, p.stderr
    confs = [c[c.index("--confine") + 1] for c in _runs(isobench, "oslat")]
    assert confs == ["none", "seccomp-allow", "ptrace"]
    # The note is wrapped to 100 columns: read it with its line breaks undone.
    assert ("oslat: confinements none, seccomp-allow, ptrace (every confinement available "
            "here); not available here: landlock (Landlock is not enabled (fake))") in " ".join(
                p.stderr.split())
    assert max(len(line) for line in p.stderr.splitlines()) <= 100


def test_oslat_all_includes_the_unavailable_as_skipped(isobench):
    doc, p = isobench.json("run", "oslat", "--confine", "all", "--primitive", "pipe", "--json",
                           **UK)
    assert p.returncode == 0, p.stderr
    landlock = [r for r in doc["results"] if r["params"].get("confine") == "landlock"]
    assert landlock and all(r["status"] == "skipped" for r in landlock)
    assert landlock[0]["reason"] == "Landlock is not enabled (fake)"
    row = doc["summary"]["sections"]["oslat"]["tables"][0]["rows"][0]
    assert row["cells"]["landlock"] == {"status": "skipped",
                                        "reason": "Landlock is not enabled (fake)"}


def test_pingpong_protect_list_is_one_job_shuffled_per_repetition(isobench):
    p = isobench("run", "pingpong", "--protect", "none,seccomp,userns,landlock", "--repeat",
                 "4", "--seed", "1", **UK)
    assert p.returncode == 0, p.stderr
    runs = _runs(isobench, "pingpong")
    assert len(runs) == 4
    lists = [c[c.index("--protect") + 1].split(",") for c in runs]
    assert all(sorted(l) == ["landlock", "none", "seccomp", "userns"] for l in lists)
    assert len({tuple(l) for l in lists}) > 1


# ---- the options of `isobench run` that only some benchmarks read ----
# (the fake driver's catalog: switch, pingpong, kv, oslat, delegate, sched,
# and the benchmarks Python drives)

@pytest.mark.parametrize("args, says", [
    (("switch", "-m", "thread", "--sizes", "4K"),
     "--sizes: none of the benchmarks asked for (switch) takes it; kv, delegate do"),
    (("pingpong", "-m", "thread"),
     "-m: none of the benchmarks asked for (pingpong) takes a mechanism; switch, kv, "
     "kv-server do"),
    (("switch", "-m", "thread", "--seconds", "2"),
     "--seconds: none of the benchmarks asked for (switch) takes it; kv-server, lwc-serve, "
     "lwc-conns, lwc-curve do"),
    (("sched", "--placement", "same-cpu"),
     "--placement: none of the benchmarks asked for (sched) takes it; switch, pingpong, kv, "
     "oslat, delegate do"),
    (("kv-server", "--n", "5"),
     "--n: none of the benchmarks asked for (kv-server) takes it; switch, pingpong, kv, oslat, "
     "delegate, sched do"),
    (("switch", "--no-baseline"),
     "--no-baseline leaves direct out of a run with -m; without -m every mechanism runs, "
     "direct among them"),
])
def test_an_option_no_benchmark_asked_for_reads_is_refused(isobench, args, says):
    p = isobench("run", *args, **UK)
    line = assert_one_error_line(p)
    assert line == f"isobench: error: {says}"
    assert not isobench.db.exists()
    assert not [c for c in isobench.isob_calls(checks=True) if c[:1] == [args[0]]]


def test_an_option_goes_only_to_the_benchmarks_that_read_it(isobench):
    # --sizes is kv's, not switch's; -m is switch's, not pingpong's.
    p = isobench("run", "switch", "kv", "pingpong", "-m", "thread", "--sizes", "4K",
                 "--no-baseline", **UK)
    assert p.returncode == 0, p.stderr
    assert all("--sizes" not in c for c in _runs(isobench, "switch"))
    assert [c[c.index("--sizes") + 1] for c in _runs(isobench, "kv")] == ["4K"]
    assert all("-m" not in c for c in _runs(isobench, "pingpong"))


def test_switch_takes_payload_and_gets_it(isobench):
    doc, p = isobench.json("run", "switch", "-m", "thread", "--payload", "0,128", "--json")
    assert p.returncode == 0, p.stderr
    calls = _runs(isobench, "switch")
    assert calls and all(c[c.index("--payload") + 1] == "0,128" for c in calls)
    assert {r["params"]["payload"] for r in doc["results"] if r["mechanism"] == "thread"} == \
        {0, 128}
    # pingpong's payloads are its own, checked as for switch.
    p = isobench("run", "switch", "-m", "thread", "--payload", "64,x")
    assert "argument --payload" in assert_one_error_line(p)


def test_a_per_mechanism_run_measures_the_baseline_too(isobench):
    doc, p = isobench.json("run", "switch", "kv", "-m", "thread", "--quick", "--json")
    assert p.returncode == 0, p.stderr
    for bench in ("switch", "kv"):
        assert sorted({c[c.index("-m") + 1] for c in _runs(isobench, bench)}) == [
            "direct", "thread"]
    assert "direct added to -m: the baseline of every ratio (--no-baseline leaves it out)" in \
        p.stderr
    # Every kv result of thread has its ratio to direct, measured in the same
    # run (the fake's switch results have no entry variant to divide by).
    rows = [c for c in doc["summary"]["configs"] if c["mechanism"] == "thread"
            and c["benchmark"] == "kv"]
    assert rows and all(c["ratio"] is not None for c in rows), rows


def test_no_baseline_runs_only_the_mechanisms_named(isobench):
    p = isobench("run", "switch", "-m", "thread", "--no-baseline", "--quick")
    assert p.returncode == 0, p.stderr
    assert {c[c.index("-m") + 1] for c in _runs(isobench, "switch")} == {"thread"}
    assert "direct added" not in p.stderr
