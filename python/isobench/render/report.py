"""`isobench report RUN -o DIR`: a self-contained HTML page, a Markdown
summary, LaTeX tables, a tidy CSV and the plots in every size a paper needs.

Everything comes from the run's summary document (summary.build), which is
also written out as stats.json: the report renders it and computes nothing.
The soundness findings are the same as `isobench check` prints.  Local
numbers always appear as absolute values (with their unit and, where the
TSC allows, in ns) beside any ratio; published figures appear in their own
table, marked as published, never mixed into local statistics, and only
those with a local counterpart in the run unless all_published.

Files written to DIR (FORMATS picks the first four kinds; stats.json and the
plots are always written):
    index.html        html: the report; plots embedded as PNG data URIs; the
                      compact tables first, the full results folded per
                      benchmark; prints in a few pages (@media print)
    summary.md        md: platform table, findings, switch and kv tables,
                      published figures, the plots
    platform.tex, switch.tex, kv.tex
                      tex: booktabs tables, each compiling alone (paper.py)
    results.csv       csv: one row per configuration, tidy (paper.py)
    stats.json        the summary document: every configuration's headline, how it
                      was chosen, its interval, its ratio to direct, the averages,
                      the findings and the published figures matched
    NAME.png, NAME.svg, NAME-2col.pdf   each plot at a double-column width (7 in)
    NAME-1col.pdf     the same plot drawn again at a single-column width (3.5 in)
    NAME.caption.txt  its caption, with the run and the machine (titles name neither)
    samples-BENCH.png, .svg
                      the raw samples of every configuration of BENCH as ECDFs,
                      where the caller passes them (`isobench report` does)
    .isobench-report.json
                      the manifest: the run shown and the files written
                      (reportdir.py), so that the next report into DIR
                      removes those it does not rewrite

Every file names the run it shows: the .tex files in their first line,
summary.md and index.html in their title, results.csv in its run_id
column, stats.json in "run", the plots in their metadata (PDF Subject,
SVG and PNG Description) and their captions.

The files name the store by its file name only, never by a path.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
from pathlib import Path
from typing import Mapping, Sequence

from . import console, figures, matrix, paper, sections
from .kit import plots, reportdir, table
from .. import __version__
from ..core import attackers
from ..analysis import checks
from ..analysis.families import kv as kv_analysis
from ..errors import UsageError

METHODOLOGY = "docs/methodology.md"

# What `report --format` chooses from (default: all of them).
FORMATS = ("html", "md", "tex", "csv")


# ---- the environment ----

def _yes_no(v) -> str:
    return "unknown" if v is None else ("yes" if v else "no")


def _mitigations(m) -> str:
    if not m:
        return "unknown"
    affected = {k: v for k, v in m.items() if v and v != "Not affected"}
    return "; ".join(f"{k}: {v}" for k, v in sorted(affected.items())) or "not affected"


def env_rows(env: dict) -> list[tuple[str, str]]:
    """The platform table: what a reader needs to reproduce or judge the numbers."""
    comp = env.get("compiler") or {}
    git = env.get("git") or {}
    reasons = env.get("reasons") or {}

    def v(key: str, text=None) -> str:
        value = env.get(key) if text is None else text
        if value is None:
            return f"unknown ({reasons[key]})" if key in reasons else "unknown"
        return str(value)

    mem = env.get("memory_bytes")
    return [
        ("CPU", v("cpu_model")),
        ("microcode", v("microcode")),
        ("CPUs (usable)", f"{env.get('nproc')} ({env.get('nproc_usable')})"),
        ("memory", f"{mem / 2**30:.1f} GiB" if mem else v("memory_bytes")),
        ("relevant CPU flags", " ".join(env.get("cpu_flags_relevant") or []) or "none"),
        ("kernel", v("kernel", env.get("kernel") and f"Linux {env['kernel']}")),
        ("mitigations", _mitigations(env.get("mitigations"))),
        ("hypervisor", v("hypervisor", env.get("hypervisor") or "none (bare metal)")),
        ("frequency governor", v("governor")),
        ("turbo", v("turbo", None if env.get("turbo") is None else _yes_no(env["turbo"]))),
        ("SMT active", v("smt", None if env.get("smt") is None else _yes_no(env["smt"]))),
        ("ASLR (randomize_va_space)", v("aslr")),
        ("perf_event_paranoid", v("perf_event_paranoid")),
        ("hardware PMU", _yes_no(env.get("pmu"))),
        ("isolated CPUs", env.get("isolated_cpus") or "none"),
        ("clock source", v("clocksource")),
        ("counter", v("counter", env.get("counter") and
                      f"{env['counter']} ({env.get('counter_why') or ''})")),
        ("TSC frequency", v("tsc_hz", env.get("tsc_hz") and
                            f"{table.fmt_hz(env['tsc_hz'])} ({env.get('tsc_hz_source')})")),
        ("compiler", v("compiler", comp and f"{comp.get('cc')} {comp.get('cflags') or ''}".strip())),
        ("isobench", f"{env.get('isobench_version')}, driver {comp.get('version', '?')}"),
        ("git commit", v("git", git and (git.get("commit", "?")[:12]
                                         + (" (dirty)" if git.get("dirty") else "")))),
        ("Python", v("python")),
    ]


# ---- results ----

def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


RESULT_HEADERS = ("kind", "benchmark", "mechanism", "params", "reps", "value",
                  "95% interval", "from", "unit", "~ns", "ratio to direct [95%]", "overhead",
                  "n", "median", "batched", "p5", "p95", "robust CV", "CV between reps",
                  "outliers")


def _params_text(c: Mapping) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(c["params"].items())) or "-"


def result_cells(c: Mapping) -> list[str]:
    h, d, r = c["headline"], c["distribution"], c["ratio"]
    outl = f"{d['outliers']} ({d['outliers'] / d['n']:.1%})" if d.get("outliers") is not None \
        and d["n"] else "-"
    return [c["kind"], c["benchmark"], c["mechanism"], _params_text(c), str(h["reps"]),
            table.fmt_num(h["value"]), table.interval_text(h), table.source_text(h),
            c["unit"] or "-", table.fmt_num(h["ns"]), table.ratio_text(c),
            f"{r['overhead']:+.1%}" if r else "-", str(d["n"]),
            table.fmt_num(table.rep_middle(c, "median")),
            table.fmt_num(table.rep_middle(c, "batched")),
            table.fmt_num(d["p5"]), table.fmt_num(d["p95"]), _pct(d["robust_cv"]),
            _pct(c["between_cv"]), outl]


# ---- published figures beside local ones ----

PUBLISHED_HEADERS = ("what", "metric", "PUBLISHED value", "source", "hardware (theirs)",
                     "local headline (this run)", "where / note")


def published_rows(doc: Mapping, all_published: bool = True) -> list[list[str]]:
    """One row per published figure (only those with a local counterpart in
    this run unless all_published)."""
    rows = []
    for ref in doc["published"]:
        if not all_published and not ref["local"]:
            continue
        spread = f" (sd {ref['spread_text']})" if ref.get("spread_text") else ""
        per = f", {ref['per']}" if ref.get("per") else ""
        mine = "; ".join(
            f"{l['placement'] or '-'}: {table.fmt_num(l['value'])} {l['unit']}"
            + (f" = {table.fmt_num(l['ns'])} ns" if l["ns"] is not None else "")
            + f" ({l['source']})" for l in ref["local"]) or "-"
        source = ref["source"] + (f" ({ref['link']})" if ref.get("link") else "")
        metric = (ref["metric"] or "-") + (f" [derived: {ref['derived']}]"
                                           if ref.get("derived") else "")
        rows.append([ref["subject"], metric,
                     f"{ref['text']} {ref['unit']}{per}{spread}", source, ref["hardware"],
                     mine, f"{ref['where']}{'; ' + ref['note'] if ref['note'] else ''}"])
    return rows


def published_note(doc: Mapping, all_published: bool) -> str:
    """What the published table leaves out, and how to see it."""
    hidden = sum(1 for ref in doc["published"] if not ref["local"])
    if all_published or not hidden:
        return ""
    return (f"{hidden} more published figure(s) have no local counterpart in this run: "
            "`isobench reference` lists them, `isobench report --all-published` shows them "
            "here.")


# ---- HTML ----

# The page reads on a screen (wide tables scroll inside their box) and
# prints in a few pages (@media print): compact tables first, the full
# results folded into <details> (a closed one prints as its summary line),
# table cells allowed to wrap so no column is cut at the paper's edge, and
# plots kept whole and at most about half a page high.
CSS = """
body { font-family: sans-serif; margin: 2em; max-width: 1400px; color: #222; line-height: 1.35; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.cell { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.cell span { color: #555; font-size: 0.9em; }
.wide { overflow-x: auto; }
.findings { background: #fff6e0; border: 1px solid #e0b050; padding: 0.5em 1em; }
.clean { background: #e8f6e8; border: 1px solid #80c080; padding: 0.5em 1em; }
.published { background: #f3ecfa; }
.note { color: #666; font-style: italic; }
code { background: #f3f3f3; padding: 0 0.2em; border-radius: 2px; font-size: 0.92em; }
nav { font-size: 0.9em; }
figure { margin: 1em 0; }
figcaption { font-size: 0.9em; }
summary { cursor: pointer; font-weight: bold; }
img { max-width: 100%; border: 1px solid #ddd; }
pre { font-size: 0.8em; }
@media print {
  @page { margin: 12mm; }
  body { margin: 0; max-width: none; font-size: 9pt; }
  nav { display: none; }
  h1 { font-size: 14pt; margin: 0 0 0.3em; }
  h2 { font-size: 12pt; margin: 0.8em 0 0.3em; break-after: avoid; }
  h3 { font-size: 10pt; margin: 0.6em 0 0.2em; break-after: avoid; }
  table { font-size: 7pt; margin: 0.3em 0 0.8em; max-width: 100%; }
  th, td { padding: 1px 3px; }
  td { overflow-wrap: anywhere; }
  td.num, td.cell { overflow-wrap: normal; }
  .findings ul { padding-left: 1.2em; margin: 0.3em 0; }
  tr { break-inside: avoid; }
  .wide { overflow: visible; }
  figure { break-inside: avoid; margin: 0.5em 0; }
  img { max-height: 3.7in; width: auto; border: none; }
  figcaption { font-size: 7.5pt; }
  pre { white-space: pre-wrap; font-size: 6.5pt; }
  a { color: inherit; text-decoration: none; }
  details:not([open]) > summary { font-weight: normal; font-style: italic; }
}
"""

NUMERIC = {"reps", "n", "value", "95% interval", "median", "batched", "p5", "p95",
           "robust CV", "CV between reps", "outliers", "~ns", "ratio to direct [95%]",
           "overhead", "ns", "95% interval ns"}


def _e(text) -> str:
    return table.html_text(text)


_CODE = re.compile(r"`([^`]+)`")
_DOC = re.compile(r"(?<![\w/.])(docs/[\w-]+\.md(?:#[\w-]+)?)")


def inline(text) -> str:
    """Prose from the summary document as HTML: `code` as <code>, and each
    docs/NAME.md[#anchor] as a link to that page of isobench's docs (the
    path is relative to the source tree, where they live)."""
    out, last = [], 0
    text = str(text)
    for m in _CODE.finditer(text):
        out += [_links(text[last:m.start()]), f"<code>{_e(m.group(1))}</code>"]
        last = m.end()
    out.append(_links(text[last:]))
    return "".join(out)


def _links(text: str) -> str:
    return _DOC.sub(lambda m: f"<a href=\"{DOCS_BASE}{m.group(1)}\">{m.group(1)}</a>", _e(text))


# Where docs/... links point: the docs live in isobench's source tree, so the
# link is relative to it (a report written into a folder of the checkout,
# e.g. report/, finds them one level up; elsewhere the path names the page).
DOCS_BASE = "../"


def html_table(headers: Sequence[str], rows: Sequence[Sequence[str]], cls: str = "",
               raw: bool = False) -> str:
    """A table; cells escaped, with `code` and docs links rendered (raw: the
    cells are HTML already)."""
    def cell(h, c):
        text = c if raw else inline(c)
        return f"<td class=\"num\">{text}</td>" if h in NUMERIC else f"<td>{text}</td>"
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(cell(h, c) for h, c in zip(headers, row)) + "</tr>"
                   for row in rows)
    return f"<div class=\"wide\"><table class=\"{cls}\"><tr>{head}</tr>{body}</table></div>"


def _findings_html(findings: Sequence[Mapping]) -> str:
    if not findings:
        return "<div class=\"clean\">No findings: none of the soundness checks fired.</div>"
    n = checks.counts(findings)
    items = "".join(
        f"<li><b>{_e(f['severity'])} {_e(f['id'])}</b>: {inline(f['what'])}. <i>Next:</i> "
        f"{inline(f['next'])} ({inline(f['doc'])}"
        + (f"; SoK flaw: {inline(f['sok'])}" if f.get("sok") else "") + ").</li>"
        for f in findings)
    summary = ", ".join(f"{n[s]} {s}(s)" for s in checks.SEVERITIES if n[s])
    return ("<div class=\"findings\"><p>" + inline(f"{len(findings)} finding(s): {summary}; each "
            "says what to do next. The same list: `isobench check`.") + f"</p><ul>{items}</ul>"
            "</div>")


def caption(plot: plots.Plot, doc: Mapping) -> str:
    """The plot's caption with what its title leaves out: the run and machine."""
    run = doc["run"]
    env = run.get("environment") or {}
    machine = ", ".join(str(x) for x in (env.get("cpu_model"), env.get("hypervisor")) if x)
    return (f"{plot.caption} isobench run {run['run_id']} of {run.get('started')}"
            + (f" on {machine}" if machine else "") + f"; {METHODOLOGY} defines every number.")


def _plot_html(plot: plots.Plot, out_dir: Path, doc: Mapping) -> str:
    if plot.figure is None:
        return f"<h3>{_e(plot.title)}</h3><p class=\"note\">{inline(plot.note)}</p>"
    data = base64.b64encode((out_dir / f"{plot.name}.png").read_bytes()).decode()
    links = ", ".join(f"<a href=\"{plot.name}{suffix}\">{what}</a>" for suffix, what in (
        (".svg", "SVG"), (".png", "PNG"), ("-2col.pdf", "PDF 7 in"), ("-1col.pdf", "PDF 3.5 in")))
    return (f"<figure><h3>{_e(plot.title)}</h3><img alt=\"{_e(plot.title)}\" "
            f"src=\"data:image/png;base64,{data}\"><figcaption>{inline(caption(plot, doc))} "
            f"(also {links})</figcaption></figure>")


def _failures(doc: Mapping) -> list[list[str]]:
    """The results that are not ok, one row per benchmark, mechanism, status
    and reason, with the repetitions it covers."""
    groups: dict[tuple, list[str]] = {}
    for r in doc["results"]:
        if r["status"] != "ok":
            key = (r["benchmark"], r["mechanism"], r["status"], r.get("reason") or "")
            groups.setdefault(key, []).append(str(r["repetition"]))
    return [[b, m, ", ".join(dict.fromkeys(reps)), st, why]
            for (b, m, st, why), reps in groups.items()]


AGGREGATE_HEADERS = ("average", "value [95% CI]", "as overhead", "rows", "method")


def _aggregate_rows(aggs: Sequence[Mapping]) -> list[list[str]]:
    """One line per average: its value with its interval over repetitions,
    and n, the rows it runs over ("5 shared": the sizes every mechanism of
    its population has; "7 own": that mechanism's sizes only, not
    comparable with the others')."""
    out = []
    for a in aggs:
        iv = a.get("interval")
        value = table.fmt_ratio_interval(a["value"], iv) if iv else (
            f"{table.fmt_sig(a['value'])} (no interval: {a.get('note') or 'too few repetitions'})")
        rows = f"{a['n']} " + ("shared" if a.get("shared", True) else "own")
        own = a.get("own")
        if own:
            rows += (f"; over all {own['n']} of its own: "
                     + table.fmt_ratio_interval(own["value"], own.get("interval")))
        out.append([a["name"], value, f"{a['value'] - 1:+.1%}", rows, a["method"]])
    return out


def _matrix_html(env: Mapping) -> list[str]:
    m = attackers.from_environment(env)
    return ["<h2 id=\"attackers\">Isolation by attacker</h2>",
            f"<p>{inline(matrix.context_line(m[1]))}; rule and threat models in "
            f"{inline('docs/mechanisms.md')}.</p>",
            html_table(matrix.MATRIX_HEADERS, matrix.matrix_rows(m[0]))] if m else []


SWITCH_HEADERS = ("mechanism", "placement", "value", "from", "ns", "95% interval ns",
                  "ratio to direct [95%]")
KV_HEADERS = ("mechanism", "placement", "reading", "data", "value", "from", "ns",
              "ratio to direct [95%]")


def _kv_grid_html(doc: Mapping) -> str:
    """kv's time per get as a grid, one row per mechanism and placement, one
    column per data size: the time (its unit chosen per cell) over its ratio
    to direct with the interval (=1: the interval holds 1), the same numbers
    as summary.md's kv table in a page's width."""
    configs = [c for c in doc["configs"] if c["benchmark"] == "kv" and c["headline_phase"]
               and "data_bytes" in c["params"]]
    if not configs:
        return ""
    common = table.common_params(configs)
    places = sorted({c["params"].get("placement") or "-" for c in configs})
    if len(places) == 1:
        common = {**common, "placement": places[0]}  # said once, not in a column
    sizes = sorted({c["params"]["data_bytes"] for c in configs})
    grid: dict[tuple[str, ...], dict[int, Mapping]] = {}
    for c in table.ordered(configs):
        key = (table.config_label(c, set(common)),
               *([] if len(places) == 1 else [c["params"].get("placement") or "-"]))
        grid.setdefault(key, {})[c["params"]["data_bytes"]] = c

    def cell(c: Mapping | None) -> str:
        if c is None:
            return "<td class=\"cell\">-</td>"
        h = c["headline"]
        value = (table.fmt_time(h["ns"]) if h.get("ns") is not None
                 else f"{table.fmt_num(h['value'])} {c['unit'] or ''}")
        flags = table.source_text(h).replace("median", "").replace("batched", "b").strip()
        ratio = table.ratio_text(c) + console.kv_marks(doc, c)
        return (f"<td class=\"cell\">{_e(value)}{' ' + _e(flags) if flags else ''}<br>"
                f"<span>{_e(ratio)}</span></td>")

    head = "".join(f"<th>{_e(h)}</th>" for h in (
        "mechanism", *([] if len(places) == 1 else ["placement"]),
        *(plots.size_label(b) for b in sizes)))
    body = "".join("<tr>" + "".join(f"<td>{_e(k)}</td>" for k in key)
                   + "".join(cell(row.get(b)) for b in sizes) + "</tr>"
                   for key, row in grid.items())
    same = ", ".join(f"{k}={v}" for k, v in common.items())
    return (f"<p>Per data size: the time per get (the headline: the median; b: the batched "
            f"estimate; q: known to a few counter steps) over its ratio to direct at the same "
            f"size [95% interval]; =1: the interval holds 1, no difference from direct shown; "
            f"q±N%: a ratio of a few counter steps, and how far one step moves it. In every "
            f"row: {_e(same or '-')}.</p><div class=\"wide\"><table><tr>{head}</tr>{body}"
            "</table></div>")


def _glance_html(doc: Mapping) -> list[str]:
    """The compact tables summary.md has, first: switch at payload 0, kv per
    data size, then each benchmark family's own."""
    out = []
    sw = _switch_md_rows(doc)
    if sw:
        out += ["<h3>Switch cost (payload 0, round trip)</h3>", html_table(SWITCH_HEADERS, sw)]
    kv = _kv_grid_html(doc)
    if kv:
        out += ["<h3>Key-value store, time per get</h3>", kv]
    return out + sections.html_blocks(doc)


def _full_results_html(doc: Mapping) -> list[str]:
    """Every configuration with every column, one folded block per benchmark
    (printed folded: results.csv holds the same rows)."""
    run_id = doc["run"]["run_id"]
    by: dict[str, list[Mapping]] = {}
    for c in doc["configs"]:
        by.setdefault(c["benchmark"], []).append(c)
    headers = (RESULT_HEADERS[0], *RESULT_HEADERS[2:])  # the benchmark is the block's
    out = [f"<p>{inline(results_note(doc))}</p>"]
    if doc["configs"]:
        example = plots.config_text(doc["configs"][0])
        out.append("<p>" + inline(
            f"The raw samples of any row: `isobench plot {run_id} --config 'BENCHMARK "
            f"MECHANISM PARAMS' -o FILE` draws their ECDF and histogram, e.g. `isobench plot "
            f"{run_id} --config '{example}' -o samples.svg`.") + "</p>")
    for bench, cs in by.items():
        out.append(f"<details><summary>{_e(bench)}: {len(cs)} configuration(s), every column "
                   f"(folded; the same rows are in <a href=\"results.csv\">results.csv</a>)"
                   f"</summary>"
                   + html_table(headers, [[r[0], *r[2:]] for r in map(result_cells, cs)])
                   + "</details>")
    return out


def _samples_html(sample_plots, out_dir: Path, doc: Mapping) -> list[str]:
    """The distributions of the raw samples, folded (printed as one line)."""
    if not sample_plots:
        return []
    figs = "".join(
        f"<figure><h3>{_e(p.title)}</h3><img alt=\"{_e(p.title)}\" src=\"data:image/png;"
        f"base64,{base64.b64encode((out_dir / f'{p.name}.png').read_bytes()).decode()}\">"
        f"<figcaption>{inline(caption(p, doc))} (also <a href=\"{p.name}.svg\">SVG</a>)"
        "</figcaption></figure>" for p in sample_plots)
    return [f"<details><summary>Distributions of the raw samples: one ECDF per "
            f"configuration, {len(sample_plots)} plot(s) (folded; "
            + ", ".join(f"<a href=\"{p.name}.png\">{p.name}.png</a>" for p in sample_plots)
            + f")</summary>{figs}</details>"]


def render_html(doc: Mapping, plot_list, out_dir, all_published: bool = False,
                sample_plots: Sequence = ()) -> str:
    run = doc["run"]
    opts = run.get("options") or {}
    aggs = doc["aggregates"]
    fails = _failures(doc)
    toc = [("glance", "Results at a glance"), ("soundness", "Soundness"),
           ("plots", "Plots"), ("attackers", "Isolation by attacker"),
           ("platform", "Platform"), ("averages", "Averages"), ("results", "Full results"),
           *([("failed", "Failed and skipped")] if fails else []),
           ("published", "Published figures")]
    parts = [
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\">",
        f"<title>isobench run {run['run_id']}</title><style>{CSS}</style></head><body>",
        f"<h1>isobench report: run {run['run_id']}</h1>",
        f"<p>Started {_e(run.get('started'))}, finished {_e(run.get('finished') or '-')}, "
        f"status <b>{_e(run.get('status'))}</b>. Store: {_e(Path(run['db']).name)}. Command: "
        f"<code>{_e(' '.join(run.get('argv') or []))}</code>. Repetitions: "
        f"{_e(opts.get('repeat', 1))}, order seed {_e(opts.get('seed', '-'))}. "
        f"Report by isobench {__version__}; every number is defined in "
        f"{inline(METHODOLOGY)}.</p>",
        "<nav>Contents: " + " · ".join(f"<a href=\"#{a}\">{_e(t)}</a>" for a, t in toc)
        + "</nav>",
        "<h2 id=\"glance\">Results at a glance</h2>", *_glance_html(doc),
        "<h2 id=\"soundness\">Soundness</h2>", _findings_html(doc["findings"]),
        "<h2 id=\"plots\">Plots</h2>", *[_plot_html(p, out_dir, doc) for p in plot_list],
        *_samples_html(sample_plots, Path(out_dir), doc),
        *_matrix_html(run.get("environment") or {}),
        "<h2 id=\"platform\">Platform</h2>",
        html_table(("", ""), env_rows(run.get("environment") or {})),
        "<h2 id=\"averages\">Averages</h2>",
        html_table(AGGREGATE_HEADERS,
                   _aggregate_rows(aggs)) if aggs else "<p class=\"note\">No ratios to average "
        "(an average runs over data sizes of one benchmark, mechanism, placement and phase).</p>",
        "<h2 id=\"results\">Full results</h2>", *_full_results_html(doc),
    ]
    if fails:
        parts += ["<h2 id=\"failed\">Failed and skipped</h2>",
                  html_table(("benchmark", "mechanism", "repetitions", "status", "reason"),
                             fails)]
    # Last: figures that were not measured here.
    parts += [
        "<h2 id=\"published\">Published figures beside local numbers</h2>",
        "<p>These figures were <b>published</b> by others, on their hardware, with their "
        "harness. They are shown beside the closest local configuration and are never part "
        "of any local statistic.</p>",
        html_table(PUBLISHED_HEADERS, published_rows(doc, all_published), "published"),
        f"<p class=\"note\">{inline(published_note(doc, all_published))}</p>"
        if published_note(doc, all_published) else "",
        "</body></html>"]
    return "\n".join(parts)


def results_note(doc: Mapping) -> str:
    m = doc["method"]
    return (f"value: the headline, {m['headline']}; {m['value']}. 95% interval: {m['interval']}. "
            f"from: median or batched (q: quantized, known to a few counter steps; !: "
            f"batched-unreliable; m: the repetitions fall into separate groups, shown as N "
            f"modes with no interval; 1p: one process). Ratio to direct = value / direct's value ({m['ratio_interval']}); "
            "overhead = ratio - 1. n, p5, p95, robust CV (1.4826 MAD / median) and outliers "
            "describe the pooled per-call samples (outliers counted, never dropped); median and "
            "batched are the middle of the repetitions' own. kind: micro or macro benchmark. "
            f"Definitions: {METHODOLOGY}.")


# ---- Markdown ----

def _ratio_md(c: Mapping) -> str:
    return table.ratio_text(c)


def _switch_md_rows(doc: Mapping) -> list[list[str]]:
    rows = []
    for c in doc["configs"]:
        if c["benchmark"] != "switch" or c["params"].get("payload", 0) != 0:
            continue
        h = c["headline"]
        iv = h["interval_ns"]
        rows.append([figures.row_label(c["mechanism"], c["params"].get("variant")),
                     c["params"].get("placement") or "-",
                     f"{table.fmt_num(h['value'])} {c['unit']}", table.source_text(h),
                     table.fmt_num(h["ns"]),
                     f"{table.fmt_num(iv[0])}..{table.fmt_num(iv[1])}" if iv else "-",
                     _ratio_md(c)])
    return rows


def _kv_md_rows(doc: Mapping) -> list[list[str]]:
    rows = []
    for c in doc["configs"]:
        if c["benchmark"] != "kv" or not c["headline_phase"] or "data_bytes" not in c["params"]:
            continue
        h = c["headline"]
        rows.append([c["mechanism"], c["params"].get("placement") or "-",
                     kv_analysis.reading_of(c["params"]),
                     plots.size_label(c["params"]["data_bytes"]),
                     f"{table.fmt_num(h['value'])} {c['unit']}", table.source_text(h),
                     table.fmt_num(h["ns"]), _ratio_md(c)])
    return rows


def render_md(doc: Mapping, plot_list, all_published: bool = False) -> str:
    run = doc["run"]
    out = [f"# isobench run {run['run_id']}", "",
           f"Measured {table.md_text(run.get('started'))} with isobench {__version__}; "
           f"statistics as defined in {METHODOLOGY}: {results_note(doc)}", "",
           "## Platform", "", table.md_table(("", ""), env_rows(run.get("environment") or {})), "",
           "## Soundness", ""]
    out += ([f"- **{f['severity']} {f['id']}**: {table.md_text(f['what'])}. Next: "
             f"{table.md_text(f['next'])} ({f['doc']})." for f in doc["findings"]]
            or ["No findings: none of the soundness checks fired."])
    m = attackers.from_environment(run.get("environment") or {})
    if m:
        out += ["", "## Isolation by attacker", "", matrix.context_line(m[1]) + ".", "",
                table.md_table(matrix.MATRIX_HEADERS, matrix.matrix_rows(m[0]))]
    sw = _switch_md_rows(doc)
    if sw:
        out += ["", "## Switch cost (payload 0, round trip)", "",
                table.md_table(SWITCH_HEADERS, sw)]
    kv = _kv_md_rows(doc)
    if kv:
        out += ["", "## Key-value store, time per get", "",
                table.md_table(KV_HEADERS, kv)]
        readings = ((doc.get("sections") or {}).get("kv") or {}).get("readings") or {}
        out += [""] + [f"- reading **{table.md_text(k)}**: {table.md_text(v)}."
                       for k, v in readings.items()]
    for block in sections.markdown_blocks(doc):
        out += ["", block]
    if doc["aggregates"]:
        out += ["", "## Averages (geometric means of ratios)", "",
                table.md_table(AGGREGATE_HEADERS,
                         _aggregate_rows(doc["aggregates"]))]
    published = published_rows(doc, all_published)
    out += ["", "## Published figures (not measured here)", "",
            table.md_table(PUBLISHED_HEADERS, published) if published else
            "_None with a local configuration in this run to stand beside._", ""]
    if published_note(doc, all_published):
        out += [f"_{table.md_text(published_note(doc, all_published))}_", ""]
    for p in plot_list:
        if p.figure is None:
            out += [f"_{table.md_text(p.note)}_", ""]
        else:
            out += [f"![{table.md_text(p.title)}]({p.name}.png)", "",
                    table.md_text(caption(p, doc)), ""]
    return "\n".join(out)


# ---- writing ----

def prepare(out_dir: Path) -> Path:
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = out_dir / ".isobench-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise UsageError(f"cannot write the report to {out_dir}: {e.strerror or e}") from None
    return out_dir


def write(doc: Mapping, out_dir: Path, formats: Sequence[str] = FORMATS,
          all_published: bool = False, force: bool = False,
          samples: Mapping | None = None) -> dict:
    """Write the report of a summary document in the formats asked for (see
    the module's list) into out_dir, a folder the report owns
    (reportdir.py: written aside, then moved into place; the previous
    report's files that this one does not rewrite removed; a file of the
    same name as one of the report's that no report wrote is refused
    unless force); what was written and removed, and the findings.  samples
    (the run's raw samples by configuration key, plots.config_samples) adds
    the distribution of each benchmark's samples (samples-BENCH.png, .svg)."""
    out_dir = prepare(out_dir)
    reportdir.read_manifest(out_dir, force)  # a damaged manifest fails before any work
    staged = reportdir.stage(out_dir)
    try:
        out = _write_files(doc, staged, formats, all_published, samples)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    moved = reportdir.commit(staged, out_dir, doc["run"], force)
    return {**out, "dir": str(out_dir), "removed": moved["removed"],
            "overwritten": moved["overwritten"]}


def _write_files(doc: Mapping, out_dir: Path, formats: Sequence[str],
                 all_published: bool, samples: Mapping | None) -> dict:
    # The files name the store by its file name only: they travel, the
    # machine's paths stay (the caller's answer keeps the full path).
    db = doc["run"]["db"]
    doc = {**doc, "run": {**doc["run"], "db": Path(db).name}}
    # A file that cannot be written midway (a full disk, a name taken by a
    # folder) raises OSError with its file name, for the caller to report.
    plot_list = figures.draw(doc, plots.WIDTHS["2col"])
    about = paper.run_text(doc["run"])
    files = []
    for p in plot_list:
        if p.figure is not None:
            (out_dir / f"{p.name}.caption.txt").write_text(caption(p, doc) + "\n")
            files.append(f"{p.name}.caption.txt")
        files += plots.save(p, out_dir, (("png", ""), ("svg", ""), ("pdf", "-2col")), about)
    # The single-column PDF is drawn anew at its width (fonts, legend and
    # panels laid out for 3.5 in), not scaled down.
    for p in figures.draw(doc, plots.WIDTHS["1col"]):
        files += plots.save(p, out_dir, (("pdf", "-1col"),), about)
    sample_plots = [plots.samples_overview(doc, samples, b) for b in dict.fromkeys(
        c["benchmark"] for c in doc["configs"])] if samples else []
    sample_plots = [p for p in sample_plots if p.figure is not None]
    for p in sample_plots:
        (out_dir / f"{p.name}.caption.txt").write_text(caption(p, doc) + "\n")
        files += [f"{p.name}.caption.txt",
                  *plots.save(p, out_dir, (("png", ""), ("svg", "")), about)]
    written = []
    if "html" in formats:
        (out_dir / "index.html").write_text(render_html(doc, plot_list, out_dir, all_published,
                                                        sample_plots))
        written.append("index.html")
    if "md" in formats:
        (out_dir / "summary.md").write_text(render_md(doc, plot_list, all_published))
        written.append("summary.md")
    if "tex" in formats:
        for name, text in paper.tex_files(doc, env_rows(doc["run"].get("environment") or {})
                                          ).items():
            (out_dir / name).write_text(text)
            written.append(name)
    if "csv" in formats:
        (out_dir / "results.csv").write_text(paper.results_csv(doc))
        written.append("results.csv")
    (out_dir / "stats.json").write_text(json.dumps(doc, indent=1) + "\n")
    run = doc["run"]
    return {"run_id": run["run_id"], "db": db, "dir": str(out_dir),
            "formats": list(formats), "files": [*written, "stats.json", *sorted(files)],
            "omitted": {p.name: p.note for p in plot_list if p.figure is None},
            "findings": doc["findings"]}
