"""What cloud-init makes of a Metal3 config drive: user data and network data -> the installed system.

Why: with Metal3 the host's first-boot configuration is not an installer answer file but a config drive
Ironic writes next to the image: the ``userData`` Secret (cloud-config) and the ``networkData`` Secret
(OpenStack ``network_data.json``). The lab's hosts already know what an installed system with a given
network configuration does on the lab network (``lab.metal.identity.network_problem``); this module turns a
config drive into the same ``InstallConfig`` the installer paths produce, so a wrong MAC, address or
gateway makes the host unreachable exactly as a wrong kickstart does. Pure, so it is tested table by table.

Modelled (as cloud-init does on first boot): cloud-config ``hostname``/``fqdn``, ``users`` (name,
``ssh_authorized_keys``), top-level ``ssh_authorized_keys`` (given to root: the lab's images have no distro
default user), ``write_files`` (plain, b64, gz+b64), ``ssh_keys`` host keys; network_data.json ``links``
(``ethernet_mac_address``), ``networks`` of type ``ipv4`` (static: ``ip_address``, ``netmask``, the default
route's ``gateway``) and ``ipv4_dhcp``, ``services`` of type ``dns``. Not modelled: ``runcmd``, ``packages``,
bonds/VLANs, IPv6. Without network data cloud-init falls back to DHCP on the first NIC with link.
"""

from __future__ import annotations

import ipaddress
from typing import Any

import yaml

from lab.metal.iso_reader import (
    BootEntry,
    InstallConfig,
    Network,
    _cloud_init_user_data,  # the autoinstall path's cloud-config reader: one reading for both paths
)

CLOUD_CONFIG_HEADER = "#cloud-config"  # cloud-init treats user data as cloud-config only with this first line
FLAVOUR = "cloud-init"
# network_data.json network types: a static IPv4 address, or DHCP on the link.
STATIC_IPV4 = "ipv4"
DHCP_IPV4 = ("ipv4_dhcp", "dhcp4")
DEFAULT_ROUTE = ("0.0.0.0", "0.0.0.0")  # (network, netmask) of the route that carries the default gateway
# cloud-init's fallback network configuration when there is no network data: DHCP on the first NIC with link.
FALLBACK_DEVICE = "link"


class ConfigDriveError(ValueError):
    """User data or network data cloud-init could not use (the host boots, unconfigured)."""


def parse_user_data(text: str | None) -> dict[str, Any]:
    """The cloud-config mapping of ``text``; {} when there is none (or it is a script cloud-init would run)."""
    if not text or not text.lstrip().startswith(CLOUD_CONFIG_HEADER):
        return {}
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        msg = f"user data is not valid YAML: {exc}"
        raise ConfigDriveError(msg) from exc
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        msg = "cloud-config user data must be a mapping"
        raise ConfigDriveError(msg)
    return loaded


def _prefix(netmask: Any) -> int | None:
    try:
        return ipaddress.IPv4Network(f"0.0.0.0/{netmask}").prefixlen
    except (ValueError, TypeError):
        return None


def networks_from(network_data: dict[str, Any] | None) -> list[Network]:
    """``network_data.json`` -> one ``Network`` per IPv4 network, its device the link's MAC address."""
    if not network_data:
        return [Network(device=FALLBACK_DEVICE, method="dhcp")]
    links = {str(link.get("id")): link for link in network_data.get("links") or [] if isinstance(link, dict)}
    dns = tuple(
        str(s["address"])
        for s in network_data.get("services") or []
        if isinstance(s, dict) and s.get("type") == "dns" and s.get("address")
    )
    out = []
    for net in network_data.get("networks") or []:
        if not isinstance(net, dict):
            continue
        link = links.get(str(net.get("link"))) or {}
        device = str(link.get("ethernet_mac_address") or link.get("name") or net.get("link") or "")
        if net.get("type") in DHCP_IPV4:
            out.append(Network(device=device, method="dhcp"))
        elif net.get("type") == STATIC_IPV4:
            gateway = next(
                (
                    str(r["gateway"])
                    for r in net.get("routes") or []
                    if isinstance(r, dict)
                    and (r.get("network"), r.get("netmask")) == DEFAULT_ROUTE
                    and r.get("gateway")
                ),
                None,
            )
            out.append(
                Network(
                    device=device,
                    method="static",
                    address=str(net.get("ip_address")) if net.get("ip_address") else None,
                    prefix=_prefix(net.get("netmask")),
                    gateway=gateway,
                    nameservers=dns,
                )
            )
    return out


def install_config(user_data: str | None, network_data: dict[str, Any] | None, *, image: str) -> InstallConfig:
    """What the first boot of ``image`` with this config drive leaves on the disk, as an ``InstallConfig``."""
    entry = BootEntry(loader="grub", config_path="", title=f"{image} (disk image)", kernel="", cmdline=(), initrds=())
    config = InstallConfig(flavour=FLAVOUR, entry=entry, source=image, final_action="reboot")
    cloud = parse_user_data(user_data)
    _cloud_init_user_data(config, cloud)
    hostname = cloud.get("hostname") or cloud.get("fqdn")
    config.hostname = str(hostname).split(".", 1)[0] if hostname else None
    top_keys = [str(k) for k in cloud.get("ssh_authorized_keys") or []]
    if top_keys:
        config.authorized_keys.setdefault("root", []).extend(top_keys)
    config.networks = networks_from(network_data)
    return config
