"""Table formatting: numbers, extra params, notes for failures."""

from isobench.analysis.kit import units
from isobench.render.kit import table
from isobench.render import console


def test_fmt_num():
    assert [table.fmt_num(v) for v in (None, 7, 12345, 1.234, 52.0, 442.04, 125216.4)] == \
        ["-", "7", "12,345", "1.23", "52.0", "442.0", "125,216"]


def test_a_narrow_interval_prints_bounds_that_differ():
    # Three significant digits would print [641, 641]: the bounds take the
    # digits they need to differ, and no more where three suffice.
    assert table.fmt_interval(641.2, 641.4) == "[641.2, 641.4]"
    assert table.fmt_interval(641.2, 652.0) == "[641, 652]"
    assert table.fmt_interval(641.0, 641.0) == "[641, 641]"  # truly equal
    assert table.fmt_interval(12_345.1, 12_345.3) == "[12,345.1, 12,345.3]"
    assert table.fmt_interval(0.0012341, 0.0012346) == "[0.001234, 0.001235]"
    assert table.fmt_ratio_interval(1.0012, {"low": 1.0008, "high": 1.0016}) == \
        "1.001 [1.001, 1.002]"
    assert table.fmt_ratio_interval(1.52, {"low": 1.44, "high": 1.61}) == "1.52 [1.44, 1.61]"
    for low, high in ((641.2, 641.4), (1.0001, 1.0002), (99.95, 99.96), (0.5, 0.5000001)):
        text = table.fmt_interval(low, high)
        a, b = text.strip("[]").split(", ")
        assert a != b, text


def _doc(results, configs=()):
    return {"run": {"run_id": 1, "started": "t", "status": "failed", "db": "/db",
                    "options": {"repeat": 1}},
            "measurement": {"counters": [], "tsc": [], "unit": None, "empty_region_median": None,
                            "empty_region_mean": None, "counter_steps": []},
            "method": {"headline_min_steps": 20}, "configs": list(configs),
            "results": results}


def _config(**change):
    c = {"benchmark": "pingpong", "mechanism": "-", "params": {"placement": "same-cpu",
                                                             "primitive": "pipe"},
         "unit": "ns", "role": "primitive", "headline_phase": True, "to_ns": 1.0,
         "repetitions": [{"median": 1200.0, "batched": None, "outputs": {}}],
         "headline": {"value": 1200.0, "source": "median", "interval": {
             "low": 1100.0, "high": 1300.0, "quantized": False}, "between": "one process",
             "quantized": False, "batched_unreliable": False, "ns": 1200.0},
         "ratio": None}
    c.update(change)
    return c


def test_config_row_shows_every_param_and_its_source():
    row = table.config_row(_config(), 1)
    assert row[:5] == ["pingpong", "-", "same-cpu", "-", "primitive=pipe"]
    assert row[5:8] == ["1,200", "1,100..1,300", "median 1p"]
    assert row[-1] == "1"


def test_quantized_interval_is_shown_as_plus_minus_a_step():
    h = {"value": 78.0, "source": "median", "between": "one process", "quantized": True,
         "batched_unreliable": False,
         "interval": {"low": 52.0, "high": 104.0, "quantized": True}}
    assert table.interval_text(h) == "±26.0"
    assert table.source_text(h) == "median q 1p"
    assert table.source_text({**h, "quantized": False, "batched_unreliable": True,
                              "between": "repetitions"}) == "median !"


def test_failures_are_loud():
    r = {"benchmark": "switch", "mechanism": "x", "status": "failed", "reason": "boom",
         "params": {}, "unit": None, "repetition": 1}
    text = console.run_report(_doc([r]))
    assert "FAILED: switch -m x: boom" in text
    assert text.splitlines()[-1].startswith("results stored in /db")


def test_notes_say_which_configuration():
    # Two skipped sizes of one mechanism must not read as one note twice;
    # the same note from several repetitions is one line.
    rs = [{"benchmark": "kv", "mechanism": "mprotect", "status": "skipped", "reason": f"slow {n}",
           "params": {"placement": "same-cpu", "data_bytes": n}, "unit": "tsc_ticks",
           "repetition": rep} for n in (4 << 20, 16 << 20) for rep in (1, 2)]
    text = console.run_report(_doc(rs))
    assert "skipped: kv -m mprotect (same-cpu, 4 MiB): slow 4194304 (2 repetitions)" in text
    assert "skipped: kv -m mprotect (same-cpu, 16 MiB): slow 16777216 (2 repetitions)" in text


def test_a_reason_whose_figures_vary_by_repetition_is_one_line():
    rs = [{"benchmark": "kv", "mechanism": "mprotect", "status": "skipped",
           "reason": f"predicted {t} s, over the 15 s budget",
           "params": {"placement": "same-cpu", "data_bytes": 4 << 20}, "unit": "tsc_ticks",
           "repetition": rep} for rep, t in ((1, 63), (2, 68), (3, 33))]
    rs.append({**rs[0], "reason": "isob crashed", "status": "failed", "repetition": 4})
    lines = [l for l in console.run_report(_doc(rs), wide=True).splitlines() if "mprotect" in l]
    assert lines == [
        "skipped: kv -m mprotect (same-cpu, 4 MiB): predicted 63 s, over the 15 s budget "
        "(3 repetitions; figures of the first)",
        "FAILED: kv -m mprotect (same-cpu, 4 MiB): isob crashed"]


def test_timer_ticks_convert_to_ns_on_both_architectures():
    # The TSC (x86-64) and the generic timer (arm64) both count at the
    # header's tsc_hz; core cycles have no fixed rate and never convert.
    assert units.to_ns(1250.0, "tsc_ticks", 2.5e9) == units.to_ns(12.5, "cntvct_ticks", 25e6) == 500.0
    assert units.to_ns(1250.0, "cycles", 2.5e9) is None


def _run_row(i, status="ok", end_reason=None, argv=None):
    return {"run_id": i, "started": "2026-01-02T03:04:05", "status": status,
            "end_reason": end_reason, "host": "bench-host", "results": {"ok": 12},
            "argv": argv or ["isobench", "run", "switch", "--quick", "-m", "direct,thread"]}


def test_runs_keeps_the_commands_beside_one_long_status():
    long = ("SIGTERM after the guard found the machine loaded by another process "
            "and gave up waiting for it")
    runs = [_run_row(1), _run_row(2, "interrupted", long), _run_row(3)]
    lines = console.runs_report(runs, "/db").splitlines()
    assert max(len(line) for line in lines) <= table.WIDTH
    # The ordinary runs keep the most of their command the width allows.
    for i in (1, 3):
        row = next(line for line in lines if line.startswith(f"  {i}  "))
        assert "isobench run switch --quick -m" in row
    # The long status continues on the next lines of its column, whole.
    assert " ".join(" ".join(lines).split()).count("and gave up waiting for it") == 1
    # Without a long status the table is one line per run.
    assert len(console.runs_report([_run_row(1), _run_row(3)], "/db").splitlines()) == 6


def test_runs_cuts_a_command_that_does_not_fit():
    argv = ["isobench", "run", "switch"] + ["--placement", "same-cpu,cross-cpu"] * 8
    line = console.runs_report([_run_row(1, argv=argv)], "/db").splitlines()[3]
    assert len(line) == table.WIDTH and line.endswith("...")


def test_a_folded_label_breaks_between_words_not_inside_them():
    """compare's mechanism column, 15 wide: "direct (indirect-call)" goes
    on two lines, the second the whole word (once it was "(indirect-cal",
    "l)"); a word wider than the column itself is still cut, never lost."""
    from isobench.render.kit import table
    rows = [["direct (indirect-call)", "x" * 84], ["direct (inline)", "y" * 84]]
    out = table.render_fit(["mechanism", "rest"], rows, flex=0, width=101)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 101
    labels = [line[:15].strip() for line in lines[2:]]
    assert labels == ["direct", "(indirect-call)", "direct (inline)"]
    out = table.render_fit(["mechanism", "rest"], [["a" * 30, "x" * 84]], flex=0, width=101)
    assert "".join(line[:15].strip() for line in out.splitlines()[2:]) == "a" * 30


def test_a_folded_block_leaves_out_rows_with_nothing_in_it():
    """oslat's published column holds the averaged rows only: its block
    (the second, here) leaves out the rows with '-' alone; the first block
    keeps every row."""
    from isobench.render.kit import table
    heads = ["row", "a", "b", "pub"]
    rows = [["r1", "1.00", "2.00", "1.20"], ["r2", "1.00", "2.00", "-"]]
    first, second = table.fold(heads, rows, width=17, keep=1, drop_empty=True).split("\n\n")
    assert "r2" in first and "r1" in second and "r2" not in second
    assert all("r2" in b for b in table.fold(heads, rows, width=17, keep=1).split("\n\n"))


def test_two_folding_columns_share_the_room_without_cutting_words():
    """compare folds the label and the verdict: each gets its longest word
    first ("(indirect-call)", "significant"), then the split that takes the
    fewest lines; proportional shares had cut "(indir" / "ect-call)"."""
    from isobench.render.kit import table
    rows = [["direct (indirect-call)", "y" * 60, "not significant"],
            ["direct (inline)", "y" * 60, "not significant"]]
    out = table.render_fit(["mechanism", "x", "verdict"], rows, flex=(0, 2), width=94)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 94
    assert "(indirect-call)" in out and out.count("not significant") == 2
    assert len(lines) == 2 + 3
