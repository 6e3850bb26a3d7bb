# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Dell iDRAC9/iDRAC10: standard Redfish plus Dell's own iDRAC reset.

Boot order is ``Boot.BootOrder`` with ETags (applied by the iDRAC at the next reboot), one-time
virtual CD boot is the standard ``Cd`` + ``Once`` (iDRAC9 >= 4.40), virtual media is on the System
from 6.00.02 on (on the Manager before; the generic fallback finds both). The iDRAC itself is
restarted through ``DelliDRACCardService.iDRACReset`` when it exists, else ``Manager.Reset``.

This file is PRIVATE to the collection: other collections must not import it.
"""

from __future__ import annotations

from typing import Any

from .generic import Generic


class DellIdrac9(Generic):
    name = "dell_idrac9"

    def reset_bmc(self, client: Any) -> str:
        dell = ((client.manager.json.get("Links") or {}).get("Oem") or {}).get("Dell") or {}
        if not dell.get("DelliDRACCardService"):
            return super().reset_bmc(client)
        oem = client.call("Loading Dell's OEM extension", client.manager.get_oem_extension, "Dell")
        # wait=False: our own readiness wait (session.wait_ready) follows, with the module's timeout.
        client.call("Resetting the iDRAC (Dell iDRACReset)", oem.reset_idrac, wait=False)
        return "DelliDRACCardService.iDRACReset"
