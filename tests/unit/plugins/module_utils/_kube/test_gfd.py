"""GPU Feature Discovery labels -> NVIDIA DRA attribute values (plugins/module_utils/_kube/gfd.py).

Why: an InferenceClass generated from a label inventory is only useful if its attributes equal
what the DRA driver publishes later; a wrong productName or architecture makes the class match no
device. Each rule is checked here case by case, including the ones that must leave an attribute
out, and against the lab's one GPU table (node labels and ResourceSlices) so the twin and the
plugin cannot drift apart.
"""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._kube import gfd, gpu
from lab.kube import gpu as kube_gpu
from lab.vultr.twin import GPU_MODELS

# (label, productName or None, a word the reason must contain when None)
PRODUCTS: list[tuple[str | None, str | None, str]] = [
    ("NVIDIA-L40S", "NVIDIA L40S", ""),
    ("NVIDIA-A16", "NVIDIA A16", ""),
    ("NVIDIA-H200", "NVIDIA H200", ""),
    ("Tesla-T4", "Tesla T4", ""),
    ("Quadro-P4000", "Quadro P4000", ""),
    ("Tesla-V100-SXM2-32GB", "Tesla V100-SXM2-32GB", ""),
    ("Tesla-V100-PCIE-32GB", "Tesla V100-PCIE-32GB", ""),
    ("NVIDIA-A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", ""),
    ("NVIDIA-A100-80GB-PCIe", "NVIDIA A100 80GB PCIe", ""),
    ("NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3", ""),
    ("NVIDIA-RTX-6000-Ada-Generation", "NVIDIA RTX 6000 Ada Generation", ""),
    # time-slicing without rename: GFD appends -SHARED; the device is the same GPU
    ("NVIDIA-L40S-SHARED", "NVIDIA L40S", ""),
    ("Tesla-V100-SXM2-32GB-SHARED", "Tesla V100-SXM2-32GB", ""),
    # MIG strategy single: the label names MIG devices
    ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", None, "MIG"),
    # ambiguous: a vGPU profile, unknown multi-word names, brands rule 4 does not know
    ("NVIDIA-A16-4Q", None, "cannot be turned back"),
    ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", None, "cannot be turned back"),
    ("Quadro-RTX-8000", None, "cannot be turned back"),
    ("GRID-A100-4C", None, "cannot be turned back"),
    ("NVIDIA-", None, "cannot be turned back"),
    ("NVIDIA-A10.G", None, "cannot be turned back"),
    ("", None, "no nvidia.com/gpu.product"),
    (None, None, "no nvidia.com/gpu.product"),
]


@pytest.mark.parametrize(("label", "expected", "reason"), PRODUCTS, ids=[str(p[0]) for p in PRODUCTS])
def test_product_name(label: str | None, expected: str | None, reason: str) -> None:
    name, why = gfd.product_name(label)
    assert name == expected
    if expected is None:
        assert why is not None
        assert reason in why
    else:
        assert why is None


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("NVIDIA L40S", "NVIDIA-L40S"),
        ("NVIDIA A100 80GB PCIe", "NVIDIA-A100-80GB-PCIe"),
        ("  NVIDIA   H100 NVL ", "NVIDIA-H100-NVL"),
        ("NVIDIA (R) X/Y", "NVIDIA-R-XY"),
    ],
)
def test_gfd_product_label_follows_gfd(name: str, label: str) -> None:
    assert gfd.gfd_product_label(name) == label


@pytest.mark.parametrize("name", gfd.KNOWN_PRODUCT_NAMES)
def test_known_product_names_round_trip(name: str) -> None:
    assert gfd.product_name(gfd.gfd_product_label(name)) == (name, None)


def labels(family: str | None = None, compute: tuple[Any, Any] | None = None) -> dict[str, str]:
    out = {}
    if family is not None:
        out[gfd.LABEL_FAMILY] = family
    if compute is not None:
        out[gfd.LABEL_COMPUTE_MAJOR], out[gfd.LABEL_COMPUTE_MINOR] = str(compute[0]), str(compute[1])
    return out


# (family label, compute labels, architecture or None, a word the reason must contain when None)
ARCHITECTURES: list[tuple[str, str | None, tuple[Any, Any] | None, str | None, str]] = [
    ("volta", "volta", (7, 0), "Volta", ""),
    ("xavier-volta", "volta", (7, 2), "Volta", ""),
    ("turing", "turing", (7, 5), "Turing", ""),
    ("ampere-a100", "ampere", (8, 0), "Ampere", ""),
    ("ampere-a16", "ampere", (8, 6), "Ampere", ""),
    ("ada", "ada-lovelace", (8, 9), "Ada Lovelace", ""),
    ("hopper", "hopper", (9, 0), "Hopper", ""),
    ("blackwell", "blackwell", (10, 0), "Blackwell", ""),
    ("blackwell-12", "blackwell", (12, 0), "Blackwell", ""),
    ("pascal", "pascal", (6, 1), "Pascal", ""),
    # older GFD: every 8.x is "ampere", Blackwell is "undefined"; the compute capability decides
    ("old-gfd-ada", "ampere", (8, 9), "Ada Lovelace", ""),
    ("old-gfd-blackwell", "undefined", (10, 0), "Blackwell", ""),
    # compute labels alone, family alone
    ("compute-only", None, (8, 9), "Ada Lovelace", ""),
    ("family-only-hopper", "hopper", None, "Hopper", ""),
    ("family-only-ada", "ada-lovelace", None, "Ada Lovelace", ""),
    ("family-only-ampere-is-ambiguous", "ampere", None, None, "before Ada"),
    ("family-without-dra-name", "fermi", None, None, "no DRA architecture name"),
    ("family-undefined", "undefined", None, None, "no DRA architecture name"),
    ("contradiction", "hopper", (8, 6), None, "contradicts"),
    ("unknown-compute", "blackwell", (11, 0), None, "no known architecture"),
    ("no-labels", None, None, None, "no nvidia.com/gpu.family"),
    ("compute-not-integers", "volta", ("7", "x"), "Volta", ""),
]


@pytest.mark.parametrize(
    ("case", "family", "compute", "expected", "reason"), ARCHITECTURES, ids=[a[0] for a in ARCHITECTURES]
)
def test_architecture(
    case: str, family: str | None, compute: tuple[Any, Any] | None, expected: str | None, reason: str
) -> None:
    value, why = gfd.architecture(labels(family, compute))
    assert value == expected
    if expected is None:
        assert why is not None
        assert reason in why
    else:
        assert why is None


@pytest.mark.parametrize(
    ("compute", "expected"),
    [((8, 9), "8.9.0"), ((9, 0), "9.0.0"), ((10, 0), "10.0.0"), ((7, "x"), None), (("", 0), None), (None, None)],
)
def test_cuda_compute_capability(compute: tuple[Any, Any] | None, expected: str | None) -> None:
    value, why = gfd.cuda_compute_capability(labels(None, compute))
    assert value == expected
    assert (why is None) is (expected is not None)


def test_attributes_collects_reasons_for_what_is_left_out() -> None:
    found = gfd.attributes({gfd.LABEL_PRODUCT: "NVIDIA-A16-4Q", **labels("ampere", (8, 6))})
    assert (found.product_name, found.architecture, found.cuda_compute_capability) == (None, "Ampere", "8.6.0")
    assert list(found.left_out) == ["productName"]


# --- the lab's GPU table: node labels and ResourceSlices must tell the same story -------------------


@pytest.mark.parametrize("label", sorted(kube_gpu.PRODUCTS))
def test_lab_labels_derive_what_the_lab_dra_driver_publishes(label: str) -> None:
    info = kube_gpu.PRODUCTS[label]
    assert gfd.gfd_product_label(info.product_name) == info.label
    found = gfd.attributes(info.gfd_labels(2))
    assert found.left_out == {}
    assert (found.product_name, found.architecture, found.cuda_compute_capability) == (
        info.product_name,
        info.architecture,
        info.compute_capability,
    )
    # The class entry generated from the node's labels is satisfied by the node's ResourceSlice.
    node = {
        "metadata": {"name": "n1", "labels": info.gfd_labels(2)},
        "status": {"allocatable": {"nvidia.com/gpu": "2"}},
    }
    inventory = gpu.node_inventory(node, None)
    assert inventory["source"] == "labels"
    (entry,) = gpu.inference_class_devices(inventory, "gpu.nvidia.com")
    assert set(entry["attributes"]) == {"productName", "architecture", "cudaComputeCapability"}
    match = gpu.parse_device_match(entry)
    assert match is not None
    devices = gpu.slice_devices([kube_gpu.resource_slice("n1", None, label, 2)], "gpu.nvidia.com")["n1"]
    assert len(devices) == 2
    assert [gpu.device_mismatches(d, match) for d in devices] == [[], []]


@pytest.mark.parametrize("token", sorted(GPU_MODELS))
def test_every_vke_twin_gpu_is_in_the_lab_table(token: str) -> None:
    info = kube_gpu.product(GPU_MODELS[token])
    assert info.nominal_gb > 0
    assert gfd.attributes(info.gfd_labels(1)).left_out == {}
