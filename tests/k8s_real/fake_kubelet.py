"""A fake kubelet for the real kube-apiserver lane: GPU Nodes that are Ready and "run" their pods.

Why: the real lane has a real apiserver, controller-manager and scheduler, but no machine can run
containers here. This process plays the kubelet's *API* role (the idea behind kwok), so the real
DaemonSet, Deployment and ReplicaSet controllers and the real scheduler drive workloads to ready:

- registers ``--nodes`` Nodes (``<prefix>0`` ...) with capacity/allocatable ``cpu``, ``memory``,
  ``pods`` and ``nvidia.com/gpu`` (``--gpus``), the labels a GPU node carries (``nvidia.com/gpu.present``
  and the GPU feature discovery labels) plus any ``--label k=v``;
- heartbeats every ``--heartbeat`` seconds: renews the node Lease in ``kube-node-lease`` and
  re-posts the Ready condition, so the node lifecycle controller never marks a node NotReady;
- watches pods; a pod bound to one of its nodes is marked Running and Ready with running
  container statuses (nothing is executed); a bound pod being deleted is deleted with grace 0.

Run: ``python tests/k8s_real/fake_kubelet.py --kubeconfig KC --nodes 2 --gpus 8``. It serves until
SIGTERM/SIGINT. ``scripts/k8s-real/lane.py`` starts and stops it.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":  # run as a script: import as ``k8s_real.*`` (like the lab emulators)
    sys.path[0] = str(Path(__file__).resolve().parents[1])

import argparse
import hashlib
import itertools
import logging
import signal
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import FrameType
from typing import Any

from k8s_real.kubehttp import MERGE_PATCH, KubeHttp, KubeHttpError, Target

LOG = logging.getLogger("fake-kubelet")

KUBELET_VERSION = "v1.20.2"
# The node lifecycle controller marks a node NotReady after --node-monitor-grace-period (40 s) without
# a Lease renewal or status update; a 10 s heartbeat (the real kubelet's default) keeps a 4x margin.
DEFAULT_HEARTBEAT = 10.0
LEASE_DURATION_SECONDS = 40
# Back-off after a failed watch or heartbeat, so a restarting apiserver is not hammered.
RETRY_DELAY = 1.0
GPU_RESOURCE = "nvidia.com/gpu"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    """``metav1.MicroTime`` as a Lease's ``renewTime`` wants it."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class NodeSpec:
    """What every fake node advertises."""

    gpus: int = 8
    cpu: str = "32"
    memory: str = "128Gi"
    pods: str = "110"
    gpu_product: str = "NVIDIA-A100-SXM4-80GB"
    gpu_memory_mib: int = 81920
    driver_version: str = "580.95.05"
    labels: dict[str, str] = field(default_factory=dict)


def node_labels(name: str, spec: NodeSpec) -> dict[str, str]:
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
    }
    if spec.gpus > 0:
        major, minor, rev = ([*spec.driver_version.split(".", 2), "", ""])[:3]
        labels.update(
            {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.count": str(spec.gpus),
                "nvidia.com/gpu.product": spec.gpu_product,
                "nvidia.com/gpu.memory": str(spec.gpu_memory_mib),
                "nvidia.com/cuda.driver.major": major,
                "nvidia.com/cuda.driver.minor": minor,
                "nvidia.com/cuda.driver.rev": rev,
            }
        )
    labels.update(spec.labels)
    return labels


def node_status(name: str, spec: NodeSpec) -> dict[str, Any]:
    """The ``status`` a healthy kubelet posts (capacity, Ready condition, nodeInfo)."""
    resources = {"cpu": spec.cpu, "memory": spec.memory, "pods": spec.pods, "ephemeral-storage": "500Gi"}
    if spec.gpus > 0:
        resources[GPU_RESOURCE] = str(spec.gpus)
    stamp = now()

    def condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
        return {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }

    machine = hashlib.sha256(name.encode()).hexdigest()[:32]
    return {
        "capacity": resources,
        "allocatable": resources,
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID"),
            condition("Ready", "True", "KubeletReady", "fake kubelet is posting ready status"),
        ],
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": machine,
            "systemUUID": machine,
            "bootID": machine,
            "kernelVersion": "6.1.0-fake",
            "osImage": "Debian GNU/Linux 12 (bookworm)",
            "containerRuntimeVersion": "containerd://1.6.20",
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": KUBELET_VERSION,
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


def pod_is_running(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return status.get("phase") == "Running" and ready


def running_pod_status(pod: dict[str, Any], pod_ip: str) -> dict[str, Any]:
    """The ``status`` a kubelet posts once every container of ``pod`` runs and is ready."""
    stamp = now()
    spec = pod.get("spec") or {}

    def container_id(name: str) -> str:
        digest = hashlib.sha256(f"{pod['metadata']['uid']}/{name}".encode()).hexdigest()
        return f"containerd://{digest}"

    def statuses(containers: list[dict[str, Any]], *, init: bool) -> list[dict[str, Any]]:
        result = []
        for c in containers:
            state = (
                {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": stamp, "finishedAt": stamp}}
                if init
                else {"running": {"startedAt": stamp}}
            )
            result.append(
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": f"docker-pullable://{c.get('image', '')}",
                    "containerID": container_id(c["name"]),
                    "ready": not init,
                    "started": not init,
                    "restartCount": 0,
                    "state": state,
                }
            )
        return result

    conditions = [
        {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": stamp}
        for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
    ]
    status: dict[str, Any] = {
        "phase": "Running",
        "conditions": conditions,
        "hostIP": "127.0.0.1",
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": (pod.get("status") or {}).get("startTime") or stamp,
        "containerStatuses": statuses(spec.get("containers") or [], init=False),
    }
    if spec.get("initContainers"):
        status["initContainerStatuses"] = statuses(spec["initContainers"], init=True)
    return status


class FakeKubelet:
    """Registers the nodes, then runs the heartbeat and pod loops until ``stop()``."""

    def __init__(self, api: KubeHttp, names: list[str], spec: NodeSpec, heartbeat: float = DEFAULT_HEARTBEAT) -> None:
        self.api = api
        self.names = names
        self.spec = spec
        self.heartbeat = heartbeat
        self._stop = threading.Event()
        self._node_uids: dict[str, str] = {}
        self._ips = itertools.count(2)
        self._threads: list[threading.Thread] = []

    # -- nodes ---------------------------------------------------------------------------------
    def register(self) -> None:
        for name in self.names:
            body = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": node_labels(name, self.spec)},
            }
            try:
                node = self.api.request("POST", "/api/v1/nodes", body)
            except KubeHttpError as exc:
                if exc.status != 409:
                    raise
                node = self.api.request(
                    "PATCH",
                    f"/api/v1/nodes/{name}",
                    {"metadata": {"labels": node_labels(name, self.spec)}},
                    content_type=MERGE_PATCH,
                )
            self._node_uids[name] = node["metadata"]["uid"]
        self.beat()
        LOG.info("registered %d node(s): %s", len(self.names), ", ".join(self.names))

    def beat(self) -> None:
        """Post node status and renew each node's Lease."""
        for name in self.names:
            self.api.request(
                "PATCH",
                f"/api/v1/nodes/{name}/status",
                {"status": node_status(name, self.spec)},
                content_type=MERGE_PATCH,
            )
            self._renew_lease(name)

    def _renew_lease(self, name: str) -> None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"
        try:
            self.api.request("PATCH", path, {"spec": {"renewTime": now_micro()}}, content_type=MERGE_PATCH)
        except KubeHttpError as exc:
            if exc.status != 404:
                raise
            lease = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": name,
                    "namespace": "kube-node-lease",
                    "ownerReferences": [
                        {"apiVersion": "v1", "kind": "Node", "name": name, "uid": self._node_uids[name]}
                    ],
                },
                "spec": {
                    "holderIdentity": name,
                    "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                    "renewTime": now_micro(),
                },
            }
            self.api.request("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", lease)

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(self.heartbeat):
            try:
                self.beat()
            except (KubeHttpError, OSError) as exc:
                LOG.warning("heartbeat failed: %s", exc)

    # -- pods ----------------------------------------------------------------------------------
    def handle_pod(self, pod: dict[str, Any]) -> None:
        """Make one pod bound to our nodes Running, or finish its graceful deletion."""
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        if node not in self._node_uids:
            return
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        try:
            if meta.get("deletionTimestamp"):
                self.api.request("DELETE", path, {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}})
                LOG.info("deleted pod %s/%s", meta["namespace"], meta["name"])
                return
            if pod_is_running(pod):
                return
            node_index = self.names.index(node)
            pod_ip = f"10.244.{node_index}.{next(self._ips) % 250 + 2}"
            self.api.request(
                "PATCH", f"{path}/status", {"status": running_pod_status(pod, pod_ip)}, content_type=MERGE_PATCH
            )
            LOG.info("pod %s/%s running on %s", meta["namespace"], meta["name"], node)
        except KubeHttpError as exc:
            if exc.status not in (404, 409):
                LOG.warning("pod %s/%s: %s", meta["namespace"], meta["name"], exc)

    def _pod_loop(self) -> None:
        resource_version = ""
        while not self._stop.is_set():
            try:
                if not resource_version:
                    listing = self.api.get("/api/v1/pods")
                    for pod in listing["items"]:
                        self.handle_pod(pod)
                    resource_version = listing["metadata"]["resourceVersion"]
                for event in self.api.watch("/api/v1/pods", resource_version):
                    if self._stop.is_set():
                        return
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        # 410 Gone: our resourceVersion is too old; list again.
                        resource_version = ""
                        break
                    resource_version = (obj.get("metadata") or {}).get("resourceVersion", resource_version)
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self.handle_pod(obj)
            except (KubeHttpError, OSError, ValueError) as exc:
                LOG.warning("pod watch interrupted (%s); re-listing", exc)
                resource_version = ""
                self._stop.wait(RETRY_DELAY)

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        self.register()
        for target in (self._heartbeat_loop, self._pod_loop):
            thread = threading.Thread(target=target, name=target.__name__, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()

    def wait(self) -> None:
        self._stop.wait()


def parse_label(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--nodes", type=int, default=2, help="how many nodes to register (default %(default)s)")
    parser.add_argument("--gpus", type=int, default=8, help="nvidia.com/gpu per node (default %(default)s)")
    parser.add_argument("--node-prefix", default="gpu-node-", help="node names are <prefix><index>")
    parser.add_argument("--gpu-product", default=NodeSpec.gpu_product)
    parser.add_argument("--gpu-memory-mib", type=int, default=NodeSpec.gpu_memory_mib)
    parser.add_argument("--driver-version", default=NodeSpec.driver_version)
    parser.add_argument("--label", type=parse_label, action="append", default=[], help="extra node label KEY=VALUE")
    parser.add_argument("--heartbeat", type=float, default=DEFAULT_HEARTBEAT, help="seconds between heartbeats")
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    spec = NodeSpec(
        gpus=args.gpus,
        gpu_product=args.gpu_product,
        gpu_memory_mib=args.gpu_memory_mib,
        driver_version=args.driver_version,
        labels=dict(args.label),
    )
    names = [f"{args.node_prefix}{i}" for i in range(args.nodes)]
    kubelet = FakeKubelet(KubeHttp(Target.from_kubeconfig(args.kubeconfig)), names, spec, args.heartbeat)

    def _on_signal(_signum: int, _frame: FrameType | None) -> None:
        kubelet.stop()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    kubelet.start()
    kubelet.wait()
    LOG.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
