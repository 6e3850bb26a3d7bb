"""The VKE emulator's world: catalogue (regions, plans, versions) and the stateful clusters.

Why a separate module: the HTTP layer (``lab.vultr.server``) only parses requests and renders envelopes; the
rules that make the emulator useful for idempotence tests live here, next to the facts they come from
(Vultr's API v2 documentation, https://www.vultr.com/api/, and its OpenAPI spec; govultr and
terraform-provider-vultr; each fact names its source below, ``docs/lab/vultr.md`` lists them).

Time is modelled lazily: every pending object carries a ``ready_at`` instant on a monotonic clock and
``VkeState.advance()`` moves whatever is due to ``active``. The emulator calls ``advance()`` before
each request and from a slow ticker thread, so a client that polls sees ``active`` as soon as the
delay has passed, and lifecycle hooks fire even when nobody polls. ``delay_scale=0`` makes every
object due at once: the create response still says ``pending`` (as Vultr's does), the next read says
``active``.
"""

from __future__ import annotations

import base64
import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

# --------------------------------------------------------------------------------------------------
# Errors: every failure the API answers with is ``{"error": <text>, "status": <int>}`` (observed
# bodies; the spec has no error schema, Terraform's ``vultr/utility.go::checkIsMissing`` reads them).


class ApiError(Exception):
    """An HTTP error answer; ``body`` is exactly what Vultr sends."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    @property
    def body(self) -> dict[str, Any]:
        return {"error": self.message, "status": self.status}


# Observed messages. Terraform and clients match on these strings, so keep them verbatim.
MSG_BAD_REQUEST = "Bad request."
MSG_NOT_FOUND = "Not found."
MSG_INVALID_RESOURCE = "Invalid resource ID"
MSG_INVALID_NODEPOOL = "Invalid NodePool ID"
MSG_POOL_LABEL_UNIQUE = "Node pool labels must be unique"
MSG_UPGRADE_INVALID = "VKE server error: Cluster upgrade failed: invalid upgrade version"
# [unverified] no public source shows the text of the vpc_only failure; it was reported to this project as a 500.
MSG_VPC_ONLY_FAILED = "VKE server error: Cluster creation failed: unable to provision VPC-only node pool"


def bad_request(message: str = MSG_BAD_REQUEST) -> ApiError:
    return ApiError(400, message)


# --------------------------------------------------------------------------------------------------
# Catalogue


@dataclass(frozen=True)
class Plan:
    id: str
    type: str
    vcpu_count: int
    ram: int  # MB
    disk: int  # GB
    bandwidth: int  # GB/month
    monthly_cost: int
    locations: tuple[str, ...]
    gpu_type: str | None = None
    gpu_vram_gb: int | None = None  # total VRAM of the plan (govultr plans.go), not per GPU

    def render(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            # The overlay's ``plans`` schema lists ``name``; the live API's plans have no such field
            # that any source shows, so it simply repeats the id.
            "name": self.id,
            "vcpu_count": self.vcpu_count,
            "ram": self.ram,
            "disk": self.disk,
            "disk_count": 1,
            "bandwidth": self.bandwidth,
            "monthly_cost": self.monthly_cost,
            "type": self.type,
            "locations": list(self.locations),
        }
        if self.gpu_type is not None:
            # Not in the overlay (a known spec gap, see lab.vultr.contract.KNOWN_RESPONSE_GAPS); the
            # live API sends them (govultr plans.go, Terraform data_source_vultr_plan.go).
            out["gpu_vram_gb"] = self.gpu_vram_gb
            out["gpu_type"] = self.gpu_type
        return out


ALL_REGIONS: tuple[str, ...] = ("ewr", "ord", "lax", "sjc", "sea", "ams", "fra", "nrt")
GPU_REGIONS: tuple[str, ...] = ("ewr", "ord", "lax", "ams")

REGIONS: tuple[dict[str, Any], ...] = (
    {"id": "ewr", "city": "New Jersey", "country": "US", "continent": "North America"},
    {"id": "ord", "city": "Chicago", "country": "US", "continent": "North America"},
    {"id": "lax", "city": "Los Angeles", "country": "US", "continent": "North America"},
    {"id": "sjc", "city": "Silicon Valley", "country": "US", "continent": "North America"},
    {"id": "sea", "city": "Seattle", "country": "US", "continent": "North America"},
    {"id": "ams", "city": "Amsterdam", "country": "NL", "continent": "Europe"},
    {"id": "fra", "city": "Frankfurt", "country": "DE", "continent": "Europe"},
    {"id": "nrt", "city": "Tokyo", "country": "JP", "continent": "Asia"},
    # A region without VKE: creating a cluster there is refused.
    {"id": "dfw", "city": "Dallas", "country": "US", "continent": "North America", "no_kubernetes": True},
)


# Ids are irregular on purpose (``-1914gb-``, as Vultr names them); whole-GPU plans report type ``vdm``, fractional
# slices ``vcg`` [3rd-party], so ``type=vcg`` alone misses most GPU plans (query ``type=all``).
# Rows: id, type, vCPUs, RAM MB, disk GB, monthly cost, GPU type, total VRAM GB.
_PLAN_ROWS: tuple[tuple[str, str, int, int, int, int, str | None, int | None], ...] = (
    ("vc2-1c-1gb", "vc2", 1, 1024, 25, 5, None, None),
    ("vc2-1c-2gb", "vc2", 1, 2048, 55, 10, None, None),
    ("vc2-2c-4gb", "vc2", 2, 4096, 80, 20, None, None),
    ("vc2-4c-8gb", "vc2", 4, 8192, 160, 40, None, None),
    ("vc2-6c-16gb", "vc2", 6, 16384, 320, 80, None, None),
    ("vc2-8c-32gb", "vc2", 8, 32768, 640, 160, None, None),
    ("vhf-2c-4gb", "vhf", 2, 4096, 128, 24, None, None),
    ("vhf-4c-16gb", "vhf", 4, 16384, 384, 96, None, None),
    ("vcg-a16-2c-8g-2vram", "vcg", 2, 8192, 50, 43, "NVIDIA_A16", 2),
    ("vcg-a16-2c-16g-4vram", "vcg", 2, 16384, 80, 86, "NVIDIA_A16", 4),
    ("vcg-a16-6c-64g-16vram", "vdm", 6, 65536, 350, 343, "NVIDIA_A16", 16),
    ("vcg-a40-8c-40g-16vram", "vcg", 8, 40960, 350, 640, "NVIDIA_A40", 16),
    ("vcg-a40-12c-60g-24vram", "vcg", 12, 61440, 700, 960, "NVIDIA_A40", 24),
    ("vcg-a100-1c-6g-4vram", "vcg", 1, 6144, 70, 90, "NVIDIA_A100", 4),
    ("vcg-a100-12c-120g-80vram", "vdm", 12, 122880, 1400, 1750, "NVIDIA_A100", 80),
    ("vcg-a100-96c-960g-640vram", "vdm", 96, 983040, 11200, 14000, "NVIDIA_A100", 640),
    ("vcg-l40s-16c-180g-48vram", "vdm", 16, 184320, 1200, 1226, "NVIDIA_L40S", 48),
    ("vcg-h100-216c-1914gb-640vram", "vdm", 216, 1959936, 30000, 18000, "NVIDIA_H100", 640),
    ("vcg-b200-248c-2826g-1536vram", "vdm", 248, 2893824, 30000, 31000, "NVIDIA_B200", 1536),
)
PLANS: tuple[Plan, ...] = tuple(
    Plan(
        pid,
        ptype,
        vcpu,
        ram,
        disk,
        10240 if gpu else max(1024, ram // 4),
        cost,
        GPU_REGIONS if gpu else (*ALL_REGIONS, "dfw"),
        gpu,
        vram,
    )
    for pid, ptype, vcpu, ram, disk, cost, gpu, vram in _PLAN_ROWS
)

# The GPU plans seen in VKE node pools (Crossplane/Modelplane 2026, a third-party source). No API lists them, hence
# the ``gpu_plans`` knob.
DEFAULT_GPU_PLANS: tuple[str, ...] = (
    "vcg-a16-6c-64g-16vram",
    "vcg-a40-8c-40g-16vram",
    "vcg-a40-12c-60g-24vram",
    "vcg-l40s-16c-180g-48vram",
)

# Newest first, as ``/kubernetes/versions`` lists them; ``vMAJOR.MINOR.PATCH+N`` (the spec's examples).
DEFAULT_VERSIONS: tuple[str, ...] = ("v1.36.2+1", "v1.35.6+1", "v1.34.9+2")

_VERSION_RE = re.compile(r"^v(\d+)\.(\d+)\.(\d+)\+(\d+)$")


def version_key(version: str) -> tuple[int, int, int, int]:
    match = _VERSION_RE.match(version)
    if match is None:
        return (0, 0, 0, 0)
    return (int(match[1]), int(match[2]), int(match[3]), int(match[4]))


@dataclass
class Delays:
    """Seconds at ``delay_scale=1``; each is multiplied by the scale. Real VKE takes minutes."""

    cluster: float = 30.0  # cluster pending -> active
    node: float = 20.0  # a node pending -> active (pool is active when all its nodes are)
    upgrade: float = 30.0  # accepted upgrade -> version changed
    delete: float = 5.0  # DELETE accepted -> cluster gone (404)


# --------------------------------------------------------------------------------------------------
# State objects


def _timestamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S+00:00")


@dataclass
class Node:
    id: str
    label: str
    date_created: str
    ready_at: float
    status: str = "pending"
    ip: str = ""

    def render(self) -> dict[str, Any]:
        # ``status`` is missing from the overlay schema although every example has it.
        return {
            "id": self.id,
            "label": self.label,
            "date_created": self.date_created,
            "status": self.status,
            "ip": self.ip,
        }


@dataclass
class PoolLabel:
    id: str
    key: str
    value: str

    def render(self) -> dict[str, Any]:
        return {"id": self.id, "key": self.key, "value": self.value}


@dataclass
class PoolTaint:
    id: str
    key: str
    value: str
    effect: str

    def render(self) -> dict[str, Any]:
        return {"id": self.id, "key": self.key, "value": self.value, "effect": self.effect}


@dataclass
class NodePool:
    id: str
    label: str
    plan: str
    tag: str
    date_created: str
    date_updated: str
    node_quantity: int
    auto_scaler: bool
    min_nodes: int
    max_nodes: int
    user_data: str
    vpc_only: bool
    nodes: list[Node] = field(default_factory=list)
    labels: list[PoolLabel] = field(default_factory=list)
    taints: list[PoolTaint] = field(default_factory=list)

    @property
    def status(self) -> str:
        return "active" if all(n.status == "active" for n in self.nodes) else "pending"

    def render(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "date_created": self.date_created,
            "date_updated": self.date_updated,
            "label": self.label,
            "tag": self.tag,
            "plan": self.plan,
            "status": self.status,
            "node_quantity": self.node_quantity,
            "min_nodes": self.min_nodes,
            "max_nodes": self.max_nodes,
            "auto_scaler": self.auto_scaler,
            # The spec's response example shows ``"labels": null, "taints": []`` when none are set.
            "labels": {lb.key: lb.value for lb in self.labels} or None,
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in self.taints],
            "user_data": self.user_data,
            "vpc_only": self.vpc_only,
            "nodes": [n.render() for n in self.nodes],
        }


@dataclass
class Cluster:
    id: str
    label: str
    region: str
    version: str
    ha_controlplanes: bool
    firewall_group_id: str
    vpc_id: str
    date_created: str
    ready_at: float
    oidc: dict[str, str]
    status: str = "pending"
    ip: str = "0.0.0.0"
    node_pools: list[NodePool] = field(default_factory=list)
    upgrade_to: str | None = None
    upgrade_at: float = 0.0
    gone_at: float | None = None  # set by DELETE: the cluster stays visible until then
    with_linked_resources: bool = False

    def render(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "firewall_group_id": self.firewall_group_id,
            "label": self.label,
            "date_created": self.date_created,
            "cluster_subnet": "10.244.0.0/16",
            "service_subnet": "10.96.0.0/12",
            "ip": self.ip,
            "endpoint": f"{self.id}.vultr-k8s.com",
            "version": self.version,
            "region": self.region,
            "status": self.status,
            "ha_controlplanes": self.ha_controlplanes,
            "node_pools": [p.render() for p in self.node_pools],
            # [unverified] the shape of an unset oidc; the overlay documents the four keys.
            "oidc": {k: self.oidc.get(k, "") for k in ("issuer_url", "client_id", "username_claim", "groups_claim")},
            "vpcs": [{"id": self.vpc_id, "version": 2, "subnet": "10.1.96.0/20"}],
        }

    def pool(self, pool_id: str) -> NodePool:
        for pool in self.node_pools:
            if pool.id == pool_id:
                return pool
        raise ApiError(404, MSG_INVALID_NODEPOOL)


# --------------------------------------------------------------------------------------------------
# Request-body helpers: the real API is a Go service, so a wrong JSON type fails decoding with 400.

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _opt(body: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
    if key not in body or body[key] is None:
        return default
    value = body[key]
    # bool is an int in Python; JSON booleans must not pass as integers and vice versa.
    if (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
        raise bad_request()
    return value


def _req(body: dict[str, Any], key: str, kind: type) -> Any:
    value = _opt(body, key, kind)
    if value is None or (kind is str and value == ""):
        raise bad_request()
    return value


def _labels_arg(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise bad_request()
    if any(not k for k in value):
        raise bad_request()
    return dict(value)


def _taints_arg(value: Any) -> list[tuple[str, str, str]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad_request()
    out = []
    for item in value:
        if not isinstance(item, dict):
            raise bad_request()
        key, val, effect = item.get("key"), item.get("value", ""), item.get("effect")
        if not isinstance(key, str) or not key or not isinstance(val, str) or effect not in TAINT_EFFECTS:
            raise bad_request()
        out.append((key, val, effect))
    return out


# --------------------------------------------------------------------------------------------------
# The state

Hook = Callable[[dict[str, Any]], None]


class VkeState:
    """All clusters, guarded by one lock. Methods raise ``ApiError`` for API-visible failures."""

    def __init__(
        self,
        *,
        delay_scale: float,
        delays: Delays | None = None,
        gpu_plans: Iterable[str] | None = None,
        versions: Iterable[str] | None = None,
        vpc_only_fails: bool = True,
        vpc_only_partial: bool = False,
        seed: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lock = threading.RLock()
        self.delay_scale = delay_scale
        self.delays = delays or Delays()
        self.gpu_plans = tuple(DEFAULT_GPU_PLANS if gpu_plans is None else gpu_plans)
        self.versions = tuple(DEFAULT_VERSIONS if versions is None else versions)
        self.vpc_only_fails = vpc_only_fails
        # With vpc_only_fails: create the cluster (or pool) anyway, THEN answer 500 (a partial create
        # that a client must find and delete). Off: the 500 creates nothing.
        self.vpc_only_partial = vpc_only_partial
        self.plans = {p.id: p for p in PLANS}
        self.regions = {r["id"]: r for r in REGIONS}
        self.clock = clock
        self._ids = random.Random(seed)
        self._ip_counter = 10
        self.clusters: dict[str, Cluster] = {}
        # Every deletion that completed, for assertions: (cluster id, with linked resources).
        self.deleted: list[tuple[str, bool]] = []

    # ---- helpers --------------------------------------------------------------------------------

    def new_id(self) -> str:
        return str(uuid.UUID(int=self._ids.getrandbits(128), version=4))

    def _due(self, seconds: float) -> float:
        return self.clock() + seconds * self.delay_scale

    def _next_ip(self, prefix: str) -> str:
        self._ip_counter += 1
        return f"{prefix}.{self._ip_counter // 250}.{self._ip_counter % 250 + 1}"

    def _new_node(self, pool_label: str) -> Node:
        suffix = f"{self._ids.getrandbits(52):013x}"
        return Node(self.new_id(), f"{pool_label}-{suffix}", _timestamp(), self._due(self.delays.node))

    def cluster(self, cluster_id: str) -> Cluster:
        cluster = self.clusters.get(cluster_id)
        if cluster is None:
            raise ApiError(404, MSG_INVALID_RESOURCE)
        return cluster

    # ---- time -----------------------------------------------------------------------------------

    def advance(self) -> list[tuple[str, dict[str, Any]]]:
        """Move every due object forward; return lifecycle events ("active"/"deleted", cluster)."""
        events: list[tuple[str, dict[str, Any]]] = []
        now = self.clock()
        with self.lock:
            for cluster in list(self.clusters.values()):
                if cluster.gone_at is not None and now >= cluster.gone_at:
                    del self.clusters[cluster.id]
                    self.deleted.append((cluster.id, cluster.with_linked_resources))
                    events.append(("deleted", cluster.render()))
                    continue
                for pool in cluster.node_pools:
                    for node in pool.nodes:
                        if node.status != "active" and now >= node.ready_at:
                            node.status = "active"
                            node.ip = "" if pool.vpc_only else self._next_ip("198.51")
                if cluster.status != "active" and now >= cluster.ready_at:
                    cluster.status = "active"
                    cluster.ip = self._next_ip("203.0")
                    events.append(("active", cluster.render()))
                if cluster.upgrade_to is not None and now >= cluster.upgrade_at:
                    cluster.version, cluster.upgrade_to = cluster.upgrade_to, None
        return events

    # ---- validation shared by cluster and pool creation ------------------------------------------

    def _check_plan(self, plan_id: str, region: str) -> None:
        plan = self.plans.get(plan_id)
        if plan is None:
            raise bad_request("Invalid plan.")
        if region not in plan.locations:
            raise bad_request("Plan is not available in the selected region.")
        if plan.gpu_type is not None:
            eligible = plan.id in self.gpu_plans
        else:
            # "minimum plan must be $10" (spec), ">= 1 core and 2 GB" (Terraform docs).
            eligible = plan.monthly_cost >= 10 and plan.ram >= 2048
        if not eligible:
            # [3rd-party] a plan that VKE does not accept fails with this (misleading) message.
            raise bad_request(MSG_INVALID_NODEPOOL)

    def _parse_pool(self, body: Any, region: str) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise bad_request()
        spec = {
            "node_quantity": _req(body, "node_quantity", int),
            "label": _req(body, "label", str),
            "plan": _req(body, "plan", str),
            "tag": _opt(body, "tag", str, ""),
            "auto_scaler": _opt(body, "auto_scaler", bool, False),
            "min_nodes": _opt(body, "min_nodes", int, 1),
            "max_nodes": _opt(body, "max_nodes", int, 1),
            "user_data": _opt(body, "user_data", str, ""),
            "vpc_only": _opt(body, "vpc_only", bool, False),
            "labels": _labels_arg(body.get("labels")),
            "taints": _taints_arg(body.get("taints")),
        }
        if spec["node_quantity"] < 1:
            raise bad_request("node_quantity must be at least 1.")
        if spec["auto_scaler"] and not 1 <= spec["min_nodes"] <= spec["max_nodes"]:
            raise bad_request("min_nodes must be at least 1 and no greater than max_nodes.")
        self._check_plan(spec["plan"], region)
        return spec

    def _build_pool(self, spec: dict[str, Any]) -> NodePool:
        now = _timestamp()
        pool = NodePool(
            id=self.new_id(),
            label=spec["label"],
            plan=spec["plan"],
            tag=spec["tag"],
            date_created=now,
            date_updated=now,
            node_quantity=spec["node_quantity"],
            auto_scaler=spec["auto_scaler"],
            min_nodes=spec["min_nodes"],
            max_nodes=spec["max_nodes"],
            user_data=spec["user_data"],
            vpc_only=spec["vpc_only"],
        )
        pool.nodes = [self._new_node(pool.label) for _attempt in range(pool.node_quantity)]
        pool.labels = [PoolLabel(self.new_id(), k, v) for k, v in spec["labels"].items()]
        pool.taints = [PoolTaint(self.new_id(), k, v, e) for k, v, e in spec["taints"]]
        return pool

    # ---- clusters -------------------------------------------------------------------------------

    def create_cluster(self, body: dict[str, Any]) -> dict[str, Any]:
        region = _req(body, "region", str)
        version = _req(body, "version", str)
        label = _opt(body, "label", str, "")
        ha = _opt(body, "ha_controlplanes", bool, False)
        firewall = _opt(body, "enable_firewall", bool, False)
        vpc_id = _opt(body, "vpc_id", str, "")
        oidc = _opt(body, "oidc", dict, {})
        pools_body = _opt(body, "node_pools", list, [])
        reg = self.regions.get(region)
        if reg is None or reg.get("no_kubernetes"):
            raise bad_request("Invalid region.")
        if version not in self.versions:
            raise bad_request("Invalid Kubernetes version.")
        if not pools_body:
            # The first node pool is required at cluster creation (the spec: ``node_pools`` on create).
            raise bad_request("At least one node pool is required.")
        specs = [self._parse_pool(p, region) for p in pools_body]
        if len({s["label"] for s in specs}) != len(specs):
            raise bad_request(MSG_POOL_LABEL_UNIQUE)
        vpc_only_failure = self.vpc_only_fails and any(s["vpc_only"] for s in specs)
        if vpc_only_failure and not self.vpc_only_partial:
            # Reported to this project: VKE has failed cluster creation with HTTP 500 for vpc_only. Nothing is created.
            raise ApiError(500, MSG_VPC_ONLY_FAILED)
        with self.lock:
            cluster = Cluster(
                id=self.new_id(),
                label=label,
                region=region,
                version=version,
                ha_controlplanes=ha,
                firewall_group_id=self.new_id() if firewall else "",
                vpc_id=vpc_id or self.new_id(),
                date_created=_timestamp(),
                ready_at=self._due(self.delays.cluster),
                oidc={k: str(v) for k, v in oidc.items()},
            )
            cluster.node_pools = [self._build_pool(s) for s in specs]
            self.clusters[cluster.id] = cluster
            if vpc_only_failure:  # vpc_only_partial: the cluster exists, the answer is a 500 all the same
                raise ApiError(500, MSG_VPC_ONLY_FAILED)
            return cluster.render()

    def list_clusters(self) -> list[dict[str, Any]]:
        with self.lock:
            return [c.render() for c in self.clusters.values()]

    def get_cluster(self, cluster_id: str) -> dict[str, Any]:
        with self.lock:
            return self.cluster(cluster_id).render()

    def update_cluster(self, cluster_id: str, body: dict[str, Any]) -> None:
        # Only ``label`` and ``oidc`` can change (the PUT schema). Create-only fields (region, vpc_id,
        # ha_controlplanes, enable_firewall) are not in the PUT schema: like the live API (a Go
        # decoder), they are ignored here, and the contract check reports them as violations.
        label = _req(body, "label", str)
        oidc = _opt(body, "oidc", dict, None)
        with self.lock:
            cluster = self.cluster(cluster_id)
            cluster.label = label
            if oidc is not None:
                cluster.oidc = {k: str(v) for k, v in oidc.items()}

    def delete_cluster(self, cluster_id: str, *, linked: bool) -> None:
        with self.lock:
            cluster = self.cluster(cluster_id)
            if cluster.gone_at is None:
                cluster.gone_at = self._due(self.delays.delete)
                cluster.with_linked_resources = linked

    def available_upgrades(self, cluster_id: str) -> list[str]:
        with self.lock:
            cluster = self.cluster(cluster_id)
            if cluster.upgrade_to is not None:
                return []
            current = version_key(cluster.version)
            # One minor step at a time, newer than the current version [unverified but usual for
            # managed Kubernetes]; newest first like /kubernetes/versions.
            return [
                v
                for v in self.versions
                if version_key(v) > current and version_key(v)[:2] <= (current[0], current[1] + 1)
            ]

    def start_upgrade(self, cluster_id: str, body: dict[str, Any]) -> None:
        target = _req(body, "upgrade_version", str)
        with self.lock:
            cluster = self.cluster(cluster_id)
            if target not in self.available_upgrades(cluster_id):
                # An invalid or archived version is a 500, not a 400 (bluedotimpact/bluedot PR #1189).
                raise ApiError(500, MSG_UPGRADE_INVALID)
            # [unverified] the cluster status during an upgrade; it stays as it is and the version
            # changes once the upgrade delay has passed.
            cluster.upgrade_to = target
            cluster.upgrade_at = self._due(self.delays.upgrade)

    def kube_config(self, cluster_id: str, factory: Callable[[dict[str, Any]], str]) -> str:
        with self.lock:
            rendered = self.cluster(cluster_id).render()
        return base64.b64encode(factory(rendered).encode()).decode()

    def resources(self, cluster_id: str) -> dict[str, Any]:
        with self.lock:
            self.cluster(cluster_id)
        # The emulator creates no volumes or load balancers.
        return {"block_storage": [], "load_balancer": []}

    # ---- node pools -----------------------------------------------------------------------------

    def create_pool(self, cluster_id: str, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            cluster = self.cluster(cluster_id)
            spec = self._parse_pool(body, cluster.region)
            if any(p.label == spec["label"] for p in cluster.node_pools):
                raise bad_request(MSG_POOL_LABEL_UNIQUE)
            if self.vpc_only_fails and spec["vpc_only"] and not self.vpc_only_partial:
                raise ApiError(500, MSG_VPC_ONLY_FAILED)
            pool = self._build_pool(spec)
            cluster.node_pools.append(pool)
            if self.vpc_only_fails and spec["vpc_only"]:  # vpc_only_partial: created, then a 500
                raise ApiError(500, MSG_VPC_ONLY_FAILED)
            return pool.render()

    def list_pools(self, cluster_id: str) -> list[dict[str, Any]]:
        with self.lock:
            return [p.render() for p in self.cluster(cluster_id).node_pools]

    def get_pool(self, cluster_id: str, pool_id: str) -> dict[str, Any]:
        with self.lock:
            return self.cluster(cluster_id).pool(pool_id).render()

    def update_pool(self, cluster_id: str, pool_id: str, body: dict[str, Any]) -> dict[str, Any]:
        # PATCH: every field optional. ``label``, ``plan`` and ``vpc_only`` are create-only (govultr NodePoolReqUpdate):
        # ignored here like the live API, reported by the contract check.
        quantity = _opt(body, "node_quantity", int)
        tag = _opt(body, "tag", str)
        auto_scaler = _opt(body, "auto_scaler", bool)
        min_nodes = _opt(body, "min_nodes", int)
        max_nodes = _opt(body, "max_nodes", int)
        user_data = _opt(body, "user_data", str)
        labels = _labels_arg(body.get("labels"))
        taints = _taints_arg(body.get("taints"))
        with self.lock:
            pool = self.cluster(cluster_id).pool(pool_id)
            new_auto = pool.auto_scaler if auto_scaler is None else auto_scaler
            new_min = pool.min_nodes if min_nodes is None else min_nodes
            new_max = pool.max_nodes if max_nodes is None else max_nodes
            if quantity is not None and quantity < 1:
                raise bad_request("node_quantity must be at least 1.")
            if new_auto and not 1 <= new_min <= new_max:
                raise bad_request("min_nodes must be at least 1 and no greater than max_nodes.")
            pool.auto_scaler, pool.min_nodes, pool.max_nodes = new_auto, new_min, new_max
            if tag is not None:
                pool.tag = tag
            if user_data is not None:
                pool.user_data = user_data
            if quantity is not None:
                self._resize(pool, quantity)
            # Additive (the spec's PATCH description): PATCH adds or overwrites, never removes.
            for key, value in labels.items():
                existing = next((lb for lb in pool.labels if lb.key == key), None)
                if existing is None:
                    pool.labels.append(PoolLabel(self.new_id(), key, value))
                else:
                    existing.value = value
            for key, value, effect in taints:
                same = next((t for t in pool.taints if t.key == key and t.effect == effect), None)
                if same is None:
                    pool.taints.append(PoolTaint(self.new_id(), key, value, effect))
                else:
                    same.value = value
            pool.date_updated = _timestamp()
            return pool.render()

    def _resize(self, pool: NodePool, quantity: int) -> None:
        while len(pool.nodes) < quantity:
            pool.nodes.append(self._new_node(pool.label))
        del pool.nodes[quantity:]  # scale-in removes the newest nodes
        pool.node_quantity = quantity

    def delete_pool(self, cluster_id: str, pool_id: str) -> None:
        with self.lock:
            cluster = self.cluster(cluster_id)
            pool = cluster.pool(pool_id)
            if len(cluster.node_pools) == 1:
                # [unverified] a cluster keeps at least one pool (Terraform PR #248: the first pool can be deleted
                # once another exists).
                raise bad_request("A cluster must have at least one node pool.")
            cluster.node_pools.remove(pool)

    def list_nodes(self, cluster_id: str, pool_id: str) -> list[dict[str, Any]]:
        with self.lock:
            return [n.render() for n in self.cluster(cluster_id).pool(pool_id).nodes]

    def _node(self, pool: NodePool, node_id: str) -> Node:
        for node in pool.nodes:
            if node.id == node_id:
                return node
        raise ApiError(404, MSG_INVALID_RESOURCE)

    def delete_node(self, cluster_id: str, pool_id: str, node_id: str) -> None:
        with self.lock:
            pool = self.cluster(cluster_id).pool(pool_id)
            node = self._node(pool, node_id)
            if len(pool.nodes) == 1:
                raise bad_request("A node pool must have at least one node.")
            pool.nodes.remove(node)
            pool.node_quantity = len(pool.nodes)

    def recycle_node(self, cluster_id: str, pool_id: str, node_id: str) -> None:
        with self.lock:
            node = self._node(self.cluster(cluster_id).pool(pool_id), node_id)
            node.status, node.ip, node.ready_at = "pending", "", self._due(self.delays.node)

    # ---- per-pool labels and taints (spec-2026, govultr #415) -------------------------------------------

    def list_labels(self, cluster_id: str, pool_id: str) -> list[dict[str, Any]]:
        with self.lock:
            return [lb.render() for lb in self.cluster(cluster_id).pool(pool_id).labels]

    def add_label(self, cluster_id: str, pool_id: str, body: dict[str, Any]) -> dict[str, Any]:
        key, value = _req(body, "key", str), _opt(body, "value", str, "")
        with self.lock:
            pool = self.cluster(cluster_id).pool(pool_id)
            if any(lb.key == key for lb in pool.labels):
                # [unverified] spec-2026 lists 422 here; the overlay has no 422, so 400 is used.
                raise bad_request(f"Label with key {key} already exists.")
            label = PoolLabel(self.new_id(), key, value)
            pool.labels.append(label)
            pool.date_updated = _timestamp()
            return label.render()

    def _label(self, pool: NodePool, label_id: str) -> PoolLabel:
        for label in pool.labels:
            if label.id == label_id:
                return label
        raise ApiError(404, MSG_NOT_FOUND)

    def get_label(self, cluster_id: str, pool_id: str, label_id: str) -> dict[str, Any]:
        with self.lock:
            return self._label(self.cluster(cluster_id).pool(pool_id), label_id).render()

    def delete_label(self, cluster_id: str, pool_id: str, label_id: str) -> None:
        with self.lock:
            pool = self.cluster(cluster_id).pool(pool_id)
            pool.labels.remove(self._label(pool, label_id))
            pool.date_updated = _timestamp()

    def list_taints(self, cluster_id: str, pool_id: str) -> list[dict[str, Any]]:
        with self.lock:
            return [t.render() for t in self.cluster(cluster_id).pool(pool_id).taints]

    def add_taint(self, cluster_id: str, pool_id: str, body: dict[str, Any]) -> dict[str, Any]:
        ((key, value, effect),) = _taints_arg([body])
        with self.lock:
            pool = self.cluster(cluster_id).pool(pool_id)
            if any(t.key == key and t.effect == effect for t in pool.taints):
                raise bad_request(f"Taint with key {key} and effect {effect} already exists.")
            taint = PoolTaint(self.new_id(), key, value, effect)
            pool.taints.append(taint)
            pool.date_updated = _timestamp()
            return taint.render()

    def _taint(self, pool: NodePool, taint_id: str) -> PoolTaint:
        for taint in pool.taints:
            if taint.id == taint_id:
                return taint
        raise ApiError(404, MSG_NOT_FOUND)

    def get_taint(self, cluster_id: str, pool_id: str, taint_id: str) -> dict[str, Any]:
        with self.lock:
            return self._taint(self.cluster(cluster_id).pool(pool_id), taint_id).render()

    def delete_taint(self, cluster_id: str, pool_id: str, taint_id: str) -> None:
        with self.lock:
            pool = self.cluster(cluster_id).pool(pool_id)
            pool.taints.remove(self._taint(pool, taint_id))
            pool.date_updated = _timestamp()

    # ---- catalogue ------------------------------------------------------------------------------

    def list_plans(self, plan_type: str | None) -> list[dict[str, Any]]:
        return [p.render() for p in PLANS if plan_type in (None, "", "all") or p.type == plan_type]

    def list_regions(self) -> list[dict[str, Any]]:
        out = []
        for reg in REGIONS:
            options = ["ddos_protection", "block_storage_high_perf", "block_storage_storage_opt"]
            if not reg.get("no_kubernetes"):
                options.append("kubernetes")
            out.append({k: reg[k] for k in ("id", "city", "country", "continent")} | {"options": options})
        return out

    def availability(self, region: str, plan_type: str | None) -> list[str]:
        # An unknown region answers an empty list: the overlay documents only a 200 here.
        return [
            p.id for p in PLANS if region in p.locations and (plan_type in (None, "", "all") or p.type == plan_type)
        ]
