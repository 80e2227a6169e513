"""The look of every plot and what plots share: Plot, the palette, axes,
literal text, saving, and the raw samples of one configuration
(`isobench plot`, the report's samples overview).  Plots are drawn from a
run's summary document (never part of measuring, and computing no
statistic: every value drawn is in the document); the report's own plots
are figures.py's, the families' are in render/families/.

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

import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Mapping, Sequence

from ...analysis.kit import units
from ...analysis.kit.runs import BASELINE
from ...errors import UsageError
from . import table

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


def log_unit(configs: Sequence[Mapping]) -> tuple[str, float | None]:
    """For a log axis: ("ns", 1.0) where every config converts (the ticks
    then name their unit, log_time_axis), else the counter unit."""
    if configs and all(c["headline"].get("ns") is not None for c in configs):
        return "ns", 1.0
    return axis_unit(configs)


def benchmark_configs(doc: Mapping, benchmark: str) -> list[dict]:
    return [c for c in doc["configs"] if c["benchmark"] == benchmark
            and c["headline"]["value"] is not None]


def axis_unit(configs: Sequence[Mapping]) -> tuple[str, float | None]:
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


def error_bar(v, lo, hi):
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


def legend_below(fig, ax, ncol: int) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if labels:
        fig.legend(handles, labels, loc="lower center", ncol=ncol, frameon=False,
                   handlelength=2.2, columnspacing=1.2)


def skipped_by_mechanism(doc: Mapping, benchmark: str) -> dict[str, list[Mapping]]:
    """The skipped or failed results of a benchmark, by mechanism."""
    out: dict[str, list[Mapping]] = {}
    for r in doc["results"]:
        if r["benchmark"] == benchmark and r["status"] != "ok":
            out.setdefault(r["mechanism"], []).append(r)
    return out


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
