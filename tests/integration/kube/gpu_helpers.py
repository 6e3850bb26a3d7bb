"""GPU nodes and the GPU Operator validator, the same way on the emulator and on the real lane.

Why: gpu_ready's ``operator`` and ``allocatable`` checks read nodes (GPU feature discovery labels,
``nvidia.com/gpu`` in allocatable) and the ``nvidia-operator-validator`` DaemonSet. The emulator's
GPU simulator (``lab.kube.gpu``) fakes both in-process. On the real lane the nodes are registered
by the fake kubelet at runtime (lane-control ``/kubelet/nodes``), the DaemonSet is the real
controller's, scheduled by the real scheduler, and its pods are held not ready by the fake kubelet
(``/kubelet/pod-rules``) until the test releases them: a validator stuck at an init container,
crash-looping or not, is a real pod status on a real server.

Names differ per target: on the real lane the nodes, the pool label and the validator namespace
carry the test's prefix so tests sharing the lane never see each other's (``node()``,
``selector``, ``namespace``); on the emulator they are the short names, ``modelplane.ai/pool=gpu``
and ``gpu-operator``, as before.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from lab.kube.gpu import VALIDATOR_NAME, product, validator_daemonset

POOL_LABEL = "modelplane.ai/pool"
# The real DaemonSet controller, scheduler and fake kubelet settle a validator within seconds;
# leave room for a busy shared machine.
SETTLE_TIMEOUT = 120.0
CLEANUP_TIMEOUT = 60.0


class GpuLab:
    def __init__(self, kube: Any, prefix: str) -> None:
        self.kube = kube
        self.real = kube.real
        self.prefix = prefix
        pool = prefix if self.real else "gpu"
        self.pool = {POOL_LABEL: pool}
        self.selector = f"{POOL_LABEL}={pool}"
        self.namespace = prefix if self.real else "gpu-operator"
        self.daemonsets = f"/apis/apps/v1/namespaces/{self.namespace}/daemonsets"
        self._nodes: list[str] = []
        self._gpu_nodes: list[str] = []
        self._validator = False

    @property
    def args(self) -> dict[str, str]:
        """gpu_ready options that point at this lab's pool and validator."""
        return {"node_selector": self.selector, "validator_namespace": self.namespace}

    def node(self, short: str) -> str:
        return f"{self.prefix}-{short}" if self.real else short

    # -- nodes ---------------------------------------------------------------------------------
    def add_gpu_node(self, short: str, gpus: int = 2, gpu_product: str = "NVIDIA-L40S", *,
                     device_plugin: bool = True) -> str:  # fmt: skip
        """A Ready node in the pool with ``gpus`` GPUs (GFD labels); without ``device_plugin`` its
        allocatable lacks ``nvidia.com/gpu`` until ``advertise``."""
        name = self.node(short)
        if self.real:
            labels = {**product(gpu_product).gfd_labels(gpus), **self.pool}
            self.kube.control.add_node(name, gpus=gpus, labels=labels, device_plugin=device_plugin)
        else:
            self.kube.emulator.gpu.add_gpu_node(
                name, gpus=gpus, product=gpu_product, labels=self.pool, device_plugin=device_plugin
            )
        self._nodes.append(name)
        self._gpu_nodes.append(name)
        return name

    def add_cpu_node(self, short: str) -> str:
        """A node outside the pool, without GPUs: the selector must keep it out of every check."""
        name = self.node(short)
        if self.real:
            self.kube.control.add_node(name, gpus=0, labels={"role": "system"})
        else:
            self.kube.emulator.create(
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"role": "system"}}}
            )
        self._nodes.append(name)
        return name

    def advertise(self, short: str, gpus: int = 2) -> None:
        """The device plugin comes up: ``nvidia.com/gpu`` appears in capacity and allocatable."""
        name = self.node(short)
        if self.real:
            self.kube.control.update_node(name, gpus=gpus, device_plugin=True)
        else:
            count = {"nvidia.com/gpu": str(gpus)}
            status = {"capacity": count, "allocatable": {**count, "cpu": "32"}}
            self.kube.emulator.set_status("v1", "Node", name, status)

    # -- the GPU Operator validator ------------------------------------------------------------
    def install_validator(self, ready_after: float | None = 0.0, *, stuck_at: str = "plugin-validation",
                          crash_loop: bool = False) -> None:  # fmt: skip
        """The validator DaemonSet on the pool's GPU nodes: ready at once (``ready_after=0``), after
        ``ready_after`` seconds, or never (``None``: init container ``stuck_at`` never finishes)
        until ``validator_ready()``. On the real lane this returns once the real controllers show
        that state (ready at once: all pods ready; held: every pod reports the stuck container)."""
        if not self.real:
            self.kube.emulator.gpu.install_operator_validator(
                ready_after=ready_after, namespace=self.namespace, stuck_at=stuck_at, crash_loop=crash_loop
            )
            return
        if ready_after != 0:
            self.kube.control.hold_pods(self.namespace, ready_after=ready_after, stuck_at=stuck_at,
                                        crash_loop=crash_loop)  # fmt: skip
        self.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}})
        daemonset = validator_daemonset(self.namespace)
        # Only this test's pool: the lane's own gpu-node-* (and other tests' nodes) stay out.
        daemonset["spec"]["template"]["spec"]["nodeSelector"].update(self.pool)
        self.kube.apply(daemonset)
        self._validator = True
        if ready_after == 0:
            self._settle(lambda status, pods: status.get("numberReady") == len(self._gpu_nodes), "all pods ready")
        elif ready_after is None:
            self._settle(lambda status, pods: len(pods) == len(self._gpu_nodes) and all(
                any(c.get("name") == stuck_at for c in self._container_statuses(p)) for p in pods
            ), f"every pod held at {stuck_at}")  # fmt: skip

    @staticmethod
    def _container_statuses(pod: dict[str, Any]) -> list[dict[str, Any]]:
        status = pod.get("status") or {}
        return [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]

    def _settle(self, done: Any, what: str) -> None:
        path = f"/apis/apps/v1/namespaces/{self.namespace}/daemonsets/{VALIDATOR_NAME}"
        pods_path = f"/api/v1/namespaces/{self.namespace}/pods"
        deadline = time.monotonic() + SETTLE_TIMEOUT
        status: dict[str, Any] = {}
        while time.monotonic() < deadline:
            daemonset = self.kube.dynamic.request("GET", path).to_dict()
            status = daemonset.get("status") or {}
            current = status.get("observedGeneration") == daemonset["metadata"].get("generation")
            if current and status.get("desiredNumberScheduled") == len(self._gpu_nodes):
                pods = self.kube.dynamic.request("GET", pods_path).to_dict().get("items") or []
                if done(status, pods):
                    return
            time.sleep(0.5)
        raise AssertionError(f"the validator DaemonSet never settled ({what}): {status}")

    def validator_ready(self) -> None:
        """Validation finishes now: the pods become Running and Ready."""
        if self.real:
            self.kube.control.release_pods(self.namespace)
        else:
            self.kube.emulator.gpu.validator_ready(self.namespace)

    # -- cleanup -------------------------------------------------------------------------------
    def cleanup(self) -> None:
        if not self.real:
            return  # the emulator goes away with the test
        control = self.kube.control
        if self._validator:
            self.kube.delete("v1", "Namespace", self.namespace)
            with contextlib.suppress(Exception):
                control.release_pods(self.namespace)
        for name in self._nodes:
            with contextlib.suppress(Exception):
                control.remove_node(name)  # its pods go with it (grace 0)
