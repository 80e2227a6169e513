"""The microkernel sections (IPC, delegation, scheduling) against synthetic
runs whose values are known (os_fixtures.py), and their renderings."""

from __future__ import annotations

import pytest

from isobench.analysis import summary
from isobench.core import stats
from isobench.render.kit import plots, table
from isobench.render import report
from isobench.render import console
from isobench.render import figures

from fixture_runs import fixture, load_doc
from os_fixtures import delegate_run, pingpong_run, sched_run

GEO = stats.geomean([0.99, 1.0, 1.01])


def _sections(tmp_path, run):
    return summary.build(load_doc(tmp_path, run))


def test_ipc_same_and_cross_cpu_apart_with_the_delta_against_none(tmp_path):
    doc = _sections(tmp_path, pingpong_run())
    s = doc["sections"]["microkernel-ipc"]
    assert [t["placement"] for t in s["tables"]] == ["same-cpu", "cross-cpu"]
    assert s["protections"] == ["none", "seccomp"] and s["virtualized"] is True
    same, cross = s["tables"]
    futex = next(r for r in same["rows"] if r["primitive"] == "futex")
    none, sec = futex["cells"]["none"], futex["cells"]["seccomp"]
    assert none["us"] == pytest.approx(2.0 * GEO, rel=1e-3)
    assert none["p5_us"] <= none["us"] <= none["p95_us"]
    assert sec["vs_none"]["value"] == pytest.approx(1.5, rel=1e-3)
    assert sec["vs_none"]["interval"] is not None
    assert sec["delta_us"] == pytest.approx(1.0 * GEO, rel=1e-3)
    assert sec["checked"]["bad_replies"] == 0 and sec["checked"]["echoed"] == 63
    # Cross-cpu is its own table, never pooled with same-cpu.
    xf = next(r for r in cross["rows"] if r["primitive"] == "futex")
    assert xf["cells"]["none"]["us"] == pytest.approx(20.0 * GEO, rel=1e-3)


def test_ipc_sets_the_slides_figures_beside_ours_derived_ones_flagged(tmp_path):
    s = _sections(tmp_path, pingpong_run())["sections"]["microkernel-ipc"]
    slides = {x["id"]: x for x in s["slides"]}
    assert slides["cheri-ukernel-ipc-caplookup-cap"]["derived"] is False
    total = slides["cheri-ukernel-ipc-total-nocap"]
    assert total["derived"] is True and total["unit"] == "cycles"
    # Beside it: the local futex round trip, in its own unit, never cycles.
    assert [l["unit"] for l in total["local"]] == ["ns"]
    text = console.run_report(_sections(tmp_path / "b", pingpong_run()))
    # Every line fits a terminal but the last, which names the store by its path.
    assert max(map(len, text.splitlines()[:-1])) <= table.WIDTH
    assert "DERIVED" in text and "pingpong: IPC round trip, cross-cpu [us]" in text


def test_delegate_rows_hop_end_to_end_revocation_and_checks(tmp_path):
    s = _sections(tmp_path, delegate_run())["sections"]["microkernel-delegate"]
    assert s["revocations"] == ["truncate", "unmap"]
    assert [(r["variant"], r["depth"]) for r in s["rows"]] == [
        ("threads", 1), ("threads", 4), ("processes", 1), ("processes", 4)]
    p4 = s["rows"][3]
    assert p4["hop"]["us"] == pytest.approx(6.0 * GEO, rel=1e-3)
    assert p4["end_to_end"]["us"] == pytest.approx(24.0 * GEO, rel=1e-3)
    assert p4["revoke"]["truncate"]["holders_faulted"] == 12
    assert p4["revoke"]["truncate"]["fault_expected"] == "SIGBUS"
    assert p4["checked"]["checksums_verified"] == 12
    assert s["rows"][0]["revoke"] == {}
    text = console.run_report(_sections(tmp_path / "b", delegate_run()))
    # Every line fits a terminal but the last, which names the store by its path.
    assert max(map(len, text.splitlines()[:-1])) <= table.WIDTH
    assert "truncate: 12/12 SIGBUS; unmap: 12/12 SIGSEGV" in text
    # The per-result table (a row per result, headed "mechanism") only with --wide.
    assert "delegate: in its own tables below; every result in one table: --wide" in text
    assert not any(line.startswith("mechanism ") for line in text.splitlines())
    wide = console.run_report(_sections(tmp_path / "c", delegate_run()), wide=True)
    assert any(line.startswith("benchmark ") for line in wide.splitlines())


def test_sched_makespan_against_the_ideal_per_repetition(tmp_path):
    s = _sections(tmp_path, sched_run())["sections"]["microkernel-sched"]
    rows = {(r["kind"], r["workers"]): r for r in s["rows"]}
    assert rows[("threads", 1)]["vs_ideal"]["value"] == pytest.approx(1.0, rel=1e-3)
    assert rows[("threads", 4)]["vs_ideal"]["overhead_pct"] == pytest.approx(25.0, rel=1e-3)
    assert rows[("processes", 4)]["vs_ideal"]["value"] == pytest.approx(1.5, rel=1e-3)
    assert rows[("processes", 4)]["work_checked"] == {"slices_done": 1200,
                                                      "slices_expected": 1200}
    assert rows[("processes", 4)]["involuntary"] == 40
    text = console.run_report(_sections(tmp_path / "b", sched_run()))
    # Every line fits a terminal but the last, which names the store by its path.
    assert max(map(len, text.splitlines()[:-1])) <= table.WIDTH
    assert "+50.0%" in text and "1,200/1,200 slices" in text


def test_plots_of_delegation_and_scheduling(tmp_path):
    for run, name in ((delegate_run(), "delegate-depth"), (sched_run(), "sched-workers")):
        doc = _sections(tmp_path / name, run)
        p = {x.name: x for x in figures.draw(doc)}[name]
        assert p.figure is not None, p.note
        assert plots.save(p, tmp_path) == [f"{name}.png", f"{name}.svg"]
        md = report.render_md(doc, [])
        assert "## Microkernel" in md


def test_no_results_no_sections(tmp_path):
    doc = summary.build(load_doc(tmp_path, fixture("clean_run")))
    assert not {"microkernel-ipc", "microkernel-delegate", "microkernel-sched"} & set(
        doc["sections"])
