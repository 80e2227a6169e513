"""The JSON-lines protocol of the native driver, and the Result record.

``isob`` prints one JSON object per line; every object carries
``schema_version`` and ``type``.  Protocol history (it mirrors the comment in
include/isobench/bench.h, which is the source of truth):

    1  first version: header, result, isolation and list lines.  The
       isolation line later gained the attacker matrix (``matrix_version``,
       ``attackers``: attackers.py); its earlier members are unchanged.

A Result is immutable and validated when it is built, whether it comes from
an ``isob`` line, from a failure the runner observed, or from the store: an
invalid record cannot exist, so nothing downstream re-checks.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, Mapping

from ..core import benchmarks, stats

SCHEMA_VERSION = 1
STATUSES = ("ok", "failed", "skipped")

# The mechanism column of benchmarks that take no mechanism (pingpong): they
# measure an OS primitive, which is named in params (e.g. "primitive").
NO_MECHANISM = "-"

# Results that are not isob under a mechanism but an outside program run
# beside it as the point of comparison (kv-server runs real memcached next
# to `isob serve`).  They are measured in the same run and the same way, but
# have no `direct` baseline: they are a baseline of their own, and the
# kv-server table gives every server's ratio to them.  Each benchmark's
# record (core/benchmarks.py) names its reference program.
REFERENCES: dict[str, str] = {b.name: b.reference for b in benchmarks.RECORDS if b.reference}

# The name under which a result's primary samples (those in the result's unit)
# are stored; further events (perf: instructions, TLB misses) use their names.
PRIMARY_EVENT = "primary"


class ProtocolError(ValueError):
    """A line from isob that is not what schema_version 1 promises."""


def parse_line(text: str) -> dict:
    """One line of isob output as a dict, or ProtocolError saying why not."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ProtocolError(f"not JSON ({e.msg}): {_clip(text)!r}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"not a JSON object: {_clip(text)!r}")
    version = obj.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ProtocolError(
            f"schema_version {version!r}, this isobench reads {SCHEMA_VERSION}: {_clip(text)!r}")
    if not isinstance(obj.get("type"), str):
        raise ProtocolError(f"no \"type\": {_clip(text)!r}")
    return obj


def _clip(text: str, limit: int = 80) -> str:
    text = text.rstrip("\n")
    return text if len(text) <= limit else text[:limit] + "..."


def freeze(value: Any) -> Any:
    """A read-only deep copy of a JSON value (dicts become mapping proxies)."""
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The inverse of freeze: plain dicts and lists, for json.dumps."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


def _check(cond: bool, what: str) -> None:
    if not cond:
        raise ValueError(what)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (_is_int(v) or isinstance(v, float)) and math.isfinite(v)


def _opt_str(v: Any) -> bool:
    return v is None or isinstance(v, str)


def _opt_number(v: Any) -> bool:
    return v is None or _is_number(v)


def _samples(v: Any, what: str) -> tuple[int, ...]:
    _check(isinstance(v, (list, tuple)), f"{what} is not a list")
    _check(all(_is_int(x) and 0 <= x < 2**64 for x in v),
           f"{what} holds a value that is not a 64-bit count >= 0")
    return tuple(v)


@dataclass(frozen=True)
class Header:
    """The header line isob prints before its results: how it measured."""

    benchmark: str
    mechanism: str | None
    counter: str
    unit: str
    counter_why: str | None
    tsc_hz: float | None
    tsc_hz_source: str | None
    empty_region_median: float | None
    raw: Mapping = field(repr=False)

    @classmethod
    def from_line(cls, line: Mapping) -> "Header":
        _check(line.get("type") == "header", "not a header line")
        empty = line.get("empty_region")
        empty_median = empty.get("median") if isinstance(empty, Mapping) else None
        h = cls(
            benchmark=line.get("benchmark"),
            mechanism=line.get("mechanism"),
            counter=line.get("counter"),
            unit=line.get("unit"),
            counter_why=line.get("counter_why"),
            tsc_hz=line.get("tsc_hz"),
            tsc_hz_source=line.get("tsc_hz_source"),
            empty_region_median=empty_median,
            raw=freeze(line),
        )
        return h

    def __post_init__(self) -> None:
        _check(isinstance(self.benchmark, str) and self.benchmark != "", "header: no benchmark")
        _check(_opt_str(self.mechanism), "header: mechanism is not a string")
        _check(isinstance(self.counter, str) and self.counter != "", "header: no counter")
        _check(isinstance(self.unit, str) and self.unit != "", "header: no unit")
        _check(_opt_str(self.counter_why), "header: counter_why is not a string")
        _check(_opt_number(self.tsc_hz), "header: tsc_hz is not a number")
        _check(_opt_str(self.tsc_hz_source), "header: tsc_hz_source is not a string")
        _check(_opt_number(self.empty_region_median), "header: empty_region.median is not a number")


@dataclass(frozen=True)
class Result:
    """One measured (or failed, or skipped) configuration.

    samples are the raw per-iteration readings in ``unit``; events holds the
    further perf events of the same iterations, each as long as samples.
    batched is the median of batched_reps, every (K, 2K) pair's estimate in
    measuring order (empty when isob printed none, or an older isob ran).
    header is the isob header line this result came under (None when isob
    never printed one, e.g. it crashed first).
    """

    benchmark: str
    mechanism: str
    params: Mapping
    status: str
    reason: str | None = None
    unit: str | None = None
    counter: str | None = None
    samples: tuple = ()
    events: Mapping = field(default_factory=dict)
    batched: float | None = None
    batched_reps: tuple = ()
    empty_region: float | None = None
    dropped: int = 0
    warmup: int | None = None
    header: Mapping | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # Freezing in __post_init__ needs object.__setattr__: the dataclass is
        # frozen so that nothing after this point can change a record.
        set_ = object.__setattr__
        _check(isinstance(self.benchmark, str) and self.benchmark != "", "result: no benchmark")
        _check(isinstance(self.mechanism, str) and self.mechanism != "", "result: no mechanism")
        _check(isinstance(self.params, Mapping), "result: params is not an object")
        set_(self, "params", freeze(self.params))
        _check(self.status in STATUSES, f"result: status {self.status!r} is not one of {STATUSES}")
        _check(_opt_str(self.reason), "result: reason is not a string")
        # A skip or a failure is never silent: it always says why.
        _check(self.status == "ok" or bool(self.reason), f"result: {self.status} without a reason")
        _check(_opt_str(self.unit) and _opt_str(self.counter), "result: unit/counter not strings")
        set_(self, "samples", _samples(self.samples, "result: samples"))
        if self.status == "ok":
            _check(bool(self.unit) and bool(self.counter), "result: ok without unit or counter")
            _check(len(self.samples) > 0, "result: ok without samples")
        _check(isinstance(self.events, Mapping), "result: events is not an object")
        events = {}
        for name, values in self.events.items():
            _check(isinstance(name, str) and name != "" and name != PRIMARY_EVENT,
                   f"result: bad event name {name!r}")
            events[name] = _samples(values, f"result: event {name}")
            _check(len(events[name]) == len(self.samples),
                   f"result: event {name} has {len(events[name])} samples, not {len(self.samples)}")
        set_(self, "events", MappingProxyType(events))
        _check(_opt_number(self.batched), "result: batched is not a number")
        _check(isinstance(self.batched_reps, (list, tuple))
               and all(_is_number(v) for v in self.batched_reps),
               "result: batched_reps is not a list of numbers")
        set_(self, "batched_reps", tuple(float(v) for v in self.batched_reps))
        _check(_opt_number(self.empty_region), "result: empty_region is not a number")
        _check(_is_int(self.dropped) and self.dropped >= 0, "result: dropped is not a count")
        _check(self.warmup is None or (_is_int(self.warmup) and self.warmup >= 0),
               "result: warmup is not a count")
        if self.header is not None:
            _check(isinstance(self.header, Mapping), "result: header is not an object")
            set_(self, "header", freeze(self.header))

    @classmethod
    def from_line(cls, line: Mapping, header: Header | None,
                  mechanism: str | None = None) -> "Result":
        """A result line of isob.  mechanism overrides the line's (see NO_MECHANISM)."""
        _check(line.get("type") == "result", "not a result line")
        status = line.get("status")
        reason = line.get("reason")
        if status in ("failed", "skipped") and not reason:
            reason = f"isob reported {status} without a reason"
        events = line.get("events") or {}
        return cls(
            benchmark=line.get("benchmark"),
            mechanism=mechanism if mechanism is not None else line.get("mechanism"),
            params=line.get("params") if line.get("params") is not None else {},
            status=status,
            reason=reason,
            unit=line.get("unit") or (header.unit if header else None),
            counter=line.get("counter") or (header.counter if header else None),
            samples=line.get("samples") or (),
            events=events,
            batched=line.get("batched"),
            batched_reps=line.get("batched_reps") or (),
            empty_region=line.get("empty_region"),
            dropped=line.get("dropped") or 0,
            warmup=line.get("warmup"),
            header=header.raw if header else None,
        )

    @classmethod
    def failure(cls, benchmark: str, mechanism: str, reason: str, header: Header | None = None,
                status: str = "failed", params: Mapping | None = None) -> "Result":
        """A record of something that went wrong (or was skipped) outside isob's own lines."""
        return cls(
            benchmark=benchmark,
            mechanism=mechanism,
            params=params or {},
            status=status,
            reason=reason,
            unit=header.unit if header else None,
            counter=header.counter if header else None,
            empty_region=header.empty_region_median if header else None,
            header=header.raw if header else None,
        )

    @cached_property
    def summary(self) -> stats.Summary:
        return stats.summarize(self.samples)

    def params_json(self) -> str:
        # Sorted keys: the same params always give the same text, so results
        # of two runs can be matched on it.
        return json.dumps(thaw(self.params), sort_keys=True)


# The run's own columns of a CSV row (the export's and the report's results.csv),
# each from the run's environment: a CSV read beside one from another
# machine tells them apart.
RUN_COLUMNS = ("host", "cpu_model", "kernel", "commit", "commit_dirty", "run_started")
_FROM_ENVIRONMENT = {"host": ("hostname",), "cpu_model": ("cpu_model",), "kernel": ("kernel",),
                     "commit": ("git", "commit"), "commit_dirty": ("git", "dirty")}


def run_columns(run: dict) -> dict:
    """Host, CPU model, kernel, commit (and whether the tree had changes) and
    start time of a run (Store.run, or a summary document's "run")."""
    env = run.get("environment") or {}
    out = {}
    for name, path in _FROM_ENVIRONMENT.items():
        v = env
        for k in path:
            v = v.get(k) if isinstance(v, dict) else None
        out[name] = v
    out["run_started"] = run.get("started")
    return out
