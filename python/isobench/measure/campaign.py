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
variables is kept by isobench (measure/inventory.py reads the inventory and
refuses the settings that could turn off the host-key check or grant root):
passwords and key files stay with Ansible, and neither the state, the
events nor the store hold them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from . import proc
from .inventory import Host, ansible_env, ansible_tool, first_error
from ..errors import UsageError

DATA = Path(__file__).resolve().parents[1] / "data" / "campaign"
PLAYBOOK = DATA / "campaign.yml"
PREFLIGHT = DATA / "preflight.yml"

PENDING, DONE, FAILED = "pending", "done", "failed"
STATE_VERSION = 1

# A whole campaign's ansible-playbook may run this long per host at most,
# on top of each host's own measuring time-out; beyond, it is stopped and
# the hosts not done are failed ("time-out").
DEFAULT_HOST_TIMEOUT = 6 * 3600
# Connecting, copying and building on top of measuring.
SETUP_ALLOWANCE = 3600
PREFLIGHT_TIMEOUT = 300

# Folders of a checkout that are never copied to a host: built on it instead.
NOT_COPIED = (".git", ".venv", "build", "build-san", "build-arm64", "results")

# ssh's messages when the host key is not the one known_hosts holds.
KEY_CHANGED = "REMOTE HOST IDENTIFICATION HAS CHANGED"
KEY_FAILED = "Host key verification failed"


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
                  f"{first_error(run.exit.stderr)}"
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
