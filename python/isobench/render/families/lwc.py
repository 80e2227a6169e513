"""How the lwC sections (analysis/families/lwc.py) are shown: the creation fit beside
fork and the kernel's copy-on-write fault, the switch one way and round trip
in separate tables, the reference monitors and the signing key, each with
the published lwC figures beside ours and marked.  Plots: creation cost
against dirty pages (one line per heap, the fit drawn) and the switch bars.
Every number shown is in the section; nothing here computes."""

from __future__ import annotations

from typing import Mapping, Sequence

from ..kit import claims, plots, table
from ..kit.blocks import (INTERVAL_NOTE, PUBLISHED, Block, markdown_of, not_ok_notes, num, q_text,
                          r_text, text_of)


def _pub_ref(p: Mapping) -> str:
    return f"{p['source']}, {p['where']}; {p['hardware']}"


# ---- lwc-create ----

def _seg_label(sg: Mapping) -> str:
    return f"{num(sg['from'])}..{num(sg['to'])}"


def _linear_text(f: Mapping) -> str:
    lin = f.get("linearity") or {}
    if lin.get("p") is None:
        return "untested"
    return ("NO" if f.get("bad_fit") else "not rejected") + f" (p={lin['p']:.2g})"


def create_blocks(s: Mapping) -> list[Block]:
    cows = {c["heap_mib"]: c for c in s["cow_fault"]}
    segs = list(dict.fromkeys(_seg_label(sg) for f in s["fits"] for sg in f.get("segments") or ()))
    heads = ("heap", "variant", "fixed cost us (D=0) [95%]",
             *(f"us/page {x} [95%]" for x in segs), "one line?", "faults >= D")
    rows, methods, lines = [], set(), []
    for f in s["fits"]:
        methods.add(f["method"])
        by = {_seg_label(sg): sg for sg in f.get("segments") or ()}
        rows.append([f"{f['heap_mib']} MiB", f["variant"], q_text(f.get("fixed")),
                     *(q_text((by.get(x) or {}).get("slope")) for x in segs),
                     _linear_text(f), "yes" if f["faults_proved"] else "NO"])
        if f.get("bad_fit"):
            lines.append(f"BAD FIT {f['variant']} {f['heap_mib']} MiB: {f['why']}")
    pub = {p["id"]: p for p in s["published"]}
    if "lwc-create" in pub:
        a, b = pub["lwc-create"], pub.get("lwc-create-per-dirty-page")
        heap = a["local_params"].get("heap_mib")
        rows.append([f"{heap} MiB" if heap else "-", f"{PUBLISHED} lwC", a["text"],
                     *((b["text"] + " (one line)" if b else "-") for _ in segs), "-", "-"])
    ds = sorted({p["dirty_pages"] for f in s["fits"] for p in f["points"]})
    lin_methods = sorted({(f.get("linearity") or {}).get("method") for f in s["fits"]} - {None})
    notes = ["create, first switch, the context writes D pages (4 KiB, MADV_NOHUGEPAGE), "
             "destroy, at D in " + ", ".join(num(d) for d in ds),
             "fixed cost: the D=0 point as measured (geometric mean over repetitions), not a "
             "line's intercept",
             "us/page a..b: the cost per dirty page on that segment, the weighted least-squares "
             "line (weights 1/y^2) through each repetition's medians at a <= D <= b",
             "intervals: " + "; ".join(sorted(m for m in methods if m)),
             f"one line?: whether one line describes every D; NO when p < {s['bad_fit_p']:g} "
             "(then no single cost per page exists: read the segments); "
             + "; ".join(lin_methods),
             *lines,
             f"THP: {', '.join(s['thp']) or '-'} (advice: {', '.join(s['thp_advice']) or '-'})",
             INTERVAL_NOTE]
    if "lwc-create" in pub:
        heap = pub["lwc-create"]["local_params"].get("heap_mib")
        notes.append(f"{PUBLISHED}: {_pub_ref(pub['lwc-create'])}; other hardware, other OS "
                     "(the in-kernel lwC); its process's size is not stated: beside the "
                     f"{heap} MiB heap, the smallest measured; one line over every D")
    blocks = [Block("lwc-create: create + switch + destroy: the fixed cost and the cost per "
                    "dirty page by segment", heads, rows, set(heads[2:-2]), notes)]

    cheads = ("heap", "variant", "dirty pages", "us/page [95%]", "COW fault us/page [95%]",
              "/ COW [95%]", f"target <= {s['target']:g}")
    crows = []
    for f in s["fits"]:
        if f["variant"] not in ("lwc", "fork"):
            continue
        cow = cows.get(f["heap_mib"]) or {}
        for sg in f.get("segments") or ():
            crows.append([f"{f['heap_mib']} MiB", f["variant"], _seg_label(sg),
                          q_text(sg.get("slope")), q_text(cow.get("per_page")),
                          r_text(sg.get("over_cow")), sg.get("verdict") or "-"])
        rng = f.get("cow_range")
        if rng:
            crows.append([f"{f['heap_mib']} MiB", f["variant"],
                          f"{num(rng[0])}..{num(rng[1])} (COW's)",
                          q_text(f.get("per_page_cow_range")), q_text(cow.get("per_page")),
                          r_text(f["over_cow"]),
                          ("VERDICT: " + f["verdict"]) if f.get("verdict") else "-"])
    if "lwc-create-per-dirty-page" in pub:
        crows.append(["-", f"{PUBLISHED} lwC", "one line", pub["lwc-create-per-dirty-page"]
                                                           ["text"], "-", "-", "-"])
    cow_pages = sorted({c["pages"] for c in s["cow_fault"] if c.get("pages")})
    blocks.append(Block(
        f"lwc-create: cost per dirty page against the kernel's copy-on-write fault (target: "
        f"lwc within {s['target']:g}x)", cheads, crows, set(cheads[3:6]),
        ["COW fault: the kernel's own copy-on-write fault, timed page by page in a forked "
         "child of the same run (median per page) over "
         + (", ".join(num(p) for p in cow_pages) or "-") + " fresh pages",
         "/ COW: the cost per page over it, paired by repetition; the VERDICT row is about the "
         "same fresh writes as the COW child's: (y(b) - y(a)) / (b - a) from the smallest D to "
         "the largest D at most the COW's pages; the segment rows show where the cost lies",
         "within: the whole interval at or below the target; beyond: all of it above; "
         "unresolved: it spans the target"]))

    base_rows = []
    for f in s["fixed"]:
        what = {"vfork": "vfork + _exit + wait", "posix_spawn": "posix_spawn(/bin/true) + wait",
                "pthread": "pthread_create + join"}.get(f["variant"], f["variant"])
        base_rows.append([f"{f['heap_mib']} MiB", f["variant"], q_text(f["time"]), what])
    base_rows.sort(key=lambda r: (int(r[0].split()[0]), r[1]))
    blocks.append(Block("lwc-create: the baselines, per heap [us] (soft-dirty and uffd-wp, "
                        "in-process rollbacks, are in the first table)",
                        ("heap", "variant", "each [95%]", "what"), base_rows,
                        {"each [95%]"}, not_ok_notes(s)))
    series = [f for f in s["fits"] if f["variant"] in ("lwc", "fork")]
    if ds and series:
        heads3 = ("dirty pages", *(f"{f['variant']} {f['heap_mib']} MiB" for f in series))
        rows3 = []
        for d in ds:
            rows3.append([num(d), *(q_text(next((p["time"] for p in f["points"]
                                                 if p["dirty_pages"] == d), None))
                                    for f in series)])
        blocks.append(Block("lwc-create: each point [us, 95%]", heads3, rows3, set(heads3)))
    return blocks


def create_text(s: Mapping, doc: Mapping) -> str:
    return text_of(create_blocks(s))


def create_md(s: Mapping, doc: Mapping) -> str:
    return markdown_of("lwC creation (lwc-create)", create_blocks(s))


def _segment_path(f: Mapping) -> list[tuple[float, float]]:
    """The fixed cost at D=0, then each segment's cost per page in turn:
    the piecewise line the table states (positive points only, log scale)."""
    y = (f.get("fixed") or {}).get("value")
    if y is None:
        return []
    path = [(0.0, y)]
    for sg in f.get("segments") or ():
        slope = (sg.get("slope") or {}).get("value")
        if slope is None:
            break
        y += slope * (sg["to"] - sg["from"])
        path.append((float(sg["to"]), y))
    return [(x, v) for x, v in path if v > 0]


def create_plots(s: Mapping, doc: Mapping) -> list:
    title = "Creation cost against dirty pages"
    series = [f for f in s["fits"] if f["variant"] in ("lwc", "fork")
              and any((p["time"] or {}).get("value") for p in f["points"])]
    if not series:
        return [plots.Plot("lwc-create", title, None, "No lwc-create results in this run.")]
    plt = plots.pyplot()
    colours = plots.colours([str(h) for h in s["heaps"]])
    fig, ax = plt.subplots(figsize=(9, 5.6))
    for f in series:
        c = colours[str(f["heap_mib"])]
        pts = [p for p in f["points"] if (p["time"] or {}).get("value")]
        xs = [p["dirty_pages"] for p in pts]
        ys = [p["time"]["value"] for p in pts]
        lo = [y - (p["time"]["interval"] or [y, y])[0] for y, p in zip(ys, pts)]
        hi = [(p["time"]["interval"] or [y, y])[1] - y for y, p in zip(ys, pts)]
        lwc = f["variant"] == "lwc"
        ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o" if lwc else "s", ms=4 if lwc else 3,
                    color=c, mfc=c if lwc else "none", capsize=2, lw=0,
                    elinewidth=1, label=f"{f['variant']}, heap {f['heap_mib']} MiB")
        path = _segment_path(f)
        if path:
            ax.plot([x for x, _ in path], [y for _, y in path], "-" if lwc else "--", color=c,
                    lw=1.2, label=f"fixed cost {num(f['fixed']['value'])} us, then the segments' "
                                  f"cost per page ({f['variant']}, {f['heap_mib']} MiB)")
    pub = {p["id"]: p for p in s["published"]}
    if "lwc-create" in pub and "lwc-create-per-dirty-page" in pub:
        a, b = pub["lwc-create"]["value"], pub["lwc-create-per-dirty-page"]["value"]
        xs = sorted({p["dirty_pages"] for f in series for p in f["points"]} | {0})
        ax.plot(xs, [a + b * x for x in xs], ":", color="purple", lw=1.2,
                label=f"{PUBLISHED}, other hardware: lwC {pub['lwc-create']['text']} us + "
                      f"{pub['lwc-create-per-dirty-page']['text']} us/page (beside the "
                      f"{pub['lwc-create']['local_params'].get('heap_mib', '?')} MiB heap)")
    ax.set_xscale("symlog", linthresh=1)
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_xlabel("dirty pages written by the new context (symmetric log scale)")
    ax.set_ylabel("create + switch + destroy [us], log scale")
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title(f"{title} (run {doc['run']['run_id']}): median per point with its 95% "
                 "interval; fixed cost and cost per page by segment", fontsize=10)
    fig.tight_layout()
    return [plots.Plot("lwc-create", title, fig, "", (
        "One line per resident heap: the lwc (filled, solid fit) and fork (hollow, dashed fit) "
        "doing the same work. The dotted purple line is lwC's published cost on its own "
        "hardware and kernel, not a local result."))]


# ---- lwc-switch ----

def _published_cells(row: Mapping) -> tuple[str, str]:
    pubs = row.get("published") or []
    vals = "; ".join(f"{p['text']} {p['unit']} ({p['source'].split(' (')[0]})" for p in pubs)
    over = "; ".join(f"{p['over_lwc_text']} ({_who(p)})" for p in pubs
                     if p.get("over_lwc_text") is not None and p["unit"] == "us") \
        if row["variant"] != "lwc" else ""
    return vals or "-", over or "-"


def _who(p: Mapping) -> str:
    """Whose ratio a published / lwC figure is, in a word or two."""
    name = p["source"].split(" (")[0]
    how = p.get("over_lwc_how") or ""
    return f"{name}, of means" if "of the means" in how else (
        f"{name}, as Konrad divides" if "as the report divides" in how else f"{name}, quotient")


def switch_blocks(s: Mapping) -> list[Block]:
    heads = ("placement", "variant", "one-way us [95%]", "a->b us", "b->a us", "/ lwc [95%]",
             f"{PUBLISHED} one-way", f"{PUBLISHED} / lwC")
    rows = []
    for r in s["one_way"]:
        pv, po = _published_cells(r)
        rows.append([r["placement"], r["variant"], q_text(r["time"]), num(r.get("a_to_b_us")),
                     num(r.get("b_to_a_us")), r_text(r["over_lwc"]), pv, po])
    sources = list(dict.fromkeys(_pub_ref(p) for r in s["one_way"] for p in r.get("published")
                                 or ()))
    notes = ["one way: a timestamp written just before the switch and read first thing after "
             "it, both directions (a->b, b->a: their medians)",
             "published: process = POSIX semaphores (our `process`), kernel thread = `thread`, "
             "user thread = getcontext/setcontext (our `ucontext`; FreeBSD's are system calls)",
             f"{PUBLISHED} / lwC: each source's ratio as printed (Konrad 2023, Table 5.2a: "
             "the ratio of his means; the lwC paper's: its times as Konrad divides them), not "
             "isobench's; isobench's own / lwc is of medians, with its 95% interval",
             INTERVAL_NOTE, *(f"{PUBLISHED}: {x}" for x in sources)]
    blocks = [Block("lwc-switch: ONE-WAY switch (one switch, not a round trip)", heads, rows,
                    {"one-way us [95%]", "a->b us", "b->a us", "/ lwc [95%]"}, notes)]
    rt = [[r["placement"], r["variant"], q_text(r["time"]), r_text(r["over_lwc"]),
           "yes" if r["checked"] else "NO"] for r in s["round_trip"]]
    blocks.append(Block("lwc-switch: ROUND TRIP (two switches; never compare with the one-way "
                        "table or the published one-way figures)",
                        ("placement", "variant", "round trip us [95%]", "/ lwc [95%]",
                         "other side ran"), rt, {"round trip us [95%]", "/ lwc [95%]"}))
    tg = [[t["placement"], r_text(t["lwc_over_process_futex"]), f"<= {t['target']:g}",
           t["verdict"] or "-"] for t in s["targets"]]
    if tg:
        blocks.append(Block("lwc-switch: target: lwc one-way within "
                            f"{s['target']:g}x of process-futex one-way",
                            ("placement", "lwc / process-futex [95%]", "target", "verdict"), tg,
                            {"lwc / process-futex [95%]"}, not_ok_notes(s)))
    return blocks


def switch_text(s: Mapping, doc: Mapping) -> str:
    out = text_of(switch_blocks(s))
    return out + ("\n" + claims.text(s["claims"]) if s.get("claims") else "")


def switch_md(s: Mapping, doc: Mapping) -> str:
    out = markdown_of("lwC switch (lwc-switch)", switch_blocks(s))
    return out + ("\n" + claims.markdown(s["claims"]) if s.get("claims") else "")


def _bars(ax, rows: Sequence[Mapping], title: str, published: bool) -> None:
    rows = [r for r in rows if r["placement"] == "same-cpu" and (r["time"] or {}).get("value")]
    ys = list(range(len(rows)))
    vals = [r["time"]["value"] for r in rows]
    lo = [v - (r["time"]["interval"] or [v, v])[0] for v, r in zip(vals, rows)]
    hi = [(r["time"]["interval"] or [v, v])[1] - v for v, r in zip(vals, rows)]
    ax.barh(ys, vals, xerr=[lo, hi], color="#1f77b4", capsize=3)
    ax.set_yticks(ys)
    ax.set_yticklabels([r["variant"] for r in rows])
    ax.invert_yaxis()
    ax.set_title(title, fontsize=9)
    ax.grid(True, axis="x", alpha=0.3)
    if published:
        marks, seen = "Dv^s", {}
        for y, r in zip(ys, rows):
            for p in r.get("published") or ():
                if p["unit"] != "us":
                    continue
                k = seen.setdefault(p["source"], len(seen))
                ax.plot([p["value"]], [y], marks[k % len(marks)], mfc="none", mec="purple",
                        ms=7, label=f"{PUBLISHED}, other hardware: {p['source']}")
        h, l = ax.get_legend_handles_labels()
        if h:
            uniq = dict(zip(l, h))
            ax.legend(uniq.values(), uniq.keys(), fontsize=7, loc="lower right")


def switch_plots(s: Mapping, doc: Mapping) -> list:
    title = "lwC switch: one way and round trip"
    if not any((r["time"] or {}).get("value") for r in s["one_way"] + s["round_trip"]):
        return [plots.Plot("lwc-switch", title, None, "No lwc-switch results in this run.")]
    plt = plots.pyplot()
    n = max(len(s["one_way"]), len(s["round_trip"]), 1)
    # Two panels with their own axes: a one-way time is never read against a round trip.
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 1.8 + 0.45 * n))
    _bars(a1, s["one_way"], "ONE WAY [us], same CPU; hollow: published one-way", True)
    _bars(a2, s["round_trip"], "ROUND TRIP [us], same CPU (own axis)", False)
    for a in (a1, a2):
        a.set_xlabel("headline with its 95% interval [us]")
    fig.suptitle(f"{title} (run {doc['run']['run_id']})", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    return [plots.Plot("lwc-switch", title, fig, "", (
        "Left: one switch, timed by a timestamp handed across; right: a round trip (two "
        "switches) timed by one side. Published lwC figures are one-way and appear only on "
        "the left, hollow, measured on other hardware."))]


# ---- refmon ----

def refmon_blocks(s: Mapping) -> list[Block]:
    cfgs = s["configs"]
    heads = ("call", *cfgs)
    rows = [[r["call"], *(q_text((r["cells"].get(c) or {}).get("seconds"),
                                 lambda v: f"{v:.3f}") for c in cfgs)] for r in s["rows"]]
    iso = [f"{c}: {s['isolation'].get(c) or '-'}" for c in cfgs]
    reps = ", ".join(str(n) for n in s["reps"])
    blocks = [Block("refmon: seconds per 10,000 calls [95% interval over repetitions]", heads,
                    rows, set(cfgs),
                    [f"repetitions (processes) per result: {reps}; each holds 10 samples of "
                     "10,000 calls (--quick: 3), its median the repetition's value",
                     f"file system: {', '.join(s['fs']) or '-'}", INTERVAL_NOTE,
                     "isolation (threat model) per monitor:", *(f"  {x}" for x in iso)])]
    heads2 = ("call", *(f"{c} us/call" for c in cfgs), "broker / lwc-mon [95%]")
    rows2 = []
    for r in s["rows"]:
        cells = []
        for c in cfgs:
            cell = r["cells"].get(c) or {}
            text = num((cell.get("us_per_call") or {}).get("value"))
            over = cell.get("over_native")
            if over and over.get("value"):
                text += f" x{table.fmt_ratio(over['value'])}"
            if cell.get("all_monitored") is False:
                text += " MISSED"
            cells.append(text)
        rows2.append([r["call"], *cells, r_text(r["broker_over_lwc_mon"])])
    blocks.append(Block("refmon: us per call, x: over native", heads2, rows2,
                        set(heads2[1:]), [f"{PUBLISHED}: {s['published_note']}",
                                          *not_ok_notes(s)]))
    return blocks


def refmon_text(s: Mapping, doc: Mapping) -> str:
    out = text_of(refmon_blocks(s))
    return out + ("\n" + claims.text(s["claims"]) if s.get("claims") else "")


def refmon_md(s: Mapping, doc: Mapping) -> str:
    out = markdown_of("Reference monitors (refmon)", refmon_blocks(s))
    return out + ("\n" + claims.markdown(s["claims"]) if s.get("claims") else "")


def refmon_plots(s: Mapping, doc: Mapping) -> list:
    title = "Reference monitors: seconds per 10,000 calls"
    if not s["rows"]:
        return [plots.Plot("refmon", title, None, "No refmon results in this run.")]
    plt = plots.pyplot()
    cfgs = s["configs"]
    colours = plots.colours(cfgs)
    fig, ax = plt.subplots(figsize=(11, 5))
    width = 0.8 / max(len(cfgs), 1)
    for j, c in enumerate(cfgs):
        xs, vals, lo, hi = [], [], [], []
        for i, r in enumerate(s["rows"]):
            q = (r["cells"].get(c) or {}).get("seconds")
            if not q or not q.get("value"):
                continue
            iv = q.get("interval") or [q["value"], q["value"]]
            xs.append(i + (j - (len(cfgs) - 1) / 2) * width)
            vals.append(q["value"])
            lo.append(q["value"] - iv[0])
            hi.append(iv[1] - q["value"])
        ax.bar(xs, vals, width, yerr=[lo, hi], color=colours[c], capsize=2, label=c)
    ax.set_xticks(range(len(s["rows"])))
    ax.set_xticklabels([r["call"] for r in s["rows"]])
    ax.set_yscale("log")
    ax.set_ylabel("seconds per 10,000 calls, log scale")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=3)
    ax.set_title(f"{title} (run {doc['run']['run_id']}); inline gives no isolation", fontsize=10)
    fig.tight_layout()
    return [plots.Plot("refmon", title, fig, "", "Each bar: the median of 10,000-call samples, "
                       "with its 95% interval over repetitions.")]


# ---- lwc-sign ----

def sign_blocks(s: Mapping) -> list[Block]:
    rows = [[r["variant"], r["key_in"] or "-", q_text(r["per_second"]),
             q_text(r["per_signature"]), f"{num(r['verified'])}"] for r in s["rows"]]
    over = s["lwc_over_in_process"]
    notes = [f"lwc / in-process (time per signature): {r_text(over)}", INTERVAL_NOTE]
    pub = s["published"]
    if len(pub) == 2:
        notes.append(f"{PUBLISHED}: {pub[0]['text']} s vs {pub[1]['text']} s for 10,000 TLS "
                     f"handshakes (x{table.fmt_ratio(s['published_ratio'])}); "
                     f"{_pub_ref(pub[0])}; {s['published_caveat']}")
    notes += not_ok_notes(s)
    return [Block("lwc-sign: Ed25519 signatures with the key in this process and only in a "
                  "restricted context", ("variant", "key in", "signatures/s [95%]",
                                         "us/signature [95%]", "verified"), rows,
                  {"signatures/s [95%]", "us/signature [95%]", "verified"}, notes)]


def sign_text(s: Mapping, doc: Mapping) -> str:
    return text_of(sign_blocks(s))


def sign_md(s: Mapping, doc: Mapping) -> str:
    return markdown_of("A key in a context (lwc-sign)", sign_blocks(s))
