# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Report every host of a bare-metal pool: free, claimed (by whom, since when), unreachable or mismatched."""

from __future__ import annotations

DOCUMENTATION = r"""
module: host_pool_info
short_description: Report the hosts of a bare-metal pool and their claims
version_added: 0.1.0
description:
  - Lists the pool's claim Leases on the Modelplane control plane with one list call and reports every host of
    O(hosts) as V(claimed) (by which cluster, who claimed, since when, the install generation), V(mismatched) (its
    inventory facts or its Redfish inventory contradict O(requirements) or its boot MAC; the reasons say which
    requirement and what was found), V(unreachable) (the BMC's error) or V(free).
  - Claimed hosts are not asked; every other host's BMC is read once (System, PCIe devices when a GPU is
    required, NICs), unless O(check_bmcs=false).
  - Claims on hosts that O(hosts) no longer lists are reported in RV(orphans).
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.attributes.INFO_MODULE
  - metalplane.inference.modelplane
  - metalplane.inference.metal_pool
options:
  check_bmcs:
    description: Ask the BMC of every unclaimed host; V(false) reports them V(free) from the Leases and facts alone.
    type: bool
    default: true
seealso:
  - module: metalplane.inference.host_claim
"""

EXAMPLES = r"""
- name: What is free in the R730 pool?
  metalplane.inference.host_pool_info:
    kubeconfig: "{{ modelplane_kubeconfig }}"
    pool: r730
    hosts: "{{ pool_hosts }}"
    requirements: {gpu_model: V100, gpu_count: 2}
  register: pool

- name: Say it
  ansible.builtin.debug:
    msg: "{{ pool.hosts | map(attribute='status') | list }}"
"""

RETURN = r"""
hosts:
  description: One entry per host of O(hosts), in order (no credentials).
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Inventory name.
      type: str
    status:
      description: V(free), V(claimed), V(unreachable) or V(mismatched).
      type: str
    claim:
      description: For V(claimed), C(cluster), C(claimer), C(since), C(generation) and C(lease).
      type: dict
    reasons:
      description: For V(mismatched), one line per requirement not met (what was required, what was found).
      type: list
      elements: str
    source:
      description: For V(mismatched), V(facts) (the inventory's own facts) or V(redfish) (the BMC).
      type: str
    error:
      description: For V(unreachable), the BMC error.
      type: str
    inventory:
      description: What the BMC reported (model, memory, GPUs, MACs), when it was asked.
      type: dict
  sample:
    - {name: r730-a, status: claimed, claim: {cluster: r730-dc1, claimer: ops@ctl, since: "2026-08-22T09:14:03.123456Z",
       generation: 1, lease: metal-claim.r730.r730-a}}
    - {name: r730-b, status: mismatched, source: redfish,
       reasons: ["gpu_count: Redfish lists no GPU among the PCIe devices, the cluster needs 2 GPU(s)"]}
orphans:
  description: Claims of the pool on hosts O(hosts) does not list (host, cluster, claimer, since, generation, lease).
  returned: always
  type: list
  elements: dict
counts:
  description: Hosts per status.
  returned: always
  type: dict
  sample: {free: 1, claimed: 1, unreachable: 0, mismatched: 1}
"""

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._metal.claim_run import run_host_pool_info
from ansible_collections.metalplane.inference.plugins.module_utils._metal.pool_args import metal_pool_argument_spec


def argument_spec() -> dict[str, Any]:
    return {**metal_pool_argument_spec(), "check_bmcs": {"type": "bool", "default": True}}


def main() -> None:
    MetalplaneModule(argument_spec=argument_spec(), supports_check_mode=True).run(run_host_pool_info)


if __name__ == "__main__":
    main()
