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

With ``--control-port`` it also serves a small control API on 127.0.0.1 (bearer token from
``--control-token-file``; ``scripts/k8s-real/lane.py`` forwards ``/kubelet/...`` of the lane's
control endpoint here), so a test can change the "hardware" at runtime:

- ``POST /nodes`` ``{"name", "gpus", "labels", "device_plugin"}`` registers one more node (heartbeats
  and runs its pods like the others); ``PATCH /nodes/<name>`` ``{"gpus", "device_plugin"}`` changes
  what it advertises (``device_plugin: false`` = no ``nvidia.com/gpu`` in capacity/allocatable, a
  device plugin that has not started); ``DELETE /nodes/<name>`` removes it (and its pods, grace 0).
- ``PUT /pod-rules/<namespace>`` ``{"ready_after": S|null, "stuck_at": "<container>", "crash_loop":
  bool}`` holds the pods of that namespace not ready: the init container ``stuck_at`` never finishes
  (or, for a main container, never becomes ready), crash-looping if asked, like a GPU Operator
  validator that cannot validate the driver; ``ready_after`` seconds later (``null`` = never) they
  become Running and Ready. ``DELETE /pod-rules/<namespace>`` makes them ready now.
- ``GET /`` lists the nodes and rules.

Run: ``python tests/k8s_real/fake_kubelet.py --kubeconfig KC --nodes 2 --gpus 8``. It serves until
SIGTERM/SIGINT. ``scripts/k8s-real/lane.py`` starts and stops it.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":  # run as a script: import as ``k8s_real.*`` (like the lab emulators)
    sys.path[0] = str(Path(__file__).resolve().parents[1])

import argparse
import contextlib
import hashlib
import itertools
import json
import logging
import signal
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from http.server import ThreadingHTTPServer
from types import FrameType
from typing import Any

from k8s_real.jsonhttp import TokenJsonHandler
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
    # False: the device plugin has not registered, so no nvidia.com/gpu in capacity/allocatable
    # (the GPU feature discovery labels stay, as on a node whose plugin is still starting).
    device_plugin: bool = True
    # False: only ``labels`` (plus the kubernetes.io basics) label the node, no GPU labels of our own.
    gpu_labels: bool = True


def node_labels(name: str, spec: NodeSpec) -> dict[str, str]:
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
    }
    if spec.gpus > 0 and spec.gpu_labels:
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
    if spec.gpus > 0 and spec.device_plugin:
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


@dataclass(frozen=True)
class PodRule:
    """How the pods of one namespace behave: held not ready until ``ready_at`` (None = until the rule
    is removed), the container ``stuck_at`` never finishing (crash-looping with ``crash_loop``)."""

    ready_at: float | None = None  # time.monotonic() when the pods become ready; None = never
    stuck_at: str | None = None
    crash_loop: bool = False

    def holds(self, clock: float) -> bool:
        return self.ready_at is None or clock < self.ready_at

    def describe(self, clock: float) -> dict[str, Any]:
        remaining = None if self.ready_at is None else max(0.0, round(self.ready_at - clock, 3))
        return {"ready_in": remaining, "stuck_at": self.stuck_at, "crash_loop": self.crash_loop}


def _container_id(pod: dict[str, Any], name: str) -> str:
    return "containerd://" + hashlib.sha256(f"{pod['metadata']['uid']}/{name}".encode()).hexdigest()


def stuck_pod_status(pod: dict[str, Any], pod_ip: str, rule: PodRule) -> dict[str, Any]:
    """The ``status`` a kubelet posts while container ``rule.stuck_at`` cannot finish (or become ready).

    An init container that is stuck keeps the pod ``Pending``: earlier init containers Completed,
    the stuck one running (or waiting in CrashLoopBackOff after 3 restarts), later ones and every
    main container waiting in PodInitializing; ``Initialized`` is False. A stuck main container (or
    no ``stuck_at``: all of them) leaves the pod ``Running`` with that container not ready.
    """
    stamp = now()
    spec = pod.get("spec") or {}
    meta = pod["metadata"]
    inits = [c["name"] for c in spec.get("initContainers") or []]
    mains = [c["name"] for c in spec.get("containers") or []]
    stuck_init = rule.stuck_at in inits
    stuck_mains = [] if stuck_init else ([rule.stuck_at] if rule.stuck_at in mains else mains)

    def stuck_state(name: str) -> tuple[dict[str, Any], int]:
        if rule.crash_loop:
            pod_ref = f"{meta['name']}_{meta['namespace']}({meta['uid']})"
            message = f"back-off 5m0s restarting failed container={name} pod={pod_ref}"
            return {"waiting": {"reason": "CrashLoopBackOff", "message": message}}, 3
        return {"running": {"startedAt": stamp}}, 0

    def entry(c: dict[str, Any], state: dict[str, Any], *, ready: bool, restarts: int = 0) -> dict[str, Any]:
        return {
            "name": c["name"],
            "image": c.get("image", ""),
            "imageID": f"docker-pullable://{c.get('image', '')}" if "waiting" not in state else "",
            **({"containerID": _container_id(pod, c["name"])} if "waiting" not in state or restarts else {}),
            "ready": ready,
            "started": "running" in state,
            "restartCount": restarts,
            "state": state,
        }

    done = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": stamp, "finishedAt": stamp}}
    initializing = {"waiting": {"reason": "PodInitializing"}}
    init_statuses, reached = [], False
    for c in spec.get("initContainers") or []:
        if c["name"] == rule.stuck_at and stuck_init:
            state, restarts = stuck_state(c["name"])
            init_statuses.append(entry(c, state, ready=False, restarts=restarts))
            reached = True
        elif stuck_init and reached:
            init_statuses.append(entry(c, initializing, ready=False))
        else:
            init_statuses.append(entry(c, done, ready=True))
    main_statuses = []
    for c in spec.get("containers") or []:
        if stuck_init:
            main_statuses.append(entry(c, initializing, ready=False))
        elif c["name"] in stuck_mains:
            state, restarts = stuck_state(c["name"])
            main_statuses.append(entry(c, state, ready=False, restarts=restarts))
        else:
            main_statuses.append(entry(c, {"running": {"startedAt": stamp}}, ready=True))

    def condition(kind: str, ok: bool, reason: str = "", message: str = "") -> dict[str, Any]:
        cond: dict[str, Any] = {"type": kind, "status": "True" if ok else "False"}
        cond.update({"lastProbeTime": None, "lastTransitionTime": stamp})
        if not ok:
            cond.update({"reason": reason, "message": message})
        return cond

    unready = [c["name"] for c in spec.get("containers") or []] if stuck_init else stuck_mains
    not_ready = f"containers with unready status: [{' '.join(unready)}]"
    conditions = [
        condition(
            "Initialized",
            not stuck_init,
            "ContainersNotInitialized",
            f"containers with incomplete status: [{rule.stuck_at}]",
        ),
        condition("Ready", False, "ContainersNotReady", not_ready),
        condition("ContainersReady", False, "ContainersNotReady", not_ready),
        condition("PodScheduled", True),
    ]
    status: dict[str, Any] = {
        "phase": "Pending" if stuck_init else "Running",
        "conditions": conditions,
        "hostIP": "127.0.0.1",
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": (pod.get("status") or {}).get("startTime") or stamp,
        "containerStatuses": main_statuses,
    }
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    return status


def status_signature(status: dict[str, Any]) -> tuple[Any, ...]:
    """What tells one posted status from another: phase, conditions and each container's state."""

    def states(key: str) -> tuple[Any, ...]:
        return tuple(
            (
                c.get("name"),
                c.get("ready"),
                next(iter(c.get("state") or {}), None),
                ((c.get("state") or {}).get("waiting") or {}).get("reason"),
            )
            for c in status.get(key) or []
        )

    conditions = tuple(sorted((c.get("type"), c.get("status")) for c in status.get("conditions") or []))
    return (status.get("phase"), conditions, states("initContainerStatuses"), states("containerStatuses"))


class FakeKubelet:
    """Registers the nodes, then runs the heartbeat and pod loops until ``stop()``.

    Nodes and pod rules can change at runtime (``add_node``, ``update_node``, ``remove_node``,
    ``set_rule``, ``clear_rule``): the control API calls these.
    """

    def __init__(self, api: KubeHttp, names: list[str], spec: NodeSpec, heartbeat: float = DEFAULT_HEARTBEAT) -> None:
        self.api = api
        self.specs: dict[str, NodeSpec] = dict.fromkeys(names, spec)
        self.heartbeat = heartbeat
        self._stop = threading.Event()
        self._lock = threading.RLock()
        self._node_uids: dict[str, str] = {}
        self._ips = itertools.count(2)
        self._threads: list[threading.Thread] = []
        self._pods: dict[str, dict[str, Any]] = {}  # uid -> last seen pod bound to one of our nodes
        self._pod_ips: dict[str, str] = {}
        self.rules: dict[str, PodRule] = {}
        self._timers: list[threading.Timer] = []

    @property
    def names(self) -> list[str]:
        with self._lock:
            return list(self.specs)

    # -- nodes ---------------------------------------------------------------------------------
    def register(self) -> None:
        for name in self.names:
            self._register(name)
        self.beat()
        LOG.info("registered %d node(s): %s", len(self.names), ", ".join(self.names))

    def _register(self, name: str) -> None:
        spec = self.specs[name]
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": node_labels(name, spec)}}
        try:
            node = self.api.request("POST", "/api/v1/nodes", body)
        except KubeHttpError as exc:
            if exc.status != 409:
                raise
            node = self.api.request(
                "PATCH",
                f"/api/v1/nodes/{name}",
                {"metadata": {"labels": node_labels(name, spec)}},
                content_type=MERGE_PATCH,
            )
        with self._lock:
            self._node_uids[name] = node["metadata"]["uid"]

    def beat(self, names: list[str] | None = None) -> None:
        """Post node status and renew each node's Lease."""
        for name in names if names is not None else self.names:
            with self._lock:
                spec = self.specs.get(name)
            if spec is None:  # removed meanwhile
                continue
            self.api.request(
                "PATCH",
                f"/api/v1/nodes/{name}/status",
                {"status": node_status(name, spec)},
                content_type=MERGE_PATCH,
            )
            self._renew_lease(name)

    def add_node(self, name: str, spec: NodeSpec) -> dict[str, Any]:
        with self._lock:
            self.specs[name] = spec
        self._register(name)
        self.beat([name])
        LOG.info("added node %s (gpus=%d, device_plugin=%s)", name, spec.gpus, spec.device_plugin)
        return self.describe_node(name)

    def update_node(self, name: str, **changes: Any) -> dict[str, Any]:
        with self._lock:
            if name not in self.specs:
                raise KeyError(name)
            self.specs[name] = replace(self.specs[name], **changes)
        self.beat([name])
        LOG.info("updated node %s: %s", name, changes)
        return self.describe_node(name)

    def remove_node(self, name: str) -> None:
        """Stop serving ``name``: its pods are deleted (grace 0), then its Lease and the Node."""
        with self._lock:
            if self.specs.pop(name, None) is None:
                raise KeyError(name)
            self._node_uids.pop(name, None)
        try:
            pods = self.api.get("/api/v1/pods", fieldSelector=f"spec.nodeName={name}")["items"]
        except KubeHttpError:
            pods = []
        for pod in pods:
            meta = pod["metadata"]
            with contextlib.suppress(KubeHttpError):
                pod_path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
                self.api.request("DELETE", pod_path, {"gracePeriodSeconds": 0})
        for path in (f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}", f"/api/v1/nodes/{name}"):
            with contextlib.suppress(KubeHttpError):
                self.api.request("DELETE", path)
        LOG.info("removed node %s (%d pod(s) deleted)", name, len(pods))

    def describe_node(self, name: str) -> dict[str, Any]:
        with self._lock:
            spec = self.specs[name]
            return {"name": name, "uid": self._node_uids.get(name), **asdict(spec)}

    def _renew_lease(self, name: str) -> None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"
        try:
            self.api.request("PATCH", path, {"spec": {"renewTime": now_micro()}}, content_type=MERGE_PATCH)
        except KubeHttpError as exc:
            if exc.status != 404:
                raise
            with self._lock:
                uid = self._node_uids.get(name)
            if uid is None:
                return
            lease = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": name,
                    "namespace": "kube-node-lease",
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}],
                },
                "spec": {
                    "holderIdentity": name,
                    "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                    "renewTime": now_micro(),
                },
            }
            self.api.request("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", lease)

    def _heartbeat_loop(self) -> None:
        delay = self.heartbeat
        while not self._stop.wait(delay):
            try:
                self.beat()
                delay = self.heartbeat
            except (KubeHttpError, OSError) as exc:
                # The apiserver is restarting (or briefly away): post Ready again as soon as it is back,
                # so the node lifecycle controller never sees a stale node for long.
                LOG.warning("heartbeat failed: %s", exc)
                delay = RETRY_DELAY

    # -- pod rules -----------------------------------------------------------------------------
    def set_rule(self, namespace: str, rule: PodRule) -> None:
        with self._lock:
            self.rules[namespace] = rule
        LOG.info("pod rule for %s: %s", namespace, rule)
        if rule.ready_at is not None:
            timer = threading.Timer(max(0.0, rule.ready_at - time.monotonic()), self._resync, args=(namespace,))
            timer.daemon = True
            timer.start()
            self._timers.append(timer)
        self._resync(namespace)

    def clear_rule(self, namespace: str) -> None:
        with self._lock:
            self.rules.pop(namespace, None)
        LOG.info("pod rule for %s cleared: its pods become ready", namespace)
        self._resync(namespace)

    def _resync(self, namespace: str) -> None:
        with self._lock:
            pods = [p for p in self._pods.values() if p["metadata"]["namespace"] == namespace]
        for pod in pods:
            self.handle_pod(pod)

    # -- pods ----------------------------------------------------------------------------------
    def desired_status(self, pod: dict[str, Any]) -> dict[str, Any]:
        meta = pod["metadata"]
        with self._lock:
            rule = self.rules.get(meta["namespace"])
            pod_ip = self._pod_ips.get(meta["uid"])
            if pod_ip is None:
                node_index = sorted(self.specs).index(pod["spec"]["nodeName"]) % 250
                pod_ip = self._pod_ips[meta["uid"]] = f"10.244.{node_index}.{next(self._ips) % 250 + 2}"
        if rule is not None and rule.holds(time.monotonic()):
            return stuck_pod_status(pod, pod_ip, rule)
        return running_pod_status(pod, pod_ip)

    def handle_pod(self, pod: dict[str, Any]) -> None:
        """Bring one pod bound to our nodes to the status its rule asks for, or finish its deletion."""
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        meta = pod["metadata"]
        with self._lock:
            if node not in self.specs:
                return
            self._pods[meta["uid"]] = pod
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        try:
            if meta.get("deletionTimestamp"):
                self.api.request("DELETE", path, {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}})
                LOG.info("deleted pod %s/%s", meta["namespace"], meta["name"])
                return
            desired = self.desired_status(pod)
            if status_signature(pod.get("status") or {}) == status_signature(desired):
                return
            self.api.request("PATCH", f"{path}/status", {"status": desired}, content_type=MERGE_PATCH)
            LOG.info("pod %s/%s %s on %s", meta["namespace"], meta["name"], desired["phase"], node)
        except KubeHttpError as exc:
            if exc.status not in (404, 409):
                LOG.warning("pod %s/%s: %s", meta["namespace"], meta["name"], exc)

    def forget_pod(self, pod: dict[str, Any]) -> None:
        with self._lock:
            self._pods.pop(pod["metadata"].get("uid", ""), None)
            self._pod_ips.pop(pod["metadata"].get("uid", ""), None)

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
                    elif event.get("type") == "DELETED":
                        self.forget_pod(obj)
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
        for timer in self._timers:
            timer.cancel()

    def wait(self) -> None:
        self._stop.wait()

    def describe(self) -> dict[str, Any]:
        clock = time.monotonic()
        with self._lock:
            return {
                "nodes": {
                    name: {"uid": self._node_uids.get(name), **asdict(spec)} for name, spec in self.specs.items()
                },
                "pod_rules": {ns: rule.describe(clock) for ns, rule in self.rules.items()},
            }


# --------------------------------------------------------------------------------------------
# Control API (loopback, bearer token): see the module docstring.


def rule_from(body: dict[str, Any]) -> PodRule:
    unknown = set(body) - {"ready_after", "stuck_at", "crash_loop"}
    if unknown:
        raise ValueError(f"unknown pod rule field(s): {sorted(unknown)}")
    ready_after = body.get("ready_after")
    if ready_after is not None and float(ready_after) < 0:
        raise ValueError("ready_after must be >= 0 seconds, or null (never)")
    return PodRule(
        ready_at=None if ready_after is None else time.monotonic() + float(ready_after),
        stuck_at=body.get("stuck_at"),
        crash_loop=bool(body.get("crash_loop", False)),
    )


def node_spec_from(body: dict[str, Any], base: NodeSpec) -> NodeSpec:
    unknown = set(body) - {"name", "gpus", "labels", "device_plugin"}
    if unknown:
        raise ValueError(f"unknown node field(s): {sorted(unknown)}")
    labels = body.get("labels") or {}
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise ValueError("labels must map strings to strings")
    return replace(
        base,
        gpus=int(body.get("gpus", 0)),
        labels=dict(labels),
        device_plugin=bool(body.get("device_plugin", True)),
        gpu_labels=False,  # the caller's labels say which GPU (GFD labels), as on the emulator
    )


class ControlServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, token: str, kubelet: FakeKubelet, base: NodeSpec) -> None:
        self.token, self.kubelet, self.base = token, kubelet, base
        super().__init__(("127.0.0.1", port), ControlHandler)


class ControlHandler(TokenJsonHandler):
    server: ControlServer

    def log_message(self, format: str, *args: Any) -> None:
        LOG.info("control: " + format, *args)

    def token(self) -> str:
        return self.server.token

    def _handle(self, method: str) -> None:
        if not self.authorized():
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}") if length else {}
            self._reply(*self._route(method, self.path.split("?", 1)[0].rstrip("/") or "/", body))
        except KeyError as exc:
            self._reply(404, {"error": f"unknown node {exc}"})
        except (TypeError, ValueError) as exc:
            self._reply(400, {"error": str(exc)})
        except (KubeHttpError, OSError) as exc:
            self._reply(502, {"error": f"the apiserver refused: {exc}"})

    def _route(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:  # noqa: PLR0911
        kubelet = self.server.kubelet
        parts = path.strip("/").split("/")
        if method == "GET" and path == "/":
            return 200, kubelet.describe()
        if parts[0] == "nodes":
            if method == "POST" and len(parts) == 1:
                name = str(body.get("name") or "")
                if not name or name in kubelet.names:
                    raise ValueError(f"node name {name!r} is empty or already served")
                return 201, kubelet.add_node(name, node_spec_from(body, self.server.base))
            if len(parts) == 2 and method == "PATCH":
                changes = {k: body[k] for k in ("gpus", "device_plugin") if k in body}
                if set(body) - set(changes):
                    raise ValueError(f"only gpus and device_plugin can change, not {sorted(set(body) - set(changes))}")
                return 200, kubelet.update_node(parts[1], **changes)
            if len(parts) == 2 and method == "DELETE":
                kubelet.remove_node(parts[1])
                return 200, {"removed": parts[1]}
        if parts[0] == "pod-rules" and len(parts) == 2:
            if method == "PUT":
                kubelet.set_rule(parts[1], rule_from(body))
                return 200, kubelet.describe()["pod_rules"][parts[1]]
            if method == "DELETE":
                kubelet.clear_rule(parts[1])
                return 200, {"cleared": parts[1]}
        return 404, {"error": f"no control endpoint {method} {path}"}


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
    parser.add_argument("--control-port", type=int, default=0, help="serve the control API on 127.0.0.1:PORT")
    parser.add_argument("--control-token-file", type=Path, help="bearer token of the control API (required with it)")
    args = parser.parse_args(argv)
    if args.control_port and not args.control_token_file:
        parser.error("--control-port needs --control-token-file")

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
    control = None
    if args.control_port:
        token = args.control_token_file.read_text(encoding="utf-8").strip()
        control = ControlServer(args.control_port, token, kubelet, spec)
        threading.Thread(target=control.serve_forever, name="control", daemon=True).start()
        LOG.info("control API on 127.0.0.1:%d", args.control_port)
    kubelet.wait()
    if control is not None:
        control.shutdown()
        control.server_close()
    LOG.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
