"""Plain-text tables for `isobench list`, `run` and `show`.

The tables read summary dicts (as the store returns them), never Result
records, so that `run` and `show` print the same thing for the same run.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from .analysis import OUTPUT_PARAMS, TIMER_UNITS

# Params with a column of their own; any other param is appended to the
# variant column as key=value so that no configuration is hidden.
PARAM_COLUMNS = ("placement", "payload", "variant")

RESULT_HEADERS = ("benchmark", "mechanism", "placement", "payload", "variant", "median", "mean",
                  "p5", "p95", "MAD", "batched", "unit", "~ns", "status")
RIGHT_ALIGNED = {"payload", "median", "mean", "p5", "p95", "MAD", "batched", "~ns"}


def render(headers: Sequence[str], rows: Sequence[Sequence[str]],
           right: frozenset[str] | set[str] = frozenset()) -> str:
    """Columns padded to their widest cell, two spaces apart."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row)]

    def line(cells: Sequence[str]) -> str:
        out = [c.rjust(w) if h in right else c.ljust(w)
               for h, c, w in zip(headers, cells, widths)]
        return "  ".join(out).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def fmt_num(v: Any) -> str:
    """A number short enough for a table, with digits that mean something; '-' for none.

    Below 10: two decimals; below 1000: one; from 1000: whole, with thousands
    separators (a tenth of a tick is noise at that size).
    """
    if v is None:
        return "-"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    v = float(v)
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def fmt_hz(hz: float | None) -> str:
    return "-" if hz is None else f"{hz / 1e9:.3f} GHz"


def variant_text(params: Mapping) -> str:
    parts = [str(params["variant"])] if "variant" in params else []
    parts += [f"{k}={v}" for k, v in sorted(params.items())
              if k not in PARAM_COLUMNS and k not in OUTPUT_PARAMS]
    return " ".join(parts) or "-"


KV_HEADERS = ("mechanism", "placement", "data", "median", "mean", "p5", "p95", "store/data",
              "verified", "passes", "unit", "~ns", "status")
KV_RIGHT = {"data", "median", "mean", "p5", "p95", "store/data", "verified", "passes", "~ns"}


def fmt_bytes(n: Any) -> str:
    if not isinstance(n, (int, float)):
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{int(n // size)} {unit}"
    return f"{int(n)} B"


def kv_row(r: Mapping) -> list[str]:
    """One get phase of the kv benchmark: time per request at one data size,
    with the store's size beside the data's and how much was verified."""
    p = r.get("params") or {}
    status = r["status"] if r["status"] != "failed" else "FAILED"
    ratio = p.get("store_ratio")
    passes = (f"{p['iterations']}/{p['iterations_asked']}"
              if "iterations" in p and "iterations_asked" in p else "-")
    return [r["mechanism"], str(p.get("placement", "-")), fmt_bytes(p.get("data_bytes")),
            fmt_num(r.get("median")), fmt_num(p.get("mean", r.get("mean"))), fmt_num(r.get("p5")),
            fmt_num(r.get("p95")), f"{ratio:.2f}" if isinstance(ratio, (int, float)) else "-",
            fmt_num(p.get("verified")), passes, r.get("unit") or "-",
            _ns({**r, "batched": p.get("mean", r.get("mean"))}), status]


def results_tables(results: Sequence[Mapping]) -> list[str]:
    """One table per kind of benchmark.  For kv only the measured get phase
    is shown (and any phase that did not succeed); the set and warm-up
    phases are stored beside it."""
    kv = [r for r in results if r["benchmark"] == "kv"]
    other = [r for r in results if r["benchmark"] != "kv"]
    out = []
    if other:
        out.append(render(RESULT_HEADERS, [result_row(r) for r in other], RIGHT_ALIGNED))
    if kv:
        shown = [r for r in kv if (r.get("params") or {}).get("variant", "get") == "get"
                 or r["status"] != "ok"]
        out.append("kv: time per get request, per data size (set and warm-up phases are "
                   "stored too: `isobench export`)")
        out.append(render(KV_HEADERS, [kv_row(r) for r in shown], KV_RIGHT))
    return out


def _ns(r: Mapping) -> str:
    """The batched estimate (else the median) in nanoseconds, where the unit
    and the TSC frequency allow: for reading against published figures."""
    v = r.get("batched") if r.get("batched") is not None else r.get("median")
    hz = (r.get("header") or {}).get("tsc_hz")
    if v is None:
        return "-"
    if r.get("unit") == "ns":
        return fmt_num(v)
    if r.get("unit") in TIMER_UNITS and hz:
        return fmt_num(v * 1e9 / hz)
    return "-"


def result_row(r: Mapping) -> list[str]:
    p = r.get("params") or {}
    status = r["status"] if r["status"] != "failed" else "FAILED"
    return [r["benchmark"], r["mechanism"], str(p.get("placement", "-")),
            str(p.get("payload", "-")), variant_text(p), fmt_num(r.get("median")),
            fmt_num(r.get("mean")), fmt_num(r.get("p5")), fmt_num(r.get("p95")),
            fmt_num(r.get("mad")), fmt_num(r.get("batched")), r.get("unit") or "-", _ns(r),
            status]


def measurement_lines(results: Sequence[Mapping]) -> list[str]:
    """What the numbers are in: counter backend and why, TSC Hz, empty-region cost."""
    headers = [r["header"] for r in results if r.get("header")]
    if not headers:
        return ["counter: - (no isob header: nothing was measured)"]
    lines = []
    for counter, why in dict.fromkeys((h.get("counter"), h.get("counter_why")) for h in headers):
        lines.append(f"counter: {counter}" + (f" ({why})" if why else ""))
    hz = dict.fromkeys((h.get("tsc_hz"), h.get("tsc_hz_source")) for h in headers)
    lines.append("TSC: " + ", ".join(fmt_hz(f) + (f" ({src})" if src else "") for f, src in hz))
    lines.append(_empty_line(headers))
    return lines


def _empty_line(headers: Sequence[Mapping]) -> str:
    medians = [h["empty_region"]["median"] for h in headers
               if isinstance(h.get("empty_region"), Mapping)
               and h["empty_region"].get("median") is not None]
    unit = headers[0].get("unit") or ""
    if not medians:
        return "empty region: -"
    lo, hi = min(medians), max(medians)
    span = fmt_num(lo) if lo == hi else f"{fmt_num(lo)}..{fmt_num(hi)}"
    means = [h["empty_region"]["mean"] for h in headers
             if isinstance(h.get("empty_region"), Mapping) and h["empty_region"].get("mean") is not None]
    steps = sorted({h["counter_step"] for h in headers if h.get("counter_step")})
    extra = f", mean {fmt_num(min(means))}..{fmt_num(max(means))}" if means else ""
    line = (f"empty region: median {span}{extra} {unit} (cost of an empty measured region; "
            "reported, not subtracted)")
    if steps and steps[0] > 1:
        line += (f"\ncounter step: {steps[0]} {unit}: single samples are multiples of it, so "
                 "medians of short regions are quantized; read mean and batched")
    return line


def _where(r: Mapping) -> str:
    """Which of a benchmark's configurations a note is about, where the
    mechanism alone does not say (a placement, a data size)."""
    p = r.get("params") or {}
    parts = [str(p["placement"])] if p.get("placement") not in (None, "-") else []
    if p.get("data_bytes") is not None:
        parts.append(fmt_bytes(p["data_bytes"]))
    return f" ({', '.join(parts)})" if parts else ""


def run_report(run: Mapping, results: Sequence[Mapping], db: str,
               extra: Sequence[str] = ()) -> str:
    """The run's table; extra blocks (repetitions, soundness) go before the
    last line, which always says where the results are."""
    env = run.get("environment") or {}
    machine = ", ".join(str(x) for x in (env.get("cpu_model"), env.get("kernel") and
                                         f"Linux {env['kernel']}", env.get("hypervisor")) if x)
    out = [f"run {run['run_id']}  started {run['started']}  status {run['status']}"
           + (f"  ({machine})" if machine else "")]
    out += measurement_lines(results)
    out.append("")
    if results:
        out.append("\n\n".join(results_tables(results)))
    else:
        out.append("(no results)")
    notes = [f"{'FAILED' if r['status'] == 'failed' else r['status']}: "
             f"{r['benchmark']} -m {r['mechanism']}{_where(r)}: {r['reason']}"
             for r in results if r["status"] != "ok"]
    if notes:
        out.append("")
        out += notes
    for block in extra:
        out.append("")
        out.append(block)
    out.append("")
    out.append(f"results stored in {db} (run {run['run_id']}; `isobench show {run['run_id']}`)")
    return "\n".join(out)


def list_report(mechanisms: Sequence[Mapping], benchmarks: Sequence[Mapping]) -> str:
    mrows = [[m["name"], "yes" if m["available"] else "no",
              "FAILED" if m["isolation"] == "failed" else m["isolation"], m["summary"]]
             for m in mechanisms]
    out = ["Mechanisms", render(("name", "available", "isolation", "summary"), mrows)]
    notes = [f"  {m['name']}: " + ("ISOLATION TEST FAILED: " if m["isolation"] == "failed" else "")
             + (m.get("isolation_reason") or m.get("reason") or "")
             for m in mechanisms if (not m["available"] or m["isolation"] in ("failed", "untested"))]
    if notes:
        out += ["", "Notes:"] + notes
    brows = [[b["name"], "yes" if b.get("needs_mechanism", True) else "no", b["summary"]]
             for b in benchmarks]
    out += ["", "Benchmarks", render(("name", "per mechanism", "summary"), brows)]
    return "\n".join(out)


REPETITION_HEADERS = ("benchmark", "mechanism", "placement", "payload", "variant", "reps",
                      "median", "rep medians", "robust CV within", "CV between reps", "unit")


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def repetition_report(configs: Sequence[Any]) -> str:
    """Spread within and between repetitions, one row per configuration
    (configs are analysis.Config: samples of all repetitions pooled)."""
    rows = []
    for c in configs:
        p, meds = c.params, c.rep_medians
        span = f"{fmt_num(min(meds))}..{fmt_num(max(meds))}" if meds else "-"
        rows.append([c.benchmark, c.mechanism, str(p.get("placement", "-")),
                     str(p.get("payload", "-")), variant_text(p), str(c.repetitions),
                     fmt_num(c.quick.median), span, _pct(c.quick.robust_cv),
                     _pct(c.between_cv), c.unit or "-"])
    return ("Repetitions (fresh processes; within: 1.4826 MAD / median of the pooled samples; "
            "between: CV of the repetition medians)\n"
            + render(REPETITION_HEADERS, rows, {"payload", "reps", "median", "rep medians",
                                                "robust CV within", "CV between reps"}))
