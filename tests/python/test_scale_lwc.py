"""`isob scale -m lwc` against the real driver: the lwC emulation's table of
shared regions grows, so scale goes past its first 64 slots, and where
creating stops the cause names the real limit (what, where, how to raise
it), here the descriptor limit lowered for the test.  Counts and words
only, never a time."""

from __future__ import annotations

import json
import resource
import subprocess

import pytest

from conftest import REPO

ISOB = REPO / "build" / "isob"


def _create(limit: int, nofile: int | None = None) -> dict:
    if not ISOB.exists():
        pytest.fail(f"{ISOB} is missing: run `make` (make test builds it first)")

    def lower():
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    p = subprocess.run([str(ISOB), "scale", "-m", "lwc", "--quick", "--limit", str(limit)],
                       capture_output=True, text=True, timeout=300, preexec_fn=lower)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    [create] = [d for d in lines if d.get("type") == "result"
                and d["params"].get("variant") == "create"]
    [destroy] = [d for d in lines if d.get("type") == "result"
                 and d["params"].get("variant") == "destroy"]
    assert destroy["params"]["processes_left"] == 0
    return create


def test_scale_lwc_goes_past_the_first_64_regions():
    c = _create(100)
    assert c["status"] == "ok"
    assert c["params"]["created"] == 100
    assert c["params"]["cause"].startswith("the limit asked for")


def test_scale_lwc_names_the_descriptor_limit():
    c = _create(300, nofile=96)
    p = c["params"]
    assert 10 < p["created"] < 96
    assert p["errno_name"] == "EMFILE"
    cause = p["cause"]
    assert f"create number {p['created'] + 1} failed" in cause
    assert "RLIMIT_NOFILE soft 96" in cause and "ulimit -n" in cause
