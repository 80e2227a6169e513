"""Real SSH hosts for the campaign tests: one OpenSSH sshd per host, each on
its own loopback address (127.0.0.2, 127.0.0.3, ...), its own free port,
host key and work folder, all under the test's tmp_path.

Everything started here is ended here: each sshd runs in the foreground
(-D) as a child of the test, in its own process group, with
PR_SET_PDEATHSIG, and stop() kills it together with every process below it
(the per-connection sshd processes and what they run), which a kill of the
listener alone would leave behind.
"""

from __future__ import annotations

import ctypes
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

SSHD = Path("/usr/sbin/sshd")
SSH_KEYGEN = shutil.which("ssh-keygen")
PRIVSEP_DIR = Path("/run/sshd")

# Bounds of the waits for an sshd to listen and to die: guards against a
# hang, never a measurement.
READY_TRIES = 400
READY_POLL = 0.025


def why_not() -> str | None:
    """Why real SSH hosts cannot run here, or None."""
    if not SSHD.is_file():
        return f"no {SSHD} (openssh-server; scripts/setup-system.sh installs it)"
    if SSH_KEYGEN is None or shutil.which("ssh") is None:
        return "no ssh or ssh-keygen (openssh-client)"
    if os.geteuid() != 0:
        return "sshd with privilege separation needs root to serve logins"
    for addr in ("127.0.0.2", "127.0.0.3"):
        try:
            with socket.socket() as s:
                s.bind((addr, 0))
        except OSError as e:
            return f"cannot bind {addr} ({e.strerror}): no loopback network 127/8 here"
    return None


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def _keygen(path: Path) -> None:
    subprocess.run([SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", "isobench-test",
                    "-f", str(path)], check=True, stdin=subprocess.DEVNULL, timeout=60)


def _free_port(addr: str) -> int:
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            text = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        ppid = int(text[text.rfind(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(name))
    return kids


def tree(pid: int) -> list[int]:
    """pid and every live process below it."""
    kids = _children()
    out, frontier = [pid], [pid]
    while frontier:
        frontier = [k for p in frontier for k in kids.get(p, [])]
        out += frontier
    return out


class ClientKey:
    """The key the controller logs in with, and the known_hosts file."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.key = folder / "client_ed25519"
        _keygen(self.key)
        self.known_hosts = folder / "known_hosts"
        self.known_hosts.write_text("")

    def public(self) -> str:
        return Path(str(self.key) + ".pub").read_text()

    def trust(self, host: "SshHost", key_of: "SshHost | None" = None) -> None:
        """Add host to known_hosts with its own key (or key_of's: a mismatch)."""
        key = " ".join((key_of or host).host_public().split()[:2])
        with open(self.known_hosts, "a") as f:
            f.write(f"[{host.address}]:{host.port} {key}\n")


class SshHost:
    """One sshd on address, serving logins of client as the current user."""

    def __init__(self, folder: Path, name: str, address: str, client: ClientKey):
        self.name, self.address, self.client = name, address, client
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.workdir = folder / "work"
        self.workdir.mkdir()
        self.host_key = folder / "host_ed25519"
        _keygen(self.host_key)
        (folder / "authorized_keys").write_text(client.public())
        self.port = _free_port(address)
        self.config = folder / "sshd_config"
        self.config.write_text("\n".join([
            f"ListenAddress {address}:{self.port}",
            f"HostKey {self.host_key}",
            f"PidFile {folder / 'sshd.pid'}",
            f"AuthorizedKeysFile {folder / 'authorized_keys'}",
            # The keys live under the test's tmp folder, which is not the
            # home directory StrictModes expects.
            "StrictModes no",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password",
            "UsePAM no",
            "MaxStartups 50",
            "Subsystem sftp internal-sftp",
            "",
        ]))
        self.proc: subprocess.Popen | None = None

    def host_public(self) -> str:
        return Path(str(self.host_key) + ".pub").read_text()

    def start(self) -> None:
        log = open(self.folder / "sshd.log", "ab")
        self.proc = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(self.config)],
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                     start_new_session=True, preexec_fn=_die_with_parent)
        log.close()
        for _ in range(READY_TRIES):
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd for {self.name} exited: "
                                   f"{(self.folder / 'sshd.log').read_text()[-500:]}")
            try:
                with socket.create_connection((self.address, self.port), timeout=1):
                    return
            except OSError:
                time.sleep(READY_POLL)
        raise RuntimeError(f"sshd for {self.name} does not listen on {self.address}:{self.port}")

    def stop(self) -> None:
        """Kill the sshd and everything below it: the host is gone."""
        if self.proc is None:
            return
        pids = tree(self.proc.pid)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        self.proc = None
        # The per-connection processes were re-parented elsewhere as the
        # listener died; they were killed above, by pid.

    def inventory_line(self, prebuilt: Path) -> str:
        return (f"{self.name} ansible_host={self.address} ansible_port={self.port} "
                f"isobench_workdir={self.workdir} isobench_prebuilt={prebuilt}")


class Hosts:
    """The hosts of one test, and the inventory that names them."""

    def __init__(self, root: Path, names: list[str]):
        self.root = root
        self.made_privsep = False
        if not PRIVSEP_DIR.exists():
            PRIVSEP_DIR.mkdir(mode=0o755)
            self.made_privsep = True
        self.client = ClientKey(root / "client")
        self.hosts = {n: SshHost(root / n, n, f"127.0.0.{i + 2}", self.client)
                      for i, n in enumerate(names)}

    def __getitem__(self, name: str) -> SshHost:
        return self.hosts[name]

    def start(self) -> None:
        for h in self.hosts.values():
            h.start()

    def inventory(self, prebuilt: Path, secret: str) -> Path:
        """An INI inventory of the hosts.  `secret` stands where a password
        would: it must never reach the store, the state or a report."""
        path = self.root / "inventory.ini"
        path.write_text("\n".join([
            "[lab]",
            *(h.inventory_line(prebuilt) for h in self.hosts.values()),
            "",
            "[lab:vars]",
            f"ansible_user={pwd.getpwuid(os.geteuid()).pw_name}",
            "ansible_python_interpreter=/usr/bin/python3",
            f"ansible_ssh_private_key_file={self.client.key}",
            f"ansible_ssh_common_args=-o UserKnownHostsFile={self.client.known_hosts} "
            "-o StrictHostKeyChecking=yes -o BatchMode=yes",
            f"ansible_become_password={secret}",
            "",
        ]))
        return path

    def close(self) -> None:
        """Stop every sshd, then remove what was made for them: the keys
        (the client's private key among them), the configurations and the
        hosts' work folders."""
        for h in self.hosts.values():
            h.stop()
        shutil.rmtree(self.root, ignore_errors=True)
        if self.made_privsep:
            try:
                PRIVSEP_DIR.rmdir()
            except OSError:
                pass
