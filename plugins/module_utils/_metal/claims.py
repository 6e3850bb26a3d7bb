# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Durable, exclusive host claims: one ``coordination.k8s.io/v1`` Lease per pool host on the Modelplane control plane.

Why a Lease on the control plane, and not a file, an inventory cache or the BMC alone:

- Every controller of the fleet already reaches the control plane (it adopts the clusters there), and the
  Kubernetes API gives exactly the two primitives an exclusive claim needs: ``create`` of a name is atomic
  (the loser gets 409 AlreadyExists) and ``update`` carries ``metadata.resourceVersion`` (the loser of a
  concurrent update gets 409 Conflict). Two controllers claiming the same host can therefore never both
  win, and the state survives a killed controller and a lost inventory cache because it lives in etcd.
- A BMC has no compare-and-swap that every firmware honours (iDRAC8 sends no ETag), so the AssetTag the
  claim writes there is a hint for the person at the server, never the truth.
- The Lease kind is built in (no CRD to install), namespaced, cheap, and its ``spec.holderIdentity`` /
  ``spec.acquireTime`` say "who holds it since when" in the vocabulary every Kubernetes user knows.
  ``spec.leaseDurationSeconds`` stays unset on purpose: a claim does not expire; it ends only when the
  owning cluster (or ``force``) releases it. Nothing in Kubernetes garbage-collects Leases.

The record: ``spec.holderIdentity`` is the cluster, ``spec.acquireTime`` when it was claimed; annotations keep
the host, pool, claimer (user@host of the controller), the install generation, BMC URL and boot MAC;
labels (managed-by, pool, cluster) let ``host_pool_info`` read a whole pool with one list call.
A released claim is a deleted Lease (with ``uid`` and ``resourceVersion`` preconditions, so a release
never deletes a claim that changed hands after it was read); a Lease with an empty holder also counts
as free and is taken over by an update carrying its ``resourceVersion``.

``choose_host`` is the pure planner (table-tested); ``LeaseStore`` is the thin API adapter (the
unit tests swap in an in-memory store with the same conflict semantics).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from ansible_collections.metalplane.inference.plugins.module_utils._kube.object_store import KubeObjectStore

from .pool import Host, Requirements, fact_mismatches

LEASE_API = "coordination.k8s.io/v1"
LEASE_KIND = "Lease"
# Where the Leases live by default: the namespace Modelplane hard-codes and every control plane has, where
# this collection already writes the clusters' kubeconfig Secrets (so the same RBAC grant covers both).
DEFAULT_NAMESPACE = "modelplane-system"
# Lease names: "metal-claim.<pool>.<host>" when both parts are DNS-safe (a pool name has no dot, so the name
# parses back unambiguously), else "metal-claim.<sanitised>-<hash>" (one label: it never equals a readable name).
LEASE_PREFIX = "metal-claim."
HASH_CHARS = 10
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "metalplane.inference"
POOL_LABEL = "metalplane.inference/pool"
CLUSTER_LABEL = "metalplane.inference/cluster"
HOST_ANNOTATION = "metalplane.inference/host"
POOL_ANNOTATION = "metalplane.inference/pool"
CLAIMER_ANNOTATION = "metalplane.inference/claimer"
GENERATION_ANNOTATION = "metalplane.inference/generation"
BMC_ANNOTATION = "metalplane.inference/bmc-url"
MAC_ANNOTATION = "metalplane.inference/boot-mac"
# The provisioning record the install keeps with the claim (JSON, written by ``host_provision``): which generation
# is at which phase, the install disk and SSH host key of that install, the boot order before it was first changed.
PROVISIONING_ANNOTATION = "metalplane.inference/provisioning"
# The generation of a new claim; a re-claim by the same cluster keeps it, ``reinstall`` adds one.
FIRST_GENERATION = 1

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_MAX = 253
LABEL_VALUE_MAX = 63


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:HASH_CHARS]


def _squash(text: str, limit: int) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-") or "x"


def lease_name(pool: str, host: str) -> str:
    """The Lease of ``host`` in ``pool``: a DNS-1123 subdomain, readable when it can be, injective always."""
    readable = f"{LEASE_PREFIX}{pool}.{host}"
    if _DNS_LABEL.match(pool) and _DNS_SUBDOMAIN.match(host) and len(readable) <= DNS_SUBDOMAIN_MAX:
        return readable
    return f"{LEASE_PREFIX}{_squash(f'{pool}-{host}', DNS_LABEL_MAX - HASH_CHARS - 1)}-{_digest(pool, host)}"


def label_value(value: str) -> str:
    """``value`` itself when it is a valid label value, else a sanitised prefix plus a hash of it."""
    if len(value) <= LABEL_VALUE_MAX and _LABEL_VALUE.match(value):
        return value
    return f"{_squash(value, LABEL_VALUE_MAX - HASH_CHARS - 1)}-{_digest(value)}"


def pool_selector(pool: str) -> str:
    return f"{MANAGED_BY_LABEL}={MANAGED_BY},{POOL_LABEL}={label_value(pool)}"


def now_micro() -> str:
    """Now as a Kubernetes MicroTime (RFC 3339 with microseconds, UTC), the type of ``acquireTime``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Claim:
    """One Lease, read back: who holds which host since when (``cluster`` empty = released/free)."""

    lease: str
    host: str
    pool: str
    cluster: str
    claimer: str
    since: str | None
    generation: int
    resource_version: str = ""
    uid: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    record: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def held(self) -> bool:
        return bool(self.cluster)

    def public(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "claimer": self.claimer,
            "since": self.since,
            "generation": self.generation,
            "lease": self.lease,
            "provisioning": dict(self.record),
        }


def read_record(annotations: Mapping[str, Any]) -> dict[str, Any]:
    """The provisioning record of a Lease's annotations; an absent or unreadable one is empty (nothing recorded)."""
    try:
        record = json.loads(str(annotations.get(PROVISIONING_ANNOTATION) or "{}"))
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def claim_from_lease(obj: Mapping[str, Any]) -> Claim:
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    spec = obj.get("spec") or {}
    try:
        generation = int(annotations.get(GENERATION_ANNOTATION) or FIRST_GENERATION)
    except ValueError:
        generation = FIRST_GENERATION
    return Claim(
        lease=str(meta.get("name") or ""),
        host=str(annotations.get(HOST_ANNOTATION) or ""),
        pool=str(annotations.get(POOL_ANNOTATION) or ""),
        cluster=str(spec.get("holderIdentity") or ""),
        claimer=str(annotations.get(CLAIMER_ANNOTATION) or ""),
        since=spec.get("acquireTime"),
        generation=generation,
        resource_version=str(meta.get("resourceVersion") or ""),
        uid=str(meta.get("uid") or ""),
        raw=obj,
        record=read_record(annotations),
    )


def lease_body(
    namespace: str,
    pool: str,
    host: Host,
    *,
    cluster: str,
    claimer: str,
    since: str,
    generation: int,
    previous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The Lease that records ``cluster``'s claim of ``host``; over ``previous`` (an update) it keeps the
    ``resourceVersion`` (the optimistic-concurrency guard) and counts a change of holder in ``leaseTransitions``."""
    meta: dict[str, Any] = {
        "name": lease_name(pool, host.name),
        "namespace": namespace,
        "labels": {
            MANAGED_BY_LABEL: MANAGED_BY,
            POOL_LABEL: label_value(pool),
            CLUSTER_LABEL: label_value(cluster),
        },
        "annotations": {
            HOST_ANNOTATION: host.name,
            POOL_ANNOTATION: pool,
            CLAIMER_ANNOTATION: claimer,
            GENERATION_ANNOTATION: str(generation),
            BMC_ANNOTATION: host.bmc_url,
            MAC_ANNOTATION: host.boot_mac,
        },
    }
    spec: dict[str, Any] = {"holderIdentity": cluster, "acquireTime": since}
    if previous is not None:
        old_meta = previous.get("metadata") or {}
        old_spec = previous.get("spec") or {}
        meta["resourceVersion"] = old_meta.get("resourceVersion")
        # Labels/annotations someone else added survive; ours are overwritten. The provisioning record belongs to
        # the holder: it is kept for the same cluster (a generation bump) and dropped when the holder changes.
        meta["labels"] = {**(old_meta.get("labels") or {}), **meta["labels"]}
        old_annotations = dict(old_meta.get("annotations") or {})
        if old_spec_holder(previous) != cluster:
            old_annotations.pop(PROVISIONING_ANNOTATION, None)
        meta["annotations"] = {**old_annotations, **meta["annotations"]}
        transitions = int(old_spec.get("leaseTransitions") or 0)
        spec["leaseTransitions"] = transitions + (0 if old_spec.get("holderIdentity") == cluster else 1)
    return {"apiVersion": LEASE_API, "kind": LEASE_KIND, "metadata": meta, "spec": spec}


def old_spec_holder(obj: Mapping[str, Any]) -> str:
    return str((obj.get("spec") or {}).get("holderIdentity") or "")


def diff_view(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    """The part of a Lease a diff shows (no server bookkeeping; a Lease holds no secret)."""
    if not obj:
        return {}
    meta = obj.get("metadata") or {}
    return {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "labels": dict(meta.get("labels") or {}),
        "annotations": dict(meta.get("annotations") or {}),
        "spec": dict(obj.get("spec") or {}),
    }


# --------------------------------------------------------------------------------------------- planner
@dataclass
class Plan:
    """What a claim run does, decided from the inventory and one Lease list, before any BMC is asked.

    ``held``: this cluster's claims in the pool (normally one). ``candidates``: free hosts whose written facts do
    not rule them out, in inventory order (the order a person wrote is the preference). ``skipped``: the rest,
    with the reason (claimed by another cluster; the inventory's facts contradict the requirements).
    ``strays``: this cluster's claims on hosts no longer listed in the pool.
    """

    held: list[Claim] = field(default_factory=list)
    candidates: list[Host] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    strays: list[Claim] = field(default_factory=list)


def claims_by_host(pool: str, hosts: Sequence[Host], leases: Sequence[Mapping[str, Any]]) -> dict[str, Claim]:
    """The Lease of each listed host (by name), read from one list of the pool's Leases."""
    by_lease = {str((obj.get("metadata") or {}).get("name")): obj for obj in leases}
    found: dict[str, Claim] = {}
    for host in hosts:
        obj = by_lease.get(lease_name(pool, host.name))
        if obj is not None:
            found[host.name] = claim_from_lease(obj)
    return found


def choose_host(
    pool: str,
    hosts: Sequence[Host],
    leases: Sequence[Mapping[str, Any]],
    cluster: str,
    requirements: Requirements,
    *,
    only: str | None = None,
) -> Plan:
    """Plan a claim for ``cluster`` (pure): keep what it holds, else list the free hosts worth probing."""
    plan = Plan()
    listed = {lease_name(pool, h.name) for h in hosts}
    mine = sorted(
        (claim_from_lease(obj) for obj in leases if (obj.get("spec") or {}).get("holderIdentity") == cluster),
        key=lambda c: c.lease,
    )
    plan.held = [c for c in mine if c.lease in listed]
    plan.strays = [c for c in mine if c.lease not in listed]
    claims = claims_by_host(pool, hosts, leases)
    for host in hosts:
        if only is not None and host.name != only:
            continue
        claim = claims.get(host.name)
        if claim is not None and claim.held:
            if claim.cluster != cluster:
                plan.skipped.append(
                    {
                        "name": host.name,
                        "status": "claimed",
                        "reason": f"claimed by cluster {claim.cluster!r} since {claim.since} ({claim.claimer})",
                    }
                )
            continue
        reasons = fact_mismatches(requirements, host.facts)
        if reasons:
            plan.skipped.append({"name": host.name, "status": "mismatched", "reason": "; ".join(reasons)})
            continue
        plan.candidates.append(host)
    return plan


# --------------------------------------------------------------------------------------------- store
class LeaseStore(Protocol):
    """The five Lease calls a claim needs; 409 raises ``object_store.Conflict``, a missing Lease reads as None/False."""

    def list(self, namespace: str, label_selector: str) -> list[dict[str, Any]]: ...

    def get(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]: ...

    def replace(self, body: Mapping[str, Any]) -> dict[str, Any]: ...

    def delete(self, namespace: str, name: str, *, uid: str, resource_version: str) -> bool: ...


class KubeLeaseStore:
    """``LeaseStore`` over the shared ``KubeObjectStore`` (``_kube/object_store.py``): the Lease kind, and deletes
    guarded by ``uid`` and ``resourceVersion``."""

    def __init__(self, objects: KubeObjectStore) -> None:
        self.objects = objects

    def close(self) -> None:
        self.objects.close()

    def list(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        return self.objects.list(LEASE_API, LEASE_KIND, namespace, label_selector)

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get(LEASE_API, LEASE_KIND, namespace, name)

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return self.objects.create(body)

    def replace(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return self.objects.replace(body)

    def delete(self, namespace: str, name: str, *, uid: str, resource_version: str) -> bool:
        preconditions = {"uid": uid, "resourceVersion": resource_version}
        return self.objects.delete(LEASE_API, LEASE_KIND, namespace, name, preconditions)
