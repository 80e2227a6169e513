"""The `isobench` command: list, run, show, export, report, check, compare,
system, reference.

Exit codes (every command):
    0    everything ran (skipped mechanisms are not failures)
    1    something failed: a benchmark crashed, hung or reported a failure,
         an isolation test failed, or the native driver could not answer;
         for `check` and `system check`: there are findings; for `system
         tune|reset`: a setting could not be changed
    2    bad usage: unknown benchmark or mechanism, malformed option, unusable
         store path, unknown run, unwritable report folder; always exactly
         one line on stderr
    130  interrupted (Ctrl-C); results stored so far are kept
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import sqlite3
import sys
from pathlib import Path
from typing import Callable, Sequence

from . import (__version__, analysis, checks, compare, export, kvserver, reference, report,
               runner, serve, stats, sysinfo, system, table)
from .driver import ISOLATION_TIMEOUT, Catalog, Driver, Isolation, find_isob, repo_root
from .errors import DriverError, UsageError
from .store import Store

PROG = "isobench"
ENV_DB = "ISOBENCH_DB"
DEFAULT_DB = Path("results") / "isobench.sqlite"

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2 (via UsageError)."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{message} (see `{self.prog} --help`)")


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the hand-wrapped examples in descriptions and epilogs."""


# ---- option value types: each raises ArgumentTypeError with a plain message ----

def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return v


def positive_seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive number of seconds")
    return v


def non_negative_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    return v


SIZE_SUFFIXES = {"": 0, "k": 10, "m": 20, "g": 30}
MAX_KV_SIZES = 32  # isob's ISOB_MAX_SIZES


def size_list(text: str) -> tuple[str, ...]:
    """kv data sizes, as isob --sizes takes them: byte counts with an optional
    K, M or G suffix (powers of 1024), each a multiple of 64 from 64 to 16G."""
    items = tuple(s.strip() for s in text.split(",") if s.strip())
    if not items:
        raise argparse.ArgumentTypeError(f"{text!r}: give at least one size, e.g. 4K,1M,256M")
    if len(items) > MAX_KV_SIZES:
        raise argparse.ArgumentTypeError(f"{text!r}: more than {MAX_KV_SIZES} sizes")
    for s in items:
        m = re.fullmatch(r"(\d+)([kmg]?)", s, re.IGNORECASE)
        n = int(m[1]) << SIZE_SUFFIXES[m[2].lower()] if m else 0
        if not 64 <= n <= 16 << 30 or n % 64:
            raise argparse.ArgumentTypeError(
                f"{s!r} is not a multiple of 64 bytes from 64 to 16G (e.g. 4K, 1M, 256M)")
    return items


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
    _add_export(sub)
    _add_report(sub)
    _add_check(sub)
    _add_compare(sub)
    _add_system(sub)
    _add_reference(sub)
    serve.add_parser(sub)
    return p


def _add_db(p: argparse.ArgumentParser, top: bool = False) -> None:
    # Accepted before and after the subcommand; SUPPRESS keeps a subcommand's
    # missing --db from overwriting one given before it.
    p.add_argument("--db", metavar="PATH", default=None if top else argparse.SUPPRESS,
                   help=f"the SQLite store (default: ${ENV_DB}, else ./{DEFAULT_DB})")


def _add_json(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--json", action="store_true",
                   help=f"print {what} as one JSON object on stdout (progress stays on stderr)")


def _add_list(sub) -> None:
    p = sub.add_parser(
        "list", formatter_class=Formatter, help="mechanisms and benchmarks, and what is available",
        description="List the mechanisms and benchmarks the native driver has: whether each "
                    "mechanism\ncan run here (and why not), and whether its isolation holds.\n\n"
                    "isolation: enforced  it claims isolation and the isolation test confirmed it\n"
                    "           none      it does not claim isolation (a plain call, a thread)\n"
                    "           FAILED    it claims isolation and the test showed a leak (exit 1)\n"
                    "           untested  not available here, or the test could not run",
        epilog="examples:\n  isobench list\n  isobench list --json | jq '.mechanisms[].name'\n"
               "  isobench list --skip-isolation     fast: no isolation tests")
    _add_json(p, "the listing")
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
               "  isobench run kv-server --quick             isob serve beside memcached\n"
               "  isobench run --json > run.json\n\n"
               "exit status: 0 all ran, 1 something failed, 2 bad usage, 130 interrupted")
    p.add_argument("benchmarks", nargs="*", metavar="BENCH",
                   help=f"benchmarks to run (default: {' '.join(runner.DEFAULT_SUITE)})")
    p.add_argument("-m", "--mechanism", dest="mechanisms", action="append", default=[],
                   metavar="MECH", help="a mechanism to run (repeat, or comma-separate; "
                                        "default: all)")
    p.add_argument("--quick", action="store_true",
                   help="fewer iterations (isob --quick) and a shorter default time-out")
    p.add_argument("--n", type=positive_int, metavar="N",
                   help="samples per result (default: isob's own, see `isob --help`)")
    p.add_argument("--placement", type=placement_list, metavar="LIST",
                   help=f"comma-separated placements: {', '.join(runner.PLACEMENTS)} "
                        "(default: each benchmark's own)")
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
    p.add_argument("--seconds", type=positive_seconds, metavar="S",
                   help=f"kv-server: how long the client loads each server, whole seconds "
                        f"(default: {kvserver.SECONDS:g}; --quick: {kvserver.QUICK_SECONDS:g})")
    p.add_argument("--repeat", type=positive_int, default=1, metavar="N",
                   help="run every (benchmark, mechanism) in N fresh isob processes, the "
                        "mechanisms in a shuffled order each time; reports the spread between "
                        "repetitions as well as within (default: 1)")
    p.add_argument("--seed", type=non_negative_int, metavar="S",
                   help="seed of the shuffled order (default: a random one; either way it is "
                        "recorded with the run)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    _add_json(p, "the run")
    _add_db(p)
    p.set_defaults(func=cmd_run)


def _add_show(sub) -> None:
    p = sub.add_parser(
        "show", formatter_class=Formatter, help="print a stored run",
        description="Print a stored run: the same table `isobench run` prints.",
        epilog="examples:\n  isobench show            the latest run\n  isobench show 3\n"
               "  isobench show --json --db other.sqlite")
    p.add_argument("run", nargs="?", metavar="RUN", help="run id, or 'latest' (default)")
    _add_json(p, "the run")
    _add_db(p)
    p.set_defaults(func=cmd_show)


def _add_export(sub) -> None:
    p = sub.add_parser(
        "export", formatter_class=Formatter, help="write a stored run as CSV or JSON",
        description="Write a stored run as CSV (one row per result: params and summary "
                    "statistics)\nor JSON (everything: environment, headers and raw samples).",
        epilog="examples:\n  isobench export latest --format csv -o latest.csv\n"
               "  isobench export 3 --format json --no-samples | jq .environment")
    p.add_argument("run", metavar="RUN", help="run id, or 'latest'")
    p.add_argument("--format", required=True, choices=export.FORMATS, help="csv or json")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: stdout)")
    p.add_argument("--no-samples", action="store_true",
                   help="JSON: leave out the raw samples (CSV never has them)")
    _add_db(p)
    p.set_defaults(func=cmd_export)


# ---- commands ----

def db_path(args: argparse.Namespace) -> Path:
    text = args.db or os.environ.get(ENV_DB) or str(DEFAULT_DB)
    return Path(os.path.abspath(text))


def cmd_list(args: argparse.Namespace) -> int:
    driver = Driver(find_isob())
    catalog = driver.catalog()
    mechs = []
    for m in catalog.mechanisms:
        iso = (Isolation("untested", "not run (--skip-isolation)") if args.skip_isolation and
               m.available else driver.isolation(m, timeout=args.timeout))
        mechs.append({"name": m.name, "summary": m.summary, "available": m.available,
                      "reason": m.reason, "isolation": iso.state, "isolation_reason": iso.reason,
                      "isolation_detail": dict(iso.detail) or None, "props": list(m.props)})
    benches = [{"name": b.name, "summary": b.summary, "needs_mechanism": b.needs_mechanism}
               for b in catalog.benchmarks]
    if args.json:
        _print_json({"mechanisms": mechs, "benchmarks": benches})
    else:
        print(table.list_report(mechs, benches))
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
    asked = [m.strip() for text in args.mechanisms for m in text.split(",") if m.strip()]
    all_mechs = [m.name for m in catalog.mechanisms]
    mechs = _choose("mechanism", asked, all_mechs) if asked else all_mechs
    return benches, mechs


def _kvserver_mechanisms(args: argparse.Namespace, catalog: Catalog) -> list[str]:
    """kv-server's servers: memcached, then the -m mechanisms, else its default set
    (those of it this driver has; an unavailable one gives a skipped result)."""
    asked = [m.strip() for text in args.mechanisms for m in text.split(",") if m.strip()]
    known = [m.name for m in catalog.mechanisms]
    mechs = (_choose("mechanism", asked, known) if asked else
             [m for m in kvserver.DEFAULT_MECHANISMS if m in known])
    return [kvserver.REFERENCE, *mechs]


def _add_report(sub) -> None:
    p = sub.add_parser(
        "report", formatter_class=Formatter, help="write an HTML report, plots and a summary",
        description="Write a report of a stored run into DIR: index.html (self-contained: the "
                    "plots are\nembedded), the plots as PNG and SVG, and summary.md (platform "
                    "table, findings,\nswitch and key-value tables, published figures) ready "
                    "to paste into a paper.\n\nThe soundness findings are those of `isobench "
                    "check`.  Published figures are shown\nbeside local numbers, marked as "
                    "published, never mixed into local statistics.\nA plot whose data the run "
                    "lacks (no kv results, no kv-server results) is left\nout with a note "
                    "saying so.",
        epilog="examples:\n  isobench report -o report/              the latest run\n"
               "  isobench report 3 -o /tmp/run3 --json   what was written, as JSON")
    p.add_argument("run", nargs="?", metavar="RUN", help="run id, or 'latest' (default)")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="folder to write into (created if missing)")
    _add_seed(p)
    _add_json(p, "what was written and the findings")
    _add_db(p)
    p.set_defaults(func=cmd_report)


def _add_seed(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-seed", type=non_negative_int, default=stats.BOOTSTRAP_SEED,
                   metavar="S", help="seed of the bootstrap intervals; printed with them "
                                     f"(default: {stats.BOOTSTRAP_SEED})")


def _add_check(sub) -> None:
    ids = "\n".join(f"  {i}" for i in checks.CHECK_IDS)
    p = sub.add_parser(
        "check", formatter_class=Formatter, help="soundness checks of a stored run",
        description="Check a stored run for what makes numbers untrustworthy or "
                    "incomparable: no\nbaseline, no spread, averaged ratios, "
                    "microbenchmarks alone, missing platform\ndetails, an unpinned or "
                    "untuned machine, counters that missed samples or the\nother process, "
                    "too much variation.  Each finding says what to do next and\npoints into "
                    f"{checks.DOC}; where it applies, it names the flaw of van der\nKouwe et "
                    f"al., SoK: Benchmarking Flaws in Systems Security (EuroS&P 2019).\n\n"
                    f"checks:\n{ids}",
        epilog="exit status: 0 no findings, 1 findings, 2 bad usage\n\nexamples:\n"
               "  isobench check\n  isobench check 3 --json | jq '.findings[].id'")
    p.add_argument("run", nargs="?", metavar="RUN", help="run id, or 'latest' (default)")
    _add_json(p, "the findings")
    _add_db(p)
    p.set_defaults(func=cmd_check)


def _add_compare(sub) -> None:
    p = sub.add_parser(
        "compare", formatter_class=Formatter, help="compare two runs, or two machines",
        description="Compare two stored runs result by result (same benchmark, mechanism and "
                    "params).\nEach run is normalized to its own `direct` baseline, so runs "
                    "from different\nmachines compare by what isolation costs on each:\n\n"
                    "  B/A = (median_B / direct_B) / (median_A / direct_A)\n\n"
                    "switch results use direct's 'entry' variant at the same payload; "
                    "cross-cpu\nresults are normalized by direct's same-cpu result (a plain "
                    "call has no second\ncontext).  direct itself and pingpong compare in "
                    "absolute terms.  Each ratio has a\nbootstrap 95% interval and a "
                    "Mann-Whitney U p; the average is a geometric mean.",
        epilog="examples:\n  isobench compare 3 4\n"
               "  isobench compare 1 1 --db laptop.sqlite --db-b server.sqlite\n"
               "  isobench compare 3 4 --json\n\n"
               "exit status: 0 compared, 1 nothing in common, 2 bad usage")
    p.add_argument("run_a", metavar="RUN_A", help="run id (or 'latest') in --db")
    p.add_argument("run_b", metavar="RUN_B", help="run id (or 'latest') in --db-b, else --db")
    p.add_argument("--db-b", metavar="PATH", help="the store RUN_B is in (default: --db's)")
    _add_seed(p)
    _add_json(p, "the comparison")
    _add_db(p)
    p.set_defaults(func=cmd_compare)


def _add_system(sub) -> None:
    p = sub.add_parser(
        "system", formatter_class=Formatter, help="show, check, tune or reset the machine",
        description="The machine state that matters to measuring: frequency governor, turbo, "
                    "SMT,\nASLR, perf_event_paranoid, rdpmc, isolated CPUs, clock source, "
                    "hypervisor.\n\n  show    print it\n  check   the findings about this "
                    "machine (exit 1 if any)\n  tune    save the current values to the state "
                    "file, then set: governor\n          performance, turbo off, NMI watchdog "
                    "off, ASLR full (needs root)\n  reset   write the saved values back, in "
                    "reverse order, and remove the file\n\nA setting this machine does not "
                    "have, or that cannot be written, is reported\nand left as it is.",
        epilog="examples:\n  isobench system show\n  sudo isobench system tune\n"
               "  sudo isobench system reset\n\nexit status: 0 done, 1 a setting could not "
               "be changed (or check: findings), 2 bad usage")
    p.add_argument("action", choices=("show", "check", "tune", "reset"))
    p.add_argument("--state", metavar="PATH",
                   help="state file of tune/reset (default: system-state.json beside the store)")
    _add_json(p, "the settings")
    _add_db(p)
    p.set_defaults(func=cmd_system)


def _add_reference(sub) -> None:
    p = sub.add_parser(
        "reference", formatter_class=Formatter, help="published figures, with their sources",
        description="List the published figures isobench shows beside local numbers: value, "
                    "unit,\nwhat was measured, source and hardware.  They come from one "
                    "reviewed file\n(isobench/data/reference.csv) and are never mixed into "
                    "local statistics.",
        epilog="examples:\n  isobench reference\n  isobench reference --json | jq '.references[0]'")
    _add_json(p, "the figures")
    p.set_defaults(func=cmd_reference)


def _run_options(args: argparse.Namespace) -> runner.Options:
    timeout = args.timeout or (runner.QUICK_TIMEOUT if args.quick else runner.DEFAULT_TIMEOUT)
    return runner.Options(quick=args.quick, n=args.n, placement=args.placement, timeout=timeout,
                          seconds=args.seconds, sizes=args.sizes,
                          timeout_given=args.timeout is not None)


def cmd_run(args: argparse.Namespace) -> int:
    driver = Driver(find_isob())
    catalog = driver.catalog()
    benches, mechs = _selection(args, catalog)
    opts = _run_options(args)
    path = db_path(args)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**32)
    with Store.open(path, create=True) as store:
        env = sysinfo.collect(driver_version=driver.version(), repo=repo_root())
        # The checks need to know which mechanisms run a second context.
        env["mechanism_props"] = {m.name: list(m.props) for m in catalog.mechanisms}
        run_id = store.begin_run(args.argv, env)
        per_bench = ({kvserver.BENCHMARK: _kvserver_mechanisms(args, catalog)}
                     if kvserver.BENCHMARK in benches else None)
        jobs = runner.plan(catalog, benches, mechs, repeat=args.repeat, seed=seed,
                           per_benchmark=per_bench)
        store.set_options(run_id, {"repeat": args.repeat, "seed": seed,
                                   "order": runner.job_order(jobs)})
        progress = runner.Progress(len(jobs), quiet=args.quiet)
        try:
            failed = runner.run_jobs(
                driver, jobs, opts,
                on_result=lambda r, job: store.add_result(run_id, r, job.repetition),
                on_header=lambda h: store.set_environment(run_id, sysinfo.apply_header(env, h)),
                progress=progress)
        except KeyboardInterrupt:
            store.finish_run(run_id, "interrupted")
            _err(f"interrupted: results so far kept in {path} (run {run_id})")
            return EXIT_INTERRUPTED
        store.finish_run(run_id, "failed" if failed else "ok")
        data = analysis.load_run(store, run_id)
        store.set_aggregates(run_id, analysis.aggregates(data))
        _print_run(store, run_id, args.json)
    return EXIT_FAILED if failed else EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    with Store.open(db_path(args), create=False) as store:
        run_id = store.resolve_run(args.run)
        _print_run(store, run_id, args.json)
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    with Store.open(db_path(args), create=False) as store:
        run_id = store.resolve_run(args.run)
        text = export.export(store, run_id, args.format, samples=not args.no_samples)
    if args.output:
        try:
            Path(args.output).write_text(text)
        except OSError as e:
            raise UsageError(f"cannot write {args.output}: {e.strerror or e}") from None
    else:
        sys.stdout.write(text)
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    with Store.open(db_path(args), create=False) as store:
        run_id = store.resolve_run(args.run)
        report.prepare(Path(args.output))  # an unusable folder fails before any work
        data = analysis.load_run(store, run_id, seed=args.bootstrap_seed)
        doc = report.write(data, Path(args.output))
    if args.json:
        _print_json(doc)
    else:
        n = len(doc["findings"])
        print(f"report of run {run_id} written to {doc['dir']}: {', '.join(doc['files'])}")
        for note in doc["omitted"].values():
            print(f"note: {note}")
        print(f"soundness: {n} finding{'s' if n != 1 else ''}"
              + (f" ({', '.join(f['id'] for f in doc['findings'])}); `isobench check "
                 f"{run_id}` says what to do" if n else ""))
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    with Store.open(db_path(args), create=False) as store:
        run_id = store.resolve_run(args.run)
        data = analysis.load_run(store, run_id)
    findings = checks.run_checks(data)
    if args.json:
        _print_json({"run_id": run_id, "db": data.db,
                     "findings": [f.as_dict() for f in findings]})
    else:
        print(f"run {run_id} in {data.db}")
        print(checks.render(findings))
    return EXIT_FAILED if findings else EXIT_OK


def _load(path: Path, spec: str, seed: int) -> analysis.RunData:
    with Store.open(path, create=False) as store:
        return analysis.load_run(store, store.resolve_run(spec), seed=seed)


def cmd_compare(args: argparse.Namespace) -> int:
    path_a = db_path(args)
    path_b = Path(os.path.abspath(args.db_b)) if args.db_b else path_a
    a = _load(path_a, args.run_a, args.bootstrap_seed)
    b = _load(path_b, args.run_b, args.bootstrap_seed)
    result = compare.compare(a, b, seed=args.bootstrap_seed)
    findings = {side: [f.id for f in checks.run_checks(d)] for side, d in (("A", a), ("B", b))}
    doc = compare.document(a, b, result, findings)
    if args.json:
        _print_json(doc)
    else:
        print(compare.render(result["rows"], doc))
    if not result["rows"]:
        _err("the two runs have no results in common (same benchmark, mechanism and params)")
        return EXIT_FAILED
    return EXIT_OK


def cmd_system(args: argparse.Namespace) -> int:
    root = system.sysroot()
    state = Path(args.state) if args.state else db_path(args).parent / "system-state.json"
    if args.action == "check":
        findings = checks.machine_findings(sysinfo.collect(root))
        if args.json:
            _print_json({"findings": [f.as_dict() for f in findings]})
        else:
            print(checks.render(findings))
        return EXIT_FAILED if findings else EXIT_OK
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
        print(reference.render(refs))
    return EXIT_OK


def run_document(store: Store, run_id: int, data: analysis.RunData | None = None) -> dict:
    """The JSON of `run --json` and `show --json` (the same for the same run)."""
    results = []
    for r in store.results(run_id):
        r = dict(r)
        r.pop("header", None)  # in `export --format json`; too bulky here
        results.append(r)
    data = data or analysis.load_run(store, run_id)
    doc = {**store.run(run_id), "db": str(store.path), "results": results,
           "findings": [f.as_dict() for f in checks.run_checks(data)]}
    kv_rows = kvserver.rows(results)
    if kv_rows:
        doc["kv_server"] = kv_rows
    return doc


def _print_run(store: Store, run_id: int, as_json: bool) -> None:
    data = analysis.load_run(store, run_id)
    if as_json:
        _print_json(run_document(store, run_id, data))
        return
    extra = []
    if any(c.repetitions > 1 for c in data.configs):
        extra.append(table.repetition_report(data.configs))
    findings = checks.run_checks(data)
    if findings:
        extra.append(f"soundness: {len(findings)} finding{'s' if len(findings) != 1 else ''} "
                     f"({', '.join(f.id for f in findings)}): `isobench check {run_id}` says "
                     "what to do")
    results = store.results(run_id)
    kv_table = kvserver.render(kvserver.rows(results))
    if kv_table:
        extra.insert(0, kv_table)
    print(table.run_report(store.run(run_id), results, str(store.path), extra))


def _print_json(doc: dict) -> None:
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")


def _err(message: str) -> None:
    # One line, always: a multi-line message would break the contract.
    print(f"{PROG}: error: {' '.join(str(message).split())}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        argv = list(sys.argv[1:] if argv is None else argv)
        args = build_parser().parse_args(argv)
        args.argv = [PROG, *argv]
        func: Callable[[argparse.Namespace], int] = args.func
        return func(args)
    except UsageError as e:
        _err(e)
        return EXIT_USAGE
    except DriverError as e:
        _err(e)
        return EXIT_FAILED
    except sqlite3.Error as e:
        _err(f"the store failed: {e}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        _err("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # stdout closed early (`isobench list | head`): not an error worth a traceback.
        sys.stderr.close()
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
