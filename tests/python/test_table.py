"""Table formatting: numbers, extra params, notes for failures."""

from isobench import table


def test_fmt_num():
    assert [table.fmt_num(v) for v in (None, 7, 12345, 1.234, 52.0, 442.04, 125216.4)] == \
        ["-", "7", "12,345", "1.23", "52.0", "442.0", "125,216"]


def test_result_row_shows_every_param():
    row = table.result_row({"benchmark": "pingpong", "mechanism": "-", "status": "ok",
                            "params": {"placement": "same-cpu", "primitive": "pipe"},
                            "median": 1.0, "p5": 1.0, "p95": 1.0, "mad": 0.0, "batched": None,
                            "unit": "ns"})
    assert row[:5] == ["pingpong", "-", "same-cpu", "-", "primitive=pipe"]
    assert row[-1] == "ok"


def test_failures_are_loud():
    r = {"benchmark": "switch", "mechanism": "x", "status": "failed", "reason": "boom",
         "params": {}, "unit": None, "header": None}
    text = table.run_report({"run_id": 1, "started": "t", "status": "failed"}, [r], "/db")
    assert "FAILED" in text and "FAILED: switch -m x: boom" in text
    assert text.splitlines()[-1].startswith("results stored in /db")


def test_notes_say_which_configuration():
    # Two skipped sizes of one mechanism must not read as one note twice.
    rs = [{"benchmark": "kv", "mechanism": "mprotect", "status": "skipped", "reason": f"slow {n}",
           "params": {"placement": "same-cpu", "data_bytes": n}, "unit": "tsc_ticks",
           "header": None} for n in (4 << 20, 16 << 20)]
    text = table.run_report({"run_id": 1, "started": "t", "status": "ok"}, rs, "/db")
    assert "skipped: kv -m mprotect (same-cpu, 4 MiB): slow 4194304" in text
    assert "skipped: kv -m mprotect (same-cpu, 16 MiB): slow 16777216" in text


def test_timer_ticks_convert_to_ns_on_both_architectures():
    # The TSC (x86-64) and the generic timer (arm64) both count at the
    # header's tsc_hz; core cycles have no fixed rate and never convert.
    def ns(unit, hz, value):
        return table.result_row({"benchmark": "switch", "mechanism": "direct", "status": "ok",
                                 "params": {}, "median": value, "batched": value, "unit": unit,
                                 "header": {"tsc_hz": hz}})[-2]
    assert ns("tsc_ticks", 2.5e9, 1250.0) == ns("cntvct_ticks", 25e6, 12.5) == "500.0"
    assert ns("cycles", 2.5e9, 1250.0) == "-"
