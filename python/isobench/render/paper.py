"""What a paper takes from a report: LaTeX tables and a tidy CSV.

LaTeX (`report --format tex`): three tables, each in a file of its own
that both compiles alone (`pdflatex kv.tex`: a one-page article as wide as
the table) and can be `\\input` into a two-column paper, which needs only
`\\usepackage{booktabs}`: behind `\\ifx\\documentclass` (an error once a
document has begun) the file opens its own document only when there is
none.  Each fits the width it is written for, said in its header: one
column (`table`, 3.33 in) or both (`table*`, 7 in); a table too wide for
that is set smaller, then folded into blocks under each other, never
scaled (_fit).  tests/python/test_paper.py compiles each alone and inside
a two-column paper where a TeX engine is installed, and fails on any box
too wide.

    platform.tex  the machine and how it measured (the report's platform table)
    switch.tex    round trip at payload 0 per mechanism, same and across CPUs,
                  with the 95% interval and the ratio to direct
    kv.tex        time per get of direct per data size, and every mechanism's
                  ratio to it, each with its 95% interval and its marks
                  (interval includes 1; ratio of quantized values, with
                  its resolution), and the geometric mean over the sizes
                  every mechanism shares with its interval (the kv section,
                  analysis/families/kv.py)

CSV (`report --format csv`, results.csv): one row per configuration in tidy
form (one observation per row, one variable per column): the run, the
benchmark and mechanism, one column per parameter, the headline in its
counter unit and in ns, its 95% interval, the ratio to the baseline with
its interval, how many repetitions, which rule chose the headline, and a
row with status and reason for every configuration that was skipped or
failed in every repetition; then the counter and what tells two machines'
CSVs apart (host, CPU model, kernel, commit, the run's start).  Booleans
are written true or false.  CSV_COLUMNS lists the fixed columns; the
parameter columns (PARAM_FIRST, then the others a run has, sorted) go
after `mechanism`.

Everything comes from the summary document; nothing here computes.
"""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Mapping, Sequence

from ..analysis.families.kv import STEPS_FEW
from ..analysis.kit.runs import BASELINE, OUTPUT_PARAMS
from ..core.records import RUN_COLUMNS, run_columns
from ..core.validate import csv_text
from .kit import table

# ---- LaTeX ----

_TEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                "^": r"\textasciicircum{}", "µ": r"\ensuremath{\mu}", "±": r"\ensuremath{\pm}",
                "×": r"\ensuremath{\times}", "≥": r"\ensuremath{\geq}", "≤": r"\ensuremath{\leq}",
                "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}"}


def tex(text) -> str:
    """text as LaTeX that prints it literally (pdflatex, no extra packages);
    control characters (which stop pdflatex) as visible escapes first."""
    return "".join(_TEX_SPECIAL.get(ch, ch) for ch in table.terminal(text))


def _small(text: str) -> str:
    return r"{\scriptsize " + text + "}" if text and text != "-" else ""


# The widths a table is laid out for (its \linewidth): a column of a
# two-column paper, or the text width across both columns for a table*.
# ACM (sigconf) and USENIX papers have 3.33 in and 7 in, IEEE 3.5 in and
# 7.16 in: a table that fits the first fits them all.
COLUMN_WIDTH = "3.33in"
TEXT_WIDTH = "7in"


def run_text(run: Mapping) -> str:
    """The run a file shows, as its header or metadata names it."""
    return f"isobench run {run['run_id']} (started {run.get('started')})"


Block = tuple[str, Sequence[str], Sequence[str]]


def _table(label: str, caption: str, blocks: Sequence[Block], run: Mapping,
           wide: bool = False, size: str = r"\footnotesize") -> str:
    r"""A booktabs table environment in a file that compiles alone and can
    also be \input into a paper: one tabular per block (spec, head rows,
    body rows, all already escaped), stacked.  wide: table*, which spans
    both columns of a two-column paper.

    Alone (`pdflatex NAME.tex`) the file opens a one-page article whose
    text is as wide as the table is written for; inside a paper (after
    \begin{document}, where LaTeX has made \documentclass an error) that
    part is skipped, so the paper only needs \usepackage{booktabs}."""
    env, width = ("table*", TEXT_WIDTH) if wide else ("table", COLUMN_WIDTH)
    where = ("across both columns of a two-column paper (table*)" if wide
             else "in one column of a two-column paper (table)")
    return "\n".join([
        f"% {run_text(run)}: the {label} table of `isobench report`.",
        f"% Written for {width} {where}; no other package than booktabs.",
        f"% Alone: pdflatex {label}.tex.  In a paper: \\usepackage{{booktabs}} in the "
        f"preamble, then \\input{{{label}}}.",
        r"\expandafter\ifx\csname @notprerr\endcsname\documentclass",
        r"\let\isobenchend\relax",
        r"\else",
        r"\documentclass{article}",
        r"\usepackage{booktabs}",
        f"\\setlength{{\\textwidth}}{{{width}}}\\setlength{{\\oddsidemargin}}{{0pt}}"
        r"\setlength{\evensidemargin}{0pt}",
        r"\setlength{\textheight}{9in}\setlength{\topmargin}{-0.5in}",
        r"\pagestyle{empty}",
        r"\begin{document}",
        r"\def\isobenchend{\end{document}}",
        r"\fi",
        f"\\begin{{{env}}}[t]", r"\centering", size,
        r"\setlength{\tabcolsep}{3pt}",
        f"\\caption{{{caption}}}", f"\\label{{tab:isobench-{label}}}",
        *[line for i, (spec, head, rows) in enumerate(blocks)
          for line in ([r"\par\medskip"] if i else []) + [
              f"\\begin{{tabular}}{{{spec}}}", r"\toprule", *head, r"\midrule", *rows,
              r"\bottomrule", r"\end{tabular}"]],
        f"\\end{{{env}}}", r"\isobenchend", ""])


def _breakable(text) -> str:
    """tex(text) that may break after a slash or an underscore, so that a
    long path or identifier wraps in a narrow column."""
    return tex(text).replace("/", r"/\allowbreak{}").replace(r"\_", r"\_\allowbreak{}")


# ---- fitting a table to its width ----
#
# A table's width is estimated from its cells with Computer Modern's
# character widths (in em of the 10 pt design: digits 0.5, punctuation
# 0.28, ...), in the sizes of a 10 pt paper (a 9 pt paper's are smaller).
# The sizes are the fonts' widths, not their nominal sizes: Computer
# Modern's small designs are wider, so that a digit of \footnotesize
# (8 pt) is as wide as 8.5 pt of the 10 pt design, of \scriptsize (7 pt)
# 8 pt, of \tiny (5 pt) 6.8 pt (measured with pdflatex).  The estimate
# errs wide by ESTIMATE_MARGIN; test_paper.py compiles the widest cells
# and checks that TeX finds no box too wide.

_PT = {"column": 240.9, "text": 505.9}      # COLUMN_WIDTH and TEXT_WIDTH in pt
# (main line, line under it), in pt: the usual sizes, then smaller ones.
SIZES = ((r"\footnotesize", 8.5, r"\scriptsize", 8.0), (r"\scriptsize", 8.0, r"\tiny", 6.8))
ESTIMATE_MARGIN = 1.08
_SEP = 6.0                                   # 2 \tabcolsep between columns
_EM = {**dict.fromkeys("0123456789", 0.5), **dict.fromkeys(".,:;[]()'!", 0.278),
       " ": 0.333, "=": 0.778, "+": 0.778, "-": 0.333, "/": 0.5}
_MACROS = ((r"\ensuremath{\mu}", 0.6), (r"$\pm$", 0.778), (r"\%", 0.833), (r"$\times$", 0.778),
           (r"$^{\circ q}$", 0.75), (r"$^{\circ}$", 0.4), (r"$^{q}$", 0.4), (r"$^\dagger$", 0.4),
           (r"\_", 0.5), ("--", 0.5))


def _em(text: str) -> float:
    """The estimated width of a cell's LaTeX in em of its font."""
    w = 0.0
    for macro, em in _MACROS:
        w += text.count(macro) * em
        text = text.replace(macro, "")
    text = re.sub(r"\\[a-zA-Z]+ ?|[{}$^]", "", text)
    return w + sum(_EM.get(ch, 0.75 if ch.isupper() else 0.53) for ch in text)


def _fit(labels: Sequence[str], columns: Sequence[tuple[str, Sequence[tuple[str, str]]]],
         fold: bool = True) -> tuple[str, int, list[range]]:
    """Where a table of these columns (head, [(value, line under it)] per
    row) beside these row labels fits: ("column" or "text", the index in
    SIZES, the columns of each block); the largest size at the narrowest
    width, else folded into blocks under each other (fold), else the
    smallest size across the text width."""
    def widths(i):
        _, main, _, sub = SIZES[i]
        label = max((_em(l) * main for l in labels), default=0) + _SEP / 2
        cols = [max([_em(head) * main] + [max(_em(v) * main, _em(u) * sub) for v, u in cells])
                * ESTIMATE_MARGIN + _SEP for head, cells in columns]
        return label * ESTIMATE_MARGIN, cols

    for where in ("column", "text"):
        for i in range(len(SIZES)):
            label, cols = widths(i)
            if label + sum(cols) - _SEP / 2 <= _PT[where]:
                return where, i, [range(len(columns))]
    if not fold:
        return "text", len(SIZES) - 1, [range(len(columns))]
    label, cols = widths(len(SIZES) - 1)
    blocks, first, used = [], 0, label
    for j, w in enumerate(cols):
        if j > first and used + w - _SEP / 2 > _PT["text"]:
            blocks.append(range(first, j))
            first, used = j, label
        used += w
    blocks.append(range(first, len(cols)))
    return "text", len(SIZES) - 1, blocks


def _resize(cells: Sequence[tuple[str, str]], size: int) -> list[tuple[str, str]]:
    """The lines under the values in the smaller size of SIZES[size]."""
    small = SIZES[size][2]
    return [(v, u.replace(r"{\scriptsize ", "{" + small + " ")) for v, u in cells]


def platform_tex(doc: Mapping, rows: Sequence[tuple[str, str]]) -> str:
    # Both columns wrap, ragged right, within the column's width; rows end
    # in \tabularnewline, which \raggedright leaves alone (no array package).
    run = doc["run"]
    body = [f"\\raggedright {_breakable(k)} & \\raggedright {_breakable(v)} \\tabularnewline"
            for k, v in rows]
    return _table("platform", f"Platform of isobench run {run['run_id']}: the machine and "
                  "how it measured.",
                  [(r"@{}p{0.3\linewidth}p{\dimexpr0.7\linewidth-2\tabcolsep\relax}@{}",
                    [r"Property & Value \\"], body)], run)


def _time_cells(c: Mapping | None) -> tuple[str, str]:
    if c is None:
        return "--", ""
    v, iv = table.value_cells(c, "time" if c["headline"].get("ns") is not None else "value")
    return tex(v), _small(tex(iv))


def _ratio_cells(c: Mapping | None) -> tuple[str, str]:
    if c is None:
        return "--", ""
    r = c.get("ratio")
    if r is None:
        return ("baseline" if c["role"] == "baseline" else "--"), ""
    iv = r.get("interval") or {}
    if iv.get("low") is None:
        return table.fmt_sig(r["value"]), _small("no CI")
    return (table.fmt_sig(r["value"]),
            _small(f"[{table.fmt_sig(iv['low'])}, {table.fmt_sig(iv['high'])}]"))


def switch_rows(doc: Mapping) -> list[tuple[str, dict[str, Mapping]]]:
    """(row label, {placement: config}) at payload 0, cheapest first by the
    same-cpu headline; direct's variants first."""
    rows: dict[str, dict[str, Mapping]] = {}
    for c in doc["configs"]:
        if c["benchmark"] != "switch" or c["params"].get("payload", 0) != 0 \
                or c["headline"]["value"] is None:
            continue
        label = table.config_label(c)
        rows.setdefault(label, {})[c["params"].get("placement") or "same-cpu"] = c

    def cost(item):
        label, by = item
        c = by.get("same-cpu") or next(iter(by.values()))
        direct = c["mechanism"] == BASELINE
        h = c["headline"]
        return (not direct, h.get("ns") if h.get("ns") is not None else h["value"], label)

    return sorted(rows.items(), key=cost)


def switch_tex(doc: Mapping) -> str | None:
    """switch.tex: like kv.tex, two lines per mechanism, the values and,
    under them, their 95% intervals, so that three placements fit the
    width of a page and one the width of a column."""
    rows = switch_rows(doc)
    if not rows:
        return None
    places = [p for p in ("same-cpu", "cross-cpu", "unpinned")
              if any(p in by for _, by in rows)]
    names = {"same-cpu": "Same CPU", "cross-cpu": "Across CPUs", "unpinned": "Unpinned"}
    head = ["Mechanism & " + " & ".join(f"\\multicolumn{{2}}{{c}}{{{names[p]}}}"
                                        for p in places) + r" \\",
            "".join(f"\\cmidrule(lr){{{2 + 2 * i}-{3 + 2 * i}}}" for i in range(len(places))),
            " & " + " & ".join(r"Round trip & $\times$ direct" for _ in places) + r" \\"]
    lines = [(tex(label), [f(by.get(p)) for p in places for f in (_time_cells, _ratio_cells)])
             for label, by in rows]
    where, size, _ = _fit([label for label, _ in lines],
                          [(head, [cells[i] for _, cells in lines]) for i, head in
                           enumerate(["Round trip", r"$\times$ direct"] * len(places))],
                          fold=False)
    body = []
    for label, cells in lines:
        cells = _resize(cells, size)
        body.append(label + " & " + " & ".join(m for m, _ in cells) + r" \\")
        if any(sub for _, sub in cells):
            body.append(" & " + " & ".join(sub for _, sub in cells) + r" \\[2pt]")
    skipped = sorted({r["mechanism"] for r in doc["results"] if r["benchmark"] == "switch"
                      and r["status"] != "ok"} - {c["mechanism"] for _, by in rows
                                                  for c in by.values()})
    note = (f" Not measured here (skipped or failed): {tex(', '.join(skipped))}."
            if skipped else "")
    note += "".join(f" {tex(n)}." for n in table.caveat_notes(
        [c for _, by in rows for c in by.values()]))
    return _table("switch", "Round trip into the compartment and back, no payload: the "
                  "headline (geometric mean over repetitions) and, under it, its 95\\% "
                  "interval; the ratio to direct's entry call with its interval. Direct's "
                  f"variants are the plain calls a compiler makes.{note}",
                  [("@{}l" + "rr" * len(places) + "@{}", head, body)], doc["run"],
                  wide=where == "text", size=SIZES[size][0])


def _pct(v: float) -> str:
    return f"{100 * v:.2g}" if v < 0.1 else f"{100 * v:.0f}"


def _kv_ratio_cell(r: Mapping | None) -> tuple[str, str]:
    r"""A ratio and, for the line under it, its interval: marked $^\circ$
    where the interval includes 1 (no difference from direct shown), $^q$
    where it is a ratio of quantized values; where either value is a few
    counter steps, the line under it gives the resolution itself ($\pm$ what
    one step on each side moves it by)."""
    if r is None:
        return "--", ""
    marks = " ".join(m for m, on in (("\\circ", r["includes_one"]), ("q", r["quantized"])) if on)
    text = table.fmt_sig(r["value"]) + (f"$^{{{marks}}}$" if marks else "")
    iv = r.get("interval")
    small = f"[{table.fmt_sig(iv['low'])}, {table.fmt_sig(iv['high'])}]" if iv else "no CI"
    if r["few_steps"]:
        small += f" $\\pm${_pct(r['resolution_rel'])}\\%"
    return text, _small(small)


def _kv_time_cell(c: Mapping) -> tuple[str, str]:
    if c.get("ns") is not None:
        unit = table.time_unit(c["ns"])
        lo, hi = c.get("interval_ns") or (None, None)
        v, iv = table.fmt_time(c["ns"], unit), table.fmt_interval(lo, hi, unit[1])
    else:
        v = f"{table.fmt_sig(c['value'])} {c['unit'] or ''}".rstrip()
        iv = table.fmt_interval((c.get("interval") or {}).get("low"),
                                (c.get("interval") or {}).get("high"))
    return (tex(v) + ("$^{q}$" if c.get("quantized") else ""),
            _small(tex(iv)) if iv != "-" else _small("no CI"))


def _kv_average_cell(a: Mapping | None, sizes: int) -> tuple[str, str]:
    if a is None:
        return "--", ""
    iv = a.get("interval")
    text = table.fmt_sig(a["value"])
    # Over fewer sizes than the table's columns: marked, and the caption
    # says which sizes.
    if a["n"] < sizes or not a.get("shared", True):
        text += r"$^\dagger$"
    small = f"[{table.fmt_sig(iv['low'])}, {table.fmt_sig(iv['high'])}]" if iv else "no CI"
    return text, _small(small + f" n={a['n']}")


def kv_tex(doc: Mapping) -> str | None:
    """kv.tex: two lines per mechanism, the values and, under them, their
    95% intervals (and resolutions), so that the table keeps a paper's width."""
    s = (doc.get("sections") or {}).get("kv")
    if not s:
        return None
    sizes = s["sizes"]

    # One placement: said in the caption; more: a heading row before each
    # placement's rows (same-cpu first), direct first in each.
    places = sorted(dict.fromkeys(row["placement"] for row in s["rows"]),
                    key=lambda p: p != "same-cpu")

    def order(row):
        g = row["average"]
        return (places.index(row["placement"]), row["mechanism"] != BASELINE,
                g["value"] if g else float("inf"), row["label"])

    columns = [tex(table.fmt_bytes(z)) for z in sizes] + [r"Geo.\ mean"]
    lines = []   # (placement, label, [(value, line under it)] per column)
    for row in sorted(s["rows"], key=order):
        cells = []
        for z in sizes:
            c = row["cells"].get(str(z))
            if c is None:
                cells.append(("--", ""))
            elif row["mechanism"] == BASELINE:
                cells.append(_kv_time_cell(c))
            else:
                cells.append(_kv_ratio_cell(c["ratio"]))
        cells.append(("--", "") if row["mechanism"] == BASELINE
                     else _kv_average_cell(row["average"], len(sizes)))
        lines.append((row["placement"], tex(row["label"]), cells))
    # As many columns side by side as the width holds, the rest folded in
    # blocks under them (a full run has 9 sizes, --sizes up to 32).
    where, size, parts = _fit([label for _, label, _ in lines],
                              [(head, [cells[i] for _, _, cells in lines])
                               for i, head in enumerate(columns)])
    lines = [(place, label, _resize(cells, size)) for place, label, cells in lines]
    blocks = []
    for part in parts:
        head = ["Mechanism & " + " & ".join(columns[i] for i in part) + r" \\"]
        body, prev = [], None
        for place, label, cells in lines:
            if len(places) > 1 and place != prev:
                body.append(f"\\multicolumn{{{len(part) + 1}}}{{@{{}}l}}"
                            f"{{\\emph{{{tex(place)}}}}} \\\\")
                prev = place
            body.append(label + " & " + " & ".join(cells[i][0] for i in part) + r" \\")
            body.append(" & " + " & ".join(cells[i][1] for i in part) + r" \\[2pt]")
        blocks.append(("@{}l" + "r" * len(part) + "@{}", head, body))
    shared = "; ".join(f"{tex(place)}: " + tex(", ".join(table.fmt_bytes(z) for z in zs))
                       for place, zs in s["shared_sizes"].items())
    any_dagger = any(row["average"] and (row["average"]["n"] < len(sizes)
                                          or not row["average"].get("shared", True))
                     for row in s["rows"] if row["mechanism"] != BASELINE)
    steps = tex(", ".join(f"{x:g} {unit or ''}".rstrip() for x, unit in s["counter_steps"]))
    caption = ("Key-value store inside the compartment"
               + (f" ({tex(places[0])})" if len(places) == 1 else "")
               + ": time per get of direct (first row"
               + (" of each placement" if len(places) > 1 else "") + ") "
               "and each mechanism's ratio to it, per data size, with 95\\% intervals over "
               "repetitions (Welch t on the log ratio); geometric mean of the ratios over "
               "the sizes every mechanism of the placement has"
               + (f" ({shared})" if shared else "")
               + ", with its 95\\% interval over repetitions and n sizes. "
               + "".join(f"Reading {tex(k)}: {tex(v)}. "
                         for k, v in (s.get("readings") or {}).items())
               + "$^\\circ$: the interval includes 1, so no difference from direct is shown "
               "(a ratio below 1 there is not faster than direct). -- : not measured "
               "(skipped, see the report)")
    caption += "".join(f"; {tex(n)}" for n in table.caveat_notes(
        [c for c in doc["configs"] if c["benchmark"] == "kv"]))
    if any_dagger:
        caption += "; $^\\dagger$: a mean over fewer sizes than the table's, not comparable " \
                   "with a mean over all of them"
    if s["any_quantized"]:
        caption += (f". $^q$: medians read on a counter that advances in steps of {steps}"
                    ", so a ratio is one of step counts: one step on each side "
                    f"moves these ratios by up to $\\pm${_pct(s['largest_resolution_rel'])}\\%"
                    f"; where a value is under {STEPS_FEW} steps the cell gives that bound "
                    "itself")
    return _table("kv", caption + ".", blocks, doc["run"], wide=where == "text",
                  size=SIZES[size][0])


def tex_files(doc: Mapping, platform_rows: Sequence[tuple[str, str]]) -> dict[str, str]:
    """File name -> LaTeX of each table the run has data for."""
    out = {"platform.tex": platform_tex(doc, platform_rows)}
    for name, fn in (("switch.tex", switch_tex), ("kv.tex", kv_tex)):
        text = fn(doc)
        if text is not None:
            out[name] = text
    return out


# ---- CSV ----

PARAM_FIRST = ("placement", "payload", "variant", "data_bytes")
CSV_COLUMNS = ("run_id", "benchmark", "mechanism", "unit", "headline", "headline_low",
               "headline_high", "headline_ns", "headline_ns_low", "headline_ns_high",
               "headline_source", "quantized", "batched_unreliable", "reps", "reps_asked",
               "ratio_to", "ratio", "ratio_low", "ratio_high", "status", "reason", "counter",
               *RUN_COLUMNS)


def _param_columns(keys) -> list[str]:
    rest = sorted(k for k in keys if k not in PARAM_FIRST)
    return [k for k in PARAM_FIRST if k in keys] + rest


def _cell(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    return "" if v is None else csv_text(v)


def csv_rows(doc: Mapping) -> tuple[list[str], list[dict]]:
    """(columns, rows) of results.csv."""
    run = doc["run"]
    asked = (run.get("options") or {}).get("repeat")
    same = run_columns(run)
    rows = []
    measured = set()
    for c in doc["configs"]:
        h, r = c["headline"], c.get("ratio") or {}
        iv, riv = h.get("interval") or {}, r.get("interval") or {}
        lo_ns, hi_ns = h.get("interval_ns") or (None, None)
        measured.add((c["benchmark"], c["mechanism"], json.dumps(c["params"], sort_keys=True)))
        rows.append({"params": c["params"], "run_id": run["run_id"],
                     "benchmark": c["benchmark"], "mechanism": c["mechanism"],
                     "unit": c["unit"], "headline": h["value"], "headline_low": iv.get("low"),
                     "headline_high": iv.get("high"), "headline_ns": h.get("ns"),
                     "headline_ns_low": lo_ns, "headline_ns_high": hi_ns,
                     "headline_source": h["source"], "quantized": bool(h.get("quantized")),
                     "batched_unreliable": bool(h.get("batched_unreliable")),
                     "reps": h["reps"], "reps_asked": asked,
                     "ratio_to": "direct" if r else ("baseline" if c["role"] == "baseline"
                                                     else None),
                     "ratio": r.get("value"), "ratio_low": riv.get("low"),
                     "ratio_high": riv.get("high"), "status": "ok", "reason": None,
                     "counter": c.get("counter"), **same})
    seen = set()
    for res in doc["results"]:
        if res["status"] == "ok":
            continue
        params = {k: v for k, v in (res.get("params") or {}).items() if k not in OUTPUT_PARAMS}
        key = (res["benchmark"], res["mechanism"], json.dumps(params, sort_keys=True))
        if key in measured or key in seen:
            continue
        seen.add(key)
        rows.append({"params": params, "run_id": run["run_id"], "benchmark": res["benchmark"],
                     "mechanism": res["mechanism"], "unit": res.get("unit"),
                     "reps_asked": asked, "status": res["status"], "reason": res.get("reason"),
                     "counter": res.get("counter"), **same})
    pcols = _param_columns({k for row in rows for k in row["params"]})
    columns = [*CSV_COLUMNS[:3], *pcols, *CSV_COLUMNS[3:]]
    out = []
    for row in rows:
        params = row.pop("params")
        out.append({**{k: _cell(row.get(k)) for k in CSV_COLUMNS},
                    **{k: _cell(params.get(k)) for k in pcols}})
    return columns, out


def results_csv(doc: Mapping) -> str:
    columns, rows = csv_rows(doc)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()
