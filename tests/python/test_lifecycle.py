"""Runs that end cleanly: a stop signal ends `isobench run` with every process
it started gone and the run marked interrupted; a run whose process died
without a word is closed when the store is next opened; `latest` is the
newest run that has ended.

Processes are tracked by pid only: the reaper (fixtures/reaper.py) reports
what the command left among its own descendants, and the fake driver writes
the pids of itself and of the compartment process it forks."""

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import pytest

from isobench import store as store_mod
from isobench.core import owner
from isobench.store import Store

from conftest import CHILD_TIMEOUT, assert_one_error_line

MECHS = ("-m", "direct", "-m", "thread", "-m", "process-futex")


def _count(db, table="results"):
    try:
        conn = sqlite3.connect(db)
        try:
            return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


def _wait_for_results(db, n=1):
    # Bounded polling for a state, not a timing assumption.
    for _ in range(1200):
        if db.exists() and _count(db) >= n:
            return
        time.sleep(0.05)
    raise AssertionError("no result was stored")


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _recorded_pids(path):
    if not path.exists():
        return []
    return [int(line.split()[1]) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129),
                                       (signal.SIGINT, 130)])
def test_stop_signal_ends_the_run_cleanly(isobench, tmp_path, sig, code):
    pids = tmp_path / "pids.txt"
    run = isobench.start("run", "switch", *MECHS, "--repeat", "2", "-q",
                         FAKE_ISOB_SLOW="0.3", FAKE_ISOB_PIDS=str(pids))
    _wait_for_results(isobench.db)
    os.kill(run.pid, sig)
    report, p = run.finish()
    assert p.returncode == code, p.stderr
    line = assert_one_error_line(p, code)
    assert f"interrupted by {signal.Signals(sig).name}" in line
    # Nothing the run started is left: not isob, not its compartment process.
    assert report["left"] == [], report["left"]
    recorded = _recorded_pids(pids)
    assert recorded and not [pid for pid in recorded if _alive(pid)]
    with Store.open(isobench.db, create=False) as s:
        run_row = s.run(s.resolve_run("latest"))
        results = s.results(run_row["run_id"])
        jobs = s.jobs(run_row["run_id"])
    assert (run_row["status"], run_row["end_reason"]) == ("interrupted",
                                                          signal.Signals(sig).name)
    assert run_row["finished"] is not None
    # What finished is kept; the run did not go on after the signal.
    assert 1 <= len(results) < 2 * 3 * 4
    assert jobs[-1]["status"] == "interrupted"
    assert all(j["status"] == "done" for j in jobs[:-1])
    # `latest` is this run: it has ended.
    show = isobench("show", "--json")
    assert show.returncode == 0 and json.loads(show.stdout)["status"] == "interrupted"


def test_sigkill_leaves_a_run_that_the_next_open_closes(isobench, tmp_path):
    pids = tmp_path / "pids.txt"
    isobench("run", "switch", "-m", "direct", "-q")  # run 1 ends normally
    run = isobench.start("run", "switch", *MECHS, "-q", FAKE_ISOB_SLOW="0.5",
                         FAKE_ISOB_PIDS=str(pids))
    for _ in range(1200):
        if _count(isobench.db) >= 5:
            break
        time.sleep(0.05)
    try:
        os.kill(run.pid, signal.SIGKILL)
        report, p = run.finish()
        assert p.returncode == 128 + signal.SIGKILL
        # isob, our child, died with its parent (PR_SET_PDEATHSIG).
        isob_pids = [int(l.split()[1]) for l in pids.read_text().splitlines()
                     if l.startswith("isob ")]
        assert isob_pids and not [pid for pid in isob_pids if _alive(pid)]
    finally:
        # The fake driver's own child is not ours to stop (the real driver's
        # compartments die with it); the test still removes what it started.
        for pid in _recorded_pids(pids):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    raw = sqlite3.connect(isobench.db)
    assert raw.execute("SELECT status FROM runs WHERE id = 2").fetchone()[0] == "running"
    raw.close()
    # The next open (even a read-only command) finds the owner gone.
    doc, p = isobench.json("show", "2", "--json")
    assert doc["status"] == "interrupted"
    assert doc["end_reason"].startswith("closed when found: its process")
    assert doc["jobs"][-1]["status"] == "interrupted"
    assert isobench.json("show", "--json")[0]["run_id"] == 2


def _store_with(tmp_path, owners):
    """A store with one ended run, then one running run per owner record."""
    db = tmp_path / "runs.sqlite"
    with Store.open(db, create=True) as s:
        first = s.begin_run(["isobench", "run"], {})
        s.finish_run(first, "ok")
        ids = [s.begin_run(["isobench", "run"], {}, owner=o) for o in owners]
    return db, first, ids


def _dead_pid():
    # A pid that existed a moment ago and is gone now.
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_latest_is_the_newest_ended_run(tmp_path):
    me = owner.this_process()
    db, first, (running,) = _store_with(tmp_path, [me])
    with Store.open(db, create=False) as s:
        # Its owner (this test) lives: the run stays running, `latest` skips it.
        assert s.run(running)["status"] == "running"
        assert s.resolve_run("latest") == s.resolve_run(None) == first
        assert s.resolve_run("newest") == running
        assert s.resolve_run(str(running)) == running


def test_no_ended_run_yet(isobench, tmp_path):
    db = tmp_path / "only-running.sqlite"
    with Store.open(db, create=True) as s:
        s.begin_run(["isobench", "run"], {}, owner=owner.this_process())
    line = assert_one_error_line(isobench("show", "--db", str(db)))
    assert "no run that has ended yet: run 1 is still running" in line
    assert isobench("show", "newest", "--db", str(db)).returncode == 0


def test_dead_owners_are_closed_on_open(tmp_path):
    host = socket.gethostname()
    me = owner.this_process()
    gone = {**me, "pid": _dead_pid()}
    reused = {**me, "start_ticks": me["start_ticks"] + 1}   # our pid, another process's start
    rebooted = {**me, "boot_id": "0" * 8 + "-feed-beef-0000-" + "0" * 12}
    elsewhere = {**gone, "host": host + "-elsewhere"}
    db, _, ids = _store_with(tmp_path, [gone, reused, rebooted, elsewhere, me])
    with Store.open(db, create=False) as s:
        status = {i: (s.run(i)["status"], s.run(i)["end_reason"] or "") for i in ids}
    assert status[ids[0]][0] == "interrupted" and "is gone" in status[ids[0]][1]
    assert status[ids[1]][0] == "interrupted" and "another process" in status[ids[1]][1]
    assert status[ids[2]][0] == "interrupted" and "restarted" in status[ids[2]][1]
    # Another host's process cannot be looked at; a live one is left alone.
    assert status[ids[3]] == ("running", "") and status[ids[4]] == ("running", "")


def test_owner_record():
    me = owner.this_process()
    assert me["pid"] == os.getpid() and me["host"] == socket.gethostname()
    assert isinstance(me["start_ticks"], int)
    assert owner.gone(me) is None
    assert owner.gone({"host": me["host"], "pid": "x"}) is None  # damaged: cannot tell
    assert owner.gone(None) is None


def test_schema_3_migration_keeps_old_runs(tmp_path):
    db = tmp_path / "v2.sqlite"
    conn = sqlite3.connect(db)
    conn.executescript(store_mod.MIGRATIONS[1] + store_mod.MIGRATIONS[2] +
                       "PRAGMA user_version = 2;")
    conn.execute("INSERT INTO runs (started, argv, status, environment) "
                 "VALUES ('2024-01-01', '[]', 'running', '{}')")
    conn.execute("INSERT INTO runs (started, argv, status, environment) "
                 "VALUES ('2024-01-02', '[]', 'ok', '{}')")
    conn.commit()
    conn.close()
    with Store.open(db, create=True) as s:
        a, b = s.run(1), s.run(2)
        assert len(a["uid"]) == 32 and a["uid"] != b["uid"]
        # No owner was recorded before schema 3: a running run stays as it was.
        assert a["status"] == "running" and s.jobs(1) == []
        assert s.resolve_run("latest") == 2


ISOB = __import__("conftest").REPO / "build" / "isob"


@pytest.mark.skipif(not ISOB.exists(), reason="needs build/isob (make)")
def test_sigterm_with_the_real_driver_and_a_compartment_process(isobench):
    # process-futex runs its compartment in another process: SIGTERM to the
    # run must end that process too, with isob itself.
    run = isobench.start("run", "switch", "-m", "process-futex", "-m", "direct", "--quick",
                         "--repeat", "3", "--n", "2000", "-q", ISOBENCH_ISOB=str(ISOB))
    _wait_for_results(isobench.db)
    os.kill(run.pid, signal.SIGTERM)
    report, p = run.finish()
    assert p.returncode == 143, p.stderr
    assert report["left"] == [], report["left"]
    with Store.open(isobench.db, create=False) as s:
        run_row = s.run(s.resolve_run("latest"))
    assert (run_row["status"], run_row["end_reason"]) == ("interrupted", "SIGTERM")


@pytest.mark.parametrize("where", ["stderr", "stdout"])
def test_a_closed_pipe_ends_the_run_as_interrupted_or_lets_it_finish(isobench, tmp_path, where):
    """`isobench run 2>&1 | head -2`: the reader of the progress goes away in
    the middle of the run, which ends marked interrupted (SIGPIPE) with what
    finished kept, and leaves no process.  `isobench run | head` (stdout only,
    written at the end): the run finishes, and only its output stops."""
    pids = tmp_path / "pids.txt"
    env = {**isobench.env, "FAKE_ISOB_SLOW": "0.2", "FAKE_ISOB_PIDS": str(pids)}
    args = [sys.executable, "-m", "isobench", "run", "switch", *MECHS, "--repeat", "2"]
    p = subprocess.Popen(args, cwd=isobench.cwd, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT if where == "stderr" else subprocess.DEVNULL)
    try:
        first = [p.stdout.readline() for _ in range(2 if where == "stderr" else 1)]
        assert all(first), first
        p.stdout.close()  # like head after its lines
        code = p.wait(timeout=CHILD_TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    recorded = _recorded_pids(pids)
    assert recorded and not [pid for pid in recorded if _alive(pid)]
    with Store.open(isobench.db, create=False) as s:
        run_row = s.run(s.resolve_run("newest"))
        results = s.results(run_row["run_id"])
    if where == "stderr":
        assert code == 128 + signal.SIGPIPE
        assert (run_row["status"], run_row["end_reason"]) == ("interrupted", "SIGPIPE")
        assert 1 <= len(results) < 2 * 3 * 4
    else:
        # The table comes at the end, in one go: it fits the pipe's buffer
        # (exit 0) or meets the closed end (exit 1, output lost); the run
        # finished either way.
        assert code in (0, 1)
        assert run_row["status"] == "ok" and len(results) == 2 * 3 * 4
