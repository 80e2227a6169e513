"""What every command of the `isobench` command shares: the store's path,
exit codes, the parser classes and option types, --db/--json/--wide, and
one-line errors.  Imports nothing of measure/, analysis/ or render/, so
that `isobench --help` stays cheap."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Sequence

from ..core import validate
from ..core.text import WIDTH, terminal
from ..errors import UsageError
from ..store import interchange


PROG = "isobench"
ENV_DB = "ISOBENCH_DB"
ENV_DEBUG = "ISOBENCH_DEBUG"
DEFAULT_DB = Path("results") / "isobench.sqlite"


EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


RUN_SPEC = "run id, 'latest' (the newest run that has ended: default) or 'newest'"


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2 (via UsageError)."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{message} (see `{self.prog} --help`)")


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the hand-wrapped examples in descriptions and epilogs."""


def positive_int(text: str) -> int:
    v = validate.whole(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return v


positive_seconds = validate.seconds(validate.MAX_TIMEOUT)
non_negative_int = validate.whole
size_list = validate.size_tokens


def add_db(p: argparse.ArgumentParser, top: bool = False) -> None:
    # Accepted before and after the subcommand; SUPPRESS keeps a subcommand's
    # missing --db from overwriting one given before it.
    p.add_argument("--db", metavar="PATH", default=None if top else argparse.SUPPRESS,
                   help=f"the SQLite store (default: ${ENV_DB}, else ./{DEFAULT_DB})")


def add_json(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--json", action="store_true",
                   help=f"print {what} as one JSON object on stdout (progress stays on stderr)")


def add_wide(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wide", action="store_true",
                   help="every column (median, mean and batched of the middle repetition, "
                        "unit, reps), the spread between repetitions, and the per-result "
                        "table of the families that print their own tables (oslat, lwc-*); "
                        f"the default output fits {WIDTH} columns")


def db_path(args: argparse.Namespace) -> Path:
    text = args.db or os.environ.get(ENV_DB) or str(DEFAULT_DB)
    return Path(os.path.abspath(text))


def choose(kind: str, asked: Sequence[str], known: Sequence[str]) -> list[str]:
    unknown = [a for a in asked if a not in known]
    if unknown:
        raise UsageError(f"unknown {kind} {unknown[0]!r} (known: {', '.join(known) or 'none'}; "
                         "see `isobench list`)")
    return list(dict.fromkeys(asked))


def print_json(doc: dict) -> None:
    """Every --json document, with the interchange schema_version first."""
    json.dump(interchange.stamp(doc), sys.stdout, indent=1)
    sys.stdout.write("\n")


class OutputError(Exception):
    """What was asked for was computed but cannot be written: exit 1."""


def err(message: str) -> None:
    # One line, always: a multi-line message would break the contract.
    try:
        print(terminal(f"{PROG}: error: {' '.join(str(message).split())}"),
              file=sys.stderr)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # no terminal left (SIGHUP) or stderr closed: nothing more to do


def flush_stdout() -> None:
    """Write out stdout now, so that a full disk or /dev/full is reported as one
    line instead of as an exception while Python exits."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        drop_stdout()
        raise
    except OSError as e:
        drop_stdout()
        raise OutputError(f"cannot write the output: {e.strerror or e}") from None


def drop_stdout() -> None:
    # What is still buffered can never be written: point the descriptor at
    # /dev/null so that the interpreter's last flush succeeds quietly.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
