# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""StorageClass plan: the wanted class + the live one -> the definition to apply and the drift to report.

Why: Kubernetes rejects any update of a StorageClass's ``provisioner``, ``parameters``,
``reclaimPolicy`` and ``volumeBindingMode`` (``ValidateStorageClassUpdate`` in
kubernetes/kubernetes ``pkg/apis/storage/validation/validation.go`` answers 422). A role that
re-renders its class (the replica count follows the node count) must therefore keep the live
values of those fields, apply only the mutable ones, and say what it could not change. That is a
decision, so it lives here, table-tested, and the ``longhorn_rwx`` role only passes the two objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The fields kube-apiserver refuses to change on an existing StorageClass (see the module docstring).
IMMUTABLE_FIELDS = ("provisioner", "parameters", "reclaimPolicy", "volumeBindingMode")


def storage_class_drift(wanted: Mapping[str, Any], live: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Immutable fields whose live value differs from the wanted one: ``{field, live, wanted}``.

    One entry per field, and per key for ``parameters`` (``parameters.<key>``, keys sorted); a value
    missing on one side is None. No live class: no drift (it will be created as wanted).
    """
    if live is None:
        return []
    drift: list[dict[str, Any]] = []
    for name in IMMUTABLE_FIELDS:
        if name == "parameters":
            have = dict(live.get("parameters") or {})
            want = dict(wanted.get("parameters") or {})
            for key in sorted(set(have) | set(want)):
                if have.get(key) != want.get(key):
                    drift.append({"field": f"parameters.{key}", "live": have.get(key), "wanted": want.get(key)})
        elif live.get(name) != wanted.get(name):
            drift.append({"field": name, "live": live.get(name), "wanted": wanted.get(name)})
    return drift


def storage_class_definition(wanted: Mapping[str, Any], live: Mapping[str, Any] | None) -> dict[str, Any]:
    """What to apply: the wanted class when there is none; else its mutable fields with the live immutable ones.

    An immutable field the live class lacks is left out, so the apply leaves it alone too.
    """
    if live is None:
        return dict(wanted)
    kept = {k: v for k, v in wanted.items() if k not in IMMUTABLE_FIELDS}
    return {**kept, **{k: live[k] for k in IMMUTABLE_FIELDS if k in live}}


def storage_class_plan(wanted: Mapping[str, Any], live: Mapping[str, Any] | None) -> dict[str, Any]:
    """``{"definition": ..., "drift": [...]}`` (see the two functions above)."""
    return {"definition": storage_class_definition(wanted, live), "drift": storage_class_drift(wanted, live)}


def longhorn_replicas(node_count: int, override: int = 0) -> int:
    """``numberOfReplicas``: the override when positive, else one per node, at most 3 and at least 1.

    Three is Longhorn's own default replica count (its ``default-replica-count`` setting); more copies
    than nodes could never be scheduled (Longhorn keeps replicas of a volume on distinct nodes).
    """
    if override > 0:
        return override
    return max(min(node_count, 3), 1)
