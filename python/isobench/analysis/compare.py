"""`isobench compare RUN_A RUN_B`: the same configurations in two runs.

It reads the two runs' summary documents (summary.build) and matches
configurations by benchmark, mechanism and the params that select the
measurement.  Each run is normalized to its OWN `direct` baseline (the
configuration the summary names in its ratio), so that two machines are
compared by what isolation costs on each, not by how fast each one is:

    B/A = (value_B / direct_B) / (value_A / direct_A)

The repetitions (fresh isob processes) are the unit.  One test gives a
row's interval, its p and its verdict: Welch's t on the logarithm of B/A,
a sum of the four configurations' mean log values (two for a row compared
in absolute terms), each group's variance its own, the degrees of freedom
Welch-Satterthwaite's (welch()).  A row says "slower" or "faster" only

- with at least MIN_REPS_FOR_VERDICT repetitions in every group (else
  "inconclusive (n=3)", the ratio and its interval still shown);
- when its p, Holm-adjusted over every row of the compare that can have a
  verdict, is below 0.05 (so that ten rows sharing one `direct` do not
  produce a false "slower" one compare in four);
- and when B/A lies outside the noise band (default +-2%): a significant
  difference smaller than that reads "within noise band".

Both runs' values of a configuration come from the same estimator: where
the two headlines were chosen differently (the per-call median in one run,
the batched estimate in the other) both sides are recomputed from the
repetitions' medians and the row says so.

Configurations without a baseline (direct itself, pingpong, memcached in
kv-server) compare in absolute terms only within one machine, or across
machines when asked for with --absolute (with a warning: cycles of one
machine are not cycles of another).  Averages are geometric means within
one population (runs.POPULATION_PARAMS), with a Welch interval over the
same repetitions: placements, payloads and phases are never pooled.
render/compare.py writes the result as text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Mapping, Sequence

from .kit import runs, units
from ..core import stats, student
from .kit.ratios import BATCHED, MEDIAN
from .summary import config_by_key

NORMALIZED, ABSOLUTE = "vs direct", "absolute"

# Fewer repetitions than this in any group of a row, and the row gets no
# verdict word (core/stats.py says why).
MIN_REPS_FOR_VERDICT = stats.MIN_REPS_FOR_VERDICT
# A difference inside +-NOISE_BAND is not called slower or faster even when
# significant: two runs of one build on one machine differ by a few percent
# for reasons their repetitions do not see (frequency, page layout, load);
# docs/methodology.md gives the pairs of runs that show it.
NOISE_BAND = 0.02
# The multiple-comparison correction over the rows of one compare.
CORRECTION = "Holm"
TEST = "Welch t on the log ratio, Welch-Satterthwaite df"


# ---- the test: Welch's t on a sum of mean logs ----

@dataclass(frozen=True)
class Group:
    """One configuration's repetition values on the log scale.

    floor is the variance a quantized value carries whatever the
    repetitions say, (resolution / geometric mean)^2 / 12 (a uniform error
    over one step).  It is systematic, so it is a floor under the variance
    of the MEAN, not divided by n: repetitions that all read the same step
    know the value to that step, not better."""

    mean: float
    var: float
    n: int
    floor: float = 0.0

    @classmethod
    def of(cls, values: Sequence[float], resolution: float = 0.0) -> "Group":
        g = stats.LogGroup.of(values, resolution)  # the one definition of both terms
        return cls(g.mean, g.var, g.n, g.sys)

    @property
    def random(self) -> float:
        """The variance of the mean log from the repetitions' spread."""
        return self.var / self.n

    @property
    def var_of_mean(self) -> float:
        return max(self.random, self.floor)


def t_ppf(p: float, df: float) -> float:
    """The p-quantile of Student's t: Newton's method on student.t_cdf from
    the normal quantile (a few steps instead of student.t_quantile's
    bisection; the tests check both against scipy)."""
    z = NormalDist().inv_cdf(p)
    if math.isinf(df) or df > 1e7:
        return z
    x = z + (z ** 3 + z) / (4.0 * df)  # Cornish-Fisher's first term
    c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    for _ in range(60):
        pdf = math.exp(c - (df + 1) / 2 * math.log1p(x * x / df))
        step = (student.t_cdf(x, df) - p) / pdf
        x -= step
        if abs(step) < 1e-12 * max(1.0, abs(x)):
            return x
    return student.t_quantile(p, df)


@dataclass(frozen=True)
class Welch:
    """Welch's t for sum(c_i * mean log_i) over independent groups.

    estimate is that sum (the log of B/A, or of a geometric mean of B/A
    over rows), se its standard error, sqrt(sum c_i^2 Var(mean log_i)), df
    the Welch-Satterthwaite degrees of freedom,

        df = se^4 / sum((c_i^2 s_i^2 / n_i)^2 / (n_i - 1))

    over the groups whose spread is estimated from their repetitions (a
    group at its quantization floor counts as known: infinite df, as JCGM
    100 (GUM) G.4 treats a systematic term).  Two groups with c = +1, -1
    are scipy's ttest_ind(equal_var=False) on the logs."""

    estimate: float
    se: float
    df: float
    n: int
    reps: int

    @property
    def t(self) -> float | None:
        return self.estimate / self.se if self.se > 0 else None

    @property
    def p(self) -> float:
        """Two-sided p of the null hypothesis estimate = 0 (B/A = 1)."""
        if self.se == 0:
            # Every value of every group equal (no spread, no resolution):
            # no evidence of a difference if the values agree, else certainty.
            return 1.0 if self.estimate == 0 else 0.0
        t = abs(self.estimate) / self.se
        if math.isinf(self.df) or self.df > 1e7:
            return math.erfc(t / math.sqrt(2.0))
        return min(1.0, 2.0 * student.t_cdf(-t, self.df))

    def interval(self, level: float = stats.CI_LEVEL, method: str = TEST) -> stats.Interval:
        half = t_ppf(1.0 - (1.0 - level) / 2.0, self.df) * self.se if self.se > 0 else 0.0
        return stats.Interval(math.exp(self.estimate - half), math.exp(self.estimate + half),
                              level, method, self.n)


def welch(terms: Sequence[tuple[float, Group]]) -> Welch | None:
    """Welch's t of sum(c * mean log) over terms (c, group); None when a
    group has fewer than stats.MIN_REPS_FOR_INTERVAL values."""
    if not terms or any(g.n < stats.MIN_REPS_FOR_INTERVAL for _, g in terms):
        return None
    parts = [c * c * g.var_of_mean for c, g in terms]
    var = math.fsum(parts)
    denom = math.fsum((c * c * g.random) ** 2 / (g.n - 1) for c, g in terms
                      if g.random >= g.floor and g.random > 0)
    df = var ** 2 / denom if denom > 0 else math.inf
    return Welch(math.fsum(c * g.mean for c, g in terms), math.sqrt(var), df,
                 sum(g.n for _, g in terms), min(g.n for _, g in terms))


def holm(ps: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p values (Holm 1979), in the order given:
    the i-th smallest p times (m - i + 1), made monotone.  Rejecting where
    the adjusted p < alpha keeps the family-wise error at alpha under any
    dependence between the tests (rows sharing one `direct` are dependent)."""
    m = len(ps)
    out = [1.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda k: ps[k])):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        out[i] = running
    return out


def verdict(ratio: float, interval: stats.Interval | None, reps: int, p_holm: float | None,
            band: float = NOISE_BAND) -> dict:
    """B against A in words, as pyperf's compare_to says it.

    "inconclusive" below MIN_REPS_FOR_VERDICT repetitions in a group (with
    reason "n=3"); "not significant" when the Holm-adjusted p >= 0.05;
    "within noise band" when it is significant but B/A lies within
    [1 / (1 + band), 1 + band]; else "slower" or "faster" by a factor >= 1,
    its interval inverted for "faster".  Every headline is a cost, so
    B/A > 1 means B is slower."""
    base = {"word": None, "reason": None, "factor": None, "low": None, "high": None}
    if interval is None:
        return {**base, "word": "no interval",
                "reason": f"n={reps}: fewer than {stats.MIN_REPS_FOR_INTERVAL} repetitions"}
    if reps < MIN_REPS_FOR_VERDICT:
        return {**base, "word": "inconclusive", "reason": f"n={reps}"}
    if p_holm is None or p_holm >= stats.ALPHA:
        return {**base, "word": "not significant"}
    if 1.0 / (1.0 + band) <= ratio <= 1.0 + band:
        return {**base, "word": "within noise band"}
    if ratio >= 1.0:
        return {**base, "word": "slower", "factor": ratio, "low": interval.low,
                "high": interval.high}
    return {**base, "word": "faster", "factor": 1.0 / ratio, "low": 1.0 / interval.high,
            "high": 1.0 / interval.low}


DIFFERS = ("slower", "faster")


# ---- rows ----

@dataclass(frozen=True)
class Term:
    """One group of a row: which run, which configuration, which estimator,
    and its log-scale statistics; +1 or -1 in B/A."""

    sign: int
    side: str
    key: tuple
    estimator: str
    group: Group


@dataclass
class Row:
    a: dict
    b: dict
    basis: str
    a_value: float
    b_value: float
    unit: str
    ratio: float
    terms: tuple[Term, ...]
    test: Welch | None
    interval: stats.Interval | None
    estimators: dict
    notes: tuple[str, ...]
    p_holm: float | None = None
    band: float = NOISE_BAND
    flagged: str | None = None

    @property
    def reps(self) -> int:
        return min(t.group.n for t in self.terms)

    @property
    def eligible(self) -> bool:
        """Whether the row can have a verdict (and so is one of Holm's family)."""
        return (self.test is not None and self.flagged is None
                and self.reps >= MIN_REPS_FOR_VERDICT)

    @property
    def verdict(self) -> dict:
        if self.flagged is not None and self.interval is not None:
            return {"word": "inconclusive", "reason": self.flagged, "factor": None,
                    "low": None, "high": None}
        return verdict(self.ratio, self.interval, self.reps, self.p_holm, self.band)

    @property
    def population(self) -> tuple:
        return runs.population(self.a["benchmark"], self.a["params"])

    def as_dict(self) -> dict:
        t = self.test
        return {"benchmark": self.a["benchmark"], "mechanism": self.a["mechanism"],
                "params": self.a["params"], "basis": self.basis, "a": self.a_value,
                "b": self.b_value, "unit": self.unit, "ratio": self.ratio,
                "interval": self.interval.as_dict() if self.interval else None,
                "test": TEST if t else None, "t": t.t if t else None,
                "df": (None if math.isinf(t.df) else t.df) if t else None,
                "p": t.p if t else None, "p_holm": self.p_holm,
                "reps": self.reps, "reps_a": self.a["headline"]["reps"],
                "reps_b": self.b["headline"]["reps"], "estimators": self.estimators,
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


# ---- like with like: one estimator on both sides ----

def _values(c: Mapping, estimator: str) -> tuple[list[float], float] | None:
    """c's repetition values by estimator, and their resolution: the
    headline's own when it used that estimator, else each repetition's
    median (resolution: the counter step) or batched estimate."""
    h = c["headline"]
    if h["source"] == estimator:
        return list(h["values"]), float(h.get("resolution") or 0.0)
    reps = c.get("repetitions") or []
    values = [r.get(estimator) for r in reps]
    if not values or any(v is None for v in values):
        return None
    res = 0.0
    if estimator == MEDIAN:
        res = max((float(r.get("counter_step") or 0.0) for r in reps), default=0.0)
    return values, res


def _estimator(ca: Mapping, cb: Mapping) -> tuple[str | None, str | None]:
    """The estimator both runs' values of one configuration are compared
    by, and a note where it is not both headlines' own.  Where the headlines
    differ, the median: every repetition has one, and it is what the
    headline rule falls back to where the batched estimate is in doubt.
    None (the row is flagged) where no estimator is in both."""
    sa, sb = ca["headline"]["source"], cb["headline"]["source"]
    if sa == sb:
        return sa, None
    for est in (MEDIAN, BATCHED):
        if _values(ca, est) is not None and _values(cb, est) is not None:
            return est, (f"{ca['label']}: the headlines come from different estimators (A: "
                         f"{sa}, B: {sb}); both runs are compared by their repetitions' "
                         f"{est}s")
    return None, (f"{ca['label']}: the headlines come from different estimators (A: {sa}, "
                  f"B: {sb}) and the repetitions have no estimator in common: no verdict")


def _pair(ca: Mapping, cb: Mapping) -> tuple[tuple, tuple] | str:
    """((estimator, A's values, resolution), (estimator, B's values,
    resolution)), plus a note and a flag, or why the pair cannot be compared."""
    est, note = _estimator(ca, cb)
    if est is None:
        va = (ca["headline"]["source"], list(ca["headline"]["values"]),
              float(ca["headline"].get("resolution") or 0.0))
        vb = (cb["headline"]["source"], list(cb["headline"]["values"]),
              float(cb["headline"].get("resolution") or 0.0))
        flag = "estimators differ"
    else:
        va, vb = (est, *_values(ca, est)), (est, *_values(cb, est))
        flag = None
    if not va[1] or not vb[1] or any(v <= 0 for v in (*va[1], *vb[1])):
        return "a repetition's value is not positive"
    return (va, vb), (note, flag)


def _term(sign: int, side: str, c: Mapping, est: str, values: Sequence[float],
          resolution: float) -> Term:
    return Term(sign, side, tuple(c["key"]), est, Group.of(values, resolution))


def _row(a: dict, b: dict, basis: str, unit: str, terms: Sequence[Term], a_value: float,
         b_value: float, estimators: dict, notes: Sequence[str | None],
         flag: str | None) -> Row:
    test = welch([(t.sign, t.group) for t in terms])
    interval = test.interval() if test else None
    notes = [n for n in notes if n]
    if test is None:
        notes.append(f"fewer than {stats.MIN_REPS_FOR_INTERVAL} repetitions in a group: "
                     "no interval")
    ratio = math.exp(math.fsum(t.sign * t.group.mean for t in terms))
    return Row(a, b, basis, a_value, b_value, unit, ratio, tuple(terms), test, interval,
               estimators, tuple(notes), flagged=flag)


def _normalized(a: dict, ab: dict, b: dict, bb: dict) -> Row | str:
    cfg, base = _pair(a, b), _pair(ab, bb)
    for p in (cfg, base):
        if isinstance(p, str):
            return p
    ((ea, xa, ra), (eb, xb, rb)), (note, flag) = cfg
    ((eab, xab, rab), (ebb, xbb, rbb)), (bnote, bflag) = base
    terms = [_term(1, "B", b, eb, xb, rb), _term(-1, "B", bb, ebb, xbb, rbb),
             _term(-1, "A", a, ea, xa, ra), _term(1, "A", ab, eab, xab, rab)]
    gb, gbb, ga, gab = (t.group for t in terms)
    return _row(a, b, NORMALIZED, "x direct", terms, math.exp(ga.mean - gab.mean),
                math.exp(gb.mean - gbb.mean),
                {"A": ea, "B": eb, "direct_A": eab, "direct_B": ebb}, [note, bnote],
                flag or bflag)


def _absolute(a: dict, b: dict) -> Row | str:
    pair = _pair(a, b)
    if isinstance(pair, str):
        return pair
    ((ea, xs, ra), (eb, ys, rb)), (note, flag) = pair
    unit = a["unit"] or "?"
    if a["unit"] != b["unit"]:
        if a.get("to_ns") is None or b.get("to_ns") is None:
            return f"units {a['unit']} and {b['unit']} cannot be converted"
        xs, ys = units.scale(xs, a["to_ns"]), units.scale(ys, b["to_ns"])
        ra, rb = ra * a["to_ns"], rb * b["to_ns"]
        unit = "ns"
    terms = [_term(1, "B", b, eb, ys, rb), _term(-1, "A", a, ea, xs, ra)]
    return _row(a, b, ABSOLUTE, unit, terms, math.exp(terms[1].group.mean),
                math.exp(terms[0].group.mean), {"A": ea, "B": eb}, [note], flag)


def compare(a: Mapping, b: Mapping, absolute: bool = False,
            noise_band: float = NOISE_BAND) -> dict:
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
        elif not (same or absolute):
            side = "A" if ab is None and ca["role"] == "mechanism" else (
                "B" if bb is None and cb["role"] == "mechanism" else None)
            why = (f"no `direct` baseline in run {side}" if side else
                   "no baseline (it is one, or measures no mechanism)")
            skipped.append(f"{ca['label']}: {why}; the runs come from different machines, "
                           "so an absolute ratio needs --absolute")
            continue
        else:
            row = _absolute(ca, cb)
        if isinstance(row, str):
            skipped.append(f"{ca['label']}: {row}")
        else:
            row.band = noise_band
            rows.append(row)
    family = [r for r in rows if r.eligible]
    for r, p in zip(family, holm([r.test.p for r in family])):
        r.p_holm = p
    warnings = []
    if absolute and not same and any(r.basis == ABSOLUTE for r in rows):
        warnings.append("absolute ratios across machines (--absolute): one machine's cycles, "
                        "ticks or ns are not another's; read the 'vs direct' rows for what "
                        "isolation costs")
    return {"rows": rows, "skipped": skipped, "same_machine": same, "warnings": warnings,
            "differences": differences(a, b),
            "only_a": [c["label"] for k, c in a_by.items() if k not in b_by],
            "only_b": [c["label"] for k, c in b_by.items() if k not in a_by],
            "correction": correction(rows, noise_band),
            "averages": averages(rows)}


def correction(rows: Sequence[Row], noise_band: float = NOISE_BAND) -> dict:
    """What the rows say together: how many could have a verdict (Holm's
    family), how many differ after the correction and beyond the band."""
    words = [r.verdict["word"] for r in rows]
    short = sorted({r.reps for r in rows if r.test is not None and r.reps < MIN_REPS_FOR_VERDICT})
    return {"method": CORRECTION, "alpha": round(stats.ALPHA, 12), "noise_band": noise_band,
            "min_reps": MIN_REPS_FOR_VERDICT, "rows": len(rows),
            "family": sum(r.eligible for r in rows),
            "differ": sum(w in DIFFERS for w in words), "slower": words.count("slower"),
            "faster": words.count("faster"), "within_band": words.count("within noise band"),
            "not_significant": words.count("not significant"),
            "inconclusive": words.count("inconclusive"), "inconclusive_reps": short,
            "no_interval": words.count("no interval")}


def averages(rows: Sequence[Row]) -> list[dict]:
    """Geometric means of B/A within each population and basis, over
    mechanisms and sweep params (the non-headline phases are left out),
    with a Welch interval over the repetitions of every configuration in
    them: the log of the mean is sum(c * mean log) over the groups, each
    row's terms weighted 1/k, so that a `direct` the rows share is one
    group with its weights added, not k independent ones."""
    groups: dict[tuple, list[Row]] = {}
    for r in rows:
        if not r.a.get("headline_phase", True):
            continue
        groups.setdefault((r.basis, *r.population), []).append(r)
    out = []
    for (basis, bench, *pop), members in groups.items():
        if len(members) < 2:
            continue
        population = {k: v for k, v in zip(runs.POPULATION_PARAMS, pop) if v is not None}
        coef: dict[tuple, float] = {}
        group: dict[tuple, Group] = {}
        for r in members:
            for t in r.terms:
                gid = (t.side, t.key, t.estimator)
                coef[gid] = coef.get(gid, 0.0) + t.sign / len(members)
                group[gid] = t.group
        test = welch([(c, group[g]) for g, c in coef.items() if c != 0.0])
        iv = test.interval(method="Welch t over the repetitions of every configuration in "
                                  "the rows, a shared direct counted once") if test else None
        out.append({"basis": basis, "benchmark": bench, "population": population,
                    **stats.aggregate_ratios([r.ratio for r in members]),
                    "interval": iv.as_dict() if iv else None,
                    "reps": min(r.reps for r in members)})
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
            "correction": result["correction"], "test": TEST,
            "averages": result["averages"], "skipped": result["skipped"],
            "same_machine": result["same_machine"], "warnings": result["warnings"],
            "differences": result["differences"],
            "only_a": result["only_a"], "only_b": result["only_b"],
            "level": stats.CI_LEVEL,
            "findings": {"A": [f["id"] for f in a["findings"]],
                         "B": [f["id"] for f in b["findings"]]}}
