"""gpu_ready through ansible-playbook.

The ``dra`` tests write nodes and NVIDIA ResourceSlices through the API (``dra`` fixture) and run on
the emulator and on the real 1.20 lane (CRD stand-ins for resource.k8s.io there, whose lack of
``fieldSelector=spec.driver`` exercises gpu_ready's client-side fallback). Tests that need the
emulator's GPU simulators, its request log or fault injection are ``emulator_only``.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from dra_helpers import DRA_API, as_v1beta1, resource_slice
from kube_helpers import list_requests, watch_requests, when_watching

DAEMONSETS = "/apis/apps/v1/namespaces/gpu-operator/daemonsets"
NODES = "/api/v1/nodes"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
POOL = {"modelplane.ai/pool": "gpu"}
L40S_CLASS = {
    "name": "gpu",
    "claim": "DRA",
    "driver": "gpu.nvidia.com",
    "deviceClassName": "gpu.nvidia.com",
    "count": 2,
    "attributes": {"architecture": {"string": "Ada Lovelace"}, "cudaComputeCapability": {"version": "8.9"}},
    "capacity": {"memory": {"value": "46068Mi"}},
}


def task(kube: Any, **options: Any) -> dict[str, Any]:
    args = {"kubeconfig": kube.kubeconfig, "node_selector": "modelplane.ai/pool=gpu", "gpus_per_node": 2,
            "timeout": 15, **options}  # fmt: skip
    return {"name": "gpu", "metalplane.inference.gpu_ready": args, "register": "out", "ignore_errors": True}


def cpu_node(kube: Any) -> None:
    """A node outside the GPU pool: the selector must keep it out of every check."""
    kube.emulator.create(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cpu-0", "labels": {"role": "system"}}}
    )


@pytest.mark.emulator_only
def test_operator_and_allocatable_ready_at_once(kube: Any, playbook: Any) -> None:
    cpu_node(kube)
    for name in ("g1", "g2"):
        kube.emulator.gpu.add_gpu_node(name, gpus=2, product="L40S", labels=POOL)
    kube.emulator.gpu.install_operator_validator(ready_after=0)
    result = playbook([task(kube)]).task("gpu")
    assert result.get("failed") is not True, result
    assert result["ready"] is True
    assert sorted(result["nodes"]) == ["g1", "g2"]
    g1 = result["nodes"]["g1"]
    assert (g1["allocatable"], g1["count"], g1["model"], g1["memory"], g1["source"]) == (
        2, 2, "NVIDIA-L40S", "46068Mi", "labels",
    )  # fmt: skip
    assert result["checks"]["operator"]["ready_pods"] == result["checks"]["operator"]["desired"] > 0


@pytest.mark.emulator_only
def test_ready_after_a_delay_with_one_list_per_kind(kube: Any, playbook: Any) -> None:
    kube.emulator.gpu.add_gpu_node("g1", gpus=2, labels=POOL, device_plugin=False)
    kube.emulator.gpu.install_operator_validator(ready_after=None)
    gpus = {"capacity": {"nvidia.com/gpu": "2"}, "allocatable": {"nvidia.com/gpu": "2", "cpu": "32"}}
    when_watching(kube, NODES, lambda: kube.emulator.set_status("v1", "Node", "g1", gpus))
    when_watching(kube, DAEMONSETS, kube.emulator.gpu.validator_ready, after=0.6)
    result = playbook([task(kube, timeout=30)]).task("gpu")
    assert result.get("failed") is not True, result
    assert result["ready"] is True
    assert len(list_requests(kube, NODES)) == 1
    assert len(list_requests(kube, DAEMONSETS)) == 1
    assert len(watch_requests(kube, DAEMONSETS)) == 1


@pytest.mark.emulator_only
def test_never_ready_says_which_node_lacks_what_and_the_validator_container_states(kube: Any, playbook: Any) -> None:
    kube.emulator.gpu.add_gpu_node("g1", gpus=2, labels=POOL)
    kube.emulator.gpu.add_gpu_node("g2", gpus=2, labels=POOL, device_plugin=False)
    kube.emulator.gpu.install_operator_validator(ready_after=None, stuck_at="driver-validation", crash_loop=True)
    result = playbook([task(kube, timeout=2)]).task("gpu")
    assert result["failed"] is True
    msg = result["msg"]
    assert msg.startswith("Timed out after 2s waiting for GPU readiness (operator, allocatable): ")
    assert "DaemonSet gpu-operator/nvidia-operator-validator: 0/" in msg
    assert "node g2: allocatable nvidia.com/gpu 0 < 2" in msg
    assert "node g1:" not in msg
    assert "driver-validation: waiting CrashLoopBackOff" in msg
    pods = result["error"]["validator_pods"]
    assert pods
    assert pods[0]["containers"][0]["name"] == "driver-validation"
    assert result["error"]["nodes"]["g2"]["missing"] == ["allocatable nvidia.com/gpu 0 < 2"]


def test_dra_matches_the_inference_class_and_generates_one(kube: Any, dra: Any, playbook: Any) -> None:
    g1, g2 = dra.node("g1"), dra.node("g2")
    for name in (g1, g2):
        dra.publish(name, "L40S", 2)
    # Another DRA driver's slice on g1: never counted (filtered by the server or, on servers
    # without the spec.driver field selector, by gpu_ready itself).
    dra.publish(g1, "H100", 8, driver="gpu.example.com")
    run = playbook(
        [
            task(kube, checks=["dra"], device_match=L40S_CLASS, node_selector=dra.selector),
            # Round trip: the generated devices entry is itself a device_match the cluster satisfies.
            {
                "name": "again",
                "metalplane.inference.gpu_ready": {
                    "kubeconfig": kube.kubeconfig,
                    "checks": ["dra"],
                    "node_selector": dra.pool,
                    "device_match": "{{ out.inference_class_devices[0] }}",
                    "timeout": 5,
                },
                "register": "again",
                "ignore_errors": True,
            },
        ]
    )
    result = run.task("gpu")
    assert result.get("failed") is not True, result
    assert sorted(result["nodes"]) == [g1, g2]
    node = result["nodes"][g1]
    assert (node["source"], node["model"], node["count"], node["memory"]) == ("dra", "NVIDIA L40S", 2, "46068Mi")
    assert node["devices"] == ["gpu-0", "gpu-1"]
    assert node["driver_version"] == "580.126.20"
    assert node["allocatable"] == 0  # DRA does not fill allocatable
    assert result["inference_class_devices"] == [
        {
            "name": "gpu",
            "claim": "DRA",
            "driver": "gpu.nvidia.com",
            "deviceClassName": "gpu.nvidia.com",
            "count": 2,
            "attributes": {
                "productName": {"string": "NVIDIA L40S"},
                "architecture": {"string": "Ada Lovelace"},
                "cudaComputeCapability": {"version": "8.9.0"},
            },
            "capacity": {"memory": {"value": "46068Mi"}},
        }
    ]
    again = run.task("again")
    assert again.get("failed") is not True, again
    assert again["ready"] is True


def test_dra_mismatch_and_missing_slices_are_named_per_node(kube: Any, dra: Any, playbook: Any) -> None:
    g1, g2 = dra.node("g1"), dra.node("g2")
    dra.publish(g1, "L40S", 2)
    dra.publish(g2, "H100", 2, driver="gpu.example.com")  # not the NVIDIA driver: g2 has no GPU slice
    hopper = {
        **L40S_CLASS,
        "attributes": {"architecture": {"string": "Hopper"}},
        "capacity": {"memory": {"value": "81559Mi"}},
    }
    result = playbook([task(kube, checks=["dra"], device_match=hopper, node_selector=dra.selector, timeout=1)]).task(
        "gpu"
    )
    assert result["failed"] is True
    assert (
        f"node {g1}: 0 of 2 expected gpu.nvidia.com devices match device_match "
        "(gpu-0: attribute architecture is 'Ada Lovelace', wants 'Hopper'; capacity memory is 46068Mi, below 81559Mi)"
    ) in result["msg"]
    assert f"node {g2}: no ResourceSlice device of driver gpu.nvidia.com" in result["msg"]
    assert result["error"]["nodes"][g1]["device_mismatches"]["gpu-1"] == [
        "attribute architecture is 'Ada Lovelace', wants 'Hopper'",
        "capacity memory is 46068Mi, below 81559Mi",
    ]


def test_dra_slices_published_while_waiting(kube: Any, dra: Any, playbook: Any) -> None:
    g1 = dra.node("g1")
    dra.publish(g1, "L40S", 1)  # one GPU of two so far
    # The driver publishes a new pool generation (the old slice stays until it is cleaned up).
    when_watching(kube, SLICES, lambda: dra.publish(g1, "L40S", 2, generation=2), fallback=8.0)
    result = playbook([task(kube, checks=["dra"], node_selector=dra.selector, timeout=40)]).task("gpu")
    assert result.get("failed") is not True, result
    assert result["nodes"][g1]["count"] == 2  # only the newest generation counts
    if not kube.real:
        # The emulator's request log: generation 2 was published only once the module was watching
        # (when_watching), and the module listed slices once, so it saw generation 2 through the watch.
        assert len(list_requests(kube, SLICES)) == 1
        assert len(watch_requests(kube, SLICES)) >= 1


def test_dra_api_version_selects_the_resource_slice_api(kube: Any, dra: Any, playbook: Any) -> None:
    """Before Kubernetes 1.34 ResourceSlice is served only as ``resource.k8s.io/v1beta1`` (1.32) or
    ``v1beta2`` (1.33): ``dra_api_version`` points gpu_ready there. A CRD in a private group stands in
    for ``v1beta1``, with its devices nested under ``basic``, on both targets."""
    from pathlib import Path

    from integration.kube_conformance.kubeconf_support import KubeTarget as ConformanceTarget
    from integration.kube_conformance.kubeconf_support import dra_stand_in_crds, install_dra_stand_ins

    group = f"{dra.prefix}.beta.example.com"
    api = f"{group}/v1beta1"
    target = ConformanceTarget("real" if kube.real else "emulator", Path(kube.kubeconfig), kube.emulator)
    try:
        assert install_dra_stand_ins(target, group=group, version="v1beta1") is True
        if kube.real:
            kube.dynamic.resources.invalidate_cache()
        g1 = dra.node("g1")
        kube.apply(as_v1beta1(resource_slice(g1, "L40S", 2), api))
        selected = task(kube, checks=["dra"], node_selector=dra.selector, dra_api_version=api)
        default = {**task(kube, checks=["dra"], node_selector=dra.selector, timeout=1), "name": "v1"}
        run = playbook([selected, {**default, "register": "v1"}])
    finally:
        for crd in dra_stand_in_crds(group, "v1beta1"):
            target.raw("DELETE", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}")
        target.close()
    result = run.task("gpu")
    assert result.get("failed") is not True, result
    node = result["nodes"][g1]
    assert (node["source"], node["model"], node["count"], node["memory"]) == ("dra", "NVIDIA L40S", 2, "46068Mi")
    # The default API version (resource.k8s.io/v1) has no slice for this node: the option is what found them.
    v1 = run.task("v1")
    assert v1["failed"] is True
    assert f"node {g1}: no ResourceSlice device of driver gpu.nvidia.com" in v1["msg"]


def test_dra_field_selector_support_on_this_target(kube: Any, dra: Any) -> None:
    """The premise of gpu_ready's fallback: servers < 1.30 (CRD stand-ins) reject
    ``fieldSelector=spec.driver`` with 400, the built-in resource.k8s.io (emulator) applies it."""
    g1 = dra.node("g1")
    dra.publish(g1, "L40S", 1)
    dra.publish(g1, "L40S", 1, driver="gpu.example.com")
    selector = "spec.driver=gpu.nvidia.com"
    if kube.real:
        from kubernetes.dynamic.exceptions import BadRequestError

        with pytest.raises(BadRequestError) as raised:
            kube.dynamic.request("GET", SLICES, field_selector=selector)
        assert "field label not supported" in str(raised.value)
    else:
        items = kube.emulator.list(DRA_API, "ResourceSlice", field_selector=selector)
        assert {i["spec"]["driver"] for i in items} == {"gpu.nvidia.com"}


@pytest.mark.emulator_only
def test_dra_slices_published_after_a_dropped_watch(kube: Any, playbook: Any) -> None:
    kube.emulator.gpu.add_gpu_node("g1", gpus=2, product="L40S", labels=POOL, device_plugin=False)
    kube.emulator.gpu.publish_resource_slices("g1", product="L40S", count=2)  # also creates the DeviceClass
    kube.emulator.delete(
        "resource.k8s.io/v1",
        "ResourceSlice",
        kube.emulator.list("resource.k8s.io/v1", "ResourceSlice")[0]["metadata"]["name"],
    )

    def drop_then_publish() -> None:
        kube.emulator.drop_watches()
        time.sleep(0.2)
        kube.emulator.gpu.publish_resource_slices("g1", product="L40S", count=2)

    when_watching(kube, SLICES, drop_then_publish)
    result = playbook([task(kube, checks=["dra"], timeout=20)]).task("gpu")
    assert result.get("failed") is not True, result
    assert result["nodes"]["g1"]["count"] == 2
    assert len(list_requests(kube, SLICES)) >= 2


@pytest.mark.emulator_only
def test_api_down_mid_wait(kube: Any, playbook: Any) -> None:
    kube.emulator.gpu.add_gpu_node("g1", gpus=2, labels=POOL)
    kube.emulator.gpu.install_operator_validator(ready_after=None)

    def outage() -> None:
        kube.emulator.make_unavailable(1.5)
        time.sleep(0.3)
        kube.emulator.gpu.validator_ready()

    when_watching(kube, DAEMONSETS, outage)
    result = playbook([task(kube, timeout=30)]).task("gpu")
    assert result.get("failed") is not True, result
    assert result["ready"] is True
    assert len(list_requests(kube, DAEMONSETS)) >= 2
