"""`isobench campaign run` through Ansible over SSH into two real sshd hosts
(tests/python/sshd_hosts.py: 127.0.0.2 and 127.0.0.3 on this machine).

The hosts share this machine's file system, so their inventory names this
checkout as `isobench_prebuilt`: the playbook then uses its build/isob and
.venv instead of copying and building the source (which a real campaign
does, and which would take minutes here).  Everything else is the real
path: the preflight, the playbook, measuring, exporting, fetching over
SSH and importing."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import PYTHON_DIR, REPO, assert_one_error_line, limit
import sshd_hosts

# Not a credential: a marker that must never show up in what isobench writes.
SECRET = "NOT-A-REAL-PASSWORD-7f3c9e"
SELECTION = ("switch", "-m", "direct,uthread", "--quick")
# The checkout under test is each host's isobench_prebuilt: allowed wherever
# it lies (a work folder must be below an allowed root).
if REPO.parent != Path("/"):
    SELECTION += ("--workdir-root", str(REPO.parent))
# Guards against a hang, never a measurement.
CAMPAIGN_TIMEOUT = limit(1200)


def _why_not() -> str | None:
    why = sshd_hosts.why_not()
    if why:
        return why
    if not (Path(sys.executable).parent / "ansible-playbook").exists() \
            and shutil.which("ansible-playbook") is None:
        return "no ansible-playbook (ansible-core: the dev extra installs it)"
    if not (REPO / "build" / "isob").is_file() or not (REPO / ".venv" / "bin" / "isobench").is_file():
        return "needs this checkout built (make build): the hosts run its build/isob and .venv"
    return None


pytestmark = pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")


@pytest.fixture
def lab(tmp_path):
    hosts = sshd_hosts.Hosts(tmp_path / "lab", ["alpha", "beta"])
    try:
        yield hosts
    finally:
        hosts.close()


def _env(tmp_path: Path) -> dict:
    import os
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ISOBENCH_", "ANSIBLE_"))}
    env["PYTHONPATH"] = str(PYTHON_DIR)
    env["ISOBENCH_DB"] = str(tmp_path / "results" / "isobench.sqlite")
    # Ansible's own files (its temporary folder, facts cache) stay in the test.
    env["ANSIBLE_HOME"] = str(tmp_path / "ansible-home")
    return env


def isobench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "isobench", *args], cwd=tmp_path,
                          env=_env(tmp_path), capture_output=True, text=True,
                          timeout=CAMPAIGN_TIMEOUT)


def campaign_runs(db: Path, campaign: str) -> dict[str, list[int]]:
    """host -> run ids of that campaign in the store."""
    out: dict[str, list[int]] = {}
    with sqlite3.connect(db) as conn:
        for run_id, origin in conn.execute("SELECT id, origin FROM runs ORDER BY id"):
            o = json.loads(origin) if origin else {}
            if o.get("campaign") == campaign:
                out.setdefault(o["host"], []).append(run_id)
    return out


def results_of(db: Path, run_id: int) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT mechanism, status FROM results WHERE run_id = ?",
                            (run_id,)).fetchall()


def assert_no_secret(*places: Path) -> None:
    for place in places:
        files = [place] if place.is_file() else [p for p in place.rglob("*") if p.is_file()]
        for f in files:
            assert SECRET.encode() not in f.read_bytes(), f"the inventory's password is in {f}"


def test_campaign_over_two_ssh_hosts(tmp_path, lab):
    lab.start()
    for h in ("alpha", "beta"):
        lab.client.trust(lab[h])
    inv = lab.inventory(REPO, SECRET)
    p = isobench(tmp_path, "campaign", "run", str(inv), *SELECTION, "--id", "two-hosts")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    assert "2 of 2 host(s) done" in p.stdout

    db = tmp_path / "results" / "isobench.sqlite"
    runs = campaign_runs(db, "two-hosts")
    assert sorted(runs) == ["alpha", "beta"] and all(len(v) == 1 for v in runs.values())
    for host, (run_id,) in runs.items():
        got = results_of(db, run_id)
        # switch --quick: 3 repetitions of 4 direct variants at payload 0 plus
        # entry at 64 and 4096 B, and uthread's entry at 3 payloads.
        assert {m for m, _ in got} == {"direct", "uthread"}, (host, got)
        assert all(s == "ok" for _, s in got), (host, got)
        assert len(got) == 3 * (6 + 3), (host, len(got))
    # Each host's run came from that host's own work folder, over SSH.
    for h in ("alpha", "beta"):
        assert (lab[h].workdir / "campaigns" / "two-hosts" / "export.json").is_file()

    show = isobench(tmp_path, "campaign", "show", "two-hosts")
    assert show.returncode == 0, show.stderr
    print(show.stdout)  # the note in the report quotes it
    text = show.stdout
    assert "alpha" in text and "beta" in text and "uthread" in text
    assert "1 (baseline)" in text
    doc = json.loads(isobench(tmp_path, "campaign", "show", "two-hosts", "--json").stdout)
    assert [h["host"] for h in doc["hosts"]] == ["alpha", "beta"]
    assert doc["missing"] == []
    sw = [t for t in doc["tables"] if t["title"] == "switch placement=same-cpu payload=0 variant=entry"]
    assert len(sw) == 1
    cells = {r["label"]: r["cells"] for r in sw[0]["rows"]}
    assert set(cells) == {"uthread", "direct"}
    for h in ("alpha", "beta"):
        assert cells["direct"][h]["kind"] == "baseline"
        assert cells["uthread"][h]["kind"] == "ratio" and cells["uthread"][h]["value"] > 0

    out = tmp_path / "campaign-report"
    rep = isobench(tmp_path, "campaign", "report", "two-hosts", "-o", str(out))
    assert rep.returncode == 0, rep.stderr
    assert (out / "campaign-switch.png").is_file() and (out / "campaign-switch.svg").is_file()
    assert "alpha" in (out / "campaign.md").read_text()

    assert_no_secret(db, tmp_path / "results" / "campaigns", out)


def _wait_for(path: Path, proc: subprocess.Popen) -> None:
    """Until path exists (or the campaign ended without making it)."""
    for _ in range(int(CAMPAIGN_TIMEOUT * 20)):
        if path.exists() or proc.poll() is not None:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def test_a_host_that_dies_fails_alone_and_the_campaign_resumes(tmp_path, lab):
    lab.start()
    for h in ("alpha", "beta"):
        lab.client.trust(lab[h])
    inv = lab.inventory(REPO, SECRET)
    argv = [sys.executable, "-m", "isobench", "campaign", "run", str(inv), *SELECTION,
            "--id", "dies"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        # beta dies as soon as the campaign has begun on it: its first task
        # made its campaign folder.
        _wait_for(lab["beta"].workdir / "campaigns" / "dies", proc)
        lab["beta"].stop()
        out, err = proc.communicate(timeout=CAMPAIGN_TIMEOUT)
    finally:
        if proc.poll() is None:
            import os
            os.killpg(proc.pid, 9)
            proc.wait()
    assert proc.returncode == 1, out + err
    assert "Traceback" not in err
    assert "1 of 2 host(s) done" in out
    assert "alpha: done" in out
    beta_line = next(l for l in out.splitlines() if l.strip().startswith("beta:"))
    assert "FAILED" in beta_line and ("unreachable" in beta_line or "failed at" in beta_line), \
        beta_line

    db = tmp_path / "results" / "isobench.sqlite"
    assert sorted(campaign_runs(db, "dies")) == ["alpha"]
    state = json.loads((tmp_path / "results" / "campaigns" / "dies" / "state.json").read_text())
    assert state["hosts"]["alpha"]["status"] == "done"
    assert state["hosts"]["beta"]["status"] == "failed"
    assert state["hosts"]["beta"]["reason"]

    show = isobench(tmp_path, "campaign", "show", "dies")
    assert show.returncode == 0, show.stderr
    assert "beta: failed" in show.stdout

    # The host comes back: the same command resumes beta alone.
    lab["beta"].start()
    again = isobench(tmp_path, *argv[3:])
    assert again.returncode == 0, again.stdout + again.stderr
    assert "resuming" in again.stderr and "1 of 2 host(s) to do: beta" in again.stderr
    runs = campaign_runs(db, "dies")
    assert sorted(runs) == ["alpha", "beta"] and all(len(v) == 1 for v in runs.values())
    state = json.loads((tmp_path / "results" / "campaigns" / "dies" / "state.json").read_text())
    assert state["hosts"]["alpha"]["attempts"] == 1
    assert state["hosts"]["beta"]["attempts"] == 2
    assert all(s["status"] == "done" for s in state["hosts"].values())
    assert_no_secret(db, tmp_path / "results" / "campaigns")


def test_a_host_key_that_does_not_match_stops_before_anything_runs(tmp_path, lab):
    lab.start()
    lab.client.trust(lab["alpha"])
    lab.client.trust(lab["beta"], key_of=lab["alpha"])  # not beta's key
    inv = lab.inventory(REPO, SECRET)
    p = isobench(tmp_path, "campaign", "run", str(inv), *SELECTION, "--id", "keys")
    line = assert_one_error_line(p, 2)
    assert "host beta" in line and "host key" in line and "alpha" not in line
    # Nothing ran anywhere, not even on the host whose key matched.
    assert not (lab["alpha"].workdir / "campaigns").exists()
    assert not (tmp_path / "results" / "isobench.sqlite").exists() or \
        campaign_runs(tmp_path / "results" / "isobench.sqlite", "keys") == {}
