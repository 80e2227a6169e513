"""A report folder that isobench owns: what `isobench report` wrote there,
for which run, so that the next report into it leaves only its own files.

The manifest, MANIFEST in the folder, is JSON:

    {"isobench_report": 2,                   its format version
     "run": {"run_id": 3, "started": "...", "store": "isobench.sqlite"},
     "isobench": "0.1.0",
     "files": ["index.html", "kv.png", ...],  every file the report wrote
     "sums": {"index.html": {"size": 5120, "sha256": "..."}, ...}}

A report is written in three steps:

1. into a fresh staging folder inside the report folder, so that a report
   that fails midway (a full disk, Ctrl-C) leaves the folder as it was;
2. checked against the folder: a file the report would write whose name is
   already taken by anything but a file the manifest lists with the very
   size and sha256 it has now (the user's own file, one an older isobench
   wrote, a file the user edited, a symbolic link) is not overwritten: the
   report is refused with their names, unless force;
3. moved into place, each file by an atomic rename; then the files of the
   previous report that this one does not rewrite are removed, but only
   those its manifest lists that are still regular files of the size and
   sha256 it records (any other file in the folder is left alone); and the
   manifest is rewritten.  Before the first rename the manifest lists both
   reports' files, so that an interruption between the steps leaves nothing
   unrecorded.

Nobody who can write into the folder can turn the report against a file:
the manifest is written under a fresh name (created exclusively, never
through a symbolic link) and renamed into place; every name is one entry
of the folder, reached from the folder's own descriptor, and no symbolic
link is followed, so nothing outside the folder is written or removed; and
a manifest that arrived with a copied folder removes nothing that is not
byte for byte what a report wrote.

Format history: 1, the names only; 2, their sizes and sha256 (a version 1
manifest is still read, and then removes nothing and protects nothing).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Iterable, Mapping

from ... import __version__
from ...errors import UsageError

MANIFEST = ".isobench-report.json"
MANIFEST_VERSION = 2
READ_VERSIONS = (1, 2)
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


def _sum(folder: int, name: str) -> dict | None:
    """{"size", "sha256"} of the regular file `name` directly in the folder
    open as `folder` (a descriptor), never through a symbolic link; None
    when there is no such file."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=folder)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        h = hashlib.sha256()
        size = 0
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
            size += len(chunk)
        return {"size": size, "sha256": h.hexdigest()}
    finally:
        os.close(fd)


def _valid_sum(v) -> bool:
    return (isinstance(v, dict) and isinstance(v.get("size"), int) and not isinstance(v["size"], bool)
            and isinstance(v.get("sha256"), str) and len(v["sha256"]) == 64)


def _open_folder(out_dir: Path) -> int:
    return os.open(out_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _read(folder: int, path: Path, force: bool) -> dict[str, dict | None]:
    try:
        try:
            fd = os.open(MANIFEST, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=folder)
        except FileNotFoundError:
            return {}
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ValueError("not a regular file")
            data = json.loads(f.read())
        files = data["files"]
        version = data.get("isobench_report")
        sums = data.get("sums", {}) if version == 2 else {}
        if version not in READ_VERSIONS or not isinstance(files, list) \
                or not all(_plain(f) for f in files) or not isinstance(sums, dict) \
                or (version == 2 and not all(_valid_sum(sums.get(f)) for f in files)):
            raise ValueError("not a report manifest of this isobench")
        return {f: sums.get(f) for f in files}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        if force:
            return {}
        raise UsageError(f"{path} cannot be read ({getattr(e, 'strerror', None) or e}): "
                         "move it away, or give --force to write the report without "
                         "removing the previous one's files") from None


def read_manifest(out_dir: Path, force: bool = False) -> dict[str, dict | None]:
    """The files the previous report into out_dir wrote, each with the size
    and sha256 it recorded (None from a version 1 manifest); {} if none.  A
    manifest that cannot be read (a symbolic link among them) is refused
    (one line), unless force, where it counts as none: nothing it may have
    listed is removed."""
    folder = _open_folder(out_dir)
    try:
        return _read(folder, Path(out_dir) / MANIFEST, force)
    finally:
        os.close(folder)


def stage(out_dir: Path) -> Path:
    """A fresh, empty staging folder inside out_dir (same file system, so
    that the files move into place by rename)."""
    return Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=out_dir))


def _write_manifest(folder: int, out_dir: Path, run: Mapping, sums: Mapping[str, dict]) -> None:
    data = {"isobench_report": MANIFEST_VERSION, "run": run_identity(run),
            "isobench": __version__, "files": sorted(sums),
            "sums": {f: sums[f] for f in sorted(sums)}}
    # A fresh name, created exclusively and never through a symbolic link
    # (mkstemp), then renamed over the manifest: a link planted at any name
    # is replaced, never followed.
    fd, tmp = tempfile.mkstemp(prefix=MANIFEST + ".", suffix=".new", dir=out_dir)
    name = Path(tmp).name
    try:
        with os.fdopen(fd, "w") as f:
            os.fchmod(f.fileno(), 0o644)
            f.write(json.dumps(data, indent=1) + "\n")
        os.replace(name, MANIFEST, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        try:
            os.unlink(name, dir_fd=folder)
        except OSError:
            pass
        raise


def commit(staged: Path, out_dir: Path, run: Mapping, force: bool = False) -> dict:
    """Move the report written into staged into out_dir (steps 2 and 3 of
    the module's list); {"files": written, "removed": the previous report's
    files that this one does not rewrite, "overwritten": names not the
    previous report's that force replaced}.  staged is removed."""
    out_dir = Path(out_dir)
    staged = Path(staged)
    folder = _open_folder(out_dir)
    try:
        previous = _read(folder, out_dir / MANIFEST, force)
        inside = os.open(staged.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                         dir_fd=folder)
        try:
            files = sorted(os.listdir(inside))
            sums = {f: _sum(inside, f) for f in files}
        finally:
            os.close(inside)
        if any(v is None for v in sums.values()):
            raise OSError(f"{staged}: the report wrote something other than regular files")
        # The previous report's: only what is still byte for byte what it wrote.
        ours = {f for f, v in previous.items() if v is not None and _sum(folder, f) == v}
        taken = [f for f in files if f not in ours and _exists(folder, f)]
        if taken and not force:
            shown = ", ".join(taken[:8]) + (f" and {len(taken) - 8} more" if len(taken) > 8
                                            else "")
            raise UsageError(f"{out_dir} holds files that no isobench report recorded writing "
                             f"and this one would overwrite: {shown}; move them away, write "
                             "into another folder, or give --force to overwrite them")
        _write_manifest(folder, out_dir, run, {**{f: previous[f] for f in ours}, **sums})
        for f in files:
            try:
                os.replace(f"{staged.name}/{f}", f, src_dir_fd=folder, dst_dir_fd=folder)
            except OSError as e:   # named by where it goes, not by the staging folder
                raise OSError(e.errno, e.strerror, str(out_dir / f)) from None
        removed = []
        for f in sorted(ours - set(files)):
            # Checked again right before: only the file the report wrote.
            if _sum(folder, f) == previous[f]:
                os.unlink(f, dir_fd=folder)
                removed.append(f)
        _write_manifest(folder, out_dir, run, sums)
    finally:
        os.close(folder)
        shutil.rmtree(staged, ignore_errors=True)
    return {"files": files, "removed": removed, "overwritten": taken}


def _exists(folder: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=folder, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False
