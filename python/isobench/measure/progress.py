"""Progress of `isobench run` on stderr, with an estimate of the whole run.

The estimate comes from the plan, not from the jobs done so far alone.
At the start every job of the plan gets its planned duration: its
(benchmark, mechanism)'s median in earlier runs of this store with the same
--quick setting, else DEFAULT_SECONDS (quick or full).  As jobs finish,
what is left is

    sum over the jobs still to come of  planned(job) * r,
    r = (measured + w) / (planned + w)

where measured and planned are the seconds of the jobs finished so far,
measured and as planned, and w is the mean planned job: the plan counts as
one job's worth of evidence.  So the jobs to come keep the plan's weights
(a long job stays long), and the whole plan is corrected by how this run's
jobs compare with it so far; one job that is much shorter or longer than
planned moves the estimate at most by the factor r it earns (halving it at
most after one job), not to that job's duration times the rest, and as
jobs finish r becomes the measured ratio.  A job that only skipped (no
PKU, say) is left out of r: the instant it took says nothing of the plan.
A job whose (benchmark,
mechanism) has already finished in this run is expected to take the mean
of those runs: its repetitions.  The estimate is a guide, never a
measurement: it appears on stderr only and nothing is stored or computed
from it.

Two displays share that estimate:

- Plain (stderr is not a terminal, as in CI or a pipe): one stable line per
  job, "[3/8] switch -m thread ... 12 results, 4.1 s", the estimate once at
  the start and the total time at the end.
- Bar (stderr is a terminal): a live bar of rich (jobs done out of the plan,
  elapsed, time left), the current job with its results as isob prints
  them, and one line per finished job that failed or skipped; the total
  time at the end, as hyperfine and pyperf print it.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence, TextIO

from ..core.text import wrap
from ..core.records import Result

# Seconds a job is expected to take before anything is known about it:
# about what one (benchmark, mechanism) of the default suite takes here.
DEFAULT_SECONDS = {True: 5.0, False: 30.0}

# Refreshes of the live bar per second: enough for a clock, cheap.
REFRESH_PER_SECOND = 4

Key = tuple[str, str]  # (benchmark, mechanism name)


def fmt_duration(seconds: float) -> str:
    """"42 s", "3 min 05 s", "1 h 02 min": the precision a person plans by."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


@dataclass
class Estimator:
    """Expected durations of the plan's jobs, refined as jobs finish.

    counts: how many jobs of each key the plan holds; history: durations
    of each key in earlier runs (seconds)."""

    counts: Mapping[Key, int]
    history: Mapping[Key, list[float]] = field(default_factory=dict)
    quick: bool = False
    observed: dict[Key, list[float]] = field(default_factory=dict)
    # (measured, planned) seconds of the finished jobs that ran: the
    # evidence of r.  A job that only skipped (no PKU, say) took no time
    # its plan could be judged by: its key's other jobs are expected to
    # skip as fast, and r leaves it out.
    judged: list[tuple[float, float]] = field(default_factory=list)

    def observe(self, key: Key, seconds: float, ran: bool = True) -> None:
        self.observed.setdefault(key, []).append(seconds)
        if ran:
            self.judged.append((seconds, self.planned(key)))

    def planned(self, key: Key) -> float:
        """The plan's duration of one job of key: its median in earlier runs,
        else the default; fixed for the whole run."""
        past = self.history.get(key)
        return statistics.median(past) if past else DEFAULT_SECONDS[self.quick]

    def ratio(self) -> float:
        """Measured over planned time of the jobs finished so far, the plan
        counted as one mean job of its own (w in the module's rule)."""
        jobs = sum(self.counts.values())
        w = (sum(n * self.planned(k) for k, n in self.counts.items()) / jobs if jobs
             else DEFAULT_SECONDS[self.quick])
        measured = sum(m for m, _ in self.judged)
        planned = sum(p for _, p in self.judged)
        return (measured + w) / (planned + w) if planned + w > 0 else 1.0

    def expected(self, key: Key) -> float:
        """The expected duration of one job of key (see the module's rule)."""
        mine = self.observed.get(key)
        if mine:
            return sum(mine) / len(mine)
        return self.planned(key) * self.ratio()

    def remaining(self) -> float:
        """Expected seconds of every job not yet finished."""
        r = self.ratio()
        total = 0.0
        for k, n in self.counts.items():
            mine = self.observed.get(k, ())
            each = sum(mine) / len(mine) if mine else self.planned(k) * r
            total += max(0, n - len(mine)) * each
        return total

    @property
    def from_history(self) -> bool:
        return any(self.history.get(k) for k in self.counts)


def ran(out) -> bool:
    """Whether a finished job measured something (or failed trying), as
    opposed to skipping at once: only those tell how the plan fares."""
    return not out.results or any(r.status != "skipped" for r in out.results)


class OutputClosed(Exception):
    """The stream the progress goes to was closed by its reader (EPIPE)."""


class Progress:
    """The plain display (also the base of the bar): stable lines on stderr.

    run_jobs calls start(job) before each job, result(r) for each record as
    isob prints it, and done(outcome) after it; finish() at the end."""

    def __init__(self, total: int, stream: TextIO | None = sys.stderr, quiet: bool = False,
                 estimator: Estimator | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.total = total
        self.stream = None if quiet else stream
        self.estimator = estimator
        self.clock = clock
        self.i = 0
        self.t0 = 0.0
        self.run_t0 = clock()
        self.results = 0
        self.job = None
        self.first_estimate: float | None = None
        self.note: str | None = None  # said after the plan line (make())

    # -- the run --

    def __enter__(self) -> "Progress":
        self.run_t0 = self.clock()
        if self.estimator is not None:
            self.first_estimate = self.estimator.remaining()
            self._write(wrap(self.plan_line()) + "\n")
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop any live display (the bar); idempotent."""

    def plan_line(self) -> str:
        est = self.first_estimate or 0.0
        basis = ("from earlier runs in this store" if self.estimator and self.estimator.from_history
                 else "a first guess: no earlier run in this store")
        return (f"plan: {self.total} job{'s' if self.total != 1 else ''}, about "
                f"{fmt_duration(est)} ({basis}; refined as jobs finish)"
                + (f"; {self.note}" if self.note else ""))

    def summary_line(self) -> str:
        took = self.clock() - self.run_t0
        est = (f" (estimated at the start: {fmt_duration(self.first_estimate)})"
               if self.first_estimate is not None else "")
        return f"{self.i} of {self.total} jobs in {fmt_duration(took)}{est}"

    def finish(self) -> None:
        """The total time of the run, as its last progress line."""
        self.close()
        self._write(self.summary_line() + "\n")

    def extend(self, jobs: Sequence, why: str) -> None:
        """More jobs join the run after its plan (run --target-ci): the total
        and the estimate grow by them, and a line says why."""
        self.total += len(jobs)
        if self.estimator is not None:
            counts = dict(self.estimator.counts)
            for job in jobs:
                key = self._key(job)
                counts[key] = counts.get(key, 0) + 1
            self.estimator.counts = counts
        self._say(f"{why}: {len(jobs)} more job{'s' if len(jobs) != 1 else ''}")

    def _say(self, text: str) -> None:
        self._write(text + "\n")

    def left(self) -> float | None:
        """Seconds the rest of the plan is expected to take, the current job's
        elapsed time counted off its own expected duration."""
        if self.estimator is None:
            return None
        rest = self.estimator.remaining()
        if self.job is not None:
            key = self._key(self.job)
            took, want = self.clock() - self.t0, self.estimator.expected(key)
            rest -= min(took, want)
            if took > want:
                # Running past its estimate: the same key's jobs still to
                # come (its other repetitions) will take at least as long.
                later = self.estimator.counts.get(key, 0) - len(
                    self.estimator.observed.get(key, ())) - 1
                rest += max(0, later) * (took - want)
        return max(0.0, rest)

    # -- one job --

    @staticmethod
    def _key(job) -> Key:
        return job.benchmark, job.mechanism_name

    def start(self, job) -> None:
        self.i += 1
        self.t0 = self.clock()
        self.results = 0
        self.job = job
        self._write(f"[{self.i}/{self.total}] {job.label} ... ")

    def result(self, r: Result) -> None:
        self.results += 1

    def done(self, out) -> None:
        took = self.clock() - self.t0
        if self.estimator is not None:
            self.estimator.observe(self._key(out.job), took, ran=ran(out))
        self.job = None
        n = len(out.results)
        text = f"{n} result{'s' if n != 1 else ''}, {took:.1f} s"
        left = self.left()
        if left is not None and self.i < self.total:
            text += f", about {fmt_duration(left)} left"
        bad = [r for r in out.results if r.status != "ok"]
        if bad:
            text += f" -- {bad[-1].status.upper()}: {bad[-1].reason}"
        self._write(text + "\n")

    def _write(self, text: str) -> None:
        if self.stream is not None:
            try:
                self.stream.write(text)
                self.stream.flush()
            except BrokenPipeError:
                # The reader of the progress went away (`isobench run 2>&1 |
                # head`): the run stops as a pipeline's writer does, marked
                # interrupted (lifecycle.record), instead of dying mid-job.
                self.stream = None
                raise OutputClosed() from None


class BarProgress(Progress):
    """The live bar of a terminal: rich's Live display, refreshed by its own
    thread, rendering this object (so the clock and the estimate are read at
    every refresh, and a long job's bar moves while isob works)."""

    def __init__(self, total: int, stream: TextIO, estimator: Estimator,
                 clock: Callable[[], float] = time.monotonic, console=None):
        super().__init__(total, stream, False, estimator, clock)
        from rich.console import Console
        self.console = console or Console(file=stream, highlight=False)
        self.live = None
        self.done_seconds = 0.0
        self.expected_results: dict[Key, int] = {}

    def __enter__(self) -> "BarProgress":
        from rich.live import Live
        self.run_t0 = self.clock()
        self.first_estimate = self.estimator.remaining()
        self.console.print(self.plan_line(), markup=False)
        self.live = Live(self, console=self.console, refresh_per_second=REFRESH_PER_SECOND,
                         transient=True)
        self.live.start()
        return self

    def close(self) -> None:
        if self.live is not None:
            live, self.live = self.live, None
            live.stop()

    def start(self, job) -> None:
        self.i += 1
        self.t0 = self.clock()
        self.results = 0
        self.job = job

    def done(self, out) -> None:
        took = self.clock() - self.t0
        key = self._key(out.job)
        self.estimator.observe(key, took, ran=ran(out))
        self.expected_results[key] = len(out.results)
        self.done_seconds += took
        self.job = None
        bad = [r for r in out.results if r.status != "ok"]
        if bad:
            # Finished jobs scroll above the bar only when they say something.
            self.console.print(f"[{self.i}/{self.total}] {out.job.label}: "
                               f"{bad[-1].status.upper()}: {bad[-1].reason}", markup=False,
                               highlight=False)

    def finish(self) -> None:
        self.close()
        self.console.print(self.summary_line(), markup=False)

    def _say(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False)

    def __rich__(self):
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text
        left = self.left() or 0.0
        elapsed = self.clock() - self.run_t0
        current = 0.0 if self.job is None else min(self.clock() - self.t0,
                                                   self.estimator.expected(self._key(self.job)))
        done = self.done_seconds + current
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column(width=30)
        grid.add_column(no_wrap=True)
        grid.add_row(f"{self.i - (self.job is not None)}/{self.total} jobs",
                     ProgressBar(total=max(done + left, 1e-9), completed=done),
                     f"{fmt_duration(elapsed)} elapsed, about {fmt_duration(left)} left")
        if self.job is None:
            return grid
        want = self.expected_results.get(self._key(self.job))
        got = f"{self.results}/{want}" if want else str(self.results)
        return Group(grid, Text(f"  now: {self.job.label}: {got} results, "
                                f"{fmt_duration(self.clock() - self.t0)}", no_wrap=True,
                                overflow="ellipsis"))


def make(total: int, estimator: Estimator | None, quiet: bool = False,
         stream: TextIO = sys.stderr, note: str | None = None) -> Progress:
    """The display for this stderr: the bar on a terminal, else plain lines.
    note, when given, follows the plan line (what the estimate leaves out)."""
    if not quiet and estimator is not None and _is_terminal(stream):
        shown: Progress = BarProgress(total, stream, estimator)
    else:
        shown = Progress(total, stream, quiet, estimator)
    shown.note = note
    return shown


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False
