"""ERIM's call kinds (the switch benchmark's variants inline, direct-call and
indirect-call): what a gate adds to a call of each kind.

`direct` calls an empty function inlined, directly, or through a pointer,
outside any compartment; a mechanism with a gate of its own (`mpk`) runs the
same kinds behind its gate (src/benches/switch.c).  For each kind the
section gives the gate's value minus the plain call's: the difference of
the two configurations' repetition means, with the Welch t interval of
stats.difference_interval (each side's resolution included), in the
configurations' unit and in ns, beside the figures ERIM and Konrad
published for the same difference (data/reference.csv's rows, PUBLISHED:
the one place that holds them; the section prints their digits as the
source did, and their citations).  One repetition a side gives the
difference without an interval (nothing is known about the next process)."""

from __future__ import annotations

from typing import Mapping

from ..kit import reference, units
from ...core import stats
from ..kit.runs import RunData

KINDS = ("inline", "direct-call", "indirect-call")
PLAIN = "direct"

# The published "gate minus plain call", as ranges over the three kinds:
# the reference rows of each end, and how to read their unit and source.
PUBLISHED = (
    {"who": "ERIM", "low_id": "erim-gate-overhead-low", "high_id": "erim-gate-overhead-high",
     "unit": "TSC ticks (ERIM calls them cycles; it read the TSC, Konrad 2023 section 3.1.2)",
     "where": "Vahldiek-Oberwagner et al., USENIX Security 2019, section 6, as cited by "
              "Konrad 2023, section 5.1 (whose sentence names the Lightweight Contexts paper; "
              "the figure is ERIM's call-gate overhead)"},
    {"who": "Konrad", "low_id": "konrad-gate-overhead-low",
     "high_id": "konrad-gate-overhead-high",
     "unit": "hardware-counter cycles (perf_event_open), not TSC ticks",
     "where": "Konrad 2023, section 5.1 and Table 5.1, complete call gate, CPU pinned: the "
              "median of WRPKRU X minus that of X (78 - 5, 88 - 9, 93 - 9)"},
)

NOTES = (
    "with the gate, plain call: the mean of each side's repetition values (fresh processes), "
    "by the same estimator on both sides (from: median or batched, as the gate's ratio to the "
    "plain call takes them); gate minus plain: their difference, [a..b] its Welch t interval "
    "over repetitions with each side's counter resolution included",
    "the gate is reached as every mechanism's call is, through the ops table's pointer (one "
    "indirect call and its return), which ERIM's inlined gate does not pay: that call is part "
    "of every difference here",
    "ERIM's and Konrad's figures were measured on other machines, in other units; they are "
    "shown beside the local differences, never compared as numbers",
)


def published() -> list[dict]:
    """PUBLISHED with each end's figure from the reference rows: low and high
    (numbers), low_text and high_text (the digits as the source printed
    them), citation and where (the low row's; a missing row: None and a
    note saying which)."""
    by = {r.id: r for r in reference.load()}
    out = []
    for p in PUBLISHED:
        lo, hi = by.get(p["low_id"]), by.get(p["high_id"])
        missing = [i for i, r in ((p["low_id"], lo), (p["high_id"], hi)) if r is None]
        out.append({**p, "low": lo.value if lo else None, "high": hi.value if hi else None,
                    "low_text": lo.text() if lo else None, "high_text": hi.text() if hi else None,
                    "citation": (lo or hi).citation if (lo or hi) else None,
                    "ref_where": (lo or hi).where if (lo or hi) else None,
                    "missing": missing})
    return out


def _key(c: Mapping) -> tuple:
    return c["params"].get("variant"), c["params"].get("placement")


def _sides(gate: Mapping, plain: Mapping) -> tuple[str, list, float, list, float, bool]:
    """(source, gate values, their resolution, plain values, theirs, mixed):
    the same estimator on both sides wherever they have one, as the gate's
    ratio to the plain call takes them (ratios.ratio_of: a median holds the
    reading cost, which a batched estimate cancels, so a median minus a
    batched estimate would count the reading as gate); the headlines when
    there is no such ratio."""
    r = gate.get("ratio")
    if r and r.get("to_key") == plain.get("key") and r.get("values") and r.get("base_values"):
        return (r["source"], list(r["values"]), r.get("resolution_of_values") or 0.0,
                list(r["base_values"]), r.get("base_resolution") or 0.0, bool(r.get("mixed")))
    hg, hp = gate["headline"], plain["headline"]
    return (hg["source"], list(hg["values"]), hg.get("resolution") or 0.0, list(hp["values"]),
            hp.get("resolution") or 0.0, hg["source"] != hp["source"])


def _row(gate: Mapping, plain: Mapping | None) -> dict:
    hg = gate["headline"]
    row = {"mechanism": gate["mechanism"], "kind": gate["params"]["variant"],
           "placement": gate["params"].get("placement"), "unit": gate["unit"],
           "source": hg["source"], "gate": None, "gate_reps": len(hg["values"]), "plain": None,
           "plain_reps": 0, "difference": None, "interval": None, "difference_ns": None,
           "interval_ns": None, "note": None}
    if plain is None:
        row["note"] = f"no {PLAIN} {row['kind']} in this run: run switch -m {PLAIN} too"
        return row
    hp = plain["headline"]
    row["plain_reps"] = len(hp["values"])
    if plain["unit"] != gate["unit"]:
        row["note"] = f"units differ ({gate['unit']}, {plain['unit']}): no difference"
        return row
    source, gv, gres, pv, pres, mixed = _sides(gate, plain)
    if not gv or not pv:
        row["note"] = "no repetition values"
        return row
    row.update(source=source, gate=stats.mean(gv), plain=stats.mean(pv),
               difference=stats.difference(gv, pv))
    notes = []
    if mixed:
        notes.append("no estimator both sides have and trust: the gate's and the plain call's "
                     "headlines differ in source, and a median holds the reading cost")
    if hg.get("modes") or hp.get("modes"):
        notes.append("the repetitions fall into separate groups: no interval (see the modes)")
    else:
        iv = stats.difference_interval(gv, pv, gres, pres)
        if iv is not None:
            row["interval"] = [iv.low, iv.high]
        else:
            notes.append("one repetition: no interval between processes (run with --repeat)")
    row["note"] = "; ".join(notes) or None
    f = gate.get("to_ns")
    if f is not None and f == plain.get("to_ns"):
        row["difference_ns"] = units.scale([row["difference"]], f)[0]
        if row["interval"]:
            row["interval_ns"] = units.scale(row["interval"], f)
    return row


def build(data: RunData, doc: Mapping) -> dict | None:
    """The rows of every gate mechanism's call kinds in the run, or None."""
    kinds = [c for c in doc["configs"]
             if c["benchmark"] == "switch" and c["params"].get("variant") in KINDS
             and c["params"].get("payload", 0) == 0 and c["headline"]["value"] is not None]
    plain = {_key(c): c for c in kinds if c["mechanism"] == PLAIN}
    gates = [c for c in kinds if c["mechanism"] != PLAIN]
    if not gates:
        return None
    rows = []
    for c in sorted(gates, key=lambda c: (c["mechanism"], KINDS.index(c["params"]["variant"]))):
        p = plain.get(_key(c))
        if p is None:  # one-context mechanisms run at one placement; direct may differ
            same = [x for k, x in plain.items() if k[0] == c["params"]["variant"]]
            p = same[0] if len(same) == 1 else None
        rows.append(_row(c, p))
    return {"rows": rows, "published": published(), "notes": list(NOTES)}
