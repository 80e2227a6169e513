"""The commands on stored runs: show, runs, export, import, report, plot and
check."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .common import (EXIT_OK, RUN_SPEC, Formatter, OutputError, add_db, add_json, add_wide,
                     db_path, positive_int, print_json)
from ..core import attackers
from ..analysis import checks, summary
from ..analysis.kit import runs
from ..render import console, matrix, report
from ..render.kit import plots, table
from ..errors import UsageError
from ..store import Store, export, interchange


def add_parsers(sub) -> None:
    _add_show(sub)
    _add_runs(sub)
    _add_export(sub)
    _add_import(sub)
    _add_report(sub)
    _add_plot(sub)
    _add_check(sub)


def _add_show(sub) -> None:
    p = sub.add_parser(
        "show", formatter_class=Formatter,
        description="Print a stored run: the same table `isobench run` prints.",
        epilog="examples:\n  isobench show            the latest run\n  isobench show 3\n"
               "  isobench show --json --db other.sqlite\n  isobench show newest   a run still "
               "running, too")
    p.add_argument("run", nargs="?", metavar="RUN", help=RUN_SPEC)
    add_wide(p)
    add_json(p, "the run")
    add_db(p)
    p.set_defaults(func=cmd_show)


def _add_runs(sub) -> None:
    p = sub.add_parser(
        "runs", formatter_class=Formatter,
        description="List the runs in the store, one line each: id, when it started, its "
                    "status, the\nhost it ran on, how many results it has (failed and "
                    "skipped ones counted apart)\nand the command that made it.  Any id "
                    "shown can be given to show, report,\ncheck, compare and export.",
        epilog="examples:\n  isobench runs\n  isobench runs --json | jq '.runs[-1].run_id'\n"
               "  isobench runs --db other.sqlite")
    add_json(p, "the runs")
    add_db(p)
    p.set_defaults(func=cmd_runs)


def _add_export(sub) -> None:
    p = sub.add_parser(
        "export", formatter_class=Formatter,
        description="Write a stored run as CSV (one row per result: params, summary "
                    "statistics, host,\nCPU, kernel, commit) or JSON (everything: "
                    "environment, jobs, results with their\nheaders; the raw samples with "
                    "--samples).  A FILE ending in .gz is written\ngzip-compressed, one "
                    "ending in .zst zstd-compressed (where Python has a zstd\nmodule); "
                    "`isobench import` reads all three.  On a terminal a bar shows how far\n"
                    "it is.",
        epilog="examples:\n  isobench export latest --format csv -o latest.csv\n"
               "  isobench export 3 --format json | jq .environment\n"
               "  isobench export 3 --format json --samples -o run3.json.gz")
    p.add_argument("run", metavar="RUN", help=RUN_SPEC)
    p.add_argument("--format", required=True, choices=export.FORMATS, help="csv or json")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write to FILE, compressed where it ends in .gz or .zst (default: "
                        "stdout)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--samples", action="store_true",
                   help="JSON: every raw sample too (millions in a full run; what `import` "
                        "needs to recompute statistics; CSV never has them)")
    g.add_argument("--no-samples", action="store_true",
                   help="JSON: without the raw samples (the default; kept for scripts that "
                        "say so)")
    add_db(p)
    p.set_defaults(func=cmd_export)


def _add_import(sub) -> None:
    p = sub.add_parser(
        "import", formatter_class=Formatter,
        description="Read runs into the store: a JSON export (`isobench export RUN --format "
                    "json`, of\nthis or an older isobench) or another store (every run, or "
                    "those --run names).\nThe file is checked through before anything is "
                    "stored; an export of an unknown\nschema_version is refused.  A run already "
                    "in the store (the same uid) is\nskipped, so importing twice changes "
                    "nothing.  Each imported run records where\nit came from (`show --json`: "
                    "origin).\nA gzip- or zstd-compressed export is read as it is; on a "
                    "terminal a bar shows how\nfar the import is.",
        epilog="examples:\n  isobench import run3.json\n  isobench import run3.json.gz\n"
               "  isobench import laptop.sqlite --run 4 --db all.sqlite\n\n"
               "exit status: 0 imported (or already there), 1 the source store is damaged, "
               "2 bad usage\nor a file that is not an export")
    p.add_argument("file", metavar="FILE", help="a JSON export or an isobench store")
    p.add_argument("--run", dest="runs", action="append", type=positive_int, metavar="ID",
                   help="from a store: import only this run (repeatable; default: all)")
    add_json(p, "what was imported")
    add_db(p)
    p.set_defaults(func=cmd_import)


def _add_report(sub) -> None:
    p = sub.add_parser(
        "report", formatter_class=Formatter,
        description="Write a report of a stored run into DIR: index.html (self-contained: the "
                    "plots are\nembedded), summary.md (platform, findings, switch and "
                    "key-value tables), LaTeX\ntables (platform.tex, switch.tex, kv.tex: "
                    "booktabs, each compiles alone), results.csv\n(one row per "
                    "configuration: one column per parameter, the headline, its\ninterval, "
                    "the ratio to direct), stats.json (every number) and each plot as PNG,\n"
                    "SVG and PDF at 7 in (NAME-2col.pdf) and 3.5 in (NAME-1col.pdf), with its "
                    "caption\nin NAME.caption.txt.\n\nThe soundness findings are those of "
                    "`isobench check`.  Published figures are shown\nbeside local numbers, "
                    "marked as published, never mixed into local statistics;\nonly those with "
                    "a local counterpart unless --all-published.  A plot whose data\nthe run "
                    "lacks (no kv results, no kv-server results) is left out with a note."
                    "\n\nDIR belongs to the report: .isobench-report.json lists the files "
                    "it wrote and\nthe run; the next report into DIR removes those it does "
                    "not rewrite.  Other\nfiles are left alone; one whose name the report "
                    "would take is refused\n(--force overwrites it).",
        epilog="examples:\n  isobench report -o report/              the latest run\n"
               "  isobench report 3 -o paper/ --format tex,csv\n"
               "  isobench report 3 -o /tmp/run3 --json   what was written, as JSON")
    p.add_argument("run", nargs="?", metavar="RUN", help=RUN_SPEC)
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="folder to write into (created if missing)")
    p.add_argument("--format", dest="formats", type=report_formats, metavar="LIST",
                   default=report.FORMATS,
                   help=f"comma-separated: {', '.join(report.FORMATS)} (default: all); the "
                        "plots and stats.json are always written")
    p.add_argument("--all-published", action="store_true",
                   help="show every published figure, also those without a local "
                        "counterpart in this run")
    p.add_argument("--force", action="store_true",
                   help="overwrite files in DIR that no isobench report recorded writing "
                        "(refused by default, with their names)")
    add_json(p, "what was written and the findings")
    add_db(p)
    p.set_defaults(func=cmd_report)


def _add_plot(sub) -> None:
    p = sub.add_parser(
        "plot", formatter_class=Formatter,
        description="Draw every stored per-call sample of one configuration of a run: the "
                    "ECDF of each\nrepetition (a fresh process) and of all pooled, and a "
                    "histogram, with the\nheadline, its 95% interval and the samples' p5..p95 "
                    "marked.  CONFIG is the\nbenchmark, the mechanism and params as k=v, as "
                    "the report's full results\nname them; enough of it to pick one "
                    "configuration.  The format follows FILE's\nsuffix: .png, .svg or .pdf.",
        epilog="examples:\n"
               "  isobench plot --config 'switch thread payload=0 placement=same-cpu' -o t.svg\n"
               "  isobench plot 3 --config 'kv wasm data_bytes=1048576' -o wasm-1m.pdf")
    p.add_argument("run", nargs="?", metavar="RUN", help=RUN_SPEC)
    p.add_argument("--config", required=True, metavar="CONFIG",
                   help="benchmark mechanism k=v ...: the configuration to draw")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the file to write: .png, .svg or .pdf")
    add_db(p)
    p.set_defaults(func=cmd_plot)


def _add_check(sub) -> None:
    ids = "\n".join(f"  {c.severity:8} {c.id}" for c in checks.CHECKS)
    p = sub.add_parser(
        "check", formatter_class=Formatter,
        description="Check a stored run for what makes its numbers wrong, missing or "
                    "qualified: failed\nor skipped results, an interrupted run, no "
                    "baseline, one process only, a\nbatched estimate or a median that "
                    "cannot be trusted, an unpinned or untuned\nmachine, counters that "
                    "missed samples or the other process, too much variation.\nEach "
                    "finding has a severity (error: numbers wrong or missing; warning: they "
                    "hold\nwith a caveat; info), says what to do next and points into "
                    f"{checks.DOC};\nwhere it applies, it names the flaw of van der Kouwe "
                    "et al., SoK: Benchmarking\nFlaws in Systems Security (EuroS&P 2019, "
                    f"Table I).\n\nchecks:\n{ids}",
        epilog="exit status: 0 no errors (warnings are printed), 3 errors (--strict: or "
               "warnings),\n1 could not check, 2 bad usage\n\nexamples:\n"
               "  isobench check && isobench report -o report/\n"
               "  isobench check 3 --json | jq '.findings[].id'\n  isobench check --strict")
    p.add_argument("run", nargs="?", metavar="RUN", help=RUN_SPEC)
    p.add_argument("--strict", action="store_true",
                   help="warnings count as errors for the exit status")
    add_json(p, "the findings")
    add_db(p)
    p.set_defaults(func=cmd_check)


def report_formats(text: str) -> tuple[str, ...]:
    items = tuple(f.strip() for f in text.split(",") if f.strip())
    bad = [f for f in items if f not in report.FORMATS]
    if bad or not items or not text.isascii():
        raise argparse.ArgumentTypeError(
            f"{text!r}: formats are a comma-separated list of {', '.join(report.FORMATS)}")
    return tuple(dict.fromkeys(items))


def run_document(store: Store, run_id: int, doc: dict | None = None) -> dict:
    """The JSON of `run --json` and `show --json` (the same for the same run):
    the stored run and results, and its summary document."""
    results = []
    for r in store.results(run_id):
        r = dict(r)
        r.pop("header", None)  # in `export --format json`; too bulky here
        results.append(r)
    doc = doc or summary.build(runs.load_run(store, run_id))
    return {**store.run(run_id), "db": str(store.path), "jobs": store.jobs(run_id),
            "results": results, "findings": doc["findings"], "summary": doc}


def print_run(store: Store, run_id: int, as_json: bool, doc: dict | None = None,
               wide: bool = False) -> None:
    doc = doc or summary.build(runs.load_run(store, run_id))
    if as_json:
        print_json(run_document(store, run_id, doc))
        return
    extra = []
    if wide and any(len(c["repetitions"]) > 1 for c in doc["configs"]):
        extra.append(console.repetition_report(doc))
    extra.append(table.wrap(checks.one_line(doc["findings"], run_id)))
    recorded = attackers.from_environment(doc["run"].get("environment"))
    if recorded:
        extra.append(matrix.format_matrix(*recorded, brief=not wide))
    # Names, host names and reasons may come from another machine (import).
    print(table.terminal(console.run_report(doc, extra, wide=wide)))


def cmd_show(args: argparse.Namespace) -> int:
    with Store.open(db_path(args), create=False) as store:
        run_id = store.resolve_run(args.run)
        print_run(store, run_id, args.json, wide=args.wide)
    return EXIT_OK


def cmd_runs(args: argparse.Namespace) -> int:
    with Store.open(db_path(args), create=False) as store:
        listed = store.run_list()
        path = str(store.path)
    if args.json:
        print_json({"db": path, "runs": listed})
    else:
        print(table.terminal(console.runs_report(listed, path)))
    return EXIT_OK


class _Bar:
    """How far an export or import is, as a bar on stderr where stderr is a
    terminal (rich; gone when it ends), else nothing.  Called with (stage,
    done, total)."""

    def __init__(self, what: str):
        self.what = what
        self.progress = None
        self.tasks: dict[str, int] = {}

    def __enter__(self) -> "_Bar":
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn
            self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                     TaskProgressColumn(), transient=True,
                                     console=Console(file=sys.stderr, highlight=False))
            self.progress.start()
        return self

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.progress is None:
            return
        if stage not in self.tasks:
            for task in self.tasks.values():  # the stages before are done
                self.progress.update(task, completed=self.progress.tasks[task].total)
            self.tasks[stage] = self.progress.add_task(f"{self.what}: {stage}", total=total)
        self.progress.update(self.tasks[stage], completed=done, total=total)

    def __exit__(self, *exc) -> None:
        if self.progress is not None:
            self.progress.stop()


def cmd_export(args: argparse.Namespace) -> int:
    if args.output == "":
        raise UsageError("-o '' names no file (leave -o out to write to stdout)")
    target = Path(args.output) if args.output else None
    if target is not None:
        interchange.compression_of(target.name)  # .zst without zstd: refused before any work
    with Store.open(db_path(args), create=False) as store, _Bar("export") as bar:
        run_id = store.resolve_run(args.run)

        def write(out) -> None:
            export.write(store, run_id, args.format, out, samples=args.samples,
                         progress=lambda done, total: bar("results", done, total))

        if target is None:
            write(sys.stdout.buffer)
            sys.stdout.buffer.flush()
            return EXIT_OK
        # Written beside FILE and renamed when whole: a failed export leaves
        # no half file under the name asked for.
        part = target.with_name(target.name + ".part")
        try:
            with interchange.open_for_writing(part, target.name) as out:
                write(out)
            os.replace(part, target)
        except OSError as e:
            part.unlink(missing_ok=True)
            raise UsageError(f"cannot write {args.output}: {e.strerror or e}") from None
        except BaseException:
            part.unlink(missing_ok=True)
            raise
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    source = Path(args.file)
    with Store.open(db_path(args), create=True) as store, _Bar("import") as bar:
        if source.exists() and source.resolve() == store.path.resolve():
            raise UsageError(f"{source} is the store itself")
        done = interchange.import_into(store, source, args.runs, progress=bar)
    if args.json:
        print_json({"db": str(store.path), "source": str(source), "imported": done})
        return EXIT_OK
    for d in done:
        what = f"run {d['source_run_id']} of {source}" if d["source_run_id"] else str(source)
        if d["skipped"]:
            print(table.terminal(f"{what} is already in {store.path} as run {d['run_id']} "
                                 "(same uid): skipped"))
        else:
            print(table.terminal(f"imported {what} as run {d['run_id']} into {store.path}"))
    if not done:
        print(table.terminal(f"{source} holds no runs: nothing imported"))
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    if not args.output:
        raise UsageError("-o '' names no folder: give the folder to write the report into")
    with Store.open(db_path(args), create=False) as store:
        run_id = store.resolve_run(args.run)
        report.prepare(Path(args.output))  # an unusable folder fails before any work
        data = runs.load_run(store, run_id)
        doc = summary.build(data)
        try:
            doc = report.write(doc, Path(args.output), args.formats, args.all_published,
                               args.force, samples=plots.config_samples(data))
        except OSError as e:
            # A plot or page that cannot be saved (a full disk, a folder
            # removed meanwhile): the report is incomplete, say where.
            where = f" ({e.filename})" if getattr(e, "filename", None) else ""
            raise OutputError(f"cannot write the report into {args.output}{where}: "
                              f"{e.strerror or e}") from None
    if args.json:
        print_json(doc)
    else:
        n = len(doc["findings"])
        print(table.terminal(f"report of run {run_id} written to {doc['dir']}: "
                             f"{', '.join(doc['files'])}"))
        if doc["removed"]:
            print(table.terminal(f"removed the previous report's {', '.join(doc['removed'])}"))
        for note in doc["omitted"].values():
            print(table.terminal(f"note: {note}"))
        print(table.terminal(checks.one_line(doc["findings"], run_id)))
    return EXIT_OK


PLOT_FORMATS = ("png", "svg", "pdf")


def cmd_plot(args: argparse.Namespace) -> int:
    out = Path(args.output)
    ext = out.suffix.lower().lstrip(".")
    if ext not in PLOT_FORMATS or not out.stem:
        raise UsageError(f"-o {args.output!r}: name a file ending in .png, .svg or .pdf (the "
                         "format follows the suffix)")
    if not out.parent.is_dir():
        raise UsageError(f"-o {args.output!r}: no folder {str(out.parent)!r} to write into")
    with Store.open(db_path(args), create=False) as store:
        run_id = store.resolve_run(args.run)
        data = runs.load_run(store, run_id)
    doc = summary.build(data)
    c = plots.find_config(doc, args.config)
    plot = plots.samples_plot(c, plots.config_samples(data)[tuple(c["key"])])
    if plot.figure is None:
        raise UsageError(f"run {run_id}, {plots.config_text(c)}: {plot.note}")
    plot.name = out.stem
    try:
        plots.save(plot, out.parent, ((ext, ""),))
    except OSError as e:
        raise OutputError(f"cannot write {args.output}: {e.strerror or e}") from None
    print(f"{out}: samples of run {run_id}, {plots.config_text(c)}")
    print(table.wrap(plot.caption))
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    with Store.open(db_path(args), create=False) as store:
        run_id = store.resolve_run(args.run)
        # scan: SQLite's integrity check and the decode of every row, so that
        # damage anywhere in the store is a finding (store-damaged).
        doc = summary.build(runs.load_run(store, run_id, scan=True))
    findings = doc["findings"]
    status = checks.exit_status(findings, strict=args.strict)
    if args.json:
        print_json({"run_id": run_id, "db": doc["run"]["db"], "strict": args.strict,
                     "counts": checks.counts(findings), "exit_status": status,
                     "findings": findings})
    else:
        print(table.terminal(f"run {run_id} in {doc['run']['db']}"))
        print(table.terminal(checks.render(findings)))
    return status
