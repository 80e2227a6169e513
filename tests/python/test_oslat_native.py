"""oslat through the real native driver (build/isob): what `isob list --json`
says about it for the Python side, its bad-input contract, and that
`isobench run oslat` stores its results.  Counts, keys and statuses only;
nothing here asserts how long anything took."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import REPO, Isobench

ISOB = REPO / "build" / "isob"
FAMILIES = {"ctx": "IV", "fs": "V", "ipc": "VI", "proc": "III", "bw": "BW"}
CONFINEMENTS = ("none", "seccomp-allow", "seccomp-notify", "ptrace", "landlock", "userns")


def isob(*args: str) -> subprocess.CompletedProcess:
    if not ISOB.exists():
        pytest.fail(f"{ISOB} is missing: run `make` (make test builds it first)")
    return subprocess.run([str(ISOB), *args], capture_output=True, text=True, timeout=120)


def test_list_names_oslat_its_primitives_and_the_confinements():
    p = isob("list", "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    oslat = next(b for b in doc["benchmarks"] if b["name"] == "oslat")
    assert oslat["needs_mechanism"] is False and oslat["takes_confine"] is True
    prims = oslat["primitives"]
    assert len(prims) == len({p["name"] for p in prims}) == 30
    for prim in prims:
        assert FAMILIES[prim["family"]] == prim["table"]
        assert prim["summary"] and isinstance(prim["two_contexts"], bool)
    assert {"null-syscall", "pipe", "rpc-tcp", "page-fault", "ctx", "bw-pipe", "bw-mem"} <= {
        p["name"] for p in prims}
    confs = doc["confinements"]
    assert tuple(c["name"] for c in confs) == CONFINEMENTS
    for c in confs:
        assert c["summary"] and c["threat"] and c["variants"]
        assert isinstance(c["available"], bool)
        assert c["available"] or c["reason"]
    assert next(c for c in confs if c["name"] == "seccomp-allow")["variants"] == ["1", "300", "300-args"]
    # Other benchmarks take no confinement.
    assert all(not b["takes_confine"] for b in doc["benchmarks"] if b["name"] != "oslat")


@pytest.mark.parametrize("args", [
    ("oslat", "--confine", "chroot"),
    ("oslat", "--confine", "seccomp-allow:9"),
    ("oslat", "--primitive", "null-syscall,teleport"),
    ("switch", "-m", "direct", "--confine", "none"),
    ("oslat", "-m", "direct"),
])
def test_bad_input_is_one_line_and_exit_2(args):
    p = isob(*args)
    assert p.returncode == 2, (args, p.stderr)
    assert len(p.stderr.strip().splitlines()) == 1, (args, p.stderr)
    assert "Traceback" not in p.stderr and not p.stdout


def test_one_primitive_under_a_confinement_carries_its_evidence():
    p = isob("oslat", "--n", "100", "--confine", "seccomp-allow:300",
             "--primitive", "null-syscall")
    lines = [json.loads(l) for l in p.stdout.splitlines()]
    results = [l for l in lines if l["type"] == "result"]
    assert len(results) == 1
    r = results[0]
    params = r["params"]
    assert (params["confine"], params["confine_variant"]) == ("seccomp-allow", "300")
    if r["status"] == "skipped":
        assert p.returncode == 4 and r["reason"]
        pytest.skip(r["reason"])
    assert p.returncode == 0, p.stderr
    assert r["status"] == "ok" and len(r["samples"]) == 100
    assert params["confine_evidence"]["seccomp_mode"] == 2
    assert params["confine_evidence"]["rules"] == 300
    assert params["work"]["wrong_returns"] == 0 and params["work"]["ops"] >= 100


def test_run_oslat_stores_every_primitive(tmp_path):
    ib = Isobench(tmp_path)
    ib.env["ISOBENCH_ISOB"] = str(ISOB)
    # `none` alone: the default is every confinement available here, which
    # test_bench_options covers against the fake isob.
    doc, p = ib.json("run", "oslat", "--quick", "--n", "50", "--confine", "none", "--json")
    assert p.returncode == 0, p.stderr
    results = doc["results"]
    assert {r["benchmark"] for r in results} == {"oslat"}
    assert all(r["status"] in ("ok", "skipped") for r in results), \
        [(r["params"].get("primitive"), r["reason"]) for r in results if r["status"] == "failed"]
    prims = {r["params"]["primitive"] for r in results}
    assert len(prims) == 30
    assert {r["params"]["confine"] for r in results} == {"none"}
