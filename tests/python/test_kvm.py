"""SEIMI's Table I on KVM (docs/kvm.md) through the real native driver: the
vmcall benchmark's exits beside the null system call, the kvm mechanism's
round trip and its isolation matrix, and the skip where /dev/kvm does not
open.  Where this machine has no usable KVM, the cases check the skip and
its reason instead.  The checks are statuses, labels, the guest's own
checks and the caveat, never how long anything took."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import REPO, Isobench, limit

ISOB = REPO / "build" / "isob"
RUN_TIMEOUT = limit(600)
GUEST_EXITS = {"none", "io", "mmio", "cpuid", "hypercall"}
CAVEAT = "nested virtualization: costs more than on bare metal"


def isob(*args: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, list[dict]]:
    p = subprocess.run([str(ISOB), *args], capture_output=True, text=True, timeout=RUN_TIMEOUT,
                       env=env)
    assert "Traceback" not in p.stderr
    return p, [json.loads(l) for l in p.stdout.splitlines() if l.strip()]


def results(lines: list[dict]) -> list[dict]:
    return [l for l in lines if l["type"] == "result"]


@pytest.fixture(autouse=True)
def _built():
    if not ISOB.exists():
        pytest.fail(f"{ISOB} is missing: run `make` (make test builds it first)")


def kvm_here() -> tuple[bool, str | None]:
    """Whether the kvm mechanism can run here, and isob's reason if not."""
    p, lines = isob("list", "--json")
    assert p.returncode == 0, p.stderr
    m = {m["name"]: m for m in lines[0]["mechanisms"]}["kvm"]
    return bool(m["available"]), m.get("reason")


def real_isobench(tmp_path) -> Isobench:
    ib = Isobench(tmp_path)
    ib.env["ISOBENCH_ISOB"] = str(ISOB)
    return ib


def test_vmcall_skips_every_exit_where_the_device_does_not_open():
    env = {**os.environ, "ISOBENCH_KVM_DEVICE": "/nonexistent/kvm"}
    p, lines = isob("vmcall", "--quick", "--n", "200", env=env)
    assert p.returncode == 0, p.stderr
    rs = results(lines)
    guest = [r for r in rs if r["params"]["exit"] != "syscall"]
    assert {r["params"]["exit"] for r in guest} == GUEST_EXITS
    for r in guest:
        assert r["status"] == "skipped"
        assert "/nonexistent/kvm" in r["reason"] and "No such file" in r["reason"]
    # The null system call does not need KVM: it is measured all the same.
    (sc,) = [r for r in rs if r["params"]["exit"] == "syscall"]
    assert sc["status"] == "ok" and sc["n"] > 0


def test_kvm_mechanism_skips_with_the_reason_where_the_device_does_not_open():
    env = {**os.environ, "ISOBENCH_KVM_DEVICE": "/nonexistent/kvm"}
    p, lines = isob("switch", "-m", "kvm", "--quick", "--n", "100", env=env)
    assert p.returncode == 4  # skipped: nothing could be measured here
    (r,) = results(lines)
    assert r["status"] == "skipped" and "/nonexistent/kvm" in r["reason"]
    p, lines = isob("isolation", "-m", "kvm", env=env)
    assert lines[0]["verdict"] == "skipped" and "/nonexistent/kvm" in lines[0]["reason"]
    assert all(c["verdict"] == "untested" for c in lines[0]["attackers"].values())


def test_vmcall_quick_measures_the_exits_beside_the_null_system_call(tmp_path):
    ib = real_isobench(tmp_path)
    doc, p = ib.json("run", "vmcall", "--quick", "--n", "300", "--json")
    assert p.returncode == 0, p.stderr
    rs = [r for r in doc["results"] if r["benchmark"] == "vmcall"]
    by = {(r["params"]["exit"], r["params"].get("ring")): r for r in rs}
    assert by[("syscall", None)]["status"] == "ok"
    available, reason = kvm_here()
    for (x, ring), r in by.items():
        if x == "syscall":
            continue
        # Every result says whether its KVM is nested, and the caveat when it is.
        assert isinstance(r["params"]["nested"], bool)
        if r["params"]["nested"]:
            assert r["params"]["caveat"] == CAVEAT
        if not available:
            assert r["status"] == "skipped" and r["reason"]
        elif x in ("io", "mmio", "none"):
            assert r["status"] == "ok", r["reason"]
        elif r["status"] == "ok":
            # The guest checked every in-kernel exit's answer.
            assert r["params"]["guest_bad"] == 0 and r["params"]["exits_per_run"] > 1
        else:
            assert r["status"] == "skipped" and "does not handle the guest's" in r["reason"]
    shown = ib("show")
    assert shown.returncode == 0, shown.stderr
    assert "vmcall: exits out of a KVM guest beside the null system call (SEIMI, Table I)" \
        in shown.stdout
    assert "SEIMI's Table I" in shown.stdout
    if available and any(r["params"].get("nested") for r in rs):
        assert CAVEAT in shown.stdout


def test_switch_kvm_quick_runs_the_trusted_code_in_the_guest(tmp_path):
    ib = real_isobench(tmp_path)
    doc, p = ib.json("run", "switch", "-m", "kvm", "--quick", "--n", "300", "--placement",
                     "same-cpu", "--json")
    available, reason = kvm_here()
    rs = [r for r in doc["results"] if r["benchmark"] == "switch" and r["mechanism"] == "kvm"]
    assert rs, p.stderr
    if not available:
        assert all(r["status"] == "skipped" for r in rs)
        return
    assert p.returncode == 0, p.stderr
    entry = [r for r in rs if r["params"].get("variant") == "entry"]
    assert {r["params"]["payload"] for r in entry} == {0, 64, 4096}
    for r in entry:
        # Each call's result was checked (a wrong one fails the result).
        assert r["status"] == "ok", r["reason"]
        assert "ring" in r["params"]["guest"]
        if r["params"]["nested"]:
            assert r["params"]["caveat"] == CAVEAT
    shown = ib("show")
    assert "kvm mechanism" in shown.stdout


def test_kvm_isolation_matrix_shows_the_host_reading_guest_memory():
    available, reason = kvm_here()
    p, lines = isob("isolation", "-m", "kvm")
    if not available:
        assert lines[0]["verdict"] == "skipped" and lines[0]["reason"] == reason
        return
    assert p.returncode == 0, p.stderr
    (m,) = lines
    # The mechanism claims no memory isolation, and the matrix measures why:
    # the caller reads and writes the secret in the guest's memory.
    assert m["claims"] is False
    cell = m["attackers"]["in-process"]
    assert cell["verdict"] == "leaks"
    assert "read the secret" in cell["evidence"]
    # As root every cell is measured, none left untested (the unprivileged
    # caller makes its guest through the /dev/kvm descriptor it inherited).
    if os.geteuid() == 0:
            assert all(c["verdict"] != "untested" for c in m["attackers"].values()), m["attackers"]
