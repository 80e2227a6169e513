"""`isobench campaign`: many hosts through Ansible, or a Slurm job array,
into one store (measure/campaign.py), and the campaign's tables and report."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .common import (EXIT_FAILED, EXIT_OK, PROG, Formatter, OutputError, Parser, add_db, add_json,
                     choose, db_path, err, print_json)
from ..core import validate
from ..analysis import campaign as analysis_campaign
from ..measure import campaign as measure_campaign, lifecycle, runner, slurm as measure_slurm
from ..measure import inventory as measure_inventory
from ..measure.driver import Driver, find_isob, repo_root
from ..render import campaign as render_campaign, report
from ..render.kit import table
from ..errors import DriverError, UsageError
from ..store import Store, interchange


CAMPAIGN_SPEC = "campaign id, or 'latest' (the newest campaign the store has runs of)"


def _workdir_root(text: str) -> str:
    parts = text.rstrip("/").split("/")
    if not text.startswith("/") or len(parts) < 2 or any(p in ("", ".", "..") for p in parts[1:]) \
            or not validate.REMOTE_PATH.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not an absolute folder below / (no '.', "
                                         "'..' or spaces)")
    return text.rstrip("/")


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "campaign", formatter_class=Formatter,
        description="Run the same benchmarks on many hosts and merge their results into one "
                    "store,\nthrough Ansible (ansible-core: the campaign extra) or as a Slurm "
                    "job array.\nEach host's run is imported with its host name and the "
                    "campaign id; `campaign\nshow` sets the hosts side by side, each normalized "
                    "to its own direct.\n\n"
                    "  init      write an example inventory\n"
                    "  run       run the campaign on every host of an inventory (resumes)\n"
                    "  show      one table mechanism x host per population\n"
                    "  report    the same as HTML and Markdown with heat maps\n"
                    "  import    exports in a folder (one per host) into the store\n"
                    "  slurm     write an sbatch script: one array task per node type\n\n"
                    "docs/campaigns.md walks from an inventory to the merged report.",
        epilog="examples:\n  isobench campaign init lab.ini\n"
               "  isobench campaign run lab.ini switch -m direct -m mpk --quick\n"
               "  isobench campaign show latest\n"
               "  isobench campaign report latest -o campaign-report/\n\n"
               "exit status: 0 every host done, 1 some host failed (each is named with its "
               "reason),\n2 bad usage (an inventory that does not parse, a host key that "
               "does not match,\nAnsible missing), 128+N stopped by signal N")
    csub = p.add_subparsers(dest="campaign_command", metavar="ACTION", parser_class=Parser)
    csub.required = True

    q = csub.add_parser("init", formatter_class=Formatter, help="write an example inventory",
                        description="Write an example Ansible inventory with the per-host "
                                    "variables isobench reads\n(isobench_workdir, isobench_cpus, "
                                    "isobench_tune, isobench_prebuilt).  A .yml or\n.yaml name "
                                    "gets YAML, any other INI.  An existing file is never "
                                    "overwritten.")
    q.add_argument("file", nargs="?", default="inventory.ini", metavar="FILE",
                   help="where to write it (default: inventory.ini)")
    q.set_defaults(func=cmd_campaign_init)

    q = csub.add_parser(
        "run", formatter_class=Formatter, help="run the campaign on every host of INVENTORY",
        description="Run `isobench run BENCH... -m MECH...` on every host of an Ansible "
                    "inventory:\ncopy the source, `make build` there, measure (in parallel "
                    "across hosts, one\nbenchmark at a time on each), export, fetch, and "
                    "import every host's run into\nthe store tagged with the host and the "
                    "campaign id.  A host that fails is named\nwith its reason and the others "
                    "go on.  Running the same command again resumes\nthe newest unfinished "
                    "campaign of that inventory and selection (only the hosts\nnot done); "
                    "--new begins another.",
        epilog="examples:\n  isobench campaign run lab.ini switch -m direct -m mpk --quick\n"
               "  isobench campaign run lab.ini --id spring-2026 kv --repeat 5")
    q.add_argument("inventory", metavar="INVENTORY", help="an Ansible inventory (INI or YAML)")
    q.add_argument("benchmarks", nargs="*", metavar="BENCH",
                   help=f"benchmarks (default: {' '.join(runner.DEFAULT_SUITE)})")
    q.add_argument("-m", "--mechanism", dest="mechanisms", action="append", default=[],
                   metavar="MECH", help="a mechanism (repeat, or comma-separate; default: all)")
    q.add_argument("--quick", action="store_true", help="isobench run --quick on every host")
    q.add_argument("--repeat", type=validate.bounded_whole(1, validate.MAX_REPEAT),
                   metavar="N", help="isobench run --repeat N on every host")
    q.add_argument("--id", type=validate.campaign_id, metavar="ID",
                   help="the campaign's id: resumes it if it exists (default: a new id from "
                        "the time, or the unfinished campaign of the same inventory and "
                        "selection)")
    q.add_argument("--new", action="store_true",
                   help="begin a new campaign even if an unfinished one would resume")
    q.add_argument("--source", metavar="DIR",
                   help="the isobench checkout to copy to the hosts (default: the one this "
                        "isobench runs from)")
    q.add_argument("--host-timeout", type=validate.bounded_whole(1, validate.MAX_HOST_TIMEOUT),
                   default=measure_campaign.DEFAULT_HOST_TIMEOUT, metavar="SECONDS",
                   help="longest `isobench run` on one host (default: "
                        f"{measure_campaign.DEFAULT_HOST_TIMEOUT})")
    q.add_argument("--workdir-root", dest="workdir_roots", action="append", default=[],
                   type=_workdir_root, metavar="DIR",
                   help="also allow isobench_workdir and isobench_prebuilt below DIR (an "
                        "absolute path; repeat; always allowed: ~/... and "
                        f"{', '.join(measure_inventory.WORKDIR_ROOTS)})")
    q.add_argument("--insecure-host-keys", action="store_true",
                   help="accept inventory or environment settings that turn off the "
                        "host-key check (refused without it); the campaign's state records "
                        "a warning per host")
    q.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    add_json(q, "each host's outcome")
    add_db(q)
    q.set_defaults(func=cmd_campaign_run)


    q = csub.add_parser(
        "show", formatter_class=Formatter, help="the campaign's table: mechanism x host",
        description="One table per population (benchmark, placement, payload, phase): a row "
                    "per\nmechanism, a column per host, each cell that host's ratio to its own "
                    "direct\nwith its 95% interval over repetitions.  The header gives each "
                    "host's CPU,\nkernel, hypervisor, PMU and PKU.  Hosts are never averaged "
                    "together.")
    q.add_argument("id", nargs="?", default="latest", metavar="ID", help=CAMPAIGN_SPEC)
    q.add_argument("--absolute", action="store_true",
                   help="each host's headline values in its own unit instead of ratios "
                        "(printed with a warning)")
    add_json(q, "the campaign document")
    add_db(q)
    q.set_defaults(func=cmd_campaign_show)

    q = csub.add_parser(
        "report", formatter_class=Formatter, help="the campaign as HTML, Markdown and heat maps",
        description="Write index.html, campaign.md, campaign.json (the campaign document) and "
                    "one\nheat map per benchmark (PNG and SVG: mechanisms x hosts, colour the "
                    "ratio to\neach host's own direct on a log scale) into DIR.  The per-run "
                    "report of one\nhost is `isobench report RUN`.")
    q.add_argument("id", nargs="?", default="latest", metavar="ID", help=CAMPAIGN_SPEC)
    q.add_argument("-o", "--output", required=True, metavar="DIR", help="folder to write into")
    add_json(q, "what was written")
    add_db(q)
    q.set_defaults(func=cmd_campaign_report)

    q = csub.add_parser(
        "import", formatter_class=Formatter, help="exports in a folder into the store, as a "
                                                  "campaign",
        description="Import every export of FOLDER into the store, tagged with the campaign "
                    "id and\nthe host: FOLDER/HOST.json or FOLDER/HOST/export.json.  What a "
                    "Slurm campaign\nruns after its array tasks; a run already in the store "
                    "(same uid) is skipped.")
    q.add_argument("id", type=validate.campaign_id, metavar="ID", help="the campaign id")
    q.add_argument("folder", metavar="FOLDER", help="a folder of exports, one per host")
    add_json(q, "what was imported")
    add_db(q)
    q.set_defaults(func=cmd_campaign_import)

    q = csub.add_parser(
        "slurm", formatter_class=Formatter, help="write an sbatch script: one array task per "
                                                 "node type",
        description="Write a Slurm script for the campaign: `bash SCRIPT submit` submits one "
                    "array\ntask per node type (its partition and constraint), each of which "
                    "builds isobench\non its node, runs it and exports to SHARED/ID/exports/; "
                    "an import job after\nthem merges the exports into SHARED/ID/campaign.sqlite "
                    "(`campaign import`).",
        epilog="example:\n  isobench campaign slurm switch -m direct,mpk --quick \\\n"
               "      --node-type skylake:compute:skx --node-type icelake:compute:icx \\\n"
               "      --shared /shared/isobench --source /shared/src/isobench -o campaign.sbatch")
    q.add_argument("benchmarks", nargs="*", metavar="BENCH",
                   help=f"benchmarks (default: {' '.join(runner.DEFAULT_SUITE)})")
    q.add_argument("-m", "--mechanism", dest="mechanisms", action="append", default=[],
                   metavar="MECH", help="a mechanism (repeat, or comma-separate; default: all)")
    q.add_argument("--quick", action="store_true", help="isobench run --quick on every node")
    q.add_argument("--repeat", type=validate.bounded_whole(1, validate.MAX_REPEAT), metavar="N")
    q.add_argument("--node-type", dest="node_types", action="append", required=True,
                   type=validate.node_type, metavar="NAME:PARTITION[:CONSTRAINT]",
                   help="a node type: its name (the host column), Slurm partition and "
                        "optional constraint (repeat)")
    q.add_argument("--shared", required=True, metavar="DIR",
                   help="a folder every node can write: exports, logs, the merged store")
    q.add_argument("--source", metavar="DIR",
                   help="an isobench checkout every node can read (default: this one)")
    q.add_argument("--prebuilt", metavar="DIR",
                   help="a checkout already built for every node type: no set-up on the nodes")
    q.add_argument("--id", type=validate.campaign_id, metavar="ID",
                   help="the campaign id (default: a new one from the time)")
    q.add_argument("--time", default=measure_slurm.DEFAULT_TIME, metavar="HH:MM:SS",
                   help=f"Slurm time limit of each task (default: {measure_slurm.DEFAULT_TIME})")
    q.add_argument("-o", "--output", required=True, metavar="FILE", help="the script to write")
    q.set_defaults(func=cmd_campaign_slurm)


def _campaign_selection(args: argparse.Namespace) -> measure_campaign.Selection:
    benches = validate.name_tokens(args.benchmarks or list(runner.DEFAULT_SUITE), "benchmark")
    mechs = validate.name_tokens(validate.mechanisms(args.mechanisms), "mechanism")
    try:
        # Where a native driver is built here, its catalog names what exists;
        # the hosts build the same source.
        catalog = Driver(find_isob()).catalog()
    except (UsageError, DriverError):
        catalog = None
    if catalog is not None:
        choose("benchmark", benches, [b.name for b in catalog.benchmarks])
        choose("mechanism", mechs, [m.name for m in catalog.mechanisms])
    return measure_campaign.Selection(tuple(benches), tuple(mechs), args.quick, args.repeat)


def _exclusive_file(path: Path, text: str, what: str) -> None:
    """Write a new file; an existing one is left alone (exit 2)."""
    try:
        with open(path, "x") as f:
            f.write(text)
    except FileExistsError:
        raise UsageError(f"{path} exists: {what} never overwrites a file") from None
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None


def cmd_campaign_init(args: argparse.Namespace) -> int:
    path = Path(args.file)
    _exclusive_file(path, measure_campaign.example_inventory(path), "campaign init")
    print(f"example inventory written to {path}: its hosts are placeholders that `campaign "
          "run` refuses; replace each (replace-me-*, 192.0.2.x, 2001:db8::x) with a machine of "
          "yours, add its key to ~/.ssh/known_hosts, then "
          f"`isobench campaign run {path} switch --quick`")
    return EXIT_OK


def _import_tagged(store: Store, campaign_id: str, host: str, path: Path,
                   extra: dict | None = None) -> tuple[int, str]:
    done = interchange.import_into(store, path, None, {"campaign": campaign_id, "host": host,
                                                       **(extra or {})})
    if len(done) != 1:
        raise UsageError(f"{path} holds {len(done)} runs: a host's export holds one")
    return done[0]["run_id"], done[0]["uid"]


def cmd_campaign_run(args: argparse.Namespace) -> int:
    inventory = Path(args.inventory)
    selection = _campaign_selection(args)
    measure_campaign.ansible_tool("ansible-playbook")
    inv = measure_inventory.load_inventory(inventory, insecure_host_keys=args.insecure_host_keys,
                                          roots=args.workdir_roots)
    hosts = inv.hosts
    source = Path(args.source) if args.source else repo_root()
    if any(h.prebuilt is None for h in hosts):
        measure_campaign.check_source(source)  # before any host is touched
    path = db_path(args)
    say = (lambda _t: None) if args.quiet else (lambda t: print(t, file=sys.stderr, flush=True))
    with lifecycle.stop_signals(), Store.open(path, create=True) as store:
        c, resumed = measure_campaign.find_or_begin(path, inventory, hosts, selection,
                                                    args.id, args.new)
        c.warn(inv.warnings)
        for w in inv.warnings:
            print(f"{PROG}: warning: campaign {c.id}: {w}", file=sys.stderr, flush=True)

        def importer(host: str, export: Path) -> tuple[int, str]:
            return _import_tagged(store, c.id, host, export,
                                  measure_campaign.host_tags(c, host))

        try:
            measure_campaign.execute(c, inventory, [h for h in hosts], source=source,
                                     host_timeout=args.host_timeout, say=say,
                                     resumed=resumed, import_export=importer,
                                     insecure_host_keys=args.insecure_host_keys)
        finally:
            c.save()
    mine = {h.name for h in hosts}
    failed = [h for h, s in c.hosts.items() if h in mine and s["status"] != measure_campaign.DONE]
    if args.json:
        print_json({"campaign": c.id, "resumed": resumed, "db": str(path),
                     "state": str(c.state_file), "hosts": {h: c.hosts[h] for h in mine}})
    else:
        print(f"campaign {c.id}: {len(mine) - len(failed)} of {len(mine)} host(s) done "
              f"(store {path}; state {c.state_file})")
        print("\n".join(measure_campaign.summary_lines(
            measure_campaign.Campaign(c.id, c.folder, c.inventory, c.selection, c.created,
                                      {h: c.hosts[h] for h in c.hosts if h in mine}))))
        if failed:
            print(f"run the same command again to resume the host(s) not done: "
                  f"{', '.join(failed)}")
        print(f"`isobench campaign show {c.id}` sets the hosts side by side")
    return EXIT_FAILED if failed else EXIT_OK


def _campaign_doc(args: argparse.Namespace, absolute: bool = False) -> dict:
    path = db_path(args)
    with Store.open(path, create=False) as store:
        ids = analysis_campaign.campaign_ids(store)
        cid = args.id
        if cid == "latest":
            if not ids:
                raise UsageError(f"{path} holds no campaign (see `isobench campaign run`)")
            cid = ids[-1]
        else:
            try:
                validate.campaign_id(cid)
            except argparse.ArgumentTypeError as e:
                raise UsageError(str(e)) from None
        state = measure_campaign.load_state(measure_campaign.campaigns_folder(path) / cid)
        if cid not in ids and state is None:
            raise UsageError(f"no campaign {cid!r} in {path} (known: "
                             f"{', '.join(ids) or 'none'})")
        doc = analysis_campaign.build(store, cid, state.as_dict() if state else None,
                                      absolute=absolute)
        # What the campaign ran without (--insecure-host-keys), from its record.
        doc["warnings"] = [w.get("warning") for w in (state.warnings if state else [])
                           if isinstance(w, dict)]
        return doc


def cmd_campaign_show(args: argparse.Namespace) -> int:
    doc = _campaign_doc(args, absolute=args.absolute)
    if args.json:
        print_json(doc)
    else:
        if args.absolute:
            err(f"warning: {analysis_campaign.ABSOLUTE_WARNING}")
        for w in doc["warnings"]:
            print(table.terminal(f"{PROG}: warning: campaign {doc['campaign']}: {w}"),
                  file=sys.stderr)
        print(table.terminal(render_campaign.render_text(doc)))
    return EXIT_OK


def cmd_campaign_report(args: argparse.Namespace) -> int:
    if not args.output:
        raise UsageError("-o '' names no folder: give the folder to write the report into")
    report.prepare(Path(args.output))
    doc = _campaign_doc(args)
    try:
        written = render_campaign.write(doc, Path(args.output))
    except OSError as e:
        where = f" ({e.filename})" if getattr(e, "filename", None) else ""
        raise OutputError(f"cannot write the report into {args.output}{where}: "
                          f"{e.strerror or e}") from None
    if args.json:
        print_json(written)
    else:
        print(f"campaign report of {doc['campaign']} written to {written['dir']}: "
              f"{', '.join(written['files'])}")
        for note in written["omitted"].values():
            print(f"note: {note}")
    return EXIT_OK


def _exports_in(folder: Path) -> list[tuple[str, Path]]:
    """(host, export) for FOLDER/HOST.json and FOLDER/HOST/export.json."""
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a folder of exports")
    found = []
    for entry in sorted(folder.iterdir()):
        if entry.is_file() and entry.suffix == ".json":
            found.append((entry.stem, entry))
        elif entry.is_dir() and (entry / "export.json").is_file():
            found.append((entry.name, entry / "export.json"))
    for host, _ in found:
        validate.host_name(host, str(folder))
    if not found:
        raise UsageError(f"{folder} holds no exports (HOST.json or HOST/export.json)")
    return found


def cmd_campaign_import(args: argparse.Namespace) -> int:
    found = _exports_in(Path(args.folder))
    out = []
    with Store.open(db_path(args), create=True) as store:
        for host, path in found:
            done = interchange.import_into(store, path, None, {"campaign": args.id, "host": host})
            out += [{"host": host, "source": str(path), **d} for d in done]
    if args.json:
        print_json({"campaign": args.id, "db": str(db_path(args)), "imported": out})
    else:
        for d in out:
            print(f"{d['host']}: {'already there as' if d['skipped'] else 'imported as'} run "
                  f"{d['run_id']} ({d['source']})")
        print(f"`isobench campaign show {args.id}` sets the hosts side by side")
    return EXIT_OK


def cmd_campaign_slurm(args: argparse.Namespace) -> int:
    selection = _campaign_selection(args)
    names = [n for n, _, _ in args.node_types]
    if len(set(names)) != len(names):
        raise UsageError(f"--node-type names must differ ({', '.join(names)})")
    if not validate.SLURM_TIME.fullmatch(args.time):
        raise UsageError(f"--time {args.time!r} is not a Slurm time such as 04:00:00 or "
                         "1-00:00:00")
    shared = validate.remote_path(os.path.abspath(args.shared), "--shared", "folder")
    source = validate.remote_path(os.path.abspath(args.source) if args.source
                                  else str(repo_root()), "--source", "folder")
    prebuilt = (validate.remote_path(os.path.abspath(args.prebuilt), "--prebuilt", "folder")
                if args.prebuilt else None)
    cid = args.id or measure_campaign.new_id()
    text = measure_slurm.script(cid, [measure_slurm.NodeType(*t) for t in args.node_types],
                                selection, shared=shared, source=source, prebuilt=prebuilt,
                                time_limit=args.time)
    _exclusive_file(Path(args.output), text, "campaign slurm")
    print(f"campaign {cid}: sbatch script written to {args.output} ({len(names)} node "
          f"type(s): {', '.join(names)})")
    print(f"submit it with `bash {args.output} submit`; afterwards `isobench campaign show "
          f"{cid} --db {shared}/{cid}/campaign.sqlite`")
    return EXIT_OK
