"""A run loaded for analysis holds its samples as sorted int64 arrays read
from the store in one pass: the same values Store.samples gives one result
at a time, the same baselines, the same descriptions as the lists did."""

from __future__ import annotations

import random

import numpy as np

from isobench.analysis.kit import runs
from isobench.core import stats
from isobench.store import Store, decode_sample_array, decode_samples, encode_samples

from fixture_runs import fixture, import_doc
from synthetic_runs import result, run_doc


def _store_with_run(tmp_path):
    rng = random.Random(3)
    rs = []
    for rep in (1, 2, 3):
        for mech, scale in (("direct", 1), ("process-futex", 40), ("uthread", 2)):
            for payload in (0, 64):
                samples = [rng.randint(100, 140) * scale + payload for _ in range(rng.randint(5, 300))]
                rs.append(result("pingpong" if mech == "direct" and payload else "switch", mech,
                                 {"payload": payload}, rep=rep, samples=samples))
    rs.append(result("switch", "mpk", {"payload": 0}, status="skipped", reason="no pku"))
    db = tmp_path / "runs.sqlite"
    return db, import_doc(db, run_doc(rs))


def test_run_samples_are_the_samples_of_each_result(tmp_path):
    db, run_id = _store_with_run(tmp_path)
    with Store.open(db, create=False) as s:
        every = s.run_samples(run_id)
        ok = s.run_samples(run_id, status="ok")
        results = s.results(run_id)
        for r in results:
            one = s.samples(r["result_id"])
            assert {k: tuple(v) for k, v in every.get(r["result_id"], {}).items()} == one
            assert list(s.samples(r["result_id"], as_array=True)) == list(one)
        assert set(ok) == {r["result_id"] for r in results if r["status"] == "ok" and
                           s.samples(r["result_id"])}
        data = runs.load_run(s, run_id)
    for cfg in data.configs:
        pooled = []
        for rid, xs in cfg.rep_samples.items():
            want = sorted(every[rid]["primary"])
            assert xs.dtype == np.int64 and xs.tolist() == want
            pooled += want
        assert cfg.samples.tolist() == sorted(pooled)
        d = cfg.description
        assert d == stats.describe(pooled) and d.n == len(pooled)


def test_a_baseline_is_found_among_the_direct_configurations_alone(tmp_path):
    doc = fixture("clean_run")
    db = tmp_path / "clean.sqlite"
    run_id = import_doc(db, doc)
    with Store.open(db, create=False) as s:
        data = runs.load_run(s, run_id)
    found = 0
    for cfg in data.configs:
        assert data.baseline_of(cfg) is runs.find_baseline(cfg, data.configs)
        found += data.baseline_of(cfg) is not None
    assert found > 0


def test_decoded_buffers_hold_the_encoded_values():
    values = [0, 1, 2**32, 2**62, 12345]
    blob = encode_samples(values)
    buf = decode_sample_array(blob, len(values), "zlib-u64le")
    assert list(buf) == values == list(decode_samples(blob, len(values), "zlib-u64le"))
    assert np.frombuffer(buf, dtype=np.int64).tolist() == values
    assert runs._int64(buf).tolist() == values and runs._int64((3, 1)).tolist() == [3, 1]
