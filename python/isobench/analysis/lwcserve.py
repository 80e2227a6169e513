"""The lwc-serve and lwc-conns section (measure/lwcserve.py, docs/serve.md):
per server and session length L (lwc-serve), per server and concurrency
(lwc-conns), the throughput over repetitions with its interval, the
latency percentiles isob loadgen measured over every request, and both CPU
figures, with which of generator and server saturated its CPU first.

The rows go out in a fixed order (variant, then server, then L or C) so
that the renderer (render/lwcserve.py) only lays them out."""

from __future__ import annotations

from typing import Mapping

from . import stats
from .runs import RunData

SERVE, CONNS = "lwc-serve", "lwc-conns"
SERVE_ORDER = ("shared", "fork", "rollback")
CONNS_ORDER = ("per-connection", "direct", "memcached")

# A CPU busy for at least this share of the run's wall-clock time is called
# saturated: loadgen and the server each sit on a CPU of their own, and on
# a loaded machine neither reaches 1.0 exactly.
SATURATED = 0.9

THREAT = ("rollback and fork: a later session (client) must not see what an earlier one "
          "stored; per-connection: one connection must not see another's data.  The "
          "server is trusted; the clients are the attackers.  Proven by the property "
          "tests (tests/c/test_serve_session.c), not by these throughput figures.")


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return stats.mean(xs) if xs else None


def _saturation(client: float | None, server: float | None) -> str:
    if client is None or server is None:
        return "unknown"
    if server >= SATURATED and client < SATURATED:
        return "server"
    if client >= SATURATED and server < SATURATED:
        return "client"
    if client >= SATURATED and server >= SATURATED:
        return "both"
    return "neither"


def _row(cfg, key: str) -> dict:
    ps = [r["params"] for r in cfg.results]
    tput = [p.get("throughput_rps") for p in ps if p.get("throughput_rps")]
    iv = stats.geomean_interval(tput) if tput else None
    client, server = _mean(p.get("client_busy") for p in ps), _mean(p.get("server_busy") for p in ps)
    row = {"server": cfg.params.get("server"), key: cfg.params.get(key),
           "reps": len(ps),
           "throughput_rps": stats.geomean(tput) if tput else None,
           "throughput_lo": iv.low if iv else None, "throughput_hi": iv.high if iv else None,
           "client_busy": client, "server_busy": server,
           "server_processes": max((p.get("server_processes") or 0 for p in ps), default=None),
           "saturated": _saturation(client, server)}
    for q in ("p50", "p99", "p999"):
        row[f"latency_{q}_us"] = _mean(p.get(f"latency_{q}_us") for p in ps)
    return row


def _failed(data: RunData, bench: str, key: str) -> list[dict]:
    out = []
    for r in data.results:
        if r["benchmark"] == bench and r["status"] != "ok":
            p = r.get("params") or {}
            out.append({"server": p.get("server"), key: p.get(key), "proto": p.get("proto"),
                        "startup_mb": p.get("startup_mb"), "status": r["status"],
                        "reason": r.get("reason")})
    return out


def build(data: RunData, doc: Mapping) -> dict | None:
    serve = [c for c in data.configs if c.benchmark == SERVE]
    conns = [c for c in data.configs if c.benchmark == CONNS]
    failed_serve, failed_conns = _failed(data, SERVE, "session"), _failed(data, CONNS, "conns")
    if not (serve or conns or failed_serve or failed_conns):
        return None
    variants: dict[tuple, list[dict]] = {}
    for c in serve:
        variants.setdefault((c.params.get("proto"), c.params.get("startup_mb") or 0), []).append(
            _row(c, "session"))
    order = lambda r: (SERVE_ORDER.index(r["server"]) if r["server"] in SERVE_ORDER else 9,
                       r["session"] or 0)
    serve_out = [{"proto": proto, "startup_mb": mb, "rows": sorted(rows, key=order)}
                 for (proto, mb), rows in sorted(variants.items(),
                                                 key=lambda kv: (kv[0][1], kv[0][0] != "memcache"))]
    conn_rows = sorted((_row(c, "conns") for c in conns),
                       key=lambda r: (r["conns"] or 0,
                                      CONNS_ORDER.index(r["server"])
                                      if r["server"] in CONNS_ORDER else 9))
    every = [r for v in serve_out for r in v["rows"]] + conn_rows
    verdicts = {}
    for r in every:
        verdicts[r["saturated"]] = verdicts.get(r["saturated"], 0) + 1
    return {"threat_model": THREAT, "saturated_at": SATURATED,
            "serve": serve_out, "conns": conn_rows,
            "failed": failed_serve + failed_conns,
            "saturation_counts": verdicts,
            "max_client_busy": max((r["client_busy"] for r in every
                                    if r["client_busy"] is not None), default=None),
            "max_server_busy": max((r["server_busy"] for r in every
                                    if r["server_busy"] is not None), default=None)}
