"""How the call-kinds section (analysis/families/callkinds.py) is shown: per gate
mechanism and call kind, the gate's value, the plain call's, and the gate
minus the plain call with its interval, in the run's unit and in ns; then
ERIM's and Konrad's published ranges of the same difference, marked.
Every number shown is in the section; nothing here computes."""

from __future__ import annotations

from typing import Mapping

from ..kit.blocks import PUBLISHED, Block, markdown_of, num, text_of

HEADERS = ("gate", "kind", "from", "with the gate", "plain call", "gate minus plain [95%]",
           "ns [95%]", "reps")
TITLE = "switch: what the gate adds to each of ERIM's call kinds (gate kind X minus direct kind X)"


def _with(v, iv) -> str:
    if v is None:
        return "-"
    return num(v) + (f" [{num(iv[0])}..{num(iv[1])}]" if iv else "")


def blocks(s: Mapping) -> list[Block]:
    rows, notes = [], []
    for r in s["rows"]:
        rows.append([r["mechanism"], r["kind"], r["source"],
                     "-" if r["gate"] is None else f"{num(r['gate'])} {r['unit']}",
                     "-" if r["plain"] is None else f"{num(r['plain'])} {r['unit']}",
                     _with(r["difference"], r["interval"]) + (f" {r['unit']}" if r["difference"]
                                                             is not None else ""),
                     _with(r["difference_ns"], r["interval_ns"]),
                     f"{r['gate_reps']}/{r['plain_reps']}"])
        if r["note"]:
            notes.append(f"{r['mechanism']} {r['kind']}: {r['note']}")
    for p in s["published"]:
        rng = ("-" if p.get("missing") else
               f"{p.get('low_text') or num(p['low'])} to {p.get('high_text') or num(p['high'])}")
        rows.append([f"{PUBLISHED} {p['who']}", "all three", "-", "-", "-", rng, "-", "-"])
        cite = (f"; reference rows {p['low_id']}, {p['high_id']}: {p['citation']}, "
                f"{p['ref_where']}" if p.get("citation") else "")
        notes.append(f"{PUBLISHED} {p['who']}: {p['unit']}; {p['where']}{cite}"
                     + (f"; reference row(s) {', '.join(p['missing'])} missing: no figure"
                        if p.get("missing") else ""))
    notes += s["notes"]
    notes.append("reps: repetitions of the gate / of the plain call")
    return [Block(TITLE, HEADERS, rows,
                  {"with the gate", "plain call", "gate minus plain [95%]", "ns [95%]"}, notes)]


def text(s: Mapping, doc: Mapping) -> str:
    return text_of(blocks(s))


def markdown(s: Mapping, doc: Mapping) -> str:
    return markdown_of("ERIM's call kinds: gate minus plain call (switch)", blocks(s))
