"""Modelplane object builders: every built object is valid against the XRD, bad input names its field."""

from __future__ import annotations

import base64
import copy
from typing import Any

import jmespath
import pytest
import yaml
from modelplane_xrd import EXAMPLES_DIR, schema_errors, subschema

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane import readiness
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.constants import (
    CONTROL_PLANE_NAMESPACE,
    MANAGED_BY_LABEL,
    RWX_STORAGE_CLASS,
)
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.inference_class import (
    devices_from_inventory,
    inference_class,
    inference_class_from_inventory,
)
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.inference_cluster import (
    inference_cluster,
    pool_node_labels,
)
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.kubeconfig_secret import (
    kubeconfig_secret,
    rewrite_kubeconfig,
)
from lab.common.reference import require

# --- the validator itself is not vacuous ------------------------------------------------------------


def _example(path: str) -> dict[str, Any]:
    example = require(EXAMPLES_DIR / path, f"Modelplane example {path}")
    return yaml.safe_load(example.read_text())


@pytest.mark.parametrize(
    ("plural", "example"),
    [
        ("inferenceclasses", "concepts/inference-class-h100-byo.yaml"),
        ("inferenceclasses", "concepts/inference-class-vultr-l40s.yaml"),
        ("inferenceclasses", "e2e/20-inference-class.yaml"),
        ("inferenceclusters", "concepts/inference-cluster-existing.yaml"),
        ("inferenceclusters", "e2e/30-inference-cluster.yaml"),
    ],
)
def test_upstream_examples_pass_the_validator(plural: str, example: str) -> None:
    assert schema_errors(plural, _example(example)) == []


def _mutate(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    node: Any = out
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node[part]
    last = parts[-1]
    if value is _DELETE:
        del node[last]
    elif last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value
    return out


_DELETE = object()


@pytest.mark.parametrize(
    ("plural", "example", "path", "value", "expected"),
    [
        ("inferenceclasses", "concepts/inference-class-h100-byo.yaml", "spec.devices", [], "spec.devices"),
        ("inferenceclasses", "concepts/inference-class-h100-byo.yaml", "spec.devices.0.claim", "Maybe", "claim"),
        ("inferenceclasses", "concepts/inference-class-h100-byo.yaml", "spec.devices.0.count", 65, "count"),
        ("inferenceclasses", "concepts/inference-class-h100-byo.yaml", "spec.devices.1.name", "gpu", "list-map"),
        ("inferenceclasses", "concepts/inference-class-h100-byo.yaml", "spec.devices.0.driver", _DELETE, "driver"),
        ("inferenceclasses", "concepts/inference-class-h100-byo.yaml", "spec.devices.0.colour", "red", "colour"),
        (
            "inferenceclasses",
            "concepts/inference-class-h100-byo.yaml",
            "spec.devices.0.attributes.index",
            {"int": 2**63},
            "int",
        ),
        ("inferenceclasses", "concepts/inference-class-vultr-l40s.yaml", "spec.provisioning.provider", "X", "provider"),
        (
            "inferenceclasses",
            "concepts/inference-class-vultr-l40s.yaml",
            "spec.provisioning.vultr.accelerator.count",
            17,
            "count",
        ),
        ("inferenceclusters", "concepts/inference-cluster-existing.yaml", "spec.cluster.source", "Metal", "source"),
        ("inferenceclusters", "concepts/inference-cluster-existing.yaml", "spec.nodePools", [], "nodePools"),
        ("inferenceclusters", "concepts/inference-cluster-existing.yaml", "spec.nodePools.0.name", "x" * 41, "name"),
        (
            "inferenceclusters",
            "concepts/inference-cluster-existing.yaml",
            "spec.nodePools.0.nodeCount",
            -1,
            "nodeCount",
        ),
        (
            "inferenceclusters",
            "concepts/inference-cluster-existing.yaml",
            "spec.nodePools.0.capacityBlock",
            {"capacityReservationId": "cr-XYZ"},
            "capacityReservationId",
        ),
        (
            "inferenceclusters",
            "concepts/inference-cluster-existing.yaml",
            "spec.cluster.existing.secretRef.namespace",
            "default",
            "namespace",
        ),
        ("inferenceclusters", "concepts/inference-cluster-existing.yaml", "kind", "InferenceClass", "kind"),
    ],
)
def test_validator_rejects_broken_examples(plural: str, example: str, path: str, value: Any, expected: str) -> None:
    errors = schema_errors(plural, _mutate(_example(example), path, value))
    assert errors, f"{path}={value!r} should be rejected"
    assert any(expected in e for e in errors), errors


# --- InferenceClass from a given spec -----------------------------------------------------------------

L40S_DEVICE = {
    "name": "gpu",
    "claim": "DRA",
    "driver": "gpu.nvidia.com",
    "deviceClassName": "gpu.nvidia.com",
    "count": 1,
    "attributes": {"architecture": {"string": "Ada Lovelace"}, "cudaComputeCapability": {"version": "8.9.0"}},
    "capacity": {"memory": {"value": "46068Mi"}},
}
VULTR_PROVISIONING = {
    "provider": "Vultr",
    "vultr": {"plan": "vcg-l40s-16c-180g-48vram", "accelerator": {"type": "nvidia-l40s", "count": 1}},
}

CLASS_SPECS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("minimal-byo", {"devices": [L40S_DEVICE]}, {"devices": [L40S_DEVICE]}),
    (
        "defaults-made-explicit",
        {"devices": [{"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com"}]},
        {
            "devices": [
                {
                    "name": "gpu",
                    "claim": "DRA",
                    "driver": "gpu.nvidia.com",
                    "deviceClassName": "gpu.nvidia.com",
                    "count": 1,
                }
            ]
        },
    ),
    (
        "vultr-provisioning",
        {"description": "L40S", "provisioning": VULTR_PROVISIONING, "devices": [L40S_DEVICE]},
        {"description": "L40S", "provisioning": VULTR_PROVISIONING, "devices": [L40S_DEVICE]},
    ),
    (
        "synthetic-and-typed-attributes",
        {
            "devices": [
                {**L40S_DEVICE, "count": 8},
                {
                    "name": "nic",
                    "claim": "Synthetic",
                    "driver": "nic.nvidia.com",
                    "count": 8,
                    "attributes": {"linkType": {"string": "infiniband"}, "rdma": {"bool": True}, "ports": {"int": 2}},
                },
            ]
        },
        {
            "devices": [
                {**L40S_DEVICE, "count": 8},
                {
                    "name": "nic",
                    "claim": "Synthetic",
                    "driver": "nic.nvidia.com",
                    "count": 8,
                    "attributes": {"linkType": {"string": "infiniband"}, "rdma": {"bool": True}, "ports": {"int": 2}},
                },
            ]
        },
    ),
    (
        "version-padded",
        {"devices": [{**L40S_DEVICE, "attributes": {"cudaComputeCapability": {"version": "8.9"}}}]},
        {"devices": [{**L40S_DEVICE, "attributes": {"cudaComputeCapability": {"version": "8.9.0"}}}]},
    ),
    (
        "limits-at-maximum",
        {
            "devices": [
                {
                    **L40S_DEVICE,
                    "name": f"d{i}",
                    "count": 64,
                    "attributes": {f"a{j}": {"int": j} for j in range(32)},
                    "capacity": {f"c{j}": {"value": f"{j + 1}Gi"} for j in range(32)},
                }
                for i in range(16)
            ]
        },
        None,
    ),
    (
        "gke-provisioning",
        {
            "provisioning": {
                "provider": "GKE",
                "gke": {
                    "machineType": "g2-standard-8",
                    "diskSizeGb": 10,
                    "accelerator": {"type": "nvidia-l4", "count": 1},
                },
            },
            "devices": [L40S_DEVICE],
        },
        None,
    ),
]


@pytest.mark.parametrize(("name", "spec", "want"), CLASS_SPECS, ids=[c[0] for c in CLASS_SPECS])
def test_inference_class_from_spec_is_valid(name: str, spec: dict[str, Any], want: dict[str, Any] | None) -> None:
    before = copy.deepcopy(spec)
    obj = inference_class(name, spec, labels={"team": "ml"})
    assert spec == before  # the input is not mutated
    assert schema_errors("inferenceclasses", obj) == []
    assert obj["metadata"] == {"name": name, "labels": {"team": "ml", MANAGED_BY_LABEL: "metalplane.inference"}}
    if want is not None:
        assert obj["spec"] == want


def _device(**changes: Any) -> dict[str, Any]:
    device = copy.deepcopy(L40S_DEVICE)
    for key, value in changes.items():
        if value is _DELETE:
            device.pop(key)
        else:
            device[key] = value
    return device


BAD_CLASS_SPECS: list[tuple[str, Any, str]] = [
    ("not-a-mapping", ["gpu"], "spec"),
    ("no-devices", {"description": "x"}, "spec.devices"),
    ("empty-devices", {"devices": []}, "spec.devices"),
    ("too-many-devices", {"devices": [_device(name=f"d{i}") for i in range(17)]}, "spec.devices"),
    ("duplicate-device", {"devices": [_device(), _device()]}, "spec.devices"),
    ("unknown-spec-key", {"devices": [_device()], "gpus": 1}, "spec"),
    ("unknown-device-key", {"devices": [_device(colour="red")]}, "spec.devices[0]"),
    ("missing-name", {"devices": [_device(name=_DELETE)]}, "spec.devices[0].name"),
    ("missing-driver", {"devices": [_device(driver=_DELETE)]}, "spec.devices[0].driver"),
    ("long-name", {"devices": [_device(name="n" * 64)]}, "spec.devices[0].name"),
    ("long-driver", {"devices": [_device(driver="d" * 254)]}, "spec.devices[0].driver"),
    ("bad-claim", {"devices": [_device(claim="Maybe")]}, "spec.devices[0].claim"),
    ("dra-without-class", {"devices": [_device(deviceClassName=_DELETE)]}, "spec.devices[0].deviceClassName"),
    ("count-zero", {"devices": [_device(count=0)]}, "spec.devices[0].count"),
    ("count-65", {"devices": [_device(count=65)]}, "spec.devices[0].count"),
    ("count-string", {"devices": [_device(count="2")]}, "spec.devices[0].count"),
    ("count-bool", {"devices": [_device(count=True)]}, "spec.devices[0].count"),
    (
        "two-typed-fields",
        {"devices": [_device(attributes={"arch": {"string": "Hopper", "version": "9.0.0"}})]},
        "spec.devices[0].attributes.arch",
    ),
    ("untyped-attribute", {"devices": [_device(attributes={"arch": "Hopper"})]}, "spec.devices[0].attributes.arch"),
    (
        "unknown-attribute-type",
        {"devices": [_device(attributes={"arch": {"float": 1.5}})]},
        "spec.devices[0].attributes.arch",
    ),
    (
        "bad-version",
        {"devices": [_device(attributes={"cc": {"version": "nine"}})]},
        "spec.devices[0].attributes.cc.version",
    ),
    (
        "long-string",
        {"devices": [_device(attributes={"x": {"string": "s" * 254}})]},
        "spec.devices[0].attributes.x.string",
    ),
    ("bool-not-bool", {"devices": [_device(attributes={"x": {"bool": "yes"}})]}, "spec.devices[0].attributes.x.bool"),
    ("int-too-big", {"devices": [_device(attributes={"x": {"int": 2**63}})]}, "spec.devices[0].attributes.x.int"),
    (
        "33-attributes",
        {"devices": [_device(attributes={f"a{j}": {"int": j} for j in range(33)})]},
        "spec.devices[0].attributes",
    ),
    (
        "33-capacities",
        {"devices": [_device(capacity={f"c{j}": {"value": "1"} for j in range(33)})]},
        "spec.devices[0].capacity",
    ),
    ("capacity-no-value", {"devices": [_device(capacity={"memory": {}})]}, "spec.devices[0].capacity.memory.value"),
    (
        "capacity-not-quantity",
        {"devices": [_device(capacity={"memory": {"value": "lots"}})]},
        "spec.devices[0].capacity.memory.value",
    ),
    (
        "capacity-too-long",
        {"devices": [_device(capacity={"memory": {"value": "1" * 33}})]},
        "spec.devices[0].capacity.memory.value",
    ),
    (
        "provider-existing",
        {"provisioning": {"provider": "Existing"}, "devices": [_device()]},
        "spec.provisioning.provider",
    ),
    ("vultr-block-missing", {"provisioning": {"provider": "Vultr"}, "devices": [_device()]}, "spec.provisioning.vultr"),
    (
        "vultr-plan-missing",
        {
            "provisioning": {"provider": "Vultr", "vultr": {"accelerator": {"type": "a", "count": 1}}},
            "devices": [_device()],
        },
        "spec.provisioning.vultr.plan",
    ),
    (
        "vultr-plan-too-long",
        {
            "provisioning": {
                "provider": "Vultr",
                "vultr": {"plan": "p" * 64, "accelerator": {"type": "a", "count": 1}},
            },
            "devices": [_device()],
        },
        "spec.provisioning.vultr.plan",
    ),
    (
        "vultr-accelerators-17",
        {
            "provisioning": {"provider": "Vultr", "vultr": {"plan": "p", "accelerator": {"type": "a", "count": 17}}},
            "devices": [_device()],
        },
        "spec.provisioning.vultr.accelerator.count",
    ),
    (
        "other-provider-block",
        {
            "provisioning": {"provider": "Vultr", "vultr": VULTR_PROVISIONING["vultr"], "gke": {}},
            "devices": [_device()],
        },
        "spec.provisioning",
    ),
    (
        "gke-disk-too-small",
        {
            "provisioning": {
                "provider": "GKE",
                "gke": {"machineType": "m", "diskSizeGb": 9, "accelerator": {"type": "a", "count": 1}},
            },
            "devices": [_device()],
        },
        "spec.provisioning.gke.diskSizeGb",
    ),
]


@pytest.mark.parametrize(("case", "spec", "field"), BAD_CLASS_SPECS, ids=[c[0] for c in BAD_CLASS_SPECS])
def test_inference_class_rejects_bad_spec(case: str, spec: Any, field: str) -> None:
    with pytest.raises(InputError) as raised:
        inference_class("l40s", spec)
    assert raised.value.field == field, raised.value.msg


@pytest.mark.parametrize("name", ["L40S", "a_b", "", "x" * 254, "-a"])
def test_inference_class_rejects_bad_name(name: str) -> None:
    with pytest.raises(InputError) as raised:
        inference_class(name, {"devices": [L40S_DEVICE]})
    assert raised.value.field == "name"


def test_bad_label_is_rejected() -> None:
    with pytest.raises(InputError) as raised:
        inference_class("l40s", {"devices": [L40S_DEVICE]}, labels={"team": "ML team!"})
    assert raised.value.field == "labels.team"


# --- InferenceClass generated from a GPU inventory --------------------------------------------------

L40S_NODE = {
    "product": "NVIDIA L40S",
    "count": 1,
    "memory": "46068Mi",
    "driver_version": "580.126.20",
    "architecture": "Ada Lovelace",
    "cuda_compute_capability": "8.9.0",
}
H100_NODE = {**L40S_NODE, "product": "NVIDIA H100 80GB HBM3", "count": 8, "memory": "81559Mi"}
H100_NODE.update(architecture="Hopper", cuda_compute_capability="9.0")

INVENTORIES: list[tuple[str, Any, dict[str, Any]]] = [
    (
        "list-two-l40s-nodes",
        [{"node": "n1", **L40S_NODE}, {"node": "n2", **L40S_NODE}],
        {
            "name": "gpu",
            "claim": "DRA",
            "driver": "gpu.nvidia.com",
            "deviceClassName": "gpu.nvidia.com",
            "count": 1,
            "capacity": {"memory": {"value": "46068Mi"}},
            "attributes": {
                "productName": {"string": "NVIDIA L40S"},
                "architecture": {"string": "Ada Lovelace"},
                "cudaComputeCapability": {"version": "8.9.0"},
            },
        },
    ),
    (
        "gpu-ready-nodes-mapping",
        {
            "h1": {"model": H100_NODE["product"], "source": "dra", "ready": True, "allocatable": 0, **H100_NODE},
        },
        {
            "name": "gpu",
            "claim": "DRA",
            "driver": "gpu.nvidia.com",
            "deviceClassName": "gpu.nvidia.com",
            "count": 8,
            "capacity": {"memory": {"value": "81559Mi"}},
            "attributes": {
                "productName": {"string": "NVIDIA H100 80GB HBM3"},
                "architecture": {"string": "Hopper"},
                "cudaComputeCapability": {"version": "9.0.0"},
            },
        },
    ),
    (
        # gpu_ready's label inventory: product_name is the DRA productName it derived from GFD's label.
        "gfd-labels-product-name-from-gpu-ready",
        {
            "n1": {
                **L40S_NODE,
                "product": None,
                "model": "NVIDIA-L40S",
                "product_name": "NVIDIA L40S",
                "source": "labels",
            }
        },
        {
            "name": "gpu",
            "claim": "DRA",
            "driver": "gpu.nvidia.com",
            "deviceClassName": "gpu.nvidia.com",
            "count": 1,
            "capacity": {"memory": {"value": "46068Mi"}},
            "attributes": {
                "productName": {"string": "NVIDIA L40S"},
                "architecture": {"string": "Ada Lovelace"},
                "cudaComputeCapability": {"version": "8.9.0"},
            },
        },
    ),
    (
        # An inventory without product_name (written by hand, or by an older gpu_ready): the GFD label is
        # turned back where that is certain.
        "gfd-labels-product-name-derived",
        {"n1": {**L40S_NODE, "product": None, "model": "Tesla-V100-SXM2-32GB", "source": "labels"}},
        {
            "name": "gpu",
            "claim": "DRA",
            "driver": "gpu.nvidia.com",
            "deviceClassName": "gpu.nvidia.com",
            "count": 1,
            "capacity": {"memory": {"value": "46068Mi"}},
            "attributes": {
                "productName": {"string": "Tesla V100-SXM2-32GB"},
                "architecture": {"string": "Ada Lovelace"},
                "cudaComputeCapability": {"version": "8.9.0"},
            },
        },
    ),
    (
        # ... and left out where it is not (a vGPU profile: "NVIDIA A16-4Q" or "NVIDIA A16 4Q"?).
        "gfd-labels-ambiguous-product-left-out",
        {"n1": {**L40S_NODE, "product": None, "model": "NVIDIA-A16-4Q", "source": "labels"}},
        {
            "name": "gpu",
            "claim": "DRA",
            "driver": "gpu.nvidia.com",
            "deviceClassName": "gpu.nvidia.com",
            "count": 1,
            "capacity": {"memory": {"value": "46068Mi"}},
            "attributes": {"architecture": {"string": "Ada Lovelace"}, "cudaComputeCapability": {"version": "8.9.0"}},
        },
    ),
    (
        # gpu_ready said the label cannot be reversed (product_name None): model is not used instead.
        "gpu-ready-left-product-out",
        {"n1": {**L40S_NODE, "product": None, "model": "NVIDIA-A16-4Q", "product_name": None, "source": "labels"}},
        {
            "name": "gpu",
            "claim": "DRA",
            "driver": "gpu.nvidia.com",
            "deviceClassName": "gpu.nvidia.com",
            "count": 1,
            "capacity": {"memory": {"value": "46068Mi"}},
            "attributes": {"architecture": {"string": "Ada Lovelace"}, "cudaComputeCapability": {"version": "8.9.0"}},
        },
    ),
    (
        "only-count-and-memory",
        [{"node": "n1", "count": 2, "memory": "32Gi"}],
        {
            "name": "gpu",
            "claim": "DRA",
            "driver": "gpu.nvidia.com",
            "deviceClassName": "gpu.nvidia.com",
            "count": 2,
            "capacity": {"memory": {"value": "32Gi"}},
        },
    ),
]


@pytest.mark.parametrize(("case", "inventory", "device"), INVENTORIES, ids=[c[0] for c in INVENTORIES])
def test_inference_class_from_inventory(case: str, inventory: Any, device: dict[str, Any]) -> None:
    obj = inference_class_from_inventory("pool-class", inventory)
    assert schema_errors("inferenceclasses", obj) == []
    assert obj["spec"]["devices"] == [device]
    assert "driverVersion" not in str(obj)  # a driver upgrade must not make the class lie
    assert "provisioning" not in obj["spec"]


def test_inference_class_from_inventory_with_provisioning_and_description() -> None:
    obj = inference_class_from_inventory(
        "vultr-l40s-1x", [{"node": "n1", **L40S_NODE}], description="Vultr L40S", provisioning=VULTR_PROVISIONING
    )
    assert schema_errors("inferenceclasses", obj) == []
    assert obj["spec"]["description"] == "Vultr L40S"
    assert obj["spec"]["provisioning"] == VULTR_PROVISIONING


def test_generated_description_names_the_hardware() -> None:
    obj = inference_class_from_inventory("c", [{"node": "n1", **L40S_NODE}])
    assert obj["spec"]["description"].startswith("1x NVIDIA L40S (46068Mi)")


def test_other_driver_e2e_style() -> None:
    found = devices_from_inventory([{"node": "kind", "count": 8, "memory": "80Gi"}], driver="gpu.example.com")
    assert found[0]["driver"] == found[0]["deviceClassName"] == "gpu.example.com"


BAD_INVENTORIES: list[tuple[str, Any, str]] = [
    ("empty-list", [], "inventory"),
    ("empty-mapping", {}, "inventory"),
    ("not-a-list", "n1", "inventory"),
    ("entry-not-mapping", ["n1"], "inventory[0]"),
    ("entry-without-node", [{**L40S_NODE}], "inventory[0].node"),
    ("no-gpus", [{"node": "n1", **L40S_NODE, "count": 0}], "inventory.n1.count"),
    ("too-many-gpus", [{"node": "n1", **L40S_NODE, "count": 65}], "inventory.n1.count"),
    ("no-memory", [{"node": "n1", **L40S_NODE, "memory": None}], "inventory.n1.memory"),
    ("bad-memory", [{"node": "n1", **L40S_NODE, "memory": "48 GB"}], "inventory.n1.memory"),
    (
        "bad-compute",
        [{"node": "n1", **L40S_NODE, "cuda_compute_capability": "sm89"}],
        "inventory.n1.cuda_compute_capability",
    ),
    ("mixed-count", [{"node": "n1", **L40S_NODE}, {"node": "n2", **L40S_NODE, "count": 2}], "inventory"),
    ("mixed-model", [{"node": "n1", **L40S_NODE}, {"node": "n2", **H100_NODE}], "inventory"),
]


@pytest.mark.parametrize(("case", "inventory", "field"), BAD_INVENTORIES, ids=[c[0] for c in BAD_INVENTORIES])
def test_inventory_rejects(case: str, inventory: Any, field: str) -> None:
    with pytest.raises(InputError) as raised:
        inference_class_from_inventory("c", inventory)
    assert raised.value.field == field, raised.value.msg


def test_mixed_inventory_message_names_nodes_and_difference() -> None:
    with pytest.raises(InputError) as raised:
        inference_class_from_inventory("c", [{"node": "n1", **L40S_NODE}, {"node": "n2", **L40S_NODE, "count": 2}])
    assert "count 1 on n1 vs 2 on n2" in raised.value.msg


# --- InferenceCluster ------------------------------------------------------------------------------

POOL = {"name": "gpu-l40s", "className": "vultr-l40s-1x", "nodeCount": 2}
CLUSTERS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "one-pool-defaults",
        {"node_pools": [{"name": "gpu", "className": "l40s"}]},
        {
            "cluster": {
                "source": "Existing",
                "existing": {
                    "secretRef": {"name": "c1-kubeconfig", "key": "kubeconfig"},
                    "cache": {"storageClassName": RWX_STORAGE_CLASS},
                },
            },
            "nodePools": [{"name": "gpu", "className": "l40s", "nodeCount": 1}],
        },
    ),
    (
        "autoscaling-pool-and-taint",
        {
            "node_pools": [{**POOL, "minNodeCount": 1, "maxNodeCount": 1000}],
            "taints": [{"key": "maintenance", "value": "true", "effect": "NoSchedule"}],
        },
        {
            "cluster": {
                "source": "Existing",
                "existing": {
                    "secretRef": {"name": "c1-kubeconfig", "key": "kubeconfig"},
                    "cache": {"storageClassName": RWX_STORAGE_CLASS},
                },
            },
            "nodePools": [{**POOL, "minNodeCount": 1, "maxNodeCount": 1000}],
            "taints": [{"key": "maintenance", "value": "true", "effect": "NoSchedule"}],
        },
    ),
    (
        "eight-pools-no-cache",
        {"node_pools": [{**POOL, "name": f"p{i}"} for i in range(8)], "storage_class_name": None},
        {
            "cluster": {
                "source": "Existing",
                "existing": {"secretRef": {"name": "c1-kubeconfig", "key": "kubeconfig"}},
            },
            "nodePools": [{**POOL, "name": f"p{i}"} for i in range(8)],
        },
    ),
    (
        "forty-char-pool-name-other-key",
        {"node_pools": [{**POOL, "name": "p" * 40}], "secret_key": "config.yaml"},
        {
            "cluster": {
                "source": "Existing",
                "existing": {
                    "secretRef": {"name": "c1-kubeconfig", "key": "config.yaml"},
                    "cache": {"storageClassName": RWX_STORAGE_CLASS},
                },
            },
            "nodePools": [{**POOL, "name": "p" * 40}],
        },
    ),
]


@pytest.mark.parametrize(("case", "kwargs", "spec"), CLUSTERS, ids=[c[0] for c in CLUSTERS])
def test_inference_cluster_is_valid(case: str, kwargs: dict[str, Any], spec: dict[str, Any]) -> None:
    obj = inference_cluster("c1", secret_name="c1-kubeconfig", labels={"modelplane.ai/region": "ewr"}, **kwargs)
    assert schema_errors("inferenceclusters", obj) == []
    assert obj["spec"] == spec
    # The cluster's own label pins a ModelDeployment to it (clusterSelector), besides the user's and ours.
    assert obj["metadata"]["labels"] == {
        "modelplane.ai/region": "ewr",
        "metalplane.inference/cluster": "c1",
        MANAGED_BY_LABEL: "metalplane.inference",
    }
    # The VultrCluster XRD is stricter on counts: every pool also passes its count limits.
    vultr_pool = subschema("vultrclusters", "spec", "nodePools", "items")
    counts = {
        "type": "object",
        "properties": {k: vultr_pool["properties"][k] for k in ("nodeCount", "minNodeCount", "maxNodeCount")},
    }
    for pool in obj["spec"]["nodePools"]:
        assert schema_errors("vultrclusters", pool, schema=counts) == []
        if "minNodeCount" in pool:
            assert "maxNodeCount" in pool  # the VultrCluster CEL rule


def test_pool_node_labels() -> None:
    obj = inference_cluster("c1", secret_name="s", node_pools=[POOL, {**POOL, "name": "big"}])
    assert pool_node_labels(obj) == {
        "gpu-l40s": {"modelplane.ai/pool": "gpu-l40s"},
        "big": {"modelplane.ai/pool": "big"},
    }


BAD_CLUSTERS: list[tuple[str, dict[str, Any], str]] = [
    ("no-pools", {"node_pools": []}, "node_pools"),
    ("nine-pools", {"node_pools": [{**POOL, "name": f"p{i}"} for i in range(9)]}, "node_pools"),
    ("duplicate-pools", {"node_pools": [POOL, POOL]}, "node_pools"),
    ("pool-not-mapping", {"node_pools": ["gpu"]}, "node_pools[0]"),
    ("pool-no-class", {"node_pools": [{"name": "gpu"}]}, "node_pools[0].className"),
    ("pool-no-name", {"node_pools": [{"className": "c"}]}, "node_pools[0].name"),
    ("pool-name-41", {"node_pools": [{**POOL, "name": "p" * 41}]}, "node_pools[0].name"),
    ("pool-name-upper", {"node_pools": [{**POOL, "name": "GPU"}]}, "node_pools[0].name"),
    ("class-name-bad", {"node_pools": [{**POOL, "className": "L40S class"}]}, "node_pools[0].className"),
    ("node-count-zero", {"node_pools": [{**POOL, "nodeCount": 0}]}, "node_pools[0].nodeCount"),
    ("node-count-1001", {"node_pools": [{**POOL, "nodeCount": 1001}]}, "node_pools[0].nodeCount"),
    ("node-count-string", {"node_pools": [{**POOL, "nodeCount": "2"}]}, "node_pools[0].nodeCount"),
    ("min-without-max", {"node_pools": [{**POOL, "minNodeCount": 1}]}, "node_pools[0].minNodeCount"),
    ("min-above-max", {"node_pools": [{**POOL, "minNodeCount": 3, "maxNodeCount": 2}]}, "node_pools[0].maxNodeCount"),
    ("count-above-max", {"node_pools": [{**POOL, "nodeCount": 5, "maxNodeCount": 4}]}, "node_pools[0].nodeCount"),
    (
        "count-below-min",
        {"node_pools": [{**POOL, "nodeCount": 1, "minNodeCount": 2, "maxNodeCount": 3}]},
        "node_pools[0].nodeCount",
    ),
    ("max-1001", {"node_pools": [{**POOL, "maxNodeCount": 1001}]}, "node_pools[0].maxNodeCount"),
    ("zones-ignored", {"node_pools": [{**POOL, "zones": ["a"]}]}, "node_pools[0].zones"),
    ("fabric-ignored", {"node_pools": [{**POOL, "fabric": {"type": "EFA"}}]}, "node_pools[0].fabric"),
    ("unknown-pool-key", {"node_pools": [{**POOL, "plan": "vcg"}]}, "node_pools[0]"),
    ("bad-secret-name", {"node_pools": [POOL], "secret_name": "My Secret"}, "secret_name"),
    ("bad-secret-key", {"node_pools": [POOL], "secret_key": "kube/config"}, "secret_key"),
    ("bad-storage-class", {"node_pools": [POOL], "storage_class_name": ""}, "storage_class_name"),
    ("bad-label", {"node_pools": [POOL], "labels": {"modelplane.ai/region": 5}}, "labels.modelplane.ai/region"),
    ("bad-label-key", {"node_pools": [POOL], "labels": {"-x/y": "v"}}, "labels.-x/y"),
    (
        "taint-effect",
        {"node_pools": [POOL], "taints": [{"key": "k", "effect": "PreferNoSchedule"}]},
        "taints[0].effect",
    ),
    ("taint-no-key", {"node_pools": [POOL], "taints": [{"effect": "NoSchedule"}]}, "taints[0].key"),
    (
        "taint-duplicate",
        {"node_pools": [POOL], "taints": [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "effect": "NoSchedule"}]},
        "taints",
    ),
]


@pytest.mark.parametrize(("case", "kwargs", "field"), BAD_CLUSTERS, ids=[c[0] for c in BAD_CLUSTERS])
def test_inference_cluster_rejects(case: str, kwargs: dict[str, Any], field: str) -> None:
    kwargs = {"secret_name": "c1-kubeconfig", **kwargs}
    with pytest.raises(InputError) as raised:
        inference_cluster("c1", **kwargs)
    assert raised.value.field == field, raised.value.msg


@pytest.mark.parametrize("name", ["C1", "c_1", "c" * 64, ""])
def test_inference_cluster_rejects_bad_name(name: str) -> None:
    with pytest.raises(InputError) as raised:
        inference_cluster(name, secret_name="s", node_pools=[POOL])
    assert raised.value.field == "name"


# --- kubeconfig Secret ---------------------------------------------------------------------------

TOKEN = "s3cr3t-t0ken-value"
KUBECONFIG = f"""apiVersion: v1
kind: Config
current-context: vke
clusters:
- name: other
  cluster: {{server: "https://other:6443"}}
- name: vke
  cluster:
    server: https://127.0.0.1:41234
    certificate-authority-data: Q0EK
contexts:
- name: other
  context: {{cluster: other, user: admin}}
- name: vke
  context: {{cluster: vke, user: admin}}
users:
- name: admin
  user: {{token: {TOKEN}}}
"""


def _decoded(secret: dict[str, Any], key: str = "kubeconfig") -> dict[str, Any]:
    return yaml.safe_load(base64.b64decode(secret["data"][key]))


def test_secret_shape_and_unchanged_text() -> None:
    secret = kubeconfig_secret("c1-kubeconfig", KUBECONFIG, cluster="c1")
    assert secret["apiVersion"] == "v1"
    assert secret["kind"] == "Secret"
    assert secret["metadata"] == {
        "name": "c1-kubeconfig",
        "namespace": CONTROL_PLANE_NAMESPACE,
        "labels": {MANAGED_BY_LABEL: "metalplane.inference", "metalplane.inference/cluster": "c1"},
    }
    assert set(secret) == {"apiVersion", "kind", "metadata", "type", "data"}  # no stringData: idempotent
    assert base64.b64decode(secret["data"]["kubeconfig"]).decode() == KUBECONFIG


def test_server_override_rewrites_only_the_current_cluster() -> None:
    secret = kubeconfig_secret(
        "c1-kubeconfig", KUBECONFIG, server="https://10.0.0.5:6443", tls_server_name="kubernetes"
    )
    config = _decoded(secret)
    clusters = {c["name"]: c["cluster"] for c in config["clusters"]}
    assert clusters["vke"] == {
        "server": "https://10.0.0.5:6443",
        "certificate-authority-data": "Q0EK",
        "tls-server-name": "kubernetes",
    }
    assert clusters["other"] == {"server": "https://other:6443"}
    assert config["users"] == [{"name": "admin", "user": {"token": TOKEN}}]
    # deterministic: the same input gives the same bytes (no spurious change on the next run)
    again = kubeconfig_secret("c1-kubeconfig", KUBECONFIG, server="https://10.0.0.5:6443", tls_server_name="kubernetes")
    assert again == secret


def test_rewrite_keeps_every_other_field() -> None:
    long_ca = "Q" * 5000
    text = KUBECONFIG.replace("certificate-authority-data: Q0EK", f"certificate-authority-data: {long_ca}")
    text += "preferences: {colors: true}\nextensions:\n- {name: note, extension: {text: %s}}\n" % ("word " * 40)
    before = yaml.safe_load(text)
    after = yaml.safe_load(rewrite_kubeconfig(text, server="https://10.0.0.5:6443"))
    vke = next(c for c in before["clusters"] if c["name"] == "vke")
    vke["cluster"]["server"] = "https://10.0.0.5:6443"
    assert after == before


def test_single_context_without_current_context() -> None:
    text = KUBECONFIG.replace("current-context: vke\n", "")
    config = yaml.safe_load(text)
    config["contexts"] = [c for c in config["contexts"] if c["name"] == "vke"]
    rewritten = yaml.safe_load(rewrite_kubeconfig(yaml.safe_dump(config), server="http://mp-lab:8080"))
    assert {c["name"]: c["cluster"]["server"] for c in rewritten["clusters"]}["vke"] == "http://mp-lab:8080"


def test_client_certificate_data_is_accepted() -> None:
    text = KUBECONFIG.replace(f"{{token: {TOKEN}}}", "{client-certificate-data: Q0VSVAo=, client-key-data: S0VZCg==}")
    assert rewrite_kubeconfig(text) == text


def _kc(old: str, new: str) -> str:
    assert old in KUBECONFIG
    return KUBECONFIG.replace(old, new)


BAD_KUBECONFIGS: list[tuple[str, str, dict[str, Any], str]] = [
    ("not-yaml", "a: [b", {}, "kubeconfig"),
    ("not-a-config", "- a\n- b\n", {}, "kubeconfig"),
    ("wrong-kind", "kind: Pod\n", {}, "kubeconfig"),
    ("empty", "", {}, "kubeconfig"),
    ("exec-plugin", _kc(f"{{token: {TOKEN}}}", "{exec: {command: aws}}"), {}, "kubeconfig"),
    ("token-file", _kc(f"{{token: {TOKEN}}}", "{tokenFile: /tmp/t}"), {}, "kubeconfig"),
    ("no-credentials", _kc(f"{{token: {TOKEN}}}", "{username: admin}"), {}, "kubeconfig"),
    ("cert-without-key", _kc(f"{{token: {TOKEN}}}", "{client-certificate-data: Q0VSVAo=}"), {}, "kubeconfig"),
    ("ca-file", _kc("certificate-authority-data: Q0EK", "certificate-authority: /etc/ca.crt"), {}, "kubeconfig"),
    ("missing-context", _kc("current-context: vke", "current-context: nope"), {}, "kubeconfig"),
    ("missing-user", _kc("- name: admin\n  user:", "- name: root\n  user:"), {}, "kubeconfig"),
    ("two-contexts-none-current", _kc("current-context: vke\n", ""), {}, "kubeconfig"),
    ("server-not-url", _kc("server: https://127.0.0.1:41234", "server: 127.0.0.1:41234"), {}, "kubeconfig.server"),
    ("override-not-url", KUBECONFIG, {"server": "10.0.0.5:6443"}, "server"),
    ("override-ftp", KUBECONFIG, {"server": "ftp://10.0.0.5"}, "server"),
    ("bad-tls-name", KUBECONFIG, {"tls_server_name": "not a name"}, "tls_server_name"),
]


@pytest.mark.parametrize(("case", "text", "kwargs", "field"), BAD_KUBECONFIGS, ids=[c[0] for c in BAD_KUBECONFIGS])
def test_kubeconfig_rejects(case: str, text: str, kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as raised:
        kubeconfig_secret("c1-kubeconfig", text, **kwargs)
    assert raised.value.field == field, raised.value.msg
    assert TOKEN not in str(raised.value)
    assert TOKEN not in str(raised.value.to_result())


@pytest.mark.parametrize(("kwargs", "field"), [({"name": "Bad Name"}, "secret_name"), ({"key": "a/b"}, "secret_key")])
def test_secret_rejects_bad_names(kwargs: dict[str, Any], field: str) -> None:
    args = {"name": "c1-kubeconfig", **kwargs}
    name = args.pop("name")
    with pytest.raises(InputError) as raised:
        kubeconfig_secret(name, KUBECONFIG, **args)
    assert raised.value.field == field


def test_secret_and_cluster_agree() -> None:
    secret = kubeconfig_secret("c1-kubeconfig", KUBECONFIG, cluster="c1", key="kubeconfig")
    cluster = inference_cluster("c1", secret_name="c1-kubeconfig", node_pools=[POOL])
    ref = cluster["spec"]["cluster"]["existing"]["secretRef"]
    assert secret["metadata"]["name"] == ref["name"]
    assert ref["key"] in secret["data"]
    assert secret["metadata"]["namespace"] == "modelplane-system"


# --- readiness ----------------------------------------------------------------------------------


def _ic(conditions: list[tuple[str, str, str]] | None, address: str | None = "203.0.113.7") -> dict[str, Any]:
    status: dict[str, Any] = {}
    if conditions is not None:
        status["conditions"] = [{"type": t, "status": s, "reason": r} for t, s, r in conditions]
    if address is not None:
        status["gateway"] = {"address": address}
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": "c1"},
        "status": status,
    }


ALL_TRUE = [
    ("Synced", "True", "ReconcileSuccess"),
    ("Ready", "True", "Available"),
    ("ClusterReady", "True", "ClusterRunning"),
    ("BackendReady", "True", "BackendHealthy"),
]
READINESS: list[tuple[str, dict[str, Any] | None, list[str]]] = [
    ("serving", _ic(ALL_TRUE), []),
    ("not-found", None, ["InferenceCluster not found"]),
    (
        "no-status",
        {"metadata": {"name": "c1"}},
        [
            "condition ClusterReady not reported yet",
            "condition BackendReady not reported yet",
            "condition Ready not reported yet",
            "status.gateway.address is empty",
        ],
    ),
    (
        "backend-installing",
        _ic([*ALL_TRUE[:2], ALL_TRUE[2], ("BackendReady", "False", "Installing")], address=None),
        ["condition BackendReady is False (Installing), wants True/BackendHealthy", "status.gateway.address is empty"],
    ),
    (
        "waiting-for-classes",
        _ic([("ClusterReady", "False", "WaitingForClasses"), ("Ready", "False", "Creating"), ALL_TRUE[3]]),
        [
            "condition ClusterReady is False (WaitingForClasses), wants True/ClusterRunning",
            "condition Ready is False (Creating), wants True",
        ],
    ),
    ("empty-address", _ic(ALL_TRUE, address=""), ["status.gateway.address is empty"]),
    ("ready-missing", _ic(ALL_TRUE[2:]), ["condition Ready not reported yet"]),
    (
        "unknown-status",
        _ic([*ALL_TRUE[:3], ("BackendReady", "Unknown", "")]),
        ["condition BackendReady is Unknown (no reason), wants True/BackendHealthy"],
    ),
]


@pytest.mark.parametrize(("case", "obj", "problems"), READINESS, ids=[c[0] for c in READINESS])
def test_readiness_unmet_and_expression_agree(case: str, obj: dict[str, Any] | None, problems: list[str]) -> None:
    assert readiness.unmet(obj) == problems
    if obj is not None:
        value = jmespath.search(readiness.readiness_expression(), obj)
        assert (value is True) == (not problems), value


def test_readiness_expectations_data() -> None:
    data = readiness.inference_cluster_readiness("c1")
    assert data["kind"] == "InferenceCluster"
    assert data["api_version"] == "modelplane.ai/v1alpha1"
    assert {c["type"] for c in data["conditions"]} == {"Ready", "ClusterReady", "BackendReady"}
    assert all(c["status"] == "True" for c in data["conditions"])
    assert {c["type"]: c.get("reason") for c in data["conditions"]}["BackendReady"] == "BackendHealthy"
    assert data["non_empty"] == ["status.gateway.address"]
    assert data["expression"] == readiness.readiness_expression()
    with pytest.raises(InputError):
        readiness.inference_cluster_readiness("Bad")
