"""The BIOS reader: per-family names (quirks) onto one reading; unknown stays None, never an error."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import NotFoundError
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.bios import read_bios, reading_from
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.quirks import for_name
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.quirks.bios_settings import (
    BIOS_ATTRIBUTE,
    DELL,
    GENERIC,
    SECURE_BOOT_RESOURCE,
    SYSTEM_BOOT,
)

DELL_BIOS = {"Attributes": {"SecureBoot": "Disabled", "BootMode": "Uefi", "MmioAbove4Gb": "Enabled"}}


@pytest.mark.parametrize(
    ("settings", "documents", "expected"),
    [
        (DELL, {BIOS_ATTRIBUTE: DELL_BIOS}, (False, "UEFI", True)),
        (
            DELL,
            {BIOS_ATTRIBUTE: {"Attributes": {"SecureBoot": "Enabled", "BootMode": "Bios", "MmioAbove4Gb": "Disabled"}}},
            (True, "Legacy", False),
        ),
        (DELL, {BIOS_ATTRIBUTE: {"Attributes": {"BootMode": "Uefi"}}}, (None, "UEFI", None)),  # older BIOS
        (DELL, {BIOS_ATTRIBUTE: {"Attributes": {"SecureBoot": "Maybe"}}}, (None, None, None)),  # unknown value
        (DELL, {BIOS_ATTRIBUTE: None}, (None, None, None)),  # no Bios resource
        (
            GENERIC,
            {SECURE_BOOT_RESOURCE: {"SecureBootEnable": True}, SYSTEM_BOOT: {"BootSourceOverrideMode": "UEFI"}},
            (True, "UEFI", None),  # no standard name for MMIO above 4 GB
        ),
        (
            GENERIC,
            {SECURE_BOOT_RESOURCE: {"SecureBootEnable": False}, SYSTEM_BOOT: {"BootSourceOverrideMode": "Legacy"}},
            (False, "Legacy", None),
        ),
        (GENERIC, {SECURE_BOOT_RESOURCE: None, SYSTEM_BOOT: {}}, (None, None, None)),
    ],
)
def test_reading_from(settings: Any, documents: dict[str, Any], expected: tuple[Any, Any, Any]) -> None:
    reading = reading_from(settings, documents)
    assert (reading.secure_boot, reading.boot_mode, reading.mmio_above_4gb) == expected


def test_the_reading_says_where_each_setting_was_read() -> None:
    dell = reading_from(DELL, {BIOS_ATTRIBUTE: DELL_BIOS})
    assert dell.where == {
        "secure_boot": "Bios.Attributes.SecureBoot",
        "boot_mode": "Bios.Attributes.BootMode",
        "mmio_above_4gb": "Bios.Attributes.MmioAbove4Gb",
    }
    assert dell.raw["Bios.Attributes.BootMode"] == "Uefi"
    generic = reading_from(GENERIC, {SECURE_BOOT_RESOURCE: {"SecureBootEnable": False}})
    assert generic.where == {"secure_boot": "SecureBoot.SecureBootEnable", "boot_mode": "Boot.BootSourceOverrideMode"}


@pytest.mark.parametrize(("quirks", "settings"), [("dell_idrac8", DELL), ("dell_idrac9", DELL), ("generic", GENERIC)])
def test_each_family_names_its_settings(quirks: str, settings: Any) -> None:
    assert for_name(quirks).bios_settings is settings


class FakeClient:
    """``system.json`` plus ``get_json`` over a dict of documents; records what was read."""

    def __init__(self, system: dict[str, Any], documents: dict[str, Any]) -> None:
        self.system = type("System", (), {"json": system})()
        self.documents = documents
        self.read: list[str] = []

    def get_json(self, path: str, _doing: str) -> dict[str, Any]:
        self.read.append(path)
        if path not in self.documents:
            raise NotFoundError(f"GET {path}: 404")
        return self.documents[path]


S = "/redfish/v1/Systems/1"


def test_read_bios_reads_only_the_resources_the_family_needs() -> None:
    system = {"Bios": {"@odata.id": f"{S}/Bios"}, "SecureBoot": {"@odata.id": f"{S}/SecureBoot"}, "Boot": {}}
    dell = FakeClient(system, {f"{S}/Bios": DELL_BIOS})
    assert read_bios(dell, DELL).secure_boot is False
    assert dell.read == [f"{S}/Bios"]
    generic = FakeClient(
        {**system, "Boot": {"BootSourceOverrideMode": "UEFI"}}, {f"{S}/SecureBoot": {"SecureBootEnable": True}}
    )
    reading = read_bios(generic, GENERIC)
    assert (reading.secure_boot, reading.boot_mode) == (True, "UEFI")
    assert generic.read == [f"{S}/SecureBoot"]


def test_read_bios_turns_a_missing_resource_into_unknown() -> None:
    client = FakeClient({"SecureBoot": {"@odata.id": f"{S}/SecureBoot"}}, {})
    reading = read_bios(client, GENERIC)
    assert (reading.secure_boot, reading.boot_mode, reading.mmio_above_4gb) == (None, None, None)
    assert read_bios(FakeClient({}, {}), DELL).secure_boot is None  # no Bios link at all: nothing read
