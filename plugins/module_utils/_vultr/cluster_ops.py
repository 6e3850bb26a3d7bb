# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``vke_cluster``: find (label + marker), create, report drift, upgrade, pools, kubeconfig, delete.

Why this shape: the no-op path is ONE request (``GET /kubernetes/clusters``, which embeds every
pool), plus one for the kubeconfig when ``kubeconfig_path`` is set, whatever the number of pools
(``node_pools`` are compared against the embedded objects) and whatever ``version`` says (``latest``,
a prefix or an exact build). Catalogue checks, version resolution and ``available-upgrades`` run
only when something is created or may be upgraded (``allow_upgrade: true``).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
from pathlib import Path
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    ApiError,
    ConflictError,
    InputError,
    NotFoundError,
)
from ansible_collections.metalplane.inference.plugins.module_utils._common.files import (
    directory_mode,
    private_file_needs_update,
    write_private_file,
)
from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._common.waiting import Poll, wait_for

from .args import client_from_params
from .catalog import check_gpu_counts, check_plans_available, check_region, resolve
from .client import VultrClient
from .cluster import (
    CLUSTER_OWNER_TAG,
    ClusterSpec,
    cluster_drift,
    cluster_spec_from_params,
    create_body,
    find_by_label,
    version_drift,
)
from .errors import ineligible_plan_error, is_ineligible_plan, is_server_error, vpc_only_error
from .limits import check_vpc_only
from .node_pool import PoolSpec, extra_pools, pool_spec_from_params
from .pool_ops import PoolOptions, creates_pool, delete_pools, reconcile_pool, remove_pools
from .versions import LATEST, is_exact, matches, normalise, version_key
from .waits import POLL_BACKOFF, cluster_ready, status_view, wait_cluster_active, wait_gone

CLUSTERS = "/kubernetes/clusters"


def list_clusters(client: VultrClient) -> list[dict[str, Any]]:
    return client.list_all(CLUSTERS, "vke_clusters")


def cluster_view(cluster: dict[str, Any] | None) -> dict[str, Any]:
    if not cluster:
        return {}
    keys = ("id", "label", "region", "version", "status", "ha_controlplanes", "firewall_group_id", "endpoint")
    view = {k: cluster.get(k) for k in keys}
    view["node_pools"] = sorted(p.get("label") for p in cluster.get("node_pools") or [])
    return view


def _pool_specs(params: dict[str, Any]) -> list[tuple[PoolSpec, dict[str, Any]]]:
    """``node_pools`` items; a pool without its own ``vpc_only`` takes the cluster's."""
    specs = []
    for index, item in enumerate(params.get("node_pools") or []):
        present = item.get("state", "present") == "present"
        values = dict(item)
        if values.get("vpc_only") is None:
            values["vpc_only"] = bool(params.get("vpc_only"))
        specs.append((pool_spec_from_params(values, prefix=f"node_pools[{index}].", need_plan=present), item))
        if item.get("gpu_count") is not None and item["gpu_count"] < 1:
            raise InputError(f"node_pools[{index}].gpu_count", f"must be at least 1, got {item['gpu_count']}")
    labels = [s.label for s, _pool in specs]
    if len(set(labels)) != len(labels):
        raise InputError("node_pools", "pool labels must be unique within the cluster")
    return specs


def run_vke_cluster(module: MetalplaneModule) -> dict[str, Any]:
    params = module.params
    spec = cluster_spec_from_params(params)
    pool_specs = _pool_specs(params) if params["state"] == "present" else []
    if any(s.label == spec.system_pool.label for s, _pool in pool_specs):
        raise InputError("node_pools", f"{spec.system_pool.label!r} is the system pool's label; use another")
    if params["state"] == "present":  # a known 500: refused before any request (limits.py)
        allow = bool(params.get("allow_vpc_only"))
        check_vpc_only(spec.vpc_only, allow, "vpc_only")
        for index, (pool_spec, item) in enumerate(pool_specs):
            if item.get("vpc_only") is not None:
                check_vpc_only(pool_spec.vpc_only, allow, f"node_pools[{index}].vpc_only")
    client = client_from_params(params)
    if params["state"] == "absent":
        result = _absent(client, spec, params, module.check_mode)
    else:
        result = _present(client, spec, pool_specs, params, module)
    result["api_requests"] = client.counter.as_dict()
    if not module.diff_mode:
        result.pop("diff", None)
    return result


def _find(client: VultrClient, spec: ClusterSpec, force: bool) -> dict[str, Any] | None:
    ours, foreign = find_by_label(list_clusters(client), spec.label)
    if len(ours) > 1:
        ids = ", ".join(c["id"] for c in ours)
        raise ConflictError(
            f"several clusters labelled {spec.label!r} carry this collection's marker ({ids}); delete the extra ones"
        )
    if ours:
        return ours[0]
    if foreign and not force:
        raise ConflictError(
            f"a VKE cluster labelled {spec.label!r} exists ({foreign[0]['id']}) but was not created by this "
            f"collection (no node pool tagged {CLUSTER_OWNER_TAG!r}); choose another label, or set "
            "force: true to manage it"
        )
    return foreign[0] if foreign else None


@dataclasses.dataclass
class Outcome:
    """What one step of a ``present`` run did (find or create, upgrade, pools).

    Each step returns its own and ``_present`` merges them in order, so no step writes into a
    result that another step also writes.
    """

    cluster: dict[str, Any]
    changed: bool = False
    actions: list[str] = dataclasses.field(default_factory=list)
    drift: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    node_pools: list[dict[str, Any]] | None = None  # per-pool outcomes, when pools were converged


def _present(
    client: VultrClient,
    spec: ClusterSpec,
    pool_specs: list[tuple[PoolSpec, dict[str, Any]]],
    params: dict[str, Any],
    module: MetalplaneModule,
) -> dict[str, Any]:
    check = module.check_mode
    found = _find(client, spec, params["force"])
    before = cluster_view(found)
    if found is None:
        cluster, actions = _create(client, spec, pool_specs, params=params, check=check)
        if cluster is None:  # check mode
            if params.get("kubeconfig_path"):
                actions = [*actions, f"write kubeconfig to {params['kubeconfig_path']}"]
            return {
                "changed": True,
                "actions": actions,
                "drift": [],
                "cluster": {},
                "diff": {"before": {}, "after": {"label": spec.label, "state": "present"}},
            }
        steps = [Outcome(cluster, changed=True, actions=actions)]
    else:
        steps = [_existing(client, spec, found, params=params, check=check)]
    cluster = steps[-1].cluster
    # Not just the cluster's status: after an interrupted run it may be active while its pools or
    # nodes are still pending. The embedded pools make this free when everything is ready.
    if params["wait"] and not check and not cluster_ready(cluster):
        cluster = wait_cluster_active(client, cluster["id"], params["wait_timeout"])
    if pool_specs or params.get("remove_extra_pools"):
        steps.append(
            _converge_pools(client, cluster, pool_specs, params=params, check=check, plans_checked=found is None)
        )
        cluster = steps[-1].cluster
    result: dict[str, Any] = {
        "changed": any(step.changed for step in steps),
        "actions": [action for step in steps for action in step.actions],
        "drift": [entry for step in steps for entry in step.drift],
    }
    pools = [step.node_pools for step in steps if step.node_pools is not None]
    if pools:
        result["node_pools"] = pools[0]
    if params.get("kubeconfig_path"):
        if _kubeconfig(client, cluster, Path(params["kubeconfig_path"]), check, module):
            result["changed"] = True
            result["actions"].append(f"wrote kubeconfig to {params['kubeconfig_path']}")
        result["kubeconfig_path"] = params["kubeconfig_path"]
        result["kubeconfig_dir_mode"] = directory_mode(Path(params["kubeconfig_path"]).parent)
    return {**result, "cluster": cluster, "diff": {"before": before, "after": cluster_view(cluster)}}


def _existing(
    client: VultrClient, spec: ClusterSpec, cluster: dict[str, Any], *, params: dict[str, Any], check: bool
) -> Outcome:
    """Drift of create-only fields (reported) and the version (reported, or upgraded when allowed)."""
    drift = cluster_drift(spec, cluster)
    current = cluster.get("version", "")
    if not params["allow_upgrade"]:
        if version_drift(spec, current):  # no request: a plain comparison (``latest`` is not checked)
            desired = normalise(spec.version) if is_exact(spec.version) else spec.version
            drift.append(
                {"field": "version", "observed": current, "desired": desired, "reason": "running version differs"}
            )
        return Outcome(cluster, drift=drift)
    target = _upgrade_target(client, spec, cluster)
    if target is None:
        return Outcome(cluster, drift=drift)
    if not check:
        cluster = _upgrade(client, cluster, target, params["wait_timeout"] if params["wait"] else None)
    return Outcome(cluster, changed=True, actions=[f"upgrade {current} -> {target}"], drift=drift)


def _check_new_pools(
    client: VultrClient,
    region: str,
    pool_specs: list[tuple[PoolSpec, dict[str, Any]]],
    new: list[int],
    *,
    system_plan: str | None = None,
) -> None:
    """Before the first write: the plan of every pool to create (indexes ``new``) is sold in the region
    (one ``availability`` read), and gives the pool's ``gpu_count`` when it sets one (one ``plans`` read).
    """
    plans = {} if system_plan is None else {"system_pool.plan": system_plan}
    plans.update({f"node_pools[{i}].plan": pool_specs[i][0].plan for i in new})
    check_plans_available(client, region, plans)
    counts = {
        f"node_pools[{i}].gpu_count": (pool_specs[i][0].plan, int(pool_specs[i][1]["gpu_count"]))
        for i in new
        if pool_specs[i][1].get("gpu_count") is not None
    }
    check_gpu_counts(client, counts)


def _converge_pools(
    client: VultrClient,
    cluster: dict[str, Any],
    pool_specs: list[tuple[PoolSpec, dict[str, Any]]],
    *,
    params: dict[str, Any],
    check: bool,
    plans_checked: bool = False,
) -> Outcome:
    """The ``node_pools`` option: compared with the pools embedded in ``cluster`` (no request if equal).

    Every pool is planned before the first write: a conflict (a foreign pool, an immutable change
    without ``replace``) or a plan not sold in the region or without the pool's ``gpu_count`` (reads
    only when a pool is to be created or replaced) fails the task with nothing changed. ``plans_checked``:
    the cluster was just created, and ``_create`` checked every pool's plan already. With
    ``remove_extra_pools``, our pools that no listed label accounts for are deleted last.
    """
    options = [
        PoolOptions(
            replace=bool(item.get("replace")),
            check_mode=check,
            wait=params["wait"],
            wait_timeout=params["wait_timeout"],
            field_prefix=f"node_pools[{index}].",
        )
        for index, (_spec, item) in enumerate(pool_specs)
    ]
    new = [
        index
        for index, ((pool_spec, item), opts) in enumerate(zip(pool_specs, options, strict=True))
        if item.get("state") != "absent" and creates_pool(cluster, pool_spec, opts)
    ]
    if not plans_checked:
        _check_new_pools(client, cluster["region"], pool_specs, new)
    extra = (
        extra_pools(cluster.get("node_pools") or [], [pool_spec.label for pool_spec, _item in pool_specs])
        if params.get("remove_extra_pools")
        else []
    )
    step = Outcome(cluster, node_pools=[])
    for index, ((pool_spec, item), opts) in enumerate(zip(pool_specs, options, strict=True)):
        if item.get("state") == "absent":
            outcome = remove_pools(client, cluster, pool_spec, opts)
        else:
            outcome = reconcile_pool(client, cluster, pool_spec, opts)
        step.node_pools.append({k: v for k, v in outcome.items() if k != "diff"})
        step.drift.extend({**d, "field": f"node_pools[{index}].{d['field']}"} for d in outcome.get("drift") or [])
        if outcome["changed"]:
            step.changed = True
            step.actions.extend(f"{pool_spec.label}: {a}" for a in outcome["actions"])
    if extra:
        opts = PoolOptions(check_mode=check, wait=params["wait"], wait_timeout=params["wait_timeout"])
        delete_pools(client, cluster, extra, opts)
        step.changed = True
        step.actions.extend(f"{p.get('label')}: delete pool {p.get('label')} (ours, not listed)" for p in extra)
    if step.changed and not check:
        step.cluster = client.call("GET", f"{CLUSTERS}/{cluster['id']}")["vke_cluster"]
    return step


def _create(
    client: VultrClient,
    spec: ClusterSpec,
    pool_specs: list[tuple[PoolSpec, dict[str, Any]]],
    *,
    params: dict[str, Any],
    check: bool,
) -> tuple[dict[str, Any] | None, list[str]]:
    """The new cluster (None in check mode) and what was done; every pool's plan is checked first."""
    region = check_region(client, spec.region)
    present = [i for i, (_s, item) in enumerate(pool_specs) if item.get("state") != "absent"]
    _check_new_pools(client, region, pool_specs, present, system_plan=spec.system_pool.plan)
    version = normalise(spec.version) if is_exact(spec.version) else resolve(client, spec.version)
    actions = [f"create cluster {spec.label} ({version}, {region}) with pool {spec.system_pool.label}"]
    if check:
        return None, actions
    body = create_body(spec, version)

    def find() -> dict[str, Any] | None:
        ours, _foreign = find_by_label(list_clusters(client), spec.label)
        return ours[0] if ours else None

    try:
        # vpc_only: a 5xx is VKE's known VPC-only failure, explained (and cleaned up), never re-sent.
        cluster, recovered = client.create(
            CLUSTERS, body, "vke_cluster", find=find, server_error_is_final=spec.vpc_only
        )
    except NotFoundError as exc:
        if is_ineligible_plan(exc):
            raise ineligible_plan_error("system_pool.plan", spec.system_pool.plan, region, exc) from None
        raise
    except ApiError as exc:
        if spec.vpc_only and is_server_error(exc):
            raise _vpc_only_failure(client, spec, exc, find, params["wait_timeout"]) from None
        raise
    if recovered:
        actions.append("create response was lost or failed; found the created cluster by label and marker")
    return cluster, actions


def _vpc_only_failure(client: VultrClient, spec: ClusterSpec, exc: ApiError, find: Any, timeout: float) -> ApiError:
    """Delete whatever the failed vpc_only create left behind (waiting until it is gone); explain."""
    cleanup = ""
    partial = find()
    if partial is not None:
        path = f"{CLUSTERS}/{partial['id']}"
        with contextlib.suppress(NotFoundError):
            client.call("DELETE", f"{path}/delete-with-linked-resources")
        wait_gone(client, path, timeout, f"partially created cluster {partial['id']}")
        cleanup = f" (the partially created cluster {partial['id']} was deleted with its linked resources)"
    return vpc_only_error(f"cluster {spec.label!r}", exc, spec.region, cleanup)


def _available_upgrades(client: VultrClient, cluster: dict[str, Any]) -> list[str]:
    found = client.call("GET", f"{CLUSTERS}/{cluster['id']}/available-upgrades").get("available_upgrades") or []
    return sorted((str(v) for v in found), key=lambda v: version_key(v) or ())


def _upgrade_target(client: VultrClient, spec: ClusterSpec, cluster: dict[str, Any]) -> str | None:
    """The version to upgrade to (checked against ``available-upgrades``), or None if there is nothing to do.

    Only called with ``allow_upgrade: true``. ``latest``: the newest available upgrade (one
    request). A prefix or an exact build that the running version already satisfies: nothing, no
    request. Otherwise the target must be an available upgrade: ``InputError`` on ``version``,
    listing them, before any POST.
    """
    current = cluster.get("version", "")
    if spec.version == LATEST:
        upgrades = _available_upgrades(client, cluster)
        return upgrades[-1] if upgrades else None
    if not version_drift(spec, current):
        return None
    upgrades = _available_upgrades(client, cluster)
    if is_exact(spec.version):
        target = normalise(spec.version)
        candidates = [v for v in upgrades if v == target]
    else:
        candidates = [v for v in upgrades if matches(spec.version, v)]
    if not candidates:
        listed = ", ".join(upgrades) or "none (an upgrade may already be in progress)"
        raise InputError(
            "version",
            f"{spec.version!r} is not an available upgrade of cluster {spec.label!r} (running {current}); "
            f"available upgrades: {listed}. Pick one of them (an upgrade may have to go through them in turn), "
            "or set allow_upgrade: false to only report the difference.",
            details={"running": current, "available_upgrades": upgrades},
        )
    return candidates[-1]


def _upgrade(client: VultrClient, cluster: dict[str, Any], target: str, timeout: float | None) -> dict[str, Any]:
    """POST the upgrade (``target`` was just checked against the available upgrades) and wait for it."""
    path = f"{CLUSTERS}/{cluster['id']}"
    try:
        client.call("POST", f"{path}/upgrades", {"upgrade_version": target})
    except ApiError as exc:
        # A 5xx or a lost response: never replayed. Re-read: the upgrade took if the version changed or
        # the target left the available upgrades (it was listed just before the POST).
        if not is_server_error(exc) and exc.status is not None:
            raise
        again = client.call("GET", path)["vke_cluster"]
        if again.get("version") != target and target in _available_upgrades(client, cluster):
            raise ApiError(
                f"upgrade of cluster {cluster.get('label')!r} to {target} failed ({exc.msg}); a re-read shows "
                f"it did not start (still running {again.get('version')}, {target} still offered). Re-run later.",
                status=exc.status,
                method="POST",
                url=f"{path}/upgrades",
            ) from None
    if timeout is None:
        return client.call("GET", path)["vke_cluster"]

    def observe() -> Poll[dict[str, Any]]:
        seen = client.call("GET", path)["vke_cluster"]
        if seen.get("version") == target and cluster_ready(seen):
            return Poll(True, seen)
        return Poll(False, {"version": seen.get("version"), **status_view(seen)})  # short timeout message

    return wait_for(
        observe, timeout=timeout, what=f"cluster {cluster.get('label')!r} to run {target}", backoff=POLL_BACKOFF
    )


def _kubeconfig(
    client: VultrClient, cluster: dict[str, Any], path: Path, check: bool, module: MetalplaneModule
) -> bool:
    encoded = client.call("GET", f"{CLUSTERS}/{cluster['id']}/config").get("kube_config") or ""
    module.log_secret(encoded)
    try:
        content = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ApiError(f"cluster {cluster.get('label')!r}: the kubeconfig returned by VKE is not base64") from None
    module.log_secret(content.decode(errors="replace"))
    if check:
        return private_file_needs_update(path, content)
    return write_private_file(path, content)


def _absent(client: VultrClient, spec: ClusterSpec, params: dict[str, Any], check: bool) -> dict[str, Any]:
    ours, foreign = find_by_label(list_clusters(client), spec.label)
    if foreign and not ours and not params["force"]:
        raise ConflictError(
            f"refusing to delete VKE cluster {spec.label!r} ({foreign[0]['id']}): it does not carry this collection's "
            f"marker (a node pool tagged {CLUSTER_OWNER_TAG!r}). Set force: true to delete it anyway."
        )
    targets = ours + (foreign if params["force"] else [])
    suffix = "/delete-with-linked-resources" if params["delete_linked_resources"] else ""
    # remove_extra_pools: no pool is listed on teardown, so every pool of ours goes first, while the
    # control plane still runs; the cluster's own marker pool is never among them.
    pools = {c["id"]: extra_pools(c.get("node_pools") or [], []) for c in targets}
    if not params.get("remove_extra_pools"):
        pools = {}
    actions = [f"delete pool {p.get('label')}" for c in targets for p in pools.get(c["id"], [])]
    actions += [f"delete cluster {c['id']}{' with linked resources' if suffix else ''}" for c in targets]
    result: dict[str, Any] = {
        "changed": bool(targets),
        "actions": actions,
        "drift": [],
        "cluster": {},
        "diff": {"before": cluster_view(targets[0]) if targets else {}, "after": {}},
    }
    if params.get("remove_extra_pools"):
        result["node_pools"] = [
            {"label": p.get("label"), "changed": True, "actions": [f"delete pool {p.get('label')}"]}
            for c in targets
            for p in pools.get(c["id"], [])
        ]
    if check:
        return result
    opts = PoolOptions(wait=params["wait"], wait_timeout=params["wait_timeout"])
    for cluster in targets:
        delete_pools(client, cluster, pools.get(cluster["id"], []), opts)
        path = f"{CLUSTERS}/{cluster['id']}"
        try:
            client.call("DELETE", path + suffix)
        except NotFoundError:
            continue
        if params["wait"]:
            wait_gone(client, path, params["wait_timeout"], f"cluster {spec.label!r}")
    return result
