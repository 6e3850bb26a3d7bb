# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What ``kube_ready`` and ``gpu_ready`` do, behind their thin module files.

Why here: the modules stay argument spec + docs; this file wires options to the pure checks
(``readiness``, ``gpu``) and to the list+watch engine (``watch.follow``), and turns a timeout into
one failure that says, per object or per node, what was last seen.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.args import wait_timeout_seconds
from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    InputError,
    MetalplaneError,
    WaitTimeout,
)

from . import gpu, readiness, selector
from .args import resolve_auth
from .client import KUBERNETES_IMPORT_ERROR, KubeClient
from .watch import Feed, KubeFeed, Outcome, WatchSpec, follow, observe_once

# Option names shared by both modules' specs (the connection options come from args.py).
POD_API = ("v1", "Pod")


def open_feed(module: Any) -> tuple[KubeClient, Feed]:
    """The run's client (one ApiClient) and its Feed; the bearer token is masked in all output."""
    module.require("kubernetes", KUBERNETES_IMPORT_ERROR)
    auth = resolve_auth(module.params, dict(os.environ))
    module.log_secret(auth.get("api_key"))
    client = KubeClient.from_auth(auth)
    return client, KubeFeed(client)


def label_selector(value: Any, field: str) -> str | None:
    """A label selector from a string, a list of terms, or a ``{label: value}`` mapping.

    Its syntax is checked here (``selector.check``), so a malformed one fails naming ``field``
    before any request, not with the server's ``400 unable to parse requirement``."""
    if value is None or value in ("", [], {}):
        return None
    if isinstance(value, str):
        text = value
    elif isinstance(value, Mapping):
        return selector.from_mapping(value, field)
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        text = ",".join(value)
    else:
        raise InputError(field, f"must be a label selector string, a list of terms or a mapping, got {value!r}")
    return selector.check(text, field)


# --- kube_ready ----------------------------------------------------------------------------------


def kube_ready_spec(params: Mapping[str, Any]) -> WatchSpec:
    name = params.get("name")
    return WatchSpec(
        key="objects",
        api_version=params["api_version"],
        kind=params["kind"],
        namespace=params.get("namespace"),
        label_selector=label_selector(params.get("label_selectors"), "label_selectors"),
        field_selector=f"metadata.name={name}" if name else None,
    )


def run_kube_ready(module: Any, feed: Feed | None = None) -> dict[str, Any]:
    params = module.params
    module.require("jmespath", readiness.JMESPATH_IMPORT_ERROR)
    compiled = readiness.compile_expression(params.get("expression"))
    timeout = float(wait_timeout_seconds(params))
    spec = kube_ready_spec(params)
    name = params.get("name")
    client = None
    if feed is None:
        client, feed = open_feed(module)
    try:

        def check(state: Mapping[str, Mapping[Any, dict[str, Any]]]) -> tuple[bool, Any]:
            return readiness.assess(compiled, state["objects"].values(), name=name)

        if module.check_mode:
            state = observe_once(feed, [spec], max(timeout, 10.0))
            ready, entries = check(state)
            return {"changed": False, "ready": ready, "objects": entries, "elapsed": 0.0}
        outcome = follow(feed, [spec], check, timeout=timeout)
    finally:
        if client is not None:
            client.close()
    ready, entries = outcome.ready, outcome.summary
    result = {"changed": False, "ready": ready, "objects": entries, "elapsed": round(outcome.elapsed, 3)}
    if not ready:
        if name:
            ref = f"{spec.namespace}/{name}" if spec.namespace else name
            what = f"{spec.kind} ({spec.api_version}) {ref!r}"
        else:
            what = spec.describe()
        msg = readiness.timeout_message(what, timeout, entries)
        if outcome.errors:
            msg += f"; last API error: {'; '.join(outcome.errors.values())}"
        raise WaitTimeout(msg, last_seen=entries, details={"objects": entries, "api_errors": outcome.errors})
    return result


# --- gpu_ready -----------------------------------------------------------------------------------


def gpu_criteria(params: Mapping[str, Any]) -> gpu.GpuCriteria:
    checks = tuple(params.get("checks") or ())
    if not checks:
        raise InputError("checks", f"name at least one of {', '.join(gpu.CHECKS)}")
    if int(params["gpus_per_node"]) < 1:
        raise InputError("gpus_per_node", f"must be 1 or more, got {params['gpus_per_node']}")
    match = gpu.parse_device_match(params.get("device_match"))
    driver = params["dra_driver"]
    if match is not None and match.driver and match.driver != driver:
        raise InputError(
            "device_match.driver",
            f"is {match.driver!r} but dra_driver is {driver!r}; set dra_driver to the class's driver",
        )
    if match is not None and "dra" not in checks:
        raise InputError("device_match", "only applies to the dra check; add dra to checks")
    return gpu.GpuCriteria(
        checks=checks,
        gpus_per_node=int(params["gpus_per_node"]),
        dra_driver=driver,
        validator=f"{params['validator_namespace']}/{params['validator_name']}",
        device_match=match,
    )


def gpu_specs(params: Mapping[str, Any], criteria: gpu.GpuCriteria) -> list[WatchSpec]:
    specs = [
        WatchSpec(
            key="nodes",
            api_version="v1",
            kind="Node",
            label_selector=label_selector(params.get("node_selector"), "node_selector"),
        )
    ]
    if "operator" in criteria.checks:
        specs.append(
            WatchSpec(
                key="validator",
                api_version="apps/v1",
                kind="DaemonSet",
                namespace=params["validator_namespace"],
                field_selector=f"metadata.name={params['validator_name']}",
            )
        )
    if "dra" in criteria.checks:
        # spec.driver is a field selector of resource.k8s.io; CRD stand-ins on servers < 1.30 (no
        # selectableFields) reject it, so it is optional: the feed then filters client-side.
        specs.append(
            WatchSpec(
                key="slices",
                api_version=params["dra_api_version"],
                kind="ResourceSlice",
                optional_field_selector=f"spec.driver={criteria.dra_driver}",
            )
        )
    return specs


def gpu_check(criteria: gpu.GpuCriteria) -> Any:
    def check(state: Mapping[str, Mapping[Any, dict[str, Any]]]) -> tuple[bool, Any]:
        return gpu.assess(
            criteria,
            nodes=state["nodes"].values(),
            daemonsets=state.get("validator", {}).values(),
            slices=state.get("slices", {}).values(),
        )

    return check


def pool_devices(nodes: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The InferenceClass ``devices`` for the pool when every node agrees, else []."""
    entries = [n.get("inference_class_devices") or [] for n in nodes.values()]
    if entries and all(e == entries[0] for e in entries) and entries[0]:
        return entries[0]
    return []


def validator_pods(feed: Feed, params: Mapping[str, Any], daemonsets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Container states of the validator's not-ready pods (one list, only on failure)."""
    if not daemonsets:
        return []
    match_labels = ((daemonsets[0].get("spec") or {}).get("selector") or {}).get("matchLabels") or {
        "app": params["validator_name"]
    }
    spec = WatchSpec(
        key="pods",
        api_version=POD_API[0],
        kind=POD_API[1],
        namespace=params["validator_namespace"],
        label_selector=label_selector(dict(match_labels), "validator selector"),
    )
    try:
        pods, _rv = feed.list(spec, 10.0)
    except MetalplaneError:  # diagnostics must not hide the timeout itself
        return []
    return gpu.pod_diagnostics(pods)


# --- gpu_ready over several pools in one run -------------------------------------------------------
#
# Why: a cluster with N GPU pools used to need N gpu_ready runs (one node selector and one GPU count
# each), and on a reconcile that changes nothing the module start-ups are the run's cost (issue 19's
# profile, docs/benchmarks/site.md). With ``pools``, one run watches every pool's nodes (one watch
# per pool, filtered by the server), the validator and the ResourceSlices once, and judges each pool
# by its own count and device match.


@dataclass(frozen=True)
class PoolTarget:
    name: str
    key: str  # the watch's state key
    label_selector: str | None
    criteria: gpu.GpuCriteria  # the node checks (allocatable, dra); the operator check is the run's
    device_match: Mapping[str, Any] | None  # as given, returned with the verdict (what the devices were held to)


def pool_targets(params: Mapping[str, Any]) -> tuple[gpu.GpuCriteria | None, list[PoolTarget]]:
    """The run-wide operator check (or None) and one target per entry of ``pools``."""
    for single in ("node_selector", "device_match"):
        if params.get(single) not in (None, "", {}, []):
            raise InputError(
                single, "cannot be combined with pools: give each pool its own node_selector / device_match"
            )
    checks = tuple(params.get("checks") or ())
    base = gpu_criteria(params)
    operator = replace(base, checks=("operator",)) if "operator" in checks else None
    node_checks = tuple(c for c in checks if c != "operator")
    targets: list[PoolTarget] = []
    seen: set[str] = set()
    for index, entry in enumerate(params["pools"]):
        field = f"pools[{index}]"
        name = str(entry.get("name") or "")
        if not name:
            raise InputError(f"{field}.name", "is required: the pool's name keys its result")
        if name in seen:
            raise InputError(f"{field}.name", f"{name!r} is given twice; each pool once")
        seen.add(name)
        count = entry.get("gpus_per_node")
        count = int(params["gpus_per_node"]) if count is None else int(count)
        if count < 1:
            raise InputError(f"{field}.gpus_per_node", f"must be 1 or more, got {count}")
        match = gpu.parse_device_match(entry.get("device_match"), f"{field}.device_match")
        if match is not None and match.driver and match.driver != base.dra_driver:
            raise InputError(
                f"{field}.device_match.driver",
                f"is {match.driver!r} but dra_driver is {base.dra_driver!r}; set dra_driver to the class's driver",
            )
        if match is not None and "dra" not in checks:
            raise InputError(f"{field}.device_match", "only applies to the dra check; add dra to checks")
        targets.append(
            PoolTarget(
                name=name,
                key=f"nodes:{name}",
                label_selector=label_selector(entry.get("node_selector"), f"{field}.node_selector"),
                criteria=replace(base, checks=node_checks, gpus_per_node=count, device_match=match),
                device_match=entry.get("device_match"),
            )
        )
    if not targets:
        raise InputError("pools", "name at least one pool, or leave pools out and use node_selector")
    return operator, targets


def pool_specs(params: Mapping[str, Any], targets: list[PoolTarget]) -> list[WatchSpec]:
    """One node watch per pool; the validator and the slices once for the run."""
    shared = [s for s in gpu_specs({**params, "node_selector": None}, gpu_criteria(params)) if s.key != "nodes"]
    nodes = [WatchSpec(key=t.key, api_version="v1", kind="Node", label_selector=t.label_selector) for t in targets]
    return nodes + shared


def pools_check(operator: gpu.GpuCriteria | None, targets: list[PoolTarget]) -> Any:
    def check(state: Mapping[str, Mapping[Any, dict[str, Any]]]) -> tuple[bool, Any]:
        checks: dict[str, Any] = {}
        problems: list[str] = []
        if operator is not None:
            _ready, summary = gpu.assess(operator, nodes=(), daemonsets=state.get("validator", {}).values())
            checks["operator"] = summary["checks"]["operator"]
            problems.extend(summary["problems"])
        pools: dict[str, Any] = {}
        nodes: dict[str, Any] = {}
        slices = list(state.get("slices", {}).values())
        for target in targets:
            ready, summary = gpu.assess(target.criteria, nodes=state[target.key].values(), slices=slices)
            pools[target.name] = {
                "ready": ready,
                "checks": summary["checks"],
                "nodes": summary["nodes"],
                "problems": summary["problems"],
                "inference_class_devices": pool_devices(summary["nodes"]),
                "device_match": target.device_match,
            }
            problems.extend(f"pool {target.name}: {p}" for p in summary["problems"])
            for node_name, entry in summary["nodes"].items():
                nodes[node_name] = {**entry, "pool": target.name}
        ready = not problems and all(c.get("ready") for c in [*checks.values(), *pools.values()])
        return ready, {"checks": checks, "pools": pools, "nodes": nodes, "problems": problems}

    return check


def run_gpu_ready(module: Any, feed: Feed | None = None) -> dict[str, Any]:
    params = module.params
    pooled = bool(params.get("pools"))
    if pooled:
        operator, targets = pool_targets(params)
        criteria = gpu_criteria(params)
        specs = pool_specs(params, targets)
        check = pools_check(operator, targets)
    else:
        criteria = gpu_criteria(params)
        specs = gpu_specs(params, criteria)
        check = gpu_check(criteria)
    timeout = float(wait_timeout_seconds(params))
    client = None
    if feed is None:
        client, feed = open_feed(module)
    try:
        if module.check_mode:
            state = observe_once(feed, specs, max(timeout, 10.0))
            outcome = Outcome(ready=False, summary=None, state=state)
            outcome.ready, outcome.summary = check(state)
        else:
            outcome = follow(feed, specs, check, timeout=timeout)
        summary = outcome.summary
        result = {
            "changed": False,
            "ready": outcome.ready,
            "checks": summary["checks"],
            "nodes": summary["nodes"],
            "problems": summary["problems"],
            # With pools, each pool has its own (pools.<name>.inference_class_devices).
            "inference_class_devices": [] if pooled else pool_devices(summary["nodes"]),
            "elapsed": round(outcome.elapsed, 3),
        }
        if pooled:
            result["pools"] = summary["pools"]
        if outcome.ready or module.check_mode:
            return result
        pods = []
        if "operator" in criteria.checks and not summary["checks"]["operator"].get("ready"):
            pods = validator_pods(feed, params, list(outcome.state.get("validator", {}).values()))
    finally:
        if client is not None:
            client.close()
    problems = list(summary["problems"]) + [gpu.describe_pod(p) for p in pods]
    msg = f"Timed out after {timeout:g}s waiting for GPU readiness ({', '.join(criteria.checks)}): " + "; ".join(
        problems[:8]
    )
    if len(problems) > 8:
        msg += f"; and {len(problems) - 8} more"
    if outcome.errors:
        msg += f"; last API error: {'; '.join(outcome.errors.values())}"
    raise WaitTimeout(
        msg,
        last_seen=summary["problems"],
        details={**result, "validator_pods": pods, "api_errors": outcome.errors},
    )
