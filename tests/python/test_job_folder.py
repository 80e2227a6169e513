"""Each isob job gets a temporary folder of its own (TMPDIR), which the
runner removes after the job even when isob was killed before it could
clean up (pingpong's test folder after a SIGKILL)."""

from __future__ import annotations

import os
from pathlib import Path

from isobench.measure import runner
from isobench.measure.driver import Driver

KILLED = """#!/bin/sh
# Like an isob killed outright in the middle of a test: its folder is left.
mkdir -m 0700 "$TMPDIR/isob-pingpong-XXXX" || exit 9
echo "$TMPDIR" > "{log}"
kill -9 $$
"""


def test_a_killed_isob_leaves_no_folder(tmp_path, monkeypatch):
    base = tmp_path / "tmp"
    base.mkdir()
    monkeypatch.setenv("TMPDIR", str(base))
    log = tmp_path / "tmpdir.log"
    script = tmp_path / "isob"
    script.write_text(KILLED.format(log=log))
    script.chmod(0o755)
    got = []
    out = runner.run_job(Driver(script), runner.Job("pingpong", None), runner.Options(),
                         lambda r, a, b: got.append(r))
    # The job failed (killed by a signal) and says so ...
    assert [r.status for r in got] == ["failed"]
    assert "SIGKILL" in got[0].reason
    # ... its TMPDIR was a folder of its own below the caller's TMPDIR ...
    folder = Path(log.read_text().strip())
    assert folder.parent == base and folder.name.startswith(runner.JOB_FOLDER_PREFIX)
    # ... and nothing of it is left.
    assert os.listdir(base) == []
    assert out.failed
