"""What a paper takes from `isobench report`: LaTeX tables that compile
alone, a tidy CSV, plots at paper widths in a palette that survives
greyscale, published figures only where they have a local counterpart."""

import copy
import csv
import io
import shutil
import subprocess

import pytest

from conftest import assert_one_error_line, limit
from fixture_runs import fixture, import_doc, load_doc
from isobench.render import console
from isobench.render import figures


def _doc(tmp_path, doc=None):
    from isobench.analysis import summary
    return summary.build(load_doc(tmp_path, doc or fixture("clean_run")))


def with_skipped_kv_size(doc):
    """mpk's kv at 16 KiB skipped, as a size over the time budget is."""
    r = copy.deepcopy(next(r for r in doc["results"] if r["benchmark"] == "kv"
                           and r["mechanism"] == "mpk"))
    r.update(status="skipped", reason="predicted 99 s, over the budget", samples={})
    r["params"]["data_bytes"] = 16384
    doc["results"].append(r)
    return doc


NO_TEX = "no TeX engine (pdflatex: texlive-latex-base and texlive-latex-recommended for " \
    "booktabs; scripts/setup-system.sh installs them)"

# A two-column paper as ACM's and USENIX's templates lay it out: 7 in of
# text in two columns of 3.33 in, 9 in high (paper.COLUMN_WIDTH and
# TEXT_WIDTH are the widths the tables are written for).
PAPER = ("\\documentclass[twocolumn]{article}\n\\usepackage{booktabs}\n"
         "\\setlength{\\textwidth}{7in}\\setlength{\\columnsep}{0.34in}"
         "\\setlength{\\oddsidemargin}{-0.25in}\\setlength{\\evensidemargin}{-0.25in}\n"
         "\\setlength{\\textheight}{9in}\\setlength{\\topmargin}{-0.5in}\n"
         "\\begin{document}\n%s\n\\end{document}\n")

# What a log must not hold: an error, a box wider than its line, a float
# taller than the page.
TEX_TROUBLE = ("\n!", "Overfull \\hbox", "Overfull \\vbox", "Float too large",
               "Undefined control sequence")


def pdflatex(folder, name):
    """Compile folder/name; its log.  Fails the test on an error, an
    overfull box or a float too large for the page."""
    run = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", name],
                         cwd=folder, capture_output=True, text=True, timeout=limit(600))
    log = (folder / (name[:-4] + ".log")).read_text(errors="replace")
    assert run.returncode == 0, f"{name}: {run.stdout[-2000:]}"
    for trouble in TEX_TROUBLE:
        assert trouble not in log, f"{name}: {trouble!r} in\n{log[log.find(trouble) - 300:][:1200]}"
    assert (folder / (name[:-4] + ".pdf")).stat().st_size > 0
    return log


def compile_tables(folder, names):
    """Each table alone (pdflatex NAME.tex) and all of them \\input into
    one two-column paper, with text around them."""
    for name in names:
        pdflatex(folder, name)
    body = "\n".join(f"Text before the table. \\input{{{n[:-4]}}} Text after it."
                      for n in names)
    (folder / "paper-with-tables.tex").write_text(PAPER % body)
    pdflatex(folder, "paper-with-tables.tex")


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason=NO_TEX)
def test_each_latex_table_compiles_alone_and_in_a_paper(isobench, tmp_path):
    import_doc(isobench.db, fixture("clean_run"))
    out = tmp_path / "rep"
    doc, p = isobench.json("report", "-o", str(out), "--format", "tex", "--json")
    assert p.returncode == 0, p.stderr
    tables = [f for f in doc["files"] if f.endswith(".tex")]
    assert tables == ["platform.tex", "switch.tex", "kv.tex"]
    for name in tables:
        text = (out / name).read_text()
        assert "\\toprule" in text and "\\bottomrule" in text
        assert "\\begin{table}" in text or "\\begin{table*}" in text
        # The file names its run, and says how to use it.
        assert text.startswith("% isobench run 1 (started ")
        assert f"\\input{{{name[:-4]}}}" in text.splitlines()[2]
    compile_tables(out, tables)


# What every kvm result carries (src/mechanisms/kvm.c): the guest and the
# caveat at length, which a label leaves to a note.
KVM_PARAMS = {"guest": "x86-64 long mode, ring 3, own page tables", "nested": True,
              "caveat": "nested virtualization: costs more than on bare metal"}


def wide_tables_doc(tmp_path, sizes, placements, switch_places):
    """A summary document with the widest cells the tables can get: the
    longest mechanism labels, ratios in the ten thousands with intervals
    over two orders of magnitude, kv at every size asked, switch in every
    placement, and the platform's long paths and flags."""
    from isobench.analysis import summary
    header = {**KV_TSC, "counter_step": 2}
    results = []
    mechs = [("direct", 1.0), ("wasm-bounds", 1.7), ("process-socket", 93.0),
             ("process-futex", 48.7), ("mprotect", 14549.0), ("kvm", 14549.0)]
    for rep, spread in enumerate((0.1, 1.0, 10.0), 1):
        for mech, f in mechs:
            # direct steady, the others over two orders of magnitude
            # between repetitions: the widest intervals.
            scale = f * (1 if mech == "direct" else spread)
            for place in placements:
                for z in sizes:
                    r = _kv_result(mech, z, rep, [round(20_000 * scale) + 2 * (i % 5)
                                                  for i in range(51)], header)
                    r["params"].update(placement=place,
                                       **(KVM_PARAMS if mech == "kvm" else {"checks": "bounds"}))
                    results.append(r)
            for place in switch_places:
                r = _kv_result(mech, 0, rep, [round(9_000 * scale) + 2 * (i % 5)
                                              for i in range(51)], header)
                r.update(benchmark="switch")
                r["params"] = {"placement": place, "payload": 0,
                               **(KVM_PARAMS if mech == "kvm" else {"checks": "bounds"})}
                results.append(r)
    doc = fixture("clean_run")
    doc["results"] = results
    env = doc["environment"]
    env["mitigations"] = {"spectre_v1": "Mitigation: usercopy/swapgs barriers and __user "
                          "pointer sanitization", "indirect_target_selection":
                          "Mitigation: Aligned branch/return thunks"}
    env["turbo"] = None
    env.setdefault("reasons", {})["turbo"] = (
        "neither /sys/devices/system/cpu/intel_pstate/no_turbo nor "
        "/sys/devices/system/cpu/cpufreq/boost: no frequency driver that exposes turbo")
    env["cpu_flags_relevant"] = ["constant_tsc", "nonstop_tsc", "tsc_known_freq", "rdtscp",
                                 "hypervisor", "pcid", "invpcid", "smep", "smap", "pku",
                                 "ospke"]
    return summary.build(load_doc(tmp_path, doc))


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason=NO_TEX)
@pytest.mark.parametrize("sizes, placements, switch_places", [
    # make run (--quick): 7 sizes, one placement; switch same and across CPUs.
    ([4096 << 2 * i for i in range(7)], ["same-cpu"], ["same-cpu", "cross-cpu"]),
    # A full run: 9 sizes; kv in two placements; switch in all three.
    ([4096 << 2 * i for i in range(9)], ["same-cpu", "cross-cpu"],
     ["same-cpu", "cross-cpu", "unpinned"]),
    # One size, one placement: kv and switch in one column.
    ([4096], ["same-cpu"], ["same-cpu"]),
    # --sizes with 14: folded into blocks.
    ([4096 * (i + 1) for i in range(14)], ["same-cpu"], ["same-cpu"]),
], ids=["quick", "full", "one-size", "fourteen-sizes"])
def test_the_widest_tables_fit_their_widths(tmp_path, sizes, placements, switch_places):
    from isobench.render import paper, report
    doc = wide_tables_doc(tmp_path, sizes, placements, switch_places)
    files = paper.tex_files(doc, report.env_rows(doc["run"]["environment"]))
    assert set(files) == {"platform.tex", "switch.tex", "kv.tex"}
    kv, sw = files["kv.tex"], files["switch.tex"]
    assert ("table*" in kv) == (len(sizes) > 1) and ("table*" in sw) == (len(switch_places) > 1)
    # Every size once, in a header row: side by side or folded into blocks.
    heads = [l for l in kv.splitlines() if l.startswith("Mechanism & ")]
    assert len(heads) == kv.count("\\begin{tabular}") >= (2 if len(sizes) > 10 else 1)
    assert " & ".join(heads).count("KiB") + " & ".join(heads).count("MiB") == len(sizes)
    assert "\nmprotect" in kv and "\nprocess-socket checks=bounds &" in sw
    # kvm's row by its name and whether it is nested; its caveat said once,
    # in the caption, not in every row.
    assert "\nkvm nested=True &" in kv and "\nkvm nested=True &" in sw
    for text in (kv, sw):
        assert text.count("costs more than on bare metal") == 1 and "guest=" not in text
    # Ratios in the ten thousands, with their intervals.
    row, under = kv.split("\nmprotect")[1].split("\n")[:2]
    assert "14," in row and under.count(",") >= 3
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    compile_tables(tmp_path, sorted(files))


def test_latex_escapes_what_tex_would_read():
    from isobench.render import paper
    assert paper.tex("a_b & 5% #1 µs ±2 {x}") == \
        "a\\_b \\& 5\\% \\#1 \\ensuremath{\\mu}s \\ensuremath{\\pm}2 \\{x\\}"


def test_switch_and_kv_tables_hold_the_headlines(tmp_path):
    from isobench.render import paper
    doc = _doc(tmp_path)
    sw = paper.switch_tex(doc)
    # direct first (baseline), mpk before process-futex (cheaper), both placements.
    assert sw.index("direct &") < sw.index("mpk &") < sw.index("process-futex &")
    assert "Across CPUs" in sw and "baseline" in sw
    kv = paper.kv_tex(doc)
    # One placement: in the caption, not a column.
    assert "4 KiB" in kv and "\ndirect & " in kv and "compartment (same-cpu)" in kv
    # Two placements: the switch table spans both columns of a paper.
    assert "\\begin{table*}" in sw and "\\end{table*}" in sw


def test_a_kv_mean_over_fewer_sizes_is_marked(tmp_path):
    from isobench.render import paper
    def sized(run, mechanisms, size):
        for r in [r for r in run["results"] if r["benchmark"] == "kv"
                  and r["mechanism"] in mechanisms and r["params"]["data_bytes"] == 4096]:
            r = copy.deepcopy(r)
            r["params"]["data_bytes"] = size
            run["results"].append(r)
        return run

    full = sized(fixture("clean_run"), ("direct", "mpk"), 16384)
    assert "dagger" not in paper.kv_tex(_doc(tmp_path / "full", full))
    # direct also at 64 KiB, mpk not: mpk's mean is over 2 of the 3 sizes.
    part = sized(sized(fixture("clean_run"), ("direct", "mpk"), 16384), ("direct",), 65536)
    kv = paper.kv_tex(_doc(tmp_path / "part", part))
    lines = kv.splitlines()
    i = next(i for i, l in enumerate(lines) if l.startswith("mpk &"))
    mpk, under = lines[i], lines[i + 1]
    assert "--" in mpk and mpk.rstrip(" \\").endswith("$^\\dagger$")
    assert under.rstrip(" \\[2pt]").endswith("n=2}")
    assert "not comparable" in kv


# ---- kv.tex: intervals, readings, resolutions ----

KV_TSC = {"counter": "tsc", "unit": "tsc_ticks", "counter_why": "no PMU", "tsc_hz": 2.6e9,
          "tsc_hz_source": "kernel", "counter_step": 26,
          "empty_region": {"median": 46, "mean": 46.3, "min": 44, "p5": 46, "p95": 48, "n": 100}}


def _kv_result(mech, size, rep, samples, header=KV_TSC):
    return {"benchmark": "kv", "mechanism": mech,
            "params": {"placement": "same-cpu", "variant": "get", "data_bytes": size, "seed": 1},
            "unit": "tsc_ticks", "counter": "tsc", "status": "ok", "reason": None,
            "dropped": 0, "warmup": 10, "batched": None, "empty_region": 46.0,
            "repetition": rep, "header": header, "samples": {"primary": list(samples)}}


def _kv_steps_run():
    """direct and uthread on a counter of 26-tick steps: at 4 KiB every
    repetition reads 4 and 5 steps (104 and 130 ticks: uthread 1.25 = 5/4
    steps); at 1 MiB uthread reads 0.6x direct in the middle, but its
    repetitions spread over a factor of 4, so its interval holds 1."""
    results = []
    spread = (0.25, 0.5, 1.0, 2.0, 4.0)
    for rep in range(1, 6):
        results.append(_kv_result("direct", 4096, rep, [104] * 51))
        results.append(_kv_result("uthread", 4096, rep, [130] * 51))
        results.append(_kv_result("direct", 1 << 20, rep, [26_000] * 51))
        results.append(_kv_result("uthread", 1 << 20, rep,
                                  [round(15_600 * spread[rep - 1] / 26) * 26] * 51))
    doc = fixture("clean_run")
    doc["results"] = results
    return doc


def test_kv_ratios_carry_intervals_readings_and_resolutions(tmp_path):
    from isobench.render import paper
    doc = _doc(tmp_path, _kv_steps_run())
    s = doc["sections"]["kv"]
    uthread = next(r for r in s["rows"] if r["mechanism"] == "uthread")
    few = uthread["cells"]["4096"]["ratio"]
    assert few["value"] == pytest.approx(1.25)
    assert few["quantized"] and few["few_steps"] and few["steps"] == [5, 4]
    # One step on each side: 1/5 + 1/4 of the ratio.
    assert few["resolution_rel"] == pytest.approx(0.45)
    big = uthread["cells"][str(1 << 20)]["ratio"]
    assert big["value"] == pytest.approx(0.6, rel=0.01)
    assert big["includes_one"] and big["reading"] == "no difference shown"
    kv = paper.kv_tex(doc)
    lines = kv.splitlines()
    i = next(i for i, l in enumerate(lines) if l.startswith("uthread &"))
    cells = lines[i].rstrip(" \\").split(" & ")
    under = lines[i + 1].replace("\\\\[2pt]", "").rstrip().split(" & ")
    # 4 KiB: never a bare 1.25 -- marked q, its interval and its resolution under it.
    assert cells[1] == "1.25$^{q}$"
    assert "[" in under[1] and "$\\pm$45\\%" in under[1]
    # 1 MiB: 0.6, marked as holding 1, and the caption says it is not faster.
    # (direct reads 1,000 steps there: a long region, not quantized.)
    assert cells[2] == "0.600$^{\\circ}$" and "[" in under[2]
    assert "not faster than direct" in kv
    # The mean over both sizes, with its interval and n.
    assert "n=2" in under[3] and "[" in under[3]
    assert "steps of 26 tsc\\_ticks" in kv
    # The console's kv table reads them the same way.
    from isobench.render import console
    text = "\n".join(console.narrow_tables(doc))
    lines = [l for l in text.splitlines() if l.startswith("uthread")]
    assert "1.25 [" in lines[0] and "q±45%" in lines[0] and "=1" not in lines[0]
    assert "0.600 [" in lines[1] and "=1" in lines[1]
    # No ratio anywhere without an interval under it, or a mark saying it has none.
    for main, sub in zip(cells[1:], under[1:]):
        assert "[" in sub or "no CI" in sub or main == "--"


def test_csv_is_tidy(tmp_path):
    from isobench.render import paper
    doc = _doc(tmp_path, with_skipped_kv_size(fixture("clean_run")))
    rows = list(csv.DictReader(io.StringIO(paper.results_csv(doc))))
    columns = list(rows[0])
    # One column per parameter, after the mechanism; then the fixed columns.
    assert columns[:7] == ["run_id", "benchmark", "mechanism", "placement", "payload", "variant",
                           "data_bytes"]
    assert "params" not in columns and columns[-len(paper.CSV_COLUMNS) + 3:] == \
        list(paper.CSV_COLUMNS[3:])
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) == len(doc["configs"])
    mpk = next(r for r in ok if r["benchmark"] == "switch" and r["mechanism"] == "mpk")
    c = next(c for c in doc["configs"] if c["benchmark"] == "switch" and c["mechanism"] == "mpk")
    assert float(mpk["headline"]) == pytest.approx(c["headline"]["value"])
    if c["headline"]["ns"] is None:  # core cycles: no ns column
        assert c["unit"] == "cycles" and mpk["headline_ns"] == "" and mpk["unit"] == "cycles"
    else:
        assert float(mpk["headline_ns"]) == pytest.approx(c["headline"]["ns"])
    assert float(mpk["headline_low"]) <= float(mpk["headline"]) <= float(mpk["headline_high"])
    assert float(mpk["ratio"]) == pytest.approx(c["ratio"]["value"])
    assert mpk["ratio_to"] == "direct" and mpk["payload"] == "0" and mpk["data_bytes"] == ""
    skipped = [r for r in rows if r["status"] == "skipped"]
    assert len(skipped) == 1 and skipped[0]["data_bytes"] == "16384"
    assert skipped[0]["headline"] == "" and "budget" in skipped[0]["reason"]


def test_format_picks_the_files_and_refuses_unknown_ones(isobench, tmp_path):
    import_doc(isobench.db, fixture("clean_run"))
    out = tmp_path / "rep"
    doc, p = isobench.json("report", "-o", str(out), "--format", "csv", "--json")
    assert p.returncode == 0, p.stderr
    assert doc["formats"] == ["csv"]
    assert "results.csv" in doc["files"] and "index.html" not in doc["files"]
    assert not (out / "index.html").exists() and (out / "stats.json").exists()
    assert "switch.png" in doc["files"]  # plots are always written
    for bad in ("pdf", "html,", "", "html,docx"):
        if bad == "html,":
            continue  # a trailing comma is tolerated
        assert_one_error_line(isobench("report", "-o", str(out), "--format", bad), 2)


def test_published_figures_only_with_a_local_counterpart(isobench, tmp_path):
    # The clean run's gates are `entry` ones, beside which no published
    # figure stands; its mpk gate run again as ERIM's inlined call kind
    # has ERIM's and Konrad's figures beside it.
    doc = fixture("clean_run")
    kind = [copy.deepcopy(r) for r in doc["results"]
            if (r["benchmark"], r["mechanism"]) == ("switch", "mpk")]
    for r in kind:
        r["params"]["variant"] = "inline"
    doc["results"] += kind
    import_doc(isobench.db, doc)
    out = tmp_path / "rep"
    isobench("report", "-o", str(out))
    page = (out / "index.html").read_text()
    shown = page.count("<tr>", page.index('class="published"'))
    doc = __import__("json").loads((out / "stats.json").read_text())
    with_local = sum(1 for r in doc["published"] if r["local"])
    assert 0 < with_local < len(doc["published"])
    assert shown == with_local + 1  # + the header row
    assert "--all-published" in page
    isobench("report", "-o", str(out), "--all-published")
    page = (out / "index.html").read_text()
    assert page.count("<tr>", page.index('class="published"')) == len(doc["published"]) + 1


def _texts(fig):
    out = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        out += [ax.get_title(loc) for loc in ("left", "center", "right")]
    return out


def test_plots_at_paper_widths_without_run_ids(tmp_path):
    from isobench.render.kit import plots
    doc = _doc(tmp_path, with_skipped_kv_size(fixture("clean_run")))
    for width in plots.WIDTHS.values():
        drawn = [p for p in figures.draw(doc, width) if p.figure is not None]
        assert {p.name for p in drawn} >= {"switch", "switch-payload", "kv", "kv-overhead"}
        for p in drawn:
            assert p.figure.get_size_inches()[0] == pytest.approx(width)
            assert not any("run" in t.lower() for t in _texts(p.figure)), p.name
            plots.pyplot().close(p.figure)


def test_switch_plot_orders_by_cost_and_keeps_direct_apart(tmp_path):
    from isobench.render.kit import plots
    doc = _doc(tmp_path)
    fig = figures.switch_plot(doc).figure
    main, small = fig.axes[:2]
    rows = [t.get_text() for t in main.get_yticklabels()]
    assert rows[0] == "direct (entry: baseline)" and rows.index("mpk") < rows.index("process-futex")
    assert all(t.get_text().startswith("direct") for t in small.get_yticklabels())
    # Every marker in the palette, with its interval drawn.
    colours = {line.get_color() for line in main.get_lines()}
    assert colours <= {*plots.PALETTE, plots.PUBLISHED}
    plots.pyplot().close(fig)


def test_styles_tell_series_apart_without_colour():
    from isobench.render.kit import plots
    looks = [plots.style(i) for i in range(len(plots.PALETTE) * 2)]
    assert len({(l["marker"], l["linestyle"]) for l in looks}) == len(looks)
    assert len({l["color"] for l in looks[:len(plots.PALETTE)]}) == len(plots.PALETTE)


def test_kv_plot_marks_a_skipped_size(tmp_path):
    from isobench.render.kit import plots
    doc = _doc(tmp_path, with_skipped_kv_size(fixture("clean_run")))
    p = figures.kv_plot(doc)
    marks = [l for l in p.figure.axes[0].get_lines() if l.get_marker() == "x"]
    assert [list(l.get_xdata()) for l in marks] == [[16384]]
    assert "mpk (same-cpu) from 16 KiB" in p.caption
    plots.pyplot().close(p.figure)


def test_a_mechanism_keeps_its_look_from_plot_to_plot(tmp_path):
    """kv-overhead leaves direct out; its other lines keep kv's colours and
    markers, and the payload plot's, so one legend reads for all."""
    from isobench.render.kit import plots
    run = fixture("clean_run")
    # A second mechanism in kv, cheaper than mpk but after it alphabetically.
    for r in [r for r in run["results"] if r["benchmark"] == "kv" and r["mechanism"] == "mpk"]:
        r = copy.deepcopy(r)
        r["mechanism"] = "thread"
        r["samples"]["primary"] = [max(1, x * 9 // 10) for x in r["samples"]["primary"]]
        run["results"].append(r)
    doc = _doc(tmp_path, run)

    def looks(p):
        out = {}
        for ax in p.figure.axes:
            for container in ax.containers:
                line = container.lines[0]
                out[container.get_label()] = (line.get_color(), line.get_marker(),
                                              line.get_linestyle())
        plots.pyplot().close(p.figure)
        return out

    kv, over, payload = (looks(f(doc)) for f in (figures.kv_plot, figures.kv_overhead_plot,
                                                 figures.payload_plot))
    assert "direct" in kv and "direct" not in over
    shared = set(kv) & set(over)
    assert shared == {"mpk", "thread"}
    assert all(kv[m] == over[m] for m in shared)
    assert all(payload[m] == kv[m] for m in set(payload) & set(kv))
    # The legend reads cheapest first (direct, then by cost), not alphabetically.
    fig = figures.kv_plot(doc).figure
    assert [c.get_label() for c in fig.axes[0].containers] == ["direct", "thread", "mpk"]
    plots.pyplot().close(fig)


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason=NO_TEX)
def test_kv_marks_and_resolutions_compile(tmp_path):
    from isobench.render import paper
    kv = paper.kv_tex(_doc(tmp_path, _kv_steps_run()))
    assert "\\circ" in kv and "$\\pm$45" in kv
    (tmp_path / "kv.tex").write_text(kv)
    compile_tables(tmp_path, ["kv.tex"])
