"""`isobench report`: the files, the findings in them, published figures
kept apart, plots left out with a note when the run lacks their data, and
bad input as one line with exit code 2."""

import json
import shutil

import pytest

from isobench.render import figures

from conftest import FIXTURES, assert_one_error_line
from fixture_runs import fixture, import_doc, load_doc, with_repetitions

from test_checks import ALL_IDS, APART

CHECK_IDS = [i for i in ALL_IDS if i not in APART]


def with_kv_server(doc):
    """The clean run plus kv-server results as kvserver.py stores them: two
    mechanisms and memcached itself."""
    base = next(r for r in doc["results"] if r["benchmark"] == "kv")
    for mech, server, lat, tput in (("direct", "isob", 9000, 110000),
                                    ("mpk", "isob", 9500, 104000),
                                    ("memcached", "memcached", 8000, 120000)):
        for rep in (1, 2):
            r = {**base, "benchmark": "kv-server", "mechanism": mech, "unit": "ns",
                 "counter": "memcaslap", "header": None, "repetition": rep,
                 "params": {"server": server, "connections": 16, "seconds": 3,
                            "ops_per_s": tput},
                 "samples": {"primary": [lat + 10 * (i % 7) + rep for i in range(20)]}}
            doc["results"].append(r)
    return doc


def test_kv_server_plot_names_every_server(tmp_path):
    from isobench.analysis import summary
    from isobench.render.kit import plots
    data = load_doc(tmp_path, with_kv_server(fixture("clean_run")))
    plot = figures.kv_server_plot(summary.build(data))
    axis = plot.figure.axes[0]
    assert [t.get_text() for t in axis.get_yticklabels()] == \
        ["memcached", "isob+direct", "isob+mpk"]
    # Throughput in thousands of requests per second; latency in µs (the
    # samples are 8-9.5 µs in ns), never in raw ns.
    assert [round(b.get_width()) for b in axis.patches] == [120, 110, 104]
    latency = plot.figure.axes[1]
    assert "[µs]" in latency.get_xlabel()
    assert [round(b.get_width()) for b in latency.patches] == [8, 9, 10]


def test_report_of_a_fake_run(isobench, tmp_path):
    isobench("run", "switch", "-q", "-m", "direct", "-m", "thread")
    out = tmp_path / "rep"
    doc, p = isobench.json("report", "-o", str(out), "--json")
    assert p.returncode == 0, p.stderr
    assert doc["files"] == ["index.html", "summary.md", "platform.tex", "switch.tex",
                            "results.csv", "stats.json", "samples-switch.caption.txt",
                            "samples-switch.png", "samples-switch.svg", "switch-1col.pdf",
                            "switch-2col.pdf", "switch.caption.txt", "switch.png", "switch.svg"]
    for f in doc["files"]:
        assert (out / f).stat().st_size > 0
    for f in ("switch-1col.pdf", "switch-2col.pdf"):
        assert (out / f).read_bytes()[:5] == b"%PDF-"
    # The title names no run; the caption does.
    assert "run 1 " in (out / "switch.caption.txt").read_text()
    assert set(doc["omitted"]) == {"switch-payload", "kv", "kv-overhead", "kv-server"}
    page = (out / "index.html").read_text()
    assert "data:image/png;base64," in page          # self-contained
    assert "No kv results in this run" in page and "No kv-server results" in page
    for f in doc["findings"]:
        assert f["id"] in page
    assert (out / "switch.svg").read_text().lstrip().startswith("<?xml")
    assert (out / "switch.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def with_second_kv_size(doc):
    """A second data size, so that the kv ratios have something to average over."""
    import copy
    for r in [r for r in doc["results"] if r["benchmark"] == "kv"]:
        r2 = copy.deepcopy(r)
        r2["params"]["data_bytes"] = 16384
        r2["samples"]["primary"] = [x + 20 for x in r2["samples"]["primary"]]
        doc["results"].append(r2)
    return doc


def test_report_of_the_clean_run_with_every_plot(isobench, tmp_path):
    # Five repetitions, as a full run has: fewer is a finding (few-repetitions).
    import_doc(isobench.db, with_repetitions(
        with_kv_server(with_second_kv_size(fixture("clean_run"))), 5))
    out = tmp_path / "rep"
    doc, p = isobench.json("report", "latest", "-o", str(out), "--json")
    assert p.returncode == 0, p.stderr
    assert {"switch.png", "kv.png", "kv-server.png", "kv-server.svg"} <= set(doc["files"])
    assert doc["omitted"] == {} and doc["findings"] == []
    page = (out / "index.html").read_text()
    assert "No findings" in page
    # The run's gates are `entry` ones, beside which no held source gives a
    # figure (ERIM's stand beside the call kinds, which this run lacks): the
    # page says how to see the published figures it leaves out.
    assert "ERIM (USENIX Security 2019)" not in page
    assert "more published figure(s) have no local counterpart" in page
    assert ">macro<" in page and ">micro<" in page
    md = (out / "summary.md").read_text()
    assert "## Platform" in md and "Intel(R) Xeon(R) Gold 6230" in md
    assert "## Switch cost" in md and "## Key-value store" in md
    assert "## Averages" in md and "geometric-mean" in md and "over data_bytes" in md
    assert "![Switch cost per mechanism](switch.png)" in md
    # stats.json is the summary document every command renders.
    numbers = json.loads((out / "stats.json").read_text())
    assert numbers["summary_version"] == 1 and numbers["method"]["headline_min_steps"] == 20
    mpk = next(c for c in numbers["configs"]
               if c["benchmark"] == "switch" and c["mechanism"] == "mpk")
    assert len(mpk["repetitions"]) == 5 and mpk["distribution"]["n"] == 100
    assert {"p5", "p95", "p99", "mad", "cv", "robust_cv", "outliers"} <= set(mpk["distribution"])
    h = mpk["headline"]
    assert h["source"] == "median" and h["reps"] == 5 and h["between"] == "repetitions"
    assert h["interval"]["low"] <= h["value"] <= h["interval"]["high"]
    assert mpk["ratio"]["value"] == pytest.approx(160.5 / 100.5, rel=0.01)
    assert mpk["ratio"]["interval"]["low"] < mpk["ratio"]["value"]


def test_report_shows_every_finding_of_the_flawed_run(isobench, tmp_path):
    import_doc(isobench.db, fixture("flawed_run"))
    out = tmp_path / "rep"
    doc, p = isobench.json("report", "-o", str(out), "--json")
    assert p.returncode == 0, p.stderr
    assert [f["id"] for f in doc["findings"]] == CHECK_IDS
    page = (out / "index.html").read_text()
    md = (out / "summary.md").read_text()
    for f in doc["findings"]:
        assert f"docs/reducing-variance.md#{f['id']}" in page
        assert f"**{f['severity']} {f['id']}**" in md


def test_report_text_output(isobench, tmp_path):
    isobench("run", "switch", "-q", "-m", "direct")
    p = isobench("report", "-o", str(tmp_path / "r"))
    assert p.returncode == 0
    assert "written to" in p.stdout and "note: No kv results" in p.stdout


@pytest.mark.parametrize("args, needle", [
    (["report"], "-o"),
    (["report", "7", "-o", "OUT"], "no run 7"),
    (["report", "-o", "UNDER_A_FILE"], "cannot write the report"),
])
def test_report_bad_usage(isobench, tmp_path, args, needle):
    isobench("run", "switch", "-q", "-m", "direct")
    (tmp_path / "plain-file").write_text("x")
    args = [str(tmp_path / "out") if a == "OUT" else
            str(tmp_path / "plain-file" / "rep") if a == "UNDER_A_FILE" else a for a in args]
    assert needle in assert_one_error_line(isobench(*args))


def test_report_without_store_or_with_a_corrupt_one(isobench, tmp_path):
    assert "no store" in assert_one_error_line(isobench("report", "-o", str(tmp_path / "r")))
    db = tmp_path / "corrupt.sqlite"
    shutil.copy(FIXTURES / "not_a_db.sqlite", db)
    line = assert_one_error_line(isobench("report", "-o", str(tmp_path / "r"), "--db", str(db)))
    assert "not an isobench store" in line
    assert not (tmp_path / "r" / "index.html").exists()


def test_html_report_reads_and_prints(isobench, tmp_path):
    """The compact tables first, the full results folded per benchmark, print
    rules, `code` rendered, docs linked, and no machine path: the store by
    its file name only, also in stats.json."""
    import_doc(isobench.db, with_repetitions(with_second_kv_size(fixture("clean_run")), 5))
    out = tmp_path / "rep"
    doc, p = isobench.json("report", "latest", "-o", str(out), "--json")
    assert p.returncode == 0, p.stderr
    page = (out / "index.html").read_text()
    assert "@media print" in page and "break-inside: avoid" in page
    # Compact tables before everything else, the full table folded after.
    glance = page.index("<h3>Switch cost (payload 0, round trip)</h3>")
    kv = page.index("<h3>Key-value store, time per get</h3>")
    assert glance < kv < page.index("id=\"soundness\"") < page.index("<details><summary>switch")
    # kv as a grid: one column per data size.
    assert "<th>4 KiB</th><th>16 KiB</th>" in page[kv:page.index("id=\"soundness\"")]
    benches = {c["benchmark"] for c in json.loads((out / "stats.json").read_text())["configs"]}
    for b in benches:
        assert page.count(f"<details><summary>{b}: ") == 1
    assert page.count("configuration(s), every column (folded;") == len(benches) == 2
    assert "<a href=\"results.csv\">results.csv</a>" in page
    # Markdown code spans and docs paths rendered, none left as backticks.
    assert "<code>isobench plot 1 --config" in page
    assert "`" not in page.replace("<pre>", "\0").split("\0")[0]
    assert "<a href=\"../docs/methodology.md\">docs/methodology.md</a>" in page
    # No machine path anywhere in what the report wrote.
    for name in ("index.html", "summary.md", "stats.json"):
        text = (out / name).read_text()
        assert str(isobench.db) not in text and str(isobench.db.parent) not in text, name
    assert "Store: isobench.sqlite." in page
    assert json.loads((out / "stats.json").read_text())["run"]["db"] == "isobench.sqlite"
    assert doc["db"] == str(isobench.db)  # the caller's own answer keeps the full path


def test_a_config_named_in_the_report_is_what_isobench_plot_takes(isobench, tmp_path):
    """The full results show how to draw any row's samples; the example line
    the page gives runs as it stands."""
    import re
    isobench("run", "switch", "-q", "-m", "direct", "-m", "thread")
    out = tmp_path / "rep"
    assert isobench("report", "-o", str(out)).returncode == 0
    page = (out / "index.html").read_text()
    example = re.search(r"<code>isobench plot 1 --config &#x27;([^&]+)&#x27; -o samples.svg"
                        r"</code>", page)
    assert example, "the report gives no example of isobench plot"
    p = isobench("plot", "1", "--config", example.group(1), "-o", str(tmp_path / "s.svg"))
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "s.svg").read_text().lstrip().startswith("<?xml")


def test_json_export_names_the_store_by_file_name(isobench):
    isobench("run", "switch", "-q", "-m", "direct")
    out, p = isobench.json("export", "latest", "--format", "json", "--no-samples")
    assert p.returncode == 0 and out["db"] == "isobench.sqlite"


def test_sixteen_mechanisms_have_sixteen_looks():
    from isobench.render.kit import plots
    names = [f"m{i:02d}" for i in range(15)] + ["direct"]
    looks = plots.styles(names)
    assert len({(l["color"], l["marker"]) for l in looks.values()}) == 16
    full = {(l["color"], l["marker"], l["markerfacecolor"], l["linestyle"])
            for l in looks.values()}
    assert len(full) == 16
    # Two series of one colour differ in fill and line, not in marker alone.
    by_colour: dict = {}
    for l in looks.values():
        by_colour.setdefault(l["color"], []).append(l)
    for pair in by_colour.values():
        assert len(pair) == 2
        assert pair[0]["linestyle"] != pair[1]["linestyle"]
        assert {pair[0]["markerfacecolor"], pair[1]["markerfacecolor"]} == \
            {pair[0]["color"], "white"}
    assert set(l["color"] for l in looks.values()) == set(plots.PALETTE)


def _kv_doc(tmp_path, direct_factor):
    """The clean run with a second kv data size at which direct's samples
    are direct_factor times its first size's (the others' unchanged)."""
    import copy
    from isobench.analysis import summary
    run = with_repetitions(fixture("clean_run"), 5)
    for r in [r for r in run["results"] if r["benchmark"] == "kv"]:
        r2 = copy.deepcopy(r)
        r2["params"]["data_bytes"] = 1 << 20
        if r2["mechanism"] == "direct":
            r2["samples"]["primary"] = [int(x * direct_factor) for x in r2["samples"]["primary"]]
        run["results"].append(r2)
    return summary.build(load_doc(tmp_path, run))


def test_overhead_plot_says_where_direct_itself_jumps(tmp_path):
    from isobench.render.kit import plots
    doc = _kv_doc(tmp_path, 2.5)
    jumps = figures.baseline_jumps(doc)
    assert list(jumps) == ["same-cpu"] and [s for s, _ in jumps["same-cpu"]] == [1 << 20]
    assert jumps["same-cpu"][0][1] == pytest.approx(2.5, rel=0.1)
    p = figures.kv_overhead_plot(doc)
    texts = [t.get_text() for t in p.figure.axes[0].texts]
    assert any(t.startswith("direct\nitself\n×2.") for t in texts), texts
    assert "direct itself gets slower there" in p.caption and "1 MiB (2.5x)" in p.caption
    plots.pyplot().close(p.figure)


def test_overhead_plot_marks_no_jump_where_direct_holds(tmp_path):
    from isobench.render.kit import plots
    doc = _kv_doc(tmp_path, 1.05)
    assert figures.baseline_jumps(doc) == {}
    p = figures.kv_overhead_plot(doc)
    assert not p.figure.axes[0].texts and "direct itself" not in p.caption
    plots.pyplot().close(p.figure)


def test_report_shows_the_samples_of_every_configuration(tmp_path):
    """One ECDF per configuration of the headline phase, its headline a dot
    on it, one panel per mechanism; folded into the page."""
    from isobench.analysis import summary
    from isobench.render.kit import plots
    from isobench.render import report
    data = load_doc(tmp_path, with_repetitions(with_second_kv_size(fixture("clean_run")), 3))
    doc = summary.build(data)
    samples = plots.config_samples(data)
    p = plots.samples_overview(doc, samples, "kv")
    kv = [c for c in doc["configs"] if c["benchmark"] == "kv" and c["headline_phase"]]
    panels = [ax for ax in p.figure.axes if ax.get_visible()]
    assert sorted(ax.get_title(loc="left") for ax in panels) == \
        sorted({c["mechanism"] for c in kv})
    curves = sum(len([l for l in ax.get_lines() if l.get_marker() in ("None", "")])
                 for ax in panels)
    dots = sum(len([l for l in ax.get_lines() if l.get_marker() == "o"]) for ax in panels)
    assert curves == dots == len(kv)
    plots.pyplot().close(p.figure)
    files = report.write(doc, tmp_path / "rep", samples=samples)["files"]
    assert {"samples-switch.png", "samples-kv.svg", "samples-kv.caption.txt"} <= set(files)
    page = (tmp_path / "rep" / "index.html").read_text()
    assert "<details><summary>Distributions of the raw samples: one ECDF per configuration, " \
        "2 plot(s)" in page
    # Without samples (an import without them) the page simply has none.
    assert "samples-kv.png" not in report.write(doc, tmp_path / "rep2")["files"]
