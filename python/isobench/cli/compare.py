"""`isobench compare`: two runs (or machines), normalized to direct."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from .common import (EXIT_FAILED, EXIT_OK, Formatter, add_db, add_json, db_path, err,
                     print_json)
from ..analysis import compare, summary
from ..analysis.kit import runs
from ..render import compare as render_compare
from ..render.kit import table
from ..store import Store


def noise_band(text: str) -> float:
    """--noise-band PCT: a percentage in [0, 100), returned as a fraction."""
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not text.isascii() or not 0.0 <= v < 100.0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a percentage from 0 to below 100")
    return v / 100.0


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "compare", formatter_class=Formatter,
        description="Compare two stored runs result by result (same benchmark, mechanism and "
                    "params).\nEach run is normalized to its own `direct` baseline, so runs "
                    "from different\nmachines compare by what isolation costs on each:\n\n"
                    "  B/A = (value_B / direct_B) / (value_A / direct_A)\n\n"
                    "Values are the runs' headlines (docs/methodology.md), from the same "
                    "estimator on\nboth sides; switch results use direct's 'entry' variant "
                    "at the same payload;\ncross-cpu results are normalized by direct's "
                    "same-cpu result.  Each ratio has a\n95% interval and a p from one "
                    "Welch t on the logs of the repetitions.  A row\nsays 'slower' or "
                    f"'faster' only with >= {compare.MIN_REPS_FOR_VERDICT} repetitions a side\n"
                    "(else 'inconclusive'), a Holm-adjusted p < 0.05 over the rows, and B/A "
                    "outside\nthe noise band.  Results without a baseline (direct itself, "
                    "pingpong) compare in\nabsolute terms within one machine; across machines "
                    "only with --absolute.\nAverages are geometric means with their "
                    "interval within one placement, payload\nand phase.",
        epilog="examples:\n  isobench compare 3 4\n"
               "  isobench compare 3 4 --noise-band 5\n"
               "  isobench compare 1 1 --db laptop.sqlite --db-b server.sqlite\n"
               "  isobench compare 3 4 --json\n\n"
               "exit status: 0 compared, 1 nothing in common, 2 bad usage")
    p.add_argument("run_a", metavar="RUN_A", help="run id (or 'latest') in --db")
    p.add_argument("run_b", metavar="RUN_B", help="run id (or 'latest') in --db-b, else --db")
    p.add_argument("--db-b", metavar="PATH", help="the store RUN_B is in (default: --db's)")
    p.add_argument("--absolute", action="store_true",
                   help="also compare results without a baseline in absolute terms when the "
                        "runs come from different machines (printed with a warning)")
    p.add_argument("--noise-band", metavar="PCT", type=noise_band,
                   default=compare.NOISE_BAND,
                   help="a significant B/A within +-PCT%% of 1 reads 'within noise band', not "
                        f"'slower' or 'faster' (default: {100 * compare.NOISE_BAND:g})")
    add_json(p, "the comparison")
    add_db(p)
    p.set_defaults(func=cmd_compare)


def _summary(path: Path, spec: str) -> dict:
    with Store.open(path, create=False) as store:
        return summary.build(runs.load_run(store, store.resolve_run(spec)))


def cmd_compare(args: argparse.Namespace) -> int:
    path_a = db_path(args)
    path_b = Path(os.path.abspath(args.db_b)) if args.db_b else path_a
    a = _summary(path_a, args.run_a)
    b = _summary(path_b, args.run_b)
    result = compare.compare(a, b, absolute=args.absolute, noise_band=args.noise_band)
    doc = compare.document(a, b, result)
    if args.json:
        print_json(doc)
    else:
        print(table.terminal(render_compare.render(result["rows"], doc)))
    if not result["rows"]:
        err("the two runs have no results in common (same benchmark, mechanism and params)")
        return EXIT_FAILED
    return EXIT_OK
