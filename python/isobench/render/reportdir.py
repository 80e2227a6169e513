"""A report folder that isobench owns: what `isobench report` wrote there,
for which run, so that the next report into it leaves only its own files.

The manifest, MANIFEST in the folder, is JSON:

    {"isobench_report": 1,                   its format version
     "run": {"run_id": 3, "started": "...", "store": "isobench.sqlite"},
     "isobench": "0.1.0",
     "files": ["index.html", "kv.png", ...]}  every file the report wrote

A report is written in three steps:

1. into a fresh staging folder inside the report folder, so that a report
   that fails midway (a full disk, Ctrl-C) leaves the folder as it was;
2. checked against the folder: a file the report would write whose name is
   already taken by a file the manifest does not list (the user's own, or
   one an older isobench wrote before manifests) is not overwritten: the
   report is refused with their names, unless force;
3. moved into place, each file by an atomic rename; then the files of the
   previous report that this one does not rewrite are removed (only those
   its manifest lists: any other file in the folder is left alone), and
   the manifest is rewritten.  Before the first rename the manifest lists
   both reports' files, so that an interruption between the steps leaves
   nothing unrecorded.

Format history: 1, the first.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterable, Mapping

from .. import __version__
from ..errors import UsageError

MANIFEST = ".isobench-report.json"
MANIFEST_VERSION = 1
STAGING_PREFIX = ".isobench-report-new-"


def run_identity(run: Mapping) -> dict:
    """The run a report shows: its id, start, and the store's file name
    (never the store's folder: a report is shared with people who do not
    have this machine)."""
    db = run.get("db")
    return {"run_id": run["run_id"], "started": run.get("started"),
            "store": Path(db).name if db else None}


def _plain(name) -> bool:
    """A file name directly in the folder: what a manifest may list, and so
    all that a report ever removes."""
    return (isinstance(name, str) and name not in ("", ".", "..") and "/" not in name
            and "\\" not in name and "\0" not in name and name != MANIFEST)


def read_manifest(out_dir: Path, force: bool = False) -> list[str]:
    """The files the previous report into out_dir wrote ([] if none).  A
    manifest that cannot be read is refused (one line), unless force, where
    it counts as none: nothing it may have listed is removed."""
    path = Path(out_dir) / MANIFEST
    try:
        data = json.loads(path.read_text())
        files = data["files"]
        if data.get("isobench_report") != MANIFEST_VERSION or not isinstance(files, list) \
                or not all(_plain(f) for f in files):
            raise ValueError("not a report manifest of this isobench")
        return list(files)
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError) as e:
        if force:
            return []
        raise UsageError(f"{path} cannot be read ({getattr(e, 'strerror', None) or e}): "
                         "move it away, or give --force to write the report without "
                         "removing the previous one's files") from None


def stage(out_dir: Path) -> Path:
    """A fresh, empty staging folder inside out_dir (same file system, so
    that the files move into place by rename)."""
    return Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=out_dir))


def _write_manifest(out_dir: Path, run: Mapping, files: Iterable[str]) -> None:
    data = {"isobench_report": MANIFEST_VERSION, "run": run_identity(run),
            "isobench": __version__, "files": sorted(set(files))}
    tmp = Path(out_dir) / (MANIFEST + ".new")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, Path(out_dir) / MANIFEST)


def commit(staged: Path, out_dir: Path, run: Mapping, force: bool = False) -> dict:
    """Move the report written into staged into out_dir (steps 2 and 3 of
    the module's list); {"files": written, "removed": the previous report's
    files that this one does not rewrite, "overwritten": files not in the
    manifest that force replaced}.  staged is removed."""
    out_dir = Path(out_dir)
    try:
        previous = read_manifest(out_dir, force)
        files = sorted(os.listdir(staged))
        ours = set(previous)
        taken = [f for f in files if f not in ours and os.path.lexists(out_dir / f)]
        if taken and not force:
            shown = ", ".join(taken[:8]) + (f" and {len(taken) - 8} more" if len(taken) > 8
                                            else "")
            raise UsageError(f"{out_dir} holds files that no isobench report recorded writing "
                             f"and this one would overwrite: {shown}; move them away, write "
                             "into another folder, or give --force to overwrite them")
        _write_manifest(out_dir, run, [*previous, *files])
        for f in files:
            try:
                os.replace(staged / f, out_dir / f)
            except OSError as e:   # named by where it goes, not by the staging folder
                raise OSError(e.errno, e.strerror, str(out_dir / f)) from None
        removed = []
        for f in sorted(ours - set(files)):
            path = out_dir / f
            # Only files: a folder of that name was never the report's.
            if path.is_symlink() or path.is_file():
                path.unlink()
                removed.append(f)
        _write_manifest(out_dir, run, files)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    return {"files": files, "removed": removed, "overwritten": taken}
