"""The summary document: the headline rule, one population per number, and
renderers that only read it."""

import ast
import math
import copy

import pytest

from isobench.analysis import summary

from conftest import PYTHON_DIR
from fixture_runs import fixture, load_doc

TSC = {"counter": "tsc", "unit": "tsc_ticks", "counter_why": "no PMU", "tsc_hz": 2.6e9,
       "tsc_hz_source": "kernel", "counter_step": 2, "batch_k": 100,
       "empty_region": {"median": 46, "mean": 46.3, "min": 44, "p5": 46, "p95": 48, "n": 100}}


def result(mech, samples, batched=None, pairs=(), rep=1, **params):
    return {"benchmark": "switch", "mechanism": mech,
            "params": {"placement": "same-cpu", "payload": 0, "variant": "entry", **params},
            "unit": "tsc_ticks", "counter": "tsc", "status": "ok", "reason": None,
            "dropped": 0, "warmup": 10, "batched": batched, "batched_reps": list(pairs),
            "empty_region": 46.0, "repetition": rep, "header": TSC,
            "samples": {"primary": list(samples)}}


def run_of(*results):
    doc = fixture("clean_run")
    doc["results"] = list(results)
    return doc


def entry(tmp_path, doc, mech, name="s.db"):
    built = summary.build(load_doc(tmp_path, doc, name))
    return next(c for c in built["configs"] if c["mechanism"] == mech), built


def spread(centre, n=200, step=2):
    """n samples around centre on a counter that steps by `step`."""
    return [centre + step * ((i * 7) % 5 - 2) for i in range(n)]


def pairs(centre):
    return [centre + 0.1 * ((i * 3) % 7 - 3) for i in range(15)]


def test_short_region_shows_the_batched_estimate(tmp_path):
    # wasm on a KVM guest: 86 ticks per call, 46 of them the readings.
    doc = run_of(*[result("wasm", spread(86), 33.0, pairs(33.0), rep) for rep in (1, 2, 3)])
    c, _ = entry(tmp_path, doc, "wasm")
    h = c["headline"]
    assert (h["source"], h["value"], h["reps"]) == ("batched", 33.0, 3)
    assert "short region" in h["why"]
    assert h["ns"] == pytest.approx(33.0 / 2.6)   # ~ns converts the headline
    assert not h["quantized"] and not h["batched_unreliable"]


def test_long_region_shows_the_median(tmp_path):
    doc = run_of(*[result("thread", spread(5000), 4800.0, pairs(4800.0), rep)
                   for rep in (1, 2)])
    h = entry(tmp_path, doc, "thread")[0]["headline"]
    assert (h["source"], h["value"]) == ("median", 5000.0)
    assert "long region" in h["why"]


def test_a_batched_estimate_far_from_the_median_is_not_used(tmp_path):
    # 20 x the empty region is 920 ticks: 900 is short, but its batched
    # estimate (100) is below half of median - empty region (427).
    doc = run_of(*[result("process-spin", spread(900), 100.0, pairs(100.0), rep)
                   for rep in (1, 2)])
    c, built = entry(tmp_path, doc, "process-spin")
    assert c["headline"]["source"] == "median" and c["headline"]["batched_unreliable"]
    assert [r["batched_agrees"] for r in c["repetitions"]] == [False, False]
    assert "batched-unreliable" in [f["id"] for f in built["findings"]]
    # And one above both the median and the mean.
    doc = run_of(*[result("process-spin", spread(900), 1500.0, pairs(1500.0), rep)
                   for rep in (1, 2)])
    assert entry(tmp_path, doc, "process-spin", "b.db")[0]["headline"]["batched_unreliable"]


def test_no_batched_estimate_and_a_quantized_median(tmp_path):
    samples = [78] * 150 + [104] * 50
    doc = run_of(result("kv-ish", samples), result("kv-ish", samples, rep=2))
    for r in doc["results"]:
        r["header"] = {**TSC, "counter_step": 26,
                       "empty_region": {"median": 52, "min": 52, "n": 100}}
    c, built = entry(tmp_path, doc, "kv-ish")
    h = c["headline"]
    assert (h["source"], h["value"], h["quantized"]) == ("median", 78.0, True)
    assert c["repetitions"][0]["median_interval"] == pytest.approx(
        {"low": 52.0, "high": 104.0, "level": c["repetitions"][0]["median_interval"]["level"],
         "method": "order statistics of the median", "n": 200, "quantized": True})
    # Two equal quantized repetitions still give an interval with width.
    assert h["interval"]["low"] < 78.0 < h["interval"]["high"]
    assert "quantized" in [f["id"] for f in built["findings"]]


def test_one_repetition_has_its_own_interval_and_no_ratio_interval(tmp_path):
    doc = run_of(result("direct", spread(56), 9.0, pairs(9.0)),
                 result("wasm", spread(86), 33.0, pairs(33.0)))
    c, built = entry(tmp_path, doc, "wasm")
    h = c["headline"]
    assert h["between"] == "one process" and "one repetition" in h["note"]
    assert h["interval"]["method"] == "order statistics of the median"
    assert c["ratio"]["value"] == pytest.approx(33.0 / 9.0)
    assert c["ratio"]["interval"] is None and "--repeat" in c["ratio"]["note"]
    assert "no-significance" in [f["id"] for f in built["findings"]]


def test_ratios_and_their_interval_come_from_repetitions(tmp_path):
    doc = run_of(*[result("direct", spread(56), 9.0 + rep / 10, pairs(9.0 + rep / 10), rep)
                   for rep in (1, 2, 3)],
                 *[result("wasm", spread(86), 33.0 + rep / 5, pairs(33.0 + rep / 5), rep)
                   for rep in (1, 2, 3)])
    c, _ = entry(tmp_path, doc, "wasm")
    r = c["ratio"]
    assert r["to"].startswith("switch direct")
    assert r["value"] == pytest.approx(c["headline"]["value"] / 9.2, rel=1e-3)
    assert r["interval"]["low"] < r["value"] < r["interval"]["high"]
    assert r["overhead"] == pytest.approx(r["value"] - 1)


def kv(mech, size, variant, centre, rep):
    r = result(mech, spread(centre), rep=rep, data_bytes=size)
    r.update(benchmark="kv")
    r["params"] = {"placement": "same-cpu", "variant": variant, "data_bytes": size}
    return r


def test_kv_averages_use_the_get_phase_and_never_pool_placements(tmp_path):
    results = []
    for rep in (1, 2):
        for size in (4096, 65536):
            for variant, cost in (("get", 1), ("set", 3)):
                results.append(kv("direct", size, variant, 2000 * cost, rep))
                results.append(kv("mpk", size, variant, 3000 * cost, rep))
    doc = run_of(*results)
    cross = [copy.deepcopy(r) for r in results if r["mechanism"] == "mpk"]
    for r in cross:
        r["params"]["placement"] = "cross-cpu"
        r["samples"]["primary"] = [x * 3 for x in r["samples"]["primary"]]
    doc["results"] += cross
    _, built = entry(tmp_path, doc, "mpk")
    aggs = {(a["mechanism"], a["population"]["placement"]): a for a in built["aggregates"]}
    assert set(aggs) == {("mpk", "same-cpu"), ("mpk", "cross-cpu")}
    assert all(a["population"]["variant"] == "get" and a["over"] == ["data_bytes"]
               for a in aggs.values())
    assert aggs[("mpk", "same-cpu")]["value"] == pytest.approx(1.5)
    assert aggs[("mpk", "cross-cpu")]["value"] == pytest.approx(4.5)
    assert all(a["method"] == "geometric-mean" for a in aggs.values())


def test_kv_averages_have_intervals_and_run_over_the_sizes_all_mechanisms_share(tmp_path):
    results = []
    for rep in (1, 2, 3):
        wobble = 1 + (rep - 2) / 50  # repetitions 2% apart
        for size in (4096, 65536, 1 << 20):
            results.append(kv("direct", size, "get", round(2000 * wobble), rep))
            results.append(kv("mpk", size, "get", round(3000 / wobble), rep))
            if size != 1 << 20:  # uthread skipped at 1 MiB
                results.append(kv("uthread", size, "get", round(4000 * wobble), rep))
    _, built = entry(tmp_path, run_of(*results), "mpk")
    aggs = {a["mechanism"]: a for a in built["aggregates"]}
    mpk, ut = aggs["mpk"], aggs["uthread"]
    # Both over the two sizes they share, said so, each with its interval.
    assert (mpk["n"], ut["n"]) == (2, 2) and mpk["shared"] and ut["shared"]
    assert mpk["rows"] == ut["rows"] == [{"data_bytes": 4096}, {"data_bytes": 65536}]
    assert mpk["left_out"] == [{"data_bytes": 1 << 20}] and ut["left_out"] == []
    assert mpk["value"] == pytest.approx(1.5, rel=0.01)
    assert mpk["interval"]["low"] < mpk["value"] < mpk["interval"]["high"]
    assert ut["value"] == pytest.approx(2.0, rel=0.01)
    # mpk's average over all three of its sizes is kept apart, with its own interval.
    assert mpk["own"]["n"] == 3 and mpk["own"]["interval"]["low"] < 1.5 \
        < mpk["own"]["interval"]["high"]
    assert ut["own"] is None


def test_the_document_is_plain_json(tmp_path):
    import json
    built = summary.build(load_doc(tmp_path, fixture("flawed_run")))
    assert json.loads(json.dumps(built)) == built
    assert built["summary_version"] == summary.SUMMARY_VERSION


RENDER_DIR = PYTHON_DIR / "isobench" / "render"
# Every module of render/, its kit and families floors included.
RENDERERS = sorted(p.relative_to(RENDER_DIR).as_posix() for p in RENDER_DIR.rglob("*.py")
                   if p.name != "__init__.py")


def test_the_render_package_holds_the_renderers():
    assert {"kit/table.py", "report.py", "kit/plots.py", "console.py"} <= set(RENDERERS)


@pytest.mark.parametrize("name", RENDERERS)
def test_renderers_compute_no_statistic(name):
    # They read the summary document: no statistics module, no store, no
    # loading of runs.
    tree = ast.parse((RENDER_DIR / name).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            imported |= {a.name for a in node.names} | set((node.module or "").split("."))
        elif isinstance(node, ast.Import):
            imported |= {part for a in node.names for part in a.name.split(".")}
    assert not imported & {"stats", "store", "summary", "Store", "load_run", "run_checks"}


def test_one_disagreeing_repetition_of_five_cannot_flip_the_headline(tmp_path):
    # uthread 0 B: four processes' batched estimates agree with their
    # median, the fifth's falls below half of it.  The majority decides.
    reps = [result("uthread", spread(104), 52.0 if rep < 5 else 8.0,
                   pairs(52.0 if rep < 5 else 8.0), rep) for rep in range(1, 6)]
    c, built = entry(tmp_path, run_of(*reps), "uthread")
    h = c["headline"]
    assert (h["source"], h["batched_unreliable"], h["batched_disagreements"]) == (
        "batched", False, 1)
    assert "1 of 5" in h["why"]
    assert {f["id"]: f["severity"] for f in built["findings"]}["batched-unreliable"] == "info"


def test_the_long_threshold_is_the_runs_not_each_processs(tmp_path):
    # Each process's empty-region median is quantized to 26, 52 or 78 ticks
    # (20 x: 520, 1,040, 1,560); their means are all about 46.  A 1,200-tick
    # region is long in every process by the run's empty region.
    results = []
    for rep, med in zip(range(1, 6), (26, 52, 78, 52, 26)):
        r = result("thread", spread(1250, step=26), 1100.0, pairs(1100.0), rep)
        r["header"] = {**TSC, "counter_step": 26,
                       "empty_region": {"median": med, "mean": 46.3, "p5": 26, "p95": 78,
                                        "n": 100}}
        results.append(r)
    c, _ = entry(tmp_path, run_of(*results), "thread")
    assert {r["long_threshold"] for r in c["repetitions"]} == {20 * 46.3}
    h = c["headline"]
    assert h["source"] == "median" and h["rule"]["long_reps"] == 5
    assert h["rule"]["empty_region"] == pytest.approx(46.3)


def test_three_equal_batched_values_have_the_width_of_step_over_k(tmp_path):
    # 0.624 ticks, K = 250, a step of 26: once printed as [0.240, 0.240] ns.
    results = []
    for rep in (1, 2, 3):
        r = result("uthread", [52] * 150 + [78] * 50, 0.624, [0.624] * 15, rep)
        r["header"] = {**TSC, "counter_step": 26, "batch_k": 250,
                       "empty_region": {"median": 52, "mean": 46.3, "p5": 26, "p95": 52,
                                        "n": 100}}
        results.append(r)
    c, built = entry(tmp_path, run_of(*results), "uthread")
    h = c["headline"]
    assert (h["source"], h["value"]) == ("batched", 0.624)
    assert h["resolution"] == pytest.approx(26 / 250)
    lo, hi = h["interval"]["low"], h["interval"]["high"]
    # +-0.95 x step/2 / K around the value (one uniform error of one step).
    assert lo == pytest.approx(0.624 * math.exp(-0.95 * 0.104 / 2 / 0.624), rel=1e-9)
    assert hi == pytest.approx(0.624 * math.exp(0.95 * 0.104 / 2 / 0.624), rel=1e-9)
    assert h["quantized"] and c["repetitions"][0]["batched_interval"]["quantized"]
    ids = [f["id"] for f in built["findings"]]
    assert "quantized" in ids and "zero-width" not in ids


def test_a_ratio_uses_the_same_estimator_on_both_sides(tmp_path):
    # direct's headline is batched (9 ticks), a long process's is its median
    # (5,000) and its batched estimate (4,800) agrees with it: the ratio
    # divides batched by batched, the reading cost cancelled on both sides,
    # never by direct's medians (56), which are mostly reading cost.
    doc = run_of(*[result("direct", spread(56), 9.0, pairs(9.0), rep) for rep in (1, 2, 3)],
                 *[result("process-futex", spread(5000), 4800.0, pairs(4800.0), rep)
                   for rep in (1, 2, 3)])
    c, built = entry(tmp_path, doc, "process-futex")
    direct = next(e for e in built["configs"] if e["mechanism"] == "direct")
    assert direct["headline"]["source"] == "batched"
    assert c["headline"]["source"] == "median"
    r = c["ratio"]
    assert (r["source"], r["base_source"], r["mixed"]) == ("batched", "batched", False)
    assert r["base_value"] == pytest.approx(9.0)
    assert r["value"] == pytest.approx(4800 / 9)
    assert r["interval"]["low"] < r["value"] < r["interval"]["high"]
    assert "batched estimates on both sides" in r["note"]


def test_a_ratio_without_a_trustworthy_batched_numerator_is_marked_mixed(tmp_path):
    # The process's batched estimates (1,000) disagree with its medians
    # (5,000): they cannot stand for it, and direct's medians would divide
    # by reading cost; the median over direct's batched is kept, marked.
    doc = run_of(*[result("direct", spread(56), 9.0, pairs(9.0), rep) for rep in (1, 2, 3)],
                 *[result("process-futex", spread(5000), 1000.0, pairs(1000.0), rep)
                   for rep in (1, 2, 3)])
    c, _ = entry(tmp_path, doc, "process-futex")
    r = c["ratio"]
    assert (r["source"], r["base_source"], r["mixed"]) == ("median", "batched", True)
    assert r["value"] == pytest.approx(c["headline"]["value"] / 9.0)
    assert "a median over the baseline's batched" in r["note"]


def test_a_ratio_of_quantized_values_carries_both_resolutions(tmp_path):
    # kv gets on a 26-tick step: 5 steps against 4 (1.25).
    results = []
    for mech, ticks in (("direct", 104), ("uthread", 130)):
        for rep in (1, 2, 3, 4, 5):
            r = result(mech, [ticks] * 200, rep=rep)
            r["header"] = {**TSC, "counter_step": 26,
                           "empty_region": {"median": 52, "mean": 46.3, "n": 100}}
            results.append(r)
    c, _ = entry(tmp_path, run_of(*results), "uthread")
    r = c["ratio"]
    assert r["value"] == pytest.approx(1.25)
    assert r["quantized"] and r["relative_resolution"] == pytest.approx(26 / 130 + 26 / 104)
    lo, hi = r["interval"]["low"], r["interval"]["high"]
    assert lo < 1.1 and hi > 1.4      # the two steps, not a point


def test_a_headline_outside_its_own_samples_spread_says_so(tmp_path):
    # Two processes 1.3x apart (below the modes factor), one with 55 samples
    # and one with 2,600: the pooled p5..p95 is the second's alone, and the
    # geometric mean of the two lies below it.
    few = result("process-pipe", spread(5000, n=55), rep=1)
    many = result("process-pipe", spread(6500, n=2600), rep=2)
    c, built = entry(tmp_path, run_of(few, many), "process-pipe")
    h = c["headline"]
    assert h["modes"] is None and h["outside_spread"]["p5"] > h["value"]
    f = next(f for f in built["findings"] if f["id"] == "modes")
    assert "outside its samples' p5..p95" in f["what"]


def test_a_two_mode_configuration_lists_its_groups(tmp_path):
    # process-futex cross-cpu: one process of three had its server awake.
    reps = [result("process-futex", spread(v, step=26), rep=rep)
            for rep, v in ((1, 127582), (2, 975), (3, 132145))]
    c, built = entry(tmp_path, run_of(*reps), "process-futex")
    h = c["headline"]
    assert [(m["count"], m["repetitions"]) for m in h["modes"]] == [(1, [2]), (2, [1, 3])]
    assert h["interval"] is None and h["between"] is None
    assert h["value"] == pytest.approx(math.sqrt(127582 * 132145), rel=1e-3)
    f = next(f for f in built["findings"] if f["id"] == "modes")
    assert f["severity"] == "warning" and "1 at 975" in f["what"] and "(rep 2)" in f["what"]
