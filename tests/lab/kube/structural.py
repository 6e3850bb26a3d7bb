"""Structural-schema validation of apiextensions.k8s.io/v1 CustomResourceDefinitions.

Why: kube-apiserver rejects (422 Invalid) a v1 CRD whose schema is not structural: a version
without ``schema.openAPIV3Schema``, a field without ``type``, a root that is not ``type: object``,
an unknown type, an array without ``items``... An emulator that accepts such a CRD lets a broken
chart or generated CRD pass the tests and fail on the first real cluster. The rules, field paths
and messages follow apiextensions-apiserver (``pkg/apis/apiextensions/validation`` and
``pkg/apiserver/schema/validation.go``) and were checked against the real 1.20 lane
(``tests/integration/kube_conformance/test_kubeconf_crd.py``).

Field paths are Go ``field.Path`` strings. When every version has the same schema, the apiserver
validates it once under ``spec.validation.openAPIV3Schema`` (its internal form); otherwise each
under ``spec.versions[i].schema.openAPIV3Schema``.
"""

from __future__ import annotations

import json
from typing import Any

Cause = dict[str, str]
Schema = dict[str, Any]

# The OpenAPI v3 types a structural schema may name (the apiserver's ``openapiV3Types``).
TYPES = ("array", "boolean", "integer", "number", "object", "string")
# The int-or-string shape a node with x-kubernetes-int-or-string may spell out in anyOf.
INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]
# Keys a value validation (inside anyOf/allOf/oneOf/not) must not carry, with the Go message.
FORBIDDEN_IN_VALUE_VALIDATION = (
    ("type", "must be empty to be structural"),
    ("additionalProperties", "must be undefined to be structural"),
    ("default", "must be undefined to be structural"),
    ("title", "must be empty to be structural"),
    ("description", "must be empty to be structural"),
    ("nullable", "must be false to be structural"),
    ("x-kubernetes-preserve-unknown-fields", "must be false to be structural"),
    ("x-kubernetes-embedded-resource", "must be false to be structural"),
    ("x-kubernetes-int-or-string", "must be false to be structural"),
)
# What the root's ``metadata`` schema may say: its type, a default, and name/generateName.
METADATA_KEYS = {"type", "default", "properties"}
METADATA_PROPERTIES = {"name", "generateName"}

ROOT, ITEM, FIELD = "root", "item", "field"
EMPTY_TYPE = {
    ROOT: "must not be empty at the root",
    ITEM: "must not be empty for specified array items",
    FIELD: "must not be empty for specified object fields",
}


def _go(value: Any) -> str:
    """A value as Go's ``%#v``/``%q`` prints it in field errors."""
    return json.dumps(value)


def required(path: str, detail: str) -> Cause:
    return {"reason": "FieldValueRequired", "field": path, "message": f"Required value: {detail}"}


def forbidden(path: str, detail: str) -> Cause:
    return {"reason": "FieldValueForbidden", "field": path, "message": f"Forbidden: {detail}"}


def invalid(path: str, value: Any, detail: str) -> Cause:
    return {"reason": "FieldValueInvalid", "field": path, "message": f"Invalid value: {_go(value)}: {detail}"}


def not_supported(path: str, value: Any, supported: tuple[str, ...]) -> Cause:
    choices = ", ".join(_go(s) for s in supported)
    return {
        "reason": "FieldValueNotSupported",
        "field": path,
        "message": f"Unsupported value: {_go(value)}: supported values: {choices}",
    }


def crd_errors(spec: dict[str, Any]) -> list[Cause]:
    """Causes (empty when valid) for the schemas of an apiextensions.k8s.io/v1 CRD ``spec``."""
    causes: list[Cause] = []
    if spec.get("preserveUnknownFields") is True:
        detail = "cannot set to true, set x-preserve-unknown-fields to true in spec.versions[*].schema instead"
        causes.append(invalid("spec.preserveUnknownFields", True, detail))
    versions = [v for v in spec.get("versions") or [] if isinstance(v, dict)]
    found: list[tuple[int, Schema]] = []
    for index, version in enumerate(versions):
        schema = (
            (version.get("schema") or {}).get("openAPIV3Schema") if isinstance(version.get("schema"), dict) else None
        )
        if not isinstance(schema, dict):
            causes.append(required(f"spec.versions[{index}].schema.openAPIV3Schema", "schemas are required"))
        else:
            found.append((index, schema))
    if not found:
        return causes
    if len(found) == len(versions) and all(schema == found[0][1] for _index, schema in found):
        return causes + schema_errors(found[0][1], "spec.validation.openAPIV3Schema")
    for index, schema in found:
        causes += schema_errors(schema, f"spec.versions[{index}].schema.openAPIV3Schema")
    return causes


def schema_errors(schema: Schema, path: str) -> list[Cause]:
    """The OpenAPI checks of one schema, then (if it can be read as one) the structural ones."""
    causes = _openapi(schema, path)
    if _well_formed(schema):
        causes += _structural(schema, ROOT, path)
    return causes


# --- OpenAPI-level checks (ValidateCustomResourceDefinitionOpenAPISchema) ------------------------


def _openapi(schema: Any, path: str) -> list[Cause]:
    if not isinstance(schema, dict):
        return []
    causes: list[Cause] = []
    kind = schema.get("type")
    if kind not in (None, "") and kind not in TYPES:
        causes.append(not_supported(f"{path}.type", kind, TYPES))
    if kind == "null":
        causes.append(forbidden(f"{path}.type", "type cannot be set to null, use nullable as an alternative"))
    if schema.get("uniqueItems") is True:
        causes.append(
            forbidden(
                f"{path}.uniqueItems",
                "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
            )
        )
    if "additionalProperties" in schema and schema.get("properties"):
        causes.append(
            forbidden(f"{path}.additionalProperties", "additionalProperties and properties are mutual exclusive")
        )
    if "$ref" in schema:
        causes.append(forbidden(f"{path}.$ref", "$ref is not supported"))
    if isinstance(schema.get("items"), list):
        causes.append(forbidden(f"{path}.items", "items must be a schema object and not an array"))
    if schema.get("x-kubernetes-preserve-unknown-fields") is False:
        causes.append(invalid(f"{path}.x-kubernetes-preserve-unknown-fields", False, "must be true or undefined"))
    for key in ("properties", "patternProperties"):
        for name, sub in sorted((schema.get(key) or {}).items()):
            causes += _openapi(sub, f"{path}.{key}[{name}]")
    for key in ("items", "additionalProperties", "not"):
        causes += _openapi(schema.get(key), f"{path}.{key}")
    for key in ("allOf", "anyOf", "oneOf"):
        for index, sub in enumerate(schema.get(key) or []):
            causes += _openapi(sub, f"{path}.{key}[{index}]")
    return causes


def _well_formed(schema: Any) -> bool:
    """Whether the schema converts to the apiserver's ``Structural`` form (it does not with a
    ``$ref``, a list as ``items`` or ``x-kubernetes-preserve-unknown-fields: false``; the apiserver
    then reports only the OpenAPI errors)."""
    if not isinstance(schema, dict) or "$ref" in schema:
        return False
    if "items" in schema and not isinstance(schema["items"], dict):
        return False
    if schema.get("x-kubernetes-preserve-unknown-fields") is False:
        return False
    extra = schema.get("additionalProperties")
    if extra is not None and not isinstance(extra, bool | dict):
        return False
    subs: list[Any] = list((schema.get("properties") or {}).values())
    subs += [schema[k] for k in ("items", "not") if k in schema]
    subs += [extra] if isinstance(extra, dict) else []
    for key in ("allOf", "anyOf", "oneOf"):
        subs += list(schema.get(key) or [])
    return all(_well_formed(sub) for sub in subs)


# --- structural checks (validateStructuralInvariants and the value validations) ---------------


def _structural(schema: Schema, level: str, path: str) -> list[Cause]:
    causes: list[Cause] = []
    kind = schema.get("type") or ""
    embedded = bool(schema.get("x-kubernetes-embedded-resource"))
    int_or_string = bool(schema.get("x-kubernetes-int-or-string"))
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    props = schema.get("properties") or {}
    if kind == "array" and "items" not in schema:
        causes.append(required(f"{path}.items", "must be specified"))
    if isinstance(schema.get("items"), dict):
        causes += _structural(schema["items"], ITEM, f"{path}.items")
    for name, sub in sorted(props.items()):
        causes += _structural(sub, FIELD, f"{path}.properties[{name}]")
    if isinstance(schema.get("additionalProperties"), dict):
        causes += _structural(schema["additionalProperties"], FIELD, f"{path}.additionalProperties")
    causes += _value_validation(schema, path, top=True)
    if embedded and kind != "object":
        if not kind:
            causes.append(required(f"{path}.type", "must be object if x-kubernetes-embedded-resource is true"))
        else:
            causes.append(invalid(f"{path}.type", kind, "must be object if x-kubernetes-embedded-resource is true"))
    elif not kind and not int_or_string and not preserve:
        causes.append(required(f"{path}.type", EMPTY_TYPE[level]))
    if embedded and "additionalProperties" in schema:
        causes.append(
            forbidden(f"{path}.additionalProperties", "must not be used if x-kubernetes-embedded-resource is set")
        )
    if level == ROOT and kind and kind != "object":
        causes.append(invalid(f"{path}.type", kind, "must be object at the root"))
    if level == ROOT or embedded:
        for name, want in (("kind", "string"), ("apiVersion", "string"), ("metadata", "object")):
            sub = props.get(name)
            if isinstance(sub, dict) and sub.get("type", "") != want:
                causes.append(invalid(f"{path}.properties[{name}].type", sub.get("type", ""), f"must be {want}"))
    metadata = props.get("metadata")
    if level == ROOT and isinstance(metadata, dict):
        extra_keys = set(metadata) - METADATA_KEYS
        extra_props = set(metadata.get("properties") or {}) - METADATA_PROPERTIES
        if extra_keys or extra_props:
            causes.append(
                forbidden(
                    f"{path}.properties[metadata]",
                    "must not specify anything other than name and generateName, but metadata is implicitly specified",
                )
            )
    if embedded and not preserve and not props:
        causes.append(
            required(
                f"{path}.properties",
                "must not be empty if x-kubernetes-embedded-resource is true without "
                "x-kubernetes-preserve-unknown-fields",
            )
        )
    return causes


def _value_validation(schema: Schema, path: str, *, top: bool) -> list[Cause]:
    """anyOf/allOf/oneOf/not may only restrict values: no types, defaults, descriptions... (the
    int-or-string spellings ``anyOf: [{type: integer}, {type: string}]`` excepted)."""
    int_or_string = top and bool(schema.get("x-kubernetes-int-or-string"))
    causes: list[Cause] = []
    any_of = schema.get("anyOf") or []
    if not (int_or_string and any_of == INT_OR_STRING_ANY_OF):
        for index, sub in enumerate(any_of):
            causes += _nested(sub, f"{path}.anyOf[{index}]")
    for index, sub in enumerate(schema.get("allOf") or []):
        if index == 0 and int_or_string and isinstance(sub, dict) and sub == {"anyOf": INT_OR_STRING_ANY_OF}:
            continue
        causes += _nested(sub, f"{path}.allOf[{index}]")
    for index, sub in enumerate(schema.get("oneOf") or []):
        causes += _nested(sub, f"{path}.oneOf[{index}]")
    if isinstance(schema.get("not"), dict):
        causes += _nested(schema["not"], f"{path}.not")
    return causes


def _nested(schema: Any, path: str) -> list[Cause]:
    if not isinstance(schema, dict):
        return []
    causes = _value_validation(schema, path, top=False)
    if isinstance(schema.get("items"), dict):
        causes += _nested(schema["items"], f"{path}.items")
    for name, sub in sorted((schema.get("properties") or {}).items()):
        causes += _nested(sub, f"{path}.properties[{name}]")
    for key, detail in FORBIDDEN_IN_VALUE_VALIDATION:
        value = schema.get(key)
        if value not in (None, "", False):
            causes.append(forbidden(f"{path}.{key}", detail))
    return causes
