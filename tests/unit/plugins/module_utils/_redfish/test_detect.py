"""Generation detection from Manager.Model, vendor detection and feature probes."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._redfish.detect import (
    default_member_id,
    generation_from_model,
    generation_from_system,
    identify,
    quirks_without_manager,
)


@pytest.mark.parametrize(
    ("model", "generation"),
    [
        ("13G Monolithic", 8),
        ("12G Monolithic", 8),
        ("13G Modular", 8),
        ("14G Monolithic", 9),
        ("15G Monolithic", 9),
        ("16G Monolithic", 9),
        ("17G Monolithic", 10),
        ("iDRAC9", 9),
        ("Integrated Dell Remote Access Controller iDRAC 8", 8),
        ("iDRAC10", 10),
        ("Joo Janta 200", None),
        ("", None),
        (None, None),
        ("11G Monolithic", None),
    ],
)
def test_generation_from_model(model: str | None, generation: int | None) -> None:
    assert generation_from_model(model) == generation


IDRAC8_MANAGER = {
    "Id": "iDRAC.Embedded.1",
    "Model": "13G Monolithic",
    "FirmwareVersion": "2.84.84.84",
    "Links": {"Oem": {"Dell": {"Jobs": {"@odata.id": "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs"}}}},
    "VirtualMedia": {"@odata.id": "/redfish/v1/Managers/iDRAC.Embedded.1/VirtualMedia"},
}
IDRAC9_MANAGER = {
    "Id": "iDRAC.Embedded.1",
    "Model": "14G Monolithic",
    "FirmwareVersion": "6.10.30.00",
    "Links": {"Oem": {"Dell": {"DellLCService": {"@odata.id": "/x"}, "Jobs": {"@odata.id": "/j"}}}},
}
GENERIC_MANAGER = {"Id": "BMC", "Model": "Joo Janta 200", "FirmwareVersion": "1.00"}


@pytest.mark.parametrize(
    ("root", "manager", "system", "expected"),
    [
        (
            {"Vendor": "Dell", "RedfishVersion": "1.4.0"},
            IDRAC8_MANAGER,
            {"Model": "PowerEdge R730", "Boot": {}},
            {"vendor": "Dell", "generation": 8, "quirks": "dell_idrac8", "virtual_media_on": "manager", "lc": False},
        ),
        (
            {"Oem": {"Dell": {}}, "RedfishVersion": "1.11.0"},
            IDRAC9_MANAGER,
            {"VirtualMedia": {"@odata.id": "/v"}, "Boot": {"BootOrder": ["Boot0001"]}},
            {"vendor": "Dell", "generation": 9, "quirks": "dell_idrac9", "virtual_media_on": "system", "lc": True},
        ),
        (
            {"Vendor": "Sushy Emulator"},
            GENERIC_MANAGER,
            {"VirtualMedia": {"@odata.id": "/v"}},
            {
                "vendor": "Sushy Emulator",
                "generation": None,
                "quirks": "generic",
                "virtual_media_on": "system",
                "lc": False,
            },
        ),
        # A non-Dell BMC whose model happens to say "14G" must not get Dell quirks.
        (
            {"Vendor": "Contoso"},
            {"Model": "14G Monolithic"},
            {},
            {"vendor": "Contoso", "generation": None, "quirks": "generic", "virtual_media_on": "none", "lc": False},
        ),
        # No Vendor anywhere, but a Dell model string: Dell (old iDRAC8 roots have no Vendor).
        (
            {},
            IDRAC8_MANAGER,
            {},
            {"vendor": "Dell", "generation": 8, "quirks": "dell_idrac8", "virtual_media_on": "manager", "lc": False},
        ),
    ],
)
def test_identify(root: dict, manager: dict, system: dict, expected: dict) -> None:
    ident = identify(root, manager, system)
    assert ident.vendor == expected["vendor"]
    assert ident.generation == expected["generation"]
    assert ident.quirks_name == expected["quirks"]
    assert ident.virtual_media_on == expected["virtual_media_on"]
    assert ident.dell_lc_service is expected["lc"]
    assert ident.as_dict()["quirks"] == expected["quirks"]


def test_identify_boot_features() -> None:
    ident = identify({"Vendor": "Dell"}, IDRAC9_MANAGER, {"Boot": {"BootOrder": []}})
    assert ident.boot_order is True
    ident8 = identify({"Vendor": "Dell"}, IDRAC8_MANAGER, {"Boot": {}})
    assert ident8.boot_order is False
    assert ident8.boot_sources is True


DELL_ROOT = {"Vendor": "Dell", "Product": "Integrated Dell Remote Access Controller"}
DELL_OEM_ROOT = {"Oem": {"Dell": {"ServiceTag": "GTS7DV2"}}}  # older roots: no Vendor, an Oem.Dell block
CONTOSO_ROOT = {"Vendor": "Contoso"}


def _dell_system(generation: str | None) -> dict[str, Any]:
    dell_system: dict[str, Any] = {"Id": "System.Embedded.1"}
    if generation:
        dell_system["SystemGeneration"] = generation
    return {"Manufacturer": "Dell Inc.", "Oem": {"Dell": {"DellSystem": dell_system}}}


@pytest.mark.parametrize(
    ("root", "system", "quirks"),
    [
        (CONTOSO_ROOT, {"Manufacturer": "Contoso"}, "generic"),  # a non-Dell root: no Manager needed
        (DELL_ROOT, _dell_system("14G Monolithic"), "dell_idrac9"),
        (DELL_ROOT, _dell_system("16G Monolithic"), "dell_idrac9"),
        (DELL_ROOT, _dell_system("17G Monolithic"), "dell_idrac9"),  # iDRAC10 shares the iDRAC9 quirks
        (DELL_ROOT, _dell_system("13G Monolithic"), "dell_idrac8"),
        (DELL_OEM_ROOT, _dell_system("15G Monolithic"), "dell_idrac9"),
        (DELL_ROOT, _dell_system(None), None),  # iDRAC8 states no generation: read Manager.Model
        (DELL_ROOT, {"Oem": "garbage"}, None),
        (DELL_ROOT, {}, None),
        ({}, _dell_system("14G Monolithic"), None),  # a root that names no vendor: read the Manager
    ],
)
def test_quirks_without_manager(root: dict[str, Any], system: dict[str, Any], quirks: str | None) -> None:
    assert quirks_without_manager(root, system) == quirks


@pytest.mark.parametrize(
    ("root", "collection", "member"),
    [
        (DELL_ROOT, "Systems", "System.Embedded.1"),
        (DELL_OEM_ROOT, "Managers", "iDRAC.Embedded.1"),
        (DELL_ROOT, "Chassis", None),
        (CONTOSO_ROOT, "Systems", None),
        ({}, "Systems", None),
    ],
)
def test_default_member_id(root: dict[str, Any], collection: str, member: str | None) -> None:
    assert default_member_id(root, collection) == member


@pytest.mark.parametrize(
    ("system", "generation"),
    [
        (_dell_system("14G Monolithic"), 9),
        (_dell_system("13G Modular"), 8),
        (_dell_system(None), None),
        ({"Oem": {"Dell": "x"}}, None),
        ({}, None),
    ],
)
def test_generation_from_system(system: dict[str, Any], generation: int | None) -> None:
    assert generation_from_system(system) == generation
