"""`isobench compare` as text: per benchmark and basis a table of B/A with
its interval, Holm-adjusted p and verdict, the warnings, the correction over
the rows in words, and the geometric means (analysis/compare.py builds
every number; nothing here computes one)."""

from __future__ import annotations

from typing import Sequence

from ..analysis.compare import ABSOLUTE, NORMALIZED, Row
from .kit import table

# The table shows the Holm-adjusted p, the one the verdict reads; --json
# has the unadjusted p, t and df of every row beside it.
# One table per benchmark and basis, titled with them.
HEADERS = ("mechanism", "placement", "size", "A", "B", "B/A [95% CI]", "Holm p", "verdict")
RIGHT = {"size", "A", "B", "B/A [95% CI]", "Holm p"}


def _fmt_p(p: float | None) -> str:
    if p is None:
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _value(r: Row, v: float) -> str:
    """A value of A or B: a ratio to direct ("4.11x"), or a time in its
    automatic unit, or a count in the counter's unit."""
    if r.unit == "x direct":
        return f"{table.fmt_sig(v)}x"
    if r.unit == "ns":
        return table.fmt_time(v)
    f = r.a.get("to_ns") if r.unit == r.a["unit"] else None
    return table.fmt_time(v * f) if f else f"{table.fmt_sig(v)} {r.unit}"


def ratio_text(r: Row) -> str:
    """B/A with its interval, whatever the verdict: "1.02 [0.95, 1.09]"."""
    iv = r.interval
    return table.fmt_sig(r.ratio) + (f" {table.fmt_interval(iv.low, iv.high)}" if iv else "")


def verdict_text(r: Row, interval: bool = True) -> str:
    """ "1.52x slower [1.44, 1.61]", "not significant", "within noise band",
    "inconclusive (n=3)"."""
    v = r.verdict
    if v["factor"] is None:
        return v["word"] + (f" ({v['reason']})" if v["reason"] else "")
    text = f"{table.fmt_sig(v['factor'])}x {v['word']}"
    return text + (f" {table.fmt_interval(v['low'], v['high'])}" if interval else "")


def _row_cells(r: Row) -> list[str]:
    p = r.a["params"]
    return [table.config_label(r.a), str(p.get("placement", "-")), table.size_text(p),
            _value(r, r.a_value), _value(r, r.b_value), ratio_text(r), _fmt_p(r.p_holm),
            verdict_text(r, interval=False)]


def _machine_text(d: dict) -> str:
    parts = [d.get("cpu_model"), d.get("kernel") and f"Linux {d['kernel']}", d.get("hypervisor")]
    return ", ".join(str(x) for x in parts if x) or "machine unknown"


def _pct(band: float) -> str:
    return f"{100 * band:g}%"


def correction_text(c: dict) -> str:
    """The rows together, in words: why no row has a verdict, or how many
    differ after Holm's correction and beyond the noise band."""
    if not c["rows"]:
        return ""
    alpha = f"{c['alpha']:.2g}"
    if c["family"] == 0:
        ns = "/".join(map(str, c["inconclusive_reps"])) or "1"
        return (f"no verdict: every row has fewer than {c['min_reps']} repetitions in a group "
                f"(n={ns}). 'slower' or 'faster' needs at least {c['min_reps']} a side "
                f"(`isobench run --repeat {c['min_reps']}`, the default without --quick): "
                "fewer estimate the spread between processes too poorly to trust an "
                f"interval's width, and {c['rows']} row(s) at once would give a false "
                "difference often. B/A and its interval are shown; an interval that "
                "excludes 1 here is not a finding.")
    text = (f"{c['differ']} of {c['family']} row(s) differ after {c['method']}'s correction "
            f"over those {c['family']} (family-wise error {alpha}) and beyond the "
            f"+-{_pct(c['noise_band'])} noise band: {c['slower']} slower, {c['faster']} faster")
    if c["within_band"]:
        text += (f"; {c['within_band']} more differ significantly but within the noise band "
                 "(`--noise-band`)")
    if c["inconclusive"]:
        ns = "/".join(map(str, c["inconclusive_reps"]))
        text += (f"; {c['inconclusive']} row(s) with fewer than {c['min_reps']} repetitions "
                 f"in a group (n={ns}) have no verdict")
    return text + "."


def render(rows: Sequence[Row], doc: dict) -> str:
    a, b = doc["a"], doc["b"]
    c = doc["correction"]
    w = table.wrap
    out = [w(f"A: run {a['run_id']} in {a['db']} ({_machine_text(a)})"),
           w(f"B: run {b['run_id']} in {b['db']} ({_machine_text(b)})"),
           w("B/A: for mechanisms, (B / B's direct) / (A / A's direct): what isolation costs "
             "on B relative to A; A and B are each run's ratio to its own direct. In the "
             "absolute tables (direct, results without a baseline), B / A. The 95% interval "
             "and p: Welch's t on the logs of the repetitions (Welch-Satterthwaite df); Holm "
             "p: that p, Holm-adjusted. A row is 'slower' or 'faster' with at least "
             f"{c['min_reps']} repetitions in every group, a {c['method']}-adjusted p below "
             f"{c['alpha']:.2g} over the rows of this compare, and B/A beyond the "
             f"+-{_pct(c['noise_band'])} noise band.", indent=""), ""]
    for text in [*doc["differences"], *doc["warnings"]]:
        out.append(w(f"warning: {text}"))
    if doc["differences"] or doc["warnings"]:
        out.append("")
    tables: dict[tuple, list[Row]] = {}
    for r in sorted(rows, key=lambda r: r.basis == ABSOLUTE):
        tables.setdefault((r.a["benchmark"], r.basis), []).append(r)
    for (bench, basis), members in tables.items():
        title = (f"{bench}, each run normalized to its own direct:" if basis == NORMALIZED else
                 f"{bench}, absolute (B / A):")
        # The label and the verdict fold where the row is too wide: both
        # are words, the numbers between them are not.
        out += [title, table.render_fit(HEADERS, [_row_cells(r) for r in members], RIGHT,
                                        flex=(0, len(HEADERS) - 1)), ""]
    if not rows:
        out += ["(no results in common)", ""]
    if rows:
        out.append(w(correction_text(c)))
    for g in doc["averages"]:
        pop = " ".join(f"{k}={v}" for k, v in g["population"].items())
        iv = g["interval"]
        ivt = f" {table.fmt_interval(iv['low'], iv['high'])}" if iv else " (no interval)"
        out.append(w(f"geometric mean of B/A over {g['n']} '{g['basis']}' row(s) of "
                     f"{g['benchmark']} {pop}: {table.fmt_sig(g['value'], 4)}{ivt} "
                     f"(n={g['n']} rows, >= {g['reps']} repetitions a group)"))
    notes = sorted({n for r in rows for n in r.notes})
    for n in notes:
        out.append(w(f"note: {n}"))
    for key, label in (("only_a", "only in A"), ("only_b", "only in B")):
        if doc[key]:
            out.append(f"{len(doc[key])} result(s) {label}, not compared")
    for s in doc["skipped"]:
        out.append(w(f"not compared: {s}"))
    for side, ids in doc["findings"].items():
        if ids:
            out.append(w(f"soundness of run {side}: {', '.join(ids)} (see `isobench check`)"))
    return "\n".join(out)
