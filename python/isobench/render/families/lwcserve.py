"""How the lwc-serve section (analysis/families/lwcserve.py) is shown: a table per
lwc-serve variant (protocol, start-up MiB) with a row per (server, L), the
lwc-conns table with a row per (concurrency, server), each row led by the
server's CPU per request; the lwc-curve table with a row per (server,
offered rate); the failed and skipped points with their reasons; a plot of
throughput against L per server, and of latency against offered load per
isob server with memcached's curve beside it.  Everything shown is in the section; nothing here computes."""

from __future__ import annotations

from typing import Mapping

from ..kit import claims, table
from ..kit.plots import Plot, pyplot
from ..kit.blocks import fixed, latency_note, latency_text
from ...analysis.kit import cpu

# One colour per mode in every panel, whichever modes a panel has.
COLOURS = {"shared": "#1f77b4", "fork": "#ff7f0e", "rollback": "#2ca02c",
           "per-connection": "#d62728", "prefork": "#9467bd",
           "memcached": "#7f7f7f"}

HEAD = ("server", "{key}", "server CPU [us/req] [95%]", "x memcached", "loadgen CPU [us/req]",
        "throughput [req/s]", "95% interval", "p50 [us]", "p99 [us]",
        "p99.9 [us]", "loadgen busy", "server busy", "procs", "blocked/req", "saturated",
        "reps")

CURVE_HEAD = ("server", "offered [req/s]", "achieved [req/s]", "achieved/offered",
              "p50 [us]", "p99 [us]", "p99.9 [us]", "server CPU [us/req] [95%]",
              "x memcached", "blocked/req", "late sends", "knee", "reps")


def _cells(r: Mapping, key: str) -> list[str]:
    iv = ("-" if r.get("throughput_lo") is None
          else f"{fixed(r['throughput_lo'])}..{fixed(r['throughput_hi'])}")
    bound = bool(r.get("bound"))
    lat = r.get("latency") or {}
    reps = str(r.get("reps")) + (f" ({r['failed_reps']} failed)" if r.get("failed_reps") else "")
    return [str(r.get("server")), str(r.get(key)), cpu.text(r.get("server_cpu")),
            cpu.text(r.get("server_cpu_vs_memcached")),
            cpu.text(r.get("client_cpu")) + (" (higher)" if r.get("client_costs_more") else ""),
            ("<= " if bound else "") + fixed(r.get("throughput_rps")), iv,
            latency_text(lat.get("p50"), bound), latency_text(lat.get("p99"), bound),
            latency_text(lat.get("p999"), bound), fixed(r.get("client_busy"), 2),
            fixed(r.get("server_busy"), 2), fixed(r.get("server_processes")), _blocked(r),
            str(r.get("saturated")), reps]


def _blocked(r: Mapping) -> str:
    b = r.get("blocked_per_req")
    if not b:
        return "-"
    return (">= " if b.get("at_least") else "") + fixed(b["value"], 3)


def _curve_cells(r: Mapping) -> list[str]:
    bound = bool(r.get("bound"))
    lat = r.get("latency") or {}
    knee = (f"past ({r['knee_reps']} of {r['reps']} reps)" if r.get("knee_reps") else "")
    return [str(r.get("server")), fixed(r.get("offered_rps")), fixed(r.get("achieved_rps")),
            fixed(r.get("achieved_ratio"), 2), latency_text(lat.get("p50"), bound),
            latency_text(lat.get("p99"), bound), latency_text(lat.get("p999"), bound),
            cpu.text(r.get("server_cpu")), cpu.text(r.get("server_cpu_vs_memcached")),
            _blocked(r), "-" if r.get("late_share") is None else f"{100 * r['late_share']:.1f}%", knee,
            str(r.get("reps"))]


def _curve_note(section: Mapping) -> str:
    k = section.get("curve_knee") or {}
    return ("lwc-curve: open loop (isob loadgen --rate, Poisson arrivals per connection, "
            "latency from the scheduled send time, so queueing shows: docs/serve.md); a "
            "server's sweep stops after the first rate past the knee: achieved below "
            f"{k.get('achieved_below')} of offered, or p99 above {k.get('p99_growth')} times "
            "its p99 at the lowest rate.  p99.9 only where the requests carry it, else "
            "`max (n=...)`.  late sends: requests an idle connection sent over 100 us after "
            "their time (the generator lagged, not the server; many of them mean the "
            "latencies measured the client too).  CPU per request falls as the rate "
            "rises (a busy server amortizes its wake-ups over more requests: blocked/req "
            "falls with it): compare servers at the same offered rate.")


def _rows(section: Mapping) -> list[Mapping]:
    return [r for v in section.get("serve") or [] for r in v["rows"]] + list(
        section.get("conns") or [])


def _notes(section: Mapping) -> list[str]:
    out = [latency_note()]
    for r in _rows(section):
        if r.get("bound"):
            key = "session" if "session" in r else "conns"
            out.append(f"BOUND {r['server']} {'L' if key == 'session' else 'C'}={r.get(key)}: "
                       f"{r['bound']['why']} ('<=', '>=')")
    return out


def _tables(section: Mapping) -> list[tuple[str, str, list[list[str]]]]:
    """(title, key column, rows) of every table."""
    out = []
    for v in section.get("serve") or []:
        title = (f"lwc-serve: isob serve --session MODE, {v['proto']}, 16 connections, "
                 f"sessions of L requests"
                 + (f", {v['startup_mb']} MiB start-up state" if v.get("startup_mb") else "")
                + (f", {v['doc_bytes']}-byte document" if v.get("doc_bytes") else ""))
        out.append((title, "L", [_cells(r, "session") for r in v["rows"]]))
    if section.get("conns"):
        out.append(("lwc-conns: one context per connection (per-connection) beside one "
                    "store (direct) and memcached, C long-lived connections", "C",
                    [_cells(r, "conns") for r in section["conns"]]))
    return out


ROLLBACK_HEAD = ("variant, L", "rollback / prefork", "rollback / shared", "prefork / shared",
                 "a rollback [us] [95%]", "pages", "us/req", "lwC [us]")


def _variant(r: Mapping) -> str:
    return (str(r.get("proto")) + (f", {r['startup_mb']} MiB start-up" if r.get("startup_mb")
                                   else "")
            + (f", {r['doc_bytes']} B document" if r.get("doc_bytes") else ""))


def _rollback_cells(r: Mapping) -> list[str]:
    return [f"{_variant(r)}, L={r.get('session')}", cpu.text(r.get("vs_prefork")),
            cpu.text(r.get("vs_shared")), cpu.text(r.get("prefork_vs_shared")),
            cpu.text(r.get("rollback_us"), 1), fixed(r.get("pages"), 1),
            fixed(r.get("us_per_request"), 3), fixed(r.get("lwc_us"), 1)]


def _rollback_note() -> str:
    return ("rollback against its baselines: server CPU per request, rollback's over "
            "prefork's (what the rollback costs: lwC's Fig. 2 sets its Apache against "
            "prefork), over shared's (the rollback and a process per session, against one "
            "event loop), and prefork's over shared's (the process per session alone: a "
            "worker serves one connection, whose client has one request in flight, so it "
            "blocks and is woken for every request, where one event loop finds another "
            "connection ready: blocked/req above); geometric means over repetitions, Welch 95% interval.  a "
            "rollback: the server's CPU time per session from the session's end to the jump "
            "back (isob serve's own count), pages: pages copied back per session, us/req: a "
            "rollback over the session's L requests.  lwC: its published create, switch and "
            "destroy of a context with that many dirty pages (87.7 us + 3.4 us per page, "
            "Litton et al., OSDI 2016, evaluation of lwC creation), another operation, "
            "shown for scale (docs/serve.md).")


def _cpu_note() -> str:
    return ("server CPU [us/req]: the server's process tree's CPU time (user + system, reaped "
            "children included) over the requests verified, geometric mean over repetitions "
            "with its 95% t interval widened by the CPU clock's 10 ms step; unlike the "
            "throughput, the side that saturated does not bound it, but the load moves it "
            "(a busy server serves more requests per wake-up: blocked/req), so servers "
            "compare under the same load.  x memcached: its ratio to memcached -t 1 "
            "under the same load in this run; '(higher)': loadgen spent more CPU per "
            "request than the server.  busy: CPU seconds over the run's wall-clock seconds.  "
            "blocked/req: the times the server's threads blocked (voluntary context "
            "switches) per request, mean over repetitions; '>=' where processes of the "
            "server ended during the run and took theirs with them.")


def _saturation_line(section: Mapping) -> str:
    counts = section.get("saturation_counts") or {}
    parts = ", ".join(f"{k}: {n}" for k, n in sorted(counts.items()))
    return (f"saturated (CPU busy >= {section.get('saturated_at')} of the run) per point: "
            f"{parts or 'none'}; highest loadgen CPU {fixed(section.get('max_client_busy'), 2)}, "
            f"highest server CPU {fixed(section.get('max_server_busy'), 2)}.  'neither': "
            f"neither had a full CPU, so the throughput is not the server's CPU limit "
            f"(other load on the machine, or waiting, bounds it; see `isobench check`).")


def _failed_lines(section: Mapping) -> list[str]:
    out = []
    for f in section.get("failed") or []:
        what = " ".join(f"{k}={f[k]}" for k in ("server", "proto", "startup_mb", "doc_bytes",
                                                  "session", "conns") if f.get(k) is not None)
        out.append(f"{f['status'].upper()}: {what}: {f.get('reason')}")
    return out


def text(section: Mapping, doc: Mapping) -> str:
    lines = []
    for title, key, rows in _tables(section):
        head = [h.format(key=key) for h in HEAD]
        lines += ["", table.wrap(title), table.fold(head, rows, set(head))]
    if section.get("curve"):
        lines += ["", table.wrap("lwc-curve: latency against offered load (open loop), "
                                 "32 connections, sessions of 256 requests"),
                  table.fold(list(CURVE_HEAD), [_curve_cells(r) for r in section["curve"]],
                             set(CURVE_HEAD)),
                  table.wrap(_curve_note(section))]
    notes = [_cpu_note(), *_notes(section), _saturation_line(section),
             "threat model: " + section["threat_model"], *_failed_lines(section)]
    lines += ["", *(table.wrap(n) for n in notes)]
    if section.get("rollback_costs"):
        rows = [_rollback_cells(r) for r in section["rollback_costs"]]
        lines += ["", table.wrap("lwc-serve: rollback against prefork and shared, and what a "
                                 "rollback costs"),
                  table.fold(list(ROLLBACK_HEAD), rows, set(ROLLBACK_HEAD)),
                  table.wrap(_rollback_note())]
    if section.get("claims"):
        lines += ["", claims.text(section["claims"])]
    return "\n".join(lines).lstrip("\n")


def markdown(section: Mapping, doc: Mapping) -> str:
    out = ["## lwC use cases as servers (lwc-serve, lwc-conns)", ""]
    for title, key, rows in _tables(section):
        head = [h.format(key=key) for h in HEAD]
        out += [f"**{title}**", "", table.md_table(head, rows), ""]
    if section.get("curve"):
        out += ["**lwc-curve: latency against offered load (open loop)**", "",
                table.md_table(list(CURVE_HEAD), [_curve_cells(r) for r in section["curve"]]),
                "", _curve_note(section), ""]
    out += [f"- {_cpu_note()}", *(f"- {n}" for n in _notes(section)), "", _saturation_line(section), "",
            "Threat model: " + section["threat_model"], ""]
    out += [f"- {line}" for line in _failed_lines(section)]
    if section.get("rollback_costs"):
        out += ["", "**lwc-serve: rollback against prefork and shared, and what a rollback "
                "costs**", "", table.md_table(list(ROLLBACK_HEAD),
                                              [_rollback_cells(r)
                                               for r in section["rollback_costs"]]),
                "", _rollback_note()]
    if section.get("claims"):
        out += ["", claims.markdown(section["claims"])]
    return "\n".join(out)


def _curve_plot(section: Mapping, doc: Mapping):
    """Latency against offered load: a panel per isob server, memcached's
    curve beside it in grey; p50 solid, p99 dashed, p99.9 dotted (only
    where the requests carry it); the first point past the knee crossed."""
    rows = section.get("curve") or []
    servers = [s for s in dict.fromkeys(r["server"] for r in rows) if s != "memcached"]
    if not servers:
        return None
    title = "lwc-curve: latency against offered load (open loop)"
    plt = pyplot()
    fig, axes = plt.subplots(1, len(servers), figsize=(5 * len(servers), 4), squeeze=False,
                             sharey=True)
    styles = (("p50", "-"), ("p99", "--"), ("p999", ":"))
    for ax, server in zip(axes[0], servers):
        for who, colour in ((server, COLOURS.get(server, "#1f77b4")),
                            ("memcached", COLOURS["memcached"])):
            mine = [r for r in rows if r["server"] == who]
            for q, ls in styles:
                pts = [(r["offered_rps"], r["latency"][q]["value"], r.get("knee_reps"))
                       for r in mine if (r.get("latency") or {}).get(q)
                       and r["latency"][q].get("enough") and r["latency"][q].get("value")]
                if not pts:
                    continue
                xs, ys, knees = zip(*pts)
                ax.plot(xs, ys, ls, marker="o", markersize=3, color=colour,
                        label=f"{who} {q.replace('p999', 'p99.9')}")
                for x, y, k in pts:
                    if k:
                        ax.plot([x], [y], "x", color="black", markersize=8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        from matplotlib.ticker import NullFormatter
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("offered load [requests/s]")
        ax.set_ylabel("latency from the scheduled send [us]")
        ax.set_title(f"{server} beside memcached")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{title} (run {doc['run']['run_id']}), median over repetitions; "
                 f"x: past the knee", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    return Plot("lwc-curve", title, fig, "",
                "isob loadgen --rate R (Poisson arrivals per connection) against isob serve "
                "-m direct --session MODE and memcached -t 1; each sweep stops at its knee.")


def plots(section: Mapping, doc: Mapping) -> list:
    variants = [v for v in section.get("serve") or [] if v.get("rows")]
    title = "lwc-serve: throughput against session length"
    curve = _curve_plot(section, doc)
    if not variants:
        return [curve] if curve else []
    plt = pyplot()
    fig, axes = plt.subplots(1, len(variants), figsize=(5 * len(variants), 4), squeeze=False)
    for ax, v in zip(axes[0], variants):
        for server in ("shared", "fork", "prefork", "rollback", "per-connection", "memcached"):
            pts = [(r["session"], r["throughput_rps"]) for r in v["rows"]
                   if r["server"] == server and r.get("throughput_rps")]
            if not pts:
                continue
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker="o", label=server, color=COLOURS[server])
            lo = [r["throughput_lo"] for r in v["rows"]
                  if r["server"] == server and r.get("throughput_rps")]
            hi = [r["throughput_hi"] for r in v["rows"]
                  if r["server"] == server and r.get("throughput_rps")]
            if all(x is not None for x in lo + hi):
                ax.fill_between(xs, lo, hi, alpha=0.2, color=COLOURS[server])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("session length L [requests per connection]")
        ax.set_ylabel("throughput [requests/s]")
        ax.set_title(f"{v['proto']}" + (f", {v['startup_mb']} MiB start-up"
                                         if v.get("startup_mb") else "")
                     + (f", {v['doc_bytes']} B document" if v.get("doc_bytes") else ""))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle(f"{title} (run {doc['run']['run_id']}), geometric mean over repetitions "
                 f"with its 95% interval", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    return [Plot("lwc-serve", title, fig, "",
                 "isob serve -m direct with each session mode under isob loadgen; rollback "
                 "workers roll back to their snapshot after each session, prefork ones do "
                 "not, fork starts a process per session, per-connection makes a context "
                 "per connection."),
            *([curve] if curve else [])]
