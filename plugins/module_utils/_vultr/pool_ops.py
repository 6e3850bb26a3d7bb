# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Applying a node-pool plan: create, PATCH, exact labels/taints, replace, delete, waits.

Why: ``vke_node_pool`` and the ``node_pools`` option of ``vke_cluster`` converge pools the same way.
Everything reads from the cluster object that was already fetched (it embeds its pools), so a pool
with nothing to do costs no request at all; only a difference triggers the labels/taints reads
(needed for the ids to delete) and the writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    ApiError,
    ConflictError,
    NotFoundError,
)

from .client import VultrClient
from .errors import ineligible_plan_error, is_ineligible_plan, is_server_error, vpc_only_error
from .node_pool import PoolPlan, PoolSpec, Taint, plan_pool, replacement_label, select_pools
from .waits import wait_gone, wait_pool_active


@dataclasses.dataclass
class PoolOptions:
    replace: bool = False
    force: bool = False
    check_mode: bool = False
    wait: bool = True
    wait_timeout: float = 3600
    field_prefix: str = ""  # how errors name this pool's options, e.g. "node_pools[0]."


def pool_view(pool: dict[str, Any] | None) -> dict[str, Any]:
    """The diff/result view of a pool (no ids of nodes, no user_data)."""
    if not pool:
        return {}
    keys = ("label", "plan", "tag", "node_quantity", "auto_scaler", "min_nodes", "max_nodes")
    view = {k: pool.get(k) for k in keys}
    view["labels"] = dict(pool.get("labels") or {})
    view["taints"] = sorted((pool.get("taints") or []), key=lambda t: (t.get("key"), t.get("effect")))
    return view


def _base(cluster_id: str) -> str:
    return f"/kubernetes/clusters/{cluster_id}/node-pools"


def _find_pool_by_label(client: VultrClient, cluster_id: str, label: str) -> dict[str, Any] | None:
    pools = client.list_all(_base(cluster_id), "node_pools")
    return next((p for p in pools if p.get("label") == label), None)


def create_pool(
    client: VultrClient,
    cluster: dict[str, Any],
    spec: PoolSpec,
    *,
    field_prefix: str = "",
    timeout: float = 3600,
) -> tuple[dict[str, Any], bool]:
    """POST a pool; after a lost response or 5xx, find it by its (unique) label instead of replaying.

    "Invalid NodePool ID" on this create means VKE refused the plan: an ``InputError`` naming the
    plan option. A 5xx for a ``vpc_only`` pool is VKE's known VPC-only failure: whatever it left
    behind is deleted and the error explains the limitation (never sent again).
    """
    cluster_id = cluster["id"]

    def find() -> dict[str, Any] | None:
        return _find_pool_by_label(client, cluster_id, spec.label)

    try:
        return client.create(
            _base(cluster_id), spec.create_body(), "node_pool", find=find, server_error_is_final=bool(spec.vpc_only)
        )
    except NotFoundError as exc:
        if is_ineligible_plan(exc):
            raise ineligible_plan_error(f"{field_prefix}plan", spec.plan, cluster.get("region"), exc) from None
        raise
    except ApiError as exc:
        if not (spec.vpc_only and is_server_error(exc)):
            raise
        cleanup = ""
        partial = find()
        if partial is not None:
            path = f"{_base(cluster_id)}/{partial['id']}"
            _delete_quietly(client, path)
            wait_gone(client, path, timeout, f"partially created node pool {spec.label}")
            cleanup = f" (the partially created pool {partial['id']} was deleted)"
        raise vpc_only_error(f"node pool {spec.label!r}", exc, cluster.get("region"), cleanup) from None


def apply_labels_and_taints(client: VultrClient, cluster_id: str, pool_id: str, plan: PoolPlan) -> list[str]:
    """Make labels/taints exact: delete extra ones, then add missing ones (per-pool endpoints)."""
    done: list[str] = []
    base = f"{_base(cluster_id)}/{pool_id}"
    if plan.remove_labels or plan.add_labels:
        existing = client.call("GET", f"{base}/labels").get("labels") or []
        for item in existing:
            if item.get("key") in plan.remove_labels:
                _delete_quietly(client, f"{base}/labels/{item['id']}")
                done.append(f"removed label {item.get('key')}")
        for key, value in plan.add_labels.items():
            client.create(
                f"{base}/labels",
                {"key": key, "value": value},
                "label",
                find=lambda key=key, value=value: _find_item(client, f"{base}/labels", "labels", key, value),
            )
            done.append(f"added label {key}")
    if plan.remove_taints or plan.add_taints:
        existing = client.call("GET", f"{base}/taints").get("taints") or []
        for item in existing:
            seen = Taint(str(item.get("key")), str(item.get("value") or ""), str(item.get("effect")))
            if seen in plan.remove_taints:
                _delete_quietly(client, f"{base}/taints/{item['id']}")
                done.append(f"removed taint {seen.key}={seen.value}:{seen.effect}")
        for taint in plan.add_taints:
            client.create(
                f"{base}/taints",
                taint.as_dict(),
                "taint",
                find=lambda t=taint: _find_item(client, f"{base}/taints", "taints", t.key, t.value, effect=t.effect),
            )
            done.append(f"added taint {taint.key}={taint.value}:{taint.effect}")
    return done


def _find_item(
    client: VultrClient, path: str, key: str, item_key: str, value: str, *, effect: str | None = None
) -> dict[str, Any] | None:
    for item in client.call("GET", path).get(key) or []:
        same = item.get("key") == item_key and str(item.get("value") or "") == value
        if same and (effect is None or item.get("effect") == effect):
            return item
    return None


def _delete_quietly(client: VultrClient, path: str) -> None:
    """DELETE that treats "already gone" as success (a retried DELETE may have acted)."""
    with contextlib.suppress(NotFoundError):
        client.call("DELETE", path)


def _locate(
    cluster: dict[str, Any], spec: PoolSpec, opts: PoolOptions, pool_id: str | None
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The pool to converge and our stale generations; a foreign pool only with ``force``."""
    pools = list(cluster.get("node_pools") or [])
    if pool_id is not None:
        current = next((p for p in pools if p.get("id") == pool_id), None)
        if current is None:
            raise NotFoundError(f"node pool id {pool_id!r} does not exist in cluster {cluster.get('label')!r}")
        stale: list[dict[str, Any]] = []
        foreign = None if current.get("tag") == spec.tag else current
    else:
        current, stale, foreign = select_pools(spec, pools)
    if current is None and foreign is not None:
        current = foreign
    if foreign is not None and current is foreign and not opts.force:
        raise ConflictError(
            f"node pool {foreign.get('label')!r} in cluster {cluster.get('label')!r} carries tag "
            f"{foreign.get('tag')!r}, not {spec.tag!r}: it is not managed by this collection. "
            "Use another label, or force: true to adopt it (its tag is then set)."
        )
    return current, stale


def plan_reconcile(
    cluster: dict[str, Any], spec: PoolSpec, opts: PoolOptions, *, pool_id: str | None = None
) -> tuple[dict[str, Any] | None, list[dict[str, Any]], PoolPlan]:
    """The pool to converge, our stale generations and the plan; no request.

    Raises what would stop :func:`reconcile_pool` before its first write (a foreign pool without
    ``force``, an immutable change without ``replace``), so a caller converging several pools can
    check them all before touching any.
    """
    current, stale = _locate(cluster, spec, opts, pool_id)
    plan = plan_pool(spec, current, check_label=pool_id is not None)
    if plan.immutable and not opts.replace:
        fields = ", ".join(f"{k} ({o!r} -> {d!r})" for k, (o, d) in plan.immutable.items())
        raise ConflictError(
            f"node pool {spec.label!r}: {fields} cannot change in place on VKE. Set replace: true to create "
            "a new pool with the new settings, wait until it is active, then delete the old one.",
            details={"immutable": plan.summary()["immutable"]},
        )
    return current, stale, plan


def needs_new_pool(plan: PoolPlan) -> bool:
    """The plan POSTs a pool (a create, or a replace): its ``plan`` must be sold in the region."""
    return plan.create or bool(plan.immutable)


def creates_pool(cluster: dict[str, Any], spec: PoolSpec, opts: PoolOptions, *, pool_id: str | None = None) -> bool:
    """Whether converging ``spec`` POSTs a pool; no request. The one answer to "does this need a new pool?".

    Raises what :func:`plan_reconcile` raises (a foreign pool without ``force``, an immutable change
    without ``replace``), so a refusal comes before any catalogue read.
    """
    return needs_new_pool(plan_reconcile(cluster, spec, opts, pool_id=pool_id)[2])


def reconcile_pool(
    client: VultrClient, cluster: dict[str, Any], spec: PoolSpec, opts: PoolOptions, *, pool_id: str | None = None
) -> dict[str, Any]:
    """Converge one pool of ``cluster`` (an object that embeds its pools) to ``spec``."""
    cluster_id = cluster["id"]
    pools = list(cluster.get("node_pools") or [])
    current, stale, plan = plan_reconcile(cluster, spec, opts, pool_id=pool_id)
    result: dict[str, Any] = {
        "label": spec.label,
        "plan": plan.summary(),
        "drift": [{"field": k, "observed": o, "desired": d} for k, (o, d) in plan.drift.items()],
        "actions": [],
        "diff": {"before": pool_view(current), "after": spec.as_dict()},
    }
    replacing = bool(plan.immutable)
    result["changed"] = plan.changed or bool(stale)
    if opts.check_mode:
        result["actions"] = _planned_actions(plan, stale, replacing)
        result["node_pool"] = current
        return result
    actions: list[str] = result["actions"]
    if plan.create or replacing:
        taken = {p.get("label") for p in pools}
        new_label = spec.label if spec.label not in taken else replacement_label(spec.label, spec.plan)
        new_spec = dataclasses.replace(spec, label=new_label)
        pool, recovered = create_pool(
            client, cluster, new_spec, field_prefix=opts.field_prefix, timeout=opts.wait_timeout
        )
        actions.append(f"created pool {new_label}" + (" (found after an ambiguous response)" if recovered else ""))
        # Labels/taints were sent inline; make sure they are exact (older API versions ignored them).
        actions += apply_labels_and_taints(client, cluster_id, pool["id"], plan_pool(new_spec, pool))
        if opts.wait or replacing:
            pool = wait_pool_active(client, cluster_id, pool["id"], opts.wait_timeout)
        if replacing and current is not None:
            stale = [current, *stale]
        current = pool
    else:
        if current is None:  # a plan without create always has an observed pool
            raise ConflictError("node pool plan has neither a pool to create nor one to update")
        if plan.patch:
            current = client.call("PATCH", f"{_base(cluster_id)}/{current['id']}", plan.patch)["node_pool"]
            actions.append("updated " + ", ".join(f"{k}={v}" for k, v in sorted(plan.patch.items())))
        actions += apply_labels_and_taints(client, cluster_id, current["id"], plan)
        if opts.wait and (plan.patch or stale):
            current = wait_pool_active(client, cluster_id, current["id"], opts.wait_timeout)
    for old in stale:
        _delete_quietly(client, f"{_base(cluster_id)}/{old['id']}")
        actions.append(f"deleted pool {old.get('label')} (plan {old.get('plan')})")
    result["node_pool"] = current
    result["diff"]["after"] = pool_view(current) if current else spec.as_dict()
    return result


def _planned_actions(plan: PoolPlan, stale: list[dict[str, Any]], replacing: bool) -> list[str]:
    actions = []
    if plan.create:
        actions.append("create pool")
    if replacing:
        actions.append("create replacement pool, wait until active, delete the old pool")
    if plan.patch and not replacing:
        actions.append("update " + ", ".join(f"{k}={v}" for k, v in sorted(plan.patch.items())))
    actions += [f"add label {k}" for k in plan.add_labels] + [f"remove label {k}" for k in plan.remove_labels]
    actions += [f"add taint {t.key}:{t.effect}" for t in plan.add_taints]
    actions += [f"remove taint {t.key}:{t.effect}" for t in plan.remove_taints]
    actions += [f"delete pool {p.get('label')}" for p in stale]
    return actions


def remove_pools(client: VultrClient, cluster: dict[str, Any], spec: PoolSpec, opts: PoolOptions) -> dict[str, Any]:
    """``state: absent``: delete our generations of this pool; a foreign one only with ``force``."""
    current, stale, foreign = select_pools(spec, cluster.get("node_pools") or [])
    targets = [p for p in [current, *stale] if p is not None]
    # Not "skipped": Ansible reserves that result key (a list there is warned about and read as a bool).
    skipped_pools: list[str] = []
    if foreign is not None:
        if opts.force:
            targets.append(foreign)
        else:
            skipped_pools.append(f"pool {foreign.get('label')} (tag {foreign.get('tag')!r}) is not ours; left alone")
    delete_pools(client, cluster, targets, opts)
    return {
        "changed": bool(targets),
        "actions": [f"delete pool {p.get('label')}" for p in targets],
        "skipped_pools": skipped_pools,
        "diff": {"before": pool_view(targets[0]) if targets else {}, "after": {}},
    }


def delete_pools(client: VultrClient, cluster: dict[str, Any], pools: list[dict[str, Any]], opts: PoolOptions) -> None:
    """DELETE each pool (already gone is fine) and, with ``opts.wait``, wait until it is; nothing in check mode."""
    if opts.check_mode:
        return
    for pool in pools:
        path = f"{_base(cluster['id'])}/{pool['id']}"
        _delete_quietly(client, path)
        if opts.wait:
            wait_gone(client, path, opts.wait_timeout, f"node pool {pool.get('label')}")
