"""SEIMI's Table I on KVM (docs/kvm.md): what each exit out of a KVM guest
costs (the vmcall benchmark) beside the null system call measured in the
same run, with the ratio of each to it, and the kvm mechanism's round trip
(switch -m kvm, payload 0) where the run has it.  Beside them, SEIMI's
fault tests (Table V, native and under SEIMI), whose difference its
evaluation puts down to the VM exit each fault triggers.

SEIMI (Wang et al., IEEE S&P 2020, Table I) compares the cost of its traps,
VM exits, with that of a system call.  Its values are published rows of
data/reference.csv where that file has them (source SEIMI, Table I); the
section says so when it has none.  Every figure here comes from a KVM that
may be nested, and the section carries the caveat the results carry."""

from __future__ import annotations

import re
from typing import Mapping

from ..kit import reference
from ..kit.quantities import entries, not_ok, published, ratio_of, time_of
from ..kit.runs import RunData

BENCHMARK = "vmcall"
MECHANISM = "kvm"
# The order of the rows: from nothing entered to the exits SEIMI compares.
EXIT_ORDER = ("none", "io", "mmio", "cpuid", "hypercall", "syscall")
SEIMI_SOURCE = "SEIMI"
SEIMI_TABLE = "Table I"
# SEIMI's fault tests (Table V), where its evaluation puts the cost of a VM
# exit per fault: (label, native id, SEIMI id).
SEIMI_FAULTS = (("protection fault", "seimi-vm-protfault-native", "seimi-vm-protfault-seimi"),
                ("page fault", "seimi-vm-pagefault-native", "seimi-vm-pagefault-seimi"))


def _seimi_rows() -> list[dict]:
    """SEIMI's Table I figures in data/reference.csv (none, where that file
    does not transcribe them)."""
    out = []
    for r in reference.load():
        if r.source.startswith(SEIMI_SOURCE) and r.where.strip() == SEIMI_TABLE:
            out.append({**r.as_dict(), "text": r.text()})
    return out


def build(data: RunData, doc: Mapping) -> dict | None:
    es = entries(doc, BENCHMARK)
    kvm_switch = [e for e in entries(doc, "switch") if e.get("mechanism") == MECHANISM
                  and e["params"].get("payload") == 0]
    bad = not_ok(doc, BENCHMARK)
    if not es and not kvm_switch and not bad:
        return None
    syscall = next((e for e in es if e["params"].get("exit") == "syscall"), None)
    rows = []

    def order(e):
        x = e["params"].get("exit")
        return (EXIT_ORDER.index(x) if x in EXIT_ORDER else len(EXIT_ORDER),
                e["params"].get("ring", -1))

    for e in sorted(es, key=order):
        p = e["params"]
        rows.append({"what": p.get("exit"), "exit": p.get("exit"), "ring": p.get("ring"),
                     "handled_in": p.get("handled_in"), "time": time_of(e, "us"),
                     "over_syscall": None if e is syscall else ratio_of(e, syscall),
                     "estimator": e["headline"].get("estimator")})
    for e in kvm_switch:
        p = e["params"]
        m = re.search(r"ring (\d)", str(p.get("guest") or ""))
        rows.append({"what": "kvm mechanism", "exit": "switch -m kvm, payload 0",
                     "ring": int(m.group(1)) if m else None, "handled_in": f"a call into the guest and back ({p.get('guest')})",
                     "time": time_of(e, "us"), "over_syscall": ratio_of(e, syscall),
                     "estimator": e["headline"].get("estimator")})
    params = [e["params"] for e in (*es, *kvm_switch)]
    caveats = sorted({str(p["caveat"]) for p in params if p.get("caveat")})
    nested = sorted({bool(p["nested"]) for p in params if "nested" in p})
    kvms = sorted({str(p["kvm"]) for p in params if p.get("kvm")})
    seimi = _seimi_rows()
    faults = []
    for label, native_id, seimi_id in SEIMI_FAULTS:
        pair = published([native_id, seimi_id])
        if len(pair) == 2 and pair[0]["unit"] == pair[1]["unit"]:
            faults.append({"test": label, "native": pair[0], "seimi": pair[1],
                           "added": pair[1]["value"] - pair[0]["value"], "unit": pair[0]["unit"],
                           "derived": "SEIMI's value minus native's, both published"})
    return {"seimi_faults": faults,"rows": rows, "syscall_measured": syscall is not None, "caveats": caveats,
            "nested": nested, "kvm": kvms, "published": seimi,
            "published_note": (None if seimi else
                               "SEIMI's Table I (its trap, a VM exit, against a system call): "
                               "its values are not transcribed in data/reference.csv, so no "
                               "published figure stands beside these rows"),
            "not_ok": bad}
