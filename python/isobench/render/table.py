"""Plain-text tables for `isobench list`, `run` and `show`.

The run tables render a run's summary document (summary.build): one row
per configuration, its headline number, the interval, which rule chose it
and its ratio to `direct`.  Nothing here computes a statistic; every value
printed is in the document.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..analysis import units
from ..analysis.runs import OUTPUT_PARAMS, server_label
from . import sections

# Params with a column of their own; any other param is appended to the
# variant column as key=value so that no configuration is hidden.
PARAM_COLUMNS = ("placement", "payload", "variant")

RESULT_HEADERS = ("benchmark", "mechanism", "placement", "payload", "variant", "value",
                  "95% interval", "from", "median", "mean", "batched", "unit", "~ns",
                  "ratio [95%]", "reps")
RIGHT_ALIGNED = {"payload", "value", "95% interval", "median", "mean", "batched", "~ns",
                 "ratio [95%]", "reps"}

KV_HEADERS = ("mechanism", "placement", "data", "value", "95% interval", "from", "median",
              "mean", "store/data", "verified", "passes", "unit", "~ns", "ratio [95%]", "reps")
KV_RIGHT = {"data", "value", "95% interval", "median", "mean", "store/data", "verified",
            "passes", "~ns", "ratio [95%]", "reps"}


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


def fmt_ratio(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if v >= 1000 else (f"{v:.1f}" if v >= 100 else f"{v:.2f}")


def variant_text(params: Mapping) -> str:
    parts = [str(params["variant"])] if "variant" in params else []
    parts += [f"{k}={v}" for k, v in sorted(params.items())
              if k not in PARAM_COLUMNS and k not in OUTPUT_PARAMS]
    return " ".join(parts) or "-"


def fmt_bytes(n: Any) -> str:
    if not isinstance(n, (int, float)):
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{int(n // size)} {unit}"
    return f"{int(n)} B"


# ---- cells of one configuration (a summary document entry) ----

def interval_text(h: Mapping) -> str:
    """The headline's interval: [low..high], or +-step when it is one
    process's quantized median; '-' when there is none."""
    iv = h.get("interval")
    if not iv:
        return "-"
    if iv.get("quantized"):
        return f"±{fmt_num((iv['high'] - iv['low']) / 2)}"
    return f"{fmt_num(iv['low'])}..{fmt_num(iv['high'])}"


def source_text(h: Mapping) -> str:
    """Which rule chose the headline, with its flags: q quantized, ! the
    batched estimate was not trusted, 1p the interval is one process's."""
    flags = ("q" if h.get("quantized") else "") + ("!" if h.get("batched_unreliable") else "")
    one = "" if h.get("between") != "one process" else " 1p"
    return h["source"] + (f" {flags}" if flags else "") + one


def ratio_text(c: Mapping) -> str:
    r = c.get("ratio")
    if r is None:
        return "baseline" if c["role"] == "baseline" else "-"
    iv = r.get("interval")
    if iv:
        return f"{fmt_ratio(r['value'])} [{fmt_ratio(iv['low'])}..{fmt_ratio(iv['high'])}]"
    return fmt_ratio(r["value"])


def reps_text(c: Mapping, asked: int | None) -> str:
    n = len(c["repetitions"])
    return f"{n}/{asked}" if asked and n != asked else str(n)


def rep_middle(c: Mapping, key: str) -> float | None:
    """The middle one of the repetitions' own `key` (median, mean, batched):
    shown beside the headline, never computed into it."""
    vals = sorted(r[key] for r in c["repetitions"] if r.get(key) is not None)
    return vals[len(vals) // 2] if vals else None


def config_row(c: Mapping, asked: int | None) -> list[str]:
    p, h = c["params"], c["headline"]
    return [c["benchmark"], c["mechanism"], str(p.get("placement", "-")),
            str(p.get("payload", "-")), variant_text(p), fmt_num(h["value"]), interval_text(h),
            source_text(h), fmt_num(rep_middle(c, "median")), fmt_num(rep_middle(c, "mean")),
            fmt_num(rep_middle(c, "batched")), c["unit"] or "-", fmt_num(h["ns"]),
            ratio_text(c), reps_text(c, asked)]


def kv_row(c: Mapping, asked: int | None) -> list[str]:
    """One get phase of the kv benchmark at one data size, with the store's
    size beside the data's and how much was verified."""
    p, h = c["params"], c["headline"]
    outs = [r["outputs"] for r in c["repetitions"]]
    first = outs[0] if outs else {}
    ratio = first.get("store_ratio")
    verified = sum(o.get("verified") or 0 for o in outs) if outs else None
    passes = "-"
    if outs and all("iterations" in o and "iterations_asked" in o for o in outs):
        passes = (f"{min(o['iterations'] for o in outs)}/"
                  f"{max(o['iterations_asked'] for o in outs)}")
    return [c["mechanism"], str(p.get("placement", "-")), fmt_bytes(p.get("data_bytes")),
            fmt_num(h["value"]), interval_text(h), source_text(h),
            fmt_num(rep_middle(c, "median")), fmt_num(_kv_mean(c)),
            f"{ratio:.2f}" if isinstance(ratio, (int, float)) else "-", fmt_num(verified),
            passes, c["unit"] or "-", fmt_num(h["ns"]), ratio_text(c), reps_text(c, asked)]


def _kv_mean(c: Mapping) -> float | None:
    """kv prints the exact mean over every timed request as params.mean."""
    vals = sorted(r["outputs"]["mean"] for r in c["repetitions"]
                  if isinstance(r["outputs"].get("mean"), (int, float)))
    return vals[len(vals) // 2] if vals else rep_middle(c, "mean")


def _asked(doc: Mapping, benchmark: str | None = None) -> int | None:
    """The repetitions the run asked for (of one benchmark, where it had its own)."""
    opts = doc["run"].get("options") or {}
    return (opts.get("repeat_by_benchmark") or {}).get(benchmark, opts.get("repeat"))


def results_tables(doc: Mapping) -> list[str]:
    """One table per kind of benchmark.  For kv only the measured get phase
    is shown; the set and warm-up phases are stored beside it.  kv-server
    has a table of its own (kv_server_table)."""
    configs = [c for c in doc["configs"] if c["benchmark"] != "kv-server"]
    kv = [c for c in configs if c["benchmark"] == "kv" and c["headline_phase"]]
    other = [c for c in configs if c["benchmark"] != "kv"]
    asked = _asked(doc)
    out = []
    if other:
        out.append(render(RESULT_HEADERS, [config_row(c, _asked(doc, c["benchmark"]))
                                           for c in other], RIGHT_ALIGNED))
    if kv:
        out.append("kv: time per get request, per data size (set and warm-up phases are "
                   "stored too: `isobench export`)")
        out.append(render(KV_HEADERS, [kv_row(c, asked) for c in kv], KV_RIGHT))
    return out


def legend(doc: Mapping) -> str:
    m = doc["method"]
    asked = _asked(doc)
    need = m.get("min_reps_for_test")
    few = (f"\n  {asked} repetition{'s' if asked != 1 else ''} per result: too few for a "
           f"significance test between runs (`compare` needs {need}); --repeat {need} or more"
           if asked and need and asked < need else "")
    return ("value: the headline, by one rule (docs/methodology.md): from median = per-call "
            "median (region >= "
            f"{m['headline_min_steps']} counter steps and empty regions), batched = batched "
            "estimate (shorter regions; reading cost cancelled).\n"
            "  Geometric mean over repetitions (fresh processes); 95% interval: Student t over "
            "them, or '1p' = within one process.\n"
            "  q: quantized (known to +-1 counter step); !: batched estimate disagrees, median "
            "shown (batched-unreliable).  ~ns: the value in ns.\n"
            "  ratio: value / direct's value, interval over repetitions (Welch t on logs); "
            "median, mean, batched: the middle repetition's own" + few)


def kv_server_table(doc: Mapping) -> str:
    """kv-server: each server's throughput and latency beside memcached's."""
    configs = [c for c in doc["configs"] if c["benchmark"] == "kv-server"]
    failed = [r for r in doc["results"] if r["benchmark"] == "kv-server" and r["status"] != "ok"]
    if not configs and not failed:
        return ""

    def f(v, fmt):
        return "-" if v is None else format(v, fmt)

    def rel(block):
        if block is None:
            return "-"
        iv = block.get("interval")
        text = f"{block['value']:.2f}"
        return text + (f" [{iv['low']:.2f}..{iv['high']:.2f}]" if iv else "")

    us = lambda v: units.convert(v, "ns", "us")
    rows = []
    for c in configs:
        k = c["kv_server"]
        rows.append([server_label(c["mechanism"]), f(k["ops_per_s"], ".0f"), rel(k["throughput_vs_reference"]),
                     f(us(k["latency_avg_ns"]), ".0f"), f(us(k["latency_p50_hi_ns"]), ".0f"),
                     f(us(k["latency_p99_hi_ns"]), ".0f"), rel(k["latency_vs_reference"]),
                     str(len(c["repetitions"]))])
    lines = ["kv-server (memcaslap; latency percentiles are log2-bucket upper bounds; "
             "x memcached: ratio to memcached in this run, 95% interval over repetitions):",
             render(("server", "ops/s", "x memcached", "avg us", "p50 us<=", "p99 us<=",
                     "lat x mc", "reps"), rows,
                    {"ops/s", "x memcached", "avg us", "p50 us<=", "p99 us<=", "lat x mc",
                     "reps"})]
    for r in failed:
        lines.append(f"{server_label(r['mechanism'])}: {r['status'].upper()}: {r['reason']}")
    return "\n".join(lines)


def measurement_lines(doc: Mapping) -> list[str]:
    """What the numbers are in: counter backend and why, TSC Hz, empty-region cost."""
    m = doc["measurement"]
    if not m["counters"]:
        return ["counter: - (no isob header: nothing was measured)"]
    lines = [f"counter: {counter}" + (f" ({why})" if why else "") for counter, why in m["counters"]]
    lines.append("TSC: " + ", ".join(fmt_hz(f) + (f" ({src})" if src else "")
                                     for f, src in m["tsc"]))
    unit = m["unit"] or ""
    med, mean = m["empty_region_median"], m["empty_region_mean"]
    if not med:
        lines.append("empty region: -")
    else:
        span = fmt_num(med[0]) if med[0] == med[1] else f"{fmt_num(med[0])}..{fmt_num(med[1])}"
        extra = f", mean {fmt_num(mean[0])}..{fmt_num(mean[1])}" if mean else ""
        lines.append(f"empty region: median {span}{extra} {unit} (cost of an empty measured "
                     "region; reported, not subtracted)")
    steps = m["counter_steps"]
    if steps and steps[0] > 1:
        lines.append(f"counter step: {steps[0]} {unit}: single samples are multiples of it, "
                     "so medians of short regions are quantized (q)")
    return lines


def _where(r: Mapping) -> str:
    """Which of a benchmark's configurations a note is about, where the
    mechanism alone does not say (a placement, a data size)."""
    p = r.get("params") or {}
    parts = [str(p["placement"])] if p.get("placement") not in (None, "-") else []
    if p.get("data_bytes") is not None:
        parts.append(fmt_bytes(p["data_bytes"]))
    return f" ({', '.join(parts)})" if parts else ""


def run_report(doc: Mapping, extra: Sequence[str] = ()) -> str:
    """The run's table; extra blocks (repetitions, soundness) go before the
    last line, which always says where the results are."""
    run = doc["run"]
    env = run.get("environment") or {}
    machine = ", ".join(str(x) for x in (env.get("cpu_model"), env.get("kernel") and
                                         f"Linux {env['kernel']}", env.get("hypervisor")) if x)
    out = [f"run {run['run_id']}  started {run['started']}  status {run['status']}"
           + (f"  ({machine})" if machine else "")]
    out += measurement_lines(doc)
    out.append("")
    tables = results_tables(doc)
    if tables:
        out.append("\n\n".join(tables))
        out.append("")
        out.append(legend(doc))
    elif not doc["results"]:
        out.append("(no results)")
    else:
        out.append("(no result measured anything)")
    kvs = kv_server_table(doc)
    if kvs:
        out += ["", kvs]
    for block in sections.text_blocks(doc):
        out += ["", block]
    # One line per distinct note, with how many repetitions it came from.
    counted: dict[str, int] = {}
    for r in doc["results"]:
        if r["status"] != "ok" and r["benchmark"] != "kv-server":
            text = (f"{'FAILED' if r['status'] == 'failed' else r['status']}: "
                    f"{r['benchmark']} -m {r['mechanism']}{_where(r)}: {r['reason']}")
            counted[text] = counted.get(text, 0) + 1
    notes = [t + (f" ({n} repetitions)" if n > 1 else "") for t, n in counted.items()]
    if notes:
        out.append("")
        out += notes
    for block in extra:
        out.append("")
        out.append(block)
    out.append("")
    out.append(f"results stored in {run['db']} (run {run['run_id']}; "
               f"`isobench show {run['run_id']}`)")
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
                      "from", "repetition values", "CV between", "robust CV within", "unit")


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def repetition_report(doc: Mapping) -> str:
    """Each configuration's repetition values (the unit every interval rests
    on), their spread between processes, and the spread within."""
    rows = []
    for c in doc["configs"]:
        p, h = c["params"], c["headline"]
        vals = h["values"]
        span = f"{fmt_num(min(vals))}..{fmt_num(max(vals))}" if vals else "-"
        rows.append([c["benchmark"], c["mechanism"], str(p.get("placement", "-")),
                     str(p.get("payload", "-")), variant_text(p), str(len(vals)), h["source"],
                     span, _pct(c["between_cv"]), _pct(c["distribution"]["robust_cv"]),
                     c["unit"] or "-"])
    return ("Repetitions (fresh processes: the unit of every interval; between: CV of the "
            "repetition values; within: 1.4826 MAD / median of the pooled samples)\n"
            + render(REPETITION_HEADERS, rows, {"payload", "reps", "repetition values",
                                                "CV between", "robust CV within"}))
