"""`isobench campaign run`: the same benchmarks on many hosts through Ansible,
merged into one store.

Ansible does the work on the hosts: the playbooks in isobench/data/campaign/
connect (preflight.yml: a raw `true`, which needs nothing on the host but a
shell, so a host key that does not match stops the campaign before anything
runs anywhere), then copy the source, set up with the README's own `make
build`, run `isobench run`, export the run and fetch the export
(campaign.yml: in parallel across hosts, serially on each).  This module
prepares what the playbooks need, starts `ansible-playbook`, reads what
happened to each host from the JSON lines of the isobench_events callback
(data/campaign/callback_plugins), and imports every fetched export into the
store, tagged with the host and the campaign id (store/interchange.py
import_into: the run's origin gets {"campaign": ID, "host": NAME, ...}).

A campaign lives in a folder beside the store, `<store folder>/campaigns/ID/`:

    state.json      the selection and, per host, pending, done or failed
                    with the stage and the reason
    events.jsonl    every task outcome on every host (what failed and why)
    fetched/HOST/export.json    each host's export, as fetched
    source-SHA.tar.gz           the source copied to the hosts (unless every
                                host names a prebuilt checkout)

Running the same campaign again (the same inventory and selection, or
`--id ID`) resumes it: hosts already done are left alone, the others are
tried again; a host whose export exists on it from an earlier attempt is
fetched, not measured again.

Nothing of the inventory but the host names and the four isobench_* host
variables is kept by isobench (check_hosts looks at the settings that could
turn off the host-key check or grant root, to refuse them): passwords and
key files stay with Ansible, and neither the state, the events nor the
store hold them.  Every check reads the raw values, before Ansible could
template them (check_hosts).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from . import proc
from ..core import validate
from ..errors import UsageError

DATA = Path(__file__).resolve().parents[1] / "data" / "campaign"
PLAYBOOK = DATA / "campaign.yml"
PREFLIGHT = DATA / "preflight.yml"
CALLBACKS = DATA / "callback_plugins"
CALLBACK = "isobench_events"

# Where `ansible-playbook` and `ansible-inventory` are looked for first (a
# folder); then beside this Python (a venv with the campaign extra), then PATH.
ENV_ANSIBLE_BIN = "ISOBENCH_ANSIBLE_BIN"
INSTALL_HINT = "install ansible-core (pip install 'isobench[campaign]', or `make build`)"

# The host variables isobench reads; nothing else of the inventory is read.
HOST_VARS = ("isobench_workdir", "isobench_cpus", "isobench_tune", "isobench_prebuilt")

PENDING, DONE, FAILED = "pending", "done", "failed"
STATE_VERSION = 1

# A whole campaign's ansible-playbook may run this long per host at most,
# on top of each host's own measuring time-out; beyond, it is stopped and
# the hosts not done are failed ("time-out").
DEFAULT_HOST_TIMEOUT = 6 * 3600
# Connecting, copying and building on top of measuring.
SETUP_ALLOWANCE = 3600
PREFLIGHT_TIMEOUT = 300
INVENTORY_TIMEOUT = 120

# Folders of a checkout that are never copied to a host: built on it instead.
NOT_COPIED = (".git", ".venv", "build", "build-san", "build-arm64", "results")

# ssh's messages when the host key is not the one known_hosts holds.
KEY_CHANGED = "REMOTE HOST IDENTIFICATION HAS CHANGED"
KEY_FAILED = "Host key verification failed"


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


def _first_error(text: str) -> str:
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
        raise UsageError(f"inventory {path} does not parse: {_first_error(p.stderr)}")
    try:
        listing = json.loads(p.stdout)
    except ValueError:
        raise UsageError(f"inventory {path}: ansible-inventory printed no listing "
                         f"({_first_error(p.stderr)})") from None
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


# ---- the selection ----

@dataclass(frozen=True)
class Selection:
    benchmarks: tuple[str, ...]
    mechanisms: tuple[str, ...]
    quick: bool
    repeat: int | None

    def run_args(self) -> list[str]:
        """The arguments of `isobench run` on every host."""
        out = list(self.benchmarks)
        if self.mechanisms:
            out += ["-m", ",".join(self.mechanisms)]
        if self.quick:
            out.append("--quick")
        if self.repeat is not None:
            out += ["--repeat", str(self.repeat)]
        return out

    def as_dict(self) -> dict:
        return {"benchmarks": list(self.benchmarks), "mechanisms": list(self.mechanisms),
                "quick": self.quick, "repeat": self.repeat}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Selection":
        return cls(tuple(d.get("benchmarks") or ()), tuple(d.get("mechanisms") or ()),
                   bool(d.get("quick")), d.get("repeat"))


# ---- the campaign's state ----

@dataclass
class Campaign:
    id: str
    folder: Path
    inventory: str
    selection: Selection
    created: str
    hosts: dict[str, dict] = field(default_factory=dict)
    source: dict | None = None
    # What the campaign ran without (host keys not checked, under
    # --insecure-host-keys), with when it was first allowed.
    warnings: list[dict] = field(default_factory=list)

    def warn(self, texts: Iterable[str]) -> None:
        known = {w["warning"] for w in self.warnings}
        self.warnings += [{"warning": t, "since": _now()} for t in texts if t not in known]

    @property
    def state_file(self) -> Path:
        return self.folder / "state.json"

    @property
    def fetched(self) -> Path:
        return self.folder / "fetched"

    @property
    def events_file(self) -> Path:
        return self.folder / "events.jsonl"

    def left(self) -> list[str]:
        return [h for h, s in self.hosts.items() if s["status"] != DONE]

    def as_dict(self) -> dict:
        return {"state_version": STATE_VERSION, "id": self.id, "inventory": self.inventory,
                "selection": self.selection.as_dict(), "created": self.created,
                "source": self.source, "hosts": self.hosts, "warnings": self.warnings}

    def save(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".json.part")
        tmp.write_text(json.dumps(self.as_dict(), indent=1) + "\n")
        tmp.replace(self.state_file)


def campaigns_folder(db: Path) -> Path:
    return Path(db).parent / "campaigns"


def load_state(folder: Path) -> Campaign | None:
    """The campaign whose state is in folder; None when there is none.  A
    state file that cannot be read is a UsageError naming it."""
    f = folder / "state.json"
    if not f.is_file():
        return None
    try:
        d = json.loads(f.read_text())
        if not isinstance(d, dict) or d.get("state_version") != STATE_VERSION:
            raise ValueError("not a campaign state of this isobench")
        hosts = d["hosts"]
        if not isinstance(hosts, dict) or not all(isinstance(v, dict) and "status" in v
                                                  for v in hosts.values()):
            raise ValueError("'hosts' is damaged")
        return Campaign(id=str(d["id"]), folder=folder, inventory=str(d["inventory"]),
                        selection=Selection.from_dict(d["selection"]),
                        created=str(d["created"]), hosts=hosts, source=d.get("source"),
                        warnings=list(d.get("warnings") or []))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"campaign state {f} cannot be read: {e}") from None


def new_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + os.urandom(2).hex()


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def find_or_begin(db: Path, inventory: Path, hosts: Sequence[Host], selection: Selection,
                  asked_id: str | None, new: bool) -> tuple[Campaign, bool]:
    """(the campaign, whether it resumes one begun earlier).  Without --id, the
    newest unfinished campaign of the same inventory and selection resumes;
    --new always begins another."""
    root = campaigns_folder(db)
    inv = str(Path(inventory).resolve())
    if asked_id:
        c = load_state(root / asked_id)
        if c is not None:
            if c.selection != selection:
                raise UsageError(
                    f"campaign {asked_id} was begun with `{' '.join(c.selection.run_args())}`; "
                    "a resumed campaign keeps its selection (leave --id out, or use another id)")
            _add_hosts(c, hosts)
            return c, True
    elif not new and root.is_dir():
        candidates = []
        for folder in root.iterdir():
            try:
                c = load_state(folder)
            except UsageError:
                continue  # someone else's damaged folder is no reason to stop
            if c and c.inventory == inv and c.selection == selection and c.left():
                candidates.append(c)
        if candidates:
            c = max(candidates, key=lambda c: (c.created, c.id))
            _add_hosts(c, hosts)
            return c, True
    cid = asked_id or new_id()
    c = Campaign(id=cid, folder=root / cid, inventory=inv, selection=selection, created=_now())
    _add_hosts(c, hosts)
    return c, False


def _add_hosts(c: Campaign, hosts: Sequence[Host]) -> None:
    for h in hosts:
        c.hosts.setdefault(h.name, {"status": PENDING, "stage": None, "reason": None,
                                    "attempts": 0, "run_id": None, "uid": None,
                                    "finished": None})


# ---- the source copied to hosts ----

def source_files(src: Path) -> list[str]:
    """The files of a checkout a host needs to build it: what git tracks and
    what it does not ignore, or, outside git, every file but the build
    outputs."""
    try:
        p = subprocess.run(["git", "-C", str(src), "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard"], capture_output=True, timeout=120,
                           stdin=subprocess.DEVNULL)
        if p.returncode == 0 and p.stdout:
            return sorted(n for n in p.stdout.decode().split("\0")
                          if n and (src / n).is_file())
    except (OSError, subprocess.TimeoutExpired):
        pass
    out = []
    for dirpath, dirnames, filenames in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        if rel == Path("."):
            dirnames[:] = [d for d in dirnames if d not in NOT_COPIED]
        dirnames[:] = [d for d in dirnames if d != "__pycache__" and not d.endswith(".egg-info")]
        out += [str(rel / f) if rel != Path(".") else f for f in filenames]
    return sorted(out)


def check_source(src: Path) -> Path:
    """src, when it is a checkout the hosts can build; else UsageError."""
    src = Path(src)
    if not (src / "Makefile").is_file() or not (src / "meson.build").is_file():
        raise UsageError(f"{src} is not an isobench checkout (no Makefile and meson.build): "
                         "give --source DIR")
    return src


def make_bundle(src: Path, folder: Path) -> tuple[Path, str]:
    """A gzip'd tar of the checkout at src in folder; (its path, an id from
    its content).  The id names the folder it is unpacked into on each host,
    so a host that has it already does not unpack it again."""
    src = check_source(src)
    files = source_files(src)
    digest = hashlib.sha256()
    for name in files:
        digest.update(name.encode() + b"\0")
        with open(src / name, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    sid = digest.hexdigest()[:16]
    path = folder / f"source-{sid}.tar.gz"
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".part")
        with tarfile.open(tmp, "w:gz") as tar:
            for name in files:
                tar.add(src / name, arcname=name, recursive=False)
        tmp.replace(path)
    return path, sid


# ---- running Ansible ----

@dataclass
class HostOutcome:
    status: str                 # done, failed
    stage: str | None
    reason: str | None
    fetched: Path | None = None


def _stage(task: str) -> str:
    head, sep, _ = task.partition(":")
    return head.strip() if sep else "ansible"


def _reason(e: Mapping) -> str:
    parts = []
    if e.get("rc") not in (None, 0):
        parts.append(f"exit status {e['rc']}")
    msg = (e.get("msg") or "").strip()
    stderr = (e.get("stderr") or "").strip()
    # ansible-core 2.19 opens every message with "Task failed: ".
    msg = re.sub(r"^Task failed:\s*", "", msg).rstrip(":").strip()
    if msg and msg != "non-zero return code":
        parts.append(" ".join(msg.split()))
    if stderr:
        tail = [l for l in stderr.splitlines() if l.strip()][-1]
        parts.append(" ".join(tail.split()))
    what = "unreachable" if e.get("outcome") == "unreachable" else "failed"
    return f"{what} at '{e['task']}': " + ("; ".join(parts) or "no reason given")


def key_problem(e: Mapping) -> str | None:
    """What is wrong with the host key, when an event says ssh refused it."""
    text = f"{e.get('msg') or ''}\n{e.get('stderr') or ''}"
    if KEY_CHANGED in text:
        return "its host key does not match the one in known_hosts (REMOTE HOST " \
               "IDENTIFICATION HAS CHANGED)"
    if KEY_FAILED in text:
        return "its host key could not be verified (not in known_hosts, or another key)"
    return None


@dataclass
class PlaybookRun:
    events: list[dict]
    exit: proc.ChildExit | None
    error: str | None = None


def run_playbook(playbook: Path, inventory: Path, hosts: Sequence[str], *,
                 extra_vars: Path | None, timeout: float, events_file: Path | None,
                 on_event: Callable[[dict], None] | None = None,
                 insecure_host_keys: bool = False) -> PlaybookRun:
    """ansible-playbook over hosts (a --limit), every event read as it comes.

    The ssh connections Ansible keeps open for a while after its last task
    (ControlPersist) leave its process group; they are children of this
    process (a child subreaper), which ends them when the playbook ends."""
    tool = ansible_tool("ansible-playbook")
    control = tempfile.mkdtemp(prefix="isob-cp-")  # short: a socket path has 108 bytes
    argv = [str(tool), "-i", str(inventory), str(playbook), "--limit", ",".join(hosts),
            "--forks", str(max(1, min(len(hosts), 64)))]
    if extra_vars is not None:
        argv += ["-e", f"@{extra_vars}"]
    env = ansible_env({"ANSIBLE_SSH_CONTROL_PATH_DIR": control,
                       "ANSIBLE_LOCAL_TEMP": os.path.join(control, "tmp")},
                      insecure_host_keys=insecure_host_keys)
    events: list[dict] = []
    log = open(events_file, "a") if events_file is not None else None

    def line(text: str) -> None:
        try:
            e = json.loads(text)
        except ValueError:
            return  # a warning Ansible printed on stdout: not an event
        if not isinstance(e, dict) or e.get("event") not in ("task", "stats"):
            return
        events.append(e)
        if log is not None:
            log.write(json.dumps(e) + "\n")
            log.flush()
        if on_event is not None:
            on_event(e)

    proc.adopt_orphans()
    try:
        try:
            exit_ = proc.run_lines(argv, timeout=timeout, on_line=line, env=env)
        except OSError as e:
            return PlaybookRun(events, None, f"cannot start {tool}: {e.strerror or e}")
        return PlaybookRun(events, exit_)
    finally:
        proc.kill_descendants()
        if log is not None:
            log.close()
        shutil.rmtree(control, ignore_errors=True)


def outcomes(run: PlaybookRun, hosts: Sequence[str], final_task: str | None) -> dict[str, HostOutcome]:
    """What happened to each host: done when final_task succeeded on it,
    else failed with the first failure (or what stopped Ansible)."""
    out: dict[str, HostOutcome] = {}
    for e in run.events:
        if e.get("event") != "task" or e.get("host") not in hosts:
            continue
        h = e["host"]
        if h in out and out[h].status == FAILED:
            continue
        if e["outcome"] in ("failed", "unreachable"):
            out[h] = HostOutcome(FAILED, _stage(e["task"]), _reason(e))
        elif e["outcome"] == "ok" and (final_task is None or e["task"] == final_task):
            out[h] = HostOutcome(DONE, _stage(e["task"]), None)
    why = run.error
    if why is None and run.exit is not None:
        if run.exit.timed_out:
            why = "time-out: ansible-playbook was stopped before this host finished"
        elif run.exit.returncode != 0 and not run.events:
            why = f"ansible-playbook failed (exit status {run.exit.returncode}): " \
                  f"{_first_error(run.exit.stderr)}"
        else:
            why = (f"ansible-playbook ended (exit status {run.exit.returncode}) before this "
                   "host finished")
    for h in hosts:
        if h not in out:
            out[h] = HostOutcome(FAILED, "ansible", why or "no outcome reported")
    return out


FINAL_TASK = "fetch: bring the export back"
PREFLIGHT_TASK = "connect: reach the host over SSH"


DEFAULT_WORKDIR = "~/isobench-campaign"


def unsafe(v: str | None) -> dict | None:
    """v as a string Ansible never templates (its JSON form of !unsafe):
    a second guard, after check_hosts, on what came from the inventory."""
    return None if v is None else {"__ansible_unsafe": v}


def extra_vars(c: Campaign, bundle: Path | None, bundle_id: str | None,
               host_timeout: int, hosts: Sequence[Host] = ()) -> dict:
    """The campaign's variables for the playbook (no host's secrets among them).
    isobench_hosts holds each host's isobench_* values as check_hosts
    accepted them, marked never to be templated: the playbook reads those,
    never the inventory's own, so what runs is what was checked."""
    return {"isobench_campaign": c.id, "isobench_run_args": c.selection.run_args(),
            "isobench_hosts": {h.name: {"workdir": unsafe(h.workdir or DEFAULT_WORKDIR),
                                        "cpus": unsafe(h.cpus), "tune": h.tune,
                                        "prebuilt": unsafe(h.prebuilt)} for h in hosts},
            "isobench_fetch_dir": str(c.fetched.resolve()),
            "isobench_bundle": str(bundle.resolve()) if bundle else "",
            "isobench_bundle_id": bundle_id or "prebuilt",
            "isobench_run_timeout": int(host_timeout)}


def host_tags(c: Campaign, host: str) -> dict:
    """What an imported run's origin says of where it came from."""
    return {"campaign": c.id, "host": host,
            "campaign_source": c.hosts.get(host, {}).get("source")}


def event_line(c: Campaign, e: Mapping) -> str | None:
    """A progress line for an event worth a line: a task done, or a failure."""
    if e.get("event") != "task" or e.get("outcome") == "skipped":
        return None
    if e["outcome"] in ("failed", "unreachable"):
        return f"campaign {c.id}: {e['host']}: {_reason(e)}"
    return f"campaign {c.id}: {e['host']}: {e['task']}"


def failed_hosts_line(problems: Iterable[tuple[str, str]]) -> str:
    return "; ".join(f"host {h}: {why}" for h, why in problems)


# ---- one attempt at the hosts left ----

Importer = Callable[[str, Path], tuple[int, str]]  # (host, export) -> (run id, uid)


def execute(c: Campaign, inventory: Path, hosts: Sequence[Host], *, source: Path,
            host_timeout: int, say: Callable[[str], None], resumed: bool,
            import_export: Importer, insecure_host_keys: bool = False) -> None:
    """Run the campaign on every host of hosts not done yet; c records each
    outcome (and is saved after every change).  UsageError when a host key
    does not match: then nothing has been run anywhere, and nothing but that
    one line was said."""
    by_name = {h.name: h for h in hosts}
    todo = [h.name for h in hosts if c.hosts[h.name]["status"] != DONE]
    begin = (f"campaign {c.id}: {'resuming' if resumed else 'begun'}; {len(todo)} of "
             f"{len(hosts)} host(s) to do" + (f": {', '.join(todo)}" if todo else
                                              ": nothing left to do"))
    if not todo:
        say(begin)
        return
    for h in todo:
        c.hosts[h]["attempts"] += 1
    c.save()

    def show(e: dict) -> None:
        text = event_line(c, e)
        if text:
            say(text)

    pre = run_playbook(PREFLIGHT, inventory, todo, extra_vars=None, timeout=PREFLIGHT_TIMEOUT,
                       events_file=c.events_file, insecure_host_keys=insecure_host_keys)
    keys = [(e["host"], key_problem(e)) for e in pre.events
            if e.get("event") == "task" and e.get("outcome") == "unreachable" and key_problem(e)]
    pre_out = outcomes(pre, todo, PREFLIGHT_TASK)
    if keys:
        for h, why in keys:
            _set(c, h, HostOutcome(FAILED, "connect", why))
        c.save()
        raise UsageError(f"{failed_hosts_line(keys)}: nothing was run on any host (check that "
                         "host's known_hosts entry)")
    say(begin)
    reachable = []
    for h in todo:
        if pre_out[h].status == DONE:
            reachable.append(h)
        else:
            _set(c, h, pre_out[h])
            say(f"campaign {c.id}: {h}: {pre_out[h].reason}")
    c.save()
    if not reachable:
        return

    bundle = sid = None
    if any(by_name[h].prebuilt is None for h in reachable):
        bundle, sid = make_bundle(source, c.folder)
    c.source = {"id": sid} if sid else {"id": None}
    for h in reachable:
        c.hosts[h]["source"] = (f"prebuilt {by_name[h].prebuilt}" if by_name[h].prebuilt
                                else f"source {sid}")
    vars_file = c.folder / "vars.json"
    vars_file.write_text(json.dumps(extra_vars(c, bundle, sid, host_timeout,
                                                     [by_name[h] for h in reachable]), indent=1) + "\n")
    c.save()
    main = run_playbook(PLAYBOOK, inventory, reachable, extra_vars=vars_file,
                        timeout=host_timeout + SETUP_ALLOWANCE, events_file=c.events_file,
                        on_event=show, insecure_host_keys=insecure_host_keys)
    for h, o in outcomes(main, reachable, FINAL_TASK).items():
        if o.status == DONE:
            export = c.fetched / h / "export.json"
            try:
                run_id, uid = import_export(h, export)
            except UsageError as e:
                o = HostOutcome(FAILED, "import", f"the fetched export cannot be imported: {e}")
            else:
                c.hosts[h]["run_id"], c.hosts[h]["uid"] = run_id, uid
        _set(c, h, o)
        c.save()


def _set(c: Campaign, host: str, o: HostOutcome) -> None:
    s = c.hosts[host]
    s["status"], s["stage"], s["reason"] = o.status, o.stage, o.reason
    s["finished"] = _now()


def summary_lines(c: Campaign) -> list[str]:
    """One line per host: done with its run, or failed with the stage and why."""
    out = []
    for h, s in c.hosts.items():
        if s["status"] == DONE:
            out.append(f"  {h}: done (run {s['run_id']} in the store)")
        elif s["status"] == FAILED:
            out.append(f"  {h}: FAILED in {s['stage']}: {s['reason']}")
        else:
            out.append(f"  {h}: not run")
    return out


# ---- the example inventory ----

EXAMPLE_INI = """\
# An isobench campaign inventory (Ansible INI format): one line per host.
# `isobench campaign run THIS_FILE switch -m direct -m mpk --quick` runs the
# benchmarks on every host (in parallel across hosts, one benchmark at a time
# on each) and merges the results into one store; see docs/campaigns.md.
#
# THIS FILE DOES NOT RUN AS WRITTEN: its hosts are placeholders (names
# replace-me-*, addresses of the documentation ranges 192.0.2.0/24 and
# 2001:db8::/32), and `campaign run` refuses them.  Replace each with a
# machine of yours: a name for its column in the tables, its ansible_host.
#
# Connection variables are Ansible's own (ansible_host, ansible_user,
# ansible_port, ansible_ssh_private_key_file, ...).  They stay with Ansible:
# isobench reads only the host names and the isobench_* variables below
# (plain values: a {{ template }} in them is refused).
# Host keys are always checked: add every host to ~/.ssh/known_hosts first
# (ssh-keyscan HOST >> ~/.ssh/known_hosts, after checking the fingerprint).
# Settings that turn the check off (ansible_host_key_checking=false,
# StrictHostKeyChecking=no in ansible_ssh_*_args) are refused.
#
# isobench_workdir   folder on the host for the source, the build and the
#                    results (default ~/isobench-campaign; ~/... or below
#                    /home/USER, /scratch, /srv, /data, /tmp, ...)
# isobench_cpus      CPUs the benchmarks may use there (taskset -c), e.g. 2-3
# isobench_tune      true: `isobench system tune` before and `system reset`
#                    after measuring, and only these two run as root (sudo):
#                    give the sudo password as ansible_become_password (best
#                    from a vault) or allow them without one.  Never set
#                    ansible_become=true for a host: every task (the build,
#                    isobench run) would run as root, and it is refused.
# isobench_prebuilt  a checkout already built on the host (its build/isob and
#                    .venv are used, nothing is copied or built); for hosts
#                    that share the controller's file system, and for tests

[lab]
replace-me-skylake   ansible_host=192.0.2.10 isobench_cpus=2-3 isobench_tune=true
replace-me-icelake   ansible_host=192.0.2.11 isobench_cpus=4-7 isobench_workdir=/scratch/isobench
replace-me-graviton  ansible_host=2001:db8::12 isobench_tune=false

[lab:vars]
ansible_user=bench
"""

EXAMPLE_YAML = """\
# An isobench campaign inventory (Ansible YAML format): one entry per host.
# `isobench campaign run THIS_FILE switch -m direct -m mpk --quick` runs the
# benchmarks on every host (in parallel across hosts, one benchmark at a time
# on each) and merges the results into one store; see docs/campaigns.md.
#
# THIS FILE DOES NOT RUN AS WRITTEN: its hosts are placeholders (names
# replace-me-*, addresses of the documentation ranges 192.0.2.0/24 and
# 2001:db8::/32), and `campaign run` refuses them.  Replace each with a
# machine of yours: a name for its column in the tables, its ansible_host.
#
# Connection variables are Ansible's own (ansible_host, ansible_user,
# ansible_port, ansible_ssh_private_key_file, ...).  They stay with Ansible:
# isobench reads only the host names and the isobench_* variables below
# (plain values: a {{ template }} in them is refused).
# Host keys are always checked: add every host to ~/.ssh/known_hosts first.
# Settings that turn the check off are refused.
#
# isobench_workdir   folder on the host (default ~/isobench-campaign)
# isobench_cpus      CPUs the benchmarks may use there (taskset -c), e.g. 2-3
# isobench_tune      true: `isobench system tune` before, `system reset` after;
#                    only these two run as root (sudo: ansible_become_password,
#                    best from a vault, or sudo without one).  Never set
#                    ansible_become: true for a host (every task would run as
#                    root): it is refused.
# isobench_prebuilt  a checkout already built on the host: nothing copied or built
all:
  children:
    lab:
      vars:
        ansible_user: bench
      hosts:
        replace-me-skylake:
          ansible_host: 192.0.2.10
          isobench_cpus: "2-3"
          isobench_tune: true
        replace-me-icelake:
          ansible_host: 192.0.2.11
          isobench_cpus: "4-7"
          isobench_workdir: /scratch/isobench
        replace-me-graviton:
          ansible_host: "2001:db8::12"
          isobench_tune: false
"""


def example_inventory(path: Path) -> str:
    """The example for path: YAML for .yml/.yaml, else INI."""
    return EXAMPLE_YAML if Path(path).suffix in (".yml", ".yaml") else EXAMPLE_INI
