"""The `isobench` command: list, run, show, runs, export, import, report,
check, compare, system, reference, campaign (and serve, scrape).

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
import dataclasses
import json
import os
import secrets
import signal
import sqlite3
import sys
import traceback
from pathlib import Path
from typing import Callable, Sequence

from . import __version__
from .core import attackers, stats, validate
from .analysis import checks, compare, inspect, precision, reference, runs, summary
from .measure import (kvserver, lifecycle, lwcserve, progress, runner, scrape, serve, sysinfo,
                      system)
from .render import matrix, plots, report, table
from .render import compare as render_compare, reference as render_reference
from .store import export, interchange
from .analysis import campaign as analysis_campaign
from .measure import campaign as measure_campaign, slurm as measure_slurm
from .render import campaign as render_campaign
from .measure.driver import ISOLATION_TIMEOUT, Catalog, Driver, Isolation, find_isob, repo_root
from .errors import DriverError, UsageError
from .store import Store

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


# ---- option value types: each raises ArgumentTypeError with a plain message ----
# Plain ASCII digits only (core/validate.py says why); ranges of options that
# reach isob are checked against `isob --limits --json` in cmd_run.

def positive_int(text: str) -> int:
    v = validate.whole(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return v


positive_seconds = validate.seconds(validate.MAX_TIMEOUT)
non_negative_int = validate.whole
size_list = validate.size_tokens


def report_formats(text: str) -> tuple[str, ...]:
    items = tuple(f.strip() for f in text.split(",") if f.strip())
    bad = [f for f in items if f not in report.FORMATS]
    if bad or not items or not text.isascii():
        raise argparse.ArgumentTypeError(
            f"{text!r}: formats are a comma-separated list of {', '.join(report.FORMATS)}")
    return tuple(dict.fromkeys(items))


def placement_list(text: str) -> tuple[str, ...]:
    items = tuple(p.strip() for p in text.split(",") if p.strip())
    bad = [p for p in items if p not in runner.PLACEMENTS]
    if bad or not items:
        raise argparse.ArgumentTypeError(
            f"{text!r}: placements are a comma-separated list of {', '.join(runner.PLACEMENTS)}")
    return tuple(dict.fromkeys(items))


# ---- the parser: one builder per subcommand ----

def build_parser() -> Parser:
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
    _add_db(p, top=True)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    _add_list(sub)
    _add_run(sub)
    _add_show(sub)
    _add_runs(sub)
    _add_export(sub)
    _add_import(sub)
    _add_report(sub)
    _add_plot(sub)
    _add_check(sub)
    _add_compare(sub)
    _add_system(sub)
    _add_reference(sub)
    _add_campaign(sub)
    serve.add_parser(sub)
    scrape.add_parser(sub)
    return p


def _add_db(p: argparse.ArgumentParser, top: bool = False) -> None:
    # Accepted before and after the subcommand; SUPPRESS keeps a subcommand's
    # missing --db from overwriting one given before it.
    p.add_argument("--db", metavar="PATH", default=None if top else argparse.SUPPRESS,
                   help=f"the SQLite store (default: ${ENV_DB}, else ./{DEFAULT_DB})")


def _add_json(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--json", action="store_true",
                   help=f"print {what} as one JSON object on stdout (progress stays on stderr)")


def _add_wide(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wide", action="store_true",
                   help="every column (median, mean and batched of the middle repetition, "
                        "unit, reps), the spread between repetitions, and the per-result "
                        "table of the families that print their own tables (oslat, lwc-*); "
                        f"the default output fits {table.WIDTH} columns")


def _add_list(sub) -> None:
    p = sub.add_parser(
        "list", formatter_class=Formatter, help="mechanisms and benchmarks, and what is available",
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
    _add_json(p, "the listing")
    p.add_argument("--wide", action="store_true",
                   help="the attacker matrix with each cell's evidence, every cell's condition "
                        "and the binary inspection's sites in full; the default listing fits "
                        f"{table.WIDTH} columns")
    p.add_argument("--timeout", type=positive_seconds, default=ISOLATION_TIMEOUT, metavar="SECONDS",
                   help=f"time-out of each isolation test (default: {ISOLATION_TIMEOUT:g})")
    p.add_argument("--skip-isolation", action="store_true",
                   help="do not run the isolation tests (isolation is then 'untested')")
    p.set_defaults(func=cmd_list)


def _add_run(sub) -> None:
    p = sub.add_parser(
        "run", formatter_class=Formatter, help="run benchmarks and store the results",
        description="Run benchmarks over mechanisms.  Each (benchmark, mechanism) runs in its "
                    "own isob\nprocess with a time-out; a crash or a hang is recorded as a "
                    "failed result and\nthe run goes on.  Every result is stored as soon as it "
                    "exists.\n\n"
                    f"defaults: benchmarks {', '.join(runner.DEFAULT_SUITE)}; every mechanism "
                    "`isobench list` shows\n(unavailable ones give skipped results, which are "
                    "not failures).",
        epilog="examples:\n"
               "  isobench run --quick                       default suite, all mechanisms\n"
               "  isobench run switch -m direct -m thread    two mechanisms\n"
               "  isobench run switch -m thread --placement same-cpu,cross-cpu\n"
               "  isobench run pingpong                      benchmarks of OS primitives take no -m\n"
               "  isobench run switch kv --repeat 5          5 fresh processes each, shuffled\n"
               "  isobench run switch --target-ci 2          repeat until every 95% interval\n"
               "                                             is within +-2% of its value\n"
               "  isobench run kv-server --quick             isob serve beside memcached\n"
               "  isobench run oslat --quick --confine none,seccomp-allow,ptrace\n"
               "                                             OS latencies under confinements\n"
               "  isobench run pingpong --protect none,seccomp   IPC with both endpoints confined\n"
               "  isobench run delegate sched --quick        memory delegation, scheduling\n"
               "  isobench run --json > run.json\n\n"
               "SIGINT, SIGTERM and SIGHUP stop the run cleanly: every process it started is "
               "killed,\nwhat finished stays stored, and the run is marked interrupted.\n\n"
               "exit status: 0 all ran, 1 something failed, 2 bad usage, 128+N stopped by "
               "signal N\n(130 Ctrl-C, 143 SIGTERM)")
    p.add_argument("benchmarks", nargs="*", metavar="BENCH",
                   help=f"benchmarks to run (default: {' '.join(runner.DEFAULT_SUITE)})")
    p.add_argument("-m", "--mechanism", dest="mechanisms", action="append", default=[],
                   metavar="MECH", help="a mechanism to run (repeat, or comma-separate; "
                                        f"default: all); {runs.BASELINE}, the baseline of "
                                        "every ratio, is added unless --no-baseline")
    p.add_argument("--no-baseline", action="store_true",
                   help=f"with -m: run only the mechanisms named, without {runs.BASELINE} "
                        "(ratios to it are then left empty)")
    p.add_argument("--quick", action="store_true",
                   help="fewer iterations (isob --quick) and a shorter default time-out")
    p.add_argument("--n", type=positive_int, metavar="N",
                   help="samples per result (default: isob's own, see `isob --help`)")
    p.add_argument("--placement", type=placement_list, metavar="LIST",
                   help=f"comma-separated placements: {', '.join(runner.PLACEMENTS)} "
                        "(default: each benchmark's own)")
    p.add_argument("--counter", type=validate.one_of("counter", runner.COUNTERS), metavar="C",
                   help=f"isob's counter: {', '.join(runner.COUNTERS)} (default: the best "
                        "available, perf where the PMU can be read; `isobench check` says "
                        "what each one misses)")
    p.add_argument("--scope", type=validate.one_of("scope", runner.SCOPES), metavar="S",
                   help="perf's counting scope: thread (the measured thread only) or cpu "
                        "(everything on its CPU, the other side of a switch included; needs "
                        "perf_event_paranoid <= 0) (default: thread)")
    p.add_argument("--timeout", type=positive_seconds, metavar="SECONDS",
                   help=f"time-out of each isob process (default: {runner.DEFAULT_TIMEOUT:g}, "
                        f"cpuwork and memops {runner.LONG_TIMEOUTS['cpuwork']:g}; "
                        f"--quick: {runner.QUICK_TIMEOUT:g})")
    p.add_argument("--sizes", type=size_list, metavar="LIST",
                   help="kv: data sizes, e.g. 4K,1M,256M (multiples of 64 B; default: 4K to "
                        "256M by factors of 4, --quick: to 16M).  Sizes asked for by name run "
                        "even when predicted to take long; raise --timeout to match.  memops: "
                        "block sizes, 1M or more (default: 100M to 1000M by 100M, --quick: "
                        "64M,256M); a block above half of MemAvailable is refused")
    _add_bench_options(p)
    p.add_argument("--seconds", type=validate.seconds(validate.MAX_CLIENT_SECONDS), metavar="S",
                   help=f"how long the client loads each server: kv-server, whole seconds "
                        f"(default: {kvserver.SECONDS:g}; --quick: {kvserver.QUICK_SECONDS:g}); "
                        f"lwc-serve, lwc-conns and lwc-curve, per point (default: "
                        f"{lwcserve.SECONDS:g}; "
                        f"--quick: {lwcserve.QUICK_SECONDS:g})")
    p.add_argument("--repeat", type=validate.bounded_whole(1, validate.MAX_REPEAT), metavar="N",
                   help="run every (benchmark, mechanism) in N fresh isob processes, the "
                        "mechanisms in a shuffled order each time; the repetitions are what "
                        f"intervals and tests rest on (default: {runner.DEFAULT_REPEAT}; "
                        f"--quick: {runner.QUICK_REPEAT}, enough for an interval but not for "
                        f"a significance test; without either, "
                        + ", ".join(f"{b}: {n}" for b, n in runner.BENCHMARK_REPEAT.items())
                        + f", as its experiment asks; at most {validate.MAX_REPEAT})")
    p.add_argument("--target-ci", type=validate.percent(validate.MIN_TARGET_CI,
                                                         validate.MAX_TARGET_CI),
                   metavar="PCT",
                   help="after the planned repetitions, add one more fresh process at a time "
                        "to each (benchmark, mechanism) whose headline's 95%% interval is "
                        "wider than +-PCT%% of the headline (the larger half), until every "
                        "one is within it or has --max-repeat repetitions; the run's record "
                        "says which reached the target")
    p.add_argument("--max-repeat", type=validate.bounded_whole(2, validate.MAX_REPEAT),
                   metavar="N",
                   help="with --target-ci: at most N repetitions per (benchmark, mechanism) "
                        f"(default: {ADAPTIVE_MAX_REPEAT}, or --repeat if larger)")
    p.add_argument("--seed", type=validate.bounded_whole(0, validate.MAX_SEED), metavar="S",
                   help="seed of the shuffled order (default: a random one; either way it is "
                        "recorded with the run)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    _add_wide(p)
    _add_json(p, "the run")
    _add_db(p)
    p.set_defaults(func=cmd_run)


# Options only some benchmarks take, passed to those that take them (isob
# list --json says which): (flag, argparse type, metavar, help).
BENCH_OPTIONS = (
    ("--primitive", validate.name_list, "LIST",
     "oslat: primitives or families (ctx, fs, ipc, proc, bw); pingpong: futex, pipe, socket, "
     "socket-fd, eventfd, spin (default: all)"),
    ("--confine", validate.name_list, "LIST",
     "oslat: confinements C or C:VARIANT, one job each per repetition in a shuffled order, "
     "`none` always among them; `all`: every one isob lists (default: every one available "
     "here, named on stderr)"),
    ("--protect", validate.name_list, "LIST",
     "pingpong: none, seccomp, userns, landlock or seccomp-allow:VARIANT, confining both "
     "endpoints (isob measures none first, for the delta; default: none)"),
    ("--payload", validate.number_list, "LIST",
     "pingpong, switch: payloads in bytes, 0 to 65536 (default 0,64,4096)"),
    ("--depth", validate.number_list, "LIST", "delegate: chain depths (default 1,2,4,8,16,32)"),
    ("--variant", validate.name_list, "LIST",
     "delegate: threads, processes, copies; sched: threads, processes, seccomp, userns; "
     "switch: entry, inline, direct-call, indirect-call (ERIM's call kinds, an empty function "
     "inlined, called directly or through a pointer: outside any compartment on direct, behind "
     "the gate on mpk) (default: all)"),
    ("--workers", validate.number_list, "LIST", "sched: worker counts (default 1,2,4,16,64,256)"),
    ("--slice", validate.number_list, "LIST", "sched: slice lengths in us (default 10,100)"),
    ("--mode", validate.name_list, "LIST", "sched: yield, preempt (default: both)"),
    ("--cpus", validate.name_list, "LIST", "sched: one, all (default: both)"),
    ("--monitor", validate.name_list, "LIST",
     "lwc-serve: reference monitors none, inline, procsep, lwc (lwC's Apache): HTTP, one "
     "shared server, each GET's openat and pread64 checked by the monitor; only these points "
     "run (docs/serve.md)"),
    ("--doc-bytes", validate.number_list, "LIST",
     "lwc-serve: HTTP document sizes, 45 and 900 (lwC's nginx); only the HTTP case runs, with "
     "--monitor each monitor at each size (default 45)"),
    ("--tls", None, None,
     "lwc-serve: lwC's isolated OpenSSL key: 10,000 full TLS handshakes (--quick: 1,000) "
     "against isob serve --tls with the key in the server and only in an lwc context that "
     "signs, beside lwC's 99.7 s and 100.4 s (docs/serve.md)"),
    ("--pid", validate.number_list, "PID",
     "inspect: the process whose executable mappings are scanned (default: an isob process)"),
    ("--reading", validate.name_list, "LIST",
     "kv: per-request (two counter readings around every get; the default) and/or per-pass "
     "(two around a whole pass of gets, divided by its gets: Konrad 2023 section 3.3, so the "
     "reading's own cost is shared out as in his figures); both: a get phase each"),
)


def _add_bench_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "options of some benchmarks only",
        "Checked against what `isob list --json` lists for each benchmark asked for, and by "
        "`isob BENCH --check`,\nbefore anything runs; an option none of them takes is refused.")
    for flag, kind, metavar, text in BENCH_OPTIONS:
        if kind is None:  # a flag: the benchmark gets it as the value "on"
            g.add_argument(flag, action="store_const", const=("on",), help=text,
                           dest="bench_" + flag[2:].replace("-", "_"))
            continue
        g.add_argument(flag, type=kind, metavar=metavar, help=text,
                       dest="bench_" + flag[2:].replace("-", "_"))


def _bench_option_values(args: argparse.Namespace, catalog: Catalog, benches: Sequence[str]
                         ) -> tuple[dict[str, tuple[str, ...]], str | None]:
    """The options of BENCH_OPTIONS given, with oslat's confinements resolved
    (validate.confinements), and the line that names them when they were not
    asked for."""
    given = {flag: getattr(args, "bench_" + flag[2:].replace("-", "_"))
             for flag, *_ in BENCH_OPTIONS}
    given = {k: v for k, v in given.items() if v is not None}
    asked = given.get("--confine")
    note = None
    if asked is not None or any(b.takes_confine for b in map(catalog.benchmark, benches)
                                if b is not None):
        items, how = validate.confinements(asked, catalog)
        given["--confine"] = tuple(items)
        if asked is None:
            missing = [f"{c.name} ({c.reason or 'not available'})"
                       for c in catalog.confinements if not c.available]
            note = (f"oslat: confinements {', '.join(items)} ({how})"
                    + (f"; not available here: {'; '.join(missing)}" if missing else ""))
    return given, note


def _add_show(sub) -> None:
    p = sub.add_parser(
        "show", formatter_class=Formatter, help="print a stored run",
        description="Print a stored run: the same table `isobench run` prints.",
        epilog="examples:\n  isobench show            the latest run\n  isobench show 3\n"
               "  isobench show --json --db other.sqlite\n  isobench show newest   a run still "
               "running, too")
    p.add_argument("run", nargs="?", metavar="RUN", help=RUN_SPEC)
    _add_wide(p)
    _add_json(p, "the run")
    _add_db(p)
    p.set_defaults(func=cmd_show)


def _add_runs(sub) -> None:
    p = sub.add_parser(
        "runs", formatter_class=Formatter, help="list the stored runs",
        description="List the runs in the store, one line each: id, when it started, its "
                    "status, the\nhost it ran on, how many results it has (failed and "
                    "skipped ones counted apart)\nand the command that made it.  Any id "
                    "shown can be given to show, report,\ncheck, compare and export.",
        epilog="examples:\n  isobench runs\n  isobench runs --json | jq '.runs[-1].run_id'\n"
               "  isobench runs --db other.sqlite")
    _add_json(p, "the runs")
    _add_db(p)
    p.set_defaults(func=cmd_runs)


def _add_export(sub) -> None:
    p = sub.add_parser(
        "export", formatter_class=Formatter, help="write a stored run as CSV or JSON",
        description="Write a stored run as CSV (one row per result: params, summary "
                    "statistics, host,\nCPU, kernel, commit) or JSON (everything: "
                    "environment, jobs, results with their\nheaders; the raw samples with "
                    "--samples).  A FILE ending in .gz is written\ngzip-compressed, one "
                    "ending in .zst zstd-compressed (where Python has a zstd\nmodule); "
                    "`isobench import` reads all three.  On a terminal a bar shows how far\n"
                    "it is.",
        epilog="examples:\n  isobench export latest --format csv -o latest.csv\n"
               "  isobench export 3 --format json | jq .environment\n"
               "  isobench export 3 --format json --samples -o run3.json.gz")
    p.add_argument("run", metavar="RUN", help=RUN_SPEC)
    p.add_argument("--format", required=True, choices=export.FORMATS, help="csv or json")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write to FILE, compressed where it ends in .gz or .zst (default: "
                        "stdout)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--samples", action="store_true",
                   help="JSON: every raw sample too (millions in a full run; what `import` "
                        "needs to recompute statistics; CSV never has them)")
    g.add_argument("--no-samples", action="store_true",
                   help="JSON: without the raw samples (the default; kept for scripts that "
                        "say so)")
    _add_db(p)
    p.set_defaults(func=cmd_export)


def _add_import(sub) -> None:
    p = sub.add_parser(
        "import", formatter_class=Formatter, help="read an export or another store into the store",
        description="Read runs into the store: a JSON export (`isobench export RUN --format "
                    "json`, of\nthis or an older isobench) or another store (every run, or "
                    "those --run names).\nThe file is checked through before anything is "
                    "stored; an export of an unknown\nschema_version is refused.  A run already "
                    "in the store (the same uid) is\nskipped, so importing twice changes "
                    "nothing.  Each imported run records where\nit came from (`show --json`: "
                    "origin).\nA gzip- or zstd-compressed export is read as it is; on a "
                    "terminal a bar shows how\nfar the import is.",
        epilog="examples:\n  isobench import run3.json\n  isobench import run3.json.gz\n"
               "  isobench import laptop.sqlite --run 4 --db all.sqlite\n\n"
               "exit status: 0 imported (or already there), 1 the source store is damaged, "
               "2 bad usage\nor a file that is not an export")
    p.add_argument("file", metavar="FILE", help="a JSON export or an isobench store")
    p.add_argument("--run", dest="runs", action="append", type=positive_int, metavar="ID",
                   help="from a store: import only this run (repeatable; default: all)")
    _add_json(p, "what was imported")
    _add_db(p)
    p.set_defaults(func=cmd_import)


# ---- commands ----

def db_path(args: argparse.Namespace) -> Path:
    text = args.db or os.environ.get(ENV_DB) or str(DEFAULT_DB)
    return Path(os.path.abspath(text))


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
        _print_json({"mechanisms": mechs, "benchmarks": benches, "isolation_context": context})
    else:
        print(table.list_report(mechs, benches, wide=args.wide))
        print("\n" + matrix.format_matrix(mechs, context, brief=not args.wide, listing=True))
        if inspected:
            print("\n".join(inspected if args.wide else
                            [table.wrap(line, indent="    ") for line in inspected]))
    return EXIT_FAILED if any(m["isolation"] == "failed" for m in mechs) else EXIT_OK


def _choose(kind: str, asked: Sequence[str], known: Sequence[str]) -> list[str]:
    unknown = [a for a in asked if a not in known]
    if unknown:
        raise UsageError(f"unknown {kind} {unknown[0]!r} (known: {', '.join(known) or 'none'}; "
                         "see `isobench list`)")
    return list(dict.fromkeys(asked))


def _selection(args: argparse.Namespace, catalog: Catalog) -> tuple[list[str], list[str]]:
    benches = _choose("benchmark", args.benchmarks or runner.DEFAULT_SUITE,
                      [b.name for b in catalog.benchmarks])
    asked = validate.mechanisms(args.mechanisms)
    all_mechs = [m.name for m in catalog.mechanisms]
    mechs = _choose("mechanism", asked, all_mechs) if asked else all_mechs
    return benches, mechs


def _kvserver_mechanisms(args: argparse.Namespace, catalog: Catalog) -> list[str]:
    """kv-server's servers: memcached, then the -m mechanisms, else its default set
    (those of it this driver has; an unavailable one gives a skipped result)."""
    asked = validate.mechanisms(args.mechanisms)
    known = [m.name for m in catalog.mechanisms]
    mechs = (_choose("mechanism", asked, known) if asked else
             [m for m in kvserver.DEFAULT_MECHANISMS if m in known])
    return [kvserver.REFERENCE, *mechs]


def _add_report(sub) -> None:
    p = sub.add_parser(
        "report", formatter_class=Formatter, help="write an HTML report, plots and a summary",
        description="Write a report of a stored run into DIR: index.html (self-contained: the "
                    "plots are\nembedded), summary.md (platform, findings, switch and "
                    "key-value tables), LaTeX\ntables (platform.tex, switch.tex, kv.tex: "
                    "booktabs, each compiles alone), results.csv\n(one row per "
                    "configuration: one column per parameter, the headline, its\ninterval, "
                    "the ratio to direct), stats.json (every number) and each plot as PNG,\n"
                    "SVG and PDF at 7 in (NAME-2col.pdf) and 3.5 in (NAME-1col.pdf), with its "
                    "caption\nin NAME.caption.txt.\n\nThe soundness findings are those of "
                    "`isobench check`.  Published figures are shown\nbeside local numbers, "
                    "marked as published, never mixed into local statistics;\nonly those with "
                    "a local counterpart unless --all-published.  A plot whose data\nthe run "
                    "lacks (no kv results, no kv-server results) is left out with a note."
                    "\n\nDIR belongs to the report: .isobench-report.json lists the files "
                    "it wrote and\nthe run; the next report into DIR removes those it does "
                    "not rewrite.  Other\nfiles are left alone; one whose name the report "
                    "would take is refused\n(--force overwrites it).",
        epilog="examples:\n  isobench report -o report/              the latest run\n"
               "  isobench report 3 -o paper/ --format tex,csv\n"
               "  isobench report 3 -o /tmp/run3 --json   what was written, as JSON")
    p.add_argument("run", nargs="?", metavar="RUN", help=RUN_SPEC)
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="folder to write into (created if missing)")
    p.add_argument("--format", dest="formats", type=report_formats, metavar="LIST",
                   default=report.FORMATS,
                   help=f"comma-separated: {', '.join(report.FORMATS)} (default: all); the "
                        "plots and stats.json are always written")
    p.add_argument("--all-published", action="store_true",
                   help="show every published figure, also those without a local "
                        "counterpart in this run")
    p.add_argument("--force", action="store_true",
                   help="overwrite files in DIR that no isobench report recorded writing "
                        "(refused by default, with their names)")
    _add_json(p, "what was written and the findings")
    _add_db(p)
    p.set_defaults(func=cmd_report)


def _add_plot(sub) -> None:
    p = sub.add_parser(
        "plot", formatter_class=Formatter, help="the raw samples of one configuration",
        description="Draw every stored per-call sample of one configuration of a run: the "
                    "ECDF of each\nrepetition (a fresh process) and of all pooled, and a "
                    "histogram, with the\nheadline, its 95% interval and the samples' p5..p95 "
                    "marked.  CONFIG is the\nbenchmark, the mechanism and params as k=v, as "
                    "the report's full results\nname them; enough of it to pick one "
                    "configuration.  The format follows FILE's\nsuffix: .png, .svg or .pdf.",
        epilog="examples:\n"
               "  isobench plot --config 'switch thread payload=0 placement=same-cpu' -o t.svg\n"
               "  isobench plot 3 --config 'kv wasm data_bytes=1048576' -o wasm-1m.pdf")
    p.add_argument("run", nargs="?", metavar="RUN", help=RUN_SPEC)
    p.add_argument("--config", required=True, metavar="CONFIG",
                   help="benchmark mechanism k=v ...: the configuration to draw")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the file to write: .png, .svg or .pdf")
    _add_db(p)
    p.set_defaults(func=cmd_plot)


def _add_check(sub) -> None:
    ids = "\n".join(f"  {c.severity:8} {c.id}" for c in checks.CHECKS)
    p = sub.add_parser(
        "check", formatter_class=Formatter, help="soundness checks of a stored run",
        description="Check a stored run for what makes its numbers wrong, missing or "
                    "qualified: failed\nor skipped results, an interrupted run, no "
                    "baseline, one process only, a\nbatched estimate or a median that "
                    "cannot be trusted, an unpinned or untuned\nmachine, counters that "
                    "missed samples or the other process, too much variation.\nEach "
                    "finding has a severity (error: numbers wrong or missing; warning: they "
                    "hold\nwith a caveat; info), says what to do next and points into "
                    f"{checks.DOC};\nwhere it applies, it names the flaw of van der Kouwe "
                    "et al., SoK: Benchmarking\nFlaws in Systems Security (EuroS&P 2019, "
                    f"Table I).\n\nchecks:\n{ids}",
        epilog="exit status: 0 no errors (warnings are printed), 3 errors (--strict: or "
               "warnings),\n1 could not check, 2 bad usage\n\nexamples:\n"
               "  isobench check && isobench report -o report/\n"
               "  isobench check 3 --json | jq '.findings[].id'\n  isobench check --strict")
    p.add_argument("run", nargs="?", metavar="RUN", help=RUN_SPEC)
    p.add_argument("--strict", action="store_true",
                   help="warnings count as errors for the exit status")
    _add_json(p, "the findings")
    _add_db(p)
    p.set_defaults(func=cmd_check)


def noise_band(text: str) -> float:
    """--noise-band PCT: a percentage in [0, 100), returned as a fraction."""
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not text.isascii() or not 0.0 <= v < 100.0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a percentage from 0 to below 100")
    return v / 100.0


def _add_compare(sub) -> None:
    p = sub.add_parser(
        "compare", formatter_class=Formatter, help="compare two runs, or two machines",
        description="Compare two stored runs result by result (same benchmark, mechanism and "
                    "params).\nEach run is normalized to its own `direct` baseline, so runs "
                    "from different\nmachines compare by what isolation costs on each:\n\n"
                    "  B/A = (value_B / direct_B) / (value_A / direct_A)\n\n"
                    "Values are the runs' headlines (docs/methodology.md), from the same "
                    "estimator on\nboth sides; switch results use direct's 'entry' variant "
                    "at the same payload;\ncross-cpu results are normalized by direct's "
                    "same-cpu result.  Each ratio has a\n95% interval and a p from one "
                    "Welch t on the logs of the repetitions.  A row\nsays 'slower' or "
                    f"'faster' only with >= {compare.MIN_REPS_FOR_VERDICT} repetitions a side\n"
                    "(else 'inconclusive'), a Holm-adjusted p < 0.05 over the rows, and B/A "
                    "outside\nthe noise band.  Results without a baseline (direct itself, "
                    "pingpong) compare in\nabsolute terms within one machine; across machines "
                    "only with --absolute.\nAverages are geometric means with their "
                    "interval within one placement, payload\nand phase.",
        epilog="examples:\n  isobench compare 3 4\n"
               "  isobench compare 3 4 --noise-band 5\n"
               "  isobench compare 1 1 --db laptop.sqlite --db-b server.sqlite\n"
               "  isobench compare 3 4 --json\n\n"
               "exit status: 0 compared, 1 nothing in common, 2 bad usage")
    p.add_argument("run_a", metavar="RUN_A", help="run id (or 'latest') in --db")
    p.add_argument("run_b", metavar="RUN_B", help="run id (or 'latest') in --db-b, else --db")
    p.add_argument("--db-b", metavar="PATH", help="the store RUN_B is in (default: --db's)")
    p.add_argument("--absolute", action="store_true",
                   help="also compare results without a baseline in absolute terms when the "
                        "runs come from different machines (printed with a warning)")
    p.add_argument("--noise-band", metavar="PCT", type=noise_band,
                   default=compare.NOISE_BAND,
                   help="a significant B/A within +-PCT%% of 1 reads 'within noise band', not "
                        f"'slower' or 'faster' (default: {100 * compare.NOISE_BAND:g})")
    _add_json(p, "the comparison")
    _add_db(p)
    p.set_defaults(func=cmd_compare)


def _add_system(sub) -> None:
    p = sub.add_parser(
        "system", formatter_class=Formatter, help="show, check, tune or reset the machine",
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
    _add_json(p, "the settings")
    _add_db(p)
    p.set_defaults(func=cmd_system)


def _add_reference(sub) -> None:
    p = sub.add_parser(
        "reference", formatter_class=Formatter, help="published figures, with their sources",
        description="List the published figures isobench shows beside local numbers, one "
                    "block per source\n(its citation, DOI or URL, hardware): each figure's "
                    "value in the source's own\ndigits (3.80, not 3.8) with its spread, the "
                    "unit, what one value is of (per:\none-way, round trip, per call, per "
                    "page), and under it what was measured, how,\nand the table or section it "
                    "comes from; a figure worked out from printed ones\nsays how "
                    "([derived: ...]).  They come from one reviewed file\n"
                    "(isobench/data/reference.csv) and are never mixed into local statistics.",
        epilog="examples:\n  isobench reference\n  isobench reference --json | jq '.references[0]'")
    _add_json(p, "the figures")
    p.set_defaults(func=cmd_reference)


def _run_options(args: argparse.Namespace) -> runner.Options:
    timeout = args.timeout or (runner.QUICK_TIMEOUT if args.quick else runner.DEFAULT_TIMEOUT)
    return runner.Options(quick=args.quick, n=args.n, placement=args.placement, timeout=timeout,
                          seconds=args.seconds, sizes=args.sizes,
                          timeout_given=args.timeout is not None, counter=args.counter,
                          scope=args.scope)


def _with_bench_args(opts: runner.Options, bench_args) -> runner.Options:
    return dataclasses.replace(opts, bench_args=bench_args)


# run --target-ci: repetitions per (benchmark, mechanism) at most, unless
# --max-repeat says otherwise.  Kalibera and Jones's examples reach a few
# percent within 10 to 30 repetitions of a steady benchmark.
ADAPTIVE_MAX_REPEAT = 20


def _adaptive(args: argparse.Namespace, repeat: int) -> int | None:
    """The cap of --target-ci's repetitions, or None without --target-ci."""
    if args.target_ci is None:
        if args.max_repeat is not None:
            raise UsageError("--max-repeat caps --target-ci's repetitions: give --target-ci "
                             "too, or --repeat N for a fixed number")
        return None
    cap = args.max_repeat if args.max_repeat is not None else max(ADAPTIVE_MAX_REPEAT, repeat)
    if cap < repeat:
        raise UsageError(f"--max-repeat {cap} is below the {repeat} repetitions the run "
                         "starts with: raise it, or lower --repeat")
    return cap


class _TargetCI:
    """run --target-ci: after each round, which pairs get one more repetition."""

    def __init__(self, store: Store, run_id_of: Callable[[], int], jobs: runner.Plan,
                 pct: float, cap: int):
        self.store, self.run_id_of, self.jobs = store, run_id_of, jobs
        self.pct, self.cap = pct, cap
        self.round = 0
        self.outcome: dict = {"target_ci_pct": pct, "max_repeat": cap}

    def text(self) -> str:
        """What the run's end says of the target."""
        o = self.outcome
        rounds = f"after {o.get('rounds', 0)} added round{'s' if o.get('rounds') != 1 else ''}"
        if o.get("reached"):
            return f"--target-ci {self.pct:g}%: every headline is within it ({rounds})"
        missed = o.get("not_reached", [])
        lines = [f"--target-ci {self.pct:g}%: {len(missed)} headline"
                 f"{'s' if len(missed) != 1 else ''} not within it ({rounds}; at most "
                 f"{self.cap} repetitions each, --max-repeat):"]
        lines += [f"  {t}" for t in missed[:10]]
        if len(missed) > 10:
            lines.append(f"  ... and {len(missed) - 10} more (`isobench show --json`: "
                         "options.target_ci)")
        if o.get("not_extended_failed"):
            lines.append("  not repeated, a result failed: "
                         + ", ".join(o["not_extended_failed"]))
        return "\n".join(lines)

    def __call__(self):
        data = runs.load_run(self.store, self.run_id_of())
        wide, failed = precision.assess(data, self.pct / 100)
        done: dict[tuple[str, str], int] = {}
        for r in data.results:
            key = (r["benchmark"], r["mechanism"])
            done[key] = max(done.get(key, 0), r.get("repetition") or 0)
        want = {(w.benchmark, w.mechanism) for w in wide} - failed
        capped = sorted({w.label for w in wide
                         if done.get((w.benchmark, w.mechanism), 0) >= self.cap})
        pairs = {p for p in want if done.get(p, 0) < self.cap}
        self.outcome.update({"rounds": self.round, "reached": not wide,
                             "not_reached": [w.text() for w in wide],
                             "capped": capped,
                             "not_extended_failed": sorted(f"{b} -m {m}" for b, m in
                                                           {(w.benchmark, w.mechanism)
                                                            for w in wide} & failed)})
        if not pairs:
            return None
        self.round += 1
        extra = self.jobs.more(pairs, done, self.round)
        worst = max(wide, key=lambda w: float("inf") if w.width is None else w.width)
        return extra, (f"--target-ci {self.pct:g}%: {len(wide)} headline"
                       f"{'s are' if len(wide) != 1 else ' is'} wider (widest: {worst.text()})")


def _scoped_options(args: argparse.Namespace) -> list[str]:
    """The options given that only some benchmarks read (runner.reads)."""
    given = {"-m": args.mechanisms, "--sizes": args.sizes, "--placement": args.placement,
             "--seconds": args.seconds, "--n": args.n, "--counter": args.counter,
             "--scope": args.scope}
    return [k for k, v in given.items() if v not in (None, [])]


def _with_baseline(args: argparse.Namespace, catalog: Catalog, benches: Sequence[str],
                   mechs: list[str]) -> tuple[list[str], str | None]:
    """The mechanisms of a run with -m, the baseline first unless it is among
    them or --no-baseline: every ratio is to it, measured in the same run.
    Also the line that says it was added."""
    if not args.mechanisms:
        if args.no_baseline:
            raise UsageError(f"--no-baseline leaves {runs.BASELINE} out of a run with -m; "
                             f"without -m every mechanism runs, {runs.BASELINE} among them")
        return mechs, None
    per_mechanism = [b for b in benches if b != kvserver.BENCHMARK
                     and getattr(catalog.benchmark(b), "needs_mechanism", False)]
    if (args.no_baseline or runs.BASELINE in mechs or not per_mechanism
            or catalog.mechanism(runs.BASELINE) is None):
        return mechs, None
    return [runs.BASELINE, *mechs], (f"{runs.BASELINE} added to -m: the baseline of every "
                                     "ratio (--no-baseline leaves it out)")


def cmd_run(args: argparse.Namespace) -> int:
    driver = Driver(find_isob())
    catalog = driver.catalog()
    limits = driver.limits()
    benches, mechs = _selection(args, catalog)
    validate.scoped(catalog, benches, _scoped_options(args), runner.reads)
    mechs, baseline_note = _with_baseline(args, catalog, benches, mechs)
    limits.count("n", args.n)
    limits.sizes(args.sizes)
    given, note = _bench_option_values(args, catalog, benches)
    own = validate.bench_options(catalog, benches, given)
    bench_args, splits, orders = runner.pass_through(own)
    opts = _with_bench_args(_run_options(args), bench_args)
    runner.check_options(driver, catalog, benches, mechs, opts, splits, orders)
    if not args.quiet:
        for line in (baseline_note, note):
            if line:
                print(table.wrap(line), file=sys.stderr)
    path = db_path(args)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**32)
    repeat = args.repeat or (runner.QUICK_REPEAT if args.quick else runner.DEFAULT_REPEAT)
    own_repeat = ({} if args.repeat or args.quick else
                  {b: n for b, n in runner.BENCHMARK_REPEAT.items() if b in benches})
    cap = _adaptive(args, max([repeat, *own_repeat.values()]))
    per_bench = ({kvserver.BENCHMARK: _kvserver_mechanisms(args, catalog)}
                 if kvserver.BENCHMARK in benches else None)
    jobs = runner.plan(catalog, benches, mechs, repeat=repeat, seed=seed,
                       per_benchmark=per_bench, repeat_by_benchmark=own_repeat,
                       splits=splits, orders=orders)
    with lifecycle.stop_signals() as guard, Store.open(path, create=True) as store:
        env = sysinfo.collect(driver_version=driver.version(), repo=repo_root())
        # The checks need to know which mechanisms run a second context.
        env["mechanism_props"] = {m.name: list(m.props) for m in catalog.mechanisms}
        docs: list[dict] = []

        target = (_TargetCI(store, lambda: run_id, jobs, args.target_ci, cap)
                  if cap is not None else None)

        def finish(failed: bool) -> None:
            if target is not None:
                store.set_options(run_id, {**(store.run(run_id).get("options") or {}),
                                           "target_ci": target.outcome})
            store.finish_run(run_id, "failed" if failed else "ok")
            doc = summary.build(runs.load_run(store, run_id))
            store.set_aggregates(run_id, doc["aggregates"])
            docs.append(doc)

        run_id = None
        try:
            # Who can reach each measured mechanism's heap, measured now, for
            # show and report.
            if any(b.needs_mechanism for b in map(catalog.benchmark, benches)):
                env["isolation"] = attackers.for_environment(*isolation_entries(
                    driver, [catalog.mechanism(m) for m in mechs], ISOLATION_TIMEOUT))
            estimate = progress.Estimator(jobs.counts(), store.job_seconds(args.quick),
                                          quick=args.quick)
            run_id = store.begin_run(args.argv, env)
            store.set_options(run_id, {"repeat": repeat, "seed": seed,
                                       **({"repeat_by_benchmark": own_repeat} if own_repeat else {}),
                                       **({"benchmark_options": {b: o for b, o in own.items()
                                                                 if o}}
                                          if any(own.values()) else {}),
                                       **{k: v for k, v in (("counter", args.counter),
                                                            ("scope", args.scope)) if v}})
            note = (f"then more repetitions where a headline's 95% interval is wider than "
                    f"+-{args.target_ci:g}% (--target-ci), up to {cap} per (benchmark, "
                    "mechanism): not in this estimate" if cap is not None else None)
            with progress.make(len(jobs), estimate, quiet=args.quiet, note=note) as shown:
                failed = lifecycle.record(store, driver, run_id, env, jobs, opts, shown, guard,
                                          finish, more=target)
                try:
                    shown.finish()
                except progress.OutputClosed:
                    pass  # the run has ended and is stored: only its last line is lost
        except (lifecycle.Interrupted, progress.OutputClosed) as e:
            # Before record() took over (a signal, or the progress's reader
            # gone before the plan line): nothing ran yet.
            guard.closing = True
            sig = e if isinstance(e, lifecycle.Interrupted) else lifecycle.Interrupted(
                signal.SIGPIPE)
            if run_id is None:
                raise sig from None
            store.finish_run(run_id, "interrupted", end_reason=sig.name)
            raise lifecycle.RunInterrupted(run_id, sig, store.path) from None
        _print_run(store, run_id, args.json, docs[0] if docs else None, wide=args.wide)
    if target is not None and not args.quiet:
        print(target.text(), file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    with Store.open(db_path(args), create=False) as store:
        run_id = store.resolve_run(args.run)
        _print_run(store, run_id, args.json, wide=args.wide)
    return EXIT_OK


def cmd_runs(args: argparse.Namespace) -> int:
    with Store.open(db_path(args), create=False) as store:
        listed = store.run_list()
        path = str(store.path)
    if args.json:
        _print_json({"db": path, "runs": listed})
    else:
        print(table.terminal(table.runs_report(listed, path)))
    return EXIT_OK


class _Bar:
    """How far an export or import is, as a bar on stderr where stderr is a
    terminal (rich; gone when it ends), else nothing.  Called with (stage,
    done, total)."""

    def __init__(self, what: str):
        self.what = what
        self.progress = None
        self.tasks: dict[str, int] = {}

    def __enter__(self) -> "_Bar":
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn
            self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                     TaskProgressColumn(), transient=True,
                                     console=Console(file=sys.stderr, highlight=False))
            self.progress.start()
        return self

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.progress is None:
            return
        if stage not in self.tasks:
            for task in self.tasks.values():  # the stages before are done
                self.progress.update(task, completed=self.progress.tasks[task].total)
            self.tasks[stage] = self.progress.add_task(f"{self.what}: {stage}", total=total)
        self.progress.update(self.tasks[stage], completed=done, total=total)

    def __exit__(self, *exc) -> None:
        if self.progress is not None:
            self.progress.stop()


def cmd_export(args: argparse.Namespace) -> int:
    if args.output == "":
        raise UsageError("-o '' names no file (leave -o out to write to stdout)")
    target = Path(args.output) if args.output else None
    if target is not None:
        interchange.compression_of(target.name)  # .zst without zstd: refused before any work
    with Store.open(db_path(args), create=False) as store, _Bar("export") as bar:
        run_id = store.resolve_run(args.run)

        def write(out) -> None:
            export.write(store, run_id, args.format, out, samples=args.samples,
                         progress=lambda done, total: bar("results", done, total))

        if target is None:
            write(sys.stdout.buffer)
            sys.stdout.buffer.flush()
            return EXIT_OK
        # Written beside FILE and renamed when whole: a failed export leaves
        # no half file under the name asked for.
        part = target.with_name(target.name + ".part")
        try:
            with interchange.open_for_writing(part, target.name) as out:
                write(out)
            os.replace(part, target)
        except OSError as e:
            part.unlink(missing_ok=True)
            raise UsageError(f"cannot write {args.output}: {e.strerror or e}") from None
        except BaseException:
            part.unlink(missing_ok=True)
            raise
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    source = Path(args.file)
    with Store.open(db_path(args), create=True) as store, _Bar("import") as bar:
        if source.exists() and source.resolve() == store.path.resolve():
            raise UsageError(f"{source} is the store itself")
        done = interchange.import_into(store, source, args.runs, progress=bar)
    if args.json:
        _print_json({"db": str(store.path), "source": str(source), "imported": done})
        return EXIT_OK
    for d in done:
        what = f"run {d['source_run_id']} of {source}" if d["source_run_id"] else str(source)
        if d["skipped"]:
            print(table.terminal(f"{what} is already in {store.path} as run {d['run_id']} "
                                 "(same uid): skipped"))
        else:
            print(table.terminal(f"imported {what} as run {d['run_id']} into {store.path}"))
    if not done:
        print(table.terminal(f"{source} holds no runs: nothing imported"))
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    if not args.output:
        raise UsageError("-o '' names no folder: give the folder to write the report into")
    with Store.open(db_path(args), create=False) as store:
        run_id = store.resolve_run(args.run)
        report.prepare(Path(args.output))  # an unusable folder fails before any work
        data = runs.load_run(store, run_id)
        doc = summary.build(data)
        try:
            doc = report.write(doc, Path(args.output), args.formats, args.all_published,
                               args.force, samples=plots.config_samples(data))
        except OSError as e:
            # A plot or page that cannot be saved (a full disk, a folder
            # removed meanwhile): the report is incomplete, say where.
            where = f" ({e.filename})" if getattr(e, "filename", None) else ""
            raise OutputError(f"cannot write the report into {args.output}{where}: "
                              f"{e.strerror or e}") from None
    if args.json:
        _print_json(doc)
    else:
        n = len(doc["findings"])
        print(table.terminal(f"report of run {run_id} written to {doc['dir']}: "
                             f"{', '.join(doc['files'])}"))
        if doc["removed"]:
            print(table.terminal(f"removed the previous report's {', '.join(doc['removed'])}"))
        for note in doc["omitted"].values():
            print(table.terminal(f"note: {note}"))
        print(table.terminal(checks.one_line(doc["findings"], run_id)))
    return EXIT_OK


PLOT_FORMATS = ("png", "svg", "pdf")


def cmd_plot(args: argparse.Namespace) -> int:
    out = Path(args.output)
    ext = out.suffix.lower().lstrip(".")
    if ext not in PLOT_FORMATS or not out.stem:
        raise UsageError(f"-o {args.output!r}: name a file ending in .png, .svg or .pdf (the "
                         "format follows the suffix)")
    if not out.parent.is_dir():
        raise UsageError(f"-o {args.output!r}: no folder {str(out.parent)!r} to write into")
    with Store.open(db_path(args), create=False) as store:
        run_id = store.resolve_run(args.run)
        data = runs.load_run(store, run_id)
    doc = summary.build(data)
    c = plots.find_config(doc, args.config)
    plot = plots.samples_plot(c, plots.config_samples(data)[tuple(c["key"])])
    if plot.figure is None:
        raise UsageError(f"run {run_id}, {plots.config_text(c)}: {plot.note}")
    plot.name = out.stem
    try:
        plots.save(plot, out.parent, ((ext, ""),))
    except OSError as e:
        raise OutputError(f"cannot write {args.output}: {e.strerror or e}") from None
    print(f"{out}: samples of run {run_id}, {plots.config_text(c)}")
    print(table.wrap(plot.caption))
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    with Store.open(db_path(args), create=False) as store:
        run_id = store.resolve_run(args.run)
        # scan: SQLite's integrity check and the decode of every row, so that
        # damage anywhere in the store is a finding (store-damaged).
        doc = summary.build(runs.load_run(store, run_id, scan=True))
    findings = doc["findings"]
    status = checks.exit_status(findings, strict=args.strict)
    if args.json:
        _print_json({"run_id": run_id, "db": doc["run"]["db"], "strict": args.strict,
                     "counts": checks.counts(findings), "exit_status": status,
                     "findings": findings})
    else:
        print(table.terminal(f"run {run_id} in {doc['run']['db']}"))
        print(table.terminal(checks.render(findings)))
    return status


def _summary(path: Path, spec: str) -> dict:
    with Store.open(path, create=False) as store:
        return summary.build(runs.load_run(store, store.resolve_run(spec)))


def cmd_compare(args: argparse.Namespace) -> int:
    path_a = db_path(args)
    path_b = Path(os.path.abspath(args.db_b)) if args.db_b else path_a
    a = _summary(path_a, args.run_a)
    b = _summary(path_b, args.run_b)
    result = compare.compare(a, b, absolute=args.absolute, noise_band=args.noise_band)
    doc = compare.document(a, b, result)
    if args.json:
        _print_json(doc)
    else:
        print(table.terminal(render_compare.render(result["rows"], doc)))
    if not result["rows"]:
        _err("the two runs have no results in common (same benchmark, mechanism and params)")
        return EXIT_FAILED
    return EXIT_OK


def cmd_system(args: argparse.Namespace) -> int:
    root = system.sysroot()
    state = Path(args.state) if args.state else system.default_state(root)
    if args.action == "check":
        findings = [f.as_dict() for f in checks.machine_findings(sysinfo.collect(root))]
        if args.json:
            _print_json({"findings": findings})
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
        _print_json({"action": args.action, "root": str(root), "state": str(state),
                     "note": note, "settings": [o.as_dict() for o in outcomes]})
    else:
        print(system.render(outcomes, note))
    return EXIT_FAILED if any(o.status in system.FAILURES for o in outcomes) else EXIT_OK


def cmd_reference(args: argparse.Namespace) -> int:
    refs = reference.load()
    if args.json:
        _print_json({"references": [r.as_dict() for r in refs]})
    else:
        print(render_reference.render(refs))
    return EXIT_OK


# ---- campaign: many hosts through Ansible, one store (measure/campaign.py) ----

CAMPAIGN_SPEC = "campaign id, or 'latest' (the newest campaign the store has runs of)"


def _workdir_root(text: str) -> str:
    parts = text.rstrip("/").split("/")
    if not text.startswith("/") or len(parts) < 2 or any(p in ("", ".", "..") for p in parts[1:]) \
            or not validate.REMOTE_PATH.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not an absolute folder below / (no '.', "
                                         "'..' or spaces)")
    return text.rstrip("/")


def _add_campaign(sub) -> None:
    p = sub.add_parser(
        "campaign", formatter_class=Formatter, help="run benchmarks on many hosts (Ansible), "
                                                    "or on a Slurm cluster",
        description="Run the same benchmarks on many hosts and merge their results into one "
                    "store,\nthrough Ansible (ansible-core: the campaign extra) or as a Slurm "
                    "job array.\nEach host's run is imported with its host name and the "
                    "campaign id; `campaign\nshow` sets the hosts side by side, each normalized "
                    "to its own direct.\n\n"
                    "  init      write an example inventory\n"
                    "  run       run the campaign on every host of an inventory (resumes)\n"
                    "  show      one table mechanism x host per population\n"
                    "  report    the same as HTML and Markdown with heat maps\n"
                    "  import    exports in a folder (one per host) into the store\n"
                    "  slurm     write an sbatch script: one array task per node type\n\n"
                    "docs/campaigns.md walks from an inventory to the merged report.",
        epilog="examples:\n  isobench campaign init lab.ini\n"
               "  isobench campaign run lab.ini switch -m direct -m mpk --quick\n"
               "  isobench campaign show latest\n"
               "  isobench campaign report latest -o campaign-report/\n\n"
               "exit status: 0 every host done, 1 some host failed (each is named with its "
               "reason),\n2 bad usage (an inventory that does not parse, a host key that "
               "does not match,\nAnsible missing), 128+N stopped by signal N")
    csub = p.add_subparsers(dest="campaign_command", metavar="ACTION", parser_class=Parser)
    csub.required = True

    q = csub.add_parser("init", formatter_class=Formatter, help="write an example inventory",
                        description="Write an example Ansible inventory with the per-host "
                                    "variables isobench reads\n(isobench_workdir, isobench_cpus, "
                                    "isobench_tune, isobench_prebuilt).  A .yml or\n.yaml name "
                                    "gets YAML, any other INI.  An existing file is never "
                                    "overwritten.")
    q.add_argument("file", nargs="?", default="inventory.ini", metavar="FILE",
                   help="where to write it (default: inventory.ini)")
    q.set_defaults(func=cmd_campaign_init)

    q = csub.add_parser(
        "run", formatter_class=Formatter, help="run the campaign on every host of INVENTORY",
        description="Run `isobench run BENCH... -m MECH...` on every host of an Ansible "
                    "inventory:\ncopy the source, `make build` there, measure (in parallel "
                    "across hosts, one\nbenchmark at a time on each), export, fetch, and "
                    "import every host's run into\nthe store tagged with the host and the "
                    "campaign id.  A host that fails is named\nwith its reason and the others "
                    "go on.  Running the same command again resumes\nthe newest unfinished "
                    "campaign of that inventory and selection (only the hosts\nnot done); "
                    "--new begins another.",
        epilog="examples:\n  isobench campaign run lab.ini switch -m direct -m mpk --quick\n"
               "  isobench campaign run lab.ini --id spring-2026 kv --repeat 5")
    q.add_argument("inventory", metavar="INVENTORY", help="an Ansible inventory (INI or YAML)")
    q.add_argument("benchmarks", nargs="*", metavar="BENCH",
                   help=f"benchmarks (default: {' '.join(runner.DEFAULT_SUITE)})")
    q.add_argument("-m", "--mechanism", dest="mechanisms", action="append", default=[],
                   metavar="MECH", help="a mechanism (repeat, or comma-separate; default: all)")
    q.add_argument("--quick", action="store_true", help="isobench run --quick on every host")
    q.add_argument("--repeat", type=validate.bounded_whole(1, validate.MAX_REPEAT),
                   metavar="N", help="isobench run --repeat N on every host")
    q.add_argument("--id", type=validate.campaign_id, metavar="ID",
                   help="the campaign's id: resumes it if it exists (default: a new id from "
                        "the time, or the unfinished campaign of the same inventory and "
                        "selection)")
    q.add_argument("--new", action="store_true",
                   help="begin a new campaign even if an unfinished one would resume")
    q.add_argument("--source", metavar="DIR",
                   help="the isobench checkout to copy to the hosts (default: the one this "
                        "isobench runs from)")
    q.add_argument("--host-timeout", type=validate.bounded_whole(1, validate.MAX_HOST_TIMEOUT),
                   default=measure_campaign.DEFAULT_HOST_TIMEOUT, metavar="SECONDS",
                   help="longest `isobench run` on one host (default: "
                        f"{measure_campaign.DEFAULT_HOST_TIMEOUT})")
    q.add_argument("--workdir-root", dest="workdir_roots", action="append", default=[],
                   type=_workdir_root, metavar="DIR",
                   help="also allow isobench_workdir and isobench_prebuilt below DIR (an "
                        "absolute path; repeat; always allowed: ~/... and "
                        f"{', '.join(measure_campaign.WORKDIR_ROOTS)})")
    q.add_argument("--insecure-host-keys", action="store_true",
                   help="accept inventory or environment settings that turn off the "
                        "host-key check (refused without it); the campaign's state records "
                        "a warning per host")
    q.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    _add_json(q, "each host's outcome")
    _add_db(q)
    q.set_defaults(func=cmd_campaign_run)


    q = csub.add_parser(
        "show", formatter_class=Formatter, help="the campaign's table: mechanism x host",
        description="One table per population (benchmark, placement, payload, phase): a row "
                    "per\nmechanism, a column per host, each cell that host's ratio to its own "
                    "direct\nwith its 95% interval over repetitions.  The header gives each "
                    "host's CPU,\nkernel, hypervisor, PMU and PKU.  Hosts are never averaged "
                    "together.")
    q.add_argument("id", nargs="?", default="latest", metavar="ID", help=CAMPAIGN_SPEC)
    q.add_argument("--absolute", action="store_true",
                   help="each host's headline values in its own unit instead of ratios "
                        "(printed with a warning)")
    _add_json(q, "the campaign document")
    _add_db(q)
    q.set_defaults(func=cmd_campaign_show)

    q = csub.add_parser(
        "report", formatter_class=Formatter, help="the campaign as HTML, Markdown and heat maps",
        description="Write index.html, campaign.md, campaign.json (the campaign document) and "
                    "one\nheat map per benchmark (PNG and SVG: mechanisms x hosts, colour the "
                    "ratio to\neach host's own direct on a log scale) into DIR.  The per-run "
                    "report of one\nhost is `isobench report RUN`.")
    q.add_argument("id", nargs="?", default="latest", metavar="ID", help=CAMPAIGN_SPEC)
    q.add_argument("-o", "--output", required=True, metavar="DIR", help="folder to write into")
    _add_json(q, "what was written")
    _add_db(q)
    q.set_defaults(func=cmd_campaign_report)

    q = csub.add_parser(
        "import", formatter_class=Formatter, help="exports in a folder into the store, as a "
                                                  "campaign",
        description="Import every export of FOLDER into the store, tagged with the campaign "
                    "id and\nthe host: FOLDER/HOST.json or FOLDER/HOST/export.json.  What a "
                    "Slurm campaign\nruns after its array tasks; a run already in the store "
                    "(same uid) is skipped.")
    q.add_argument("id", type=validate.campaign_id, metavar="ID", help="the campaign id")
    q.add_argument("folder", metavar="FOLDER", help="a folder of exports, one per host")
    _add_json(q, "what was imported")
    _add_db(q)
    q.set_defaults(func=cmd_campaign_import)

    q = csub.add_parser(
        "slurm", formatter_class=Formatter, help="write an sbatch script: one array task per "
                                                 "node type",
        description="Write a Slurm script for the campaign: `bash SCRIPT submit` submits one "
                    "array\ntask per node type (its partition and constraint), each of which "
                    "builds isobench\non its node, runs it and exports to SHARED/ID/exports/; "
                    "an import job after\nthem merges the exports into SHARED/ID/campaign.sqlite "
                    "(`campaign import`).",
        epilog="example:\n  isobench campaign slurm switch -m direct,mpk --quick \\\n"
               "      --node-type skylake:compute:skx --node-type icelake:compute:icx \\\n"
               "      --shared /shared/isobench --source /shared/src/isobench -o campaign.sbatch")
    q.add_argument("benchmarks", nargs="*", metavar="BENCH",
                   help=f"benchmarks (default: {' '.join(runner.DEFAULT_SUITE)})")
    q.add_argument("-m", "--mechanism", dest="mechanisms", action="append", default=[],
                   metavar="MECH", help="a mechanism (repeat, or comma-separate; default: all)")
    q.add_argument("--quick", action="store_true", help="isobench run --quick on every node")
    q.add_argument("--repeat", type=validate.bounded_whole(1, validate.MAX_REPEAT), metavar="N")
    q.add_argument("--node-type", dest="node_types", action="append", required=True,
                   type=validate.node_type, metavar="NAME:PARTITION[:CONSTRAINT]",
                   help="a node type: its name (the host column), Slurm partition and "
                        "optional constraint (repeat)")
    q.add_argument("--shared", required=True, metavar="DIR",
                   help="a folder every node can write: exports, logs, the merged store")
    q.add_argument("--source", metavar="DIR",
                   help="an isobench checkout every node can read (default: this one)")
    q.add_argument("--prebuilt", metavar="DIR",
                   help="a checkout already built for every node type: no set-up on the nodes")
    q.add_argument("--id", type=validate.campaign_id, metavar="ID",
                   help="the campaign id (default: a new one from the time)")
    q.add_argument("--time", default=measure_slurm.DEFAULT_TIME, metavar="HH:MM:SS",
                   help=f"Slurm time limit of each task (default: {measure_slurm.DEFAULT_TIME})")
    q.add_argument("-o", "--output", required=True, metavar="FILE", help="the script to write")
    q.set_defaults(func=cmd_campaign_slurm)


def _campaign_selection(args: argparse.Namespace) -> measure_campaign.Selection:
    benches = validate.name_tokens(args.benchmarks or list(runner.DEFAULT_SUITE), "benchmark")
    mechs = validate.name_tokens(validate.mechanisms(args.mechanisms), "mechanism")
    try:
        # Where a native driver is built here, its catalog names what exists;
        # the hosts build the same source.
        catalog = Driver(find_isob()).catalog()
    except (UsageError, DriverError):
        catalog = None
    if catalog is not None:
        _choose("benchmark", benches, [b.name for b in catalog.benchmarks])
        _choose("mechanism", mechs, [m.name for m in catalog.mechanisms])
    return measure_campaign.Selection(tuple(benches), tuple(mechs), args.quick, args.repeat)


def _exclusive_file(path: Path, text: str, what: str) -> None:
    """Write a new file; an existing one is left alone (exit 2)."""
    try:
        with open(path, "x") as f:
            f.write(text)
    except FileExistsError:
        raise UsageError(f"{path} exists: {what} never overwrites a file") from None
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None


def cmd_campaign_init(args: argparse.Namespace) -> int:
    path = Path(args.file)
    _exclusive_file(path, measure_campaign.example_inventory(path), "campaign init")
    print(f"example inventory written to {path}: its hosts are placeholders that `campaign "
          "run` refuses; replace each (replace-me-*, 192.0.2.x, 2001:db8::x) with a machine of "
          "yours, add its key to ~/.ssh/known_hosts, then "
          f"`isobench campaign run {path} switch --quick`")
    return EXIT_OK


def _import_tagged(store: Store, campaign_id: str, host: str, path: Path,
                   extra: dict | None = None) -> tuple[int, str]:
    done = interchange.import_into(store, path, None, {"campaign": campaign_id, "host": host,
                                                       **(extra or {})})
    if len(done) != 1:
        raise UsageError(f"{path} holds {len(done)} runs: a host's export holds one")
    return done[0]["run_id"], done[0]["uid"]


def cmd_campaign_run(args: argparse.Namespace) -> int:
    inventory = Path(args.inventory)
    selection = _campaign_selection(args)
    measure_campaign.ansible_tool("ansible-playbook")
    inv = measure_campaign.load_inventory(inventory, insecure_host_keys=args.insecure_host_keys,
                                          roots=args.workdir_roots)
    hosts = inv.hosts
    source = Path(args.source) if args.source else repo_root()
    if any(h.prebuilt is None for h in hosts):
        measure_campaign.check_source(source)  # before any host is touched
    path = db_path(args)
    say = (lambda _t: None) if args.quiet else (lambda t: print(t, file=sys.stderr, flush=True))
    with lifecycle.stop_signals(), Store.open(path, create=True) as store:
        c, resumed = measure_campaign.find_or_begin(path, inventory, hosts, selection,
                                                    args.id, args.new)
        c.warn(inv.warnings)
        for w in inv.warnings:
            print(f"{PROG}: warning: campaign {c.id}: {w}", file=sys.stderr, flush=True)

        def importer(host: str, export: Path) -> tuple[int, str]:
            return _import_tagged(store, c.id, host, export,
                                  measure_campaign.host_tags(c, host))

        try:
            measure_campaign.execute(c, inventory, [h for h in hosts], source=source,
                                     host_timeout=args.host_timeout, say=say,
                                     resumed=resumed, import_export=importer,
                                     insecure_host_keys=args.insecure_host_keys)
        finally:
            c.save()
    mine = {h.name for h in hosts}
    failed = [h for h, s in c.hosts.items() if h in mine and s["status"] != measure_campaign.DONE]
    if args.json:
        _print_json({"campaign": c.id, "resumed": resumed, "db": str(path),
                     "state": str(c.state_file), "hosts": {h: c.hosts[h] for h in mine}})
    else:
        print(f"campaign {c.id}: {len(mine) - len(failed)} of {len(mine)} host(s) done "
              f"(store {path}; state {c.state_file})")
        print("\n".join(measure_campaign.summary_lines(
            measure_campaign.Campaign(c.id, c.folder, c.inventory, c.selection, c.created,
                                      {h: c.hosts[h] for h in c.hosts if h in mine}))))
        if failed:
            print(f"run the same command again to resume the host(s) not done: "
                  f"{', '.join(failed)}")
        print(f"`isobench campaign show {c.id}` sets the hosts side by side")
    return EXIT_FAILED if failed else EXIT_OK


def _campaign_doc(args: argparse.Namespace, absolute: bool = False) -> dict:
    path = db_path(args)
    with Store.open(path, create=False) as store:
        ids = analysis_campaign.campaign_ids(store)
        cid = args.id
        if cid == "latest":
            if not ids:
                raise UsageError(f"{path} holds no campaign (see `isobench campaign run`)")
            cid = ids[-1]
        else:
            try:
                validate.campaign_id(cid)
            except argparse.ArgumentTypeError as e:
                raise UsageError(str(e)) from None
        state = measure_campaign.load_state(measure_campaign.campaigns_folder(path) / cid)
        if cid not in ids and state is None:
            raise UsageError(f"no campaign {cid!r} in {path} (known: "
                             f"{', '.join(ids) or 'none'})")
        doc = analysis_campaign.build(store, cid, state.as_dict() if state else None,
                                      absolute=absolute)
        # What the campaign ran without (--insecure-host-keys), from its record.
        doc["warnings"] = [w.get("warning") for w in (state.warnings if state else [])
                           if isinstance(w, dict)]
        return doc


def cmd_campaign_show(args: argparse.Namespace) -> int:
    doc = _campaign_doc(args, absolute=args.absolute)
    if args.json:
        _print_json(doc)
    else:
        if args.absolute:
            _err(f"warning: {analysis_campaign.ABSOLUTE_WARNING}")
        for w in doc["warnings"]:
            print(table.terminal(f"{PROG}: warning: campaign {doc['campaign']}: {w}"),
                  file=sys.stderr)
        print(table.terminal(render_campaign.render_text(doc)))
    return EXIT_OK


def cmd_campaign_report(args: argparse.Namespace) -> int:
    if not args.output:
        raise UsageError("-o '' names no folder: give the folder to write the report into")
    report.prepare(Path(args.output))
    doc = _campaign_doc(args)
    try:
        written = render_campaign.write(doc, Path(args.output))
    except OSError as e:
        where = f" ({e.filename})" if getattr(e, "filename", None) else ""
        raise OutputError(f"cannot write the report into {args.output}{where}: "
                          f"{e.strerror or e}") from None
    if args.json:
        _print_json(written)
    else:
        print(f"campaign report of {doc['campaign']} written to {written['dir']}: "
              f"{', '.join(written['files'])}")
        for note in written["omitted"].values():
            print(f"note: {note}")
    return EXIT_OK


def _exports_in(folder: Path) -> list[tuple[str, Path]]:
    """(host, export) for FOLDER/HOST.json and FOLDER/HOST/export.json."""
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a folder of exports")
    found = []
    for entry in sorted(folder.iterdir()):
        if entry.is_file() and entry.suffix == ".json":
            found.append((entry.stem, entry))
        elif entry.is_dir() and (entry / "export.json").is_file():
            found.append((entry.name, entry / "export.json"))
    for host, _ in found:
        validate.host_name(host, str(folder))
    if not found:
        raise UsageError(f"{folder} holds no exports (HOST.json or HOST/export.json)")
    return found


def cmd_campaign_import(args: argparse.Namespace) -> int:
    found = _exports_in(Path(args.folder))
    out = []
    with Store.open(db_path(args), create=True) as store:
        for host, path in found:
            done = interchange.import_into(store, path, None, {"campaign": args.id, "host": host})
            out += [{"host": host, "source": str(path), **d} for d in done]
    if args.json:
        _print_json({"campaign": args.id, "db": str(db_path(args)), "imported": out})
    else:
        for d in out:
            print(f"{d['host']}: {'already there as' if d['skipped'] else 'imported as'} run "
                  f"{d['run_id']} ({d['source']})")
        print(f"`isobench campaign show {args.id}` sets the hosts side by side")
    return EXIT_OK


def cmd_campaign_slurm(args: argparse.Namespace) -> int:
    selection = _campaign_selection(args)
    names = [n for n, _, _ in args.node_types]
    if len(set(names)) != len(names):
        raise UsageError(f"--node-type names must differ ({', '.join(names)})")
    if not validate.SLURM_TIME.fullmatch(args.time):
        raise UsageError(f"--time {args.time!r} is not a Slurm time such as 04:00:00 or "
                         "1-00:00:00")
    shared = validate.remote_path(os.path.abspath(args.shared), "--shared", "folder")
    source = validate.remote_path(os.path.abspath(args.source) if args.source
                                  else str(repo_root()), "--source", "folder")
    prebuilt = (validate.remote_path(os.path.abspath(args.prebuilt), "--prebuilt", "folder")
                if args.prebuilt else None)
    cid = args.id or measure_campaign.new_id()
    text = measure_slurm.script(cid, [measure_slurm.NodeType(*t) for t in args.node_types],
                                selection, shared=shared, source=source, prebuilt=prebuilt,
                                time_limit=args.time)
    _exclusive_file(Path(args.output), text, "campaign slurm")
    print(f"campaign {cid}: sbatch script written to {args.output} ({len(names)} node "
          f"type(s): {', '.join(names)})")
    print(f"submit it with `bash {args.output} submit`; afterwards `isobench campaign show "
          f"{cid} --db {shared}/{cid}/campaign.sqlite`")
    return EXIT_OK


def run_document(store: Store, run_id: int, doc: dict | None = None) -> dict:
    """The JSON of `run --json` and `show --json` (the same for the same run):
    the stored run and results, and its summary document."""
    results = []
    for r in store.results(run_id):
        r = dict(r)
        r.pop("header", None)  # in `export --format json`; too bulky here
        results.append(r)
    doc = doc or summary.build(runs.load_run(store, run_id))
    return {**store.run(run_id), "db": str(store.path), "jobs": store.jobs(run_id),
            "results": results, "findings": doc["findings"], "summary": doc}


def _print_run(store: Store, run_id: int, as_json: bool, doc: dict | None = None,
               wide: bool = False) -> None:
    doc = doc or summary.build(runs.load_run(store, run_id))
    if as_json:
        _print_json(run_document(store, run_id, doc))
        return
    extra = []
    if wide and any(len(c["repetitions"]) > 1 for c in doc["configs"]):
        extra.append(table.repetition_report(doc))
    extra.append(table.wrap(checks.one_line(doc["findings"], run_id)))
    recorded = attackers.from_environment(doc["run"].get("environment"))
    if recorded:
        extra.append(matrix.format_matrix(*recorded, brief=not wide))
    # Names, host names and reasons may come from another machine (import).
    print(table.terminal(table.run_report(doc, extra, wide=wide)))


def _print_json(doc: dict) -> None:
    """Every --json document, with the interchange schema_version first."""
    json.dump(interchange.stamp(doc), sys.stdout, indent=1)
    sys.stdout.write("\n")


class OutputError(Exception):
    """What was asked for was computed but cannot be written: exit 1."""


def _err(message: str) -> None:
    # One line, always: a multi-line message would break the contract.
    try:
        print(table.terminal(f"{PROG}: error: {' '.join(str(message).split())}"),
              file=sys.stderr)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # no terminal left (SIGHUP) or stderr closed: nothing more to do


def _flush_stdout() -> None:
    """Write out stdout now, so that a full disk or /dev/full is reported as one
    line instead of as an exception while Python exits."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _drop_stdout()
        raise
    except OSError as e:
        _drop_stdout()
        raise OutputError(f"cannot write the output: {e.strerror or e}") from None


def _drop_stdout() -> None:
    # What is still buffered can never be written: point the descriptor at
    # /dev/null so that the interpreter's last flush succeeds quietly.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    try:
        argv = list(sys.argv[1:] if argv is None else argv)
        args = build_parser().parse_args(argv)
        args.argv = [PROG, *argv]
        func: Callable[[argparse.Namespace], int] = args.func
        code = func(args)
        _flush_stdout()
        return code
    except UsageError as e:
        _err(e)
        return EXIT_USAGE
    except (DriverError, OutputError) as e:
        _err(e)
        return EXIT_FAILED
    except sqlite3.Error as e:
        _err(f"the store failed: {e}")
        return EXIT_FAILED
    except lifecycle.RunInterrupted as e:
        _err(f"interrupted by {e.signal.name}: run {e.run_id} is marked interrupted; the results "
             f"so far are kept in {e.db}")
        return e.signal.exit_code
    except lifecycle.Interrupted as e:
        _err(f"interrupted by {e.name}")
        return e.exit_code
    except KeyboardInterrupt:
        _err("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # stdout closed early (`isobench list | head`): not an error worth a traceback.
        _drop_stdout()
        try:
            sys.stderr.close()
        except OSError:
            pass
        return EXIT_FAILED
    except OSError as e:
        # Most often writing the output failed (stdout on a full disk, a
        # closed terminal); a file named in the error is named in the line.
        if e.filename:
            _err(f"cannot use {e.filename}: {e.strerror or e}")
        else:
            _drop_stdout()
            _err(f"cannot write the output: {e.strerror or e}")
        return EXIT_FAILED
    except Exception as e:  # the last guard: one line, never a traceback
        if os.environ.get(ENV_DEBUG):
            traceback.print_exc()
        where = traceback.extract_tb(e.__traceback__)[-1]
        _err(f"internal error: {type(e).__name__}: {e} (at {Path(where.filename).name}:"
             f"{where.lineno}; set {ENV_DEBUG}=1 for the traceback, and please report it)")
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
