# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Restart a BMC (iDRAC) and wait until it serves Redfish again."""

from __future__ import annotations

DOCUMENTATION = r"""
module: bmc_reset
short_description: Restart a BMC over Redfish and wait until it is ready again
description:
  - Restarts the BMC itself (not the server). iDRAC8 uses C(Manager.Reset GracefulRestart), iDRAC9 Dell's
    C(iDRACReset) where it exists, other BMCs C(Manager.Reset).
  - With O(wait=true) it waits until the BMC went down and answers again (a 401 counts as up; 503, SYS518 and
    SWC0700 mean keep waiting), then logs in again.
  - Always reports a change.
version_added: 0.1.0
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.redfish
  - metalplane.inference.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
options:
  wait:
    description: Wait until the BMC is ready again.
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait for the BMC (an iDRAC8 takes about 3.5 minutes).
    type: int
    default: 600
"""

EXAMPLES = r"""
- name: Reset the iDRAC and wait for it
  metalplane.inference.bmc_reset:
    bmc_url: https://idrac-r730.example
    username: root
    password: "{{ vault_idrac_password }}"
"""

RETURN = r"""
reset:
  description: The reset action that was sent (C(planned) in check mode).
  returned: always
  type: str
  sample: Manager.Reset GracefulRestart
ready:
  description: Whether the BMC was seen ready again.
  returned: when O(wait=true)
  type: bool
polls:
  description: Readiness polls needed.
  returned: when O(wait=true)
  type: int
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

from ansible_collections.metalplane.inference.plugins.module_utils._common.args import wait_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.args import (
    BMC_READY_TIMEOUT,
    redfish_argument_spec,
)
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.runner import run_bmc_reset


def argument_spec() -> dict[str, Any]:
    return {
        **redfish_argument_spec(),
        **wait_argument_spec(BMC_READY_TIMEOUT),
    }


def main() -> None:
    MetalplaneModule(argument_spec=argument_spec(), supports_check_mode=True).run(run_bmc_reset)


if __name__ == "__main__":
    main()
