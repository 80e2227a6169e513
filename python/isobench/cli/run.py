"""`isobench run`: benchmarks over mechanisms, each (benchmark, mechanism) in
its own isob process, every result stored as soon as it exists."""

from __future__ import annotations

import argparse
import dataclasses
import secrets
import signal
import sys
from typing import Callable, Sequence

from .common import (EXIT_FAILED, EXIT_OK, Formatter, add_db, add_json, add_wide, choose,
                     db_path, positive_int, positive_seconds, size_list)
from .listing import isolation_entries
from .stored import print_run
from ..core import attackers, benchmarks, validate
from ..analysis import precision, summary
from ..analysis.kit import runs
from ..measure import kvserver, lifecycle, lwcserve, progress, runner, sysinfo
from ..measure.driver import ISOLATION_TIMEOUT, Catalog, Driver, find_isob, repo_root
from ..render.kit import table
from ..errors import UsageError
from ..store import Store


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "run", formatter_class=Formatter,
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
                        + "".join(f"{_named_with(runner.LONG_TIMEOUTS, long)} {long:g}; "
                                  for long in sorted(set(runner.LONG_TIMEOUTS.values())))
                        + f"--quick: {runner.QUICK_TIMEOUT:g})")
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
    add_wide(p)
    add_json(p, "the run")
    add_db(p)
    p.set_defaults(func=cmd_run)


def _named_with(values: dict[str, float], value: float) -> str:
    """The benchmarks whose value is `value`, as a phrase: "cpuwork and memops"."""
    return " and ".join(b for b, v in values.items() if v == value)


def placement_list(text: str) -> tuple[str, ...]:
    items = tuple(p.strip() for p in text.split(",") if p.strip())
    bad = [p for p in items if p not in runner.PLACEMENTS]
    if bad or not items:
        raise argparse.ArgumentTypeError(
            f"{text!r}: placements are a comma-separated list of {', '.join(runner.PLACEMENTS)}")
    return tuple(dict.fromkeys(items))


# How each kind of value of an option of some benchmarks only is parsed
# (core/benchmarks.py names the kind; FLAG takes no value).
OPTION_TYPES = {benchmarks.NAMES: validate.name_list, benchmarks.NUMBERS: validate.number_list,
                benchmarks.PID: validate.number_list}
OPTION_METAVARS = {benchmarks.NAMES: "LIST", benchmarks.NUMBERS: "LIST", benchmarks.PID: "PID"}


def _dest(flag: str) -> str:
    return "bench_" + flag[2:].replace("-", "_")


def _add_bench_options(p: argparse.ArgumentParser) -> None:
    """The options only some benchmarks take, with each benchmark's help,
    values and default from its record (core/benchmarks.py); passed to those
    that take them (isob list --json says which)."""
    g = p.add_argument_group(
        "options of some benchmarks only",
        "Checked against what `isob list --json` lists for each benchmark asked for, and by "
        "`isob BENCH --check`,\nbefore anything runs; an option none of them takes is refused.")
    for flag in benchmarks.option_flags():
        kind = benchmarks.option_kind(flag)
        if kind == benchmarks.FLAG:  # a flag: the benchmark gets it as the value "on"
            g.add_argument(flag, action="store_const", const=("on",),
                           help=benchmarks.option_help(flag), dest=_dest(flag))
            continue
        g.add_argument(flag, type=OPTION_TYPES[kind], metavar=OPTION_METAVARS[kind],
                       help=benchmarks.option_help(flag), dest=_dest(flag))


def _bench_option_values(args: argparse.Namespace, catalog: Catalog, benches: Sequence[str]
                         ) -> tuple[dict[str, tuple[str, ...]], str | None]:
    """The options of some benchmarks only given, with oslat's confinements resolved
    (validate.confinements), and the line that names them when they were not
    asked for."""
    given = {flag: getattr(args, _dest(flag)) for flag in benchmarks.option_flags()}
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


def _in_record_order(own: dict[str, dict[str, tuple[str, ...]]]
                     ) -> dict[str, dict[str, tuple[str, ...]]]:
    """Each benchmark's options in the order its record names them: the
    order isob gets them in and the run's options record them in."""
    out = {}
    for bench, options in own.items():
        record = benchmarks.get(bench)
        order = [o.flag for o in record.options] if record is not None else []
        out[bench] = {f: options[f] for f in sorted(
            options, key=lambda f: order.index(f) if f in order else len(order))}
    return out


def _selection(args: argparse.Namespace, catalog: Catalog) -> tuple[list[str], list[str]]:
    benches = choose("benchmark", args.benchmarks or runner.DEFAULT_SUITE,
                      [b.name for b in catalog.benchmarks])
    asked = validate.mechanisms(args.mechanisms)
    all_mechs = [m.name for m in catalog.mechanisms]
    mechs = choose("mechanism", asked, all_mechs) if asked else all_mechs
    return benches, mechs


def _kvserver_mechanisms(args: argparse.Namespace, catalog: Catalog) -> list[str]:
    """kv-server's servers: memcached, then the -m mechanisms, else its default set
    (those of it this driver has; an unavailable one gives a skipped result)."""
    asked = validate.mechanisms(args.mechanisms)
    known = [m.name for m in catalog.mechanisms]
    mechs = (choose("mechanism", asked, known) if asked else
             [m for m in kvserver.DEFAULT_MECHANISMS if m in known])
    return [kvserver.REFERENCE, *mechs]


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
    own = _in_record_order(validate.bench_options(catalog, benches, given))
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
        print_run(store, run_id, args.json, docs[0] if docs else None, wide=args.wide)
    if target is not None and not args.quiet:
        print(target.text(), file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK
