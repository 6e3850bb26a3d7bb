"""The rules a simulated host applies: reachability of an installed network, and what each shim does."""

from __future__ import annotations

from typing import Any

import pytest

from lab.metal.identity import DiskIdentity, HostIdentity, network_problem
from lab.metal.shims import MINUTE, Effect, interpret

IDENTITY = HostIdentity(
    name="r730-1",
    macs=("f8:bc:12:00:00:0a", "f8:bc:12:00:00:0b"),
    address="127.77.0.10",
    port=2222,
    prefix=24,
    gateway="127.77.0.1",
    disk=DiskIdentity(device="/dev/sda", wwn="0x5000c500aabbccdd", serial="WFK12345"),
)
GOOD = {
    "device": "f8:bc:12:00:00:0a",
    "method": "static",
    "address": "127.77.0.10",
    "prefix": 24,
    "gateway": "127.77.0.1",
}

# (case, networks, None when reachable or what the reason says)
NETWORKS: list[tuple[str, list[dict[str, Any]], str | None]] = [
    ("boot NIC by MAC", [GOOD], None),
    ("boot NIC by MAC, other case and dashes", [{**GOOD, "device": "F8-BC-12-00-00-0A"}], None),
    ("boot NIC by name", [{**GOOD, "device": "eno1"}], None),
    ("first NIC with link", [{**GOOD, "device": "link"}], None),
    ("the second NIC only", [{**GOOD, "device": "f8:bc:12:00:00:0b"}], "no network configuration for the boot NIC"),
    ("a MAC of no NIC", [{**GOOD, "device": "00:11:22:33:44:55"}], "no network configuration for the boot NIC"),
    ("no network at all", [], "configured: none"),
    ("DHCP", [{"device": "eno1", "method": "dhcp"}], "no DHCP server"),
    ("another address", [{**GOOD, "address": "127.77.0.11"}], "configured with 127.77.0.11"),
    ("a broken netmask", [{**GOOD, "prefix": -1}], "netmask/prefix -1"),
    ("no gateway", [{**GOOD, "gateway": None}], "default gateway is not set"),
    ("another gateway", [{**GOOD, "gateway": "127.77.0.254"}], "the lab's is 127.77.0.1"),
    ("the gateway off the subnet", [{**GOOD, "prefix": 30, "address": "127.77.0.10"}], "is not on 127.77.0.8/30"),
]


@pytest.mark.parametrize(("networks", "says"), [c[1:] for c in NETWORKS], ids=[c[0] for c in NETWORKS])
def test_network_reachability(networks: list[dict[str, Any]], says: str | None) -> None:
    problem = network_problem(networks, IDENTITY)
    if says is None:
        assert problem is None
    else:
        assert problem is not None
        assert says in problem


@pytest.mark.parametrize(
    ("name", "matches"),
    [
        ("/dev/sda", True),
        ("sda", True),
        ("/dev/disk/by-id/wwn-0x5000c500aabbccdd", True),
        ("WFK12345", True),
        (None, True),
        ("/dev/sdb", False),
        ("/dev/disk/by-id/wwn-0x5000c500ffffffff", False),
    ],
)
def test_root_disk_names(name: str | None, matches: bool) -> None:
    assert IDENTITY.disk.matches(name) is matches


# (argv, the effect)
SHIM_CALLS: list[tuple[list[str], Effect]] = [
    (["reboot"], Effect(action="reboot")),
    (["poweroff"], Effect(action="poweroff")),
    (["halt"], Effect(action="halt")),
    (["halt", "-p"], Effect(action="poweroff")),
    (["shutdown", "-r", "0", "Reboot initiated by Ansible"], Effect(action="reboot")),
    (["shutdown", "-h", "now"], Effect(action="poweroff")),
    (["shutdown", "-H", "+2"], Effect(action="halt", delay=2 * MINUTE)),
    (["shutdown"], Effect(action="poweroff", delay=MINUTE)),
    (["shutdown", "-c"], Effect()),
    (["shutdown", "-r", "10:30"], Effect(rc=1, stderr="shutdown: absolute time 10:30 is not simulated in the lab\n")),
    (["modprobe", "nvidia"], Effect(action="load", target="nvidia")),
    (["modprobe", "-r", "nouveau"], Effect(action="unload", target="nouveau")),
    (["modprobe"], Effect(rc=1, stderr="modprobe: ERROR: missing parameters. See -h.\n")),
    (["wipefs", "-a", "/dev/sda"], Effect(action="wipe", target="/dev/sda")),
    (["wipefs", "/dev/sda"], Effect()),
    (["wipefs", "-a", "/dev/sdb"], Effect(rc=1, stderr="wipefs: /dev/sdb: No such file or directory\n")),
    (
        ["blkdiscard", "/dev/disk/by-id/wwn-0x5000c500aabbccdd"],
        Effect(action="wipe", target="/dev/disk/by-id/wwn-0x5000c500aabbccdd"),
    ),
]


@pytest.mark.parametrize(("argv", "effect"), SHIM_CALLS, ids=[" ".join(c[0]) for c in SHIM_CALLS])
def test_shim_effects(argv: list[str], effect: Effect) -> None:
    assert interpret(argv, IDENTITY.disk.matches) == effect
