"""isobench campaign without SSH hosts: the inventory and its errors, the
table of `campaign show` and its report from tagged runs, `campaign
import`, and the Slurm script (its text, its submission through a stand-in
sbatch, and one array task run for real).  The campaigns over real SSH
hosts are test_campaign_hosts.py."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PYTHON_DIR, REPO, assert_one_error_line
from fixture_runs import fixture

from isobench.analysis import campaign as analysis_campaign
from isobench.measure import campaign as measure_campaign, slurm
from isobench.measure import inventory
from isobench.render import campaign as render_campaign
from isobench.errors import UsageError
from isobench.store import Store, interchange


def _have_ansible() -> bool:
    try:
        measure_campaign.ansible_tool("ansible-inventory")
        return True
    except Exception:
        return False


needs_ansible = pytest.mark.skipif(not _have_ansible(),
                                   reason="no ansible-inventory (ansible-core: the dev extra)")


# ---- the inventory ----

@needs_ansible
@pytest.mark.parametrize("name", ["lab.ini", "lab.yml"])
def test_init_writes_an_inventory_that_ansible_parses(isobench, tmp_path, name):
    # That it cannot run until edited is test_campaign_guard.py's.
    p = isobench("campaign", "init", str(tmp_path / name))
    assert p.returncode == 0, p.stderr
    hostvars, names = inventory.list_inventory(tmp_path / name)
    assert names == ["replace-me-skylake", "replace-me-icelake", "replace-me-graviton"]
    assert hostvars["replace-me-icelake"]["isobench_workdir"] == "/scratch/isobench"
    # Never over an existing file.
    again = isobench("campaign", "init", str(tmp_path / name))
    assert "exists" in assert_one_error_line(again, 2)


@needs_ansible
@pytest.mark.parametrize("name, text, says", [
    ("bad.ini", "[lab\nfoo ansible_host=192.0.2.1\n", "does not parse"),
    ("bad.yml", "all:\n  hosts: [unclosed\n", "does not parse"),
    ("empty.ini", "# nothing\n", "names no hosts"),
    ("cpus.ini", "h1 isobench_cpus=three\n", "host h1: isobench_cpus"),
    ("tune.ini", "h1 isobench_tune=maybe\n", "host h1: isobench_tune"),
    ("dir.ini", "h1 isobench_workdir=relative/dir\n", "host h1: isobench_workdir"),
])
def test_an_inventory_isobench_cannot_use_is_one_line_naming_it(isobench, tmp_path, name, text,
                                                                 says):
    (tmp_path / name).write_text(text)
    p = isobench("campaign", "run", str(tmp_path / name), "switch", "-m", "direct")
    line = assert_one_error_line(p, 2)
    assert name in line and says in line, line
    assert not (tmp_path / "results" / "campaigns").exists()


def test_a_missing_inventory_and_a_missing_ansible(isobench, tmp_path):
    p = isobench("campaign", "run", str(tmp_path / "nope.ini"))
    assert "nope.ini" in assert_one_error_line(p, 2)
    empty = tmp_path / "no-ansible"
    empty.mkdir()
    (tmp_path / "lab.ini").write_text("h1\n")
    p = isobench("campaign", "run", str(tmp_path / "lab.ini"),
                 ISOBENCH_ANSIBLE_BIN=str(empty))
    line = assert_one_error_line(p, 2)
    assert "Ansible is missing" in line and "ansible-playbook" in line


def test_names_are_checked_before_ansible_runs(isobench, tmp_path):
    (tmp_path / "lab.ini").write_text("h1\n")
    p = isobench("campaign", "run", str(tmp_path / "lab.ini"), "switch", "-m", "no-such-mech")
    assert "no-such-mech" in assert_one_error_line(p, 2)
    p = isobench("campaign", "run", str(tmp_path / "lab.ini"), "--id", "../up")
    assert "campaign id" in assert_one_error_line(p, 2)


# ---- resuming ----

def test_the_same_selection_resumes_the_unfinished_campaign(tmp_path):
    db = tmp_path / "results" / "isobench.sqlite"
    inv = tmp_path / "lab.ini"
    inv.write_text("a\nb\n")
    hosts = [measure_campaign.Host("a"), measure_campaign.Host("b")]
    sel = measure_campaign.Selection(("switch",), ("direct",), True, None)
    c, resumed = measure_campaign.find_or_begin(db, inv, hosts, sel, None, False)
    assert not resumed and c.left() == ["a", "b"]
    c.hosts["a"]["status"] = measure_campaign.DONE
    c.save()
    again, resumed = measure_campaign.find_or_begin(db, inv, hosts, sel, None, False)
    assert resumed and again.id == c.id and again.left() == ["b"]
    # Another selection, or --new, begins another campaign.
    other = measure_campaign.Selection(("kv",), ("direct",), True, None)
    assert not measure_campaign.find_or_begin(db, inv, hosts, other, None, False)[1]
    assert not measure_campaign.find_or_begin(db, inv, hosts, sel, None, True)[1]
    # --id of an existing campaign with another selection is refused.
    with pytest.raises(Exception, match="keeps its selection"):
        measure_campaign.find_or_begin(db, inv, hosts, other, c.id, False)
    # A finished campaign is not resumed.
    again.hosts["b"]["status"] = measure_campaign.DONE
    again.save()
    fresh, resumed = measure_campaign.find_or_begin(db, inv, hosts, sel, None, False)
    assert not resumed and fresh.id != c.id


def test_outcomes_name_the_stage_and_reason_of_each_host():
    events = [
        {"event": "task", "outcome": "ok", "host": "a", "task": "set-up: x"},
        {"event": "task", "outcome": "ok", "host": "a", "task": measure_campaign.FINAL_TASK},
        {"event": "task", "outcome": "ok", "host": "b", "task": "set-up: x"},
        {"event": "task", "outcome": "failed", "host": "b", "task": "run: isobench run",
         "msg": "non-zero return code", "rc": 2, "stderr": "isobench: error: unknown benchmark"},
        {"event": "task", "outcome": "unreachable", "host": "c", "task": "set-up: x",
         "msg": "Task failed: Failed to connect to the host via ssh: Connection refused"},
    ]
    run = measure_campaign.PlaybookRun(events, None, "ansible-playbook was killed")
    out = measure_campaign.outcomes(run, ["a", "b", "c", "d"], measure_campaign.FINAL_TASK)
    assert out["a"].status == "done"
    assert (out["b"].status, out["b"].stage) == ("failed", "run")
    assert "exit status 2" in out["b"].reason and "unknown benchmark" in out["b"].reason
    assert (out["c"].status, out["c"].stage) == ("failed", "set-up")
    assert out["c"].reason.startswith("unreachable at 'set-up: x': Failed to connect")
    assert out["d"].status == "failed" and out["d"].reason == "ansible-playbook was killed"
    assert measure_campaign.key_problem(
        {"msg": "@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@"}).startswith(
        "its host key does not match")
    assert measure_campaign.key_problem({"msg": "Connection refused"}) is None


def test_the_source_bundle_holds_the_checkout_but_not_its_builds(tmp_path):
    src = tmp_path / "src"
    (src / "build").mkdir(parents=True)
    (src / ".venv").mkdir()
    (src / "Makefile").write_text("all:\n")
    (src / "meson.build").write_text("project('x')\n")
    (src / "build" / "isob").write_text("binary")
    (src / ".venv" / "x").write_text("venv")
    (src / "python").mkdir()
    (src / "python" / "m.py").write_text("print(1)\n")
    path, sid = measure_campaign.make_bundle(src, tmp_path / "out")
    import tarfile
    with tarfile.open(path) as tar:
        assert sorted(tar.getnames()) == ["Makefile", "meson.build", "python/m.py"]
    # The same content gives the same id, so a host unpacks it once.
    assert measure_campaign.make_bundle(src, tmp_path / "out2")[1] == sid
    (src / "python" / "m.py").write_text("print(2)\n")
    assert measure_campaign.make_bundle(src, tmp_path / "out3")[1] != sid
    with pytest.raises(Exception, match="not an isobench checkout"):
        measure_campaign.make_bundle(tmp_path / "out", tmp_path / "out4")


# ---- show and report, from tagged runs ----

def _tagged(db: Path, tmp_path: Path, campaign: str, hosts: dict[str, dict]) -> None:
    """Each host's run imported as `campaign run` imports it."""
    with Store.open(db, create=True) as store:
        for host, doc in hosts.items():
            f = tmp_path / f"{host}.json"
            f.write_text(json.dumps(doc))
            interchange.import_into(store, f, None, {"campaign": campaign, "host": host})


def _slower(doc: dict, mechanism: str, factor: float) -> dict:
    """doc with mechanism's samples made factor times longer."""
    for r in doc["results"]:
        if r["mechanism"] == mechanism:
            for k in ("median", "mean", "min", "max", "p5", "p95", "batched"):
                if r.get(k) is not None:
                    r[k] = r[k] * factor
            r["samples"] = {e: [int(v * factor) for v in vs]
                            for e, vs in (r.get("samples") or {}).items()}
            if r.get("batched_reps"):
                r["batched_reps"] = [v * factor for v in r["batched_reps"]]
    return doc


def test_show_sets_each_hosts_own_ratios_side_by_side(isobench, tmp_path):
    b = fixture("clean_run")
    b["environment"]["cpu_model"] = "Other CPU"
    b["environment"]["cpu_flags"] = ["pku", "ospke"]
    a = fixture("clean_run")
    a["environment"]["cpu_flags"] = ["pku"]  # the CPU has it, the kernel does not use it
    a["environment"]["cpu_flags_relevant"] = ["pku"]
    _tagged(isobench.db, tmp_path, "c1", {"alpha": a, "beta": _slower(b, "mpk", 2.0)})
    _tagged(isobench.db, tmp_path, "other", {"gamma": fixture("clean_run")})
    doc, p = isobench.json("campaign", "show", "c1", "--json")
    assert p.returncode == 0, p.stderr
    assert doc["schema_version"] == interchange.SCHEMA_VERSION
    assert doc["campaign_version"] == analysis_campaign.CAMPAIGN_VERSION
    assert [h["host"] for h in doc["hosts"]] == ["alpha", "beta"]
    assert doc["hosts"][1]["cpu"] == "Other CPU" and doc["hosts"][1]["pku"] == "yes"
    assert doc["hosts"][0]["pku"].startswith("no (CPU has it")
    table = next(t for t in doc["tables"] if t["benchmark"] == "switch"
                 and t["population"].get("payload") == 0
                 and t["population"].get("placement") == "same-cpu")
    rows = {r["label"]: r for r in table["rows"]}
    assert rows["direct"]["role"] == "baseline" and table["rows"][-1]["label"] == "direct"
    a, bb = rows["mpk"]["cells"]["alpha"], rows["mpk"]["cells"]["beta"]
    assert a["kind"] == bb["kind"] == "ratio"
    # beta's mpk is twice as slow against the same direct: its own ratio says so.
    assert bb["value"] == pytest.approx(2 * a["value"], rel=0.05)
    # kv: only the get phase stands for kv, and sizes are rows of one table.
    kv = [t for t in doc["tables"] if t["benchmark"] == "kv"]
    assert kv and all(t["population"].get("variant") == "get" for t in kv)

    text = isobench("campaign", "show", "c1")
    assert text.returncode == 0, text.stderr
    assert "alpha" in text.stdout and "beta" in text.stdout and "gamma" not in text.stdout
    assert "1 (baseline)" in text.stdout

    absolute = isobench("campaign", "show", "c1", "--absolute")
    assert absolute.returncode == 0
    assert "warning: absolute values across hosts" in absolute.stderr
    assert "tsc_ticks" in absolute.stdout or "cycles" in absolute.stdout

    latest = isobench("campaign", "show")
    assert latest.returncode == 0 and "campaign other" in latest.stdout

    out = tmp_path / "rep"
    rep, p = isobench.json("campaign", "report", "c1", "-o", str(out), "--json")
    assert p.returncode == 0, p.stderr
    assert "campaign-switch.png" in rep["files"] and (out / "campaign-switch.svg").is_file()
    assert json.loads((out / "campaign.json").read_text())["campaign"] == "c1"
    assert "| mpk |" in (out / "campaign.md").read_text()


def test_the_heat_map_has_a_cell_per_host_and_mechanism(tmp_path):
    db = tmp_path / "s.sqlite"
    _tagged(db, tmp_path, "c", {"alpha": fixture("clean_run"),
                                "beta": _slower(fixture("clean_run"), "mpk", 3.0)})
    with Store.open(db, create=False) as store:
        doc = analysis_campaign.build(store, "c")
    plots = render_campaign.heatmap_plots(doc)
    switch = next(p for p in plots if p.name == "campaign-switch")
    ax = switch.figure.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["alpha", "beta"]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels and not any(l.startswith("direct ") for l in labels)  # baselines left out
    assert len(ax.texts) == 2 * len(labels)


def _config(mech, params, ratio, unit="tsc_ticks", role="mechanism"):
    """A configuration of a summary document, as campaign tables read it."""
    label = " ".join(["worksweep", mech, *(f"{k}={v}" for k, v in sorted(params.items()))])
    return {"benchmark": "worksweep", "mechanism": mech, "params": params, "unit": unit,
            "role": role, "label": label, "headline_phase": True,
            "headline": {"value": 100.0 * ratio, "interval": None, "reps": 5},
            "ratio": None if role == "baseline" else {
                "value": ratio, "interval": {"low": ratio * 0.9, "high": ratio * 1.1},
                "note": None}}


def test_rows_are_keyed_by_every_identity_param_not_in_the_title():
    place = {"placement": "same-cpu"}
    doc = {"configs": [_config("uthread", {**place, "k": k, "trial_iterations": 100}, r)
                       for k, r in ((4096, 1.01), (1, 3.0), (64, 1.4))]
           + [_config("direct", {**place, "k": k, "trial_iterations": 100}, 1.0,
                      role="baseline") for k in (1, 64, 4096)]}
    (t,) = analysis_campaign.tables([("alpha", doc), ("beta", doc)])
    assert t["title"] == "worksweep placement=same-cpu"
    # One row per k, in numeric order, the baselines last; the param every
    # row has alike (trial_iterations) is not in the labels.
    assert [r["label"] for r in t["rows"]] == [
        "uthread k=1", "uthread k=64", "uthread k=4096", "direct k=1", "direct k=64",
        "direct k=4096"]
    assert [r["cells"]["beta"]["value"] for r in t["rows"][:3]] == [3.0, 1.4, 1.01]
    assert t["rows"][0]["params"] == {"k": 1, "trial_iterations": 100}
    rows = render_campaign.table_rows(t, ["alpha", "beta"])
    assert rows[0] == ["uthread k=1", "3.00 [2.70..3.30]", "3.00 [2.70..3.30]"]


def test_a_second_configuration_in_a_filled_cell_is_an_error():
    params = {"placement": "same-cpu", "k": 64}
    one = [_config("uthread", params, 1.4), _config("uthread", params, 1.5, unit="cycles")]
    (t,) = analysis_campaign.tables([("alpha", {"configs": one[:1]}),
                                     ("beta", {"configs": one[1:]})])
    # Rows of one mechanism in two units are two rows, the unit in the label.
    assert [r["label"] for r in t["rows"]] == ["uthread [tsc_ticks]", "uthread [cycles]"]
    # Two configurations of one host that no row param tells apart would
    # share a cell: refused, naming both, instead of the last one winning.
    twin = [_config("uthread", {"placement": "same-cpu", "k": 64}, 1.4),
            _config("uthread", {"placement": "same-cpu", "k": 64}, 1.6)]
    twin[1]["label"] += " (again)"
    with pytest.raises(UsageError, match=r"campaign table 'worksweep placement=same-cpu': "
                       r"host alpha has two configurations for one cell \('worksweep "
                       r"uthread k=64 placement=same-cpu' and '.*\(again\)'\)"):
        analysis_campaign.tables([("alpha", {"configs": twin})])


def test_show_of_an_unknown_campaign_is_one_line(isobench, tmp_path):
    _tagged(isobench.db, tmp_path, "c1", {"alpha": fixture("clean_run")})
    assert "no campaign 'c9'" in assert_one_error_line(isobench("campaign", "show", "c9"), 2)
    assert "campaign id" in assert_one_error_line(isobench("campaign", "show", "../x"), 2)
    other = tmp_path / "empty.sqlite"
    with Store.open(other, create=True):
        pass
    p = isobench("campaign", "show", "--db", str(other))
    assert "holds no campaign" in assert_one_error_line(p, 2)


def test_campaign_import_tags_each_export_with_its_host(isobench, tmp_path):
    folder = tmp_path / "exports"
    folder.mkdir()
    (folder / "skylake.json").write_text(json.dumps(fixture("clean_run")))
    (folder / "icelake").mkdir()
    (folder / "icelake" / "export.json").write_text(json.dumps(fixture("clean_run")))
    doc, p = isobench.json("campaign", "import", "s1", str(folder), "--json")
    assert p.returncode == 0, p.stderr
    assert sorted(d["host"] for d in doc["imported"]) == ["icelake", "skylake"]
    assert not any(d["skipped"] for d in doc["imported"])
    with Store.open(isobench.db, create=False) as store:
        assert [h for h, _ in analysis_campaign.campaign_runs(store, "s1")] == \
            ["icelake", "skylake"]
    (folder / "bad name.json").write_text("{}")
    assert "host name" in assert_one_error_line(isobench("campaign", "import", "s1",
                                                         str(folder)), 2)
    (tmp_path / "nothing").mkdir()
    assert "holds no exports" in assert_one_error_line(
        isobench("campaign", "import", "s1", str(tmp_path / "nothing")), 2)


# ---- Slurm ----

NODE_TYPES = ("--node-type", "skylake:compute:skx", "--node-type", "graviton:arm")


def _slurm(isobench, tmp_path, *extra: str) -> Path:
    out = tmp_path / "campaign.sbatch"
    p = isobench("campaign", "slurm", "switch", "-m", "direct", "--quick", *NODE_TYPES,
                 "--shared", str(tmp_path / "shared"), "--source", str(REPO), "--id", "s1",
                 "-o", str(out), *extra)
    assert p.returncode == 0, p.stderr
    return out


def test_the_slurm_script_says_what_each_task_does(isobench, tmp_path):
    text = _slurm(isobench, tmp_path).read_text()
    assert text.startswith("#!/bin/bash\n")
    lines = text.splitlines()
    sbatch = [l for l in lines if l.startswith("#SBATCH")]
    assert "#SBATCH --exclusive" in sbatch and "#SBATCH --nodes=1" in sbatch
    assert not any("--array" in l or "--partition" in l for l in sbatch)
    assert "NODE_TYPES=(skylake graviton)" in lines
    assert "PARTITIONS=(compute arm)" in lines
    assert "CONSTRAINTS=(skx '')" in lines
    assert "RUN_ARGS=(switch -m direct --quick)" in lines
    assert f"SHARED={tmp_path / 'shared'}" in lines
    assert "make -C \"$work/src\" build" in text
    assert "campaign import \"$CAMPAIGN\" \"$EXPORTS\"" in text
    assert subprocess.run(["bash", "-n", str(tmp_path / "campaign.sbatch")]).returncode == 0
    # An existing file is not overwritten.
    p = isobench("campaign", "slurm", *NODE_TYPES, "--shared", "/s", "-o",
                 str(tmp_path / "campaign.sbatch"))
    assert "exists" in assert_one_error_line(p, 2)


@pytest.mark.parametrize("args, says", [
    (("--node-type", "bad;name:p"), "NAME:PARTITION"),
    (("--node-type", "a:p", "--node-type", "a:q"), "must differ"),
    (("--node-type", "a:p", "--time", "soon"), "Slurm time"),
])
def test_slurm_options_are_checked(isobench, tmp_path, args, says):
    p = isobench("campaign", "slurm", *args, "--shared", str(tmp_path), "-o",
                 str(tmp_path / "x.sbatch"))
    assert says in assert_one_error_line(p, 2)
    assert not (tmp_path / "x.sbatch").exists()


def _stand_in_sbatch(folder: Path) -> Path:
    """An sbatch that records its arguments and answers a job id, as
    `sbatch --parsable` does: the submission is checked without Slurm."""
    folder.mkdir()
    tool = folder / "sbatch"
    log = folder / "calls"
    tool.write_text("#!/bin/bash\n"
                    f"printf '%s\\n' \"$*\" >> {log}\n"
                    f"echo $((100 + $(wc -l < {log})))\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return log


def test_submit_places_one_array_task_per_node_type_and_imports_after_them(isobench, tmp_path):
    script = _slurm(isobench, tmp_path)
    log = _stand_in_sbatch(tmp_path / "bin")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    p = subprocess.run(["bash", str(script), "submit"], env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    calls = log.read_text().splitlines()
    assert calls[0] == f"--parsable --array=0 --partition=compute --constraint=skx {script}"
    assert calls[1] == f"--parsable --array=1 --partition=arm {script}"
    assert "--dependency=afterany:101:102" in calls[2] and calls[2].endswith(f"{script} import")
    assert (tmp_path / "shared" / "s1" / "logs").is_dir()
    bad = subprocess.run(["bash", str(script), "nonsense"], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "usage" in bad.stderr


@pytest.mark.skipif(not (REPO / "build" / "isob").is_file()
                    or not (REPO / ".venv" / "bin" / "isobench").is_file(),
                    reason="needs this checkout built (make build): the task runs its isob")
def test_an_array_task_measures_exports_and_the_import_merges(isobench, tmp_path):
    script = _slurm(isobench, tmp_path, "--prebuilt", str(REPO))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ISOBENCH_")}
    env.update({"SLURM_ARRAY_TASK_ID": "1", "SLURM_JOB_ID": "4242",
                "TMPDIR": str(tmp_path), "PYTHONPATH": str(PYTHON_DIR)})
    p = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    export = tmp_path / "shared" / "s1" / "exports" / "graviton.json"
    assert export.is_file()
    assert not (tmp_path / "isobench-s1-graviton-4242").exists()  # its work folder is gone
    p = subprocess.run(["bash", str(script), "import"], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    merged = tmp_path / "shared" / "s1" / "campaign.sqlite"
    with Store.open(merged, create=False) as store:
        runs = analysis_campaign.campaign_runs(store, "s1")
        assert [h for h, _ in runs] == ["graviton"]
        assert {r["mechanism"] for r in store.results(runs[0][1])} == {"direct"}
    show = isobench("campaign", "show", "s1", "--db", str(merged))
    assert show.returncode == 0 and "graviton" in show.stdout
