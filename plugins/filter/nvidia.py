# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filter that turns a bare-metal node's driver facts into ``modelplane_adopt``'s GPU inventory.

Why a filter: ``site.yml`` hands the ``nvidia_driver`` role's facts to the adoption, and which fact becomes which
InferenceClass field (the memory NVML reports, the architecture of the model) is a rule kept once in Python
(``module_utils/_nvidia/inventory.py``), not in Jinja.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import MetalplaneError
from ansible_collections.metalplane.inference.plugins.module_utils._nvidia.inventory import expected_gpus, gpu_inventory


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        # Documented in the sidecar files nvidia_gpu_inventory.yml and nvidia_expected_gpus.yml.
        return {"nvidia_gpu_inventory": _nvidia_gpu_inventory, "nvidia_expected_gpus": _nvidia_expected_gpus}


def _nvidia_gpu_inventory(facts: Any, node: Any, pool: Any) -> dict[str, Any]:
    try:
        return gpu_inventory(str(node), facts, str(pool))
    except MetalplaneError as exc:
        raise AnsibleFilterError(f"nvidia_gpu_inventory: {exc}") from exc


def _nvidia_expected_gpus(bmc_gpus: Any) -> list[dict[str, Any]]:
    try:
        return expected_gpus(bmc_gpus)
    except MetalplaneError as exc:
        raise AnsibleFilterError(f"nvidia_expected_gpus: {exc}") from exc
