# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Decide, before anything is installed, whether an NVIDIA driver fits a host's GPUs, OS and BIOS."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_driver_check
short_description: Preflight of an NVIDIA driver against the GPUs, kernel module flavour, OS, kernel and BIOS
description:
  - Decides, without changing anything, whether the NVIDIA driver O(driver_version) with the kernel module flavour
    O(kernel_module_type) can work on a host with the given GPUs, OS and kernel, and (with O(bmc)) the GPUs and
    BIOS settings its BMC reports over Redfish.
  - Returns the decision (the module flavour, V(auto) resolved; whether GSP firmware runs) and every row of the
    compatibility matrix that applied, each with its source. Fails with all problems at once, each naming the
    field to change and the fix, for example C(driver_version) for a Volta GPU on a branch above 580.
  - "Refused: Pascal and Volta GPUs with the open module or a branch above 580; Blackwell and Grace Hopper with the
    proprietary module; GPUs that need different flavours in one host; a branch older than a GPU's first or, for
    the open module, older than 515; kernels older than 3.10; OS/kernel combinations known to fail with a GPU
    architecture; Secure Boot on; a BIOS boot mode other than the installer's; memory-mapped I/O above 4 GB off
    with a GPU whose BAR is above 4 GiB."
  - Module signing for Secure Boot is out of scope of this collection, so Secure Boot must be off.
  - A BIOS setting the BMC does not expose is a warning, not a failure.
version_added: 0.1.0
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.nvidia
  - metalplane.inference.attributes.info_module
options:
  gpus:
    description:
      - The GPUs of the host, as the inventory knows them. Required unless O(bmc) is given and its PCIe inventory
        lists the GPUs; when both are given, they must agree by architecture and count, and the BMC's models are used.
    type: list
    elements: dict
    suboptions:
      model:
        description:
          - A model name as C(nvidia-smi) or the BMC prints it (V(Tesla V100-PCIE-32GB)), a short one (V(V100),
            V(L40S)), or a PCI device id as V(0x1DB6) or V(10de:1db6).
        type: str
        required: true
      count:
        description: How many of this model.
        type: int
        default: 1
  os_family:
    description: The OS family the node is installed with (as C(baremetal_host_os_family)).
    type: str
    choices: [el, ubuntu]
  os_version:
    description: The OS release, V(10) for CentOS Stream 10 or RHEL 10, V(24.04) for Ubuntu 24.04.
    type: str
  kernel_version:
    description: The kernel release the driver is built for, as C(uname -r) prints it (V(6.12.0-55.el10.x86_64)).
    type: str
  boot_mode:
    description:
      - The boot mode of the OS installer. With O(bmc), it must match the BIOS boot mode.
    type: str
    choices: [UEFI, Legacy]
  bmc:
    description:
      - The host's BMC. When given, the GPUs are read from its PCIe inventory and Secure Boot, the boot mode and
        memory-mapped I/O above 4 GB from its BIOS.
      - "Where: on a Dell the BIOS attributes C(SecureBoot), C(BootMode) and C(MmioAbove4Gb); on other BMCs the
        C(SecureBoot) resource and C(Boot.BootSourceOverrideMode), and MMIO above 4 GB is reported unknown."
      - The same connection options as the Redfish modules (M(metalplane.inference.redfish_info)).
    type: dict
    suboptions:
      bmc_url:
        description:
          - URL of the BMC, C(https://host[:port]). C(http://) is accepted for lab emulators only.
        type: str
        required: true
      username:
        description: BMC user name. Falls back to the environment variable E(REDFISH_USERNAME).
        type: str
        required: true
      password:
        description: BMC password. Falls back to the environment variable E(REDFISH_PASSWORD).
        type: str
        required: true
      validate_certs:
        description: Verify the BMC's TLS certificate.
        type: bool
        default: true
      ca_cert:
        description: PEM file (or directory) of the CA that signed the BMC certificate.
        type: path
      api_timeout:
        description: Seconds each HTTP request to the BMC may take.
        type: int
        default: 30
      auth:
        description: How to authenticate to the BMC (see M(metalplane.inference.redfish_info)).
        type: str
        choices: [basic, session]
        default: basic
      system_id:
        description: Id of the ComputerSystem. Default is the BMC's first (usually only) System.
        type: str
      manager_id:
        description: Id of the Manager. Default is the System's manager.
        type: str
      refused_login_retries:
        description: Times a login refused with HTTP 401 is tried again (see M(metalplane.inference.redfish_info)).
        type: int
        default: 0
notes:
  - The matrix, its sources and what each refusal means are in the collection's C(docs/modules/nvidia.md).
requirements:
  - sushy >= 5.6 (only with O(bmc))
"""

EXAMPLES = r"""
- name: Check the R730's driver before provisioning (GPUs and BIOS from the iDRAC)
  metalplane.inference.gpu_driver_check:
    driver_version: 580.126.20
    kernel_module_type: auto
    os_family: el
    os_version: "10"
    kernel_version: 6.12.0-55.el10.x86_64
    boot_mode: UEFI
    bmc:
      bmc_url: https://idrac-r730.example
      username: root
      password: "{{ vault_idrac_password }}"
      ca_cert: /etc/pki/idrac-ca.pem
  register: driver_check

- name: Inventory facts only (no BMC)
  metalplane.inference.gpu_driver_check:
    gpus: [{model: V100-PCIE-32GB, count: 2}]
    driver_version: "580"
    kernel_module_type: proprietary

- name: Install with the flavour the check chose
  ansible.builtin.debug:
    msg: "--kernel-module-type={{ driver_check.nvidia.kernel_module_type }}"
"""

RETURN = r"""
nvidia:
  description: The decision and its evidence.
  returned: always
  type: dict
  contains:
    kernel_module_type:
      description: The flavour to install (V(auto) resolved), V(proprietary) or V(open).
      type: str
      returned: always
      sample: proprietary
    kernel_module_type_requested:
      description: O(kernel_module_type) as given.
      type: str
      returned: always
    gsp_firmware:
      description: Whether GSP firmware runs with that flavour on these GPUs (false where no GPU has a GSP).
      type: bool
      returned: always
    gsp_firmware_can_disable:
      description: Whether C(NVreg_EnableGpuFirmware=0) can turn GSP firmware off (proprietary flavour, Turing+).
      type: bool
      returned: always
    driver_version:
      description: The driver version as parsed (C(580.x) for a bare branch).
      type: str
      returned: always
    driver_branch:
      description: Its branch.
      type: int
      returned: always
    gpus:
      description:
        - The GPUs decided for, each with C(model), C(count), C(architecture), C(compute_capability),
          C(memory_gib), C(pci_ids), C(open_module) (C(unsupported), C(supported), C(required)), C(gsp),
          C(large_bar), C(last_branch), C(sources), C(field) and C(given).
      type: list
      elements: dict
      returned: always
    gpus_from:
      description: Where the GPUs came from, V(bmc) or V(gpus).
      type: str
      returned: always
    bios:
      description:
        - With O(bmc), C(secure_boot), C(boot_mode), C(mmio_above_4gb) (null when the BMC does not expose one),
          C(read_from) (the resource and attribute of each) and C(raw) values; null without O(bmc).
      type: dict
      returned: always
    quirks:
      description: The BMC family code path used with O(bmc) (C(dell_idrac8), C(dell_idrac9), C(generic)).
      type: str
      returned: always
    rows:
      description: The matrix rows that applied, each with C(rule), C(outcome) (C(ok), C(refused), C(warning)),
        C(detail) and C(source).
      type: list
      elements: dict
      returned: always
    problems:
      description: Each problem with C(field), C(msg), C(fix), C(rule) and C(source) (empty on success).
      type: list
      elements: dict
      returned: always
    warnings:
      description: What could not be checked (a BIOS setting the BMC does not expose), in the same shape.
      type: list
      elements: dict
      returned: always
requests:
  description: Number of HTTP requests sent to the BMC.
  returned: with O(bmc)
  type: int
error:
  description: On failure, C(problems) (as above) and the C(decision) so far.
  returned: failure
  type: dict
"""

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._nvidia.args import nvidia_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._nvidia.check import run_gpu_driver_check
from ansible_collections.metalplane.inference.plugins.module_utils._nvidia.compat import BOOT_MODES, OS_FAMILIES
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.args import redfish_argument_spec


def argument_spec() -> dict[str, Any]:
    return {
        **nvidia_argument_spec(),
        "gpus": {
            "type": "list",
            "elements": "dict",
            "options": {"model": {"type": "str", "required": True}, "count": {"type": "int", "default": 1}},
        },
        "os_family": {"type": "str", "choices": list(OS_FAMILIES)},
        "os_version": {"type": "str"},
        "kernel_version": {"type": "str"},
        "boot_mode": {"type": "str", "choices": list(BOOT_MODES)},
        "bmc": {"type": "dict", "options": redfish_argument_spec()},
    }


def main() -> None:
    MetalplaneModule(argument_spec=argument_spec(), supports_check_mode=True).run(run_gpu_driver_check)


if __name__ == "__main__":
    main()
