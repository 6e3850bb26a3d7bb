# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the shared Redfish connection options (``module_utils/_redfish/args.py``).

PRIVATE to the collection: other collections must not use it.
"""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  bmc_url:
    description:
      - URL of the BMC, C(https://host[:port]). C(http://) is accepted for lab emulators only.
      - A trailing C(/redfish/v1) is ignored. A path prefix is kept (emulators serving many BMCs).
    type: str
    required: true
  username:
    description:
      - BMC user name. Falls back to the environment variable E(REDFISH_USERNAME).
    type: str
    required: true
  password:
    description:
      - BMC password. Falls back to the environment variable E(REDFISH_PASSWORD).
    type: str
    required: true
  validate_certs:
    description:
      - Verify the BMC's TLS certificate. Turn off only for self-signed lab BMCs; prefer O(ca_path).
    type: bool
    default: true
  ca_path:
    description:
      - PEM file (or directory) of the CA that signed the BMC certificate. Used when O(validate_certs=true).
    type: path
  timeout:
    description:
      - Timeout in seconds of each HTTP request to the BMC.
    type: int
    default: 30
  system_id:
    description:
      - Id of the ComputerSystem (for example C(System.Embedded.1)). Default is the first member.
    type: str
  manager_id:
    description:
      - Id of the Manager (for example C(iDRAC.Embedded.1)). Default is the first member.
    type: str
notes:
  - A Redfish session is opened per task and always deleted at the end, since iDRAC8 allows only a few
    concurrent sessions. If the BMC has no session service, HTTP Basic authentication is used.
requirements:
  - sushy >= 5.6
"""
