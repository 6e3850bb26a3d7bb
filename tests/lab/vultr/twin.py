"""The VKE "twin": one in-process Kubernetes API (``lab.kube.server.KubeEmulator``) per Vultr VKE cluster.

Why: after provisioning, every playbook step talks to the workload cluster through the kubeconfig
that ``GET /v2/kubernetes/clusters/{id}/config`` returns. With the twin on, that kubeconfig points at
a live workload API whose nodes follow the cluster's node pools (names, labels, taints, GPU capacity
from the ``vcg-*`` plan), with a GPU Operator validator DaemonSet that becomes ready after a delay.

Wiring (``VultrEmulator(twin=True)`` or ``--workload-clusters`` does this)::

    twin = VkeTwin(emu, validator_ready_after=60)   # None: unready until api.gpu.validator_ready()
    twin.attach()       # sets emu.kubeconfig_factory / on_cluster_active / on_cluster_deleted
    ...
    twin.stop()         # stops every workload API

``WORKLOADS`` maps a workload API URL to its emulator, so in-process simulators (the Modelplane
control plane, ``lab.modelplane.server``) can reach the cluster a kubeconfig names.
"""

from __future__ import annotations

import contextlib
import re
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lab.kube.api import ApiError
from lab.kube.gpu import product as gpu_product
from lab.kube.server import KubeEmulator

if TYPE_CHECKING:
    from lab.vultr.server import ClusterHook, VultrEmulator

Obj = dict[str, Any]

# Label the twin puts on every node it manages (so it never touches nodes created by a test).
MANAGED_LABEL = "lab.metalplane.io/vke-node"
# [unverified] the label VKE puts on its nodes naming the node pool.
POOL_LABEL = "vke.vultr.com/node-pool"
SYNC_SECONDS = 0.25


# gpu token of a vcg-* plan id -> the GPU behind it (a lab.kube.gpu product: the one table of GPU models,
# so the twin's node labels and the DRA slices the Modelplane emulator publishes describe the same GPU).
# The plan's total VRAM / the model's nominal memory = GPU count; less than one whole GPU is a vGPU
# fraction (one device with the plan's VRAM).
GPU_MODELS: dict[str, str] = {
    "a16": "A16",
    "a40": "A40",
    "a100": "A100",
    "l40s": "L40S",
    "h100": "H100",
    "b200": "B200",
}
_PLAN = re.compile(r"^vcg-(?P<gpu>[a-z0-9]+)-.*-(?P<vram>\d+)vram$")


@dataclass(frozen=True)
class PlanGpus:
    product: str  # lab.kube.gpu product label (nvidia.com/gpu.product)
    count: int  # nvidia.com/gpu per node
    fraction: float  # 1.0 for whole GPUs, e.g. 0.333 for a 16 GB slice of an A40
    vram_gb: int  # total per node


def plan_gpus(plan: str) -> PlanGpus | None:
    """GPU capacity of a node of ``plan`` (None: a CPU plan or an unknown GPU)."""
    match = _PLAN.match(plan)
    if match is None:
        return None
    alias = GPU_MODELS.get(match["gpu"])
    if alias is None:
        return None
    model = gpu_product(alias)
    vram = int(match["vram"])
    if vram >= model.nominal_gb:
        return PlanGpus(model.label, vram // model.nominal_gb, 1.0, vram)
    return PlanGpus(model.label, 1, round(vram / model.nominal_gb, 3), vram)


# Workload APIs by URL, for in-process simulators that hold only a kubeconfig.
WORKLOADS: dict[str, KubeEmulator] = {}
_WORKLOADS_LOCK = threading.Lock()


def workload_for(server_url: str) -> KubeEmulator | None:
    with _WORKLOADS_LOCK:
        return WORKLOADS.get(server_url.rstrip("/"))


class VkeTwin:
    """Starts, feeds and stops one workload KubeEmulator per active VKE cluster of ``emu``."""

    def __init__(
        self, emu: VultrEmulator, *, validator_ready_after: float | None = 60.0, state_dir: Path | None = None
    ) -> None:
        self.emu = emu
        self.state_dir = state_dir  # None: each workload API keeps its files in a temporary directory
        self.delay_scale = emu.state.delay_scale
        self.validator_ready_after = validator_ready_after
        self.workloads: dict[str, KubeEmulator] = {}  # cluster id -> API
        self.errors: list[str] = []
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._user_active: ClusterHook | None = None
        self._user_deleted: ClusterHook | None = None

    # ---- wiring ---------------------------------------------------------------------------------

    def attach(self) -> VkeTwin:
        """Take over the emulator's hooks (chaining hooks already set) and start the node sync."""
        self._user_active, self._user_deleted = self.emu.on_cluster_active, self.emu.on_cluster_deleted
        self.emu.kubeconfig_factory = self.kubeconfig
        self.emu.on_cluster_active = self._on_active
        self.emu.on_cluster_deleted = self._on_deleted
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="vke-twin", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            for cluster_id in list(self.workloads):
                self._stop_workload(cluster_id)

    def kubeconfig(self, cluster: Obj) -> str:
        """The workload API's kubeconfig; before the cluster is active, Vultr's unroutable default."""
        from lab.vultr.server import default_kubeconfig

        with self._lock:
            api = self.workloads.get(cluster["id"])
            if api is None and cluster.get("status") == "active":
                api = self._start_workload(cluster)
        return api.kubeconfig_path.read_text() if api is not None else default_kubeconfig(cluster)

    def _on_active(self, cluster: Obj) -> None:
        with self._lock:
            if cluster["id"] not in self.workloads:
                self._start_workload(cluster)
        self.sync()
        if self._user_active is not None:
            self._user_active(cluster)

    def _on_deleted(self, cluster: Obj) -> None:
        with self._lock:
            self._stop_workload(cluster["id"])
        if self._user_deleted is not None:
            self._user_deleted(cluster)

    def _start_workload(self, cluster: Obj) -> KubeEmulator:
        name = f"vke-{cluster['id'][:8]}"
        state_dir = self.state_dir / name if self.state_dir is not None else None
        api = KubeEmulator(self.delay_scale, token=f"lab-vke-token-{cluster['id']}", name=name, state_dir=state_dir)
        api.start()
        api.gpu.install_operator_validator(ready_after=self.validator_ready_after)
        self.workloads[cluster["id"]] = api
        with _WORKLOADS_LOCK:
            WORKLOADS[api.url] = api
        return api

    def _stop_workload(self, cluster_id: str) -> None:
        api = self.workloads.pop(cluster_id, None)
        if api is None:
            return
        with _WORKLOADS_LOCK:
            WORKLOADS.pop(api.url, None)
        api.stop()

    # ---- node sync ------------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.wait(SYNC_SECONDS):
            self.sync()

    def sync(self) -> None:
        """Make each workload API's nodes match the active Vultr nodes of its pools."""
        with self._lock:
            for cluster_id, api in list(self.workloads.items()):
                try:
                    self._sync_cluster(cluster_id, api)
                except Exception:  # recorded for the tests, never kills the sync thread
                    self.errors.append(traceback.format_exc())
                    self.emu.internal_errors.append(f"vke twin sync: {traceback.format_exc()}")

    def _desired(self, cluster_id: str) -> dict[str, tuple[Obj, Obj]]:
        state = self.emu.state
        with state.lock:
            cluster = state.clusters.get(cluster_id)
            if cluster is None:
                return {}
            rendered = cluster.render()
        return {
            node["label"]: (pool, node)
            for pool in rendered["node_pools"]
            for node in pool["nodes"]
            if node["status"] == "active"
        }

    def _sync_cluster(self, cluster_id: str, api: KubeEmulator) -> None:
        desired = self._desired(cluster_id)
        existing = {n["metadata"]["name"]: n for n in api.list("v1", "Node", label_selector=f"{MANAGED_LABEL}=true")}
        for name in existing.keys() - desired.keys():
            with contextlib.suppress(ApiError):
                api.delete("v1", "Node", name)
        for name, (pool, node) in desired.items():
            labels = self._labels(pool)
            taints = [{"key": t["key"], "value": t["value"], "effect": t["effect"]} for t in pool["taints"]]
            current = existing.get(name)
            if current is None:
                self._add_node(api, name, pool, node, labels=labels, taints=taints)
                continue
            have = current["metadata"].get("labels") or {}
            if (
                any(have.get(k) != v for k, v in labels.items())
                or (current.get("spec") or {}).get("taints", []) != taints
            ):
                api.patch("v1", "Node", name, {"metadata": {"labels": labels}, "spec": {"taints": taints or None}})

    @staticmethod
    def _labels(pool: Obj) -> dict[str, str]:
        return {MANAGED_LABEL: "true", POOL_LABEL: pool["label"], **(pool.get("labels") or {})}

    @staticmethod
    def _add_node(
        api: KubeEmulator, name: str, pool: Obj, node: Obj, *, labels: dict[str, str], taints: list[Obj]
    ) -> None:
        gpus = plan_gpus(pool["plan"])
        if gpus is not None:
            extra = {"node.kubernetes.io/instance-type": pool["plan"]}
            if gpus.fraction < 1.0:
                extra["nvidia.com/gpu.memory"] = str(gpus.vram_gb * 1024)
                extra["lab.metalplane.io/gpu-fraction"] = str(gpus.fraction)
            api.gpu.add_gpu_node(name, gpus=gpus.count, product=gpus.product, labels={**extra, **labels}, taints=taints)
        else:
            api.create(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": name,
                        "labels": {
                            "kubernetes.io/hostname": name,
                            "kubernetes.io/os": "linux",
                            "kubernetes.io/arch": "amd64",
                            "node.kubernetes.io/instance-type": pool["plan"],
                            **labels,
                        },
                    },
                    "spec": {"taints": taints} if taints else {},
                    "status": {
                        "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                        "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                        "addresses": [{"type": "InternalIP", "address": node.get("ip") or "10.0.0.20"}],
                    },
                }
            )
