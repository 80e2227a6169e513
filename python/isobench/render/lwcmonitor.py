"""How the lwc-monitor section (analysis/lwcmonitor.py) is shown: a table
per document size with a row per (L, monitor), the claim of lwC beside
lwc's throughput over procsep's at every point, the failed points, and a
plot of throughput against L per monitor.  Nothing here computes."""

from __future__ import annotations

from typing import Mapping

from . import table
from .lwcserve import _notes as _serve_notes, _num, _tail

COLOURS = {"none": "#7f7f7f", "inline": "#1f77b4", "procsep": "#ff7f0e", "lwc": "#2ca02c"}

HEAD = ("monitor", "L", "throughput [req/s]", "95% interval", "/ none [95%]", "checked/req",
        "p50 [us]", "p99 [us]", "p99.9 [us]", "loadgen CPU", "server CPU", "saturated", "reps")


def _ratio(v, lo, hi) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" + (f" [{lo:.3f}..{hi:.3f}]" if lo is not None else "")


def _cells(r: Mapping) -> list[str]:
    iv = ("-" if r.get("throughput_lo") is None
          else f"{_num(r['throughput_lo'])}..{_num(r['throughput_hi'])}")
    bound = bool(r.get("bound"))
    lat = r.get("latency") or {}
    reps = str(r.get("reps")) + (f" ({r['failed_reps']} failed)" if r.get("failed_reps") else "")
    return [str(r.get("monitor")), str(r.get("session")),
            ("<= " if bound else "") + _num(r.get("throughput_rps")), iv,
            _ratio(r.get("vs_none"), r.get("vs_none_lo"), r.get("vs_none_hi")),
            _num(r.get("checked_per_request"), 2),
            _tail(lat.get("p50"), bound), _tail(lat.get("p99"), bound),
            _tail(lat.get("p999"), bound), _num(r.get("client_busy"), 2),
            _num(r.get("server_busy"), 2), str(r.get("saturated")), reps]


def _tables(section: Mapping):
    for t in section.get("tables") or []:
        yield (f"lwc-serve --monitor: isob serve --http --session shared --monitor M, "
               f"{t['doc_bytes']}-byte document read per GET (openat, pread64 checked), "
               f"16 connections, sessions of L requests", [_cells(r) for r in t["rows"]])


def _claim_lines(section: Mapping) -> list[str]:
    out = ["claim: " + section["claim"] + "; here, lwc's throughput over procsep's (Welch 95% "
           "interval of the log ratio over repetitions):"]
    for c in section.get("lwc_over_procsep") or []:
        out.append(f"  {c['doc_bytes']} B, L={c['session']}: "
                   f"{_ratio(c['ratio'], c['lo'], c['hi'])}: {c['verdict']}")
    if not section.get("lwc_over_procsep"):
        out.append("  (no point has both lwc and procsep)")
    return out


def _notes(section: Mapping) -> list[str]:
    return [_serve_notes({})[0],
            "/ none: throughput over that of the same point without a check (the same file "
            "read), geometric means; checked/req: system calls the monitor checked per request "
            "(openat and pread64: 2; none checks nothing)",
            "inline is a check in the server itself (lwC's LD_PRELOAD wrapper): no isolation, "
            "a lower bound on the cost"]


def _failed_lines(section: Mapping) -> list[str]:
    return [f"{f['status'].upper()}: monitor={f['monitor']} doc_bytes={f['doc_bytes']} "
            f"session={f['session']}: {f.get('reason')}" for f in section.get("failed") or []]


def text(section: Mapping, doc: Mapping) -> str:
    lines = []
    for title, rows in _tables(section):
        lines += ["", table.wrap(title), table.fold(list(HEAD), rows, set(HEAD))]
    lines += ["", *(table.wrap(n) for n in _notes(section)),
              *(table.wrap(n) for n in _claim_lines(section)),
              table.wrap("threat model: " + section["threat_model"]), *_failed_lines(section)]
    return "\n".join(lines).lstrip("\n")


def markdown(section: Mapping, doc: Mapping) -> str:
    out = ["## lwC's reference monitors in a server (lwc-serve --monitor)", ""]
    for title, rows in _tables(section):
        out += [f"**{title}**", "", table.md_table(list(HEAD), rows), ""]
    out += [*(f"- {n}" for n in _notes(section)), ""]
    claim = _claim_lines(section)
    out += [claim[0], "", *(f"- {line.strip()}" for line in claim[1:]), "",
            "Threat model: " + section["threat_model"], ""]
    out += [f"- {line}" for line in _failed_lines(section)]
    return "\n".join(out)


def plots(section: Mapping, doc: Mapping) -> list:
    from .plots import Plot, _pyplot
    tabs = [t for t in section.get("tables") or [] if t.get("rows")]
    if not tabs:
        return []
    title = "lwc-serve --monitor: throughput against session length per monitor"
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(tabs), figsize=(5 * len(tabs), 4), squeeze=False)
    for ax, t in zip(axes[0], tabs):
        for mon, colour in COLOURS.items():
            rows = [r for r in t["rows"] if r["monitor"] == mon and r.get("throughput_rps")]
            if not rows:
                continue
            xs = [r["session"] for r in rows]
            ax.plot(xs, [r["throughput_rps"] for r in rows], marker="o", label=mon, color=colour)
            lo = [r["throughput_lo"] for r in rows]
            hi = [r["throughput_hi"] for r in rows]
            if all(x is not None for x in lo + hi):
                ax.fill_between(xs, lo, hi, alpha=0.2, color=colour)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("session length L [requests per connection]")
        ax.set_ylabel("throughput [requests/s]")
        ax.set_title(f"{t['doc_bytes']}-byte document")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle(f"{title} (run {doc['run']['run_id']}), geometric mean over repetitions with "
                 f"its 95% interval", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    return [Plot("lwc-monitor", title, fig, "",
                 "isob serve --http --session shared --monitor M under isob loadgen; each GET "
                 "opens and reads the document through the monitor.")]
