"""How the oslat section (analysis/families/oslat.py) is shown: SEIMI's tables with
our none, each confinement and its slowdown as columns, and SEIMI's
published native and SEIMI figures beside them; one slowdown plot per
table and a heat map of slowdown (primitive x confinement).  Every number
comes from the section; nothing here computes."""

from __future__ import annotations

from typing import Mapping, Sequence

from ..kit import table
from ..kit.plots import PALETTE, Plot, pyplot

PUBLISHED_HEADERS = ("pub. native us", "pub. SEIMI us", "pub. x")
# LMbench's context-switch time of a ctx row under none (switch_us: the raw
# hop less the overhead cell's), the figure SEIMI's Table IV prints: the
# published columns stand beside it, not beside the raw hop.
SWITCH_HEADER = "none ctx-switch us"
SWITCH_NOTE = ("ctx-switch: LMbench's context-switch time, the raw hop less the pipe and "
               "working-set overhead (the ctx ... overhead row), which is what SEIMI's "
               "Table IV prints; the raw hop is the us column")


def _has_switch(t: Mapping) -> bool:
    return any((r["cells"].get("none") or {}).get("switch_us") is not None for r in t["rows"])


def _switch_text(r: Mapping) -> str:
    v = (r["cells"].get("none") or {}).get("switch_us")
    return "-" if v is None else _us(v)
METHOD_NOTE = ("x none: slowdown, the cell's headline over none's in the same row and run "
               "(1 = no cost); averages over SEIMI's columns (marked *) that every "
               "confinement of the table has (rows: how many of the averaged rows): {ours}, with its 95% "
               "interval over repetitions; SEIMI's "
               "own averages are a {theirs}, shown under that name only.  pub.: SEIMI's "
               "figures, {note}.")


def _us(v) -> str:
    return table.fmt_num(v)


def _cell_text(cell: Mapping | None, with_interval: bool = False) -> str:
    if not cell:
        return "-"
    if cell["status"] != "ok":
        return cell["status"].upper()
    if "mb_s" in cell:
        # A bandwidth row: MB/s (MB = 10^6 bytes), "-" where it has none,
        # with its 95% interval over repetitions where asked.
        if cell["mb_s"] is None:
            return "-"
        text = table.fmt_num(cell["mb_s"])
        iv = cell.get("interval_mb_s")
        if with_interval:
            text += (f" [{table.fmt_num(iv[0])}..{table.fmt_num(iv[1])}]" if iv
                     else " (no interval)")
        return text
    if cell.get("us") is not None:
        return _us(cell["us"])
    return f"{table.fmt_num(cell['value'])} {cell['unit']}"


def _unit(t: Mapping) -> str:
    """What a table's entries are in: us per operation, or MB/s."""
    return "MB/s" if t.get("bandwidth") else "us"


def headers(t: Mapping, cols: Sequence[str] | None = None, published: bool = True) -> list[str]:
    out = ["row"]
    for col in t["columns"] if cols is None else cols:
        out.append(f"{col} {_unit(t)}")
        if col != "none":
            out.append("x none")
    if _has_switch(t):
        out.append(SWITCH_HEADER)
    if published and t["has_published"]:
        out += PUBLISHED_HEADERS
    return out


def rows(t: Mapping, with_interval: bool = False, cols: Sequence[str] | None = None,
         published: bool = True) -> list[list[str]]:
    out = []
    for r in t["rows"]:
        line = [("* " if r["averaged"] else "  ") + r["label"]]
        for col in t["columns"] if cols is None else cols:
            cell = r["cells"].get(col)
            line.append(_cell_text(cell, with_interval))
            if col != "none":
                line.append(table.fmt_ratio_record((cell or {}).get("slowdown"), with_interval))
        if _has_switch(t):
            line.append(_switch_text(r))
        if published and t["has_published"]:
            p = r["published"] or {}
            line += [p.get("native_text") or "-", p.get("seimi_text") or "-", table.fmt_ratio_record(
                {"value": p["slowdown"]} if p.get("slowdown") else None)]
        out.append(line)
    return out


def _average_text(a: Mapping | None, n: bool = False) -> str:
    """An average of slowdowns with its interval over repetitions,
    "1.24 [0.92..1.68]", and (n) the rows it runs over, " n=7/8"."""
    g = (a or {}).get("geomean_ratio")
    if not g:
        return "-"
    text = table.fmt_ratio_record(g)
    if not g.get("interval"):
        text += " (no interval)"
    return text + (f" n={a['n']}/{a['of']}" if n else "")


def _shared_text(t: Mapping) -> str:
    """How many of the averaged rows every confinement's average runs over."""
    ns = {a["n"] for a in t["averages"].values() if a and a.get("geomean_ratio")}
    of = next((a["of"] for a in t["averages"].values() if a), 0)
    return f"{ns.pop()}/{of} rows" if len(ns) == 1 else "n rows"


def average_rows(t: Mapping, cols: Sequence[str] | None = None,
                 published: bool = True) -> list[list[str]]:
    """Two lines under a table: the geometric mean of ratios, and SEIMI's
    method (where SEIMI printed such an average), ours and published.  None
    under the bandwidths, which have no SEIMI columns to average."""
    if t.get("bandwidth"):
        return []
    width = len(headers(t, cols, published))
    ours = [f"average: geomean of ratios [95%], {_shared_text(t)}"]
    own = ["  over each one's own rows"]
    theirs = ["SEIMI's method: geomean of % overheads"]
    for col in t["columns"] if cols is None else cols:
        ours.append("")
        own.append("")
        theirs.append("")
        if col == "none":
            continue
        a = t["averages"].get(col) or {}
        ours.append(_average_text(a))
        own.append(_average_text(a.get("own"), n=True) if a.get("own") else "")
        s = a.get("seimi_method")
        theirs.append("-" if s is None else ("undefined" if s["value_pct"] is None
                                             else f"{s['value_pct']:.1f}%"))
    pub = t.get("published_average")
    if _has_switch(t):
        ours.append("")
        own.append("")
        theirs.append("")
    if published and t["has_published"]:
        ours += ["", "", table.fmt_ratio(pub["geomean_ratio"]["value"]) if pub else "-"]
        text = "-"
        if pub and pub["seimi_method_pct"] is not None:
            text = f"{pub['seimi_method_pct']:.2f}%"
            if pub.get("printed"):
                text += f" (printed {pub['printed']['value_pct']:g}%)"
        theirs += ["", "", text]
    out = [ours[:width]]
    if any(c for c in own[1:]):
        out.append(own[:width])
    if any(c not in ("", "-") for c in theirs[1:]):
        out.append(theirs[:width])
    return out


def _place(t: Mapping) -> str:
    return f", {t['placement']}" if t["placement"] not in ("same-cpu", "None") else ""


def _title(t: Mapping) -> str:
    if t.get("bandwidth"):
        return f"oslat: {t['title']}{_place(t)} ({t['lmbench']}) [MB/s]"
    return (f"oslat: SEIMI {t['title']}{_place(t)} (LMbench {t['lmbench']}) "
            "[us per operation]")


def _fs_lines(section: Mapping) -> list[str]:
    """Where the rows that touch a file ran: filesystem and directory."""
    out = []
    for f in section.get("filesystems") or ():
        dirs = f.get("dirs") or []
        where = (f" in {dirs[0]}" + (f" and {len(dirs) - 1} more test directories"
                                     if len(dirs) > 1 else "")) if dirs else ""
        kinds = list(dict.fromkeys(row.split()[0] for row in f["rows"]))
        out.append(f"filesystem: {f['fs_type']}{where}: the {', '.join(kinds)} rows "
                   "(SEIMI's Table V names none)")
    return out


def _notes(section: Mapping) -> list[str]:
    out = []
    for t in section["tables"]:
        for r in t["rows"]:
            for col, cell in r["cells"].items():
                if cell["status"] != "ok":
                    out.append(f"{cell['status']}: {r['label']} under {col}: {cell['reason']}")
                elif (cell.get("slowdown") or {}).get("note") and col != "none":
                    pass  # the per-ratio notes say only "too few repetitions": see check
    for n in section["notes"]:
        out.append(f"{n['status']}: {n['where']}: {n['reason']}")
    return list(dict.fromkeys(out))


def _undefined(section: Mapping) -> list[str]:
    out = []
    for t in section["tables"]:
        for col, a in t["averages"].items():
            s = (a or {}).get("seimi_method")
            if s and s["value_pct"] is None:
                out.append(f"Table {t['table']} {col}: SEIMI's method {s['undefined']}")
    return out


# The console's table of one SEIMI table (compact()): a row per cell, none's
# time, and per confinement its slowdown only, the variants of one
# confinement (seccomp-allow:1, seccomp-allow:300) a column group under its
# name; SEIMI's published slowdown last.  Times under each confinement and
# every interval: summary.md, or `show --wide`.
PUBLISHED_GROUP = "SEIMI (pub.)"


def _split(col: str) -> tuple[str, str]:
    """("seccomp-allow", "300") for seccomp-allow:300; (C, "x none") for C."""
    name, _, variant = col.partition(":")
    return name, variant or "x none"


def _seimi_cell(a: Mapping) -> str:
    s = a.get("seimi_method")
    if s is None:
        return "-"
    return "undef" if s["value_pct"] is None else f"{s['value_pct']:.1f}%"


def compact(t: Mapping, width: int = table.WIDTH) -> str:
    """One SEIMI table on the console, its column groups folded into blocks
    of at most `width` columns, each repeating the rows and none."""
    cols = [c for c in t["columns"] if c != "none"]
    has_none = "none" in t["columns"]
    pub = t["has_published"]
    sw = has_none and _has_switch(t)
    heads = (["row"] + ([_unit(t)] if has_none else []) + (["ctx-switch"] if sw else [])
             + [_split(c)[1] for c in cols])
    names = ([""] + (["none"] if has_none else []) + (["none"] if sw else [])
             + [_split(c)[0] for c in cols])
    if pub:
        heads.append("x")
        names.append(PUBLISHED_GROUP)
    body = []
    for r in t["rows"]:
        line = [("* " if r["averaged"] else "  ") + r["label"]]
        if has_none:
            line.append(_cell_text(r["cells"].get("none")))
        if sw:
            line.append(_switch_text(r))
        for c in cols:
            cell = r["cells"].get(c)
            line.append(table.fmt_ratio_record(cell.get("slowdown"), False)
                        if cell and cell["status"] == "ok" else _cell_text(cell))
        if pub:
            p = r["published"] or {}
            line.append(table.fmt_ratio(p["slowdown"]) if p.get("slowdown") else "-")
        body.append(line)
    averages = [t["averages"].get(c) or {} for c in cols]
    pa = t.get("published_average")
    lead = ([""] if has_none else []) + ([""] if sw else [])
    if t.get("bandwidth"):
        return table.fold(heads, body, width=width, keep=1 + len(lead), groups=names,
                          right_all=True)
    body.append([f"average, {_shared_text(t)}"] + lead
                + [table.fmt_ratio_record((a.get("geomean_ratio") or None), False)
                   for a in averages]
                + ([table.fmt_ratio(pa["geomean_ratio"]["value"]) if pa else "-"] if pub else []))
    if any(a.get("own") for a in averages):
        # A confinement with rows of its own beyond the shared ones: its
        # average over all of them, with its n (not comparable across).
        body.append(["  own rows"] + lead + [
            (table.fmt_ratio_record(a["own"].get("geomean_ratio"), False)
             + f" n={a['own']['n']}") if a.get("own") and a["own"].get("geomean_ratio")
            else "" for a in averages] + ([""] if pub else []))
    if any(a.get("seimi_method") for a in averages) or (pa and pub):
        body.append(["SEIMI's method"] + lead + [_seimi_cell(a) for a in averages]
                    + ([f"{pa['seimi_method_pct']:.1f}%" if pa and pa["seimi_method_pct"]
                        is not None else "-"] if pub else []))
    return table.fold(heads, body, width=width, keep=1 + len(lead), groups=names,
                      right_all=True, drop_empty=True)


def _interval_note(t: Mapping) -> str:
    """The averages' 95% intervals and SEIMI's printed averages, under the table."""
    # A confinement's variants under its name once: "seccomp-allow 1
    # 1.04..1.26, 300 0.989..1.06; ptrace 3.54..3.77".
    groups: dict[str, list[str]] = {}
    for c in t["columns"]:
        g = ((t["averages"].get(c) or {}).get("geomean_ratio")) or {}
        iv = g.get("interval")
        if iv and c != "none":
            name, _, variant = c.partition(":")
            span = f"{table.fmt_sig(iv['low'])}..{table.fmt_sig(iv['high'])}"
            groups.setdefault(name, []).append(f"{variant} {span}" if variant else span)
    parts = [f"{name} {', '.join(v)}" for name, v in groups.items()]
    text = ("average's 95% interval: " + "; ".join(parts) + ".") if parts else ""
    pa = t.get("published_average")
    if pa and pa.get("printed") and t["has_published"]:
        text += f" SEIMI printed {pa['printed']['value_pct']:g}%."
    return text.strip()


BANDWIDTH_NOTE = ("MB/s (MB = 10^6 bytes): bytes one pass moved over the headline time of a "
                  "pass; x none: the "
                  "confinement's time over none's, so none's MB/s over the confinement's; "
                  "95% intervals: summary.md.")


def _undefined_text(section: Mapping) -> str:
    """Where SEIMI's method is undefined (a zero or negative overhead), in one note."""
    per: dict[str, list[str]] = {}
    for t in section["tables"]:
        for col, a in t["averages"].items():
            s = (a or {}).get("seimi_method")
            if s and s["value_pct"] is None:
                per.setdefault(f"Table {t['table']}", []).append(col)
    if not per:
        return ""
    return ("undef: SEIMI's method is undefined where an overhead is zero or negative "
            "(summary.md says which): " + "; ".join(f"{k} {', '.join(v)}"
                                                    for k, v in per.items()) + ".")


TEXT_NOTE = ("us: none's time per operation; under each confinement, its slowdown x none: the "
             "cell's headline over none's, same row and run (1 = no cost). *: SEIMI's rows, "
             "averaged (geometric mean of the ratios over the rows every confinement has). "
             "SEIMI's method: {theirs}. {pub}: {note}. Times per confinement: --wide, or "
             "summary.md.")


def text(section: Mapping, doc: Mapping) -> str:
    out = []
    for t in section["tables"]:
        out.append(table.wrap(_title(t)))
        out.append(compact(t))
        note = BANDWIDTH_NOTE if t.get("bandwidth") else _interval_note(t)
        if note:
            out.append(table.wrap(note))
        if _has_switch(t):
            out.append(table.wrap(SWITCH_NOTE + "."))
        out.append("")
    out.append(table.wrap(TEXT_NOTE.format(theirs=section["seimi_method"], pub=PUBLISHED_GROUP,
                                           note=section["published_note"]), indent=""))
    if _undefined_text(section):
        # The cells say where (summary.md lists them): one line here.
        out.append(table.wrap("undef: SEIMI's method is undefined where an overhead is zero or "
                              "negative (the cells marked undef; summary.md lists them)."))
    for line in _fs_lines(section) + _notes(section):
        out.append(table.wrap(line))
    return "\n".join(out)


def markdown(section: Mapping, doc: Mapping) -> str:
    out = ["## OS latencies under confinements (SEIMI's Tables IV, V, VI, III)", "",
           METHOD_NOTE.format(ours=section["our_method"], theirs=section["seimi_method"],
                              note=section["published_note"]), ""]
    for c in section["columns"]:
        if c["threat"]:
            out.append(f"- **{c['label']}**: {c['threat']}")
    out.append("")
    for t in section["tables"]:
        out += [f"### {_title(t)}", "",
                table.md_table(headers(t), rows(t, with_interval=True) + average_rows(t)), ""]
        if _has_switch(t):
            out += [f"_{SWITCH_NOTE}; pub.: beside {SWITCH_HEADER}._", ""]
        if t.get("bandwidth"):
            out += [BANDWIDTH_NOTE, ""]
    extra = _fs_lines(section) + _undefined(section) + _notes(section)
    if extra:
        out += [f"- {line}" for line in extra] + [""]
    return "\n".join(out)


# ---- plots ----

def _colours(names: Sequence[str]) -> dict[str, object]:
    # In the order given (none first), from the report's colour-blind-safe palette.
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}


MARKERS = "osD^v<>pX*h"


def table_plot(section: Mapping, doc: Mapping, t: Mapping):
    name = f"oslat-table-{t['table'].lower()}" + (
        f"-{t['placement']}" if t["placement"] not in ("same-cpu", "None") else "")
    title = (f"{'' if t.get('bandwidth') else 'SEIMI '}{t['title']}{_place(t)}: "
             "slowdown under each confinement")
    cols = [c for c in t["columns"] if c != "none"]
    rows = [r for r in t["rows"] if any((r["cells"].get(c) or {}).get("slowdown") for c in cols)]
    if not rows:
        return Plot(name, title, None, f"No confinement beside none in Table {t['table']}, so "
                    "its slowdown plot is left out (`isobench run oslat --confine ...`).")
    plt = pyplot()
    colours = _colours(cols)
    fig, ax = plt.subplots(figsize=(max(7.0, 0.55 * len(rows) + 3), 5.2))
    xs = list(range(len(rows)))
    for k, col in enumerate(cols):
        off = (k - (len(cols) - 1) / 2) * 0.6 / max(len(cols), 1)
        pts = [(x + off, (r["cells"].get(col) or {}).get("slowdown")) for x, r in zip(xs, rows)]
        pts = [(x, s) for x, s in pts if s]
        if not pts:
            continue
        y = [s["value"] for _, s in pts]
        lo = [s["value"] - s["interval"]["low"] if s.get("interval") else 0 for _, s in pts]
        hi = [s["interval"]["high"] - s["value"] if s.get("interval") else 0 for _, s in pts]
        ax.errorbar([x for x, _ in pts], y, yerr=[lo, hi], fmt=MARKERS[k % len(MARKERS)],
                    ms=6, capsize=2, lw=1, color=colours[col], label=col)
    pub = [(x, r["published"]["slowdown"]) for x, r in zip(xs, rows)
           if r["published"] and r["published"].get("slowdown")]
    if pub:
        ax.plot([x for x, _ in pub], [v for _, v in pub], "D", ms=8, mfc="none", mec="black",
                label="published: SEIMI / native (other hardware)")
    ax.axhline(1.0, color="black", lw=1)
    ax.set_yscale("log")
    # The axis follows the markers: with few repetitions an interval can
    # span decades, and would flatten every marker onto the line at 1.
    marks = [s["value"] for r in rows for c in cols
             if (s := (r["cells"].get(c) or {}).get("slowdown"))] + [v for _, v in pub]
    ax.set_ylim(min(min(marks), 1.0) / 2.5, max(max(marks), 1.0) * 2.5)
    ax.set_xticks(xs)
    ax.set_xticklabels([("* " if r["averaged"] else "") + r["label"] for r in rows],
                       rotation=40, ha="right", fontsize=8)
    ax.set_ylabel("slowdown: headline / none's headline (log scale)")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(f"{title} (run {doc['run']['run_id']})\n1 = as fast as none; bars: 95% "
                 "interval over repetitions (cut at the axis); * SEIMI's columns", fontsize=10)
    fig.tight_layout()
    return Plot(name, title, fig, "", "Each marker is one confinement's headline over none's "
                "headline for the same cell in the same run; hollow diamonds are SEIMI's "
                "published slowdown (SEIMI over native Linux, other hardware).")


def heatmap(section: Mapping, doc: Mapping):
    title = "oslat: slowdown per primitive and confinement"
    cols = [c["label"] for c in section["columns"] if c["label"] != "none"]
    rows = [(t, r) for t in section["tables"] for r in t["rows"] if r["averaged"]
            or r["table"] == "III"]
    rows = [(t, r) for t, r in rows if any((r["cells"].get(c) or {}).get("slowdown")
                                           for c in cols)]
    if not cols or not rows:
        return Plot("oslat-heatmap", title, None, "No confinement beside none in this run, so "
                    "the slowdown heat map is left out.")
    plt = pyplot()
    from matplotlib.colors import LogNorm
    grid = [[((r["cells"].get(c) or {}).get("slowdown") or {}).get("value", float("nan"))
             for c in cols] for _, r in rows]
    present = [v for line in grid for v in line if v == v and v > 0]
    # A log scale symmetric about 1, so that twice as slow and twice as fast
    # are equally far from white.
    span = max(max(present, default=2.0), 1.0 / min(present, default=0.5), 1.1)
    # Constrained layout makes room for the long row labels, which
    # tight_layout cuts at the left edge beside a colour bar.
    fig, ax = plt.subplots(figsize=(5.5 + 1.3 * len(cols), 1.8 + 0.28 * len(rows)),
                           layout="constrained")
    cmap = plt.get_cmap("RdBu_r").with_extremes(bad="#dddddd")
    im = ax.imshow(grid, aspect="auto", cmap=cmap, norm=LogNorm(1.0 / span, span))
    for i, (_, r) in enumerate(rows):
        for j, c in enumerate(cols):
            s = (r["cells"].get(c) or {}).get("slowdown")
            # White on the darkest cells, black elsewhere.
            dark = bool(s) and (s["value"] > span ** 0.6 or s["value"] < span ** -0.6)
            ax.text(j, i, table.fmt_ratio(s["value"]) if s else "-", ha="center",
                    va="center", fontsize=7, color="white" if dark else "black")
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels(cols, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{t['table']}: {r['label']}" for t, r in rows], fontsize=7)
    bar = fig.colorbar(im, ax=ax, fraction=0.06, pad=0.03)
    bar.set_label("slowdown (log scale); 1 = as fast as none")
    ax.set_title(f"{title} (run {doc['run']['run_id']})\ncell text: headline / none's headline; "
                 "grey: not measured", fontsize=10)
    return Plot("oslat-heatmap", title, fig, "", "SEIMI's columns and Table III's operations, "
                "each confinement's slowdown against none in the same run.")


def plots(section: Mapping, doc: Mapping) -> list:
    return [*(table_plot(section, doc, t) for t in section["tables"]), heatmap(section, doc)]
