"""Ratios and unit conversion: the one place where numbers change scale.

Every ratio isobench prints (to `direct`, to memcached, B/A in `compare`)
is ratio(); every time shown in nanoseconds comes from ns_factor().  Tables,
reports and plots never divide or convert on their own: they read the
summary document (summary.py), which is built with these two.

    ratio    = x / baseline          (1.0: as fast as the baseline)
    overhead = ratio - 1             (0.25: 25% slower; -0.10: 10% faster)
    ns       = value * ns_factor(unit, tsc_hz)
"""

from __future__ import annotations

from typing import Sequence

# Units that are time or a fixed-rate clock, and so convert to ns.  Core
# cycles never do: the core's frequency is not known (and changes).
# Units of a fixed-rate timer whose frequency the header's tsc_hz holds: the
# TSC on x86-64, the generic timer (CNTVCT_EL0) on arm64.
TIMER_UNITS = ("tsc_ticks", "cntvct_ticks")
TIME_UNITS = ("ns", *TIMER_UNITS)


def ratio(x: float, baseline: float) -> float:
    """x relative to its baseline: x / baseline (1.0 = as fast as the baseline)."""
    if baseline == 0:
        raise ValueError("ratio to a zero baseline")
    return x / baseline


def overhead(x: float, baseline: float) -> float:
    """ratio - 1 (0.25 = 25% slower than the baseline; -0.1 = 10% faster)."""
    return ratio(x, baseline) - 1.0


def ns_factor(unit: str | None, tsc_hz: float | None) -> float | None:
    """Nanoseconds per unit, or None where the unit does not convert
    (cycles; timer ticks without a known timer frequency)."""
    if unit == "ns":
        return 1.0
    if unit in TIMER_UNITS and tsc_hz:
        return 1e9 / tsc_hz
    return None


def to_ns(value: float | None, unit: str | None, tsc_hz: float | None) -> float | None:
    """value in nanoseconds where the unit allows it, else None."""
    f = ns_factor(unit, tsc_hz)
    return None if value is None or f is None else value * f


def scale(values: Sequence[float | None], factor: float | None) -> list[float | None]:
    """values times factor (None stays None; a None factor gives all None)."""
    return [None if v is None or factor is None else v * factor for v in values]


# Units a published figure may be drawn in beside local results: times on a
# ns axis, cycles on a cycles axis (TSC ticks match neither).
_SCALES = {"ns": {"ns": 1.0, "us": 1000.0, "ms": 1e6, "s": 1e9},
           "us": {"ns": 1e-3, "us": 1.0, "ms": 1000.0, "s": 1e6},
           "ms": {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1000.0},
           "s": {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0},
           "cycles": {"cycles": 1.0}}


def convert(value: float | None, unit: str, to: str) -> float | None:
    """value in `unit` expressed in `to`, where both are times or both cycles
    (None where they are not, or for no value)."""
    f = _SCALES.get(to, {}).get(unit)
    return None if f is None or value is None else value * f


def gb_per_s(nbytes: float | None, ns: float | None) -> float | None:
    """A rate in GB/s (10^9 bytes per second: bytes per ns) of nbytes moved in ns."""
    if nbytes is None or not ns or ns <= 0:
        return None
    return nbytes / ns


def per_second(ns: float | None) -> float | None:
    """How many operations of ns each fit in a second."""
    if not ns or ns <= 0:
        return None
    return 1e9 / ns
