# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Options of the host pool modules (paired with ``module_utils/_metal/pool_args.py``)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  pool:
    description:
      - Name of the pool, the C(<name>) of inventory group C(pool_<name>) (letters, digits, C(_) and C(-), at most
        63 characters).
    type: str
    required: true
  hosts:
    description:
      - The pool's hosts, one per BMC, usually built from the group's host variables. An empty list fails (an
        unknown pool has no group, so no hosts).
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Inventory name of the host, unique in the pool.
        type: str
        required: true
      bmc_url:
        description: URL of the BMC, C(https://host[:port]) (C(http://) for lab emulators only).
        type: str
        required: true
      username:
        description: BMC user name.
        type: str
        required: true
      password:
        description: BMC password (keep it in a vault). Never returned or logged.
        type: str
        required: true
      personality:
        description: The BMC kind the inventory expects (for example V(idrac8)); returned with the claimed host.
        type: str
      boot_mac:
        description:
          - MAC address of the NIC the server boots and installs from (six hex pairs, C(:) or C(-) separated), unique
            in the pool. When the BMC lists NICs and this MAC is not among them, the host is reported as mismatched.
        type: str
        required: true
      validate_certs:
        description: Verify the BMC's TLS certificate.
        type: bool
        default: true
      ca_cert:
        description: PEM file of the CA that signed the BMC certificate.
        type: path
      facts:
        description:
          - What a person knows about the host, returned as given. C(gpu_model), C(gpu_count) and C(memory_gib) are
            checked against O(requirements) before any BMC is asked; C(disks) and others are only passed on.
        type: dict
      root_disk:
        description:
          - The disk the OS is installed on, by a stable identity from the BMC's storage inventory (never C(/dev/sdX),
            which changes between boots); exactly one of the two. The install records it with the claim
            (M(metalplane.inference.host_provision)), so a teardown wipes the disk the install wrote even if the
            inventory changed since.
        type: dict
        suboptions:
          wwn:
            description: World Wide Name, 16 or 32 hex digits (C(0x), C(naa.), C(eui.) prefixes accepted).
            type: str
          serial:
            description: Serial number as the drive reports it.
            type: str
      system_path:
        description:
          - The Redfish System of the server, C(/redfish/v1/Systems/<id>). Only the C(metal3) provisioner uses it,
            for a BMC that is not an iDRAC (Metal3's C(redfish-virtualmedia) address names the System); an iDRAC's
            is C(/redfish/v1/Systems/System.Embedded.1).
        type: str
  requirements:
    description:
      - What a host must have for the cluster; each is checked against the inventory's facts and against what the
        BMC reports over Redfish (PCIe devices, C(MemorySummary.TotalSystemMemoryGiB)). Omitted, any host fits.
    type: dict
    suboptions:
      gpu_model:
        description:
          - A GPU model the host must have, matched case-insensitively as a substring of the Redfish PCIe device's
            model, ignoring spaces and dashes (V(V100) matches C(Tesla V100-PCIE-32GB)).
        type: str
      gpu_count:
        description: At least this many GPUs (of O(requirements.gpu_model) when given).
        type: int
      min_memory_gib:
        description: At least this much memory, in GiB.
        type: int
  namespace:
    description:
      - Namespace of the claim Leases on the control plane. The default exists on every Modelplane control plane,
        and this collection already writes there.
    type: str
    default: modelplane-system
  api_timeout:
    description: Seconds per HTTP request to a BMC.
    type: int
    default: 30
  refused_login_retries:
    description:
      - Times a BMC login refused with HTTP 401 is tried again, 15 seconds apart (0 to 3), for a BMC that restarted
        and refuses valid credentials for a moment (see the Redfish modules' option of the same name).
      - Leave V(0) where the credentials are not proven in the same run (a claim, a pool listing); each try of a
        wrong password counts toward the BMC's blocking of the address. Role C(baremetal_host) sets it
        (C(baremetal_host_refused_login_retries), default 2) on the steps after its claim.
    type: int
    default: 0
"""
