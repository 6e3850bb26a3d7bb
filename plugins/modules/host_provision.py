# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Record one provisioning step of a claimed bare-metal host with its claim (and power it on for the install)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: host_provision
short_description: Record a claimed bare-metal host's install steps with its claim, power it on for the install
version_added: 0.1.0
description:
  - Keeps the provisioning record of the host that cluster O(cluster) holds in O(pool) on its claim Lease (an
    annotation written with the Lease's C(resourceVersion)), so that a later run, from any controller, knows where
    the install of the claim's generation stands (M(metalplane.inference.host_provision_info) reads it).
  - O(step=prepare) records the install disk (the pool host's C(root_disk)) and, once per claim, the persistent
    boot order as it was before this collection changed it (what a teardown restores).
  - O(step=install) records that the install of this generation started, with the SSH host key it installs
    (O(ssh_host_key), pinned for every later login), and powers the server on, in one call, so a run never sees one
    without the other. Once recorded it never powers the server on for an install of this generation again. If
    the power-on fails, the record is taken back.
  - O(step=wait_installed) waits, up to O(wait_timeout) seconds, for the installer's final power-off, and on the
    deadline says what the BMC showed last.
  - A BMC reset ejects the virtual media (Dell documents it for the iDRAC). O(step=install) checks that the
    installer ISO is still inserted before the power-on, and puts it back from O(media_url) (with the one-time boot
    from the virtual CD) when it is not. O(step=wait_installed) takes a server that is on with an empty virtual CD
    for an installer that lost its media (it stops at an error screen and never powers off). It inserts the ISO
    again, sets the one-time boot and restarts the server into the installer, at most O(media_retries) times, each
    with a fresh O(wait_timeout). The result's RV(recovered_by) makes it a recovery event on the timeline.
  - O(step=installed) and O(step=wiped) record the end of the install (after the node answered SSH with its marker)
    and the wipe of its disk (teardown).
  - O(step=recover) powers on a host that is recorded as installed for this generation and was found off (a power
    cut, its power button), never an install; the result's RV(recovered_by) makes it a recovery event on the
    timeline.
  - Every step is idempotent; one already recorded changes nothing.
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.attributes
  - metalplane.inference.modelplane
  - metalplane.inference.metal_pool
attributes:
  check_mode:
    support: full
    details:
      - Reports the record it would write; powers nothing on and does not wait.
  diff_mode:
    support: full
    details:
      - The provisioning record before and after (it holds no secret; the host key is the public one).
options:
  cluster:
    description: The cluster whose claimed host this is (the claim Lease's holder).
    type: str
    required: true
  step:
    description: The step to record (see the description).
    type: str
    required: true
    choices: [prepare, install, wait_installed, installed, recover, wiped]
  ssh_host_key:
    description:
      - With O(step=install), the installed system's SSH host public key (C(boot_iso)'s C(ssh_host_public_key)).
    type: str
  wait_timeout:
    description:
      - Seconds O(step=install) and O(step=recover) wait for the power-on and O(step=wait_installed) for the install
        to end.
    type: int
    default: 3600
  media_url:
    description:
      - With O(step=install) and O(step=wait_installed), the URL the installer ISO was inserted from (C(boot_iso)'s
        C(url)), to insert it again when the BMC dropped it.
      - Without it, O(step=wait_installed) uses the URL it finds inserted when it starts, and O(step=install) refuses
        to power on a server whose virtual CD is empty.
    type: str
  media_retries:
    description:
      - With O(step=wait_installed), how many times an installer that lost its media is restarted with the ISO
        inserted again before the step fails (0 to 5). V(0) fails at once.
    type: int
    default: 2
seealso:
  - module: metalplane.inference.host_provision_info
  - module: metalplane.inference.boot_iso
"""

EXAMPLES = r"""
- name: Record the install and power the server on into the installer
  metalplane.inference.host_provision:
    kubeconfig: "{{ modelplane_kubeconfig }}"
    cluster: r730
    pool: r730
    hosts: "{{ pool_hosts }}"
    step: install
    ssh_host_key: "{{ iso.ssh_host_public_key }}"

- name: Wait for the installer to power the server off (about 20 minutes on an R730)
  metalplane.inference.host_provision:
    kubeconfig: "{{ modelplane_kubeconfig }}"
    cluster: r730
    pool: r730
    hosts: "{{ pool_hosts }}"
    step: wait_installed
    wait_timeout: 3600
"""

RETURN = r"""
record:
  description: The provisioning record after the step.
  returned: always
  type: dict
  sample:
    generation: 1
    phase: installing
    root_disk: {wwn: "0x5000c500d5cdd26b"}
    ssh_host_key: "ssh-ed25519 AAAA..."
    boot_order: [HardDisk.List.1-1, NIC.Integrated.1-1-1]
generation:
  description: The claim's generation the record is about.
  returned: always
  type: int
msg:
  description: What the step did.
  returned: always
  type: str
actions:
  description: With O(step=install), the ResetType values sent.
  returned: when the server was powered on
  type: list
  elements: str
recovered_by:
  description:
    - With O(step=recover), V(power_on) when the host had to be powered on again, else V(none).
    - With O(step=install) and O(step=wait_installed), V(media_reinserted) when the installer ISO had to be inserted
      again.
  returned: when step is recover, or when the installer ISO was inserted again
  type: str
media_recovery:
  description:
    - Each time the installer ISO was inserted again. It lists the slot, the virtual media steps, the recovery the
      insert needed, the one-time boot, and (O(step=wait_installed)) the resets of the restart.
  returned: when the installer ISO was inserted again
  type: list
  elements: dict
seen:
  description: With O(step=wait_installed), the last observation (power, media, seconds waited).
  returned: when step is wait_installed
  type: dict
"""

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._metal.pool_args import metal_pool_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._metal.provision_run import run_host_provision


def argument_spec() -> dict[str, Any]:
    return {
        **metal_pool_argument_spec(),
        "cluster": {"type": "str", "required": True},
        "step": {
            "type": "str",
            "required": True,
            "choices": ["prepare", "install", "wait_installed", "installed", "recover", "wiped"],
        },
        "ssh_host_key": {"type": "str", "no_log": False},
        "wait_timeout": {"type": "int", "default": 3600},
        "media_url": {"type": "str"},
        "media_retries": {"type": "int", "default": 2},
    }


def main() -> None:
    MetalplaneModule(argument_spec=argument_spec(), supports_check_mode=True).run(run_host_provision)


if __name__ == "__main__":
    main()
