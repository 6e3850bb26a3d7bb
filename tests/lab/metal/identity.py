"""Who a simulated host is on the lab network, and whether an installed network configuration reaches it.

Why apart from the lifecycle: these are the rules a real network applies to an installed server
(which NIC a configuration names, DHCP on a network without a DHCP server, an address or gateway
the lab does not route), kept pure so they are tested on their own, table by table.
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass
from typing import Any

# The kernel names the integrated NICs eno1..enoN (systemd predictable names, onboard index):
# NIC index 0 is the boot NIC of the lab BMCs (lab.redfish.server: NIC.Integrated.1-1-1).
NIC_NAME_PREFIX = "eno"


@dataclass(frozen=True)
class DiskIdentity:
    """The host's one disk, by every name a configuration may use for it."""

    device: str
    wwn: str
    serial: str
    model: str = "ST1200MM0099"

    def names(self) -> set[str]:
        short = self.device.removeprefix("/dev/")
        by_id = f"disk/by-id/wwn-{self.wwn}"
        return {self.device, short, f"/dev/{by_id}", by_id, self.serial, self.wwn}

    def matches(self, name: str | None) -> bool:
        return name is None or name in self.names()


@dataclass(frozen=True)
class HostIdentity:
    """Who the host is on the lab network: its BMC's NICs, its loopback address and port, its disk."""

    name: str
    macs: tuple[str, ...]  # as the BMC's EthernetInterfaces report them; index 0 is the boot NIC
    address: str
    port: int
    prefix: int
    gateway: str
    disk: DiskIdentity
    serial: str = ""
    uuid: str = ""
    model: str = "PowerEdge R730"
    # A free port on the host's address for the Kubernetes API kubeadm serves there (kubeadm_node_api_port): a
    # real node's 6443 may be taken on this machine's loopback by another lab.
    api_port: int = 0

    @property
    def boot_mac(self) -> str:
        return self.macs[0]

    def nic_index(self, device: str) -> int | None:
        """Which NIC a configuration's device names: a MAC, ``enoN``, ``link``/``auto`` (first with link)."""
        wanted = device.lower().replace("-", ":")
        for index, mac in enumerate(self.macs):
            if wanted == mac.lower() or wanted == f"{NIC_NAME_PREFIX}{index + 1}":
                return index
        if wanted in ("link", "auto"):
            return 0  # every lab NIC reports LinkUp; the installer takes the first
        return None

    def describe(self) -> dict[str, Any]:
        return {
            "ssh_address": self.address,
            "ssh_port": self.port,
            "api_port": self.api_port,
            "boot_mac": self.boot_mac,
            "prefix": self.prefix,
            "gateway": self.gateway,
            "root_disk": {"device": self.disk.device, "wwn": self.disk.wwn, "serial": self.disk.serial},
        }


def network_problem(networks: list[dict[str, Any]], identity: HostIdentity) -> str | None:  # noqa: PLR0911
    """Why an installed OS with ``networks`` is unreachable from the controller, or None if it is reachable."""
    mine = [n for n in networks if identity.nic_index(str(n.get("device", ""))) == 0]
    if not mine:
        devices = ", ".join(str(n.get("device")) for n in networks) or "none"
        return (
            f"no network configuration for the boot NIC {identity.boot_mac} ({NIC_NAME_PREFIX}1); configured: "
            f"{devices}: the interface stays down"
        )
    net = mine[0]
    if net.get("method") != "static":
        return "the boot NIC uses DHCP and the lab network has no DHCP server: it gets no address"
    if net.get("address") != identity.address:
        return (
            f"the boot NIC is configured with {net.get('address')}, but the lab routes {identity.address} to this host"
        )
    prefix = net.get("prefix")
    if not isinstance(prefix, int) or not 1 <= prefix <= 32:
        return f"the boot NIC's netmask/prefix {prefix!r} is not valid: the interface stays down"
    gateway = net.get("gateway")
    subnet = ipaddress.IPv4Network(f"{identity.address}/{prefix}", strict=False)
    if gateway != identity.gateway:
        return (
            f"the default gateway is {gateway or 'not set'}, the lab's is {identity.gateway}: replies to the "
            "controller (not on this subnet) go nowhere"
        )
    if ipaddress.IPv4Address(gateway) not in subnet:
        return f"the gateway {gateway} is not on {subnet}: the route cannot be installed"
    return None


def disk_identity(name: str) -> DiskIdentity:
    digest = hashlib.sha256(f"disk/{name}".encode()).hexdigest()
    return DiskIdentity(device="/dev/sda", wwn=f"0x5000c500{digest[:8]}", serial=f"WFK{digest[8:13].upper()}")
