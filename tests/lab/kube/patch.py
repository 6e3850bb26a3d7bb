"""PATCH flavours and server-side apply field ownership for the Kubernetes emulator.

Why: kubernetes.core and kubectl use all four patch types; a merge that replaces lists where a real
server merges them by key (strategic merge), or an apply that never reports conflicts, would make
tests pass that fail against a cluster. Merge behaviour is driven by the schema (patch merge keys,
list-map keys), as in the apiserver. Server-side apply is an approximation: field sets use list-map
keys and set values; atomic lists and maps are leaves.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch

from lab.kube import schemas

Obj = dict[str, Any]
FieldPath = tuple[str, ...]


class PatchError(ValueError):
    """A patch that cannot be applied (the server answers 422 or 400)."""


# --- RFC 7386 merge patch ---------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# --- RFC 6902 JSON patch ----------------------------------------------------------------------


def json_patch(target: Obj, operations: Any) -> Obj:
    if not isinstance(operations, list):
        raise PatchError("json patch must be a list of operations")
    try:
        return jsonpatch.apply_patch(target, operations)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError) as exc:
        raise PatchError(f"the server rejected our request due to an error in our request: {exc}") from exc


# --- strategic merge patch --------------------------------------------------------------------

_DIRECTIVE_PREFIXES = ("$setElementOrder/", "$deleteFromPrimitiveList/", "$retainKeys")


def strategic_merge(target: Any, patch: Any, schema: schemas.Schema | None) -> Any:
    """Strategic merge: maps merge, lists with a merge key merge by key, ``null`` deletes."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    result = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [item for item in result.get(field) or [] if item not in value]
            continue
        if key.startswith(_DIRECTIVE_PREFIXES) or key == "$patch":
            continue
        sub_schema = schemas.child_schema(schema, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, sub_schema)
        elif isinstance(value, dict):
            result[key] = strategic_merge(result.get(key), value, sub_schema)
        else:
            result[key] = value
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(current: Any, patch: list[Any], schema: schemas.Schema | None) -> list[Any]:
    keys = schemas.list_merge_keys(schema)
    strategy = schemas.patch_strategy(schema)
    current_list = list(current) if isinstance(current, list) else []
    if "merge" not in strategy or not keys:
        if "merge" in strategy:  # primitive list with merge strategy: union
            return current_list + [v for v in patch if v not in current_list]
        return [item for item in copy.deepcopy(patch) if not (isinstance(item, dict) and "$patch" in item)]
    key = keys[0]
    item_schema = schemas.child_schema(schema, 0)
    result = [copy.deepcopy(item) for item in current_list]
    for item in patch:
        if not isinstance(item, dict):
            continue
        index = next((i for i, old in enumerate(result) if old.get(key) == item.get(key)), None)
        if item.get("$patch") == "delete":
            if index is not None:
                result.pop(index)
        elif index is None:
            result.append(strategic_merge({}, item, item_schema))
        else:
            result[index] = strategic_merge(result[index], item, item_schema)
    return result


# --- server-side apply: field sets --------------------------------------------------------------


def _list_item_key(item: Any, keys: list[str] | None) -> str | None:
    if keys and isinstance(item, dict) and all(k in item for k in keys):
        return "k:" + json.dumps({k: item[k] for k in keys}, separators=(",", ":"), sort_keys=True)
    return None


def field_set(
    obj: Any, schema: schemas.Schema | None, prefix: FieldPath = (), *, apply: bool = False
) -> set[FieldPath]:
    """The leaf and node paths an object sets, as structured-merge-diff counts them.

    A node path ends in ``"."``: a keyed list item always (``k:{...}`` with ``.``); a map or object
    only for an Update (``apply=False``), where a map the update creates is owned as a whole (what
    kube-apiserver shows as ``f:labels: {.: {}, ...}``), never for an Apply, whose set holds leaves
    and list items only. Fields a ``x-kubernetes-preserve-unknown-fields`` schema does not declare
    are leaves, whatever their value (the apiserver does not descend into them).
    """
    paths: set[FieldPath] = set()
    if isinstance(obj, dict):
        resolved = schemas.resolve(schema)
        for name, value in obj.items():
            if not prefix and name in ("apiVersion", "kind"):
                continue
            if not prefix and name == "metadata":
                for meta_key in ("labels", "annotations"):
                    entries = (value or {}).get(meta_key) or {}
                    if entries and not apply:
                        paths.add(("f:metadata", f"f:{meta_key}", "."))
                    for label in entries:
                        paths.add(("f:metadata", f"f:{meta_key}", f"f:{label}"))
                continue
            path = (*prefix, f"f:{name}")
            sub = schemas.child_schema(schema, name)
            if sub is None and resolved is not None:
                paths.add(path)  # undeclared under preserve-unknown-fields: a leaf
            elif isinstance(value, dict) and value and _is_granular_map(sub):
                if not apply:
                    paths.add((*path, "."))
                paths |= field_set(value, sub, path, apply=apply)
            elif isinstance(value, list) and value:
                keys = schemas.list_merge_keys(sub)
                item_schema = schemas.child_schema(sub, 0)
                granular = False
                for item in value:
                    item_key = _list_item_key(item, keys)
                    if item_key:
                        granular = True
                        paths.add((*path, item_key, "."))
                        paths |= field_set(item, item_schema, (*path, item_key), apply=apply)
                    elif schemas.is_set_list(sub) and not isinstance(item, dict | list):
                        granular = True
                        paths.add((*path, "v:" + json.dumps(item)))
                if granular and not apply:
                    paths.add((*path, "."))
                if not granular:
                    paths.add(path)
            else:
                paths.add(path)
    return paths


def _is_granular_map(schema: schemas.Schema | None) -> bool:
    schema = schemas.resolve(schema)
    return not (schema and schema.get("x-kubernetes-map-type") == "atomic")


def value_at(obj: Any, path: FieldPath) -> tuple[bool, Any]:
    """(present, value) of a field path inside an object."""
    current = obj
    for element in path:
        if element == ".":
            return True, "<node>"
        if element.startswith("f:"):
            if not isinstance(current, dict) or element[2:] not in current:
                return False, None
            current = current[element[2:]]
        elif element.startswith("k:"):
            want = json.loads(element[2:])
            if not isinstance(current, list):
                return False, None
            found = [i for i in current if isinstance(i, dict) and all(i.get(k) == v for k, v in want.items())]
            if not found:
                return False, None
            current = found[0]
        elif element.startswith("v:"):
            value = json.loads(element[2:])
            return (isinstance(current, list) and value in current), value
    return True, current


def remove_path(obj: Any, path: FieldPath) -> None:
    """Remove one field path (a leaf, a list-map item or a set value) from ``obj`` in place."""
    if path and path[-1] == ".":
        path = path[:-1]
    if not path:
        return
    present, parent = value_at(obj, path[:-1])
    if not present:
        return
    last = path[-1]
    if last.startswith("f:") and isinstance(parent, dict):
        parent.pop(last[2:], None)
    elif last.startswith("k:") and isinstance(parent, list):
        want = json.loads(last[2:])
        parent[:] = [i for i in parent if not (isinstance(i, dict) and all(i.get(k) == v for k, v in want.items()))]
    elif last.startswith("v:") and isinstance(parent, list):
        value = json.loads(last[2:])
        parent[:] = [i for i in parent if i != value]


def apply_merge(current: Any, applied: Any, schema: schemas.Schema | None) -> Any:
    """Merge an applied configuration into the live object (list-maps by key, sets by value)."""
    if not isinstance(applied, dict) or not isinstance(current, dict):
        return copy.deepcopy(applied)
    result = dict(current)
    for key, value in applied.items():
        sub = schemas.child_schema(schema, key)
        if isinstance(value, dict) and _is_granular_map(sub):
            result[key] = apply_merge(result.get(key, {}), value, sub)
        elif isinstance(value, list):
            keys = schemas.list_merge_keys(sub)
            if keys and isinstance(result.get(key), list):
                merged = [copy.deepcopy(i) for i in result[key]]
                item_schema = schemas.child_schema(sub, 0)
                for item in value:
                    item_key = _list_item_key(item, keys)
                    index = next(
                        (i for i, old in enumerate(merged) if item_key and _list_item_key(old, keys) == item_key), None
                    )
                    if index is None:
                        merged.append(copy.deepcopy(item))
                    else:
                        merged[index] = apply_merge(merged[index], item, item_schema)
                result[key] = merged
            elif schemas.is_set_list(sub) and isinstance(result.get(key), list):
                result[key] = result[key] + [v for v in value if v not in result[key]]
            else:
                result[key] = copy.deepcopy(value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def changed_fields(old: Any, new: Any, schema: schemas.Schema | None) -> set[FieldPath]:
    """Field paths whose value differs between two versions of an object (for Update managers)."""
    new_fields = field_set(strip_server_fields(new), schema)
    old_obj = strip_server_fields(old)
    out = set()
    for path in new_fields:
        present_old, value_old = value_at(old_obj, path)
        _present_new, value_new = value_at(new, path)
        if not present_old or value_old != value_new:
            out.add(path)
    return out


def strip_server_fields(obj: Any) -> Any:
    if not isinstance(obj, dict):
        return obj
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k in ("labels", "annotations")}
    out["metadata"] = meta
    return out


def to_fields_v1(paths: set[FieldPath]) -> dict[str, Any]:
    """FieldsV1 of a set of paths; a node owned with no owned children is ``{}``, as the apiserver
    encodes it (``{".": {}}`` only appears next to owned children)."""
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for element in path:
            node = node.setdefault(element, {})

    def compact(node: dict[str, Any]) -> dict[str, Any]:
        if set(node) == {"."}:
            return {}
        return {key: compact(child) for key, child in node.items()}

    return compact(tree)


def from_fields_v1(tree: dict[str, Any], prefix: FieldPath = ()) -> set[FieldPath]:
    paths: set[FieldPath] = set()
    for key, sub in tree.items():
        path = (*prefix, key)
        if sub:
            paths |= from_fields_v1(sub, path)
        else:
            paths.add(path)
    return paths
