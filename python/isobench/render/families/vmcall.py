"""How the vmcall section (analysis/families/vmcall.py) is shown: each exit out of a
KVM guest and the kvm mechanism's round trip beside the null system call,
the ratio of each to it, SEIMI's Table I where data/reference.csv has it,
and the nested-virtualization caveat under every table.  Nothing here
computes."""

from __future__ import annotations

from typing import Mapping

from ..kit.blocks import (INTERVAL_NOTE, PUBLISHED, Block, markdown_of, not_ok_notes, q_text,
                          r_text, text_of)


def blocks(s: Mapping) -> list[Block]:
    rows = [[r["what"], "-" if r["ring"] is None or r["ring"] < 0 else str(r["ring"]),
             r["handled_in"] or "-", q_text(r["time"]),
             "1" if r["exit"] == "syscall" else r_text(r["over_syscall"])] for r in s["rows"]]
    notes = list(s["caveats"]) or ["nested virtualization: not stated by the results"]
    if s["kvm"]:
        notes.append(f"KVM here: {', '.join(s['kvm'])}; nested: "
                     f"{', '.join('yes' if n else 'no' for n in s['nested']) or 'unknown'}")
    if not s["syscall_measured"]:
        notes.append("the null system call is not in this run: `isobench run vmcall` measures it "
                     "beside the exits")
    for p in s["published"]:
        notes.append(f"{PUBLISHED}: {p['subject']}, {p['metric']}: {p['text']} {p['unit']} "
                     f"({p['source']}, {p['where']}; {p['hardware']})")
    if s.get("published_note"):
        notes.append(s["published_note"])
    for f in s.get("seimi_faults") or ():
        n, v = f["native"], f["seimi"]
        notes.append(f"{PUBLISHED}: LMbench {f['test']}, native {n['text']} {f['unit']} vs SEIMI "
                     f"{v['text']} {f['unit']}: {f['added']:.4g} {f['unit']} more per fault, which "
                     f"SEIMI puts down to the VM exit the fault triggers (derived: the difference "
                     f"of the two; {v['source']}, {v['where']}; {v['hardware']})")
    notes.append("x syscall: the row's time over the null system call's, measured in the same "
                 "run (SEIMI's Table I compares its VM exits with a system call the same way)")
    notes.append(INTERVAL_NOTE)
    notes += not_ok_notes(s)
    return [Block("vmcall: exits out of a KVM guest beside the null system call (SEIMI, Table I)",
                  ("exit", "ring", "handled in", "us [95%]", "x syscall [95%]"), rows,
                  {"us [95%]", "x syscall [95%]"}, notes, keep=2)]


def text(s: Mapping, doc: Mapping) -> str:
    return text_of(blocks(s))


def markdown(s: Mapping, doc: Mapping) -> str:
    return markdown_of("KVM exits beside the null system call (vmcall)", blocks(s))
