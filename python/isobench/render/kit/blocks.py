"""The blocks a family section is written in (a title, a table, notes),
built once and written as console text (text_of, table.render) or as
Markdown (markdown_of), and the cells every family's tables share:
quantities with their intervals, ratios, rates and the notes of what did
not run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from . import table
from ...analysis.kit import tails


PUBLISHED = "PUBLISHED"


@dataclass
class Block:
    title: str
    headers: Sequence[str]
    rows: list[list[str]]
    right: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    # Columns that name a row (repeated in every folded block): where one
    # column alone does not tell two rows apart.
    keep: int = 1


def text_of(blocks: Sequence[Block]) -> str:
    """The console's blocks, each line at most table.WIDTH columns: a wider
    table folds its columns after the first `keep` into further blocks (table.fold),
    titles and notes wrap."""
    out = []
    for b in blocks:
        part = [table.wrap(b.title)]
        if b.rows:
            part.append(table.fold(b.headers, b.rows, b.right, keep=b.keep))
        part += [table.wrap(f"  {n}", indent="    ") for n in b.notes]
        out.append("\n".join(part))
    return "\n\n".join(out)


def markdown_of(heading: str, blocks: Sequence[Block]) -> str:
    out = [f"## {heading}", ""]
    for b in blocks:
        out += [f"**{b.title}**", ""]
        if b.rows:
            out += [table.md_table(b.headers, b.rows), ""]
        out += [f"- {n}" for n in b.notes]
        if b.notes:
            out.append("")
    return "\n".join(out).rstrip() + "\n"


# ---- cells ----

def num(v) -> str:
    return table.fmt_num(v)


def q_text(q: Mapping | None, fmt=None) -> str:
    """A quantity: value [low..high], '1p' when the interval is one process's."""
    if q is None or q.get("value") is None:
        return "-"
    fmt = fmt or table.fmt_num
    iv = q.get("interval")
    text = fmt(q["value"])
    if iv:
        text += f" [{fmt(iv[0])}..{fmt(iv[1])}]"
        if q.get("between") == "one process":
            text += " 1p"
    return text


def r_text(q: Mapping | None) -> str:
    return q_text(q, table.fmt_ratio)


def sig3(v: float) -> str:
    """Three significant digits (rates that span decades: GB/s of 1-byte and 64 KiB writes)."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def rate_text(q: Mapping | None) -> str:
    return q_text(q, sig3)


def not_ok_notes(section: Mapping) -> list[str]:
    out = []
    for r in section.get("not_ok") or ():
        p = r.get("params") or {}
        where = " ".join(f"{k}={v}" for k, v in sorted(p.items())
                         if k in ("placement", "where", "kernel", "variant", "step", "size_mib",
                                  "payload", "k", "heap_mib", "dirty_pages", "per", "config",
                                  "call"))
        counts = [f"{r['cells']} configurations"] if r["cells"] > 1 else []
        counts += [f"{r['results']} results"] if r["results"] > r["cells"] else []
        reps = f" ({', '.join(counts)})" if counts else ""
        mech = f" -m {r['mechanism']}" if r["mechanism"] not in (None, "-") else ""
        out.append(f"{r['status'].upper()}{mech}{' ' + where if where else ''}: "
                   f"{r['reason']}{reps}")
    return out


INTERVAL_NOTE = ("[a..b]: 95% interval over repetitions (fresh processes); '1p': within one "
                 "process only (run with --repeat)")


# ---- servers: throughput and latency quantiles ----

def fixed(v, digits: int = 0) -> str:
    """v with thousands separators and `digits` decimals; '-' for none."""
    if v is None:
        return "-"
    return f"{v:,.{digits}f}"


def latency_text(t: Mapping | None, bound: bool) -> str:
    """A latency quantile: value [interval], or `max V (n=N)` where the
    requests do not carry it; '>= ' where failed repetitions make it a lower
    bound."""
    if not t or t.get("value") is None:
        return "-"
    pre = ">= " if bound else ""
    if t.get("max"):
        return f"{pre}max {fixed(t['value'], 1)} (n={t['n']:,})"
    iv = t.get("interval")
    return pre + fixed(t["value"], 1) + (f" [{fixed(iv[0], 1)}..{fixed(iv[1], 1)}]" if iv else "")


def latency_note() -> str:
    """What a server table's latency columns are (lwc-serve, lwc-monitor)."""
    return ("latency [us]: isob loadgen's quantile over every request of a repetition, the median "
            "over repetitions; [a..b]: the envelope of the repetitions' order-statistic 95% "
            f"intervals; p99 and p99.9 only where n(1 - q) >= {tails.MIN_TAIL} requests lie beyond "
            f"them (p99: {tails.needed(0.99):,}, p99.9: {tails.needed(0.999):,} requests), else "
            "`max (n=...)`: the largest latency of n requests, not a quantile")
