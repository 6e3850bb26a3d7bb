# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read a BMC's identity and state over Redfish (read-only)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: redfish_info
short_description: Facts about a server and its BMC over Redfish (vendor, iDRAC generation, power, boot, media, NICs)
description:
  - Reads, without changing anything, what later roles need about a bare-metal server and its BMC.
  - Vendor, BMC model, iDRAC generation (8, 9 or 10, from C(Manager.Model)), firmware, power state and allowed
    resets, boot override, boot mode (the override's and the BIOS C(BootMode)) and persistent boot order (on
    iDRAC8 the Dell C(BootSources) sequence, or its pending C(Settings) while a BIOS job is scheduled to apply them
    at the next POST, as C(boot.order_source) says), virtual media slots, whether one can hold a CD image, and what is
    mounted, NICs with MAC addresses, PCIe devices and GPUs, memory, drives with their WWN and serial where the
    BMC exposes them, asset tag and serial number.
  - Parts the BMC does not expose are returned empty.
version_added: 0.1.0
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.redfish
  - metalplane.inference.attributes.info_module
options: {}
"""

EXAMPLES = r"""
- name: Read the BMC
  metalplane.inference.redfish_info:
    bmc_url: https://idrac-r730.example
    username: root
    password: "{{ vault_idrac_password }}"
    ca_cert: /etc/pki/idrac-ca.pem
  register: bmc

- name: Use the generation
  ansible.builtin.debug:
    msg: "iDRAC{{ bmc.redfish.generation }} {{ bmc.redfish.power_state }}"
"""

RETURN = r"""
redfish:
  description: Facts about the server and its BMC.
  returned: success
  type: dict
  contains:
    vendor:
      description: Vendor (C(Dell) for iDRACs).
      type: str
      returned: always
    model:
      description: C(Manager.Model), for example C(13G Monolithic).
      type: str
      returned: always
    system_model:
      description: The server model, for example C(PowerEdge R730).
      type: str
      returned: always
    generation:
      description: iDRAC generation (8, 9, 10), null for other vendors.
      type: int
      returned: always
    firmware:
      description: BMC firmware version.
      type: str
      returned: always
    power_state:
      description: C(On), C(Off), ...
      type: str
      returned: always
    allowed_resets:
      description: ResetType values the System accepts.
      type: list
      elements: str
      returned: always
    quirks:
      description: Code path used for this BMC (C(dell_idrac8), C(dell_idrac9), C(generic)).
      type: str
      returned: always
    memory_gib:
      description: C(MemorySummary.TotalSystemMemoryGiB), null when not reported.
      type: float
      returned: always
    boot:
      description:
        - Boot override target/enabled/mode, persistent C(order), the BIOS C(bios_boot_mode) (V(Uefi) or V(Bios),
          null without a Bios resource) and on iDRAC8 C(boot_sources).
      type: dict
      returned: always
    virtual_media_available:
      description:
        - Whether a virtual media slot can hold a CD/DVD image. False on a BMC without the licence virtual media
          needs (iDRAC8 Express; iDRAC8 Enterprise has it).
      type: bool
      returned: always
    storage:
      description:
        - The drives of the System's storage subsystems, C(id), C(name), C(model), C(serial), C(wwn) (from an NAA or
          EUI durable name, as V(0x...) in lower case, udev's C(ID_WWN) form), C(capacity_bytes), C(media_type),
          C(protocol).
      type: list
      elements: dict
      returned: always
    virtual_media:
      description: Slots with C(id), C(media_types), C(inserted), C(image).
      type: list
      elements: dict
      returned: always
    nics:
      description: Ethernet interfaces with C(mac).
      type: list
      elements: dict
      returned: always
    pcie_devices:
      description:
        - PCIe devices where exposed, each with C(id), C(name), C(manufacturer), C(model), C(device_type), the
          C(classes) of its functions and their C(pci_ids) (C(vendor:device) in lower-case hex, for example
          C(10de:1db6)) where the BMC lists PCIe functions.
      type: list
      elements: dict
      returned: always
    gpus:
      description: The PCIe devices that are GPUs/accelerators.
      type: list
      elements: dict
      returned: always
    asset_tag:
      description: The System's asset tag.
      type: str
      returned: always
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
    - This module only reads, so it is V(false) here.
  returned: always
  type: bool
  sample: false
"""

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.args import redfish_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.runner import run_info


def argument_spec() -> dict[str, Any]:
    return redfish_argument_spec()


def main() -> None:
    MetalplaneModule(argument_spec=argument_spec(), supports_check_mode=True).run(run_info)


if __name__ == "__main__":
    main()
