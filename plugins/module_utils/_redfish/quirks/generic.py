# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Standard Redfish behaviour (DMTF), also the base of the Dell quirks.

Boot override through ``set_system_boot_options`` (one GET + one PATCH with If-Match), persistent
order through ``Boot.BootOrder`` with the ETag, never resent without it (sushy has no API for it:
openstack/sushy 5.x never touches ``Boot.BootOrder``; ``RedfishClient.patch`` bypasses sushy's 412 handler), virtual
media on the System with a fallback to the Manager, BMC reset through ``Manager.Reset``.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._redfish.errors import RedfishError, UnsupportedError

from . import BootOrderState
from .bios_settings import GENERIC, BiosSettings

try:
    import sushy
except ImportError:  # pragma: no cover - guarded by session.SUSHY_IMPORT_ERROR
    sushy = None

# Module vocabulary -> BootSourceOverrideTarget. ``virtual_cd`` is ``Cd`` wherever the BMC maps Cd
# to its virtual drive (DMTF, iDRAC9 >= 4.40); iDRAC8 overrides this (Cd = physical drive).
DEVICE_TARGETS: dict[str, str] = {
    "pxe": "Pxe",
    "hdd": "Hdd",
    "cd": "Cd",
    "virtual_cd": "Cd",
    "bios_setup": "BiosSetup",
    "uefi_http": "UefiHttp",
}
# Manager.Reset values in order of preference for "restart the BMC".
BMC_RESETS = ("GracefulRestart", "ForceRestart")


class Generic:
    name = "generic"
    bios_settings: BiosSettings = GENERIC

    def virtual_media_slots(self, client: Any) -> list[Any]:
        system = client.system
        try:
            return list(system.virtual_media.get_members())
        except sushy.exceptions.MissingAttributeError:
            pass
        try:
            return list(client.manager.virtual_media.get_members())
        except sushy.exceptions.MissingAttributeError as exc:
            raise UnsupportedError("The BMC exposes no VirtualMedia on its System or Manager") from exc

    def set_one_time_boot(self, client: Any, device: str, persistent: bool) -> dict[str, Any]:
        target = DEVICE_TARGETS[device]
        enabled = "Continuous" if persistent else "Once"
        system = client.system
        allowed = {getattr(v, "value", v) for v in (system.boot.allowed_values or [])}
        if allowed and target not in allowed:
            raise UnsupportedError(
                f"device {device!r}: the BMC does not offer BootSourceOverrideTarget {target!r} "
                f"(it allows {', '.join(sorted(allowed))})"
            )
        kwargs: dict[str, Any] = {"target": sushy.BootSource(target)}
        current_enabled = getattr(system.boot.enabled, "value", system.boot.enabled)
        if current_enabled != enabled:
            kwargs["enabled"] = sushy.BootSourceOverrideEnabled(enabled)
        client.call(f"Setting the boot override to {target} ({enabled})", system.set_system_boot_options, **kwargs)
        # Verify with one GET. Only the target: some services (sushy-tools) always report Continuous.
        seen = (client.get_json(client.system_path(), "Verifying the boot override").get("Boot") or {}).get(
            "BootSourceOverrideTarget"
        )
        if seen != target:
            raise RedfishError(f"The BMC accepted BootSourceOverrideTarget {target!r} but reports {seen!r}")
        return {"method": "BootSourceOverride", "target": target, "enabled": enabled, "verified": True}

    def set_boot_mode(self, client: Any, mode: str) -> dict[str, Any]:
        system = client.system
        client.call(
            f"Setting BootSourceOverrideMode to {mode}",
            system.set_system_boot_options,
            mode=sushy.BootSourceOverrideMode(mode),
        )
        return {"method": "BootSourceOverrideMode", "mode": mode}

    def read_boot_order(self, client: Any) -> BootOrderState:
        path = client.system_path()
        body, etag = client.get_with_etag(path, "Reading the boot order")
        boot = body.get("Boot") or {}
        if "BootOrder" not in boot:
            raise UnsupportedError("The BMC does not expose Boot.BootOrder on the System")
        order = [str(x) for x in boot.get("BootOrder") or []]
        names = {x: x for x in order}
        options_link = (boot.get("BootOptions") or {}).get("@odata.id")
        if options_link:
            collection = client.get_json(options_link, "Listing boot options")
            for member in collection.get("Members") or []:
                option = (
                    member
                    if "BootOptionReference" in member
                    else client.get_json(member["@odata.id"], "Reading a boot option")
                )
                ref = option.get("BootOptionReference") or option.get("Id")
                for alias in (option.get("DisplayName"), option.get("Id"), option.get("Name")):
                    if alias and ref:
                        names.setdefault(str(alias), str(ref))
        return BootOrderState(order=order, names=names, source="Boot.BootOrder", etag=etag)

    def set_boot_order(self, client: Any, state: BootOrderState, new_order: list[str]) -> dict[str, Any]:
        """PATCH the full order with ``If-Match: <ETag read with it>``; a 412 raises ``PreconditionFailed``."""
        response = client.patch(
            client.system_path(), {"Boot": {"BootOrder": new_order}}, "Setting Boot.BootOrder", etag=state.etag
        )
        # Dell 14G+ answers with the BIOS job that applies the order at the next boot.
        location = (getattr(response, "headers", None) or {}).get("Location") or ""
        job_id = location.rstrip("/").rsplit("/", 1)[-1] if "/Jobs/" in location else None
        return {"method": "Boot.BootOrder", "job_id": job_id}

    def commit_bios(self, client: Any) -> str | None:
        return None

    def reset_bmc(self, client: Any) -> str:
        manager = client.manager
        actions = (manager.json.get("Actions") or {}).get("#Manager.Reset")
        if not actions:
            raise UnsupportedError("The BMC's Manager has no #Manager.Reset action")
        allowed = actions.get("ResetType@Redfish.AllowableValues") or list(BMC_RESETS)
        choice = next((value for value in BMC_RESETS if value in allowed), None)
        if choice is None:
            raise UnsupportedError(f"Manager.Reset allows only {allowed}; none restarts the BMC")
        client.call(f"Resetting the BMC ({choice})", manager.reset_manager, sushy.ResetType(choice))
        return f"Manager.Reset {choice}"
