"""A campaign's hosts: finding Ansible, reading an inventory and refusing what
an inventory may not say (measure/campaign.py runs the campaign on them).

Nothing of the inventory but the host names and the four isobench_* host
variables is kept by isobench (check_hosts looks at the settings that could
turn off the host-key check or grant root, to refuse them): passwords and
key files stay with Ansible.  Every check reads the raw values, before
Ansible could template them (check_hosts).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from ..core import validate
from ..errors import UsageError

# Where `ansible-playbook` and `ansible-inventory` are looked for first (a
# folder); then beside this Python (a venv with the campaign extra), then PATH.
ENV_ANSIBLE_BIN = "ISOBENCH_ANSIBLE_BIN"
INSTALL_HINT = "install ansible-core (pip install 'isobench[campaign]', or `make build`)"

# The host variables isobench reads; nothing else of the inventory is read.
HOST_VARS = ("isobench_workdir", "isobench_cpus", "isobench_tune", "isobench_prebuilt")

INVENTORY_TIMEOUT = 120

# The callback whose JSON lines say what happened on each host
# (data/campaign/callback_plugins), loaded into every Ansible command.
CALLBACKS = Path(__file__).resolve().parents[1] / "data" / "campaign" / "callback_plugins"
CALLBACK = "isobench_events"


# ---- finding Ansible ----

def ansible_tool(name: str) -> Path:
    """The path of an Ansible command; UsageError naming what is missing."""
    env = os.environ.get(ENV_ANSIBLE_BIN)
    if env:
        path = Path(env) / name
        if path.is_file() and os.access(path, os.X_OK):
            return path
        raise UsageError(f"Ansible is missing: no {name} in {env} (${ENV_ANSIBLE_BIN}); "
                         f"{INSTALL_HINT}")
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which(name)
    if found:
        return Path(found)
    raise UsageError(f"Ansible is missing: no {name} beside {sys.executable} or on PATH; "
                     f"{INSTALL_HINT}")


def ansible_env(extra: Mapping[str, str] | None = None,
                insecure_host_keys: bool = False) -> dict[str, str]:
    """The environment of every Ansible command isobench starts.  Host keys
    are always checked (a mismatch is an error, never a prompt): every
    environment switch of the check is set on, unless --insecure-host-keys
    leaves them as the environment has them; and pipelining saves a file
    transfer per task."""
    env = dict(os.environ)
    if not insecure_host_keys:
        env.update({k: "True" for k in HOST_KEY_ENV})
        env.pop("ANSIBLE_PARAMIKO_HOST_KEY_AUTO_ADD", None)
    elif not any(k in env for k in HOST_KEY_ENV):
        env["ANSIBLE_HOST_KEY_CHECKING"] = "True"
    env.update({
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_PIPELINING": "True",
        "ANSIBLE_INVENTORY_UNPARSED_FAILED": "True",
        "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "True",
        # Inventories are data: no inventory script or plugin runs.
        "ANSIBLE_INVENTORY_ENABLED": "ini,yaml",
        "ANSIBLE_DEPRECATION_WARNINGS": "False",
        "ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS),
        "ANSIBLE_STDOUT_CALLBACK": CALLBACK,
        "ANSIBLE_LOAD_CALLBACK_PLUGINS": "True",
        "PYTHONUNBUFFERED": "1",
    })
    env.update(extra or {})
    return env


# ---- the inventory ----

@dataclass(frozen=True)
class Host:
    name: str
    workdir: str | None = None
    cpus: str | None = None
    tune: bool = False
    prebuilt: str | None = None

    def as_dict(self) -> dict:
        return {"workdir": self.workdir, "cpus": self.cpus, "tune": self.tune,
                "prebuilt": self.prebuilt}


# ---- what an inventory may not say ----
#
# Every check below reads the inventory's values as `ansible-inventory
# --list` prints them: raw, before Ansible templates anything (it never
# evaluates a `{{ ... }}` of a variable while listing, and only the ini and
# yaml inventory plugins are enabled, so no inventory script or plugin
# runs either).  A value that would become something else once templated
# is refused where isobench must know what it is.

TEMPLATE_MARKS = ("{{", "{%", "{#")

# Absolute work folders must lie below one of these (or a --workdir-root);
# below /home two levels at least (/home/USER/FOLDER): a home itself, like
# `~`, is refused.  `~/FOLDER` is always allowed.
WORKDIR_ROOTS = ("/home", "/root", "/scratch", "/srv", "/data", "/mnt", "/media", "/opt",
                 "/tmp", "/var/tmp", "/work", "/local", "/nfs", "/shared")
HOME_ROOTS = ("/home",)

# Host variables that turn the host-key check off, in any connection plugin.
HOST_KEY_VARS = ("ansible_host_key_checking", "ansible_ssh_host_key_checking",
                 "ansible_paramiko_host_key_checking")
HOST_KEY_ENV = ("ANSIBLE_HOST_KEY_CHECKING", "ANSIBLE_SSH_HOST_KEY_CHECKING",
                "ANSIBLE_PARAMIKO_HOST_KEY_CHECKING")
# Variables (and their environment twins) that hold ssh, scp or sftp options.
SSH_ARG_VARS = ("ansible_ssh_args", "ansible_ssh_common_args", "ansible_ssh_extra_args",
                "ansible_scp_extra_args", "ansible_sftp_extra_args")
SSH_ARG_ENV = ("ANSIBLE_SSH_ARGS", "ANSIBLE_SSH_COMMON_ARGS", "ANSIBLE_SSH_EXTRA_ARGS",
               "ANSIBLE_SCP_EXTRA_ARGS", "ANSIBLE_SFTP_EXTRA_ARGS")
# Host-level privilege: every task of the playbook as root.
BECOME_VARS = ("ansible_become", "ansible_sudo", "ansible_su")

# What `campaign init` writes: hosts that cannot be anyone's until edited.
PLACEHOLDER_PREFIX = "replace-me"
DOC_NETWORKS = tuple(ipaddress.ip_network(n) for n in (
    "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32"))  # RFC 5737, 3849
DOC_LABELS = ("example", "invalid")  # RFC 2606: example.com/.net/.org, .example, .invalid

FALSE_WORDS = ("false", "no", "off", "0", "n", "f")
TRUE_WORDS = ("true", "yes", "on", "1", "y", "t")


def _templated(v) -> bool:
    """Whether v (or anything inside it) holds Jinja that Ansible would evaluate."""
    if isinstance(v, str):
        return any(m in v for m in TEMPLATE_MARKS)
    if isinstance(v, Mapping):
        return any(_templated(k) or _templated(x) for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return any(_templated(x) for x in v)
    return False


def check_path(text: str, where: str, what: str, roots: Sequence[str] = ()) -> str:
    """A folder on a host isobench may write into (or run a checkout from):
    `~/X...`, or absolute and strictly below an allowed root; never `/`,
    `~`, a home itself, `.` or `..` anywhere.  UsageError naming it."""
    text = validate.remote_path(text, where, what)
    parts = text.rstrip("/").split("/") if text not in ("/", "~") else [text]
    if text in ("/", "~", "~/") or len(parts) < 2:
        raise UsageError(f"{where}: {what} {text!r} is the whole file system or the whole "
                         "home folder: name a folder below it (e.g. ~/isobench-campaign)")
    if any(p in ("", ".", "..") for p in parts[1:]):
        raise UsageError(f"{where}: {what} {text!r} has an empty, '.' or '..' component: "
                         "it must name its folder plainly")
    if parts[0] == "~":
        return text
    allowed = tuple(WORKDIR_ROOTS) + tuple(r.rstrip("/") for r in roots)
    for root in allowed:
        depth = len(root.split("/"))
        if parts[:depth] == root.split("/"):
            need = depth + (2 if root in HOME_ROOTS else 1)
            if len(parts) >= need:
                return text
    raise UsageError(f"{where}: {what} {text!r} is not below an allowed root ({', '.join(allowed)}"
                     ", below a user's own folder in /home; or ~/...): give --workdir-root DIR to "
                     "allow another")


# ssh's options that take an argument (the rest of the word, or the next word).
SSH_FLAGS_WITH_ARG = set("BbcDEeFIiJLlmOoPpQRSWw")


def _ssh_flag(text: str, flag: str) -> bool:
    """Whether the ssh command-line words in text give flag (clustered or not)."""
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    skip = False
    for w in words:
        if skip:
            skip = False
            continue
        if not w.startswith("-") or w.startswith("--") or w == "-":
            continue
        for i, ch in enumerate(w[1:], 1):
            if ch == flag:
                return True
            if ch in SSH_FLAGS_WITH_ARG:
                skip = i == len(w) - 1  # its argument is the next word
                break
    return False


def ssh_args_problem(text: str) -> str | None:
    """What in ssh options weakens the host-key check, or None."""
    low = text.lower()
    for m in re.finditer(r"stricthostkeychecking\s*(?:=|\s)\s*[\"']?([a-z0-9-]*)", low):
        if m.group(1) not in ("yes", "true"):  # ssh reads true as yes
            return f"StrictHostKeyChecking={m.group(1) or '?'}"
    if "stricthostkeychecking" in low and not re.search(r"stricthostkeychecking\s*(?:=|\s)", low):
        return "StrictHostKeyChecking"
    for m in re.finditer(r"(user|global)knownhostsfile\s*(?:=|\s)\s*[\"']?([^\s\"']*)", low):
        if m.group(2) in ("/dev/null", "none", ""):
            return f"{m.group(1).capitalize()}KnownHostsFile={m.group(2) or '(empty)'}"
    if "knownhostscommand" in low:
        return "KnownHostsCommand (keys from a command instead of known_hosts)"
    if _ssh_flag(text, "F"):
        return "-F (another ssh configuration, whose host-key settings isobench cannot see)"
    return None


def host_key_problems(name: str, hv: Mapping) -> list[str]:
    """Each per-host setting that turns the host-key check off, as
    'VARIABLE=VALUE (why)'."""
    out = []
    for k in HOST_KEY_VARS:
        if k in hv:
            v = hv[k]
            if _templated(v) or not (isinstance(v, bool) or str(v).strip().lower() in
                                     TRUE_WORDS + FALSE_WORDS):
                out.append(f"{k}={v!r} (not plainly true)")
            elif v is False or str(v).strip().lower() in FALSE_WORDS:
                out.append(f"{k}={v}")
    for k in SSH_ARG_VARS:
        if k in hv:
            v = hv[k]
            if _templated(v):
                out.append(f"{k} is templated (isobench cannot see what it becomes)")
                continue
            why = ssh_args_problem(v if isinstance(v, str) else json.dumps(v))
            if why:
                out.append(f"{k} sets {why}")
    return out


def environment_key_problems(env: Mapping[str, str]) -> list[str]:
    """The same for the controller's environment."""
    out = []
    for k in HOST_KEY_ENV:
        v = env.get(k)
        if v is not None and v.strip().lower() not in TRUE_WORDS:
            out.append(f"{k}={v} in the environment")
    v = env.get("ANSIBLE_PARAMIKO_HOST_KEY_AUTO_ADD")
    if v is not None and v.strip().lower() not in FALSE_WORDS:
        out.append(f"ANSIBLE_PARAMIKO_HOST_KEY_AUTO_ADD={v} in the environment (unknown keys "
                   "accepted)")
    for k in SSH_ARG_ENV:
        why = ssh_args_problem(env.get(k) or "")
        if why:
            out.append(f"{k} in the environment sets {why}")
    return out


def ansible_config_file(env: Mapping[str, str], cwd: Path | None = None) -> Path | None:
    """The ansible.cfg Ansible reads, found as Ansible finds it: $ANSIBLE_CONFIG,
    ./ansible.cfg (unless the folder is world-writable), ~/.ansible.cfg,
    /etc/ansible/ansible.cfg."""
    cwd = Path.cwd() if cwd is None else cwd
    found = []
    if env.get("ANSIBLE_CONFIG"):
        p = Path(os.path.expanduser(env["ANSIBLE_CONFIG"]))
        found.append(p / "ansible.cfg" if p.is_dir() else p)
    try:
        if not cwd.stat().st_mode & 0o002:
            found.append(cwd / "ansible.cfg")
    except OSError:
        pass
    found += [Path(os.path.expanduser("~/.ansible.cfg")), Path("/etc/ansible/ansible.cfg")]
    return next((p for p in found if p.is_file()), None)


def config_key_problems(env: Mapping[str, str], cwd: Path | None = None) -> list[str]:
    """The same for the ansible.cfg Ansible would read (host_key_checking is
    forced on through the environment; the ssh options are not)."""
    import configparser
    f = ansible_config_file(env, cwd)
    if f is None:
        return []
    cfg = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        cfg.read(f)
    except (configparser.Error, OSError, UnicodeDecodeError) as e:
        return [f"{f} cannot be read to check it ({str(e).splitlines()[0]})"]
    out = []
    for key in ("ssh_args", "ssh_common_args", "ssh_extra_args", "scp_extra_args",
                "sftp_extra_args"):
        why = ssh_args_problem(cfg.get("ssh_connection", key, fallback=""))
        if why:
            out.append(f"{key} in {f} sets {why}")
    for section, key, good in (("defaults", "host_key_checking", TRUE_WORDS),
                               ("ssh_connection", "host_key_checking", TRUE_WORDS),
                               ("paramiko_connection", "host_key_checking", TRUE_WORDS),
                               ("paramiko_connection", "host_key_auto_add", FALSE_WORDS)):
        v = cfg.get(section, key, fallback=None)
        if v is not None and v.strip().lower() not in good:
            out.append(f"[{section}] {key}={v} in {f}")
    return out


def placeholder_problem(name: str, hv: Mapping) -> str | None:
    """Why a host is one of `campaign init`'s placeholders (or names a
    documentation address), or None."""
    if name.lower().startswith(PLACEHOLDER_PREFIX):
        return (f"is a placeholder of `campaign init` ({PLACEHOLDER_PREFIX}-*): replace it "
                "with a host of yours")
    addr = hv.get("ansible_host", name)
    if not isinstance(addr, str) or _templated(addr):
        return None
    text = addr.strip().strip("[]")
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        labels = text.lower().rstrip(".").split(".")
        if any(l in DOC_LABELS for l in labels[-2:]):
            return (f"has address {addr} (a name reserved for documentation): replace it with "
                    "the host's own")
        return None
    if any(ip in n for n in DOC_NETWORKS if n.version == ip.version):
        return (f"has address {addr} (a documentation address range, no real host): replace "
                "it with the host's own")
    return None


def _bool_var(v, where: str, what: str = "isobench_tune") -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, (str, int)) and str(v).strip().lower() in TRUE_WORDS + FALSE_WORDS:
        return str(v).strip().lower() in TRUE_WORDS
    raise UsageError(f"{where}: {what} {v!r} is not true or false")


@dataclass
class Inventory:
    """What isobench read of an inventory: its hosts, and the warnings a
    campaign over it records (host keys not checked, when allowed)."""
    hosts: list[Host]
    warnings: list[str] = field(default_factory=list)


def check_hosts(hostvars: Mapping[str, Mapping], names: Sequence[str], inventory: Path, *,
                insecure_host_keys: bool = False, roots: Sequence[str] = (),
                env: Mapping[str, str] | None = None) -> Inventory:
    """Every rule above over the raw host variables; the hosts, or a
    UsageError of one line naming the host and the variable."""
    env = os.environ if env is None else env
    hosts, warnings = [], []
    for name in names:
        hv = hostvars.get(name) or {}
        where = f"inventory {inventory}: host {name}"
        validate.host_name(name, f"inventory {inventory}")
        for k in sorted(hv):
            if isinstance(k, str) and k.startswith("isobench_") and _templated(hv[k]):
                raise UsageError(f"{where}: {k} holds a template ('{{{{', '{{%' or '{{#'): "
                                 "isobench variables must be plain values")
        why = placeholder_problem(name, hv)
        if why:
            raise UsageError(f"{where} {why}")
        for k in BECOME_VARS:
            if k in hv and (_templated(hv[k]) or _bool_var(hv[k], where, k)):
                raise UsageError(
                    f"{where}: {k}={hv[k]} runs every task as root (copying, `make build`, "
                    "isobench run); isobench elevates only `system tune` and `system reset`: "
                    f"remove {k} (keep ansible_become_password or sudo rights for those two)")
        keys = host_key_problems(name, hv)
        if keys and not insecure_host_keys:
            raise UsageError(f"{where}: {keys[0]}, which turns off the host-key check: remove "
                             "it, or give --insecure-host-keys to run without it")
        warnings += [f"host {name}: host key not checked ({k})" for k in keys]
        hosts.append(_host(name, hv, where, roots))
    env_keys = environment_key_problems(env) + config_key_problems(env)
    if env_keys and not insecure_host_keys:
        raise UsageError(f"{env_keys[0]}, which turns off the host-key check: unset it, or "
                         "give --insecure-host-keys to run without it")
    warnings += [f"host key not checked ({k})" for k in env_keys]
    return Inventory(hosts, warnings)


def _host(name: str, hv: Mapping, where: str, roots: Sequence[str] = ()) -> Host:
    for k in ("isobench_workdir", "isobench_prebuilt", "isobench_cpus"):
        if k in hv and not isinstance(hv[k], (str, int)):
            raise UsageError(f"{where}: {k} is not a string")
    workdir = hv.get("isobench_workdir")
    prebuilt = hv.get("isobench_prebuilt")
    cpus = hv.get("isobench_cpus")
    return Host(
        name=name,
        workdir=check_path(str(workdir), where, "isobench_workdir", roots) if workdir else None,
        cpus=validate.cpu_list(str(cpus), where) if cpus is not None else None,
        tune=_bool_var(hv.get("isobench_tune", False), where),
        prebuilt=(check_path(str(prebuilt), where, "isobench_prebuilt", roots)
                  if prebuilt else None))


def first_error(text: str) -> str:
    """The line of Ansible's stderr that says what is wrong, with the place
    in the file where Ansible names one."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    where = next((l[len("Origin:"):].strip() for l in lines if l.startswith("Origin:")), None)
    for l in lines:
        if "ERROR" in l or "Failed to parse" in l or "Unable to parse" in l:
            msg = re.sub(r"^\[(ERROR|WARNING)\]:\s*", "", l)
            return msg + (f" (at {where})" if where and ":" in where else "")
    return lines[-1] if lines else "no reason given"


def list_inventory(path: Path) -> tuple[dict, list[str]]:
    """(the raw host variables, the host names in order) of an Ansible
    inventory (INI or YAML), parsed by Ansible itself (`ansible-inventory
    --list`, which templates nothing); UsageError naming the file when it
    does not parse or names no host."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"inventory {path}: no such file")
    if not (path.is_file() or path.is_dir()):
        # A FIFO would block ansible-inventory for ever.
        raise UsageError(f"inventory {path} is neither a regular file nor a folder of them")
    tool = ansible_tool("ansible-inventory")
    try:
        p = subprocess.run([str(tool), "-i", str(path), "--list"], capture_output=True,
                           text=True, env=ansible_env(), timeout=INVENTORY_TIMEOUT,
                           stdin=subprocess.DEVNULL, start_new_session=True)
    except subprocess.TimeoutExpired:
        raise UsageError(f"inventory {path}: ansible-inventory did not answer in "
                         f"{INVENTORY_TIMEOUT} s") from None
    if p.returncode != 0:
        raise UsageError(f"inventory {path} does not parse: {first_error(p.stderr)}")
    try:
        listing = json.loads(p.stdout)
    except ValueError:
        raise UsageError(f"inventory {path}: ansible-inventory printed no listing "
                         f"({first_error(p.stderr)})") from None
    hostvars = (listing.get("_meta") or {}).get("hostvars") or {}
    names: list[str] = []

    def walk(group: str, seen: set) -> None:
        if group in seen:
            return
        seen.add(group)
        g = listing.get(group) or {}
        names.extend(h for h in g.get("hosts", []) if h not in names)
        for child in g.get("children", []):
            walk(child, seen)

    walk("all", set())
    names += [h for h in hostvars if h not in names]
    if not names:
        raise UsageError(f"inventory {path} names no hosts")
    return hostvars, names


def load_inventory(path: Path, *, insecure_host_keys: bool = False,
                   roots: Sequence[str] = ()) -> Inventory:
    """The hosts of an inventory, every rule of check_hosts applied to the
    raw values before anything could template them."""
    hostvars, names = list_inventory(path)
    return check_hosts(hostvars, names, Path(path), insecure_host_keys=insecure_host_keys,
                       roots=roots)
