# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight of a whole inventory of VKE GPU clusters: every problem found before anything exists.

Why a module of its own, run once for all clusters: a GPU cluster costs money from the minute it is
created, and a bad inventory (a plan the region does not sell, a GPU count that does not match the
plan, a node count outside the autoscaler range, two clusters claiming the same network, a rejected
API key) would otherwise surface halfway through, after some clusters are up. So the inventory is
checked first, *all* of it, and every problem is reported at once with the field that holds it;
nothing is created or changed. The checks that need the platform cost a fixed handful of read-only
requests (regions, plans, availability per region, versions, clusters), whatever the cluster count.

Overlaps: VKE gives every cluster the same fixed pod and service subnets (``cluster_subnet`` and
``service_subnet`` in the API's cluster object; they cannot be chosen on create), so a network an
inventory declares for a cluster (its VPC subnet, say) must not overlap them, must not overlap a
network reserved for something else (``reserved_networks``: the Modelplane control plane, an office
range), and must not overlap another cluster's networks unless both clusters declare the very same
VPC (same ``vpc_id``, same subnet).

The split: ``check_inventory`` is pure (shape, counts, names, networks) and unit-tested;
``check_catalog`` compares the inventory with what the API reports, also pure; ``run_vke_preflight``
fetches and glues. The pool rules (``check_pool_list``, ``check_pool``) are also the vke_cluster role's
input checks (``role_checks.py``), so a pool the role accepts is one this preflight accepts.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    ApiError,
    InputError,
)
from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._common.problems import PreflightError, Problem
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane import validate
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.constants import (
    MAX_NODE_POOLS,
    MAX_POOL_NAME,
    MAX_POOL_NODES,
    MIN_POOL_NODES,
)

from .args import client_from_params
from .cluster import SYSTEM_POOL_DEFAULTS, find_by_label
from .cluster_ops import list_clusters
from .limits import VPC_ONLY_REASON, per_node_problem
from .node_pool import is_generation_of, parse_taint
from .plans import describe_gpu_plan, plan_id_gpu_model
from .versions import resolve_version

# typing.Union, not "|": pylint (ansible-test sanity) rejects "|" between classes outside annotations.
Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]  # noqa: UP007
# A network another cluster declared: (cluster, its vpc_id, the network).
Declared = tuple[str, Any, Network]

# VKE assigns these to every cluster (API fields cluster_subnet / service_subnet, read-only).
VKE_POD_SUBNET = "10.244.0.0/16"
VKE_SERVICE_SUBNET = "10.96.0.0/12"
STATES = ("present", "absent")
CLUSTER_KEYS = (
    "name",
    "state",
    "region",
    "version",
    "vpc_id",
    "vpc_only",
    "allow_vpc_only",
    "gpu_pools",
    "networks",
    "classes",
    "smoke",
)
# The keys of a vke_cluster_gpu_pools entry (the vke_cluster role's argument spec), also the site inventory's.
POOL_KEYS = (
    "name",
    "plan",
    "gpu",
    "node_quantity",
    "min_nodes",
    "max_nodes",
    "labels",
    "taints",
    "class_name",
    "replace",
)
GPU_KEYS = ("type", "count")
# vke_cluster creates the system pool inline with this label, so no GPU pool may take it.
SYSTEM_POOL_LABEL = str(SYSTEM_POOL_DEFAULTS["label"])
# A VKE label and an InferenceCluster name at once: a DNS label (RFC 1123).
DNS_LABEL_MAX = 63
_DNS_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789-")


@dataclass
class Catalog:
    """What the Vultr account offers, as far as the inventory needs it."""

    regions: set[str]
    plans: dict[str, dict[str, Any]]
    available: dict[str, set[str]]
    versions: list[str]
    clusters: list[dict[str, Any]] = field(default_factory=list)


def is_dns_label(value: str) -> bool:
    return 0 < len(value) <= DNS_LABEL_MAX and set(value) <= _DNS_CHARS and value[0].isalnum() and value[-1].isalnum()


def _int(problems: list[Problem], where: str, value: Any, minimum: int, maximum: int) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(str(value))
        except ValueError:
            problems.append(Problem(where, f"must be a whole number, got {value!r}"))
            return None
    if not minimum <= value <= maximum:
        problems.append(Problem(where, f"must be between {minimum} and {maximum}, got {value}"))
        return None
    return value


def _unknown_keys(problems: list[Problem], where: str, value: Mapping[str, Any], allowed: Iterable[str]) -> None:
    extra = sorted(set(value) - set(allowed))
    if extra:
        problems.append(Problem(where, f"unknown key(s) {', '.join(extra)}; allowed: {', '.join(allowed)}"))


def _check_gpu(problems: list[Problem], where: str, gpu: Any) -> None:
    if not isinstance(gpu, Mapping):
        problems.append(Problem(where, "must be a mapping like {type: L40S, count: 1}"))
        return
    _unknown_keys(problems, where, gpu, GPU_KEYS)
    if not gpu.get("type"):
        problems.append(Problem(f"{where}.type", "is required (the GPU model, for example L40S or A16)"))
    elif not gpu_model(gpu["type"]):
        problems.append(Problem(f"{where}.type", f"{gpu['type']!r} names no GPU model (for example L40S or A16)"))
    _int(problems, f"{where}.count", gpu.get("count", 1), 1, 16)


def _check_counts(problems: list[Problem], where: str, pool: Mapping[str, Any]) -> None:
    """``node_quantity`` within ``min_nodes``..``max_nodes``; a minimum needs a maximum."""
    counts: dict[str, int | None] = {}
    for key in ("node_quantity", "min_nodes", "max_nodes"):
        if pool.get(key) not in (None, ""):
            counts[key] = _int(problems, f"{where}.{key}", pool[key], MIN_POOL_NODES, MAX_POOL_NODES)
    if "min_nodes" in counts and "max_nodes" not in counts:
        problems.append(Problem(f"{where}.min_nodes", "needs max_nodes (a maximum turns the autoscaler on)"))
    quantity, low, high = counts.get("node_quantity"), counts.get("min_nodes"), counts.get("max_nodes")
    if quantity is not None and high is not None and quantity > high:
        problems.append(Problem(f"{where}.node_quantity", f"{quantity} is above max_nodes ({high})"))
    if quantity is not None and low is not None and quantity < low:
        problems.append(Problem(f"{where}.node_quantity", f"{quantity} is below min_nodes ({low})"))


def check_pool(problems: list[Problem], where: str, pool: Any) -> None:
    """Shape and counts of one GPU pool (plan facts are ``check_catalog``'s job)."""
    if not isinstance(pool, Mapping):
        problems.append(Problem(where, "must be a mapping with name, plan, gpu and node_quantity"))
        return
    _unknown_keys(problems, where, pool, POOL_KEYS)
    for required in ("name", "plan", "gpu", "node_quantity"):
        if pool.get(required) in (None, ""):
            problems.append(Problem(f"{where}.{required}", "is required"))
    name = pool.get("name")
    if name and (not is_dns_label(str(name)) or len(str(name)) > MAX_POOL_NAME):
        problems.append(
            Problem(
                f"{where}.name",
                f"{name!r} must be a lower-case DNS label of at most {MAX_POOL_NAME} characters "
                "(it is also the modelplane.ai/pool node label and the Modelplane pool name)",
            )
        )
    plan = pool.get("plan")
    if plan and not str(plan).startswith("vcg-"):
        problems.append(Problem(f"{where}.plan", f"{plan!r} is not a GPU plan (GPU plan ids start with 'vcg-')"))
    if pool.get("gpu") is not None:
        _check_gpu(problems, f"{where}.gpu", pool["gpu"])
    _check_counts(problems, where, pool)
    _check_node_metadata(problems, where, pool)


def _problem(exc: InputError) -> Problem:
    prefix = f"{exc.field}: "
    return Problem(exc.field, exc.msg[len(prefix) :] if exc.msg.startswith(prefix) else exc.msg)


def _check_node_metadata(problems: list[Problem], where: str, pool: Mapping[str, Any]) -> None:
    """The nodes' labels and taints, with the rules vke_node_pool applies (Kubernetes' syntax) before the cluster
    exists: Vultr passes them on, and a node whose labels the API server refuses never joins its pool."""
    labels = pool.get("labels")
    if labels is not None and not isinstance(labels, Mapping):
        problems.append(Problem(f"{where}.labels", "must be a mapping of label keys to values"))
    elif labels:
        try:
            validate.labels(f"{where}.labels", {str(k): "" if v is None else str(v) for k, v in labels.items()})
        except InputError as exc:
            problems.append(_problem(exc))
    taints = pool.get("taints")
    if taints is not None and not isinstance(taints, list):
        problems.append(Problem(f"{where}.taints", "must be a list of {key, value, effect}"))
        return
    for taint in taints or []:
        if not isinstance(taint, Mapping):
            problems.append(Problem(f"{where}.taints", "every taint must be a mapping with key, value and effect"))
            continue
        try:
            parse_taint(dict(taint), f"{where}.")
        except InputError as exc:
            problems.append(_problem(exc))


def _networks(problems: list[Problem], where: str, value: Any) -> list[Network]:
    parsed: list[Network] = []
    if value is None:
        return parsed
    if isinstance(value, str) or not isinstance(value, Iterable):
        problems.append(Problem(where, "must be a list of CIDRs such as 10.20.0.0/20"))
        return parsed
    for index, cidr in enumerate(value):
        try:
            parsed.append(ipaddress.ip_network(str(cidr), strict=True))
        except ValueError as exc:
            hint = ""
            with contextlib.suppress(ValueError):
                hint = f"; did you mean {ipaddress.ip_network(str(cidr), strict=False)}?"
            problems.append(Problem(f"{where}[{index}]", f"{cidr!r} is not a network ({exc}){hint}"))
    return parsed


def _check_overlaps(
    problems: list[Problem], where: str, cluster: Mapping[str, Any], reserved: list[Network], declared: list[Declared]
) -> None:
    """This cluster's networks against VKE's fixed subnets, the reserved ones and earlier clusters'."""
    fixed = [ipaddress.ip_network(VKE_POD_SUBNET), ipaddress.ip_network(VKE_SERVICE_SUBNET)]
    nets = _networks(problems, f"{where}.networks", cluster.get("networks"))
    for net in nets:
        clashes = [f"VKE's fixed pod/service subnet {vke}" for vke in fixed if net.overlaps(vke)]
        clashes += [f"reserved network {other}" for other in reserved if net.overlaps(other)]
        for other_name, other_vpc, other_net in declared:
            same_vpc = bool(cluster.get("vpc_id")) and cluster.get("vpc_id") == other_vpc and net == other_net
            if net.overlaps(other_net) and not same_vpc:
                clashes.append(f"{other_net} of cluster {other_name!r}")
        problems.extend(Problem(f"{where}.networks", f"{net} overlaps {clash}") for clash in clashes)
    declared.extend((where, cluster.get("vpc_id"), net) for net in nets)


def check_pool_list(
    problems: list[Problem],
    where: str,
    pools: list[Any],
    pool_where: Callable[[int, Any], str],
    also: Callable[[list[Problem], str, Mapping[str, Any]], None] | None = None,
) -> None:
    """The pools of one cluster: how many, unique names that are not the system pool's, and each pool.

    ``where`` names the list, ``pool_where(index, pool)`` one of its pools; the site inventory and the
    vke_cluster role name them differently, the rules are the same. ``also`` adds a check per pool
    (after ``check_pool``), so a pool's problems stay together.
    """
    if len(pools) > MAX_NODE_POOLS:
        problems.append(Problem(where, f"at most {MAX_NODE_POOLS} pools (Modelplane's limit)"))
    names = [p.get("name") for p in pools if isinstance(p, Mapping)]
    for dup in sorted({n for n in names if n and names.count(n) > 1}):
        problems.append(Problem(where, f"pool names must be unique: {dup!r} is used twice"))
    if SYSTEM_POOL_LABEL in names:
        problems.append(
            Problem(where, f"{SYSTEM_POOL_LABEL!r} is the label of the system pool vke_cluster creates; use another")
        )
    for index, pool in enumerate(pools):
        check_pool(problems, pool_where(index, pool), pool)
        if also is not None and isinstance(pool, Mapping):
            also(problems, pool_where(index, pool), pool)


def _check_pools(problems: list[Problem], where: str, pools: Any) -> None:
    if not isinstance(pools, list) or not pools:
        problems.append(Problem(f"{where}.gpu_pools", "must list at least one GPU pool for a present cluster"))
        return

    def pool_where(index: int, pool: Any) -> str:
        label = pool.get("name") if isinstance(pool, Mapping) and pool.get("name") else index
        return f"{where}.gpu_pools[{label}]"

    check_pool_list(problems, f"{where}.gpu_pools", pools, pool_where)


def check_inventory(clusters: Any, reserved_networks: Any = None) -> list[Problem]:
    """Every shape, count, name and network problem of the inventory (no API needed)."""
    if not isinstance(clusters, list) or not clusters:
        return [Problem("clusters", "must list at least one cluster")]
    problems: list[Problem] = []
    reserved = _networks(problems, "reserved_networks", reserved_networks)
    seen: set[str] = set()
    declared: list[Declared] = []
    for index, cluster in enumerate(clusters):
        if not isinstance(cluster, Mapping):
            problems.append(Problem(f"clusters[{index}]", "must be a mapping"))
            continue
        name = str(cluster.get("name") or "")
        where = name or f"clusters[{index}]"
        _unknown_keys(problems, where, cluster, CLUSTER_KEYS)
        if not is_dns_label(name):
            shown = name if len(name) <= DNS_LABEL_MAX else f"{name[:20]}... ({len(name)} characters)"
            problems.append(
                Problem(
                    f"{where}.name",
                    f"{shown!r} must be a lower-case DNS label: 1 to {DNS_LABEL_MAX} of a-z, 0-9 and '-', starting and"
                    " ending with a letter or digit",
                )
            )
        if name in seen:
            problems.append(Problem(f"{where}.name", "is used by two clusters; cluster names must be unique"))
        seen.add(name)
        state = cluster.get("state", "present")
        if state not in STATES:
            problems.append(Problem(f"{where}.state", f"must be present or absent, got {state!r}"))
        if _truthy(cluster.get("vpc_only")):
            if not cluster.get("vpc_id"):
                problems.append(Problem(f"{where}.vpc_only", "needs vpc_id (a VPC with a NAT gateway)"))
            if not _truthy(cluster.get("allow_vpc_only")):
                problems.append(Problem(f"{where}.vpc_only", VPC_ONLY_REASON))
        _check_overlaps(problems, where, cluster, reserved, declared)
        if state == "present":
            if not cluster.get("region"):
                problems.append(Problem(f"{where}.region", "is required for a present cluster (for example ewr)"))
            _check_pools(problems, where, cluster.get("gpu_pools"))
            _check_single_node(problems, where, cluster)
    return problems


def _truthy(value: Any) -> bool:
    """An inventory boolean that may arrive as a string ("false") from templating."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "on", "1")
    return bool(value)


def _gpus_per_node(pool: Mapping[str, Any]) -> int | None:
    gpu = pool.get("gpu")
    count = gpu.get("count", 1) if isinstance(gpu, Mapping) else None
    try:
        return int(str(count)) if count is not None else None
    except ValueError:
        return None  # check_pool reports it


def _check_single_node(problems: list[Problem], where: str, cluster: Mapping[str, Any]) -> None:
    """No class and no smoke replica may need more GPUs than one node of its VKE pool has (limits.py)."""
    pools = [p for p in cluster.get("gpu_pools") or [] if isinstance(p, Mapping) and p.get("name")]
    per_node = {str(p["name"]): _gpus_per_node(p) for p in pools}
    class_pools: dict[str, list[str]] = {}
    for pool in pools:
        class_pools.setdefault(str(pool.get("class_name") or pool["name"]), []).append(str(pool["name"]))
    for cls in cluster.get("classes") or []:
        if not isinstance(cls, Mapping):
            continue
        devices = ((cls.get("spec") or {}).get("devices")) or []
        for index, device in enumerate(devices):
            if not isinstance(device, Mapping) or device.get("claim", "DRA") != "DRA":
                continue
            for pool in class_pools.get(str(cls.get("name")), []):
                have = per_node.get(pool)
                why = per_node_problem(_count(device.get("count", 1)), have, pool) if have else None
                if why:
                    field = f"{where}.modelplane_classes[{cls.get('name')}].spec.devices[{index}].count"
                    problems.append(Problem(field, f"class {cls.get('name')!r} {why}"))
    smoke = cluster.get("smoke")
    if not isinstance(smoke, Mapping) or not smoke:
        return
    if not smoke.get("model"):
        problems.append(Problem(f"{where}.modelplane_smoke.model", "is required: the model the smoke test serves"))
    pool = str(smoke.get("pool") or (pools[0]["name"] if pools else ""))
    if pool not in per_node:
        problems.append(
            Problem(
                f"{where}.modelplane_smoke.pool", f"{pool!r} is not a GPU pool of this cluster ({', '.join(per_node)})"
            )
        )
        return
    have = per_node[pool]
    why = per_node_problem(_count(smoke.get("gpus", 1)), have, pool) if have else None
    if why:
        problems.append(Problem(f"{where}.modelplane_smoke.gpus", f"the smoke test's replica {why}"))


def _count(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 1


def gpu_model(value: Any) -> str:
    """``NVIDIA L40S`` / ``NVIDIA_L40S`` / ``l40s`` / ``A16`` -> ``l40s`` / ``a16``: how plans name the model.

    Also the value of the ``modelplane.ai/gpu`` node label the vke_cluster role gives a pool.
    """
    text = str(value).lower().replace("nvidia", "").replace("amd", "")
    return "".join(ch for ch in text if ch.isalnum())


def gpu_type_problem(gpu_type: Any, plan_id: Any, plan_model: str | None) -> str | None:
    """Why ``gpu.type`` does not name ``plan_model``, the GPU model of plan ``plan_id``; None when it does.

    An unknown plan model (``None`` or empty) cannot be contradicted, and a type that names no model is
    ``check_pool``'s problem.
    """
    if not gpu_model(gpu_type or "") or not plan_model or gpu_model(gpu_type) == plan_model:
        return None
    return f"{gpu_type!r} does not match {plan_id} (a {plan_model} plan)"


def check_plan_id(problems: list[Problem], where: str, pool: Mapping[str, Any]) -> None:
    """``gpu.type`` against the GPU model the plan id names (``vcg-<model>-...``), with no request.

    The catalogue's model (``check_catalog``) is the authority; this is the check that needs no
    credentials, for the vke_cluster role's own validation.
    """
    gpu = pool.get("gpu")
    plan = pool.get("plan")
    if not isinstance(gpu, Mapping) or not plan:
        return
    wrong = gpu_type_problem(gpu.get("type"), plan, plan_id_gpu_model(str(plan)))
    if wrong:
        problems.append(Problem(f"{where}.gpu.type", wrong))


def check_catalog(clusters: list[Mapping[str, Any]], catalog: Catalog) -> list[Problem]:
    """Regions, plans, availability, GPU model and count, version, label collisions."""
    problems: list[Problem] = []
    for cluster in clusters:
        name = str(cluster.get("name"))
        ours, foreign = find_by_label(catalog.clusters, name)
        if foreign and not ours:
            problems.append(
                Problem(
                    f"{name}.name",
                    f"a VKE cluster labelled {name!r} exists ({foreign[0].get('id')}) without this collection's "
                    "marker; rename the inventory host or adopt it deliberately with vke_cluster force: true",
                )
            )
        if cluster.get("state", "present") != "present":
            continue
        region = cluster.get("region")
        if region and region not in catalog.regions:
            problems.append(
                Problem(f"{name}.region", f"unknown region {region!r}; known: {', '.join(sorted(catalog.regions))}")
            )
            continue
        try:
            resolve_version(str(cluster.get("version") or "latest"), catalog.versions)
        except InputError as exc:
            problems.append(Problem(f"{name}.version", exc.msg.split(": ", 1)[-1]))
        # GPU stock comes and goes: a pool that already runs on its plan must not fail the re-run
        # (the reconcile loop) because the region sold out; only new pools need availability.
        running = [p for c in ours for p in c.get("node_pools") or []]
        for pool in cluster.get("gpu_pools") or []:
            where = f"{name}.gpu_pools[{pool.get('name')}]"
            plan_id = pool.get("plan")
            plan = catalog.plans.get(str(plan_id))
            if plan is None:
                problems.append(Problem(f"{where}.plan", f"{plan_id!r} is not a GPU plan Vultr lists"))
                continue
            exists = any(
                is_generation_of(str(p.get("label")), str(pool.get("name"))) and p.get("plan") == plan_id
                for p in running
            )
            if not exists and plan_id not in catalog.available.get(str(region), set()):
                problems.append(Problem(f"{where}.plan", f"{plan_id} is not available in {region}"))
            gpu = pool.get("gpu") or {}
            wrong = gpu_type_problem(gpu.get("type"), plan_id, plan.get("gpu_model"))
            if wrong:
                problems.append(Problem(f"{where}.gpu.type", wrong))
            count = gpu.get("count", 1)
            if plan.get("gpu_count") and str(count).isdigit() and int(count) != plan["gpu_count"]:
                problems.append(
                    Problem(f"{where}.gpu.count", f"{count} does not match {plan_id}, which has {plan['gpu_count']}")
                )
    return problems


def fetch_catalog(client: Any, regions: Iterable[str]) -> tuple[Catalog, list[Problem]]:
    """The read-only requests preflight needs; a rejected API key is a problem, not a crash."""
    problems: list[Problem] = []
    clusters: list[dict[str, Any]] = []
    try:
        clusters = list_clusters(client)
    except ApiError as exc:
        if exc.status in (401, 403):
            problems.append(
                Problem("api_key", f"rejected by the Vultr API (HTTP {exc.status}); set vultr_api_key or VULTR_API_KEY")
            )
        else:
            raise
    known = {r["id"] for r in client.list_all("/regions", "regions")}
    described = (describe_gpu_plan(p) for p in client.list_all("/plans", "plans", {"type": "all"}))
    plans = {d["id"]: d for d in described if d}
    available = {
        region: set(client.call("GET", f"/regions/{region}/availability").get("available_plans") or [])
        for region in sorted(set(regions) & known)
    }
    versions = list(client.call("GET", "/kubernetes/versions").get("versions") or [])
    return Catalog(regions=known, plans=plans, available=available, versions=versions, clusters=clusters), problems


def summary(clusters: list[Mapping[str, Any]], catalog: Catalog | None) -> list[dict[str, Any]]:
    """What each cluster will get: resolved version, and per pool the plan's GPU facts."""
    out = []
    for cluster in clusters:
        version = None
        if catalog and cluster.get("state", "present") == "present":
            try:
                version = resolve_version(str(cluster.get("version") or "latest"), catalog.versions)
            except InputError:
                version = None
        pools = []
        for pool in cluster.get("gpu_pools") or []:
            plan = (catalog.plans.get(str(pool.get("plan"))) if catalog else None) or {}
            pools.append(
                {
                    "name": pool.get("name"),
                    "plan": pool.get("plan"),
                    "node_quantity": pool.get("node_quantity"),
                    "gpu_model": plan.get("gpu_model"),
                    "gpus_per_node": plan.get("gpu_count"),
                    "gpu_vram_gb_per_gpu": plan.get("gpu_vram_gb_per_gpu"),
                    "monthly_cost_per_node": plan.get("monthly_cost"),
                }
            )
        out.append(
            {
                "name": cluster.get("name"),
                "state": cluster.get("state", "present"),
                "region": cluster.get("region"),
                "version": version,
                "gpu_pools": pools,
            }
        )
    return out


def run_vke_preflight(module: MetalplaneModule) -> dict[str, Any]:
    params = module.params
    clusters = params["clusters"]
    problems = check_inventory(clusters, params.get("reserved_networks"))
    catalog: Catalog | None = None
    client = None
    try:
        client = client_from_params(params)
    except InputError as exc:
        problems.append(Problem(exc.field, exc.msg.split(": ", 1)[-1]))
    if not problems and client is not None:
        present = [c for c in clusters if c.get("state", "present") == "present"]
        catalog, api_problems = fetch_catalog(client, [str(c.get("region")) for c in present])
        problems = api_problems or check_catalog(clusters, catalog)
    if problems:
        raise PreflightError(problems)
    return {
        "changed": False,
        "clusters": summary(clusters, catalog),
        "api_requests": client.counter.as_dict() if client else {},
    }
