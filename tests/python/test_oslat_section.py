"""The oslat section (SEIMI's Tables IV, V, VI, III) against synthetic runs
whose every value is known (os_fixtures.py): layout, slowdowns against none,
published columns, both kinds of average, the check that points out SEIMI's,
and every rendering."""

from __future__ import annotations

import pytest

from isobench.analysis import checks, summary
from isobench.analysis.families import oslat
from isobench.core import stats
from isobench.render.families import oslat as render_oslat
from isobench.render.kit import plots, table
from isobench.render import report
from isobench.render import console
from isobench.render import figures

from fixture_runs import fixture, load_doc
from os_fixtures import OSLAT_CELLS, oslat_run

SECCOMP = ("seccomp-allow", "300-args")
PTRACE = ("ptrace", "seccomp-trace")
FACTORS = {("none", "default"): 1.0, SECCOMP: 1.2, PTRACE: 5.0}


def _doc(tmp_path, run=None):
    return summary.build(load_doc(tmp_path, run or oslat_run(FACTORS)))


def _table(section, name):
    return next(t for t in section["tables"] if t["table"] == name)


def _row(t, prim, cell):
    return next(r for r in t["rows"] if (r["primitive"], r["cell"]) == (prim, cell))


def test_tables_in_seimis_order_with_none_first(tmp_path):
    s = _doc(tmp_path)["sections"]["oslat"]
    assert [t["table"] for t in s["tables"]] == ["IV", "V", "VI", "III"]
    assert [c["label"] for c in s["columns"]] == ["none", "seccomp-allow:300-args", "ptrace"]
    assert s["columns"][2]["threat"] == "the threat model of ptrace"
    # SEIMI's columns first, in the paper's order; the others after them.
    v = _table(s, "V")
    assert [(r["primitive"], r["cell"], r["averaged"]) for r in v["rows"]] == [
        ("file", "0K create", True), ("mmap", "64M", True), ("select-file", "100 fds", True),
        ("mmap", "4K", False)]
    iv = _table(s, "IV")
    assert [r["label"] for r in iv["rows"]] == ["ctx 2p/0K", "ctx 8p/16K", "ctx 2p/0K overhead"]
    assert not _row(_table(s, "III"), "vdso-clock", "clock_gettime")["averaged"]


def test_every_cell_in_us_with_its_slowdown_against_none(tmp_path):
    s = _doc(tmp_path)["sections"]["oslat"]
    row = _row(_table(s, "VI"), "pipe", "1B")
    geo = stats.geomean([0.99, 1.0, 1.01])
    assert row["cells"]["none"]["us"] == pytest.approx(3.0 * geo, rel=1e-3)
    assert "slowdown" not in row["cells"]["none"]
    slow = row["cells"]["ptrace"]["slowdown"]
    assert slow["value"] == pytest.approx(5.0, rel=1e-3)
    assert slow["interval"]["low"] <= slow["value"] <= slow["interval"]["high"]
    assert row["cells"]["seccomp-allow:300-args"]["slowdown"]["value"] == pytest.approx(1.2, rel=1e-3)
    # ctx keeps LMbench's difference (raw less overhead) beside the raw hop.
    ctx = _row(_table(s, "IV"), "ctx", "2p/0K")
    assert ctx["cells"]["none"]["switch_us"] == pytest.approx(3.0)


def test_seimi_table_iv_stands_beside_the_context_switch_time_not_the_raw_hop(tmp_path):
    s = _doc(tmp_path)["sections"]["oslat"]
    t = _table(s, "IV")
    heads = render_oslat.headers(t)
    # The published columns follow LMbench's context-switch time (switch_us).
    i = heads.index(render_oslat.SWITCH_HEADER)
    assert heads[i + 1:i + 3] == ["pub. native us", "pub. SEIMI us"]
    line = next(r for r in render_oslat.rows(t) if r[0].strip() == "* ctx 2p/0K")
    assert line[i] == "3.00" and line[i + 1] == "2.05"
    md = render_oslat.markdown(s, {})
    assert "raw hop less the pipe and working-set overhead" in md
    # Tables without ctx rows have no such column.
    assert render_oslat.SWITCH_HEADER not in render_oslat.headers(_table(s, "VI"))


def test_published_columns_beside_ours_and_none_for_table_iii(tmp_path):
    s = _doc(tmp_path)["sections"]["oslat"]
    pub = _row(_table(s, "IV"), "ctx", "2p/0K")["published"]
    assert (pub["native"], pub["seimi"]) == (2.05, 2.46)
    assert pub["slowdown"] == pytest.approx(2.46 / 2.05)
    assert "SEIMI" in pub["source"] and pub["ids"] == ["seimi-ctx-2p0k-native",
                                                        "seimi-ctx-2p0k-seimi"]
    assert _row(_table(s, "V"), "mmap", "64M")["published"]["native"] == 6779
    assert _row(_table(s, "V"), "mmap", "4K")["published"] is None
    assert not _table(s, "III")["has_published"]


def test_averages_both_ways_over_seimis_columns_only(tmp_path):
    s = _doc(tmp_path)["sections"]["oslat"]
    v = _table(s, "V")
    a = v["averages"]["ptrace"]
    # mmap 4K is shown but not averaged: 3 of the fixture's 4 Table V rows.
    assert (a["n"], a["of"]) == (3, 3)
    assert a["geomean_ratio"]["value"] == pytest.approx(5.0, rel=1e-3)
    assert a["seimi_method"]["value_pct"] == pytest.approx(400.0, rel=1e-2)
    # Table III: SEIMI printed no such average, so none is made.
    assert _table(s, "III")["averages"]["ptrace"]["seimi_method"] is None
    # SEIMI's own, recomputed from its figures, beside what it printed.
    # SEIMI's own over all eight of its columns, however many the run has.
    pub = v["published_average"]
    assert pub["printed"]["value_pct"] == 33.56 and pub["n"] == 8
    assert pub["seimi_method_pct"] == pytest.approx(33.56, abs=0.01)
    assert pub["geomean_ratio"]["overhead_pct"] == pytest.approx(39.52, abs=0.01)


def test_every_average_has_its_interval_over_repetitions(tmp_path):
    s = _doc(tmp_path)["sections"]["oslat"]
    for t in s["tables"]:
        for col, a in t["averages"].items():
            g = a["geomean_ratio"]
            iv = g["interval"]
            # Every repetition of a cell is value x (0.99, 1.0, 1.01) on both
            # sides: a narrow interval, never of zero width, around the factor.
            assert iv["low"] < g["value"] < iv["high"], (t["table"], col)
            assert iv["high"] / iv["low"] < 1.1
            assert a["rows"] and a["n"] == len(a["rows"])
    vi = _table(s, "VI")["averages"]["ptrace"]
    assert vi["geomean_ratio"]["interval"]["low"] < 5.0 < vi["geomean_ratio"]["interval"]["high"]


def test_columns_average_over_the_rows_they_share(tmp_path):
    # ptrace did not measure udp 4B: every column of Table VI then averages
    # over pipe 1B alone, and seccomp's average over its own two rows is
    # kept apart under `own`.
    run = oslat_run(FACTORS, per_cell={("seccomp-allow:300-args", "udp", "4B"): 2.0})
    run["results"] = [r for r in run["results"] if not (
        r["params"]["confine"] == "ptrace" and r["params"].get("cell") == "4B")]
    t = _table(_doc(tmp_path, run)["sections"]["oslat"], "VI")
    sec, pt = t["averages"]["seccomp-allow:300-args"], t["averages"]["ptrace"]
    assert t["shared_rows"] == ["pipe 1B"]
    assert (sec["n"], sec["of"], pt["n"]) == (1, 2, 1)
    assert sec["geomean_ratio"]["value"] == pytest.approx(1.2, rel=1e-3)
    assert pt["own"] is None
    own = sec["own"]
    assert own["n"] == 2 and own["geomean_ratio"]["value"] == pytest.approx(
        (1.2 * 2.0) ** 0.5, rel=1e-3)
    text = "\n".join(" ".join(r) for r in render_oslat.average_rows(t))
    assert "average: geomean of ratios [95%], 1/2 rows" in text
    assert "over each one's own rows" in text and "n=2/2" in text
    # The console: the own average under the shared one, with its n.
    lines = render_oslat.compact(t).splitlines()
    own_line = next(line for line in lines if line.startswith("  own rows"))
    assert own_line.split()[2:] == [table.fmt_ratio((1.2 * 2.0) ** 0.5), "n=2"]


def test_seimi_method_reproduces_its_printed_averages():
    # Tables V and VI exactly as the paper computed them (SEIMI, text under
    # Tables V and VI: 33.56% and 24.23% are geometric means of the printed
    # percentage overheads).
    pcts_v = [27.2, 11.7, 33.0, 12.6, 84.4, 63.2, 33.6, 67.8]
    value, why = oslat.geomean_of_percentages([1 + p / 100 for p in pcts_v])
    assert why is None and value == pytest.approx(33.56, abs=0.01)
    pcts_vi = [33.1, 27.2, 18.4, 34.2, 26.6, 35.8, 9.1]
    assert oslat.geomean_of_percentages([1 + p / 100 for p in pcts_vi])[0] == pytest.approx(
        24.23, abs=0.01)
    # Undefined, and said so, as soon as one overhead is zero or negative.
    value, why = oslat.geomean_of_percentages([1.2, 0.9, 1.5])
    assert value is None and "1 of 3 overheads are zero or negative" in why


def test_seimi_method_is_undefined_where_a_confinement_costs_nothing(tmp_path):
    run = oslat_run(FACTORS, per_cell={("seccomp-allow:300-args", "pipe", "1B"): 0.9})
    s = _doc(tmp_path, run)["sections"]["oslat"]
    a = _table(s, "VI")["averages"]["seccomp-allow:300-args"]
    assert a["seimi_method"]["value_pct"] is None
    assert "zero or negative" in a["seimi_method"]["undefined"]
    assert a["geomean_ratio"]["value"] == pytest.approx((0.9 * 1.2) ** 0.5, rel=1e-3)


def test_a_skipped_confinement_says_why_in_its_cells(tmp_path):
    run = oslat_run({("none", "default"): 1.0, PTRACE: 5.0},
                    skipped={("landlock", "test-dir"): "Landlock is not enabled here"})
    s = _doc(tmp_path, run)["sections"]["oslat"]
    assert [c["label"] for c in s["columns"]] == ["none", "ptrace", "landlock"]
    row = _row(_table(s, "III"), "null-syscall", "getppid")
    assert row["cells"]["landlock"] == {"status": "skipped",
                                        "reason": "Landlock is not enabled here"}
    text = render_oslat.text(s, {})
    assert "skipped: null-syscall getppid under landlock: Landlock is not enabled here" in text


def test_no_oslat_results_no_section(tmp_path):
    assert "oslat" not in summary.build(load_doc(tmp_path, fixture("clean_run")))["sections"]


# ---- the finding ----

def test_percentage_geomean_fires_where_seimis_averages_are_shown(tmp_path):
    doc = _doc(tmp_path)
    f = next(f for f in doc["findings"] if f["id"] == "percentage-geomean")
    assert f["severity"] == checks.INFO and f["sok"].startswith("B5")
    assert "Table V: SEIMI's printed 33.56%" in f["what"]
    assert "39.52%" in f["what"]  # the same figures as a geometric mean of ratios


def test_percentage_geomean_names_where_it_is_undefined(tmp_path):
    run = oslat_run({("none", "default"): 1.0, SECCOMP: 0.95},
                    cells=[c for c in OSLAT_CELLS if c[0] == "III"] +
                    [("VI", "ipc", "pipe", "1B", 3000.0)])
    doc = _doc(tmp_path, run)
    f = next(f for f in doc["findings"] if f["id"] == "percentage-geomean")
    assert "undefined for Table VI seccomp-allow:300-args" in f["what"]


@pytest.mark.parametrize("run", ["process-table-only", "clean"])
def test_percentage_geomean_silent_without_such_averages(tmp_path, run):
    if run == "clean":
        doc = summary.build(load_doc(tmp_path, fixture("clean_run")))
    else:
        # Table III: SEIMI printed no average, and none is made SEIMI's way.
        doc = _doc(tmp_path, oslat_run(FACTORS, cells=[c for c in OSLAT_CELLS
                                                        if c[0] == "III"]))
        assert doc["sections"]["oslat"]["tables"][0]["table"] == "III"
    assert "percentage-geomean" not in [f["id"] for f in doc["findings"]]


# ---- renderings ----

def test_text_markdown_and_html(tmp_path):
    doc = _doc(tmp_path)
    out = console.run_report(doc)
    assert "oslat: SEIMI Table IV: context switch (LMbench lat_ctx) [us per operation]" in out
    assert "SEIMI (pub.)" in out and "x none" in out
    assert "average, 2/2 rows" in out and "SEIMI's method " in out
    assert "SEIMI printed 33.56%" in out
    assert "average's 95% interval: seccomp-allow 300-args 1.18..1.22; ptrace 4.93..5.07." in out
    md = report.render_md(doc, [])
    assert "### oslat: SEIMI Table VI" in md
    assert "5.00 [" in md  # slowdowns with their intervals
    assert "the threat model of ptrace" in md
    assert "<pre>oslat: SEIMI Table IV" in report.render_html(doc, [], tmp_path)


def test_console_fits_100_columns_without_the_per_result_table(tmp_path):
    doc = _doc(tmp_path)
    out = console.run_report(doc).splitlines()
    # Every line but the last, which names the store by its path (here a
    # long temporary one).
    assert out[-1].startswith("results stored in ")
    assert max(len(line) for line in out[:-1]) <= table.WIDTH
    # The generic per-result table (a row per oslat cell, headed "mechanism")
    # is left to --wide: each SEIMI table once, compact.
    assert not any(line.startswith("mechanism ") for line in out)
    assert "oslat: in its own tables below; every result in one table: --wide" in out
    assert len(out) <= 100
    iv = [line for line in out if line.startswith("oslat: SEIMI Table IV")]
    assert len(iv) == 1
    # Each confinement is a column group: its name over its time and x none.
    first = out.index(iv[0])
    assert out[first + 1].split() == ["none", "seccomp-allow", "ptrace", "SEIMI", "(pub.)"]
    assert out[first + 2].split() == ["row", "us", "ctx-switch", "300-args", "x", "none", "x"]
    # none's raw hop, then LMbench's context-switch time (raw less overhead).
    assert out[first + 4].split() == ["*", "ctx", "2p/0K", "4.00", "3.00", "1.20", "5.00", "1.20"]
    wide = console.run_report(doc, wide=True)
    assert "confine_variant=seccomp-trace" in wide


def test_confinement_groups_fold_to_the_width(tmp_path):
    run = oslat_run({**FACTORS, ("seccomp-allow", "1"): 1.1, ("landlock", "default"): 1.0})
    t = _table(_doc(tmp_path, run)["sections"]["oslat"], "IV")
    # A confinement's variants are one group, under its name.
    assert "seccomp-allow:1" in t["columns"] and "landlock" in t["columns"]
    blocks = [b.splitlines() for b in render_oslat.compact(t, width=57).split("\n\n")]
    groups = [b[0].split()[1:] for b in blocks]
    assert [g for gs in groups for g in gs] == ["seccomp-allow", "ptrace", "landlock", "SEIMI",
                                                "(pub.)"]
    assert len(blocks) == 3
    sub = blocks[groups.index(["seccomp-allow"])][1].split()
    assert sorted(sub[3:]) == ["1", "300-args"]
    # Every block repeats the rows and none, and fits.
    assert all(b[0].split()[0] == "none" and b[3].startswith("* ctx 2p/0K") for b in blocks)
    assert max(len(line) for b in blocks for line in b) <= 57
    wide = render_oslat.compact(t).split("\n\n")
    assert len(wide) == 1 and max(len(line) for line in wide[0].splitlines()) <= table.WIDTH


def test_plots_one_per_table_and_a_heat_map(tmp_path):
    doc = _doc(tmp_path)
    drawn = {p.name: p for p in figures.draw(doc)}
    for name in ("oslat-table-iv", "oslat-table-v", "oslat-table-vi", "oslat-table-iii",
                 "oslat-heatmap"):
        assert drawn[name].figure is not None, drawn[name].note
    written = plots.save(drawn["oslat-heatmap"], tmp_path)
    assert written == ["oslat-heatmap.png", "oslat-heatmap.svg"]
    for p in drawn.values():
        if p.figure is not None:
            plots.pyplot().close(p.figure)


def test_plots_say_why_without_a_confinement(tmp_path):
    doc = _doc(tmp_path, oslat_run({("none", "default"): 1.0}))
    drawn = {p.name: p for p in figures.draw(doc)}
    assert drawn["oslat-heatmap"].figure is None
    assert "No confinement beside none" in drawn["oslat-table-iv"].note


def test_report_sets_seimi_table_iv_beside_switch_per_hop_once(tmp_path):
    doc = _doc(tmp_path)
    pub = {p["id"]: p for p in doc["published"]}
    native = pub["seimi-ctx-2p0k-native"]
    # One local row (none's), and its LMbench context-switch time, not the
    # raw hop: 4000 ns less the overhead cell's 1000 ns.
    (local,) = native["local"]
    assert local["params"]["confine"] == "none"
    assert local["ns"] == pytest.approx(3000.0) and local["quantity"] == "work.switch_per_hop"
    # SEIMI's own column stands beside no local confinement.
    assert pub["seimi-ctx-2p0k-seimi"]["local"] == []
    assert all(len(p["local"]) <= 1 for p in doc["published"])
    rows = {r[2]: r for r in report.published_rows(doc, all_published=False)}
    assert "2.05 us, one-way" in rows
    assert "median of work.switch_per_hop" in rows["2.05 us, one-way"][5]
    assert not any(k.startswith("2.46 ") for k in rows)  # SEIMI's: no local row


def test_seimi_figures_in_seimis_digits(tmp_path):
    s = _doc(tmp_path)["sections"]["oslat"]
    t = _table(s, "V")
    line = next(r for r in render_oslat.rows(t) if r[0].strip() == "* file 0K create")
    heads = render_oslat.headers(t)
    i = heads.index("pub. native us")
    assert line[i:i + 2] == ["5.4717", "6.9623"]  # not 5.47 and 6.96


# ---- LMbench's bandwidths and the filesystem of the file rows ----

BW_CELLS = OSLAT_CELLS + (
    ("BW", "bw", "bw-pipe", "64K chunks", 1e6),
    ("BW", "bw", "bw-mem", "rd", 5e5),
)
BW_BYTES = {"bw-pipe": 4 << 20, "bw-mem": 16 << 20}


def _bw_run():
    run = oslat_run(FACTORS, cells=BW_CELLS)
    for r in run["results"]:
        p = r["params"]
        if p["primitive"] in BW_BYTES:
            p["work"]["bytes"] = BW_BYTES[p["primitive"]]
        if p["primitive"] == "file":
            p["work"].update({"fs_type": "tmpfs", "fs_magic": "0x1021994",
                              "fs_dir": f"/tmp/job{r['repetition']}/isob-oslat-x"})
    return run


def test_bandwidth_rows_in_mb_per_s_with_intervals(tmp_path):
    s = _doc(tmp_path, _bw_run())["sections"]["oslat"]
    assert [t["table"] for t in s["tables"]] == ["IV", "V", "VI", "III", "BW"]
    bw = _table(s, "BW")
    assert bw["bandwidth"] and not bw["has_published"]
    geo = stats.geomean([0.99, 1.0, 1.01])
    pipe = _row(bw, "bw-pipe", "64K chunks")
    none = pipe["cells"]["none"]
    # 4 MiB in 1 ms (times the repetitions' factor): MB = 10^6 bytes.
    assert none["mb_s"] == pytest.approx((4 << 20) / 1e-3 / 1e6 / geo, rel=1e-3)
    lo, hi = none["interval_mb_s"]
    assert lo <= none["mb_s"] <= hi and lo < hi
    # The time's interval turned over: its longer end is the lower bandwidth.
    t_lo, t_hi = none["interval_us"]
    assert lo == pytest.approx((4 << 20) / (t_hi * 1e-6) / 1e6, rel=1e-9)
    assert hi == pytest.approx((4 << 20) / (t_lo * 1e-6) / 1e6, rel=1e-9)
    # Five times the time is a fifth of the bandwidth; the slowdown is a ratio of times.
    pt = pipe["cells"]["ptrace"]
    assert pt["mb_s"] == pytest.approx(none["mb_s"] / 5.0, rel=1e-3)
    assert pt["slowdown"]["value"] == pytest.approx(5.0, rel=1e-3)
    mem = _row(bw, "bw-mem", "rd")["cells"]["none"]
    assert mem["mb_s"] == pytest.approx((16 << 20) / 5e-4 / 1e6 / geo, rel=1e-3)


def test_bandwidth_without_bytes_has_no_mb_per_s(tmp_path):
    run = _bw_run()
    for r in run["results"]:
        if r["params"]["primitive"] == "bw-pipe" and r["repetition"] == 2:
            r["params"]["work"]["bytes"] = 1 << 20  # repetitions disagree on what moved
    s = _doc(tmp_path, run)["sections"]["oslat"]
    row = _row(_table(s, "BW"), "bw-pipe", "64K chunks")
    assert row["cells"]["none"]["mb_s"] is None
    assert _row(_table(s, "BW"), "bw-mem", "rd")["cells"]["none"]["mb_s"] is not None


def test_bandwidths_and_filesystem_rendered(tmp_path):
    doc = _doc(tmp_path, _bw_run())
    s = doc["sections"]["oslat"]
    [fs] = s["filesystems"]
    assert fs["fs_type"] == "tmpfs" and fs["rows"] == ["file 0K create"]
    assert fs["dirs"][0] == "/tmp/job1/isob-oslat-x" and len(fs["dirs"]) == 3
    assert _row(_table(s, "V"), "file", "0K create")["cells"]["none"]["fs_type"] == "tmpfs"
    out = console.run_report(doc)
    assert "oslat: LMbench bandwidths (bw_pipe" in out and "[MB/s]" in out and "MB/s (MB = 10^6 bytes)" in out
    assert "filesystem: tmpfs in /tmp/job1/isob-oslat-x and 2 more test directories" in out
    # The bandwidth table shows none's MB/s, no SEIMI average under it.
    block = out[out.index("LMbench bandwidths"):]
    block = block[:block.index("\n\n")]
    assert "MB/s" in block and "average" not in block
    assert "4,194" in block or "4,236" in block or "4,215" in block
    md = report.render_md(doc, [])
    assert "| none MB/s |" in md
    assert "- filesystem: tmpfs" in md
