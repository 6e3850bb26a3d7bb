"""gpu_ready through ansible-playbook, on the emulator and on the real 1.20 lane.

The ``operator``/``allocatable`` tests get their GPU nodes and validator from the ``gpu`` fixture
(the emulator's simulators, or the real lane's fake kubelet and the real DaemonSet controller with
validator pods held not ready at an init container). The ``dra`` tests write nodes and NVIDIA
ResourceSlices through the API (``dra`` fixture; CRD stand-ins for resource.k8s.io on 1.20, whose
lack of ``fieldSelector=spec.driver`` exercises gpu_ready's client-side fallback). Faults (API down,
watches dropped) and request counts go through ``kube`` on both targets.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from dra_helpers import DRA_API, as_v1beta1, resource_slice
from kube_helpers import drop_until_relisted, list_requests, watch_requests, when_watching

NODES = "/api/v1/nodes"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
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
            "wait_timeout": 15, **options}  # fmt: skip
    return {"name": "gpu", "metalplane.inference.gpu_ready": args, "register": "out", "ignore_errors": True}


def test_operator_and_allocatable_ready_at_once(kube: Any, gpu: Any, playbook: Any) -> None:
    gpu.add_cpu_node("cpu-0")
    for name in ("g1", "g2"):
        gpu.add_gpu_node(name, gpus=2, gpu_product="L40S")
    gpu.install_validator(ready_after=0)
    result = playbook([task(kube, **gpu.args)]).task("gpu")
    assert result.get("failed") is not True, result
    assert result["ready"] is True
    assert sorted(result["nodes"]) == [gpu.node("g1"), gpu.node("g2")]
    g1 = result["nodes"][gpu.node("g1")]
    assert (g1["allocatable"], g1["count"], g1["model"], g1["memory"], g1["source"]) == (
        2, 2, "NVIDIA-L40S", "46068Mi", "labels",
    )  # fmt: skip
    assert result["checks"]["operator"]["ready_pods"] == result["checks"]["operator"]["desired"] == 2


def test_ready_after_a_delay_with_one_list_per_kind(kube: Any, gpu: Any, playbook: Any) -> None:
    gpu.add_gpu_node("g1", gpus=2, device_plugin=False)
    gpu.install_validator(ready_after=None)
    when_watching(kube, NODES, lambda: gpu.advertise("g1", 2))
    when_watching(kube, gpu.daemonsets, gpu.validator_ready, after=0.6)
    result = playbook([task(kube, **gpu.args, wait_timeout=kube.pick(30, 120))]).task("gpu")
    assert result.get("failed") is not True, result
    assert result["ready"] is True
    assert len(list_requests(kube, NODES)) == 1
    assert len(list_requests(kube, gpu.daemonsets)) == 1
    assert len(watch_requests(kube, gpu.daemonsets)) == 1


def test_never_ready_says_which_node_lacks_what_and_the_validator_container_states(
    kube: Any, gpu: Any, playbook: Any
) -> None:
    gpu.add_gpu_node("g1", gpus=2)
    g2 = gpu.add_gpu_node("g2", gpus=2, device_plugin=False)
    gpu.install_validator(ready_after=None, stuck_at="driver-validation", crash_loop=True)
    result = playbook([task(kube, **gpu.args, wait_timeout=2)]).task("gpu")
    assert result["failed"] is True
    msg = result["msg"]
    assert msg.startswith("Timed out after 2s waiting for GPU readiness (operator, allocatable): ")
    assert f"DaemonSet {gpu.namespace}/nvidia-operator-validator: 0/" in msg
    assert f"node {g2}: allocatable nvidia.com/gpu 0 < 2" in msg
    assert f"node {gpu.node('g1')}:" not in msg
    assert "driver-validation: waiting CrashLoopBackOff" in msg
    pods = result["error"]["validator_pods"]
    assert pods
    assert pods[0]["containers"][0]["name"] == "driver-validation"
    assert pods[0]["containers"][0]["restarts"] == 3
    assert pods[0]["phase"] == "Pending"
    assert result["error"]["nodes"][g2]["missing"] == ["allocatable nvidia.com/gpu 0 < 2"]


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
                    "wait_timeout": 5,
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
    result = playbook(
        [task(kube, checks=["dra"], device_match=hopper, node_selector=dra.selector, wait_timeout=1)]
    ).task("gpu")
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
    when_watching(kube, SLICES, lambda: dra.publish(g1, "L40S", 2, generation=2))
    result = playbook([task(kube, checks=["dra"], node_selector=dra.selector, wait_timeout=40)]).task("gpu")
    assert result.get("failed") is not True, result
    assert result["nodes"][g1]["count"] == 2  # only the newest generation counts
    # The request record: generation 2 was published only once the module was watching
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
        default = {**task(kube, checks=["dra"], node_selector=dra.selector, wait_timeout=1), "name": "v1"}
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


def test_dra_slices_published_after_a_dropped_watch(kube: Any, dra: Any, playbook: Any) -> None:
    g1 = dra.node("g1")
    dra.publish(g1, "L40S", 2)
    dra.retract(g1)  # the DeviceClass stays; the node has no slice when the module starts

    def drop_then_publish() -> None:
        drop_until_relisted(kube, SLICES)
        time.sleep(0.2)
        dra.publish(g1, "L40S", 2, generation=2)

    when_watching(kube, SLICES, drop_then_publish)
    result = playbook([task(kube, checks=["dra"], node_selector=dra.selector, wait_timeout=kube.pick(20, 60))]).task(
        "gpu"
    )
    assert result.get("failed") is not True, result
    assert result["nodes"][g1]["count"] == 2
    assert len(list_requests(kube, SLICES)) >= 2


def test_api_down_mid_wait(kube: Any, gpu: Any, playbook: Any) -> None:
    gpu.add_gpu_node("g1", gpus=2)
    gpu.install_validator(ready_after=None)

    def outage() -> None:
        kube.outage(1.5)  # real lane: kube-apiserver stopped 1.5 s, then started again
        gpu.validator_ready()

    when_watching(kube, gpu.daemonsets, outage)
    result = playbook([task(kube, **gpu.args, wait_timeout=kube.pick(30, 240))]).task("gpu")
    assert result.get("failed") is not True, result
    assert result["ready"] is True
    assert len(list_requests(kube, gpu.daemonsets)) >= 2
