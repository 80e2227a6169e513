"""`isobench run`: the JSON contract, and crashes, hangs and skips as records."""

import sqlite3

import pytest

from isobench.store import Store

RESULT_KEYS = {"benchmark": str, "mechanism": str, "params": dict, "status": str, "n": int,
               "dropped": int}
NUMBER_KEYS = ("min", "median", "p5", "p95", "mad", "batched", "empty_region")


def test_run_json_contract(isobench, fake):
    doc, p = isobench.json("run", "switch", "--json", "-m", "direct", "-m", "thread")
    assert p.returncode == 0, p.stderr
    assert {"run_id", "db", "environment", "results"} <= set(doc)
    assert isinstance(doc["run_id"], int)
    assert doc["db"] == str(isobench.db)
    assert len(doc["results"]) == 8
    for r in doc["results"]:
        for key in ("benchmark", "mechanism", "params", "unit", "counter", "n", "min", "median",
                    "p5", "p95", "mad", "status", "reason"):
            assert key in r
        for key, t in RESULT_KEYS.items():
            assert isinstance(r[key], t), key
        for key in NUMBER_KEYS:
            assert isinstance(r[key], (int, float)), key
        assert (r["status"], r["reason"], r["unit"], r["counter"]) == ("ok", None, "tsc_ticks",
                                                                         "tsc")
        assert r["n"] == fake.DEFAULT_N
    first = doc["results"][0]
    assert (first["mechanism"], first["params"]) == (
        "direct", {"placement": "same-cpu", "payload": 0, "variant": "indirect"})
    assert first["median"] == 105.5  # fake_samples(100, same-cpu, 0, 10): 100 + (7i mod 11)
    assert first["min"] == 100


def test_environment(isobench):
    doc, _ = isobench.json("run", "switch", "--json", "-m", "direct")
    env = doc["environment"]
    for key in ("cpu_model", "cpu_flags", "microcode", "kernel", "mitigations", "governor", "smt",
                "hypervisor", "pmu", "perf_event_paranoid", "tsc_hz", "counter", "clocksource",
                "compiler", "git", "python", "hostname", "nproc", "memory_bytes"):
        assert key in env, key
    # Taken from the isob header and from `isob --version --json`.
    assert (env["counter"], env["tsc_hz"]) == ("tsc", 2.6e9)
    assert env["compiler"] == {"version": "0.1.0-fake", "cc": "gcc 12.2.0", "cflags": "-O2 -g"}


def test_driver_without_version_option(isobench):
    doc, p = isobench.json("run", "switch", "--json", "-m", "direct", FAKE_ISOB_NO_VERSION="1")
    assert p.returncode == 0
    assert doc["environment"]["compiler"] is None
    assert doc["environment"]["reasons"]["compiler"]


def test_raw_samples_are_stored(isobench, fake):
    doc, _ = isobench.json("run", "switch", "--json", "-m", "thread", "--placement", "cross-cpu",
                           "--no-baseline")
    with Store.open(isobench.db, create=False) as s:
        r = s.load_result(doc["results"][1]["result_id"])
    assert r.samples == tuple(fake.fake_samples(2000, "cross-cpu", 64, fake.DEFAULT_N))


def test_options_reach_the_driver(isobench):
    p = isobench("run", "switch", "-m", "direct", "--quick", "--n", "7",
                 "--placement", "unpinned,same-cpu")
    assert p.returncode == 0, p.stderr
    runs = [c for c in isobench.isob_calls() if c[0] == "switch"]
    assert runs == [["switch", "-m", "direct", "--quick", "--n", "7",
                     "--placement", "unpinned,same-cpu"]]


def test_counter_and_scope_reach_isob_and_the_store(isobench):
    p = isobench("run", "switch", "-m", "direct", "--counter", "clock", "--scope", "cpu")
    assert p.returncode == 0, p.stderr
    runs = [c for c in isobench.isob_calls() if c[0] == "switch"]
    assert runs == [["switch", "-m", "direct", "--counter", "clock", "--scope", "cpu"]]
    with Store.open(isobench.db, create=False) as s:
        opts = s.run(s.latest_run_id())["options"]
    assert (opts["counter"], opts["scope"]) == ("clock", "cpu")


def test_sizes_reach_kv_only(isobench):
    p = isobench("run", "switch", "kv", "-m", "direct", "--sizes", "4K,1m,64")
    assert p.returncode == 0, p.stderr
    assert [c for c in isobench.isob_calls() if c[0] in ("switch", "kv")] == [
        ["switch", "-m", "direct"], ["kv", "-m", "direct", "--sizes", "4K,1m,64"]]


def test_default_is_all_mechanisms_of_the_default_suite(isobench):
    p = isobench("run", "--quick")
    assert p.returncode == 0, p.stderr
    runs = [c[:3] for c in isobench.isob_calls()
            if c[0] not in ("list", "--version", "--limits", "isolation")]
    assert runs == [[b, "-m", m] for b in ("switch", "kv")
                    for m in ("direct", "thread", "process-futex", "mpk")]


def test_skipped_mechanism_does_not_fail_the_run(isobench):
    doc, p = isobench.json("run", "switch", "--json", "-m", "mpk", "-m", "direct")
    assert p.returncode == 0, p.stderr
    skipped = [r for r in doc["results"] if r["status"] == "skipped"]
    assert len(skipped) == 1
    assert (skipped[0]["mechanism"], skipped[0]["reason"]) == ("mpk", "CPU has no PKU")
    assert skipped[0]["n"] == 0 and skipped[0]["median"] is None


def test_crash_keeps_earlier_results(isobench):
    doc, p = isobench.json("run", "switch", "--json", "-m", "test-crash", "-m", "direct",
                           ISOBENCH_TEST_MECHANISMS="1")
    assert p.returncode == 1
    crash = [r for r in doc["results"] if r["mechanism"] == "test-crash"]
    assert [r["status"] for r in crash] == ["ok", "failed"]
    assert "signal 11 (SIGSEGV) after 1 result" in crash[-1]["reason"]
    # The run went on after the crash.
    assert [r["status"] for r in doc["results"] if r["mechanism"] == "direct"] == ["ok"] * 4
    assert doc["status"] == "failed"


def test_hang_times_out(isobench):
    doc, p = isobench.json("run", "switch", "--json", "-m", "test-hang", "-m", "direct", "--timeout", "5",
                           ISOBENCH_TEST_MECHANISMS="1")
    assert p.returncode == 1
    hang = [r for r in doc["results"] if r["mechanism"] == "test-hang"]
    assert [r["status"] for r in hang] == ["ok", "failed"]
    assert hang[-1]["reason"].startswith("timed out after 5 s")
    assert len([r for r in doc["results"] if r["mechanism"] == "direct"]) == 4


def test_results_are_stored_before_the_run_ends(isobench):
    # The stored run of a crash has its results even though isob died.
    isobench("run", "switch", "-m", "test-crash", "--no-baseline", ISOBENCH_TEST_MECHANISMS="1")
    conn = sqlite3.connect(isobench.db)
    statuses = [r[0] for r in conn.execute("SELECT status FROM results ORDER BY id")]
    assert statuses == ["ok", "failed"]


def test_non_json_output_is_a_failure_but_results_stay(isobench):
    doc, p = isobench.json("run", "switch", "--json", "-m", "direct", FAKE_ISOB_GARBAGE="1")
    assert p.returncode == 1
    assert [r["status"] for r in doc["results"]] == ["ok"] * 4 + ["failed"]
    assert "not JSON" in doc["results"][-1]["reason"]


def test_failed_result_from_driver(isobench):
    doc, p = isobench.json("run", "switch", "--json", "-m", "direct", FAKE_ISOB_FAIL_RESULT="1")
    assert p.returncode == 1
    # isob's own failed result, and no extra record: its exit status 1 agrees.
    assert [r["status"] for r in doc["results"]] == ["ok"] * 3 + ["failed"]
    assert doc["results"][-1]["reason"] == "call returned -EIO"


def test_benchmark_without_mechanism_runs_once(isobench):
    # (-m alone on such a benchmark is refused: test_bench_options.py)
    doc, p = isobench.json("run", "pingpong", "switch", "--json", "-m", "direct")
    assert p.returncode == 0, p.stderr
    pp = [r for r in doc["results"] if r["benchmark"] == "pingpong"]
    assert {r["mechanism"] for r in pp} == {"-"}
    assert {r["params"]["primitive"] for r in pp} == {"futex", "pipe"}
    assert [c for c in isobench.isob_calls() if c[0] == "pingpong"] == [["pingpong"]]


def test_perf_events_are_stored(isobench):
    doc, p = isobench.json("run", "switch", "--json", "-m", "direct", FAKE_ISOB_COUNTER="perf")
    assert p.returncode == 0
    assert doc["results"][0]["unit"] == "cycles"
    assert doc["environment"]["pmu"] is True
    with Store.open(isobench.db, create=False) as s:
        r = s.load_result(doc["results"][0]["result_id"])
    assert r.events["instructions"] == tuple(x // 2 for x in r.samples)


def test_table_output(isobench):
    p = isobench("run", "switch", "-m", "direct", "-m", "mpk", "--wide")
    assert p.returncode == 0
    out = p.stdout
    assert "counter: tsc" in out and "2.600 GHz" in out and "empty region" in out
    header = next(l for l in out.splitlines() if l.startswith("benchmark"))
    assert header.split() == ["benchmark", "mechanism", "placement", "payload", "variant",
                              "value", "95%", "interval", "from", "median", "mean", "batched",
                              "unit", "~ns", "ratio", "[95%]", "reps"]
    # Every row says which rule chose its value.
    rows = [l for l in out.splitlines() if l.startswith("switch ")]
    assert rows and all((" median" in l or " batched" in l) for l in rows)
    assert "value: the headline, by one rule" in out
    assert out.rstrip().splitlines()[-1].startswith(f"results stored in {isobench.db}")
    assert "CPU has no PKU" in out


def test_default_table_fits_100_columns(isobench):
    p = isobench("run", "switch", "-m", "direct", "-m", "thread", "-m", "mpk", "--repeat", "2")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    # Every line but the last, which names the store by its path.
    assert max(map(len, lines[:-1])) <= 100, max(lines[:-1], key=len)
    header = next(l for l in lines if l.startswith("mechanism "))
    assert header.split() == ["mechanism", "placement", "size", "time", "95%", "CI", "vs",
                              "direct", "[95%", "CI]", "status"]
    body = lines[lines.index(header) + 2:]
    rows = body[:next(i for i, l in enumerate(body) if not l.strip())]
    # One row per configuration: the two repetitions collapse into it.
    # The fake driver measures 2 placements x 2 payloads of its one variant.
    assert [r.split()[0] for r in rows].count("thread") == 4
    assert rows[0].split()[:5] == ["direct", "(indirect)", "same-cpu", "0", "B"]
    # The time in automatic units, the ratio with its interval, mpk skipped.
    thread = next(r for r in rows if r.startswith("thread ") and " 0 B " in r)
    assert thread.split()[-1] == "median"
    assert " ns " in thread or " µs " in thread
    assert any(r.split()[0] == "mpk" and r.split()[-1] == "skipped" for r in rows)
    assert "Repetitions (fresh processes" not in p.stdout  # --wide's
    assert lines[-1].startswith("results stored in")


def test_progress_on_stderr_and_quiet(isobench):
    p = isobench("run", "switch", "--json", "-m", "direct", "-m", "thread")
    assert "[1/2] switch -m direct ... 4 results" in p.stderr
    assert "[2/2] switch -m thread ..." in p.stderr
    p = isobench("run", "switch", "--json", "-q", "-m", "direct")
    assert p.stderr == ""


def test_db_option_before_and_after_the_command(isobench, tmp_path):
    for args in (["--db", str(tmp_path / "a.sqlite"), "run"], ["run", "--db",
                                                               str(tmp_path / "b.sqlite")]):
        doc, p = isobench.json(*args, "--json", "-m", "direct")
        assert p.returncode == 0
        assert doc["db"] == (args[1] if args[0] == "--db" else args[2])
    assert (tmp_path / "a.sqlite").exists() and (tmp_path / "b.sqlite").exists()


@pytest.mark.parametrize("flag", ["--help"])
def test_run_help_teaches(isobench, flag):
    p = isobench("run", flag)
    assert p.returncode == 0
    assert "examples:" in p.stdout and "default" in p.stdout


def test_ctrl_c_keeps_results_and_exits_130(isobench):
    import signal
    import subprocess
    import sys
    import time

    env = {**isobench.env, "ISOBENCH_TEST_MECHANISMS": "1"}
    child = subprocess.Popen([sys.executable, "-m", "isobench", "run", "switch", "-m", "test-hang",
                              "--no-baseline"],
                             cwd=isobench.cwd, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        # Wait (bounded, not timed) until the first result is stored.
        for _ in range(600):
            if isobench.db.exists() and _count(isobench.db) >= 1:
                break
            time.sleep(0.1)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 130, err
    assert "Traceback" not in err
    assert "interrupted" in err
    conn = sqlite3.connect(isobench.db)
    assert conn.execute("SELECT status FROM runs").fetchone()[0] == "interrupted"
    assert _count(isobench.db) == 1


def _count(db):
    try:
        conn = sqlite3.connect(db)
        try:
            return conn.execute("SELECT count(*) FROM results").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return 0
