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
                "notes": list(self.notes)}


def _machine(doc: Mapping) -> tuple:
    env = doc["run"].get("environment") or {}
    return env.get("hostname"), env.get("cpu_model"), env.get("hypervisor")


def same_machine(a: Mapping, b: Mapping) -> bool:
    ma, mb = _machine(a), _machine(b)
    return ma[0] is not None and ma[1] is not None and ma == mb


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
            "only_a": result["only_a"], "only_b": result["only_b"],
            "level": stats.CI_LEVEL,
            "findings": {"A": [f["id"] for f in a["findings"]],
                         "B": [f["id"] for f in b["findings"]]}}


HEADERS = ("benchmark", "mechanism", "placement", "payload", "variant", "basis", "A", "B",
           "B/A", "95% interval", "p", "note")
RIGHT = {"payload", "A", "B", "B/A", "95% interval", "p"}


def _fmt_p(p: float | None) -> str:
    if p is None:
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _value(v: float, unit: str) -> str:
    return f"{v:.2f}x" if unit == "x direct" else f"{table.fmt_num(v)} {unit}"


def _note(r: Row) -> str:
    if r.test is None:
        return "no test (too few reps)"
    return "" if r.test.p < stats.ALPHA else "not significant"


def _row_cells(r: Row) -> list[str]:
    p = r.a["params"]
    iv = f"{r.interval.low:.3f}..{r.interval.high:.3f}" if r.interval else "-"
    return [r.a["benchmark"], r.a["mechanism"], str(p.get("placement", "-")),
            str(p.get("payload", "-")), table.variant_text(p), r.basis,
            _value(r.a_value, r.unit), _value(r.b_value, r.unit), f"{r.ratio:.3f}", iv,
            _fmt_p(r.test.p if r.test else None), _note(r)]


def _machine_text(d: dict) -> str:
    parts = [d.get("cpu_model"), d.get("kernel") and f"Linux {d['kernel']}", d.get("hypervisor")]
    return ", ".join(str(x) for x in parts if x) or "machine unknown"


def render(rows: Sequence[Row], doc: dict) -> str:
    a, b = doc["a"], doc["b"]
    out = [f"A: run {a['run_id']} in {a['db']} ({_machine_text(a)})",
           f"B: run {b['run_id']} in {b['db']} ({_machine_text(b)})",
           "B/A: for 'vs direct' rows, (B / B's direct) / (A / A's direct): what isolation "
           "costs on B relative to A;",
           "     for 'absolute' rows, B / A.  Values: headlines, geometric means over "
           "repetitions.  95% interval: Welch t over",
           "     the repetitions' logs; p: Mann-Whitney U on the repetitions, two-sided.", ""]
    for w in doc["warnings"]:
        out.append(f"warning: {w}")
    if doc["warnings"]:
        out.append("")
    out.append(table.render(HEADERS, [_row_cells(r) for r in rows], RIGHT)
               if rows else "(no results in common)")
    out.append("")
    for g in doc["averages"]:
        pop = " ".join(f"{k}={v}" for k, v in g["population"].items())
        out.append(f"geometric mean of B/A over {g['n']} '{g['basis']}' result(s) of "
                   f"{g['benchmark']} {pop}: {g['value']:.3f}")
    notes = sorted({n for r in rows for n in r.notes})
    for n in notes:
        out.append(f"note: {n}")
    for key, label in (("only_a", "only in A"), ("only_b", "only in B")):
        if doc[key]:
            out.append(f"{len(doc[key])} result(s) {label}, not compared")
    for s in doc["skipped"]:
        out.append(f"not compared: {s}")
    for side, ids in doc["findings"].items():
        if ids:
            out.append(f"soundness of run {side}: {', '.join(ids)} (see `isobench check`)")
    return "\n".join(out)
