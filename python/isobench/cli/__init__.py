"""The `isobench` command: list, run, show, runs, export, import, report,
check, compare, system, reference, campaign (and serve, scrape).

One module per command group (COMMANDS), imported only when one of its
commands runs: the parser is built in two steps, first every command's name
and one-line help (what `isobench --help` prints), then the full parser of
the group of the command given.

Exit codes (every command):
    0    everything ran (skipped mechanisms are not failures)
    1    something failed: a benchmark crashed, hung or reported a failure,
         an isolation test failed, the native driver could not answer, the
         store's content is damaged, or the output could not be written;
         for `system tune|reset`: a setting could not be changed
    3    `check` and `system check`: a finding of severity error (with
         --strict, also warning): the numbers are wrong or missing
    2    bad usage: unknown benchmark or mechanism, malformed option, unusable
         store path, unknown run, unwritable report folder, a file `import`
         cannot read; always exactly one line on stderr
    3    `scrape` only: some cells differ from the expected table (listed)
    128+N  stopped by signal N (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP); the
         run is marked interrupted and the results stored so far are kept
"""

from __future__ import annotations

import argparse
import importlib
import os
import sqlite3
import sys
import traceback
from pathlib import Path
from typing import Any, Callable, Sequence

from .common import (DEFAULT_DB, ENV_DB, ENV_DEBUG, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE,
                     PROG, Formatter, OutputError, Parser, add_db, drop_stdout, err,
                     flush_stdout)
from .. import __version__
from ..errors import DriverError, UsageError
from ..measure import lifecycle

# Every command, in the order `isobench --help` lists them: its one-line
# help and the module of its group, whose add_parsers(sub) adds the group's
# commands (add_parser for the two of measure/).
COMMANDS: dict[str, tuple[str, str]] = {
    "list": ("mechanisms and benchmarks, and what is available", ".listing"),
    "run": ("run benchmarks and store the results", ".run"),
    "show": ("print a stored run", ".stored"),
    "runs": ("list the stored runs", ".stored"),
    "export": ("write a stored run as CSV or JSON", ".stored"),
    "import": ("read an export or another store into the store", ".stored"),
    "report": ("write an HTML report, plots and a summary", ".stored"),
    "plot": ("the raw samples of one configuration", ".stored"),
    "check": ("soundness checks of a stored run", ".stored"),
    "compare": ("compare two runs, or two machines", ".compare"),
    "system": ("show, check, tune or reset the machine", ".machine"),
    "reference": ("published figures, with their sources", ".machine"),
    "campaign": ("run benchmarks on many hosts (Ansible), or on a Slurm cluster", ".campaign"),
    "serve": ("serve the memcached text protocol from a store inside one compartment",
              "..measure.serve"),
    "scrape": ("outside readers against a canary in each compartment (the trust-model table)",
               "..measure.scrape"),
}


def _top_parser() -> tuple[Parser, Any]:
    p = Parser(prog=PROG, formatter_class=Formatter,
               description="isobench: what isolation costs.  Runs the same benchmarks over many "
                           "isolation\nmechanisms with one harness and stores every raw sample "
                           "in one SQLite file.",
               epilog="examples:\n"
                      "  isobench list                  what can run here, and why not\n"
                      "  isobench run --quick           the default suite, all mechanisms, quickly\n"
                      "  isobench show                  the latest run again\n"
                      "  isobench runs                  every stored run, one line each\n"
                      "  isobench check                 is the latest run sound? what to fix\n"
                      "  isobench report -o report/     HTML, plots and a Markdown summary\n"
                      "  isobench compare 3 4           two runs (or machines), normalized to direct\n"
                      "  isobench export 3 --format csv -o run3.csv\n\n"
                      f"The store is --db PATH, else ${ENV_DB}, else ./{DEFAULT_DB}.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    add_db(p, top=True)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    return p, sub


def _commands_only() -> Parser:
    """The parser that knows each command by name and help only: enough for
    `isobench --help`, --version and a missing or unknown command."""
    p, sub = _top_parser()
    for name, (text, _) in COMMANDS.items():
        sub.add_parser(name, help=text, add_help=False)
    return p


def build_parser(command: str) -> Parser:
    """The full parser of `command`'s group (its module imported now)."""
    p, sub = _top_parser()
    module = importlib.import_module(COMMANDS[command][1], __name__)
    adder = getattr(module, "add_parsers", None) or module.add_parser
    adder(sub)
    return p


def parse(argv: Sequence[str]) -> argparse.Namespace:
    known, _ = _commands_only().parse_known_args(argv)
    return build_parser(known.command).parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        argv = list(sys.argv[1:] if argv is None else argv)
        args = parse(argv)
        args.argv = [PROG, *argv]
        func: Callable[[argparse.Namespace], int] = args.func
        code = func(args)
        flush_stdout()
        return code
    except UsageError as e:
        err(e)
        return EXIT_USAGE
    except (DriverError, OutputError) as e:
        err(e)
        return EXIT_FAILED
    except sqlite3.Error as e:
        err(f"the store failed: {e}")
        return EXIT_FAILED
    except lifecycle.RunInterrupted as e:
        err(f"interrupted by {e.signal.name}: run {e.run_id} is marked interrupted; the results "
             f"so far are kept in {e.db}")
        return e.signal.exit_code
    except lifecycle.Interrupted as e:
        err(f"interrupted by {e.name}")
        return e.exit_code
    except KeyboardInterrupt:
        err("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # stdout closed early (`isobench list | head`): not an error worth a traceback.
        drop_stdout()
        try:
            sys.stderr.close()
        except OSError:
            pass
        return EXIT_FAILED
    except OSError as e:
        # Most often writing the output failed (stdout on a full disk, a
        # closed terminal); a file named in the error is named in the line.
        if e.filename:
            err(f"cannot use {e.filename}: {e.strerror or e}")
        else:
            drop_stdout()
            err(f"cannot write the output: {e.strerror or e}")
        return EXIT_FAILED
    except Exception as e:  # the last guard: one line, never a traceback
        if os.environ.get(ENV_DEBUG):
            traceback.print_exc()
        where = traceback.extract_tb(e.__traceback__)[-1]
        err(f"internal error: {type(e).__name__}: {e} (at {Path(where.filename).name}:"
             f"{where.lineno}; set {ENV_DEBUG}=1 for the traceback, and please report it)")
        return EXIT_FAILED



if __name__ == "__main__":
    sys.exit(main())
