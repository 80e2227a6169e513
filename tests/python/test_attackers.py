"""The attacker matrix: the summary rule, the `list --json` contract, and the
matrix printed by list, show and the report (against the fake driver)."""

import pytest

from isobench.core import attackers
from isobench.measure.driver import _isolation_from


def cells(inp, same="enforced", other="enforced", root="leaks", tracer="enforced"):
    return {a: {"verdict": v, "method": f"{a} method", "evidence": f"{a} evidence",
                "condition": f"{a} condition"}
            for a, v in zip(attackers.ATTACKERS, (inp, same, other, root, tracer))}


@pytest.mark.parametrize("matrix, claims, want", [
    # All three enforced; root leaking does not lower the summary.
    (cells("enforced"), True, "enforced"),
    (cells("enforced", root="enforced"), True, "enforced"),
    (cells("enforced", root="untested"), True, "enforced"),
    # The pre-attached tracer is the other side of same-uid's condition:
    # shown, never counted.
    (cells("enforced", tracer="leaks"), True, "enforced"),
    (cells("enforced", tracer="untested"), True, "enforced"),
    # In-process enforced, an OS-level cell leaks or could not be tested.
    (cells("enforced", same="leaks"), True, "partial"),
    (cells("enforced", other="leaks"), True, "partial"),
    (cells("enforced", other="untested", root="untested"), True, "partial"),
    # The in-process cell decides none / failed / untested, whatever the others say.
    (cells("leaks", same="enforced", other="enforced"), False, "none"),
    (cells("leaks"), True, "failed"),
    (cells("untested"), True, "untested"),
    (cells("not-applicable"), True, "untested"),
])
def test_summary_rule(matrix, claims, want):
    assert attackers.summary(matrix, claims) == want


def test_cells_are_validated():
    line = {"attackers": cells("enforced")}
    assert set(attackers.cells_from_line(line)) == set(attackers.ATTACKERS)
    broken = cells("enforced")
    del broken["root"]
    with pytest.raises(ValueError, match="root"):
        attackers.cells_from_line({"attackers": broken})
    odd = cells("enforced")
    odd["same-uid"]["verdict"] = "mostly"
    with pytest.raises(ValueError, match="mostly"):
        attackers.cells_from_line({"attackers": odd})
    with pytest.raises(ValueError):
        attackers.cells_from_line({})
    # Version 2 must carry the pre-attached cell; version 1 never had it.
    v2 = cells("enforced")
    del v2["pre-attached"]
    with pytest.raises(ValueError, match="pre-attached"):
        attackers.cells_from_line({"matrix_version": 2, "attackers": v2})
    got = attackers.cells_from_line({"matrix_version": 1, "attackers": v2})
    assert got["pre-attached"]["verdict"] == "untested"
    assert "matrix version 1" in got["pre-attached"]["evidence"]


def test_a_line_without_a_matrix_is_untested_never_enforced():
    iso = _isolation_from({"type": "isolation", "verdict": "enforced", "claims": True})
    assert iso.state == "untested"
    assert "matrix" in iso.reason
    assert all(c["verdict"] == "untested" for c in iso.attackers.values())


def by_name(items):
    return {m["name"]: m for m in items}


def test_list_json_has_the_matrix(isobench):
    doc, p = isobench.json("list", "--json")
    assert p.returncode == 0, p.stderr
    assert doc["isolation_context"]["yama_ptrace_scope"] is None
    assert isinstance(doc["isolation_context"]["euid"], int)
    for m in doc["mechanisms"]:
        assert set(m["attackers"]) == set(attackers.ATTACKERS), m["name"]
        for a, c in m["attackers"].items():
            assert {"verdict", "method", "evidence", "condition"} <= set(c)
            assert c["verdict"] in attackers.CELL_VERDICTS
        # The one word is the rule applied to the cells, never declared.
        assert m["isolation"] == attackers.summary(m["attackers"], "isolates_memory" in m["props"])
    mechs = by_name(doc["mechanisms"])
    pf = mechs["process-futex"]["attackers"]
    assert [pf[a]["verdict"] for a in attackers.ATTACKERS] == ["enforced", "enforced", "enforced", "leaks",
                                                               "leaks"]
    assert mechs["process-futex"]["isolation"] == "enforced"
    assert mechs["direct"]["attackers"]["in-process"]["verdict"] == "leaks"
    assert mechs["direct"]["isolation"] == "none"
    # Not available here: every cell untested, with the reason, and still
    # what it would cover.
    assert all(c["verdict"] == "untested" and c["evidence"] == "CPU has no PKU"
               for c in mechs["mpk"]["attackers"].values())
    assert "not sigreturn frames" in mechs["mpk"]["attackers"]["in-process"]["condition"]


def test_a_leaking_os_cell_makes_it_partial(isobench):
    doc, p = isobench.json("list", "--json", FAKE_ISOB_MATRIX="partial")
    assert p.returncode == 0, p.stderr
    pf = by_name(doc["mechanisms"])["process-futex"]
    assert pf["isolation"] == "partial"
    assert "same-uid" in pf["isolation_reason"]


def test_untested_probes_are_never_enforced(isobench):
    doc, p = isobench.json("list", "--json", FAKE_ISOB_MATRIX="no-root")
    pf = by_name(doc["mechanisms"])["process-futex"]
    assert pf["attackers"]["other-uid"]["verdict"] == "untested"
    assert pf["isolation"] == "partial"
    p = isobench("list", FAKE_ISOB_MATRIX="no-root")
    assert "process-futex other-uid: untested: switching to another uid needs root" in p.stdout


def test_missing_matrix_is_untested(isobench):
    doc, p = isobench.json("list", "--json", FAKE_ISOB_MATRIX="missing")
    assert all(m["isolation"] == "untested" for m in doc["mechanisms"])


def test_list_prints_the_matrix(isobench):
    # The default listing fits 100 columns: each cell's verdict word.
    p = isobench("list")
    assert p.returncode == 0, p.stderr
    assert max(len(line) for line in p.stdout.splitlines()) <= 100
    matrix = p.stdout[p.stdout.index("Isolation by attacker"):]
    row = next(l for l in matrix.splitlines() if l.startswith("process-futex "))
    assert row.split()[1:] == ["enforced", "enforced", "enforced", "enforced", "leaks", "leaks"]
    assert "`isobench list --wide`" in matrix
    # --wide: how each cell was found, and the conditions.
    p = isobench("list", "--wide")
    assert p.returncode == 0, p.stderr
    assert "Isolation by attacker" in p.stdout
    assert "Conditions (what each cell covers" in p.stdout
    row = next(l for l in p.stdout.splitlines() if l.startswith("process-futex") and "SEGV_MAPERR" in l)
    assert row.split()[:3] == ["process-futex", "enforced", "enforced"]
    assert "leaks: vm_readv,vm_writev,mem-read,mem-write,ptrace,pidfd_getfd" in row


def test_run_records_the_matrix_and_show_and_report_print_it(isobench, tmp_path):
    doc, p = isobench.json("run", "switch", "-m", "direct", "-m", "process-futex", "--quick", "--json")
    assert p.returncode == 0, p.stderr
    iso = doc["environment"]["isolation"]
    assert [m["name"] for m in iso["mechanisms"]] == ["direct", "process-futex"]
    assert by_name(iso["mechanisms"])["process-futex"]["attackers"]["root"]["verdict"] == "leaks"
    shown = isobench("show")
    assert shown.returncode == 0, shown.stderr
    assert "Isolation by attacker" in shown.stdout
    # The default table names each cell's verdict; --wide adds how it was found.
    matrix = shown.stdout[shown.stdout.index("Isolation by attacker"):]
    row = next(l for l in matrix.splitlines() if l.startswith("process-futex "))
    assert row.split()[1:] == ["enforced", "enforced", "enforced", "enforced", "leaks", "leaks"]
    wide = isobench("show", "--wide")
    assert any(l.startswith("process-futex") and "enforced (SEGV_MAPERR)" in l
               for l in wide.stdout.splitlines())
    out = tmp_path / "report"
    r = isobench("report", "latest", "-o", str(out))
    assert r.returncode == 0, r.stderr
    md = (out / "summary.md").read_text()
    assert "## Isolation by attacker" in md and "| process-futex | enforced |" in md
    assert "Isolation by attacker" in (out / "index.html").read_text()


def test_a_run_of_os_primitives_only_asks_no_isolation(isobench):
    doc, p = isobench.json("run", "pingpong", "--quick", "--json")
    assert p.returncode == 0, p.stderr
    assert "isolation" not in doc["environment"]
    assert not any(c[0] == "isolation" for c in isobench.isob_calls())


def test_cells_carry_their_conditions_and_evidence(isobench):
    doc, p = isobench.json("list", "--json")
    assert p.returncode == 0, p.stderr
    mechs = by_name(doc["mechanisms"])
    same = mechs["process-futex"]["attackers"]["same-uid"]
    assert same["condition"].startswith("for compartments created by a caller non-dumpable at creation")
    assert "Yama ptrace_scope" in same["evidence"] and "TracerPid at creation" in same["evidence"]
    assert mechs["process-futex"]["isolation_detail"]["caller_tracer_pid"] == 0
    tracer = mechs["process-futex"]["attackers"]["pre-attached"]
    # Both tracers are named: the naive one refused, the hiding one in.
    assert tracer["verdict"] == "leaks"
    assert "a tracer that does not hide: attached; creation refused" in tracer["evidence"]
    assert "one that rewrites TracerPid to 0" in tracer["evidence"]
    assert [r["verdict"] for r in tracer["tracers"]] == ["enforced", "leaks"]
    # A cell that is never counted: the summary stands on the same-uid cell's condition.
    assert mechs["process-futex"]["isolation"] == "enforced"
    # Where the tracer gets in, the cell names the probes that read the secret.
    direct = mechs["direct"]["attackers"]["pre-attached"]
    assert direct["verdict"] == "leaks"
    assert [pr["probe"] for pr in direct["probes"] if pr["leak"]] == ["process_vm_readv", "/proc/PID/mem read"]


def test_a_leaking_tracer_cell_is_shown_and_does_not_change_the_summary(isobench):
    doc, p = isobench.json("list", "--json", FAKE_ISOB_MATRIX="tracer-leaks")
    pf = by_name(doc["mechanisms"])["process-futex"]
    assert pf["attackers"]["pre-attached"]["verdict"] == "leaks"
    assert pf["isolation"] == "enforced"
    p = isobench("list", "--wide", FAKE_ISOB_MATRIX="tracer-leaks")
    row = next(l for l in p.stdout.splitlines() if l.startswith("process-futex") and "SEGV_MAPERR" in l)
    assert row.rstrip().endswith("leaks: vm_readv,mem-read")


def test_list_prints_each_condition_once(isobench):
    p = isobench("list", "--wide")
    assert p.returncode == 0, p.stderr
    out = p.stdout[p.stdout.index("Conditions"):]
    line = next(l for l in out.splitlines() if l.startswith("  same-uid (process-futex"))
    assert "while no process traced the caller" in line
    assert sum("pre-attached (" in l for l in out.splitlines()) == 1
    row = next(l for l in p.stdout.splitlines() if l.startswith("process-futex") and "SEGV_MAPERR" in l)
    assert row.rstrip().endswith("leaks: vm_readv,mem-read (hiding)")
    # A cell where both tracers were kept out names how.
    p = isobench("list", "--wide", FAKE_ISOB_MATRIX="tracer-refused")
    row = next(l for l in p.stdout.splitlines() if l.startswith("process-futex") and "SEGV_MAPERR" in l)
    assert row.rstrip().endswith("enforced (refused traced)")


def test_matrix_version_1_lines_still_read(isobench):
    doc, p = isobench.json("list", "--json", FAKE_ISOB_MATRIX="v1")
    assert p.returncode == 0, p.stderr
    pf = by_name(doc["mechanisms"])["process-futex"]
    assert pf["isolation"] == "enforced"
    assert pf["attackers"]["pre-attached"]["verdict"] == "untested"
    assert "matrix version 1" in pf["attackers"]["pre-attached"]["evidence"]
    assert pf["attackers"]["same-uid"]["condition"] is None


def test_the_same_uid_cell_carries_its_fork_window(isobench):
    """A separate address space's same-uid cell: the precondition, and the
    racer's result against a dumpable caller, in the listing and its JSON."""
    doc, p = isobench.json("list", "--json")
    assert p.returncode == 0, p.stderr
    mechs = by_name(doc["mechanisms"])
    same = mechs["process-futex"]["attackers"]["same-uid"]
    assert same["precondition"] == "caller non-dumpable at creation"
    assert same["dumpable_caller"] == "leaks"
    fw = attackers.fork_window(same)
    assert fw["dumpable_caller"] == "leaks" and [r["caller"] for r in fw["runs"]] == ["non-dumpable",
                                                                                         "dumpable"]
    assert mechs["process-futex"]["isolation_detail"]["caller_dumpable"] is False
    # An in-process compartment has no fork to race.
    assert attackers.fork_window(mechs["direct"]["attackers"]["same-uid"]) is None
    p = isobench("list", "--wide")
    row = next(l for l in p.stdout.splitlines() if l.startswith("process-futex") and "SEGV_MAPERR" in l)
    assert "if caller non-dumpable at creation (dumpable caller: leaks)" in row


def test_a_dumpable_caller_makes_the_same_uid_cell_leak(isobench):
    doc, p = isobench.json("list", "--json", FAKE_ISOB_MATRIX="dumpable")
    assert p.returncode == 0, p.stderr
    pf = by_name(doc["mechanisms"])["process-futex"]
    assert pf["attackers"]["same-uid"]["verdict"] == "leaks"
    assert pf["isolation"] == "partial"
    assert pf["isolation_detail"]["caller_dumpable"] is True
