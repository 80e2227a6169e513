"""The console's pages: a run's report (`isobench show`, `run`), the list of
runs (`isobench runs`), of mechanisms and benchmarks (`isobench list`) and
the repetitions of every configuration (`show --wide`), written with the
table formatters of kit/table.py and the family sections (sections.py)."""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from ..core.records import NO_MECHANISM, REFERENCES
from ..core.text import WIDTH, render, wrap
from ..analysis.kit import cpu, units
from ..analysis.kit.runs import NOTE_PARAMS, server_label
from . import sections
from .kit.table import (NARROW_RIGHT, asked_repetitions, caveat_notes, common_params, config_label,
                        fmt_bytes, fmt_hz, fmt_num, micro, ordered, ratio_cell, render_fit,
                        results_tables, size_text, status_text, value_cells, value_header,
                        variant_text)


def _unmeasured(doc: Mapping, benchmark: str, measured: set[str]) -> list[list[str]]:
    """One row per mechanism of the benchmark with no value at all (every
    repetition skipped or failed), so that no mechanism silently drops out."""
    rows: dict[str, str] = {}
    for r in doc["results"]:
        if r["benchmark"] == benchmark and r["status"] != "ok" and r["mechanism"] not in measured:
            status = "FAILED" if r["status"] == "failed" else r["status"]
            rows[r["mechanism"]] = "FAILED" if rows.get(r["mechanism"]) == "FAILED" else status
    return [[m, "-", "-", "-", "-", "-", s] for m, s in rows.items()]



def benchmark_table(doc: Mapping, benchmark: str, configs: Sequence[Mapping]) -> str:
    """One benchmark's rows in at most WIDTH columns."""
    asked = asked_repetitions(doc)
    header = value_header(configs) if configs else "time"
    hide = set(common_params(configs))
    rows = []
    for c in ordered(configs):
        v, iv = value_cells(c, header)
        rows.append([config_label(c, hide), str(c["params"].get("placement", "-")),
                     size_text(c["params"]), v, iv, ratio_cell(c) + kv_marks(doc, c),
                     status_text(c, asked)])
    rows += _unmeasured(doc, benchmark, {c["mechanism"] for c in configs})
    headers = ("mechanism", "placement", "size", header, "95% CI", "vs direct [95% CI]", "status")
    right = NARROW_RIGHT | {header}
    return render_fit(headers, rows, right, flex=0)


def kv_marks(doc: Mapping, c: Mapping) -> str:
    """kv's reading of a ratio (the kv section, analysis/families/kv.py): " =1" where
    its interval holds 1 (no difference from direct shown, below 1 not
    faster), " q+-45%" where either value is a few counter steps (a ratio
    of step counts, with how far one step on each side moves it)."""
    if c["benchmark"] != "kv" or not c.get("ratio"):
        return ""
    place = c["params"].get("placement") or "same-cpu"
    for row in ((doc.get("sections") or {}).get("kv") or {}).get("rows", ()):
        if row["mechanism"] == c["mechanism"] and row["placement"] == place and all(
                c["params"].get(k) == v for k, v in row["params"].items()):
            r = (row["cells"].get(str(c["params"].get("data_bytes"))) or {}).get("ratio") or {}
            return ((" =1" if r.get("includes_one") else "")
                    + (f" q±{100 * r['resolution_rel']:.2g}%" if r.get("few_steps") else ""))
    return ""


BENCHMARK_TITLES = {
    "switch": "switch: round trip into the compartment and back (size: payload).",
    "kv": "kv: time per get request (size: data in the store; set and warm-up phases are "
          "stored too: `isobench export`). =1: the ratio's interval holds 1, no difference "
          "from direct shown; q±N%: a ratio of a few counter steps, and how far one step "
          "on each side moves it.",
}


def in_sections(doc: Mapping) -> list[str]:
    """The benchmarks run without mechanisms whose results a family's section
    shows in full (oslat's SEIMI tables): the default tables leave them out;
    --wide has them."""
    covered = sections.covered(doc)
    mechs: dict[str, set[str]] = {}
    for r in doc["results"]:
        mechs.setdefault(r["benchmark"], set()).add(r["mechanism"])
    return [b for b, ms in mechs.items() if b in covered and ms == {NO_MECHANISM}]


def narrow_tables(doc: Mapping) -> list[str]:
    """The default tables: one per benchmark (kv-server has kv_server_table;
    in_sections() its family's section)."""
    benches: dict[str, list[Mapping]] = {}
    skip = set(in_sections(doc))
    for r in doc["results"]:
        if r["benchmark"] not in REFERENCES:
            benches.setdefault(r["benchmark"], [])
    for c in doc["configs"]:
        if c["benchmark"] not in REFERENCES and c["headline_phase"]:
            benches.setdefault(c["benchmark"], []).append(c)
    out = []
    for bench, configs in benches.items():
        if bench in skip:
            continue
        if not configs and not any(r["benchmark"] == bench and r["status"] != "ok"
                                   for r in doc["results"]):
            continue
        title = BENCHMARK_TITLES.get(bench, f"{bench}:")
        same = common_params(configs)
        if same:
            title += " In every row: " + ", ".join(f"{k}={v}" for k, v in same.items()
                                                   if k not in NOTE_PARAMS) + "."
        title += "".join(f" {n}." for n in caveat_notes(configs))
        out.append(wrap(title) + "\n" + benchmark_table(doc, bench, configs))
    return out


def narrow_legend(doc: Mapping) -> str:
    m = doc["method"]
    asked = asked_repetitions(doc)
    need = m.get("min_reps_for_test")
    text = ("time: the headline by one rule (docs/methodology.md), the geometric mean over "
            "repetitions (fresh processes); 95% CI: Student t over them, 1p: within one "
            "process. vs direct: ratio to direct's value by the same estimator, Welch t "
            "interval. status: "
            f"median = per-call median (regions >= {m['headline_min_steps']} counter steps "
            "and empty regions), batched = batched estimate (shorter ones); q: quantized, "
            "known to a few counter steps (step / K when batched); !: batched estimate "
            "disagrees, median shown; m: repetitions in separate groups (modes), no interval. "
            "Every column: --wide.")
    if asked and need and asked < need:
        text += (f" {asked} repetition{'s' if asked != 1 else ''} per result: too few for a "
                 f"significance test between runs (`compare` needs {need}).")
    return wrap(text, indent="")


def legend(doc: Mapping) -> str:
    m = doc["method"]
    asked = asked_repetitions(doc)
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
            "  q: quantized (known to a few counter steps, step / K when batched); !: batched "
            "estimate disagrees, median shown (batched-unreliable); m: repetitions in separate "
            "groups (modes), no interval.  ~ns: the value in ns.\n"
            "  ratio: value / direct's value by the same estimator, interval over repetitions "
            "(Welch t on logs); "
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
        return text + (f" [{iv['low']:.2f}, {iv['high']:.2f}]" if iv else "")

    us = lambda v: units.convert(v, "ns", "us")
    rows, cpu_rows = [], []
    for c in configs:
        k = c["kv_server"]
        rows.append([server_label(c["mechanism"]), f(k["ops_per_s"], ".0f"), rel(k["throughput_vs_reference"]),
                     f(us(k["latency_avg_ns"]), ".0f"), f(us(k["latency_p50_hi_ns"]), ".0f"),
                     (f(us(k["latency_p99_hi_ns"]), ".0f") if k.get("latency_p99_enough", True)
                      else f"max {f(us(k.get('latency_max_ns')), '.0f')} "
                           f"(n={k.get('latency_events_min') or 0:,})"),
                     rel(k["latency_vs_reference"]),
                     str(len(c["repetitions"]))])
        cpu_rows.append([server_label(c["mechanism"]), cpu.text(k.get("server_cpu")),
                         cpu.text(k.get("server_cpu_vs_reference")),
                         cpu.text(k.get("client_cpu")) + (" (higher)" if k.get("client_costs_more")
                                                          else ""),
                         str(k.get("saturated") or "unknown")])
    u = micro() + "s"
    headers = ("server", "ops/s", "x memcached", f"avg {u}", f"p50 {u}<=", f"p99 {u}<=",
               "lat x mc", "reps")
    cpu_head = ("server", f"server CPU {u}/request [95%]", "x memcached",
                f"client CPU {u}/request", "saturated")
    lines = [wrap("kv-server, server CPU per request (the server's process tree, user + "
                  "system, over the requests memcaslap completed; geometric mean over "
                  "repetitions with its 95% t interval, widened by the CPU clock's 10 ms step; "
                  "x memcached: ratio to memcached -t 1 under the same load; the side that "
                  "saturated does not bound it, as it bounds the throughput, but the load "
                  "moves it (a busy server serves more requests per wake-up)):"),
             render(cpu_head, cpu_rows, set(cpu_head[1:])),
             wrap("saturated: the side whose CPU was busy >= 0.9 of the run, which bounds "
                  "the throughput below; '(higher)': the client spent more CPU per request "
                  "than the server."),
             "",
             wrap("kv-server (memcaslap; latency percentiles are log2-bucket upper bounds, p99 "
                  "only where 1,000 requests carry it, else max (n=requests timed); "
                  "x memcached: ratio to memcached in this run, 95% interval over "
                  "repetitions):"),
             render(headers, rows, set(headers[1:]))]
    for r in failed:
        lines.append(wrap(f"{server_label(r['mechanism'])}: {r['status'].upper()}: "
                          f"{r['reason']}"))
    return "\n".join(lines)


def measurement_lines(doc: Mapping) -> list[str]:
    """What the numbers are in: counter backend and why, TSC Hz, empty-region cost."""
    m = doc["measurement"]
    if not m["counters"]:
        return ["counter: - (no isob header: nothing was measured)"]
    lines = [f"counter: {counter}" + (f" ({why})" if why else "") for counter, why in m["counters"]]
    # One entry per distinct text: calibrated frequencies differ in digits
    # no table shows.
    lines.append("TSC: " + ", ".join(dict.fromkeys(fmt_hz(f) + (f" ({src})" if src else "")
                                                   for f, src in m["tsc"])))
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


def run_report(doc: Mapping, extra: Sequence[str] = (), wide: bool = False) -> str:
    """The run's tables (at most WIDTH columns; every column with wide);
    extra blocks (repetitions, soundness) go before the last line, which
    always says where the results are."""
    run = doc["run"]
    env = run.get("environment") or {}
    machine = ", ".join(str(x) for x in (env.get("cpu_model"), env.get("kernel") and
                                         f"Linux {env['kernel']}", env.get("hypervisor")) if x)
    out = [wrap(f"run {run['run_id']}  started {run['started']}  status {run['status']}"
                + (f"  ({machine})" if machine else ""))]
    out += [wrap(line) for line in measurement_lines(doc)]
    out.append("")
    tables = results_tables(doc) if wide else narrow_tables(doc)
    if tables:
        out.append("\n\n".join(tables))
        out.append("")
        out.append(legend(doc) if wide else narrow_legend(doc))
    elif not doc["results"]:
        out.append("(no results)")
    elif not in_sections(doc):
        out.append("(no result measured anything)")
    if not wide and in_sections(doc):
        names = ", ".join(in_sections(doc))
        out.append(wrap(f"{names}: in {'its' if ',' not in names else 'their'} own tables below; "
                        "every result in one table: --wide"))
    kvs = kv_server_table(doc)
    if kvs:
        out += ["", kvs]
    for block in sections.text_blocks(doc):
        out += ["", block]
    # One line per configuration and reason, with how many repetitions it
    # came from; reasons that differ only in their figures (a predicted
    # time) are one reason, shown with the first repetition's figures.
    counted: dict[str, list] = {}
    for r in doc["results"]:
        if r["status"] != "ok" and r["benchmark"] not in REFERENCES:
            head = (f"{'FAILED' if r['status'] == 'failed' else r['status']}: "
                    f"{r['benchmark']} -m {r['mechanism']}{_where(r)}: ")
            reason = str(r["reason"])
            entry = counted.setdefault(head + re.sub(r"\d[\d.,]*", "#", reason),
                                       [head + reason, 0, set()])
            entry[1] += 1
            entry[2].add(reason)
    notes = [text + (f" ({n} repetitions{'; figures of the first' if len(seen) > 1 else ''})"
                     if n > 1 else "") for text, n, seen in counted.values()]
    if not wide:
        notes = [wrap(n) for n in notes]
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


def _results_text(counts: Mapping[str, int]) -> str:
    total = sum(counts.values())
    bad = [f"{counts[s]} {s}" for s in ("failed", "skipped") if counts.get(s)]
    return f"{total:,}" + (f" ({', '.join(bad)})" if bad else "")


def runs_report(runs: Sequence[Mapping], db: str) -> str:
    """`isobench runs`: one line per stored run, at most WIDTH columns (the
    command is cut with "..." where it would not fit)."""
    if not runs:
        return f"{db} holds no runs yet: start one with `isobench run`"
    rows = []
    for r in runs:
        status = ("DAMAGED" if r.get("damaged") else (r.get("status") or "?")
                  + (f" ({r['end_reason']})" if r.get("end_reason") else ""))
        started = (r.get("started") or "-").replace("T", " ")[:16]
        host = r.get("host") or "?"
        if len(host) > RUNS_HOST_MAX:  # an imported run's host is anyone's text
            host = host[:RUNS_HOST_MAX - 3] + "..."
        if r.get("origin"):
            host += " (imported)"
        argv = " ".join(r["argv"]) if r.get("argv") is not None else "?"
        rows.append([str(r["run_id"]), started, status, host, _results_text(r["results"]), argv])
    headers = ("run", "started (UTC)", "status", "host", "results", "command")
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    # The status and the command share what the other columns leave: the
    # command keeps at least RUNS_COMMAND_MIN columns (one long status, an
    # interrupted run's reason, must not squeeze every command to "isob..."),
    # and a status longer than its share continues on the next lines.
    left = WIDTH - sum(w for i, w in enumerate(widths) if i not in (2, 5)) - 2 * (len(headers) - 1)
    room = max(len("command"), min(widths[5], max(RUNS_COMMAND_MIN,
                                                  left - min(widths[2], RUNS_STATUS_MIN))))
    for row in rows:
        if len(row[-1]) > room:
            row[-1] = row[-1][:room - 3] + "..."
    return (f"runs in {db}\n" + render_fit(headers, rows, {"run", "results"}, flex=2)
            + "\n`isobench show RUN` prints one; `isobench compare A B` compares two.")


# The columns `isobench runs` keeps for the command however long a status
# is, and for a status (an interrupted run's reason) before the command is cut.
RUNS_COMMAND_MIN = 32
RUNS_STATUS_MIN = 20
# The most of a host name `isobench runs` shows (a DNS name has at most 253
# characters; an imported one may hold anything): longer ones are cut.
RUNS_HOST_MAX = 40


def list_report(mechanisms: Sequence[Mapping], benchmarks: Sequence[Mapping],
                wide: bool = False) -> str:
    """`isobench list`'s tables, at most WIDTH columns (a summary continues
    on the next lines of its column); wide: each summary on one line."""
    table_of = render if wide else (lambda h, r: render_fit(h, r, flex=len(h) - 1))
    mrows = [[m["name"], "yes" if m["available"] else "no",
              "FAILED" if m["isolation"] == "failed" else m["isolation"], m["summary"]]
             for m in mechanisms]
    out = ["Mechanisms", table_of(("name", "available", "isolation", "summary"), mrows)]
    notes = [f"  {m['name']}: " + ("ISOLATION TEST FAILED: " if m["isolation"] == "failed" else "")
             + (m.get("isolation_reason") or m.get("reason") or "")
             for m in mechanisms if (not m["available"] or m["isolation"] in ("failed", "untested"))]
    if notes:
        out += ["", "Notes:"] + (notes if wide else [wrap(n, indent="    ") for n in notes])
    brows = [[b["name"], "yes" if b.get("needs_mechanism", True) else "no", b["summary"]]
             for b in benchmarks]
    out += ["", "Benchmarks", table_of(("name", "per mechanism", "summary"), brows)]
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
