# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wait until a workload cluster's GPU stack is validated and its GPUs are advertised."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_ready
short_description: Wait until a Kubernetes cluster's GPUs are validated and advertised
version_added: 0.1.0
description:
  - Watches the GPU readiness signals of a workload cluster and returns as soon as every requested check
    passes, with a per-node GPU inventory (model, count, memory, driver version) and the InferenceClass
    C(devices) entry that describes the pool.
  - C(operator) checks that the GPU Operator's validator DaemonSet has at least one desired pod and all of
    them ready (its init containers validate driver, toolkit, CUDA and device plugin).
  - C(allocatable) checks that every node matched by O(node_selector) advertises at least O(gpus_per_node)
    C(nvidia.com/gpu) in C(status.allocatable) (device-plugin stack; DRA does not fill it).
  - C(dra) checks that ResourceSlices of driver O(dra_driver) publish at least O(gpus_per_node) GPU devices
    (or C(count) of O(device_match)) for every matched node, and that those devices satisfy O(device_match).
  - Uses watches (one list, then events) under one deadline; a dropped watch or an API outage is recovered
    from by listing again. On timeout it fails and says which node lacks what and, for validator pods that
    are not ready, their container states.
  - In check mode it evaluates once and reports, without waiting or failing.
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.attributes.info_module
  - metalplane.inference.kube
options:
  checks:
    description: The readiness checks to run, all of which must pass.
    type: list
    elements: str
    choices: [operator, allocatable, dra]
    default: [operator, allocatable]
  node_selector:
    description:
      - Label selector of the GPU pool's nodes, as a string (V(modelplane.ai/pool=gpu)) or a mapping of labels.
      - Omitted, every node must pass the node checks.
      - The syntax (Kubernetes label selector grammar, label key and value rules) is checked before any
        request; a malformed selector fails naming this option.
    type: raw
  gpus_per_node:
    description:
      - GPUs each matched node must advertise (C(allocatable)) or publish as DRA devices (C(dra), unless
        O(device_match) sets C(count)).
    type: int
    default: 1
  validator_namespace:
    description: Namespace of the validator DaemonSet.
    type: str
    default: gpu-operator
  validator_name:
    description: Name of the validator DaemonSet (V(nvidia-dra-validator) for the operator's DRA mode).
    type: str
    default: nvidia-operator-validator
  dra_driver:
    description: DRA driver whose ResourceSlices are checked (V(gpu.example.com) for the dra-example-driver).
    type: str
    default: gpu.nvidia.com
  dra_api_version:
    description:
      - API version (C(group/version)) of the ResourceSlices the C(dra) check lists and watches.
      - ResourceSlice is GA as V(resource.k8s.io/v1) from Kubernetes 1.34, the version Modelplane requires.
        DRA clusters before 1.34 do not serve that version (1.32 serves V(resource.k8s.io/v1beta1), 1.33 also
        V(resource.k8s.io/v1beta2)), so set one of those there, for example to check a cluster's DRA devices
        before it is upgraded and adopted. Both device shapes are read (flat, and V(v1beta1)'s C(basic)).
    type: str
    default: resource.k8s.io/v1
  device_match:
    description:
      - An InferenceClass C(devices) entry (or just its C(attributes), C(capacity) and C(count)) that the
        DRA devices must satisfy. Attributes must be equal (versions compared as semantic versions,
        so V(9.0) equals V(9.0.0)); capacities are minimums (the device must have at least that much).
      - Attribute names are bare (C(architecture)); the driver's domain is implied.
    type: dict
  pools:
    description:
      - Several GPU pools judged in one run, each by its own node selector, GPU count and device match (one
        module start-up for a cluster's pools instead of one per pool). The C(operator) check runs once for
        the run; C(allocatable) and C(dra) per pool.
      - Cannot be combined with O(node_selector) or O(device_match). The result then has O(pools) keyed by
        pool name, and C(nodes) gives each node's C(pool).
    type: list
    elements: dict
    suboptions:
      name:
        description: The pool's name, which keys its result.
        type: str
        required: true
      node_selector:
        description: Label selector of the pool's nodes, as in O(node_selector).
        type: raw
        required: true
      gpus_per_node:
        description: GPUs each of the pool's nodes must advertise or publish. Omitted, O(gpus_per_node).
        type: int
      device_match:
        description: The InferenceClass C(devices) entry the pool's DRA devices must satisfy, as in O(device_match).
        type: dict
  wait_timeout:
    description: Seconds to wait for all checks together. V(0) checks once.
    type: int
    default: 600
"""

EXAMPLES = r"""
- name: Wait for the GPU Operator and 2 allocatable GPUs on every gpu-pool node
  metalplane.inference.gpu_ready:
    kubeconfig: "{{ workload_kubeconfig }}"
    checks: [operator, allocatable]
    node_selector: modelplane.ai/pool=gpu
    gpus_per_node: 2
    wait_timeout: 900
  register: gpus

- name: Check that the DRA devices match the InferenceClass before adopting the cluster
  metalplane.inference.gpu_ready:
    kubeconfig: "{{ workload_kubeconfig }}"
    checks: [dra]
    node_selector: {modelplane.ai/pool: gpu}
    device_match:
      name: gpu
      driver: gpu.nvidia.com
      deviceClassName: gpu.nvidia.com
      count: 2
      attributes:
        architecture: {string: Volta}
        cudaComputeCapability: {version: "7.0.0"}
      capacity:
        memory: {value: 32Gi}

- name: Wait for two pools in one run, each with its own GPU count
  metalplane.inference.gpu_ready:
    kubeconfig: "{{ workload_kubeconfig }}"
    checks: [operator, allocatable]
    pools:
      - {name: l40s, node_selector: "modelplane.ai/pool=l40s", gpus_per_node: 1}
      - {name: a16, node_selector: "modelplane.ai/pool=a16", gpus_per_node: 2}
  register: pool_gpus   # pool_gpus.pools.l40s.ready, pool_gpus.pools.a16.inference_class_devices

- name: Generate an InferenceClass from what the nodes report
  kubernetes.core.k8s:
    definition:
      apiVersion: modelplane.ai/v1alpha1
      kind: InferenceClass
      metadata: {name: r730}
      spec:
        devices: "{{ gpus.inference_class_devices }}"
"""

RETURN = r"""
ready:
  description: Whether every requested check passed.
  returned: always
  type: bool
checks:
  description: Per check, its verdict and figures (desired/ready pods, nodes short of GPUs, ...).
  returned: always
  type: dict
  sample:
    operator: {found: true, ready: true, desired: 2, ready_pods: 2}
    allocatable: {ready: true, nodes: 2, short: []}
nodes:
  description:
    - Per matched node, its GPU inventory and what it lacks.
    - C(source) is C(dra) (ResourceSlices), C(labels) (GPU Feature Discovery labels), C(allocatable) or C(none).
    - C(model) is the source's own name of the GPU (GFD writes C(NVIDIA-L40S)); C(product_name),
      C(architecture) and C(cuda_compute_capability) are the values the NVIDIA DRA driver publishes. From labels
      they are derived, and one that cannot be known for certain is null, with the reason in
      C(attributes_left_out).
  returned: always
  type: dict
  sample:
    r730:
      ready: true
      missing: []
      source: dra
      model: Tesla V100-PCIE-32GB
      product_name: Tesla V100-PCIE-32GB
      count: 2
      memory: 32Gi
      driver_version: 580.126.20
      architecture: Volta
      cuda_compute_capability: 7.0.0
      allocatable: 0
      inference_class_devices: [{name: gpu, driver: gpu.nvidia.com, count: 2}]
problems:
  description: One line per unmet condition (empty when ready).
  returned: always
  type: list
  elements: str
inference_class_devices:
  description:
    - An InferenceClass C(devices) list for the pool, when every matched node reports the same GPUs.
    - Empty with O(pools) (each pool has its own).
  returned: always
  type: list
  elements: dict
pools:
  description:
    - With O(pools), per pool name, its verdict, node checks, nodes, problems, InferenceClass C(devices) and the
      C(device_match) it was held to (null when none).
  returned: when O(pools) is given
  type: dict
  sample:
    l40s:
      ready: true
      checks: {allocatable: {ready: true, nodes: 1, short: []}}
      nodes: {vke-l40s-1: {ready: true, count: 1, model: NVIDIA-L40S}}
      problems: []
      inference_class_devices: [{name: gpu, driver: gpu.nvidia.com, count: 1}]
      device_match: null
elapsed:
  description: Seconds spent waiting.
  returned: always
  type: float
"""

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.args import wait_timeout_spec
from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._kube.args import kube_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._kube.gpu import CHECKS, DEFAULT_DRA_DRIVER
from ansible_collections.metalplane.inference.plugins.module_utils._kube.runners import run_gpu_ready


def argument_spec() -> dict[str, Any]:
    return {
        **kube_argument_spec(),
        "checks": {"type": "list", "elements": "str", "choices": list(CHECKS), "default": ["operator", "allocatable"]},
        "node_selector": {"type": "raw"},
        "gpus_per_node": {"type": "int", "default": 1},
        "validator_namespace": {"type": "str", "default": "gpu-operator"},
        "validator_name": {"type": "str", "default": "nvidia-operator-validator"},
        "dra_driver": {"type": "str", "default": DEFAULT_DRA_DRIVER},
        "dra_api_version": {"type": "str", "default": "resource.k8s.io/v1"},
        "device_match": {"type": "dict"},
        "pools": {
            "type": "list",
            "elements": "dict",
            "options": {
                "name": {"type": "str", "required": True},
                "node_selector": {"type": "raw", "required": True},
                "gpus_per_node": {"type": "int"},
                "device_match": {"type": "dict"},
            },
        },
        **wait_timeout_spec(600),
    }


def main() -> None:
    MetalplaneModule(argument_spec=argument_spec(), supports_check_mode=True).run(run_gpu_ready)


if __name__ == "__main__":
    main()
