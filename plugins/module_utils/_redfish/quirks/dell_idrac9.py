# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Dell iDRAC9/iDRAC10: standard Redfish plus Dell's own iDRAC reset.

Boot order is ``Boot.BootOrder`` with ETags (applied by the iDRAC at the next reboot), one-time
virtual CD boot is the standard ``Cd`` + ``Once`` (iDRAC9 >= 4.40), virtual media is on the System
from 6.00.02 on (on the Manager before; the generic fallback finds both). The iDRAC itself is
restarted through ``DelliDRACCardService.iDRACReset`` when it exists, else ``Manager.Reset``.
``BootSourceOverrideMode`` is a BIOS setting here: the PATCH queues a BIOS job that the next reboot
runs (ironcore-dev/metal-operator#81), so its id is taken from the answer's ``Location``, like the order's job, and
a reboot waits for it instead of returning while the mode is still the old one.
"""

from __future__ import annotations

from typing import Any

from .bios_settings import DELL, BiosSettings
from .generic import Generic


def job_id_from(response: Any) -> str | None:
    """Pure: the Dell job id in a PATCH answer's ``Location`` (``.../Jobs/JID_123``), else None."""
    location = (getattr(response, "headers", None) or {}).get("Location") or ""
    return location.rstrip("/").rsplit("/", 1)[-1] if "/Jobs/" in location else None


class DellIdrac9(Generic):
    name = "dell_idrac9"
    bios_settings: BiosSettings = DELL

    def set_boot_mode(self, client: Any, mode: str) -> dict[str, Any]:
        path = client.system_path()
        body, etag = client.get_with_etag(path, "Reading the System before setting the boot mode")
        if body.get("@Redfish.Settings"):  # iDRAC10: Boot is written through the Settings resource
            return super().set_boot_mode(client, mode)
        response = client.patch(
            path, {"Boot": {"BootSourceOverrideMode": mode}}, f"Setting BootSourceOverrideMode to {mode}", etag=etag
        )
        return {"method": "BootSourceOverrideMode", "mode": mode, "job_id": job_id_from(response)}

    def reset_bmc(self, client: Any) -> str:
        dell = ((client.manager.json.get("Links") or {}).get("Oem") or {}).get("Dell") or {}
        if not dell.get("DelliDRACCardService"):
            return super().reset_bmc(client)
        oem = client.call("Loading Dell's OEM extension", client.manager.get_oem_extension, "Dell")
        # wait=False: our own readiness wait (session.wait_ready) follows, with the module's timeout.
        client.call("Resetting the iDRAC (Dell iDRACReset)", oem.reset_idrac, wait=False)
        return "DelliDRACCardService.iDRACReset"
