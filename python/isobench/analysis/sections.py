"""Sections of the summary document, for benchmark families whose results
need more than the per-configuration summary: a fit (lwc-create's cost per
dirty page), tables laid out as a paper lays them out (SEIMI's, Morello's),
derived points (worksweep's break-even work per crossing).

A family adds one entry to SECTIONS: its name and a function of the loaded
run and the summary document built so far (configs, ratios) that returns
the section, a JSON-able dict, or None when the run holds nothing for it.
The sections are computed here, with the statistics; render/sections.py
says how each is shown, and nothing there computes."""

from __future__ import annotations

from typing import Callable, Mapping

from .families import (callkinds, inspect, kv, lwc, lwcmonitor, lwcserve, microkernel, oslat,
                       vmcall, workloads)
from .kit.runs import RunData

Builder = Callable[[RunData, Mapping], "dict | None"]

# (name, builder), in the order the sections are shown.
SECTIONS: tuple[tuple[str, Builder], ...] = (
    # The workloads (docs/workloads.md): Morello's tables and the work per crossing.
    ("worksweep", workloads.worksweep),
    ("cpuwork", workloads.cpuwork),
    ("memops", workloads.memops),
    ("pipeio", workloads.pipeio),
    ("scale", workloads.scale),
    # lwC's experiments (docs/lwc.md).
    ("lwc-create", lwc.lwc_create),
    ("lwc-switch", lwc.lwc_switch),
    ("refmon", lwc.refmon),
    ("lwc-sign", lwc.lwc_sign),
    # kv's table as a paper holds it (render/paper.py's kv.tex).
    ("kv", kv.build),
    ("oslat", oslat.build),
    ("microkernel-ipc", microkernel.build_ipc),
    ("microkernel-delegate", microkernel.build_delegate),
    ("microkernel-sched", microkernel.build_sched),
    ("lwc-serve", lwcserve.build),
    # lwc-serve --monitor: lwC's reference monitors in the server.
    ("lwc-monitor", lwcmonitor.build),
    # lwc-serve --tls: lwC's isolated OpenSSL key.
    ("lwc-tls", lwcmonitor.build_tls),
    # ERIM's binary inspection (docs/inspect.md).
    ("inspect", inspect.build),
    # ERIM's call kinds: what the gate adds to each (switch; docs/mechanisms.md).
    ("switch-call-kinds", callkinds.build),
    # SEIMI's Table I on KVM (docs/kvm.md).
    ("vmcall", vmcall.build),
)


def build(data: RunData, doc: Mapping) -> dict:
    """Every section the run has something for, by name."""
    out = {}
    for name, fn in SECTIONS:
        section = fn(data, doc)
        if section is not None:
            out[name] = section
    return out
