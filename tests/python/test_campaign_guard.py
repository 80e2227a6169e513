"""What a campaign inventory may not say (measure/campaign.py check_hosts):
templates in isobench_* variables, work folders that are the whole file
system, a home or above it, settings that turn the host-key check off,
host-level root, and the placeholder hosts of `campaign init`.

Each refusal is checked on the validator (with a deliberately broken
variant of the check where the refusal is a security property: the same
input then passes) and end to end, through `isobench campaign run` over
hosts of ansible_connection=local: nothing leaves this machine, and a
refused inventory never reaches Ansible's playbook, so nothing runs on any
host."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import assert_one_error_line
from isobench.errors import UsageError
from isobench.measure import campaign as mc
from isobench.measure import inventory


def _have_ansible() -> bool:
    try:
        mc.ansible_tool("ansible-inventory")
        return True
    except UsageError:
        return False


needs_ansible = pytest.mark.skipif(not _have_ansible(),
                                   reason="no ansible-inventory (ansible-core: the dev extra)")

INV = Path("lab.ini")


def check(hv: dict, name: str = "h1", env: dict | None = None, **kw) -> inventory.Inventory:
    return inventory.check_hosts({name: hv}, [name], INV, env=env or {}, **kw)


def refused(hv: dict, name: str = "h1", env: dict | None = None, **kw) -> str:
    with pytest.raises(UsageError) as e:
        check(hv, name, env, **kw)
    text = str(e.value)
    assert "\n" not in text
    return text


# ---- templates ----

PAYLOAD = "/tmp/w/{{lookup('pipe','id>/tmp/pwned')}}"


@pytest.mark.parametrize("var, value", [
    ("isobench_workdir", PAYLOAD),
    ("isobench_workdir", "/tmp/{{'..'}}/etc"),
    ("isobench_prebuilt", "/srv/{% if true %}x{% endif %}"),
    ("isobench_cpus", "{# a comment #}2-3"),
    ("isobench_tune", "{{ true }}"),
    ("isobench_anything", ["ok", {"k": "{{ x }}"}]),
])
def test_a_template_in_an_isobench_variable_is_refused(var, value):
    line = refused({var: value})
    assert line.startswith(f"inventory lab.ini: host h1: {var} holds a template"), line


def test_the_template_check_is_what_stops_the_payload(monkeypatch):
    # A deliberately broken variant (no template marks): the payload, which
    # is printable ASCII without spaces, would then pass as a work folder.
    monkeypatch.setattr(inventory, "TEMPLATE_MARKS", ())
    assert check({"isobench_workdir": PAYLOAD}).hosts[0].workdir == PAYLOAD


# ---- work folders ----

@pytest.mark.parametrize("value, says", [
    ("/", "is the whole file system or the whole home folder"),
    ("~", "is the whole file system or the whole home folder"),
    ("~/", "is the whole file system or the whole home folder"),
    ("~/a/../..", "'..'"),
    ("/tmp/a/..", "'..'"),
    ("/tmp/./a", "'.' or '..'"),
    ("/tmp//a", "empty"),
    ("/home", "not below an allowed root"),
    ("/home/bench", "not below an allowed root"),  # a home itself, as ~
    ("/tmp", "not below an allowed root"),
    ("/etc/isobench", "not below an allowed root"),
    ("/usr/local/isobench", "not below an allowed root"),
    ("relative/dir", "not an absolute path"),
    ("~other/x", "not an absolute path"),
])
@pytest.mark.parametrize("var", ["isobench_workdir", "isobench_prebuilt"])
def test_a_work_folder_that_is_everything_or_outside_the_roots_is_refused(var, value, says):
    line = refused({var: value})
    assert line.startswith(f"inventory lab.ini: host h1: {var} {value!r}") and says in line, line


@pytest.mark.parametrize("value", ["~/isobench-campaign", "/home/bench/isobench",
                                   "/scratch/isobench", "/tmp/pytest-of-x/w", "/var/tmp/i/j"])
def test_work_folders_below_a_home_or_an_allowed_root_pass(value):
    assert check({"isobench_workdir": value}).hosts[0].workdir == value


def test_a_workdir_root_allows_another_folder():
    assert "not below an allowed root" in refused({"isobench_workdir": "/nvme/bench"})
    assert check({"isobench_workdir": "/nvme/bench"}, roots=["/nvme"]).hosts[0].workdir \
        == "/nvme/bench"
    # The root itself is still not a work folder.
    assert "not below" in refused({"isobench_workdir": "/nvme"}, roots=["/nvme"])


# ---- host keys ----

KEY_OFF = [
    ({"ansible_host_key_checking": False}, "ansible_host_key_checking=False"),
    ({"ansible_host_key_checking": "false"}, "ansible_host_key_checking=false"),
    ({"ansible_ssh_host_key_checking": "no"}, "ansible_ssh_host_key_checking=no"),
    ({"ansible_paramiko_host_key_checking": "0"}, "ansible_paramiko_host_key_checking=0"),
    ({"ansible_host_key_checking": "{{ false }}"}, "not plainly true"),
    ({"ansible_ssh_extra_args": "-o StrictHostKeyChecking=no"},
     "ansible_ssh_extra_args sets StrictHostKeyChecking=no"),
    ({"ansible_ssh_common_args": "-oStrictHostKeyChecking=accept-new"},
     "ansible_ssh_common_args sets StrictHostKeyChecking=accept-new"),
    ({"ansible_ssh_args": "-C -o 'stricthostkeychecking off'"},
     "ansible_ssh_args sets StrictHostKeyChecking=off"),
    ({"ansible_ssh_extra_args": "-Co StrictHostKeyChecking=no"}, "StrictHostKeyChecking=no"),
    ({"ansible_ssh_common_args": "-o UserKnownHostsFile=/dev/null"},
     "UserKnownHostsFile=/dev/null"),
    ({"ansible_ssh_common_args": "-o UserKnownHostsFile=none"}, "UserKnownHostsFile=none"),
    ({"ansible_ssh_extra_args": "-o KnownHostsCommand=/bin/true"}, "KnownHostsCommand"),
    ({"ansible_ssh_args": "-F /tmp/other_config"}, "-F (another ssh configuration"),
    ({"ansible_ssh_args": "-CF/tmp/other_config"}, "-F (another ssh configuration"),
    ({"ansible_scp_extra_args": "-o StrictHostKeyChecking=no"},
     "ansible_scp_extra_args sets StrictHostKeyChecking=no"),
    ({"ansible_sftp_extra_args": "-o StrictHostKeyChecking=no"},
     "ansible_sftp_extra_args sets StrictHostKeyChecking=no"),
    ({"ansible_ssh_extra_args": "{{ '-o StrictHostKey' ~ 'Checking=no' }}"},
     "ansible_ssh_extra_args is templated"),
]


@pytest.mark.parametrize("hv, says", KEY_OFF)
def test_a_host_setting_that_turns_the_host_key_check_off_is_refused(hv, says):
    line = refused(hv)
    assert line.startswith("inventory lab.ini: host h1: ") and says in line, line
    assert "turns off the host-key check" in line and "--insecure-host-keys" in line


@pytest.mark.parametrize("hv, says", KEY_OFF)
def test_insecure_host_keys_accepts_them_with_a_warning(hv, says):
    inv = check(hv, insecure_host_keys=True)
    assert len(inv.warnings) == 1 and inv.warnings[0].startswith("host h1: host key not checked")
    assert says in inv.warnings[0]


def test_the_key_check_is_what_refuses_them(monkeypatch):
    # A deliberately broken variant that finds nothing: the same inventory passes.
    monkeypatch.setattr(inventory, "host_key_problems", lambda name, hv: [])
    for hv, _ in KEY_OFF:
        assert check(hv).warnings == []


@pytest.mark.parametrize("hv", [
    {"ansible_host_key_checking": True},
    {"ansible_ssh_host_key_checking": "yes"},
    # A known_hosts file of one's own, strictly checked (as the sshd tests do).
    {"ansible_ssh_common_args": "-o UserKnownHostsFile=/tmp/k/known_hosts "
                                "-o StrictHostKeyChecking=yes -o BatchMode=yes"},
    {"ansible_ssh_args": "-C -o ControlMaster=auto -o ControlPersist=60s"},
    {"ansible_ssh_extra_args": "-o 'StrictHostKeyChecking true'"},
    {"ansible_ssh_extra_args": "-i /keys/File -J jump"},  # F only as an argument
])
def test_settings_that_keep_the_check_pass(hv):
    assert check(hv).warnings == []


@pytest.mark.parametrize("env, says", [
    ({"ANSIBLE_HOST_KEY_CHECKING": "False"}, "ANSIBLE_HOST_KEY_CHECKING=False in the environment"),
    ({"ANSIBLE_SSH_ARGS": "-o StrictHostKeyChecking=no"},
     "ANSIBLE_SSH_ARGS in the environment sets StrictHostKeyChecking=no"),
    ({"ANSIBLE_SSH_EXTRA_ARGS": "-o UserKnownHostsFile=/dev/null"},
     "ANSIBLE_SSH_EXTRA_ARGS in the environment sets UserKnownHostsFile=/dev/null"),
])
def test_the_environment_may_not_turn_it_off_either(env, says):
    line = refused({}, env=env)
    assert line.startswith(says) and "--insecure-host-keys" in line, line
    assert says in check({}, env=env, insecure_host_keys=True).warnings[0]
    assert check({}, env={"ANSIBLE_HOST_KEY_CHECKING": "True"}).warnings == []


def test_isobench_forces_the_check_unless_told_otherwise():
    os.environ["ANSIBLE_HOST_KEY_CHECKING"] = "False"
    try:
        assert mc.ansible_env()["ANSIBLE_HOST_KEY_CHECKING"] == "True"
        assert mc.ansible_env(insecure_host_keys=True)["ANSIBLE_HOST_KEY_CHECKING"] == "False"
    finally:
        del os.environ["ANSIBLE_HOST_KEY_CHECKING"]
    assert mc.ansible_env()["ANSIBLE_INVENTORY_ENABLED"] == "ini,yaml"


# ---- root ----

@pytest.mark.parametrize("hv", [{"ansible_become": True}, {"ansible_become": "yes"},
                                {"ansible_become": "{{ true }}"}, {"ansible_sudo": "true"}])
def test_host_level_become_is_refused(hv):
    (var,) = hv
    line = refused(hv)
    assert line.startswith(f"inventory lab.ini: host h1: {var}=") and \
        "runs every task as root" in line and "system tune" in line, line


def test_become_credentials_without_become_pass():
    hv = {"ansible_become": False, "ansible_become_password": "x", "ansible_become_user": "root",
          "isobench_tune": "true"}
    assert check(hv).hosts[0].tune is True


# ---- placeholders ----

@pytest.mark.parametrize("name, hv, says", [
    ("replace-me-skylake", {"ansible_host": "10.1.2.3"}, "is a placeholder of `campaign init`"),
    ("REPLACE-ME", {}, "is a placeholder"),
    ("lab1", {"ansible_host": "192.0.2.10"}, "has address 192.0.2.10 (a documentation address"),
    ("lab1", {"ansible_host": "198.51.100.7"}, "has address 198.51.100.7"),
    ("lab1", {"ansible_host": "203.0.113.254"}, "has address 203.0.113.254"),
    ("lab1", {"ansible_host": "2001:db8::12"}, "has address 2001:db8::12"),
    ("lab1", {"ansible_host": "[2001:DB8:ffff::1]"}, "has address [2001:DB8:ffff::1]"),
    ("lab1", {"ansible_host": "bench.example.com"}, "a name reserved for documentation"),
    ("lab1", {"ansible_host": "example.org"}, "a name reserved for documentation"),
    ("host.example", {}, "a name reserved for documentation"),
    ("lab1", {"ansible_host": "box.invalid"}, "a name reserved for documentation"),
])
def test_placeholder_and_documentation_hosts_are_refused(name, hv, says):
    line = refused(hv, name=name)
    assert line.startswith(f"inventory lab.ini: host {name} ") and says in line, line


@pytest.mark.parametrize("name, hv", [("lab1", {"ansible_host": "10.0.0.12"}),
                                      ("lab1", {"ansible_host": "192.0.3.1"}),
                                      ("lab1", {"ansible_host": "2001:db9::1"}),
                                      ("examples.net", {}), ("lab1", {"ansible_host": "x.com"})])
def test_real_looking_hosts_pass(name, hv):
    assert [h.name for h in check(hv, name=name).hosts] == [name]


# ---- end to end: `isobench campaign run` over local-connection hosts ----

def _local_inventory(path: Path, **hostvars: str) -> Path:
    line = " ".join(["h1", "ansible_connection=local",
                     "ansible_python_interpreter=/usr/bin/python3",
                     *(f"{k}={v}" for k, v in hostvars.items())])
    path.write_text(line + "\n")
    return path


def _env(tmp_path: Path) -> dict:
    # Ansible's own folders stay in the test.
    return {"ANSIBLE_HOME": str(tmp_path / "ansible-home")}


def _assert_nothing_ran(tmp_path: Path) -> None:
    assert not (tmp_path / "results" / "campaigns").exists()
    assert not (tmp_path / "w").exists()


@needs_ansible
def test_a_lookup_payload_never_runs_not_even_while_validating(isobench, tmp_path):
    marker = tmp_path / "MARKER"
    payload = f"'{tmp_path}/w/{{{{lookup(\"pipe\",\"touch {marker}\")}}}}'"
    inv = _local_inventory(tmp_path / "lab.ini", isobench_workdir=payload)
    # ansible-inventory --list, which isobench validates from, templates nothing.
    listing = subprocess.run([str(mc.ansible_tool("ansible-inventory")), "-i", str(inv),
                              "--list"], capture_output=True, text=True, timeout=120,
                             env=mc.ansible_env(_env(tmp_path)))
    assert listing.returncode == 0, listing.stderr
    raw = json.loads(listing.stdout)["_meta"]["hostvars"]["h1"]["isobench_workdir"]
    assert "lookup(" in raw and not marker.exists()
    p = isobench("campaign", "run", str(inv), "switch", "-m", "direct", **_env(tmp_path))
    line = assert_one_error_line(p, 2)
    assert "host h1: isobench_workdir holds a template" in line, line
    assert not marker.exists()
    _assert_nothing_ran(tmp_path)
    # The payload is live: Ansible itself, templating the variable, runs it.
    tool = mc.ansible_tool("ansible-inventory").parent / "ansible"
    shown = subprocess.run([str(tool), "-i", str(inv), "h1", "-m", "ansible.builtin.debug",
                            "-a", "var=isobench_workdir"], capture_output=True, text=True,
                           timeout=120, env=mc.ansible_env(_env(tmp_path)))
    assert marker.exists(), shown.stdout + shown.stderr


@needs_ansible
def test_an_inventory_script_is_not_run(isobench, tmp_path):
    marker = tmp_path / "MARKER"
    script = tmp_path / "lab.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n"
                      "echo '{\"all\": {\"hosts\": [\"h1\"]}, \"_meta\": {\"hostvars\": {}}}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    p = isobench("campaign", "run", str(script), "switch", "-m", "direct", **_env(tmp_path))
    assert "does not parse" in assert_one_error_line(p, 2)
    assert not marker.exists()
    # With the script plugin enabled, listing it runs it: what the setting prevents.
    subprocess.run([str(mc.ansible_tool("ansible-inventory")), "-i", str(script), "--list"],
                   capture_output=True, timeout=120,
                   env={**mc.ansible_env(_env(tmp_path)), "ANSIBLE_INVENTORY_ENABLED": "script"})
    assert marker.exists()


@needs_ansible
@pytest.mark.parametrize("hostvars, says", [
    ({"isobench_workdir": "'/tmp/x/{{\"..\"}}'"}, "host h1: isobench_workdir holds a template"),
    ({"isobench_workdir": "/"}, "host h1: isobench_workdir '/' is the whole file system"),
    ({"isobench_workdir": "~"}, "host h1: isobench_workdir '~' is the whole file system"),
    ({"isobench_workdir": "/etc/isobench"}, "host h1: isobench_workdir '/etc/isobench' is not "
                                            "below an allowed root"),
    ({"ansible_host_key_checking": "false"}, "host h1: ansible_host_key_checking=false, which "
                                             "turns off the host-key check"),
    ({"ansible_ssh_extra_args": "'-o StrictHostKeyChecking=no'"},
     "host h1: ansible_ssh_extra_args sets StrictHostKeyChecking=no, which turns off"),
    ({"ansible_become": "true"}, "host h1: ansible_become=true runs every task as root"),
    ({"ansible_host": "192.0.2.10"}, "host h1 has address 192.0.2.10 (a documentation"),
])
def test_campaign_run_refuses_in_one_line_before_anything_runs(isobench, tmp_path, hostvars,
                                                               says):
    inv = _local_inventory(tmp_path / "lab.ini", **hostvars)
    p = isobench("campaign", "run", str(inv), "switch", "-m", "direct", **_env(tmp_path))
    line = assert_one_error_line(p, 2)
    assert line.startswith(f"isobench: error: inventory {inv}: ") and says in line, line
    _assert_nothing_ran(tmp_path)


@needs_ansible
def test_the_environment_is_refused_end_to_end(isobench, tmp_path):
    inv = _local_inventory(tmp_path / "lab.ini")
    p = isobench("campaign", "run", str(inv), "switch", "-m", "direct",
                 ANSIBLE_HOST_KEY_CHECKING="False", **_env(tmp_path))
    line = assert_one_error_line(p, 2)
    assert "ANSIBLE_HOST_KEY_CHECKING=False in the environment" in line, line
    _assert_nothing_ran(tmp_path)


def _stand_in_ssh(folder: Path) -> Path:
    """An ssh that records that it was started: none must be."""
    folder.mkdir()
    log = folder / "ssh-calls"
    for tool in ("ssh", "scp", "sftp"):
        (folder / tool).write_text(f"#!/bin/sh\necho \"$0 $*\" >> {log}\nexit 255\n")
        (folder / tool).chmod(0o755)
    return log


@needs_ansible
@pytest.mark.parametrize("name", ["lab.ini", "lab.yml"])
def test_the_init_template_cannot_run_until_edited(isobench, tmp_path, name):
    made = isobench("campaign", "init", str(tmp_path / name))
    assert made.returncode == 0, made.stderr
    assert "placeholders" in made.stdout and "refuses" in made.stdout
    hostvars, names = inventory.list_inventory(tmp_path / name)
    assert names == ["replace-me-skylake", "replace-me-icelake", "replace-me-graviton"]
    # Root only for tune and reset: no host is given ansible_become.
    assert not any(k in hv for hv in hostvars.values() for k in inventory.BECOME_VARS)
    # Following the printed hint as written: refused by name, and no ssh started.
    log = _stand_in_ssh(tmp_path / "bin")
    path = f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"
    p = isobench("campaign", "run", str(tmp_path / name), "switch", "--quick", PATH=path,
                 **_env(tmp_path))
    line = assert_one_error_line(p, 2)
    assert "host replace-me-skylake is a placeholder of `campaign init`" in line, line
    assert not log.exists()
    # Renamed but with the template's addresses: refused by address.
    text = (tmp_path / name).read_text().replace("replace-me-", "")
    (tmp_path / name).unlink()
    (tmp_path / name).write_text(text)
    p = isobench("campaign", "run", str(tmp_path / name), "switch", "--quick", PATH=path,
                 **_env(tmp_path))
    assert "host skylake has address 192.0.2.10 (a documentation address range" in \
        assert_one_error_line(p, 2)
    assert not log.exists()
    # Edited (real-looking addresses): isobench reads what the template says.
    for doc, real in (("192.0.2.", "10.9.8."), ("2001:db8::", "fd00::")):
        text = text.replace(doc, real)
    (tmp_path / name).write_text(text)
    sky, ice, grav = inventory.load_inventory(tmp_path / name).hosts
    assert (sky.name, sky.cpus, sky.tune, sky.workdir) == ("skylake", "2-3", True, None)
    assert (ice.cpus, ice.tune, ice.workdir) == ("4-7", False, "/scratch/isobench")
    assert (grav.cpus, grav.tune, grav.prebuilt) == (None, False, None)


@needs_ansible
def test_insecure_host_keys_runs_and_records_the_warning(isobench, tmp_path):
    # A checkout stand-in with no .venv: the host gets through connect and
    # set-up, then fails at `run` (nothing to measure with); what matters is
    # that the campaign ran and its record says the key was not checked.
    fake = tmp_path / "fake-checkout"
    fake.mkdir()
    work = tmp_path / "w"
    inv = _local_inventory(tmp_path / "lab.ini", ansible_host_key_checking="false",
                           isobench_workdir=str(work), isobench_prebuilt=str(fake))
    refused_p = isobench("campaign", "run", str(inv), "switch", "-m", "direct", "--id", "k",
                         **_env(tmp_path))
    assert "turns off the host-key check" in assert_one_error_line(refused_p, 2)
    _assert_nothing_ran(tmp_path)
    p = isobench("campaign", "run", str(inv), "switch", "-m", "direct", "--id", "k",
                 "--insecure-host-keys", **_env(tmp_path))
    assert "Traceback" not in p.stderr
    assert p.returncode == 1, p.stdout + p.stderr
    warning = ("isobench: warning: campaign k: host h1: host key not checked "
               "(ansible_host_key_checking=false)")
    assert warning in p.stderr.splitlines(), p.stderr
    assert "h1: FAILED in run" in p.stdout, p.stdout
    assert (work / "campaigns" / "k").is_dir()  # the playbook did run on the host
    state = json.loads((tmp_path / "results" / "campaigns" / "k" / "state.json").read_text())
    assert [w["warning"] for w in state["warnings"]] == [
        "host h1: host key not checked (ansible_host_key_checking=false)"]
    show = isobench("campaign", "show", "k")
    assert show.returncode == 0, show.stderr
    assert warning in show.stderr.splitlines(), show.stderr
    doc, _ = isobench.json("campaign", "show", "k", "--json")
    assert doc["warnings"] == ["host h1: host key not checked (ansible_host_key_checking=false)"]


@pytest.mark.parametrize("root", ["/", "relative", "/a/../b"])
def test_a_workdir_root_must_be_a_plain_absolute_folder(isobench, tmp_path, root):
    inv = tmp_path / "lab.ini"
    inv.write_text("h1 ansible_connection=local\n")
    p = isobench("campaign", "run", str(inv), "--workdir-root", root)
    assert "--workdir-root" in assert_one_error_line(p, 2)
    _assert_nothing_ran(tmp_path)


@pytest.mark.parametrize("text, says", [
    ("[ssh_connection]\nssh_args = -C -o StrictHostKeyChecking=no\n",
     "ssh_args in {f} sets StrictHostKeyChecking=no"),
    ("[ssh_connection]\nssh_extra_args = -o UserKnownHostsFile=/dev/null\n",
     "ssh_extra_args in {f} sets UserKnownHostsFile=/dev/null"),
    ("[defaults]\nhost_key_checking = False\n", "[defaults] host_key_checking=False in {f}"),
    ("[paramiko_connection]\nhost_key_auto_add = True\n",
     "[paramiko_connection] host_key_auto_add=True in {f}"),
])
def test_an_ansible_cfg_that_turns_it_off_is_refused(tmp_path, text, says):
    f = tmp_path / "ansible.cfg"
    f.write_text(text)
    line = refused({}, env={"ANSIBLE_CONFIG": str(f)})
    assert line.startswith(says.format(f=f)) and "--insecure-host-keys" in line, line
    # Found in the current folder too, as Ansible finds it.
    assert inventory.config_key_problems({}, cwd=tmp_path)[0] == says.format(f=f)
    assert inventory.config_key_problems({"ANSIBLE_CONFIG": str(tmp_path / "none.cfg")},
                                  cwd=tmp_path / "elsewhere") == []


def test_every_environment_switch_of_the_check_is_forced_on():
    saved = dict(os.environ)
    os.environ.update({"ANSIBLE_SSH_HOST_KEY_CHECKING": "False",
                       "ANSIBLE_PARAMIKO_HOST_KEY_CHECKING": "False",
                       "ANSIBLE_PARAMIKO_HOST_KEY_AUTO_ADD": "True"})
    try:
        env = mc.ansible_env()
        assert all(env[k] == "True" for k in inventory.HOST_KEY_ENV)
        assert "ANSIBLE_PARAMIKO_HOST_KEY_AUTO_ADD" not in env
        problems = inventory.environment_key_problems(os.environ)
        assert len(problems) == 3, problems
    finally:
        os.environ.clear()
        os.environ.update(saved)


@needs_ansible
def test_the_real_ssh_tests_inventory_passes(tmp_path):
    # test_campaign_hosts.py's inventory (its own known_hosts, strictly
    # checked, a become password but no become) is not refused.
    from types import SimpleNamespace
    import sshd_hosts
    from conftest import REPO
    hosts = {n: SimpleNamespace(inventory_line=lambda prebuilt, n=n, a=a: (
        f"{n} ansible_host={a} ansible_port=2222 isobench_workdir={tmp_path / n / 'work'} "
        f"isobench_prebuilt={prebuilt}"))
        for n, a in (("alpha", "127.0.0.2"), ("beta", "127.0.0.3"))}
    fake = SimpleNamespace(root=tmp_path, hosts=hosts, client=SimpleNamespace(
        key=tmp_path / "client_ed25519", known_hosts=tmp_path / "known_hosts"))
    inv = sshd_hosts.Hosts.inventory(fake, REPO, "not-a-password")
    # test_campaign_hosts.py allows the checkout's parent folder as a root
    # (a clone may live anywhere, e.g. below /check): so does this test.
    loaded = inventory.load_inventory(inv, roots=(str(REPO.parent),))
    assert [h.name for h in loaded.hosts] == ["alpha", "beta"] and loaded.warnings == []
    assert loaded.hosts[0].prebuilt == str(REPO)


@needs_ansible
@pytest.mark.parametrize("where", ["group", "group_vars"])
def test_group_settings_are_refused_as_host_settings(isobench, tmp_path, where):
    inv = tmp_path / "lab.ini"
    if where == "group":
        inv.write_text("[lab]\nh1 ansible_connection=local\n[lab:vars]\nansible_become=true\n"
                       "ansible_ssh_extra_args='-o StrictHostKeyChecking=no'\n")
    else:
        inv.write_text("[lab]\nh1 ansible_connection=local\n")
        (tmp_path / "group_vars").mkdir()
        (tmp_path / "group_vars" / "all.yml").write_text(
            "ansible_ssh_extra_args: '-o StrictHostKeyChecking=no'\n")
    p = isobench("campaign", "run", str(inv), "switch", **_env(tmp_path))
    line = assert_one_error_line(p, 2)
    assert "host h1: " in line and ("ansible_become=true" in line if where == "group" else
                                   "StrictHostKeyChecking=no" in line), line
    _assert_nothing_ran(tmp_path)


def test_the_playbook_reads_only_the_checked_values():
    # Every isobench_* host variable reaches the hosts through isobench_hosts
    # (extra vars written from what check_hosts accepted), never from the
    # inventory, where a value could differ from what was checked.
    code = [l.split("#")[0] for l in mc.PLAYBOOK.read_text().splitlines()]
    for var in inventory.HOST_VARS:
        assert not any(re.search(rf"\b{var}\b", l) for l in code), var
    assert any("isobench_hosts[inventory_hostname]" in l for l in code)
    # Root for exactly two tasks: tune and reset.
    text = mc.PLAYBOOK.read_text()
    assert text.count("become: true") == 2
    assert "become" not in mc.PREFLIGHT.read_text()
    c = mc.Campaign("c", Path("/nonexistent/c"), "inv", mc.Selection(("switch",), (), True, None),
                    "now")
    hosts = [mc.Host("a", workdir="~/w", cpus="2-3", tune=True), mc.Host("b")]
    ev = mc.extra_vars(c, None, None, 60, hosts)
    u = mc.unsafe
    assert ev["isobench_hosts"] == {
        "a": {"workdir": u("~/w"), "cpus": u("2-3"), "tune": True, "prebuilt": None},
        "b": {"workdir": u(mc.DEFAULT_WORKDIR), "cpus": None, "tune": False, "prebuilt": None}}


@needs_ansible
def test_the_checked_values_are_never_templated_by_the_playbook(tmp_path):
    # Were a template to get past check_hosts, the playbook would still take
    # it as text: vars.json marks every host value unsafe.  The broken
    # variant (the same value, unmarked) runs the lookup.
    marker = tmp_path / "MARKER"
    payload = f"{tmp_path}/w/{{{{lookup('pipe','touch {marker}')}}}}"
    for marked, runs in ((True, False), (False, True)):
        value = mc.unsafe(payload) if marked else payload
        (tmp_path / "vars.json").write_text(json.dumps(
            {"isobench_hosts": {"h1": {"workdir": value}}}))
        play = tmp_path / "show.yml"
        play.write_text("- hosts: all\n  gather_facts: false\n  tasks:\n"
                        "    - ansible.builtin.debug:\n"
                        "        msg: \"{{ isobench_hosts[inventory_hostname].workdir ~ '/x' }}\"\n")
        inv = _local_inventory(tmp_path / "lab.ini")
        p = subprocess.run([str(mc.ansible_tool("ansible-playbook")), "-i", str(inv), str(play),
                            "-e", f"@{tmp_path / 'vars.json'}"], capture_output=True, text=True,
                           timeout=120, env={**mc.ansible_env(_env(tmp_path)),
                                             "ANSIBLE_STDOUT_CALLBACK": "default"})
        assert p.returncode == 0, p.stdout + p.stderr
        assert marker.exists() == runs, (marked, p.stdout)
        if marked:
            assert "lookup('pipe'" in p.stdout
