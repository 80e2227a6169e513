"""The machine and the published figures: `isobench system` (the state that
matters to measuring) and `isobench reference`."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import EXIT_FAILED, EXIT_OK, Formatter, add_db, add_json, print_json
from ..analysis import checks
from ..analysis.kit import reference
from ..measure import sysinfo, system
from ..render import reference as render_reference


def add_parsers(sub) -> None:
    _add_system(sub)
    _add_reference(sub)


def _add_system(sub) -> None:
    p = sub.add_parser(
        "system", formatter_class=Formatter,
        description="The machine state that matters to measuring: frequency governor, turbo, "
                    "SMT,\nASLR, perf_event_paranoid, rdpmc, isolated CPUs, clock source, "
                    "hypervisor.\n\n  show    print it\n  check   the findings about this "
                    "machine (exit 3 on an error;\n          --strict: on a warning)\n  tune    set governor performance, turbo off, NMI "
                    "watchdog off, ASLR full\n          (needs root), saving first the values "
                    "it changes to the state file\n  reset   write the saved values back, in "
                    "reverse order, and remove the file\n\nA setting this machine does not "
                    "have, or that cannot be written, is reported\nand left as it is.  reset "
                    "refuses a state file that others could have written\n(or that names a "
                    "file of no tuned setting) and then writes nothing.",
        epilog="examples:\n  isobench system show\n  sudo isobench system tune\n"
               "  sudo isobench system reset\n\nexit status: 0 done, 1 a setting could not "
               "be changed, 2 bad usage, 3 check: errors (--strict: or warnings)")
    p.add_argument("action", choices=("show", "check", "tune", "reset"))
    p.add_argument("--strict", action="store_true",
                   help="check: warnings count as errors for the exit status")
    p.add_argument("--state", metavar="PATH",
                   help=f"state file of tune/reset, in a folder only root can write (default: "
                        f"{system.STATE_DIR}/{system.STATE_NAME})")
    add_json(p, "the settings")
    add_db(p)
    p.set_defaults(func=cmd_system)


def _add_reference(sub) -> None:
    p = sub.add_parser(
        "reference", formatter_class=Formatter,
        description="List the published figures isobench shows beside local numbers, one "
                    "block per source\n(its citation, DOI or URL, hardware): each figure's "
                    "value in the source's own\ndigits (3.80, not 3.8) with its spread, the "
                    "unit, what one value is of (per:\none-way, round trip, per call, per "
                    "page), and under it what was measured, how,\nand the table or section it "
                    "comes from; a figure worked out from printed ones\nsays how "
                    "([derived: ...]).  They come from one reviewed file\n"
                    "(isobench/data/reference.csv) and are never mixed into local statistics.",
        epilog="examples:\n  isobench reference\n  isobench reference --json | jq '.references[0]'")
    add_json(p, "the figures")
    p.set_defaults(func=cmd_reference)


def cmd_system(args: argparse.Namespace) -> int:
    root = system.sysroot()
    state = Path(args.state) if args.state else system.default_state(root)
    if args.action == "check":
        findings = [f.as_dict() for f in checks.machine_findings(sysinfo.collect(root))]
        if args.json:
            print_json({"findings": findings})
        else:
            print(checks.render(findings))
        return checks.exit_status(findings, strict=args.strict)
    note = None
    if args.action == "show":
        outcomes = system.show(root)
    elif args.action == "tune":
        outcomes, note = system.tune(root, state)
    else:
        outcomes, note = system.reset(root, state)
    if args.json:
        print_json({"action": args.action, "root": str(root), "state": str(state),
                     "note": note, "settings": [o.as_dict() for o in outcomes]})
    else:
        print(system.render(outcomes, note))
    return EXIT_FAILED if any(o.status in system.FAILURES for o in outcomes) else EXIT_OK


def cmd_reference(args: argparse.Namespace) -> int:
    refs = reference.load()
    if args.json:
        print_json({"references": [r.as_dict() for r in refs]})
    else:
        print(render_reference.render(refs))
    return EXIT_OK
