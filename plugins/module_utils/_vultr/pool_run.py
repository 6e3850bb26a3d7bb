# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``vke_node_pool``: one pool of an existing cluster (found by label or id).

Why separate from ``vke_cluster``: GPU pools are added, resized or removed without touching the
cluster. A no-op costs one request: the cluster list embeds the pools.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ConflictError, NotFoundError
from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule

from .args import client_from_params
from .catalog import check_plans_available
from .client import VultrClient
from .cluster import is_owned, is_vpc_only
from .cluster_ops import CLUSTERS, list_clusters
from .node_pool import pool_spec_from_params
from .pool_ops import PoolOptions, creates_pool, reconcile_pool, remove_pools


def find_cluster(client: VultrClient, ref: str) -> dict[str, Any] | None:
    """The cluster whose id or label is ``ref`` (ours first when labels repeat)."""
    clusters = list_clusters(client)
    by_id = [c for c in clusters if c.get("id") == ref]
    if by_id:
        return by_id[0]
    by_label = [c for c in clusters if c.get("label") == ref]
    if len(by_label) > 1:
        ours = [c for c in by_label if is_owned(c)]
        if len(ours) == 1:
            return ours[0]
        ids = ", ".join(c["id"] for c in by_label)
        raise ConflictError(f"cluster: several VKE clusters are labelled {ref!r} ({ids}); pass the cluster id instead")
    return by_label[0] if by_label else None


def run_vke_node_pool(module: MetalplaneModule) -> dict[str, Any]:
    params = module.params
    spec = pool_spec_from_params(params, need_plan=params["state"] == "present")
    client = client_from_params(params)
    cluster = find_cluster(client, params["cluster"])
    opts = PoolOptions(
        replace=params["replace"],
        force=params["force"],
        check_mode=module.check_mode,
        wait=params["wait"],
        wait_timeout=params["wait_timeout"],
    )
    if params["state"] == "absent":
        if cluster is None:
            outcome: dict[str, Any] = {"changed": False, "actions": [], "skipped_pools": ["cluster not found"]}
        else:
            outcome = remove_pools(client, cluster, spec, opts)
    else:
        if cluster is None:
            raise NotFoundError(f"cluster: no VKE cluster has the id or label {params['cluster']!r}")
        if spec.vpc_only is None:  # a pool of a VPC-only cluster is VPC-only unless told otherwise
            spec = dataclasses.replace(spec, vpc_only=is_vpc_only(cluster))
        if creates_pool(cluster, spec, opts, pool_id=params.get("id")):
            check_plans_available(client, cluster["region"], {"plan": spec.plan})
        outcome = reconcile_pool(client, cluster, spec, opts, pool_id=params.get("id"))
        outcome = {**outcome, "cluster_id": cluster["id"]}
        if outcome["changed"] and not module.check_mode:
            outcome = {**outcome, "node_pool": _reread(client, cluster["id"], outcome.get("node_pool"))}
    shown = {k: v for k, v in outcome.items() if k != "diff" or module.diff_mode}
    return {**shown, "api_requests": client.counter.as_dict()}


def _reread(client: VultrClient, cluster_id: str, pool: dict[str, Any] | None) -> dict[str, Any] | None:
    """The pool's final state (nodes included) for the caller; the one given when it is gone or has no id."""
    if pool and pool.get("id"):
        with contextlib.suppress(NotFoundError):
            return client.call("GET", f"{CLUSTERS}/{cluster_id}/node-pools/{pool['id']}")["node_pool"]
    return pool
