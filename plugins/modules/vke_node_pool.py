# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: vke_node_pool
short_description: Add, resize, relabel, replace or remove one node pool of a VKE cluster
description:
  - Converges one node pool of an existing VKE cluster without touching the cluster.
  - The pool is found by O(label) (or O(id)) among the pools carrying the ownership O(tag); only such
    pools are changed or deleted. A pool with the same label but another tag is refused unless O(force).
  - Autoscaling follows Modelplane's semantics. Setting O(max_nodes) turns the VKE autoscaler on, and
    O(min_nodes) defaults to O(node_quantity). While the autoscaler is on, O(node_quantity) is only the
    initial size, so a re-run does not fight the autoscaler.
  - Node O(labels) and O(taints) are managed exactly through the per-pool labels and taints endpoints
    (missing ones added, extra ones removed), because VKE's PATCH only adds.
  - A GPU pool is a pool whose O(plan) starts with C(vcg-). It gets the taint
    C(nvidia.com/gpu=true:NoSchedule) and the labels C(modelplane.ai/pool=<label>) and
    C(modelplane.ai/gpu=<model>) unless O(taints) / O(labels) are given.
  - O(plan) (and O(label) when the pool is selected by O(id)) cannot change in place. Such a change fails
    with a clear message unless O(replace=true). The module then creates the new pool (labelled
    C(<label>-<6 hex>) when the label is taken), waits until it is active, and deletes the old one.
  - Waits for the pool and all its nodes to be C(active).
  - A plan that VKE refuses for node pools (it answers C(Invalid NodePool ID) to the create) fails on O(plan),
    pointing at M(metalplane.inference.vultr_gpu_plan_info).
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
  cluster:
    description:
      - The cluster's id or label.
    type: str
    required: true
  label:
    description:
      - Pool label, unique in the cluster.
    type: str
    required: true
  id:
    description:
      - Select the pool by id instead of label. A different O(label) is then an immutable change.
    type: str
  state:
    description:
      - V(present) creates or converges the pool; V(absent) deletes our pools of this label.
    type: str
    choices: [present, absent]
    default: present
  plan:
    description:
      - Plan id, for example V(vcg-l40s-16c-180g-48vram). Required for O(state=present).
    type: str
  node_quantity:
    description:
      - Number of nodes (with the autoscaler on, the initial number). Default O(min_nodes), else 1.
    type: int
  auto_scaler:
    description:
      - Turn the VKE autoscaler on or off. Default V(true) when O(max_nodes) is set, else V(false).
    type: bool
  min_nodes:
    description:
      - Autoscaler minimum; defaults to O(node_quantity).
    type: int
  max_nodes:
    description:
      - Autoscaler maximum; setting it turns the autoscaler on.
    type: int
  labels:
    description:
      - Node labels, managed exactly. Default C(modelplane.ai/pool=<label>), plus C(modelplane.ai/gpu=<model>)
        on GPU pools.
    type: dict
  taints:
    description:
      - Node taints, managed exactly. Default C(nvidia.com/gpu=true:NoSchedule) on GPU pools, none otherwise.
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
    description:
      - Ownership marker (the pool's C(tag)); only pools with this tag are changed or deleted.
    type: str
    default: metalplane.inference
  replace:
    description:
      - Allow replacing the pool when an immutable field (O(plan), O(label)) differs.
    type: bool
    default: false
  force:
    description:
      - Adopt (O(state=present), the tag is set) or delete (O(state=absent)) a pool with this label that does
        not carry O(tag).
    type: bool
    default: false
  vpc_only:
    description:
      - Give the pool's nodes no public interface (the API's C(vpc_only), sent when the pool is created).
      - Default the cluster's setting (the C(vpc_only) of its system pool), so a GPU pool added to a VPC-only
        cluster is VPC-only too.
      - Create-only. A difference on an existing pool is reported in RV(drift) and never applied (O(replace)
        applies it only together with a plan change, which creates a new pool).
      - VKE fails VPC-only creates with HTTP 500 (Vultr ticket YTM-97SIL), so a pool that would be created VPC-only
        (given, or inherited from the cluster) is refused before the create unless O(allow_vpc_only=true). Under the
        override, a 500 is never re-sent; the module deletes any pool the failed create left behind and fails with
        an explanation.
    type: bool
  allow_vpc_only:
    description:
      - Send O(vpc_only) anyway, the override for when Vultr has fixed the HTTP 500 of VPC-only creates (ticket
        YTM-97SIL).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: GPU pool that autoscales from 1 to 4 nodes
  metalplane.inference.vke_node_pool:
    cluster: inference-prod
    label: gpu-l40s
    plan: vcg-l40s-16c-180g-48vram
    node_quantity: 1
    max_nodes: 4

- name: Move the pool to another GPU (new pool first, then the old one is deleted)
  metalplane.inference.vke_node_pool:
    cluster: inference-prod
    label: gpu-l40s
    plan: vcg-a100-12c-120g-80vram
    replace: true

- name: Remove the pool
  metalplane.inference.vke_node_pool:
    cluster: inference-prod
    label: gpu-l40s
    state: absent
"""

RETURN = r"""
node_pool:
  description: The pool as VKE reports it (with nodes); in check mode the pool before the change.
  returned: when O(state=present)
  type: dict
cluster_id:
  description: Id of the cluster.
  returned: when O(state=present)
  type: str
plan:
  description: The computed plan (create, patch, labels and taints to add and remove, immutable fields).
  returned: when O(state=present)
  type: dict
actions:
  description: What was done (or, in check mode, would be done).
  returned: always
  type: list
  elements: str
drift:
  description: Create-only settings of the pool (C(vpc_only)) that differ from the request; never applied.
  returned: when O(state=present)
  type: list
  elements: dict
  sample: [{"field": "vpc_only", "observed": false, "desired": true}]
skipped_pools:
  description:
    - What O(state=absent) left alone and why - pools that are not ours (O(force=true) deletes them), or
      C(cluster not found).
    - Named so because C(skipped) is a result key Ansible reserves.
  returned: when O(state=absent)
  type: list
  elements: str
  sample: ["pool system (tag 'someone-else') is not ours; left alone"]
api_requests:
  description: API requests made by this task.
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
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.pool_args import pool_spec
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.pool_run import run_vke_node_pool


def argument_spec() -> dict[str, Any]:
    return {
        **vultr_argument_spec(),
        **wait_argument_spec(DEFAULT_WAIT_TIMEOUT),
        **pool_spec(),
        "cluster": {"type": "str", "required": True},
        "id": {"type": "str"},
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "replace": {"type": "bool", "default": False},
        "force": {"type": "bool", "default": False},
        "allow_vpc_only": {"type": "bool", "default": False},
    }


def main() -> None:
    module = MetalplaneModule(
        argument_spec=argument_spec(), supports_check_mode=True, required_if=[("state", "present", ["plan"])]
    )
    module.require("vultr-python", VULTR_IMPORT_ERROR)
    module.run(run_vke_node_pool)


if __name__ == "__main__":
    main()
