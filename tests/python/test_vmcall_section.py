"""The vmcall section (analysis/families/vmcall.py, render/families/vmcall.py) on made-up
configurations: each exit's ratio to the null system call of the same run,
the kvm mechanism's row, the caveat, and SEIMI's Table I rows where the
reference data has them (and the sentence saying it has none)."""

from __future__ import annotations

from isobench.analysis.kit import reference
from isobench.analysis.families import vmcall
from isobench.render.families import vmcall as render

CAVEAT = "nested virtualization: costs more than on bare metal"


def config(bench, mech, params, values_ns):
    gm = 1.0
    for v in values_ns:
        gm *= v
    gm **= 1.0 / len(values_ns)
    return {"benchmark": bench, "mechanism": mech, "params": params, "unit": "ns",
            "headline": {"value": gm, "ns": gm, "interval_ns": [gm * 0.9, gm * 1.1],
                         "between": "repetitions", "reps": len(values_ns),
                         "values": list(values_ns), "resolution": 0.0, "estimator": "median"}}


def doc_of(*configs, results=()):
    return {"configs": list(configs), "results": list(results)}


def base_params(x, ring=0):
    p = {"exit": x, "nested": True, "caveat": CAVEAT, "kvm": "kvm_intel",
         "handled_in": f"{x} place"}
    if ring is not None:
        p["ring"] = ring
    return p


def test_each_exit_over_the_null_system_call_of_the_same_run():
    doc = doc_of(config("vmcall", "-", base_params("io"), [1000.0, 1010.0, 990.0]),
                 config("vmcall", "-", {"exit": "syscall", "nested": True, "caveat": CAVEAT,
                                        "kvm": "kvm_intel"}, [100.0, 101.0, 99.0]),
                 config("switch", "kvm", {"payload": 0, "guest": "ring 0", "nested": True,
                                          "caveat": CAVEAT}, [2000.0, 2000.0, 2000.0]),
                 config("switch", "kvm", {"payload": 64, "guest": "ring 0"}, [5.0, 5.0, 5.0]))
    s = vmcall.build(None, doc)
    by = {r["what"]: r for r in s["rows"]}
    assert set(by) == {"io", "syscall", "kvm mechanism"}  # payload 64 is not Table I's
    assert abs(by["io"]["over_syscall"]["value"] - 10.0) < 0.01
    assert abs(by["kvm mechanism"]["over_syscall"]["value"] - 20.0) < 0.01
    assert by["syscall"]["over_syscall"] is None
    assert by["kvm mechanism"]["ring"] == 0 and by["io"]["ring"] == 0
    assert s["caveats"] == [CAVEAT] and s["nested"] == [True]
    text = render.text(s, doc)
    assert CAVEAT in text and "x syscall" in text


def test_without_the_null_system_call_the_section_says_so():
    doc = doc_of(config("switch", "kvm", {"payload": 0, "guest": "ring 3"}, [2000.0] * 3))
    s = vmcall.build(None, doc)
    assert s["syscall_measured"] is False
    assert s["rows"][0]["over_syscall"] is None
    assert "the null system call is not in this run" in render.text(s, doc)


def test_seimi_table_one_rows_stand_beside_when_the_reference_data_has_them(monkeypatch):
    s = vmcall.build(None, doc_of(config("vmcall", "-", base_params("cpuid"), [900.0] * 3)))
    if not s["published"]:
        assert "not transcribed in data/reference.csv" in s["published_note"]
    real = reference.load()
    row = real[0].__class__(**{**real[0].__dict__, "id": "seimi-trap-test", "value": 1.5, "value_text": "1.5",
                               "unit": "us", "source": "SEIMI (IEEE S&P 2020)",
                               "where": "Table I", "subject": "SEIMI", "metric": "VM exit"})
    monkeypatch.setattr(reference, "load", lambda *a, **k: [*real, row])
    s = vmcall.build(None, doc_of(config("vmcall", "-", base_params("cpuid"), [900.0] * 3)))
    assert [p["id"] for p in s["published"]] == ["seimi-trap-test"]
    assert s["published_note"] is None
    assert "PUBLISHED: SEIMI, VM exit: 1.5 us" in render.text(s, {})


def test_no_vmcall_and_no_kvm_switch_no_section():
    doc = doc_of(config("switch", "direct", {"payload": 0}, [10.0] * 3))
    assert vmcall.build(None, doc) is None


def test_seimi_fault_tests_stand_beside_with_their_difference():
    refs = {r.id: r for r in reference.load()}
    s = vmcall.build(None, doc_of(config("vmcall", "-", base_params("io"), [900.0] * 3)))
    want = [ids for ids in vmcall.SEIMI_FAULTS if ids[1] in refs and ids[2] in refs]
    assert [f["test"] for f in s["seimi_faults"]] == [label for label, *_ in want]
    for f, (label, native, seimi) in zip(s["seimi_faults"], want):
        assert f["added"] == refs[seimi].value - refs[native].value
        assert f"native {refs[native].text()}" in render.text(s, {})


def test_a_folded_table_names_each_row_by_exit_and_ring():
    # mmio runs in ring 0 and ring 3: where the console folds the ratio
    # column under the times, the ring goes with the exit, or the two
    # mmio rows could not be told apart.
    doc = doc_of(config("vmcall", "-", base_params("mmio", ring=0), [1000.0] * 3),
                 config("vmcall", "-", base_params("mmio", ring=3), [7000.0] * 3),
                 config("vmcall", "-", {"exit": "syscall", "nested": True, "caveat": CAVEAT,
                                        "kvm": "kvm_intel"}, [100.0] * 3))
    for c in doc["configs"]:
        c["params"]["handled_in"] = "user space (KVM_EXIT_MMIO, then KVM_RUN again), a long text"
    s = vmcall.build(None, doc)
    text = render.text(s, doc).splitlines()
    head = next(i for i, ln in enumerate(text) if "x syscall [95%]" in ln)
    assert "us [95%]" not in text[head], "the table was meant to fold"
    assert text[head].split()[:2] == ["exit", "ring"]
    lines = [ln.split() for ln in text[head + 2:head + 5]]
    assert [ln[:2] for ln in lines] == [["mmio", "0"], ["mmio", "3"], ["syscall", "-"]], lines
