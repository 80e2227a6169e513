"""The report's plots, drawn from stored results (never part of measuring).

Each plot function takes a loaded run and returns a Plot: a matplotlib
figure, or None with a note saying why the plot is left out (e.g. the run
has no kv results).  matplotlib is imported here only, with the Agg backend,
so that no other command pays for it or needs a display.

Conventions, the same in every plot: times in ns where the unit allows it
(TSC ticks are converted with the recorded TSC frequency; core cycles stay
cycles), log scales because mechanisms differ by orders of magnitude,
markers at the median with p5-p95 bars, one colour per mechanism, and
published figures drawn hollow and labelled "published".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from . import kvserver, reference
from .analysis import BASELINE, Config, RunData, is_reference

# Vertical offsets of the payload series in the switch plot (row units).
PAYLOAD_OFFSETS = {0: -0.22, 64: 0.0, 4096: 0.22}
PAYLOAD_COLOURS = {0: "#1f77b4", 64: "#ff7f0e", 4096: "#2ca02c"}
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


def _unit_of(configs: Sequence[Config]) -> tuple[str, bool]:
    """('ns', True) when every config converts to ns, else the common unit."""
    if all(c.ns(1.0) is not None for c in configs):
        return "ns", True
    units = sorted({c.unit or "?" for c in configs})
    return "/".join(units), False


def _val(c: Config, v: float | None, in_ns: bool) -> float | None:
    return c.ns(v) if in_ns else v


def _colours(names: Sequence[str]) -> dict[str, str]:
    plt = _pyplot()
    cmap = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    return {n: cmap(i % cmap.N) for i, n in enumerate(sorted(names))}


# ---- switch cost per mechanism ----

def _switch_rows(configs: Sequence[Config]) -> list[tuple[str, str | None]]:
    """(mechanism, variant) rows, cheapest first by their same-cpu payload-0 median."""
    rows: dict[tuple[str, str | None], float] = {}
    for c in configs:
        if c.params.get("payload", 0) != 0:
            continue
        key = (c.mechanism, c.params.get("variant"))
        med = c.quick.median or 0
        rows[key] = min(rows.get(key, med), med)
    for c in configs:  # mechanisms measured only with payloads
        rows.setdefault((c.mechanism, c.params.get("variant")), float("inf"))
    return sorted(rows, key=lambda k: (rows[k], k[0], str(k[1])))


def row_label(mech: str, variant: str | None) -> str:
    if mech == BASELINE:
        return f"direct ({variant or 'entry'}{': baseline' if variant in (None, 'entry') else ''})"
    return mech if variant in (None, "entry") else f"{mech} ({variant})"


# Published figures can share an axis with local results only in the same
# kind of unit: times on a ns axis, cycles on a cycles axis (TSC ticks match
# neither, so nothing published is drawn then).
PUBLISHED_SCALE = {"ns": {"us": 1000.0, "ns": 1.0, "ms": 1e6}, "cycles": {"cycles": 1.0}}


def _published_points(data: RunData, rows, unit: str) -> list[tuple[int, float, str]]:
    """Published figures that match a row of the same-cpu panel: (row, value, source)."""
    scale = PUBLISHED_SCALE.get(unit, {})
    out = []
    for ref in reference.load():
        if ref.unit not in scale or ref.local_benchmark != "switch":
            continue
        for c in reference.matches(ref, data.configs):
            key = (c.mechanism, c.params.get("variant"))
            if c.placement in (None, "same-cpu") and key in rows:
                out.append((rows.index(key), ref.value * scale[ref.unit], ref.source))
    return list(dict.fromkeys(out))


def _switch_panel(ax, configs, rows, in_ns, title):
    seen_payloads = set()
    for c in configs:
        key = (c.mechanism, c.params.get("variant"))
        payload = c.params.get("payload", 0)
        d = c.quick
        if key not in rows or d.median is None:
            continue
        y = rows.index(key) + PAYLOAD_OFFSETS.get(payload, 0.0)
        med, lo, hi = (_val(c, v, in_ns) for v in (d.median, d.p5, d.p95))
        colour = PAYLOAD_COLOURS.get(payload, "grey")
        label = f"median, p5-p95: payload {payload} B" if payload not in seen_payloads else None
        seen_payloads.add(payload)
        ax.errorbar([med], [y], xerr=[[med - lo], [hi - med]], fmt="o", ms=4, color=colour,
                    ecolor=colour, elinewidth=1, capsize=2, label=label)
        if c.batched:
            ax.plot([_val(c, c.batched, in_ns)], [y], "x", color="black", ms=4,
                    label="batched estimate" if "b" not in seen_payloads else None)
            seen_payloads.add("b")
    ax.set_title(title)
    ax.set_xscale("log")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    if not any(c for c in configs):
        ax.text(0.5, 0.5, "no results", transform=ax.transAxes, ha="center", color="grey")


def switch_plot(data: RunData) -> Plot:
    configs = [c for c in data.configs if c.benchmark == "switch"]
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
        sub = [c for c in configs if (c.placement or "same-cpu") == place]
        _switch_panel(ax, sub, rows, in_ns, label)
        ax.set_xlabel(f"round-trip time per call [{unit}], log scale")
    empty = [_val(c, c.header.get("empty_region", {}).get("median"), in_ns) for c in configs
             if isinstance(c.header.get("empty_region"), dict)]
    empty = [e for e in empty if e]
    for ax in axes:
        if empty:
            ax.axvline(min(empty), color="grey", ls="--", lw=1,
                       label="empty region (reading cost, inside every sample)")
    sources = list(dict.fromkeys(src for _, _, src in _published_points(data, rows, unit)))
    marks = "Dsv^P*"
    for i, v, src in _published_points(data, rows, unit):
        k = sources.index(src)
        axes[0].plot([v], [i], marks[k % len(marks)], mfc="none", mec="purple", ms=7,
                     label=f"published, other hardware: {src}")
    axes[0].set_yticks(range(len(rows)))
    axes[0].set_yticklabels([row_label(*r) for r in rows])
    axes[0].invert_yaxis()
    fig.suptitle(f"{title} (run {data.run_id}): median with p5-p95, "
                 f"{'TSC converted to ns' if in_ns and unit == 'ns' else unit}", fontsize=11)
    _fit(fig, 1.8 + 0.42 * len(rows), _legend(fig, axes))
    return Plot("switch", title, fig, "", "Round trip into the compartment and back. Markers: "
                "median of per-call samples, bars p5-p95, x the batched estimate (reading "
                "cost cancelled). Hollow purple markers are published figures, measured "
                "elsewhere on other hardware, shown only where their unit matches; they are "
                "not local results.")


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
    # Data series first, then the guides (batched, empty region, published).
    labels.sort(key=lambda l: (not l.startswith("median"), l))
    if not labels:
        return 0
    ncol = min(3, len(labels))
    fig.legend([handles[l] for l in labels], labels, loc="lower center", ncol=ncol,
               fontsize=8, frameon=False)
    return -(-len(labels) // ncol)


# ---- key-value store: time per request against data size ----

def _kv_series(configs: Sequence[Config]) -> dict[tuple[str, str], list[Config]]:
    series: dict[tuple[str, str], list[Config]] = {}
    for c in configs:
        series.setdefault((c.mechanism, c.placement or "same-cpu"), []).append(c)
    for s in series.values():
        s.sort(key=lambda c: c.params["data_bytes"])
    return series


def _size_label(b: float, _pos=None) -> str:
    for unit, div in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= div:
            return f"{b / div:g} {unit}"
    return f"{b:g} B"


def _kv_get_configs(data: RunData) -> list[Config]:
    return [c for c in data.configs if c.benchmark == "kv" and c.params.get("variant") == "get"
            and "data_bytes" in c.params]


def _kv_axes(ax) -> None:
    from matplotlib.ticker import FuncFormatter
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(_size_label))
    ax.set_xlabel("data in the store (log scale)")
    ax.grid(True, which="both", alpha=0.3)


KV_CAPTION = ("Seeded random gets of 64-byte entries from a store inside the compartment. "
              "Solid lines same-cpu, dashed cross-cpu.")


def kv_plot(data: RunData) -> Plot:
    configs = _kv_get_configs(data)
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
        x = [c.params["data_bytes"] for c in cs]
        med = [_val(c, c.quick.median, in_ns) for c in cs]
        lo = [_val(c, c.quick.p5, in_ns) for c in cs]
        hi = [_val(c, c.quick.p95, in_ns) for c in cs]
        ax.plot(x, med, style, marker="o", ms=3, color=colours[mech], label=f"{mech} {place}")
        ax.fill_between(x, lo, hi, color=colours[mech], alpha=0.12, lw=0)
    _kv_axes(ax)
    ax.set_ylabel(f"time per get request [{unit}], log scale")
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(f"{title} (run {data.run_id})\nmedian per request, band p5-p95", fontsize=10)
    fig.tight_layout()
    return Plot("kv", title, fig, "", KV_CAPTION)


def kv_overhead_plot(data: RunData) -> Plot:
    configs = _kv_get_configs(data)
    title = "Key-value store: overhead relative to direct against data size"
    if not configs:
        return Plot("kv-overhead", title, None, "No kv results in this run, so this plot is "
                    "left out (`isobench run kv` measures them).")
    plt = _pyplot()
    series = _kv_series(configs)
    colours = _colours([m for m, _ in series])
    fig, ax = plt.subplots(figsize=(9, 5.6))
    for (mech, place), cs in sorted(series.items()):
        ratios = _kv_ratios(data, cs)
        if ratios and mech != BASELINE:
            ax.plot([r[0] for r in ratios], [r[1] for r in ratios],
                    "-" if place == "same-cpu" else "--", marker="o", ms=3,
                    color=colours[mech], label=f"{mech} {place}")
    _kv_axes(ax)
    ax.axhline(1.0, color="black", lw=1)
    ax.set_ylabel("ratio to direct (median / direct's median), log scale")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(f"{title} (run {data.run_id})\n1 = no overhead; ratio = x / direct, "
                 "overhead = ratio - 1", fontsize=10)
    fig.tight_layout()
    return Plot("kv-overhead", title, fig, "", KV_CAPTION)


def payload_plot(data: RunData) -> Plot:
    """What moving data across the boundary costs: round-trip time against
    payload size, same-cpu (or one context), one line per mechanism.  Shared
    memory mechanisms stay flat; copying ones (wasm) and the checksum grow."""
    configs = [c for c in data.configs if c.benchmark == "switch"
               and c.params.get("variant") == "entry" and "payload" in c.params
               and c.placement in ("same-cpu", None)]
    title = "Switch cost against payload size"
    if not configs:
        return Plot("switch-payload", title, None, "No switch results in this run, so this "
                    "plot is left out (`isobench run switch` measures them).")
    plt = _pyplot()
    unit, in_ns = _unit_of(configs)
    by: dict[str, list[Config]] = {}
    for c in configs:
        by.setdefault(c.mechanism, []).append(c)
    colours = _colours(list(by))
    fig, ax = plt.subplots(figsize=(9, 5.6))
    for mech, cs in sorted(by.items()):
        cs = sorted(cs, key=lambda c: c.params["payload"])
        x = [max(c.params["payload"], 1) for c in cs]
        y = [_val(c, c.quick.median, in_ns) for c in cs]
        ax.plot(x, y, marker="o", ms=4, color=colours[mech], label=mech,
                lw=2.5 if mech == BASELINE else 1.2)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks([1, 64, 4096])
    ax.set_xticklabels(["0 B", "64 B", "4 KiB"])
    ax.set_xlabel("payload written by the caller and read by the compartment")
    ax.set_ylabel(f"round trip, median [{unit}], log scale")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=1, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(f"{title} (run {data.run_id}), same CPU or one context", fontsize=10)
    fig.tight_layout()
    return Plot("switch-payload", title, fig, "", "Median round trip with the payload "
                "written into the shared buffer and checksummed inside the compartment.")


def _kv_ratios(data: RunData, cs: Sequence[Config]) -> list[tuple[float, float]]:
    out = []
    for c in cs:
        base = data.baseline_of(c)
        if base is not None and base.quick.median and c.quick.median:
            out.append((c.params["data_bytes"], c.quick.median / base.quick.median))
    return out


# ---- key-value server beside memcached ----

# Params a kv-server result may carry its throughput in (requests per second).
THROUGHPUT_PARAMS = ("throughput", "ops_per_s", "ops_per_sec", "requests_per_s")


def _server(c: Config) -> str:
    return kvserver.server_label(c.mechanism)


def _throughput(c: Config) -> float | None:
    for r in c.results:
        for k in THROUGHPUT_PARAMS:
            if isinstance(r["params"].get(k), (int, float)):
                return float(r["params"][k])
    return None


def kv_server_plot(data: RunData) -> Plot:
    configs = [c for c in data.configs if c.benchmark == "kv-server"]
    title = "Key-value server: throughput and latency beside memcached"
    if not configs:
        return Plot("kv-server", title, None, "No kv-server results in this run, so the "
                    "server plot (throughput and latency beside memcached) is left out.")
    plt = _pyplot()
    unit, in_ns = _unit_of(configs)
    configs = sorted(configs, key=lambda c: (not is_reference(c), _server(c), c.placement or ""))
    labels = [f"{_server(c)} {c.placement or ''}".strip() for c in configs]
    colours = ["#7f7f7f" if is_reference(c) else "#1f77b4" for c in configs]
    fig, (ax_t, ax_l) = plt.subplots(1, 2, figsize=(12, 1.6 + 0.45 * len(configs)), sharey=True)
    ys = list(range(len(configs)))
    tput = [_throughput(c) or 0 for c in configs]
    ax_t.barh(ys, [t / 1000 for t in tput], color=colours)
    ax_t.set_xlabel("throughput [thousand requests/s]")
    ax_t.set_title("throughput (higher is better)")
    if not any(tput):
        ax_t.text(0.5, 0.5, "no throughput recorded", transform=ax_t.transAxes, ha="center")
    med = [_val(c, c.quick.median, in_ns) or 0 for c in configs]
    lo = [m - (_val(c, c.quick.p5, in_ns) or m) for c, m in zip(configs, med)]
    hi = [(_val(c, c.quick.p95, in_ns) or m) - m for c, m in zip(configs, med)]
    # Linear from zero: bar lengths must be proportional to the values.
    ax_l.barh(ys, med, xerr=[lo, hi], color=colours, capsize=3)
    ax_l.set_xlabel(f"latency per request [{unit}], median with p5-p95")
    ax_l.set_title("latency (lower is better)")
    ax_t.set_yticks(ys)
    ax_t.set_yticklabels(labels)
    ax_t.invert_yaxis()
    for a in (ax_t, ax_l):
        a.grid(True, axis="x", alpha=0.3)
    fig.suptitle(f"{title} (run {data.run_id}); grey: memcached itself", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    return Plot("kv-server", title, fig, "", "isob serve over each mechanism, and memcached "
                "as the reference server, under the same client load.")


PLOTS = (switch_plot, payload_plot, kv_plot, kv_overhead_plot, kv_server_plot)


def draw(data: RunData) -> list[Plot]:
    return [p(data) for p in PLOTS]


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
