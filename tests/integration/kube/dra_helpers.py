"""NVIDIA DRA objects published as plain API objects, the same way on the emulator and the real lane.

Why: the emulator's GPU simulator (``lab.kube.gpu``) publishes ResourceSlices in-process only, and
Kubernetes 1.20 has no ``resource.k8s.io``. These helpers build ResourceSlices shaped like the
NVIDIA DRA kubelet plugin publishes them (the product table of ``lab.kube.gpu``: attribute names,
driver-reported memory such as L40S ``46068Mi``) and write them through the API, so the gpu_ready
``dra`` tests run unchanged on the emulator (built-in ``resource.k8s.io/v1``) and on the real lane
(CRD stand-ins from ``kubeconf_support.install_dra_stand_ins``).
"""

from __future__ import annotations

import uuid
from typing import Any

from lab.kube.gpu import DEFAULT_DRIVER_VERSION, DRA_DRIVER, product

DRA_API = "resource.k8s.io/v1"


def nvidia_device(
    node: str, index: int, product_name: str = "L40S", driver_version: str = DEFAULT_DRIVER_VERSION
) -> dict[str, Any]:
    info = product(product_name)
    return {
        "name": f"gpu-{index}",
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_OID, f"{node}/{index}"))},
            "productName": {"string": info.product_name},
            "brand": {"string": "Tesla" if info.architecture == "Volta" else "Nvidia"},
            "architecture": {"string": info.architecture},
            "cudaComputeCapability": {"version": info.compute_capability},
            "driverVersion": {"version": driver_version},
            "cudaDriverVersion": {"version": "13.0.0"},
            "resource.kubernetes.io/pciBusID": {"string": f"0000:{index + 4:02x}:00.0"},
            "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
        },
        "capacity": {"memory": {"value": info.memory}},
    }


def resource_slice(
    node: str,
    product_name: str = "L40S",
    count: int = 2,
    *,
    driver: str = DRA_DRIVER,
    node_uid: str | None = None,
    pool_generation: int = 1,
) -> dict[str, Any]:
    """One ResourceSlice for ``node`` with ``count`` GPUs, as the NVIDIA DRA kubelet plugin writes it
    (one pool per node, named after it; owned by the Node so it goes away with it)."""
    metadata: dict[str, Any] = {"name": f"{node}-{driver}-{pool_generation}"}
    if node_uid:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}
        ]
    return {
        "apiVersion": DRA_API,
        "kind": "ResourceSlice",
        "metadata": metadata,
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": pool_generation, "resourceSliceCount": 1},
            "devices": [nvidia_device(node, i, product_name) for i in range(count)],
        },
    }


def as_v1beta1(body: dict[str, Any], api_version: str) -> dict[str, Any]:
    """A ResourceSlice in ``resource.k8s.io/v1beta1``'s shape (Kubernetes 1.32/1.33): each device's
    attributes and capacity nested under ``basic``; served here as ``api_version``."""
    spec = dict(body["spec"])
    spec["devices"] = [
        {"name": d["name"], "basic": {"attributes": d["attributes"], "capacity": d["capacity"]}}
        for d in spec["devices"]
    ]
    return {**body, "apiVersion": api_version, "spec": spec}


def device_class(driver: str = DRA_DRIVER) -> dict[str, Any]:
    """The DeviceClass the NVIDIA DRA driver's chart installs."""
    return {
        "apiVersion": DRA_API,
        "kind": "DeviceClass",
        "metadata": {"name": driver},
        "spec": {
            "selectors": [
                {"cel": {"expression": f"device.driver == '{driver}' && device.attributes['{driver}'].type == 'gpu'"}}
            ]
        },
    }


class DraCluster:
    """GPU nodes without a device plugin plus their ResourceSlices, written through the API.

    Node names and the pool label carry a per-test prefix, so tests sharing the real lane do not see
    each other's nodes; ``cleanup`` deletes what was created (slices first, then nodes).
    """

    def __init__(self, kube: Any, prefix: str) -> None:
        self.kube = kube
        self.prefix = prefix
        self.pool = {"modelplane.ai/pool": prefix}
        self.selector = f"modelplane.ai/pool={prefix}"
        self._nodes: list[str] = []
        self._slices: list[str] = []
        self._uids: dict[str, str] = {}

    def node(self, short: str) -> str:
        """A Node in the pool (no kubelet behind it: DRA readiness reads only slices and labels)."""
        name = f"{self.prefix}-{short}"
        created = self.kube.apply(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(self.pool)}}
        )
        self._uids[name] = created["metadata"]["uid"]
        self._nodes.append(name)
        return name

    def publish(
        self, node: str, product_name: str = "L40S", count: int = 2, *, driver: str = DRA_DRIVER, generation: int = 1
    ) -> None:
        if driver == DRA_DRIVER:
            self.kube.apply(device_class(driver))
        body = resource_slice(
            node, product_name, count, driver=driver, node_uid=self._uids.get(node), pool_generation=generation
        )
        self.kube.apply(body)
        self._slices.append(body["metadata"]["name"])

    def retract(self, node: str) -> None:
        """Delete the slices published for ``node`` (the driver withdrew them)."""
        for name in [n for n in self._slices if n.startswith(f"{node}-")]:
            self.kube.delete(DRA_API, "ResourceSlice", name)
            self._slices.remove(name)

    def cleanup(self) -> None:
        for name in self._slices:
            self.kube.delete(DRA_API, "ResourceSlice", name)
        for name in self._nodes:
            self.kube.delete("v1", "Node", name)
