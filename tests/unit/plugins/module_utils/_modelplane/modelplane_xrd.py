"""Validate objects against Modelplane's XRD ``openAPIV3Schema`` with jsonschema, offline.

Why: the XRDs are the contract of the control plane; checking every object the collection writes
against them catches a wrong field name, enum value or limit before a real API server does. The
XRDs are read from the shared reference tree at test time (never copied into the repository).

A Kubernetes structural schema is OpenAPI v3, not plain JSON Schema, so it is converted explicitly:

- ``x-kubernetes-list-type: map`` + ``x-kubernetes-list-map-keys``: items must be unique by those
  keys (a custom keyword; plain jsonschema ignores it);
- ``x-kubernetes-validations`` (CEL): dropped here; they only run on a real API server, and the
  builders' own checks for them are tested separately;
- ``x-kubernetes-int-or-string`` becomes ``anyOf`` integer/string, ``x-kubernetes-preserve-unknown-fields``
  keeps the object open, ``nullable: true`` adds ``null``;
- ``format``: ``int32``/``int64`` are range-checked; any other format fails the test loudly so it
  gets handled instead of silently ignored;
- objects with ``properties`` become closed (``additionalProperties: false``): the API server would
  prune an unknown field silently, which for us is a bug (a misspelt field is lost);
- the XRD schema covers ``spec``/``status``; ``apiVersion``, ``kind`` and ``metadata`` are added.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from lab.common.reference import reference_path, require

XRD_DIR = reference_path("modelplane", "xrds")
EXAMPLES_DIR = reference_path("modelplane", "examples")
KNOWN_FORMATS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def xrd_path(plural: str) -> Path:
    return require(XRD_DIR / f"{plural}.yaml", f"Modelplane XRD {plural}")


def _convert(schema: dict[str, Any]) -> dict[str, Any]:
    """One schema node; recurses only through schema-valued keywords (a property may be called "format")."""
    out = {k: v for k, v in schema.items() if k != "x-kubernetes-validations"}
    if "properties" in out:
        out["properties"] = {name: _convert(sub) for name, sub in out["properties"].items()}
    for key in ("items", "additionalProperties", "not"):
        if isinstance(out.get(key), dict):
            out[key] = _convert(out[key])
    for key in ("anyOf", "oneOf", "allOf"):
        if key in out:
            out[key] = [_convert(sub) for sub in out[key]]
    fmt = out.get("format")
    if fmt is not None and fmt not in KNOWN_FORMATS:
        raise AssertionError(f"XRD uses format {fmt!r}, which this validator does not handle yet")
    if out.pop("x-kubernetes-int-or-string", False):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
    preserve = out.pop("x-kubernetes-preserve-unknown-fields", False)
    if out.get("type") == "object" and "properties" in out and "additionalProperties" not in out and not preserve:
        out["additionalProperties"] = False
    out.pop("x-kubernetes-list-type", None)
    return out


@cache
def load_xrd(plural: str) -> dict[str, Any]:
    return yaml.safe_load(xrd_path(plural).read_text())


@cache
def object_schema(plural: str) -> dict[str, Any]:
    """The JSON Schema for a whole object of the XRD's kind (served version)."""
    xrd = load_xrd(plural)
    version = next(v for v in xrd["spec"]["versions"] if v.get("served"))
    schema = _convert(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
    group = xrd["spec"]["group"]
    schema["properties"].update(
        {
            "apiVersion": {"const": f"{group}/{version['name']}"},
            "kind": {"const": xrd["spec"]["names"]["kind"]},
            "metadata": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 253},
                    # Only namespaced kinds (ModelDeployment, ModelService, ...) have one.
                    **(
                        {"namespace": {"type": "string", "minLength": 1}}
                        if xrd["spec"].get("scope") == "Namespaced"
                        else {}
                    ),
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
                },
                "additionalProperties": False,
            },
        }
    )
    schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "metadata"})
    return schema


def _list_map_keys(validator: Any, keys: list[str], instance: Any, schema: dict[str, Any]) -> Any:
    if not validator.is_type(instance, "array"):
        return
    seen: set[tuple[Any, ...]] = set()
    for item in instance:
        if not isinstance(item, dict):
            continue
        ident = tuple(item.get(k) for k in keys)
        if ident in seen:
            yield jsonschema.ValidationError(f"duplicate list-map key {dict(zip(keys, ident, strict=True))}")
        seen.add(ident)


_FORMATS = jsonschema.FormatChecker(formats=())
for _name, (_low, _high) in KNOWN_FORMATS.items():
    _FORMATS.checks(_name)(lambda value, low=_low, high=_high: not isinstance(value, int) or low <= value <= high)

KubeValidator = jsonschema.validators.extend(jsonschema.Draft7Validator, {"x-kubernetes-list-map-keys": _list_map_keys})


def schema_errors(plural: str, obj: Any, schema: dict[str, Any] | None = None) -> list[str]:
    """Every violation, as "path: message" (empty: valid)."""
    validator = KubeValidator(schema or object_schema(plural), format_checker=_FORMATS)
    return sorted(
        f"{'.'.join(str(p) for p in error.absolute_path) or '<root>'}: {error.message}"
        for error in validator.iter_errors(obj)
    )


def subschema(plural: str, *path: str) -> dict[str, Any]:
    """A converted sub-schema, e.g. ``subschema("vultrclusters", "spec", "nodePools", "items")``."""
    node = object_schema(plural)
    for part in path:
        node = node["items"] if part == "items" else node["properties"][part]
    return node
