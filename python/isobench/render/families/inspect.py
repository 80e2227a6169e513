"""How the inspect section (analysis/families/inspect.py) is shown: the sites found in
the target's executable memory (file, offset, instruction, gate or stray
with the attack it enables), the mappings left unscanned and why, and the
scan's cost per 4 KiB page beside ERIM's published figure, marked.  Every
number shown is in the section; nothing here computes."""

from __future__ import annotations

from typing import Mapping

from ..kit.blocks import (INTERVAL_NOTE, PUBLISHED, Block, markdown_of, not_ok_notes, num, q_text,
                          text_of)


def blocks(s: Mapping) -> list[Block]:
    out = []
    pub = {p["id"]: p for p in s["published"]}
    for t in s["targets"]:
        exe = t.get("target_exe") or "?"
        rows = [[x["file"] or "?", x["offset"] or "?", x["insn"], x["symbol"] or "-",
                 x["role"] + (" (spans two mappings)" if x["spans_mappings"] else "")]
                for x in t["sites"]]
        notes = [f"{t['mappings']} executable mappings, {num(t['pages'])} pages of 4 KiB "
                 f"({num(t['bytes_scanned'])} bytes) scanned at every byte offset; "
                 f"{t['mappings_unscanned']} unscanned ({num(t['bytes_unscanned'])} bytes), "
                 f"never counted as clean",
                 f"gate sites: {t['gate_sites_found']} of the {t['gate_sites_recorded']} "
                 f"recorded WRPKRUs found; {t['strays']} stray"]
        for u in t["unscanned"]:
            notes.append(f"UNSCANNED {u.get('file')} {u.get('range')} {u.get('perms')}: "
                         f"{u.get('why')}")
        for x in t["sites"]:
            if x["role"] == "stray":
                notes.append(f"stray {x['insn'].upper()} {x['where']}: {x['attack']}")
        if not t["same_sites_every_repetition"]:
            notes.append("the sites differ between repetitions: the target changed")
        out.append(Block(f"inspect: WRPKRU/XRSTOR sites in the executable memory of "
                         f"{'this isob process' if t['target'] == 'self' else 'process --pid'} "
                         f"({exe})", ("file", "offset", "insn", "symbol", "role"), rows,
                         set(), notes))
        cost = [["this machine", q_text(t["per_page"]), q_text(t["per_pass"]),
                 q_text(t["erim_pages_local"])]]
        lo, hi = pub.get("erim-inspect-page-low"), pub.get("erim-inspect-page-high")
        total = pub.get("erim-inspect-total")
        if lo and hi:
            cost.append([f"{PUBLISHED} ERIM", f"{lo['text']} to {hi['text']}",
                         "-", total["text"] if total else "-"])
        pp = s.get("published_per_page")
        cnotes = [f"per pass: all {num(t['pages'])} pages once; {t['passes']} passes per "
                  f"process, {t['reps']} processes; the time per page is each process's "
                  f"median pass over its pages", INTERVAL_NOTE]
        if lo and hi:
            cnotes.append(f"{PUBLISHED}: {lo['source']}, {lo['where']} (per page) and "
                          f"{total['where'] if total else '-'} (whole program: "
                          f"{pp['note'] if pp else '-'} = {num(pp['value']) if pp else '-'} us "
                          f"per page); {lo['hardware']}; {s['published_caveat']}")
        out.append(Block(f"inspect: cost of the scan per 4 KiB page, beside ERIM's",
                         ("", "us per page [95%]", "ms per pass [95%]",
                          f"ms for {s['erim_pages']:,} pages [95%]"),
                         cost, {"us per page [95%]", "ms per pass [95%]",
                                f"ms for {s['erim_pages']:,} pages [95%]"}, cnotes))
    if not s["targets"]:
        out.append(Block("inspect: nothing measured", (), [], set(), []))
    out[-1].notes += not_ok_notes(s)
    return out


def text(s: Mapping, doc: Mapping) -> str:
    return text_of(blocks(s))


def markdown(s: Mapping, doc: Mapping) -> str:
    return markdown_of("ERIM's binary inspection (inspect)", blocks(s))
