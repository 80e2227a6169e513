"""The oslat section: SEIMI's Tables IV, V, VI and III (Wang et al., IEEE S&P
2020), measured here with each confinement in force, and the published
figures beside them.

A row is one oslat cell (a primitive and its cell: "ctx 2p/0K", "file 0K
create") at one placement; a column is one confinement variant of the run
(`none` first).  Each entry holds the configuration's headline (summary.py)
in microseconds, as SEIMI's tables are, and for every confinement but none
its slowdown: the ratio to none's headline in the same row of the same run,
with its interval over repetitions (kit/ratios.py).

Averages, per table and column, over the rows that stand for one of SEIMI's
columns (AVERAGED) and that every confinement of the table has, so that
the averages of one table run over the same rows (n of `of`; a column with
more rows of its own has their average too, as `own`):

    geomean_ratio   the geometric mean of the slowdowns (isobench's rule,
                    docs/methodology.md), also given as an overhead, with
                    its 95% interval over repetitions (averages.py)
    seimi_method    the geometric mean of the percentage overheads, which is
                    how SEIMI's printed averages of Tables IV-VI come out
                    (Tables V and VI exactly; Table IV's 22.51% comes out
                    as 22.61% from its printed overheads).
                    Shown beside ours under that name, never as ours: it is
                    undefined when an overhead is zero or negative and lower
                    than the geometric mean of ratios otherwise.

The published columns (data/reference.csv: the native rows map onto the
unconfined cell, SEIMI's onto no local row and stand beside their native
twin) are SEIMI's native and SEIMI figures for the same operation, on
other hardware: they are set beside ours, never mixed into any statistic
of ours.  Table IV's figures are LMbench's context-switch time (the raw
hop less the pipe and working-set overhead): they stand beside each ctx
row's switch_us, the same subtraction, not beside its raw hop.  Table III's
figures have not been transcribed into the reference file, so it has no
published column.

Beside SEIMI's tables, LMbench's bandwidths (table "BW": bw_pipe, bw_unix,
bw_tcp, bw_mem rd/wr/cp, bw_file_rd, bw_mmap_rd; McVoy & Staelin, USENIX
ATC 1996, section 5).  A sample there is the time of one pass that moved
work.bytes bytes; each entry also holds the bandwidth, MB/s with MB = 10^6
bytes: bytes over the headline time, its interval the bytes over the
headline interval's ends (high over low).  Their "slowdown" is the same
ratio of times as every other row's, so it is none's MB/s over the
confinement's.  No published column and no average: SEIMI printed none.

The rows that touch a file (file, mmap, page-fault, bw-file-rd, bw-mmap-rd)
say the filesystem they ran on and the test directory (work.fs_type,
work.fs_dir), because a file's cost depends on it and SEIMI's Table V does
not say which filesystem its figures came from.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from ..kit import averages, reference, units
from ...core import stats
from ..kit.ratios import ratio_of
from ..kit.runs import RunData

BENCHMARK = "oslat"
BASELINE = "none"

# SEIMI's tables, in the order the paper prints them: what each measures,
# and the LMbench programs behind it.
TABLES = (("IV", "context switch", "lat_ctx"),
          ("V", "file and VM operations", "lat_fs, lat_mmap, lat_sig prot, lat_pagefault, "
                                          "lat_select"),
          ("VI", "local communication, round trips", "lat_pipe, lat_unix, lat_udp, lat_tcp, "
                                                     "lat_rpc, lat_connect"),
          ("III", "process operations", "lat_syscall, lat_sig, lat_proc"),
          ("BW", "bandwidths", "bw_pipe, bw_unix, bw_tcp, bw_mem, bw_file_rd, bw_mmap_rd"))
TABLE_ORDER = [t[0] for t in TABLES]

# The rows that stand for SEIMI's columns, by table: (primitive, cell).
# Table IV's raw hops (not the overhead cells), Table V's eight columns with
# mmap at its summary size (64 MiB: docs/oslat.md), Table VI's seven at
# LMbench's default message size, and Table III's operations (the vDSO clock
# is the floor, not one of LMbench's).  The averages run over these only.
AVERAGED: dict[str, tuple[tuple[str, str], ...]] = {
    "IV": tuple(("ctx", c) for c in ("2p/0K", "2p/16K", "2p/64K", "8p/16K", "8p/64K",
                                     "16p/16K", "16p/64K")),
    "V": (("file", "0K create"), ("file", "0K delete"), ("file", "10K create"),
          ("file", "10K delete"), ("mmap", "64M"), ("prot-fault", "write to read-only page"),
          ("page-fault", "first read of a resident file page"), ("select-file", "100 fds")),
    "VI": (("pipe", "1B"), ("unix", "1B"), ("udp", "4B"), ("rpc-udp", "1B"), ("tcp", "1B"),
           ("rpc-tcp", "1B"), ("tcp-connect", "connect")),
    "III": (("null-syscall", "getppid"), ("null-io", "read /dev/zero"),
            ("null-io", "write /dev/null"), ("stat", "stat"), ("open-close", "open+close"),
            ("sig-install", "sigaction"), ("sig-catch", "kill SIGUSR1"),
            ("fork-exit", "fork+exit"), ("fork-exec", "fork+execve"),
            ("fork-sh", "fork+/bin/sh -c")),
}

# The averages SEIMI prints under Tables IV-VI (data/reference.csv), each a
# geometric mean of percentage overheads.
PRINTED_AVERAGES = {"IV": "seimi-ctx-average", "V": "seimi-fsvm-average",
                    "VI": "seimi-ipc-average"}

# The order of the columns: the baseline, then the confinements as isob
# lists them (from the cheapest kind of restriction to the dearest), then
# any other in the order measured.
CONFINE_ORDER = (BASELINE, "seccomp-allow", "seccomp-notify", "ptrace", "landlock", "userns")

NATIVE_SUFFIX, SEIMI_SUFFIX = "-native", "-seimi"

# LMbench's bandwidths: not one of SEIMI's tables; their entries carry MB/s.
BANDWIDTH_TABLE = "BW"
MB = 1e6  # bytes in the MB of MB/s (decimal, as LMbench's bw_* print)
BANDWIDTH_UNIT = "MB/s (MB = 10^6 bytes)"

SEIMI_METHOD = "geometric mean of percentage overheads (SEIMI's averages)"
OUR_METHOD = "geometric mean of ratios to none (isobench)"


def geomean_of_percentages(ratios: Sequence[float]) -> tuple[float | None, str | None]:
    """SEIMI's average, reproduced to set beside ours: the geometric mean of
    100 * (ratio - 1).  (None, why) where an overhead is zero or negative,
    for which it is undefined."""
    pcts = [100.0 * (r - 1.0) for r in ratios]
    bad = [p for p in pcts if p <= 0]
    if not pcts:
        return None, "no rows"
    if bad:
        return None, (f"undefined: {len(bad)} of {len(pcts)} overheads are zero or negative "
                      f"(lowest {min(bad):+.1f}%)")
    return stats.geomean(pcts), None


def column_of(params: Mapping) -> tuple[str, str]:
    return str(params.get("confine")), str(params.get("confine_variant"))


def _row_key(params: Mapping) -> tuple[str, str, str, str]:
    return (str(params.get("table")), str(params.get("primitive")), str(params.get("cell")),
            str(params.get("placement")))


def _us(value_ns: float | None) -> float | None:
    return units.convert(value_ns, "ns", "us")


def _entry(e: Mapping) -> dict:
    """One configuration as a table entry: its headline in us (where the unit
    converts), its own unit and value, and its repetitions."""
    h = e["headline"]
    iv = h.get("interval_ns")
    return {"status": "ok", "label": e["label"], "value": h["value"], "unit": e["unit"],
            "us": _us(h["ns"]), "interval_us": [_us(iv[0]), _us(iv[1])] if iv else None,
            "source": h["source"], "reps": h["reps"]}


def _work(e: Mapping, key: str) -> list:
    """A work member as each repetition printed it."""
    return [(r["outputs"].get("work") or {}).get(key) for r in e["repetitions"]]


def _bandwidth(e: Mapping, cell: Mapping) -> None:
    """A bandwidth row's MB/s: the bytes one sample moved over the headline
    time, the interval likewise over the interval's ends (a longer time is a
    lower bandwidth, so the ends swap).  Set on cell in place; nothing where
    the repetitions disagree on the bytes or the time is missing."""
    sizes = {b for b in _work(e, "bytes") if isinstance(b, (int, float)) and b > 0}
    ns = e["headline"].get("ns")
    if len(sizes) != 1 or not ns or ns <= 0:
        cell["mb_s"] = None
        return
    nbytes = sizes.pop()
    cell["bytes"] = nbytes
    cell["mb_s"] = nbytes / (ns * 1e-9) / MB
    iv = e["headline"].get("interval_ns")
    cell["interval_mb_s"] = ([nbytes / (iv[1] * 1e-9) / MB, nbytes / (iv[0] * 1e-9) / MB]
                             if iv and iv[0] and iv[0] > 0 and iv[1] and iv[1] > 0 else None)


def _filesystems(entries: Sequence[Mapping]) -> list[dict]:
    """Where the rows that touch a file ran, by filesystem: its name as isob
    printed it (statfs's f_type), the test directories (one per measuring
    process) and the rows."""
    seen: dict[str, dict] = {}
    for e in entries:
        p = e["params"]
        for fs, d in zip(_work(e, "fs_type"), _work(e, "fs_dir")):
            if not fs:
                continue
            f = seen.setdefault(str(fs), {"fs_type": str(fs), "dirs": [], "rows": []})
            if d and str(d) not in f["dirs"]:
                f["dirs"].append(str(d))
            label = f"{p.get('primitive')} {p.get('cell')}"
            if label not in f["rows"]:
                f["rows"].append(label)
    return list(seen.values())


def _switch_us(e: Mapping) -> float | None:
    """ctx: LMbench's context-switch time (raw hop less the overhead cell's),
    as isob printed it per repetition (work.switch_per_hop), their median."""
    vals = sorted(r["outputs"]["work"]["switch_per_hop"] for r in e["repetitions"]
                  if isinstance((r["outputs"].get("work") or {}).get("switch_per_hop"),
                                (int, float)))
    if not vals or e.get("to_ns") is None:
        return None
    return _us(stats.median(vals) * e["to_ns"])


def _published() -> dict[tuple[str, str], dict]:
    """SEIMI's figures by the oslat (primitive, cell) they map onto."""
    out: dict[tuple[str, str], dict] = {}
    refs = reference.load()
    # The native figure maps onto the unconfined oslat cell; SEIMI's own
    # column maps onto no local row (no confinement here is SEIMI), and
    # stands in the same row as its native twin (same id stem).
    keys = {ref.id[:-len(NATIVE_SUFFIX)]: (str(ref.local_params.get("primitive")),
                                           str(ref.local_params.get("cell")))
            for ref in refs if ref.local_benchmark == BENCHMARK
            and ref.id.endswith(NATIVE_SUFFIX)}
    for ref in refs:
        side = ("native" if ref.id.endswith(NATIVE_SUFFIX) else
                "seimi" if ref.id.endswith(SEIMI_SUFFIX) else None)
        if side is None or ref.unit != "us":
            continue
        key = keys.get(ref.id[:-len(NATIVE_SUFFIX if side == "native" else SEIMI_SUFFIX)])
        if key is None:
            continue
        p = out.setdefault(key, {"source": ref.source, "hardware": ref.hardware,
                                 "where": ref.where, "ids": []})
        p[side] = ref.value
        p[f"{side}_text"] = ref.text()
        p["ids"].append(ref.id)
    for p in out.values():
        if p.get("native") and p.get("seimi"):
            p["slowdown"] = units.ratio(p["seimi"], p["native"])
    return out


def _printed_averages() -> dict[str, dict]:
    refs = {r.id: r for r in reference.load()}
    out = {}
    for table, rid in PRINTED_AVERAGES.items():
        r = refs.get(rid)
        if r is not None:
            out[table] = {"id": r.id, "value_pct": r.value, "source": r.source,
                          "where": r.where, "metric": r.metric}
    return out


# Confinements isob lists with one variant only: their columns need no
# variant in their name.
SINGLE_VARIANT = (BASELINE, "ptrace", "landlock", "userns")


def _labels(columns: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """A column's name: the confinement, with its variant unless it has only
    one (seccomp-allow:300-args, but ptrace)."""
    return {(n, v): (n if n in SINGLE_VARIANT else f"{n}:{v}") for n, v in columns}


def build(data: RunData, doc: Mapping) -> dict | None:
    entries = [e for e in doc["configs"] if e["benchmark"] == BENCHMARK]
    problems = [r for r in doc["results"] if r["benchmark"] == BENCHMARK and r["status"] != "ok"]
    if not entries and not problems:
        return None
    cols = list(dict.fromkeys(column_of(e["params"]) for e in entries))
    cols += [c for c in dict.fromkeys(column_of(r["params"]) for r in problems
                                      if r["params"].get("confine")) if c not in cols]
    seen = list(cols)
    cols.sort(key=lambda c: (CONFINE_ORDER.index(c[0]) if c[0] in CONFINE_ORDER
                             else len(CONFINE_ORDER), seen.index(c)))
    labels = _labels(cols)
    published = _published()

    rows: dict[tuple, dict] = {}
    for e in entries:
        p = e["params"]
        key = _row_key(p)
        row = rows.setdefault(key, _new_row(key, published))
        row["_entries"][labels[column_of(p)]] = e
    notes = []
    for r in problems:
        p = r["params"]
        if not p.get("confine") or not p.get("primitive"):
            notes.append({"status": r["status"], "reason": r["reason"],
                          "where": " ".join(f"{k}={v}" for k, v in p.items()) or "oslat"})
            continue
        col = labels[column_of(p)]
        hit = [row for key, row in rows.items() if key[1] == p["primitive"]
               and (not p.get("cell") or key[2] == p["cell"])
               and (not p.get("placement") or key[3] == p["placement"])]
        if not hit and p.get("cell"):
            hit = [rows.setdefault(_row_key(p), _new_row(_row_key(p), published))]
        for row in hit:
            row["cells"].setdefault(col, {"status": r["status"], "reason": r["reason"]})
        if not hit:
            notes.append({"status": r["status"], "reason": r["reason"],
                          "where": f"{col}: {p['primitive']}"})

    for row in rows.values():
        base = row["_entries"].get(BASELINE)
        for col, e in row["_entries"].items():
            cell = _entry(e)
            if col != BASELINE:
                cell["slowdown"] = ratio_of(e, base) if base else None
            if row["primitive"] == "ctx" and not row["cell"].endswith("overhead"):
                cell["switch_us"] = _switch_us(e)
            if row["table"] == BANDWIDTH_TABLE:
                _bandwidth(e, cell)
            fs = {f for f in _work(e, "fs_type") if f}
            if fs:
                cell["fs_type"] = ", ".join(sorted(fs))
            row["cells"][col] = cell
        # The repetitions' values, for the averages' intervals (_table).
        row["_headlines"] = {col: e["headline"] for col, e in row["_entries"].items()}
        del row["_entries"]

    by_table: dict[tuple[str, str], list[dict]] = {}
    for key, row in rows.items():
        by_table.setdefault((key[0], key[3]), []).append(row)
    printed = _printed_averages()
    tables = []
    for (tab, place), trows in sorted(by_table.items(), key=lambda kv: (
            TABLE_ORDER.index(kv[0][0]) if kv[0][0] in TABLE_ORDER else 99, kv[0][1])):
        tables.append(_table(tab, place, trows, [labels[c] for c in cols], printed.get(tab),
                             published))
    for row in rows.values():
        del row["_headlines"]
    return {
        "columns": [{"label": labels[c], "confine": c[0], "variant": c[1],
                     "threat": _threat(entries, c)} for c in cols],
        "baseline": BASELINE, "tables": tables, "notes": notes,
        "our_method": OUR_METHOD, "seimi_method": SEIMI_METHOD,
        "filesystems": _filesystems(entries), "bandwidth_unit": BANDWIDTH_UNIT,
        "published_note": "SEIMI (IEEE S&P 2020): native Linux and SEIMI, LMbench, on other "
                          "hardware (not recorded here); published, not measured here",
    }


def _threat(entries: Sequence[Mapping], col: tuple[str, str]) -> str | None:
    for e in entries:
        if column_of(e["params"]) == col:
            for r in e["repetitions"]:
                t = r["outputs"].get("confine_threat")
                if t:
                    return t
    return None


def _new_row(key: tuple[str, str, str, str], published: Mapping) -> dict:
    tab, prim, cell, place = key
    return {"table": tab, "primitive": prim, "cell": cell, "placement": place,
            "label": prim if cell in ("", "None", prim) else f"{prim} {cell}",
            "averaged": (prim, cell) in AVERAGED.get(tab, ()),
            "published": published.get((prim, cell)), "cells": {}, "_entries": {}}


def _average(g: Mapping | None, tab: str, of: int) -> dict | None:
    """An average of slowdowns (averages.average_ratio) as the table holds it,
    with SEIMI's method over the same rows where SEIMI printed such an
    average."""
    if g is None:
        return None
    iv = g["interval"]
    avg = {"geomean_ratio": {"value": g["value"], "overhead_pct": 100.0 * (g["value"] - 1.0),
                             "interval": iv, "note": g["note"], "method": averages.METHOD},
           "n": g["n"], "of": of, "rows": list(g["rows"]), "reps": g["reps"],
           "seimi_method": None}
    if tab in PRINTED_AVERAGES:
        v, why = geomean_of_percentages(g["ratios"])
        avg["seimi_method"] = {"value_pct": v, "undefined": why}
    return avg


def _table(tab: str, place: str, rows: list[dict], columns: Sequence[str],
           printed: Mapping | None, published: Mapping) -> dict:
    subject, programs = next(((t[1], t[2]) for t in TABLES if t[0] == tab), ("", ""))
    order = {k: i for i, k in enumerate(AVERAGED.get(tab, ()))}
    # SEIMI's columns first, in the paper's order; the rest as measured.
    rows = sorted(rows, key=lambda r: (not r["averaged"], order.get((r["primitive"], r["cell"]), 0)))
    present = [c for c in columns if any(c in r["cells"] for r in rows)]
    averaged = [r for r in rows if r["averaged"]]
    of = len(averaged)
    cols = {col: [averages.Row.of(r["label"], r["_headlines"][col], r["_headlines"][BASELINE])
                  for r in averaged
                  if (r["cells"].get(col) or {}).get("slowdown") and col in r["_headlines"]]
            for col in present if col != BASELINE}
    # Every confinement over the rows all of them have, so that the averages
    # of one table compare; a confinement with more rows of its own has their
    # average too (own), under it.
    common = averages.shared(cols)
    out = {}
    for col in cols:
        own = _average(common.own.get(col), tab, of)
        avg = _average(common.averages.get(col), tab, of) or {
            "geomean_ratio": None, "seimi_method": None, "n": 0, "of": of, "rows": []}
        avg["own"] = own
        out[col] = avg
    # SEIMI's own average, recomputed from all its columns of the table (not
    # only those this run measured), beside the figure it printed.
    pub = [published[k] for k in AVERAGED.get(tab, ()) if (published.get(k) or {}).get("slowdown")]
    pub_avg = None
    if pub:
        ratios = [p["slowdown"] for p in pub]
        g = stats.geomean(ratios)
        v, why = geomean_of_percentages(ratios)
        pub_avg = {"n": len(ratios), "geomean_ratio": {"value": g, "overhead_pct": 100 * (g - 1)},
                   "seimi_method_pct": v, "seimi_method_undefined": why,
                   "printed": dict(printed) if printed else None}
    return {"table": tab, "subject": subject, "lmbench": programs, "placement": place,
            "title": f"Table {tab}: {subject}" if tab != BANDWIDTH_TABLE else "LMbench bandwidths",
            "bandwidth": tab == BANDWIDTH_TABLE, "columns": present, "rows": rows,
            "averages": out, "shared_rows": common.rows if cols else [],
            "published_average": pub_avg,
            "has_published": any(r["published"] for r in rows)}
