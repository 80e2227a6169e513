"""Validation at the edge: every option is checked before a run is stored.

Two layers.  The syntax of a value (plain ASCII digits, a size suffix, a
number of seconds) is checked while the command line is parsed; Python's
int() and float() would also take '４' (a full-width digit), '1_000' and
' 5', which the native driver refuses, so they are never used on raw text.
The range of a value that reaches `isob` is checked against the limits the
driver itself enforces, read from `isob --limits --json` (Limits): one
table, in src/isob.c, so the two sides cannot drift apart.  Options that
only the Python side has (--repeat, --timeout, --seconds, --seed) have their
bounds here.

Either way a bad value is one line and exit 2, before any store is touched.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from ..errors import UsageError

# Bounds of the options only the Python side has.
MAX_REPEAT = 1000              # fresh processes per (benchmark, mechanism)
MAX_TIMEOUT = 7 * 24 * 3600.0  # seconds: a week per isob process is more than any run needs
MAX_CLIENT_SECONDS = 24 * 3600  # kv-server: how long the client loads each server
MAX_SEED = 2**64 - 1           # --seed of the shuffled order

_WHOLE = re.compile(r"[0-9]+")
_SECONDS = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_SIZE = re.compile(r"([0-9]+)([KMGkmg]?)")


def whole(text: str) -> int:
    """A whole number written in plain ASCII digits (argparse type)."""
    if not _WHOLE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
    return int(text)


def bounded_whole(low: int, high: int):
    """An argparse type: a whole number from low to high."""

    def parse(text: str) -> int:
        v = whole(text)
        if not low <= v <= high:
            raise argparse.ArgumentTypeError(f"{text!r} is not from {low} to {high}")
        return v

    return parse


def seconds(high: float):
    """An argparse type: a positive number of seconds, at most high."""

    def parse(text: str) -> float:
        if not _SECONDS.fullmatch(text) or not float(text) > 0:
            raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
        v = float(text)
        if v > high:
            raise argparse.ArgumentTypeError(f"{text!r} is more than {high:g} seconds")
        return v

    return parse


def size_tokens(text: str) -> tuple[str, ...]:
    """kv data sizes as written (argparse type): byte counts in ASCII digits with
    an optional K, M or G suffix.  Their range is checked against Limits."""
    items = tuple(s.strip() for s in text.split(",") if s.strip())
    if not items:
        raise argparse.ArgumentTypeError(f"{text!r}: give at least one size, e.g. 4K,1M,256M")
    for s in items:
        if not _SIZE.fullmatch(s):
            raise argparse.ArgumentTypeError(
                f"{s!r} is not a size in bytes with an optional K, M or G (e.g. 4K, 1M, 256M)")
    return items


def human_bytes(n: int) -> str:
    for suffix, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{suffix}"
    return str(n)


@dataclass(frozen=True)
class Limits:
    """The bounds `isob` enforces, as `isob --limits --json` prints them."""

    counts: Mapping[str, tuple[int, int]]  # option name (no dashes) -> (min, max)
    size_min: int
    size_max: int
    size_multiple: int
    size_max_items: int
    size_suffixes: Mapping[str, int]       # "K" -> 10 (a shift)

    @classmethod
    def from_line(cls, line: Mapping) -> "Limits":
        """From the "limits" line; ValueError when it is not one."""
        try:
            opts = line["options"]
            sizes = opts["sizes"]
            counts = {name: (_int(v["min"]), _int(v["max"])) for name, v in opts.items()
                      if name not in ("sizes", "cpu", "seed")}
            return cls(counts=counts, size_min=_int(sizes["min"]), size_max=_int(sizes["max"]),
                       size_multiple=_int(sizes["multiple"]),
                       size_max_items=_int(sizes["max_items"]),
                       size_suffixes={str(k).upper(): _int(v)
                                      for k, v in dict(sizes["suffixes"]).items()})
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"not a limits line ({e!r})") from None

    def count(self, option: str, value: int | None) -> None:
        """UsageError unless value is within isob's bounds of --option."""
        if value is None:
            return
        low, high = self.counts.get(option, (1, None))
        if value < low or (high is not None and value > high):
            raise UsageError(f"argument --{option}: {value} is not a whole number from {low} to "
                             f"{high}")

    def sizes(self, items: Sequence[str] | None) -> None:
        """UsageError unless every size is one isob takes."""
        if items is None:
            return
        if len(items) > self.size_max_items:
            raise UsageError(f"argument --sizes: more than {self.size_max_items} sizes")
        for s in items:
            m = _SIZE.fullmatch(s)
            shift = self.size_suffixes.get(m[2].upper(), -1) if m and m[2] else 0
            n = int(m[1]) << shift if m and shift >= 0 else 0
            if not self.size_min <= n <= self.size_max or n % self.size_multiple:
                raise UsageError(
                    f"argument --sizes: {s!r} is not a multiple of {self.size_multiple} bytes "
                    f"from {human_bytes(self.size_min)} to {human_bytes(self.size_max)} "
                    "(e.g. 4K, 1M, 256M)")


def one_of(option: str, names: Sequence[str]):
    """An argparse type: one of `names`, exactly (ASCII, as isob compares)."""
    def parse(text: str) -> str:
        if text not in names:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a {option}: one of {', '.join(names)}")
        return text
    return parse


def _int(v) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise ValueError(f"{v!r} is not an integer")
    return v


def mechanisms(asked: Sequence[str]) -> list[str]:
    """The names in -m options (repeatable, comma-separated); UsageError when an
    -m names none (`-m ,` must not mean every mechanism, as no -m does)."""
    names = []
    for text in asked:
        these = [m.strip() for m in text.split(",") if m.strip()]
        if not these:
            raise UsageError(f"-m {text!r} names no mechanism (see `isobench list`)")
        names += these
    return names
