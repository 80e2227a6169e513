"""The progress display's estimate of the whole run, with a fake clock: it
comes from the plan and the store's history, is refined as jobs finish,
and the plain and the terminal displays print it.  No test here times
anything real."""

import io

import pytest

from isobench.measure import progress
from isobench.core.records import Result
from isobench.measure.runner import Job, JobOutcome


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def ok(job):
    return Result(job.benchmark, job.mechanism_name, {}, "ok", unit="ns", counter="clock",
                  samples=(1,))


def skipped(job):
    return Result.failure(job.benchmark, job.mechanism_name, "no PKU", None, status="skipped")


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
    full = progress.DEFAULT_SECONDS[False]
    w = (2 * full + 2 * 10.0 + 2 * full) / 6  # the mean planned job
    e.observe(("switch", "direct"), 4.0)
    r = (4.0 + w) / (full + w)
    assert e.ratio() == r
    # direct: its own mean; thread and kv: their planned time, corrected.
    assert e.expected(("switch", "direct")) == 4.0
    assert e.expected(("switch", "thread")) == 10.0 * r
    assert e.expected(("kv", "direct")) == full * r
    assert e.remaining() == 1 * 4.0 + 2 * 10.0 * r + 2 * full * r
    # As jobs finish, r becomes the measured ratio: a run twice as slow as
    # its history is expected to stay so.
    e2 = progress.Estimator({("a", "x"): 50, ("a", "y"): 1},
                            {("a", "x"): [1.0], ("a", "y"): [5.0]})
    for _ in range(49):
        e2.observe(("a", "x"), 2.0)
    assert 1.9 < e2.ratio() < 2.0 and 9.5 < e2.expected(("a", "y")) < 10.0


def _run_with(est, took, jobs, outcome=ok):
    """The estimate of what is left after each job of a fake-clock run."""
    clock = Clock()
    p = progress.Progress(len(jobs), None, estimator=est, clock=clock)
    with p:
        lefts = []
        for job in jobs:
            p.start(job)
            clock.t += took(job)
            p.done(JobOutcome(job, [outcome(job)]))
            lefts.append(p.left())
    return p.first_estimate, lefts


def test_the_estimate_agrees_with_the_plan_when_jobs_take_their_planned_time():
    history = {("switch", "direct"): [2.0], ("oslat", "-"): [60.0], ("kv", "thread"): [20.0]}
    counts = {("switch", "direct"): 3, ("oslat", "-"): 2, ("kv", "thread"): 3}
    jobs = [Job(b, None if m == "-" else m) for (b, m), n in counts.items() for _ in range(n)]
    first, lefts = _run_with(progress.Estimator(counts, history), lambda j: history[
        (j.benchmark, j.mechanism_name)][0], jobs)
    assert first == 3 * 2.0 + 2 * 60.0 + 3 * 20.0
    done = 0.0
    for job, left in zip(jobs, lefts):
        done += history[(job.benchmark, job.mechanism_name)][0]
        assert left == pytest.approx(first - done)


def test_one_short_first_job_does_not_collapse_the_plan():
    # A plan of 140 jobs with no history (1 h 10 min); the first job takes
    # 0.2 s.  The rest is not 139 * 0.2 s: the plan counts as one job of
    # evidence, so the estimate halves at most, and falls as jobs confirm it.
    counts = {(f"b{i}", f"m{j}"): 1 for i in range(14) for j in range(10)}
    jobs = [Job(b, m) for b, m in counts]
    first, lefts = _run_with(progress.Estimator(counts), lambda j: 0.2, jobs[:20])
    assert progress.fmt_duration(first) == "1 h 10 min"
    assert first / 2 - 30 <= lefts[0] + 0.2 <= first / 2
    assert all(a > b for a, b in zip(lefts, lefts[1:]))
    # After 20 jobs: the 120 to come at their plan (30 s) times measured over
    # planned, the plan counted as one more job.
    assert lefts[19] == pytest.approx(120 * 30 * (20 * 0.2 + 30) / (20 * 30 + 30))


def test_a_job_that_only_skipped_leaves_the_estimate_to_the_plan():
    """make run's first job was mpk, skipped in 0.2 s (no PKU): the estimate
    fell from 8 min to 4 min and climbed back.  A skip says nothing of the
    plan: the jobs to come keep it, and the skipped key's own repetitions
    are expected to skip as fast."""
    history = {("switch", "mpk"): [5.0], ("switch", "thread"): [20.0]}
    counts = {("switch", "mpk"): 3, ("switch", "thread"): 3}
    jobs = [Job("switch", "mpk"), Job("switch", "thread")]
    outcome = lambda j: skipped(j) if j.mechanism_name == "mpk" else ok(j)
    first, lefts = _run_with(progress.Estimator(counts, history), lambda j: (
        0.2 if j.mechanism_name == "mpk" else 20.0), jobs, outcome)
    assert first == 3 * 5.0 + 3 * 20.0
    assert lefts[0] == pytest.approx(2 * 0.2 + 3 * 20.0)
    assert lefts[1] == pytest.approx(2 * 0.2 + 2 * 20.0)


def test_the_jobs_to_come_keep_the_plans_weights():
    history = {("switch", "direct"): [1.0], ("oslat", "-"): [100.0]}
    counts = {("switch", "direct"): 2, ("oslat", "-"): 1}
    est = progress.Estimator(counts, history)
    est.observe(("switch", "direct"), 2.0)  # twice as slow as planned
    # oslat, still to come, stays a hundred times switch's plan, corrected.
    assert est.expected(("oslat", "-")) == pytest.approx(100.0 * est.ratio())
    assert est.ratio() > 1.0


def test_plain_progress_prints_the_plan_each_job_and_the_total():
    clock, out = Clock(), io.StringIO()
    jobs = [Job("switch", "direct"), Job("switch", "thread")]
    est = progress.Estimator({("switch", "direct"): 1, ("switch", "thread"): 1},
                             {("switch", "direct"): [5.0], ("switch", "thread"): [60.0]})
    with progress.Progress(2, out, estimator=est, clock=clock) as p:
        for job, took in zip(jobs, (5.0, 61.0)):
            p.start(job)
            clock.t += took
            p.result(skipped(job))
            p.done(JobOutcome(job, [skipped(job)]))
        p.finish()
    lines = out.getvalue().splitlines()
    assert lines[0] == ("plan: 2 jobs, about 1 min 05 s (from earlier runs in this store; "
                        "refined as jobs finish)")
    assert lines[1].startswith("[1/2] switch -m direct ... 1 result, 5.0 s, about 1 min 00 s "
                               "left -- SKIPPED: no PKU")
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
    assert "now: kv -m direct (rep. 1/2): 3 results, 10 s" in text
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
