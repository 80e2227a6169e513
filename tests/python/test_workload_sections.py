"""The workload sections (analysis/families/workloads.py, render/families/workloads.py) on
synthetic stored runs whose every number is known: the break-even rule on a
known curve, Morello's tables with their ratios and published rows, memory
faults and rates, the cold pipe call, scale's limits; and one short real run
end to end."""

from __future__ import annotations

import math

import numpy as np
import pytest

from isobench.analysis.families import workloads
from isobench.render.kit import plots, table
from isobench.render import report, sections as render_sections
from isobench.render import console
from isobench.render import figures

from conftest import REPO, Isobench
from synthetic_runs import rep_factor, result, summary_of

KS = (0, 10, 100, 1000, 10000, 100000, 1000000)
CROSSING_NS = 500.0


def direct_ns(k: int) -> float:
    return 2.0 * k + 10.0


def worksweep_results(extra: dict[str, callable] | None = None, reps: int = 3) -> list[dict]:
    """direct: 2 ns per iteration + 10 ns; process-futex: direct + 500 ns;
    extra mechanisms: their own curve.  Stored 100 times larger, so that every
    region is long and the headline is the median (ratios do not change)."""
    curves = {"direct": direct_ns, "process-futex": lambda k: direct_ns(k) + CROSSING_NS,
              **(extra or {})}
    out = []
    for rep in range(1, reps + 1):
        for mech, f in curves.items():
            for k in KS:
                params = {"placement": "same-cpu", "variant": "entry", "k": k,
                          "kernel": "lcg-xorshift64", "seed": 7 + k, "value": 11 + k,
                          "calls_checked": 100, "batch_k": 0}
                out.append(result("worksweep", mech, params, 100 * f(k) * rep_factor(rep), rep))
    return out


def test_break_even_on_a_known_curve(tmp_path):
    doc = summary_of(tmp_path, worksweep_results())
    s = doc["sections"]["worksweep"]
    assert s["ks"] == list(KS)
    # direct's line: 100 x (2 k + 10) ns.
    assert s["direct_line"]["a_ns"] == pytest.approx(1000, rel=1e-2)
    assert s["direct_line"]["b_ns_per_k"] == pytest.approx(200, rel=1e-3)
    curve = next(c for c in s["curves"] if c["mechanism"] == "process-futex")
    by_k = {p["k"]: p for p in curve["points"]}
    # The ratio at k is (direct + crossing) / direct, from the summary's ratio to direct.
    for k in KS:
        assert by_k[k]["ratio"]["value"] == pytest.approx(1 + CROSSING_NS / direct_ns(k),
                                                          rel=1e-3)
        assert by_k[k]["ratio"]["interval"] is not None
    # The fixed cost over every k: 100 x 500 ns, the work no slower inside.
    m = curve["model"]
    assert m["c"]["value"] == pytest.approx(100 * CROSSING_NS, rel=1e-2)
    assert m["c"]["interval"][0] <= 100 * CROSSING_NS <= m["c"]["interval"][1]
    assert abs(m["g"]["value"]) < 1e-3 and m["basis"] == "interval"
    five, one = curve["break_even"]
    assert (five["threshold"], one["threshold"]) == (0.05, 0.01)
    # The true crossings: 500 / (2k + 10) = t.
    for b, t in ((five, 0.05), (one, 0.01)):
        true_k = (CROSSING_NS / t - 10) / 2
        assert b["bound"] == "="
        assert b["k"] == pytest.approx(true_k, rel=0.02)
        assert b["band"][0] <= true_k <= b["band"][1]
        assert b["work_ns"] == pytest.approx(100 * direct_ns(true_k), rel=0.02)
    assert curve["non_monotone"] == []
    # direct has a curve but no break-even of its own.
    assert next(c for c in s["curves"] if c["mechanism"] == "direct")["break_even"] == []


def test_work_slower_inside_is_never_reached_and_a_free_crossing_is_at_once(tmp_path):
    doc = summary_of(tmp_path, worksweep_results({
        "wasm": lambda k: 1.3 * direct_ns(k),                 # another ABI: 30% slower work
        "uthread": lambda k: direct_ns(k) + (0.0 if k else 0.2)}))
    s = doc["sections"]["worksweep"]
    wasm = next(c for c in s["curves"] if c["mechanism"] == "wasm")
    assert wasm["model"]["g"]["value"] == pytest.approx(0.3, abs=0.01)
    assert all(b["bound"] == "not reached" and b["k"] is None for b in wasm["break_even"])
    ut = next(c for c in s["curves"] if c["mechanism"] == "uthread")
    # A crossing of at most a few ns: at or below 5% from the smallest work on.
    five = ut["break_even"][0]
    assert five["k"] is not None and five["k"] <= 10
    text = render_sections.text_blocks(doc)[0]
    assert max(map(len, text.splitlines())) <= table.WIDTH  # fits a terminal
    assert "not reached" in text and "work slower inside g [95%]" in text
    assert "+30.00%" in text


def test_one_noisy_repetition_at_the_largest_k_vetoes_nothing(tmp_path):
    # uthread: a 50 ns crossing; one repetition at k = 1e6 three times slower
    # (a preempted run on a loaded machine).
    res = worksweep_results({"uthread": lambda k: direct_ns(k) + 50.0})
    for r in res:
        if (r["mechanism"] == "uthread" and r["params"]["k"] == 1000000
                and r["repetition"] == 2):
            r["samples"]["primary"] = [3 * v for v in r["samples"]["primary"]]
    doc = summary_of(tmp_path, res)
    ut = next(c for c in doc["sections"]["worksweep"]["curves"] if c["mechanism"] == "uthread")
    # The noisy point: a wide interval, or (the 3x process standing apart
    # from the other two) repetitions in modes, with no interval at all.
    noisy = ut["points"][-1]["ratio"]
    assert (noisy["interval"] is None and noisy.get("modes")) or noisy["interval"][1] > 1.5
    assert ut["model"]["c"]["value"] == pytest.approx(100 * 50.0, rel=0.05)
    for b, t in zip(ut["break_even"], (0.05, 0.01)):
        true_k = (50.0 / t - 10) / 2
        assert b["bound"] == "=" and b["k"] == pytest.approx(true_k, rel=0.05)
        assert b["band"][0] <= true_k <= b["band"][1] and b["band"][1] is not None


def test_a_rising_overhead_is_flagged_non_monotone():
    def pt(k, lo, hi):
        return {"k": k, "ratio": {"value": (lo + hi) / 2, "interval": [lo, hi]}}
    pts = [pt(0, 5, 6), pt(10, 0.9, 1.0), pt(100, 1.3, 1.4), pt(1000, 1.01, 1.02),
           pt(10000, 1.0, 1.01), pt(100000, 0.5, 3.0)]
    # k = 100 rose above k = 10; the wide k = 1e5 point overlaps its neighbour.
    assert workloads.non_monotone(pts) == [100]


@pytest.mark.parametrize("reps", [3, 5])
def test_the_fixed_costs_interval_covers_it(reps):
    # 400 sweeps, 2% lognormal scatter per repetition, a 500 ns crossing on
    # 2 ns per iteration: c's interval covers 500 in 0.93-0.995 of them, and
    # k*'s band covers the true k* (4,995 for 5%) as often (nominal 0.95;
    # measured 0.965-0.99: the Knapp-Hartung scaling errs on the safe side).
    rng = np.random.default_rng(40 + reps)
    ks = list(KS)
    line = (10.0, 2.0)
    hits = band_hits = 0
    for _ in range(400):
        def reps_of(f):
            return {k: ([f(k) * math.exp(rng.normal(0, 0.02)) for _ in range(reps)], 0.0)
                    for k in ks}
        m = workloads.crossing_model(reps_of(lambda k: direct_ns(k) + CROSSING_NS),
                                     reps_of(direct_ns), lambda k: line[0] + line[1] * k)
        rec = workloads._model_record(m)
        lo, hi = rec["c"]["interval"]
        hits += lo <= CROSSING_NS <= hi
        b = workloads.break_even(m, line, 0.05, ks)
        band_hits += b["band"][0] <= 4995 <= (b["band"][1] or math.inf)
    assert 0.93 <= hits / 400 <= 0.995
    assert 0.93 <= band_hits / 400 <= 0.995


def test_break_even_with_one_repetition_says_point(tmp_path):
    doc = summary_of(tmp_path, worksweep_results(reps=1), repeat=1)
    curve = next(c for c in doc["sections"]["worksweep"]["curves"]
                 if c["mechanism"] == "process-futex")
    five = curve["break_even"][0]
    assert five["basis"] == "point" and five["band"] is None
    assert five["k"] == pytest.approx((CROSSING_NS / 0.05 - 10) / 2, rel=0.02)
    assert curve["model"]["c"]["interval"] is None


def test_worksweep_renders_and_its_curves_open_the_report(tmp_path):
    doc = summary_of(tmp_path, worksweep_results())
    text = console.run_report(doc)
    assert "worksweep: break-even work per crossing" in text
    assert "k=1e6" in text and "interval" in text
    md = report.render_md(doc, [])
    assert "## Work per crossing (worksweep)" in md
    drawn = figures.draw(doc)
    assert drawn[0].name == "worksweep" and drawn[0].figure is not None
    plots.save(drawn[0], tmp_path)
    assert (tmp_path / "worksweep.png").stat().st_size > 0


def test_a_run_without_the_family_has_no_section(tmp_path):
    params = {"placement": "same-cpu", "payload": 0, "variant": "entry"}
    doc = summary_of(tmp_path, [result("switch", "direct", params, 500, rep)
                                for rep in (1, 2)], repeat=2)
    assert not any(k in doc["sections"] for k in ("worksweep", "cpuwork", "memops", "pipeio",
                                                   "scale"))


# ---- Morello's tables ----

def cpu_results(reps: int = 3) -> list[dict]:
    out = []
    for rep in range(1, reps + 1):
        f = rep_factor(rep)
        for mech, cost in (("direct", 1.0), ("process-futex", 1.02)):
            for kernel, ms in (("maths", 50.0), ("int", 5.0)):
                base = {"placement": "same-cpu", "kernel": kernel, "trial_iterations": 1000000,
                        "trials": 10, "crossings_per_trial": 0}
                out.append(result("cpuwork", mech, {**base, "where": "out",
                                                    "iterations": 1000000}, ms * 1e6 * f, rep))
                out.append(result("cpuwork", mech, {**base, "where": "in",
                                                    "iterations": 1000000},
                                  ms * 1e6 * cost * f, rep))
            # lib-in-compartment: its own iteration count, 200 ns per iteration
            # for direct, 20 us for process-futex.
            per = 200.0 if mech == "direct" else 20000.0
            iters = 1000 + rep
            out.append(result("cpuwork", mech, {
                "placement": "same-cpu", "kernel": "maths", "where": "lib-in-compartment",
                "trial_iterations": 1000000, "trials": 10, "iterations": iters,
                "crossings_per_trial": 5 * iters}, per * iters * f, rep))
    return out


def test_cpuwork_is_shaped_like_morellos_table_5(tmp_path):
    doc = summary_of(tmp_path, cpu_results())
    s = doc["sections"]["cpuwork"]
    rows = {(r["kernel"], r["mechanism"]): r for r in s["rows"]}
    assert [r["kernel"] for r in s["rows"]][:2] == ["maths", "maths"]  # Morello's order
    pf = rows[("maths", "process-futex")]
    assert pf["out"]["unit"] == "ms" and pf["out"]["value"] == pytest.approx(50.0, rel=1e-3)
    assert pf["in"]["value"] == pytest.approx(51.0, rel=1e-3)
    assert pf["in_over_out"]["value"] == pytest.approx(1.02, rel=1e-4)
    assert pf["in_over_out"]["interval"][0] < 1.02 < pf["in_over_out"]["interval"][1]
    # lib-in-compartment per iteration, against out's per iteration (50 ms / 1e6).
    lib = pf["lib"]
    assert lib["ns_per_iteration"]["value"] == pytest.approx(20000.0, rel=1e-3)
    assert lib["over_out"]["value"] == pytest.approx(20000.0 / 50.0, rel=1e-3)
    assert lib["crossings_per_trial"] == 5 * 1002
    assert rows[("int", "direct")]["lib"] is None
    # Morello's published rows: Table 5 (purecap) and 6 (benchmark ABI).
    maths = [p for p in s["published"] if p["kernel"] == "maths"]
    assert [(p["out_ms"], p["in_ms"]) for p in maths] == [(46759, 70780), (46759, 52901)]
    assert maths[0]["in_over_out"] == pytest.approx(70780 / 46759)
    text = render_sections.text_blocks(doc)[0]
    assert max(map(len, text.splitlines())) <= table.WIDTH  # fits a terminal
    assert "PUBLISHED c18n purecap (T5)" in text and "46,759" in text
    flat = " ".join(text.split())  # notes wrap at 100 columns
    assert "other ABI" in flat and "Arm Morello" in flat
    # Table 6 is Section 4.2's, not 4.1's.
    assert "Section 4.1, Table 5" in flat and "Section 4.2, Table 6" in flat
    # Trials of 1e6 iterations here: Morello's 1e8 figures say so in their cells.
    assert "46,759 @1e8" in text and "of 1,000,000 iterations" in flat


def mem_results() -> list[dict]:
    size = 64 << 20
    out = []
    for rep in (1, 2, 3):
        for where in ("out", "in"):
            for step, ms, faults in (("write", 30.0, 16384), ("read", 8.0, 0)):
                params = {"placement": "same-cpu", "where": where, "step": step,
                          "size_bytes": size, "size_mib": 64, "trials": 10, "pages_4k": 16384,
                          "minor_faults": [faults] * 10, "fault_site": "this process",
                          "thp": "madvise"}
                out.append(result("memops", "process-futex", params,
                                  ms * 1e6 * rep_factor(rep) * (1.1 if where == "in" else 1), rep))
    return out


def test_memops_shows_rates_and_faults(tmp_path):
    doc = summary_of(tmp_path, mem_results())
    s = doc["sections"]["memops"]
    w = next(r for r in s["rows"] if r["step"] == "write")
    assert w["faults_out"]["median"] == 16384 == w["faults_out"]["pages_4k"]
    assert w["faults_out"]["trials"] == 30
    # GB/s = bytes / ns, from the headline time.
    assert w["gbps_out"]["value"] == pytest.approx((64 << 20) / 30e6, rel=1e-3)
    lo, hi = w["gbps_out"]["interval"]
    assert lo < w["gbps_out"]["value"] < hi
    assert w["in_over_out"]["value"] == pytest.approx(1.1, rel=1e-3)
    rd = next(r for r in s["rows"] if r["step"] == "read")
    assert rd["faults_in"]["median"] == 0
    assert s["published"] == [] and "bound of 0" in s["published_note"]
    text = render_sections.text_blocks(doc)[0]
    assert max(map(len, text.splitlines())) <= table.WIDTH  # fits a terminal
    assert "16,384" in text and "GB/s" in text


def pipe_results() -> list[dict]:
    out = []
    for rep in (1, 2, 3):
        for where, us, cold in (("out", 1.0, 5000), ("in", 3.0, 9000)):
            params = {"placement": "same-cpu", "where": where, "variant": "write",
                      "payload": 1024, "operations": 100, "verified": 100,
                      "cold": cold * rep, "write_calls": 100, "io_by": "this process"}
            out.append(result("pipeio", "process-futex", params, us * 1000 * rep_factor(rep), rep))
            params = {"placement": "same-cpu", "where": where, "variant": "stream",
                      "payload": 1024, "operations": 10, "verified": 10, "chunks": 2048,
                      "stream_bytes": 2 << 20, "gbps": 1.0, "write_calls": 2048,
                      "io_by": "this process"}
            out.append(result("pipeio", "process-futex", params, 2e6 * rep_factor(rep), rep))
    return out


def test_pipeio_keeps_the_cold_call_apart_beside_morellos(tmp_path):
    doc = summary_of(tmp_path, pipe_results())
    s = doc["sections"]["pipeio"]
    w = next(r for r in s["rows"] if r["variant"] == "write")
    assert w["out"]["value"] == pytest.approx(1.0, rel=1e-3) and w["out"]["unit"] == "us"
    # The cold call: median over repetitions of each repetition's first call (ns -> us).
    assert w["cold_out"]["value"] == pytest.approx(10.0) and w["cold_in"]["value"] == 18.0
    assert w["cold_out"]["reps"] == 3
    st = next(r for r in s["rows"] if r["variant"] == "stream")
    assert st["gbps_out"]["value"] == pytest.approx((2 << 20) / 2e6, rel=1e-3)
    pub = {(p["variant"], p["cold"]): p for p in s["published"]}
    assert pub[("write", False)]["out_us"] == pytest.approx(1.0)
    assert pub[("write", False)]["in_us"] == pytest.approx(3.0)
    assert pub[("read", True)]["in_us"] == pytest.approx(161.0)
    text = render_sections.text_blocks(doc)[0]
    assert max(map(len, text.splitlines())) <= table.WIDTH  # fits a terminal
    assert "PUBLISHED c18n" in text and "cold" in text
    # Morello's read in/out: 0.079 / 0.002 ms, each printed to 1 us, is any
    # quotient from 78.5 / 2.5 to 79.5 / 1.5, not "39.50".
    lo, hi = pub[("read", False)]["in_over_out_range"]
    assert (lo, hi) == (pytest.approx(78.5 / 2.5), pytest.approx(79.5 / 1.5))
    from isobench.render.families import workloads as render_workloads
    assert render_workloads._printed_ratio(pub[("read", False)]) == "31..53 (derived)"
    # The write beside this run's rows: 0.003 / 0.001 ms is 1.7 to 7, printed so.
    assert "2..7 (derived)" in text


def scale_results() -> list[dict]:
    out = []
    for rep in (1, 2):
        out.append(result("scale", "process-futex", {
            "placement": "same-cpu", "variant": "create", "limit_asked": 1000,
            "limit_cap": 700, "created": 640, "cause": "create failed", "errno": -11,
            "errno_name": "EAGAIN", "dead": 0, "samples_order": "creation order"},
            2e6 * rep_factor(rep), rep))
        out.append(result("scale", "process-futex", {
            "placement": "same-cpu", "variant": "destroy", "destroyed": 640,
            "processes_left": 0, "samples_order": "reverse creation order"}, 5e5, rep))
        for n, ns in ((1, 3000.0), (10, 3300.0), (640, 9000.0)):
            out.append(result("scale", "process-futex", {
                "placement": "same-cpu", "variant": "switch", "live": n, "target": "random",
                "pss_kb": 1100 * n, "pss_kb_per_compartment": 1100, "processes": n + 1,
                "calls_verified": 600}, ns * rep_factor(rep), rep))
    out.append(result("scale", "wasm", {"placement": "same-cpu", "variant": "create"},
                      status="failed", reason="create: Cannot allocate memory"))
    return out


def test_scale_prints_its_limits(tmp_path):
    doc = summary_of(tmp_path, scale_results(), repeat=2)
    s = doc["sections"]["scale"]
    (row,) = s["rows"]
    assert row["created"] == [640, 640] and row["errno_name"] == "EAGAIN"
    assert row["limit_cap"] == 700 and row["processes_left"] == 0
    assert row["pss_kib_per_compartment"] == 1100 and row["pss_at"] == 640
    (curve,) = s["curves"]
    assert [p["live"] for p in curve["points"]] == [1, 10, 640]
    assert curve["points"][2]["over_first"]["value"] == pytest.approx(3.0, rel=1e-3)
    text = render_sections.text_blocks(doc)[0]
    assert max(map(len, text.splitlines())) <= table.WIDTH  # fits a terminal
    assert "EAGAIN" in text and "create failed" in text and "N alive" in text
    assert "FAILED -m wasm" in text and "Cannot allocate memory" in text


# ---- a short real run ----

ISOB = REPO / "build" / "isob"


def test_a_real_worksweep_run_prints_its_section(tmp_path):
    if not ISOB.exists():
        pytest.fail(f"{ISOB} is missing: run `make` (make test builds it first)")
    ib = Isobench(tmp_path)
    ib.env["ISOBENCH_ISOB"] = str(ISOB)
    p = ib("run", "worksweep", "--quick", "-m", "direct", "-m", "uthread")
    assert p.returncode == 0, p.stderr
    assert "worksweep: break-even work per crossing" in p.stdout
    assert "uthread" in p.stdout
    doc, p = ib.json("show", "--json")
    s = doc["summary"]["sections"]["worksweep"]
    assert {c["mechanism"] for c in s["curves"]} == {"direct", "uthread"}
    ut = next(c for c in s["curves"] if c["mechanism"] == "uthread")
    # One repetition (the test driver's --repeat 1): point estimates, said so.
    assert all(b["basis"] == "point" for b in ut["break_even"])
    assert ut["model"]["c"]["interval"] is None
    assert [p["k"] for p in ut["points"]] == list(KS)
    assert all(p["ratio"]["value"] > 0 for p in ut["points"])
    assert math.isfinite(ut["points"][-1]["time"]["value"])
