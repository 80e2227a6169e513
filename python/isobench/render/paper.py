"""What a paper takes from a report: LaTeX tables and a tidy CSV.

LaTeX (`report --format tex`): three tables, each a `table` environment in
a file of its own that compiles alone with `\\usepackage{booktabs}` and
nothing else (tests/python/test_paper.py compiles each with pdflatex where
a TeX engine is installed):

    platform.tex  the machine and how it measured (the report's platform table)
    switch.tex    round trip at payload 0 per mechanism, same and across CPUs,
                  with the 95% interval and the ratio to direct
    kv.tex        time per get of direct per data size, and every mechanism's
                  ratio to it, each with its 95% interval and its marks
                  (interval includes 1; ratio of quantized values, with
                  its resolution), and the geometric mean over the sizes
                  every mechanism shares with its interval (the kv section,
                  analysis/kv.py)

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
from typing import Mapping, Sequence

from ..analysis.kv import STEPS_FEW
from ..analysis.runs import BASELINE, OUTPUT_PARAMS
from ..store.export import RUN_COLUMNS, run_columns
from . import table

# ---- LaTeX ----

_TEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                "^": r"\textasciicircum{}", "µ": r"\ensuremath{\mu}", "±": r"\ensuremath{\pm}",
                "×": r"\ensuremath{\times}", "≥": r"\ensuremath{\geq}", "≤": r"\ensuremath{\leq}"}


def tex(text) -> str:
    """text as LaTeX that prints it literally (pdflatex, no extra packages)."""
    return "".join(_TEX_SPECIAL.get(ch, ch) for ch in str(text))


def _small(text: str) -> str:
    return r"{\scriptsize " + text + "}" if text and text != "-" else ""


def _table(label: str, caption: str, spec: str, head: Sequence[str], rows: Sequence[str],
           run: Mapping, wide: bool = False) -> str:
    """A booktabs table environment (already escaped head and rows); wide:
    table*, which spans both columns of a two-column paper (in a
    one-column document it is an ordinary table)."""
    env = "table*" if wide else "table"
    return "\n".join([
        f"% isobench report of run {run['run_id']} ({run.get('started')}): "
        f"compiles with \\usepackage{{booktabs}}.",
        f"\\begin{{{env}}}[t]", r"\centering", r"\footnotesize",
        r"\setlength{\tabcolsep}{4pt}",
        f"\\caption{{{caption}}}", f"\\label{{tab:isobench-{label}}}",
        f"\\begin{{tabular}}{{{spec}}}", r"\toprule", *head, r"\midrule",
        *rows, r"\bottomrule", r"\end{tabular}", f"\\end{{{env}}}", ""])


def platform_tex(doc: Mapping, rows: Sequence[tuple[str, str]]) -> str:
    run = doc["run"]
    body = [f"{tex(k)} & {tex(v)} \\\\" for k, v in rows]
    return _table("platform", f"Platform of isobench run {run['run_id']}: the machine and "
                  "how it measured.", r"@{}lp{0.68\linewidth}@{}",
                  [r"Property & Value \\"], body, run)


def _time_cell(c: Mapping | None) -> str:
    if c is None:
        return "--"
    v, iv = table.value_cells(c, "time" if c["headline"].get("ns") is not None else "value")
    return tex(v) + (" " + _small(tex(iv)) if iv != "-" else "")


def _ratio_cell(c: Mapping | None) -> str:
    if c is None:
        return "--"
    r = c.get("ratio")
    if r is None:
        return "baseline" if c["role"] == "baseline" else "--"
    iv = r.get("interval") or {}
    text = table.fmt_sig(r["value"])
    if iv.get("low") is not None:
        text += " " + _small(f"[{table.fmt_sig(iv['low'])}, {table.fmt_sig(iv['high'])}]")
    return text


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
    rows = switch_rows(doc)
    if not rows:
        return None
    places = [p for p in ("same-cpu", "cross-cpu", "unpinned")
              if any(p in by for _, by in rows)]
    names = {"same-cpu": "Same CPU", "cross-cpu": "Across CPUs", "unpinned": "Unpinned"}
    head = ["Mechanism & " + " & ".join(f"\\multicolumn{{2}}{{c}}{{{names[p]}}}"
                                        for p in places) + r" \\",
            "".join(f"\\cmidrule(lr){{{2 + 2 * i}-{3 + 2 * i}}}" for i in range(len(places))),
            " & " + " & ".join(r"Round trip [95\% CI] & $\times$ direct" for _ in places)
            + r" \\"]
    body = [tex(label) + " & " + " & ".join(f"{_time_cell(by.get(p))} & {_ratio_cell(by.get(p))}"
                                             for p in places) + r" \\"
            for label, by in rows]
    skipped = sorted({r["mechanism"] for r in doc["results"] if r["benchmark"] == "switch"
                      and r["status"] != "ok"} - {c["mechanism"] for _, by in rows
                                                  for c in by.values()})
    note = (f" Not measured here (skipped or failed): {tex(', '.join(skipped))}."
            if skipped else "")
    return _table("switch", "Round trip into the compartment and back, no payload: the "
                  "headline (geometric mean over repetitions) with its 95\\% interval, and "
                  "the ratio to direct's entry call with its interval. Direct's variants are "
                  f"the plain calls a compiler makes.{note}",
                  "@{}l" + "rr" * len(places) + "@{}", head, body, doc["run"],
                  wide=len(places) > 1)


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

    def order(row):
        g = row["average"]
        return (row["mechanism"] != BASELINE, row["placement"] != "same-cpu",
                g["value"] if g else float("inf"), row["label"])

    # One placement: said in the caption, not in a column of its own.
    places = list(dict.fromkeys(row["placement"] for row in s["rows"]))
    lead = "Mechanism & Placement" if len(places) > 1 else "Mechanism"
    head = [lead + " & " + " & ".join(tex(table.fmt_bytes(z)) for z in sizes)
            + r" & Geo.\ mean \\"]
    body = []
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
        first = tex(row["label"]) + (f" & {tex(row['placement'])}" if len(places) > 1 else "")
        body.append(first + " & " + " & ".join(m for m, _ in cells) + r" \\")
        body.append(" & " * (2 if len(places) > 1 else 1) + " & ".join(sub for _, sub in cells)
                    + r" \\[2pt]")
    shared = "; ".join(f"{tex(place)}: " + tex(", ".join(table.fmt_bytes(z) for z in zs))
                       for place, zs in s["shared_sizes"].items())
    any_dagger = any(row["average"] and (row["average"]["n"] < len(sizes)
                                          or not row["average"].get("shared", True))
                     for row in s["rows"] if row["mechanism"] != BASELINE)
    steps = tex(", ".join(f"{x:g} {unit or ''}".rstrip() for x, unit in s["counter_steps"]))
    caption = ("Key-value store inside the compartment"
               + (f" ({tex(places[0])})" if len(places) == 1 else "")
               + ": time per get of direct (first row) "
               "and each mechanism's ratio to it, per data size, with 95\\% intervals over "
               "repetitions (Welch t on the log ratio); geometric mean of the ratios over "
               "the sizes every mechanism of the placement has"
               + (f" ({shared})" if shared else "")
               + ", with its 95\\% interval over repetitions and n sizes. "
               "$^\\circ$: the interval includes 1, so no difference from direct is shown "
               "(a ratio below 1 there is not faster than direct). -- : not measured "
               "(skipped, see the report)")
    if any_dagger:
        caption += "; $^\\dagger$: a mean over fewer sizes than the table's, not comparable " \
                   "with a mean over all of them"
    if s["any_quantized"]:
        caption += (f". $^q$: medians read on a counter that advances in steps of {steps}"
                    ", so a ratio is one of step counts: one step on each side "
                    f"moves these ratios by up to $\\pm${_pct(s['largest_resolution_rel'])}\\%"
                    f"; where a value is under {STEPS_FEW} steps the cell gives that bound "
                    "itself")
    return _table("kv", caption + ".", "@{}" + "l" * (2 if len(places) > 1 else 1)
                  + "r" * (len(sizes) + 1) + "@{}", head, body,
                  doc["run"], wide=len(sizes) > 5)


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
    return "" if v is None else v


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
