# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: vke_preflight
short_description: Check a whole inventory of VKE GPU clusters before anything is created
description:
  - Validates every cluster of an inventory at once and fails listing B(all) problems, each with the field that
    holds it. Creates and changes nothing; run it once (C(run_once)) before converging any cluster.
  - "Without the API: names (lower-case DNS labels, unique), states, GPU pools (name, C(vcg-*) plan, C(gpu.type),
    C(gpu.count), C(node_quantity) within C(min_nodes)..C(max_nodes), C(min_nodes) needs C(max_nodes), at most 8
    pools), C(vpc_only) needs C(vpc_id), and networks: each entry of C(networks) must be a CIDR that overlaps
    neither VKE's fixed pod and service subnets (10.244.0.0/16, 10.96.0.0/12), nor O(reserved_networks), nor
    another cluster's networks (unless both declare the same C(vpc_id) and subnet)."
  - "Known VKE limits, without the API: C(vpc_only=true) is refused with the reason (VKE answers VPC-only creates
    with HTTP 500, Vultr ticket YTM-97SIL) unless C(allow_vpc_only=true); a class (a DRA device C(count) in
    C(classes)) or a smoke test replica (C(smoke.gpus)) needing more GPUs than one node of its pool has is refused,
    naming the limit: VKE GPU nodes have no GPU fabric, so serving is single-node."
  - "With the API (read-only, a fixed number of requests whatever the cluster count): the API key is accepted,
    the region exists, each plan is a GPU plan whose GPU model and count match
    C(gpu.type) and C(gpu.count) and which is available in the region (only for pools that do not run yet: a
    sold-out region must not fail the re-run of a cluster that already has its GPUs), the version resolves, and
    no cluster with the same label exists without this collection's marker."
  - Clusters with C(state=absent) are only checked for names and networks.
  - Shape problems are reported first; the platform is only asked when the inventory itself is sound.
version_added: 0.1.0
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.attributes.info_module
  - metalplane.inference.vultr
options:
  clusters:
    description:
      - The clusters of the inventory. C(playbooks/site.yml) builds this list from the C(vke_cluster_*)
        host variables of the C(vke_clusters) group.
      - "Each entry: C(name), C(state) (C(present) or C(absent), default C(present)), C(region), C(version)
        (default C(latest)), C(vpc_id), C(vpc_only), C(allow_vpc_only) (the override of the C(vpc_only) refusal),
        C(networks) (CIDRs the cluster uses, such as its VPC subnet), C(gpu_pools), C(classes) (the cluster's
        InferenceClasses, C(modelplane_classes)) and C(smoke) (its smoke test, C(modelplane_smoke): C(model),
        C(pool), C(gpus))."
      - "Each GPU pool: C(name), C(plan), C(gpu) (C(type) and C(count) per node), C(node_quantity), optional
        C(min_nodes), C(max_nodes), C(labels), C(taints) and C(class_name)."
    type: list
    elements: dict
    required: true
  reserved_networks:
    description:
      - Networks no cluster network may overlap (the Modelplane control plane's nodes, pods and services, an
        office range).
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Preflight every cluster of the inventory
  metalplane.inference.vke_preflight:
    clusters:
      - name: inference-ewr-1
        region: ewr
        version: "1.33"
        networks: [10.40.0.0/20]
        gpu_pools:
          - name: l40s-1x
            plan: vcg-l40s-16c-180g-48vram
            gpu: {type: L40S, count: 1}
            node_quantity: 1
            max_nodes: 3
    reserved_networks: [10.8.0.0/16]
  run_once: true
  register: preflight

- name: Show what each GPU node will cost
  ansible.builtin.debug:
    msg: "{{ preflight.clusters | map(attribute='gpu_pools') | flatten | map(attribute='monthly_cost_per_node') }}"
"""

RETURN = r"""
clusters:
  description: What each cluster will get, once every check passed.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: Cluster name (the VKE label).
      type: str
    state:
      description: Desired state.
      type: str
    region:
      description: Region id.
      type: str
    version:
      description: The VKE version the request resolves to today (null for an absent cluster).
      type: str
    gpu_pools:
      description: Per pool the plan's GPU model, GPUs per node, VRAM per GPU and monthly price per node.
      type: list
      elements: dict
error:
  description: On failure, C(problems), a list of C({field, msg}), one per problem found.
  returned: failure
  type: dict
api_requests:
  description: API requests made by this task.
  returned: always
  type: dict
"""

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.args import vultr_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.client import VULTR_IMPORT_ERROR
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.preflight import run_vke_preflight


def argument_spec() -> dict[str, Any]:
    return {
        **vultr_argument_spec(),
        "clusters": {"type": "list", "elements": "dict", "required": True},
        "reserved_networks": {"type": "list", "elements": "str", "default": []},
    }


def main() -> None:
    module = MetalplaneModule(argument_spec=argument_spec(), supports_check_mode=True)
    module.require("vultr-python", VULTR_IMPORT_ERROR)
    module.run(run_vke_preflight)


if __name__ == "__main__":
    main()
