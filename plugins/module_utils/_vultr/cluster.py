# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cluster planner: identity (label + ownership marker), create body and drift of create-only fields.

Why the marker is a node-pool tag: a VKE cluster object has no tag, description or metadata field
(the overlay's ``vke-cluster`` schema: id, label, region, version, status, ha_controlplanes,
firewall_group_id, oidc, vpcs, node_pools, ...), and its label is the user's name. Node pools do have
a ``tag``. The system pool is created *inline, in the same POST* as the cluster, with
``tag: metalplane.inference/cluster``, so there is no moment at which one of our clusters exists
without its marker, and a lost create response can be recovered by listing clusters and matching
label + marker. A cluster "is ours" when one of its pools carries that tag. Deleting or re-tagging
the system pool therefore disowns the cluster (``force: true`` is then needed to delete it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError

from .node_pool import POOL_LABEL_KEY, PoolSpec, is_vke_label, plan_pool, pool_spec_from_params
from .versions import LATEST, is_exact, matches, normalise, version_key

CLUSTER_OWNER_TAG = "metalplane.inference/cluster"  # tag of the inline system pool = cluster marker
# The system pool's defaults, applied here and declared by ``vke_cluster``'s argument spec
# (``pool_args.system_pool_spec``) from this one dict.
# Characters of a refused label shown in the message (a 300-character paste is cut).
MAX_SHOWN = 60
SYSTEM_POOL_DEFAULTS: dict[str, Any] = {
    "label": "system",
    "plan": "vc2-6c-16gb",
    "node_quantity": 1,
    "min_nodes": 1,
    "max_nodes": 2,
}


@dataclass(frozen=True)
class ClusterSpec:
    label: str
    region: str | None
    version: str
    ha_controlplanes: bool
    enable_firewall: bool
    vpc_id: str | None
    vpc_only: bool
    system_pool: PoolSpec


def cluster_spec_from_params(params: dict[str, Any]) -> ClusterSpec:
    """Validate the cluster options (all before any request)."""
    label = (params.get("label") or "").strip()
    if not label:
        raise InputError("label", "is required: it names the cluster and, with the ownership marker, identifies it")
    if not is_vke_label(label):
        # Vultr's API documents no rule for it; the label names the cluster's kubeconfig file and is matched
        # against its Modelplane objects, so the pool labels' rule (which keeps it safe in both) applies.
        shown = label if len(label) <= MAX_SHOWN else label[:MAX_SHOWN] + "..."
        raise InputError(
            "label",
            f"{shown!r} ({len(label)} characters) is not a cluster label: 1 to 63 letters, digits, '.', '_' or '-',"
            " starting with a letter or digit",
        )
    version = (params.get("version") or LATEST).strip()
    if version != LATEST and version_key(version) is None:
        raise InputError("version", f"{version!r} is not a Kubernetes version: use 'v1.36.2+1', '1.36' or 'latest'")
    if params.get("vpc_only") and not params.get("vpc_id"):
        raise InputError(
            "vpc_id",
            "is required with vpc_only: true (nodes without public IPs need an existing VPC with a NAT gateway)",
        )
    raw = {**SYSTEM_POOL_DEFAULTS, **{k: v for k, v in (params.get("system_pool") or {}).items() if v is not None}}
    if raw.get("labels") is None:
        raw["labels"] = {POOL_LABEL_KEY: raw["label"]}
    if raw.get("taints") is None:
        raw["taints"] = []
    raw["tag"] = CLUSTER_OWNER_TAG
    raw["vpc_only"] = bool(params.get("vpc_only"))
    system = pool_spec_from_params(raw, prefix="system_pool.", default_tag=CLUSTER_OWNER_TAG)
    return ClusterSpec(
        label=label,
        region=params.get("region"),
        version=version,
        ha_controlplanes=bool(params.get("ha_controlplanes")),
        enable_firewall=bool(params.get("enable_firewall")),
        vpc_id=params.get("vpc_id") or None,
        vpc_only=bool(params.get("vpc_only")),
        system_pool=system,
    )


def is_owned(cluster: dict[str, Any]) -> bool:
    return any(pool.get("tag") == CLUSTER_OWNER_TAG for pool in cluster.get("node_pools") or [])


def find_by_label(clusters: Iterable[dict[str, Any]], label: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(ours, foreign)`` clusters with this label."""
    same = [c for c in clusters if c.get("label") == label]
    return [c for c in same if is_owned(c)], [c for c in same if not is_owned(c)]


def create_body(spec: ClusterSpec, version: str) -> dict[str, Any]:
    """Body of ``POST /kubernetes/clusters`` with the system pool inline."""
    pool = spec.system_pool.create_body()  # carries vpc_only when set
    body: dict[str, Any] = {
        "label": spec.label,
        "region": spec.region,
        "version": normalise(version),
        "ha_controlplanes": spec.ha_controlplanes,
        "enable_firewall": spec.enable_firewall,
        "node_pools": [pool],
    }
    if spec.vpc_id:
        body["vpc_id"] = spec.vpc_id
    return body


def system_pool_of(cluster: dict[str, Any], spec: ClusterSpec) -> dict[str, Any] | None:
    pools = cluster.get("node_pools") or []
    return next((p for p in pools if p.get("tag") == CLUSTER_OWNER_TAG), None) or next(
        (p for p in pools if p.get("label") == spec.system_pool.label), None
    )


def is_vpc_only(cluster: dict[str, Any]) -> bool | None:
    """Whether the cluster was created VPC-only: its marker (system) pool's ``vpc_only``.

    None when the cluster has no marker pool or the API does not report the field.
    """
    marker = next((p for p in cluster.get("node_pools") or [] if p.get("tag") == CLUSTER_OWNER_TAG), None)
    if marker is None or marker.get("vpc_only") is None:
        return None
    return bool(marker["vpc_only"])


def version_drift(spec: ClusterSpec, observed_version: str) -> bool:
    """Whether the running version does not satisfy the request (``latest`` is checked separately)."""
    if spec.version == LATEST:
        return False
    if is_exact(spec.version):
        return normalise(spec.version) != observed_version
    return not matches(spec.version, observed_version)


def cluster_drift(spec: ClusterSpec, observed: dict[str, Any]) -> list[dict[str, Any]]:
    """Differences in create-only settings (reported, never applied)."""
    drift: list[dict[str, Any]] = []

    def add(field: str, have: Any, want: Any) -> None:
        drift.append({"field": field, "observed": have, "desired": want})

    if spec.region and observed.get("region") != spec.region:
        add("region", observed.get("region"), spec.region)
    if bool(observed.get("ha_controlplanes")) != spec.ha_controlplanes:
        add("ha_controlplanes", bool(observed.get("ha_controlplanes")), spec.ha_controlplanes)
    have_fw = bool(observed.get("firewall_group_id"))
    if have_fw != spec.enable_firewall:
        add("enable_firewall", have_fw, spec.enable_firewall)
    vpc_ids = [v.get("id") for v in observed.get("vpcs") or [] if v.get("id")]
    if spec.vpc_id and vpc_ids and spec.vpc_id not in vpc_ids:
        add("vpc_id", vpc_ids[0], spec.vpc_id)
    pool = system_pool_of(observed, spec)
    if pool is None:
        add("system_pool", None, spec.system_pool.label)
    else:
        plan = plan_pool(spec.system_pool, pool)
        for name, (have, want) in plan.immutable.items():
            add(f"system_pool.{name}", have, want)
        for name, want in plan.patch.items():
            add(f"system_pool.{name}", pool.get(name), want)
        for name, (have, want) in plan.drift.items():
            add("vpc_only" if name == "vpc_only" else f"system_pool.{name}", have, want)
        if plan.add_labels or plan.remove_labels:
            add("system_pool.labels", pool.get("labels") or {}, dict(spec.system_pool.labels))
        if plan.add_taints or plan.remove_taints:
            add("system_pool.taints", pool.get("taints") or [], [t.as_dict() for t in spec.system_pool.taints])
    return drift
