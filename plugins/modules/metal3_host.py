# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Provision a bare-metal host of a pool through Metal3 (a BareMetalHost) for a cluster, or release it."""

from __future__ import annotations

DOCUMENTATION = r"""
module: metal3_host
short_description: Claim and provision a bare-metal host through Metal3 (BareMetalHost), or deprovision and release it
version_added: 0.1.0
description:
  - The C(metal3) provisioner of M(metalplane.inference.host_claim)'s pools, for platform teams that run Metal3
    (Ironic through baremetal-operator). It writes C(metal3.io/v1alpha1) BareMetalHosts and Secrets on the
    management cluster named by O(kubeconfig) and waits through Metal3's states.
  - With O(state=present) every input is checked before the first write. Then each host of O(hosts) that has no
    BareMetalHost yet is registered (name = the host's name, C(bmc.address) C(idrac-virtualmedia://) for an iDRAC
    personality, C(redfish-virtualmedia://) with O(hosts[].system_path) otherwise, a C(<name>-bmc-secret)
    credentials Secret owned by the host, C(rootDeviceHints) from O(hosts[].root_disk)), labelled as this
    collection's and with the pool label. A BareMetalHost of that name registered by someone else is used as it
    is, unless its boot MAC differs, which fails.
  - The claim is the BareMetalHost's C(spec.consumerRef), written with the C(resourceVersion) that was read, so no
    other Metal3 consumer (CAPM3) can take the host and of two controllers one wins. The pool is a label selector
    (O(host_selector), by default C(metalplane.inference/pool=<pool>)); the host the cluster holds is returned
    again; otherwise the first host by name that is C(available), not in error, not paused or detached and fits
    O(requirements). A host just registered is awaited until it is available.
  - The claimed host gets a C(<name>-user-data) Secret (cloud-init data with the host name, the login with
    O(ssh_authorized_key), a generated SSH host key that is returned so the controller pins it, and the
    C(/etc/metalplane/provisioned) marker with the cluster and generation) and a C(<name>-network-data) Secret
    (OpenStack C(network_data.json) with the static O(network) on the boot MAC), used both as C(networkData) and as
    C(preprovisioningNetworkDataName), since the deploy ramdisk has no address on a segment without DHCP. Then
    C(image), C(online=true) and C(automatedCleaningMode) are set, which starts provisioning.
  - The wait has a deadline per Metal3 state (O(state_timeouts)) and one overall (O(wait_timeout)). On failure the
    result's C(error) carries Metal3's C(status) (state, C(operationalStatus), C(errorType), C(errorMessage)) and
    C(recovery), V(boot_order) (the deploy ramdisk did not boot, so put the virtual CD first and reset) or
    V(bmc_reset) (C(Virtual media mount failed), so reset the iDRAC), which the C(baremetal_host) role runs with the
    Redfish modules before it waits again.
  - With O(state=absent), the host the cluster holds is deprovisioned as CAPM3 does it (C(image), C(userData),
    C(metaData), C(networkData), C(customDeploy) cleared and C(online=false) in one patch), awaited until
    C(available) and powered off (cleaning done), then released (C(consumerRef) and this collection's labels
    cleared); its config-drive Secrets are deleted, and with O(delete_host) the BareMetalHost too, only if this
    collection registered it.
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.attributes
  - metalplane.inference.modelplane
  - metalplane.inference.metal_pool
attributes:
  check_mode:
    support: full
    details:
      - Reads the BareMetalHosts and Secrets and reports what would be registered, claimed and set; writes and waits
        for nothing.
  diff_mode:
    support: none
notes:
  - O(kubeconfig) names the B(management cluster) that runs baremetal-operator; it may be the Modelplane control
    plane. The options keep the control plane's names and environment fallbacks.
  - O(requirements) are checked against the pool hosts' inventory facts (O(hosts[].facts)) only; Metal3's inspection
    data is not read yet.
  - Metal3 does not reprovision when only the image changes; a host provisioned with another image fails with the
    fix (run O(state=absent) first).
options:
  cluster:
    description: The cluster that claims the host (a DNS name); the C(consumerRef)'s name.
    type: str
    required: true
  state:
    description: V(present) registers, claims and provisions; V(absent) deprovisions and releases.
    type: str
    choices: [present, absent]
    default: present
  namespace:
    description: Namespace of the BareMetalHosts and their Secrets on the management cluster.
    type: str
    default: metal3
  host_selector:
    description:
      - Labels a BareMetalHost must carry to belong to the pool (CAPM3's C(hostSelector.matchLabels)), for a pool
        the platform team registered with labels of its own (for example C(metal.kube.farm/pool=r730)). Hosts this
        module registers get them too.
      - Default C(metalplane.inference/pool=<pool>).
    type: dict
  image:
    description:
      - The node image Ironic writes to the disk. The reference MetalCluster names are accepted as they are
        (C(imageURL), C(imageChecksum), C(imageChecksumType), C(imageDiskFormat)).
      - Required with O(state=present).
    type: dict
    suboptions:
      url:
        description: C(http(s)://) (or C(oci://), C(file://)) URL of the image.
        type: str
        aliases: [imageURL]
      checksum:
        description:
          - The image's hex digest or the URL of a checksum file. Required except for C(live-iso) and C(oci://).
        type: str
        aliases: [imageChecksum]
      checksum_type:
        description: The digest's algorithm; left out, Metal3 detects it.
        type: str
        aliases: [imageChecksumType]
        choices: [md5, sha256, sha512, auto]
      disk_format:
        description: The image format (C(spec.image.format)); V(raw) is streamed, V(qcow2) cached by Ironic.
        type: str
        aliases: [imageDiskFormat]
        choices: [raw, qcow2, vdi, vmdk, live-iso]
  network:
    description: The node's static network on the boot NIC. Required with O(state=present).
    type: dict
    suboptions:
      node_ip:
        description: C(address/prefix), for example C(192.0.2.10/24).
        type: str
      gateway:
        description: The default gateway, on the node's subnet.
        type: str
      dns:
        description: Name servers.
        type: list
        elements: str
  hostname:
    description: The node's host name. Defaults to O(cluster).
    type: str
  ssh_user:
    description: The user the controller logs in as (V(root), or a user created with passwordless sudo).
    type: str
    default: root
  ssh_authorized_key:
    description: The OpenSSH public key allowed to log in. Required with O(state=present).
    type: str
  boot_mode:
    description: C(spec.bootMode) of the hosts this module registers.
    type: str
    choices: [UEFI, UEFISecureBoot, legacy]
    default: UEFI
  automated_cleaning_mode:
    description: V(metadata) wipes the partition tables on every deprovision; V(disabled) does not.
    type: str
    choices: [metadata, disabled]
    default: metadata
  inspection_mode:
    description:
      - C(spec.inspectionMode) of the hosts this module registers. Left out, V(disabled) for a host whose
        O(hosts[].facts) the pool lists (the inspection boot is saved, and it would boot the deploy ramdisk before
        any static network is known for the host, which hangs on a segment without DHCP), else Metal3's default
        (it inspects).
    type: str
    choices: [disabled, agent, fast]
  disable_certificate_verification:
    description:
      - C(bmc.disableCertificateVerification) of the hosts this module registers (an iDRAC's self-signed
        certificate). Also set for a host whose O(hosts[].validate_certs) is false.
    type: bool
    default: false
  claimer:
    description: Who claims, recorded in an annotation. Defaults to C(user@hostname) of the controller.
    type: str
  wait:
    description: Wait for C(provisioned) (present) or C(available) and powered off (absent).
    type: bool
    default: true
  wait_timeout:
    description: Seconds the whole wait may take, claim included.
    type: int
    default: 7200
  state_timeouts:
    description:
      - Seconds a host may stay in one Metal3 state during a wait, by state (V(registering), V(inspecting),
        V(available), V(provisioning), V(provisioned), V(deprovisioning), V(preparing), V(ready),
        V(match profile)). Defaults are sized for a server whose POST takes minutes.
    type: dict
  delete_host:
    description: With O(state=absent), delete the BareMetalHost too, if this collection registered it.
    type: bool
    default: false
  after_recovery:
    description:
      - The Redfish recovery the caller ran after this module's last failure (its C(error.recovery)), returned as
        RV(recovered_by) so the run's timeline shows it as a recovery. The wait then does not count the errors the
        host already shows (Metal3 clears them only when Ironic's retry completes); only new ones fail it before the
        state's deadline.
    type: str
    choices: [boot_order, bmc_reset]
seealso:
  - module: metalplane.inference.host_claim
  - name: Metal3 BareMetalHost API
    description: The fields this module writes.
    link: https://book.metal3.io/bmo/introduction
"""

EXAMPLES = r"""
- name: Provision an R730 of pool r730 for cluster r730-dc1 through Metal3
  metalplane.inference.metal3_host:
    kubeconfig: "{{ modelplane_kubeconfig }}"
    cluster: r730-dc1
    pool: r730
    hosts: "{{ groups['pool_r730'] | map('extract', hostvars, 'pool_host') | list }}"
    disable_certificate_verification: true
    image:
      imageURL: http://images.example/CENTOS_10_NODE_IMAGE_K8S_v1.36.2.qcow2
      imageChecksum: http://images.example/CENTOS_10_NODE_IMAGE_K8S_v1.36.2.qcow2.sha256sum
      imageChecksumType: sha256
      imageDiskFormat: qcow2
    network: {node_ip: 192.168.120.70/24, gateway: 192.168.120.1, dns: [192.168.120.1]}
    ssh_authorized_key: "{{ lookup('ansible.builtin.file', '~/.ssh/id_ed25519.pub') }}"
  register: node

- name: Deprovision and release it
  metalplane.inference.metal3_host:
    kubeconfig: "{{ modelplane_kubeconfig }}"
    cluster: r730-dc1
    pool: r730
    hosts: "{{ groups['pool_r730'] | map('extract', hostvars, 'pool_host') | list }}"
    state: absent
"""

RETURN = r"""
host:
  description: The claimed BareMetalHost (no credentials, no private key).
  returned: when state is present
  type: dict
  contains:
    name:
      description: The BareMetalHost's name.
      type: str
    namespace:
      description: Its namespace.
      type: str
    cluster:
      description: The cluster holding it.
      type: str
    generation:
      description: The install generation (1 for a new claim), written into the marker.
      type: int
    boot_mac:
      description: C(spec.bootMACAddress).
      type: str
    bmc_address:
      description: C(spec.bmc.address).
      type: str
    owned:
      description: Whether this collection registered it.
      type: bool
    address:
      description: The node's IPv4 address.
      type: str
    hostname:
      description: The node's host name.
      type: str
    ssh_host_public_key:
      description: The SSH host key the node boots with, to pin in known_hosts.
      type: str
    status:
      description: C(state), C(operational_status), C(powered_on), C(error_type), C(error_message), C(error_count).
      type: dict
  sample:
    name: r730-a
    namespace: metal3
    cluster: r730-dc1
    generation: 1
    boot_mac: "00:5c:52:31:3a:9c"
    bmc_address: idrac-virtualmedia+https://idrac-r730-a.example/redfish/v1/Systems/System.Embedded.1
    owned: true
    address: 192.168.120.70
    status: {state: provisioned, operational_status: OK, powered_on: true}
registered:
  description: The BareMetalHosts registered or updated (BMC fields, credentials) in this run.
  returned: when state is present
  type: list
  elements: str
skipped_hosts:
  description: For a new claim, the pool's hosts passed over, with C(name) and C(reason).
  returned: when state is present
  type: list
  elements: dict
released:
  description: The BareMetalHosts released.
  returned: when state is absent
  type: list
  elements: str
recovered_by:
  description: O(after_recovery), or V(none).
  returned: when state is present
  type: str
events:
  description: What this run did, in order.
  returned: always
  type: list
  elements: str
"""

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._metal3.args import metal3_host_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._metal3.run import run_metal3_host


def argument_spec() -> dict[str, Any]:
    return metal3_host_argument_spec()


def main() -> None:
    MetalplaneModule(argument_spec=argument_spec(), supports_check_mode=True).run(run_metal3_host)


if __name__ == "__main__":
    main()
