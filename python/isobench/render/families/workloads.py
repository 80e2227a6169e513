"""How the workload sections (analysis/families/workloads.py) are shown: Morello's
tables for cpuwork, memops and pipeio, the work-per-crossing curve and its
break-even points for worksweep (drawn first in the report), and scale's
limits.  Every number shown is in the section; nothing here computes.

The blocks (a title, a table, notes) are built once and written as console
text with table.render() or as Markdown."""

from __future__ import annotations

from typing import Mapping, Sequence

from ..kit import plots, table
from ..kit.blocks import (INTERVAL_NOTE, PUBLISHED, Block, markdown_of, not_ok_notes, num, q_text,
                          r_text, rate_text, text_of)

# ---- worksweep ----

def _k_label(k: int) -> str:
    return f"1e{len(str(k)) - 1}" if k >= 1000 and str(k).strip("0") == "1" else str(k)


def _be_k(k, bound: str | None) -> str:
    if bound == "not reached":
        return "not reached"
    if bound == "no model":
        return "-"
    if bound == "any":
        return "0"
    if k is None:
        return "-"
    return num(k) + (" (beyond the sweep)" if bound == "beyond the sweep" else "")


def _band(lo, hi) -> str:
    return f" [{lo}..{hi}]"


def worksweep_blocks(s: Mapping) -> list[Block]:
    ks = s["ks"]
    heads = ("mechanism", "placement", *(f"k={_k_label(k)}" for k in ks))
    right = set(heads[2:])
    times, ratios = [], []
    for c in s["curves"]:
        by_k = {p["k"]: p for p in c["points"]}
        times.append([c["mechanism"], c["placement"],
                      *(num((by_k[k]["time"] or {}).get("value")) if k in by_k else "-"
                        for k in ks)])
        if c["break_even"] or c["mechanism"] != "direct":
            ratios.append([c["mechanism"], c["placement"],
                           *(r_text(by_k[k]["ratio"]) + (" ^" if k in c.get("non_monotone", ())
                                                         else "")
                             if k in by_k else "-" for k in ks)])
    be_rows = []
    for c in s["curves"]:
        m = c.get("model") or {}
        for b in c["break_even"]:
            band = b.get("band")
            bb = b.get("band_bounds") or [None, None]
            wb = b.get("work_band_ns")
            flags = [f"non-monotone at k={', '.join(_k_label(k) for k in c['non_monotone'])}"] \
                if c.get("non_monotone") else []
            be_rows.append([
                c["mechanism"], c["placement"], f"{b['threshold']:.0%}",
                _be_k(b["k"], b["bound"]) + (_band(_be_k(band[0], bb[0]), _be_k(band[1], bb[1]))
                                             if band and b["k"] is not None else ""),
                num(b["work_ns"]) + (_band(num(wb[0]), num(wb[1]) if wb[1] is not None
                                           else "-") if wb and b["k"] is not None else ""),
                q_text(m.get("c")), q_text(m.get("g"), lambda v: f"{v:+.2%}"),
                "; ".join(flags + ([b["basis"]] if b["basis"] == "point" else [])) or "-"])
    line = s.get("direct_line") or {}
    notes = [f"rule: {s['rule']}"]
    if line:
        notes.append(f"direct's line: {num(line['a_ns'])} ns + {num(line['b_ns_per_k'])} ns x k")
    spread = [f"{c['mechanism']} {c['placement']}: {num(c['model']['tau_ns'])} ns"
              for c in s["curves"] if (c.get("model") or {}).get("tau_ns")]
    if spread:
        notes.append("spread of c between k (tau, in every interval): " + "; ".join(spread))
    if any(c.get("non_monotone") for c in s["curves"]):
        notes.append("^ in the ratio table: non-monotone, the ratio's interval lies wholly above "
                     "that of the k before it (flagged; it counts in the fit by its variance)")
    blocks = [
        Block("worksweep: time per call [ns] against the work per crossing k (iterations of the "
              "kernel inside)", heads, times, right),
        Block("worksweep: ratio to direct at the same k [95% interval]; overhead = ratio - 1",
              heads, ratios, right, [INTERVAL_NOTE]),
        Block("worksweep: break-even work per crossing (overhead at most 5% and 1%), from the "
              "fixed cost c fitted over every k",
              ("mechanism", "placement", "overhead", "k* [95%]", "direct's work ns [95%]",
               "fixed cost c ns [95%]", "work slower inside g [95%]", "flags"), be_rows,
              {"k* [95%]", "direct's work ns [95%]", "fixed cost c ns [95%]",
               "work slower inside g [95%]"},
              notes + not_ok_notes(s)),
    ]
    return blocks


def worksweep_text(s: Mapping, doc: Mapping) -> str:
    return text_of(worksweep_blocks(s))


def worksweep_md(s: Mapping, doc: Mapping) -> str:
    return markdown_of("Work per crossing (worksweep)", worksweep_blocks(s))


def worksweep_plots(s: Mapping, doc: Mapping) -> list:
    title = "Overhead against work per crossing"
    curves = [c for c in s["curves"] if any(p["k"] > 0 for p in c["points"])]
    if not curves:
        return [plots.Plot("worksweep", title, None, "No worksweep points with k > 0.")]
    plt = plots.pyplot()
    colours = plots.colours([f"{c['mechanism']} {c['placement']}" for c in curves])
    fig, (ax_r, ax_t) = plt.subplots(1, 2, figsize=(12, 5.4))
    for c in curves:
        name = f"{c['mechanism']} {c['placement']}"
        pts = [p for p in c["points"] if p["k"] > 0]
        style = "-" if c["placement"] == "same-cpu" else "--"
        tp = [p for p in pts if (p["time"] or {}).get("value")]
        ax_t.plot([p["k"] for p in tp], [p["time"]["value"] for p in tp], style, marker="o",
                  ms=3, color=colours[name], label=name, lw=2.5 if c["mechanism"] == "direct"
                  else 1.2)
        if c["mechanism"] == "direct":
            continue
        rp = [p for p in pts if p["ratio"]]
        if not rp:
            continue
        ax_r.plot([p["k"] for p in rp], [p["ratio"]["value"] for p in rp], style, marker="o",
                  ms=3, color=colours[name], label=name)
        ivs = [p["ratio"]["interval"] for p in rp]
        plots.band(ax_r, [p["k"] for p in rp], [iv[0] if iv else None for iv in ivs],
                    [iv[1] if iv else None for iv in ivs], colours[name])
        for b in c["break_even"]:
            if b["bound"] == "=" and b["k"]:
                ax_r.plot([b["k"]], [1 + b["threshold"]], "x", color=colours[name], ms=7)
    for t in s["thresholds"]:
        ax_r.axhline(1 + t, color="grey", lw=0.8, ls=":")
        ax_r.text(1.0, 1 + t, f"{t:.0%} ", va="bottom", ha="right", fontsize=7, color="grey",
                  transform=ax_r.get_yaxis_transform())
    ax_r.axhline(1.0, color="black", lw=1)
    for ax in (ax_r, ax_t):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.set_xlabel("work per crossing k [kernel iterations], log scale")
    ax_r.set_ylabel("ratio to direct at the same k, log scale")
    ax_r.set_title("overhead: 1 = a plain call; x: break-even (5%, 1%)", fontsize=9)
    ax_t.set_ylabel("time per call [ns], log scale")
    ax_t.set_title("time per call, direct thick", fontsize=9)
    ax_t.legend(fontsize=7, loc="upper left")
    fig.suptitle(f"{title} (run {doc['run']['run_id']}): headline with its 95% interval band",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return [plots.Plot("worksweep", title, fig, "", (
        "Each call runs k iterations of a fixed kernel inside the compartment; the ratio is the "
        "call's time over direct's at the same k, so the overhead a crossing adds falls as "
        "the work per crossing grows. Bands are 95% intervals over repetitions; the dotted "
        "lines are 5% and 1% overhead, crosses where the curve meets them (interpolated)."))]


# ---- the Morello tables ----

def _marks(rows: Sequence[Mapping]) -> tuple[dict[str, str], list[str]]:
    """A mark per distinct `abi` label and the notes that explain them."""
    labels = list(dict.fromkeys(r["abi"] for r in rows if r.get("abi")))
    marks = {a: "*" * (i + 1) for i, a in enumerate(labels)}
    return marks, [f"{m} in: {a}" for a, m in marks.items()]


def cpuwork_blocks(s: Mapping) -> list[Block]:
    marks, notes = _marks(s["rows"])
    heads = ("kernel", "mechanism", "placement", "out ms [95%]", "in ms [95%]", "in/out [95%]",
             "lib ns/iter", "lib/out per iter [95%]", "crossings/trial")
    rows = []
    pub_by = {}
    for p in s["published"]:
        pub_by.setdefault(p["kernel"], []).append(p)
    iters = sorted({r["trial_iterations"] for r in s["rows"] if r.get("trial_iterations")})
    # Morello's trials are 1e8 iterations; where ours are not, its figures
    # say so in their cells rather than pass for ours in the same column.
    other = iters != [MORELLO_TRIAL]
    last = None
    for r in s["rows"]:
        if last is not None and r["kernel"] != last:
            rows += _cpu_published(pub_by.pop(last, []), other)
        last = r["kernel"]
        lib = r.get("lib") or {}
        rows.append([r["kernel"], r["mechanism"] + marks.get(r.get("abi"), ""), r["placement"],
                     q_text(r["out"]), q_text(r["in"]), r_text(r["in_over_out"]),
                     q_text(lib.get("ns_per_iteration")) if lib else "-",
                     r_text(lib.get("over_out")) if lib else "-",
                     num(lib.get("crossings_per_trial")) if lib else "-"])
    if last is not None:
        rows += _cpu_published(pub_by.pop(last, []), other)
    scaled = sorted({r["scaled"] for r in s["rows"] if r.get("scaled")})
    notes = [f"iterations per trial: {', '.join(num(i) for i in iters)}"
             + (f" ({'; '.join(scaled)})" if scaled else ""),
             "out: the kernel in this process; in: the whole trial as one entry in the "
             "compartment; lib: sin, cos, tan, sqrt and log as five entries per iteration "
             "(compared per iteration)", INTERVAL_NOTE, *notes]
    if s["published"]:
        p0 = s["published"][0]
        wheres = "; ".join(dict.fromkeys(p["where"] for p in s["published"]))
        notes.append(f"{PUBLISHED} rows: {p0['source']}, {wheres}; {s['published_caveat']}"
                     + (f"; '@1e8': per trial of 1e8 iterations, not of this run's "
                        f"{', '.join(num(i) for i in iters)}" if other else ""))
    notes += not_ok_notes(s)
    title_iters = (f" of {', '.join(num(i) for i in iters)} iterations" if iters else "")
    return [Block(f"cpuwork (Morello Table 5): time per trial{title_iters} [ms], median per "
                  "trial with its 95% interval; in/out over repetitions", heads, rows,
                  set(heads[3:]), notes)]


MORELLO_TRIAL = 100_000_000  # iterations per trial in Morello's CPU experiment


def _cpu_published(pubs: Sequence[Mapping], other: bool = False) -> list[list[str]]:
    at = " @1e8" if other else ""
    return [[p["kernel"], f"{PUBLISHED} c18n {p['build']}", "(Morello)", p["out_text"] + at,
             p["in_text"] + at, table.fmt_ratio(p["in_over_out"]), "-", "-", "-"] for p in pubs]


def cpuwork_text(s: Mapping, doc: Mapping) -> str:
    return text_of(cpuwork_blocks(s))


def cpuwork_md(s: Mapping, doc: Mapping) -> str:
    return markdown_of("CPU kernels in and out (cpuwork)", cpuwork_blocks(s))


def _faults_text(f: Mapping | None) -> str:
    if not f:
        return "-"
    text = num(f["median"])
    if f["min"] != f["max"]:
        text += f" ({num(f['min'])}..{num(f['max'])})"
    return text


def memops_blocks(s: Mapping) -> list[Block]:
    marks, abi_notes = _marks(s["rows"])
    heads = ("size", "step", "mechanism", "placement", "out ms [95%]", "in ms [95%]",
             "in/out [95%]", "GB/s out", "GB/s in", "faults/trial out", "faults/trial in",
             "4K pages")
    rows = []
    for r in s["rows"]:
        rows.append([table.fmt_bytes(r["size_bytes"]), r["step"],
                     r["mechanism"] + marks.get(r.get("abi"), ""), r["placement"],
                     q_text(r["out"]), q_text(r["in"]), r_text(r["in_over_out"]),
                     rate_text(r["gbps_out"]), rate_text(r["gbps_in"]),
                     _faults_text(r["faults_out"]), _faults_text(r["faults_in"]),
                     num(((r["faults_out"] or r["faults_in"]) or {}).get("pages_4k"))])
    thp = sorted({r["thp"] for r in s["rows"] if r.get("thp")})
    notes = ["faults/trial: minor page faults counted around each step, median over every "
             "trial (range when they differ); a write or memset of fresh memory faults once "
             "per 4 KiB page (once per 2 MiB with transparent huge pages), a read after it "
             "not at all" + (f"; THP: {', '.join(thp)}" if thp else ""),
             "GB/s: the block's size over the headline time (interval from the time's)",
             INTERVAL_NOTE, *abi_notes, f"{PUBLISHED}: none; {s['published_note']}",
             *not_ok_notes(s)]
    return [Block("memops (Morello's memory experiment): time per step [ms], median per trial "
                  "with its 95% interval", heads, rows, set(heads[4:]), notes)]


def memops_text(s: Mapping, doc: Mapping) -> str:
    return text_of(memops_blocks(s))


def memops_md(s: Mapping, doc: Mapping) -> str:
    return markdown_of("Memory operations in and out (memops)", memops_blocks(s))


def _cold_text(c: Mapping | None) -> str:
    return "-" if not c else num(c["value"])


def _printed_ratio(p: Mapping) -> str:
    """in/out of two figures printed to 1 us: the range their rounding allows,
    marked derived (0.079 / 0.002 ms is anything from 31 to 53)."""
    lo, hi = p.get("in_over_out_range") or (None, None)
    if lo is None:
        return table.fmt_ratio(p["in_over_out"])
    return f"{lo:.0f}..{'inf' if hi is None else f'{hi:.0f}'} (derived)"


def pipeio_blocks(s: Mapping) -> list[Block]:
    marks, abi_notes = _marks(s["rows"])
    heads = ("op", "payload", "mechanism", "placement", "out us [95%]", "in us [95%]",
             "in/out [95%]", "cold out us", "cold in us", "GB/s out", "GB/s in")
    pubs = {}
    for p in s["published"]:
        pubs.setdefault(p["variant"], {})["cold" if p["cold"] else "warm"] = p
    rows, last = [], None

    def published_rows(key) -> list[list[str]]:
        got = pubs.pop(key[0], None) if key else None
        if not got or key[1] != 1024:
            if got:
                pubs[key[0]] = got
            return []
        w, c = got.get("warm"), got.get("cold")
        return [[key[0], "1024", f"{PUBLISHED} c18n", "(Morello)",
                 w["out_text"] if w else "-", w["in_text"] if w else "-",
                 _printed_ratio(w) if w else "-",
                 c["out_text"] if c else "-", c["in_text"] if c else "-", "-", "-"]]

    for r in s["rows"]:
        key = (r["variant"], r["payload"])
        if last is not None and key != last:
            rows += published_rows(last)
        last = key
        rows.append([r["variant"], str(r["payload"]), r["mechanism"] + marks.get(r.get("abi"), ""),
                     r["placement"], q_text(r["out"]), q_text(r["in"]), r_text(r["in_over_out"]),
                     _cold_text(r["cold_out"]), _cold_text(r["cold_in"]),
                     rate_text(r["gbps_out"]), rate_text(r["gbps_in"])])
    rows += published_rows(last)
    short = sum(r["short_reads"] for r in s["rows"])
    notes = ["write: one write with the reader idle; read: the data already there; roundtrip: "
             "to an echo process and back; stream: chunks back to back until the reader's "
             "sum comes back (a sample per stream; GB/s from it)",
             "cold: the first call of each result, kept out of the samples (median over "
             "repetitions)",
             f"short reads looped: {short}", INTERVAL_NOTE, *abi_notes]
    if s["published"]:
        p0 = s["published"][0]
        notes.append(f"{PUBLISHED} rows: {p0['source']}, {p0['where']} (out: Table 7); "
                     f"{s['published_caveat']}; their in/out is derived by isobench: the range "
                     "of quotients that values rounded to 1 us allow")
    notes += not_ok_notes(s)
    return [Block("pipeio (Morello's pipe experiment): time per call [us], median with its 95% "
                  "interval; the cold call apart", heads, rows, set(heads[4:]), notes)]


def pipeio_text(s: Mapping, doc: Mapping) -> str:
    return text_of(pipeio_blocks(s))


def pipeio_md(s: Mapping, doc: Mapping) -> str:
    return markdown_of("Pipe I/O in and out (pipeio)", pipeio_blocks(s))


# ---- scale ----

def scale_blocks(s: Mapping) -> list[Block]:
    rows = []
    for r in s["rows"]:
        created = r["created"]
        made = "-" if not created else (num(created[0]) if created[0] == created[1]
                                        else f"{num(created[0])}..{num(created[1])}")
        err = r["errno_name"] or (str(r["errno"]) if r["errno"] not in (None, 0) else "-")
        rows.append([r["mechanism"], r["placement"], made, num(r["limit_asked"]),
                     num(r["limit_cap"]), r["cause"] or "-", err, num(r["dead"]),
                     q_text(r["create"]), q_text(r["destroy"]),
                     num(r["pss_kib_per_compartment"]) + (f" (N={r['pss_at']})" if r["pss_at"]
                                                          else ""),
                     num(r["processes_left"])])
    heads = ("mechanism", "placement", "created", "asked", "cap", "stopped by", "errno", "dead",
             "create us [95%]", "destroy us [95%]", "PSS KiB/compartment", "left")
    blocks = [Block("scale: compartments created until a limit, and why it stopped", heads, rows,
                    {"created", "asked", "cap", "dead", "create us [95%]", "destroy us [95%]",
                     "PSS KiB/compartment", "left"},
                    ["cap: the limit after the memory, pid and address-space caps; stopped by: "
                     "the cause isob reports (the errno of the create that failed, if one did); "
                     "PSS: of this process and every process below it, per compartment, at the "
                     "largest N; left: processes alive after destroying them all",
                     INTERVAL_NOTE, *not_ok_notes(s)])]
    ns = sorted({p["live"] for c in s["curves"] for p in c["points"]})
    if ns:
        heads2 = ("N alive", *(f"{c['mechanism']} {c['placement']}" for c in s["curves"]))
        rows2 = []
        for n in ns:
            cells = []
            for c in s["curves"]:
                p = next((p for p in c["points"] if p["live"] == n), None)
                if p is None:
                    cells.append("-")
                    continue
                over = p.get("over_first")
                cells.append(q_text(p["time"]) + (f" x{table.fmt_ratio(over['value'])}"
                                                   if over and over.get("value") else ""))
            rows2.append([num(n), *cells])
        blocks.append(Block("scale: time per call to a random one of N live compartments [ns, "
                            "95%], x: over the smallest N", heads2, rows2, set(heads2)))
    return blocks


def scale_text(s: Mapping, doc: Mapping) -> str:
    return text_of(scale_blocks(s))


def scale_md(s: Mapping, doc: Mapping) -> str:
    return markdown_of("Compartments at scale (scale)", scale_blocks(s))


def scale_plots(s: Mapping, doc: Mapping) -> list:
    title = "Switch cost against the number of live compartments"
    curves = [c for c in s["curves"] if c["points"]]
    if not curves:
        return [plots.Plot("scale", title, None, "No scale switch results in this run.")]
    plt = plots.pyplot()
    colours = plots.colours([f"{c['mechanism']} {c['placement']}" for c in curves])
    fig, ax = plt.subplots(figsize=(9, 5.2))
    for c in curves:
        name = f"{c['mechanism']} {c['placement']}"
        pts = [p for p in c["points"] if (p["time"] or {}).get("value")]
        xs = [p["live"] for p in pts]
        ax.plot(xs, [p["time"]["value"] for p in pts], marker="o", ms=3, color=colours[name],
                label=name)
        ivs = [p["time"]["interval"] for p in pts]
        plots.band(ax, xs, [iv[0] if iv else None for iv in ivs],
                    [iv[1] if iv else None for iv in ivs], colours[name])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_xlabel("compartments alive N, log scale")
    ax.set_ylabel("time per call to a random one [ns], log scale")
    ax.legend(fontsize=7)
    ax.set_title(f"{title} (run {doc['run']['run_id']})", fontsize=10)
    fig.tight_layout()
    return [plots.Plot("scale", title, fig, "", "Each call goes to a compartment picked at "
                       "random (seeded) among the N alive; bands are 95% intervals.")]
