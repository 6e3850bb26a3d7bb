"""The simulated Metal3's pure parts against Metal3's own declarations (lab.metal3).

The state names must be upstream's (parsed from the shipped excerpt of ``baremetalhost_types.go``), the CRD
must be the pinned file, and the rules that decide an outcome (BMC address schemes, root device hints, the
config drive cloud-init reads) are checked case by case.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from lab.metal.host import AGENT_VOLUME_ID, iso_volume_id
from lab.metal.identity import DiskIdentity
from lab.metal3 import contract as c
from lab.metal3.configdrive import ConfigDriveError, install_config, networks_from, parse_user_data
from lab.metal3.controller import BACKOFF_CAP, BACKOFF_FLOOR, backoff, deploy_iso_bytes, root_device_problem

CONST_BLOCK = re.compile(r"^type (\w+) string\n\nconst \(\n(.*?)^\)", re.M | re.S)
CONST_ENTRY = re.compile(r"^\t(\w+)(?: \w+)? = \"([^\"]*)\"", re.M)


def go_constants() -> dict[str, list[str]]:
    """Go type -> the string values its const block declares, in order (untyped entries count for the block)."""
    text = c.STATES_EXCERPT.read_text()
    return {kind: [value for _name, value in CONST_ENTRY.findall(body)] for kind, body in CONST_BLOCK.findall(text)}


@pytest.mark.parametrize(
    ("go_type", "ours"),
    [
        ("ProvisioningState", c.PROVISIONING_STATES),
        ("OperationalStatus", c.OPERATIONAL_STATUSES),
        ("ErrorType", c.ERROR_TYPES),
    ],
)
def test_constants_are_metal3s(go_type: str, ours: tuple[str, ...]) -> None:
    assert list(ours) == go_constants()[go_type]


def test_the_excerpt_holds_all_three_blocks() -> None:
    assert sorted(go_constants()) == ["ErrorType", "OperationalStatus", "ProvisioningState"]


def test_the_crd_is_the_pinned_file() -> None:
    source = (c.DATA_DIR / "SOURCE.md").read_text()
    digest = hashlib.sha256(c.CRD_FILE.read_bytes()).hexdigest()
    assert f"sha256 `{digest}`" in source
    crd = c.bmh_crd()
    assert (crd["spec"]["group"], crd["spec"]["names"]["kind"]) == (c.GROUP, c.KIND)
    assert [v["name"] for v in crd["spec"]["versions"]] == [c.VERSION]


def test_crd_enums_agree_with_the_constants() -> None:
    status = c.bmh_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert set(status["operationalStatus"]["enum"]) - {""} <= set(c.OPERATIONAL_STATUSES)
    assert set(status["errorType"]["enum"]) <= set(c.ERROR_TYPES)


PORT = "127.0.0.1:8443"
SYSTEM = "/bmc/r730/redfish/v1/Systems/System.Embedded.1"
# (address, driver, transport, bmc name) for addresses BMO accepts
GOOD_ADDRESSES = [
    (f"idrac-virtualmedia://{PORT}{SYSTEM}", "idrac-virtualmedia", "https", "r730"),
    (f"idrac-virtualmedia+https://{PORT}{SYSTEM}", "idrac-virtualmedia", "https", "r730"),
    (f"redfish-virtualmedia+http://{PORT}{SYSTEM}", "redfish-virtualmedia", "http", "r730"),
    (f"redfish-virtualmedia+https://{PORT}/redfish/v1/Systems/1", "redfish-virtualmedia", "https", None),
]


@pytest.mark.parametrize(("address", "driver", "transport", "name"), GOOD_ADDRESSES)
def test_bmc_addresses(address: str, driver: str, transport: str, name: str | None) -> None:
    parsed = c.parse_bmc_address(address)
    assert (parsed.driver, parsed.transport, parsed.bmc_name) == (driver, transport, name)
    assert parsed.base_url == f"{transport}://{PORT}"
    assert parsed.system_path == urlsplit(address).path
    assert parsed.root == urlsplit(address).path.partition("/Systems/")[0]


# (address, what the error says)
BAD_ADDRESSES = [
    (f"ipmi://{PORT}", "Unknown BMC type 'ipmi'"),
    (f"redfish+https://{PORT}{SYSTEM}", "Unknown BMC type 'redfish+https'"),
    (f"idrac-virtualmedia+ftp://{PORT}{SYSTEM}", "Unknown BMC type 'idrac-virtualmedia+ftp'"),
    (f"idrac-virtualmedia://{PORT}/bmc/r730/redfish/v1", "must name the system"),
    (f"idrac-virtualmedia://{SYSTEM}", "missing host"),
]


@pytest.mark.parametrize(("address", "message"), BAD_ADDRESSES)
def test_bmc_addresses_bmo_refuses(address: str, message: str) -> None:
    with pytest.raises(c.AddressError, match=re.escape(message)):
        c.parse_bmc_address(address)


DISK = DiskIdentity(device="/dev/sda", wwn="0x5000c500abcdef01", serial="WFK12345")
# (hints, whether the lab disk matches them)
HINTS = [
    (None, True),
    ({}, True),
    ({"deviceName": "/dev/sda"}, True),
    ({"deviceName": "/dev/disk/by-id/wwn-0x5000c500abcdef01"}, True),
    ({"deviceName": "/dev/sdb"}, False),
    ({"serialNumber": "WFK12345", "wwn": "0x5000c500abcdef01"}, True),
    ({"serialNumber": "WFK12345", "wwn": "0x5000c500deadbeef"}, False),
    ({"model": "st1200"}, True),
    ({"minSizeGigabytes": 2000}, False),
    ({"rotational": False}, False),
    ({"wwnVendorExtension": "0x1"}, False),
]


@pytest.mark.parametrize(("hints", "matches"), HINTS)
def test_root_device_hints(hints: dict[str, Any] | None, matches: bool) -> None:
    problem = root_device_problem(hints, DISK)
    assert (problem is None) is matches
    if problem:
        assert problem.startswith("No suitable device was found for deployment using these hints")


def test_backoff_grows_and_is_capped_and_floored() -> None:
    assert [backoff(n, 1.0) for n in (1, 2, 3)] == [2.0, 4.0, 8.0]
    assert backoff(30, 1.0) == BACKOFF_CAP
    assert backoff(5, 0.0) == BACKOFF_FLOOR


def test_the_deploy_iso_is_what_a_host_runs_as_the_agent(tmp_path: Path) -> None:
    path = tmp_path / "ipa.iso"
    path.write_bytes(deploy_iso_bytes())
    assert iso_volume_id(path) == AGENT_VOLUME_ID


MAC = "f8:bc:12:aa:bb:cc"
STATIC = {
    "links": [{"id": "l0", "type": "phy", "ethernet_mac_address": MAC}],
    "networks": [
        {
            "id": "n0",
            "type": "ipv4",
            "link": "l0",
            "ip_address": "127.77.0.10",
            "netmask": "255.255.255.0",
            "routes": [
                {"network": "10.0.0.0", "netmask": "255.0.0.0", "gateway": "127.77.0.9"},
                {"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "127.77.0.1"},
            ],
        }
    ],
    "services": [{"type": "dns", "address": "127.77.0.53"}],
}
# (network_data, the networks cloud-init configures: (device, method, address, prefix, gateway))
NETWORKS = [
    (STATIC, [(MAC, "static", "127.77.0.10", 24, "127.77.0.1")]),
    (None, [("link", "dhcp", None, None, None)]),
    (
        {"links": [{"id": "l0", "ethernet_mac_address": MAC}], "networks": [{"type": "ipv4_dhcp", "link": "l0"}]},
        [(MAC, "dhcp", None, None, None)],
    ),
    (
        {**STATIC, "networks": [{**STATIC["networks"][0], "routes": [], "netmask": "255.255.0.0"}]},
        [(MAC, "static", "127.77.0.10", 16, None)],
    ),
    ({"links": [], "networks": [{"type": "ipv6", "link": "l0"}]}, []),
]


@pytest.mark.parametrize(("data", "expected"), NETWORKS)
def test_network_data(data: dict[str, Any] | None, expected: list[tuple[Any, ...]]) -> None:
    got = [(n.device, n.method, n.address, n.prefix, n.gateway) for n in networks_from(data)]
    assert got == expected


def test_static_network_data_carries_dns() -> None:
    assert networks_from(STATIC)[0].nameservers == ("127.77.0.53",)


USER_DATA = """#cloud-config
fqdn: node7.lab.example
ssh_authorized_keys: [ssh-ed25519 AAAAtop operator]
users:
  - default
  - name: core
    ssh_authorized_keys: [ssh-ed25519 AAAAcore core]
write_files:
  - path: /etc/marker
    content: aGVsbG8K
    encoding: b64
    permissions: '0600'
runcmd: [reboot]
"""


def test_cloud_config_becomes_the_installed_system() -> None:
    config = install_config(USER_DATA, STATIC, image="http://images/x.qcow2")
    assert config.flavour == "cloud-init"
    assert config.hostname == "node7"
    assert config.users == ["root", "core"]
    assert config.authorized_keys == {"core": ["ssh-ed25519 AAAAcore core"], "root": ["ssh-ed25519 AAAAtop operator"]}
    assert config.files["/etc/marker"].content == b"hello\n"
    assert config.files["/etc/marker"].mode == 0o600
    assert [n.address for n in config.networks] == ["127.77.0.10"]


# (user data, the cloud-config cloud-init applies, or None when it refuses it)
USER_DATAS = [
    (None, {}),
    ("", {}),
    ("#!/bin/sh\necho script\n", {}),
    ("#cloud-config\n", {}),
    ("#cloud-config\nhostname: a\n", {"hostname": "a"}),
    ("#cloud-config\n- a list\n", None),
    ("#cloud-config\nhostname: [unclosed\n", None),
]


@pytest.mark.parametrize(("text", "expected"), USER_DATAS)
def test_user_data(text: str | None, expected: dict[str, Any] | None) -> None:
    if expected is None:
        with pytest.raises(ConfigDriveError):
            parse_user_data(text)
    else:
        assert parse_user_data(text) == expected
