"""Validation at the edge: every bad value is one line and exit 2 before a run
is stored, with the same limits the native driver enforces (one table,
`isob --limits --json`); outputs that cannot be written and paths that are
not files are one line too, never a traceback or a hang."""

import json
import os
import subprocess
import sys

import pytest

from isobench.core import validate
from isobench.errors import UsageError

from conftest import FAKE_ISOB, REPO, assert_one_error_line, load_fake

ISOB = REPO / "build" / "isob"
FULL_WIDTH_4 = "\uff14"  # '４'


@pytest.mark.parametrize("args, needle", [
    (["--n", "99999999999999999999"], "--n: 99999999999999999999 is not a whole number from 1 "
                                      "to 100000000"),
    (["--n", "100000001"], "from 1 to 100000000"),
    (["--n", FULL_WIDTH_4], "is not a whole number"),
    (["--n", " 5"], "is not a whole number"),
    (["--n", "1_0"], "is not a whole number"),
    (["--n", "+5"], "is not a whole number"),
    (["kv", "--sizes", FULL_WIDTH_4 + "K"], "is not a size in bytes"),
    (["kv", "--sizes", "32"], "'32' is not a multiple of 64 bytes from 64 to 16G"),
    (["kv", "--sizes", "17G"], "'17G' is not a multiple of 64 bytes"),
    (["kv", "--sizes", ",".join(["4K"] * 33)], "more than 32 sizes"),
    (["kv", "--sizes", "99999999999999999999999G"], "is not a multiple of 64 bytes"),
    (["-m", ","], "-m ',' names no mechanism"),
    (["-m", ""], "-m '' names no mechanism"),
    (["-m", "direct", "-m", " , "], "-m ' , ' names no mechanism"),
    (["--repeat", "99999999999999999999999"], "is not from 1 to 1000"),
    (["--repeat", "1001"], "is not from 1 to 1000"),
    (["--repeat", "0"], "is not from 1 to 1000"),
    (["--seed", str(2**64)], "is not from 0 to 18446744073709551615"),
    (["--seed=-1"], "is not a whole number"),
    (["--timeout", "nan"], "is not a positive number of seconds"),
    (["--timeout", "inf"], "is not a positive number of seconds"),
    (["--timeout", "1e9"], "is not a positive number of seconds"),
    (["--timeout", "99999999999"], "is more than 604800 seconds"),
    (["--timeout", FULL_WIDTH_4], "is not a positive number of seconds"),
    (["kv-server", "--seconds", "86401"], "is more than 86400 seconds"),
])
def test_bad_run_options(isobench, args, needle):
    line = assert_one_error_line(isobench("run", *args))
    assert needle in line
    # Refused before anything was stored or measured.
    assert not isobench.db.exists()
    measured = [c for c in isobench.isob_calls()
                if c and c[0] not in ("list", "--version", "--limits", "isolation")]
    assert measured == []


def test_good_values_at_the_limits_pass(isobench):
    p = isobench("run", "kv", "-q", "-m", "direct", "--sizes", "64,16G,4k", "--n", "1",
                 "--repeat", "2", "--timeout", "604800", "--seed", str(2**64 - 1),
                 "-m", "thread,,", "--placement", "same-cpu")
    assert p.returncode == 0, p.stderr
    calls = [c for c in isobench.isob_calls() if c[0] == "kv"]
    assert len(calls) == 2 * 2  # two mechanisms, two repetitions
    assert calls[0][calls[0].index("--sizes") + 1] == "64,16G,4k"


@pytest.mark.parametrize("args, needle", [
    (["show", "99999999999999999999999"], "no run 99999999999999999999999"),
    (["show", FULL_WIDTH_4], "is not a number"),
    (["export", "latest", "--format", "csv", "-o", ""], "-o '' names no file"),
    (["report", "-o", ""], "-o '' names no folder"),
])
def test_bad_show_export_report(isobench, args, needle):
    isobench("run", "switch", "-q", "-m", "direct")
    line = assert_one_error_line(isobench(*args))
    assert needle in line


@pytest.mark.parametrize("value", [FULL_WIDTH_4, " 80", "8_0", "65536"])
def test_bad_serve_port(isobench, value):
    line = assert_one_error_line(isobench("serve", "-m", "direct", "--port", value))
    assert "--port" in line


def test_report_to_empty_string_writes_nothing_here(isobench):
    isobench("run", "switch", "-q", "-m", "direct")
    before = set(os.listdir(isobench.cwd))
    assert_one_error_line(isobench("report", "-o", ""))
    assert set(os.listdir(isobench.cwd)) == before


@pytest.mark.parametrize("command", [["show"], ["run", "-m", "direct"], ["check"],
                                     ["import", "FILE"]])
def test_db_naming_a_fifo_does_not_hang(isobench, tmp_path, command):
    fifo = tmp_path / "db.fifo"
    os.mkfifo(fifo)
    export = tmp_path / "e.json"
    if command[0] == "import":
        isobench("run", "switch", "-q", "-m", "direct")
        isobench("export", "latest", "--format", "json", "-o", str(export))
    command = [str(export) if c == "FILE" else c for c in command]
    line = assert_one_error_line(isobench(*command, "--db", str(fifo)))  # the child time-out guards
    assert "is a FIFO, not a regular file" in line


@pytest.mark.parametrize("args", [["show"], ["show", "--json"], ["list", "--skip-isolation"],
                                  ["export", "latest", "--format", "json"], ["reference"]])
def test_output_to_a_full_device(isobench, args):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    isobench("run", "switch", "-q", "-m", "direct")
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "isobench", *args], cwd=isobench.cwd,
                           env=isobench.env, stdout=full, stderr=subprocess.PIPE, text=True,
                           timeout=120)
    line = assert_one_error_line(p, 1)
    assert "No space left on device" in line


def test_limits_table_parses():
    fake = load_fake()
    limits = validate.Limits.from_line(fake.LIMITS)
    assert limits.counts["n"] == (1, 100000000)
    assert (limits.size_min, limits.size_max, limits.size_max_items) == (64, 16 << 30, 32)
    with pytest.raises(ValueError):
        validate.Limits.from_line({"type": "limits", "options": {}})
    with pytest.raises(UsageError):
        limits.count("n", 0)
    limits.count("n", None)  # not given: isob's own default applies


def test_a_driver_without_limits_is_a_driver_error(isobench, tmp_path):
    # A driver that cannot say its limits cannot be trusted to enforce them.
    broken = tmp_path / "isob"
    broken.write_text(f"#!/bin/sh\n[ \"$1\" = --limits ] && exit 2\nexec {sys.executable} "
                      f"{FAKE_ISOB} \"$@\"\n")
    broken.chmod(0o755)
    p = isobench("run", "-m", "direct", ISOBENCH_ISOB=str(broken))
    line = assert_one_error_line(p, 1)
    assert "--limits --json` failed" in line
    assert not isobench.db.exists()


# ---- the same verdicts as the native driver ----

needs_isob = pytest.mark.skipif(not ISOB.exists(), reason="needs build/isob (make)")


def _isob_accepts(option, value):
    """Whether the real isob's parser takes value for option: a second, always
    bad option after it makes isob stop at parsing either way."""
    p = subprocess.run([str(ISOB), "kv", "-m", "direct", option, value, "--placement", "moon"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    return option not in p.stderr


def _python_accepts(option, value, limits):
    try:
        if option == "--sizes":
            limits.sizes(validate.size_tokens(value))
        else:
            limits.count(option[2:], validate.whole(value))
    except Exception:
        return False
    return True


@needs_isob
def test_real_limits_match_the_fake_and_parse():
    p = subprocess.run([str(ISOB), "--limits", "--json"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0
    real = json.loads(p.stdout)
    fake = load_fake().LIMITS
    assert real["type"] == "limits"
    for name, bounds in fake["options"].items():
        if name != "cpu":  # the real CPU count is this machine's
            assert real["options"][name] == bounds, name
    validate.Limits.from_line(real)


@needs_isob
@pytest.mark.parametrize("option, value", [
    ("--n", v) for v in ("1", "100000000", "100000001", "0", "+5", FULL_WIDTH_4, "1_0",
                         "99999999999999999999", "7x")
] + [
    ("--sizes", v) for v in ("64", "128", "4K", "4k", "16G", "17G", "32", "100", "0", "+64",
                             FULL_WIDTH_4 + "K", "1_024", "0x40", "64B", "4M,8M",
                             "18446744073709551616K", "4K,,8K")
])
def test_python_and_isob_agree(option, value):
    p = subprocess.run([str(ISOB), "--limits", "--json"], capture_output=True, text=True,
                       timeout=60)
    limits = validate.Limits.from_line(json.loads(p.stdout))
    assert _python_accepts(option, value, limits) == _isob_accepts(option, value)


def test_parameter_text_isob_prints_is_accepted_and_markup_is_not():
    """A parameter's text value may be free text as isob prints it (kv's
    pmu_reason), but nothing a table, a formula or markup would read."""
    from isobench.core import validate as v
    reason = ("perf unavailable (perf_event_open(cycles): No such file or directory (no "
              "hardware PMU, as in most VMs)); TSC: constant and nonstop, read with "
              "lfence;rdtsc;lfence")
    assert v.params_problem({"pmu_reason": reason, "path": "/usr/lib/libc.so.6+0x10",
                             "note": "µs ≤ 5 'quoted'"}) is None
    for bad in ("$x^{$", "thr<b>ead", "a|b", "\x1b]0;t\x07", "\\input{/etc/passwd}", "a\x00b",
                "a\nb", "\u202eabc", "`x`", "x" * (v.MAX_PARAM_TEXT + 1)):
        assert v.params_problem({"placement": bad}), repr(bad)
