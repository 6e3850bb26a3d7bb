# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What ``modelplane_cluster`` wants on the control plane, and how it differs from what is there.

Why pure: every decision of an adoption (which classes to generate from which nodes, whether a live
object already says what we want, what an update must keep, what the diff may show) is a function of
the module options and the objects read back. Keeping those decisions here, free of I/O, lets the
unit tests cover them table by table and keeps the orchestration (``adoption.py``) a straight line.

Comparison rules:

- only the fields this collection owns are compared (``spec.cluster``, ``spec.nodePools``,
  ``spec.taints`` of the InferenceCluster; ``spec`` of a class), with the XRD defaults applied to both
  sides, so a server-side default or Crossplane's ``spec.crossplane`` never looks like drift;
- labels are compared as a subset: labels other controllers add are kept;
- the Secret is compared on its data and labels; the diff never contains its data.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ConflictError, InputError
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane import validate
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.constants import (
    CLUSTER_LABEL,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    NVIDIA_DRA_DRIVER,
    POOL_LABEL,
)
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.inference_class import (
    inference_class,
    inference_class_from_inventory,
    inventory_entries,
)
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.inference_cluster import (
    SOURCE_EXISTING,
    inference_cluster,
)

# Option keys of one node_pools entry -> the InferenceCluster nodePools key.
POOL_OPTION_KEYS: dict[str, str] = {
    "name": "name",
    "class_name": "className",
    "node_count": "nodeCount",
    "min_node_count": "minNodeCount",
    "max_node_count": "maxNodeCount",
}
# The InferenceCluster spec fields this collection writes and therefore compares and owns.
CLUSTER_OWNED_KEYS = ("cluster", "nodePools", "taints")
# XRD defaults (inferenceclasses.yaml): per device, and per provisioning block.
DEVICE_DEFAULTS: dict[str, Any] = {"claim": "DRA", "count": 1}
PROVISIONING_DEFAULTS: dict[str, dict[str, Any]] = {
    "gke": {"diskSizeGb": 100},
    "eks": {"diskSizeGb": 100},
    "aks": {"diskSizeGb": 100},
    "nebius": {"diskSizeGb": 100, "driversPreset": "cuda13.0"},
}
# XRD defaults (inferenceclusters.yaml).
SECRET_REF_KEY_DEFAULT = "kubeconfig"
NODE_COUNT_DEFAULT = 1
# The taint a drain puts on the InferenceCluster before deleting its replicas: NoExecute makes the
# scheduler move replicas elsewhere and never place new ones here (inferenceclusters.yaml, taints).
DRAIN_TAINT: dict[str, str] = {"key": "metalplane.inference/unadopting", "value": "true", "effect": "NoExecute"}
# What stands in for Secret data in results and diffs.
REDACTED = "<redacted>"
REDACTED_CHANGED = "<redacted, changed>"


def is_ours(obj: Mapping[str, Any] | None) -> bool:
    """Whether this collection wrote ``obj`` (the managed-by label)."""
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE


def secret_name_for(cluster: str, given: str | None) -> str:
    return given or f"{cluster}-kubeconfig"


# --- node pools and classes from the options ------------------------------------------------------


def node_pools(value: Any) -> list[dict[str, Any]]:
    """``node_pools`` option entries as InferenceCluster ``nodePools`` (class_name defaults to the pool name)."""
    if not isinstance(value, list) or not value:
        raise InputError("node_pools", "must be a non-empty list of {name, class_name, node_count}")
    pools = []
    for i, raw in enumerate(value):
        entry = validate.mapping(f"node_pools[{i}]", raw)
        validate.known_keys(f"node_pools[{i}]", entry, POOL_OPTION_KEYS)
        pool = {POOL_OPTION_KEYS[k]: v for k, v in entry.items() if v is not None}
        if "name" in pool and "className" not in pool:
            pool["className"] = pool["name"]
        pools.append(pool)
    return pools


def explicit_classes(value: Any) -> dict[str, dict[str, Any]]:
    """``classes`` option: name -> InferenceClass object (spec checked against the XRD limits)."""
    out: dict[str, dict[str, Any]] = {}
    for i, raw in enumerate(value or []):
        entry = validate.mapping(f"classes[{i}]", raw)
        validate.known_keys(f"classes[{i}]", entry, ("name", "spec"))
        name = validate.dns_subdomain(f"classes[{i}].name", entry.get("name"))
        if name in out:
            raise InputError(f"classes[{i}].name", f"class {name!r} is given twice")
        try:
            out[name] = inference_class(name, validate.mapping(f"classes[{i}].spec", entry.get("spec")))
        except InputError as exc:
            raise InputError(f"classes[{i}].{exc.field}", exc.msg.split(": ", 1)[-1]) from None
    return out


def inventory_pools(inventory: Any, node_pool_of: Mapping[str, str]) -> dict[str, dict[str, Mapping[str, Any]]]:
    """Pool name -> {node: inventory entry}; a node's pool is its entry's ``pool``, else ``node_pool_of``."""
    grouped: dict[str, dict[str, Mapping[str, Any]]] = {}
    for node, entry in inventory_entries(inventory, "gpu_inventory"):
        pool = entry.get("pool") or node_pool_of.get(node)
        if pool:
            grouped.setdefault(str(pool), {})[node] = entry
    return grouped


def nodes_without_pool(inventory: Any) -> list[str]:
    """Inventory nodes whose entry does not say its pool (their node label must be read)."""
    if inventory in (None, {}, []):
        return []
    return [node for node, entry in inventory_entries(inventory, "gpu_inventory") if not entry.get("pool")]


def node_pool_labels(nodes: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Node name -> its ``modelplane.ai/pool`` label value, from listed Node objects."""
    out = {}
    for node in nodes:
        meta = node.get("metadata") or {}
        pool = (meta.get("labels") or {}).get(POOL_LABEL)
        if pool:
            out[str(meta.get("name"))] = str(pool)
    return out


def class_sources(pools: list[dict[str, Any]], explicit: Mapping[str, Any]) -> dict[str, list[str]]:
    """Class name -> the pools that use it, for every class not given explicitly (in pool order)."""
    sources: dict[str, list[str]] = {}
    for pool in pools:
        name = pool.get("className")
        if isinstance(name, str) and name not in explicit:
            sources.setdefault(name, []).append(str(pool.get("name")))
    return sources


def inventory_plan(
    node_pools_option: Any, classes_option: Any, gpu_inventory: Any, *, dry_run: bool, labelled: bool
) -> dict[str, Any]:
    """What the ``modelplane_adopt`` role must inventory before this module runs, from the same options.

    - ``generated_classes``: the classes the pools use that ``classes`` does not give (``class_sources``,
      in pool order), which this module will generate from the GPU inventory;
    - ``inventory_pools``: the pools whose nodes ``gpu_ready`` must inventory for them; none when the
      caller gives ``gpu_inventory``, or when the run cannot plan them;
    - ``unplannable``: a dry run that sets the pools' node labels (``labelled``) does not set them, so an
      inventory read by pool label cannot see those nodes: with no inventory given, classes generated from
      them cannot be planned, and the adoption is not attempted.
    """
    pools = node_pools(node_pools_option)
    given = {str(c.get("name")) for c in classes_option or [] if isinstance(c, Mapping)}
    sources = class_sources(pools, dict.fromkeys(given))
    has_inventory = gpu_inventory not in (None, {}, [])
    unplannable = bool(dry_run and labelled and sources and not has_inventory)
    to_inventory = [] if has_inventory or unplannable else [str(p["name"]) for p in pools if p["className"] in sources]
    return {
        "generated_classes": list(sources),
        "inventory_pools": list(dict.fromkeys(to_inventory)),
        "unplannable": unplannable,
    }


def generated_classes(
    sources: Mapping[str, list[str]], grouped: Mapping[str, Mapping[str, Mapping[str, Any]]]
) -> dict[str, dict[str, Any]]:
    """One InferenceClass per class name, from the inventory nodes of the pools that use it."""
    out = {}
    for class_name, pool_names in sources.items():
        nodes: dict[str, Mapping[str, Any]] = {}
        for pool in pool_names:
            found = grouped.get(pool) or {}
            if not found:
                raise InputError(
                    "gpu_inventory",
                    f"no node of pool {pool!r} is in the inventory (nodes are matched by their entry's pool or "
                    f"their {POOL_LABEL}={pool} label); class {class_name!r} cannot be generated",
                )
            nodes.update(found)
        try:
            out[class_name] = inference_class_from_inventory(class_name, nodes)
        except InputError as exc:
            raise InputError(f"gpu_inventory (class {class_name})", exc.msg) from None
    return out


def desired_cluster(
    name: str,
    *,
    secret_name: str,
    pools: list[dict[str, Any]],
    storage_class_name: str | None,
    labels: Mapping[str, str] | None,
    taints: list[Mapping[str, Any]] | None,
) -> dict[str, Any]:
    return inference_cluster(
        name,
        secret_name=secret_name,
        node_pools=pools,
        storage_class_name=storage_class_name,
        labels=labels,
        taints=taints,
    )


def gpu_device(class_obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The class's NVIDIA DRA GPU device entry (what gpu_ready's device_match takes), if any."""
    devices = ((class_obj or {}).get("spec") or {}).get("devices") or []
    for device in devices:
        if device.get("claim", "DRA") == "DRA" and device.get("driver") == NVIDIA_DRA_DRIVER:
            return copy.deepcopy(dict(device))
    return None


def pools_view(pools: list[dict[str, Any]], classes: Mapping[str, Mapping[str, Any] | None]) -> list[dict[str, Any]]:
    """Per pool, what the workload checks need: selector and the GPU device its class promises."""
    return [
        {
            "name": pool["name"],
            "class_name": pool["className"],
            "node_count": pool.get("nodeCount", NODE_COUNT_DEFAULT),
            "node_selector": f"{POOL_LABEL}={pool['name']}",
            "gpu_device": gpu_device(classes.get(pool["className"])),
        }
        for pool in pools
    ]


# --- normalisation and comparison -----------------------------------------------------------------


def _drop_none(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


def normalise_class_spec(spec: Mapping[str, Any] | None) -> dict[str, Any]:
    """A class spec with the XRD defaults filled in (both sides of a comparison go through this)."""
    out = _drop_none(copy.deepcopy(dict(spec or {})))
    out["devices"] = [{**DEVICE_DEFAULTS, **d} for d in out.get("devices") or []]
    provisioning = out.get("provisioning")
    if isinstance(provisioning, dict):
        for block, defaults in PROVISIONING_DEFAULTS.items():
            if isinstance(provisioning.get(block), dict):
                provisioning[block] = {**defaults, **provisioning[block]}
    return out


def normalise_cluster_spec(spec: Mapping[str, Any] | None) -> dict[str, Any]:
    """The owned part of an InferenceCluster spec with the XRD defaults filled in."""
    source = _drop_none(copy.deepcopy(dict(spec or {})))
    out: dict[str, Any] = {}
    cluster = source.get("cluster")
    if isinstance(cluster, dict):
        existing = cluster.get("existing")
        if isinstance(existing, dict) and isinstance(existing.get("secretRef"), dict):
            existing["secretRef"] = {"key": SECRET_REF_KEY_DEFAULT, **existing["secretRef"]}
        out["cluster"] = cluster
    if source.get("nodePools"):
        out["nodePools"] = [{"nodeCount": NODE_COUNT_DEFAULT, **p} for p in source["nodePools"]]
    if source.get("taints"):
        out["taints"] = source["taints"]
    return out


def missing_labels(desired: Mapping[str, Any], live: Mapping[str, Any] | None) -> dict[str, str]:
    """Desired labels the live object lacks or has with another value."""
    want = (desired.get("metadata") or {}).get("labels") or {}
    have = ((live or {}).get("metadata") or {}).get("labels") or {}
    return {k: v for k, v in want.items() if have.get(k) != v}


def class_differs(desired: Mapping[str, Any], live: Mapping[str, Any]) -> bool:
    return normalise_class_spec(desired.get("spec")) != normalise_class_spec(live.get("spec"))


def cluster_differs(desired: Mapping[str, Any], live: Mapping[str, Any]) -> bool:
    return normalise_cluster_spec(desired.get("spec")) != normalise_cluster_spec(live.get("spec")) or bool(
        missing_labels(desired, live)
    )


def secret_differs(desired: Mapping[str, Any], live: Mapping[str, Any]) -> bool:
    return (
        (live.get("data") or {}) != desired["data"]
        or live.get("type", "Opaque") != desired.get("type", "Opaque")
        or bool(missing_labels(desired, live))
    )


def _merged_metadata(desired: Mapping[str, Any], live: Mapping[str, Any]) -> dict[str, Any]:
    """Live metadata (resourceVersion for optimistic locking, others' labels) plus our labels."""
    meta = copy.deepcopy(dict(live.get("metadata") or {}))
    meta["labels"] = {**(meta.get("labels") or {}), **((desired.get("metadata") or {}).get("labels") or {})}
    for key in ("managedFields", "creationTimestamp", "generation", "uid"):
        meta.pop(key, None)
    return meta


def updated_class(desired: Mapping[str, Any], live: Mapping[str, Any]) -> dict[str, Any]:
    return {**copy.deepcopy(dict(live)), "metadata": _merged_metadata(desired, live), "spec": desired["spec"]}


def updated_cluster(desired: Mapping[str, Any], live: Mapping[str, Any]) -> dict[str, Any]:
    """The live object with our owned spec fields replaced (others, e.g. ``spec.crossplane``, kept)."""
    spec = {k: v for k, v in (live.get("spec") or {}).items() if k not in CLUSTER_OWNED_KEYS}
    spec.update(copy.deepcopy(desired["spec"]))
    out = {**copy.deepcopy(dict(live)), "metadata": _merged_metadata(desired, live), "spec": spec}
    out.pop("status", None)
    return out


def updated_secret(desired: Mapping[str, Any], live: Mapping[str, Any]) -> dict[str, Any]:
    out = {**copy.deepcopy(dict(live)), "metadata": _merged_metadata(desired, live)}
    out.update(type=desired.get("type", "Opaque"), data=dict(desired["data"]))
    out.pop("stringData", None)
    return out


def with_taint(live: Mapping[str, Any], taint: Mapping[str, str]) -> dict[str, Any] | None:
    """The cluster with ``taint`` added, or None when it already has it (same key and effect)."""
    taints = list((live.get("spec") or {}).get("taints") or [])
    if any(t.get("key") == taint["key"] and t.get("effect") == taint["effect"] for t in taints):
        return None
    out = copy.deepcopy(dict(live))
    out["spec"] = {**out.get("spec", {}), "taints": [*taints, dict(taint)]}
    out.pop("status", None)
    out["metadata"] = _merged_metadata({}, live)
    return out


# --- ownership -------------------------------------------------------------------------------------


def check_cluster_owner(name: str, live: Mapping[str, Any] | None) -> None:
    """Refuse to take over an InferenceCluster we did not create, or one Modelplane provisions."""
    if live is None:
        return
    if not is_ours(live):
        raise ConflictError(
            f"InferenceCluster {name!r} exists and was not created by metalplane.inference (no "
            f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE} label); refusing to change or delete it",
            details={"cluster": name},
        )
    source = ((live.get("spec") or {}).get("cluster") or {}).get("source")
    if source != SOURCE_EXISTING:
        raise ConflictError(
            f"InferenceCluster {name!r} has source {source!r}, not {SOURCE_EXISTING}; a provisioned cluster "
            "cannot be adopted",
            details={"cluster": name, "source": source},
        )


def check_secret_owner(name: str, cluster: str, live: Mapping[str, Any] | None) -> None:
    if live is None:
        return
    labels = (live.get("metadata") or {}).get("labels") or {}
    if not is_ours(live):
        raise ConflictError(
            f"Secret modelplane-system/{name} exists and was not created by metalplane.inference; delete it "
            "or choose another secret_name",
            details={"secret": name},
        )
    owner = labels.get(CLUSTER_LABEL)
    if owner not in (None, cluster):
        raise ConflictError(
            f"Secret modelplane-system/{name} belongs to InferenceCluster {owner!r}, not {cluster!r}; "
            "choose another secret_name",
            details={"secret": name, "owner": owner},
        )


def check_class_owner(desired: Mapping[str, Any], live: Mapping[str, Any] | None) -> None:
    """A class someone else created may be used as it is, but never rewritten."""
    if live is None or is_ours(live) or not class_differs(desired, live):
        return
    name = desired["metadata"]["name"]
    raise ConflictError(
        f"InferenceClass {name!r} exists with another spec and was not created by metalplane.inference; "
        "refusing to overwrite it (use its spec, or another class_name)",
        details={"class": name},
    )


# --- replicas and class users ------------------------------------------------------------------------


def replica_targets(replica: Mapping[str, Any], cluster: str) -> bool:
    """Whether a ModelReplica is pinned to ``cluster``: ``spec.clusterName`` or the ClusterUsage label."""
    meta = replica.get("metadata") or {}
    return (replica.get("spec") or {}).get("clusterName") == cluster or (meta.get("labels") or {}).get(
        "modelplane.ai/cluster"
    ) == cluster


def replica_refs(replicas: Iterable[Mapping[str, Any]], cluster: str) -> list[str]:
    """``namespace/name`` of each replica pinned to ``cluster``, sorted."""
    return sorted(
        f"{(r.get('metadata') or {}).get('namespace', '')}/{(r.get('metadata') or {}).get('name')}"
        for r in replicas
        if replica_targets(r, cluster)
    )


def class_users(clusters: Iterable[Mapping[str, Any]], class_name: str, *, besides: str) -> list[str]:
    """InferenceClusters other than ``besides`` with a pool of class ``class_name`` (deleting ones too)."""
    users = []
    for cluster in clusters:
        name = (cluster.get("metadata") or {}).get("name")
        if name == besides:
            continue
        pools = (cluster.get("spec") or {}).get("nodePools") or []
        if any(p.get("className") == class_name for p in pools):
            users.append(str(name))
    return sorted(users)


def referenced_classes(cluster: Mapping[str, Any] | None) -> list[str]:
    pools = ((cluster or {}).get("spec") or {}).get("nodePools") or []
    return [str(p["className"]) for p in pools if p.get("className")]


# --- results ----------------------------------------------------------------------------------------


def conditions_summary(obj: Mapping[str, Any] | None) -> dict[str, dict[str, str]]:
    """Condition type -> {status, reason, message} of an observed object."""
    out = {}
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type"):
            out[str(cond["type"])] = {k: str(cond[k]) for k in ("status", "reason", "message") if cond.get(k)}
    return out


def cluster_view(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    """The InferenceCluster as a diff side: labels and spec (never status)."""
    if obj is None:
        return {}
    meta = obj.get("metadata") or {}
    return {"labels": dict(meta.get("labels") or {}), "spec": copy.deepcopy(dict(obj.get("spec") or {}))}


def class_view(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    if obj is None:
        return {}
    return {"spec": copy.deepcopy(dict(obj.get("spec") or {}))}


def secret_view(obj: Mapping[str, Any] | None, *, data_changed: bool = False) -> dict[str, Any]:
    """The Secret as a diff side: name, labels and its data keys, each value redacted.

    ``data_changed`` marks the values of the "after" side, so a diff still shows that the kubeconfig
    changed without showing it.
    """
    if obj is None:
        return {}
    meta = obj.get("metadata") or {}
    marker = REDACTED_CHANGED if data_changed else REDACTED
    return {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "labels": dict(meta.get("labels") or {}),
        "data": dict.fromkeys(sorted((obj.get("data") or {}).keys()), marker),
    }
