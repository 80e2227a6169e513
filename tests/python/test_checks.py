"""Soundness checks: each check fires on a fixture made to trigger it and
stays quiet on the clean run; severities decide `check`'s exit status."""

import os
import subprocess
import sys

import pytest

from isobench.analysis import checks, summary
from isobench.core import owner

from conftest import REPO, assert_one_error_line
from fixture_runs import fixture, import_doc, load_doc, with_repetitions

ALL_IDS = [
    "run-interrupted", "no-results", "all-skipped", "failed-results", "no-baseline",
    "counters-miss-other-side", "run-in-progress", "no-significance", "few-repetitions",
    "modes", "batched-unreliable", "quantized", "zero-width", "thin-tail", "bad-fit", "high-cv",
    "dropped-samples", "load-during-run", "unpinned", "virtual-machine", "no-pmu",
    "frequency-scaling", "smt-active", "missing-platform", "missing-software", "micro-only",
    "percentage-geomean", "store-damaged",
]
# What one run can show at once: every check but these three, which
# exclude the others (or each other) and are tested on their own below,
# percentage-geomean, which needs an oslat run (test_oslat_section.py),
# store-damaged (test_damaged_store.py damages a store), and the checks of
# numbers the flawed run does not hold (modes, zero-width, a quantile or a
# fit of a section), each tested on its own below.
APART = {"no-results", "all-skipped", "run-in-progress", "percentage-geomean", "modes",
         "zero-width", "thin-tail", "bad-fit", "store-damaged"}


def clean():
    """The clean run with five repetitions, as a full run has (its file holds two)."""
    return with_repetitions(fixture("clean_run"), 5)


def findings(data):
    return summary.build(data)["findings"]


def ids(data):
    return [f["id"] for f in findings(data)]


def test_every_check_is_listed_and_documented():
    assert list(checks.CHECK_IDS) == ALL_IDS
    doc = (REPO / "docs" / "reducing-variance.md").read_text()
    for c in checks.CHECKS:
        assert f"\n### {c.id}\n" in doc, c.id
        assert c.severity in checks.SEVERITIES
    for check_id, _, _ in checks.MACHINE_CHECKS:
        assert f"\n### {check_id}\n" in doc, check_id


def test_flawed_run_triggers_every_check_it_can(tmp_path):
    assert ids(load_doc(tmp_path, fixture("flawed_run"))) == [
        i for i in ALL_IDS if i not in APART]


def test_clean_run_triggers_none(tmp_path):
    assert ids(load_doc(tmp_path, clean())) == []


def _results(doc, **match):
    return [r for r in doc["results"] if all(r.get(k) == v for k, v in match.items())]


def _drop(doc, **match):
    doc["results"] = [r for r in doc["results"] if r not in _results(doc, **match)]


def m_interrupted(doc):
    doc["status"] = "interrupted"


def m_running_no_owner(doc):
    # A run left `running` by a process that is gone (or unknown) is as
    # incomplete as one marked interrupted.
    doc["status"] = "running"
    doc["finished"] = None


def m_no_results(doc):
    doc["results"] = []


def m_all_skipped(doc):
    doc["results"] = [{"benchmark": "switch", "mechanism": "mpk", "params": {},
                       "status": "skipped", "reason": "CPU has no PKU", "repetition": 1,
                       "samples": {}}]


def m_failed(doc):
    doc["results"].append({"benchmark": "switch", "mechanism": "test-crash", "params": {},
                           "status": "failed", "reason": "isob was killed by signal 11",
                           "repetition": 1, "samples": {}})


def m_no_baseline(doc):
    doc["results"] = [r for r in doc["results"]
                      if not (r["benchmark"] == "switch" and r["mechanism"] == "direct")]


def m_one_repetition(doc):
    for rep in (2, 3, 4, 5):
        _drop(doc, repetition=rep)


def m_quick(doc):
    # --quick: three repetitions.
    for rep in (4, 5):
        _drop(doc, repetition=rep)


def m_modes(doc):
    # One process of five in which the server stayed awake: 1/100 of the others.
    r = _results(doc, mechanism="process-futex", repetition=3)
    r = next(x for x in r if x["params"]["placement"] == "cross-cpu")
    r["samples"]["primary"] = [x // 100 for x in r["samples"]["primary"]]


def m_zero_width(doc):
    # Equal repetitions of a counter that recorded no step.
    for r in _results(doc, benchmark="switch", mechanism="mpk"):
        r["header"] = {**r["header"], "counter_step": 0}
        r["samples"]["primary"] = [160] * 20


def m_batched_unreliable(doc):
    # The numbers of a real process-futex cross-cpu result on a KVM guest:
    # bimodal wake-ups make t(2K) - t(K) meaningless.
    for r in _results(doc, mechanism="process-futex"):
        if r["params"]["placement"] == "cross-cpu":
            r["samples"]["primary"] = [116506 + (i % 7) * 10 for i in range(20)]
            r["batched"] = 1012.0
            r["batched_reps"] = [1012.0 + (i % 5) for i in range(15)]


def m_quantized(doc):
    for r in _results(doc, benchmark="switch", mechanism="mpk"):
        r["header"] = {**r["header"], "counter_step": 26,
                       "empty_region": {"median": 52, "min": 52, "n": 20}}
        r["samples"]["primary"] = [78] * 15 + [104] * 5


def m_micro_only(doc):
    _drop(doc, benchmark="kv", mechanism="direct")
    _drop(doc, benchmark="kv", mechanism="mpk")


def m_missing_platform(doc):
    doc["environment"]["cpu_model"] = None


def m_missing_software(doc):
    doc["environment"]["compiler"] = None


def m_unpinned(doc):
    for r in _results(doc, mechanism="process-futex"):
        if r["params"]["placement"] == "cross-cpu":
            r["params"]["placement"] = "unpinned"


def m_frequency(doc):
    doc["environment"]["governor"] = "ondemand"


def m_turbo(doc):
    doc["environment"]["turbo"] = True


def m_smt(doc):
    doc["environment"]["smt"] = True


def m_vm(doc):
    doc["environment"]["hypervisor"] = "KVM"


def m_no_pmu(doc):
    for r in doc["results"]:
        r.update(counter="tsc", unit="tsc_ticks")


def m_dropped_tsc(doc):
    m_no_pmu(doc)
    doc["results"][0]["dropped"] = 3


def m_dropped_perf(doc):
    doc["results"][0]["dropped"] = 3


def m_thread_scope(doc):
    for r in _results(doc, mechanism="process-futex"):
        r["header"]["scope"] = "thread"


def m_thread_scope_undercount(doc):
    for r in _results(doc, mechanism="process-futex"):
        r["header"]["scope"] = "thread"
        r["samples"]["tsc"] = [4 * x for x in r["samples"]["primary"]]


def m_thread_scope_counted(doc):
    # Cycles close to the TSC ticks of the same calls: nothing was missed.
    for r in _results(doc, mechanism="process-futex"):
        r["header"]["scope"] = "thread"
        r["samples"]["tsc"] = [x + x // 10 for x in r["samples"]["primary"]]


def m_cv_within(doc):
    for r in _results(doc, benchmark="kv", mechanism="mpk"):
        r["samples"]["primary"] = [420 + 40 * ((i * 7) % 11 - 5) for i in range(20)]


def m_cv_between(doc):
    r = _results(doc, benchmark="switch", mechanism="mpk", repetition=2)[0]
    r["samples"]["primary"] = [x + 60 for x in r["samples"]["primary"]]


def m_cv_between_within_one_step(doc):
    # Repetitions one counter step apart are the counter's resolution, not
    # variation (the step is 26 here).
    m_quantized(doc)
    r = _results(doc, benchmark="switch", mechanism="mpk", repetition=2)[0]
    r["samples"]["primary"] = [104] * 15 + [130] * 5


@pytest.mark.parametrize("mutate, expected", [
    (m_interrupted, ["run-interrupted"]),
    (m_running_no_owner, ["run-interrupted"]),
    (m_no_results, ["no-results"]),
    (m_all_skipped, ["all-skipped"]),
    (m_failed, ["failed-results"]),
    (m_no_baseline, ["no-baseline"]),
    (m_one_repetition, ["no-significance"]),
    (m_quick, ["few-repetitions"]),
    (m_modes, ["modes", "high-cv"]),
    (m_zero_width, ["zero-width"]),
    (m_batched_unreliable, ["batched-unreliable"]),
    (m_quantized, ["quantized"]),
    (m_micro_only, ["micro-only"]),
    (m_missing_platform, ["missing-platform"]),
    (m_missing_software, ["missing-software"]),
    (m_unpinned, ["unpinned"]),
    (m_frequency, ["frequency-scaling"]),
    (m_turbo, ["frequency-scaling"]),
    (m_smt, ["smt-active"]),
    (m_vm, ["virtual-machine"]),
    (m_no_pmu, ["no-pmu"]),
    (m_dropped_tsc, ["dropped-samples", "no-pmu"]),
    (m_dropped_perf, ["dropped-samples"]),
    (m_thread_scope, ["counters-miss-other-side"]),
    (m_thread_scope_undercount, ["counters-miss-other-side"]),
    (m_thread_scope_counted, []),
    (m_cv_within, ["high-cv"]),
    (m_cv_between, ["high-cv"]),
    (m_cv_between_within_one_step, ["quantized"]),
])
def test_each_check_alone(tmp_path, mutate, expected):
    doc = clean()
    mutate(doc)
    assert ids(load_doc(tmp_path, doc)) == expected


def test_no_significance_names_a_benchmarks_own_repetitions(tmp_path):
    # A benchmark with its own default (runner.BENCHMARK_REPEAT) is told the
    # number it asked for, not the run's.
    doc = clean()
    m_one_repetition(doc)
    doc["options"] = {"repeat": 1, "seed": 11, "repeat_by_benchmark": {"switch": 10}}
    by = {f["id"]: f for f in findings(load_doc(tmp_path, doc))}
    assert "asked for 10 repetitions" in by["no-significance"]["next"]


def test_run_in_progress_and_a_dead_owner(tmp_path):
    # The store records the owning process of a run (where it does); a live
    # owner means the run is still going, a dead one that it was cut short.
    doc = clean()
    m_running_no_owner(doc)
    data = load_doc(tmp_path, doc)
    # An import closes a run exported while running; here it is read as the
    # store of the machine it runs on would hold it.
    data.run["status"] = "running"
    data.run["owner"] = owner.this_process()
    assert [f["id"] for f in findings(data)] == ["run-in-progress"]
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    data.run["owner"] = {**owner.this_process(), "pid": dead.pid}
    found = findings(data)
    assert [f["id"] for f in found] == ["run-interrupted"]
    assert f"pid {dead.pid}" in found[0]["what"]


def test_batched_unreliable_falls_back_to_the_median(tmp_path):
    doc = clean()
    # A short region (160 cycles against an empty region of 30) whose
    # batched estimate agrees: the headline is the batched estimate.
    for r in _results(doc, benchmark="switch", mechanism="mpk"):
        r["batched"], r["batched_reps"] = 128.0, [127.0 + (i % 3) for i in range(15)]
    entry = _config(load_doc(tmp_path, doc, "a.db"), "switch", "mpk")
    assert (entry["headline"]["source"], entry["headline"]["value"]) == ("batched", 128.0)
    # The same with a batched estimate far below half the median less the
    # empty region: not trusted, the median is shown and the flag is set.
    for r in _results(doc, benchmark="switch", mechanism="mpk"):
        r["batched"], r["batched_reps"] = 20.0, [19.0 + (i % 3) for i in range(15)]
    data = load_doc(tmp_path, doc, "b.db")
    entry = _config(data, "switch", "mpk")
    assert entry["headline"]["source"] == "median"
    assert entry["headline"]["batched_unreliable"]
    assert "batched-unreliable" in ids(data)


def _config(data, bench, mech):
    return next(c for c in summary.build(data)["configs"]
                if c["benchmark"] == bench and c["mechanism"] == mech)


def test_severity_decides_the_exit_status(tmp_path):
    none = findings(load_doc(tmp_path, clean(), "a.db"))
    assert checks.exit_status(none) == 0
    doc = clean()
    m_vm(doc)
    warned = findings(load_doc(tmp_path, doc, "b.db"))
    assert [f["severity"] for f in warned] == ["warning"]
    assert checks.exit_status(warned) == 0
    assert checks.exit_status(warned, strict=True) == checks.EXIT_FINDINGS == 3
    doc = clean()
    m_micro_only(doc)
    info = findings(load_doc(tmp_path, doc, "c.db"))
    assert [f["severity"] for f in info] == ["info"]
    assert checks.exit_status(info, strict=True) == 0
    flawed = findings(load_doc(tmp_path, fixture("flawed_run"), "d.db"))
    assert checks.exit_status(flawed) == 3


def test_kv_server_reference_needs_no_direct(tmp_path):
    # memcached runs beside isob as the reference: it has no `direct` of its
    # own and must not be reported as lacking one, but an isob mechanism
    # without isob+direct in the same run still is.
    doc = clean()
    doc["results"] += [_kv_server("memcached", "memcached", 150000, rep)
                       for rep in REPS] + [_kv_server("direct", "isob", 180000, rep)
                                           for rep in REPS] + [
        _kv_server("process-futex", "isob", 90000, rep) for rep in REPS]
    assert ids(load_doc(tmp_path, doc)) == []
    data = load_doc(tmp_path, doc, "b.db")
    futex = next(c for c in data.configs if c.benchmark == "kv-server"
                 and c.mechanism == "process-futex")
    assert data.baseline_of(futex).mechanism == "direct"
    entry = _config(data, "kv-server", "process-futex")
    assert entry["kv_server"]["throughput_vs_reference"]["value"] == pytest.approx(0.6, rel=1e-4)
    _drop(doc, benchmark="kv-server", mechanism="direct")
    found = findings(load_doc(tmp_path, doc, "c.db"))
    assert [f["id"] for f in found] == ["no-baseline"]
    assert "process-futex" in found[0]["what"] and "memcached" not in found[0]["what"]


REPS = (1, 2, 3, 4, 5)  # as many as the clean run has


def _kv_server(mechanism, server, ops, rep=1):
    """A kv-server result as kvserver.py stores it (the latency series in ns)."""
    return {"benchmark": "kv-server", "mechanism": mechanism,
            "params": {"server": server, "seconds": 5, "server_cpu": 0, "client_cpu": 1,
                       "ops_per_s": ops + rep, "latency_avg_ns": 50000},
            "unit": "ns", "counter": "memcaslap", "status": "ok", "reason": None, "dropped": 0,
            "warmup": 0, "batched": None, "empty_region": None, "repetition": rep,
            "header": None,
            "samples": {"primary": [50000 + 10 * (i % 5) + rep for i in range(20)]}}


def test_kv_server_alone_needs_no_harness_counter(tmp_path):
    # A run of kv-server only never starts the harness, so no counter is
    # recorded; that is not a missing platform detail.  Once a harness
    # result is in the run, a missing counter is one again.
    doc = clean()
    kvs = [_kv_server("memcached", "memcached", 150000, rep) for rep in REPS] + [
        _kv_server("direct", "isob", 180000, rep) for rep in REPS]
    doc["results"] = kvs
    doc["environment"]["counter"] = None
    assert ids(load_doc(tmp_path, doc)) == []
    doc = clean()
    doc["results"] += kvs
    doc["environment"]["counter"] = None
    assert ids(load_doc(tmp_path, doc, "b.db")) == ["missing-platform"]


def test_finding_says_what_and_next_and_where(tmp_path):
    found = findings(load_doc(tmp_path, fixture("flawed_run")))
    for f in found:
        assert f["what"] and f["next"] and f["severity"] in checks.SEVERITIES
        assert f["doc"] == f"docs/reducing-variance.md#{f['id']}"
    by = {f["id"]: f for f in found}
    assert by["no-baseline"]["sok"].startswith("D1 ")
    assert by["micro-only"]["sok"].startswith("B1 ")
    assert by["no-significance"]["sok"].startswith("B4 ")
    assert by["missing-platform"]["sok"].startswith("F1 ")
    assert by["missing-software"]["sok"].startswith("F2 ")
    assert "cpu_model" in by["missing-platform"]["what"]
    assert "12000 TSC ticks" in by["counters-miss-other-side"]["what"]
    assert "1,012" in by["batched-unreliable"]["what"]
    assert "SIGKILL" in by["failed-results"]["what"]
    assert by["virtual-machine"]["sok"] is None


def test_check_command_exit_codes(isobench, tmp_path):
    flawed, clean_db = tmp_path / "flawed.sqlite", tmp_path / "clean.sqlite"
    import_doc(flawed, fixture("flawed_run"))
    import_doc(clean_db, clean())
    doc, p = isobench.json("check", "--json", "--db", str(flawed))
    assert p.returncode == 3
    assert [f["id"] for f in doc["findings"]] == [i for i in ALL_IDS if i not in APART]
    assert doc["counts"]["error"] == 4 and doc["exit_status"] == 3
    p = isobench("check", "--db", str(flawed))
    assert p.returncode == 3 and "ERROR run-interrupted" in p.stdout and "next:" in p.stdout
    doc, p = isobench.json("check", "latest", "--json", "--db", str(clean_db))
    assert (p.returncode, doc["findings"]) == (0, [])
    p = isobench("check", "--db", str(clean_db))
    assert p.returncode == 0 and "no findings" in p.stdout
    vm = clean()
    m_vm(vm)
    import_doc(clean_db, vm)
    p = isobench("check", "--db", str(clean_db))
    assert p.returncode == 0 and "WARNING virtual-machine" in p.stdout
    assert isobench("check", "--strict", "--db", str(clean_db)).returncode == 3


@pytest.mark.parametrize("args, needle", [
    (["check", "7"], "no run 7"),
    (["check", "--frobnicate"], "unrecognized arguments"),
])
def test_check_bad_usage(isobench, tmp_path, args, needle):
    import_doc(isobench.db, clean())
    assert needle in assert_one_error_line(isobench(*args))


def test_run_json_carries_findings(isobench):
    doc, p = isobench.json("run", "switch", "--json", "-m", "direct", "-m", "thread")
    assert p.returncode == 0
    found = [f["id"] for f in doc["findings"]]
    # The fake driver measures switch only, with the TSC.
    assert "no-pmu" in found and "micro-only" in found
    assert set(found) <= set(ALL_IDS)
    assert doc["summary"]["findings"] == doc["findings"]


def test_a_crashing_mechanism_makes_check_exit_3(isobench):
    p = isobench("run", "switch", "-q", "-m", "direct", "-m", "test-crash", "--repeat", "2",
                 ISOBENCH_TEST_MECHANISMS="1")
    assert p.returncode == 1
    doc, p = isobench.json("check", "--json")
    assert p.returncode == 3
    failed = next(f for f in doc["findings"] if f["id"] == "failed-results")
    assert failed["severity"] == "error" and "test-crash" in failed["what"]


def test_machine_findings_have_their_own_ids():
    env = {"governor": "powersave", "smt": True, "hypervisor": "KVM", "pmu": False}
    found = checks.machine_findings(env)
    assert [f.id for f in found] == ["frequency-scaling", "smt-active", "virtual-machine",
                                     "pmu-missing"]
    assert {f.severity for f in found} == {"warning"}
    assert checks.machine_findings({"governor": "performance", "pmu": True}) == []


def test_batched_unreliable_is_a_warning_only_where_it_changed_the_headline(tmp_path):
    # A short region (160 cycles, empty region 30) whose batched estimate
    # agrees in four processes of five and not in the fifth: the headline
    # stays batched (a majority agrees), and the finding is info.
    doc = clean()
    for r in _results(doc, benchmark="switch", mechanism="mpk"):
        low = r["repetition"] == 5
        r["batched"] = 20.0 if low else 128.0
        r["batched_reps"] = [(19.0 if low else 127.0) + (i % 3) for i in range(15)]
    data = load_doc(tmp_path, doc, "a.db")
    entry = _config(data, "switch", "mpk")
    h = entry["headline"]
    assert (h["source"], h["batched_unreliable"], h["batched_disagreements"]) == (
        "batched", False, 1)
    assert h["rule"]["batched_agree"] == 4 and h["rule"]["batched_disagree"] == 1
    found = {f["id"]: f for f in findings(data)}
    assert found["batched-unreliable"]["severity"] == "info"
    assert "1 of 5" in found["batched-unreliable"]["what"]
    # Three of five disagree: the median, and a warning.
    for r in _results(doc, benchmark="switch", mechanism="mpk"):
        if r["repetition"] in (3, 4):
            r["batched"], r["batched_reps"] = 20.0, [19.0 + (i % 3) for i in range(15)]
    data = load_doc(tmp_path, doc, "b.db")
    h = _config(data, "switch", "mpk")["headline"]
    assert (h["source"], h["batched_unreliable"]) == ("median", True)
    found = {f["id"]: f for f in findings(data)}
    assert found["batched-unreliable"]["severity"] == "warning"


def test_the_flawed_runs_long_region_disagreement_is_info(tmp_path):
    # process-futex cross-cpu: 116,506 ticks is a long region, so its batched
    # estimate (1,012) was never a candidate for the headline.
    found = {f["id"]: f for f in findings(load_doc(tmp_path, fixture("flawed_run")))}
    assert found["batched-unreliable"]["severity"] == "info"


def test_modes_names_each_group_with_its_count(tmp_path):
    doc = clean()
    m_modes(doc)
    data = load_doc(tmp_path, doc)
    c = next(c for c in summary.build(data)["configs"] if c["mechanism"] == "process-futex"
             and c["params"]["placement"] == "cross-cpu")
    h = c["headline"]
    assert [(m["count"], m["repetitions"]) for m in h["modes"]] == [(1, [3]), (4, [1, 2, 4, 5])]
    assert h["interval"] is None and "2 groups" in h["note"]
    assert h["value"] == pytest.approx(9000, rel=0.01)   # the larger group, not a blend
    assert c["ratio"]["interval"] is None and c["ratio"]["modes"]
    modes = next(f for f in findings(data) if f["id"] == "modes")
    assert modes["severity"] == "warning"
    assert "1 at 90" in modes["what"] and "4 at 9,0" in modes["what"]


def _doc_with(section: dict) -> dict:
    return {"configs": [], "sections": {"s": section}}


def test_thin_tail_reads_the_quantiles_sections_print():
    thin = {"rows": [{"label": "lwc-serve p99.9",
                      "quantile": {"q": 0.999, "n": 114, "label": "lwc-serve lwc p99.9"}}]}
    fired = checks.check_thin_tail(None, _doc_with(thin))
    assert fired and "lwc-serve lwc p99.9 (q99.9 of 114 samples)" in fired.what
    enough = {"rows": [{"quantile": {"q": 0.99, "n": 1000}}, {"quantile": {"q": 0.5, "n": 20}}]}
    assert checks.check_thin_tail(None, _doc_with(enough)) is None
    assert checks.check_thin_tail(None, _doc_with({"rows": [{"quantile": {"q": 0.99, "n": 999}}]}))


def test_bad_fit_reads_the_fits_sections_carry():
    bad = {"fits": [{"label": "lwc-create uffd-wp", "fit": {"bad_fit": True,
                                                            "why": "per-page cost 2-6.7 us"}}]}
    fired = checks.check_bad_fit(None, _doc_with(bad))
    assert fired and "lwc-create uffd-wp: per-page cost 2-6.7 us" in fired.what
    by_p = {"fits": [{"fit": {"linearity_p": 0.001, "label": "cow"}}]}
    assert "cow: linearity test p = 0.001" in checks.check_bad_fit(None, _doc_with(by_p)).what
    good = {"fits": [{"fit": {"linearity_p": 0.4, "bad_fit": False}}]}
    assert checks.check_bad_fit(None, _doc_with(good)) is None
