"""`isobench compare RUN_A RUN_B`: the same configurations in two runs.

It reads the two runs' summary documents (summary.build) and matches
configurations by benchmark, mechanism and the params that select the
measurement.  Each run is normalized to its OWN `direct` baseline (the
configuration the summary names in its ratio), so that two machines are
compared by what isolation costs on each, not by how fast each one is:

    B/A = (value_B / direct_B) / (value_A / direct_A)

Every value is a configuration's headline (summary.py); the repetitions are
the unit: the interval is a Welch t interval on the logs of the four sets of
repetition values, and the Mann-Whitney U test compares A's repetitions,
each divided by A's direct, with B's.  With too few repetitions for the
test to reach p < 0.05, no p is printed and the row says so.

Configurations without a baseline (direct itself, pingpong, memcached in
kv-server) compare in absolute terms only within one machine, or across
machines when asked for with --absolute (with a warning: cycles of one
machine are not cycles of another).  Averages are geometric means within
one population (runs.POPULATION_PARAMS): placements, payloads and
phases are never pooled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from . import runs, stats, units
from ..render import table
from .summary import config_by_key

NORMALIZED, ABSOLUTE = "vs direct", "absolute"


@dataclass
class Row:
    a: dict
    b: dict
    basis: str
    a_value: float
    b_value: float
    unit: str
    ratio: float
    interval: stats.Interval | None
    test: stats.MannWhitney | None
    notes: tuple[str, ...]

    @property
    def verdict(self) -> dict:
        """B against A in words, as pyperf's compare_to says it: "slower" or
        "faster" by a factor >= 1 with its interval, when the 95% interval
        of B/A excludes 1; else "not significant"; "no interval" with too
        few repetitions.  Every headline is a cost (time, cycles), so B/A > 1
        means B is slower."""
        iv = self.interval
        if iv is None:
            return {"word": "no interval", "factor": None, "low": None, "high": None}
        if iv.low <= 1.0 <= iv.high:
            return {"word": "not significant", "factor": None, "low": None, "high": None}
        if self.ratio >= 1.0:
            return {"word": "slower", "factor": self.ratio, "low": iv.low, "high": iv.high}
        return {"word": "faster", "factor": 1.0 / self.ratio, "low": 1.0 / iv.high,
                "high": 1.0 / iv.low}

    @property
    def population(self) -> tuple:
        return runs.population(self.a["benchmark"], self.a["params"])

    def as_dict(self) -> dict:
        t = self.test
        return {"benchmark": self.a["benchmark"], "mechanism": self.a["mechanism"],
                "params": self.a["params"], "basis": self.basis, "a": self.a_value,
                "b": self.b_value, "unit": self.unit, "ratio": self.ratio,
                "interval": self.interval.as_dict() if self.interval else None,
                "p": t.p if t else None, "u": t.u if t else None,
                "effect": t.effect if t else None, "test": t.method if t else None,
                "reps_a": self.a["headline"]["reps"], "reps_b": self.b["headline"]["reps"],
                "verdict": self.verdict, "notes": list(self.notes)}


def _machine(doc: Mapping) -> tuple:
    env = doc["run"].get("environment") or {}
    return env.get("hostname"), env.get("cpu_model"), env.get("hypervisor")


def same_machine(a: Mapping, b: Mapping) -> bool:
    ma, mb = _machine(a), _machine(b)
    return ma[0] is not None and ma[1] is not None and ma == mb


def _quick(doc: Mapping) -> bool | None:
    seen = (doc.get("measurement") or {}).get("quick")
    if seen:
        return seen[0] if len(seen) == 1 else None
    argv = doc["run"].get("argv") or []
    return "--quick" in argv if argv else None


def _commit(doc: Mapping) -> str | None:
    git = (doc["run"].get("environment") or {}).get("git") or {}
    c = git.get("commit")
    return None if not c else c[:12] + (" (dirty)" if git.get("dirty") else "")


def differences(a: Mapping, b: Mapping) -> list[str]:
    """Ways in which the two runs were not measured alike, each a warning:
    --quick, samples per result, counter, machine, commit."""
    out = []
    qa, qb = _quick(a), _quick(b)
    if qa is not None and qb is not None and qa != qb:
        out.append(f"A was {'a --quick run' if qa else 'a full run'} and B "
                   f"{'a --quick run' if qb else 'a full run'}: quick runs measure fewer "
                   "iterations, and their numbers can differ for that alone")
    na, nb = [(d.get("measurement") or {}).get("n") or [] for d in (a, b)]
    if na and nb and na != nb:
        out.append(f"samples per result differ (A: n={'/'.join(map(str, na))}, B: "
                   f"n={'/'.join(map(str, nb))})")
    ca, cb = [sorted({c[0] for c in (d.get("measurement") or {}).get("counters") or [] if c[0]})
              for d in (a, b)]
    if ca and cb and ca != cb:
        out.append(f"the counters differ (A: {', '.join(ca)}; B: {', '.join(cb)}): each run "
                   "is normalized to its own direct, but what a counter includes differs")
    if not same_machine(a, b):
        ma, mb = _machine(a), _machine(b)
        out.append(f"the runs come from different machines (A: {ma[0] or '?'}, {ma[1] or '?'}; "
                   f"B: {mb[0] or '?'}, {mb[1] or '?'}): B/A compares what isolation costs on "
                   "each, normalized to its own direct")
    ga, gb = _commit(a), _commit(b)
    if ga and gb and ga != gb:
        out.append(f"isobench was built from different commits (A: {ga}; B: {gb})")
    return out


def _group(c: Mapping) -> stats.LogGroup:
    h = c["headline"]
    return stats.LogGroup.of(h["values"], h["resolution"])


def _positive(*configs: Mapping) -> bool:
    return all(c["headline"]["values"] and all(v > 0 for v in c["headline"]["values"])
               for c in configs)


def _test(xs: Sequence[float], ys: Sequence[float]) -> tuple[stats.MannWhitney | None, str | None]:
    if not stats.test_possible(len(xs), len(ys)):
        need = stats.min_reps_for_test()
        return None, (f"{len(xs)} and {len(ys)} repetitions: the U test cannot reach "
                      f"p < {stats.ALPHA:g} (needs {need} per side); no p")
    return stats.mann_whitney_u(xs, ys), None


def _normalized(a: dict, ab: dict, b: dict, bb: dict) -> Row | None:
    if not _positive(a, ab, b, bb):
        return None
    ra, rb = a["ratio"]["value"], b["ratio"]["value"]
    terms = [(1, _group(b)), (-1, _group(bb)), (-1, _group(a)), (1, _group(ab))]
    interval = stats.log_interval(terms, method="Welch t interval of the log ratio of ratios "
                                                "over repetitions")
    base_a, base_b = ab["headline"]["value"], bb["headline"]["value"]
    test, why = _test([units.ratio(v, base_a) for v in a["headline"]["values"]],
                      [units.ratio(v, base_b) for v in b["headline"]["values"]])
    notes = [why] if why else []
    if interval is None:
        notes.append("fewer than 2 repetitions on a side: no interval")
    return Row(a, b, NORMALIZED, ra, rb, "x direct", units.ratio(rb, ra), interval, test,
               tuple(notes))


def _absolute(a: dict, b: dict) -> Row | str:
    if not _positive(a, b):
        return "a repetition's value is not positive"
    xs, ys = a["headline"]["values"], b["headline"]["values"]
    ra, rb = a["headline"]["resolution"], b["headline"]["resolution"]
    unit = a["unit"] or "?"
    if a["unit"] != b["unit"]:
        if a["to_ns"] is None or b["to_ns"] is None:
            return f"units {a['unit']} and {b['unit']} cannot be converted"
        xs, ys = units.scale(xs, a["to_ns"]), units.scale(ys, b["to_ns"])
        ra, rb = ra * a["to_ns"], rb * b["to_ns"]
        unit = "ns"
    interval = stats.ratio_interval(ys, xs, rb, ra)
    test, why = _test(xs, ys)
    notes = [why] if why else []
    av, bv = stats.geomean(xs), stats.geomean(ys)
    return Row(a, b, ABSOLUTE, av, bv, unit, units.ratio(bv, av), interval, test, tuple(notes))


def compare(a: Mapping, b: Mapping, absolute: bool = False) -> dict:
    """The comparison of two summary documents (see render for the text form)."""
    a_by, b_by = config_by_key(a), config_by_key(b)
    same = same_machine(a, b)
    rows: list[Row] = []
    skipped: list[str] = []
    for key, ca in a_by.items():
        cb = b_by.get(key)
        if cb is None:
            continue
        ab = a_by.get(tuple(ca["ratio"]["to_key"])) if ca.get("ratio") else None
        bb = b_by.get(tuple(cb["ratio"]["to_key"])) if cb.get("ratio") else None
        if ab is not None and bb is not None:
            row = _normalized(ca, ab, cb, bb)
            if row is None:
                skipped.append(f"{ca['label']}: a repetition's value is not positive")
            else:
                rows.append(row)
            continue
        if not (same or absolute):
            side = "A" if ab is None and ca["role"] == "mechanism" else (
                "B" if bb is None and cb["role"] == "mechanism" else None)
            why = (f"no `direct` baseline in run {side}" if side else
                   "no baseline (it is one, or measures no mechanism)")
            skipped.append(f"{ca['label']}: {why}; the runs come from different machines, "
                           "so an absolute ratio needs --absolute")
            continue
        row = _absolute(ca, cb)
        if isinstance(row, str):
            skipped.append(f"{ca['label']}: {row}")
        else:
            rows.append(row)
    warnings = []
    if absolute and not same and any(r.basis == ABSOLUTE for r in rows):
        warnings.append("absolute ratios across machines (--absolute): one machine's cycles, "
                        "ticks or ns are not another's; read the 'vs direct' rows for what "
                        "isolation costs")
    return {"rows": rows, "skipped": skipped, "same_machine": same, "warnings": warnings,
            "differences": differences(a, b),
            "only_a": [c["label"] for k, c in a_by.items() if k not in b_by],
            "only_b": [c["label"] for k, c in b_by.items() if k not in a_by],
            "averages": averages(rows)}


def averages(rows: Sequence[Row]) -> list[dict]:
    """Geometric means of B/A within each population and basis, over
    mechanisms and sweep params; the non-headline phases are left out."""
    groups: dict[tuple, list[Row]] = {}
    for r in rows:
        if not r.a["headline_phase"]:
            continue
        groups.setdefault((r.basis, *r.population), []).append(r)
    out = []
    for (basis, bench, *pop), members in groups.items():
        if len(members) < 2:
            continue
        population = {k: v for k, v in zip(runs.POPULATION_PARAMS, pop) if v is not None}
        out.append({"basis": basis, "benchmark": bench, "population": population,
                    **stats.aggregate_ratios([r.ratio for r in members])})
    return out


def _run_dict(doc: Mapping) -> dict:
    run = doc["run"]
    env = run.get("environment") or {}
    return {"run_id": run["run_id"], "db": run["db"], "started": run.get("started"),
            "cpu_model": env.get("cpu_model"), "kernel": env.get("kernel"),
            "hypervisor": env.get("hypervisor"), "hostname": env.get("hostname"),
            "counter": env.get("counter")}


def document(a: Mapping, b: Mapping, result: dict) -> dict:
    return {"a": _run_dict(a), "b": _run_dict(b),
            "rows": [r.as_dict() for r in result["rows"]],
            "averages": result["averages"], "skipped": result["skipped"],
            "same_machine": result["same_machine"], "warnings": result["warnings"],
            "differences": result["differences"],
            "only_a": result["only_a"], "only_b": result["only_b"],
            "level": stats.CI_LEVEL,
            "findings": {"A": [f["id"] for f in a["findings"]],
                         "B": [f["id"] for f in b["findings"]]}}


HEADERS = ("benchmark", "mechanism", "placement", "size", "A", "B", "B vs A [95% CI]", "p")
RIGHT = {"size", "A", "B", "p"}


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


def verdict_text(r: Row) -> str:
    """ "1.52x slower [1.44, 1.61]", "not significant", "no interval"."""
    v = r.verdict
    if v["factor"] is None:
        return v["word"]
    return (f"{table.fmt_sig(v['factor'])}x {v['word']} "
            f"[{table.fmt_sig(v['low'])}, {table.fmt_sig(v['high'])}]")


def _row_cells(r: Row) -> list[str]:
    p = r.a["params"]
    label = table.config_label(r.a) + (" (absolute)" if r.basis == ABSOLUTE else "")
    return [r.a["benchmark"], label, str(p.get("placement", "-")), table.size_text(p),
            _value(r, r.a_value), _value(r, r.b_value), verdict_text(r),
            _fmt_p(r.test.p if r.test else None)]


def _machine_text(d: dict) -> str:
    parts = [d.get("cpu_model"), d.get("kernel") and f"Linux {d['kernel']}", d.get("hypervisor")]
    return ", ".join(str(x) for x in parts if x) or "machine unknown"


def render(rows: Sequence[Row], doc: dict) -> str:
    a, b = doc["a"], doc["b"]
    w = table.wrap
    out = [w(f"A: run {a['run_id']} in {a['db']} ({_machine_text(a)})"),
           w(f"B: run {b['run_id']} in {b['db']} ({_machine_text(b)})"),
           w("B vs A: for mechanisms, (B / B's direct) / (A / A's direct): what isolation costs "
             "on B relative to A; A and B are each run's ratio to its own direct. For direct "
             "and rows marked (absolute), B / A. 'slower' or 'faster' when the 95% interval "
             "(Welch t over the repetitions' logs) excludes 1, else 'not significant'; p: "
             "Mann-Whitney U on the repetitions, two-sided.", indent=""), ""]
    for text in [*doc["differences"], *doc["warnings"]]:
        out.append(w(f"warning: {text}"))
    if doc["differences"] or doc["warnings"]:
        out.append("")
    out.append(table.render_fit(HEADERS, [_row_cells(r) for r in rows], RIGHT, flex=1)
               if rows else "(no results in common)")
    out.append("")
    for g in doc["averages"]:
        pop = " ".join(f"{k}={v}" for k, v in g["population"].items())
        out.append(w(f"geometric mean of B/A over {g['n']} '{g['basis']}' result(s) of "
                     f"{g['benchmark']} {pop}: {g['value']:.3f}"))
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
