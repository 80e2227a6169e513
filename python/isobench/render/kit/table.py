"""The shared look of every table and text isobench prints: time in
automatic units (ns, µs, ms, s), intervals as "[low, high]", ratios as
"1.52 [1.44, 1.61]", tables no wider than WIDTH columns, and the cells of
one configuration (a summary document entry).  The families
(render/families/) and the pages (console.py, report.py, paper.py) call
these helpers instead of formatting on their own.

Nothing here computes a statistic; every value printed is in the summary
document.  The default table's cells fit WIDTH columns (console.py's
narrow tables); `--wide` prints every column (results_tables).
"""

from __future__ import annotations

import html
import sys
import textwrap
from typing import Any, Mapping, Sequence

from ...core.records import REFERENCES
from ...core.text import WIDTH, column_widths, render, render_widths, terminal, wrap
from ...analysis.kit import units
from ...analysis.kit.runs import BASELINE, HEADLINE_PHASE, NOTE_PARAMS, OUTPUT_PARAMS

# ---- text that came from outside: stored names, host names, reasons ----
# (terminal, in core/text.py, shows it literally on a terminal)

def html_text(text: Any) -> str:
    """text for HTML that shows it literally: &, <, > and quotes as entities,
    control characters visible (terminal)."""
    return html.escape(terminal(text))


def md_text(text: Any) -> str:
    """text for Markdown that shows it literally and stays on its line:
    control characters visible (terminal), line breaks as spaces, HTML's
    &, < and > as entities (Markdown passes raw HTML through), '|' escaped
    (it would end a table cell)."""
    t = terminal(str(text).replace("\r\n", " ").replace("\n", " ").replace("\t", " "))
    return (t.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("|", "\\|"))


# ---- the shared look: units, intervals, ratios ----

def micro() -> str:
    """The prefix of microseconds: "µ", or "u" where stdout cannot encode it
    (an ASCII locale), so that no table ever fails to print."""
    enc = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        "µ".encode(enc)
    except (UnicodeEncodeError, LookupError):
        return "u"
    return "µ"


def time_unit(ns: float | None) -> tuple[str, float]:
    """(unit, ns per unit) that shows ns with one to three digits before the
    point: ns below 1 µs, µs below 1 ms, ms below 1 s, else s."""
    v = abs(ns or 0.0)
    if v >= 1e9:
        return "s", 1e9
    if v >= 1e6:
        return "ms", 1e6
    if v >= 1e3:
        return micro() + "s", 1e3
    return "ns", 1.0


def fmt_sig(v: float | None, digits: int = 3) -> str:
    """v with `digits` significant digits and no exponent ("1.23", "52.1",
    "1,234"): a reader compares magnitudes, and more digits are noise."""
    if v is None:
        return "-"
    a = abs(v)
    if a >= 10 ** digits or a == 0:
        return f"{v:,.0f}"
    decimals = max(0, digits - 1 - int(_floor_log10(a)))
    return f"{v:,.{decimals}f}"


def digits_apart(low: float, high: float, digits: int = 3, most: int = 9) -> int:
    """The fewest significant digits, from `digits` on, at which two unequal
    bounds print apart (641.2 and 641.4: 4), so that a narrow interval
    never reads "[641, 641]"; `digits` for equal bounds."""
    if low == high:
        return digits
    for d in range(digits, most + 1):
        if fmt_sig(low, d) != fmt_sig(high, d):
            return d
    return most


def _floor_log10(a: float) -> int:
    # Exact for the ranges a table shows; avoids math.log10's rounding at 1000.
    n = 0
    while a >= 10:
        a /= 10
        n += 1
    while a < 1:
        a *= 10
        n -= 1
    return n


def fmt_time(ns: float | None, unit: tuple[str, float] | None = None) -> str:
    """A time in ns shown in its automatic unit (or the one given): "1.23 µs"."""
    if ns is None:
        return "-"
    name, div = unit or time_unit(ns)
    return f"{fmt_sig(ns / div)} {name}"


def fmt_interval(low: float | None, high: float | None, div: float = 1.0) -> str:
    """An interval in the unit of its value: "[1.20, 1.26]"; "-" for none."""
    if low is None or high is None:
        return "-"
    d = digits_apart(low / div, high / div)
    return f"[{fmt_sig(low / div, d)}, {fmt_sig(high / div, d)}]"


def fmt_ratio_interval(value: float | None, iv: Mapping | None) -> str:
    """A ratio with its interval, as pyperf and the tables print it:
    "1.52 [1.44, 1.61]"."""
    if value is None:
        return "-"
    if not (iv and iv.get("low") is not None and iv.get("high") is not None):
        return fmt_sig(value)
    d = digits_apart(iv["low"], iv["high"])
    return f"{fmt_sig(value, d)} [{fmt_sig(iv['low'], d)}, {fmt_sig(iv['high'], d)}]"


def render_fit(headers: Sequence[str], rows: Sequence[Sequence[str]],
               right: frozenset[str] | set[str] = frozenset(),
               flex: int | Sequence[int] = 0, width: int = WIDTH) -> str:
    """render(), but at most `width` columns: the column `flex` (the label),
    or the columns `flex` names, share what the others leave (each its
    longest word where they all fit, the rest in proportion to their
    widths), and a longer cell continues on the next line(s) of its
    column, with the other cells blank, so that nothing is cut off."""
    flexes = [flex] if isinstance(flex, int) else list(flex)
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row)]
    others = sum(w for i, w in enumerate(widths) if i not in flexes) + 2 * (len(headers) - 1)
    room = width - others
    natural = sum(widths[i] for i in flexes)
    if natural <= room:
        return render(headers, rows, right)
    # Each flexible column first gets its longest word (a label is cut
    # inside a word only where the words cannot all fit), then the rest of
    # the room in proportion to what its cells still want.
    need = {i: max([len(headers[i])] + [len(w) for row in rows for w in row[i].split()])
            for i in flexes}
    if sum(need.values()) <= room and len(flexes) == 2:
        # Two: the split that takes the fewest lines, the first column
        # (the label) the wider on a tie.
        a, b = flexes

        def lines(wa: int) -> int:
            wb = room - wa
            return sum(max(len(_fold_cell(r[a], wa, "")), len(_fold_cell(r[b], wb, "")))
                       for r in rows)
        best = min(range(need[a], room - need[b] + 1), key=lambda wa: (lines(wa), -wa))
        rooms = {a: best, b: room - best}
    elif sum(need.values()) <= room:
        spare, want = room - sum(need.values()), {i: widths[i] - need[i] for i in flexes}
        total = sum(want.values()) or 1
        rooms = {i: need[i] + spare * want[i] // total for i in flexes}
    else:
        rooms = {i: max(len(headers[i]), 8, room * widths[i] // natural) for i in flexes}
    # Continuation lines indented by two, unless a word of the column would
    # then not fit ("(indirect-call)" one column short): none indented then.
    indents = {i: "  " if all(len(w) + 2 <= rooms[i] for row in rows for w in row[i].split())
               else "" for i in flexes}
    out_rows: list[list[str]] = []
    for row in rows:
        pieces = {i: _fold_cell(row[i], rooms[i], indents[i]) for i in flexes}
        for k in range(max(len(p) for p in pieces.values())):
            out_rows.append([(pieces[i][k] if k < len(pieces[i]) else "") if i in flexes
                             else (c if k == 0 else "") for i, c in enumerate(row)])
    return render(headers, out_rows, right)


def _fold_cell(text: str, room: int, indent: str) -> list[str]:
    """A cell's lines at most room wide, broken between words; a word is
    cut only where it is wider than the column itself."""
    lines = textwrap.wrap(text, width=room, subsequent_indent=indent,
                          break_long_words=False, break_on_hyphens=False) or [""]
    if all(len(line) <= room for line in lines):
        return lines
    return textwrap.wrap(text, width=room, subsequent_indent=indent,
                         break_long_words=True, break_on_hyphens=False) or [""]


# Params with a column of their own; any other param is appended to the
# variant column as key=value so that no configuration is hidden.
PARAM_COLUMNS = ("placement", "payload", "variant")

RESULT_HEADERS = ("benchmark", "mechanism", "placement", "payload", "variant", "value",
                  "95% interval", "from", "median", "mean", "batched", "unit", "~ns",
                  "ratio [95%]", "reps")
RIGHT_ALIGNED = {"payload", "value", "95% interval", "median", "mean", "batched", "~ns",
                 "ratio [95%]", "reps"}

KV_HEADERS = ("mechanism", "placement", "data", "value", "95% interval", "from", "median",
              "mean", "store/data", "verified", "passes", "unit", "~ns", "ratio [95%]", "reps")
KV_RIGHT = {"data", "value", "95% interval", "median", "mean", "store/data", "verified",
            "passes", "~ns", "ratio [95%]", "reps"}


def fold(headers: Sequence[str], rows: Sequence[Sequence[str]],
         right: frozenset[str] | set[str] = frozenset(), width: int = WIDTH, keep: int = 1,
         groups: Sequence[str] | None = None, right_all: bool = False,
         drop_empty: bool = False) -> str:
    """render(), folded to at most `width` columns: where the table is wider,
    the columns after the first `keep` (the row labels) go into blocks of
    their own, one under the other, each block repeating the first `keep`
    columns, so that no cell is cut.  groups: one name per column, printed on
    a line above the headers over each run of columns with the same name
    (a column group: a confinement's "us" and "x none"); a group stays in
    one block.  right_all: every column but the first right-aligned.  A
    single group wider than `width` stays whole.  drop_empty: a block after
    the first leaves out the rows with nothing but "-" in its own columns
    (oslat's published column, which has the averaged rows only)."""
    widths = column_widths(headers, rows)
    names = list(groups) if groups is not None else [str(i) for i in range(len(headers))]
    # Runs of equal names: (first column, end column) per group.
    units: list[tuple[int, int]] = []
    for i, n in enumerate(names):
        if units and names[units[-1][0]] == n and i > 0:
            units[-1] = (units[-1][0], i + 1)
        else:
            units.append((i, i + 1))
    if groups is not None:
        # A group name longer than its columns widens its last column.
        for a, b in units:
            span = sum(widths[a:b]) + 2 * (b - a - 1)
            widths[b - 1] += max(0, len(names[a]) - span)
    flags = [i > 0 if right_all else h in right for i, h in enumerate(headers)]
    head = [u for u in units if u[1] <= keep]
    rest = [u for u in units if u[1] > keep]
    base = sum(widths[:keep]) + 2 * max(0, keep - 1)
    blocks: list[list[tuple[int, int]]] = [[]]
    used = base
    for a, b in rest:
        w = sum(widths[a:b]) + 2 * (b - a)
        if blocks[-1] and used + w > width:
            blocks.append([])
            used = base
        blocks[-1].append((a, b))
        used += w
    out = []
    for k, block in enumerate(blocks):
        cols = [i for a, b in head + block for i in range(a, b)]
        own = [i for a, b in block for i in range(a, b)]
        shown = [r for r in rows if not (drop_empty and k > 0
                                         and all(r[i] in ("-", "") for i in own))]
        text = render_widths([headers[i] for i in cols], [[r[i] for i in cols] for r in shown],
                             [flags[i] for i in cols], [widths[i] for i in cols])
        if groups is not None:
            line = []
            for a, b in head + block:
                span = sum(widths[a:b]) + 2 * (b - a - 1)
                line.append(names[a].ljust(span) if names[a].strip() else " " * span)
            text = "  ".join(line).rstrip() + "\n" + text
        out.append(text)
    return "\n\n".join(out)


def fmt_num(v: Any) -> str:
    """A number short enough for a table, with digits that mean something; '-' for none.

    Below 10: two decimals; below 1000: one; from 1000: whole, with thousands
    separators (a tenth of a tick is noise at that size).
    """
    if v is None:
        return "-"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    v = float(v)
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def fmt_hz(hz: float | None) -> str:
    return "-" if hz is None else f"{hz / 1e9:.3f} GHz"


def fmt_ratio(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if v >= 1000 else (f"{v:.1f}" if v >= 100 else f"{v:.2f}")


def variant_text(params: Mapping) -> str:
    parts = [str(params["variant"])] if "variant" in params else []
    parts += [f"{k}={v}" for k, v in sorted(params.items())
              if k not in PARAM_COLUMNS and k not in OUTPUT_PARAMS and k not in NOTE_PARAMS]
    return " ".join(parts) or "-"


def fmt_bytes(n: Any) -> str:
    if not isinstance(n, (int, float)):
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{int(n // size)} {unit}"
    return f"{int(n)} B"


# ---- cells of one configuration (a summary document entry) ----

def interval_text(h: Mapping) -> str:
    """The headline's interval: [low..high], or +-step when it is one
    process's quantized median; '-' when there is none."""
    iv = h.get("interval")
    if h.get("modes"):
        return f"{len(h['modes'])} modes"
    if not iv:
        return "-"
    if iv.get("quantized"):
        return f"±{fmt_num((iv['high'] - iv['low']) / 2)}"
    return f"{fmt_num(iv['low'])}..{fmt_num(iv['high'])}"


def source_text(h: Mapping) -> str:
    """Which rule chose the headline, with its flags: q quantized (known to
    a few counter steps), ! the batched estimate was not trusted, m the
    repetitions fall into separate groups (modes), 1p the interval is one
    process's."""
    flags = (("q" if h.get("quantized") else "") + ("!" if h.get("batched_unreliable") else "")
             + ("m" if h.get("modes") else ""))
    one = "" if h.get("between") != "one process" else " 1p"
    return h["source"] + (f" {flags}" if flags else "") + one


def fmt_ratio_record(r: Mapping | None, with_interval: bool = True) -> str:
    """A ratio record of the summary document ({value, interval}) as
    "4.37 [4.03..4.73]" ("-" where there is none)."""
    if not r:
        return "-"
    text = fmt_ratio(r["value"])
    iv = r.get("interval")
    if with_interval and iv:
        text += f" [{fmt_ratio(iv['low'])}..{fmt_ratio(iv['high'])}]"
    return text


def ratio_text(c: Mapping) -> str:
    r = c.get("ratio")
    if r is None:
        return "baseline" if c["role"] == "baseline" else "-"
    return fmt_ratio_record(r)


def reps_text(c: Mapping, asked: int | None) -> str:
    n = len(c["repetitions"])
    return f"{n}/{asked}" if asked and n != asked else str(n)


def rep_middle(c: Mapping, key: str) -> float | None:
    """The middle one of the repetitions' own `key` (median, mean, batched):
    shown beside the headline, never computed into it."""
    vals = sorted(r[key] for r in c["repetitions"] if r.get(key) is not None)
    return vals[len(vals) // 2] if vals else None


def config_row(c: Mapping, asked: int | None) -> list[str]:
    p, h = c["params"], c["headline"]
    return [c["benchmark"], c["mechanism"], str(p.get("placement", "-")),
            str(p.get("payload", "-")), variant_text(p), fmt_num(h["value"]), interval_text(h),
            source_text(h), fmt_num(rep_middle(c, "median")), fmt_num(rep_middle(c, "mean")),
            fmt_num(rep_middle(c, "batched")), c["unit"] or "-", fmt_num(h["ns"]),
            ratio_text(c), reps_text(c, asked)]


def kv_row(c: Mapping, asked: int | None) -> list[str]:
    """One get phase of the kv benchmark at one data size, with the store's
    size beside the data's and how much was verified."""
    p, h = c["params"], c["headline"]
    outs = [r["outputs"] for r in c["repetitions"]]
    first = outs[0] if outs else {}
    ratio = first.get("store_ratio")
    verified = sum(o.get("verified") or 0 for o in outs) if outs else None
    passes = "-"
    if outs and all("iterations" in o and "iterations_asked" in o for o in outs):
        passes = (f"{min(o['iterations'] for o in outs)}/"
                  f"{max(o['iterations_asked'] for o in outs)}")
    return [c["mechanism"], str(p.get("placement", "-")), fmt_bytes(p.get("data_bytes")),
            fmt_num(h["value"]), interval_text(h), source_text(h),
            fmt_num(rep_middle(c, "median")), fmt_num(_kv_mean(c)),
            f"{ratio:.2f}" if isinstance(ratio, (int, float)) else "-", fmt_num(verified),
            passes, c["unit"] or "-", fmt_num(h["ns"]), ratio_text(c), reps_text(c, asked)]


def _kv_mean(c: Mapping) -> float | None:
    """kv prints the exact mean over every timed request as params.mean."""
    vals = sorted(r["outputs"]["mean"] for r in c["repetitions"]
                  if isinstance(r["outputs"].get("mean"), (int, float)))
    return vals[len(vals) // 2] if vals else rep_middle(c, "mean")


def asked_repetitions(doc: Mapping, benchmark: str | None = None) -> int | None:
    """The repetitions the run asked for (of one benchmark, where it had its own)."""
    opts = doc["run"].get("options") or {}
    return (opts.get("repeat_by_benchmark") or {}).get(benchmark, opts.get("repeat"))


def results_tables(doc: Mapping) -> list[str]:
    """One table per kind of benchmark.  For kv only the measured get phase
    is shown; the set and warm-up phases are stored beside it.  A benchmark
    measured against a reference program (kv-server: REFERENCES) has a table
    of its own (kv_server_table)."""
    configs = [c for c in doc["configs"] if c["benchmark"] not in REFERENCES]
    kv = [c for c in configs if c["benchmark"] == "kv" and c["headline_phase"]]
    other = [c for c in configs if c["benchmark"] != "kv"]
    asked = asked_repetitions(doc)
    out = []
    if other:
        out.append(render(RESULT_HEADERS, [config_row(c, asked_repetitions(doc, c["benchmark"]))
                                           for c in other], RIGHT_ALIGNED))
    if kv:
        out.append("kv: time per get request, per data size (set and warm-up phases are "
                   "stored too: `isobench export`)")
        out.append(render(KV_HEADERS, [kv_row(c, asked) for c in kv], KV_RIGHT))
    return out


# ---- the default table: one row per configuration, WIDTH columns ----

# Params shown in the size column, in bytes (the first one a result has).
SIZE_PARAMS = ("payload", "data_bytes")
PLACEMENT_ORDER = {"same-cpu": 0, "cross-cpu": 1, "unpinned": 2}
NARROW_RIGHT = {"size", "time", "95% CI", "vs direct [95% CI]"}


def config_label(c: Mapping, hide: frozenset[str] | set[str] = frozenset()) -> str:
    """The mechanism and every param without a column of its own: "direct
    (inline)", "wasm checks=bounds", "primitive=pipe protect=none"; params in
    hide (the same in every row: the table's title names them) left out."""
    p = {k: v for k, v in c["params"].items() if k not in hide}
    parts = [] if c["mechanism"] == "-" else [c["mechanism"]]
    variant = p.get("variant")
    if variant is not None and variant != "entry" and c["benchmark"] not in HEADLINE_PHASE:
        parts.append(f"({variant})" if parts else f"variant={variant}")
    parts += [f"{k}={v}" for k, v in sorted(p.items())
              if k not in ("placement", "variant", *SIZE_PARAMS) and k not in OUTPUT_PARAMS
              and k not in NOTE_PARAMS]
    return " ".join(parts) or "-"


def caveat_notes(configs: Sequence[Mapping]) -> list[str]:
    """The caveats the rows' labels leave out (NOTE_PARAMS), once per
    mechanism and caveat: "kvm: nested virtualization: costs more than on
    bare metal"."""
    seen = dict.fromkeys(f"{c['mechanism']}: {c['params']['caveat']}" for c in configs
                         if c["params"].get("caveat"))
    return list(seen)


def size_text(params: Mapping) -> str:
    for k in SIZE_PARAMS:
        if k in params:
            return fmt_bytes(params[k])
    return "-"


def status_text(c: Mapping, asked: int | None) -> str:
    """Which rule chose the headline and its flags (source_text), and how
    many of the repetitions asked for gave a value, where not all did."""
    n = len(c["headline"]["values"])
    return source_text(c["headline"]) + (f" {n}/{asked}" if asked and n < asked else "")


def value_header(configs: Sequence[Mapping]) -> str:
    """"time" when every row converts to ns, else the one counter unit
    ("cycles"), else "value" (each cell then names its unit)."""
    if all(c["headline"].get("ns") is not None for c in configs):
        return "time"
    found = {c["unit"] for c in configs if c["headline"].get("ns") is None}
    return found.pop() if len(found) == 1 and not any(
        c["headline"].get("ns") is not None for c in configs) else "value"


def value_cells(c: Mapping, header: str) -> tuple[str, str]:
    """(headline, its interval) in the row's automatic time unit, or in the
    counter's unit where it is not a time."""
    h = c["headline"]
    iv = h.get("interval") or {}
    if h.get("modes"):
        value = (fmt_time(h["ns"], time_unit(h["ns"])) if h.get("ns") is not None else
                 fmt_sig(h["value"]) + ("" if header != "value"
                                        else f" {c['unit'] or ''}".rstrip()))
        return value, interval_text(h)
    if h.get("ns") is not None:
        unit = time_unit(h["ns"])
        if iv.get("quantized") and h.get("interval_ns"):
            lo, hi = h["interval_ns"]
            return fmt_time(h["ns"], unit), f"±{fmt_sig((hi - lo) / 2 / unit[1])}"
        lo, hi = h.get("interval_ns") or (None, None)
        return fmt_time(h["ns"], unit), fmt_interval(lo, hi, unit[1])
    value = fmt_sig(h["value"]) + ("" if header != "value" else f" {c['unit'] or ''}".rstrip())
    if iv.get("quantized"):
        return value, f"±{fmt_sig((iv['high'] - iv['low']) / 2)}"
    return value, fmt_interval(iv.get("low"), iv.get("high"))


def ratio_cell(c: Mapping) -> str:
    r = c.get("ratio")
    if r is None:
        return {"baseline": "baseline", "reference": "reference"}.get(c["role"], "-")
    return fmt_ratio_interval(r["value"], r.get("interval"))


def _cost(c: Mapping) -> float:
    h = c["headline"]
    v = h.get("ns") if h.get("ns") is not None else h.get("value")
    return v if v is not None else float("inf")


def _first_size(c: Mapping) -> float:
    p = c["params"]
    return next((float(p[k]) for k in SIZE_PARAMS if isinstance(p.get(k), (int, float))), 0.0)


def ordered(configs: Sequence[Mapping]) -> list[Mapping]:
    """Rows grouped by mechanism, mechanisms by cost (direct first, then by
    the headline of each one's first configuration: same-cpu, smallest
    size); within a mechanism by placement, variant and size."""
    def inner(c):
        p = c["params"]
        return (PLACEMENT_ORDER.get(p.get("placement"), 3), p.get("variant") != "entry",
                str(p.get("variant")), _first_size(c), config_label(c))

    by_mech: dict[str, list[Mapping]] = {}
    for c in configs:
        by_mech.setdefault(c["mechanism"], []).append(c)
    for cs in by_mech.values():
        cs.sort(key=inner)
    rank = sorted(by_mech, key=lambda m: (m != BASELINE, _cost(by_mech[m][0]), m))
    return [c for m in rank for c in by_mech[m]]


def common_params(configs: Sequence[Mapping]) -> dict:
    """Params with one value in every configuration (kv's key and value
    sizes, its seed): said once above the table instead of in every row."""
    if len(configs) < 2:
        return {}
    first = configs[0]["params"]
    return {k: v for k, v in sorted(first.items())
            if k not in ("placement", "variant", *SIZE_PARAMS) and k not in OUTPUT_PARAMS
            and all(c["params"].get(k, _NONE) == v for c in configs)}


_NONE = object()


# ---- Markdown ----

def md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown (GitHub) table; every cell through md_text (a '|' or a line
    break inside a cell cannot end it, HTML in it is shown, not run)."""
    esc = md_text
    out = ["| " + " | ".join(esc(h) for h in headers) + " |",
           "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(out)
