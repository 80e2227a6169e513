"""run --target-ci: repetitions added until every headline's interval is
narrow enough, or the cap; against the fake driver, whose FAKE_ISOB_JITTER
makes fresh processes differ (tests assert counts, never durations)."""

from __future__ import annotations

import pytest

from isobench.analysis import precision
from isobench.measure import runner


def _reps(ib, args=("switch", "-m", "direct", "-m", "thread")):
    d, _ = ib.json("show", "latest", "--json")
    doc = d["summary"]
    return doc, sorted({c["headline"]["reps"] for c in doc["configs"]})


def test_no_jitter_needs_no_more_repetitions(isobench):
    p = isobench.as_is("run", "switch", "-m", "direct", "-m", "thread", "--repeat", "3",
                       "--target-ci", "2")
    assert p.returncode == 0, p.stderr
    assert "more job" not in p.stderr
    assert "every headline is within it (after 0 added rounds)" in p.stderr
    doc, reps = _reps(isobench)
    assert reps == [3]
    assert doc["run"]["options"]["target_ci"]["reached"] is True


def test_jitter_adds_repetitions_up_to_the_cap(isobench):
    p = isobench.as_is("run", "switch", "-m", "direct", "-m", "thread", "--repeat", "3",
                       "--target-ci", "0.1", "--max-repeat", "5", FAKE_ISOB_JITTER="0.3")
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("more jobs") == 2  # rounds 4 and 5
    assert "(rep. 5/5)" in p.stderr
    assert "not within it (after 2 added rounds; at most 5 repetitions each" in p.stderr
    doc, reps = _reps(isobench)
    assert reps == [5]
    t = doc["run"]["options"]["target_ci"]
    assert t["reached"] is False and t["max_repeat"] == 5 and t["rounds"] == 2
    assert len(t["capped"]) == len(doc["configs"])
    # Every added repetition is a fresh process of its own, numbered after the plan's.
    jobs = [(j["mechanism"], j["repetition"]) for j in isobench.json("show", "latest", "--json")[0]["jobs"]]
    for m in ("direct", "thread"):
        assert sorted(r for mm, r in jobs if mm == m) == [1, 2, 3, 4, 5]


def test_plan_says_the_estimate_leaves_the_target_out(isobench):
    p = isobench.as_is("run", "switch", "-m", "direct", "--repeat", "2", "--target-ci", "5")
    assert p.returncode == 0, p.stderr
    # The plan line, wrapped to the terminal's 100 columns: its continuation
    # lines are indented.
    lines = p.stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("plan:"))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("  ")),
               len(lines))
    plan = " ".join(line.strip() for line in lines[start:end])
    assert "+-5%" in plan and "up to 20 per (benchmark, mechanism)" in plan
    assert max(len(line) for line in lines[start:end]) <= 100


@pytest.mark.parametrize("args, says", [
    (("--max-repeat", "9"), "--max-repeat caps --target-ci's repetitions"),
    (("--target-ci", "2", "--repeat", "8", "--max-repeat", "6"), "--max-repeat 6 is below"),
    (("--target-ci", "0"), "is not from 0.1% to 100%"),
    (("--target-ci", "two"), "is not a percentage"),
])
def test_bad_target_options_are_refused(isobench, args, says):
    p = isobench.as_is("run", "switch", "-m", "direct", *args)
    assert p.returncode == 2
    assert says in p.stderr
    assert "Traceback" not in p.stderr
    assert not [c for c in isobench.isob_calls() if c[:1] == ["switch"]]


def test_width_is_the_larger_half():
    h = {"value": 100.0, "interval": {"low": 95.0, "high": 110.0}}
    assert precision.width(h) == pytest.approx(0.10)
    assert precision.width({"value": 100.0, "interval": None}) is None
    configs = [{"benchmark": "switch", "mechanism": "direct", "label": "a",
                "headline": {"value": 100.0, "interval": {"low": 99.0, "high": 101.0}, "reps": 5}},
               {"benchmark": "switch", "mechanism": "thread", "label": "b",
                "headline": {"value": 100.0, "interval": None, "reps": 1}},
               {"benchmark": "switch", "mechanism": "wasm", "label": "c",
                "headline": {"value": None, "interval": None, "reps": 0}}]
    assert [w.label for w in precision.wide(configs, 0.02)] == ["b"]
    assert [w.label for w in precision.wide(configs, 0.005)] == ["a", "b"]


def test_more_numbers_repetitions_after_those_done():
    from isobench.measure.driver import Catalog
    cat = Catalog(mechanisms=(), benchmarks=())  # unknown benchmarks take mechanisms
    plan = runner.Plan(cat, ["switch"], ["direct", "thread", "wasm"], repeat=3, seed=1)
    jobs = plan.more({("switch", "thread"), ("switch", "wasm")},
                     {("switch", "thread"): 3, ("switch", "wasm"): 4}, 1)
    assert sorted((j.mechanism, j.repetition) for j in jobs) == [("thread", 4), ("wasm", 5)]
    assert plan.more({("switch", "thread")}, {}, 2)[0].repetition == 4


def test_a_configuration_in_modes_is_repeated_and_named():
    configs = [{"benchmark": "switch", "mechanism": "process-futex", "label": "p",
                "headline": {"value": 100.0, "interval": None, "reps": 5,
                             "modes": [{"count": 2}, {"count": 3}]}}]
    (w,) = precision.wide(configs, 0.5)
    assert w.text() == "p: repetitions in 2 modes after 5 repetitions"
