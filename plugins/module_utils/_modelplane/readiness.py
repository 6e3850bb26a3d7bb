# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""When is an adopted InferenceCluster serving: the expectations, as data and as one expression.

Why (source: https://github.com/modelplaneai/modelplane v0.3.1 at ``90ba117d``,
``functions/compose-inference-cluster`` and ``functions/compose-serving-stack``): Crossplane's
``Ready`` alone is not enough to know where traffic goes, and the scheduler only places replicas on a
cluster whose ``Ready`` is True *and* whose ``status.gateway.address`` is set. So an adoption waits
for all of:

- ``Ready=True``: the ClusterProviderConfig and the ServingStack (every Helm release, the Gateway's
  LoadBalancer address) are ready;
- ``ClusterReady=True`` (reason ``ClusterRunning``): classes resolved, cluster reachable;
- ``BackendReady=True`` (reason ``BackendHealthy``): the serving stack is healthy;
- a non-empty ``status.gateway.address``.

Only the status decides; the reasons are what Modelplane v0.3.1 writes and are reported to help
diagnose a stuck cluster (``WaitingForClasses``, ``Installing``), not required.

``readiness_expression`` is the same rule in JMESPath, for ``kube_ready``'s ``expression``; the
unit tests check that both agree on every case.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._modelplane import validate
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.constants import (
    API_VERSION,
    KIND_INFERENCE_CLUSTER,
)

# (condition type, the reason Modelplane sets when it is True) in the order they turn True.
CONDITIONS: tuple[tuple[str, str | None], ...] = (
    ("ClusterReady", "ClusterRunning"),
    ("BackendReady", "BackendHealthy"),
    ("Ready", None),
)
# Status fields that must be non-empty strings, as dotted paths.
NON_EMPTY_FIELDS: tuple[str, ...] = ("status.gateway.address",)


def readiness_expression() -> str:
    """JMESPath that yields ``true`` exactly when every expectation holds (null-safe)."""
    parts = [
        f"length(status.conditions[?type=='{kind}' && status=='True'] || `[]`) > `0`" for kind, _reason in CONDITIONS
    ]
    parts += [f"{path} != null && {path} != ''" for path in NON_EMPTY_FIELDS]
    return " && ".join(parts)


def inference_cluster_readiness(name: str) -> dict[str, Any]:
    """What to wait on for InferenceCluster ``name``: object reference, conditions, fields, expression."""
    validate.dns_label("name", name)
    return {
        "api_version": API_VERSION,
        "kind": KIND_INFERENCE_CLUSTER,
        "name": name,
        "conditions": [
            {"type": kind, "status": "True", **({"reason": reason} if reason else {})} for kind, reason in CONDITIONS
        ],
        "non_empty": list(NON_EMPTY_FIELDS),
        "expression": readiness_expression(),
    }


def _path(obj: Mapping[str, Any], dotted: str) -> Any:
    value: Any = obj
    for part in dotted.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def unmet(obj: Mapping[str, Any] | None) -> list[str]:
    """One line per expectation the observed InferenceCluster does not meet (empty: serving)."""
    if obj is None:
        return ["InferenceCluster not found"]
    conditions = {
        str(c.get("type")): c
        for c in (_path(obj, "status.conditions") or [])
        if isinstance(c, Mapping) and c.get("type") is not None
    }
    problems = []
    for kind, reason in CONDITIONS:
        found = conditions.get(kind)
        if found is None:
            problems.append(f"condition {kind} not reported yet")
        elif found.get("status") != "True":
            detail = "; ".join(str(found[k]) for k in ("reason", "message") if found.get(k))
            wanted = f"True/{reason}" if reason else "True"
            problems.append(f"condition {kind} is {found.get('status')} ({detail or 'no reason'}), wants {wanted}")
    for path in NON_EMPTY_FIELDS:
        if _path(obj, path) in (None, ""):
            problems.append(f"{path} is empty")
    return problems
