"""What a paper takes from a report: LaTeX tables and a tidy CSV.

LaTeX (`report --format tex`): three tables, each a `table` environment in
a file of its own that compiles alone with `\\usepackage{booktabs}` and
nothing else (tests/python/test_paper.py compiles each with pdflatex where
a TeX engine is installed):

    platform.tex  the machine and how it measured (the report's platform table)
    switch.tex    round trip at payload 0 per mechanism, same and across CPUs,
                  with the 95% interval and the ratio to direct
    kv.tex        time per get of direct per data size, and every mechanism's
                  ratio to it, with the geometric mean over the sizes

CSV (`report --format csv`, results.csv): one row per configuration in tidy
form (one observation per row, one variable per column): the run, the
benchmark and mechanism, one column per parameter, the headline in its
counter unit and in ns, its 95% interval, the ratio to the baseline with
its interval, how many repetitions, which rule chose the headline, and a
row with status and reason for every configuration that was skipped or
failed in every repetition.  CSV_COLUMNS lists the fixed columns; the
parameter columns (PARAM_FIRST, then the others a run has, sorted) go
after `mechanism`.

Everything comes from the summary document; nothing here computes.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Mapping, Sequence

from ..analysis.runs import BASELINE, OUTPUT_PARAMS
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


def kv_tex(doc: Mapping) -> str | None:
    configs = [c for c in doc["configs"] if c["benchmark"] == "kv" and c["headline_phase"]
               and isinstance(c["params"].get("data_bytes"), int)
               and c["headline"]["value"] is not None]
    if not configs:
        return None
    sizes = sorted({c["params"]["data_bytes"] for c in configs})
    by: dict[tuple[str, str], dict[int, Mapping]] = {}
    for c in configs:
        by.setdefault((c["mechanism"], c["params"].get("placement") or "same-cpu"),
                      {})[c["params"]["data_bytes"]] = c
    aggs = {(a["mechanism"], a["population"].get("placement")): a for a in doc["aggregates"]
            if a["benchmark"] == "kv"}

    def order(key):
        mech, place = key
        g = aggs.get(key)
        return (mech != BASELINE, place != "same-cpu", g["value"] if g else float("inf"), mech)

    head = ["Mechanism & Placement & " + " & ".join(tex(table.fmt_bytes(s)) for s in sizes)
            + r" & Geo.\ mean \\"]
    body = []
    any_partial = False
    for key in sorted(by, key=order):
        mech, place = key
        cells = []
        for s in sizes:
            c = by[key].get(s)
            if c is None:
                cells.append("--")
            elif mech == BASELINE:
                cells.append(tex(table.fmt_time(c["headline"].get("ns")))
                             if c["headline"].get("ns") is not None
                             else tex(table.fmt_sig(c["headline"]["value"])))
            else:
                cells.append(table.fmt_sig(c["ratio"]["value"]) if c.get("ratio") else "--")
        g = aggs.get(key)
        # A mean over fewer sizes than the others is not comparable with
        # theirs: marked, and the caption says why.
        partial = g is not None and len(by[key]) < len(sizes)
        any_partial = any_partial or partial
        cells.append((table.fmt_sig(g["value"]) + (r"$^\dagger$" if partial else ""))
                     if g else "--")
        body.append(f"{tex(mech)} & {tex(place)} & " + " & ".join(cells) + r" \\")
    return _table("kv", "Key-value store inside the compartment: time per get of direct "
                  "(first row) and each mechanism's ratio to it, per data size; geometric "
                  "mean of the ratios over the sizes. -- : not measured (skipped, see the "
                  "report)"
                  + ("; $^\\dagger$: a mean over the sizes measured only, not comparable "
                     "with those of the full rows" if any_partial else "")
                  + "; intervals in results.csv.",
                  "@{}ll" + "r" * (len(sizes) + 1) + "@{}", head, body, doc["run"],
                  wide=len(sizes) > 5)


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
               "ratio_to", "ratio", "ratio_low", "ratio_high", "status", "reason")


def _param_columns(keys) -> list[str]:
    rest = sorted(k for k in keys if k not in PARAM_FIRST)
    return [k for k in PARAM_FIRST if k in keys] + rest


def _cell(v):
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    return "" if v is None else v


def csv_rows(doc: Mapping) -> tuple[list[str], list[dict]]:
    """(columns, rows) of results.csv."""
    run = doc["run"]
    asked = (run.get("options") or {}).get("repeat")
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
                     "headline_source": h["source"], "quantized": int(bool(h.get("quantized"))),
                     "batched_unreliable": int(bool(h.get("batched_unreliable"))),
                     "reps": h["reps"], "reps_asked": asked,
                     "ratio_to": "direct" if r else ("baseline" if c["role"] == "baseline"
                                                     else None),
                     "ratio": r.get("value"), "ratio_low": riv.get("low"),
                     "ratio_high": riv.get("high"), "status": "ok", "reason": None})
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
                     "reps_asked": asked, "status": res["status"], "reason": res.get("reason")})
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
