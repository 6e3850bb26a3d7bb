"""Custom-resource schema violations answer 422 worded exactly like kube-apiserver.

Why: users see these messages (kubectl prints ``The Thing "t" is invalid: spec.size: Invalid value:
...``; kubernetes.core and the collection's modules pass them on). The table was recorded on the
real lane (Kubernetes 1.20.2: go-openapi's messages inside a ``field.Error``), and the emulator
answers the same status, message and causes for each row. Runs on both targets.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubeconf_support import KubeTarget, eventually, thing_crd

SPEC_SCHEMA = {
    "type": "object",
    "required": ["size"],
    "properties": {
        "size": {"type": "integer", "minimum": 1, "maximum": 5},
        "tier": {"type": "string", "enum": ["gold", "silver"]},
        "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
        "list": {"type": "array", "items": {"type": "string"}, "maxItems": 1},
        "flag": {"type": "boolean"},
        "obj": {"type": "object", "properties": {"a": {"type": "string"}}},
    },
}


def invalid(field: str, message: str, reason: str = "FieldValueInvalid") -> dict[str, str]:
    return {"reason": reason, "message": message, "field": field}


def rule(field: str, value: str, text: str) -> dict[str, str]:
    return invalid(field, f"Invalid value: {value}: {field} in body {text}")


def unsupported(field: str, value: str) -> dict[str, str]:
    return invalid(field, f'Unsupported value: "{value}": supported values: "gold", "silver"', "FieldValueNotSupported")


def type_error(field: str, wanted: str, actual: str) -> dict[str, str]:
    return invalid(field, f'Invalid value: "{actual}": {field} in body must be of type {wanted}: "{actual}"')


# (id, merge patch of spec, causes in the apiserver's order)
CASES: list[tuple[str, dict[str, Any], list[dict[str, str]]]] = [
    ("type-integer", {"size": "big"}, [type_error("spec.size", "integer", "string")]),
    ("type-boolean", {"flag": "yes"}, [type_error("spec.flag", "boolean", "string")]),
    ("type-object", {"obj": "x"}, [type_error("spec.obj", "object", "string")]),
    ("type-array", {"list": "x"}, [type_error("spec.list", "array", "string")]),
    ("type-string", {"name": 5}, [type_error("spec.name", "string", "integer")]),
    ("minimum", {"size": 0}, [rule("spec.size", "0", "should be greater than or equal to 1")]),
    ("maximum", {"size": 9}, [rule("spec.size", "9", "should be less than or equal to 5")]),
    ("enum", {"tier": "bronze"}, [unsupported("spec.tier", "bronze")]),
    ("pattern", {"name": "AB"}, [rule("spec.name", '"AB"', "should match '^[a-z]+$'")]),
    ("max-length", {"name": "abcdefg"}, [rule("spec.name", '"abcdefg"', "should be at most 5 chars long")]),
    ("max-items", {"list": ["a", "b"]}, [rule("spec.list", "2", "should have at most 1 items")]),
    ("required", {"size": None}, [invalid("spec.size", "Required value", "FieldValueRequired")]),
    ("two-errors", {"size": "big", "tier": "x"},
     [type_error("spec.size", "integer", "string"), unsupported("spec.tier", "x")]),
]  # fmt: skip


@pytest.fixture(scope="module")
def thing(kube_target: KubeTarget) -> Iterator[str]:
    """A CRD with the table's rules and one valid Thing ``t`` in ``default``; yields its path."""
    crd = thing_crd({"type": "object", "properties": {"spec": SPEC_SCHEMA}}, prefix="val")
    group = crd["spec"]["group"]
    code, body = kube_target.raw("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert code == 201, body
    collection = f"/apis/{group}/v1/namespaces/default/things"
    thing = {"apiVersion": f"{group}/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": {"size": 2}}

    def created() -> bool:  # the new CRD is served shortly after Established
        code, body = kube_target.raw("POST", collection, thing)
        if code == 404:
            return False
        assert code == 201, body
        return True

    eventually(created, timeout=60, what="the first Thing created")
    try:
        yield f"{collection}/t"
    finally:
        kube_target.raw("DELETE", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/things.{group}")


@pytest.mark.parametrize(("spec", "causes"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_custom_resource_violation_is_worded_like_the_apiserver(
    kube_target: KubeTarget, thing: str, spec: dict[str, Any], causes: list[dict[str, str]]
) -> None:
    group = thing.split("/")[2]
    patch = json.dumps({"spec": spec}).encode()
    code, body = kube_target.raw("PATCH", thing, patch, headers={"Content-Type": "application/merge-patch+json"})
    assert code == 422, body
    assert body["reason"] == "Invalid"
    assert body["details"]["causes"] == causes
    text = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
    assert body["message"] == f'Thing.{group} "t" is invalid: ' + (f"[{text}]" if len(causes) > 1 else text)
    code, body = kube_target.raw("GET", thing)
    assert body["spec"] == {"size": 2}  # nothing was written
