"""How a campaign is shown: `isobench campaign show` (text), `campaign
report` (index.html, campaign.md, campaign.json and one heat map per
benchmark, PNG and SVG).

Everything comes from the campaign document (analysis/campaign.py): a
host's cell is the ratio its own summary holds, and nothing here computes
a statistic.  A heat map's colour is the ratio on a log scale (a mechanism
that costs 10x and one that costs 1/10 are as far from 1); each cell is
labelled with its number, and a cell a host has no number for is grey.
"""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path
from typing import Mapping, Sequence

from .kit import plots, table
from . import report
from ..errors import UsageError

DPI = 110


# ---- text ----

HOST_HEADERS = ("host", "run", "status", "CPU", "kernel", "hypervisor", "PMU", "PKU",
                "counter")


def host_rows(doc: Mapping) -> list[list[str]]:
    rows = [[h["host"], str(h["run_id"]), h["status"] or "-", h["cpu"] or "unknown",
             h["kernel"] or "unknown", h["hypervisor"], h["pmu"], h["pku"],
             h["counter"] or "unknown"] for h in doc["hosts"]]
    rows += [[m["host"], "-", f"{m['status']}" + (f" in {m['stage']}" if m.get("stage") else ""),
              "-", "-", "-", "-", "-", "-"] for m in doc["missing"]]
    return rows


def cell_text(cell: Mapping | None) -> str:
    if cell is None:
        return "-"
    if cell["kind"] == "baseline":
        return "1 (baseline)"
    if cell["kind"] == "absolute":
        text = f"{table.fmt_num(cell['value'])} {cell['unit'] or ''}".strip()
    else:
        text = table.fmt_ratio(cell["value"])
    if cell.get("low") is not None and cell.get("high") is not None:
        fmt = table.fmt_num if cell["kind"] == "absolute" else table.fmt_ratio
        text += f" [{fmt(cell['low'])}..{fmt(cell['high'])}]"
    return text


def host_names(doc: Mapping) -> list[str]:
    return [h["host"] for h in doc["hosts"]]


def table_rows(t: Mapping, hosts: Sequence[str]) -> list[list[str]]:
    return [[r["label"], *(cell_text(r["cells"].get(h)) for h in hosts)] for r in t["rows"]]


def _selection_text(doc: Mapping) -> str:
    s = doc.get("selection")
    if not s:
        return ""
    words = [*s.get("benchmarks", [])]
    if s.get("mechanisms"):
        words += ["-m", ",".join(s["mechanisms"])]
    if s.get("quick"):
        words.append("--quick")
    if s.get("repeat"):
        words += ["--repeat", str(s["repeat"])]
    return " ".join(words)


def render_text(doc: Mapping) -> str:
    sel = _selection_text(doc)
    out = [f"campaign {doc['campaign']}: {len(doc['hosts'])} host(s) with results"
           + (f", {len(doc['missing'])} without" if doc["missing"] else "")
           + (f"  ({sel})" if sel else "") + f"  store {doc['db']}", "",
           table.render(HOST_HEADERS, host_rows(doc))]
    for m in doc["missing"]:
        out.append(f"{m['host']}: {m['status']}" + (f" in {m['stage']}" if m.get("stage") else "")
                   + (f": {m['reason']}" if m.get("reason") else ""))
    hosts = host_names(doc)
    out += ["", f"each cell: {doc['cell']}"]
    for note in doc["notes"]:
        out.append(f"note: {note}")
    for t in doc["tables"]:
        out += ["", t["title"], table.render(("mechanism", *hosts), table_rows(t, hosts))]
    if not doc["tables"]:
        out += ["", "no results to show" + (" (no host finished)" if not hosts else "")]
    errors = {h: ids for h, ids in (doc.get("findings") or {}).items() if ids}
    for h, ids in errors.items():
        out.append(f"{h}: `isobench check {_run_of(doc, h)}` finds errors: {', '.join(ids)}")
    return "\n".join(out)


def _run_of(doc: Mapping, host: str):
    return next((h["run_id"] for h in doc["hosts"] if h["host"] == host), "?")


# ---- heat maps ----

def pyplot():
    return plots.pyplot()


def heatmap_plots(doc: Mapping) -> list[plots.Plot]:
    """One heat map per benchmark: rows (population, mechanism), columns
    hosts, colour log10 of the ratio.  Baselines (1 everywhere) are left out."""
    doc = plots.literal_doc(doc)  # no host or mechanism name read as a formula
    if doc.get("absolute"):
        return []
    hosts = host_names(doc)
    by_bench: dict[str, list[tuple[str, Mapping]]] = {}
    for t in doc["tables"]:
        for r in t["rows"]:
            if r["role"] != "baseline":
                pop = t["title"][len(t["benchmark"]):].strip()
                by_bench.setdefault(t["benchmark"], []).append((f"{r['label']}  {pop}", r))
    out = []
    for bench, rows in by_bench.items():
        name = f"campaign-{bench}"
        title = f"{bench}: ratio to each host's own direct"
        if not hosts or not rows:
            out.append(plots.Plot(name, title, None, f"{bench}: no host has a ratio"))
            continue
        out.append(_heatmap(name, title, hosts, rows))
    return out


def _heatmap(name: str, title: str, hosts: Sequence[str],
             rows: Sequence[tuple[str, Mapping]]) -> plots.Plot:
    plt = pyplot()
    from matplotlib import colors
    values = [[(r["cells"].get(h) or {}).get("value") for h in hosts] for _, r in rows]
    logs = [[math.log10(v) if v and v > 0 else math.nan for v in row] for row in values]
    finite = [abs(x) for row in logs for x in row if not math.isnan(x)]
    span = max(finite + [0.1])
    fig, ax = plt.subplots(figsize=(2.0 + 1.6 * len(hosts), 1.2 + 0.38 * len(rows)))
    cmap = plt.get_cmap("RdYlBu_r").with_extremes(bad="#dddddd")
    import numpy as np
    im = ax.imshow(np.ma.masked_invalid(np.array(logs, dtype=float)), cmap=cmap,
                   norm=colors.Normalize(vmin=-span, vmax=span), aspect="auto")
    ax.set_xticks(range(len(hosts)), labels=list(hosts))
    ax.set_yticks(range(len(rows)), labels=[label for label, _ in rows])
    ax.tick_params(axis="x", top=True, bottom=False, labeltop=True, labelbottom=False)
    for i, row in enumerate(values):
        for j, v in enumerate(row):
            ax.text(j, i, table.fmt_ratio(v) if v is not None else "-", ha="center",
                    va="center", fontsize=8)
    bar = fig.colorbar(im, ax=ax, shrink=0.8)
    bar.set_label("ratio to the host's direct (log scale)")
    ticks = [t for t in (-3, -2, -1, 0, 1, 2, 3, 4, 5) if -span <= t <= span] or [0]
    bar.set_ticks(ticks, labels=[f"{10 ** t:g}" for t in ticks])
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return plots.Plot(name, title, fig, "", caption=(
        "Each cell: a host's headline over that host's own direct (docs/methodology.md); "
        "grey: no number for that host. Never averaged across hosts."))


# ---- Markdown and HTML ----

def render_md(doc: Mapping, plot_list: Sequence[plots.Plot]) -> str:
    hosts = host_names(doc)
    out = [f"# isobench campaign {doc['campaign']}", "",
           f"Selection: `{_selection_text(doc) or '-'}`. Each cell: {doc['cell']}.", "",
           "## Hosts", "", table.md_table(HOST_HEADERS, host_rows(doc))]
    for m in doc["missing"]:
        out += ["", f"- **{m['host']}**: {m['status']}"
                + (f" in {m['stage']}" if m.get("stage") else "")
                + (f": {m['reason']}" if m.get("reason") else "")]
    for note in doc["notes"]:
        out += ["", f"_Note: {note}._"]
    for t in doc["tables"]:
        out += ["", f"## {t['title']}", "", table.md_table(("mechanism", *hosts), table_rows(t, hosts))]
    out.append("")
    for p in plot_list:
        out += [f"![{p.title}]({p.name}.png)" if p.figure is not None else f"_{p.note}_", ""]
    return "\n".join(out)


def _e(t) -> str:
    return table.html_text(t)


def _html_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


CSS = """
body { font-family: sans-serif; margin: 2em; max-width: 1400px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; }
th { background: #f0f0f0; }
.note { color: #666; font-style: italic; }
img { max-width: 100%; border: 1px solid #ddd; }
"""


def render_html(doc: Mapping, plot_list: Sequence[plots.Plot], out_dir: Path) -> str:
    hosts = host_names(doc)
    parts = ["<!DOCTYPE html><html><head><meta charset=\"utf-8\">",
             f"<title>isobench campaign {_e(doc['campaign'])}</title><style>{CSS}</style>"
             "</head><body>", f"<h1>isobench campaign {_e(doc['campaign'])}</h1>",
             f"<p>Selection: <code>{_e(_selection_text(doc) or '-')}</code>. Store: "
             f"{_e(doc['db'])}. Each cell: {_e(doc['cell'])}.</p>",
             "<h2>Hosts</h2>", _html_table(HOST_HEADERS, host_rows(doc))]
    for m in doc["missing"]:
        parts.append(f"<p><b>{_e(m['host'])}</b>: {_e(m['status'])}"
                     + (f" in {_e(m['stage'])}" if m.get("stage") else "")
                     + (f": {_e(m['reason'])}" if m.get("reason") else "") + "</p>")
    parts += [f"<p class=\"note\">{_e(n)}</p>" for n in doc["notes"]]
    parts.append("<h2>Heat maps</h2>")
    for p in plot_list:
        if p.figure is None:
            parts.append(f"<p class=\"note\">{_e(p.note)}</p>")
            continue
        data = base64.b64encode((out_dir / f"{p.name}.png").read_bytes()).decode()
        parts.append(f"<h3>{_e(p.title)}</h3><img alt=\"{_e(p.title)}\" "
                     f"src=\"data:image/png;base64,{data}\"><p>{_e(p.caption)}</p>")
    parts.append("<h2>Tables</h2>")
    for t in doc["tables"]:
        parts += [f"<h3>{_e(t['title'])}</h3>",
                  _html_table(("mechanism", *hosts), table_rows(t, hosts))]
    parts.append("</body></html>")
    return "\n".join(parts)


def write(doc: Mapping, out_dir: Path) -> dict:
    """The campaign report in out_dir; what was written."""
    out_dir = report.prepare(out_dir)
    plot_list = heatmap_plots(doc)
    files = [n for p in plot_list for n in plots.save(p, out_dir)]
    (out_dir / "index.html").write_text(render_html(doc, plot_list, out_dir))
    (out_dir / "campaign.md").write_text(render_md(doc, plot_list))
    (out_dir / "campaign.json").write_text(json.dumps(doc, indent=1) + "\n")
    return {"campaign": doc["campaign"], "dir": str(out_dir),
            "files": ["index.html", "campaign.md", "campaign.json", *files],
            "omitted": {p.name: p.note for p in plot_list if p.figure is None}}
