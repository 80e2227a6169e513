"""Averages of ratios, each with its interval over repetitions.

Every average isobench prints is the geometric mean of ratios to a baseline
over rows (kv's data sizes, SEIMI's columns of one table), and every one is
printed with its 95% interval.  docs/methodology.md ("The interval of an
average of ratios") is the prose version of this module.

A row is one ratio: a configuration's per-repetition values x_1..x_nx
against its baseline's b_1..b_nb.  Its ratio is geomean(x) / geomean(b),
so its log is d = mean(log x) - mean(log b), and the average of m rows is

    G = exp(D),   D = (1/m) sum_i d_i

D is a linear combination of the 2m groups' mean logs, so its variance is
exactly (no linearization is needed on the log scale; the delta method is
the step back through exp)

    Var D = (1/m^2) sum_i ( s2(log x_i) / nx_i + s2(log b_i) / nb_i + q_i )

with the groups' sample variances s2 and, where a value is quantized by a
counter step, q_i = ((step_x / x_i)^2 + (step_b / b_i)^2) / 12: the
variance of a uniform error over one step.  That term is systematic -- every
repetition of a row reads the same counter -- so it is not divided by the
number of repetitions, and a row whose repetitions all read one value still
has an interval of non-zero width.  The interval is exp(D +- t * sqrt(Var D)),
t Student's at Welch-Satterthwaite's degrees of freedom over the 2m groups
(the quantization term counted as known, with infinite degrees of freedom).

It is the interval of the average over these rows, which are the sizes or
cells the run chose, not a sample of rows: it says how far the repetitions
leave the average uncertain, not how another choice of rows would average.

Columns set side by side (mechanisms over kv's sizes, confinements over
SEIMI's columns) are averaged over the rows they all share (`shared`), so
that two averages in one table are over the same rows; each says n.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Hashable, Mapping, Sequence

from ...core import stats, student

METHOD = ("geometric mean of ratios; 95% interval: Welch t on the mean log ratio over "
          "repetitions (Welch-Satterthwaite df), counter steps as a systematic term")


@dataclass(frozen=True)
class Row:
    """One ratio to average: the per-repetition values of a configuration and
    of its baseline, and the counter step each was measured in (0: none)."""

    key: Hashable
    values: Sequence[float]
    base: Sequence[float]
    resolution: float = 0.0
    base_resolution: float = 0.0

    @classmethod
    def of(cls, key: Hashable, headline: Mapping, base: Mapping) -> "Row":
        """From two headlines of the summary document (`values`, `resolution`)."""
        return cls(key, list(headline.get("values") or ()), list(base.get("values") or ()),
                   float(headline.get("resolution") or 0.0),
                   float(base.get("resolution") or 0.0))

    @classmethod
    def of_ratio(cls, key: Hashable, ratio: Mapping) -> "Row":
        """From a configuration's ratio to its baseline (ratios.ratio_of),
        with the estimator that ratio used on both sides."""
        return cls(key, list(ratio.get("values") or ()), list(ratio.get("base_values") or ()),
                   float(ratio.get("resolution_of_values") or 0.0),
                   float(ratio.get("base_resolution") or 0.0))

    @property
    def usable(self) -> bool:
        return bool(self.values) and bool(self.base) and all(
            v > 0 for v in (*self.values, *self.base))


@dataclass(frozen=True)
class _Group:
    mean: float       # mean of the logs
    var: float        # sample variance of the logs (0 below 2 values)
    n: int
    quant: float      # (step / geometric mean)^2 / 12, the systematic term

    @classmethod
    def of(cls, values: Sequence[float], step: float) -> "_Group":
        g = stats.LogGroup.of(values, step)  # the one definition of both terms
        return cls(g.mean, g.var, g.n, g.sys)


def _quantile(p: float, df: float) -> float:
    if math.isinf(df):
        return NormalDist().inv_cdf(p)
    return student.t_quantile(p, df)


def average_ratio(rows: Sequence[Row], level: float = stats.CI_LEVEL) -> dict | None:
    """The geometric mean of the rows' ratios with its interval (see the
    module's docs); None when no row is usable (a value not positive)."""
    rows = [r for r in rows if r.usable]
    if not rows:
        return None
    m = len(rows)
    groups = [(_Group.of(r.values, r.resolution), _Group.of(r.base, r.base_resolution))
              for r in rows]
    centre = math.fsum(x.mean - b.mean for x, b in groups) / m
    value = math.exp(centre)
    reps = sorted({g.n for pair in groups for g in pair})
    out = {"of": "ratio", "method": stats.GEOMETRIC_MEAN, "value": value, "n": m,
           "rows": [r.key for r in rows], "ratios": [math.exp(x.mean - b.mean) for x, b in groups],
           "reps": [reps[0], reps[-1]], "interval": None,
           "note": None}
    single = [r.key for r, (x, b) in zip(rows, groups)
              if min(x.n, b.n) < stats.MIN_REPS_FOR_INTERVAL]
    if single:
        out["note"] = (f"{len(single)} of {m} row(s) with one repetition on a side: no "
                       "interval (`--repeat`)")
        return out
    # Each group's contribution to Var D, before the common 1/m^2.
    sampling = [g.var / g.n for pair in groups for g in pair]
    quant = math.fsum(g.quant for pair in groups for g in pair)
    var = (math.fsum(sampling) + quant) / (m * m)
    if var == 0.0:
        # Exact values with no counter step: nothing to be uncertain about.
        out["interval"] = {"low": value, "high": value, "level": level, "method": METHOD,
                           "n": m, "df": None}
        return out
    denom = math.fsum((s / (m * m)) ** 2 / (g.n - 1)
                      for s, g in zip(sampling, (g for pair in groups for g in pair)) if s > 0)
    df = var ** 2 / denom if denom > 0 else math.inf
    half = _quantile(1.0 - (1.0 - level) / 2.0, df) * math.sqrt(var)
    out["interval"] = {"low": math.exp(centre - half), "high": math.exp(centre + half),
                       "level": level, "method": METHOD, "n": m,
                       "df": None if math.isinf(df) else df}
    return out


@dataclass
class Shared:
    """Averages of several columns over the rows they share."""

    rows: list = field(default_factory=list)        # the shared row keys, in order
    averages: dict = field(default_factory=dict)    # column -> average_ratio over them
    own: dict = field(default_factory=dict)         # column -> over all its own rows,
                                                    # where they are more than the shared


def shared(columns: Mapping[Hashable, Sequence[Row]], min_rows: int = 1,
           level: float = stats.CI_LEVEL) -> Shared:
    """Each column's average over the rows every column has (a row counts
    where it is usable), in the order the first column lists them.  A column
    with more rows of its own also gets the average over all of them, in
    `own`, which is not comparable with the other columns' averages.
    Columns are left out where fewer than min_rows rows are shared."""
    usable = {c: {r.key: r for r in rows if r.usable} for c, rows in columns.items()}
    keys: list = []
    for rows in usable.values():
        keys += [k for k in rows if k not in keys]
    common = [k for k in keys if all(k in rows for rows in usable.values())]
    out = Shared(rows=common)
    for col, rows in usable.items():
        if len(common) >= min_rows and common:
            out.averages[col] = average_ratio([rows[k] for k in common], level)
        if len(rows) > len(common) and len(rows) >= min_rows:
            out.own[col] = average_ratio(list(rows.values()), level)
    return out


def includes_one(interval: Mapping | None) -> bool | None:
    """Whether a ratio's interval holds 1 (no difference from the baseline
    can be read from it); None without an interval."""
    if not interval or interval.get("low") is None or interval.get("high") is None:
        return None
    return interval["low"] <= 1.0 <= interval["high"]
