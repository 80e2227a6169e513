"""Running benchmarks: one ``isob`` child per (benchmark, mechanism).

Each child runs in its own process group with a time-out (proc.py).  Its
result lines become Result records and are handed to the caller (who stores
them) one by one, as they arrive.  Whatever goes wrong with the child -- a
crash, a hang, a line that is not JSON, an exit status that contradicts its
results -- becomes one extra `failed` record that says what happened; the
results printed before stay.  A mechanism that is not available here gives a
`skipped` record (isob prints it and exits 4), which is not a failure.

Benchmarks that need no mechanism (pingpong measures an OS primitive) run
once, without -m; their results carry mechanism NO_MECHANISM ("-") and the
primitive in params.

Repetitions (`run --repeat N`): every (benchmark, mechanism) runs in N fresh
isob processes, so that what differs between processes (address layout,
where the kernel put the pages, which CPU state a process met) shows up as
spread between repetitions instead of hiding in one lucky or unlucky
process.  Within each repetition the order of the mechanisms is shuffled
with a seeded generator, so that drift over the run (thermal, background
load) does not always favour the mechanism that runs first; the seed is
recorded with the run.  One repetition keeps the order given.

The plan is generated lazily (Plan): `--repeat 1000` over every mechanism is
a few numbers, not a list of every job, and the order the jobs actually ran
in is recorded job by job (the store's jobs table) as they start.

Confinements (oslat --confine) are shuffled like mechanisms: each one given
(C or C:VARIANT) is a job of its own per repetition, in the seeded order, so
that a hang in one costs only its job and no slow confinement always runs
first or last.  pingpong's --protect list is one job per repetition, since
isob measures `none` first in the same process to give every other
protection its delta; the list it is given is shuffled per repetition.

Options only some benchmarks take (--primitive, --payload, --depth, ...) are
validated beforehand (core/validate.py, `isob BENCH --check`) and reach only the
benchmarks that take them (Options.bench_args).
"""

from __future__ import annotations

import os
import platform

import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Mapping, Sequence, TextIO

from . import kvserver, lwcmonitor, lwcserve, proc
from . import progress as progress_
from .driver import EXIT_FAILED, EXIT_OK, EXIT_SKIP, EXIT_USAGE, Catalog, Driver, describe_exit
from ..core import benchmarks
from ..core.records import NO_MECHANISM, Header, ProtocolError, Result, parse_line
from ..errors import UsageError
from ..store import now_ms

# The benchmarks `isobench run` runs when none are named.  Grows as
# benchmarks are added; each must be quick enough for a default run.
DEFAULT_SUITE = ("switch", "kv")

PLACEMENTS = ("same-cpu", "cross-cpu", "unpinned")
# isob's counter back-ends (--counter): perf events, the CPU's own time-stamp
# counter (tsc on x86, cntvct on arm64: isob refuses the other one), and
# clock_gettime; and perf's counting scopes (--scope).
TIMER = "cntvct" if platform.machine() in ("aarch64", "arm64") else "tsc"
COUNTERS = ("perf", TIMER, "clock")
SCOPES = ("thread", "cpu")

# Fresh isob processes per (benchmark, mechanism) when --repeat is not
# given.  The repetition is the unit every interval and test rests on: 5
# gives a t interval (4 degrees of freedom) and is what `compare` needs a
# side for a verdict.  --quick keeps 3, so that `make run` stays within a
# few minutes: an interval, but no verdict between runs.
DEFAULT_REPEAT = 5
QUICK_REPEAT = 3

# Benchmarks whose experiment asks for more repetitions than DEFAULT_REPEAT
# (their record's repeat: refmon, lwC's 10): they get this many when --repeat
# is not given (and --quick is not: a quick run keeps QUICK_REPEAT).
BENCHMARK_REPEAT = {b.name: b.repeat for b in benchmarks.RECORDS if b.repeat}

# Time-out of one isob child (seconds): generous, since a full switch run
# over all placements takes about a minute on slow machines; --quick runs
# a quarter of the iterations.
DEFAULT_TIMEOUT = 300.0
QUICK_TIMEOUT = 180.0

# Benchmarks whose full run lasts longer than DEFAULT_TIMEOUT by design
# (their record's timeout: cpuwork, memops): this is their time-out unless
# --timeout or --quick is given.
LONG_TIMEOUTS = {b.name: b.timeout for b in benchmarks.RECORDS if b.timeout}

# Which benchmarks read the options of `isobench run` that isob does not
# list per benchmark (isob lists --payload, --depth, ...: core/validate.py).  An
# option that no benchmark asked for reads is refused (validate.scoped), and
# each reaches only the benchmarks that read it (isob_args).
#
# --sizes: the benchmarks whose record says they read it where isob does
# not list it (kv's data sizes, memops' block sizes; delegate lists it).
SIZED = tuple(b.name for b in benchmarks.RECORDS if b.sized)
# --placement: the benchmarks that place a second context or a server (their
# record says so); sched refuses it (where its workers run is its --cpus),
# and lwc-create, lwc-sign, refmon and inspect have nothing to place.
PLACED = tuple(b.name for b in benchmarks.RECORDS if b.placed)
# --seconds: how long a client loads each server, in the benchmarks that
# Python drives (kvserver.py, lwcserve.py).
TIMED = (kvserver.BENCHMARK, *lwcserve.BENCHMARKS)
# --n, --counter and --scope are isob's: every benchmark but those Python drives.
ISOB_OPTIONS = ("--n", "--counter", "--scope")
# -m: the benchmarks that need a mechanism (the catalog says which).
MECHANISM_OPTION = "-m"


def reads(bench, option: str) -> bool:
    """Whether `bench` (a driver.Benchmark) reads `option` of `isobench run`:
    one of the options above, where isob does not list it per benchmark."""
    if option == "--sizes":
        return bench.name in SIZED or bench.takes(option)
    if option == "--placement":
        return bench.name in PLACED
    if option == "--seconds":
        return bench.name in TIMED
    if option in ISOB_OPTIONS:
        return bench.name not in TIMED
    if option == MECHANISM_OPTION:
        return bench.needs_mechanism
    raise ValueError(f"{option} is not an option runner.reads knows")


@dataclass(frozen=True)
class Job:
    benchmark: str
    mechanism: str | None  # None: the benchmark takes no mechanism
    repetition: int = 1    # 1..repeat
    repeat: int = 1
    args: tuple[str, ...] = ()  # this job's own isob options (oslat: --confine C)

    @property
    def label(self) -> str:
        text = f"{self.benchmark} -m {self.mechanism}" if self.mechanism else self.benchmark
        if self.args:
            text += " " + " ".join(self.args)
        return text + (f" (rep. {self.repetition}/{self.repeat})" if self.repeat > 1 else "")

    @property
    def mechanism_name(self) -> str:
        return self.mechanism or NO_MECHANISM


@dataclass(frozen=True)
class Options:
    quick: bool = False
    n: int | None = None
    placement: tuple[str, ...] | None = None
    timeout: float = DEFAULT_TIMEOUT
    seconds: float | None = None  # kv-server: client run time (default: kvserver's)
    sizes: tuple[str, ...] | None = None  # kv, memops: sizes as isob --sizes takes them
    timeout_given: bool = False  # --timeout was passed: no benchmark gets its own
    # Per benchmark, the validated options only it takes, as isob arguments
    # (--primitive, --payload, --depth, ...: core/validate.py).
    bench_args: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    counter: str | None = None  # isob --counter (default: isob's best available)
    scope: str | None = None  # isob --scope (default: isob's, thread)


@dataclass
class JobOutcome:
    job: Job
    results: list[Result] = field(default_factory=list)
    header: Header | None = None
    elapsed: float = 0.0

    @property
    def failed(self) -> bool:
        return any(r.status == "failed" for r in self.results)


# An option whose values a benchmark's jobs divide among themselves or
# share: (flag, values), e.g. ("--confine", ("none", "ptrace")).
Split = tuple[str, Sequence[str]]


class Plan:
    """The jobs of a run, generated as they are needed (see plan())."""

    def __init__(self, catalog: Catalog, benchmarks: Sequence[str], mechanisms: Sequence[str],
                 repeat: int = 1, seed: int = 0,
                 per_benchmark: Mapping[str, Sequence[str]] | None = None,
                 repeat_by_benchmark: Mapping[str, int] | None = None,
                 splits: Mapping[str, Split] | None = None,
                 orders: Mapping[str, Split] | None = None):
        self.benchmarks = tuple(benchmarks)
        self.repeat = repeat
        self.seed = seed
        self._repeats = {b: (repeat_by_benchmark or {}).get(b, repeat) for b in self.benchmarks}
        # Per benchmark: None when it takes no mechanism, else its mechanisms;
        # the values one job each (splits) and those one job takes in a
        # shuffled order (orders).
        self._mechs: list[tuple[str, tuple[str, ...] | None, Split | None, Split | None]] = []
        for name in self.benchmarks:
            bench = catalog.benchmark(name)
            split = (splits or {}).get(name)
            order = (orders or {}).get(name)
            if bench is not None and not bench.needs_mechanism:
                self._mechs.append((name, None, split, order))
            else:
                self._mechs.append((name, tuple((per_benchmark or {}).get(name, mechanisms)),
                                    split, order))

    def repeat_of(self, benchmark: str) -> int:
        return self._repeats.get(benchmark, self.repeat)

    def __len__(self) -> int:
        return sum(self.repeat_of(name) * (1 if m is None else len(m))
                   * (len(s[1]) if s else 1) for name, m, s, _ in self._mechs)

    def counts(self) -> dict[tuple[str, str], int]:
        """How many jobs each (benchmark, mechanism name) has in the plan,
        without listing them (the progress estimate rests on this)."""
        out: dict[tuple[str, str], int] = {}
        for name, mechs, split, _ in self._mechs:
            each = self.repeat_of(name) * (len(split[1]) if split else 1)
            for m in (NO_MECHANISM,) if mechs is None else mechs:
                out[(name, m)] = out.get((name, m), 0) + each
        return out

    def __iter__(self) -> Iterator[Job]:
        rng = random.Random(self.seed)
        for rep in range(1, max(self._repeats.values(), default=self.repeat) + 1):
            for name, mechs, split, order in self._mechs:
                repeat = self.repeat_of(name)
                if rep > repeat:
                    continue
                for m in self._shuffled(rng, mechs, repeat) if mechs is not None else [None]:
                    for args in self._args(rng, split, order, repeat):
                        yield Job(name, m, rep, repeat, args)

    def more(self, pairs: Iterable[tuple[str, str]], done: Mapping[tuple[str, str], int],
             round_: int) -> list[Job]:
        """One more repetition of each (benchmark, mechanism name) in pairs, in
        the plan's order of benchmarks and a shuffled order of mechanisms
        (random.Random((seed, round_)): reproducible like the plan).  done
        gives the repetitions each pair already has; the new ones are numbered
        after them, so that every repetition stays a fresh process of its own."""
        want = set(pairs)
        rng = random.Random(f"{self.seed}:{round_}")
        jobs = []
        for name, mechs, split, order in self._mechs:
            for m in self._shuffled(rng, mechs, 2) if mechs is not None else [None]:
                key = (name, m or NO_MECHANISM)
                if key not in want:
                    continue
                rep = done.get(key, self.repeat_of(name)) + 1
                for args in self._args(rng, split, order, 2):
                    jobs.append(Job(name, m, rep, rep, args))
        return jobs

    @staticmethod
    def _shuffled(rng: random.Random, items: Sequence[str], repeat: int) -> list[str]:
        # One repetition keeps the order given.
        out = list(items)
        if repeat > 1:
            rng.shuffle(out)
        return out

    def _args(self, rng: random.Random, split: Split | None,
              order: Split | None, repeat: int) -> list[tuple[str, ...]]:
        shared = (order[0], ",".join(self._shuffled(rng, order[1], repeat))) if order else ()
        if split is None:
            return [shared]
        return [(split[0], v, *shared) for v in self._shuffled(rng, split[1], repeat)]


def plan(catalog: Catalog, benchmarks: Sequence[str], mechanisms: Sequence[str],
         repeat: int = 1, seed: int = 0,
         per_benchmark: Mapping[str, Sequence[str]] | None = None,
         repeat_by_benchmark: Mapping[str, int] | None = None,
         splits: Mapping[str, Split] | None = None,
         orders: Mapping[str, Split] | None = None) -> Plan:
    """The jobs of a run: repetition-major, then benchmark in the order given,
    then mechanism (in the order given for one repetition, else shuffled per
    repetition and benchmark with random.Random(seed)).  per_benchmark gives
    some benchmarks their own mechanism list (kv-server: memcached first,
    then its default set unless -m named some); repeat_by_benchmark gives
    some benchmarks their own number of repetitions (BENCHMARK_REPEAT).
    splits gives a benchmark one job per value of an option (oslat: per
    confinement), shuffled the same way; orders gives its one job an
    option's values in an order shuffled the same way (pingpong:
    --protect).  Iterating twice gives the same jobs."""
    return Plan(catalog, benchmarks, mechanisms, repeat, seed, per_benchmark,
                repeat_by_benchmark, splits, orders)


# Options whose values divide a benchmark's jobs among them (one job per
# confinement), and those whose values one job takes in a shuffled order.
SPLIT_OPTIONS = ("--confine",)
ORDER_OPTIONS = ("--protect",)


def pass_through(per_bench: Mapping[str, Mapping[str, Sequence[str]]]
                 ) -> tuple[dict[str, tuple[str, ...]], dict[str, Split], dict[str, Split]]:
    """The validated options of each benchmark (validate.bench_options) as
    (Options.bench_args, plan splits, plan orders)."""
    args: dict[str, tuple[str, ...]] = {}
    splits: dict[str, Split] = {}
    orders: dict[str, Split] = {}
    for bench, options in per_bench.items():
        flat: list[str] = []
        for option, values in options.items():
            if option in SPLIT_OPTIONS:
                splits[bench] = (option, tuple(values))
            elif option in ORDER_OPTIONS:
                orders[bench] = (option, tuple(values))
            else:
                flat += [option, ",".join(values)]
        if flat:
            args[bench] = tuple(flat)
    return args, splits, orders


def check_options(driver: Driver, catalog: Catalog, benchmarks: Sequence[str],
                  mechanisms: Sequence[str], opts: Options, splits: Mapping[str, Split],
                  orders: Mapping[str, Split]) -> None:
    """Ask isob, once per benchmark, whether it takes the options its jobs will
    get (`isob BENCH ... --check`), so that a value only the benchmark can
    judge is refused before a store is opened.  UsageError with isob's line."""
    for name in benchmarks:
        bench = catalog.benchmark(name)
        if name == lwcserve.SERVE:
            why = lwcmonitor.check(lwcmonitor.parse(opts.bench_args.get(name, ())))
            if why:
                raise UsageError(why)
        if bench is None or name == kvserver.BENCHMARK or name in lwcserve.BENCHMARKS:
            continue
        mech = mechanisms[0] if bench.needs_mechanism and mechanisms else None
        extra: tuple[str, ...] = ()
        for table in (splits, orders):
            if name in table:
                extra += (table[name][0], ",".join(table[name][1]))
        driver.check(isob_args(Job(name, mech, args=extra), opts))


def isob_args(job: Job, opts: Options) -> list[str]:
    args = [job.benchmark]
    if job.mechanism:
        args += ["-m", job.mechanism]
    if opts.quick:
        args.append("--quick")
    if opts.n is not None:
        args += ["--n", str(opts.n)]
    if opts.placement and job.benchmark in PLACED:
        args += ["--placement", ",".join(opts.placement)]
    if opts.counter:
        args += ["--counter", opts.counter]
    if opts.scope:
        args += ["--scope", opts.scope]
    if opts.sizes and job.benchmark in SIZED:
        args += ["--sizes", ",".join(opts.sizes)]
    args += opts.bench_args.get(job.benchmark, ())
    args += job.args
    return args


class _Collector:
    """Turns isob's stdout lines into records as they arrive."""

    def __init__(self, job: Job, on_result: Callable[[Result, str, str], None]):
        self.job = job
        self.on_result = on_result
        self.outcome = JobOutcome(job)
        self.bad_lines: list[str] = []
        # A result was measured between the line before it (or the job's
        # start) and its own line: isob prints each one as soon as it is done.
        self.mark = now_ms()

    def line(self, text: str) -> None:
        if not text.strip():
            return
        try:
            obj = parse_line(text)
        except ProtocolError as e:
            self.bad_lines.append(str(e))
            return
        if obj["type"] == "header":
            self._header(obj)
        elif obj["type"] == "result":
            self._result(obj)
        # Other line types are ignored: a newer isob may add some.

    def _header(self, obj: dict) -> None:
        self.mark = now_ms()
        try:
            self.outcome.header = Header.from_line(obj)
        except ValueError as e:
            self.bad_lines.append(f"invalid header line ({e})")

    def _emit(self, r: Result) -> None:
        started, self.mark = self.mark, now_ms()
        self.outcome.results.append(r)
        self.on_result(r, started, self.mark)

    def _result(self, obj: dict) -> None:
        # The job, not the line, names benchmark and mechanism: the record
        # must say what was asked for even if isob spells it differently.
        obj = {**obj, "benchmark": self.job.benchmark}
        try:
            r = Result.from_line(obj, self.outcome.header, mechanism=self.job.mechanism_name)
        except ValueError as e:
            self.bad_lines.append(f"invalid result line ({e})")
            return
        self._emit(r)

    def record(self, status: str, reason: str) -> None:
        self._emit(Result.failure(self.job.benchmark, self.job.mechanism_name, reason,
                                  self.outcome.header, status=status))


def job_timeout(job: Job, opts: Options) -> float:
    """The time-out of one job: --timeout, else the benchmark's own for a full run."""
    if opts.timeout_given or opts.quick:
        return opts.timeout
    return max(opts.timeout, LONG_TIMEOUTS.get(job.benchmark, 0.0))


# The prefix of each job's own temporary folder (run_job), beside the
# caller's TMPDIR, so that tests run on the same file system either way.
JOB_FOLDER_PREFIX = "isobench-job-"


def run_job(driver: Driver, job: Job, opts: Options,
            on_result: Callable[[Result, str, str], None]) -> JobOutcome:
    """Run one isob child; every record (including the failure record) goes to
    on_result with the times that bound its measurement."""
    col = _Collector(job, on_result)
    timeout = job_timeout(job, opts)
    # The folders isob makes for its tests (pingpong's, oslat's, ...) go
    # into one of the job's own, which this process outlives and removes
    # even when isob was killed before it could (SIGKILL, a time-out).
    try:
        job_folder = tempfile.TemporaryDirectory(prefix=JOB_FOLDER_PREFIX,
                                                 dir=os.environ.get("TMPDIR") or None,
                                                 ignore_cleanup_errors=True)
    except OSError as e:
        col.record("failed", f"cannot make the job's temporary folder in "
                             f"{os.environ.get('TMPDIR') or tempfile.gettempdir()}: "
                             f"{e.strerror or e}")
        return col.outcome
    try:
        with job_folder as folder:
            ex = proc.run_lines(driver.argv(*isob_args(job, opts)), timeout=timeout,
                                on_line=col.line, env={**os.environ, "TMPDIR": folder})
    except OSError as e:
        col.record("failed", f"cannot run {driver.path}: {e.strerror or e}")
        return col.outcome
    col.outcome.elapsed = ex.elapsed
    verdict = judge_exit(ex, timeout, col.outcome.results, col.bad_lines)
    if verdict is not None:
        col.record(*verdict)
    return col.outcome


def run_kvserver_job(driver: Driver, job: Job, opts: Options,
                     on_result: Callable[[Result, str, str], None]) -> JobOutcome:
    """One server of the kv-server benchmark (memcached or isob serve -m M)."""
    out = JobOutcome(job)
    t0, started = time.monotonic(), now_ms()
    r = kvserver.measure(job.mechanism_name, str(driver.path),
                         kvserver.seconds_for(opts.quick, opts.seconds))
    out.elapsed = time.monotonic() - t0
    out.results.append(r)
    on_result(r, started, now_ms())
    return out


def run_lwcserve_job(driver: Driver, job: Job, opts: Options,
                     on_result: Callable[[Result, str, str], None]) -> JobOutcome:
    """One repetition of lwc-serve or lwc-conns: every point of its sweep."""
    out = JobOutcome(job)
    t0 = time.monotonic()
    own = lwcmonitor.parse(opts.bench_args.get(job.benchmark, ()))
    if job.benchmark == lwcserve.SERVE and lwcmonitor.wanted(own):
        out.results = lwcmonitor.run(str(driver.path), opts.quick, opts.seconds, own, on_result)
    else:
        out.results = lwcserve.run(job.benchmark, str(driver.path), opts.quick, opts.seconds,
                                   on_result)
    out.elapsed = time.monotonic() - t0
    return out


def judge_exit(ex: proc.ChildExit, timeout: float, results: Sequence[Result],
               bad_lines: Sequence[str]) -> tuple[str, str] | None:
    """(status, reason) of the extra record a child's ending calls for, or None.

    isob's exit status must agree with its lines: 0 all ok, 1 some result
    failed, 4 skipped.  Anything else is a failure of its own.
    """
    statuses = {r.status for r in results}
    reasons: list[str] = []
    status = "failed"
    died = describe_exit(ex, timeout, len(results))
    if died:
        reasons.append(died)
    elif ex.returncode == EXIT_SKIP:
        if "skipped" not in statuses:
            status = "skipped"
            reasons.append(f"isob skipped: {ex.stderr_tail() or 'no reason given'}")
    elif ex.returncode == EXIT_USAGE:
        reasons.append(f"isob rejected its arguments (exit 2): {ex.stderr_tail() or 'no message'}")
    elif ex.returncode == EXIT_FAILED and "failed" not in statuses:
        reasons.append(f"isob exited with status 1 without a failed result: "
                       f"{ex.stderr_tail() or 'no message'}")
    elif ex.returncode not in (EXIT_OK, EXIT_FAILED):
        reasons.append(f"isob exited with status {ex.returncode}: "
                       f"{ex.stderr_tail() or 'no message'}")
    elif not results and not bad_lines:
        reasons.append("isob printed no results")
    if bad_lines:
        status = "failed"
        more = f" (and {len(bad_lines) - 1} more)" if len(bad_lines) > 1 else ""
        reasons.append(f"isob printed a bad line: {bad_lines[0]}{more}")
    return (status, "; ".join(reasons)) if reasons else None


class Sink:
    """What run_jobs reports as it happens; this one ignores everything.  The
    run command's sink (lifecycle.py) stores it."""

    def job_started(self, job: Job, seq: int) -> None:
        """Before job number seq (1, 2, ...) starts."""

    def result(self, r: Result, job: Job, started: str, finished: str) -> None:
        """Each record as soon as it exists, with the times that bound it."""

    def header(self, h: Header) -> None:
        """The first header of the run (the environment takes the counter backend
        and the TSC frequency from it)."""

    def job_finished(self, job: Job, outcome: JobOutcome) -> None:
        """After the job's processes are gone."""


def run_jobs(driver: Driver, jobs: Iterable[Job], opts: Options, sink: Sink,
             progress: "progress_.Progress | None" = None, first_seq: int = 1) -> bool:
    """Run every job in turn, numbered from first_seq; True when any record
    failed.  The sink hears of the first header only when first_seq is 1
    (later calls continue a run that already has it)."""
    failed = False
    seen_header = first_seq > 1
    for seq, job in enumerate(jobs, first_seq):
        sink.job_started(job, seq)
        if progress:
            progress.start(job)
        def on_result(r, started, finished, job=job):
            sink.result(r, job, started, finished)
            if progress:
                progress.result(r)

        if job.benchmark == kvserver.BENCHMARK:
            # Not an isob subcommand: servers and client are driven from Python.
            out = run_kvserver_job(driver, job, opts, on_result)
        elif job.benchmark in lwcserve.BENCHMARKS:
            out = run_lwcserve_job(driver, job, opts, on_result)
        else:
            out = run_job(driver, job, opts, on_result)
        if progress:
            progress.done(out)
        if out.header is not None and not seen_header:
            seen_header = True
            sink.header(out.header)
        sink.job_finished(job, out)
        failed = failed or out.failed
    return failed
