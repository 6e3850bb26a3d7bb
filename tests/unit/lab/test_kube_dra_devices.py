"""Which lab nodes the simulated NVIDIA DRA driver publishes, and with what: GFD labels (VKE) or NVML (bare metal)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lab.kube.gpu import NFD_NVIDIA_LABEL, NVML_ANNOTATION, PRODUCTS, dra_devices, resource_slice

V100 = [{"name": "Tesla V100-PCIE-16GB", "memory_mib": 16384}] * 2


def node(labels: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "n", "labels": labels, "annotations": annotations or {}}}


@pytest.mark.parametrize(
    ("labels", "annotations", "published"),
    [
        # GPU Operator node (VKE): GFD's product and count, the product's own memory
        ({"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-L40S", "nvidia.com/gpu.count": "2"},
         None, ("NVIDIA-L40S", 2, None)),
        # a fractional plan: the memory label
        ({"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-A16", "nvidia.com/gpu.memory": "2048",
          "lab.metalplane.io/gpu-fraction": "1/8"}, None, ("NVIDIA-A16", 1, "2048Mi")),
        # bare metal: NFD's PCI label and what NVML reports
        ({NFD_NVIDIA_LABEL: "true"}, {NVML_ANNOTATION: json.dumps(V100)}, ("Tesla V100-PCIE-16GB", 2, "16Gi")),
        ({NFD_NVIDIA_LABEL: "true"}, {NVML_ANNOTATION: json.dumps([{"name": "NVIDIA L40S", "memory_mib": 46068}])},
         ("NVIDIA L40S", 1, "46068Mi")),
        # NVIDIA hardware without a loaded driver: NVML reports nothing, nothing is published
        ({NFD_NVIDIA_LABEL: "true"}, {NVML_ANNOTATION: "[]"}, None),
        ({NFD_NVIDIA_LABEL: "true"}, None, None),
        # no GPU at all
        ({"kubernetes.io/os": "linux"}, None, None),
    ],
)  # fmt: skip
def test_devices_per_node(labels: dict[str, str], annotations: dict[str, str] | None, published: Any) -> None:
    assert dra_devices(node(labels, annotations)) == published


def test_a_bare_metal_slice_carries_the_v100_facts() -> None:
    product_name, count, memory = dra_devices(node({NFD_NVIDIA_LABEL: "true"}, {NVML_ANNOTATION: json.dumps(V100)}))
    body = resource_slice("r730", "uid-1", product_name, count, memory)
    devices = body["spec"]["devices"]
    assert [d["name"] for d in devices] == ["gpu-0", "gpu-1"]
    assert {d["attributes"]["architecture"]["string"] for d in devices} == {"Volta"}
    assert {d["attributes"]["cudaComputeCapability"]["version"] for d in devices} == {"7.0.0"}
    assert {d["capacity"]["memory"]["value"] for d in devices} == {"16Gi"}
    assert PRODUCTS["Tesla-V100-PCIE-16GB"].memory == "16Gi"  # the product table agrees with NVML's figure
