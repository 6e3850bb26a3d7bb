# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Vendor and iDRAC generation detection, then feature probes.

Why: iDRAC8 (13G, e.g. R730) and iDRAC9 need different calls for the same intent (virtual media
under the Manager vs the System, BootSources + BIOS job vs Boot.BootOrder, Manager.Reset vs Dell's
iDRACReset). The generation comes from ``Manager.Model`` ("13G Monolithic" = iDRAC8, 14G-16G =
iDRAC9, 17G+ = iDRAC10), as ironic (``drivers/modules/drac/boot.py::_get_idrac_version_from_model``)
and Dell's scripts do; then the features that matter are probed so a firmware that moved something is
still handled (iDRAC9 6.00.02 moved virtual media from the Manager to the System: openstack/ironic
commit ``af0b9751d``). Version numbers alone are never trusted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

# Dell's fixed resource ids on every iDRAC (7/8/9/10, monolithic servers): what Dell's own scripts
# and dellemc.openmanage address directly. Tried first on a Dell service (a 404 falls back to
# listing the collection), which saves listing Systems on every task.
DELL_MEMBER_IDS = {"Systems": "System.Embedded.1", "Managers": "iDRAC.Embedded.1"}
IDRAC8_MODELS = (12, 13)  # 12G/13G servers carry iDRAC7/8; both behave as "8" here
IDRAC9_MODELS = (14, 15, 16)
_MODEL_GEN = re.compile(r"\b(\d{2})G\b", re.IGNORECASE)


def generation_from_model(model: str | None) -> int | None:  # noqa: PLR0911
    """iDRAC generation from ``Manager.Model``; None when it is not a Dell "<nn>G" model string."""
    if not model:
        return None
    text = model.strip()
    lowered = text.lower()
    for gen in (10, 9, 8):
        if f"idrac{gen}" in lowered.replace(" ", ""):
            return gen
    match = _MODEL_GEN.search(text)
    if not match:
        return None
    server_gen = int(match.group(1))
    if server_gen in IDRAC8_MODELS:
        return 8
    if server_gen in IDRAC9_MODELS:
        return 9
    if server_gen >= 17:
        return 10
    return None


def vendor_of(root_json: Mapping[str, Any], manager_json: Mapping[str, Any]) -> str:
    """'Dell' or the vendor the service reports (root ``Vendor``, ``Oem`` keys, Manufacturer)."""
    vendor = root_json.get("Vendor") or manager_json.get("Manufacturer") or ""
    if not vendor:
        oem = root_json.get("Oem") or {}
        vendor = next(iter(oem), "") if isinstance(oem, Mapping) else ""
    if "dell" in str(vendor).lower():
        return "Dell"
    if not vendor and generation_from_model(manager_json.get("Model")):
        return "Dell"
    return str(vendor) or "unknown"


def root_vendor(root_json: Mapping[str, Any]) -> str | None:
    """'Dell', another vendor, or None when the service root does not say (old services)."""
    vendor = vendor_of(root_json, {})
    return None if vendor == "unknown" else vendor


def default_member_id(root_json: Mapping[str, Any], collection: str) -> str | None:
    """The member id to try before listing ``collection`` (Dell's fixed ids), None to list."""
    return DELL_MEMBER_IDS.get(collection) if root_vendor(root_json) == "Dell" else None


def generation_from_system(system_json: Mapping[str, Any]) -> int | None:
    """iDRAC generation from the System's ``Oem.Dell.DellSystem.SystemGeneration`` (iDRAC9+ has it)."""
    oem = system_json.get("Oem")
    dell = (oem.get("Dell") or {}) if isinstance(oem, Mapping) else {}
    dell_system = dell.get("DellSystem") if isinstance(dell, Mapping) else None
    if not isinstance(dell_system, Mapping):
        return None
    return generation_from_model(dell_system.get("SystemGeneration"))


def quirks_without_manager(root_json: Mapping[str, Any], system_json: Mapping[str, Any]) -> str | None:
    """Pure: the quirks name when the service root and System settle it, None when the Manager must.

    A root that names a vendor other than Dell is ``generic``; a Dell System that states its
    generation (``SystemGeneration``, iDRAC9 has it) gets that generation's quirks. Anything else (a
    Dell System without it, a root without ``Vendor``/``Oem``) needs ``Manager.Model``.
    """
    vendor = root_vendor(root_json)
    if vendor is None:
        return None
    if vendor != "Dell":
        return "generic"
    return {8: "dell_idrac8", 9: "dell_idrac9", 10: "dell_idrac9"}.get(generation_from_system(system_json) or 0)


@dataclass(frozen=True)
class BmcIdentity:
    vendor: str
    model: str | None  # Manager.Model (iDRAC: "13G Monolithic"), the BMC model
    system_model: str | None  # the server model (ComputerSystem.Model, e.g. "PowerEdge R730")
    generation: int | None  # iDRAC generation 8/9/10; None for non-Dell
    firmware: str | None
    redfish_version: str | None
    virtual_media_on: str  # "system", "manager" or "none"
    dell_lc_service: bool  # Links.Oem.Dell.DellLCService present (iDRAC9+); absent on iDRAC8
    boot_sources: bool  # Dell BootSources resource present (iDRAC8/9 BIOS boot sequence)
    boot_order: bool  # Boot.BootOrder exposed on the System

    @property
    def quirks_name(self) -> str:
        """Which quirks implementation applies (see ``quirks.for_identity``)."""
        if self.vendor == "Dell" and self.generation == 8:
            return "dell_idrac8"
        if self.vendor == "Dell" and self.generation in (9, 10):
            return "dell_idrac9"
        return "generic"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "quirks": self.quirks_name}


def identify(
    root_json: Mapping[str, Any], manager_json: Mapping[str, Any], system_json: Mapping[str, Any]
) -> BmcIdentity:
    """Pure: the identity and features from the three resources every module reads anyway."""
    vendor = vendor_of(root_json, manager_json)
    generation = generation_from_model(manager_json.get("Model")) if vendor == "Dell" else None
    dell_links = ((manager_json.get("Links") or {}).get("Oem") or {}).get("Dell") or {}
    if system_json.get("VirtualMedia"):
        vm_on = "system"
    elif manager_json.get("VirtualMedia"):
        vm_on = "manager"
    else:
        vm_on = "none"
    boot = system_json.get("Boot") or {}
    oem_dell_sys = (
        ((system_json.get("Oem") or {}).get("Dell") or {}) if isinstance(system_json.get("Oem"), Mapping) else {}
    )
    boot_sources = bool(
        ((system_json.get("Links") or {}).get("Oem") or {}).get("Dell", {}).get("BootSources")
        or oem_dell_sys.get("BootSources")
        or system_json.get("BootSources")
        or (vendor == "Dell" and generation == 8)
    )
    return BmcIdentity(
        vendor=vendor,
        model=manager_json.get("Model"),
        system_model=system_json.get("Model"),
        generation=generation,
        firmware=manager_json.get("FirmwareVersion"),
        redfish_version=root_json.get("RedfishVersion"),
        virtual_media_on=vm_on,
        dell_lc_service=bool(dell_links.get("DellLCService")),
        boot_sources=boot_sources,
        boot_order="BootOrder" in boot,
    )


def detect(client: Any) -> BmcIdentity:
    """Identify the BMC behind an open ``RedfishClient`` (no extra requests: reuses its resources)."""
    return identify(client.root.json, client.manager.json, client.system.json)


def detect_quirks(client: Any) -> str:
    """The quirks name for an open client; reads the Manager only when root and System leave it open."""
    name = quirks_without_manager(client.root.json, client.system.json)
    return name if name is not None else detect(client).quirks_name
