"""``isobench scrape``: who, outside a compartment's process, reads what it holds.

The Morello library-compartment study's trust-model table (its Table 8),
with the threat model explicit.  ``isob scrape --target T`` (native, one
process per target) plants a 32-byte random canary in T and reads T as six
identities with three readers (include/isobench/scrape.h); this module runs
it for every target, turns each (target, identity, method) into one word,
compares the words with the expected table (data/scrape-expected.csv,
explained in docs/scrape.md) and prints the matrix.

Words (WORDS): found (read the target and found the canary), missed (read
the target, no canary), denied (the kernel refused: errno), untested (the
identity or the reader could not be tried here), skipped (the target cannot
run here), failed (the target could not be set up, or isob broke).

Exit codes: 0 every cell matches the table; 1 a target failed, or a reader
changed the canary's region (the tool broke its promise to only read); 2
bad usage (an unknown target, an unreadable or malformed table); 3 some
cells differ from the table (listed), as for findings that make numbers
wrong.

Wiring into the cli: one line of cli.COMMANDS, its one-line help and this
module, whose add_parser(sub) adds the subcommand and sets func=scrape.cmd_scrape.
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
import io
import json
import os
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from ..core.text import render as render_table
from .driver import Driver, describe_exit, find_isob
from ..errors import UsageError

# Version of `scrape --json`.  History:
#   1  first version.
SCHEMA_VERSION = 1

EXPECTED = Path(__file__).resolve().parents[1] / "data" / "scrape-expected.csv"
# One isob per target: six identities, three readers of up to 1 GiB each,
# on a loaded machine.
TIMEOUT = 300.0

FIXED_TARGETS = ("plain", "pipe-writer", "pipe-reader")
METHODS = ("mem", "vm_readv", "ptrace")
WORDS = ("found", "missed", "denied", "untested", "skipped", "failed")
EXPECTABLE = WORDS[:-1]

# Each identity, and what it models: the header line of its block.
IDENTITIES = {
    "root": "uid 0 with CAP_SYS_PTRACE: the administrator, or whoever became root. The kernel "
            "lets it read any process; no mechanism here is built to keep it out (the asymmetric "
            "trust the Morello study found).",
    "root-no-ptrace": "uid 0 with CAP_SYS_PTRACE dropped from every set, as container runtimes "
                      "drop it: a confined root service.",
    "same-uid": "another process of the target's user, without capabilities: malware running "
                "as the same user. The target as its mechanism leaves it.",
    "same-uid-nondumpable": "the same reader, after the process holding the canary made itself "
                            "non-dumpable (PR_SET_DUMPABLE 0): what that one flag buys.",
    "other-uid": "another unprivileged user (uid 65534): a different account on a shared machine.",
    "userns": "the target's user inside a user namespace of its own, root there: a rootless "
              "container or sandbox of the same user.",
}

METHOD_HOW = {
    "mem": "pread of /proc/PID/mem",
    "vm_readv": "process_vm_readv",
    "ptrace": "ptrace PEEKDATA",
}

CONDITIONS = ("root", "user", "unavailable", "no-identity", "no-cap-ptrace")
_YAMA = re.compile(r"yama(>=|<=|=)([0-3])")


# ---- the expected table ----

@dataclass(frozen=True)
class Rule:
    line: int            # its line in the file, for messages
    target: str
    identity: str
    method: str
    expect: str
    when: str
    why: str

    def matches(self, target: str, identity: str, method: str, facts: Mapping) -> bool:
        return (_match(self.target, target) and _match(self.identity, identity)
                and _match(self.method, method) and _holds(self.when, facts))


def _match(patterns: str, name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, p.strip()) for p in patterns.split("|"))


def _condition_ok(cond: str) -> bool:
    return cond in CONDITIONS or _YAMA.fullmatch(cond) is not None


def _holds(when: str, facts: Mapping) -> bool:
    for cond in (c.strip() for c in when.split(";") if c.strip()):
        m = _YAMA.fullmatch(cond)
        if m:
            yama = facts.get("yama") or 0  # absent behaves as 0
            n = int(m[2])
            ok = {">=": yama >= n, "<=": yama <= n, "=": yama == n}[m[1]]
        elif cond == "root":
            ok = facts.get("euid") == 0
        elif cond == "user":
            ok = facts.get("euid") != 0
        elif cond == "unavailable":
            ok = bool(facts.get("unavailable"))
        elif cond == "no-cap-ptrace":
            ok = bool(facts.get("no_cap_ptrace"))
        else:  # no-identity
            ok = bool(facts.get("no_identity"))
        if not ok:
            return False
    return True


def load_expected(path: Path) -> list[Rule]:
    """The rules of an expected table, validated; UsageError (one line)
    for a file that cannot be read or has a bad row."""
    try:
        text = path.read_text()
    except OSError as e:
        raise UsageError(f"cannot read the expected table {path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not a text file") from None
    numbered = [(i, line) for i, line in enumerate(text.splitlines(), 1)
                if line.strip() and not line.lstrip().startswith("#")]
    if not numbered:
        raise UsageError(f"{path}: no rules")
    reader = csv.reader(io.StringIO("\n".join(l for _, l in numbered)))
    rows = list(reader)
    header = [h.strip() for h in rows[0]]
    want = ["target", "identity", "method", "expect", "when", "why"]
    if header != want:
        raise UsageError(f"{path}:{numbered[0][0]}: the header must be {','.join(want)}")
    rules = []
    for (lineno, _), row in zip(numbered[1:], rows[1:]):
        if len(row) != len(want):
            raise UsageError(f"{path}:{lineno}: {len(row)} fields, not {len(want)}")
        target, identity, method, expect, when, why = (f.strip() for f in row)
        where = f"{path}:{lineno}"
        if not target or not identity or not method:
            raise UsageError(f"{where}: target, identity and method must not be empty")
        for p in identity.split("|"):
            if not any(fnmatch.fnmatchcase(i, p.strip()) for i in IDENTITIES):
                raise UsageError(f"{where}: identity {p.strip()!r} names none of "
                                 f"{', '.join(IDENTITIES)}")
        for p in method.split("|"):
            if not any(fnmatch.fnmatchcase(m, p.strip()) for m in METHODS):
                raise UsageError(f"{where}: method {p.strip()!r} names none of {', '.join(METHODS)}")
        if expect not in EXPECTABLE:
            raise UsageError(f"{where}: expect {expect!r} is not one of {', '.join(EXPECTABLE)}")
        bad = [c for c in (c.strip() for c in when.split(";")) if c and not _condition_ok(c)]
        if bad:
            raise UsageError(f"{where}: unknown condition {bad[0]!r} (root, user, yama>=N, "
                             "yama<=N, yama=N, unavailable, no-identity, no-cap-ptrace)")
        if not why:
            raise UsageError(f"{where}: every rule says why")
        rules.append(Rule(lineno, target, identity, method, expect, when, why))
    return rules


# ---- running isob scrape ----

def failed_line(target: str, reason: str) -> dict:
    """A target that gave no scrape line, as one."""
    return {"type": "scrape", "target": target, "status": "failed", "reason": reason, "cells": []}


def run_target(driver: Driver, target: str, timeout: float, max_bytes: int | None) -> dict:
    args = ["scrape", "--target", target]
    if max_bytes:
        args += ["--max-bytes", str(max_bytes)]
    lines, garbage, ex = driver.ask(args, timeout)
    line = next((l for l in lines if l.get("type") == "scrape"), None)
    why = describe_exit(ex, timeout)
    if line is None or why:
        if why is None:
            why = (f"isob printed {garbage[0]}" if garbage else
                   f"isob printed no scrape line (exit status {ex.returncode}"
                   f"{': ' + ex.stderr_tail() if ex.stderr_tail() else ''})")
        return failed_line(target, why)
    try:
        _validate(line)
    except (TypeError, KeyError, ValueError) as e:
        return failed_line(target, f"isob printed a malformed scrape line: {e}")
    return dict(line)


def _validate(line: Mapping) -> None:
    if line.get("status") not in ("ok", "skipped", "failed"):
        raise ValueError(f"status {line.get('status')!r}")
    if line["status"] != "ok":
        return
    ids = [c["identity"] for c in line["cells"]]
    if ids != list(IDENTITIES):
        raise ValueError(f"identities {ids}")
    for c in line["cells"]:
        if c["available"] and [m["method"] for m in c["methods"]] != list(METHODS):
            raise ValueError(f"methods of {c['identity']}")
        for m in c["methods"]:
            if m["outcome"] not in ("granted", "denied", "untested"):
                raise ValueError(f"outcome {m['outcome']!r}")
            int(m["bytes"]), int(m["found"])


# ---- one word per cell ----

def _size(n: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f}{unit}"
    return f"{n}B"


def observe(line: Mapping, identity: str, method: str) -> tuple[str, str, str]:
    """A cell as (word, short detail for the table, detail in words)."""
    status = line.get("status")
    if status == "skipped":
        return "skipped", "", line.get("reason") or "the target cannot run here"
    if status != "ok":
        return "failed", "", line.get("reason") or "the target failed"
    cell = next(c for c in line["cells"] if c["identity"] == identity)
    if not cell["available"]:
        return "untested", "", cell.get("why") or "this identity could not be made here"
    m = next(m for m in cell["methods"] if m["method"] == method)
    if m["outcome"] == "untested":
        return "untested", "", m.get("note") or m.get("errno") or "could not be tried"
    if m["outcome"] == "denied":
        return "denied", m.get("errno") or "", f"{m['how']}: refused, {m.get('errno')}"
    read = f"read {m['bytes']} of {m['planned']} planned bytes"
    if m.get("pages_failed"):
        read += f", {m['pages_failed']} pages unreadable ({m.get('fail_errno')})"
    if m["found"]:
        where = ("at the canary" if m["at_canary"] and m["found"] == 1 else
                 f"{m['found']} copies, one at the canary" if m["at_canary"] else
                 f"{m['found']} copies, first at {m['first_found']}")
        return "found", _size(m["bytes"]), f"{m['how']}: {read}; found {where}"
    return "missed", _size(m["bytes"]), f"{m['how']}: {read}; no canary" + (
        f" ({m['note']})" if m.get("note") else "")


@dataclass(frozen=True)
class Cell:
    target: str
    identity: str
    method: str
    observed: str
    short: str
    detail: str
    expected: str | None
    rule: int | None
    why: str | None
    when: str = ""          # the deciding rule's conditions: the cell depends on the machine


    @property
    def matches(self) -> bool:
        return self.observed == self.expected

    def as_dict(self) -> dict:
        return {"target": self.target, "identity": self.identity, "method": self.method,
                "observed": self.observed, "detail": self.detail, "expected": self.expected,
                "rule": self.rule, "why": self.why, "when": self.when or None,
                "matches": self.matches}


def facts_of(line: Mapping, identity: str, euid: int, yama: int | None) -> dict:
    cells = {c.get("identity"): c for c in line.get("cells") or ()}
    cell, root = cells.get(identity), cells.get("root") or {}
    return {"euid": line.get("euid", euid), "yama": line.get("yama_ptrace_scope", yama),
            "unavailable": line.get("status") == "skipped",
            "no_identity": cell is not None and not cell.get("available"),
            # isob runs as root without CAP_SYS_PTRACE (a container that drops it).
            "no_cap_ptrace": bool(root.get("available")) and root.get("cap_sys_ptrace") is False}


def judge(lines: Sequence[Mapping], rules: Sequence[Rule], euid: int,
          yama: int | None) -> list[Cell]:
    cells = []
    for line in lines:
        for identity in IDENTITIES:
            facts = facts_of(line, identity, euid, yama)
            for method in METHODS:
                word, short, detail = observe(line, identity, method)
                rule = next((r for r in rules
                             if r.matches(line["target"], identity, method, facts)), None)
                cells.append(Cell(line["target"], identity, method, word, short, detail,
                                  rule.expect if rule else None, rule.line if rule else None,
                                  rule.why if rule else None, rule.when if rule else ""))
    return cells


def broken_promises(lines: Iterable[Mapping]) -> list[str]:
    """Readers after which the canary's region had changed: scrape only reads."""
    out = []
    for line in lines:
        for c in line.get("cells") or ():
            if c.get("available") and c.get("intact_after") is False:
                out.append(f"{line['target']}/{c['identity']}: the canary's region changed while "
                           "it was read")
    return out


# ---- output ----

def context_of(lines: Sequence[Mapping]) -> dict:
    ok = next((l for l in lines if l.get("status") == "ok"), None) or {}
    first = next((l for l in lines if "euid" in l), None) or {}
    root = next((c for c in ok.get("cells") or () if c.get("identity") == "root"), {})
    return {"euid": first.get("euid", os.geteuid()),
            "root_cap_sys_ptrace": root.get("cap_sys_ptrace") if root.get("available") else None,
            "yama_ptrace_scope": first.get("yama_ptrace_scope"),
            "target_uid": ok.get("target_uid"), "budget": first.get("budget"),
            "ptrace_pages": first.get("ptrace_pages"), "canary_len": first.get("canary_len")}


def render(lines: Sequence[Mapping], cells: Sequence[Cell], expected: Path,
           broken: Sequence[str]) -> str:
    ctx = context_of(lines)
    yama = ctx["yama_ptrace_scope"]
    out = [
        f"Outside readers against a {ctx['canary_len'] or 32}-byte random canary "
        "(measured here; `isobench scrape --json` has every detail)",
        f"isob ran as {'root' if ctx['euid'] == 0 else 'uid ' + str(ctx['euid'])}"
        f"{' WITHOUT CAP_SYS_PTRACE (so is its root reader)' if ctx['root_cap_sys_ptrace'] is False else ''}"
        "; targets run "
        f"as uid {ctx['target_uid'] if ctx['target_uid'] is not None else '?'}; Yama "
        f"ptrace_scope: {'absent' if yama is None else yama}",
        *textwrap.wrap(
            "readers: mem = pread of /proc/PID/mem and vm_readv = process_vm_readv, over the "
            "target's own smaps (no [vvar], [vsyscall], I/O, device or empty mappings; at most "
            f"{_size(ctx['budget']) if ctx['budget'] else '?'} each); ptrace = PEEKDATA of the "
            f"first {ctx['ptrace_pages'] or '?'} pages of each mapping and the canary's page",
            100, subsequent_indent="  "),
    ]
    by = {(c.target, c.identity, c.method): c for c in cells}
    targets = [l["target"] for l in lines]
    for identity, models in IDENTITIES.items():
        out += ["", *textwrap.wrap(f"{identity}: {models}", 100, subsequent_indent="  ")]
        rows = []
        for t in targets:
            row = [t]
            for m in METHODS:
                c = by[(t, identity, m)]
                text = f"{c.observed}{'*' if c.when else ''} {c.short}".strip()
                if not c.matches:
                    text += f" !{c.expected or 'no rule'}"
                row.append(text)
            rows.append(row)
        out.append(render_table(("target", *METHODS), rows))
    out += ["", *textwrap.wrap(
        "words: found = read the target and found the canary (bytes read); missed = read it, no "
        "canary; denied = the kernel refused (errno); untested = could not be tried here; "
        "skipped = the target cannot run here; failed = the target broke; !X = expected X; "
        "X* = what this cell should be depends on the machine (root or not, Yama, "
        "CAP_SYS_PTRACE, user namespaces, the CPU: the rule's `when`)",
        100, subsequent_indent="  ")]
    notes = []
    for l in lines:
        if l.get("status") != "ok":
            notes.append(f"  {l['target']}: {l.get('status')}: {l.get('reason')}")
    seen = set()
    for c in cells:
        if c.observed == "untested" and (c.identity, c.detail) not in seen:
            seen.add((c.identity, c.detail))
            notes.append(f"  {c.identity}: untested: {c.detail}")
    if notes:
        out += ["not measured:", *notes]
    differ = [c for c in cells if not c.matches]
    if broken:
        out += ["READERS CHANGED THE TARGET (they must only read):", *(f"  {b}" for b in broken)]
    if differ:
        out.append(f"{len(differ)} cell{'s' if len(differ) != 1 else ''} differ from {expected}:")
        for c in differ:
            rule = (f"expected {c.expected} (rule of line {c.rule}"
                    f"{', when ' + c.when if c.when else ''}: {c.why})" if c.expected
                    else "no rule of the table covers it")
            out.append(f"  {c.target} / {c.identity} / {c.method}: observed {c.observed} "
                       f"({c.detail}); {rule}")
    else:
        out.append(f"every cell matches {expected} (docs/scrape.md explains each rule)")
    return "\n".join(out)


def document(lines: Sequence[Mapping], cells: Sequence[Cell], expected: Path,
             broken: Sequence[str], code: int) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "expected_table": str(expected),
        "context": context_of(lines),
        "identities": [{"name": k, "models": v} for k, v in IDENTITIES.items()],
        "methods": [{"name": k, "how": v} for k, v in METHOD_HOW.items()],
        "targets": [dict(l) for l in lines],
        "cells": [c.as_dict() for c in cells],
        "differences": [c.as_dict() for c in cells if not c.matches],
        "broken_promises": list(broken),
        "failed_targets": [l["target"] for l in lines if l.get("status") == "failed"],
        "exit_status": code,
    }


# ---- the command ----

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_DIFFERS = 0, 1, 2, 3


def byte_count(text: str) -> int:
    m = re.fullmatch(r"(\d+)([kmg]?)", text.strip(), re.IGNORECASE)
    n = int(m[1]) << {"": 0, "k": 10, "m": 20, "g": 30}[m[2].lower()] if m else 0
    if not 4096 <= n <= 64 << 30:
        raise argparse.ArgumentTypeError(f"{text!r} is not a byte count from 4K to 64G "
                                         "(e.g. 256M, 1G)")
    return n


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive number of seconds")
    return v


def add_parser(sub) -> argparse.ArgumentParser:
    """Add the ``scrape`` subcommand to the cli's subparsers."""
    p = sub.add_parser(
        "scrape", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Plant a 32-byte random canary in each target and read the target from "
                    "outside, as\nsix identities (root; root without CAP_SYS_PTRACE; the same "
                    "uid, the target\ndumpable and not; another uid; a user namespace) with "
                    "three readers (/proc/PID/mem\nand process_vm_readv over the target's own "
                    "maps, ptrace PEEKDATA).  Each cell says\nfound, missed, denied or untested "
                    "and is compared with the expected table\n(isobench/data/scrape-expected.csv;"
                    " docs/scrape.md explains it).  Readers only read.\n\n"
                    "targets: plain (an ordinary process), pipe-writer and pipe-reader (two "
                    "processes\npassing the canary over a pipe), and every mechanism "
                    "`isobench list` shows.\n\n"
                    "exit status: 0 every cell as expected, 1 a target failed or a reader "
                    "changed it,\n2 bad usage, 3 some cells differ from the table (listed)",
        epilog="examples:\n  isobench scrape\n  isobench scrape --target plain --target mprotect\n"
               "  sudo isobench scrape --json | jq '.differences'\n"
               "  isobench scrape --expected my-table.csv")
    p.add_argument("-t", "--target", dest="targets", action="append", default=[], metavar="T",
                   help="a target (repeat, or comma-separate; default: all)")
    p.add_argument("--expected", metavar="CSV", type=Path, default=EXPECTED,
                   help="the expected table (default: the one shipped, isobench/data/"
                        "scrape-expected.csv)")
    p.add_argument("--max-bytes", type=byte_count, metavar="B",
                   help="bytes each reader may read of a target (default: isob's, 1G)")
    p.add_argument("--timeout", type=_seconds, default=TIMEOUT, metavar="SECONDS",
                   help=f"time-out of each target's isob (default: {TIMEOUT:g})")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--json", action="store_true",
                   help="print the matrix as one JSON object on stdout (schema_version "
                        f"{SCHEMA_VERSION})")
    p.set_defaults(func=cmd_scrape)
    return p


def _targets(args: argparse.Namespace, driver: Driver) -> list[str]:
    catalog = driver.catalog()
    known = [*FIXED_TARGETS, *(m.name for m in catalog.mechanisms)]
    asked = [t.strip() for spec in args.targets for t in spec.split(",") if t.strip()]
    for t in asked:
        if t not in known:
            raise UsageError(f"unknown target {t!r} (targets: {', '.join(known)})")
    return list(dict.fromkeys(asked)) if asked else known


def cmd_scrape(args: argparse.Namespace) -> int:
    rules = load_expected(args.expected)
    driver = Driver(find_isob())
    targets = _targets(args, driver)
    lines = []
    for i, t in enumerate(targets, 1):
        if not args.quiet:
            print(f"scrape: {t} ({i}/{len(targets)})", file=sys.stderr, flush=True)
        lines.append(run_target(driver, t, args.timeout, args.max_bytes))
    ctx = context_of(lines)
    cells = judge(lines, rules, ctx["euid"], ctx["yama_ptrace_scope"])
    broken = broken_promises(lines)
    failed = any(l.get("status") == "failed" for l in lines)
    code = (EXIT_FAILED if failed or broken else
            EXIT_DIFFERS if any(not c.matches for c in cells) else EXIT_OK)
    if args.json:
        json.dump(document(lines, cells, args.expected, broken, code), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(render(lines, cells, args.expected, broken))
    return code
