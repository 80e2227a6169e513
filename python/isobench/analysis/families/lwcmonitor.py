"""The lwc-monitor section: lwc-serve's points under a reference monitor
(measure/lwcmonitor.py, docs/serve.md "Reference monitors").

Per document size and session length L, a row per monitor (none, inline,
procsep, lwc) as lwc-serve's rows (throughput with its interval, latency,
CPU, the saturated side: analysis/families/lwcserve.py), plus the system calls the
monitor checked per request, and each monitor's throughput over none's
with the Welch interval of the log ratio over repetitions.

lwC's claims (Litton et al., OSDI 2016, "Reference monitoring" and the
Apache prefork figure with inline, procsep and lwc-mon): lwc-mon is about
twice as fast as a separate monitor process (procsep), and the overhead of
monitoring grows with the share of monitored calls among all.  The first
is judged here (analysis/kit/claims.py, claim lwc-refmon-2x-serve) on lwc's
throughput over procsep's at every point, with the Welch interval of the
log ratio over repetitions (quantities.ratio_of_values), by the one rule
every claim of the report is judged by."""

from __future__ import annotations

from typing import Mapping

from ..kit import claims as claim_rule, reference, runs
from ...core import stats
from .lwcserve import SERVE, serve_row
from ..kit.quantities import ratio_of_values
from ..kit.runs import RunData

ORDER = ("none", "inline", "procsep", "lwc")
CLAIM = ("lwC: lwc-mon outperforms a process-separated monitor (procsep) by a factor of two "
         "(Litton et al., OSDI 2016, monitored system calls; Apache prefork with inline, "
         "procsep and lwc-mon monitors, 45-byte documents)")
THREAT = ("the monitor must refuse a request's system call outside the policy (openat outside "
          "the document directory or with \"..\", pread64 on descriptors below 3): inline "
          "only checks (the server could skip it: no isolation), procsep and lwc make the "
          "server unable to make the call itself (a default-deny filter on the server, the "
          "monitor non-dumpable).  Proven by tests/c/test_serve_monitor.c (a GET of "
          "/../../etc/passwd: 403 under every monitor, the file under none) and "
          "tests/c/test_monitors.c (open(2), openat2 and a write over the policy through "
          "/proc/MONITOR/mem: refused under procsep's broker and lwc-mon, through under "
          "inline), not by these figures.")

MONITOR_CLAIM = "lwc-refmon-2x-serve"

# What each monitor stops and what it does not, as tests/c/test_monitors.c
# and tests/c/test_serve_monitor.c measure them (the attacks: a GET outside
# the directory; the server's own open(2) or openat2 of a file outside it;
# a write over the monitor's policy through /proc/MONITOR/mem; a same-uid
# process opening the monitor's memory).  docs/serve.md tables the same.
ISOLATION = {
    "none": "no check: stops nothing",
    "inline": ("no isolation: stops a GET outside the directory only; the server's own open(2), "
               "openat2 and a write over the policy get through (the check is in the server)"),
    "procsep": ("stops a GET outside the directory, the server's open(2), openat2, exec, "
                "io_uring, mmap of a file (default-deny filter: every file call refused, the "
                "broker makes them) and a write over the broker's policy (non-dumpable); does not "
                "stop the server's signals to processes of its uid, nor reads of descriptors it "
                "holds"),
    "lwc": ("stops a GET outside the directory, the server's open(2), openat2, exec, io_uring, "
            "mmap of a file (default-deny filter; openat and pread64 go to the monitor) and a "
            "write over the monitor's policy (non-dumpable monitor); does not stop the server's "
            "signals to processes of its uid, nor reads of descriptors it holds"),
}


def _tputs(cfg) -> list[float]:
    return [p["throughput_rps"] for p in (r["params"] for r in cfg.results)
            if p.get("throughput_rps")]


def build(data: RunData, doc: Mapping) -> dict | None:
    configs = [c for c in data.configs if c.benchmark == SERVE and c.params.get("monitor")
               and not c.params.get("tls_key")]
    failed = [{"monitor": (r.get("params") or {}).get("monitor"),
               "doc_bytes": (r.get("params") or {}).get("doc_bytes"),
               "session": (r.get("params") or {}).get("session"),
               "status": r["status"], "reason": r.get("reason")}
              for r in data.results if r["benchmark"] == SERVE and r["status"] != "ok"
              and (r.get("params") or {}).get("monitor")]
    if not configs and not failed:
        return None

    def failed_of(c) -> int:
        return sum(1 for r in data.results if r["benchmark"] == SERVE and r["status"] == "failed"
                   and runs.identity(r.get("params") or {}) == c.params)

    # Per session mode (the server: shared, prefork, ...), document and L.
    groups: dict[tuple, dict[str, object]] = {}
    for c in configs:
        groups.setdefault((str(c.params.get("server")), c.params.get("doc_bytes"),
                           c.params.get("session")), {})[c.params["monitor"]] = c
    tables: dict[tuple, list[dict]] = {}
    claims = []
    for (server, docb, length), by in sorted(groups.items(),
                                             key=lambda kv: (kv[0][0], kv[0][1] or 0,
                                                             kv[0][2] or 0)):
        base = by.get("none")
        for mon in sorted(by, key=lambda m: ORDER.index(m) if m in ORDER else 9):
            c = by[mon]
            row = serve_row(c, "session", failed_of(c))
            row["monitor"] = mon
            row["isolation"] = ISOLATION.get(mon)
            ps = [r["params"] for r in c.results]
            per = [p["monitored_calls"] / p["requests"] for p in ps
                   if p.get("monitored_calls") is not None and p.get("requests")]
            row["checked_per_request"] = stats.mean(per) if per else None
            row["denied"] = sum(p.get("denied") or 0 for p in ps)
            if base is not None and mon != "none" and _tputs(c) and _tputs(base):
                iv = stats.ratio_interval(_tputs(c), _tputs(base))
                row["vs_none"] = stats.geomean(_tputs(c)) / stats.geomean(_tputs(base))
                row["vs_none_lo"], row["vs_none_hi"] = (iv.low, iv.high) if iv else (None, None)
            tables.setdefault((server, docb), []).append(row)
        if "lwc" in by and "procsep" in by and _tputs(by["lwc"]) and _tputs(by["procsep"]):
            claims.append(claim_rule.judge(
                MONITOR_CLAIM, ratio_of_values(_tputs(by["lwc"]), _tputs(by["procsep"])),
                f"{server}, {docb} B, L={length}: lwc / procsep", claim_rule.LWC_HERE,
                by["lwc"].params))
    return {"claim": CLAIM, "threat_model": THREAT,
            "tables": [{"server": sv, "doc_bytes": d, "rows": rows} for (sv, d), rows in sorted(
                tables.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0))],
            "claims": claims, "failed": failed}


# lwC's isolated OpenSSL key (Litton et al., OSDI 2016, "Isolating OpenSSL
# keys"): 10,000 handshakes, native nginx against the key's code in an lwC;
# the seconds are reference.csv's rows (TLS_REFS), judged by claims.py.
TLS_REFS = {"process": "lwc-tls-native", "lwc": "lwc-tls-key-in-lwc"}
TLS_PER = 10_000
TLS_CLAIM_ID = "lwc-tls-free"
TLS_ORDER = ("process", "lwc")
# The key of runs from before --tls-key, whose params name none.
OLD_KEY = "ecdsa-p256 (before --tls-key)"


def tls_published() -> dict:
    """lwC's seconds for 10,000 handshakes per key location: the reference
    rows (reference.Reference), the one place that holds them."""
    by = {r.id: r for r in reference.load()}
    return {key: by[rid] for key, rid in TLS_REFS.items() if rid in by}


def tls_claim(published: Mapping) -> str:
    """lwC's sentence with the reference rows' digits as lwC printed them."""
    p, lwc = published.get("process"), published.get("lwc")
    if p is None or lwc is None:
        return ("lwC: 10,000 SSL handshakes (reference rows " + ", ".join(TLS_REFS.values())
                + " missing)")
    return (f"lwC: 10,000 SSL handshakes took {p.text()} s with native nginx and {lwc.text()} s "
            f"with the private-key code of OpenSSL in an lwC "
            f"({(lwc.value / p.value - 1) * 100:+.1f}%, \"essentially free\"; {p.citation}, "
            f"{p.where})")
TLS_THREAT = ("a network attacker who makes the server read or leak its own memory (a buffer "
              "overread) must not get the private key: under lwc the serving process never "
              "holds it (tests/c/test_serve_tls.c scans the server's memory for the key's "
              "scalar: absent under lwc, found under process and in the signing context).")


def build_tls(data: RunData, doc: Mapping) -> dict | None:
    """The lwc-tls section: per document size, a row per key location with
    the seconds for the run's handshakes (geometric mean over repetitions,
    its interval) and that scaled to lwC's 10,000, the handshake's median,
    the server's and the client's CPU per handshake; lwc's seconds over
    process's with the Welch interval, judged against lwC's claim
    (claims.py, lwc-tls-free)."""
    every = [c for c in data.configs if c.benchmark == SERVE and c.params.get("tls_key")]
    configs = [c for c in every if c.params.get("session") is None]
    failed = [{"tls_key": (r.get("params") or {}).get("tls_key"),
               "doc_bytes": (r.get("params") or {}).get("doc_bytes"),
               "session": (r.get("params") or {}).get("session"),
               "status": r["status"], "reason": r.get("reason")}
              for r in data.results if r["benchmark"] == SERVE and r["status"] != "ok"
              and (r.get("params") or {}).get("tls_key")]
    if not every and not failed:
        return None
    published = tls_published()
    # Per configuration: session mode, key type (None in runs from before
    # --tls-key, whose key was ECDSA P-256) and document size.
    conf = lambda c: (str(c.params.get("server")), c.params.get("tls_key_type"),
                      c.params.get("doc_bytes"))
    tables: dict[tuple, dict[str, dict]] = {}
    secs_of: dict[tuple, list[float]] = {}
    for c in configs:
        ps = [r["params"] for r in c.results]
        secs = [p["handshake_seconds"] for p in ps if p.get("handshake_seconds")]
        n = c.params.get("handshakes") or 0
        iv = stats.geomean_interval(secs) if secs else None
        g = stats.geomean(secs) if secs else None
        scale = TLS_PER / n if n else None
        srv = [p["server_cpu_per_handshake_us"] for p in ps
               if p.get("server_cpu_per_handshake_us") is not None]
        cli = [p["client_cpu_s"] / n * 1e6 for p in ps if p.get("client_cpu_s") is not None and n]
        p50 = [p["handshake_p50_us"] for p in ps if p.get("handshake_p50_us") is not None]
        key = c.params["tls_key"]
        secs_of[(*conf(c), key)] = secs
        tables.setdefault(conf(c), {})[key] = {
            "tls_key": key, "handshakes": n, "reps": len(ps),
            "seconds": g, "seconds_lo": iv.low if iv else None, "seconds_hi": iv.high if iv else None,
            "per_10000_s": g * scale if g is not None and scale else None,
            "per_10000_lo": iv.low * scale if iv and scale else None,
            "per_10000_hi": iv.high * scale if iv and scale else None,
            "published_s": published[key].value if key in published else None,
            "handshake_p50_us": stats.median(p50) if p50 else None,
            "server_cpu_per_handshake_us": stats.mean(srv) if srv else None,
            "client_cpu_per_handshake_us": stats.mean(cli) if cli else None}
    out_tables, claims = [], []
    for (server, ktype, docb), rows in sorted(tables.items(),
                                             key=lambda kv: (kv[0][0], str(kv[0][1]),
                                                             kv[0][2] or 0)):
        out_tables.append({"server": server, "tls_key_type": ktype, "doc_bytes": docb,
                           "rows": [rows[k] for k in sorted(
                               rows, key=lambda k: TLS_ORDER.index(k) if k in TLS_ORDER else 9)]})
        a = secs_of.get((server, ktype, docb, "lwc"))
        b = secs_of.get((server, ktype, docb, "process"))
        if a and b:
            claims.append(claim_rule.judge(TLS_CLAIM_ID, ratio_of_values(a, b),
                                           f"{server}, {ktype or OLD_KEY}, {docb} B: "
                                           "lwc / process",
                                           claim_rule.LWC_HERE,
                                           {"server": server, "tls_key_type": ktype}))
    return {"claim": tls_claim(published), "threat_model": TLS_THREAT, "tables": out_tables,
            "claims": claims, "failed": failed,
            "sweep": _tls_sweep([c for c in every if c.params.get("session") is not None])}


def _tls_sweep(configs) -> list[dict]:
    """HTTPS throughput per (document, L, key): the geometric mean over
    repetitions with its interval, tlsload's latency quantiles (median over
    repetitions), the server's CPU per request, and lwc's throughput over
    process's at the same L with the Welch interval."""
    tput_of: dict[tuple, list[float]] = {}
    rows = []
    for c in configs:
        ps = [r["params"] for r in c.results]
        tput = [p["throughput_rps"] for p in ps if p.get("throughput_rps")]
        iv = stats.geomean_interval(tput) if tput else None
        cpu = [p["server_cpu_s"] / p["requests"] * 1e6 for p in ps
               if p.get("server_cpu_s") is not None and p.get("requests")]
        key = (str(c.params.get("server")), c.params.get("tls_key_type"),
               c.params.get("doc_bytes"), c.params.get("session"))
        tput_of[(*key, c.params["tls_key"])] = tput
        row = {"server": key[0], "tls_key_type": key[1], "doc_bytes": key[2],
               "session": key[3], "tls_key": c.params["tls_key"],
               "reps": len(ps), "throughput_rps": stats.geomean(tput) if tput else None,
               "throughput_lo": iv.low if iv else None, "throughput_hi": iv.high if iv else None,
               "server_cpu_per_request_us": stats.mean(cpu) if cpu else None}
        for q in ("p50", "p99"):
            xs = [p[f"latency_{q}_us"] for p in ps if p.get(f"latency_{q}_us") is not None]
            row[f"latency_{q}_us"] = stats.median(xs) if xs else None
        rows.append(row)
    for row in rows:
        if row["tls_key"] == "lwc":
            at = (row["server"], row["tls_key_type"], row["doc_bytes"], row["session"])
            a, b = tput_of.get((*at, "lwc")), tput_of.get((*at, "process"))
            if a and b:
                iv = stats.ratio_interval(a, b)
                row["vs_process"] = stats.geomean(a) / stats.geomean(b)
                row["vs_process_lo"], row["vs_process_hi"] = (iv.low, iv.high) if iv else (None,
                                                                                          None)
    order = lambda r: (r["server"], str(r["tls_key_type"]), r["doc_bytes"] or 0,
                       r["session"] or 0,
                       TLS_ORDER.index(r["tls_key"]) if r["tls_key"] in TLS_ORDER else 9)
    return sorted(rows, key=order)
