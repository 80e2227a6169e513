"""ERIM's binary inspection (docs/inspect.md): the sites `isob inspect` found
in a process's executable memory, each a recorded gate site or a stray with
the attack it enables, and the scan's cost per 4 KiB page with its interval
over repetitions, beside ERIM's published 3.5 to 6.2 us per page
(data/reference.csv).

The same site records and attack sentences serve `isobench list`, which
states the stray sites in the evidence of the mpk mechanisms
(with_inspection, below)."""

from __future__ import annotations

import os
from typing import Mapping, Sequence

from ...core.attackers import untested_cells
from ..kit.quantities import (entries, geomean_of, not_ok, outputs, published, quantity, scaled,
                              time_of)
from ..kit.runs import RunData

# ERIM's program in its inspection measurement (Konrad 2023, §3.1.2: 17.7 ms
# for 3,918 pages of 4 KiB): the local cost is also given for this many pages.
ERIM_PAGES = 3918
PUBLISHED_IDS = ("erim-inspect-page-low", "erim-inspect-page-high", "erim-inspect-total")

# What each instruction lets untrusted code do, when it is not the gate's.
ATTACKS = {
    "wrpkru": "untrusted code that calls the function holding it (one ordinary call: glibc's "
              "pkey_set(key, 0) writes its argument there) or jumps there with chosen eax "
              "(ecx = edx = 0) writes PKRU: every key opens",
    "xrstor": "untrusted code that jumps there with edx:eax selecting PKRU (bit 9) and the "
              "operand's registers at an XSAVE area of its own restores PKRU from it: every key opens",
    "xrstors": "none from user mode: XRSTORS is privileged (#GP at CPL 3)",
}
# A stray the mpk mechanisms replaced with a trap before create
# (src/mechanisms/mpk/strays.c), as `isob inspect` saw it after one create.
CLOSED = "closed by mpk before create (a trap in its place)"


def where(site: Mapping) -> str:
    """A site as "symbol at file+offset" (the file's base name)."""
    base = os.path.basename(str(site.get("file") or "?"))
    at = f"{base}+{site.get('offset')}"
    sym = site.get("symbol")
    return f"{sym} at {at}" if sym else at


def classify(site: Mapping) -> dict:
    """One site as shown: where, the instruction, gate or stray, and the
    attack a stray enables."""
    insn = str(site.get("insn"))
    gate = bool(site.get("gate"))
    return {"file": site.get("file"), "offset": site.get("offset"), "insn": insn,
            "bytes": site.get("bytes"), "symbol": site.get("symbol"), "where": where(site),
            "role": "gate" if gate else "stray",
            "attack": None if gate else ATTACKS.get(insn, "unknown instruction"),
            "closed": site.get("closed"),
            "spans_mappings": bool(site.get("spans_mappings"))}


def stray_lines(sites: Sequence[Mapping]) -> list[str]:
    """One sentence per stray site that user mode can execute: the attack,
    or that mpk closed it."""
    out = []
    for s in map(classify, sites):
        if s["role"] == "stray" and s["insn"] != "xrstors":
            out.append(f"{s['insn'].upper()} {s['where']}: {CLOSED if s['closed'] else s['attack']}")
    return out


def open_strays(sites: Sequence[Mapping]) -> tuple[list[dict], list[dict]]:
    """The strays user mode can run that mpk did not close, of sites as
    classify gives them, as (callable, jump-only): callable when an
    exported function holds the site (its symbol is known), so that a call
    reaches it; jump-only otherwise."""
    found = [s for s in sites
             if s["role"] == "stray" and s["insn"] != "xrstors" and not s["closed"]]
    return [s for s in found if s["symbol"]], [s for s in found if not s["symbol"]]


def per_page(entry: Mapping) -> dict | None:
    """The scan's time per 4 KiB page in us: each repetition's median pass
    over its own page count, the geometric mean with its t interval over
    repetitions; with one repetition, its median with the one-process
    interval."""
    f = entry.get("to_ns")
    vals = []
    for r in entry["repetitions"]:
        pages = (r.get("outputs") or {}).get("pages")
        if f is None or r.get("median") is None or not pages:
            continue
        vals.append(r["median"] * f / 1000.0 / pages)
    if len(vals) >= 2:
        return geomean_of(vals, "us")
    pages = outputs(entry, "pages")
    t = time_of(entry, "us")
    if not pages or t is None:
        return None
    return scaled(t, 1.0 / pages[-1], "us")


def build(data: RunData, doc: Mapping) -> dict | None:
    es = entries(doc, "inspect")
    bad = not_ok(doc, "inspect")
    if not es and not bad:
        return None
    targets = []
    for e in es:
        page = per_page(e)
        last = {k: (outputs(e, k) or [None])[-1] for k in (
            "pages", "bytes_scanned", "mappings", "mappings_unscanned", "bytes_unscanned",
            "gate_sites_recorded", "gate_sites_found", "stray_sites", "target_exe", "passes",
            "patterns")}
        sites = [classify(s) for s in (outputs(e, "sites") or [[]])[-1]]
        unscanned = list((outputs(e, "unscanned") or [[]])[-1])
        # The sites must be the same in every repetition: the same files.
        kinds = {tuple(sorted((s.get("file"), s.get("offset")) for s in rep))
                 for rep in outputs(e, "sites")}
        erim_total = scaled(page, ERIM_PAGES / 1000.0, "ms") if page else None
        targets.append({
            "target": e["params"].get("target"), **last,
            "per_pass": time_of(e, "ms"), "per_page": page, "erim_pages_local": erim_total,
            "sites": sites, "unscanned": unscanned,
            "strays": sum(1 for s in sites if s["role"] == "stray"),
            "gates": sum(1 for s in sites if s["role"] == "gate"),
            "same_sites_every_repetition": len(kinds) <= 1,
            "reps": e["headline"]["reps"]})
    pub = published(PUBLISHED_IDS)
    pub_page = None
    by = {p["id"]: p for p in pub}
    if "erim-inspect-total" in by:
        v = by["erim-inspect-total"]["value"] * 1000.0 / ERIM_PAGES
        pub_page = quantity(v, None, None, 1, "us",
                            f"{by['erim-inspect-total']['text']} ms / {ERIM_PAGES:,} pages")
    return {"targets": targets, "published": pub, "published_per_page": pub_page,
            "erim_pages": ERIM_PAGES,
            "published_caveat": "published, other hardware and another scanner: ERIM's "
                                "inspection of its own benchmark program",
            "not_ok": bad}


def summary_of(lines: Sequence[Mapping]) -> dict | None:
    """The result line of one `isob inspect` run (driver.inspect), as `list`
    attaches it: the sites classified, the counts, or None when it has none."""
    for line in lines:
        if line.get("type") == "result" and line.get("benchmark") == "inspect":
            p = line.get("params") or {}
            if line.get("status") != "ok":
                return {"status": line.get("status"), "reason": line.get("reason")}
            sites = [classify(s) for s in p.get("sites") or []]
            return {"status": "ok", "target_exe": p.get("target_exe"), "sites": sites,
                    "strays": stray_lines(p.get("sites") or []),
                    "mpk_closing": p.get("mpk_closing"), "mpk_closing_why": p.get("mpk_closing_why"),
                    "gate_sites_found": p.get("gate_sites_found"),
                    "gate_sites_recorded": p.get("gate_sites_recorded"),
                    "mappings": p.get("mappings"), "unscanned": list(p.get("unscanned") or [])}
    return None


# ---- ERIM's binary inspection as evidence of the MPK mechanisms ----

def with_inspection(mechanisms: Sequence[dict], lines: Sequence[Mapping],
                    why: str | None) -> list[str]:
    """Attach the inspection of an isob process (``isob inspect``: the binary
    the mpk mechanisms run in and every library it maps, after one mpk
    create closed what it closes) to the in-process cell of each MPK
    mechanism, as ``inspection``, and judge that cell by it: a stray WRPKRU
    or XRSTOR that an exported function holds and mpk did not close is a
    call away from opening every key, so the cell reads ``leaks`` with that
    call as its method, whatever the loads and stores showed.  Closed
    strays and jump-only ones (reached only by a jump into the middle of
    code with chosen registers: not defended) are stated in the evidence.
    A mechanism not available here keeps its evidence (why it is not); the
    scan is attached all the same.  Returns the lines to print under the
    matrix."""
    mpk = [m for m in mechanisms if str(m.get("name", "")).startswith("mpk")]
    if not mpk:
        return []
    scan = summary_of(lines) if why is None else None
    if scan is None:
        scan = {"status": "untested", "reason": why or "isob inspect printed no result"}
    callable_, jump_only = open_strays(scan.get("sites") or []) if scan.get("status") == "ok" else ([], [])
    closed = [s for s in scan.get("sites") or [] if s.get("role") == "stray" and s.get("closed")]
    out = []
    for m in mpk:
        cells = m.setdefault("attackers", untested_cells(None))
        cell = cells.setdefault("in-process", {"verdict": "untested", "method": None,
                                               "evidence": None})
        cell["inspection"] = scan
        if not m.get("available", True) or scan.get("status") != "ok":
            continue
        notes = []
        if closed:
            notes.append(CLOSED + ": " + "; ".join(f"{s['insn'].upper()} {s['where']}" for s in closed))
        if jump_only:
            notes.append("not defended, reached only by a jump into the middle of code with chosen "
                         "registers: " + "; ".join(f"{s['insn'].upper()} {s['where']}" for s in jump_only))
        if callable_:
            s = callable_[0]
            fn = str(s["symbol"]).split("+")[0]
            notes.append("open: " + "; ".join(f"{c['insn'].upper()} {c['where']}: {c['attack']}"
                                              for c in callable_))
            if cell.get("verdict") in ("enforced", "untested"):
                cell["verdict"] = "leaks"
                cell["method"] = (f"untrusted code calls {fn} ({os.path.basename(str(s['file']))}), "
                                  f"whose {s['insn'].upper()} at {s['where']} mpk did not close "
                                  "(isob inspect)")
        extra = "; ".join(notes)
        if extra:
            cell["evidence"] = f"{cell['evidence']}; {extra}" if cell.get("evidence") else extra
    names = ", ".join(m["name"] for m in mpk)
    if scan.get("status") != "ok":
        out.append(f"{names}: ERIM's binary inspection: untested: "
                   f"{scan.get('reason') or 'no reason given'}")
        return out
    unscanned = scan.get("unscanned") or []
    closing = ("closed by mpk (the scanned process made one mpk compartment)"
               if scan.get("mpk_closing") == "applied"
               else f"closed (mpk's closing not applied: {scan.get('mpk_closing_why') or 'not reported'})")
    out.append(f"{names}: ERIM's binary inspection of {scan.get('target_exe') or 'isob'} and "
               f"its libraries ({scan.get('mappings')} executable mappings, "
               f"{len(unscanned)} unscanned): {scan.get('gate_sites_found')} of "
               f"{scan.get('gate_sites_recorded')} recorded gate WRPKRUs, "
               f"{len(scan.get('strays') or [])} stray sites user mode can run, "
               f"{len(closed)} of them {closing}"
               + (" (mpk is not available here: the sites are in the binary all the same)"
                  if not any(m.get("available", True) for m in mpk) else ""))
    out += [f"  {s}" for s in scan.get("strays") or []]
    out += [f"  UNSCANNED {u.get('file')} {u.get('range')}: {u.get('why')}" for u in unscanned]
    return out
