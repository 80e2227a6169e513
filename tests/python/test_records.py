"""Result records: validated on construction, immutable, parsed from isob lines."""

import dataclasses

import pytest

from isobench.core.records import (NO_MECHANISM, Header, ProtocolError, Result, parse_line)

HEADER = {"schema_version": 1, "type": "header", "benchmark": "switch", "mechanism": "direct",
          "counter": "tsc", "unit": "tsc_ticks", "counter_why": "no PMU", "events": ["tsc"],
          "tsc_hz": 2.6e9, "tsc_hz_source": "tsc_known_freq",
          "empty_region": {"median": 30.0, "min": 28, "n": 10}, "cpu": 0, "ncpus": 2, "n": 10,
          "warmup": 1, "batch_k": 100, "batch_reps": 15, "quick": False}
RESULT = {"schema_version": 1, "type": "result", "benchmark": "switch", "mechanism": "direct",
          "params": {"placement": "same-cpu", "payload": 0, "variant": "indirect"},
          "unit": "tsc_ticks", "counter": "tsc", "status": "ok", "reason": None, "n": 3,
          "dropped": 0, "warmup": 1, "batched": 11.5, "empty_region": 30.0,
          "samples": [12, 10, 11]}


def test_parse_line_accepts_schema_1_only():
    assert parse_line('{"schema_version": 1, "type": "x"}')["type"] == "x"
    for bad in ("garbage", "[1, 2]", '{"schema_version": 2, "type": "x"}',
                '{"schema_version": 1}', '{"type": "result"}'):
        with pytest.raises(ProtocolError):
            parse_line(bad)


def test_result_from_line():
    h = Header.from_line(HEADER)
    r = Result.from_line(RESULT, h)
    assert r.samples == (12, 10, 11)
    assert r.params["placement"] == "same-cpu"
    assert r.summary.median == 11.0
    assert r.header["tsc_hz"] == 2.6e9
    assert r.params_json() == '{"payload": 0, "placement": "same-cpu", "variant": "indirect"}'


def test_result_is_immutable():
    r = Result.from_line(RESULT, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.status = "failed"
    with pytest.raises(TypeError):
        r.params["placement"] = "cross-cpu"


@pytest.mark.parametrize("change", [
    {"status": "great"},
    {"samples": [1, -2]},
    {"samples": [1, 2.5]},
    {"samples": [True]},
    {"samples": []},                               # ok without samples
    {"samples": [1, 2**64]},
    {"params": [1]},
    {"batched": "fast"},
    {"dropped": -1},
    {"benchmark": ""},
    {"events": {"instructions": [1]}},             # not as long as samples
])
def test_invalid_results_are_rejected(change):
    with pytest.raises(ValueError):
        Result.from_line({**RESULT, **change}, None)


def test_a_failure_must_say_why():
    with pytest.raises(ValueError):
        Result(benchmark="switch", mechanism="direct", params={}, status="failed", reason=None)


def test_skipped_without_reason_gets_one():
    r = Result.from_line({**RESULT, "status": "skipped", "reason": None, "samples": []}, None)
    assert r.reason


def test_failure_record_takes_unit_from_header():
    h = Header.from_line(HEADER)
    r = Result.failure("switch", "test-crash", "isob killed by signal 11 (SIGSEGV)", h)
    assert (r.status, r.unit, r.counter, r.samples) == ("failed", "tsc_ticks", "tsc", ())
    assert r.summary.n == 0


def test_mechanism_override_for_benchmarks_without_one():
    r = Result.from_line({**RESULT, "mechanism": None, "benchmark": "pingpong"}, None,
                         mechanism=NO_MECHANISM)
    assert r.mechanism == "-"


def test_header_requires_counter_and_unit():
    with pytest.raises(ValueError):
        Header.from_line({**HEADER, "counter": None})
