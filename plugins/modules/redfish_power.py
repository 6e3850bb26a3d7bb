# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Set a server's power state over Redfish and wait until it is reached."""

from __future__ import annotations

DOCUMENTATION = r"""
module: redfish_power
short_description: Power a server on, off, restart or cycle it over Redfish, and wait for the result
description:
  - Brings the server's power to O(state) and waits until the BMC reports it.
  - Idempotent for V(on), V(off) and V(forced_off). V(restarted) and V(cycled) always act (and power on a server
    that is off).
  - Only ResetType values the BMC advertises in C(AllowableValues) are sent.
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
    description:
      - V(on) powers on. V(off) shuts down gracefully, then forces off after O(graceful_timeout) when
        O(force_off_after_timeout=true). V(forced_off) forces off at once. V(restarted) restarts
        (ForceRestart, else GracefulRestart, else PowerCycle). V(cycled) power-cycles.
    type: str
    required: true
    choices: ["on", "off", forced_off, restarted, cycled]
  force_off_after_timeout:
    description:
      - With O(state=off), send C(ForceOff) when the graceful shutdown has not finished after O(graceful_timeout).
    type: bool
    default: true
  graceful_timeout:
    description: Seconds to wait for a graceful shutdown before forcing.
    type: int
    default: 90
  wait_timeout:
    description: Seconds to wait until the power state is reached.
    type: int
    default: 300
"""

EXAMPLES = r"""
- name: Power on the R730
  metalplane.inference.redfish_power:
    bmc_url: https://idrac-r730.example
    username: root
    password: "{{ vault_idrac_password }}"
    state: "on"

- name: Shut down, forcing after 2 minutes
  metalplane.inference.redfish_power:
    bmc_url: https://idrac-r730.example
    username: root
    password: "{{ vault_idrac_password }}"
    state: "off"
    graceful_timeout: 120
"""

RETURN = r"""
power_state:
  description: Power state at the end.
  returned: success
  type: str
  sample: "On"
power_state_before:
  description: Power state before the task.
  returned: success
  type: str
planned:
  description: ResetType values planned (also in check mode).
  returned: success
  type: list
  elements: str
actions:
  description: ResetType values sent.
  returned: success
  type: list
  elements: str
forced:
  description: Whether V(off) had to fall back to ForceOff.
  returned: when changed
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
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.runner import run_power


def argument_spec() -> dict[str, Any]:
    return {
        **redfish_argument_spec(),
        "state": {"type": "str", "required": True, "choices": ["on", "off", "forced_off", "restarted", "cycled"]},
        "force_off_after_timeout": {"type": "bool", "default": True},
        "graceful_timeout": {"type": "int", "default": 90},
        **wait_timeout_spec(300),
    }


def main() -> None:
    MetalplaneModule(argument_spec=argument_spec(), supports_check_mode=True).run(run_power)


if __name__ == "__main__":
    main()
