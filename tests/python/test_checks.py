"""Soundness checks: the flawed fixture triggers every check, the clean one
none, and each check fires alone on a clean run changed in one way."""

import json

import pytest

from isobench import checks

from conftest import assert_one_error_line
from fixture_runs import fixture, import_doc, load_doc

ALL_IDS = [
    "no-baseline", "no-spread", "arithmetic-mean-of-ratios", "micro-only", "missing-platform",
    "relative-only", "unpinned", "frequency-scaling", "smt-active", "virtual-machine", "no-pmu",
    "dropped-samples", "counters-multiplexed", "counters-miss-other-side", "high-cv",
    "load-during-run",
]


def ids(data):
    return [f.id for f in checks.run_checks(data)]


def test_every_check_is_listed_and_documented():
    assert list(checks.CHECK_IDS) == ALL_IDS
    from conftest import REPO
    doc = (REPO / "docs" / "reducing-variance.md").read_text()
    for i in ALL_IDS:
        assert f"\n### {i}\n" in doc, i


def test_flawed_run_triggers_every_check(tmp_path):
    assert ids(load_doc(tmp_path, fixture("flawed_run"))) == ALL_IDS


def test_clean_run_triggers_none(tmp_path):
    assert ids(load_doc(tmp_path, fixture("clean_run"))) == []


def _results(doc, **match):
    return [r for r in doc["results"] if all(r.get(k) == v for k, v in match.items())]


def _drop(doc, **match):
    doc["results"] = [r for r in doc["results"] if r not in _results(doc, **match)]


def m_no_baseline(doc):
    doc["results"] = [r for r in doc["results"]
                      if not (r["benchmark"] == "switch" and r["mechanism"] == "direct")]


def m_no_spread(doc):
    _drop(doc, benchmark="kv", mechanism="mpk", repetition=2)
    _results(doc, benchmark="kv", mechanism="mpk")[0]["samples"]["primary"] = [420]


def m_arithmetic(doc):
    doc["aggregates"][0]["method"] = "arithmetic-mean"


def m_micro_only(doc):
    _drop(doc, benchmark="kv", mechanism="direct")
    _drop(doc, benchmark="kv", mechanism="mpk")


def m_missing_platform(doc):
    doc["environment"]["compiler"] = None


def m_relative_only(doc):
    r = json.loads(json.dumps(_results(doc, benchmark="kv", mechanism="direct")[0]))
    r.update(benchmark="pingpong", mechanism="-", unit="%", params={"primitive": "pipe",
                                                                  "placement": "same-cpu"})
    doc["results"].append(r)


def m_unpinned(doc):
    r = json.loads(json.dumps(_results(doc, mechanism="process-futex")[0]))
    r["params"]["placement"] = "unpinned"
    doc["results"].append(r)


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


@pytest.mark.parametrize("mutate, expected", [
    (m_no_baseline, ["no-baseline"]),
    (m_no_spread, ["no-spread"]),
    (m_arithmetic, ["arithmetic-mean-of-ratios"]),
    (m_micro_only, ["micro-only"]),
    (m_missing_platform, ["missing-platform"]),
    (m_relative_only, ["relative-only"]),
    (m_unpinned, ["unpinned"]),
    (m_frequency, ["frequency-scaling"]),
    (m_turbo, ["frequency-scaling"]),
    (m_smt, ["smt-active"]),
    (m_vm, ["virtual-machine"]),
    (m_no_pmu, ["no-pmu"]),
    (m_dropped_tsc, ["no-pmu", "dropped-samples"]),
    (m_dropped_perf, ["dropped-samples", "counters-multiplexed"]),
    (m_thread_scope, ["counters-miss-other-side"]),
    (m_thread_scope_undercount, ["counters-miss-other-side"]),
    (m_thread_scope_counted, []),
    (m_cv_within, ["high-cv"]),
    (m_cv_between, ["high-cv"]),
])
def test_each_check_alone(tmp_path, mutate, expected):
    doc = fixture("clean_run")
    mutate(doc)
    assert ids(load_doc(tmp_path, doc)) == expected


def _kv_server(mechanism, server, ops):
    """A kv-server result as kvserver.py stores it (the latency series in ns)."""
    return {"benchmark": "kv-server", "mechanism": mechanism,
            "params": {"server": server, "seconds": 5, "server_cpu": 0, "client_cpu": 1,
                       "ops_per_s": ops, "latency_avg_ns": 50000},
            "unit": "ns", "counter": "memcaslap", "status": "ok", "reason": None, "dropped": 0,
            "warmup": 0, "batched": None, "empty_region": None, "repetition": 1, "header": None,
            "samples": {"primary": [50000 + 10 * (i % 5) for i in range(20)]}}


def test_kv_server_reference_needs_no_direct(tmp_path):
    # memcached runs beside isob as the reference: it has no `direct` of its
    # own and must not be reported as lacking one, but an isob mechanism
    # without isob+direct in the same run still is.
    doc = fixture("clean_run")
    doc["results"] += [_kv_server("memcached", "memcached", 150000),
                       _kv_server("direct", "isob", 180000),
                       _kv_server("process-futex", "isob", 90000)]
    assert ids(load_doc(tmp_path, doc)) == []
    data = load_doc(tmp_path, doc, "b.db")
    futex = next(c for c in data.configs if c.benchmark == "kv-server"
                 and c.mechanism == "process-futex")
    assert data.baseline_of(futex).mechanism == "direct"
    _drop(doc, benchmark="kv-server", mechanism="direct")
    found = checks.run_checks(load_doc(tmp_path, doc, "c.db"))
    assert [f.id for f in found] == ["no-baseline"]
    assert "process-futex" in found[0].what and "memcached" not in found[0].what


def test_kv_server_alone_needs_no_harness_counter(tmp_path):
    # A run of kv-server only never starts the harness, so no counter is
    # recorded; that is not a missing platform detail.  Once a harness
    # result is in the run, a missing counter is one again.
    doc = fixture("clean_run")
    kvs = [_kv_server("memcached", "memcached", 150000), _kv_server("direct", "isob", 180000)]
    doc["results"] = kvs
    doc["environment"]["counter"] = None
    assert ids(load_doc(tmp_path, doc)) == []
    doc = fixture("clean_run")
    doc["results"] += kvs
    doc["environment"]["counter"] = None
    assert ids(load_doc(tmp_path, doc, "b.db")) == ["missing-platform"]


def test_finding_says_what_and_next_and_where(tmp_path):
    for f in checks.run_checks(load_doc(tmp_path, fixture("flawed_run"))):
        assert f.what and f.next
        assert f.doc == f"docs/reducing-variance.md#{f.id}"
    by = {f.id: f for f in checks.run_checks(load_doc(tmp_path, fixture("flawed_run"), "b.db"))}
    assert by["arithmetic-mean-of-ratios"].sok.startswith("B5")
    assert by["no-baseline"].sok.startswith("D1")
    assert by["micro-only"].sok.startswith("B1")
    assert by["missing-platform"].sok.startswith("E1")
    assert "cpu_model" in by["missing-platform"].what
    assert "12000 TSC ticks" in by["counters-miss-other-side"].what
    assert by["virtual-machine"].sok is None


def test_computed_aggregates_are_checked_too(tmp_path):
    data = load_doc(tmp_path, fixture("clean_run"))
    bad = [{"name": "x", "of": "ratio", "method": "arithmetic-mean", "value": 2.0}]
    assert [f.id for f in checks.run_checks(data, bad)] == ["arithmetic-mean-of-ratios"]


def test_check_command(isobench, tmp_path):
    flawed, clean = tmp_path / "flawed.sqlite", tmp_path / "clean.sqlite"
    import_doc(flawed, fixture("flawed_run"))
    import_doc(clean, fixture("clean_run"))
    doc, p = isobench.json("check", "--json", "--db", str(flawed))
    assert p.returncode == 1
    assert [f["id"] for f in doc["findings"]] == ALL_IDS
    assert all(f["doc"].startswith("docs/reducing-variance.md#") for f in doc["findings"])
    p = isobench("check", "--db", str(flawed))
    assert p.returncode == 1 and "16 findings" in p.stdout and "next:" in p.stdout
    doc, p = isobench.json("check", "latest", "--json", "--db", str(clean))
    assert (p.returncode, doc["findings"]) == (0, [])
    p = isobench("check", "--db", str(clean))
    assert p.returncode == 0 and "no findings" in p.stdout


@pytest.mark.parametrize("args, needle", [
    (["check", "7"], "no run 7"),
    (["check", "--frobnicate"], "unrecognized arguments"),
])
def test_check_bad_usage(isobench, tmp_path, args, needle):
    import_doc(isobench.db, fixture("clean_run"))
    assert needle in assert_one_error_line(isobench(*args))


def test_run_json_carries_findings(isobench):
    doc, p = isobench.json("run", "switch", "--json", "-m", "direct", "-m", "thread")
    assert p.returncode == 0
    found = [f["id"] for f in doc["findings"]]
    # The fake driver measures switch only, with the TSC.
    assert "no-pmu" in found and "micro-only" in found
    assert set(found) <= set(ALL_IDS)
