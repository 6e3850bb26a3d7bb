"""``redfish_boot``'s ``first``: which persistent boot entry is the disk or the virtual CD, on every BMC family.

Why table-driven: the kind of an entry is read from ids and display names that differ per firmware (Dell FQDDs
on iDRAC8, BootOption ids and UEFI display names elsewhere); each row is a name a real BMC uses. ``first_entry``
must never take an optical drive on a SATA port for a disk, and must name the entries when there is no match.
"""

from __future__ import annotations

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.boot import (
    entry_kind,
    first_entry,
    plan_order,
)
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.info import drive_info, normalise_wwn
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.quirks import BootOrderState


@pytest.mark.parametrize(
    ("names", "kind"),
    [
        (["HardDisk.List.1-1"], "hdd"),
        (["RAID.Integrated.1-1"], "hdd"),
        (["Boot0002", "RAID Controller in SL 3: Ubuntu"], "hdd"),
        (["Boot0004", "UEFI: NVMe SSD Samsung"], "hdd"),
        (["Optical.iDRACVirtual.1-1"], "virtual_cd"),
        (["Boot0007", "Virtual Optical Drive"], "virtual_cd"),
        (["Optical.SATAEmbedded.J-1"], "optical"),
        (["Boot0003", "Embedded SATA Port Optical Drive J"], "optical"),
        (["NIC.Integrated.1-1-1"], "pxe"),
        (["NIC.PxeDevice.1-1"], "pxe"),
        (["Boot0001", "PXE Device 1: Integrated NIC 1 Port 1 Partition 1"], "pxe"),
        (["Boot0009", "UEFI Shell"], None),
    ],
)
def test_entry_kind(names: list[str], kind: str | None) -> None:
    assert entry_kind(*names) == kind


IDRAC8 = BootOrderState(
    order=["HardDisk.List.1-1", "NIC.Integrated.1-1-1", "Optical.SATAEmbedded.J-1", "Optical.iDRACVirtual.1-1"],
    names={
        n: n
        for n in ["HardDisk.List.1-1", "NIC.Integrated.1-1-1", "Optical.SATAEmbedded.J-1", "Optical.iDRACVirtual.1-1"]
    },
)
IDRAC9 = BootOrderState(
    order=["Boot0001", "Boot0002", "Boot0003"],
    names={
        "Boot0001": "Boot0001",
        "Boot0002": "Boot0002",
        "Boot0003": "Boot0003",
        "PXE Device 1: Integrated NIC 1 Port 1 Partition 1": "Boot0001",
        "RAID Controller in SL 3: Ubuntu": "Boot0002",
        "Embedded SATA Port Optical Drive J": "Boot0003",
    },
)


@pytest.mark.parametrize(
    ("state", "kind", "entry", "new_order"),
    [
        (IDRAC8, "hdd", "HardDisk.List.1-1", None),
        (
            IDRAC8,
            "virtual_cd",
            "Optical.iDRACVirtual.1-1",
            ["Optical.iDRACVirtual.1-1", "HardDisk.List.1-1", "NIC.Integrated.1-1-1", "Optical.SATAEmbedded.J-1"],
        ),
        (IDRAC9, "hdd", "Boot0002", ["Boot0002", "Boot0001", "Boot0003"]),
    ],
    ids=["iDRAC8 disk already first", "iDRAC8 virtual CD moved first", "iDRAC9 disk by display name"],
)
def test_first_entry_and_its_plan(state: BootOrderState, kind: str, entry: str, new_order: list[str] | None) -> None:
    assert first_entry(kind, state) == entry
    assert plan_order([entry], state) == new_order  # None: nothing is written, no BIOS job, no POST


def test_first_entry_names_the_entries_when_there_is_none() -> None:
    with pytest.raises(InputError, match="no virtual_cd entry") as raised:
        first_entry("virtual_cd", IDRAC9)
    assert "RAID Controller in SL 3: Ubuntu" in raised.value.msg


@pytest.mark.parametrize(
    ("value", "wwn"),
    [("5000C500D5CDD26B", "0x5000c500d5cdd26b"), ("naa.5000c500d5cdd26b", "0x5000c500d5cdd26b"), ("0x5ABC", "0x5abc")],
)
def test_normalise_wwn(value: str, wwn: str) -> None:
    assert normalise_wwn(value) == wwn


@pytest.mark.parametrize(
    ("identifiers", "wwn"),
    [
        ([{"DurableName": "5000C500D5CDD26B", "DurableNameFormat": "NAA"}], "0x5000c500d5cdd26b"),
        ([{"DurableName": "0025385A91B0C1D2", "DurableNameFormat": "EUI"}], "0x0025385a91b0c1d2"),
        ([{"DurableName": "XYZ", "DurableNameFormat": "UUID"}], None),
        ([], None),
    ],
    ids=["NAA", "EUI-64", "not a WWN", "none"],
)
def test_drive_info(identifiers: list[dict[str, str]], wwn: str | None) -> None:
    drive = drive_info({"Id": "Disk.Bay.0", "SerialNumber": "WFK1", "Identifiers": identifiers})
    assert (drive["wwn"], drive["serial"]) == (wwn, "WFK1")
