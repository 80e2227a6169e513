"""The lwc-serve, lwc-conns and lwc-curve section (measure/lwcserve.py,
docs/serve.md): per server and session length L (lwc-serve), per server
and concurrency (lwc-conns), per server and offered rate (lwc-curve), the
server's CPU per request over repetitions with its interval and its ratio
to memcached's at the same point (analysis/kit/cpu.py: the headline), the
throughput over repetitions with its interval, the
latency quantiles isob loadgen measured over every request (p99 and p99.9
only where the requests carry them, else the maximum: tails.py), and both
CPU figures, with which of generator and server saturated its CPU first.
A point some of whose repetitions failed gives bounds, and says so.

The rows go out in a fixed order (variant, then server, then L or C) so
that the renderer (render/families/lwcserve.py) only lays them out."""

from __future__ import annotations

from typing import Mapping

from ..kit import claims, cpu, runs, tails
from ...core import stats
from ..kit.quantities import published, ratio_of_values
from ..kit.runs import RunData

SERVE, CONNS, CURVE = "lwc-serve", "lwc-conns", "lwc-curve"
SERVE_ORDER = ("shared", "fork", "prefork", "rollback", "per-connection", "memcached")
REFERENCE = "memcached"
CONNS_ORDER = ("per-connection", "direct", "memcached")
CURVE_ORDER = ("shared", "rollback", "memcached")

# Servers whose processes end while they serve, in lwc-serve: fork (a
# process per session), per-connection (a context per connection, which
# ends with its session of L requests); rollback by fork (--rollback-method
# fork) too, told by its params.  In lwc-conns a connection, and its
# context, lasts the whole run.
ENDS_PROCESSES = ("fork", "per-connection")

# A CPU busy for at least this share of the run's wall-clock time is called
# saturated: loadgen and the server each sit on a CPU of their own, and on
# a loaded machine neither reaches 1.0 exactly.
SATURATED = 0.9

THREAT = ("rollback and fork: a later session (client) must not see what an earlier one "
          "stored; per-connection: one connection must not see another's data; shared and "
          "prefork isolate nothing (baselines).  The "
          "server is trusted; the clients are the attackers.  Proven by the property "
          "tests (tests/c/test_serve_session.c), not by these throughput figures.")


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return stats.mean(xs) if xs else None


def saturation(client: float | None, server: float | None) -> str:
    """Which side had a full CPU: server, client, both, neither, unknown."""
    if client is None or server is None:
        return "unknown"
    if server >= SATURATED and client < SATURATED:
        return "server"
    if client >= SATURATED and server < SATURATED:
        return "client"
    if client >= SATURATED and server >= SATURATED:
        return "both"
    return "neither"


_saturation = saturation


# The latency quantiles of each row, with the name of their params key.
QUANTILES = (("p50", 0.50), ("p99", 0.99), ("p999", 0.999))


def _tails(cfg, ps: list[dict]) -> dict:
    """Each quantile of QUANTILES over the configuration's repetitions
    (tails.py): per repetition, isob loadgen's figure over all its requests
    (n = requests) with the order-statistic interval of the kept samples,
    or its maximum where n(1 - q) < tails.MIN_TAIL; then the median over
    repetitions."""
    out = {}
    for name, q in QUANTILES:
        per = []
        for r, p in zip(cfg.results, ps):
            xs = cfg.rep_samples.get(r["result_id"])
            xs = [] if xs is None else xs  # a sorted array (runs.group)
            n = p.get("requests") or len(xs)
            if not n:
                continue
            t = tails.tail_of(xs, q, n)
            # loadgen's figures are over every request, the kept samples only
            # a systematic subsample of them: its figures stand, in us.
            us = lambda v: None if v is None else v / 1000.0
            top = p.get("latency_max_us")
            top = us(t.maximum) if top is None else top
            mine = p.get(f"latency_{name}_us") if t.enough else top
            mine = us(t.value) if mine is None else mine
            iv = (us(t.interval[0]), us(t.interval[1])) if t.interval else None
            per.append(tails.Tail(q, mine, iv, n, t.enough, t.method, top))
        out[name] = tails.over_repetitions(per)
    return out


def serve_row(cfg, key: str, failed: int = 0) -> dict:
    """One (server, L or C) row.  failed: the repetitions of this point that
    failed (no verified throughput): the throughput over the others is then
    an upper bound and the latencies lower bounds, and the row says so."""
    ps = [r["params"] for r in cfg.results]
    tput = [p.get("throughput_rps") for p in ps if p.get("throughput_rps")]
    iv = stats.geomean_interval(tput) if tput else None
    client, server = _mean(p.get("client_busy") for p in ps), _mean(p.get("server_busy") for p in ps)
    lat = _tails(cfg, ps)
    row = {"server": cfg.params.get("server"), key: cfg.params.get(key),
           "reps": len(ps), "failed_reps": failed,
           "bound": ({"throughput": "at most", "latency": "at least",
                      "why": f"{failed} of {len(ps) + failed} repetitions failed and count in "
                             "neither figure: the throughput of the others is an upper bound, "
                             "their latencies lower bounds"} if failed else None),
           "throughput_rps": stats.geomean(tput) if tput else None,
           "throughput_values": tput,
           "throughput_lo": iv.low if iv else None, "throughput_hi": iv.high if iv else None,
           "client_busy": client, "server_busy": server,
           "server_processes": max((p.get("server_processes") or 0 for p in ps), default=None),
           "saturated": saturation(client, server), "latency": lat}
    for name, _ in QUANTILES:
        t = lat.get(name)
        row[f"latency_{name}_us"] = t["value"] if t and t["enough"] else None
    # The headline: CPU per request of each side, one value per repetition
    # (analysis/kit/cpu.py), the server's widened by the CPU clock's step where
    # part of its time was counted in ticks (a server that ends processes:
    # its reaped children's); the client's (loadgen's rusage) is in us.
    ends = cfg.params.get("server") in ENDS_PROCESSES or any(
        p.get("rollback_method") == "fork" for p in ps)
    step = cpu.resolution([p.get("verified") for p in ps],
                          ticked=[cpu.counted_in_ticks(p, ends) for p in ps])
    srv = [p.get("server_cpu_us_per_req") for p in ps]
    cli = [p.get("client_cpu_us_per_req") for p in ps]
    row.update({"server_cpu": cpu.per_request(srv, step), "client_cpu": cpu.per_request(cli),
                "client_costs_more": cpu.higher_side(cli, srv) == "client",
                "server_cpu_values": srv, "server_cpu_vs_memcached": None})
    # How often the server blocked per request (loadgen's reading of its
    # threads' voluntary switches, live threads only): at least that where
    # processes of it ended during the run, which loadgen sees only of those
    # alive at its first reading, so also for every server that ends
    # processes as it serves (a process per session or connection).
    blocked = [p.get("server_blocked_per_req") for p in ps
               if isinstance(p.get("server_blocked_per_req"), (int, float))]
    churns = cfg.benchmark == SERVE and (cfg.params.get("server") in ENDS_PROCESSES
                                         or any(p.get("rollback_method") == "fork"
                                                for p in ps))
    row["blocked_per_req"] = ({"value": stats.mean(blocked), "reps": len(blocked),
                               "at_least": churns or any(p.get("server_processes_ended")
                                                         for p in ps)}
                              if blocked else None)
    # A rollback server's own account of its rollbacks (measure/lwcserve.py,
    # rollback_totals): CPU microseconds and pages copied back per session.
    per = [p.get("rollback_us_per_session") for p in ps]
    if any(isinstance(x, (int, float)) for x in per):
        row["rollback"] = {"us": cpu.per_request(per),
                           "pages": _mean(p.get("rollback_pages_per_session") for p in ps),
                           "method": next((p["rollback_method"] for p in ps
                                           if p.get("rollback_method")), None)}
    if cfg.benchmark == CURVE:
        ach = [p.get("achieved_rps") for p in ps if p.get("achieved_rps")]
        row.update({"offered_rps": cfg.params.get("rate"),
                    "achieved_rps": stats.geomean(ach) if ach else None,
                    "achieved_ratio": _mean(p.get("achieved_ratio") for p in ps),
                    "knee_reps": sum(1 for p in ps if p.get("knee")),
                    # Sent over 100 us late by an idle connection: the
                    # generator lagged there, not the server.
                    "late_share": _mean(p["late"] / p["verified"] for p in ps
                                        if isinstance(p.get("late"), int) and p.get("verified"))})
    return row


def _step(row: dict) -> float:
    """The CPU clock's step in a row's CPU per request (cpu.resolution)."""
    return (row.get("server_cpu") or {}).get("step", 0.0)


def _speed_over(r: dict, base: dict, label: str) -> tuple[dict | None, str]:
    """r's speed over base's at one session length, and what it is of: the
    server's CPU per request, base's over r's (the throughputs each would
    reach with its CPU saturated), where both have it; else throughput,
    which the client may bound (a shared server often waits for the client
    here)."""
    mine_name, theirs_name = r["server"], base["server"]
    # A speed ratio: the reverse of the tables' CPU ratios, and named so.
    what = f"{label}, L={r['session']}: {mine_name}'s speed / {theirs_name}'s"
    cpu_of = lambda row: [v for v in row.get("server_cpu_values") or () if v]
    mine, theirs = cpu_of(r), cpu_of(base)
    if mine and theirs:
        return (ratio_of_values(theirs, mine, _step(base), _step(r)),
                what + " (server CPU per request)")
    return (ratio_of_values(r["throughput_values"], base["throughput_values"]),
            what + " (throughput)")


def _against_memcached(rows: list[dict], key: str) -> None:
    """Each row's server CPU per request over memcached's at the same key
    (L, C or offered rate), with its interval (analysis/kit/cpu.py)."""
    ref = {r[key]: r for r in rows if r["server"] == REFERENCE}
    for r in rows:
        m = ref.get(r[key])
        if m is not None and r is not m:
            r["server_cpu_vs_memcached"] = cpu.ratio(r["server_cpu_values"],
                                                     m["server_cpu_values"], _step(r), _step(m))


def _rollback_costs(serve_out: list[dict]) -> list[dict]:
    """Per variant and L, rollback's server CPU per request over each
    baseline's with its interval (cpu.ratio): over prefork's, what the
    rollback costs (lwC's Fig. 2 comparison); over shared's, what the
    rollback and a process per session cost together against one event
    loop; and prefork's over shared's, the process per session alone.
    Beside them what a rollback costs, as the server counted it (CPU us and
    pages copied back per session, its us per request at this L), and lwC's
    published create-switch-destroy at the same number of pages (87.7 us +
    3.4 us per dirty page: a different operation, shown for scale)."""
    pub = {p["id"]: p for p in published(["lwc-create", "lwc-create-per-dirty-page"])}
    fixed, per_page = pub.get("lwc-create"), pub.get("lwc-create-per-dirty-page")
    out = []
    for v in serve_out:
        by = {(r["server"], r["session"]): r for r in v["rows"]}
        for r in v["rows"]:
            if r["server"] != "rollback":
                continue
            pre, sha = by.get(("prefork", r["session"])), by.get(("shared", r["session"]))
            over = lambda a, b: (cpu.ratio(a["server_cpu_values"], b["server_cpu_values"],
                                           _step(a), _step(b)) if a and b else None)
            rb = r.get("rollback") or {}
            us, pages = (rb.get("us") or {}).get("value"), rb.get("pages")
            out.append({"proto": v["proto"], "startup_mb": v["startup_mb"],
                        "doc_bytes": v["doc_bytes"], "session": r["session"],
                        "vs_prefork": over(r, pre), "vs_shared": over(r, sha),
                        "prefork_vs_shared": over(pre, sha),
                        "rollback_us": rb.get("us"), "pages": pages, "method": rb.get("method"),
                        "us_per_request": us / r["session"] if us and r["session"] else None,
                        "lwc_us": (fixed["value"] + per_page["value"] * pages
                                   if fixed and per_page and pages is not None else None)})
    return out


def _failed(data: RunData, bench: str, key: str) -> list[dict]:
    out = []
    for r in data.results:
        if r["benchmark"] == bench and r["status"] != "ok":
            p = r.get("params") or {}
            out.append({"server": p.get("server"), key: p.get(key), "proto": p.get("proto"),
                        "startup_mb": p.get("startup_mb"), "doc_bytes": p.get("doc_bytes"),
                        "monitor": p.get("monitor"), "tls_key": p.get("tls_key"),
                        "status": r["status"],
                        "reason": r.get("reason")})
    return out


# The session length from which lwC claims rollback matches no isolation
# (Fig. 2: "for session lengths of 256 and larger").
CLAIM_SESSION = 256
# The session lengths lwC's nginx figure shows.
NGINX_SESSIONS = (64, 256)

# lwC's claims on its servers: (claim, the server it is about, the
# configuration without isolation it is set against, what stands for lwC
# here).  Fig. 2 sets lwC's Apache, whose workers roll back after each
# session, against Apache prefork, the same workers without it; the nginx
# figure sets a context per session in the event loop (lwc-event) against
# the plain event loop.  shared is an event loop, not prefork: rollback
# against it is in the rollback table (rollback_costs), not a claim.
CLAIM_PAIRS = (("lwc-rollback-comparable", "rollback", "prefork", claims.ROLLBACK_HERE,
                (CLAIM_SESSION, None)),
               ("lwc-event-comparable", "per-connection", "shared", claims.LWC_HERE,
                NGINX_SESSIONS))


def _startup(mb) -> str:
    return f", {mb} MiB start-up" if mb else ""


def build(data: RunData, doc: Mapping) -> dict | None:
    # Points under a reference monitor have their own section (lwcmonitor.py).
    serve = [c for c in data.configs if c.benchmark == SERVE and not c.params.get("monitor")
             and not c.params.get("tls_key")]
    conns = [c for c in data.configs if c.benchmark == CONNS]
    curve = [c for c in data.configs if c.benchmark == CURVE]
    failed_serve, failed_conns = _failed(data, SERVE, "session"), _failed(data, CONNS, "conns")
    failed_serve = [f for f in failed_serve if not f.get("monitor") and not f.get("tls_key")]
    failed_curve = _failed(data, CURVE, "rate")
    if not (serve or conns or curve or failed_serve or failed_conns or failed_curve):
        return None
    def failed_of(c) -> int:
        return sum(1 for r in data.results if r["benchmark"] == c.benchmark
                   and r["status"] == "failed"
                   and runs.identity(r.get("params") or {}) == c.params)

    variants: dict[tuple, list[dict]] = {}
    for c in serve:
        # doc_bytes: lwc-serve --doc-bytes (lwcmonitor.py); None where the
        # document is the default 45 bytes.
        variants.setdefault((c.params.get("proto"), c.params.get("startup_mb") or 0,
                             c.params.get("doc_bytes")), []).append(
            serve_row(c, "session", failed_of(c)))
    order = lambda r: (SERVE_ORDER.index(r["server"]) if r["server"] in SERVE_ORDER else 9,
                       r["session"] or 0)
    serve_out = [{"proto": proto, "startup_mb": mb, "doc_bytes": docb,
                  "rows": sorted(rows, key=order)}
                 for (proto, mb, docb), rows in sorted(
                     variants.items(),
                     key=lambda kv: (kv[0][1], kv[0][0] != "memcache", kv[0][2] or 0))]
    conn_rows = sorted((serve_row(c, "conns", failed_of(c)) for c in conns),
                       key=lambda r: (r["conns"] or 0,
                                      CONNS_ORDER.index(r["server"])
                                      if r["server"] in CONNS_ORDER else 9))
    for v in serve_out:
        _against_memcached(v["rows"], "session")
    _against_memcached(conn_rows, "conns")
    curve_rows = sorted((serve_row(c, "rate", failed_of(c)) for c in curve),
                        key=lambda r: (CURVE_ORDER.index(r["server"])
                                       if r["server"] in CURVE_ORDER else 9, r["rate"] or 0))
    _against_memcached(curve_rows, "rate")
    every = [r for v in serve_out for r in v["rows"]] + conn_rows + curve_rows
    judged = []
    for v in serve_out:
        by = {(r["server"], r["session"]): r for r in v["rows"]}
        label = f"{v['proto']}{_startup(v['startup_mb'])}"
        for r in v["rows"]:
            for cid, mine, theirs, here, (lo, hi) in CLAIM_PAIRS:
                base = by.get((theirs, r["session"]))
                inside = lo <= (r["session"] or 0) and (hi is None or r["session"] <= hi)
                if r["server"] == mine and base and inside:
                    judged.append(claims.judge(cid, *_speed_over(r, base, label), here))
    verdicts = {}
    for r in every:
        verdicts[r["saturated"]] = verdicts.get(r["saturated"], 0) + 1
    return {"threat_model": THREAT, "saturated_at": SATURATED,
            "serve": serve_out, "conns": conn_rows, "curve": curve_rows, "claims": judged,
            "rollback_costs": _rollback_costs(serve_out),
            "curve_knee": {"achieved_below": 0.9, "p99_growth": 10.0},
            "failed": failed_serve + failed_conns + failed_curve,
            "saturation_counts": verdicts,
            "max_client_busy": max((r["client_busy"] for r in every
                                    if r["client_busy"] is not None), default=None),
            "max_server_busy": max((r["server_busy"] for r in every
                                    if r["server_busy"] is not None), default=None)}
