"""The report's figures: the run's own plots (switch cost per mechanism,
against payload, the key-value store's time per request and overhead
against data size, the key-value server beside memcached) and every plot
of the report in order (draw): the families' first ones (render/sections.py),
the run's own, then the families' others.  The look, the axes and saving
are kit/plots.py's."""

from __future__ import annotations

import inspect
from typing import Mapping, Sequence

from ..analysis.kit import units
from ..analysis.kit.runs import BASELINE, server_label
from . import sections
from .kit.plots import (GREY, PALETTE, PUBLISHED, WIDTHS, Plot, axis_unit, benchmark_configs, colours,
                        error_bar, legend_below, literal_doc, log_time_axis, log_unit,
                        mechanism_styles, paper_rc, pyplot, ratio_label, size_label,
                        skipped_by_mechanism, value_of)


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
        ax.errorbar([v], [rows.index(key)], xerr=error_bar(v, lo, hi), elinewidth=0.8, capsize=2,
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
    configs = [c for c in benchmark_configs(doc, "switch") if c["params"].get("payload", 0) == 0]
    title = "Switch cost per mechanism"
    if not configs:
        return Plot("switch", title, None, "No switch results in this run, so this plot is "
                    "left out (`isobench run switch`).")
    plt = pyplot()
    unit, div = log_unit(configs)
    mech_keys = {(c["mechanism"], c["params"].get("variant")) for c in configs
                 if c["mechanism"] != BASELINE or c["params"].get("variant") in (None, "entry")}
    direct_keys = {(c["mechanism"], c["params"].get("variant")) for c in configs
                   if c["mechanism"] == BASELINE}
    rows = _cost_order(configs, mech_keys)
    skipped = [m for m, rs in skipped_by_mechanism(doc, "switch").items()
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
    configs = [c for c in benchmark_configs(doc, "switch") if c["params"].get("variant") == "entry"
               and "payload" in c["params"]
               and c["params"].get("placement") in ("same-cpu", None)]
    title = "Switch cost against payload size"
    if not configs:
        return Plot("switch-payload", title, None, "No switch results in this run, so this "
                    "plot is left out (`isobench run switch` measures them).")
    plt = pyplot()
    unit, div = log_unit(configs)
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
        legend_below(fig, ax, 4 if width > WIDTHS["1col"] else 3)
        rows = -(-len(by) // (4 if width > WIDTHS["1col"] else 3))
        fig.tight_layout(rect=(0, (0.12 + 0.16 * rows) / fig.get_figheight(), 1, 1))
    return Plot("switch-payload", title, fig, "", "Round trip with the payload written into "
                "the shared buffer and checksummed inside the compartment, same CPU (or one "
                "context); each point is the configuration's headline with its 95% interval "
                "over repetitions (0 B drawn at 1 B on the log axis).")


# ---- key-value store: time per request against data size ----

def _kv_get_configs(doc: Mapping) -> list[Mapping]:
    return [c for c in benchmark_configs(doc, "kv") if c["headline_phase"]
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
    for mech, rs in skipped_by_mechanism(doc, "kv").items():
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
    unit, div = log_unit(configs)

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
    configs = benchmark_configs(doc, "kv-server")
    title = "Key-value server: throughput and latency beside memcached"
    if not configs:
        return Plot("kv-server", title, None, "No kv-server results in this run, so the "
                    "server plot (throughput and latency beside memcached) is left out.")
    plt = pyplot()
    unit, div = axis_unit(configs)
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



def _section_plots(doc: Mapping, first: bool, width: float) -> list[Plot]:
    """The plots of the sections (render/sections.py) at this width; a
    renderer whose plots take no width draws at its own size."""
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
