# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the shared Redfish connection options (``module_utils/_redfish/args.py``)."""

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
      - Verify the BMC's TLS certificate. Turn off only for self-signed lab BMCs; prefer O(ca_cert).
    type: bool
    default: true
  ca_cert:
    description:
      - PEM file (or directory) of the CA that signed the BMC certificate. Used when O(validate_certs=true).
    type: path
  api_timeout:
    description:
      - Seconds each HTTP request to the BMC may take (the connection itself at most 10 seconds of them).
      - Not the deadline of a wait, which is C(wait_timeout) in the modules that wait.
    type: int
    default: 30
  auth:
    description:
      - How to authenticate to the BMC.
      - V(basic) sends the credentials with every request (HTTP Basic over TLS). No Redfish session is
        created on the BMC, so none can pile up or be left behind by an interrupted task. This matters on
        iDRAC8, which allows only a few sessions and then refuses logins with a misleading 401.
        It is also two requests cheaper per task.
      - With V(basic), if the BMC refuses a write (HTTP 401 or 403) although reads with the same credentials
        worked (firmware said to accept Basic only for reads), the task opens one Redfish session, sends that
        write once more with it, uses the session for the rest of the task and deletes it at the end, also on
        failure. RV(auth_fallback) reports it and a warning suggests V(session) for that BMC. If the session
        cannot be created or is refused the same write, the task fails with an authentication error and
        nothing is changed.
      - V(session) opens one Redfish session per task and always deletes it at the end, also on failure.
        If the BMC refuses to create a session, HTTP Basic is used instead.
        Use it for BMCs with HTTP Basic authentication disabled (C(AccountService.HTTPBasicAuth)) and for
        BMCs that accept Basic for reads only (it saves the refused write of the automatic fallback).
    type: str
    choices: [basic, session]
    default: basic
  system_id:
    description:
      - Id of the ComputerSystem (for example C(System.Embedded.1)).
      - Default on a Dell iDRAC is C(System.Embedded.1). If that is missing, the first member of C(Systems) is used.
      - On a BMC that supports the C(only) query (DSP0266), its single member is read with one request.
      - Otherwise the first member of C(Systems) is used.
    type: str
  manager_id:
    description:
      - Id of the Manager (for example C(iDRAC.Embedded.1)). Default is the first member.
    type: str
  refused_login_retries:
    description:
      - Times a login the BMC refuses with HTTP 401 is tried again, 15 seconds apart (0 to 3).
      - An iDRAC that restarts (its watchdog, a firmware update, a reset by another tool) refuses valid credentials
        for a moment before it serves again; a task that starts in that moment fails unless it tries again.
      - Leave V(0) where the credentials are not proven. Each try of a wrong password counts toward the BMC's
        blocking of the address after failed logins (iDRAC IPBlocking). Role C(baremetal_host) sets it (variable
        C(baremetal_host_refused_login_retries), default 2) for the tasks after its claim or teardown plan logged in
        to the BMC with the same credentials.
      - Requests the BMC answers busy (HTTP 503 or 429, for example Dell SYS518 while it starts), the login
        included, are always asked again, about 15 seconds in all; the result's C(api_requests.retries) counts them
        (present only when there were some).
    type: int
    default: 0
notes:
  - With the default O(auth=basic) no Redfish session is created, unless the BMC refuses a write to HTTP Basic
    (see O(auth)). With O(auth=session) one session is opened per task and always deleted at the end.
    Every result carries C(requests), the number of HTTP exchanges the task made.
requirements:
  - sushy >= 5.6
"""
