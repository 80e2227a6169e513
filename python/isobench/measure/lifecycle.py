"""The life of one `isobench run`: begun, recorded job by job, ended.

A run ends in one of three ways, and the store always says which:

- ``ok`` or ``failed``: every job ran (failed: some result failed);
- ``interrupted``: SIGINT, SIGTERM or SIGHUP stopped it.  The first of these
  signals raises Interrupted wherever the run is; every process the run
  started is killed (their process groups as each job unwinds, then every
  remaining descendant: the run is a child subreaper, so orphans of its
  children come back to it); what finished stays stored; the run is marked
  interrupted with the signal's name.  Later signals are ignored while this
  happens, so that the cleanup itself is not cut short;
- a run whose process died without a word (SIGKILL, a power cut) stays
  ``running`` until the next isobench opens the store and finds that its
  owner process is gone (store.Store.open, core/owner.py).

Each job is recorded as it starts (benchmark, mechanism, repetition, its
place in the order) and as it ends, with the machine's load around it
(load.py); each result with the times that bound its measurement.
"""

from __future__ import annotations

import signal
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from . import load, proc, runner, sysinfo
from . import progress as progress_
from .driver import Driver
from ..core.records import Header, Result
from ..store import Store

# The signals that stop a run cleanly.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """A stop signal arrived.  A KeyboardInterrupt, so that every cleanup path
    written for Ctrl-C (proc.run_lines kills its child's group) runs for all
    three signals."""

    def __init__(self, signo: int):
        super().__init__(signo)
        self.signo = signo

    @property
    def name(self) -> str:
        return proc.signal_name(self.signo)

    @property
    def exit_code(self) -> int:
        # The shell's convention for a process ended by a signal.
        return 128 + self.signo


class RunInterrupted(Exception):
    """The run was stopped by a signal and marked interrupted in the store."""

    def __init__(self, run_id: int, signal_: Interrupted, db: object = None):
        super().__init__(f"run {run_id} interrupted by {signal_.name}")
        self.run_id = run_id
        self.signal = signal_
        self.db = db


@dataclass
class Guard:
    """While closing is set, stop signals are ignored: the run is being
    written as ended and must not be cut in the middle."""
    closing: bool = False
    received: int | None = None


@contextmanager
def stop_signals() -> Iterator[Guard]:
    """Turn the first stop signal into Interrupted; ignore the ones after it."""
    guard = Guard()

    def handler(signo: int, _frame) -> None:
        if guard.received is not None or guard.closing:
            return
        guard.received = signo
        raise Interrupted(signo)

    previous = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    try:
        yield guard
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


class StoreSink(runner.Sink):
    """Stores jobs and results of one run as they happen, with the load of the
    machine around each job; after each job, ends whatever it left behind."""

    def __init__(self, store: Store, run_id: int, env: dict, own_descendants: bool):
        self.store = store
        self.run_id = run_id
        self.env = env
        self.own_descendants = own_descendants
        self.job_id: int | None = None
        self.start: load.Snapshot | None = None

    def job_started(self, job: runner.Job, seq: int) -> None:
        self.start = load.snapshot()
        self.job_id = self.store.begin_job(self.run_id, seq, job.benchmark, job.mechanism_name,
                                           job.repetition, {"start": self.start.brief()})

    def result(self, r: Result, job: runner.Job, started: str, finished: str) -> None:
        self.store.add_result(self.run_id, r, job.repetition, job_id=self.job_id,
                              started=started, finished=finished)

    def header(self, h: Header) -> None:
        self.env = sysinfo.apply_header(self.env, h)
        self.store.set_environment(self.run_id, self.env)

    def job_finished(self, job: runner.Job, outcome: runner.JobOutcome) -> None:
        if self.own_descendants:
            # Every Popen of the job has been waited for: what is left are
            # orphans (a compartment whose isob died).  End and reap them, so
            # that nothing outlives its job and their CPU time is counted.
            proc.kill_descendants()
        end = load.snapshot()
        pinned = load.pinned_cpus(outcome.results,
                                  outcome.header.raw if outcome.header else None)
        self.store.finish_job(self.job_id, "done", load.job_load(self.start, end, pinned))
        self.job_id = None


# What a run asks after its planned jobs (run --target-ci): the jobs to run
# next and why, or None when nothing more is wanted.
More = Callable[[], "tuple[list[runner.Job], str] | None"]


def record(store: Store, driver: Driver, run_id: int, env: dict, jobs: Iterable[runner.Job],
           opts: runner.Options, progress: "progress_.Progress | None", guard: Guard,
           finish: Callable[[bool], None], more: More | None = None) -> bool:
    """Run the jobs into run_id; True when a result failed.  Then, while
    more() returns jobs, run those too (each round after the last has been
    stored, so that more() can read it).  finish(failed) writes what the run
    ends with (status, aggregates) while signals are held off.

    Raises RunInterrupted (after marking the run) when a stop signal arrived.
    """
    own = proc.adopt_orphans()
    sink = StoreSink(store, run_id, env, own_descendants=own)
    try:
        jobs = list(jobs) if more is not None else jobs
        failed = runner.run_jobs(driver, jobs, opts, sink, progress)
        seq = len(jobs) + 1 if more is not None else 0
        while more is not None:
            asked = more()
            if not asked:
                break
            extra, why = asked
            if progress:
                progress.extend(extra, why)
            failed = runner.run_jobs(driver, extra, opts, sink, progress, first_seq=seq) or failed
            seq += len(extra)
        guard.closing = True
        finish(failed)
        return failed
    except (Interrupted, progress_.OutputClosed) as e:
        # A stop signal, or the reader of the progress gone (EPIPE), which a
        # pipeline's writer takes as SIGPIPE: the run ends here, marked.
        guard.closing = True
        sig = e if isinstance(e, Interrupted) else Interrupted(signal.SIGPIPE)
        if own:
            proc.kill_descendants()
        store.finish_run(run_id, "interrupted", end_reason=sig.name)
        raise RunInterrupted(run_id, sig, store.path) from None
