# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Set the boot device (once or persistently), the boot mode and the persistent boot order over Redfish."""

from __future__ import annotations

DOCUMENTATION = r"""
module: redfish_boot
short_description: Boot device, boot mode and persistent boot order over Redfish, with iDRAC8/9 quirks handled
description:
  - Sets the next (or every) boot device with O(device), the boot mode with O(mode) and the persistent boot
    order with O(order). Only what differs is written; the mode is never re-sent when unchanged.
  - On iDRAC8 (13G, for example an R730) the order and the mode are BIOS settings, written to C(BootSources/Settings)
    or C(Bios/Settings) and applied by a BIOS configuration job at the next reboot (O(reboot)). A one-time
    O(device=virtual_cd) goes through Dell's configuration import (SCP), because C(Cd) boots the physical drive there.
    While a BIOS configuration job is scheduled, the order compared and changed is the pending one in
    C(BootSources/Settings), the one the next POST applies, and a change joins that job.
  - On iDRAC9 and other BMCs the order is C(Boot.BootOrder), written with the resource's ETag (C(If-Match)). When the
    BMC answers 412 (another writer changed the System since it was read), the order is read again, planned again from
    what is there now and written once more with the new ETag (RV(actions) shows C(replanned=true); nothing is written
    when the order already satisfies O(order)). A second 412 fails with a conflict error on O(order). The write is never
    sent without C(If-Match).
  - With O(verify_after_reboot=true) the server is rebooted after the order was changed, the order is read back,
    and re-applied once if the BMC reverted it (result C(reapplied=true)).
version_added: 0.1.0
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.redfish
  - metalplane.inference.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
options:
  device:
    description:
      - Boot device to set. V(virtual_cd) is the BMC's virtual CD (an inserted ISO), V(cd) the physical drive.
    type: str
    choices: [pxe, hdd, cd, virtual_cd, bios_setup, uefi_http]
  persistent:
    description: V(false) boots O(device) once; V(true) on every boot.
    type: bool
    default: false
  mode:
    description: Boot mode. Written only when it differs from the current one.
    type: str
    choices: [UEFI, Legacy]
  order:
    description:
      - Persistent boot order, first entry first. Entries are boot option ids (C(Boot0003), C(NIC.Integrated.1-1-1))
        or display names. Entries not listed keep their relative order after the listed ones.
    type: list
    elements: str
  first:
    description:
      - Put the persistent boot order's first entry of this kind at the front, the rest keeping their order; nothing
        is written when it already is first. V(hdd) is the disk (C(HardDisk.List.1-1), C(RAID.Integrated.1-1), a
        "Hard Disk"/"RAID"/"NVMe" boot option), V(virtual_cd) the BMC's virtual optical drive
        (C(Optical.iDRACVirtual.1-1), "Virtual Optical Drive"), which then boots an inserted ISO ahead of an OS on
        the disk. The kind is read from each entry's id and display names; an order without such an entry fails
        naming the entries. Mutually exclusive with O(order).
    type: str
    choices: [hdd, virtual_cd]
  reboot:
    description: Reboot the server after the change so pending BIOS jobs apply, and wait for those jobs.
    type: bool
    default: false
  verify_after_reboot:
    description:
      - After changing O(order), reboot, read the order back and re-apply it once if the BMC reverted it.
        Implies a reboot.
    type: bool
    default: false
  wait_timeout:
    description: Seconds to wait for power transitions and BIOS jobs.
    type: int
    default: 900
"""

EXAMPLES = r"""
- name: Disk first in the persistent order, whatever the BMC calls it (nothing is written when it already is)
  metalplane.inference.redfish_boot:
    bmc_url: https://idrac-r730.example
    username: root
    password: "{{ vault_idrac_password }}"
    first: hdd

- name: Boot the mounted ISO once (iDRAC8 uses Dell's SCP import for this)
  metalplane.inference.redfish_boot:
    bmc_url: https://idrac-r730.example
    username: root
    password: "{{ vault_idrac_password }}"
    device: virtual_cd

- name: PXE first, disk second, and make sure it sticks after the next boot
  metalplane.inference.redfish_boot:
    bmc_url: https://idrac-r730.example
    username: root
    password: "{{ vault_idrac_password }}"
    order: [NIC.Integrated.1-1-1, HardDisk.List.1-1]
    verify_after_reboot: true
  register: boot
"""

RETURN = r"""
quirks:
  description: Code path used (C(dell_idrac8), C(dell_idrac9), C(generic)).
  returned: always
  type: str
plan:
  description: What was (or in check mode would be) written, C(mode), C(order), C(override).
  returned: always
  type: dict
actions:
  description:
    - What was written, one entry per write (method, job id).
    - C(replanned=true) on the boot order write when the first attempt was refused with HTTP 412 and the order was
      read and planned again.
  returned: always
  type: list
  elements: dict
jobs:
  description: BIOS configuration job ids created (iDRAC8).
  returned: always
  type: list
  elements: str
rebooted:
  description: Whether the server was rebooted.
  returned: always
  type: bool
reapplied:
  description: Whether the order was reverted by the BMC after the reboot and written again.
  returned: always
  type: bool
requests:
  description: Number of HTTP requests the task sent to the BMC.
  returned: always
  type: int
auth_fallback:
  description:
    - Whether the BMC refused a write sent with HTTP Basic auth (HTTP 401 or 403) although reads with the same
      credentials worked, so the task opened a Redfish session, sent that write once more with it, used the
      session for the rest of the task and deleted it at the end.
    - When V(true), a warning suggests O(auth=session) for this BMC, which saves the refused request.
  returned: always
  type: bool
  sample: false
"""

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.args import wait_timeout_spec
from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.args import redfish_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.runner import run_boot


def argument_spec() -> dict[str, Any]:
    return {
        **redfish_argument_spec(),
        "device": {"type": "str", "choices": ["pxe", "hdd", "cd", "virtual_cd", "bios_setup", "uefi_http"]},
        "persistent": {"type": "bool", "default": False},
        "mode": {"type": "str", "choices": ["UEFI", "Legacy"]},
        "order": {"type": "list", "elements": "str"},
        "first": {"type": "str", "choices": ["hdd", "virtual_cd"]},
        "reboot": {"type": "bool", "default": False},
        "verify_after_reboot": {"type": "bool", "default": False},
        **wait_timeout_spec(900),
    }


def main() -> None:
    MetalplaneModule(
        argument_spec=argument_spec(),
        supports_check_mode=True,
        required_one_of=[["device", "mode", "order", "first"]],
        mutually_exclusive=[["order", "first"]],
    ).run(run_boot)


if __name__ == "__main__":
    main()
