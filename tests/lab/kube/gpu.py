"""GPU simulators on top of the Kubernetes emulator: GPU nodes, the GPU Operator validator, NVIDIA DRA.

Why: ``gpu_ready`` reads three signals that only a GPU cluster produces: node allocatable
``nvidia.com/gpu`` (device plugin), the ``nvidia-operator-validator`` DaemonSet in ``gpu-operator``
(GPU Operator), and ResourceSlices of driver ``gpu.nvidia.com`` (DRA). These simulators publish them
the way the real components do (label names, attribute names and capacity values as the NVIDIA
driver reports them: V100 ``32Gi``, L40S ``46068Mi``, H100 80GB ``81559Mi``), with delays scaled by
``delay_scale``, so readiness code can be tested for "ready at once", "ready later" and "never".
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lab.kube.api import ApiError
from lab.kube.discovery import ResourceType

if TYPE_CHECKING:
    from lab.kube.server import KubeEmulator

Obj = dict[str, Any]
DRA_DRIVER = "gpu.nvidia.com"
DEFAULT_DRIVER_VERSION = "580.126.20"
VALIDATOR_NAME = "nvidia-operator-validator"
VALIDATOR_INIT_CONTAINERS = ("driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation")


@dataclass(frozen=True)
class GpuProduct:
    """One GPU model: what GPU Feature Discovery labels a node with and what the DRA driver publishes.

    The one table both simulators read (``add_gpu_node``'s labels, ``resource_slice``'s attributes,
    and the VKE twin's plans), so a node's labels and its ResourceSlice can never disagree.
    """

    label: str  # nvidia.com/gpu.product (GFD: NVML name, spaces as dashes)
    product_name: str  # DRA productName attribute (NVML name)
    architecture: str  # DRA architecture attribute (go-nvlib name)
    compute_capability: str  # DRA cudaComputeCapability; GFD's compute.major/.minor labels
    memory: str  # DRA capacity "memory" as the driver reports it (NVML total, BinarySI)
    memory_mib: int  # nvidia.com/gpu.memory label
    family: str  # nvidia.com/gpu.family label (current GFD: from the compute capability)
    nominal_gb: int  # the memory the model is sold with (sizes Vultr vcg-* plans: lab.vultr.twin)

    def gfd_labels(self, count: int) -> dict[str, str]:
        """The GPU Feature Discovery labels of a node with ``count`` of these GPUs (sharing disabled)."""
        major, minor = self.compute_capability.split(".")[:2]
        driver = DEFAULT_DRIVER_VERSION.split(".")
        return {
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": self.label,
            "nvidia.com/gpu.count": str(count),
            "nvidia.com/gpu.memory": str(self.memory_mib),
            "nvidia.com/gpu.family": self.family,
            "nvidia.com/gpu.compute.major": major,
            "nvidia.com/gpu.compute.minor": minor,
            "nvidia.com/gpu.replicas": "1",
            "nvidia.com/cuda.driver.major": driver[0],
            "nvidia.com/cuda.driver.minor": driver[1],
            "nvidia.com/cuda.driver.rev": driver[2],
        }


PRODUCTS: dict[str, GpuProduct] = {
    "Tesla-V100-PCIE-32GB": GpuProduct(
        "Tesla-V100-PCIE-32GB", "Tesla V100-PCIE-32GB", "Volta", "7.0.0", "32Gi", 32768, "volta", 32
    ),
    # The lab's iDRAC8 R730 (lab.redfish.bmc GPU_MODEL). [unverified] memory: NVML's total on a 16 GB V100.
    "Tesla-V100-PCIE-16GB": GpuProduct(
        "Tesla-V100-PCIE-16GB", "Tesla V100-PCIE-16GB", "Volta", "7.0.0", "16Gi", 16384, "volta", 16
    ),
    "NVIDIA-L40S": GpuProduct(
        "NVIDIA-L40S", "NVIDIA L40S", "Ada Lovelace", "8.9.0", "46068Mi", 46068, "ada-lovelace", 48
    ),
    "NVIDIA-H100-80GB-HBM3": GpuProduct(
        "NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3", "Hopper", "9.0.0", "81559Mi", 81559, "hopper", 80
    ),
    # Vultr VKE GPU plans (lab.vultr.twin). [unverified] memory figures: what nvidia-smi commonly shows.
    "NVIDIA-A16": GpuProduct("NVIDIA-A16", "NVIDIA A16", "Ampere", "8.6.0", "15356Mi", 15356, "ampere", 16),
    "NVIDIA-A40": GpuProduct("NVIDIA-A40", "NVIDIA A40", "Ampere", "8.6.0", "46068Mi", 46068, "ampere", 48),
    "NVIDIA-A100-80GB-PCIe": GpuProduct(
        "NVIDIA-A100-80GB-PCIe", "NVIDIA A100 80GB PCIe", "Ampere", "8.0.0", "81920Mi", 81920, "ampere", 80
    ),
    "NVIDIA-B200": GpuProduct(
        "NVIDIA-B200", "NVIDIA B200", "Blackwell", "10.0.0", "183359Mi", 183359, "blackwell", 192
    ),
}
ALIASES = {
    "V100": "Tesla-V100-PCIE-32GB",
    "L40S": "NVIDIA-L40S",
    "H100": "NVIDIA-H100-80GB-HBM3",
    "A16": "NVIDIA-A16",
    "A40": "NVIDIA-A40",
    "A100": "NVIDIA-A100-80GB-PCIe",
    "B200": "NVIDIA-B200",
}


def product(name: str) -> GpuProduct:
    key = ALIASES.get(name, name)
    for entry in PRODUCTS.values():
        if key in (entry.label, entry.product_name):
            return entry
    raise ValueError(f"unknown GPU product {name!r}; known: {sorted(PRODUCTS)} or {sorted(ALIASES)}")


def device_class() -> Obj:
    """The DeviceClass ``gpu.nvidia.com`` the NVIDIA DRA driver's chart installs."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": DRA_DRIVER},
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": f"device.driver == '{DRA_DRIVER}' && "
                        f"device.attributes['{DRA_DRIVER}'].type == 'gpu'"
                    }
                }
            ],
            "extendedResourceName": "nvidia.com/gpu",
        },
    }


def resource_slice(
    node: str,
    node_uid: str | None,
    product_name: str,
    count: int,
    memory: str | None = None,
    *,
    driver_version: str = DEFAULT_DRIVER_VERSION,
    pool_generation: int = 1,
) -> Obj:
    """One ``resource.k8s.io/v1`` ResourceSlice of driver ``gpu.nvidia.com`` for ``node`` (owned by the
    Node when ``node_uid`` is known), as the NVIDIA DRA kubelet plugin publishes it."""
    info = product(product_name)
    devices = []
    for index in range(count):
        gpu_uuid = "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_OID, f"{node}/{index}"))
        devices.append(
            {
                "name": f"gpu-{index}",
                "attributes": {
                    "type": {"string": "gpu"},
                    "uuid": {"string": gpu_uuid},
                    "productName": {"string": info.product_name},
                    "brand": {"string": "Tesla" if info.architecture == "Volta" else "Nvidia"},
                    "architecture": {"string": info.architecture},
                    "cudaComputeCapability": {"version": info.compute_capability},
                    "driverVersion": {"version": driver_version},
                    "cudaDriverVersion": {"version": "13.0.0"},
                    "resource.kubernetes.io/pciBusID": {"string": f"0000:{index + 4:02x}:00.0"},
                    "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
                },
                "capacity": {"memory": {"value": memory or info.memory}},
            }
        )
    metadata: Obj = {"generateName": f"{node}-{DRA_DRIVER}-"}
    if node_uid is not None:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}
        ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": metadata,
        "spec": {
            "driver": DRA_DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": pool_generation, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


# The label Node Feature Discovery puts on a node with an NVIDIA PCI device (vendor 10de) when labelled by vendor, as
# the NVIDIA DRA driver's chart selects its kubelet plugin's nodes (k8s-dra-driver-gpu, deployments/helm values.yaml:
# kubeletPlugin.affinity). A bare-metal node has no GPU Operator, so no GFD labels: Modelplane installs NFD.
NFD_NVIDIA_LABEL = "feature.node.kubernetes.io/pci-10de.present"
# What NVML reports on a lab node (JSON list of {"name", "memory_mib"}), written by the simulated bare-metal host
# (lab.metal) once its driver is loaded: where the real DRA kubelet plugin asks NVML, the lab reads this annotation.
NVML_ANNOTATION = "lab.metalplane.io/nvml-gpus"


def dra_devices(node: Obj) -> tuple[str, int, str | None] | None:
    """(productName, count, memory) the DRA driver would publish for ``node``, or None for a node without GPUs.

    A node with NVML's report (a bare-metal node with its driver) publishes exactly that; a node labelled by GPU
    Feature Discovery publishes its labels' product and count (and, for a fractional plan, its memory label).
    """
    meta = node.get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    if labels.get(NFD_NVIDIA_LABEL) == "true" and annotations.get(NVML_ANNOTATION):
        gpus = json.loads(annotations[NVML_ANNOTATION])
        if not gpus:
            return None
        return str(gpus[0]["name"]), len(gpus), memory_quantity(int(gpus[0]["memory_mib"]))
    if labels.get("nvidia.com/gpu.present") != "true":
        return None
    memory = f"{labels['nvidia.com/gpu.memory']}Mi" if "lab.metalplane.io/gpu-fraction" in labels else None
    return labels.get("nvidia.com/gpu.product", "NVIDIA-L40S"), int(labels.get("nvidia.com/gpu.count", "1")), memory


def memory_quantity(mib: int) -> str:
    """NVML's total as the DRA driver writes it (bytes, BinarySI): whole GiB as Gi, else Mi."""
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def validator_daemonset(namespace: str = "gpu-operator", name: str = VALIDATOR_NAME) -> Obj:
    """The GPU Operator's ``nvidia-operator-validator`` DaemonSet: one pod per GPU node whose init
    containers validate driver, toolkit, CUDA and plugin before the main container starts (what the
    emulator installs, and what the real lane's tests apply for its fake kubelet to hold or run)."""
    labels = {"app": VALIDATOR_NAME, "app.kubernetes.io/part-of": "gpu-operator"}
    init = [
        {
            "name": c,
            "image": "nvcr.io/nvidia/gpu-operator:v26.7.0",
            "command": ["sh", "-c"],
            "args": [f"nvidia-validator --component {c.split('-', maxsplit=1)[0]}"],
        }
        for c in VALIDATOR_INIT_CONTAINERS
    ]
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"app": VALIDATOR_NAME}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.present": "true"},
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "serviceAccountName": "nvidia-operator-validator",
                    "initContainers": init,
                    "containers": [
                        {
                            "name": VALIDATOR_NAME,
                            "image": "nvcr.io/nvidia/gpu-operator:v26.7.0",
                            "command": ["sh", "-c"],
                            "args": ["echo all validations are successful; sleep infinity"],
                        }
                    ],
                },
            },
        },
    }


class GpuSimulator:
    """``api.gpu``: seeds GPU nodes, the operator validator and DRA ResourceSlices."""

    def __init__(self, emulator: KubeEmulator) -> None:
        self.emulator = emulator
        self.validators: dict[tuple[str, str], Obj] = {}  # (namespace, name) -> settings
        emulator.server_api.on_write.append(self._on_write)

    def _scaled(self, seconds: float) -> float:
        return seconds * self.emulator.delay_scale

    def _on_write(self, rtype: ResourceType, event: str, obj: Obj, old: Obj | None) -> None:
        if rtype.kind == "Node" and self.validators:
            self.emulator.scheduler.schedule(0, self.sync_validator_pods)

    # --- nodes ----------------------------------------------------------------------------------

    def add_gpu_node(
        self,
        name: str,
        gpus: int = 8,
        product: str = "NVIDIA-L40S",
        *,
        labels: dict[str, str] | None = None,
        taints: list[Obj] | None = None,
        allocatable_after: float = 0.0,
        ready: bool = True,
        device_plugin: bool = True,
    ) -> Obj:
        """A Ready node with GPU labels; ``nvidia.com/gpu`` appears in capacity/allocatable after
        ``allocatable_after`` seconds (scaled), or never without ``device_plugin`` (a DRA-only node)."""
        info = globals()["product"](product)
        node_labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            **info.gfd_labels(gpus),
            **(labels or {}),
        }
        resources = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "500Gi"}
        with_gpu = {**resources, "nvidia.com/gpu": str(gpus)}
        immediate = device_plugin and allocatable_after <= 0
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": node_labels},
            "spec": {"taints": taints} if taints else {},
            "status": {
                "capacity": with_gpu if immediate else resources,
                "allocatable": with_gpu if immediate else resources,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True" if ready else "False",
                        "reason": "KubeletReady" if ready else "KubeletNotReady",
                        "message": "kubelet is posting ready status",
                        "lastHeartbeatTime": stamp,
                        "lastTransitionTime": stamp,
                    }
                ],
                "addresses": [{"type": "InternalIP", "address": "10.0.0.10"}, {"type": "Hostname", "address": name}],
                "nodeInfo": {
                    "machineID": uuid.uuid5(uuid.NAMESPACE_DNS, name).hex,
                    "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
                    "bootID": uuid.uuid4().hex,
                    "kernelVersion": "6.8.0-lab",
                    "osImage": "Ubuntu 24.04 LTS",
                    "containerRuntimeVersion": "containerd://1.7.0",
                    "kubeletVersion": "v1.34.0",
                    "kubeProxyVersion": "v1.34.0",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                },
            },
        }
        created = self.emulator.create(node)
        if device_plugin and allocatable_after > 0:

            def advertise() -> None:
                self.emulator.set_status("v1", "Node", name, {"capacity": with_gpu, "allocatable": with_gpu})

            self.emulator.scheduler.schedule(self._scaled(allocatable_after), advertise)
        return created

    # --- GPU Operator validator -----------------------------------------------------------------

    def install_operator_validator(
        self,
        ready_after: float | None = 0.0,
        namespace: str = "gpu-operator",
        name: str = VALIDATOR_NAME,
        stuck_at: str = "plugin-validation",
        crash_loop: bool = False,
    ) -> Obj:
        """The GPU Operator's validator DaemonSet (one pod per GPU node), ready after ``ready_after``
        seconds (scaled); ``None`` keeps it unready (init container ``stuck_at`` never finishes) until
        ``validator_ready()``."""
        if stuck_at not in VALIDATOR_INIT_CONTAINERS:
            raise ValueError(f"stuck_at must be one of {VALIDATOR_INIT_CONTAINERS}")
        if self.emulator.get("v1", "Namespace", namespace) is None:
            self.emulator.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        daemonset = validator_daemonset(namespace, name)
        until = float("inf") if ready_after is None else time.monotonic() + self._scaled(ready_after)
        self.emulator.controllers.holds[("daemonsets", namespace, name)] = until
        self.validators[(namespace, name)] = {"stuck_at": stuck_at, "crash_loop": crash_loop}
        created = self.emulator.create(daemonset)
        self.emulator.scheduler.schedule(0, self.sync_validator_pods)
        if ready_after is not None:
            self.emulator.scheduler.schedule(
                self._scaled(ready_after) + 0.01, lambda: self.validator_ready(namespace, name)
            )
        return created

    def validator_ready(self, namespace: str = "gpu-operator", name: str = VALIDATOR_NAME) -> None:
        """Finish validation now: pods Running and Ready, DaemonSet numberReady == desired."""
        self.emulator.controllers.holds.pop(("daemonsets", namespace, name), None)
        self.emulator.controllers.reconcile_workload("daemonsets", namespace, name)
        self.sync_validator_pods()

    def sync_validator_pods(self) -> None:
        for (namespace, name), settings in list(self.validators.items()):
            ds = self.emulator.store.get(("apps", "daemonsets", namespace, name))
            if ds is None:
                continue
            ready = not self.emulator.controllers.held("daemonsets", namespace, name, ds)
            nodes = self.emulator.controllers.eligible_nodes(ds)
            wanted = {n["metadata"]["name"] for n in nodes}
            existing = {
                p["spec"].get("nodeName"): p
                for p in self.emulator.list("v1", "Pod", namespace, label_selector=f"app={VALIDATOR_NAME}")
                if any(r.get("uid") == ds["metadata"]["uid"] for r in p["metadata"].get("ownerReferences") or [])
            }
            for node_name, pod in existing.items():
                if node_name not in wanted:
                    self.emulator.delete("v1", "Pod", pod["metadata"]["name"], namespace)
            for node_name in sorted(wanted):
                pod = existing.get(node_name)
                if pod is None:
                    pod = self.emulator.create(self._validator_pod(ds, node_name))
                status = self._pod_status(ds, ready, settings)
                if pod.get("status", {}).get("phase") != status["phase"] or not pod["status"].get("containerStatuses"):
                    self.emulator.set_status(
                        "v1", "Pod", pod["metadata"]["name"], status, namespace=namespace, replace=True
                    )

    @staticmethod
    def _validator_pod(ds: Obj, node_name: str) -> Obj:
        template = ds["spec"]["template"]
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": f"{ds['metadata']['name']}-",
                "namespace": ds["metadata"]["namespace"],
                "labels": dict(template["metadata"].get("labels") or {}),
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "DaemonSet",
                        "name": ds["metadata"]["name"],
                        "uid": ds["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {**template["spec"], "nodeName": node_name},
        }

    @staticmethod
    def _pod_status(ds: Obj, ready: bool, settings: Obj) -> Obj:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        image = "nvcr.io/nvidia/gpu-operator:v26.7.0"
        done = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": stamp, "finishedAt": stamp}}
        init_statuses, stuck_index = [], VALIDATOR_INIT_CONTAINERS.index(settings["stuck_at"])
        for index, container in enumerate(VALIDATOR_INIT_CONTAINERS):
            if ready or index < stuck_index:
                state, is_ready = done, True
            elif index == stuck_index:
                state = (
                    {
                        "waiting": {
                            "reason": "CrashLoopBackOff",
                            "message": f"back-off 5m0s restarting failed container={container}",
                        }
                    }
                    if settings["crash_loop"]
                    else {"running": {"startedAt": stamp}}
                )
                is_ready = False
            else:
                state, is_ready = {"waiting": {"reason": "PodInitializing"}}, False
            init_statuses.append(
                {
                    "name": container,
                    "image": image,
                    "imageID": "",
                    "ready": is_ready,
                    "restartCount": 3 if settings["crash_loop"] and index == stuck_index else 0,
                    "state": state,
                    "started": "running" in state,
                }
            )
        main_state = {"running": {"startedAt": stamp}} if ready else {"waiting": {"reason": "PodInitializing"}}
        condition = "True" if ready else "False"
        conditions = [
            {"type": t, "status": "True" if t in ("PodScheduled",) or ready else "False", "lastTransitionTime": stamp}
            for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ]
        if not ready:
            for cond in conditions:
                if cond["type"] in ("ContainersReady", "Ready"):
                    cond.update(
                        {
                            "reason": "ContainersNotReady",
                            "message": f"containers with unready status: [{VALIDATOR_NAME}]",
                        }
                    )
                if cond["type"] == "Initialized":
                    cond.update(
                        {
                            "reason": "ContainersNotInitialized",
                            "message": f"containers with incomplete status: [{settings['stuck_at']}]",
                        }
                    )
        del condition
        return {
            "phase": "Running" if ready else "Pending",
            "conditions": conditions,
            "hostIP": "10.0.0.10",
            "podIP": "10.244.0.10" if ready else None,
            "startTime": stamp,
            "initContainerStatuses": init_statuses,
            "containerStatuses": [
                {
                    "name": VALIDATOR_NAME,
                    "image": image,
                    "imageID": "",
                    "ready": ready,
                    "restartCount": 0,
                    "started": ready,
                    "state": main_state,
                }
            ],
            "qosClass": "BestEffort",
        }

    # --- DRA ------------------------------------------------------------------------------------

    def ensure_device_class(self) -> Obj:
        existing = self.emulator.get("resource.k8s.io/v1", "DeviceClass", DRA_DRIVER)
        if existing is not None:
            return existing
        return self.emulator.create(device_class())

    def publish_resource_slices(
        self,
        node: str,
        product: str = "NVIDIA-L40S",
        count: int | None = None,
        memory: str | None = None,
        *,
        driver_version: str = DEFAULT_DRIVER_VERSION,
        pool_generation: int = 1,
    ) -> list[Obj]:
        """One ResourceSlice of driver ``gpu.nvidia.com`` for ``node`` with ``count`` GPUs (default: the
        node's ``nvidia.com/gpu.count`` label, else 1), as the NVIDIA DRA kubelet plugin publishes it."""
        node_obj = self.emulator.get("v1", "Node", node)
        if count is None:
            count = int(((node_obj or {}).get("metadata", {}).get("labels") or {}).get("nvidia.com/gpu.count", 1))
        slice_obj = resource_slice(  # raises ValueError on an unknown product, before any write
            node,
            None if node_obj is None else node_obj["metadata"]["uid"],
            product,
            count,
            memory,
            driver_version=driver_version,
            pool_generation=pool_generation,
        )
        self.ensure_device_class()
        for old in self.emulator.list(
            "resource.k8s.io/v1", "ResourceSlice", field_selector=f"spec.driver={DRA_DRIVER},spec.nodeName={node}"
        ):
            with contextlib.suppress(ApiError):
                self.emulator.delete("resource.k8s.io/v1", "ResourceSlice", old["metadata"]["name"])
        return [self.emulator.create(slice_obj)]
