"""gpu_ready: checks, inventory, timeout diagnostics (FakeFeed, no network)."""

from __future__ import annotations

from typing import Any

import pytest
from kube_module_support import FakeFeed, run_module

from ansible_collections.metalplane.inference.plugins.modules import gpu_ready


def node(name: str, gpus: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"modelplane.ai/pool": "gpu"}},
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}}}  # fmt: skip


def validator(desired: int, ready: int) -> dict[str, Any]:
    return {
        "metadata": {"name": "nvidia-operator-validator", "namespace": "gpu-operator"},
        "spec": {"selector": {"matchLabels": {"app": "nvidia-operator-validator"}}},
        "status": {"desiredNumberScheduled": desired, "numberReady": ready},
    }


def l40s_slice(node_name: str, count: int) -> dict[str, Any]:
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "type": {"string": "gpu"},
                "productName": {"string": "NVIDIA L40S"},
                "architecture": {"string": "Ada Lovelace"},
                "cudaComputeCapability": {"version": "8.9.0"},
                "driverVersion": {"version": "580.126.20"},
            },
            "capacity": {"memory": {"value": "46068Mi"}},
        }
        for i in range(count)
    ]
    return {"metadata": {"name": f"{node_name}-slice"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": node_name, "pool": {"name": node_name, "generation": 1},
                     "devices": devices}}  # fmt: skip


def test_operator_and_allocatable_become_ready(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    feed = FakeFeed(
        {
            "nodes": [{"items": [node("g1", 0)], "events": [0.05, {"type": "MODIFIED", "object": node("g1", 2)}]}],
            "validator": [{"items": [validator(1, 0)], "events": [{"type": "MODIFIED", "object": validator(1, 1)}]}],
        }
    )
    args = {"node_selector": {"modelplane.ai/pool": "gpu"}, "gpus_per_node": 2, "wait_timeout": 3}
    result = run_module(monkeypatch, capsys, gpu_ready.main, feed, args)
    assert result["ready"] is True, result
    assert result["nodes"]["g1"]["allocatable"] == 2
    specs = {c[1]: c[2] for c in feed.calls if c[0] == "list"}
    assert specs["nodes"].label_selector == "modelplane.ai/pool=gpu"
    assert specs["validator"].field_selector == "metadata.name=nvidia-operator-validator"
    assert specs["validator"].namespace == "gpu-operator"


def test_timeout_names_nodes_and_validator_pod_container_states(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = {
        "metadata": {"name": "nvidia-operator-validator-x1"},
        "spec": {"nodeName": "g2"},
        "status": {
            "phase": "Pending",
            "initContainerStatuses": [
                {"name": "driver-validation", "ready": False, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ],
        },
    }
    feed = FakeFeed(
        {
            "nodes": [{"items": [node("g1", 2), node("g2", 0)]}],
            "validator": [{"items": [validator(2, 1)]}],
            "pods": [{"items": [pod]}],
        }
    )
    result = run_module(monkeypatch, capsys, gpu_ready.main, feed, {"gpus_per_node": 2, "wait_timeout": 1})
    assert result["failed"] is True
    assert result["msg"] == (
        "Timed out after 1s waiting for GPU readiness (operator, allocatable): "
        "DaemonSet gpu-operator/nvidia-operator-validator: 1/2 pods ready; "
        "node g2: allocatable nvidia.com/gpu 0 < 2; "
        "pod nvidia-operator-validator-x1 on g2 (Pending; driver-validation: waiting CrashLoopBackOff)"
    )
    pods_spec = next(c[2] for c in feed.calls if c[1] == "pods")
    assert pods_spec.label_selector == "app=nvidia-operator-validator"
    assert result["error"]["validator_pods"][0]["containers"][0]["reason"] == "CrashLoopBackOff"


def test_dra_with_device_match_returns_inventory_and_class_devices(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    feed = FakeFeed({"nodes": [{"items": [node("a", 0), node("b", 0)]}],
                     "slices": [{"items": [l40s_slice("a", 4), l40s_slice("b", 4)]}]})  # fmt: skip
    match = {
        "name": "gpu",
        "driver": "gpu.nvidia.com",
        "deviceClassName": "gpu.nvidia.com",
        "count": 4,
        "attributes": {"architecture": {"string": "Ada Lovelace"}},
        "capacity": {"memory": {"value": "46068Mi"}},
    }
    result = run_module(
        monkeypatch, capsys, gpu_ready.main, feed, {"checks": ["dra"], "device_match": match, "wait_timeout": 2}
    )
    assert result["ready"] is True, result
    assert result["nodes"]["a"]["model"] == "NVIDIA L40S"
    assert result["nodes"]["a"]["memory"] == "46068Mi"
    assert result["inference_class_devices"][0]["count"] == 4
    assert result["inference_class_devices"][0]["capacity"] == {"memory": {"value": "46068Mi"}}
    slices_spec = next(c[2] for c in feed.calls if c[1] == "slices")
    assert (slices_spec.api_version, slices_spec.kind) == ("resource.k8s.io/v1", "ResourceSlice")


def test_check_mode_reports_only(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    feed = FakeFeed({"nodes": [{"items": [node("a", 0)]}], "validator": [{"items": []}]})
    result = run_module(monkeypatch, capsys, gpu_ready.main, feed, {"wait_timeout": 60, "_ansible_check_mode": True})
    assert result.get("failed") is not True
    assert result["ready"] is False
    assert "DaemonSet gpu-operator/nvidia-operator-validator not found" in result["problems"]
    assert feed.count("watch") == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"checks": ["dra"], "device_match": {"driver": "gpu.example.com"}},
            "device_match.driver: is 'gpu.example.com'",
        ),
        ({"checks": ["allocatable"], "device_match": {"count": 2}}, "device_match: only applies to the dra check"),
        ({"gpus_per_node": 0}, "gpus_per_node: must be 1 or more"),
        ({"checks": []}, "checks: name at least one of"),
        (
            {"checks": ["dra"], "device_match": {"capacity": {"memory": "80Gi"}}},
            "device_match.capacity.memory: must be",
        ),
    ],
)
def test_input_errors_before_any_request(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: dict[str, Any], message: str
) -> None:
    feed = FakeFeed({})
    result = run_module(monkeypatch, capsys, gpu_ready.main, feed, args)
    assert result["failed"] is True
    assert result["msg"].startswith(message)
    assert feed.calls == []


def pool_node(name: str, pool: str, gpus: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"modelplane.ai/pool": pool}},
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}}}  # fmt: skip


TWO_POOLS = [
    {"name": "l40s", "node_selector": "modelplane.ai/pool=l40s", "gpus_per_node": 1},
    {"name": "a16", "node_selector": {"modelplane.ai/pool": "a16"}, "gpus_per_node": 2},
]


def test_pools_are_judged_each_by_its_own_count_in_one_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    feed = FakeFeed(
        {
            "nodes:l40s": [{"items": [pool_node("l1", "l40s", 1)]}],
            "nodes:a16": [
                {
                    "items": [pool_node("a1", "a16", 1)],
                    "events": [0.05, {"type": "MODIFIED", "object": pool_node("a1", "a16", 2)}],
                }
            ],
            "validator": [{"items": [validator(2, 2)]}],
        }
    )
    result = run_module(monkeypatch, capsys, gpu_ready.main, feed, {"pools": TWO_POOLS, "wait_timeout": 3})
    assert result["ready"] is True, result
    assert result["pools"]["l40s"]["ready"] is True
    assert result["pools"]["a16"]["nodes"]["a1"]["allocatable"] == 2
    assert result["nodes"]["a1"]["pool"] == "a16"
    assert result["nodes"]["l1"]["pool"] == "l40s"
    assert set(result["checks"]) == {"operator"}  # once for the run, not per pool
    assert result["pools"]["a16"]["checks"]["allocatable"]["ready"] is True
    specs = {c[1]: c[2] for c in feed.calls if c[0] == "list"}
    assert specs["nodes:l40s"].label_selector == "modelplane.ai/pool=l40s"
    assert specs["nodes:a16"].label_selector == "modelplane.ai/pool=a16"
    assert "nodes" not in specs


def test_pools_timeout_names_the_pool_and_its_node(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    feed = FakeFeed(
        {
            "nodes:l40s": [{"items": [pool_node("l1", "l40s", 1)]}],
            "nodes:a16": [{"items": [pool_node("a1", "a16", 1)]}],
            "validator": [{"items": [validator(2, 2)]}],
        }
    )
    result = run_module(monkeypatch, capsys, gpu_ready.main, feed, {"pools": TWO_POOLS, "wait_timeout": 1})
    assert result["failed"] is True
    assert result["msg"] == (
        "Timed out after 1s waiting for GPU readiness (operator, allocatable): "
        "pool a16: node a1: allocatable nvidia.com/gpu 1 < 2"
    )
    assert result["error"]["pools"]["l40s"]["ready"] is True


def test_pools_dra_match_per_pool(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    feed = FakeFeed(
        {
            "nodes:big": [{"items": [pool_node("a", "big", 0)]}],
            "nodes:small": [{"items": [pool_node("b", "small", 0)]}],
            "slices": [{"items": [l40s_slice("a", 4), l40s_slice("b", 1)]}],
        }
    )
    pools = [
        {"name": "big", "node_selector": "modelplane.ai/pool=big", "device_match": {"count": 4}},
        {"name": "small", "node_selector": "modelplane.ai/pool=small", "device_match": {"count": 1}},
    ]
    result = run_module(
        monkeypatch, capsys, gpu_ready.main, feed, {"checks": ["dra"], "pools": pools, "wait_timeout": 2}
    )
    assert result["ready"] is True, result
    assert result["pools"]["big"]["inference_class_devices"][0]["count"] == 4
    assert result["pools"]["small"]["inference_class_devices"][0]["count"] == 1
    assert result["inference_class_devices"] == []
    assert result["pools"]["small"]["device_match"] == {"count": 1}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"pools": TWO_POOLS, "node_selector": "a=b"}, "node_selector: cannot be combined with pools"),
        ({"pools": [TWO_POOLS[0], TWO_POOLS[0]]}, "pools[1].name: 'l40s' is given twice"),
        ({"pools": [{**TWO_POOLS[0], "gpus_per_node": 0}]}, "pools[0].gpus_per_node: must be 1 or more"),
        ({"pools": [{**TWO_POOLS[0], "node_selector": "=a"}]}, "pools[0].node_selector:"),
        (
            {"checks": ["allocatable"], "pools": [{**TWO_POOLS[0], "device_match": {"count": 2}}]},
            "pools[0].device_match: only applies to the dra check",
        ),
        (
            {"checks": ["dra"], "pools": [{**TWO_POOLS[0], "device_match": {"driver": "gpu.example.com"}}]},
            "pools[0].device_match.driver: is 'gpu.example.com'",
        ),
    ],
)
def test_pools_input_errors_before_any_request(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: dict[str, Any], message: str
) -> None:
    feed = FakeFeed({})
    result = run_module(monkeypatch, capsys, gpu_ready.main, feed, args)
    assert result["failed"] is True
    assert result["msg"].startswith(message), result["msg"]
    assert feed.calls == []
