"""Boot planning per generation: mode, order, override (pure functions)."""

from __future__ import annotations

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.boot import (
    plan_mode,
    plan_order,
    plan_override,
)
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.quirks import BootOrderState
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.quirks.dell_idrac8 import (
    plan_boot_seq,
    seq_key,
)


@pytest.mark.parametrize(
    ("desired", "observed", "planned"),
    [
        (None, "UEFI", None),
        ("UEFI", "UEFI", None),
        ("UEFI", "uefi", None),
        ("Legacy", "UEFI", "Legacy"),
        ("UEFI", None, "UEFI"),
    ],
)
def test_plan_mode_never_resends_unchanged(desired: str | None, observed: str | None, planned: str | None) -> None:
    assert plan_mode(desired, observed) == planned


IDRAC9_ORDER = BootOrderState(
    order=["Boot0001", "Boot0002", "Boot0003"],
    names={
        "Boot0001": "Boot0001",
        "Boot0002": "Boot0002",
        "Boot0003": "Boot0003",
        "Hard drive C:": "Boot0001",
        "PXE Device 1: Integrated NIC 1 Port 1": "Boot0002",
        "Virtual CD": "Boot0003",
    },
)
IDRAC8_ORDER = BootOrderState(
    order=["HardDisk.List.1-1", "NIC.Integrated.1-1-1", "Optical.SATAEmbedded.J-1"],
    names={
        "HardDisk.List.1-1": "HardDisk.List.1-1",
        "NIC.Integrated.1-1-1": "NIC.Integrated.1-1-1",
        "Optical.SATAEmbedded.J-1": "Optical.SATAEmbedded.J-1",
        "Integrated NIC 1 Port 1 Partition 1": "NIC.Integrated.1-1-1",
    },
    source="BootSources.BootSeq",
)


@pytest.mark.parametrize(
    ("state", "desired", "planned"),
    [
        (IDRAC9_ORDER, ["Boot0002"], ["Boot0002", "Boot0001", "Boot0003"]),
        (IDRAC9_ORDER, ["PXE Device 1: Integrated NIC 1 Port 1", "Virtual CD"], ["Boot0002", "Boot0003", "Boot0001"]),
        (IDRAC9_ORDER, ["Boot0001"], None),  # already first: nothing to write
        (IDRAC9_ORDER, ["Boot0001", "Boot0002", "Boot0003"], None),
        (IDRAC9_ORDER, None, None),
        (
            IDRAC8_ORDER,
            ["NIC.Integrated.1-1-1"],
            ["NIC.Integrated.1-1-1", "HardDisk.List.1-1", "Optical.SATAEmbedded.J-1"],
        ),
        (
            IDRAC8_ORDER,
            ["Integrated NIC 1 Port 1 Partition 1", "HardDisk.List.1-1"],
            ["NIC.Integrated.1-1-1", "HardDisk.List.1-1", "Optical.SATAEmbedded.J-1"],
        ),
        (IDRAC8_ORDER, ["HardDisk.List.1-1"], None),
    ],
)
def test_plan_order(state: BootOrderState, desired: list[str] | None, planned: list[str] | None) -> None:
    assert plan_order(desired, state) == planned


@pytest.mark.parametrize(
    ("desired", "fragment"),
    [(["Floppy.1"], "is not a boot entry"), (["Boot0002", "PXE Device 1: Integrated NIC 1 Port 1"], "listed twice")],
)
def test_plan_order_rejects(desired: list[str], fragment: str) -> None:
    with pytest.raises(InputError) as info:
        plan_order(desired, IDRAC9_ORDER)
    assert info.value.field == "order"
    assert fragment in info.value.msg


@pytest.mark.parametrize(
    ("device", "persistent", "observed", "quirks", "method"),
    [
        ("virtual_cd", False, {"target": "Cd", "enabled": "Once"}, "dell_idrac8", "dell_scp"),  # never observable
        ("virtual_cd", True, {}, "dell_idrac8", "dell_scp"),
        ("virtual_cd", False, {"target": "Hdd", "enabled": "Disabled"}, "dell_idrac9", "override"),
        ("virtual_cd", False, {"target": "Cd", "enabled": "Once"}, "dell_idrac9", None),  # already pending
        ("cd", False, {"target": "Hdd", "enabled": "Once"}, "dell_idrac8", "override"),  # physical drive, standard
        ("pxe", True, {"target": "Pxe", "enabled": "Once"}, "generic", "override"),  # once -> continuous
        ("pxe", True, {"target": "Pxe", "enabled": "Continuous"}, "generic", None),
        ("bios_setup", False, {"target": "None", "enabled": "Disabled"}, "generic", "override"),
        (None, False, {}, "generic", None),
    ],
)
def test_plan_override(device: str | None, persistent: bool, observed: dict, quirks: str, method: str | None) -> None:
    plan = plan_override(device, persistent, observed, quirks)
    assert (plan or {}).get("method") == method


def test_plan_override_unknown_device() -> None:
    with pytest.raises(InputError) as info:
        plan_override("floppy", False, {}, "generic")
    assert info.value.field == "device"


def test_idrac8_boot_seq_reindexes_and_enables() -> None:
    entries = [
        {"Index": 0, "Enabled": True, "Id": "BIOS.Setup.1-1#BootSeq#HardDisk.List.1-1#a1", "Name": "HardDisk.List.1-1"},
        {
            "Index": 1,
            "Enabled": False,
            "Id": "BIOS.Setup.1-1#BootSeq#NIC.Integrated.1-1-1#b2",
            "Name": "NIC.Integrated.1-1-1",
        },
        {
            "Index": 2,
            "Enabled": True,
            "Id": "BIOS.Setup.1-1#BootSeq#Optical.SATAEmbedded.J-1#c3",
            "Name": "Optical.SATAEmbedded.J-1",
        },
    ]
    out = plan_boot_seq(entries, ["NIC.Integrated.1-1-1"])
    assert [(e["Index"], e["Name"], e["Enabled"]) for e in out] == [
        (0, "NIC.Integrated.1-1-1", True),
        (1, "HardDisk.List.1-1", True),
        (2, "Optical.SATAEmbedded.J-1", True),
    ]
    assert entries[1]["Enabled"] is False  # input not mutated


@pytest.mark.parametrize(("mode", "key"), [("Uefi", "UefiBootSeq"), ("Bios", "BootSeq"), (None, "BootSeq")])
def test_seq_key(mode: str | None, key: str) -> None:
    assert seq_key(mode) == key
