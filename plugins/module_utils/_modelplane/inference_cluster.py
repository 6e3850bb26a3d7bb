# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The InferenceCluster that adopts a workload cluster as ``source: Existing``.

Why each field has its value (source: Modelplane v0.3.1, https://github.com/modelplaneai/modelplane at
commit ``90ba117d``: the XRDs ``inferenceclusters.modelplane.ai`` and
``vultrclusters.infrastructure.modelplane.ai``, and ``functions/compose-inference-cluster``):

- ``source: Existing`` with ``existing.secretRef {name, key}``: this collection creates the VKE
  cluster, GPU stack and RWX storage itself, and ``source: Vultr`` has no way to name an RWX class;
  the Secret lives in ``modelplane-system`` (no namespace field exists).
- ``existing.cache.storageClassName: modelplane-rwx-longhorn``: Existing clusters have no default
  cache class, and without one no ModelCache ever matches the cluster.
- ``nodePools[]``: each ``name`` is also the ``modelplane.ai/pool`` node label value the roles set,
  each ``className`` an InferenceClass. The count limits are the VultrCluster XRD's (1..1000,
  ``minNodeCount`` needs ``maxNodeCount``), stricter than InferenceCluster's own, so the same
  inventory is valid if it is ever adopted as ``source: Vultr``.
- ``metadata.labels`` always carry ``metalplane.inference/cluster: <name>``: a label unique to this
  cluster, so a ModelDeployment's ``clusterSelector`` can pin a replica to it (the smoke test does);
  Modelplane's own ``modelplane.ai/cluster`` label is on ModelReplicas, not on the cluster.
- ``zones``, ``capacityBlock`` and ``fabric`` are refused: Modelplane ignores them for Existing,
  and silently ignored input is a bug report waiting to happen.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane import validate
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.constants import (
    API_VERSION,
    CLUSTER_LABEL,
    KIND_INFERENCE_CLUSTER,
    KUBECONFIG_KEY,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    MAX_NODE_POOLS,
    MAX_POOL_NAME,
    MAX_POOL_NODES,
    MIN_POOL_NODES,
    POOL_LABEL,
    RWX_STORAGE_CLASS,
)

POOL_KEYS = ("name", "className", "nodeCount", "minNodeCount", "maxNodeCount")
# Pool fields Modelplane only reads for clusters it provisions.
PROVISIONED_ONLY = ("zones", "capacityBlock", "fabric")
TAINT_KEYS = ("key", "value", "effect")
TAINT_EFFECTS = ("NoSchedule", "NoExecute")
SOURCE_EXISTING = "Existing"


def check_node_pool(field: str, value: Any) -> dict[str, Any]:
    """One ``nodePools`` entry, ``nodeCount`` explicit (the XRD default is 1)."""
    pool = validate.mapping(field, value)
    ignored = [key for key in PROVISIONED_ONLY if key in pool]
    if ignored:
        raise InputError(f"{field}.{ignored[0]}", "is only used for clusters Modelplane provisions; remove it")
    validate.known_keys(field, pool, POOL_KEYS)
    for required in ("name", "className"):
        if required not in pool:
            raise InputError(f"{field}.{required}", "is required")
    out: dict[str, Any] = {
        # Also the modelplane.ai/pool node label value and part of Modelplane's child names.
        "name": validate.dns_label(f"{field}.name", pool["name"], max_length=MAX_POOL_NAME),
        "className": validate.dns_subdomain(f"{field}.className", pool["className"]),
    }
    for key in ("nodeCount", "minNodeCount", "maxNodeCount"):
        if pool.get(key) is not None or key == "nodeCount":
            out[key] = validate.integer(
                f"{field}.{key}", pool.get(key, 1), minimum=MIN_POOL_NODES, maximum=MAX_POOL_NODES
            )
    if "minNodeCount" in out and "maxNodeCount" not in out:
        raise InputError(f"{field}.minNodeCount", "requires maxNodeCount (autoscaling range)")
    if "maxNodeCount" in out:
        low = out.get("minNodeCount", MIN_POOL_NODES)
        if low > out["maxNodeCount"]:
            raise InputError(f"{field}.maxNodeCount", f"must be at least minNodeCount ({low})")
        if not low <= out["nodeCount"] <= out["maxNodeCount"]:
            raise InputError(f"{field}.nodeCount", f"must be between {low} and maxNodeCount ({out['maxNodeCount']})")
    return out


def check_node_pools(field: str, value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise InputError(field, "must be a non-empty list of pools ({name, className, nodeCount})")
    if len(value) > MAX_NODE_POOLS:
        raise InputError(field, f"at most {MAX_NODE_POOLS} pools, got {len(value)}")
    pools = [check_node_pool(f"{field}[{i}]", item) for i, item in enumerate(value)]
    names = [p["name"] for p in pools]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InputError(field, f"pool names must be unique, repeated: {duplicates}")
    return pools


def check_taints(field: str, value: Any) -> list[dict[str, str]]:
    """Cluster-level taints (they repel ModelDeployments, not pods)."""
    if not isinstance(value, list):
        raise InputError(field, "must be a list of {key, value, effect}")
    out = []
    for i, item in enumerate(value):
        where = f"{field}[{i}]"
        taint = validate.mapping(where, item)
        validate.known_keys(where, taint, TAINT_KEYS)
        entry = {"key": validate.string(f"{where}.key", taint.get("key"))}
        if taint.get("value") is not None:
            entry["value"] = validate.string(f"{where}.value", taint["value"], min_length=0)
        if taint.get("effect") not in TAINT_EFFECTS:
            raise InputError(f"{where}.effect", f"must be one of {list(TAINT_EFFECTS)}, got {taint.get('effect')!r}")
        entry["effect"] = taint["effect"]
        out.append(entry)
    pairs = [(t["key"], t["effect"]) for t in out]
    if len(set(pairs)) != len(pairs):
        raise InputError(field, "each (key, effect) pair may appear once")
    return out


def inference_cluster(
    name: str,
    *,
    secret_name: str,
    node_pools: list[Mapping[str, Any]],
    secret_key: str = KUBECONFIG_KEY,
    storage_class_name: str | None = RWX_STORAGE_CLASS,
    labels: Mapping[str, str] | None = None,
    taints: list[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The cluster-scoped ``InferenceCluster`` adopting an existing cluster.

    ``storage_class_name=None`` leaves out ``existing.cache`` (the cluster then never serves a
    ModelCache); the name must be a StorageClass that exists on the workload cluster.
    """
    # The name is also the value of the modelplane.ai/cluster label on ModelReplicas: a DNS label.
    validate.dns_label("name", name)
    existing: dict[str, Any] = {
        "secretRef": {
            "name": validate.dns_subdomain("secret_name", secret_name),
            "key": validate.data_key("secret_key", secret_key),
        }
    }
    if storage_class_name is not None:
        existing["cache"] = {"storageClassName": validate.dns_subdomain("storage_class_name", storage_class_name)}
    spec: dict[str, Any] = {
        "cluster": {"source": SOURCE_EXISTING, "existing": existing},
        "nodePools": check_node_pools("node_pools", node_pools),
    }
    if taints:
        spec["taints"] = check_taints("taints", taints)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND_INFERENCE_CLUSTER,
        "metadata": {
            "name": name,
            "labels": {**validate.labels("labels", labels), CLUSTER_LABEL: name, MANAGED_BY_LABEL: MANAGED_BY_VALUE},
        },
        "spec": spec,
    }


def pool_node_labels(cluster: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Per pool name, the node labels the workload nodes of that pool must carry."""
    return {pool["name"]: {POOL_LABEL: pool["name"]} for pool in cluster["spec"].get("nodePools") or []}
