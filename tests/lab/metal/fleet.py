"""The simulated hosts of one Redfish lab: one per BMC, each on a loopback address of the lab network.

Why here and not in the Redfish emulator: the BMC emulator stays a BMC; this module only needs
each BMC state's narrow host interface (``host`` listener, ``host_power_off()``, ``reboot()``,
``macs``) and gives every BMC a server behind it. It probes the kernel features first, so a machine
that cannot run the sandboxes fails at start with the fix named, never mid-install.

The lab network: hosts get ``127.77.0.10``, ``.11``, ... (in BMC order) on ``127.77.0.0/24`` with
gateway ``127.77.0.1``; Linux routes all of 127.0.0.0/8 to loopback, so each host has an address of
its own, and the controller (127.0.0.1) is *not* on that subnet - a configuration must carry the
gateway. Each host's SSH port is picked free at start and kept for the lab's life.
"""

from __future__ import annotations

import json
import shutil
import ssl
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

import asyncssh

from lab.common.emulator import LOOPBACK, free_port
from lab.metal.host import MetalHost, SharedParts
from lab.metal.identity import DiskIdentity, HostIdentity, disk_identity
from lab.metal.sandbox import make_skeleton, probe
from lab.metal.shims import install_shims
from lab.metal.sshd import SshService

LAB_NETWORK = "127.77.0.0/24"
LAB_GATEWAY = "127.77.0.1"
LAB_PREFIX = 24
FIRST_HOST_OCTET = 10
HOSTS_PATH = "/lab/hosts"  # the Redfish lab's control API: every host's snapshot
DESCRIPTION_FILE = "metal-hosts.json"  # in the state dir: how to reach each host
# The lab's operator key pair (in the fleet's directory): what an inventory installs as the authorized key and
# logs in with. Kept across restarts of the same state directory.
OPERATOR_KEY = "id_ed25519"


def host_address(index: int) -> str:
    return f"127.77.0.{FIRST_HOST_OCTET + index}"


class MetalFleet:
    """Starts a host behind every BMC state of a lab (``states``: name -> ``BmcState``)."""

    def __init__(self, states: dict[str, Any], state_dir: Path, delay_scale: float = 1.0) -> None:
        self.states = states
        self.directory = Path(state_dir) / "metal"
        self.delay_scale = delay_scale
        self.hosts: dict[str, MetalHost] = {}
        self._control_root: Path | None = None
        self._sshd: SshService | None = None

    def start(self) -> MetalFleet:
        tools = probe()
        self.directory.mkdir(parents=True, exist_ok=True)
        self._operator_key()
        self._control_root = Path(tempfile.mkdtemp(prefix="mlab-", dir="/tmp" if Path("/tmp").is_dir() else None))
        self._sshd = SshService()
        shared = SharedParts(
            tools=tools,
            skeleton=make_skeleton(self.directory / "skeleton"),
            shims_usr=install_shims(self.directory / "shims-usr"),
            sshd=self._sshd,
            control_root=self._control_root,
            delay_scale=self.delay_scale,
        )
        for index, (name, state) in enumerate(self.states.items()):
            address = host_address(index)
            ssh_port = free_port(address)
            api_port = free_port(address)
            while api_port == ssh_port:
                api_port = free_port(address)
            identity = HostIdentity(
                name=name,
                macs=tuple(state.macs),
                address=address,
                port=ssh_port,
                api_port=api_port,
                prefix=LAB_PREFIX,
                gateway=LAB_GATEWAY,
                # The disk the BMC's storage inventory reports (lab.redfish.bmc.disk_identity), when it has one.
                disk=DiskIdentity(**state.disk) if getattr(state, "disk", None) else disk_identity(name),
                serial=str(getattr(state, "serial", "")),
                uuid=str(getattr(state, "uuid", "")),
            )
            self.hosts[name] = MetalHost(identity, state, self.directory / "hosts" / name, shared).start()
        (Path(self.directory).parent / DESCRIPTION_FILE).write_text(json.dumps(self.describe(), indent=2))
        return self

    def stop(self) -> None:
        for host in self.hosts.values():
            host.stop()
        if self._sshd is not None:
            self._sshd.close()
            self._sshd = None
        if self._control_root is not None:
            shutil.rmtree(self._control_root, ignore_errors=True)
            self._control_root = None

    def __enter__(self) -> MetalFleet:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def host(self, name: str) -> MetalHost:
        return self.hosts[name]

    def _operator_key(self) -> Path:
        """The operator's SSH key pair (0600 private key, ``.pub`` beside it), made once per state directory."""
        private = self.directory / OPERATOR_KEY
        if not private.is_file():
            key = asyncssh.generate_private_key("ssh-ed25519", comment="operator@metal-lab")
            private.write_bytes(key.export_private_key())
            private.chmod(0o600)
            private.with_suffix(".pub").write_bytes(key.export_public_key())
        return private

    def describe(self) -> dict[str, Any]:
        """Per host: SSH address and port, boot NIC MAC, network and root disk (what a configuration needs), and
        the operator's key pair."""
        private = self.directory / OPERATOR_KEY
        return {
            "network": LAB_NETWORK,
            "gateway": LAB_GATEWAY,
            "hosts": {name: host.identity.describe() for name, host in self.hosts.items()},
            "ssh_key": {
                "private_key_file": str(private),
                "public_key": private.with_suffix(".pub").read_text().strip() if private.is_file() else "",
            },
        }

    def control(self, method: str, path: str, _raw: bytes) -> tuple[int, dict[str, Any]] | None:
        """``GET /lab/hosts``: every host's snapshot (the Redfish lab's control API hands it here)."""
        if path.rstrip("/") != HOSTS_PATH:
            return None
        if method != "GET":
            return 405, {"error": f"{method} {path} is not supported"}
        return 200, {name: host.snapshot() for name, host in self.hosts.items()}


__all__ = ["DiskIdentity", "HostIdentity", "MetalFleet", "host_address", "status_lines"]


def status_lines(state_dir: Path, port: int, timeout: float = 5.0) -> list[str]:
    """``labctl status`` lines: each host's power, boot device, media, OS phase and SSH address."""
    context = ssl.create_default_context(cafile=str(Path(state_dir) / "ca.pem"))
    try:
        with urllib.request.urlopen(f"https://{LOOPBACK}:{port}{HOSTS_PATH}", timeout=timeout, context=context) as r:
            hosts = json.loads(r.read())
    except (OSError, ValueError) as exc:
        return [f"  hosts: not answering ({exc})"]
    lines = []
    for name, host in hosts.items():
        media = host.get("media") or "-"
        state = "" if host.get("reachable") else (" (unreachable)" if host.get("phase") == "os-up" else " (down)")
        ssh = f"ssh {host['ssh']}{state}"
        lines.append(
            f"  host {name:<10} power {host.get('power'):<11} boot {host.get('boot_device') or '-':<10} "
            f"os {host.get('phase'):<17} {ssh}  media {media}"
        )
        why = host.get("unreachable") or host.get("reason")
        if why and (host.get("phase") not in ("off", "os-up") or host.get("unreachable")):
            lines.append(f"       {why}")
    return lines
