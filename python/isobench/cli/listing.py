"""`isobench list`: the mechanisms and benchmarks the native driver has, and
who can reach each mechanism's trusted heap (the attacker matrix)."""

from __future__ import annotations

import argparse
import os

from .common import EXIT_FAILED, EXIT_OK, Formatter, add_json, positive_seconds, print_json
from ..analysis.families import inspect
from ..core.text import WIDTH
from ..measure.driver import ISOLATION_TIMEOUT, Driver, Isolation, find_isob
from ..render import console, matrix
from ..render.kit import table


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "list", formatter_class=Formatter,
        description="List the mechanisms and benchmarks the native driver has: whether each "
                    "mechanism\ncan run here (and why not), and who can reach its trusted heap: "
                    "the attacker matrix\n(in-process, same-uid, other-uid, root), measured "
                    "here by `isob isolation`.\n\n"
                    "isolation: enforced  in-process, same-uid and other-uid all enforced\n"
                    "           partial   in-process enforced; same-uid or other-uid leaks or is "
                    "untested\n"
                    "           none      the in-process cell leaks (a plain call, a thread)\n"
                    "           FAILED    it claims isolation and the in-process cell leaks (exit 1)\n"
                    "           untested  not available here, or the in-process cell could not run\n"
                    "Root is shown, never counted (docs/mechanisms.md).",
        epilog="examples:\n  isobench list\n  isobench list --json | jq '.mechanisms[].name'\n"
               "  isobench list --wide               each cell's evidence, its conditions\n"
               "  isobench list --skip-isolation     fast: no isolation tests")
    add_json(p, "the listing")
    p.add_argument("--wide", action="store_true",
                   help="the attacker matrix with each cell's evidence, every cell's condition "
                        "and the binary inspection's sites in full; the default listing fits "
                        f"{WIDTH} columns")
    p.add_argument("--timeout", type=positive_seconds, default=ISOLATION_TIMEOUT, metavar="SECONDS",
                   help=f"time-out of each isolation test (default: {ISOLATION_TIMEOUT:g})")
    p.add_argument("--skip-isolation", action="store_true",
                   help="do not run the isolation tests (isolation is then 'untested')")
    p.set_defaults(func=cmd_list)


def isolation_entries(driver: Driver, mechanisms, timeout: float,
                      skip: bool = False) -> tuple[list[dict], dict]:
    """Each mechanism with its attacker matrix (isob isolation), and who ran
    the probes: the listing of `list`, and what `run` records."""
    mechs, yama = [], None
    for m in mechanisms:
        if skip:
            iso = Isolation.untested("not run (--skip-isolation)" if m.available
                                     else m.reason or "not available here")
        else:
            iso = driver.isolation(m, timeout=timeout)
        yama = iso.detail.get("yama_ptrace_scope", yama)
        mechs.append({"name": m.name, "summary": m.summary, "available": m.available,
                      "reason": m.reason, "isolation": iso.state, "isolation_reason": iso.reason,
                      "isolation_detail": dict(iso.detail) or None,
                      "attackers": {k: dict(v) for k, v in iso.attackers.items()},
                      "props": list(m.props)})
    return mechs, {"euid": os.geteuid(), "yama_ptrace_scope": yama}


def cmd_list(args: argparse.Namespace) -> int:
    driver = Driver(find_isob())
    catalog = driver.catalog()
    mechs, context = isolation_entries(driver, catalog.mechanisms, args.timeout, args.skip_isolation)
    # ERIM's binary inspection: the mpk mechanisms' stray PKRU writers.
    inspected = ([] if args.skip_isolation else
                 inspect.with_inspection(mechs, *driver.inspect(timeout=args.timeout)))
    benches = [{"name": b.name, "summary": b.summary, "needs_mechanism": b.needs_mechanism}
               for b in catalog.benchmarks]
    if args.json:
        print_json({"mechanisms": mechs, "benchmarks": benches, "isolation_context": context})
    else:
        print(console.list_report(mechs, benches, wide=args.wide))
        print("\n" + matrix.format_matrix(mechs, context, brief=not args.wide, listing=True))
        if inspected:
            print("\n".join(inspected if args.wide else
                            [table.wrap(line, indent="    ") for line in inspected]))
    return EXIT_FAILED if any(m["isolation"] == "failed" for m in mechs) else EXIT_OK
