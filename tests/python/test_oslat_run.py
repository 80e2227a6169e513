"""`isobench run oslat` end to end against the real driver (build/isob), and
the driver's own refusals reaching the user before a store is opened.  They
assert counts, statuses and layout, never how long anything took."""

from __future__ import annotations

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


def test_oslat_null_syscall_under_seccomp_allow(real):
    doc, p = real.json("run", "oslat", "--quick", "--primitive", "null-syscall", "--confine",
                       "none,seccomp-allow", "--repeat", "2", "--json")
    assert p.returncode == 0, p.stderr
    results = doc["results"]
    # none and the three variants of seccomp-allow, twice each.
    seen = sorted({(r["params"]["confine"], r["params"]["confine_variant"]) for r in results})
    assert seen == [("none", "default"), ("seccomp-allow", "1"), ("seccomp-allow", "300"),
                    ("seccomp-allow", "300-args")]
    assert all(r["status"] == "ok" for r in results), [r["reason"] for r in results]
    assert len(results) == 2 * 4
    for r in results:
        assert r["params"]["primitive"] == "null-syscall" and r["params"]["table"] == "III"
        assert r["params"]["work"]["wrong_returns"] == 0
    section = doc["summary"]["sections"]["oslat"]
    assert [c["label"] for c in section["columns"]] == [
        "none", "seccomp-allow:1", "seccomp-allow:300", "seccomp-allow:300-args"]
    [t] = section["tables"]
    assert t["table"] == "III"
    [row] = t["rows"]
    assert row["label"] == "null-syscall getppid"
    for col in ("seccomp-allow:1", "seccomp-allow:300", "seccomp-allow:300-args"):
        slow = row["cells"][col]["slowdown"]
        assert slow["value"] > 0 and slow["interval"] is not None
    assert "oslat: SEIMI Table III: process operations" in real("show").stdout


@pytest.mark.parametrize("args, says", [
    (("oslat", "--confine", "seccomp-allow:7"), "confinement seccomp-allow has no variant '7'"),
    (("pingpong", "--protect", "ptrace"), "unknown --protect value 'ptrace' for pingpong"),
    (("delegate", "--depth", "5000"), "delegate: --depth"),
    (("sched", "--slice", "7"), "sched"),
])
def test_the_driver_refuses_before_a_store_is_opened(real, args, says):
    p = real("run", *args, "--quick")
    assert says in assert_one_error_line(p)
    assert not real.db.exists()


def test_bandwidths_under_two_confinements(real):
    doc, p = real.json("run", "oslat", "--quick", "--primitive", "bw-pipe,bw-mem,bw-file-rd",
                       "--confine", "none,seccomp-allow:1", "--repeat", "2", "--json")
    assert p.returncode == 0, p.stderr
    results = doc["results"]
    # pipe, mem rd/wr/cp and file under none and seccomp-allow:1, twice each.
    assert len(results) == 2 * 2 * 5
    assert all(r["status"] == "ok" for r in results), [r["reason"] for r in results]
    for r in results:
        w = r["params"]["work"]
        assert r["params"]["table"] == "BW" and w["bytes"] > 0 and w["passes"] > 0
        assert w.get("wrong_chunks", 0) == 0 and w.get("wrong_passes", 0) == 0
        if r["params"]["primitive"] == "bw-file-rd":
            assert w["fs_type"] and w["fs_dir"].startswith("/")
    bw = next(t for t in doc["summary"]["sections"]["oslat"]["tables"] if t["table"] == "BW")
    assert [r["label"] for r in bw["rows"]] == ["bw-pipe 64K chunks", "bw-mem rd", "bw-mem wr",
                                               "bw-mem cp", "bw-file-rd 64K chunks"]
    for row in bw["rows"]:
        for col in ("none", "seccomp-allow:1"):
            assert row["cells"][col]["mb_s"] > 0
        assert row["cells"]["seccomp-allow:1"]["slowdown"]["value"] > 0
    out = real("show").stdout
    assert "oslat: LMbench bandwidths" in out and "filesystem: " in out
