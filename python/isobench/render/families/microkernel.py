"""How the microkernel sections (analysis/families/microkernel.py) are shown: the IPC
table (same-cpu and cross-cpu apart, p5/p95, each protection against none)
with the slides' figures, the delegation table and the scheduling table;
delegation latency against depth and scheduling overhead against N.
Every number comes from the sections; nothing here computes."""

from __future__ import annotations

from typing import Mapping, Sequence

from ..kit import table
from ..kit.plots import colours, Plot, pyplot



def fmt(v) -> str:
    return table.fmt_num(v)


def _t(cell: Mapping | None) -> str:
    """A time in us, else in its own unit."""
    if not cell:
        return "-"
    return fmt(cell["us"]) if cell.get("us") is not None else f"{fmt(cell['value'])} {cell['unit']}"


def _size(n) -> str:
    return table.fmt_bytes(n) if isinstance(n, (int, float)) else "-"


def _problems(section: Mapping) -> list[str]:
    return [f"{p['status']}: {p['where']}: {p['reason']}" for p in section.get("problems") or ()]


# ---- ipc ----

def _ipc_table(t: Mapping, with_interval: bool) -> tuple[list[str], list[list[str]]]:
    hs = ["primitive", "payload"]
    for p in t["protections"]:
        hs += [f"{p} us", f"{p} p5..p95"]
        if p != "none":
            hs += ["x none", "delta us"]
    rows = []
    for r in t["rows"]:
        line = [str(r["primitive"]), f"{r['payload']} B"]
        for p in t["protections"]:
            c = r["cells"].get(p)
            line.append(_t(c))
            line.append(f"{fmt(c['p5_us'])}..{fmt(c['p95_us'])}" if c and c.get("p5_us")
                        is not None else "-")
            if p != "none":
                line += [table.fmt_ratio_record((c or {}).get("vs_none"), with_interval),
                         fmt((c or {}).get("delta_us"))]
        rows.append(line)
    return hs, rows


def _slide_rows(section: Mapping) -> list[list[str]]:
    out = []
    for s in section["slides"]:
        local = "; ".join(f"{fmt(l['value'])} {l['unit']}" + (f" = {fmt(l['us'])} us"
                                                             if l["us"] is not None else "")
                          for l in s["local"]) or "-"
        out.append([s["subject"], f"{s['text']} {s['unit']}",
                    "DERIVED" if s["derived"] else "printed", local])
    return out


SLIDE_HEADERS = ("slide figure (Morello, published)", "value", "kind", "local row (this run)")
IPC_NOTE = ("round trip per message; x none: headline over none's for the same cell in the "
            "same run (interval over repetitions in the report); p5..p95 of the pooled round "
            "trips: cross-cpu on a VM is bimodal, so read both ends")


def ipc_text(section: Mapping, doc: Mapping) -> str:
    out = []
    for t in section["tables"]:
        hs, rows = _ipc_table(t, False)
        out += [f"pingpong: IPC round trip, {t['placement']} [us]",
                table.fold(hs, rows, set(hs) - {"primitive"}), ""]
    out.append(table.wrap(IPC_NOTE + (" (measured in a VM)" if section["virtualized"] else "")
                          + ".", indent=""))
    if section["slides"]:
        out += ["", table.wrap("CHERI microkernel slides (Lauterbach 2023; Morello, other "
                               "hardware; never mixed into ours; TSC ticks are not cycles):"),
                table.render_fit(SLIDE_HEADERS, _slide_rows(section), flex=(0, 3))]
    out += [table.wrap(p) for p in _problems(section)]
    return "\n".join(out)


def ipc_markdown(section: Mapping, doc: Mapping) -> str:
    out = ["## Microkernel IPC: round trips under each protection", "", IPC_NOTE + ".", ""]
    for t in section["tables"]:
        hs, rows = _ipc_table(t, True)
        out += [f"### {t['placement']} [us]", "", table.md_table(hs, rows), ""]
    if section["slides"]:
        out += ["### CHERI microkernel slides (published, other hardware)", "",
                table.md_table(SLIDE_HEADERS, _slide_rows(section)), ""]
    out += [f"- {p}" for p in _problems(section)]
    return "\n".join(out)


# ---- delegate ----

def _delegate_table(section: Mapping) -> tuple[list[str], list[list[str]]]:
    revs = section["revocations"]
    hs = ["variant", "region", "depth", "placement", "per hop us", "hop p5..p95",
          "end to end us"] + [f"revoke {h} us" for h in revs] + ["checked"]
    rows = []
    for r in section["rows"]:
        hop = r["hop"]
        checked = []
        if r["checked"].get("checksums_verified") is not None:
            checked.append(f"{r['checked']['checksums_verified']:,} checksums")
        for h in revs:
            v = r["revoke"].get(h)
            if v and v.get("holders_probed") is not None:
                checked.append(f"{h}: {v['holders_faulted']}/{v['holders_probed']} "
                               f"{v.get('fault_expected') or 'faults'}")
        rows.append([str(r["variant"]), _size(r["region"]), str(r["depth"]), str(r["placement"]),
                     _t(hop), f"{fmt(hop['p5_us'])}..{fmt(hop['p95_us'])}" if hop and
                     hop.get("p5_us") is not None else "-", _t(r["end_to_end"])]
                    + [_t(r["revoke"].get(h)) for h in revs] + ["; ".join(checked) or "-"])
    return hs, rows


DELEGATE_NOTE = ("per hop: from the delegator's stamp to the share mapped (checksum excluded); "
                 "end to end: first hand-over to the last checksum; revoke truncate: "
                 "ftruncate's duration, every holder then took SIGBUS; revoke unmap: until "
                 "every holder acknowledged, each then took SIGSEGV; threads share a pointer "
                 "(no isolation)")


def delegate_text(section: Mapping, doc: Mapping) -> str:
    hs, rows = _delegate_table(section)
    return "\n".join(["delegate: memory handed down a chain, then revoked [us]",
                      # A folded block repeats what names the row.
                      table.fold(hs, rows, set(hs) - {"variant", "placement", "checked"}, keep=4),
                      table.wrap(DELEGATE_NOTE + ".", indent=""),
                      *(table.wrap(p) for p in _problems(section))])


def delegate_markdown(section: Mapping, doc: Mapping) -> str:
    hs, rows = _delegate_table(section)
    return "\n".join(["## Microkernel delegation: a region down a chain of tasks", "",
                      DELEGATE_NOTE + ".", "", table.md_table(hs, rows), "",
                      *[f"- {p}" for p in _problems(section)]])


# ---- sched ----

def _sched_table(section: Mapping, with_interval: bool) -> tuple[list[str], list[list[str]]]:
    hs = ["kind", "N", "slice us", "mode", "cpus", "makespan us", "ideal us", "x ideal",
          "overhead", "vol. sw", "invol. sw", "ns/switch", "work"]
    rows = []
    for r in section["rows"]:
        v = r["vs_ideal"]
        w = r["work_checked"]
        work = (f"{w['slices_done']:,}/{w['slices_expected']:,} slices"
                if w.get("slices_done") is not None else "-")
        rows.append([str(r["kind"]), str(r["workers"]), str(r["slice_us"]), str(r["mode"]),
                     str(r["cpus"]), _t(r["makespan"]), fmt(r["ideal_us"]),
                     table.fmt_ratio_record(v, with_interval),
                     f"{v['overhead_pct']:+.1f}%" if v else "-",
                     fmt(r["voluntary"]), fmt(r["involuntary"]), fmt(r["ns_per_switch"]), work])
    return hs, rows


SCHED_NOTE = ("x ideal: makespan over ceil(N / CPUs used) * W_solo, each repetition against "
              "its own W_solo, geometric mean over repetitions; switches: the workers' own "
              "(getrusage), medians over repetitions; ns/switch is noise where switches are "
              "few; work: slices done and checked against N * W")


def sched_text(section: Mapping, doc: Mapping) -> str:
    hs, rows = _sched_table(section, False)
    return "\n".join(["sched: N workers, W = 1 ms of checked work each",
                      # A folded block repeats what names the row.
                      table.fold(hs, rows, set(hs) - {"kind", "mode", "cpus", "work"}, keep=5),
                      table.wrap(SCHED_NOTE + ".", indent=""),
                      *(table.wrap(p) for p in _problems(section))])


def sched_markdown(section: Mapping, doc: Mapping) -> str:
    hs, rows = _sched_table(section, True)
    return "\n".join(["## Microkernel scheduling: many workers, fixed work", "",
                      SCHED_NOTE + ".", "", table.md_table(hs, rows), "",
                      *[f"- {p}" for p in _problems(section)]])


# ---- plots ----

STYLES = ("-", "--", ":", "-.")


def delegate_plot(section: Mapping, doc: Mapping):
    title = "Delegation latency against chain depth"
    rows = [r for r in section["rows"] if r["hop"] or r["end_to_end"]]
    if not rows:
        return Plot("delegate-depth", title, None, "No delegate results in this run, so the "
                    "delegation plot is left out (`isobench run delegate`).")
    plt = pyplot()
    variants = sorted({str(r["variant"]) for r in rows})
    regions = sorted({r["region"] for r in rows if r["region"] is not None})
    colour_of = colours(variants)
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), sharex=True)
    for ax, key, what in ((axes[0], "hop", "per hop"), (axes[1], "end_to_end", "end to end")):
        for v in variants:
            for k, size in enumerate(regions):
                pts = sorted((r["depth"], r[key]) for r in rows if str(r["variant"]) == v
                             and r["region"] == size and r[key] and r[key].get("us"))
                if not pts:
                    continue
                ax.plot([d for d, _ in pts], [c["us"] for _, c in pts], STYLES[k % 4],
                        marker="o", ms=3, color=colour_of[v], label=f"{v} {_size(size)}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        depths = sorted({r["depth"] for r in rows if r["depth"]})
        ax.set_xticks(depths)
        ax.set_xticklabels([str(d) for d in depths])
        ax.set_xlabel("chain depth (hops)")
        ax.set_ylabel(f"{what} [us], headline, log scale")
        ax.set_title(what, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    # Long legend lines, so that the line style of each region shows
    # around the marker.
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), handlelength=4)
    fig.suptitle(f"{title} (run {doc['run']['run_id']}); colour: variant, line: region size",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return Plot("delegate-depth", title, fig, "", "A region handed down a chain of threads "
                "(a pointer), processes (a memfd over SCM_RIGHTS) or copies "
                "(process_vm_writev); each hop verifies its share's checksum.")


def sched_plot(section: Mapping, doc: Mapping):
    title = "Scheduling overhead against the number of workers"
    rows = [r for r in section["rows"] if r["vs_ideal"]]
    if not rows:
        return Plot("sched-workers", title, None, "No sched results in this run, so the "
                    "scheduling plot is left out (`isobench run sched`).")
    plt = pyplot()
    panels = list(dict.fromkeys((r["mode"], r["cpus"]) for r in rows))
    kinds = list(dict.fromkeys(r["kind"] for r in rows))
    slices = sorted({r["slice_us"] for r in rows})
    colour_of = colours([str(k) for k in kinds])
    cols = min(2, len(panels))
    nrows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(6 * cols, 4 * nrows), squeeze=False,
                             sharey=True)
    for ax, (mode, cpus) in zip(axes.flat, panels):
        for kind in kinds:
            for k, sl in enumerate(slices):
                pts = sorted((r["workers"], r["vs_ideal"]) for r in rows if r["kind"] == kind
                             and r["slice_us"] == sl and (r["mode"], r["cpus"]) == (mode, cpus))
                if not pts:
                    continue
                ax.plot([n for n, _ in pts], [v["overhead_pct"] for _, v in pts],
                        STYLES[k % 4], marker="o", ms=3, color=colour_of[str(kind)],
                        label=f"{kind}, {sl} us slices")
        ax.axhline(0.0, color="black", lw=1)
        ax.set_xscale("log", base=2)
        ns = sorted({r["workers"] for r in rows if r["workers"]})
        ax.set_xticks(ns)
        ax.set_xticklabels([str(n) for n in ns])
        ax.set_xlabel("workers N")
        ax.set_ylabel("makespan over ideal [%]")
        ax.set_title(f"mode {mode}, cpus {cpus}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=7, handlelength=4)
    fig.suptitle(f"{title} (run {doc['run']['run_id']}): 0 = N*W spread perfectly over the "
                 "CPUs used", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return Plot("sched-workers", title, fig, "", "Each worker does W = 1 ms of checked work "
                "in slices; the ideal is ceil(N / CPUs used) times the same work run alone.")


def delegate_plots(section: Mapping, doc: Mapping) -> list:
    return [delegate_plot(section, doc)]


def sched_plots(section: Mapping, doc: Mapping) -> list:
    return [sched_plot(section, doc)]
