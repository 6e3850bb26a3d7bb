# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""JMESPath readiness: is an object ready, and what did it look like when it was not.

Why: Crossplane's ``DeriveFromCelQuery`` lets a composition say when a resource is ready with an
expression over the whole object; ``kube_ready`` is the JMESPath counterpart, so any kind (CRDs
included) can be waited on without new code. An object is ready only when the expression yields
exactly ``true``: a number, string or list is reported but never counts as ready, so
``status.readyReplicas`` (truthy even when it is 1 of 3) cannot silently pass.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError

try:
    import jmespath
    from jmespath.exceptions import JMESPathError

    JMESPATH_IMPORT_ERROR: str | None = None
except ImportError:
    JMESPATH_IMPORT_ERROR = traceback.format_exc()

# The default readiness rule: the object's status condition of type Ready has status "True"
# (what kstatus, kubectl wait --for=condition=Ready and Crossplane's Ready condition mean).
DEFAULT_EXPRESSION = "status.conditions[?type=='Ready'].status | [0] == 'True'"

# Condition fields copied into diagnostics (lastTransitionTime helps to see a stuck object).
CONDITION_FIELDS = ("type", "status", "reason", "message", "lastTransitionTime")


def compile_expression(expression: str | None, field: str = "expression") -> Any:
    """Compile once, before any request; a syntax error names the option."""
    text = expression if expression is not None and expression.strip() else DEFAULT_EXPRESSION
    try:
        return jmespath.compile(text)
    except JMESPathError as exc:
        raise InputError(field, f"not a valid JMESPath expression ({exc}): {text!r}") from None


def evaluate(compiled: Any, obj: Mapping[str, Any]) -> tuple[bool, Any]:
    """(ready, value): ready only when the expression yields the boolean ``true``."""
    try:
        value = compiled.search(dict(obj))
    except JMESPathError as exc:
        # Type errors at run time (e.g. comparing a string with a number) are a "not ready" value.
        return False, f"<error: {exc}>"
    return value is True, value


def object_ref(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


def conditions_of(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The object's status conditions, reduced to the fields an operator reads."""
    status = obj.get("status") or {}
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    if not isinstance(conditions, list):
        return []
    return [
        {key: cond.get(key) for key in CONDITION_FIELDS if cond.get(key) is not None}
        for cond in conditions
        if isinstance(cond, Mapping)
    ]


def summarise(compiled: Any, obj: Mapping[str, Any]) -> dict[str, Any]:
    """One object's entry in the result: name, readiness, last expression value, conditions."""
    ready, value = evaluate(compiled, obj)
    meta = obj.get("metadata") or {}
    entry: dict[str, Any] = {
        "name": meta.get("name"),
        "ready": ready,
        "value": value,
        "conditions": conditions_of(obj),
    }
    if meta.get("namespace"):
        entry["namespace"] = meta["namespace"]
    if meta.get("generation") is not None:
        entry["generation"] = meta["generation"]
    status = obj.get("status") or {}
    if isinstance(status, Mapping) and status.get("observedGeneration") is not None:
        entry["observed_generation"] = status["observedGeneration"]
    return entry


def assess(
    compiled: Any, objects: Iterable[Mapping[str, Any]], *, name: str | None
) -> tuple[bool, list[dict[str, Any]]]:
    """Ready when at least one object matched (the named one, if ``name``) and every match is ready.

    An empty match is "not ready yet", never vacuously ready: a selector that matches nothing
    is usually a typo or a workload that does not exist yet.
    """
    entries = sorted(
        (summarise(compiled, obj) for obj in objects),
        key=lambda e: (e.get("namespace") or "", e.get("name") or ""),
    )
    if name is not None:
        entries = [e for e in entries if e["name"] == name]
    return bool(entries) and all(e["ready"] for e in entries), entries


def timeout_message(what: str, timeout: float, entries: list[dict[str, Any]], *, limit: int = 5) -> str:
    """The one-line failure: which objects are not ready and their expression value / Ready condition."""
    if not entries:
        return f"Timed out after {timeout:g}s waiting for {what}: no matching object was found"
    waiting = [e for e in entries if not e["ready"]]
    parts = []
    for entry in waiting[:limit]:
        ref = f"{entry['namespace']}/{entry['name']}" if entry.get("namespace") else entry["name"]
        detail = f"value={entry['value']!r}"
        failing = [c for c in entry["conditions"] if c.get("status") != "True"]
        if failing:
            cond = failing[0]
            detail += f", {cond.get('type')}={cond.get('status')}"
            if cond.get("reason"):
                detail += f" ({cond['reason']}"
                detail += f": {cond['message']})" if cond.get("message") else ")"
        parts.append(f"{ref} [{detail}]")
    more = f" and {len(waiting) - limit} more" if len(waiting) > limit else ""
    return (
        f"Timed out after {timeout:g}s waiting for {what}: "
        f"{len(waiting)} of {len(entries)} not ready: {'; '.join(parts)}{more}"
    )
