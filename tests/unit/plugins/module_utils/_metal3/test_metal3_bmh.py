"""The BareMetalHost inputs and objects: image rules, bmc.address by personality, config drive, state verdicts."""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import pytest
import yaml

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._metal3 import bmh as b
from ansible_collections.metalplane.inference.plugins.module_utils._metal3 import config_drive as cd
from ansible_collections.metalplane.inference.plugins.module_utils._metal3 import progress as p

SHA256 = "a" * 64
QCOW = "http://images.example/node.qcow2"


@pytest.mark.parametrize(
    ("image", "field"),
    [
        ({}, "image"),
        ({"checksum": SHA256}, "image.url"),
        ({"url": "ftp://images.example/node.qcow2", "checksum": SHA256}, "image.url"),
        ({"url": QCOW}, "image.checksum"),
        ({"url": QCOW, "checksum": SHA256, "checksum_type": "sha1"}, "image.checksum_type"),
        ({"url": QCOW, "checksum": SHA256, "disk_format": "iso"}, "image.disk_format"),
        ({"url": QCOW, "checksum": SHA256, "checksum_type": "md5"}, "image.checksum"),
        ({"url": QCOW, "checksum": "not hex!"}, "image.checksum"),
        ({"url": QCOW, "checksum": SHA256, "format": "qcow2"}, "image.format"),
        ({"imageURL": QCOW, "imageChecksumType": "sha256"}, "image.checksum"),
    ],
)
def test_a_bad_image_names_the_field(image: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as caught:
        b.parse_image(image)
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("image", "spec"),
    [
        (
            {"url": QCOW, "checksum": SHA256, "checksum_type": "sha256", "disk_format": "qcow2"},
            {"url": QCOW, "checksum": SHA256, "checksumType": "sha256", "format": "qcow2"},
        ),
        (  # the reference user's MetalCluster values, as they are
            {
                "imageURL": QCOW,
                "imageChecksum": QCOW + ".sha256sum",
                "imageChecksumType": "sha256",
                "imageDiskFormat": "qcow2",
            },
            {"url": QCOW, "checksum": QCOW + ".sha256sum", "checksumType": "sha256", "format": "qcow2"},
        ),
        ({"url": "http://x/live.iso", "disk_format": "live-iso"}, {"url": "http://x/live.iso", "format": "live-iso"}),
        ({"url": "oci://registry.example/node:1"}, {"url": "oci://registry.example/node:1"}),
    ],
)
def test_a_good_image_becomes_the_spec(image: dict[str, Any], spec: dict[str, Any]) -> None:
    assert b.parse_image(image).spec() == spec


@pytest.mark.parametrize(
    ("url", "personality", "system", "address"),
    [
        (
            "https://idrac-a.example",
            "idrac8",
            None,
            "idrac-virtualmedia+https://idrac-a.example/redfish/v1/Systems/System.Embedded.1",
        ),
        (
            "https://127.0.0.1:8443/bmc/r730-1/redfish/v1",
            "dell_idrac9",
            None,
            "idrac-virtualmedia+https://127.0.0.1:8443/bmc/r730-1/redfish/v1/Systems/System.Embedded.1",
        ),
        (
            "http://10.0.0.5:8000",
            None,
            "/redfish/v1/Systems/1",
            "redfish-virtualmedia+http://10.0.0.5:8000/redfish/v1/Systems/1",
        ),
    ],
)
def test_bmc_address_by_personality(url: str, personality: str | None, system: str | None, address: str) -> None:
    assert b.bmc_address(url, personality, system) == address


def test_a_generic_bmc_needs_its_system_path() -> None:
    with pytest.raises(InputError) as caught:
        b.bmc_address("https://bmc.example", "generic", None)
    assert caught.value.field == "system_path"
    assert "idrac8" in caught.value.msg  # the fix for a Dell that lacks its personality


def test_the_registration_is_virtual_media_by_mac_with_stable_disk_hints() -> None:
    reg = b.Registration(
        name="r730-a",
        namespace="metal3",
        pool="r730",
        address=b.bmc_address("https://idrac-a.example", "idrac8"),
        boot_mac="00:5c:52:31:3a:9c",
        boot_mode="UEFI",
        disable_certificate_verification=True,
        root_device_hints=b.root_device_hints({"wwn": "0x5000c500a1b2c3d4"}),
        inspection_mode="disabled",
    )
    host = reg.host()
    assert host["spec"]["online"] is False
    assert host["spec"]["bmc"]["credentialsName"] == "r730-a-bmc-secret"
    assert host["spec"]["rootDeviceHints"] == {"wwn": "0x5000c500a1b2c3d4"}
    assert host["metadata"]["labels"] == {b.MANAGED_BY_LABEL: b.MANAGED_BY, b.POOL_LABEL: "r730"}
    assert b.owned(host)
    assert b.root_device_hints({"serial": "WFK1"}) == {"serialNumber": "WFK1"}


def test_network_data_puts_the_static_address_on_the_boot_mac() -> None:
    net = cd.parse_network("00:5c:52:31:3a:9c", "192.0.2.10/24", "192.0.2.1", ["192.0.2.53"])
    document = json.loads(cd.network_data(net))
    assert document["links"] == [{"id": "boot0", "type": "phy", "ethernet_mac_address": "00:5c:52:31:3a:9c"}]
    (network,) = document["networks"]
    assert (network["link"], network["type"], network["ip_address"], network["netmask"]) == (
        "boot0",
        "ipv4",
        "192.0.2.10",
        "255.255.255.0",
    )
    assert network["routes"] == [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "192.0.2.1"}]
    assert document["services"] == [{"type": "dns", "address": "192.0.2.53"}]


@pytest.mark.parametrize(
    ("node_ip", "gateway", "dns", "field"),
    [
        ("192.0.2.10", "192.0.2.1", [], "network.node_ip"),
        ("192.0.2.300/24", "192.0.2.1", [], "network.node_ip"),
        ("192.0.2.10/24", "198.51.100.1", [], "network.gateway"),
        ("192.0.2.10/24", "192.0.2.1", ["dns.example"], "network.dns[0]"),
    ],
)
def test_a_bad_network_names_the_field(node_ip: str, gateway: str, dns: list[str], field: str) -> None:
    with pytest.raises(InputError) as caught:
        cd.parse_network("00:5c:52:31:3a:9c", node_ip, gateway, dns)
    assert caught.value.field == field


@pytest.mark.parametrize("user", ["root", "core"])
def test_user_data_is_cloud_config_with_the_pinned_key_and_the_marker(user: str) -> None:
    private = "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\nBBBB\n-----END OPENSSH PRIVATE KEY-----\n"
    text = cd.user_data(
        hostname="node1",
        user=user,
        authorized_key='ssh-ed25519 AAAA op@ctl "quoted"',
        host_key_private=private,
        host_key_public="ssh-ed25519 CCCC root@node1",
        cluster="dc1",
        generation=3,
    )
    assert text.startswith("#cloud-config\n")
    config = yaml.safe_load(text)
    assert config["hostname"] == "node1"
    assert config["ssh_keys"] == {"ed25519_private": private, "ed25519_public": "ssh-ed25519 CCCC root@node1"}
    login = next(u for u in config["users"] if isinstance(u, dict))
    assert login["name"] == user
    assert login["ssh_authorized_keys"] == ['ssh-ed25519 AAAA op@ctl "quoted"']
    marker = next(f for f in config["write_files"] if f["path"] == cd.MARKER_PATH)
    assert json.loads(marker["content"]) == {"cluster": "dc1", "generation": 3, "hostname": "node1"}


def _host(state: str, **status: Any) -> dict[str, Any]:
    return {"status": {"provisioning": {"state": state}, **status}}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# (goal, observations as (seconds later, host), done, failed, recovery)
VERDICTS: list[tuple[str, list[tuple[float, dict[str, Any]]], bool, bool, str | None]] = [
    ("provisioned", [(0, _host("provisioned", operationalStatus="OK"))], True, False, None),
    ("provisioned", [(0, _host("provisioning"))], False, False, None),
    ("provisioned", [(0, _host("provisioning")), (3599, _host("provisioning"))], False, False, None),
    ("provisioned", [(0, _host("provisioning")), (3600, _host("provisioning"))], False, True, "boot_order"),
    ("provisioned", [(0, _host("registering")), (601, _host("registering"))], False, True, None),
    (
        "provisioned",
        [(0, _host("registering", operationalStatus="error", errorType="registration error", errorMessage="401"))],
        False,
        True,
        None,
    ),
    (
        "provisioned",
        [(0, _host("provisioning", operationalStatus="error", errorType="provisioning error", errorCount=1))],
        False,
        False,
        None,
    ),
    (
        "provisioned",
        [
            (
                0,
                _host(
                    "provisioning",
                    operationalStatus="error",
                    errorType="provisioning error",
                    errorMessage="Virtual media mount failed: connection reset",
                    errorCount=2,
                ),
            )
        ],
        False,
        True,
        "bmc_reset",
    ),
    (
        "provisioned",
        [(0, _host("inspecting", operationalStatus="error", errorType="inspection error", errorCount=3))],
        False,
        True,
        "boot_order",
    ),
    ("provisioned", [(0, _host("deprovisioning"))], False, False, None),  # a present after an interrupted absent
    ("provisioned", [(0, _host("deleting"))], False, True, None),
    ("released", [(0, _host("provisioning"))], False, False, None),  # an absent after an interrupted present
    ("released", [(0, _host("available", poweredOn=False))], True, False, None),
    ("released", [(0, _host("available", poweredOn=True))], False, False, None),
    ("released", [(0, _host("ready", poweredOn=False))], True, False, None),
    ("released", [(0, _host("deprovisioning")), (3600, _host("deprovisioning"))], False, True, "boot_order"),
]


@pytest.mark.parametrize(("goal", "observations", "done", "failed", "recovery"), VERDICTS)
def test_verdicts(
    goal: str, observations: list[tuple[float, dict[str, Any]]], done: bool, failed: bool, recovery: str | None
) -> None:
    clock = Clock()
    state_clock = p.StateClock(clock=clock, timeouts=p.DEFAULT_STATE_TIMEOUTS)
    verdict = None
    for later, host in observations:
        clock.now += later
        verdict = p.judge(goal, host, state_clock)
    assert verdict is not None
    assert (verdict.done, verdict.failed, verdict.recovery) == (done, failed, recovery)


def _failing(count: int) -> dict[str, Any]:
    return _host("provisioning", operationalStatus="error", errorType="provisioning error", errorCount=count)


# (errorCount the wait after a recovery found, errorCount now, whether the wait fails before the deadline)
AFTER_RECOVERY = [(0, 2, True), (2, 2, False), (2, 3, False), (2, 4, True), (5, 6, False)]


@pytest.mark.parametrize(("before", "now", "failed"), AFTER_RECOVERY)
def test_after_a_recovery_only_new_errors_fail_the_wait(before: int, now: int, failed: bool) -> None:
    """The host still shows the errors that asked for the cure until Ironic's retry completes."""
    state_clock = p.StateClock(clock=Clock(), timeouts=p.DEFAULT_STATE_TIMEOUTS)
    verdict = p.judge("provisioned", _failing(now), state_clock, errors_before=before)
    assert (verdict.failed, verdict.recovery) == (failed, "boot_order" if failed else None)


def test_a_new_state_restarts_its_deadline() -> None:
    clock = Clock()
    state_clock = p.StateClock(clock=clock, timeouts=p.DEFAULT_STATE_TIMEOUTS)
    assert not p.judge("provisioned", _host("inspecting"), state_clock).failed
    clock.now = 1700
    assert not p.judge("provisioned", _host("available"), state_clock).failed
    clock.now = 2000
    assert not p.judge("provisioned", _host("provisioning"), state_clock).failed
    assert [s for s, _t in state_clock.history] == ["inspecting", "available", "provisioning"]


def test_address_is_an_interface() -> None:
    net = cd.parse_network("00:5c:52:31:3a:9c", "10.1.2.3/16", "10.1.0.1", [])
    assert net.address == ipaddress.IPv4Interface("10.1.2.3/16")
