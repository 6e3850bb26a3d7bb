# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a cluster's claimed bare-metal host stands in its install, and which provisioning steps are left."""

from __future__ import annotations

DOCUMENTATION = r"""
module: host_provision_info
short_description: Decide where a claimed bare-metal host stands in its install and which steps are left
version_added: 0.1.0
description:
  - Finds the host of O(pool) that cluster O(cluster) holds (one Lease list on the Modelplane control plane), reads
    the provisioning record kept with the claim (M(metalplane.inference.host_provision) writes it), asks the host's
    BMC for its power state and virtual media, and logs in to the node over SSH with the host key the install
    recorded (pinned, C(StrictHostKeyChecking=yes)) to read the marker file C(/etc/metalplane/provisioned) and the
    disks.
  - From these it returns RV(status) and RV(steps), the steps the bare-metal role still has to run, so a run killed
    at any step and run again continues where it stopped, with one claim and one install per generation.
  - With O(state=present) it also checks the server's Redfish inventory (model, GPUs, memory, drives with WWN and
    serial, boot mode, virtual media) and fails, before anything is changed, when a host that still has to be
    installed cannot be (no virtual media, as on an iDRAC8 without the Enterprise licence; the pool host's
    C(root_disk) not exactly one of the BMC's drives). On iDRAC8 it adds the step that moves the virtual CD ahead of
    the disk in the persistent boot order, only when it is not there yet. It leaves it there after the install
    (ejected, the virtual CD is empty and the server boots its disk) unless O(disk_first=true).
  - A host already installed for the claim's generation is never planned for another install. Found powered off
    (a power cut, someone pressed the button) its plan is V(recover) (power on) and V(wait_ssh).
  - With O(state=absent) it plans the teardown of the cluster's host and returns in RV(wipe) exactly which disk
    would be wiped (the install disk recorded in the claim, found again by WWN or serial on the node) and how. It
    fails without changing anything when the node's marker names another cluster.
  - With O(wait_provisioned=true) it waits, up to O(wait_timeout) seconds, until the node answers SSH with the pinned
    key and this generation's marker, and on timeout says what it saw last (power, media, the SSH error).
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.attributes.INFO_MODULE
  - metalplane.inference.modelplane
  - metalplane.inference.metal_pool
options:
  cluster:
    description: The cluster whose claimed host is looked at (the claim Lease's holder).
    type: str
    required: true
  state:
    description: Plan the steps towards V(present) (installed and reachable) or V(absent) (wiped and released).
    type: str
    choices: [present, absent]
    default: present
  ssh:
    description: How the node is reached over SSH; without it the node is not probed.
    type: dict
    suboptions:
      address:
        description: The node's address (its IP, without a prefix length).
        type: str
      port:
        description: SSH port.
        type: int
        default: 22
      user:
        description: User to log in as (the key of O(ssh.private_key_file) is authorized for it).
        type: str
        default: root
      private_key_file:
        description: Private key file on the controller.
        type: path
      connect_timeout:
        description: Seconds to wait for the SSH connection.
        type: int
        default: 5
  disk_first:
    description:
      - Plan the step V(disk_first) after the install, which puts the disk ahead of the virtual CD in the persistent
        boot order before the power-on from the disk.
      - Off by default. On an iDRAC8 a change of the persistent order is a BIOS configuration job that the Lifecycle
        Controller applies in a POST of its own and then resets the server, minutes on an R730. The virtual CD is
        empty after the eject, so the server boots its disk either way. The teardown restores the order recorded
        before the install.
      - Turn it on where a virtual CD ahead of the disk is not acceptable between install and teardown (an ISO
        someone else inserts would boot at the next restart).
    type: bool
    default: false
  wait_provisioned:
    description:
      - Wait until the node answers SSH with the pinned host key and the marker of the claim's generation (after the
        role powered it on from its disk). Not in check mode.
    type: bool
    default: false
  wait_timeout:
    description: Seconds O(wait_provisioned) waits.
    type: int
    default: 1800
notes:
  - The SSH probe runs the controller's OpenSSH client (C(ssh)), the one Ansible's C(ssh) connection uses.
seealso:
  - module: metalplane.inference.host_provision
  - module: metalplane.inference.host_claim
"""

EXAMPLES = r"""
- name: Where does the cluster's host stand?
  metalplane.inference.host_provision_info:
    kubeconfig: "{{ modelplane_kubeconfig }}"
    cluster: r730
    pool: r730
    hosts: "{{ pool_hosts }}"
    ssh: {address: 192.168.120.70, user: root, private_key_file: ~/.ssh/id_ed25519}
  register: plan

- name: Power it on again if a power cut left it off
  metalplane.inference.redfish_power:
    bmc_url: "{{ plan.host.bmc_url }}"
    username: root
    password: "{{ vault_idrac_password }}"
    state: "on"
  when: "'recover' in plan.steps"
"""

RETURN = r"""
status:
  description:
    - V(provisioned), V(powered_off), V(booting), V(installing), V(install_finished), V(ejected), V(new) or
      V(unclaimed) (check mode before the claim) with O(state=present); V(installed), V(wiped), V(not installed) or
      V(released) with O(state=absent).
  returned: always
  type: str
steps:
  description:
    - The steps left, in order. V(power_off), V(prepare), V(virtual_cd_first), V(build_iso), V(insert_media),
      V(boot_once), V(install), V(wait_installed), V(eject), V(delete_iso), V(disk_first), V(power_on), V(recover),
      V(wait_ssh), V(record_installed); for O(state=absent) V(wipe), V(restore_boot_order), V(release) too.
  returned: always
  type: list
  elements: str
plan:
  description: C(status), C(steps) and C(why) (one line that says why).
  returned: always
  type: dict
host:
  description: The claimed host (no credentials), its C(generation) and C(lease); null when none is claimed.
  returned: always
  type: dict
generation:
  description: The claim's generation.
  returned: when a host is claimed
  type: int
record:
  description: The provisioning record kept with the claim.
  returned: when a host is claimed
  type: dict
power_state:
  description: The server's power state.
  returned: when a host is claimed
  type: str
media_image:
  description: The image in the BMC's virtual CD, null when empty.
  returned: when a host is claimed
  type: str
ssh:
  description: The SSH probe, C(reachable), C(marker), C(error), C(host_key_mismatch); null when not probed.
  returned: when a host is claimed
  type: dict
inventory:
  description:
    - With O(state=present), what the BMC reports (C(model), C(gpus), C(memory_gib), C(storage), C(boot_mode),
      C(virtual_media_available)) and the C(problems) that stop an install.
  returned: when state is present and a host is claimed
  type: dict
wipe:
  description:
    - With O(state=absent), C(disk) (the recorded install disk), C(device) (the node's device for it) and C(via)
      (V(ssh), V(ssh after power on), V(unreachable)).
  returned: when state is absent and a host is claimed
  type: dict
  sample: {disk: {wwn: "0x5000c500d5cdd26b"}, device: /dev/sda, via: ssh}
"""

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._metal.pool_args import metal_pool_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._metal.provision_run import run_host_provision_info


def argument_spec() -> dict[str, Any]:
    return {
        **metal_pool_argument_spec(),
        "cluster": {"type": "str", "required": True},
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "ssh": {
            "type": "dict",
            "options": {
                "address": {"type": "str"},
                "port": {"type": "int", "default": 22},
                "user": {"type": "str", "default": "root"},
                "private_key_file": {"type": "path", "no_log": False},
                "connect_timeout": {"type": "int", "default": 5},
            },
        },
        "disk_first": {"type": "bool", "default": False},
        "wait_provisioned": {"type": "bool", "default": False},
        "wait_timeout": {"type": "int", "default": 1800},
    }


def main() -> None:
    MetalplaneModule(argument_spec=argument_spec(), supports_check_mode=True).run(run_host_provision_info)


if __name__ == "__main__":
    main()
