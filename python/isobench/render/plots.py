"""The report's plots, drawn from a run's summary document (never part of
measuring, and computing no statistic: every value drawn is in the
document).

Each plot function takes the document and returns a Plot: a matplotlib
figure, or None with a note saying why the plot is left out (e.g. the run
has no kv results).  matplotlib is imported here only, with the Agg
backend, so that no other command pays for it or needs a display.

Conventions, the same in every plot: the headline value of each
configuration (summary.py: per-call median or batched estimate) with its
95% interval; times in ns where the unit allows it (TSC ticks converted
with the recorded TSC frequency; core cycles stay cycles), log scales
because mechanisms differ by orders of magnitude, one colour per series,
and published figures drawn hollow and labelled "published".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from ..analysis import units
from ..analysis.runs import BASELINE, server_label

# Vertical offsets of the payload series in the switch plot (row units).
PAYLOAD_OFFSETS = {0: -0.22, 64: 0.0, 4096: 0.22}
PAYLOAD_COLOURS = {0: "#1f77b4", 64: "#ff7f0e", 4096: "#2ca02c"}
SOURCE_MARKERS = {"median": "o", "batched": "s"}
DPI = 110


@dataclass
class Plot:
    name: str
    title: str
    figure: object | None
    note: str
    caption: str = ""


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _unit_of(configs: Sequence[Mapping]) -> tuple[str, bool]:
    """('ns', True) when every config converts to ns, else the common unit."""
    if all(c["to_ns"] is not None for c in configs):
        return "ns", True
    return "/".join(sorted({c["unit"] or "?" for c in configs})), False


def _value(c: Mapping, in_ns: bool) -> tuple[float | None, float | None, float | None]:
    """(value, low, high) of c's headline, in ns when in_ns."""
    h = c["headline"]
    iv = h["interval"]
    lo, hi = (iv["low"], iv["high"]) if iv else (None, None)
    f = c["to_ns"] if in_ns else 1.0
    v, lo, hi = units.scale([h["value"], lo, hi], f)
    return v, lo, hi


def _colours(names: Sequence[str]) -> dict[str, str]:
    plt = _pyplot()
    cmap = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    return {n: cmap(i % cmap.N) for i, n in enumerate(sorted(names))}


def _configs(doc: Mapping, benchmark: str) -> list[dict]:
    return [c for c in doc["configs"] if c["benchmark"] == benchmark
            and c["headline"]["value"] is not None]


# ---- switch cost per mechanism ----

def _switch_rows(configs: Sequence[Mapping]) -> list[tuple[str, str | None]]:
    """(mechanism, variant) rows, cheapest first by their payload-0 headline."""
    rows: dict[tuple[str, str | None], float] = {}
    for c in configs:
        if c["params"].get("payload", 0) != 0:
            continue
        key = (c["mechanism"], c["params"].get("variant"))
        v = c["headline"]["value"]
        rows[key] = min(rows.get(key, v), v)
    for c in configs:  # mechanisms measured only with payloads
        rows.setdefault((c["mechanism"], c["params"].get("variant")), float("inf"))
    return sorted(rows, key=lambda k: (rows[k], k[0], str(k[1])))


def row_label(mech: str, variant: str | None) -> str:
    if mech == BASELINE:
        return f"direct ({variant or 'entry'}{': baseline' if variant in (None, 'entry') else ''})"
    return mech if variant in (None, "entry") else f"{mech} ({variant})"


def _published_points(doc: Mapping, rows, unit: str) -> list[tuple[int, float, str]]:
    """Published figures that match a row of the same-cpu panel: (row, value, source)."""
    out = []
    for ref in doc["published"]:
        if ref["local_benchmark"] != "switch":
            continue
        value = units.convert(ref["value"], ref["unit"], unit)
        if value is None:
            continue
        for c in ref["local"]:
            key = (c["mechanism"], c["params"].get("variant"))
            if c["placement"] in (None, "same-cpu") and key in rows:
                out.append((rows.index(key), value, ref["source"]))
    return list(dict.fromkeys(out))


def _switch_panel(ax, configs, rows, in_ns, title):
    seen = set()
    for c in configs:
        key = (c["mechanism"], c["params"].get("variant"))
        payload = c["params"].get("payload", 0)
        if key not in rows:
            continue
        v, lo, hi = _value(c, in_ns)
        if v is None:
            continue
        y = rows.index(key) + PAYLOAD_OFFSETS.get(payload, 0.0)
        colour = PAYLOAD_COLOURS.get(payload, "grey")
        source = c["headline"]["source"]
        label = f"payload {payload} B ({source})"
        xerr = [[v - lo], [hi - v]] if lo is not None and lo > 0 else None
        ax.errorbar([v], [y], xerr=xerr, fmt=SOURCE_MARKERS.get(source, "o"), ms=4,
                    color=colour, ecolor=colour, elinewidth=1, capsize=2,
                    label=label if label not in seen else None)
        seen.add(label)
    ax.set_title(title)
    ax.set_xscale("log")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    if not configs:
        ax.text(0.5, 0.5, "no results", transform=ax.transAxes, ha="center", color="grey")


def switch_plot(doc: Mapping) -> Plot:
    configs = _configs(doc, "switch")
    title = "Switch cost per mechanism"
    if not configs:
        return Plot("switch", title, None, "No switch results in this run, so this plot is "
                    "left out (`isobench run switch`).")
    plt = _pyplot()
    unit, in_ns = _unit_of(configs)
    rows = _switch_rows(configs)
    places = [("same-cpu", "same CPU (or one context)"), ("cross-cpu", "across CPUs")]
    # One x scale for both panels, so that a cross-cpu marker reads against
    # the same-cpu ones.
    fig, axes = plt.subplots(1, 2, sharey=True, sharex=True,
                             figsize=(12, 1.6 + 0.42 * len(rows)))
    for ax, (place, label) in zip(axes, places):
        sub = [c for c in configs if (c["params"].get("placement") or "same-cpu") == place]
        _switch_panel(ax, sub, rows, in_ns, label)
        ax.set_xlabel(f"round-trip time per call [{unit}], log scale")
    sources = list(dict.fromkeys(src for _, _, src in _published_points(doc, rows, unit)))
    marks = "Dv^P*<>"
    for i, v, src in _published_points(doc, rows, unit):
        k = sources.index(src)
        axes[0].plot([v], [i], marks[k % len(marks)], mfc="none", mec="purple", ms=7,
                     label=f"published, other hardware: {src}")
    axes[0].set_yticks(range(len(rows)))
    axes[0].set_yticklabels([row_label(*r) for r in rows])
    axes[0].invert_yaxis()
    fig.suptitle(f"{title} (run {doc['run']['run_id']}): headline with its 95% interval, "
                 f"{'TSC converted to ns' if in_ns else unit}", fontsize=11)
    _fit(fig, 1.8 + 0.42 * len(rows), _legend(fig, axes))
    return Plot("switch", title, fig, "", "Round trip into the compartment and back. Each "
                "marker is the configuration's headline (circle: per-call median; square: "
                "batched estimate, for regions too short for the median), bars its 95% "
                "interval over repetitions. Hollow purple markers are published figures, "
                "measured elsewhere on other hardware, shown only where their unit matches; "
                "they are not local results.")


def _fit(fig, plot_height: float, legend_rows: int) -> None:
    """Size the figure so the legend below the axes never overlaps their labels."""
    legend_h = 0.25 + 0.22 * legend_rows if legend_rows else 0.0
    height = plot_height + legend_h
    fig.set_size_inches(12, height)
    fig.tight_layout(rect=(0, legend_h / height, 1, 1 - 0.35 / height))


def _legend(fig, axes) -> int:
    """One legend below all panels; the number of rows it takes."""
    handles, labels = {}, []
    for ax in axes:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in handles:
                handles[l] = h
                labels.append(l)
    labels.sort(key=lambda l: (not l.startswith("payload"), l))
    if not labels:
        return 0
    ncol = min(3, len(labels))
    fig.legend([handles[l] for l in labels], labels, loc="lower center", ncol=ncol,
               fontsize=8, frameon=False)
    return -(-len(labels) // ncol)


# ---- key-value store: time per request against data size ----

def _kv_series(configs: Sequence[Mapping]) -> dict[tuple[str, str], list[Mapping]]:
    series: dict[tuple[str, str], list[Mapping]] = {}
    for c in configs:
        series.setdefault((c["mechanism"], c["params"].get("placement") or "same-cpu"),
                          []).append(c)
    for s in series.values():
        s.sort(key=lambda c: c["params"]["data_bytes"])
    return series


def size_label(b: float, _pos=None) -> str:
    for unit, div in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= div:
            return f"{b / div:g} {unit}"
    return f"{b:g} B"


def _kv_get_configs(doc: Mapping) -> list[Mapping]:
    return [c for c in _configs(doc, "kv") if c["headline_phase"]
            and "data_bytes" in c["params"]]


def _kv_axes(ax) -> None:
    from matplotlib.ticker import FuncFormatter
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(size_label))
    ax.set_xlabel("data in the store (log scale)")
    ax.grid(True, which="both", alpha=0.3)


KV_CAPTION = ("Seeded random gets of 64-byte entries from a store inside the compartment. "
              "Solid lines same-cpu, dashed cross-cpu; bands are 95% intervals.")


def _band(ax, x, lo, hi, colour) -> None:
    pts = [(a, b, c) for a, b, c in zip(x, lo, hi) if b is not None and c is not None and b > 0]
    if len(pts) >= 2:
        ax.fill_between([p[0] for p in pts], [p[1] for p in pts], [p[2] for p in pts],
                        color=colour, alpha=0.15, lw=0)


def kv_plot(doc: Mapping) -> Plot:
    configs = _kv_get_configs(doc)
    title = "Key-value store: time per request against data size"
    if not configs:
        return Plot("kv", title, None, "No kv results in this run, so this plot is left out "
                    "(`isobench run kv` measures them).")
    plt = _pyplot()
    unit, in_ns = _unit_of(configs)
    series = _kv_series(configs)
    colours = _colours([m for m, _ in series])
    fig, ax = plt.subplots(figsize=(9, 5.6))
    for (mech, place), cs in sorted(series.items()):
        style = "-" if place == "same-cpu" else "--"
        x = [c["params"]["data_bytes"] for c in cs]
        vals = [_value(c, in_ns) for c in cs]
        ax.plot(x, [v[0] for v in vals], style, marker="o", ms=3, color=colours[mech],
                label=f"{mech} {place}")
        _band(ax, x, [v[1] for v in vals], [v[2] for v in vals], colours[mech])
    _kv_axes(ax)
    ax.set_ylabel(f"time per get request [{unit}], log scale")
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(f"{title} (run {doc['run']['run_id']})\nheadline per request, band: 95% "
                 "interval", fontsize=10)
    fig.tight_layout()
    return Plot("kv", title, fig, "", KV_CAPTION)


def kv_overhead_plot(doc: Mapping) -> Plot:
    configs = _kv_get_configs(doc)
    title = "Key-value store: overhead relative to direct against data size"
    if not configs:
        return Plot("kv-overhead", title, None, "No kv results in this run, so this plot is "
                    "left out (`isobench run kv` measures them).")
    plt = _pyplot()
    series = _kv_series(configs)
    colours = _colours([m for m, _ in series])
    fig, ax = plt.subplots(figsize=(9, 5.6))
    for (mech, place), cs in sorted(series.items()):
        cs = [c for c in cs if c["ratio"] is not None]
        if not cs or mech == BASELINE:
            continue
        x = [c["params"]["data_bytes"] for c in cs]
        ax.plot(x, [c["ratio"]["value"] for c in cs], "-" if place == "same-cpu" else "--",
                marker="o", ms=3, color=colours[mech], label=f"{mech} {place}")
        ivs = [c["ratio"]["interval"] or {} for c in cs]
        _band(ax, x, [iv.get("low") for iv in ivs], [iv.get("high") for iv in ivs],
              colours[mech])
    _kv_axes(ax)
    ax.axhline(1.0, color="black", lw=1)
    ax.set_ylabel("ratio to direct (value / direct's value), log scale")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(f"{title} (run {doc['run']['run_id']})\n1 = no overhead; ratio = x / direct, "
                 "overhead = ratio - 1", fontsize=10)
    fig.tight_layout()
    return Plot("kv-overhead", title, fig, "", KV_CAPTION)


def payload_plot(doc: Mapping) -> Plot:
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
    plt = _pyplot()
    unit, in_ns = _unit_of(configs)
    by: dict[str, list[Mapping]] = {}
    for c in configs:
        by.setdefault(c["mechanism"], []).append(c)
    colours = _colours(list(by))
    fig, ax = plt.subplots(figsize=(9, 5.6))
    for mech, cs in sorted(by.items()):
        cs = sorted(cs, key=lambda c: c["params"]["payload"])
        x = [max(c["params"]["payload"], 1) for c in cs]
        ax.plot(x, [_value(c, in_ns)[0] for c in cs], marker="o", ms=4, color=colours[mech],
                label=mech, lw=2.5 if mech == BASELINE else 1.2)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks([1, 64, 4096])
    ax.set_xticklabels(["0 B", "64 B", "4 KiB"])
    ax.set_xlabel("payload written by the caller and read by the compartment")
    ax.set_ylabel(f"round trip, headline [{unit}], log scale")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=1, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(f"{title} (run {doc['run']['run_id']}), same CPU or one context", fontsize=10)
    fig.tight_layout()
    return Plot("switch-payload", title, fig, "", "Round trip with the payload written into "
                "the shared buffer and checksummed inside the compartment; each point is the "
                "configuration's headline.")


# ---- key-value server beside memcached ----

def kv_server_plot(doc: Mapping) -> Plot:
    configs = _configs(doc, "kv-server")
    title = "Key-value server: throughput and latency beside memcached"
    if not configs:
        return Plot("kv-server", title, None, "No kv-server results in this run, so the "
                    "server plot (throughput and latency beside memcached) is left out.")
    plt = _pyplot()
    unit, in_ns = _unit_of(configs)
    configs = sorted(configs, key=lambda c: (c["role"] != "reference",
                                             server_label(c["mechanism"])))
    labels = [server_label(c["mechanism"]) for c in configs]
    colours = ["#7f7f7f" if c["role"] == "reference" else "#1f77b4" for c in configs]
    fig, (ax_t, ax_l) = plt.subplots(1, 2, figsize=(12, 1.6 + 0.45 * len(configs)), sharey=True)
    ys = list(range(len(configs)))
    tput = [c["kv_server"]["ops_per_s"] or 0 for c in configs]
    ax_t.barh(ys, tput, color=colours)
    ax_t.set_xlabel("throughput [requests/s]")
    ax_t.set_title("throughput (higher is better)")
    if not any(tput):
        ax_t.text(0.5, 0.5, "no throughput recorded", transform=ax_t.transAxes, ha="center")
    vals = [_value(c, in_ns) for c in configs]
    med = [v[0] or 0 for v in vals]
    lo = [m - v[1] if v[1] is not None else 0 for m, v in zip(med, vals)]
    hi = [v[2] - m if v[2] is not None else 0 for m, v in zip(med, vals)]
    # Linear from zero: bar lengths must be proportional to the values.
    ax_l.barh(ys, med, xerr=[lo, hi], color=colours, capsize=3)
    ax_l.set_xlabel(f"latency per request [{unit}], headline with its 95% interval")
    ax_l.set_title("latency (lower is better)")
    ax_t.set_yticks(ys)
    ax_t.set_yticklabels(labels)
    ax_t.invert_yaxis()
    for a in (ax_t, ax_l):
        a.grid(True, axis="x", alpha=0.3)
    fig.suptitle(f"{title} (run {doc['run']['run_id']}); grey: memcached itself", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    return Plot("kv-server", title, fig, "", "isob serve over each mechanism, and memcached "
                "as the reference server, under the same client load.")


PLOTS = (switch_plot, payload_plot, kv_plot, kv_overhead_plot, kv_server_plot)


def draw(doc: Mapping) -> list[Plot]:
    """Every plot of the report: the sections' first ones (render/sections.py),
    the run's own, then the sections' others."""
    from . import sections
    return [*sections.plots(doc, first=True), *(p(doc) for p in PLOTS),
            *sections.plots(doc, first=False)]


def save(plot: Plot, out_dir) -> list[str]:
    """Write plot as PNG and SVG into out_dir; the file names written."""
    if plot.figure is None:
        return []
    names = []
    for ext in ("png", "svg"):
        name = f"{plot.name}.{ext}"
        plot.figure.savefig(out_dir / name, dpi=DPI, format=ext)
        names.append(name)
    _pyplot().close(plot.figure)
    return names
