# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wait, through a watch, until Kubernetes objects satisfy a JMESPath expression."""

from __future__ import annotations

DOCUMENTATION = r"""
module: kube_ready
short_description: Wait until Kubernetes objects satisfy a JMESPath readiness expression
version_added: 0.1.0
description:
  - Lists the objects of O(kind) in O(api_version) (one named object, or all matching O(label_selectors)),
    then watches them from the list's C(resourceVersion) and returns as soon as every object makes
    O(expression) evaluate to V(true). This is the JMESPath counterpart of Crossplane's C(DeriveFromCelQuery).
  - Uses watches, not sleep-polling, so readiness is noticed within one event; one deadline (O(wait_timeout))
    covers all objects. A dropped watch, a C(410 Gone) or an API server that is down for a while is
    recovered from by listing again (with capped backoff) until the deadline.
  - At least one object must match; an empty match is "not ready yet".
  - On timeout the module fails and reports, per object, the last value of the expression and its status conditions.
  - In check mode it evaluates once and reports whether the objects are ready, without waiting or failing.
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.attributes.info_module
  - metalplane.inference.kube
options:
  api_version:
    description: API group/version of the objects, for example V(v1), V(apps/v1) or V(modelplane.ai/v1alpha1).
    type: str
    default: v1
  kind:
    description: Kind of the objects, for example V(Deployment) or V(InferenceCluster).
    type: str
    required: true
  namespace:
    description: Namespace of the objects; omit for cluster-scoped kinds or to watch all namespaces.
    type: str
  name:
    description: Name of the one object to wait for. Mutually exclusive with O(label_selectors).
    type: str
  label_selectors:
    description:
      - Label selector terms (ANDed), for example V(app=web) or V(tier in (gpu,cpu)).
      - Without O(name) or O(label_selectors), every object of the kind (in O(namespace)) must be ready.
      - The syntax (Kubernetes label selector grammar, label key and value rules) is checked before any
        request; a malformed selector fails naming this option.
    type: list
    elements: str
    default: []
  expression:
    description:
      - JMESPath expression evaluated against each whole object; the object is ready when it yields the
        boolean V(true). Any other value (a number, a string, null) is reported but is not ready, so write
        a comparison, for example V(status.readyReplicas == spec.replicas).
      - The default means "the status condition of type C(Ready) has status C(True)".
    type: str
    default: "status.conditions[?type=='Ready'].status | [0] == 'True'"
  wait_timeout:
    description: Seconds to wait for all objects together. V(0) checks once.
    type: int
    default: 120
notes:
  - Unlike M(kubernetes.core.k8s_info) with C(wait=true) this does not sleep between checks (there is no
    C(wait_sleep)); readiness is noticed within one watch event.
"""

EXAMPLES = r"""
- name: Wait for an InferenceCluster to be Ready
  metalplane.inference.kube_ready:
    kubeconfig: "{{ control_plane_kubeconfig }}"
    api_version: modelplane.ai/v1alpha1
    kind: InferenceCluster
    name: r730
    wait_timeout: 900

- name: Wait for every GPU worker Deployment to have all replicas ready
  metalplane.inference.kube_ready:
    api_version: apps/v1
    kind: Deployment
    namespace: ml-team
    label_selectors: ["modelplane.ai/role=worker"]
    expression: "status.readyReplicas == spec.replicas && status.observedGeneration == metadata.generation"
    wait_timeout: 300

- name: Report (without waiting) whether the gateway has an address
  metalplane.inference.kube_ready:
    api_version: modelplane.ai/v1alpha1
    kind: InferenceGateway
    name: default
    expression: "status.gateway.address != null"
  check_mode: true
  register: gateway
"""

RETURN = r"""
ready:
  description: Whether every matched object satisfied the expression (in check mode, at the one evaluation).
  returned: always
  type: bool
objects:
  description: One entry per matched object, sorted by namespace and name.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Object name.
      type: str
    namespace:
      description: Object namespace (namespaced kinds only).
      type: str
    ready:
      description: Whether the expression yielded V(true).
      type: bool
    value:
      description: The expression's last value for this object.
      type: raw
    conditions:
      description: The object's status conditions (type, status, reason, message, lastTransitionTime).
      type: list
      elements: dict
  sample:
    - name: r730
      ready: true
      value: true
      conditions: [{type: Ready, status: "True", reason: Available}]
elapsed:
  description: Seconds spent waiting.
  returned: always
  type: float
"""

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.args import wait_timeout_spec
from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._kube.args import kube_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._kube.readiness import DEFAULT_EXPRESSION
from ansible_collections.metalplane.inference.plugins.module_utils._kube.runners import run_kube_ready


def argument_spec() -> dict[str, Any]:
    return {
        **kube_argument_spec(),
        "api_version": {"type": "str", "default": "v1"},
        "kind": {"type": "str", "required": True},
        "namespace": {"type": "str"},
        "name": {"type": "str"},
        "label_selectors": {"type": "list", "elements": "str", "default": []},
        "expression": {"type": "str", "default": DEFAULT_EXPRESSION},
        **wait_timeout_spec(120),
    }


def main() -> None:
    MetalplaneModule(
        argument_spec=argument_spec(),
        supports_check_mode=True,
        mutually_exclusive=[("name", "label_selectors")],
    ).run(run_kube_ready)


if __name__ == "__main__":
    main()
