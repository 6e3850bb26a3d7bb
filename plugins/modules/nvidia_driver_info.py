# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read a node's NVIDIA driver state on the node: what the driver role decides and verifies from."""

from __future__ import annotations

DOCUMENTATION = r"""
module: nvidia_driver_info
short_description: Read the NVIDIA driver, GPUs, nouveau, Secure Boot and DKMS state of a node
version_added: 0.1.0
description:
  - Runs on the node and changes nothing. Reads C(/proc/driver/nvidia/version) (the loaded module's version and
    flavour), C(nvidia-smi -q -x) (the GPUs as NVML reports them, persistence mode), the loaded modules
    (C(lsmod), else C(/proc/modules)), Secure Boot (C(mokutil --sb-state), else the EFI variable) and
    C(dkms status) for the kernel O(kernel).
  - Returns RV(nvidia_driver_facts) in the shape the C(nvidia_gpu_inventory) filter reads, a RV(plan) when
    O(version) is given (V(none) when that driver and flavour are loaded, else V(install) or V(upgrade)), and the
    RV(problems) that keep the driver from being as asked.
  - With O(verify), fails with every problem at once (module not loaded, another version or flavour, GPUs other
    than O(expected_gpus), DKMS without a module for O(kernel)). With O(refuse_secure_boot), fails as soon as
    Secure Boot is found on.
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.attributes.info_module
options:
  kernel:
    description:
      - The kernel whose DKMS state is read, as C(uname -r) prints it. Default is the running kernel.
    type: str
  version:
    description:
      - The driver version wanted (V(580.126.20)). When given, RV(plan) says what installing it takes and
        O(verify) checks it is the one loaded.
    type: str
  kernel_module_type:
    description:
      - The flavour wanted, as the preflight resolved it. V(auto) checks no flavour.
    type: str
    choices: [auto, proprietary, open]
    default: auto
  expected_gpus:
    description:
      - The GPUs the node must report, from the BMC's inventory. Each entry is a model name (one GPU) or a
        mapping with C(model) and C(count). Models are compared by the collection's GPU table, so
        V(V100-PCIE-16GB) and V(Tesla V100-PCIE-16GB) are the same.
    type: list
    elements: raw
    default: []
  verify:
    description: Fail when RV(problems) is not empty.
    type: bool
    default: false
  refuse_secure_boot:
    description: Fail when Secure Boot is on (the module is unsigned; signing is out of scope).
    type: bool
    default: false
notes:
  - Module flavour when C(/proc/driver/nvidia/version) cannot be read comes from C(modinfo -F license nvidia)
    (V(Dual MIT/GPL) is the open flavour, V(NVIDIA) the proprietary one).
seealso:
  - module: metalplane.inference.gpu_driver_check
"""

EXAMPLES = r"""
- name: What is loaded, and what installing 580.126.20 would take
  metalplane.inference.nvidia_driver_info:
    version: 580.126.20
    kernel_module_type: proprietary
    refuse_secure_boot: true
  register: driver

- name: Verify against the BMC's inventory
  metalplane.inference.nvidia_driver_info:
    version: 580.126.20
    expected_gpus: [{model: Tesla V100-PCIE-32GB, count: 2}]
    verify: true
"""

RETURN = r"""
nvidia_driver_facts:
  description: The driver and its GPUs (the C(nvidia_driver) role publishes them with C(changed_by) set).
  returned: always
  type: dict
  contains:
    version:
      description: The loaded driver's version; null when no NVIDIA module is loaded.
      type: str
      sample: 580.126.20
    kernel_module_type:
      description: V(proprietary) or V(open); null when unknown.
      type: str
    gpus:
      description:
        - One entry per GPU, as C(nvidia-smi -q -x) reports it, with C(index), C(name), C(uuid), C(pci_bus_id),
          C(memory_total_mib) (NVML's total) and C(compute_capability) (from the GPU table).
      type: list
      elements: dict
    persistence_mode:
      description: True when every GPU has persistence mode on.
      type: bool
    changed_by:
      description: Always null here; the role sets what it did (V(install) or V(upgrade)).
      type: str
loaded:
  description: Whether the C(nvidia) kernel module is loaded.
  returned: always
  type: bool
nouveau_loaded:
  description: Whether C(nouveau) is loaded (it holds the GPUs; the driver cannot load beside it).
  returned: always
  type: bool
secure_boot:
  description: Secure Boot on (true), off or a legacy boot (false), or unknown (null).
  returned: always
  type: bool
dkms:
  description:
    - C(kernel), C(installed_version) (the nvidia version DKMS installed for that kernel, or null), C(entries)
      (every nvidia line of C(dkms status)) and C(present) (whether dkms is installed).
  returned: always
  type: dict
kernel:
  description: The kernel the DKMS state is for.
  returned: always
  type: str
smi_error:
  description: Why C(nvidia-smi -q -x) failed while the module is loaded; null otherwise.
  returned: always
  type: str
plan:
  description: C(action) (V(none), V(install) or V(upgrade)) and C(reason).
  returned: always
  type: dict
problems:
  description: What keeps the driver from being as asked; empty when it is.
  returned: always
  type: list
  elements: str
"""

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._nvidia.compat import MODULE_TYPES
from ansible_collections.metalplane.inference.plugins.module_utils._nvidia.probe import run_nvidia_driver_info


def argument_spec() -> dict[str, Any]:
    return {
        "kernel": {"type": "str"},
        "version": {"type": "str"},
        "kernel_module_type": {"type": "str", "default": "auto", "choices": list(MODULE_TYPES)},
        "expected_gpus": {"type": "list", "elements": "raw", "default": []},
        "verify": {"type": "bool", "default": False},
        "refuse_secure_boot": {"type": "bool", "default": False},
    }


def main() -> None:
    MetalplaneModule(argument_spec=argument_spec(), supports_check_mode=True).run(run_nvidia_driver_info)


if __name__ == "__main__":
    main()
