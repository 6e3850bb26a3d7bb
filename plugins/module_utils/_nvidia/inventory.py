# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A bare-metal node's GPUs, as the driver reports them, in the shape Modelplane's InferenceClass is made from.

Why: a VKE node's GPUs are read from Kubernetes (GPU Operator labels, then the DRA driver's ResourceSlices); a
bare-metal node has no GPU Operator, and its InferenceClass must exist before Modelplane installs the NVIDIA DRA
driver that would publish them. What that driver will publish is known earlier, from NVML through
``nvidia-smi`` on the node: the product name, the architecture and compute capability of the model, and the
memory NVML reports (the DRA driver's ``capacity.memory`` is NVML's total in bytes, written as a Kubernetes
BinarySI quantity: ``k8s-dra-driver-gpu``, ``cmd/gpu-kubelet-plugin/deviceinfo.go``), not the nominal size on
the box. The result is one entry of ``modelplane_adopt``'s ``gpu_inventory`` (``_modelplane/inference_class.py``
reads ``count``, ``memory``, ``product``, ``architecture``, ``cuda_compute_capability`` and ``pool``).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError

from .gpus import UnknownGpu, lookup

MIB_PER_GIB = 1024


def memory_quantity(mib: int) -> str:
    """NVML's total in MiB as Kubernetes writes the same bytes in BinarySI: the largest exact unit."""
    if mib <= 0:
        raise ValueError(f"memory must be positive, got {mib} MiB")
    if mib % MIB_PER_GIB == 0:
        return f"{mib // MIB_PER_GIB}Gi"
    return f"{mib}Mi"


def _version(compute_capability: str) -> str:
    """``7.0`` -> ``7.0.0``: the DRA driver's cudaComputeCapability is a semantic version."""
    parts = compute_capability.split(".")
    return ".".join([*parts, "0", "0"][:3])


def gpu_inventory(node: str, facts: Any, pool: str, field: str = "nvidia_driver_facts") -> dict[str, dict[str, Any]]:
    """``{node: entry}`` for the node's GPUs; every GPU of a node must be the same model with the same memory."""
    if not isinstance(facts, Mapping):
        raise InputError(field, "must be the nvidia_driver role's facts (a mapping with gpus)")
    gpus = facts.get("gpus")
    if not isinstance(gpus, list) or not gpus:
        raise InputError(f"{field}.gpus", "no GPU reported by nvidia-smi on the node: is the driver loaded?")
    names = {str(gpu.get("name") or "") for gpu in gpus}
    try:
        memories = {int(gpu.get("memory_total_mib") or 0) for gpu in gpus}
    except (TypeError, ValueError):
        raise InputError(f"{field}.gpus", "memory_total_mib must be a whole number of MiB on every GPU") from None
    if len(names) != 1 or len(memories) != 1:
        raise InputError(
            f"{field}.gpus",
            f"a node's GPUs must all be one model with one memory size to make one InferenceClass; nvidia-smi "
            f"reports {sorted(names)} with {sorted(memories)} MiB",
        )
    name, memory = names.pop(), memories.pop()
    if not name or memory <= 0:
        raise InputError(f"{field}.gpus", "nvidia-smi reported a GPU without its name or memory")
    try:
        model = lookup(name)
    except UnknownGpu as exc:
        raise InputError(f"{field}.gpus[0].name", str(exc)) from None
    capability = str(gpus[0].get("compute_capability") or model.compute_capability)
    return {
        node: {
            "pool": pool,
            "count": len(gpus),
            "product": name,
            "architecture": model.architecture,
            "cuda_compute_capability": _version(capability),
            "memory": memory_quantity(memory),
            "driver_version": str(facts.get("version") or ""),
        }
    }


def expected_gpus(bmc_gpus: Any) -> list[dict[str, Any]]:
    """What the BMC's PCIe inventory lists (redfish_info's ``gpus``) as the driver's expected GPUs: model, count.

    Grouped by the model string the BMC prints, in the order first seen, so the driver role compares counts per model
    with what ``nvidia-smi`` reports. An entry without a model is an input error: the comparison would be meaningless.
    """
    if not isinstance(bmc_gpus, list):
        raise InputError("gpus", "must be the list redfish_info returns under redfish.gpus")
    counts: dict[str, int] = {}
    for index, entry in enumerate(bmc_gpus):
        model = str((entry or {}).get("model") or "").strip() if isinstance(entry, dict) else ""
        if not model:
            raise InputError(f"gpus[{index}].model", "the BMC lists a GPU without a model; read it with redfish_info")
        counts[model] = counts.get(model, 0) + 1
    return [{"model": model, "count": count} for model, count in counts.items()]
