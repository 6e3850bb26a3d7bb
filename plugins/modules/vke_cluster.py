# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: vke_cluster
short_description: Create, converge or delete a Vultr Kubernetes Engine (VKE) cluster
description:
  - Manages one VKE cluster, identified by its O(label) plus this collection's ownership marker, so a
    second run finds it again and never creates a duplicate.
  - VKE clusters have no tag field, so the marker is the tag C(metalplane.inference/cluster) of the system
    node pool, which is created inline in the same request as the cluster. A cluster is "ours" when one of
    its pools carries that tag.
  - The system pool is create-only. Later differences (plan, autoscaler bounds, labels, taints) and
    differences in create-only cluster settings are reported in RV(drift) and never applied.
  - Optionally converges further node pools (O(node_pools)) against the pools embedded in the cluster
    object, so a run with nothing to do costs one API request (two with O(kubeconfig_path)), whatever
    O(version) says. Only O(allow_upgrade=true) with O(version=latest) adds one read of the available
    upgrades.
  - Waits for the cluster, its pools and nodes to be C(active). Writes the kubeconfig to a 0600 file; the
    kubeconfig itself is never returned.
version_added: 0.1.0
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.attributes
  - metalplane.inference.vultr
  - metalplane.inference.vultr.wait
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
options:
  label:
    description:
      - Label of the cluster; with the ownership marker it identifies the cluster.
    type: str
    required: true
  state:
    description:
      - V(present) creates or converges the cluster, V(absent) deletes it and waits until it is gone.
    type: str
    choices: [present, absent]
    default: present
  region:
    description:
      - Region id (for example V(ewr)). Required to create; create-only afterwards (differences are drift).
    type: str
  version:
    description:
      - Kubernetes version. An exact build such as V(v1.36.2+1), a prefix such as V(1.36), or V(latest),
        resolved through C(GET /kubernetes/versions) at creation.
      - On an existing cluster, an exact build or prefix that the running version does not satisfy is reported
        in RV(drift) (no request), or upgraded when O(allow_upgrade=true).
      - V(latest) on an existing cluster is compared only when O(allow_upgrade=true) (that costs one request);
        otherwise it means "the newest version at creation" and is never reported as drift.
    type: str
    default: latest
  allow_upgrade:
    description:
      - Upgrade the cluster through the upgrades endpoint when its version does not satisfy O(version).
      - The target (the exact build, the newest available upgrade matching the prefix, or for V(latest) the
        newest available upgrade) must be listed by C(GET /kubernetes/clusters/{id}/available-upgrades);
        otherwise the module fails on O(version), listing the available upgrades, before any upgrade request.
      - VKE may offer only the next minor version; an upgrade across several minors takes several runs.
    type: bool
    default: false
  ha_controlplanes:
    description:
      - Highly available control planes. Create-only.
    type: bool
    default: true
  enable_firewall:
    description:
      - Create a managed firewall group for the cluster. Create-only.
    type: bool
    default: false
  vpc_id:
    description:
      - Existing VPC to attach the cluster to. Create-only. Required with O(vpc_only).
    type: str
  vpc_only:
    description:
      - Give the nodes no public interface (C(vpc_only) of the system pool on create, and the default of each
        O(node_pools[].vpc_only)). Create-only; a difference is reported in RV(drift).
      - VKE fails cluster creation with HTTP 500 for this (Vultr ticket YTM-97SIL), so with O(state=present) it is
        refused before any request unless O(allow_vpc_only=true). Under the override, a 500 is never re-sent; the
        module deletes (with its linked resources) any cluster the failed create left behind, waits until it is
        gone, and fails with an explanation. Requires O(vpc_id) (a VPC with a NAT gateway).
    type: bool
    default: false
  allow_vpc_only:
    description:
      - Send O(vpc_only) and O(node_pools[].vpc_only) anyway. The override for when Vultr has fixed the HTTP 500 of
        VPC-only creates (ticket YTM-97SIL); until then O(vpc_only=true) without it fails before any request.
    type: bool
    default: false
  system_pool:
    description:
      - The system node pool, created inline with the cluster. Create-only (differences are drift).
    type: dict
    suboptions:
      label:
        description: Pool label.
        type: str
        default: system
      plan:
        description: Plan id.
        type: str
        default: vc2-6c-16gb
      node_quantity:
        description: Initial number of nodes.
        type: int
        default: 1
      min_nodes:
        description: Autoscaler minimum.
        type: int
        default: 1
      max_nodes:
        description: Autoscaler maximum (the autoscaler is on).
        type: int
        default: 2
      labels:
        description: Node labels; default C(modelplane.ai/pool=<label>).
        type: dict
      taints:
        description: Node taints; default none.
        type: list
        elements: dict
        suboptions:
          key:
            description: Taint key.
            type: str
            required: true
          value:
            description: Taint value.
            type: str
            default: ""
          effect:
            description: Taint effect.
            type: str
            choices: [NoSchedule, PreferNoSchedule, NoExecute]
            default: NoSchedule
  node_pools:
    description:
      - Further node pools to converge in the same run, with the options and semantics of
        M(metalplane.inference.vke_node_pool) (each item may set C(state) and C(replace)).
      - Pools not listed are left alone, unless O(remove_extra_pools=true).
    type: list
    elements: dict
    suboptions:
      label:
        description: Pool label, unique in the cluster.
        type: str
        required: true
      state:
        description: V(absent) deletes our pools of this label.
        type: str
        choices: [present, absent]
        default: present
      plan:
        description: Plan id; required when C(state=present).
        type: str
      node_quantity:
        description: Number of nodes (with the autoscaler on, the initial number).
        type: int
      auto_scaler:
        description: Autoscaler on/off; default on when C(max_nodes) is set.
        type: bool
      min_nodes:
        description: Autoscaler minimum; defaults to C(node_quantity).
        type: int
      max_nodes:
        description: Autoscaler maximum; setting it turns the autoscaler on.
        type: int
      labels:
        description: Node labels, managed exactly (defaults as in M(metalplane.inference.vke_node_pool)).
        type: dict
      taints:
        description: Node taints, managed exactly (GPU pools default to C(nvidia.com/gpu=true:NoSchedule)).
        type: list
        elements: dict
        suboptions:
          key:
            description: Taint key.
            type: str
            required: true
          value:
            description: Taint value.
            type: str
            default: ""
          effect:
            description: Taint effect.
            type: str
            choices: [NoSchedule, PreferNoSchedule, NoExecute]
            default: NoSchedule
      tag:
        description: Ownership marker of the pool.
        type: str
        default: metalplane.inference
      vpc_only:
        description:
          - Nodes without a public interface. Create-only (a difference is reported in RV(drift), never
            applied). Default the cluster's O(vpc_only).
        type: bool
      replace:
        description: Allow replacing the pool when its plan changes.
        type: bool
        default: false
      gpu_count:
        description:
          - GPUs per node the pool's plan must give. Checked, with the region's availability and before
            anything is created, when the pool is to be created or replaced (one read of the plan catalogue);
            a plan whose GPU count cannot be derived passes. Unset, not checked.
        type: int
  remove_extra_pools:
    description:
      - Also delete the pools that carry the tag C(metalplane.inference) but that no O(node_pools[].label)
        accounts for (a label's replace generations C(<label>-<6 hex>) count as that label), after the listed
        pools converged. The system pool (tag C(metalplane.inference/cluster)) is never one of them.
      - With O(state=absent) no pool is listed, so every such pool is deleted (and waited for) first, while the
        control plane still runs, then the cluster.
    type: bool
    default: false
  kubeconfig_path:
    description:
      - Write the cluster's kubeconfig to this file with mode 0600 (only when its content changed).
    type: path
  force:
    description:
      - Manage (O(state=present)) or delete (O(state=absent)) a cluster with this label that does not carry
        the ownership marker.
    type: bool
    default: false
  delete_linked_resources:
    description:
      - On deletion, also delete the block storage and load balancers the cluster created.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Inference cluster with a system pool and two GPU pools
  metalplane.inference.vke_cluster:
    label: inference-prod
    region: ewr
    version: "1.36"
    node_pools:
      - label: gpu-l40s
        plan: vcg-l40s-16c-180g-48vram
        node_quantity: 1
        max_nodes: 3
      - label: gpu-a16
        plan: vcg-a16-6c-64g-16vram
        node_quantity: 2
    kubeconfig_path: "{{ playbook_dir }}/.state/inference-prod.kubeconfig"
  register: cluster

- name: Delete it with its volumes and load balancers
  metalplane.inference.vke_cluster:
    label: inference-prod
    state: absent
"""

RETURN = r"""
cluster:
  description: The cluster as VKE reports it (with node pools and nodes); empty when absent.
  returned: always
  type: dict
drift:
  description:
    - Create-only settings (and the version, unless upgraded) that differ from the request. Pools of
      O(node_pools) report theirs as C(node_pools[<index>].<field>).
  returned: always
  type: list
  elements: dict
  sample: [{"field": "system_pool.plan", "observed": "vc2-4c-8gb", "desired": "vc2-6c-16gb"}]
actions:
  description: What was done (or, in check mode, would be done).
  returned: always
  type: list
  elements: str
node_pools:
  description:
    - Per-pool outcome of O(node_pools). With O(state=absent) and O(remove_extra_pools=true), the pools deleted
      before the cluster.
  returned: when O(node_pools) or O(remove_extra_pools) is set
  type: list
  elements: dict
kubeconfig_path:
  description: Where the kubeconfig was written.
  returned: when O(kubeconfig_path) is set
  type: str
kubeconfig_dir_mode:
  description:
    - The permission bits of the kubeconfig's directory after the run (V(0700) when this run created it), or null
      when it does not exist (check mode). A role can then fix a looser mode without a task of its own each run.
  returned: when O(kubeconfig_path) is set
  type: str
  sample: "0700"
api_requests:
  description: API requests made by this task (C(calls), C(retries), C(total), C(by_method)).
  returned: always
  type: dict
"""

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.args import wait_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.args import (
    DEFAULT_WAIT_TIMEOUT,
    vultr_argument_spec,
)
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.client import VULTR_IMPORT_ERROR
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.cluster_ops import run_vke_cluster
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.pool_args import (
    pool_item_spec,
    system_pool_spec,
)


def argument_spec() -> dict[str, Any]:
    return {
        **vultr_argument_spec(),
        **wait_argument_spec(DEFAULT_WAIT_TIMEOUT),
        "label": {"type": "str", "required": True},
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "region": {"type": "str"},
        "version": {"type": "str", "default": "latest"},
        "allow_upgrade": {"type": "bool", "default": False},
        "ha_controlplanes": {"type": "bool", "default": True},
        "enable_firewall": {"type": "bool", "default": False},
        "vpc_id": {"type": "str"},
        "vpc_only": {"type": "bool", "default": False},
        "allow_vpc_only": {"type": "bool", "default": False},
        "system_pool": {"type": "dict", "options": system_pool_spec()},
        "node_pools": {"type": "list", "elements": "dict", "options": pool_item_spec()},
        "remove_extra_pools": {"type": "bool", "default": False},
        "kubeconfig_path": {"type": "path"},
        "force": {"type": "bool", "default": False},
        "delete_linked_resources": {"type": "bool", "default": True},
    }


def main() -> None:
    module = MetalplaneModule(argument_spec=argument_spec(), supports_check_mode=True)
    module.require("vultr-python", VULTR_IMPORT_ERROR)
    module.run(run_vke_cluster)


if __name__ == "__main__":
    main()
