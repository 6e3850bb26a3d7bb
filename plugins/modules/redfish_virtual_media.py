# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Insert or eject virtual media over Redfish, verified, with iDRAC recovery."""

from __future__ import annotations

DOCUMENTATION = r"""
module: redfish_virtual_media
short_description: Insert or eject virtual media over Redfish, verified, recovering from iDRAC mount failures
description:
  - O(state=inserted) mounts O(image_url) write-protected in a CD slot (or the given O(slot)) and verifies that the
    slot reports it inserted. An already mounted identical image is left alone; another image is ejected first.
  - O(state=ejected) ejects one slot (O(slot)), the slots of one O(media_type), or all slots, and verifies.
  - Slots are found on the System (iDRAC9 6.x+, iDRAC10, DMTF) or on the Manager (iDRAC8).
  - On the known iDRAC failures (SYS446, RAC0508, RAC0904, VRM0021, VRM0012, InternalError, a mount that never
    shows as inserted) it ejects every slot, waits O(retry_delay) and retries; if that fails it resets the BMC,
    waits until it is ready again, logs in again and retries once. C(recovered_by) tells which was needed.
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
  state:
    description: V(inserted) or V(ejected).
    type: str
    required: true
    choices: [inserted, ejected]
  image_url:
    description: C(http://) or C(https://) URL of the image, reachable from the BMC. Required with O(state=inserted).
    type: str
  slot:
    description: Slot id (for example C(CD), C(1)). Default is the first slot supporting O(media_type).
    type: str
  media_type:
    description:
      - Media type the slot must support. For O(state=inserted) the default is V(cd). For O(state=ejected) without
        O(slot) and O(media_type), every slot is ejected.
    type: str
    choices: [cd, removable_disk]
  max_recovery:
    description: Highest recovery step allowed. V(none) fails on the first error.
    type: str
    choices: [none, eject_retry, bmc_reset]
    default: bmc_reset
  retry_delay:
    description: Seconds to wait after ejecting everything before retrying.
    type: int
    default: 5
  verify_timeout:
    description: Seconds to wait for a slot to report the inserted or ejected state.
    type: int
    default: 30
  bmc_ready_timeout:
    description: Seconds to wait for the BMC after a recovery reset.
    type: int
    default: 600
"""

EXAMPLES = r"""
- name: Mount the installer ISO
  metalplane.inference.redfish_virtual_media:
    bmc_url: https://idrac-r730.example
    username: root
    password: "{{ vault_idrac_password }}"
    state: inserted
    image_url: http://10.0.0.5/isos/rocky-9.iso
  register: media

- name: Eject everything
  metalplane.inference.redfish_virtual_media:
    bmc_url: https://idrac-r730.example
    username: root
    password: "{{ vault_idrac_password }}"
    state: ejected
"""

RETURN = r"""
recovered_by:
  description: Recovery that was needed, V(none), V(eject_retry) or V(bmc_reset).
  returned: always
  type: str
slot:
  description: Slot id used for an insert.
  returned: when O(state=inserted)
  type: str
ejected:
  description: Slot ids that were (or would be) ejected.
  returned: when O(state=ejected)
  type: list
  elements: str
slots:
  description: The slots at the end (C(id), C(media_types), C(inserted), C(image), C(write_protected)).
  returned: always
  type: list
  elements: dict
steps:
  description: What was done, in order (inserts, ejects, recovery steps).
  returned: when changed and not in check mode
  type: list
  elements: str
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

from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.args import (
    BMC_READY_TIMEOUT,
    redfish_argument_spec,
)
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.runner import run_virtual_media


def argument_spec() -> dict[str, Any]:
    return {
        **redfish_argument_spec(),
        "state": {"type": "str", "required": True, "choices": ["inserted", "ejected"]},
        "image_url": {"type": "str"},
        "slot": {"type": "str"},
        "media_type": {"type": "str", "choices": ["cd", "removable_disk"]},
        "max_recovery": {"type": "str", "default": "bmc_reset", "choices": ["none", "eject_retry", "bmc_reset"]},
        "retry_delay": {"type": "int", "default": 5},
        "verify_timeout": {"type": "int", "default": 30},
        "bmc_ready_timeout": {"type": "int", "default": BMC_READY_TIMEOUT},
    }


def main() -> None:
    MetalplaneModule(
        argument_spec=argument_spec(),
        supports_check_mode=True,
        required_if=[["state", "inserted", ["image_url"]]],
    ).run(run_virtual_media)


if __name__ == "__main__":
    main()
