"""The workload benchmarks (worksweep, cpuwork, memops, pipeio, scale) as
the Python side sees them: listed by the real driver, run and stored, their
options passed on, and sizes beyond this machine refused up front.  The
measurements themselves are tested in tests/c/test_workloads.c."""

from __future__ import annotations

import json
import sqlite3
import subprocess

import pytest

from conftest import REPO, Isobench
from isobench.measure import runner

ISOB = REPO / "build" / "isob"
WORKLOADS = ("worksweep", "cpuwork", "memops", "pipeio", "scale")


@pytest.fixture
def real(tmp_path) -> Isobench:
    if not ISOB.exists():
        pytest.fail(f"{ISOB} is missing: run `make` (make test builds it first)")
    ib = Isobench(tmp_path)
    ib.env["ISOBENCH_ISOB"] = str(ISOB)
    return ib


def test_sizes_reach_memops_and_kv_only():
    opts = runner.Options(sizes=("64M", "2G"))
    assert runner.isob_args(runner.Job("memops", "direct"), opts)[-2:] == ["--sizes", "64M,2G"]
    assert "--sizes" in runner.isob_args(runner.Job("kv", "direct"), opts)
    assert "--sizes" not in runner.isob_args(runner.Job("cpuwork", "direct"), opts)


def test_long_benchmarks_get_their_own_timeout_unless_told():
    full = runner.Options(timeout=runner.DEFAULT_TIMEOUT)
    assert runner.job_timeout(runner.Job("cpuwork", "direct"), full) == runner.LONG_TIMEOUTS["cpuwork"]
    assert runner.job_timeout(runner.Job("memops", "wasm"), full) == runner.LONG_TIMEOUTS["memops"]
    assert runner.job_timeout(runner.Job("switch", "direct"), full) == runner.DEFAULT_TIMEOUT
    quick = runner.Options(quick=True, timeout=runner.QUICK_TIMEOUT)
    assert runner.job_timeout(runner.Job("cpuwork", "direct"), quick) == runner.QUICK_TIMEOUT
    told = runner.Options(timeout=20.0, timeout_given=True)
    assert runner.job_timeout(runner.Job("memops", "direct"), told) == 20.0


def test_the_driver_lists_the_workloads():
    p = subprocess.run([str(ISOB), "list", "--json"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    listed = {b["name"]: b for b in doc["benchmarks"]}
    for name in WORKLOADS:
        assert name in listed, name
        assert listed[name]["needs_mechanism"] is True
        assert listed[name]["summary"]


def test_worksweep_runs_and_is_stored(real):
    doc, p = real.json("run", "worksweep", "--quick", "-m", "direct", "--json")
    assert p.returncode == 0, p.stderr
    results = doc["results"]
    assert [r["status"] for r in results] == ["ok"] * 7
    assert sorted(r["params"]["k"] for r in results) == [0, 10, 100, 1000, 10000, 100000, 1000000]
    for r in results:
        # The checked value travels with k, as the break-even computation needs.
        assert isinstance(r["params"]["value"], int) and r["params"]["calls_checked"] > 0
        assert r["n"] > 0
    con = sqlite3.connect(doc["db"])
    n = con.execute("select count(*) from results where run_id = ?", (doc["run_id"],)).fetchone()[0]
    assert n == 7


def _mem_available() -> int:
    for line in open("/proc/meminfo"):
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def test_memops_refuses_a_block_beyond_memory_up_front():
    if 16 << 30 <= _mem_available() // 2:
        pytest.skip("more than 32 GiB available: no --sizes value isob takes is too big here")
    p = subprocess.run([str(ISOB), "memops", "-m", "direct", "--sizes", "16G"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and "MemAvailable" in lines[0], p.stderr
    assert "Traceback" not in p.stderr
    # Refused before measuring: no header, no result.
    assert p.stdout == ""


def test_scale_limit_is_an_option():
    p = subprocess.run([str(ISOB), "scale", "-m", "direct", "--limit", "0"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr


def test_workload_outputs_do_not_split_configs():
    """What a workload result measured (faults, rates, counts, where it ran)
    is output, so repetitions pool and a mechanism finds its `direct`."""
    from isobench.analysis.kit import runs
    ws = {"placement": "same-cpu", "variant": "entry", "k": 1000, "kernel": "lcg-xorshift64",
          "seed": 1, "value": 2, "calls_checked": 5000, "ns_per_iteration": 2.5, "batch_k": 250}
    assert runs.identity(ws) == {"placement": "same-cpu", "variant": "entry", "k": 1000,
                                     "kernel": "lcg-xorshift64", "seed": 1, "value": 2}
    mo = {"where": "in", "step": "write", "size_bytes": 1 << 26, "minor_faults": [16384],
          "fault_site": "the compartment's server process", "gbps": 1.2}
    assert runs.identity(mo) == {"where": "in", "step": "write", "size_bytes": 1 << 26}
    for name in WORKLOADS:
        assert runs.kind(name) != runs.UNKNOWN_KIND, name
