"""Load awareness: what each job records about the machine, and the check that
warns when other processes used the CPUs a job was pinned to.  Readings come
from a fake /proc (never the real one), so every number here is known."""

from isobench.analysis import checks, summary
from isobench.measure import load
from isobench.core.records import Result

from fixture_runs import fixture, load_doc, with_repetitions

STAT = """cpu  1000 20 300 50000 10 5 5 40 0 0
cpu0 {u0} 10 {s0} 25000 5 2 3 {st0} 0 0
cpu1 {u1} 10 {s1} 25000 5 3 2 {st1} 0 0
intr 12345
ctxt 6789
procs_running {run}
procs_blocked 0
"""


def fake_proc(root, u0=500, s0=100, st0=10, u1=500, s1=100, st1=10, run=2, la="0.50 0.40 0.30"):
    (root / "proc").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "stat").write_text(
        STAT.format(u0=u0, s0=s0, st0=st0, u1=u1, s1=s1, st1=st1, run=run))
    (root / "proc" / "loadavg").write_text(f"{la} 3/210 4242\n")


def test_snapshot_reads_proc(tmp_path):
    fake_proc(tmp_path, run=5, la="1.25 0.75 0.50")
    snap = load.snapshot(tmp_path)
    assert snap.loadavg == [1.25, 0.75, 0.5] and snap.runnable == 5
    assert snap.cpus["0"] == [500, 10, 100, 25000, 5, 2, 3, 10]
    assert set(snap.cpus) == {"0", "1"}  # the "cpu" total line is not a CPU


def test_snapshot_without_proc(tmp_path):
    snap = load.snapshot(tmp_path)
    assert (snap.loadavg, snap.runnable, snap.cpus) == (None, None, {})
    record = load.job_load(snap, load.snapshot(tmp_path), [0])
    assert record["cpu_busy_s"] is None
    assert checks._other_cpu(record) is None  # the check cannot tell: silent


def test_job_load_differences(tmp_path):
    fake_proc(tmp_path)
    start = load.snapshot(tmp_path)
    # CPU 0: 300 ticks user + 50 system = 3.5 s busy; 20 ticks of steal.
    fake_proc(tmp_path, u0=800, s0=150, st0=30, u1=510, run=3)
    end = load.snapshot(tmp_path)
    end.monotonic = start.monotonic + 4.0
    end.own_cpu_s = start.own_cpu_s + 1.5
    rec = load.job_load(start, end, [0, 0], ticks_per_s=100)
    assert rec["cpu_busy_s"] == {"0": 3.5, "1": 0.1}
    assert rec["cpu_steal_s"] == {"0": 0.2, "1": 0.0}
    assert (rec["wall_s"], rec["own_cpu_s"], rec["pinned_cpus"]) == (4.0, 1.5, [0])
    assert (rec["start"]["runnable"], rec["end"]["runnable"]) == (2, 3)
    other, steal, cpus = checks._other_cpu(rec)
    assert (round(other, 3), round(steal, 3), cpus) == (2.0, 0.2, [0])


def _result(params, status="ok"):
    if status != "ok":
        return Result.failure("switch", "thread", "boom", params=params)
    return Result("switch", "thread", params, "ok", unit="tsc_ticks", counter="tsc",
                  samples=(1, 2))


def test_pinned_cpus():
    header = {"cpu": 1, "ncpus": 4}
    same = _result({"placement": "same-cpu"})
    cross = _result({"placement": "cross-cpu"})
    loose = _result({"placement": "unpinned"})
    assert load.pinned_cpus([same], header) == [1]
    assert load.pinned_cpus([same, cross], header) == [1, 2]
    assert load.pinned_cpus([loose], header) == []
    assert load.pinned_cpus([_result({"placement": "same-cpu"}, "failed")], header) == []
    assert load.pinned_cpus([same], None) == []
    kv = Result.failure("kv-server", "direct", "x", params={"server_cpu": 0, "client_cpu": 1})
    assert load.pinned_cpus([kv], None) == [0, 1]


def _job(busy, own, wall=10.0, pinned=(0,), steal=0.0):
    return {"job_id": 1, "seq": 1, "benchmark": "switch", "mechanism": "thread",
            "repetition": 1, "started": "2024-05-02T09:00:01.000+00:00",
            "finished": "2024-05-02T09:00:11.000+00:00", "status": "done",
            "load": {"start": {"runnable": 2}, "end": {"runnable": 5}, "wall_s": wall,
                     "own_cpu_s": own, "cpu_busy_s": {"0": busy, "1": 9.0},
                     "cpu_steal_s": {"0": steal, "1": 0.0}, "pinned_cpus": list(pinned)}}


def _ids(tmp_path, jobs, name):
    doc = with_repetitions(fixture("clean_run"), 5)  # a full run: no few-repetitions
    doc["jobs"] = jobs
    return [f["id"] for f in summary.build(load_doc(tmp_path, doc, name))["findings"]]


def test_check_fires_on_other_processes(tmp_path):
    # Pinned to CPU 0 for 10 s: busy 9.9 s, own 8 s: others ran 1.9 s (19%).
    doc = with_repetitions(fixture("clean_run"), 5)
    doc["jobs"] = [_job(9.9, 8.0, steal=0.5)]
    found = {f["id"]: f for f in summary.build(load_doc(tmp_path, doc))["findings"]}
    assert list(found) == ["load-during-run"]
    f = found["load-during-run"]
    assert f["severity"] == checks.WARNING
    assert "others ran 1.90 s on CPU 0 in 10.0 s" in f["what"]
    assert "runnable tasks 2 -> 5" in f["what"] and "hypervisor steal 0.50 s" in f["what"]
    assert f["subjects"] and "switch -m thread (repetition 1)" in f["subjects"][0]


def test_check_quiet_when_the_job_was_alone(tmp_path):
    # Busy time no more than the job's own (plus a few ticks of accounting).
    assert _ids(tmp_path, [_job(8.04, 8.0)], "a.sqlite") == []
    # CPU 1 was busy, but the job was not pinned there.
    assert _ids(tmp_path, [_job(5.0, 5.0, pinned=(0,))], "b.sqlite") == []
    # Below the 0.1 s floor, even if a large share of a very short job.
    assert _ids(tmp_path, [_job(0.09, 0.0, wall=0.2)], "c.sqlite") == []
    # No load recorded (a store written before jobs were recorded).
    job = _job(9.9, 1.0)
    job["load"] = None
    assert _ids(tmp_path, [job], "d.sqlite") == []


def test_check_counts_every_pinned_cpu(tmp_path):
    # Two pinned CPUs for 10 s are 20 CPU-seconds: 0.9 s of others is 4.5%,
    # under the bound; on one CPU it would be 9%.
    job = _job(9.9, 18.0, pinned=(0, 1))
    assert _ids(tmp_path, [job], "e.sqlite") == []
    job = _job(9.9, 9.0, pinned=(0,))
    assert _ids(tmp_path, [job], "f.sqlite") == ["load-during-run"]
