# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check, create once, or delete (only its own) the control plane's InferenceGateway ``default``.

A module of its own rather than an option of ``modelplane_cluster``: the gateway belongs to the
control plane, not to a cluster, so it has its own life cycle (one per control plane, shared by every
cluster, never removed by a cluster's teardown).
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: modelplane_gateway
short_description: Check or create the Modelplane control plane's InferenceGateway (the public front door)
version_added: 0.1.0
description:
  - Every chat completion goes through the control plane's InferenceGateway, the singleton named C(default)
    (C(http://<its status.address>/<namespace>/<service>/v1/...)), shared by every InferenceCluster.
  - First checks that the control plane serves C(inferencegateways.modelplane.ai), naming the CRD when it does not.
  - O(state=present) with O(manage=false) only checks that C(default) exists (and is Ready with an address, waiting
    for it with O(wait=true), at once without); a missing or unready gateway fails, naming it.
  - O(state=present) with O(manage=true) creates C(default) with the given backend when it is missing (once per
    control plane; a concurrent create by another cluster's run is fine) and updates its spec when it differs and
    carries this collection's C(app.kubernetes.io/managed-by) label. A gateway created by someone else is used as it
    is, never rewritten.
  - O(state=absent) deletes C(default) only when this collection created it, and waits until it is gone; any other
    gateway is left in place with a warning. No playbook of this collection runs it; it is an explicit request.
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.attributes
  - metalplane.inference.modelplane
attributes:
  check_mode:
    support: full
    details:
      - Reports in RV(actions) what would be created, updated or deleted; reads only. A missing gateway with
        O(manage=true) is planned, not an error, so a preflight in check mode passes.
  diff_mode:
    support: full
    details:
      - Shows the gateway's labels and spec before and after.
options:
  state:
    description: V(present) checks or creates the gateway, V(absent) deletes it when this collection created it.
    type: str
    choices: [present, absent]
    default: present
  manage:
    description:
      - Whether this collection creates and updates the gateway. V(false) only checks it.
    type: bool
    default: false
  backend:
    description: Gateway implementation (C(spec.backend)); Modelplane v0.3.1 offers Traefik only.
    type: str
    choices: [Traefik]
    default: Traefik
  traefik_version:
    description: Traefik Helm chart version (C(spec.traefik.version)), as Modelplane's examples pin it.
    type: str
    default: "40.2.0"
  load_balancer:
    description:
      - C(spec.traefik.loadBalancer). V(MetalLB) where the control plane has no native LoadBalancer (bare metal,
        kind); leave unset on clouds.
    type: str
    choices: [MetalLB]
  metallb_address_pool:
    description:
      - Address range MetalLB gives the gateway Service (C(spec.traefik.metallb.addressPool)); required with
        O(load_balancer=MetalLB), for example C(172.18.255.200-172.18.255.250).
    type: str
  wait:
    description:
      - With O(state=present), wait until the gateway is Ready with a C(status.address). With O(state=absent), wait
        until it is gone.
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait.
    type: int
    default: 600
seealso:
  - module: metalplane.inference.modelplane_cluster
  - module: metalplane.inference.modelplane_smoke
"""

EXAMPLES = r"""
- name: Preflight (read-only) - the gateway exists and is Ready, or this collection will create it
  metalplane.inference.modelplane_gateway:
    kubeconfig: "{{ modelplane_kubeconfig }}"
    manage: "{{ modelplane_gateway_manage | default(false) }}"
    wait: false
  check_mode: true
  changed_when: false

- name: Create the gateway once per control plane (MetalLB on bare metal)
  metalplane.inference.modelplane_gateway:
    kubeconfig: "{{ modelplane_kubeconfig }}"
    manage: true
    load_balancer: MetalLB
    metallb_address_pool: 192.168.120.200-192.168.120.220
  run_once: true

- name: Remove the gateway this collection created (an explicit request; no teardown does this)
  metalplane.inference.modelplane_gateway:
    kubeconfig: "{{ modelplane_kubeconfig }}"
    state: absent
"""

RETURN = r"""
actions:
  description: What was (in check mode, would be) created, updated or deleted, one line each.
  returned: always
  type: list
  elements: str
  sample: [create InferenceGateway default]
gateway:
  description: The gateway as last observed.
  returned: always
  type: dict
  contains:
    name:
      description: Always C(default).
      type: str
    exists:
      description: Whether it exists.
      type: bool
    ready:
      description: Whether it is Ready with an address.
      type: bool
    address:
      description: C(status.address), the host of the public URLs.
      type: str
    managed:
      description: Whether this collection created it (and so may update or delete it).
      type: bool
    backend:
      description: C(spec.backend).
      type: str
    unmet:
      description: What it still lacks, one line each.
      type: list
      elements: str
  sample: {name: default, exists: true, ready: true, address: 203.0.113.10, managed: true, backend: Traefik, unmet: []}
"""

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.args import wait_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.args import modelplane_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.gateway import (
    DEFAULT_TRAEFIK_VERSION,
    run_modelplane_gateway,
)


def argument_spec() -> dict[str, Any]:
    return {
        **modelplane_argument_spec(),
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "manage": {"type": "bool", "default": False},
        "backend": {"type": "str", "choices": ["Traefik"], "default": "Traefik"},
        "traefik_version": {"type": "str", "default": DEFAULT_TRAEFIK_VERSION},
        "load_balancer": {"type": "str", "choices": ["MetalLB"]},
        "metallb_address_pool": {"type": "str"},
        **wait_argument_spec(600),
    }


def main() -> None:
    MetalplaneModule(argument_spec=argument_spec(), supports_check_mode=True).run(run_modelplane_gateway)


if __name__ == "__main__":
    main()
