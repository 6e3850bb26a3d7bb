# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Claim a bare-metal host of a pool for a cluster, durably and exclusively, or release it."""

from __future__ import annotations

DOCUMENTATION = r"""
module: host_claim
short_description: Claim a free bare-metal host of a pool for a cluster (a Lease, or a Metal3 BareMetalHost)
version_added: 0.1.0
description:
  - With O(state=present), returns the host of O(pool) that cluster O(cluster) holds, or claims one. The same
    cluster always gets the same host back; a new claim takes the first free host, in O(hosts) order, whose
    inventory facts fit O(requirements), whose BMC answers over Redfish and whose Redfish inventory (PCIe GPUs,
    memory, NIC MACs) does not contradict O(requirements) or its O(hosts[].boot_mac). Hosts that do not qualify
    are listed in RV(skipped_hosts) with the reason and never claimed.
  - The claim is a C(coordination.k8s.io/v1) Lease per host in O(namespace) on the Modelplane control plane,
    created atomically (or taken over with its C(resourceVersion) when it was released). Two controllers claiming
    at the same time can never both win; the claim survives a killed controller and a lost inventory cache. It
    records the cluster (C(spec.holderIdentity)), when (C(spec.acquireTime)), who claimed (O(claimer)) and the
    install generation. It does not expire (C(leaseDurationSeconds) is unset).
  - With O(bmc_hint=true) the claim is also shown on the BMC as the System's C(AssetTag) (C(mp:<cluster>)), only
    over an empty tag or one this module wrote; a person's asset tag is kept. A failed hint write is a warning.
  - With O(state=absent), releases the claim of O(cluster) (deletes its Lease, guarded by uid and
    C(resourceVersion)) and clears the hint. Releasing a host claimed by another cluster needs O(force=true).
    Releasing a host that is not claimed changes nothing.
  - With O(backend=metal3) the claim is the C(spec.consumerRef) of a Metal3 C(BareMetalHost) in O(namespace) on the
    management cluster O(kubeconfig) names, as CAPM3 claims hosts, so no other Metal3 consumer can take it. The pool
    is the BareMetalHosts O(host_selector) selects, the first C(available) one by name whose O(hosts[].facts) fit
    O(requirements) is claimed with a C(resourceVersion)-guarded update, and a lost race (409) moves to the next.
    The hosts must be registered already (by M(metalplane.inference.metal3_host) or the platform team); a host still
    registering or inspecting is skipped, never awaited. No Lease and no BMC hint is written, and no BMC is asked.
  - With O(backend=metal3) and O(state=absent), a host that still holds an image or a config drive is refused
    (deprovision it first with M(metalplane.inference.metal3_host) O(state=absent)), since releasing it would hand
    a running node to the next consumer. O(reinstall) is not offered with this backend.
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.attributes
  - metalplane.inference.modelplane
  - metalplane.inference.metal_pool
attributes:
  check_mode:
    support: full
    details:
      - Reads the Leases and asks the BMCs (read-only) and returns the host that would be claimed or released.
  diff_mode:
    support: full
    details:
      - Shows the Lease before and after (labels, annotations, spec); it holds no secret.
options:
  backend:
    description:
      - Where the claim lives. V(lease) is a C(coordination.k8s.io/v1) Lease per host on the Modelplane control
        plane (the C(redfish) provisioner's). V(metal3) is the BareMetalHost's C(consumerRef) (see the description).
    type: str
    choices: [lease, metal3]
    default: lease
  namespace:
    description:
      - Namespace of the claims. Default C(modelplane-system) (it exists on every Modelplane control plane, and this
        collection already writes there) with O(backend=lease), C(metal3) (the BareMetalHosts' namespace) with
        O(backend=metal3).
    type: str
    default: null
  host_selector:
    description:
      - With O(backend=metal3), the labels a BareMetalHost must carry to belong to the pool (CAPM3's
        C(hostSelector.matchLabels)). Default C(metalplane.inference/pool=<pool>).
    type: dict
  cluster:
    description: Name of the cluster that claims the host (a DNS-1123 label), the Lease's C(holderIdentity).
    type: str
    required: true
  state:
    description: V(present) claims (or returns the current claim), V(absent) releases.
    type: str
    choices: [present, absent]
    default: present
  host:
    description:
      - With O(state=present), claim only this host of O(hosts) (when the cluster holds none yet).
      - With O(state=absent), release this host; it may be missing from O(hosts) (then no hint is cleared).
    type: str
  force:
    description: With O(state=absent) and O(host), release the host although another cluster holds it.
    type: bool
    default: false
  claimer:
    description: Who claims, recorded with the claim. Defaults to C(user@hostname) of the controller.
    type: str
  reinstall:
    description:
      - Increment the generation of the cluster's existing claim (a new claim starts at generation 1 and a re-claim
        keeps it). The install ties the SSH host key and its marker file to the generation, so this forces a fresh
        install. Reports a change every time it is set.
    type: bool
    default: false
    aliases: [bump_generation]
  bmc_hint:
    description: Mirror the claim in the BMC's C(AssetTag) (see the description).
    type: bool
    default: true
seealso:
  - module: metalplane.inference.host_pool_info
"""

EXAMPLES = r"""
- name: Claim a free R730 for the cluster (each host of group pool_r730 keeps its entry in variable pool_host)
  metalplane.inference.host_claim:
    kubeconfig: "{{ modelplane_kubeconfig }}"
    cluster: r730-dc1
    pool: r730
    hosts: "{{ groups['pool_r730'] | default([]) | map('extract', hostvars, 'pool_host') | list }}"
    requirements:
      gpu_model: V100
      gpu_count: 2
      min_memory_gib: 256
  register: claimed

- name: A pool written out by hand
  metalplane.inference.host_claim:
    kubeconfig: "{{ modelplane_kubeconfig }}"
    cluster: r730-dc1
    pool: r730
    hosts:
      - name: r730-a
        bmc_url: https://idrac-r730-a.example
        username: root
        password: "{{ vault_idrac_password }}"
        personality: idrac8
        boot_mac: "00:5c:52:31:3a:9c"
        ca_cert: /etc/pki/idrac-ca.pem
        facts: {gpu_model: Tesla V100-PCIE-32GB, gpu_count: 2, disks: [/dev/sda]}

- name: Claim a registered BareMetalHost instead (Metal3 keeps the claim in its consumerRef)
  metalplane.inference.host_claim:
    kubeconfig: "{{ management_kubeconfig }}"
    backend: metal3
    cluster: r730-dc1
    pool: r730
    hosts: "{{ pool_hosts }}"
    requirements: {gpu_model: V100}
- name: Release the cluster's host
  metalplane.inference.host_claim:
    kubeconfig: "{{ modelplane_kubeconfig }}"
    cluster: r730-dc1
    pool: r730
    hosts: "{{ pool_hosts }}"
    state: absent
"""

RETURN = r"""
host:
  description: The claimed host (no credentials). With O(state=present) only.
  returned: when state is present
  type: dict
  contains:
    name:
      description: Inventory name.
      type: str
    bmc_url:
      description: The BMC URL.
      type: str
    boot_mac:
      description: The boot NIC's MAC, normalised (lower case, colons).
      type: str
    personality:
      description: As given in O(hosts).
      type: str
    facts:
      description: As given in O(hosts).
      type: dict
    cluster:
      description: The holder.
      type: str
    generation:
      description: The install generation (1 for a new claim).
      type: int
    since:
      description: When the claim was made (RFC 3339, UTC); null in check mode for a new claim.
      type: str
    claimer:
      description: Who claimed it.
      type: str
    lease:
      description: C(namespace/name) of the Lease; null with O(backend=metal3).
      type: str
    bare_metal_host:
      description: With O(backend=metal3), C(namespace/name) of the claimed BareMetalHost.
      type: str
    root_disk:
      description: As given in O(hosts[].root_disk) (normalised), empty when not given.
      type: dict
    provisioning:
      description:
        - The provisioning record kept with the claim by M(metalplane.inference.host_provision) (C(generation),
          C(phase), C(root_disk), C(ssh_host_key), C(boot_order)); empty before the first install step.
      type: dict
    inventory:
      description: What the BMC reported, for a claim made in this run.
      type: dict
  sample:
    name: r730-a
    bmc_url: https://idrac-r730-a.example
    boot_mac: "00:5c:52:31:3a:9c"
    personality: idrac8
    facts: {gpu_model: Tesla V100-PCIE-32GB, gpu_count: 2}
    cluster: r730-dc1
    generation: 1
    since: "2026-08-22T09:14:03.123456Z"
    claimer: ops@controller-1
    lease: modelplane-system/metal-claim.r730.r730-a
skipped_hosts:
  description:
    - Hosts passed over, with C(status) (V(claimed), V(mismatched), V(unreachable); with O(backend=metal3) also
      V(unavailable), a BareMetalHost not in C(available) or in error) and C(reason).
  returned: when state is present
  type: list
  elements: dict
  sample: [{name: r730-b, status: unreachable, reason: "Logging in to https://idrac-r730-b.example failed: ..."}]
released:
  description:
    - With O(state=absent), the claims released (host name, cluster, claimer, since, generation, lease; with
      O(backend=metal3) name, cluster and C(bare_metal_host)).
  returned: when state is absent
  type: list
  elements: dict
bmc_hint:
  description:
    - What happened to the BMC's AssetTag hint; C(status) is V(written), V(cleared), V(unchanged), V(kept) (a tag a
      person wrote), V(failed) (with C(error)) or V(disabled).
  returned: always
  type: dict
  sample: {status: written, value: "mp:r730-dc1"}
"""

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._metal.claim_run import run_host_claim
from ansible_collections.metalplane.inference.plugins.module_utils._metal.pool_args import metal_pool_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._metal3.run import run_metal3_claim


def argument_spec() -> dict[str, Any]:
    return {
        **metal_pool_argument_spec(),
        "backend": {"type": "str", "choices": ["lease", "metal3"], "default": "lease"},
        "namespace": {"type": "str"},  # the default depends on the backend
        "host_selector": {"type": "dict"},
        "cluster": {"type": "str", "required": True},
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "host": {"type": "str"},
        "force": {"type": "bool", "default": False},
        "claimer": {"type": "str"},
        "reinstall": {"type": "bool", "default": False, "aliases": ["bump_generation"]},
        "bmc_hint": {"type": "bool", "default": True},
    }


def claim(module: MetalplaneModule) -> dict[str, Any]:
    if module.params["backend"] == "metal3":
        return run_metal3_claim(module)
    if module.params.get("host_selector"):
        raise InputError("host_selector", "selects BareMetalHosts: it applies only with backend: metal3")
    return run_host_claim(module)


def main() -> None:
    MetalplaneModule(argument_spec=argument_spec(), supports_check_mode=True).run(claim)


if __name__ == "__main__":
    main()
