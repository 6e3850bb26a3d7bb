# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The config drive a Metal3-provisioned node boots with: cloud-init user data and OpenStack network data.

Why it says the same as the redfish provisioner's installer files (``_metal/unattended.py``): the roles after the
provisioner (driver, kubeadm, adoption) must not know which one ran. So the node gets the same static network on
the boot NIC, the same authorized key, the same pinned SSH host key (the controller knows it before the first
login, no trust on first use) and the same ``/etc/metalplane/provisioned`` marker with the claim's cluster and
generation, from which a later run tells this install from an older one.

Formats: ``userData`` is a ``#cloud-config`` document (cloud-init's ``ssh_keys``, ``users``, ``write_files``);
``networkData`` is OpenStack's ``network_data.json`` (``links`` by MAC, ``networks`` of type ``ipv4``, ``services``
of type ``dns``), which Ironic puts on the config drive as ``openstack/latest/network_data.json``, and which the
deploy ramdisk reads from ``preprovisioningNetworkDataName``: on a segment without DHCP, a ramdisk without it has no
address and inspection and provisioning hang.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Sequence
from dataclasses import dataclass

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError

MARKER_PATH = "/etc/metalplane/provisioned"  # the same file the redfish provisioner writes (_metal/unattended.py)
LINK_ID = "boot0"
NETWORK_ID = "boot0-ipv4"
# The blacklist the redfish provisioner's installer writes: the same bytes, so the driver role sees no change.
NOUVEAU_BLACKLIST = (
    "# metalplane.inference: the NVIDIA driver cannot load while nouveau holds the GPUs\n"
    "blacklist nouveau\n"
    "options nouveau modeset=0\n"
)


@dataclass(frozen=True)
class StaticNetwork:
    """The boot NIC's static IPv4 configuration."""

    mac: str
    address: ipaddress.IPv4Interface
    gateway: ipaddress.IPv4Address
    dns: tuple[ipaddress.IPv4Address, ...]


def parse_network(mac: str, node_ip: str, gateway: str, dns: Sequence[str]) -> StaticNetwork:
    """Validate the cluster's network (``node_ip`` is ``address/prefix``); InputError naming the field."""
    try:
        address = ipaddress.IPv4Interface(str(node_ip).strip())
    except ValueError:
        raise InputError("network.node_ip", f"{node_ip!r} is not an IPv4 address/prefix, e.g. 192.0.2.10/24") from None
    if address.network.prefixlen in (0, 32) or "/" not in str(node_ip):
        raise InputError("network.node_ip", f"{node_ip!r} needs a prefix between 1 and 31, e.g. 192.0.2.10/24")
    try:
        gw = ipaddress.IPv4Address(str(gateway).strip())
    except ValueError:
        raise InputError("network.gateway", f"{gateway!r} is not an IPv4 address") from None
    if gw not in address.network:
        raise InputError("network.gateway", f"{gw} is not on {address.network}: the default route cannot be added")
    servers = []
    for index, server in enumerate(dns):
        try:
            servers.append(ipaddress.IPv4Address(str(server).strip()))
        except ValueError:
            raise InputError(f"network.dns[{index}]", f"{server!r} is not an IPv4 address") from None
    return StaticNetwork(mac=mac, address=address, gateway=gw, dns=tuple(servers))


def network_data(net: StaticNetwork) -> str:
    """OpenStack ``network_data.json`` for the boot NIC (also the deploy ramdisk's pre-provisioning network)."""
    document = {
        "links": [{"id": LINK_ID, "type": "phy", "ethernet_mac_address": net.mac}],
        "networks": [
            {
                "id": NETWORK_ID,
                "type": "ipv4",
                "link": LINK_ID,
                "ip_address": str(net.address.ip),
                "netmask": str(net.address.netmask),
                "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": str(net.gateway)}],
                "services": [{"type": "dns", "address": str(server)} for server in net.dns],
            }
        ],
        "services": [{"type": "dns", "address": str(server)} for server in net.dns],
    }
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def marker(cluster: str, generation: int, hostname: str) -> str:
    """The marker's text: the same JSON as ``_metal/unattended.marker``."""
    return json.dumps({"cluster": cluster, "generation": generation, "hostname": hostname}, sort_keys=True)


def _block(text: str, indent: int) -> str:
    pad = " " * indent
    return "\n".join(pad + line if line else "" for line in text.strip("\n").splitlines())


def user_data(
    *,
    hostname: str,
    user: str,
    authorized_key: str,
    host_key_private: str,
    host_key_public: str,
    cluster: str,
    generation: int,
) -> str:
    """A ``#cloud-config`` document: host name, the login, the pinned host key, the marker, nouveau blacklisted.

    JSON is YAML, so each value is written with ``json.dumps`` and cannot break the document whatever it holds.
    """

    def q(value: str) -> str:
        return json.dumps(value)

    login = (
        f"disable_root: false\nusers:\n  - name: root\n    ssh_authorized_keys: [{q(authorized_key)}]\n"
        if user == "root"
        else (
            f"users:\n  - default\n  - name: {q(user)}\n    sudo: {q('ALL=(ALL) NOPASSWD:ALL')}\n"
            f"    shell: /bin/bash\n    ssh_authorized_keys: [{q(authorized_key)}]\n"
        )
    )
    return (
        "#cloud-config\n"
        "# metalplane.inference: the node of a Metal3-provisioned bare-metal cluster.\n"
        f"hostname: {q(hostname)}\n"
        f"fqdn: {q(hostname)}\n"
        "preserve_hostname: false\n"
        "ssh_pwauth: false\n"
        f"{login}"
        "ssh_deletekeys: true\n"
        "ssh_genkeytypes: []\n"
        "ssh_keys:\n"
        "  ed25519_private: |\n"
        f"{_block(host_key_private, 4)}\n"
        f"  ed25519_public: {q(host_key_public)}\n"
        "write_files:\n"
        f"  - path: {MARKER_PATH}\n"
        "    permissions: '0644'\n"
        f"    content: {q(marker(cluster, generation, hostname) + chr(10))}\n"
        "  - path: /etc/modprobe.d/blacklist-nouveau.conf\n"
        "    permissions: '0644'\n"
        f"    content: {q(NOUVEAU_BLACKLIST)}\n"
    )
