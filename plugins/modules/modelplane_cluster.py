# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Adopt a workload cluster into Modelplane as an InferenceCluster (source Existing), or un-adopt it."""

from __future__ import annotations

DOCUMENTATION = r"""
module: modelplane_cluster
short_description: Adopt a Kubernetes cluster into Modelplane (InferenceCluster, classes, kubeconfig Secret)
version_added: 0.1.0
description:
  - On the Modelplane control plane, O(state=present) writes the workload cluster's kubeconfig Secret in
    C(modelplane-system), the InferenceClasses its node pools use, and an InferenceCluster with source
    C(Existing), then waits until the cluster serves (C(Ready), C(ClusterReady), C(BackendReady) and a
    non-empty C(status.gateway.address)).
  - An InferenceClass is given in O(classes), generated from O(gpu_inventory) (the C(nodes) result of
    M(metalplane.inference.gpu_ready)) for the pools that use it, or, with neither, must already exist.
  - Objects are compared on the fields this module owns, with the XRD defaults applied, so a second run
    changes nothing; updates carry the C(resourceVersion) and are retried when another run wrote first.
  - O(state=absent) refuses while ModelReplicas are pinned to the cluster unless O(drain=true), deletes the
    InferenceCluster in the foreground and waits until it is gone, then deletes the Secret and every class this
    collection created that no other InferenceCluster uses.
  - Only objects carrying the label C(app.kubernetes.io/managed-by=metalplane.inference) are changed or deleted;
    a class created by someone else may be used but is never rewritten.
  - The kubeconfig is never returned, shown in a diff or logged.
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.attributes
  - metalplane.inference.modelplane
attributes:
  check_mode:
    support: full
    details:
      - Reports in RV(actions) what would be written or deleted; reads only.
  diff_mode:
    support: full
    details:
      - Shows the labels and specs of the InferenceCluster and the classes; the Secret's data as C(<redacted>).
options:
  name:
    description:
      - Name of the InferenceCluster (a DNS label); also the value of the C(modelplane.ai/cluster) label Modelplane
        puts on the cluster's ModelReplicas.
    type: str
    required: true
  state:
    description: V(present) adopts the cluster, V(absent) un-adopts it.
    type: str
    choices: [present, absent]
    default: present
  workload_kubeconfig:
    description:
      - Path of the workload cluster's kubeconfig, stored in the Secret. Its current context must use embedded
        static credentials (a token or client certificate data), which the control plane can use.
      - Also used to read the workload nodes' C(modelplane.ai/pool) labels when O(gpu_inventory) entries do not
        name their pool.
      - Required with O(state=present).
    type: path
  server:
    description:
      - API server URL written into the Secret's kubeconfig instead of the one in O(workload_kubeconfig), when the
        control plane reaches the workload cluster at another address.
    type: str
  tls_server_name:
    description:
      - C(tls-server-name) written into the Secret's kubeconfig, when O(server) does not match the API certificate.
    type: str
  secret_name:
    description: Name of the kubeconfig Secret in C(modelplane-system). Defaults to C(<name>-kubeconfig).
    type: str
  node_pools:
    description:
      - The InferenceCluster's node pools (1 to 8). Every workload node of a pool must carry the label
        C(modelplane.ai/pool=<name>).
      - Required with O(state=present). With O(state=absent), the classes named here are also deletion candidates.
    type: list
    elements: dict
    suboptions:
      name:
        description: Pool name (a DNS label of at most 40 characters), the C(modelplane.ai/pool) label value.
        type: str
        required: true
      class_name:
        description: InferenceClass of the pool's nodes. Defaults to the pool name.
        type: str
      node_count:
        description: Nodes in the pool (1 to 1000). Defaults to 1.
        type: int
      min_node_count:
        description: Lower bound of an autoscaling range; needs O(node_pools[].max_node_count).
        type: int
      max_node_count:
        description: Upper bound of an autoscaling range; Modelplane's scheduler counts this many nodes.
        type: int
  classes:
    description:
      - InferenceClasses given explicitly, by name and C(spec) (as in the XRD, with C(devices), optional C(description)
        and C(provisioning)). They win over classes generated from O(gpu_inventory).
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Class name (a DNS subdomain).
        type: str
        required: true
      spec:
        description: The class spec.
        type: dict
        required: true
  gpu_inventory:
    description:
      - The C(nodes) result of M(metalplane.inference.gpu_ready) (node name to inventory entry), or a list of
        entries with a C(node) key. Every pool class not in O(classes) is generated from the entries of the nodes
        of the pools that use it, with driver and C(deviceClassName) C(gpu.nvidia.com), the GPU count,
        C(productName)/C(architecture)/C(cudaComputeCapability) when known and the memory the DRA driver reports.
      - A node's pool is its entry's C(pool) key, else its C(modelplane.ai/pool) label on the workload cluster.
      - Omitted, classes not in O(classes) must already exist on the control plane.
    type: raw
  labels:
    description: Labels of the InferenceCluster (ModelCache and ModelDeployment cluster selectors match them).
    type: dict
    default: {}
  taints:
    description: Cluster taints (they repel ModelDeployments without a matching toleration).
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
      effect:
        description: V(NoSchedule) keeps new replicas away, V(NoExecute) also moves existing ones.
        type: str
        required: true
        choices: [NoSchedule, NoExecute]
  storage_class_name:
    description:
      - RWX StorageClass of the workload cluster used for ModelCaches (C(existing.cache.storageClassName)).
        Existing clusters have no default, so without one no ModelCache ever matches the cluster.
      - The default is the class the C(longhorn_rwx) role creates. An empty string leaves the cache out.
    type: str
    default: modelplane-rwx-longhorn
  wait:
    description:
      - With O(state=present), wait until the InferenceCluster serves. With O(state=absent) the module always
        waits until the InferenceCluster is gone, because Modelplane needs the Secret to uninstall its stack.
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait for readiness, for drained replicas, or for the deletion.
    type: int
    default: 900
  drain:
    description:
      - With O(state=absent), when ModelReplicas target the cluster (C(spec.clusterName) or label
        C(modelplane.ai/cluster)), taint the InferenceCluster C(metalplane.inference/unadopting:NoExecute) so no new
        replica is placed on it, delete those replicas and wait until they are gone. Without it the module
        refuses and names them.
    type: bool
    default: false
seealso:
  - module: metalplane.inference.gpu_ready
"""

EXAMPLES = r"""
- name: Inventory the GPU pool before adoption
  metalplane.inference.gpu_ready:
    kubeconfig: "{{ workload_kubeconfig }}"
    checks: [allocatable]
    node_selector: modelplane.ai/pool=l40s
  register: gpus

- name: Adopt the cluster into Modelplane, generating the class from the inventory
  metalplane.inference.modelplane_cluster:
    kubeconfig: "{{ modelplane_kubeconfig }}"
    name: vke-ewr-1
    workload_kubeconfig: "{{ workload_kubeconfig }}"
    node_pools:
      - name: l40s
        class_name: l40s-1x
        node_count: 2
    gpu_inventory: "{{ gpus.nodes }}"
    labels:
      modelplane.ai/region: ewr
  register: adopted

- name: Adopt with an explicit class and another API address for the control plane
  metalplane.inference.modelplane_cluster:
    kubeconfig: "{{ modelplane_kubeconfig }}"
    name: r730-dc1
    workload_kubeconfig: /etc/metalplane/r730.kubeconfig
    server: https://10.0.0.5:6443
    node_pools:
      - {name: v100, class_name: v100-2x, node_count: 1}
    classes:
      - name: v100-2x
        spec:
          devices:
            - name: gpu
              driver: gpu.nvidia.com
              deviceClassName: gpu.nvidia.com
              count: 2
              attributes:
                architecture: {string: Volta}
              capacity:
                memory: {value: 32Gi}

- name: Un-adopt, deleting the replicas still placed on it
  metalplane.inference.modelplane_cluster:
    kubeconfig: "{{ modelplane_kubeconfig }}"
    name: vke-ewr-1
    state: absent
    drain: true
"""

RETURN = r"""
actions:
  description: What was written or deleted (in check mode, what would be), one line each.
  returned: always
  type: list
  elements: str
  sample:
    - create Secret modelplane-system/vke-ewr-1-kubeconfig
    - create InferenceClass l40s-1x
    - create InferenceCluster vke-ewr-1
cluster:
  description: The InferenceCluster as last observed.
  returned: always
  type: dict
  contains:
    name:
      description: Its name.
      type: str
    exists:
      description: Whether it exists (false after un-adoption, and in check mode before the first adoption).
      type: bool
    ready:
      description: Whether every readiness expectation holds.
      type: bool
    conditions:
      description: Condition type to C(status/reason).
      type: dict
    gateway_address:
      description: C(status.gateway.address), the workload gateway Modelplane routes to.
      type: str
    unmet:
      description: One line per readiness expectation not met.
      type: list
      elements: str
    storage_class_name:
      description: The RWX cache StorageClass the spec names.
      type: str
  sample:
    name: vke-ewr-1
    exists: true
    ready: true
    conditions: {Ready: True/Available, ClusterReady: True/ClusterRunning, BackendReady: True/BackendHealthy}
    gateway_address: 192.0.2.17
    unmet: []
    storage_class_name: modelplane-rwx-longhorn
classes:
  description:
    - Per class, what happened (V(created), V(updated), V(unchanged), V(used) for an existing class only referenced,
      V(deleted), V(kept) with a C(reason)), and whether this collection manages it.
  returned: always
  type: list
  elements: dict
  sample: [{name: l40s-1x, action: created, managed: true}]
pools:
  description:
    - Per node pool, its class, the node selector of its workload nodes and the GPU device entry its class promises
      (for M(metalplane.inference.gpu_ready)'s C(device_match)); empty with O(state=absent).
  returned: always
  type: list
  elements: dict
  sample:
    - name: l40s
      class_name: l40s-1x
      node_count: 2
      node_selector: modelplane.ai/pool=l40s
      gpu_device: {name: gpu, claim: DRA, driver: gpu.nvidia.com, deviceClassName: gpu.nvidia.com, count: 1,
                   capacity: {memory: {value: 46068Mi}}}
secret:
  description: Name and namespace of the kubeconfig Secret (never its data).
  returned: always
  type: dict
  sample: {name: vke-ewr-1-kubeconfig, namespace: modelplane-system}
drained:
  description: C(namespace/name) of the ModelReplicas deleted by O(drain).
  returned: always
  type: list
  elements: str
"""

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.args import wait_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.adoption import run_modelplane_cluster
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.args import modelplane_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.constants import RWX_STORAGE_CLASS


def argument_spec() -> dict[str, Any]:
    return {
        **modelplane_argument_spec(),
        "name": {"type": "str", "required": True},
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "workload_kubeconfig": {"type": "path"},
        "server": {"type": "str"},
        "tls_server_name": {"type": "str"},
        "secret_name": {"type": "str", "no_log": False},
        "node_pools": {
            "type": "list",
            "elements": "dict",
            "options": {
                "name": {"type": "str", "required": True},
                "class_name": {"type": "str"},
                "node_count": {"type": "int"},
                "min_node_count": {"type": "int"},
                "max_node_count": {"type": "int"},
            },
        },
        "classes": {
            "type": "list",
            "elements": "dict",
            "default": [],
            "options": {"name": {"type": "str", "required": True}, "spec": {"type": "dict", "required": True}},
        },
        "gpu_inventory": {"type": "raw"},
        "labels": {"type": "dict", "default": {}},
        "taints": {
            "type": "list",
            "elements": "dict",
            "options": {
                "key": {"type": "str", "required": True, "no_log": False},
                "value": {"type": "str"},
                "effect": {"type": "str", "required": True, "choices": ["NoSchedule", "NoExecute"]},
            },
        },
        "storage_class_name": {"type": "str", "default": RWX_STORAGE_CLASS},
        **wait_argument_spec(900),
        "drain": {"type": "bool", "default": False},
    }


def main() -> None:
    MetalplaneModule(
        argument_spec=argument_spec(),
        supports_check_mode=True,
        required_if=[("state", "present", ("workload_kubeconfig", "node_pools"))],
    ).run(run_modelplane_cluster)


if __name__ == "__main__":
    main()
