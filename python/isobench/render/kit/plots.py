"""The report's plots, drawn from a run's summary document (never part of
measuring, and computing no statistic: every value drawn is in the
document).

Each plot function takes the document and a width in inches and returns a
Plot: a matplotlib figure, or None with a note saying why the plot is left
out (e.g. the run has no kv results).  The report draws every plot twice:
at a paper's double-column width (WIDTHS["2col"], 7 in: PNG, SVG, PDF) and
at its single-column width (3.5 in: PDF).  matplotlib is imported here
only, with the Agg backend, so that no other command pays for it or needs
a display.

The shared look, which benchmark families' plots (render/sections.py) use
through the helpers below rather than styling their own:

- style(i) / styles(names): a colour of the Okabe-Ito palette (told apart
  with every common colour-vision deficiency) together with a marker and a
  line style, so that series stay apart printed in grey;
- paper_rc(width): font sizes for the width (8 pt at 3.5 in, 9 pt at 7 in);
- time_axis(values_ns): the unit a time axis reads best in (ns, µs, ms, s);
- errorbars drawn for every interval; skipped configurations marked;
- no run id in any title: the caption (Plot.caption, written beside the
  plot as NAME.caption.txt by the report) names the run and the machine.

Conventions: the headline value of each configuration (summary.py:
per-call median or batched estimate) with its 95% interval over
repetitions; times in ns (or the axis's unit) where the unit converts,
core cycles stay cycles; log scales where values span orders of magnitude;
published figures hollow and labelled "published".
"""

from __future__ import annotations

import inspect
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Mapping, Sequence

from ...analysis.kit import units
from ...analysis.kit.runs import BASELINE, server_label

# Figure widths in inches: a two-column paper's full text width and one
# column of it (ACM, IEEE and USENIX templates are all close to these).
WIDTHS = {"2col": 7.0, "1col": 3.5}
DPI = 200  # PNG resolution: a 7 in figure is 1400 pixels wide

# Okabe & Ito (2008), "Color Universal Design": distinguishable with every
# common colour-vision deficiency.  Eight colours are all a palette can
# offer that stays safe, so a series is told apart by three channels:
# colour, marker shape (each of matplotlib's 15 filled markers once before
# any repeats) and fill with line style: the first eight series filled on
# a solid line, the next eight hollow on a dashed one, so two series of
# one colour never look alike, in colour or printed in grey.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
           "#F0E442")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">", "p", "d", "H", "8")
LINESTYLES = ("-", "--", ":", "-.")
GREY = "#808080"       # a reference program (memcached) or a skipped row
PUBLISHED = "#CC79A7"  # published figures: hollow markers in this colour


@dataclass
class Plot:
    name: str
    title: str
    figure: object | None
    note: str
    caption: str = ""


_DOLLAR = re.compile(r"(?<!\\)\$")


def literal(text) -> str:
    """text as matplotlib prints it literally: every '$' escaped, so that a
    name with two of them (an imported mechanism or parameter: `$x^{$`) is
    not read as a mathtext formula, which fails the whole plot or typesets
    the name.  No label of isobench's own is a formula."""
    return _DOLLAR.sub(r"\\$", str(text))


def literal_doc(value):
    """A (summary) document with literal() over every string in it, keys
    included.  Only the containers that hold a '$' are copied: everything
    else (every name isobench gives, objects of any kind) is the same object,
    so comparisons with names and attribute access still hold."""
    if isinstance(value, str):
        return literal(value) if "$" in value else value
    if isinstance(value, Mapping):
        items = [(literal_doc(k), literal_doc(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items())):
            return value
        return dict(items)
    if isinstance(value, (list, tuple)):
        items = [literal_doc(v) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        if isinstance(value, list):
            return items
        return type(value)._make(items) if hasattr(value, "_make") else tuple(items)
    return value


def literal_texts(fig) -> None:
    """literal() over every text of a figure (titles, axis labels, legends,
    annotations) and every tick label set from data (the mechanism and
    parameter rows, whichever formatter holds them); save() calls it, so
    that every plot of every family (render/sections.py) is covered.  Tick
    labels of numeric axes come from formatters at draw time and keep their
    own formulas (log axes write 10^k as mathtext)."""
    from matplotlib.text import Text
    from matplotlib.ticker import FixedFormatter, FuncFormatter
    for t in fig.findobj(Text):
        text = t.get_text()
        if "$" in text:
            t.set_text(literal(text))
    for ax in fig.get_axes():
        for axis in (ax.xaxis, ax.yaxis):
            for fmt in (axis.get_major_formatter(), axis.get_minor_formatter()):
                if isinstance(fmt, FixedFormatter):
                    fmt.seq = [literal(x) for x in fmt.seq]
                elif isinstance(fmt, FuncFormatter) and not getattr(fmt, "_literal", False):
                    # set_ticks(labels=...) and set_ticklabels() keep the
                    # labels in a FuncFormatter (matplotlib >= 3.8); ours
                    # (time_label, size_label) print no '$'.
                    fmt.func = lambda x, pos=None, f=fmt.func: literal(f(x, pos))
                    fmt._literal = True


def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


# ---- the shared look ----

def style(i: int) -> dict:
    """The i-th series' colour, marker, fill and line style (matplotlib
    keywords): the (colour, marker, fill, line) of the first 16 series are
    all different, and so are their (colour, marker) pairs; the colour
    cycles every 8, the marker every 15, fill and line every 8."""
    lap = i // len(PALETTE)
    colour = PALETTE[i % len(PALETTE)]
    return {"color": colour, "marker": MARKERS[i % len(MARKERS)],
            "markerfacecolor": colour if lap % 2 == 0 else "white",
            "markeredgecolor": colour, "linestyle": LINESTYLES[lap % len(LINESTYLES)]}


def styles(names: Sequence[str]) -> dict[str, dict]:
    """A stable style per name (the same name gets the same style in every
    plot of a report: sorted order, direct first)."""
    order = sorted(set(names), key=lambda n: (n != BASELINE, n))
    return {n: style(i) for i, n in enumerate(order)}


def colours(names: Sequence[str]) -> dict[str, str]:
    """A colour of PALETTE per name, in sorted order, for plots whose series
    are not mechanisms (heap sizes, confinements, chain variants); beyond
    eight names the colours repeat, so such plots also vary marker or line."""
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(sorted(set(names)))}


def band(ax, x, lo, hi, colour) -> None:
    """A shaded interval around a curve, where at least two points have one."""
    pts = [(a, b, c) for a, b, c in zip(x, lo, hi) if b is not None and c is not None and b > 0]
    if len(pts) >= 2:
        ax.fill_between([p[0] for p in pts], [p[1] for p in pts], [p[2] for p in pts],
                        color=colour, alpha=0.15, lw=0)


def mechanism_styles(doc: Mapping) -> dict[str, dict]:
    """styles() over every mechanism of the run, whichever benchmark measured
    it: a mechanism keeps its colour, marker and line from plot to plot of
    one report, also where a plot leaves some out (direct in an overhead
    plot)."""
    return styles([c["mechanism"] for c in doc["configs"] if c.get("mechanism")])


@contextmanager
def paper_rc(width: float) -> Iterator[None]:
    """Font sizes a paper prints legibly at this width."""
    plt = pyplot()
    small = width <= WIDTHS["1col"]
    with plt.rc_context({"font.size": 7 if small else 8.5, "axes.titlesize": 7.5 if small else 9,
                         "axes.labelsize": 7 if small else 8.5,
                         "xtick.labelsize": 6.5 if small else 8,
                         "ytick.labelsize": 6.5 if small else 8,
                         "legend.fontsize": 6 if small else 7.5, "lines.linewidth": 1.0,
                         "lines.markersize": 3.5 if small else 4.5, "pdf.fonttype": 42,
                         "svg.fonttype": "none", "axes.grid": True, "grid.alpha": 0.3}):
        yield


def time_axis(values_ns: Sequence[float | None]) -> tuple[str, float]:
    """(unit, ns per unit) for an axis of these times: the unit in which
    their median is at least 1 (ns, µs, ms or s)."""
    vals = sorted(v for v in values_ns if v is not None and v > 0)
    mid = vals[len(vals) // 2] if vals else 1.0
    for name, div in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if mid >= div:
            return name, div
    return "ns", 1.0


def time_label(ns: float, _pos=None) -> str:
    """A tick of a time axis in ns, in its own unit: "100 ns", "1 µs", "10 ms"."""
    for name, div in (("s", 1e9), ("ms", 1e6), ("µs", 1e3), ("ns", 1.0)):
        if ns >= div or name == "ns":
            return f"{ns / div:g} {name}"
    return f"{ns:g}"


def log_time_axis(ax, which: str = "x") -> None:
    """A log axis of times in ns, labelled per decade in its own unit (a
    switch plot spans 0.1 ns to 100 µs: no single unit reads well)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    axis.set_major_locator(LogLocator(base=10))
    axis.set_major_formatter(FuncFormatter(time_label))
    axis.set_minor_formatter(NullFormatter())


def _log_unit(configs: Sequence[Mapping]) -> tuple[str, float | None]:
    """For a log axis: ("ns", 1.0) where every config converts (the ticks
    then name their unit, log_time_axis), else the counter unit."""
    if configs and all(c["headline"].get("ns") is not None for c in configs):
        return "ns", 1.0
    return _axis_unit(configs)


def _configs(doc: Mapping, benchmark: str) -> list[dict]:
    return [c for c in doc["configs"] if c["benchmark"] == benchmark
            and c["headline"]["value"] is not None]


def _axis_unit(configs: Sequence[Mapping]) -> tuple[str, float | None]:
    """(axis unit, ns per axis unit) when every config converts to ns, else
    (the counter unit, None): values are then drawn as measured."""
    if configs and all(c["headline"].get("ns") is not None for c in configs):
        return time_axis([c["headline"]["ns"] for c in configs])
    return "/".join(sorted({c["unit"] or "?" for c in configs})), None


def value_of(c: Mapping, div: float | None) -> tuple[float | None, float | None, float | None]:
    """(value, low, high) of c's headline in the axis unit (div: ns per axis
    unit; None: the counter's own unit)."""
    h = c["headline"]
    if div is None:
        iv = h.get("interval") or {}
        return h["value"], iv.get("low"), iv.get("high")
    lo, hi = h.get("interval_ns") or (None, None)
    return units.scale([h.get("ns"), lo, hi], 1.0 / div)


def _xerr(v, lo, hi):
    """An errorbar's extent, or None where there is no interval to draw."""
    if v is None or lo is None or hi is None or lo <= 0:
        return None
    return [[max(v - lo, 0.0)], [max(hi - v, 0.0)]]


def size_label(b: float, _pos=None) -> str:
    for unit, div in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= div:
            return f"{b / div:g} {unit}"
    return f"{b:g} B"


def ratio_label(v: float, _pos=None) -> str:
    return f"{v:g}x"


def _legend_below(fig, ax, ncol: int) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if labels:
        fig.legend(handles, labels, loc="lower center", ncol=ncol, frameon=False,
                   handlelength=2.2, columnspacing=1.2)


def _skipped(doc: Mapping, benchmark: str) -> dict[str, list[Mapping]]:
    """The skipped or failed results of a benchmark, by mechanism."""
    out: dict[str, list[Mapping]] = {}
    for r in doc["results"]:
        if r["benchmark"] == benchmark and r["status"] != "ok":
            out.setdefault(r["mechanism"], []).append(r)
    return out


# ---- switch cost per mechanism ----

def row_label(mech: str, variant: str | None) -> str:
    if mech == BASELINE:
        return f"direct ({variant or 'entry'}{': baseline' if variant in (None, 'entry') else ''})"
    return mech if variant in (None, "entry") else f"{mech} ({variant})"


def _published_points(doc: Mapping, rows, unit: str, div: float | None):
    """Published figures that match a same-cpu row: (row, value, source),
    where their unit converts to the axis's."""
    out = []
    axis = "ns" if div is not None else unit
    for ref in doc["published"]:
        if ref["local_benchmark"] != "switch":
            continue
        value = units.convert(ref["value"], ref["unit"], axis)
        if value is None:
            continue
        if div is not None:
            value /= div
        for c in ref["local"]:
            key = (c["mechanism"], c["params"].get("variant"))
            if c["placement"] in (None, "same-cpu") and key in rows:
                out.append((rows.index(key), value, ref["source"]))
    return list(dict.fromkeys(out))


PLACEMENT_STYLE = {"same-cpu": dict(fmt="o", mfc=PALETTE[0], mec=PALETTE[0], color=PALETTE[0]),
                   "cross-cpu": dict(fmt="s", mfc="white", mec=PALETTE[1], color=PALETTE[1]),
                   "unpinned": dict(fmt="^", mfc="white", mec=PALETTE[2], color=PALETTE[2])}
PLACEMENT_TEXT = {"same-cpu": "same CPU (or one context)", "cross-cpu": "across CPUs",
                  "unpinned": "unpinned"}
PLACEMENT_SHORT = {"same-cpu": "same CPU", "cross-cpu": "across CPUs", "unpinned": "unpinned"}


def _cost_order(configs: Sequence[Mapping], keys) -> list:
    """keys ordered by their cheapest same-cpu (else any) payload-0 headline."""
    cost: dict = {}
    for c in configs:
        key = (c["mechanism"], c["params"].get("variant"))
        if key not in keys:
            continue
        v = c["headline"].get("ns") or c["headline"]["value"]
        same = (c["params"].get("placement") or "same-cpu") == "same-cpu"
        prev = cost.get(key, (False, float("inf")))
        cost[key] = min(prev, (not same, v))
    return sorted(keys, key=lambda k: (cost.get(k, (True, float("inf"))), k[0], str(k[1])))


def _switch_rows(ax, configs, rows, div, skipped_rows=(), short=False) -> None:
    seen = set()
    for c in configs:
        key = (c["mechanism"], c["params"].get("variant"))
        if key not in rows:
            continue
        place = c["params"].get("placement") or "same-cpu"
        v, lo, hi = value_of(c, div)
        if v is None:
            continue
        st = PLACEMENT_STYLE.get(place, PLACEMENT_STYLE["unpinned"])
        label = (PLACEMENT_SHORT if short else PLACEMENT_TEXT).get(place, place)
        ax.errorbar([v], [rows.index(key)], xerr=_xerr(v, lo, hi), elinewidth=0.8, capsize=2,
                    label=label if label not in seen else None, **st)
        seen.add(label)
    for i in skipped_rows:
        ax.text(0.01, i, "skipped here", transform=ax.get_yaxis_transform(), va="center",
                color=GREY, fontstyle="italic")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([row_label(*r) for r in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.grid(False, axis="y")


def switch_plot(doc: Mapping, width: float = WIDTHS["2col"]) -> Plot:
    """Round trip at payload 0, one row per mechanism ordered by cost, same
    and cross CPU apart; direct's variants in a small panel of their own."""
    configs = [c for c in _configs(doc, "switch") if c["params"].get("payload", 0) == 0]
    title = "Switch cost per mechanism"
    if not configs:
        return Plot("switch", title, None, "No switch results in this run, so this plot is "
                    "left out (`isobench run switch`).")
    plt = pyplot()
    unit, div = _log_unit(configs)
    mech_keys = {(c["mechanism"], c["params"].get("variant")) for c in configs
                 if c["mechanism"] != BASELINE or c["params"].get("variant") in (None, "entry")}
    direct_keys = {(c["mechanism"], c["params"].get("variant")) for c in configs
                   if c["mechanism"] == BASELINE}
    rows = _cost_order(configs, mech_keys)
    skipped = [m for m, rs in _skipped(doc, "switch").items()
               if not any(k[0] == m for k in rows)]
    skipped_rows = list(range(len(rows), len(rows) + len(skipped)))
    rows += [(m, None) for m in skipped]
    drows = _cost_order(configs, direct_keys)
    narrow = width <= WIDTHS["1col"]
    with paper_rc(width):
        row_h = 0.16 if narrow else 0.2
        heights = [max(len(rows), 1) * row_h + 0.3, max(len(drows), 1) * row_h + 0.3]
        legend_h = 0.55 if narrow else 0.35
        fig, (ax, axd) = plt.subplots(2, 1, sharex=True, figsize=(
            width, sum(heights) + 0.55 + legend_h), gridspec_kw={"height_ratios": heights})
        _switch_rows(ax, configs, rows, div, skipped_rows, short=narrow)
        for i, v, src in _published_points(doc, rows, unit, div):
            ax.plot([v], [i], "D", mfc="none", mec=PUBLISHED, color=PUBLISHED, ms=5,
                    label="published" if narrow else "published (other hardware)")
        _switch_rows(axd, configs, drows, div, short=narrow)
        axd.set_title("direct and its variants (no isolation)" if narrow else
                      "direct: the plain call and its variants (no isolation)", loc="left")
        if div is not None:
            log_time_axis(ax)
            axd.set_xlabel("round trip per call, log scale; bars: 95% interval")
        else:
            ax.set_xscale("log")
            axd.set_xlabel(f"round trip per call [{unit}], log scale; bars: 95% interval")
        handles, labels = ax.get_legend_handles_labels()
        keep = dict(zip(labels, handles))
        fig.legend(list(keep.values()), list(keep), loc="lower center", ncol=3, frameon=False,
                   columnspacing=1.0, handletextpad=0.4)
        fig.tight_layout(rect=(0, legend_h / fig.get_figheight(), 1, 1))
    return Plot("switch", title, fig, "", "Round trip into the compartment and back with no "
                "payload, one row per mechanism, cheapest first; filled circles same CPU (or "
                "one execution context), hollow squares across CPUs. Each marker is the "
                "configuration's headline (per-call median, or the batched estimate for "
                "regions too short for the median) and its bar the 95% interval over "
                "repetitions. The lower panel holds direct's variants: the baseline (entry) "
                "and the plain calls a compiler makes. Hollow diamonds are published figures "
                "measured elsewhere, drawn only where their unit converts; they are not local "
                "results.")


# ---- switch cost against payload ----

def payload_plot(doc: Mapping, width: float = WIDTHS["2col"]) -> Plot:
    """What moving data across the boundary costs: round-trip time against
    payload size, same-cpu (or one context), one line per mechanism.  Shared
    memory mechanisms stay flat; copying ones (wasm) and the checksum grow."""
    configs = [c for c in _configs(doc, "switch") if c["params"].get("variant") == "entry"
               and "payload" in c["params"]
               and c["params"].get("placement") in ("same-cpu", None)]
    title = "Switch cost against payload size"
    if not configs:
        return Plot("switch-payload", title, None, "No switch results in this run, so this "
                    "plot is left out (`isobench run switch` measures them).")
    plt = pyplot()
    unit, div = _log_unit(configs)
    by: dict[str, list[Mapping]] = {}
    for c in configs:
        by.setdefault(c["mechanism"], []).append(c)
    look = {m: st for m, st in mechanism_styles(doc).items() if m in by}
    order = sorted(by, key=lambda m: (m != BASELINE, min(value_of(c, div)[0] or 0 for c in by[m])))
    with paper_rc(width):
        fig, ax = plt.subplots(figsize=(width, width * 0.62 + 0.25 * ((len(by) + 3) // 4)))
        for mech in order:
            cs = sorted(by[mech], key=lambda c: c["params"]["payload"])
            x = [max(c["params"]["payload"], 1) for c in cs]
            vals = [value_of(c, div) for c in cs]
            lo = [max(v - l, 0) if v is not None and l is not None else 0 for v, l, _ in vals]
            hi = [max(h - v, 0) if v is not None and h is not None else 0 for v, _, h in vals]
            ax.errorbar(x, [v[0] for v in vals], yerr=[lo, hi], capsize=2, label=mech,
                        lw=1.8 if mech == BASELINE else 1.0, **look[mech])
        ax.set_xscale("log", base=2)
        if div is not None:
            log_time_axis(ax, "y")
        else:
            ax.set_yscale("log")
        ticks = sorted({max(c["params"]["payload"], 1) for c in configs})
        ax.set_xticks(ticks)
        ax.set_xticklabels([size_label(t if t > 1 else 0) for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel("payload written by the caller, read inside")
        ax.set_ylabel("round trip, log scale" if div is not None else
                      f"round trip [{unit}], log scale")
        _legend_below(fig, ax, 4 if width > WIDTHS["1col"] else 3)
        rows = -(-len(by) // (4 if width > WIDTHS["1col"] else 3))
        fig.tight_layout(rect=(0, (0.12 + 0.16 * rows) / fig.get_figheight(), 1, 1))
    return Plot("switch-payload", title, fig, "", "Round trip with the payload written into "
                "the shared buffer and checksummed inside the compartment, same CPU (or one "
                "context); each point is the configuration's headline with its 95% interval "
                "over repetitions (0 B drawn at 1 B on the log axis).")


# ---- key-value store: time per request against data size ----

def _kv_get_configs(doc: Mapping) -> list[Mapping]:
    return [c for c in _configs(doc, "kv") if c["headline_phase"]
            and "data_bytes" in c["params"]]


def _kv_series(configs: Sequence[Mapping]) -> dict[tuple[str, str], list[Mapping]]:
    series: dict[tuple[str, str], list[Mapping]] = {}
    for c in configs:
        series.setdefault((c["mechanism"], c["params"].get("placement") or "same-cpu"),
                          []).append(c)
    for s in series.values():
        s.sort(key=lambda c: c["params"]["data_bytes"])
    return series


def _kv_skipped_sizes(doc: Mapping) -> dict[tuple[str, str], list[int]]:
    """(mechanism, placement) -> the data sizes that were skipped or failed."""
    out: dict[tuple[str, str], set[int]] = {}
    for mech, rs in _skipped(doc, "kv").items():
        for r in rs:
            p = r.get("params") or {}
            if isinstance(p.get("data_bytes"), int):
                out.setdefault((mech, p.get("placement") or "same-cpu"), set()).add(p["data_bytes"])
    return {k: sorted(v) for k, v in out.items()}


def _kv_axes(ax) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=4))
    ax.xaxis.set_major_formatter(FuncFormatter(size_label))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("data in the store (log scale)")


def _series_cost(cs: Sequence[Mapping]) -> float:
    """A series' cost for ordering: its first point's ratio to direct, else
    its headline (ns where it converts)."""
    c = cs[0]
    if c.get("ratio"):
        return c["ratio"]["value"]
    h = c["headline"]
    return h["ns"] if h.get("ns") is not None else h["value"]


def _kv_figure(doc, width, configs, draw_series, ylabel, title_of):
    """Shared frame of the kv plots: one panel per placement, side by side at
    the double-column width and stacked at the single-column one; a legend
    below; skipped sizes marked on the bottom edge with "x"."""
    plt = pyplot()
    series = _kv_series(configs)
    places = sorted({p for _, p in series}, key=lambda p: (p != "same-cpu", p))
    look = {m: st for m, st in mechanism_styles(doc).items() if m in {m for m, _ in series}}
    skipped = _kv_skipped_sizes(doc)
    narrow = width <= WIDTHS["1col"]
    n = len(places)
    shape = (n, 1) if narrow else (1, n)
    panel_h = width * (0.62 if narrow or n == 1 else 0.45)
    legend_rows = -(-len(look) // (3 if narrow else 5))
    fig_h = (panel_h * (n if narrow else 1)) + 0.3 + 0.16 * legend_rows
    fig, axes = plt.subplots(*shape, figsize=(width, fig_h), sharey=True, squeeze=False)
    axes = [a for row in axes for a in row]
    for ax, place in zip(axes, places):
        # Cheapest first (at the smallest data size), so the legend reads
        # in the order of cost.
        for (mech, p), cs in sorted(series.items(), key=lambda kv: (
                kv[0][0] != BASELINE, _series_cost(kv[1]), kv[0][0])):
            if p == place:
                draw_series(ax, mech, cs, look[mech])
        for k, (mech_p, sizes) in enumerate(sorted(skipped.items())):
            mech, p = mech_p
            if p != place or mech not in look:
                continue
            ax.plot(sizes, [0.03 + 0.03 * (k % 4)] * len(sizes), "x", ms=4,
                    color=look[mech]["color"], transform=ax.get_xaxis_transform(),
                    clip_on=False)
        _kv_axes(ax)
        ax.set_title(title_of(place), loc="left")
    axes[0].set_ylabel(ylabel)
    handles, labels = {}, []
    for ax in axes:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in handles:
                handles[l] = h
                labels.append(l)
    fig.legend([handles[l] for l in labels], labels, loc="lower center",
               ncol=3 if narrow else 5, frameon=False, handlelength=2.2)
    fig.tight_layout(rect=(0, (0.12 + 0.16 * legend_rows) / fig_h, 1, 1))
    return fig


def _skip_note(doc: Mapping) -> str:
    skipped = _kv_skipped_sizes(doc)
    if not skipped:
        return ""
    parts = [f"{m} ({p}) from {size_label(sizes[0])}" for (m, p), sizes in sorted(skipped.items())]
    return (" An x on the bottom edge marks a data size that was skipped or failed: "
            + "; ".join(parts) + " (the run's notes say why).")


def kv_plot(doc: Mapping, width: float = WIDTHS["2col"]) -> Plot:
    configs = _kv_get_configs(doc)
    title = "Key-value store: time per request against data size"
    if not configs:
        return Plot("kv", title, None, "No kv results in this run, so this plot is left out "
                    "(`isobench run kv` measures them).")
    unit, div = _log_unit(configs)

    def draw(ax, mech, cs, st):
        x = [c["params"]["data_bytes"] for c in cs]
        vals = [value_of(c, div) for c in cs]
        lo = [max(v - l, 0) if v is not None and l is not None else 0 for v, l, _ in vals]
        hi = [max(h - v, 0) if v is not None and h is not None else 0 for v, _, h in vals]
        ax.errorbar(x, [v[0] for v in vals], yerr=[lo, hi], capsize=2, label=mech,
                    lw=1.8 if mech == BASELINE else 1.0, **st)
        if div is not None:
            log_time_axis(ax, "y")
        else:
            ax.set_yscale("log")

    with paper_rc(width):
        fig = _kv_figure(doc, width, configs, draw,
                         "time per get, log scale" if div is not None else
                         f"time per get [{unit}], log scale",
                         lambda p: PLACEMENT_TEXT.get(p, p))
    return Plot("kv", title, fig, "", "Seeded random gets of 64-byte entries from a store "
                "inside the compartment, against the data it holds; each point is the "
                "configuration's headline with its 95% interval over repetitions."
                + _skip_note(doc))


def kv_overhead_plot(doc: Mapping, width: float = WIDTHS["2col"]) -> Plot:
    configs = [c for c in _kv_get_configs(doc) if c["ratio"] is not None
               and c["mechanism"] != BASELINE]
    title = "Key-value store: overhead relative to direct against data size"
    if not configs:
        return Plot("kv-overhead", title, None, "No kv results with a direct baseline in this "
                    "run, so this plot is left out (`isobench run kv` measures them).")
    ratios = [c["ratio"]["value"] for c in configs]
    log = max(ratios) / max(min(ratios), 1e-9) > 8

    def draw(ax, mech, cs, st):
        from matplotlib.ticker import FuncFormatter, NullFormatter
        x = [c["params"]["data_bytes"] for c in cs]
        v = [c["ratio"]["value"] for c in cs]
        ivs = [c["ratio"].get("interval") or {} for c in cs]
        lo = [max(a - iv["low"], 0) if iv.get("low") is not None else 0 for a, iv in zip(v, ivs)]
        hi = [max(iv["high"] - a, 0) if iv.get("high") is not None else 0
              for a, iv in zip(v, ivs)]
        ax.errorbar(x, v, yerr=[lo, hi], capsize=2, label=mech, **st)
        # A ratio whose interval holds 1 shows no difference from direct:
        # its marker gets a grey ring, whichever side of 1 it is (hollow
        # markers already tell the second eight series apart).
        same = [(xx, vv) for xx, vv, c in zip(x, v, cs) if _kv_reading(doc, c) == "same"]
        if same:
            ax.plot([p[0] for p in same], [p[1] for p in same], linestyle="none",
                    marker="o", mfc="none", mec=GREY, mew=0.8,
                    markersize=pyplot().rcParams["lines.markersize"] * 2.2, zorder=1)
        ax.axhline(1.0, color="black", lw=0.8)
        if log:
            ax.set_yscale("log")
            ax.yaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_major_formatter(FuncFormatter(ratio_label))

    jumps = baseline_jumps(doc)
    with paper_rc(width):
        fig = _kv_figure(doc, width, configs, draw,
                         "ratio to direct" + (", log scale" if log else ""),
                         lambda p: PLACEMENT_TEXT.get(p, p))
        places = sorted({c["params"].get("placement") or "same-cpu" for c in configs},
                        key=lambda p: (p != "same-cpu", p))
        for ax, place in zip(fig.axes, places):
            _mark_jumps(ax, jumps.get(place, ()), width <= WIDTHS["1col"])
    section = (doc.get("sections") or {}).get("kv") or {}
    quant = ""
    if section.get("any_quantized"):
        steps = ", ".join(f"{x:g} {u or ''}".rstrip() for x, u in section["counter_steps"])
        quant = (f" Medians read on a counter of step {steps}: one step on each side moves "
                 f"these ratios by up to {100 * section['largest_resolution_rel']:.2g}% "
                 "(kv.tex marks each such ratio).")
    return Plot("kv-overhead", title, fig, "", "Time per get relative to direct at the same "
                "data size (1x: no overhead; overhead = ratio - 1), with the ratio's 95% "
                "interval over repetitions (Welch t on the logs). A grey ring: the "
                "interval includes 1, so no difference from direct is shown (below 1 it is "
                "not faster)." + _jump_note(jumps) + quant + _skip_note(doc))


# Where direct itself gets slower by at least this factor from one data size
# to the next (and the two intervals are apart), every ratio to it drops
# there for that reason alone: the overhead plot says so.
BASELINE_JUMP = 1.4


def baseline_jumps(doc: Mapping) -> dict[str, list[tuple[int, float]]]:
    """Per placement, the kv data sizes at which direct's own time per get
    grows by BASELINE_JUMP or more over the previous size, with the factor,
    where their intervals do not overlap (a jump, not noise)."""
    out: dict[str, list[tuple[int, float]]] = {}
    for (mech, place), cs in _kv_series(_kv_get_configs(doc)).items():
        if mech != BASELINE:
            continue
        for a, b in zip(cs, cs[1:]):
            va, lo_a, hi_a = value_of(a, None)
            vb, lo_b, hi_b = value_of(b, None)
            if not va or not vb or vb / va < BASELINE_JUMP:
                continue
            if hi_a is not None and lo_b is not None and lo_b <= hi_a:
                continue
            out.setdefault(place, []).append((b["params"]["data_bytes"], vb / va))
    return out


def _mark_jumps(ax, jumps, narrow: bool) -> None:
    """A dotted vertical at each size where direct itself jumps, labelled."""
    from matplotlib.transforms import blended_transform_factory
    where = blended_transform_factory(ax.transData, ax.transAxes)
    for size, factor in jumps:
        ax.axvline(size, color=GREY, ls=":", lw=1.0, zorder=0)
        ax.text(size, 0.985, f"direct\nitself\n×{factor:.2g}", transform=where, ha="center",
                va="top", fontsize=5.5 if narrow else 6.5, color="#444444",
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85},
                zorder=6)


def _jump_note(jumps: Mapping[str, Sequence[tuple[int, float]]]) -> str:
    if not jumps:
        return ""
    parts = [f"{size_label(s)} ({f:.2g}x{'' if len(jumps) == 1 else ', ' + p})"
             for p, js in sorted(jumps.items()) for s, f in js]
    return (" Dotted verticals: direct itself gets slower there, by the factor given over "
            "the previous size (" + ", ".join(parts) + "); every ratio to direct falls "
            "there because its denominator grows, not because the mechanism gets cheaper.")


def _kv_reading(doc: Mapping, c: Mapping) -> str | None:
    """"same" where the kv section reads c's ratio as no difference from
    direct (its interval holds 1)."""
    section = (doc.get("sections") or {}).get("kv") or {}
    place = c["params"].get("placement") or "same-cpu"
    for row in section.get("rows", ()):
        if row["mechanism"] == c["mechanism"] and row["placement"] == place and all(
                c["params"].get(k) == v for k, v in row["params"].items()):
            r = (row["cells"].get(str(c["params"]["data_bytes"])) or {}).get("ratio") or {}
            return "same" if r.get("includes_one") else None
    return None


# ---- key-value server beside memcached ----

def kv_server_plot(doc: Mapping, width: float = WIDTHS["2col"]) -> Plot:
    configs = _configs(doc, "kv-server")
    title = "Key-value server: throughput and latency beside memcached"
    if not configs:
        return Plot("kv-server", title, None, "No kv-server results in this run, so the "
                    "server plot (throughput and latency beside memcached) is left out.")
    plt = pyplot()
    unit, div = _axis_unit(configs)
    if div is not None and unit == "ns":
        unit, div = "µs", 1e3  # request latencies read in µs
    # memcached (the reference) first, then the servers cheapest first.
    configs = sorted(configs, key=lambda c: (c["role"] != "reference",
                                             value_of(c, div)[0] or float("inf"),
                                             server_label(c["mechanism"])))
    labels = [server_label(c["mechanism"]) for c in configs]
    colours = [GREY if c["role"] == "reference" else PALETTE[0] for c in configs]
    hatches = ["//" if c["role"] == "reference" else "" for c in configs]
    with paper_rc(width):
        narrow = width <= WIDTHS["1col"]
        # Side by side at the double-column width; stacked at the single-
        # column one, where two panels in a row leave their labels no room.
        panel_h = 0.6 + 0.22 * len(configs)
        fig, (ax_t, ax_l) = plt.subplots(*((2, 1) if narrow else (1, 2)), sharey=True,
                                         figsize=(width, 2 * panel_h + 0.1 if narrow
                                                  else panel_h))
        ys = list(range(len(configs)))
        tput = [(c["kv_server"]["ops_per_s"] or 0) / 1e3 for c in configs]
        ax_t.barh(ys, tput, color=colours, hatch=hatches, edgecolor="black", lw=0.5)
        ax_t.set_xlabel("throughput [1000 requests/s]")
        ax_t.set_title("throughput (higher is better)", loc="left")
        if not any(tput):
            ax_t.text(0.5, 0.5, "no throughput recorded", transform=ax_t.transAxes,
                      ha="center")
        vals = [value_of(c, div) for c in configs]
        med = [v[0] or 0 for v in vals]
        lo = [m - v[1] if v[1] is not None else 0 for m, v in zip(med, vals)]
        hi = [v[2] - m if v[2] is not None else 0 for m, v in zip(med, vals)]
        # Linear from zero: bar lengths must be proportional to the values.
        ax_l.barh(ys, med, xerr=[lo, hi], color=colours, hatch=hatches, edgecolor="black",
                  lw=0.5, capsize=2)
        ax_l.set_xlabel(f"latency per request [{unit}], bars: 95% interval")
        ax_l.set_title("latency (lower is better)", loc="left")
        ax_t.set_yticks(ys)
        ax_t.set_yticklabels(labels)
        ax_t.invert_yaxis()
        if narrow:
            ax_l.tick_params(labelleft=True)
        for a in (ax_t, ax_l):
            a.grid(True, axis="x", alpha=0.3)
            a.grid(False, axis="y")
        fig.tight_layout()
    return Plot("kv-server", title, fig, "", "isob serve over each mechanism and memcached "
                "itself (grey, hatched: the reference) under the same memcaslap load; "
                "latency is the headline per request with its 95% interval over "
                "repetitions.")


PLOTS = (switch_plot, payload_plot, kv_plot, kv_overhead_plot, kv_server_plot)


# ---- the raw samples of one configuration ----

def config_text(c: Mapping) -> str:
    """A configuration as `isobench plot --config` takes it: benchmark,
    mechanism and every param as k=v, sorted."""
    return " ".join([c["benchmark"], c["mechanism"],
                     *(f"{k}={v}" for k, v in sorted(c["params"].items()))])


def find_config(doc: Mapping, label: str) -> Mapping:
    """The one configuration of doc that label names: words without "=" are
    the benchmark, then the mechanism; each k=v must match a param.  Where
    several match, the one with exactly these params, else UsageError with
    what tells them apart."""
    from ...errors import UsageError
    words = label.split()
    names = [w for w in words if "=" not in w]
    want = dict(w.split("=", 1) for w in words if "=" in w)
    if not names or len(names) > 2:
        raise UsageError(f"--config {label!r}: give the benchmark, the mechanism and params "
                         "as k=v, e.g. 'switch thread payload=0 placement=same-cpu'")
    hits = [c for c in doc["configs"] if c["benchmark"] == names[0]
            and (len(names) < 2 or c["mechanism"] == names[1])
            and all(str(c["params"].get(k, "")) == v for k, v in want.items())]
    run = doc["run"]["run_id"]
    if not hits:
        benches = sorted({c["benchmark"] for c in doc["configs"]})
        mechs = sorted({c["mechanism"] for c in doc["configs"] if c["benchmark"] == names[0]})
        hint = (f"its mechanisms: {', '.join(mechs)}" if mechs else
                f"its benchmarks: {', '.join(benches) or 'none'}")
        raise UsageError(f"--config {label!r} matches no configuration of run {run} ({hint}; "
                         "the report's full results list every one)")
    exact = [c for c in hits if len(names) == 2 and {k: str(v) for k, v in
                                                      c["params"].items()} == want]
    if len(hits) == 1 or len(exact) == 1:
        return (exact or hits)[0]
    def order(v: str):
        return (0, float(v), v) if v.lstrip("-").replace(".", "", 1).isdigit() else (1, 0, v)
    differ = {k: sorted({str(c["params"].get(k, "-")) for c in hits}, key=order)
              for k in sorted({k for c in hits for k in c["params"]})}
    apart = "; ".join(f"{k}: {'|'.join(v)}" for k, v in differ.items() if len(v) > 1)
    raise UsageError(f"--config {label!r} matches {len(hits)} configurations of run {run}; "
                     f"add the mechanism or params to pick one ({apart})")


def _ecdf_points(xs, most: int = 1024):
    """(x, F(x)) of an ECDF drawn as steps, through at most `most` order
    statistics (evenly spaced in rank, both extremes kept): exact where the
    sample is smaller, within 1/most in F otherwise."""
    import numpy as np
    xs = np.asarray(xs, dtype=float)
    n = len(xs)
    idx = np.unique(np.linspace(0, n - 1, min(n, most)).round().astype(int))
    return xs[idx], (idx + 1) / n


def config_samples(data) -> dict[tuple, list[tuple[int, Sequence[float]]]]:
    """A loaded run's (runs.RunData) raw primary samples per configuration
    key: (repetition, sorted samples) for each repetition, in order."""
    return {tuple(cfg.key): sorted(((r["repetition"], cfg.rep_samples.get(r["result_id"], ()))
                                    for r in cfg.results), key=lambda t: t[0])
            for cfg in data.configs}


def samples_overview(doc: Mapping, samples: Mapping[tuple, Sequence], benchmark: str,
                     width: float = WIDTHS["2col"]) -> Plot:
    """The pooled samples of every configuration of one benchmark (its
    headline phase) as ECDFs: one panel per mechanism (and variant), one
    curve per data size or payload (colour) and placement (line), each
    with its headline as a dot on the curve, so a headline away from the
    body of its samples shows at a glance.  Each panel has its own log
    x-axis.  `isobench plot` draws one configuration in full."""
    import numpy as np
    from . import table
    # Names from outside printed literally (literal_doc), the samples found
    # under the same escaped keys.
    doc, benchmark = literal_doc(doc), literal(benchmark)
    samples = {tuple(literal_doc(list(k))): v for k, v in samples.items()}
    configs = [c for c in doc["configs"] if c["benchmark"] == benchmark and c["headline_phase"]
               and any(len(x) for _, x in samples.get(tuple(c["key"]), ()))]
    name, title = f"samples-{benchmark}", f"{benchmark}: distribution of the raw samples"
    if not configs:
        return Plot(name, title, None, f"No stored samples of {benchmark} in this run, so its "
                    "distribution plot is left out.")
    plt = pyplot()
    panels: dict[str, list[Mapping]] = {}
    for c in table.ordered(configs):
        panels.setdefault(table.config_label(c, set(table.common_params(configs))),
                          []).append(c)
    size_of: dict[str, float] = {}
    for c in configs:
        n = next((c["params"][k] for k in table.SIZE_PARAMS if k in c["params"]), 0)
        size_of.setdefault(table.size_text(c["params"]), n if isinstance(n, (int, float)) else 0)
    sizes = sorted(size_of, key=lambda t: size_of[t])
    colour = {t: PALETTE[i % len(PALETTE)] for i, t in enumerate(sizes)}
    places = sorted({c["params"].get("placement") or "same-cpu" for c in configs},
                    key=lambda p: (p != "same-cpu", p))
    line = {p: LINESTYLES[i % len(LINESTYLES)] for i, p in enumerate(places)}
    ncol = 4
    nrow = -(-len(panels) // ncol)
    with paper_rc(width):
        fig, axes = plt.subplots(nrow, ncol, figsize=(width, 1.35 * nrow + 0.6), squeeze=False)
        flat = [a for row in axes for a in row]
        for ax, (label, cs) in zip(flat, panels.items()):
            view = [float("inf"), 0.0]  # p0.5..p99.5 of each curve, and each headline
            for c in cs:
                reps = samples[tuple(c["key"])]
                h = c["headline"]
                per = h["ns"] / h["value"] if h.get("ns") is not None and h.get("value") else 1.0
                pooled = np.sort(np.concatenate([np.asarray(x, float) for _, x in reps
                                                 if len(x)])) * per
                pooled = pooled[pooled > 0]
                if not len(pooled):
                    continue
                x, f = _ecdf_points(pooled, 256)
                lo, hi = np.percentile(pooled, [0.5, 99.5])
                view = [min(view[0], lo), max(view[1], hi)]
                st = {"color": colour[table.size_text(c["params"])],
                      "linestyle": line[c["params"].get("placement") or "same-cpu"]}
                ax.step(x, f, where="post", lw=0.9, **st)
                if h.get("value"):
                    v = h["value"] * per
                    view = [min(view[0], v), max(view[1], v)]
                    ax.plot([v], [np.searchsorted(pooled, v, side="right") / len(pooled)],
                            "o", ms=3, color=st["color"], mec="black", mew=0.4, zorder=5)
            _samples_axis(ax, configs)
            if 0 < view[0] < view[1]:
                ax.set_xlim(view[0] / 1.3, view[1] * 1.3)
            ax.set_title(label, loc="left", fontsize=7)
            ax.set_ylim(0, 1.02)
            ax.tick_params(labelsize=6)
        for ax in flat[len(panels):]:
            ax.set_visible(False)
        from matplotlib.lines import Line2D
        handles = [Line2D([], [], color=colour[t], label=t) for t in sizes if t != "-"]
        if len(places) > 1:  # one placement: every line is solid, nothing to tell apart
            handles += [Line2D([], [], color=GREY, linestyle=line[p], label=p) for p in places]
        handles.append(Line2D([], [], marker="o", color="grey", mec="black", linestyle="none",
                              label="headline"))
        fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6),
                   frameon=False, fontsize=6.5)
        fig.tight_layout(rect=(0, 0.45 / fig.get_figheight(), 1, 1))
    return Plot(name, title, fig, "", f"Every stored per-call sample of each {benchmark} "
                "configuration, pooled over its repetitions, as an ECDF (fraction of samples "
                "at most x, on a log axis of its own per panel" + (", in ns" if all(
                    c["headline"].get("ns") is not None for c in configs) else "")
                + ", showing p0.5..p99.5 of its curves); the dot is the configuration's headline. A dot off its curve's body is a "
                "batched estimate below the per-call samples (which carry the measured "
                "region's own overhead) or a headline of repetitions that disagree. `isobench "
                "plot RUN --config ...` draws one configuration per repetition, with a "
                "histogram.")


def _samples_axis(ax, configs) -> None:
    """A log x-axis of samples: labelled per decade, in its own time unit
    where the samples convert to ns, else as plain numbers."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, numticks=4))
    ax.xaxis.set_major_formatter(FuncFormatter(
        time_label if all(c["headline"].get("ns") is not None for c in configs)
        else (lambda v, _pos=None: f"{v:g}")))
    ax.xaxis.set_minor_formatter(NullFormatter())


def samples_plot(c: Mapping, reps: Sequence[tuple[int, Sequence[float]]],
                 width: float = WIDTHS["2col"]) -> Plot:
    """The raw per-call samples of one configuration (pyperf's `hist` and
    criterion's densities are the models): left, the ECDF of each
    repetition (a fresh process) and of all pooled; right, a histogram of
    the pooled samples.  The headline, its 95% interval, and the pooled
    p5..p95 are drawn on both, so a headline outside its own samples'
    spread (a batched estimate of a region shorter than the counter's
    overhead) shows.  reps: (repetition, sorted samples) per repetition."""
    import numpy as np
    c = literal_doc(c)  # names from outside printed literally
    title = f"Samples of {config_text(c)}"
    reps = [(k, np.asarray(xs, dtype=float)) for k, xs in reps if len(xs)]
    if not reps:
        return Plot("samples", title, None, "This configuration has no stored samples (imported "
                    "without them, or every repetition failed), so there is nothing to draw.")
    plt = pyplot()
    h = c["headline"]
    # Samples are in the counter's unit; drawn in ns where the headline converts.
    per = h["ns"] / h["value"] if h.get("ns") is not None and h.get("value") else None
    scale = per if per is not None else 1.0
    pooled = np.sort(np.concatenate([xs for _, xs in reps])) * scale
    unit = "ns" if per is not None else (c["unit"] or "counter units")
    lo_p, hi_p = np.percentile(pooled, [5, 95])
    h_lo, h_hi = ((h.get("interval") or {}).get(k) for k in ("low", "high"))
    marks = [v * scale for v in (h.get("value"), h_lo, h_hi) if v is not None]
    # The axes show p0.5..p99.5 of the samples and the headline with its
    # interval; the caption gives the extremes beyond (one stray sample
    # would otherwise squeeze the body of the distribution into a line).
    view = (min([np.percentile(pooled, 0.5), *marks]), max([np.percentile(pooled, 99.5), *marks]))
    if view[1] <= view[0]:
        view = (view[0] - 1, view[0] + 1)
    log = view[0] > 0 and view[1] / view[0] > 20
    with paper_rc(width):
        fig, (ax_e, ax_h) = plt.subplots(1, 2, figsize=(width, width * 0.42))
        for i, (k, xs) in enumerate(reps):
            x, f = _ecdf_points(xs * scale)
            ax_e.step(x, f, where="post", color=PALETTE[i % len(PALETTE)], lw=0.8,
                      alpha=0.8, label=f"repetition {k} (n={len(xs):,})")
        x, f = _ecdf_points(pooled)
        ax_e.step(x, f, where="post", color="black", lw=1.6, label=f"pooled (n={len(pooled):,})")
        ax_e.set_ylabel("fraction of samples at most x (ECDF)")
        ax_e.set_ylim(0, 1.02)
        bins = np.geomspace(*view, 61) if log else np.linspace(*view, 61)
        ax_h.hist(pooled, bins=bins, color=PALETTE[5], edgecolor="white", lw=0.3)
        ax_h.set_ylabel("samples per bin")
        value = h["value"] * scale if h.get("value") is not None else None
        iv = h.get("interval") or {}
        for ax in (ax_e, ax_h):
            if log:
                ax.set_xscale("log")
            pad = (view[1] / view[0]) ** 0.03 if log else (view[1] - view[0]) * 0.03
            ax.set_xlim(*((view[0] / pad, view[1] * pad) if log else
                          (view[0] - pad, view[1] + pad)))
            ax.set_xlabel(f"per-call sample [{unit}]" + (", log scale" if log else ""))
            ax.axvspan(lo_p, hi_p, color=GREY, alpha=0.12, lw=0,
                       label="p5..p95 of the samples" if ax is ax_e else None)
            if value is not None:
                if iv.get("low") is not None and iv.get("high") is not None:
                    ax.axvspan(iv["low"] * scale, iv["high"] * scale, color=PALETTE[1],
                               alpha=0.25, lw=0, label="headline's 95% interval"
                               if ax is ax_e else None)
                ax.axvline(value, color=PALETTE[1], lw=1.4, label=f"headline ({h['source']})"
                           if ax is ax_e else None)
        ax_e.legend(loc="best", frameon=True, framealpha=0.9)
        outside = value is not None and not lo_p <= value <= hi_p
        if outside:
            ax_h.set_title("headline outside the samples' p5..p95", loc="left",
                           color=PALETTE[1])
        fig.tight_layout()
    beyond = int(np.sum(pooled < view[0]) + np.sum(pooled > view[1]))
    fmt = (lambda v: f"{v:.4g} {unit}")
    tails = (f" The axes show p0.5..p99.5 of the samples; {beyond:,} lie beyond (min "
             f"{fmt(pooled[0])}, max {fmt(pooled[-1])})." if beyond else "")
    note = (" The headline lies outside p5..p95 of its own samples: it is the batched "
            "estimate (the samples include the measured region's own overhead)."
            if outside and h["source"] == "batched" else
            " The headline lies outside p5..p95 of its own samples." if outside else "")
    return Plot("samples", title, fig, "", f"Every stored per-call sample of {config_text(c)}: "
                "the ECDF of each repetition (a fresh process) and of all pooled, and a "
                "histogram of the pooled samples; the headline (vertical line) with its 95% "
                "interval over repetitions, and the p5..p95 of the samples (grey)." + note
                + tails)


def _section_plots(doc: Mapping, first: bool, width: float) -> list[Plot]:
    """The plots of the sections (render/sections.py) at this width; a
    renderer whose plots take no width draws at its own size."""
    from .. import sections
    out = []
    for _, s, r in sections.each(doc):
        if r.plots is None or r.first != first:
            continue
        takes_width = "width" in inspect.signature(r.plots).parameters
        out += r.plots(s, doc, width=width) if takes_width else r.plots(s, doc)
    return out


def draw(doc: Mapping, width: float = WIDTHS["2col"]) -> list[Plot]:
    """Every plot of the report at this width: the sections' first ones
    (render/sections.py), the run's own, then the sections' others.  Every
    string of the document is literal() first, so that no plot (nor the
    layout, which measures text as it is placed) meets a formula."""
    doc = literal_doc(doc)
    return [*_section_plots(doc, True, width), *(p(doc, width) for p in PLOTS),
            *_section_plots(doc, False, width)]


# How text is written out, set when the file is saved (matplotlib reads
# these at savefig, not when the figure is drawn): PDF fonts embedded as
# TrueType (Type 42), never as Type 3, which paper submission checkers
# reject; SVG text as <text> elements, not glyph outlines, so that it can
# be searched, copied and edited.
SAVE_RC = {"pdf.fonttype": 42, "ps.fonttype": 42, "svg.fonttype": "none"}


def _metadata(ext: str, title: str, about: str | None) -> dict | None:
    """The file's own metadata: its title and, where given, the run it
    shows (about); no creation date in PDF and SVG, so that the same run
    gives the same file."""
    if ext == "pdf":
        return {"Title": title, "CreationDate": None, **({"Subject": about} if about else {})}
    if ext == "svg":
        return {"Title": title, "Date": None, **({"Description": about} if about else {})}
    if ext == "png":
        return {"Title": title, **({"Description": about} if about else {})}
    return None


def save(plot: Plot, out_dir, kinds: Sequence[tuple[str, str]] = (("png", ""), ("svg", "")),
         about: str | None = None) -> list[str]:
    """Write plot into out_dir once per (format, suffix) as NAME{suffix}.{format};
    the file names written.  about: the run it shows, written into each
    file's metadata.  The figure is closed afterwards."""
    if plot.figure is None:
        return []
    literal_texts(plot.figure)
    names = []
    with pyplot().rc_context(SAVE_RC):
        for ext, suffix in kinds:
            name = f"{plot.name}{suffix}.{ext}"
            plot.figure.savefig(out_dir / name, dpi=DPI, format=ext,
                                metadata=_metadata(ext, plot.title, about))
            names.append(name)
    pyplot().close(plot.figure)
    return names
