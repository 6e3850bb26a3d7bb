# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Serve one chat completion through Modelplane's gateway from one adopted cluster, then remove what it created."""

from __future__ import annotations

DOCUMENTATION = r"""
module: modelplane_smoke
short_description: Prove a cluster serves - one chat completion through Modelplane's public gateway
version_added: 0.1.0
description:
  - O(state=present) checks that the control plane's InferenceGateway C(default) is Ready with an address and that
    the InferenceCluster O(cluster) is serving, then writes a ModelDeployment (and a ModelCache when
    O(cache_size_gib) is set) pinned to this cluster by its C(metalplane.inference/cluster) label (set by
    M(metalplane.inference.modelplane_cluster)) and to the pool's GPU by a DRA CEL selector, and a ModelService
    routing to its replica.
  - It waits until the deployment's ModelReplica is scheduled on O(cluster) and Ready, sends one chat completion to
    C(http://<gateway>/<namespace>/<name>/v1/chat/completions), checks that the answer is OpenAI-shaped and returns
    the request and the answer's first tokens.
  - Whatever happens, it then deletes what it created and waits until the replica is gone (the GPU is free again),
    unless O(keep_objects=true). Leftovers of an interrupted earlier run (found by label) are removed first.
  - The engine defaults to vLLM with an image and arguments for the pool's GPU generation (read from its
    InferenceClass's compute capability or architecture) - float16 before Ampere (Volta, Turing), an image that still
    supports compute capability 7.0 on Volta; GPUs older than Volta are refused unless O(image) is given.
  - A replica needing more GPUs than one node of the pool has is refused before anything is written; that is
    multi-node serving, which needs a GPU fabric between nodes (VKE GPU nodes have none).
  - O(state=absent) removes this cluster's smoke objects left in any namespace (a teardown runs it before
    un-adopting).
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.attributes
  - metalplane.inference.modelplane
attributes:
  check_mode:
    support: full
    details:
      - Checks the gateway, the cluster, the pool and the engine, and reports in RV(actions) what it would create and
        remove; writes nothing and sends no request.
  diff_mode:
    support: none
options:
  cluster:
    description: Name of the InferenceCluster to serve from (adopted by M(metalplane.inference.modelplane_cluster)).
    type: str
    required: true
  state:
    description:
      - V(present) runs the smoke test; V(absent) only removes this cluster's smoke objects.
    type: str
    choices: [present, absent]
    default: present
  model:
    description: Model to serve, a Hugging Face repository id (public, or staged through O(cache_size_gib)).
    type: str
  served_model_name:
    description: Name the engine serves the model under (the request's C(model)); defaults to O(model).
    type: str
  pool:
    description: Node pool of the InferenceCluster to serve from; defaults to the first pool whose class has a GPU.
    type: str
  gpus:
    description:
      - GPUs of one node for the replica (tensor parallelism within the node). At most the GPUs per node of the
        pool's class; more is refused (multi-node serving needs a GPU fabric).
    type: int
    default: 1
  image:
    description: Engine image; defaults to the vLLM image for the pool's GPU generation.
    type: str
  engine_args:
    description: Arguments appended to the engine's (after C(--model), C(--served-model-name) and the GPU's defaults).
    type: list
    elements: str
    default: []
  cache_size_gib:
    description:
      - With a size, stage the model in a ModelCache of that many GiB on the cluster's cache StorageClass and serve it
        from there; V(0) downloads it in the engine pod.
    type: int
    default: 0
  namespace:
    description: Control-plane namespace of the smoke objects (it must exist).
    type: str
    default: default
  name:
    description: Name of the smoke objects; defaults to C(smoke-<cluster>) (shortened with a hash past 40 characters).
    type: str
  prompt:
    description: The user message of the chat completion.
    type: str
    default: "Reply with one short sentence: is this GPU cluster serving?"
  max_tokens:
    description: C(max_tokens) of the request.
    type: int
    default: 32
  workload_kubeconfig:
    description:
      - Workload cluster kubeconfig, used only to name the replica's pod and its last event when it is not Ready.
    type: path
  keep_objects:
    description: Leave the smoke objects in place after the test (for debugging); the run then reports a change.
    type: bool
    default: false
  wait_timeout:
    description:
      - Seconds for the whole test (gateway, scheduling, the model's download and start, the request), and again for
        the removal.
    type: int
    default: 1800
  api_timeout:
    description: Seconds one chat completion request may take.
    type: int
    default: 120
seealso:
  - module: metalplane.inference.modelplane_cluster
  - module: metalplane.inference.modelplane_gateway
"""

EXAMPLES = r"""
- name: Serve a small model from the cluster through the gateway, then clean up
  metalplane.inference.modelplane_smoke:
    kubeconfig: "{{ modelplane_kubeconfig }}"
    cluster: vke-ewr-1
    model: Qwen/Qwen2.5-0.5B-Instruct
    workload_kubeconfig: "{{ workload_kubeconfig }}"
  register: smoke

- name: Show the answer
  ansible.builtin.debug:
    msg: "{{ smoke.answer.first_tokens }}"

- name: Remove smoke objects a failed run left behind
  metalplane.inference.modelplane_smoke:
    kubeconfig: "{{ modelplane_kubeconfig }}"
    cluster: vke-ewr-1
    state: absent
"""

RETURN = r"""
actions:
  description: What was (in check mode, would be) created or deleted beyond the test's own objects, one line each.
  returned: always
  type: list
  elements: str
removed:
  description: Leftover smoke objects of earlier runs that were removed, as C(<kind> <namespace>/<name>).
  returned: always
  type: list
  elements: str
cluster:
  description: The InferenceCluster served from.
  returned: with O(state=present)
  type: str
pool:
  description: The node pool served from.
  returned: with O(state=present)
  type: str
class_name:
  description: The pool's InferenceClass.
  returned: with O(state=present)
  type: str
engine:
  description: Image, arguments, GPU generation, compute capability and why, as chosen for the pool's GPU.
  returned: with O(state=present)
  type: dict
  sample:
    image: vllm/vllm-openai:v0.14.0
    args: [--model=Qwen/Qwen2.5-0.5B-Instruct, --served-model-name=Qwen/Qwen2.5-0.5B-Instruct, --dtype=half,
           --max-model-len=4096]
    generation: Volta (V100)
    compute_capability: "7.0"
objects:
  description: The objects the test wrote (and removed again unless O(keep_objects)).
  returned: with O(state=present)
  type: list
  elements: str
request:
  description: The chat completion request (method, public URL, body).
  returned: with O(state=present)
  type: dict
replica:
  description: The ModelReplica that served (name, cluster); null in check mode.
  returned: with O(state=present)
  type: dict
answer:
  description: The answer (text, first_tokens, finish_reason, model, id); null in check mode.
  returned: with O(state=present)
  type: dict
smoke:
  description: The request line and the answer's first tokens, which the timeline callback shows under phase smoke.
  returned: when a chat completion was answered
  type: dict
  sample: {request: "POST http://203.0.113.10/default/smoke-vke-ewr-1/v1/chat/completions model=qwen", answer: Yes.}
"""

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.args import wait_timeout_spec
from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.args import modelplane_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.smoke import (
    DEFAULT_PROMPT,
    run_modelplane_smoke,
)


def argument_spec() -> dict[str, Any]:
    return {
        **modelplane_argument_spec(),
        "cluster": {"type": "str", "required": True},
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "model": {"type": "str"},
        "served_model_name": {"type": "str"},
        "pool": {"type": "str"},
        "gpus": {"type": "int", "default": 1},
        "image": {"type": "str"},
        "engine_args": {"type": "list", "elements": "str", "default": []},
        "cache_size_gib": {"type": "int", "default": 0},
        "namespace": {"type": "str", "default": "default"},
        "name": {"type": "str"},
        "prompt": {"type": "str", "default": DEFAULT_PROMPT},
        "max_tokens": {"type": "int", "default": 32, "no_log": False},
        "workload_kubeconfig": {"type": "path"},
        "keep_objects": {"type": "bool", "default": False},
        **wait_timeout_spec(1800),
        "api_timeout": {"type": "int", "default": 120},
    }


def main() -> None:
    MetalplaneModule(
        argument_spec=argument_spec(),
        supports_check_mode=True,
        required_if=[("state", "present", ("model",))],
    ).run(run_modelplane_smoke)


if __name__ == "__main__":
    main()
