"""The progress display's estimate of the whole run, with a fake clock: it
comes from the plan and the store's history, is refined as jobs finish,
and the plain and the terminal displays print it.  No test here times
anything real."""

import io

from isobench.measure import progress
from isobench.measure.records import Result
from isobench.measure.runner import Job, JobOutcome


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def ok(job):
    return Result.failure(job.benchmark, job.mechanism_name, "x", None, status="skipped")


def test_estimate_comes_from_the_plan_and_the_history():
    counts = {("switch", "direct"): 3, ("switch", "thread"): 3, ("kv", "direct"): 3}
    history = {("switch", "direct"): [2.0, 4.0, 3.0], ("switch", "thread"): [10.0]}
    e = progress.Estimator(counts, history, quick=True)
    # kv has no history and nothing observed: the quick default.
    assert e.remaining() == 3 * 3.0 + 3 * 10.0 + 3 * progress.DEFAULT_SECONDS[True]
    assert e.from_history


def test_estimate_is_refined_as_jobs_finish():
    counts = {("switch", "direct"): 2, ("switch", "thread"): 2, ("kv", "direct"): 2}
    e = progress.Estimator(counts, {("switch", "thread"): [10.0]})
    e.observe(("switch", "direct"), 4.0)
    # direct: its own mean; thread: its history; kv: the run's mean so far.
    assert e.expected(("switch", "direct")) == 4.0
    assert e.expected(("switch", "thread")) == 10.0
    assert e.expected(("kv", "direct")) == 4.0
    assert e.remaining() == 1 * 4.0 + 2 * 10.0 + 2 * 4.0
    # thread twice as slow as its history: the history of keys not yet run
    # is scaled by the same factor.
    e2 = progress.Estimator({("a", "x"): 2, ("a", "y"): 1}, {("a", "x"): [1.0], ("a", "y"): [5.0]})
    e2.observe(("a", "x"), 2.0)
    assert e2.expected(("a", "y")) == 10.0


def test_plain_progress_prints_the_plan_each_job_and_the_total():
    clock, out = Clock(), io.StringIO()
    jobs = [Job("switch", "direct"), Job("switch", "thread")]
    est = progress.Estimator({("switch", "direct"): 1, ("switch", "thread"): 1},
                             {("switch", "direct"): [5.0], ("switch", "thread"): [60.0]})
    with progress.Progress(2, out, estimator=est, clock=clock) as p:
        for job, took in zip(jobs, (5.0, 61.0)):
            p.start(job)
            clock.t += took
            p.result(ok(job))
            p.done(JobOutcome(job, [ok(job)]))
        p.finish()
    lines = out.getvalue().splitlines()
    assert lines[0] == ("plan: 2 jobs, about 1 min 05 s (from earlier runs in this store; "
                        "refined as jobs finish)")
    assert lines[1].startswith("[1/2] switch -m direct ... 1 result, 5.0 s, about 1 min 00 s "
                               "left -- SKIPPED: x")
    assert lines[2].startswith("[2/2] switch -m thread ... 1 result, 61.0 s -- SKIPPED")
    assert lines[3] == "2 of 2 jobs in 1 min 06 s (estimated at the start: 1 min 05 s)"


def test_bar_shows_jobs_the_time_left_and_the_current_job():
    from rich.console import Console
    clock, out = Clock(), io.StringIO()
    console = Console(file=out, force_terminal=True, width=100, color_system=None)
    est = progress.Estimator({("kv", "direct"): 2}, {("kv", "direct"): [30.0]})
    bar = progress.BarProgress(2, out, est, clock=clock, console=console)
    bar.first_estimate = est.remaining()
    job = Job("kv", "direct", 1, 2)
    bar.start(job)
    clock.t += 10
    for _ in range(3):
        bar.result(ok(job))
    console.print(bar)
    text = out.getvalue()
    assert "0/2 jobs" in text and "10 s elapsed, about 50 s left" in text
    assert "now: kv -m direct (repetition 1/2): 3 results, 10 s" in text
    bar.done(JobOutcome(job, [ok(job)] * 3))
    bar.start(Job("kv", "direct", 2, 2))
    console.print(bar)
    assert "1/2 jobs" in out.getvalue() and "3 results" in out.getvalue()
    assert "0/3 results" in out.getvalue()  # the earlier repetition's count


def test_a_pipe_gets_plain_lines_and_quiet_gets_nothing():
    est = progress.Estimator({("switch", "direct"): 1})
    assert type(progress.make(1, est, stream=io.StringIO())) is progress.Progress
    quiet = progress.make(1, est, quiet=True, stream=io.StringIO())
    assert quiet.stream is None


def test_durations_read_as_a_person_plans():
    assert [progress.fmt_duration(s) for s in (0.4, 42, 185, 7322)] == \
        ["0 s", "42 s", "3 min 05 s", "2 h 02 min"]


def test_a_job_running_past_its_estimate_raises_the_estimate_of_its_repetitions():
    clock = Clock()
    est = progress.Estimator({("switch", "thread"): 3, ("kv", "direct"): 1},
                             {("switch", "thread"): [2.0], ("kv", "direct"): [5.0]})
    p = progress.Progress(4, None, estimator=est, clock=clock)
    p.start(Job("switch", "thread"))
    assert p.left() == 3 * 2.0 + 5.0
    clock.t += 1.0
    assert p.left() == 3 * 2.0 + 5.0 - 1.0
    # 10 s into a job expected to take 2 s: it may end any moment, but the
    # two repetitions after it will take 10 s or more each.
    clock.t += 9.0
    assert p.left() == 2 * 10.0 + 5.0
