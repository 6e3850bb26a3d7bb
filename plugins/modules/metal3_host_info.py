# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read the BareMetalHost a cluster holds through Metal3, and the SSH host key of its install."""

from __future__ import annotations

DOCUMENTATION = r"""
module: metal3_host_info
short_description: Read the BareMetalHost a cluster holds (Metal3 provisioner) and its install's SSH host key
version_added: 0.1.0
description:
  - Returns the BareMetalHost of the pool whose C(spec.consumerRef) names O(cluster), as
    M(metalplane.inference.metal3_host) claimed it, with Metal3's status and the public half of the SSH host key the
    install of the claim's generation boots with (kept in the host's C(<name>-user-data) Secret), so a teardown can
    log in to the node with the key pinned before Metal3 cleans its disk. Writes nothing.
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.attributes.INFO_MODULE
  - metalplane.inference.modelplane
  - metalplane.inference.metal_pool
options:
  cluster:
    description: The cluster whose host to read.
    type: str
    required: true
  namespace:
    description: Namespace of the BareMetalHosts and their Secrets on the management cluster.
    type: str
    default: metal3
  host_selector:
    description: Labels of the pool's BareMetalHosts (M(metalplane.inference.metal3_host)'s O(host_selector)).
    type: dict
seealso:
  - module: metalplane.inference.metal3_host
"""

EXAMPLES = r"""
- name: Find the node of cluster r730-dc1
  metalplane.inference.metal3_host_info:
    kubeconfig: "{{ modelplane_kubeconfig }}"
    cluster: r730-dc1
    pool: r730
    hosts: "{{ groups['pool_r730'] | map('extract', hostvars, 'pool_host') | list }}"
  register: held
"""

RETURN = r"""
host:
  description: The held BareMetalHost, or null when the cluster holds none.
  returned: always
  type: dict
  contains:
    name:
      description: The BareMetalHost's name.
      type: str
    generation:
      description: The claim's install generation.
      type: int
    image:
      description: C(spec.image.url), null when deprovisioned.
      type: str
    ssh_host_public_key:
      description: The install's SSH host key (public), null when its user data is gone or of another generation.
      type: str
    status:
      description: C(state), C(operational_status), C(powered_on), C(error_type), C(error_message), C(error_count).
      type: dict
  sample:
    name: r730-a
    generation: 1
    image: http://images.example/node.qcow2
    ssh_host_public_key: ssh-ed25519 AAAAC3Nza... root@r730-dc1
    status: {state: provisioned, operational_status: OK, powered_on: true}
"""

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._metal3.args import metal3_pool_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._metal3.run import run_metal3_host_info


def argument_spec() -> dict[str, Any]:
    return metal3_pool_argument_spec()


def main() -> None:
    MetalplaneModule(argument_spec=argument_spec(), supports_check_mode=True).run(run_metal3_host_info)


if __name__ == "__main__":
    main()
