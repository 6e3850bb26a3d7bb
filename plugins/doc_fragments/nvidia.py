# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the shared NVIDIA driver options (``module_utils/_nvidia/args.py``)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  driver_version:
    description:
      - The NVIDIA driver, C(<branch>.<minor>[.<patch>]) such as V(580.126.20), or only its branch (V(580) or
        V(580.x)) when the release is not chosen yet, or the C(.run) installer's file name or URL
        (C(https://.../NVIDIA-Linux-x86_64-580.126.20.run)), whose version is used.
      - The branch decides which GPUs it supports (580 is the last branch with Pascal and Volta).
    type: str
    required: true
  kernel_module_type:
    description:
      - The kernel module flavour, as C(nvidia-installer --kernel-module-type).
      - V(auto) picks what every GPU supports, as the installer does; where both fit, the branch's default
        (V(open) from branch 560, V(proprietary) before).
      - V(proprietary) is required for Pascal and Volta GPUs; V(open) for Blackwell and Grace Hopper.
    type: str
    choices: [auto, proprietary, open]
    default: auto
"""
