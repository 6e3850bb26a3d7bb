# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check a whole inventory of bare-metal clusters before any host is claimed, any BMC changed, any ISO built."""

from __future__ import annotations

DOCUMENTATION = r"""
module: metal_preflight
short_description: Check an inventory of bare-metal clusters and their host pools before anything is claimed
version_added: 0.1.0
description:
  - Validates every bare-metal cluster and every host pool of an inventory at once and fails listing B(all)
    problems, each with the field that holds it (for example C(clusters[0].gateway) or
    C(pools.lab.hosts[1].boot_mac)), the value (never a secret) and the fix. Run it once (C(run_once)) before
    any cluster is converged. It claims nothing, changes no BMC and builds no ISO.
  - "Without any request: cluster names (DNS labels, unique), states, pools (known, not empty), provisioners,
    requirements (a C(gpu_model) the driver matrix knows), the node's C(node_ip) (an IPv4 host address of its
    prefix, unique across the inventory),
    C(gateway) (on that subnet, not the node itself), C(dns), C(networks) (CIDRs that overlap neither each
    other, the node subnet, O(reserved_networks), O(other_networks), nor another cluster's networks or node
    subnet), C(os_family), the installer ISO's URL scheme and sha256 syntax, C(ssh_authorized_key) (one OpenSSH
    public key) and its C(ssh_private_key_file) (a file on the controller), C(ssh_port), C(hostname) (as
    C(boot_iso) checks it), C(root_password_hash) (a crypt(3) hash; never echoed), C(protected) clusters not torn
    down;
    and for every pool host its name, C(bmc_url), credentials present, C(boot_mac), C(root_disk) (a WWN or
    serial), with no host name, BMC or boot MAC listed twice, in one pool or in two."
  - "Without any request, the node software of each present cluster: the NVIDIA driver installer's URL and sha256
    (required), its version (given or read from the URL), the kernel module type, and the compatibility matrix of
    M(metalplane.inference.gpu_driver_check) for the requirements' GPU model (for example a V100 with the open
    module or a branch above 580 is refused); the Kubernetes version (v<major>.<minor>.<patch>, at least v1.31 for
    kubeadm's v1beta4 and v1.34 for C(resource.k8s.io/v1)); the pod and service CIDRs (not overlapping each
    other, the node subnet, the reserved networks or another cluster's networks); the LoadBalancer range (inside
    the node's subnet, without the node or its gateway, not overlapping another cluster's); the API port; the node
    labels."
  - "Then, read-only, when the inventory itself is sound: the claim Leases of every pool a cluster names (one
    list call per pool on the Modelplane control plane) and, with O(check_bmcs=true), the Redfish inventory of
    the candidate hosts (GET requests only, HTTP Basic authentication: no session is created). A present cluster
    that holds no claim yet must have a free host that fits, found in the order C(host_claim) uses; clusters
    sharing a pool are planned in inventory order and never get the same host, so N new clusters on a pool need
    N free fitting hosts. A pinned C(host) that another cluster holds fails, for C(state=absent) too (a release
    would need C(force)). The host a C(redfish) cluster holds or would get must have a C(root_disk). The host a
    cluster would newly claim is checked against the driver matrix with the GPUs and the BIOS its BMC reports:
    Secure Boot on is refused (module signing is out of scope), and so is MMIO above 4 GB off with a large-BAR GPU;
    a setting the BMC does not expose is a warning. With O(check_package_repositories), each Kubernetes version is
    looked up in its minor's package repository."
  - "Finally the installer ISOs: each distinct URL that a cluster will install from (its claim is new) is
    downloaded once into O(iso_cache_dir), the cache C(boot_iso) reads (C(<sha256>.iso)), and verified, so an
    unreachable URL or a checksum mismatch fails here and the later C(boot_iso) finds the ISO cached. An ISO
    already cached under its sha256 is not fetched again (nor would C(boot_iso) fetch it). An ISO that only
    clusters holding their hosts name is not downloaded - a scheduled reconcile in a fresh container would
    otherwise fetch gigabytes it does not use - it is found in the cache or its server is asked for the
    headers (status V(reachable)). A C(file://) URL or an absolute path is verified in place."
  - Clusters with C(state=absent) are checked for their name, pool and claim only.
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.attributes.INFO_MODULE
  - metalplane.inference.modelplane
attributes:
  check_mode:
    support: full
    details:
      - Downloads nothing. An ISO already in O(iso_cache_dir) or given as a local file is verified; a remote one
        that is not cached is only asked for its headers (HEAD, or a one-byte range when HEAD is refused), so its
        checksum is verified by the first run that is not in check mode.
options:
  clusters:
    description:
      - The bare-metal clusters of the inventory, one per host of group C(metal_clusters), built from their host
        variables (C(cluster_state), C(baremetal_host_*), C(cluster_networks)).
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The cluster's name (its inventory host name), a DNS-1123 label; the claim's holder.
        type: str
      state:
        description: V(present) or V(absent) (the host variable C(cluster_state)).
        type: str
        default: present
      pool:
        description: The pool the cluster's host comes from, the C(<name>) of group C(pool_<name>).
        type: str
      provisioner:
        description:
          - V(redfish) (installs from the installer ISO over virtual media; needs the ISO, the root password
            hash and the host's C(root_disk)) or V(metal3).
        type: str
        default: redfish
      metal3:
        description:
          - With O(clusters[].provisioner=metal3), where its BareMetalHosts live and the image (the role's
            C(baremetal_host_metal3_*) variables). The claim is planned from the BareMetalHosts of
            O(clusters[].metal3.namespace) as M(metalplane.inference.metal3_host) would make it; no Lease is read
            for the cluster and its BMCs are not probed (Metal3 owns them).
        type: dict
        suboptions:
          kubeconfig:
            description: The management cluster running the baremetal-operator. Default O(kubeconfig).
            type: str
          namespace:
            description: The BareMetalHosts' namespace.
            type: str
            default: metal3
          host_selector:
            description: The labels of the pool's BareMetalHosts. Default C(metalplane.inference/pool=<pool>).
            type: dict
          image:
            description:
              - The node image, as M(metalplane.inference.metal3_host) takes it (C(url), C(checksum),
                C(checksum_type), C(disk_format), or the MetalCluster names C(imageURL), C(imageChecksum),
                C(imageChecksumType), C(imageDiskFormat)). Checked with that module's rules.
            type: dict
      host:
        description:
          - Pin the cluster to this host of its pool. It must not be held by another cluster (also when the
            cluster is being released), and a cluster that holds another host fails until that one is released.
        type: str
      requirements:
        description:
          - What the cluster's host must have, as C(host_claim) checks it, a mapping of C(gpu_model) (a GPU model,
            matched as a case-insensitive substring, V(V100)), C(gpu_count) (at least this many GPUs) and
            C(min_memory_gib) (at least this much memory, in GiB).
          - Taken as given (not converted by Ansible's argument check), so that a wrong type, a count that is a
            word or an unknown key is reported under its field with every other problem of the inventory.
        type: raw
      node_ip:
        description: The node's static IPv4 address with its prefix, V(192.168.120.70/24).
        type: str
      gateway:
        description: The default gateway, on the node's subnet.
        type: str
      dns:
        description: DNS servers (at least one).
        type: list
        elements: str
      networks:
        description: The cluster's pod and service CIDRs (C(cluster_networks)).
        type: list
        elements: str
      os_family:
        description: V(el), V(debian) or V(ubuntu), as C(boot_iso) supports them.
        type: str
      installer_iso_url:
        description: The vendor installer ISO, C(https://), C(http://), C(file://) or an absolute path.
        type: str
      installer_iso_sha256:
        description: The installer ISO's sha256, V(sha256:<hex>) or the bare 64 hex digits.
        type: str
      ssh_authorized_key:
        description: The OpenSSH public key the provisioner logs in with.
        type: str
      ssh_port:
        description: The node's SSH port (C(baremetal_host_ssh_port)), 1 to 65535 (default 22).
        type: raw
      hostname:
        description:
          - The installed system's host name (C(baremetal_host_hostname); default the cluster's name), checked as
            C(boot_iso) checks it for an ISO provisioner.
        type: str
      root_password_hash:
        description: The root password as a crypt(3) hash. Never returned or shown in a message.
        type: str
      protected:
        description: A protected cluster is never torn down; V(state=absent) fails until this is V(false).
        type: bool
        default: false
      ssh_private_key_file:
        description: The private half of O(clusters[].ssh_authorized_key) on the controller; it must be a file.
        type: str
      os_version:
        description: The OS release the node is installed with (V(10), V(24.04), V(12)), for the driver matrix.
        type: str
      nvidia_driver_installer_url:
        description:
          - The NVIDIA C(.run) installer (C(https://), C(http://), C(file://) or an absolute path). Required for a
            present cluster.
        type: str
      nvidia_driver_installer_sha256:
        description: The installer's sha256 (V(sha256:<hex>) or the bare hex); required with the URL.
        type: str
      nvidia_driver_version:
        description:
          - The driver version (V(580.105.08)); default read from the URL's C(NVIDIA-Linux-x86_64-<version>.run).
        type: str
      nvidia_driver_kernel_module_type:
        description: V(auto) (default; the matrix resolves it), V(proprietary) or V(open).
        type: str
      kubeadm_node_kubernetes_version:
        description:
          - The Kubernetes release, V(v1.34.2); at least v1.31 (kubeadm's v1beta4 configuration) and v1.34 (Modelplane
            needs C(resource.k8s.io/v1)). Required for a present cluster.
        type: str
      kubeadm_node_pod_cidr:
        description: The pod CIDR (default V(10.244.0.0/16)), compared for overlaps like O(clusters[].networks).
        type: str
      kubeadm_node_service_cidr:
        description: The service CIDR (default V(10.96.0.0/12)), compared for overlaps like O(clusters[].networks).
        type: str
      kubeadm_node_api_port:
        description: The Kubernetes API's port on the node, 1 to 65535 (default 6443).
        type: raw
      kubeadm_node_labels:
        description:
          - Extra node labels, a mapping of valid Kubernetes label keys to values; C(modelplane.ai/pool) is the
            role's. Taken as given, so that a list or a string is reported under its field.
        type: raw
      kubeadm_node_lb_pool:
        description:
          - The LoadBalancer addresses, ranges V(192.168.120.200-192.168.120.210), CIDRs or single addresses, all inside
            the node's subnet, without the node, its gateway, the subnet's network and broadcast addresses, another
            cluster's node address or range.
        type: list
        elements: str
      kubeadm_node_package_repository:
        description:
          - Base URL of the Kubernetes package repositories (a mirror of C(https://pkgs.k8s.io), the default), with
            its C(core:/stable:/v<minor>/deb/) or C(rpm/) layout; read when O(check_package_repositories=true).
        type: str
  pools:
    description:
      - The host pools, one entry per group C(pool_<name>) a cluster may name, with the BMC hosts of the group.
      - A list (not a mapping of pool name to hosts) so that every BMC password is a declared C(no_log) option.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The pool's name, the C(<name>) of group C(pool_<name>).
        type: str
      hosts:
        description: The BMC hosts of the pool, as C(host_claim) takes them, plus their C(root_disk).
        type: list
        elements: dict
        default: []
        suboptions:
          name:
            description: Inventory name of the host, unique across all pools.
            type: str
          bmc_url:
            description: URL of the BMC, C(https://host[:port]) (C(http://) for lab emulators only).
            type: str
          username:
            description: BMC user name.
            type: str
          password:
            description: BMC password (keep it in a vault). Never returned or logged.
            type: str
          personality:
            description: The BMC kind the inventory expects (for example V(idrac8)).
            type: str
          boot_mac:
            description: MAC address of the NIC the server installs from (six hex pairs), unique across all pools.
            type: str
          validate_certs:
            description: Verify the BMC's TLS certificate.
            type: bool
            default: true
          ca_cert:
            description: PEM file of the CA that signed the BMC certificate.
            type: path
          facts:
            description:
              - What a person knows about the host, a mapping (C(gpu_model), C(gpu_count), C(memory_gib) are
                checked). Taken as given, so that a value that is not a mapping is reported under its field.
            type: raw
          root_disk:
            description:
              - The install disk, a mapping with exactly one of C(wwn) (World Wide Name, 16 or 32 hex digits; C(0x),
                C(naa.), C(eui.) prefixes accepted) and C(serial) (as udev reports it, C(ID_SERIAL_SHORT)); no device
                names.
              - Taken as given, so that a device name written in place of the mapping (V(/dev/sda)) is reported under
                its field with every other problem.
            type: raw
          system_path:
            description: The Redfish System, C(/redfish/v1/Systems/<id>) (the C(metal3) provisioner's generic BMCs).
            type: str
  namespace:
    description: Namespace of the claim Leases on the control plane (C(host_claim)'s default).
    type: str
    default: modelplane-system
  check_bmcs:
    description: Read the Redfish inventory of each candidate host; V(false) plans from the Leases and facts alone.
    type: bool
    default: true
  api_timeout:
    description: Seconds per HTTP request to a BMC or to the server of an installer ISO.
    type: int
    default: 30
  iso_cache_dir:
    description:
      - Where installer ISOs are downloaded to, named by their sha256.
      - The same directory as O(metalplane.inference.boot_iso#module:cache_dir).
    type: path
    default: ~/.cache/metalplane/isos
  iso_validate_certs:
    description: Verify the TLS certificate of the installer ISOs' servers.
    type: bool
    default: true
  iso_ca_cert:
    description: CA bundle to verify the installer ISOs' servers with.
    type: path
  reserved_networks:
    description: Networks no cluster network may overlap (the control plane's networks, an office range).
    type: list
    elements: str
    default: []
  other_networks:
    description: Networks other clusters of the inventory already use (the VKE clusters' C(cluster_networks)).
    type: list
    elements: str
    default: []
  check_package_repositories:
    description:
      - Read the package index of each Kubernetes minor the clusters ask for (C(deb/Packages), or C(rpm/repodata)
        and its primary index; GETs only, once per repository and minor) and refuse a version it does not offer,
        or a minor without a repository, naming the versions found.
      - A repository that cannot be reached is a warning, not a failure. V(false) skips the check (the node's
        package manager then refuses an unavailable version, before kubeadm runs).
    type: bool
    default: true
seealso:
  - module: metalplane.inference.host_claim
  - module: metalplane.inference.boot_iso
  - module: metalplane.inference.vke_preflight
"""

EXAMPLES = r"""
- name: Preflight every bare-metal cluster of the inventory
  metalplane.inference.metal_preflight:
    kubeconfig: "{{ modelplane_kubeconfig }}"
    reserved_networks: [10.8.0.0/16]
    other_networks: [10.40.0.0/20]
    clusters:
      - name: lab-r730
        pool: lab
        requirements: {gpu_model: V100, gpu_count: 2, min_memory_gib: 256}
        node_ip: 192.168.120.70/24
        gateway: 192.168.120.1
        dns: [192.168.120.1]
        networks: [10.244.0.0/16, 10.96.0.0/12]
        os_family: el
        installer_iso_url: https://mirror.example/CentOS-Stream-10-x86_64-dvd1.iso
        installer_iso_sha256: "{{ centos10_dvd_sha256 }}"
        ssh_authorized_key: "{{ lookup('file', '~/.ssh/id_ed25519.pub') }}"
        root_password_hash: "{{ vault_root_password_hash }}"
        ssh_private_key_file: ~/.ssh/id_ed25519
        os_version: "10"
        nvidia_driver_installer_url: https://us.download.nvidia.com/tesla/580.105.08/NVIDIA-Linux-x86_64-580.105.08.run
        nvidia_driver_installer_sha256: "{{ nvidia_580_105_08_sha256 }}"
        nvidia_driver_kernel_module_type: proprietary
        kubeadm_node_kubernetes_version: v1.34.2
        kubeadm_node_pod_cidr: 10.244.0.0/16
        kubeadm_node_service_cidr: 10.96.0.0/12
        kubeadm_node_lb_pool: [192.168.120.200-192.168.120.210]
    pools:
      - name: lab
        hosts:
          - name: r730-1
            bmc_url: https://idrac-r730-1.example
            username: root
            password: "{{ vault_idrac_password }}"
            personality: idrac8
            boot_mac: "00:5c:52:31:3a:9c"
            root_disk: {wwn: "0x5000c500a1b2c3d4"}
            facts: {gpu_model: V100, gpu_count: 2, memory_gib: 256}
  run_once: true
  register: metal_preflight

- name: Show which host each cluster holds or would get
  ansible.builtin.debug:
    msg: "{{ metal_preflight.clusters | items2dict(key_name='name', value_name='host') }}"
"""

RETURN = r"""
clusters:
  description: Per cluster, in inventory order, what it holds or would get, once every check passed.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The cluster.
      type: str
    state:
      description: Desired state.
      type: str
    pool:
      description: Its pool.
      type: str
    provisioner:
      description: Its provisioner.
      type: str
    node_ip:
      description: The node's address with its prefix (null for an absent cluster).
      type: str
    claim:
      description:
        - V(held) (the cluster holds RV(clusters[].host)), V(new) (C(host_claim) would claim it), V(release)
          (C(state=absent), the hosts in RV(clusters[].releases) will be released) or V(none) (absent, holds
          nothing).
      type: str
    host:
      description: The host held or planned (name, bmc_url, boot_mac, personality, facts, root_disk; no credentials).
      type: dict
    generation:
      description: The claim's install generation when it is held.
      type: int
    lease:
      description: C(namespace/name) of the Lease when it is held.
      type: str
    bare_metal_host:
      description: With provisioner metal3, C(namespace/name) of the BareMetalHost the cluster holds or would claim.
      type: str
    releases:
      description: With C(state=absent), the hosts whose claims a release removes.
      type: list
      elements: str
    skipped_hosts:
      description: Hosts passed over before RV(clusters[].host), with C(status) (V(claimed), V(planned) for an
        earlier cluster of the inventory, V(mismatched), V(unreachable)) and C(reason).
      type: list
      elements: dict
    iso:
      description:
        - The installer ISO (url, sha256, path, verified, status V(downloaded), V(cached), V(local) or V(reachable)
          (in check mode, or when no cluster installs from it in this run)); null when the cluster names none.
      type: dict
    node:
      description:
        - For a present cluster, the node software as checked (null when absent) - C(driver_version),
          C(kernel_module_type) (the matrix's decision, V(auto) resolved), C(gsp_firmware), C(kubernetes_version),
          C(pod_cidr), C(service_cidr) and C(matrix) (the driver matrix rows that applied, each with its source).
      type: dict
  sample:
    - name: lab-r730
      state: present
      pool: lab
      provisioner: redfish
      node_ip: 192.168.120.70/24
      claim: new
      host: {name: r730-1, bmc_url: "https://idrac-r730-1.example", boot_mac: "00:5c:52:31:3a:9c",
             personality: idrac8, facts: {gpu_model: V100}, root_disk: {wwn: 5000c500a1b2c3d4}}
      generation: null
      lease: null
      bare_metal_host: null
      releases: []
      skipped_hosts: [{name: r730-0, status: claimed, reason: "claimed by cluster 'dc2' since ..."}]
      iso: {url: "https://mirror.example/dvd.iso", sha256: "0f3c...", status: cached, verified: true, path: "..."}
error:
  description: On failure, C(problems), a list of C({field, msg}), one per problem found.
  returned: failure
  type: dict
"""

import copy
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._metal.boot_iso import DEFAULT_CACHE_DIR
from ansible_collections.metalplane.inference.plugins.module_utils._metal.claims import DEFAULT_NAMESPACE
from ansible_collections.metalplane.inference.plugins.module_utils._metal.pool_args import HOST_OPTIONS
from ansible_collections.metalplane.inference.plugins.module_utils._metal.preflight import run_metal_preflight
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.args import modelplane_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.args import DEFAULT_API_TIMEOUT


def _host_options() -> dict[str, Any]:
    """host_claim's host entry plus the install disk; nothing required here, so every missing field is
    reported by the preflight with its path instead of by AnsibleModule one at a time."""
    options = {name: {k: v for k, v in option.items() if k != "required"} for name, option in HOST_OPTIONS.items()}
    # Taken as given, as the clusters' requirements: a device name or a string where a mapping belongs is a
    # problem under the host's field, not Ansible's conversion error naming neither the pool nor the host.
    options["root_disk"] = {"type": "raw"}
    options["facts"] = {"type": "raw"}
    return copy.deepcopy(options)


def argument_spec() -> dict[str, Any]:
    return {
        **modelplane_argument_spec(),
        "clusters": {
            "type": "list",
            "elements": "dict",
            "required": True,
            "options": {
                "name": {"type": "str"},
                "state": {"type": "str", "default": "present"},
                "pool": {"type": "str"},
                "provisioner": {"type": "str", "default": "redfish"},
                "metal3": {
                    "type": "dict",
                    "options": {
                        "kubeconfig": {"type": "str"},
                        "namespace": {"type": "str", "default": "metal3"},
                        "host_selector": {"type": "dict"},
                        "image": {"type": "dict"},
                    },
                },
                "host": {"type": "str"},
                # Taken as given: the preflight names a wrong type under its field with every other problem,
                # where Ansible's conversion would fail alone, naming neither the cluster nor the value.
                "requirements": {"type": "raw"},
                "node_ip": {"type": "str"},
                "gateway": {"type": "str"},
                "dns": {"type": "list", "elements": "str"},
                "networks": {"type": "list", "elements": "str"},
                "os_family": {"type": "str"},
                "installer_iso_url": {"type": "str"},
                "installer_iso_sha256": {"type": "str"},
                "ssh_authorized_key": {"type": "str", "no_log": False},
                "ssh_port": {"type": "raw"},
                "hostname": {"type": "str"},
                "root_password_hash": {"type": "str", "no_log": True},
                "protected": {"type": "bool", "default": False},
                "ssh_private_key_file": {"type": "str", "no_log": False},
                "os_version": {"type": "str"},
                "nvidia_driver_installer_url": {"type": "str"},
                "nvidia_driver_installer_sha256": {"type": "str"},
                "nvidia_driver_version": {"type": "str"},
                "nvidia_driver_kernel_module_type": {"type": "str"},
                "kubeadm_node_kubernetes_version": {"type": "str"},
                "kubeadm_node_pod_cidr": {"type": "str"},
                "kubeadm_node_service_cidr": {"type": "str"},
                "kubeadm_node_api_port": {"type": "raw"},
                "kubeadm_node_labels": {"type": "raw"},
                "kubeadm_node_lb_pool": {"type": "list", "elements": "str"},
                "kubeadm_node_package_repository": {"type": "str"},
            },
        },
        "pools": {
            "type": "list",
            "elements": "dict",
            "default": [],
            "options": {
                "name": {"type": "str"},
                "hosts": {"type": "list", "elements": "dict", "default": [], "options": _host_options()},
            },
        },
        "namespace": {"type": "str", "default": DEFAULT_NAMESPACE},
        "check_bmcs": {"type": "bool", "default": True},
        "api_timeout": {"type": "int", "default": DEFAULT_API_TIMEOUT},
        "iso_cache_dir": {"type": "path", "default": DEFAULT_CACHE_DIR},
        "iso_validate_certs": {"type": "bool", "default": True},
        "iso_ca_cert": {"type": "path"},
        "reserved_networks": {"type": "list", "elements": "str", "default": []},
        "other_networks": {"type": "list", "elements": "str", "default": []},
        "check_package_repositories": {"type": "bool", "default": True},
    }


def main() -> None:
    MetalplaneModule(argument_spec=argument_spec(), supports_check_mode=True).run(run_metal_preflight)


if __name__ == "__main__":
    main()
