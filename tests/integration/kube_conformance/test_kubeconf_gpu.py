"""GPU simulators (emulator only) and workload readiness, as gpu_ready/kube_ready will observe them.

The readiness tests at the bottom (DaemonSet desired = GPU nodes) also run on the real lane, where
real controllers and the fake kubelet make the workload ready.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubeconf_support import KubeTarget, eventually, sleep_briefly
from kubernetes import client

from lab.kube.api import HOLD_ANNOTATION
from lab.kube.server import KubeEmulator


def ds_status(emulator: KubeEmulator, name: str = "nvidia-operator-validator", ns: str = "gpu-operator") -> dict:
    return (emulator.get("apps/v1", "DaemonSet", name, ns) or {}).get("status") or {}


def history(emulator: KubeEmulator, namespace: str) -> list[Any]:
    """The emulator's logged writes (watch events) in ``namespace``, oldest first."""
    with emulator.store.lock:
        return [e for e in emulator.store.log if e.key[2] == namespace]


def validating(pod: dict[str, Any]) -> bool:
    """A validator pod written with its init containers still running (not Ready yet)."""
    status = pod.get("status") or {}
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    inits = status.get("initContainerStatuses") or []
    return bool(inits) and conditions.get("Ready") == "False" and not all(s["ready"] for s in inits)


@pytest.mark.emulator_only
@pytest.mark.parametrize(
    ("product", "memory", "architecture", "name"),
    [
        ("L40S", "46068Mi", "Ada Lovelace", "NVIDIA L40S"),
        ("Tesla-V100-PCIE-32GB", "32Gi", "Volta", "Tesla V100-PCIE-32GB"),
        ("H100", "81559Mi", "Hopper", "NVIDIA H100 80GB HBM3"),
    ],
)
def test_resource_slices_report_driver_capacity(
    private_emulator: KubeEmulator, product: str, memory: str, architecture: str, name: str
) -> None:
    private_emulator.gpu.add_gpu_node("dra-node", gpus=2, product=product, device_plugin=False)
    private_emulator.gpu.publish_resource_slices("dra-node", product=product, driver_version="580.126.20")
    target = KubeTarget("emulator", private_emulator.kubeconfig_path, private_emulator)
    slices = target.dynamic().resources.get(api_version="resource.k8s.io/v1", kind="ResourceSlice")
    found = slices.get(field_selector="spec.driver=gpu.nvidia.com,spec.nodeName=dra-node").to_dict()["items"]
    assert len(found) == 1
    devices = found[0]["spec"]["devices"]
    assert [d["name"] for d in devices] == ["gpu-0", "gpu-1"]
    attrs = devices[0]["attributes"]
    assert attrs["productName"] == {"string": name}
    assert attrs["architecture"] == {"string": architecture}
    assert attrs["driverVersion"] == {"version": "580.126.20"}
    assert "version" in attrs["cudaComputeCapability"]
    assert attrs["uuid"]["string"].startswith("GPU-")
    assert attrs["uuid"] != devices[1]["attributes"]["uuid"]
    assert devices[0]["capacity"]["memory"] == {"value": memory}
    assert found[0]["metadata"]["ownerReferences"][0]["kind"] == "Node"
    # A DRA-only node advertises no nvidia.com/gpu allocatable.
    assert "nvidia.com/gpu" not in private_emulator.get("v1", "Node", "dra-node")["status"]["allocatable"]
    device_class = private_emulator.get("resource.k8s.io/v1", "DeviceClass", "gpu.nvidia.com")
    assert "gpu.nvidia.com" in device_class["spec"]["selectors"][0]["cel"]["expression"]
    target.close()


@pytest.mark.emulator_only
def test_republishing_slices_replaces_the_old_ones(private_emulator: KubeEmulator) -> None:
    private_emulator.gpu.publish_resource_slices("gpu-node-0", product="V100", count=1)
    private_emulator.gpu.publish_resource_slices("gpu-node-0", product="V100", driver_version="580.200.1")
    slices = private_emulator.list("resource.k8s.io/v1", "ResourceSlice", field_selector="spec.nodeName=gpu-node-0")
    assert len(slices) == 1
    assert len(slices[0]["spec"]["devices"]) == 8  # the node's nvidia.com/gpu.count label
    assert slices[0]["spec"]["devices"][0]["attributes"]["driverVersion"] == {"version": "580.200.1"}


@pytest.mark.emulator_only
def test_invalid_resource_slice_is_422(private_emulator: KubeEmulator) -> None:
    from lab.kube.api import ApiError

    with pytest.raises(ApiError) as info:
        private_emulator.create(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": "bad"},
                "spec": {
                    "driver": "gpu.nvidia.com",
                    "nodeName": "x",
                    "pool": {"name": "x", "generation": "one", "resourceSliceCount": 1},
                },
            }
        )
    assert info.value.code == 422


@pytest.mark.emulator_only
def test_deleting_a_node_collects_its_slices(private_emulator: KubeEmulator) -> None:
    private_emulator.gpu.publish_resource_slices("gpu-node-1", product="V100", count=1)
    private_emulator.delete("v1", "Node", "gpu-node-1")
    eventually(
        lambda: (
            not private_emulator.list("resource.k8s.io/v1", "ResourceSlice", field_selector="spec.nodeName=gpu-node-1")
        )
    )


@pytest.mark.emulator_only
def test_allocatable_appears_after_a_delay() -> None:
    with KubeEmulator(delay_scale=0.1, name="alloc") as emulator:
        emulator.gpu.add_gpu_node("late", gpus=4, product="L40S", allocatable_after=3)  # 0.3 s scaled
        node = emulator.get("v1", "Node", "late")
        assert "nvidia.com/gpu" not in node["status"]["allocatable"]
        assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-L40S"
        got = eventually(lambda: emulator.get("v1", "Node", "late")["status"]["allocatable"].get("nvidia.com/gpu"))
        assert got == "4"


@pytest.mark.emulator_only
def test_operator_validator_becomes_ready_after_a_delay() -> None:
    with KubeEmulator(delay_scale=0.1, name="validator") as emulator:
        for node in ("g0", "g1"):
            emulator.gpu.add_gpu_node(node, gpus=2, product="V100")
        emulator.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cpu-only"}})
        emulator.gpu.install_operator_validator(ready_after=5)  # 0.5 s scaled
        pending = eventually(lambda: ds_status(emulator).get("desiredNumberScheduled") == 2 and ds_status(emulator))
        assert pending["numberReady"] == 0
        pods = eventually(
            lambda: len(emulator.list("v1", "Pod", "gpu-operator")) == 2 and emulator.list("v1", "Pod", "gpu-operator")
        )
        assert {p["spec"]["nodeName"] for p in pods} == {"g0", "g1"}
        ready = eventually(lambda: ds_status(emulator).get("numberReady") == 2 and ds_status(emulator), timeout=10)
        assert ready["desiredNumberScheduled"] == ready["numberAvailable"] == ready["updatedNumberScheduled"] == 2
        # The order of writes (the store's event log), not the clock: before the DaemonSet reported
        # ready, it was scheduled with 0 ready and both pods were written unready, mid-validation.
        events = history(emulator, "gpu-operator")
        ready_at = next(
            i for i, e in enumerate(events) if e.key[1] == "daemonsets" and e.obj["status"].get("numberReady") == 2
        )
        before = events[:ready_at]
        assert any(
            e.key[1] == "daemonsets"
            and (e.obj["status"]["desiredNumberScheduled"], e.obj["status"]["numberReady"]) == (2, 0)
            for e in before
        )
        unready = {e.obj["spec"]["nodeName"] for e in before if e.key[1] == "pods" and validating(e.obj)}
        assert unready == {"g0", "g1"}
        pods = eventually(
            lambda: (
                all(p["status"]["phase"] == "Running" for p in emulator.list("v1", "Pod", "gpu-operator"))
                and emulator.list("v1", "Pod", "gpu-operator")
            )
        )
        assert all(p["status"]["containerStatuses"][0]["ready"] for p in pods)


@pytest.mark.emulator_only
@pytest.mark.parametrize("crash_loop", [False, True])
def test_stuck_validator_explains_itself_in_container_states(private_emulator: KubeEmulator, crash_loop: bool) -> None:
    private_emulator.gpu.install_operator_validator(ready_after=None, stuck_at="cuda-validation", crash_loop=crash_loop)

    def observed() -> Any:
        pods = private_emulator.list("v1", "Pod", "gpu-operator")
        reported = [p for p in pods if p.get("status", {}).get("initContainerStatuses")]
        return reported if len(reported) == 2 else None

    pods = eventually(observed, what="validator pods with container states")
    init = {s["name"]: s["state"] for s in pods[0]["status"]["initContainerStatuses"]}
    assert "terminated" in init["driver-validation"]
    assert "terminated" in init["toolkit-validation"]
    stuck = init["cuda-validation"]
    if crash_loop:
        assert stuck["waiting"]["reason"] == "CrashLoopBackOff"
    else:
        assert "running" in stuck
    assert init["plugin-validation"] == {"waiting": {"reason": "PodInitializing"}}
    assert pods[0]["status"]["phase"] == "Pending"
    sleep_briefly()
    status = ds_status(private_emulator)
    assert (status["desiredNumberScheduled"], status["numberReady"]) == (2, 0)
    private_emulator.gpu.validator_ready()
    eventually(lambda: ds_status(private_emulator).get("numberReady") == 2)


@pytest.mark.emulator_only
def test_validator_follows_new_gpu_nodes_and_skips_tainted_ones(private_emulator: KubeEmulator) -> None:
    private_emulator.gpu.install_operator_validator(ready_after=0)
    eventually(lambda: ds_status(private_emulator).get("numberReady") == 2)
    private_emulator.gpu.add_gpu_node("gpu-node-2", gpus=4, product="V100")
    taint = [{"key": "dedicated", "value": "other", "effect": "NoSchedule"}]
    private_emulator.gpu.add_gpu_node("gpu-node-3", gpus=4, product="V100", taints=taint)
    status = eventually(
        lambda: ds_status(private_emulator).get("desiredNumberScheduled") == 3 and ds_status(private_emulator)
    )
    assert status["numberReady"] == 3
    eventually(lambda: len(private_emulator.list("v1", "Pod", "gpu-operator")) == 3)


@pytest.mark.emulator_only
def test_workload_controller_delay_and_hold_annotation() -> None:
    with KubeEmulator(delay_scale=0.2, name="workloads") as emulator:
        deploy = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "default"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"a": "d"}},
                "template": {
                    "metadata": {"labels": {"a": "d"}},
                    "spec": {"containers": [{"name": "c", "image": "x:1"}]},
                },
            },
        }
        emulator.create(deploy)
        assert not (emulator.get("apps/v1", "Deployment", "d", "default").get("status") or {}).get("readyReplicas")
        ready = eventually(
            lambda: (emulator.get("apps/v1", "Deployment", "d", "default").get("status") or {}).get("readyReplicas")
        )
        assert ready == 2
        emulator.patch(
            "apps/v1",
            "Deployment",
            "d",
            {"metadata": {"annotations": {HOLD_ANNOTATION: "true"}}, "spec": {"replicas": 3}},
            namespace="default",
        )

        def observed_generation_2() -> Any:
            status = emulator.get("apps/v1", "Deployment", "d", "default")["status"]
            return status if status.get("observedGeneration") == 2 else None

        status = eventually(observed_generation_2, what="the held rollout to be observed")
        assert status.get("readyReplicas", 0) == 0
        available = {c["type"]: c["status"] for c in status["conditions"]}["Available"]
        assert available == "False"


def test_gpu_daemonset_desired_matches_gpu_nodes(kube_target: KubeTarget, ns: str) -> None:
    """Real lane: real DaemonSet controller + fake kubelet; emulator: the workload controller."""
    apps = client.AppsV1Api(kube_target.api_client())
    apps.create_namespaced_daemon_set(
        ns,
        {
            "metadata": {"name": "plugin"},
            "spec": {
                "selector": {"matchLabels": {"app": "plugin"}},
                "template": {
                    "metadata": {"labels": {"app": "plugin"}},
                    "spec": {
                        "nodeSelector": {"nvidia.com/gpu.present": "true"},
                        "tolerations": [{"operator": "Exists"}],
                        "containers": [{"name": "c", "image": "busybox:1"}],
                    },
                },
            },
        },
    )

    def ready() -> Any:
        status = apps.read_namespaced_daemon_set("plugin", ns).status
        done = status.desired_number_scheduled and status.number_ready == status.desired_number_scheduled
        return status if done else None

    status = eventually(ready, timeout=60, what="GPU DaemonSet ready")
    nodes = client.CoreV1Api(kube_target.api_client()).list_node(label_selector="nvidia.com/gpu.present=true").items
    assert status.desired_number_scheduled == len(nodes) >= len(kube_target.gpu_nodes)


def test_allocatable_gpu_sum(kube_target: KubeTarget) -> None:
    nodes = client.CoreV1Api(kube_target.api_client()).list_node(label_selector="nvidia.com/gpu.present=true").items
    total = sum(int((n.status.allocatable or {}).get("nvidia.com/gpu", "0")) for n in nodes)
    assert total >= 8 * len(kube_target.gpu_nodes)


@pytest.mark.emulator_only
def test_hold_and_release_keep_a_workload_unready(private_emulator: KubeEmulator) -> None:
    private_emulator.hold("DaemonSet", "held", "default")
    private_emulator.create(
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "held", "namespace": "default"},
            "spec": {
                "selector": {"matchLabels": {"a": "h"}},
                "template": {
                    "metadata": {"labels": {"a": "h"}},
                    "spec": {"containers": [{"name": "c", "image": "x:1"}]},
                },
            },
        }
    )
    held = eventually(
        lambda: (
            ds_status(private_emulator, "held", "default").get("observedGeneration") == 1
            and ds_status(private_emulator, "held", "default")
        )
    )
    sleep_briefly()
    assert (held["desiredNumberScheduled"], held["numberReady"]) == (2, 0)
    assert ds_status(private_emulator, "held", "default")["numberReady"] == 0
    private_emulator.release("DaemonSet", "held", "default")
    eventually(lambda: ds_status(private_emulator, "held", "default").get("numberReady") == 2)
