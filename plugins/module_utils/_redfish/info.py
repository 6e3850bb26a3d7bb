# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What ``redfish_info`` reports: the facts later roles use, read-only.

Why: roles decide by generation (which quirks), by MAC (PXE/DHCP reservations), by GPU presence
and by what is mounted; one read gathers all of it with as few requests as the BMC allows. Parts a
BMC does not expose are reported as empty, never as an error.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import MetalplaneError

from .detect import detect
from .power import allowed_resets, current_power
from .quirks import for_name
from .virtual_media import slot_info

GPU_CLASSES = ("DisplayController", "ProcessingAccelerators")
GPU_VENDORS = ("nvidia", "amd", "advanced micro devices")


def _try(fn: Any, default: Any) -> Any:
    try:
        return fn()
    except MetalplaneError:
        return default
    except Exception:
        return default


def gather(client: Any) -> dict[str, Any]:
    identity = detect(client)
    quirks = for_name(identity.quirks_name)
    system = client.system
    sj = system.json
    boot = sj.get("Boot") or {}
    facts: dict[str, Any] = {
        "vendor": identity.vendor,
        "model": identity.model,
        "system_model": identity.system_model,
        "manufacturer": sj.get("Manufacturer"),
        "generation": identity.generation,
        "firmware": identity.firmware,
        "bios_version": sj.get("BiosVersion"),
        "redfish_version": identity.redfish_version,
        "serial_number": sj.get("SerialNumber"),
        "service_tag": sj.get("SKU")
        or ((sj.get("Oem") or {}).get("Dell") or {}).get("DellSystem", {}).get("ChassisServiceTag"),
        "asset_tag": sj.get("AssetTag"),
        "system_id": sj.get("Id"),
        "manager_id": client.manager.json.get("Id"),
        "quirks": identity.quirks_name,
        "features": identity.as_dict(),
        "power_state": current_power(client),
        "allowed_resets": _try(lambda: allowed_resets(system), []),
        "boot": {
            "override_target": boot.get("BootSourceOverrideTarget"),
            "override_enabled": boot.get("BootSourceOverrideEnabled"),
            "override_mode": boot.get("BootSourceOverrideMode"),
            "allowed_targets": boot.get("BootSourceOverrideTarget@Redfish.AllowableValues") or [],
            "order": boot.get("BootOrder"),
        },
    }
    order_state = _try(lambda: quirks.read_boot_order(client), None)
    if order_state is not None:
        facts["boot"]["order"] = order_state.order
        facts["boot"]["order_source"] = order_state.source
        if order_state.raw and "entries" in order_state.raw:
            facts["boot"]["boot_sources"] = order_state.raw["entries"]
    facts["virtual_media"] = _try(lambda: [slot_info(s) for s in quirks.virtual_media_slots(client)], [])
    facts["nics"] = _try(lambda: _nics(client), [])
    facts["pcie_devices"] = _try(lambda: _pcie(client), [])
    facts["gpus"] = [d for d in facts["pcie_devices"] if _is_gpu(d)]
    return facts


def _nics(client: Any) -> list[dict[str, Any]]:
    nics = []
    for nic in client.system.ethernet_interfaces.get_members():
        j = nic.json
        nics.append(
            {
                "id": j.get("Id"),
                "name": j.get("Name"),
                "mac": j.get("PermanentMACAddress") or j.get("MACAddress"),
                "link_status": j.get("LinkStatus"),
                "speed_mbps": j.get("SpeedMbps"),
            }
        )
    return nics


def _pcie(client: Any) -> list[dict[str, Any]]:
    refs = client.system.json.get("PCIeDevices") or []
    devices = []
    for ref in refs:
        j = client.get_json(ref["@odata.id"], "Reading a PCIe device")
        function_classes = []
        pci_ids = []
        functions = (j.get("PCIeFunctions") or {}).get("@odata.id")
        if functions:
            for member in client.get_json(functions, "Listing PCIe functions").get("Members") or []:
                function = client.get_json(member["@odata.id"], "Reading a PCIe function")
                function_classes.append(function.get("DeviceClass"))
                pci_id = _pci_id(function.get("VendorId"), function.get("DeviceId"))
                if pci_id and pci_id not in pci_ids:
                    pci_ids.append(pci_id)
        devices.append(
            {
                "id": j.get("Id"),
                "name": j.get("Name"),
                "manufacturer": j.get("Manufacturer"),
                "model": j.get("Model"),
                "device_type": j.get("DeviceType"),
                "classes": [c for c in function_classes if c],
                "pci_ids": pci_ids,
            }
        )
    return devices


def _pci_id(vendor: Any, device: Any) -> str | None:
    """``vendor:device`` in lower-case hex (``10de:1db6``) from PCIeFunction ``VendorId``/``DeviceId``
    (DMTF PCIeFunction v1: strings like ``0x10DE``); None when either is missing."""
    if not vendor or not device:
        return None
    return f"{str(vendor).lower().removeprefix('0x')}:{str(device).lower().removeprefix('0x')}"


def _is_gpu(device: dict[str, Any]) -> bool:
    if any(c in GPU_CLASSES for c in device.get("classes", [])):
        return True
    text = " ".join(str(device.get(k) or "") for k in ("manufacturer", "name", "model")).lower()
    return any(v in text for v in GPU_VENDORS) and any(
        w in text for w in ("gpu", "tesla", "nvidia", "instinct", "a100", "v100", "h100", "l40")
    )


# Public names for the readers other packages reuse (``_metal/pool.py`` checks a pool host's GPUs and
# NICs against a cluster's requirements with the same parsing ``redfish_info`` reports).
pcie_devices = _pcie
nics = _nics
is_gpu = _is_gpu
