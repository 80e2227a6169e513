"""How the lwc-monitor section (analysis/families/lwcmonitor.py) is shown: a table
per document size with a row per (L, monitor), the claim of lwC beside
lwc's throughput over procsep's at every point, the failed points, and a
plot of throughput against L per monitor.  Nothing here computes."""

from __future__ import annotations

from typing import Mapping

from ..kit import claims, table
from ..kit.plots import Plot, pyplot
from ..kit.blocks import fixed, latency_note, latency_text

COLOURS = {"none": "#7f7f7f", "inline": "#1f77b4", "procsep": "#ff7f0e", "lwc": "#2ca02c"}

HEAD = ("monitor", "L", "throughput [req/s]", "95% interval", "/ none [95%]", "checked/req",
        "p50 [us]", "p99 [us]", "p99.9 [us]", "loadgen CPU", "server CPU", "saturated", "reps")


def _ratio(v, lo, hi) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" + (f" [{lo:.3f}..{hi:.3f}]" if lo is not None else "")


def _cells(r: Mapping) -> list[str]:
    iv = ("-" if r.get("throughput_lo") is None
          else f"{fixed(r['throughput_lo'])}..{fixed(r['throughput_hi'])}")
    bound = bool(r.get("bound"))
    lat = r.get("latency") or {}
    reps = str(r.get("reps")) + (f" ({r['failed_reps']} failed)" if r.get("failed_reps") else "")
    return [str(r.get("monitor")), str(r.get("session")),
            ("<= " if bound else "") + fixed(r.get("throughput_rps")), iv,
            _ratio(r.get("vs_none"), r.get("vs_none_lo"), r.get("vs_none_hi")),
            fixed(r.get("checked_per_request"), 2),
            latency_text(lat.get("p50"), bound), latency_text(lat.get("p99"), bound),
            latency_text(lat.get("p999"), bound), fixed(r.get("client_busy"), 2),
            fixed(r.get("server_busy"), 2), str(r.get("saturated")), reps]


def _tables(section: Mapping):
    for t in section.get("tables") or []:
        yield (f"lwc-serve --monitor: isob serve --http --session {t.get('server', 'shared')} "
               f"--monitor M, "
               f"{t['doc_bytes']}-byte document read per GET (openat, pread64 checked), "
               f"16 connections, sessions of L requests", [_cells(r) for r in t["rows"]])


def _claim_lines(section: Mapping) -> list[str]:
    out = ["claim: " + section["claim"] + "; here, lwc's throughput over procsep's (Welch 95% "
           "interval of the log ratio over repetitions), judged below:"]
    if not section.get("claims"):
        out.append("  (no point has both lwc and procsep)")
    return out


def _notes(section: Mapping) -> list[str]:
    return [latency_note(),
            "/ none: throughput over that of the same point without a check (the same file "
            "read), geometric means; checked/req: system calls the monitor checked per request "
            "(openat and pread64: 2; none checks nothing)",
            "inline is a check in the server itself (lwC's LD_PRELOAD wrapper): no isolation, "
            "a lower bound on the cost",
            *_isolation_lines(section)]


def _isolation_lines(section: Mapping) -> list[str]:
    """What each monitor in the tables stops and does not, once per monitor."""
    seen: dict[str, str] = {}
    for t in section.get("tables") or []:
        for r in t["rows"]:
            if r.get("isolation"):
                seen.setdefault(str(r.get("monitor")), r["isolation"])
    return [f"{m}: {text}" for m, text in seen.items()]


def _failed_lines(section: Mapping) -> list[str]:
    return [f"{f['status'].upper()}: monitor={f['monitor']} doc_bytes={f['doc_bytes']} "
            f"session={f['session']}: {f.get('reason')}" for f in section.get("failed") or []]


def text(section: Mapping, doc: Mapping) -> str:
    lines = []
    for title, rows in _tables(section):
        lines += ["", table.wrap(title), table.fold(list(HEAD), rows, set(HEAD))]
    lines += ["", *(table.wrap(n) for n in _notes(section)),
              *(table.wrap(n) for n in _claim_lines(section))]
    if section.get("claims"):
        lines.append(claims.text(section["claims"]))
    lines += [table.wrap("threat model: " + section["threat_model"]), *_failed_lines(section)]
    return "\n".join(lines).lstrip("\n")


def markdown(section: Mapping, doc: Mapping) -> str:
    out = ["## lwC's reference monitors in a server (lwc-serve --monitor)", ""]
    for title, rows in _tables(section):
        out += [f"**{title}**", "", table.md_table(list(HEAD), rows), ""]
    out += [*(f"- {n}" for n in _notes(section)), ""]
    claim = _claim_lines(section)
    out += [claim[0], "", *(f"- {line.strip()}" for line in claim[1:]), ""]
    if section.get("claims"):
        out += [claims.markdown(section["claims"])]
    out += ["Threat model: " + section["threat_model"], ""]
    out += [f"- {line}" for line in _failed_lines(section)]
    return "\n".join(out)


def plots(section: Mapping, doc: Mapping) -> list:
    tabs = [t for t in section.get("tables") or [] if t.get("rows")]
    if not tabs:
        return []
    title = "lwc-serve --monitor: throughput against session length per monitor"
    plt = pyplot()
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
    fig.suptitle(f"{title} (run {doc['run']['run_id']})\ngeometric mean over repetitions with "
                 f"its 95% interval", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.88))
    return [Plot("lwc-monitor", title, fig, "",
                 "isob serve --http --session shared --monitor M under isob loadgen; each GET "
                 "opens and reads the document through the monitor.")]


# ---- lwc-tls: lwC's isolated OpenSSL key (analysis/lwcmonitor.build_tls) ----

TLS_HEAD = ("key in", "handshakes", "seconds", "95% interval", "per 10,000 [s]", "lwC [s]",
            "p50 handshake [us]", "server CPU/hs [us]", "client CPU/hs [us]", "reps")


def _tls_cells(r: Mapping) -> list[str]:
    iv = "-" if r.get("seconds_lo") is None else f"{r['seconds_lo']:.3f}..{r['seconds_hi']:.3f}"
    per = "-" if r.get("per_10000_s") is None else (
        f"{r['per_10000_s']:.2f}" + (f" [{r['per_10000_lo']:.2f}..{r['per_10000_hi']:.2f}]"
                                     if r.get("per_10000_lo") is not None else ""))
    return [str(r.get("tls_key")), fixed(r.get("handshakes")), fixed(r.get("seconds"), 3), iv, per,
            fixed(r.get("published_s"), 1), fixed(r.get("handshake_p50_us"), 1),
            fixed(r.get("server_cpu_per_handshake_us"), 1),
            fixed(r.get("client_cpu_per_handshake_us"), 1), str(r.get("reps"))]


def _tls_tables(section: Mapping):
    for t in section.get("tables") or []:
        yield (f"lwc-serve --tls: isob serve --http --session {t.get('server', 'shared')} "
               f"--tls K, full TLS 1.3 handshakes ("
               f"{t.get('tls_key_type') or 'ecdsa-p256, before --tls-key'}) one after another "
               f"by isob tlsload, each with one GET of the "
               f"{t['doc_bytes']}-byte document", [_tls_cells(r) for r in t["rows"]])


def _tls_lines(section: Mapping) -> list[str]:
    out = ["per 10,000: the run's seconds scaled to lwC's 10,000 handshakes (--quick runs "
           "fewer); lwC [s]: the published figure (FreeBSD, nginx, OpenSSL 1.0.2, another "
           "machine: not this one's); server CPU/hs: CPU of the server and every process below "
           "it (the key's context) per handshake",
           "claim: " + section["claim"] + "; here, lwc's seconds over process's (Welch 95% "
           "interval of the log ratio over repetitions), judged below:"]
    if not section.get("claims"):
        out.append("  (no document size has both key locations)")
    return out


def _tls_failed(section: Mapping) -> list[str]:
    return [f"{f['status'].upper()}: tls_key={f['tls_key']} doc_bytes={f['doc_bytes']}"
            + (f" session={f['session']}" if f.get("session") is not None else "")
            + f": {f.get('reason')}" for f in section.get("failed") or []]


SWEEP_HEAD = ("session", "key", "key in", "doc [B]", "L", "throughput [req/s]", "95% interval", "lwc / process",
              "p50 [us]", "p99 [us]", "server CPU/req [us]", "reps")


def _sweep_cells(r: Mapping) -> list[str]:
    iv = ("-" if r.get("throughput_lo") is None
          else f"{fixed(r['throughput_lo'])}..{fixed(r['throughput_hi'])}")
    return [str(r.get("server")), str(r.get("tls_key_type") or "ecdsa-p256"),
            str(r["tls_key"]), str(r["doc_bytes"]), str(r["session"]),
            fixed(r.get("throughput_rps")), iv,
            _ratio(r.get("vs_process"), r.get("vs_process_lo"), r.get("vs_process_hi")),
            fixed(r.get("latency_p50_us"), 1), fixed(r.get("latency_p99_us"), 1),
            fixed(r.get("server_cpu_per_request_us"), 1), str(r.get("reps"))]


SWEEP_TITLE = ("lwc-serve --tls: HTTPS throughput, isob tlsload with 16 threads each running "
               "sessions of L keep-alive requests over one TLS connection (a full handshake per "
               "session); latency: each request, its handshake not in it (tlsload's quantile, "
               "median over repetitions)")


def tls_text(section: Mapping, doc: Mapping) -> str:
    lines = []
    for title, rows in _tls_tables(section):
        lines += ["", table.wrap(title), table.fold(list(TLS_HEAD), rows, set(TLS_HEAD))]
    if section.get("sweep"):
        rows = [_sweep_cells(r) for r in section["sweep"]]
        lines += ["", table.wrap(SWEEP_TITLE), table.fold(list(SWEEP_HEAD), rows,
                                                          set(SWEEP_HEAD))]
    lines += ["", *(table.wrap(n) for n in _tls_lines(section))]
    if section.get("claims"):
        lines.append(claims.text(section["claims"]))
    lines += [table.wrap("threat model: " + section["threat_model"]), *_tls_failed(section)]
    return "\n".join(lines).lstrip("\n")


def tls_markdown(section: Mapping, doc: Mapping) -> str:
    out = ["## lwC's isolated OpenSSL key (lwc-serve --tls)", ""]
    for title, rows in _tls_tables(section):
        out += [f"**{title}**", "", table.md_table(list(TLS_HEAD), rows), ""]
    if section.get("sweep"):
        out += [f"**{SWEEP_TITLE}**", "",
                table.md_table(list(SWEEP_HEAD), [_sweep_cells(r) for r in section["sweep"]]), ""]
    lines = _tls_lines(section)
    out += [f"- {lines[0]}", "", lines[1], "", *(f"- {x.strip()}" for x in lines[2:]), ""]
    if section.get("claims"):
        out += [claims.markdown(section["claims"])]
    out += ["Threat model: " + section["threat_model"], ""]
    out += [f"- {line}" for line in _tls_failed(section)]
    return "\n".join(out)


def tls_plots(section: Mapping, doc: Mapping) -> list:
    rows = [(t["doc_bytes"], r) for t in section.get("tables") or [] for r in t["rows"]
            if r.get("per_10000_s") is not None]
    if not rows:
        return []
    title = "lwc-serve --tls: seconds per 10,000 full handshakes, key in the server or in an lwc"
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    labels = [f"{r['tls_key']}\n{d} B" for d, r in rows]
    ys = [r["per_10000_s"] for _, r in rows]
    err = [[y - (r["per_10000_lo"] if r.get("per_10000_lo") is not None else y) for (_, r), y
            in zip(rows, ys)],
           [(r["per_10000_hi"] if r.get("per_10000_hi") is not None else y) - y for (_, r), y
            in zip(rows, ys)]]
    ax.bar(range(len(rows)), ys, yerr=err, capsize=4,
           color=[COLOURS["lwc"] if r["tls_key"] == "lwc" else COLOURS["none"] for _, r in rows])
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels)
    ax.set_ylabel("seconds per 10,000 handshakes (here)")
    ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"{title} (run {doc['run']['run_id']})", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    return [Plot("lwc-tls", title, fig, "",
                 "lwC's published seconds (the table's lwC [s], reference rows "
                 "lwc-tls-native and lwc-tls-key-in-lwc) were measured on its machine; the "
                 "bars are this machine's, with the 95% interval over repetitions.")]
