"""GPU signals: quantities, ResourceSlice devices, InferenceClass device matching, inventory, verdict."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._kube import gpu

V100 = "Tesla V100-PCIE-32GB"


def device(
    index: int,
    *,
    product: str = V100,
    arch: str = "Volta",
    cc: str = "7.0.0",
    memory: str = "32Gi",
    driver_version: str = "580.126.20",
    typ: str | None = "gpu",
) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "uuid": {"string": f"GPU-{index}"},
        "productName": {"string": product},
        "architecture": {"string": arch},
        "cudaComputeCapability": {"version": cc},
        "driverVersion": {"version": driver_version},
    }
    if typ:
        attributes["type"] = {"string": typ}
    return {"name": f"gpu-{index}", "attributes": attributes, "capacity": {"memory": {"value": memory}}}


def resource_slice(
    node: str,
    devices: list[dict[str, Any]],
    *,
    driver: str = "gpu.nvidia.com",
    generation: int = 1,
    name: str | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name or f"{node}-{driver}-{generation}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def node(name: str, *, gpus: int | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"allocatable": {"cpu": "32"}}
    if gpus is not None:
        status["allocatable"][gpu.GPU_RESOURCE] = str(gpus)
    return {"metadata": {"name": name, "labels": labels or {}}, "status": status}


def daemonset(desired: int, ready: int, *, generation: int = 1, observed: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": "nvidia-operator-validator", "namespace": "gpu-operator", "generation": generation},
        "spec": {"selector": {"matchLabels": {"app": "nvidia-operator-validator"}}},
        "status": {"desiredNumberScheduled": desired, "numberReady": ready, "observedGeneration": observed},
    }


def criteria(
    *checks: str, per_node: int = 1, match: dict[str, Any] | None = None, driver: str = "gpu.nvidia.com"
) -> gpu.GpuCriteria:
    return gpu.GpuCriteria(
        checks=checks,
        gpus_per_node=per_node,
        dra_driver=driver,
        validator="gpu-operator/nvidia-operator-validator",
        device_match=gpu.parse_device_match(match),
    )


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("46068Mi", 46068 * 2**20),
        ("32Gi", 32 * 2**30),
        ("81559Mi", 81559 * 2**20),
        ("80G", 80 * 10**9),
        ("1.5k", 1500),
        ("1e3", 1000),
        ("500m", Decimal("0.5")),
        (8, 8),
        ("8", 8),
    ],
)
def test_parse_quantity(text: Any, value: Any) -> None:
    assert gpu.parse_quantity(text) == Decimal(value)


@pytest.mark.parametrize("text", ["", "abc", "32GB", "Gi", True])
def test_parse_quantity_rejects(text: Any) -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        gpu.parse_quantity(text)


@pytest.mark.parametrize(
    ("a", "b"), [("9.0", "9.0.0"), ("v7.0.0", "7.0"), ("580.126.20", "580.126.20"), ("13.0.0-rc1", "13")]
)
def test_versions_equal(a: str, b: str) -> None:
    assert gpu.parse_version(a) == gpu.parse_version(b)


def test_slice_devices_newest_generation_flat_and_v1beta1_shapes() -> None:
    old = resource_slice("n1", [device(0), device(1)], generation=1)
    new = resource_slice("n1", [device(0)], generation=2)
    beta = {
        "metadata": {"name": "b"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "n2",
            "pool": {"name": "n2", "generation": 1},
            "devices": [
                {
                    "name": "gpu-0",
                    "basic": {
                        "attributes": {"gpu.nvidia.com/productName": {"string": "L40S"}},
                        "capacity": {"memory": {"value": "46068Mi"}},
                    },
                }
            ],
        },
    }
    other = resource_slice("n1", [device(5)], driver="gpu.example.com")
    found = gpu.slice_devices([old, new, beta, other], "gpu.nvidia.com")
    assert [d["name"] for d in found["n1"]] == ["gpu-0"]
    assert found["n2"][0]["attributes"] == {"productName": {"string": "L40S"}}  # domain prefix stripped
    assert gpu.capacity_value(found["n2"][0], "memory") == "46068Mi"


HOPPER = {
    "name": "gpu",
    "claim": "DRA",
    "driver": "gpu.nvidia.com",
    "deviceClassName": "gpu.nvidia.com",
    "count": 8,
    "attributes": {"architecture": {"string": "Hopper"}, "cudaComputeCapability": {"version": "9.0.0"}},
    "capacity": {"memory": {"value": "81559Mi"}},
}


@pytest.mark.parametrize(
    ("dev", "reasons"),
    [
        (device(0, arch="Hopper", cc="9.0.0", memory="81559Mi"), []),
        (device(0, arch="Hopper", cc="9.0", memory="81559Mi"), []),  # semver equality
        (device(0, arch="Hopper", cc="9.0.0", memory="96Gi"), []),  # more memory than declared is fine
        (device(0, arch="Hopper", cc="9.0.0", memory="80000Mi"), ["capacity memory is 80000Mi, below 81559Mi"]),
        (
            device(0),
            [
                "attribute architecture is 'Volta', wants 'Hopper'",
                "attribute cudaComputeCapability is '7.0.0', wants '9.0.0'",
                "capacity memory is 32Gi, below 81559Mi",
            ],
        ),
        (
            {"name": "g", "attributes": {}, "capacity": {}},
            [
                "attribute architecture missing (wants string 'Hopper')",
                "attribute cudaComputeCapability missing (wants version '9.0.0')",
                "capacity memory missing (wants 81559Mi)",
            ],
        ),
    ],
)
def test_device_mismatches_against_an_inference_class_entry(dev: dict[str, Any], reasons: list[str]) -> None:
    match = gpu.parse_device_match(HOPPER)
    assert match is not None
    assert gpu.device_mismatches(dev, match) == reasons


def test_device_match_int_bool_and_list_attributes() -> None:
    match = gpu.parse_device_match({"attributes": {"index": {"int": 3}, "mig": {"bool": False}}})
    assert match is not None
    dev = {"name": "x", "attributes": {"index": {"int": 3}, "mig": {"bool": False}}, "capacity": {}}
    assert gpu.device_mismatches(dev, match) == []
    dev["attributes"]["index"] = {"ints": [1, 2]}
    assert gpu.device_mismatches(dev, match) == ["attribute index is [1, 2], wants 3"]


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"attributes": {"architecture": "Hopper"}}, "device_match.attributes.architecture"),
        ({"attributes": {"architecture": {"string": "H", "version": "1.0.0"}}}, "device_match.attributes.architecture"),
        ({"attributes": {"cc": {"version": "nine"}}}, "device_match.attributes.cc"),
        ({"capacity": {"memory": "80Gi"}}, "device_match.capacity.memory"),
        ({"capacity": {"memory": {"value": "80GB"}}}, "device_match.capacity.memory"),
        ({"count": 0}, "device_match.count"),
        ({"nodeSelector": {}}, "device_match"),
    ],
)
def test_device_match_input_errors(entry: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as err:
        gpu.parse_device_match(entry)
    assert err.value.field == field


@pytest.mark.parametrize(
    ("ds", "ready"),
    [
        (daemonset(2, 2), True),
        (daemonset(2, 1), False),
        (daemonset(0, 0), False),
        (daemonset(2, 2, generation=2, observed=1), False),
        (None, False),
    ],
)
def test_daemonset_summary(ds: dict[str, Any] | None, ready: bool) -> None:
    assert gpu.daemonset_summary(ds)["ready"] is ready


def test_operator_check_says_how_many_pods_are_ready() -> None:
    ready, summary = gpu.assess(criteria("operator"), nodes=[], daemonsets=[daemonset(3, 1)])
    assert ready is False
    assert summary["problems"] == ["DaemonSet gpu-operator/nvidia-operator-validator: 1/3 pods ready"]
    ready, summary = gpu.assess(criteria("operator"), nodes=[], daemonsets=[])
    assert summary["problems"] == ["DaemonSet gpu-operator/nvidia-operator-validator not found"]
    assert gpu.assess(criteria("operator"), nodes=[], daemonsets=[daemonset(3, 3)])[0] is True


def test_allocatable_check_names_the_short_node() -> None:
    nodes = [node("a", gpus=2), node("b", gpus=1), node("c")]
    ready, summary = gpu.assess(criteria("allocatable", per_node=2), nodes=nodes)
    assert ready is False
    assert summary["problems"] == [
        "node b: allocatable nvidia.com/gpu 1 < 2",
        "node c: allocatable nvidia.com/gpu 0 < 2",
    ]
    assert summary["nodes"]["a"]["ready"] is True
    assert summary["checks"]["allocatable"]["short"] == ["b", "c"]


def test_node_checks_need_a_node() -> None:
    ready, summary = gpu.assess(criteria("allocatable"), nodes=[])
    assert (ready, summary["problems"]) == (False, ["no node matches node_selector"])


def test_dra_check_counts_and_matches_devices_per_node() -> None:
    slices = [
        resource_slice("a", [device(0, arch="Hopper", cc="9.0.0", memory="81559Mi") for _attempt in range(8)]),
        resource_slice(
            "b",
            [device(i, arch="Hopper", cc="9.0.0", memory="81559Mi") for i in range(7)]
            + [device(7, memory="81559Mi", arch="Ampere", cc="9.0.0")],
        ),
    ]
    ready, summary = gpu.assess(criteria("dra", match=HOPPER), nodes=[node("a"), node("b"), node("c")], slices=slices)
    assert ready is False
    assert summary["problems"] == [
        "node b: 7 of 8 expected gpu.nvidia.com devices match device_match "
        "(gpu-7: attribute architecture is 'Ampere', wants 'Hopper')",
        "node c: no ResourceSlice device of driver gpu.nvidia.com",
    ]
    assert summary["nodes"]["a"]["matching_devices"] == 8


def test_dra_skips_non_gpu_devices_and_uses_gpus_per_node_without_count() -> None:
    slices = [resource_slice("a", [device(0), device(1, typ="mig")])]
    ready, summary = gpu.assess(criteria("dra", per_node=2), nodes=[node("a")], slices=slices)
    assert ready is False
    assert summary["problems"] == ["node a: 1 of 2 expected gpu.nvidia.com devices"]


def test_dra_example_driver_devices_without_type_count() -> None:
    example = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "index": {"int": i},
                "model": {"string": "LATEST-GPU-MODEL"},
                "driverVersion": {"version": "1.0.0"},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for i in range(8)
    ]
    match = {
        "count": 8,
        "attributes": {"model": {"string": "LATEST-GPU-MODEL"}},
        "capacity": {"memory": {"value": "80Gi"}},
    }
    ready, summary = gpu.assess(
        criteria("dra", match=match, driver="gpu.example.com"),
        nodes=[node("kind-worker")],
        slices=[resource_slice("kind-worker", example, driver="gpu.example.com")],
    )
    assert ready is True
    inv = summary["nodes"]["kind-worker"]
    assert (inv["model"], inv["count"], inv["memory"], inv["driver_version"]) == (
        "LATEST-GPU-MODEL",
        8,
        "80Gi",
        "1.0.0",
    )


def test_inventory_from_dra_generates_an_inference_class_entry() -> None:
    slices = [resource_slice("r730", [device(0), device(1)])]
    ready, summary = gpu.assess(criteria("dra", per_node=2), nodes=[node("r730")], slices=slices)
    assert ready is True
    inv = summary["nodes"]["r730"]
    assert {k: inv[k] for k in ("source", "model", "count", "memory", "driver_version", "architecture")} == {
        "source": "dra",
        "model": V100,
        "count": 2,
        "memory": "32Gi",
        "driver_version": "580.126.20",
        "architecture": "Volta",
    }
    assert inv["inference_class_devices"] == [
        {
            "name": "gpu",
            "claim": "DRA",
            "driver": "gpu.nvidia.com",
            "deviceClassName": "gpu.nvidia.com",
            "count": 2,
            "attributes": {
                "productName": {"string": V100},
                "architecture": {"string": "Volta"},
                "cudaComputeCapability": {"version": "7.0.0"},
            },
            "capacity": {"memory": {"value": "32Gi"}},
        }
    ]
    # The generated entry is itself a valid device_match that the same devices satisfy.
    match = gpu.parse_device_match(inv["inference_class_devices"][0])
    assert match is not None
    assert all(gpu.device_mismatches(d, match) == [] for d in gpu.slice_devices(slices, "gpu.nvidia.com")["r730"])


def test_inventory_from_gpu_feature_discovery_labels() -> None:
    labels = {
        gpu.LABEL_PRODUCT: "NVIDIA-L40S",
        gpu.LABEL_COUNT: "4",
        gpu.LABEL_MEMORY_MIB: "46068",
        gpu.LABEL_FAMILY: "ada-lovelace",
        "nvidia.com/cuda.driver.major": "580",
        "nvidia.com/cuda.driver.minor": "126",
        "nvidia.com/cuda.driver.rev": "20",
        "nvidia.com/gpu.compute.major": "8",
        "nvidia.com/gpu.compute.minor": "9",
    }
    inv = gpu.node_inventory(node("l40s", gpus=4, labels=labels), None)
    assert inv == {
        "allocatable": 4,
        "source": "labels",
        "count": 4,
        "model": "NVIDIA-L40S",
        "product_name": "NVIDIA L40S",
        "architecture": "Ada Lovelace",
        "cuda_compute_capability": "8.9.0",
        "driver_version": "580.126.20",
        "memory": "46068Mi",
    }
    # The class entry carries the DRA productName, not GFD's label.
    (entry,) = gpu.inference_class_devices(inv, "gpu.nvidia.com")
    assert entry["attributes"] == {
        "productName": {"string": "NVIDIA L40S"},
        "architecture": {"string": "Ada Lovelace"},
        "cudaComputeCapability": {"version": "8.9.0"},
    }
    # A label that cannot be turned back into the NVML name: the attribute is left out, with the reason.
    vgpu = gpu.node_inventory(node("v", gpus=1, labels={**labels, gpu.LABEL_PRODUCT: "NVIDIA-A16-4Q"}), None)
    assert vgpu["product_name"] is None
    assert "productName" in vgpu["attributes_left_out"]
    assert "productName" not in gpu.inference_class_devices(vgpu, "gpu.nvidia.com")[0]["attributes"]
    assert gpu.node_inventory(node("cpu"), None)["source"] == "none"
    assert gpu.inference_class_devices(gpu.node_inventory(node("cpu"), None), "gpu.nvidia.com") == []


def test_pod_diagnostics_lists_container_states_of_not_ready_pods() -> None:
    pods = [
        {
            "metadata": {"name": "v-ok"},
            "spec": {"nodeName": "a"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        },
        {
            "metadata": {"name": "v-bad"},
            "spec": {"nodeName": "b"},
            "status": {
                "phase": "Pending",
                "conditions": [{"type": "Ready", "status": "False"}],
                "initContainerStatuses": [
                    {
                        "name": "driver-validation",
                        "ready": False,
                        "restartCount": 4,
                        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                    }
                ],
                "containerStatuses": [
                    {
                        "name": "nvidia-operator-validator",
                        "ready": False,
                        "state": {"waiting": {"reason": "PodInitializing"}},
                    }
                ],
            },
        },
    ]
    found = gpu.pod_diagnostics(pods)
    assert found == [
        {
            "name": "v-bad",
            "node": "b",
            "phase": "Pending",
            "containers": [
                {
                    "name": "driver-validation",
                    "init": True,
                    "ready": False,
                    "state": "waiting",
                    "reason": "CrashLoopBackOff",
                    "message": "back-off 40s",
                    "restarts": 4,
                },
                {
                    "name": "nvidia-operator-validator",
                    "init": False,
                    "ready": False,
                    "state": "waiting",
                    "reason": "PodInitializing",
                },
            ],
        }
    ]
    assert gpu.describe_pod(found[0]) == (
        "pod v-bad on b (Pending; driver-validation: waiting CrashLoopBackOff, "
        "nvidia-operator-validator: waiting PodInitializing)"
    )
