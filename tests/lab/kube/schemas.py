"""Schemas for the Kubernetes emulator: built-in kinds from kubernetes-validate, CRDs translated.

Why: a test target that accepts any body hides client bugs a real API server would reject (422).
kubernetes-validate ships the upstream OpenAPI definitions (1.25-1.37) with GVKs, patch merge keys
and list types, which is everything validation, strategic merge, server-side apply and the OpenAPI
v3 documents that kubectl/helm fetch need.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema

# The schema set served; 1.34 is the first with resource.k8s.io/v1 (ResourceSlice, DeviceClass GA).
K8S_SCHEMA_VERSION = "1.34.0"

Schema = dict[str, Any]


@functools.cache
def definitions() -> dict[str, Schema]:
    import kubernetes_validate

    root = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    path = root / f"v{K8S_SCHEMA_VERSION}-local" / "_definitions.json"
    return json.loads(path.read_text())["$defs"]


@functools.cache
def gvk_index() -> dict[tuple[str, str, str], str]:
    """(group, version, kind) -> definition name."""
    index: dict[tuple[str, str, str], str] = {}
    for name, schema in definitions().items():
        for gvk in schema.get("x-kubernetes-group-version-kind", []):
            if gvk["kind"] in ("DeleteOptions", "WatchEvent", "Status", "APIResourceList"):
                continue
            index.setdefault((gvk["group"], gvk["version"], gvk["kind"]), name)
    return index


def has_builtin(group: str, version: str, kind: str) -> bool:
    return (group, version, kind) in gvk_index()


def resolve(schema: Schema | None) -> Schema | None:
    """Follow a ``$ref`` (also through ``allOf: [{$ref}]``) to the referenced definition."""
    seen = 0
    while schema and seen < 10:
        ref = schema.get("$ref")
        if not ref and len(schema.get("allOf", [])) == 1:
            ref = schema["allOf"][0].get("$ref")
        if not ref:
            return schema
        schema = definitions().get(ref.rsplit("/", 1)[-1])
        seen += 1
    return schema


def builtin_schema(group: str, version: str, kind: str) -> Schema | None:
    name = gvk_index().get((group, version, kind))
    return definitions()[name] if name else None


@functools.cache
def _builtin_validator(group: str, version: str, kind: str) -> jsonschema.protocols.Validator | None:
    name = gvk_index().get((group, version, kind))
    if not name:
        return None
    root = {"$ref": f"#/$defs/{name}", "$defs": definitions()}
    return jsonschema.Draft202012Validator(root)


def _path(error: jsonschema.ValidationError) -> str:
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<root>"


def _causes(validator: jsonschema.protocols.Validator, obj: Any) -> list[dict[str, str]]:
    causes = []
    for error in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))):
        causes.append({"reason": "FieldValueInvalid", "field": _path(error), "message": error.message})
    return causes


def validate_builtin(group: str, version: str, kind: str, obj: dict[str, Any]) -> list[dict[str, str]]:
    """Validation causes (empty when valid) for a built-in object; metadata is checked elsewhere."""
    validator = _builtin_validator(group, version, kind)
    if validator is None:
        return []
    body = {k: v for k, v in obj.items() if k != "metadata"}
    return _causes(validator, body)


# --- CRD structural schemas -------------------------------------------------------------------

_NESTED_MAPS = ("properties", "patternProperties")
_NESTED_ONE = ("items", "additionalProperties", "not")
_NESTED_MANY = ("allOf", "anyOf", "oneOf")


def _translate(schema: Any) -> Any:
    """OpenAPI v3 structural schema -> JSON Schema (nullable, int-or-string), recursively."""
    if not isinstance(schema, dict):
        return schema
    out = {k: v for k, v in schema.items() if not k.startswith("x-kubernetes") and k not in ("nullable", "default")}
    out.pop("format", None)  # formats (int32, date-time, ...) are advisory here, as in the apiserver
    for key in _NESTED_MAPS:
        if key in schema:
            out[key] = {name: _translate(sub) for name, sub in schema[key].items()}
    for key in _NESTED_ONE:
        if isinstance(schema.get(key), dict):
            out[key] = _translate(schema[key])
    for key in _NESTED_MANY:
        if key in schema:
            out[key] = [_translate(sub) for sub in schema[key]]
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    elif schema.get("nullable") and isinstance(schema.get("type"), str):
        out["type"] = [schema["type"], "null"]
    return out


def crd_validator(schema: Schema) -> jsonschema.protocols.Validator:
    """A validator for custom resources of one CRD version (metadata validated by the server)."""
    translated = _translate(copy.deepcopy(schema))
    props = translated.setdefault("properties", {})
    props["metadata"] = {"type": "object"}
    props.setdefault("apiVersion", {"type": "string"})
    props.setdefault("kind", {"type": "string"})
    return jsonschema.Draft4Validator(translated)


# JSON types as kube-openapi names them in "must be of type" messages.
_JSON_TYPE = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return next((name for kind, name in _JSON_TYPE if isinstance(value, kind)), "object")


def _go_value(value: Any) -> str:
    """A value as Go's field.Invalid prints it: strings quoted, numbers bare."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return json.dumps(value) if isinstance(value, dict | list) else str(value)


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _crd_cause(error: jsonschema.ValidationError) -> dict[str, str]:  # noqa: PLR0911 - one case per keyword
    """A custom-resource validation error the way kube-apiserver reports it (go-openapi's messages in a
    field.Error: ``Invalid value: <value>: <path> in body <rule>``), as recorded on the real lane."""
    path = _path(error)
    value, rule = error.instance, error.validator_value

    def invalid(shown: str, text: str) -> dict[str, str]:
        return {
            "reason": "FieldValueInvalid",
            "field": path,
            "message": f"Invalid value: {shown}: {path} in body {text}",
        }

    if error.validator == "type":
        actual = json.dumps(_json_type(value))
        wanted = rule if isinstance(rule, str) else "/".join(rule)
        return invalid(actual, f"must be of type {wanted}: {actual}")
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else ""
        field = f"{path}.{missing}" if path != "<root>" else missing
        return {"reason": "FieldValueRequired", "field": field, "message": "Required value"}
    if error.validator == "enum":
        supported = ", ".join(json.dumps(v) for v in rule)
        return {"reason": "FieldValueNotSupported", "field": path,
                "message": f"Unsupported value: {_go_value(value)}: supported values: {supported}"}  # fmt: skip
    exclusive = bool(error.schema.get("exclusiveMinimum" if error.validator == "minimum" else "exclusiveMaximum"))
    texts = {
        "minimum": f"should be greater than {'' if exclusive else 'or equal to '}{_number(rule)}",
        "maximum": f"should be less than {'' if exclusive else 'or equal to '}{_number(rule)}",
        "pattern": f"should match '{rule}'",
        "maxLength": f"should be at most {rule} chars long",
        "minLength": f"should be at least {rule} chars long",
        "multipleOf": f"should be a multiple of {_number(rule)}",
    }
    if error.validator in texts:
        return invalid(_go_value(value), texts[error.validator])
    if error.validator in ("maxItems", "minItems"):
        bound = "at most" if error.validator == "maxItems" else "at least"
        return invalid(str(len(value)), f"should have {bound} {rule} items")
    if error.validator in ("maxProperties", "minProperties"):
        bound = "at most" if error.validator == "maxProperties" else "at least"
        return invalid(str(len(value)), f"should have {bound} {rule} properties")
    return invalid(_go_value(value), error.message)


def validate_custom(validator: jsonschema.protocols.Validator, obj: dict[str, Any]) -> list[dict[str, str]]:
    """Validation causes (empty when valid) for a custom resource, worded like kube-apiserver's."""
    errors = sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
    return [_crd_cause(error) for error in errors]


def prune_and_default(schema: Schema | None, value: Any) -> Any:
    """Structural pruning of unknown fields and schema defaults, as the apiextensions server does."""
    if schema is None or (schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema):
        return value
    if isinstance(value, dict):
        props = schema.get("properties")
        if props is not None:
            for name, sub in props.items():
                if name not in value and "default" in sub:
                    value[name] = copy.deepcopy(sub["default"])
            if not schema.get("x-kubernetes-preserve-unknown-fields"):
                for name in [k for k in value if k not in props and k not in ("apiVersion", "kind", "metadata")]:
                    del value[name]
            for name, sub in props.items():
                if name in value and name != "metadata":
                    value[name] = prune_and_default(sub, value[name])
        elif isinstance(schema.get("additionalProperties"), dict):
            for name in value:
                value[name] = prune_and_default(schema["additionalProperties"], value[name])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [prune_and_default(schema["items"], item) for item in value]
    return value


# --- schema navigation (strategic merge, server-side apply) -----------------------------------


def child_schema(schema: Schema | None, key: str | int) -> Schema | None:
    """The schema of ``key`` (a property name, or an index for list items) inside ``schema``."""
    schema = resolve(schema)
    if not schema:
        return None
    if isinstance(key, int):
        return resolve(schema.get("items")) if isinstance(schema.get("items"), dict) else None
    props = schema.get("properties") or {}
    if key in props:
        return resolve(props[key])
    extra = schema.get("additionalProperties")
    return resolve(extra) if isinstance(extra, dict) else None


def list_merge_keys(schema: Schema | None) -> list[str] | None:
    """Keys that identify list items (list-type map), or None for atomic/set lists."""
    schema = resolve(schema)
    if not schema:
        return None
    if schema.get("x-kubernetes-list-type") == "map" and schema.get("x-kubernetes-list-map-keys"):
        return list(schema["x-kubernetes-list-map-keys"])
    key = schema.get("x-kubernetes-patch-merge-key")
    return [key] if key else None


def patch_strategy(schema: Schema | None) -> str:
    schema = resolve(schema)
    return str((schema or {}).get("x-kubernetes-patch-strategy", ""))


def is_set_list(schema: Schema | None) -> bool:
    schema = resolve(schema)
    return bool(schema) and schema.get("x-kubernetes-list-type") == "set"


# --- OpenAPI v3 documents (kubectl apply / helm validate against these) ------------------------


def openapi_document(group: str, version: str, extra_schemas: dict[str, Schema]) -> dict[str, Any]:
    """One group-version OpenAPI v3 document: every built-in definition plus the CRD kinds."""
    text = json.dumps(definitions()).replace("#/$defs/", "#/components/schemas/")
    schemas = json.loads(text)
    schemas.update(extra_schemas)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (metalplane lab emulator)", "version": f"v{K8S_SCHEMA_VERSION}"},
        "paths": {},
        "components": {"schemas": schemas},
    }


def content_hash(doc: Any) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32].upper()


def unknown_fields(schema: Schema | None, value: Any, prefix: str = "") -> list[str]:
    """Paths of fields the schema does not declare (what the apiserver prunes, or rejects when
    ``fieldValidation=Strict``). Maps (``additionalProperties``) and preserve-unknown-fields nodes
    accept any key; ``metadata`` is checked by the server itself."""
    schema = resolve(schema)
    if not schema or schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    out: list[str] = []
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for name, item in value.items():
            path = f"{prefix}.{name}" if prefix else name
            if not prefix and name in ("apiVersion", "kind", "metadata"):
                continue
            if props is not None and name in props:
                out += unknown_fields(props[name], item, path)
            elif isinstance(extra, dict):
                out += unknown_fields(extra, item, path)
            elif props is not None:
                out.append(path)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            out += unknown_fields(schema["items"], item, f"{prefix}[{index}]")
    return out


def drop_paths(value: Any, paths: list[str]) -> None:
    """Remove dotted/indexed paths (as returned by ``unknown_fields``) from ``value`` in place."""
    import re

    for path in paths:
        parts = [p for p in re.split(r"\.|\[(\d+)\]", path) if p]
        current = value
        for part in parts[:-1]:
            current = current[int(part)] if isinstance(current, list) else current.get(part)
            if current is None:
                break
        if isinstance(current, dict):
            current.pop(parts[-1], None)
