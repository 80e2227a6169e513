"""How a section prints a source's claims beside this machine's ratios
(analysis/kit/claims.py): the claim, its citation and how it was read, then a
row per local ratio with its 95% interval and the verdict.  A verdict is
never printed without the interval it rests on."""

from __future__ import annotations

from typing import Mapping, Sequence

from . import table

HEADERS = ("this machine", "ratio [95%]", "claimed", "verdict")


def _groups(verdicts: Sequence[Mapping]) -> list[tuple[Mapping, list[Mapping]]]:
    out: dict[str, tuple[Mapping, list[Mapping]]] = {}
    for v in verdicts:
        out.setdefault(v["claim"]["id"], (v["claim"], []))[1].append(v)
    return list(out.values())


def _config(claim: Mapping) -> str:
    """The configuration the claim is about, where it names one."""
    return f" Judged only on {claim['config_text']}." if claim.get("config_text") else ""


def _ratio(v: Mapping) -> str:
    if v["value"] is None:
        return "-"
    return table.fmt_ratio_record({"value": v["value"], "interval": v["interval"]}) + (
        "" if v["interval"] else " (no interval)")


def _rows(group: Sequence[Mapping]) -> list[list[str]]:
    return [[v.get("what") or "-", _ratio(v), v["claim"]["range"], v["verdict"]]
            for v in group]


def text(verdicts: Sequence[Mapping]) -> str:
    """The claims of a section on the console, at most table.WIDTH wide."""
    out = []
    for claim, group in _groups(verdicts):
        out.append(table.wrap(f"Claim: {claim['text']} ({claim['citation']}). Ratio: "
                              f"{claim['ratio']}; read as {claim['range']} "
                              f"({claim['reading']})." + _config(claim), indent="  "))
        here = sorted({v.get("here") for v in group if v.get("here")})
        out += [table.wrap(f"  {h}.", indent="    ") for h in here]
        out.append(table.render_fit(HEADERS, _rows(group), flex=0))
        why = sorted({v["why"] for v in group if v["verdict"] != "reproduces"})
        if why:
            out.append(table.wrap("  " + "; ".join(why) + ".", indent="    "))
    return "\n".join(out)


def markdown(verdicts: Sequence[Mapping]) -> str:
    out = []
    for claim, group in _groups(verdicts):
        out += [f"**Claim** ({table.md_text(claim['citation'])}): "
                f"{table.md_text(claim['text'])}. Ratio: {table.md_text(claim['ratio'])}; "
                f"read as {claim['range']} ({table.md_text(claim['reading'])})."
                + table.md_text(_config(claim))
                + "".join(f" {table.md_text(h)}." for h in sorted(
                    {v.get("here") for v in group if v.get("here")})), "",
                table.md_table(HEADERS, [r[:3] + [f"{r[3]}: {v['why']}"]
                                         for r, v in zip(_rows(group), group)]), ""]
    return "\n".join(out)
