"""Decoding of the protobuf request bodies client-go typed clients send (helm's release storage).

Why: helm and ``kubectl create cm|secret|ns`` write through client-go typed clients, which encode
bodies as ``application/vnd.kubernetes.protobuf``. A server that cannot read them breaks
``helm install``. Only the kinds those tools write are decoded (Secret, ConfigMap, Namespace,
ServiceAccount, DeleteOptions); anything else gets 415 Unsupported Media Type, and responses are
always JSON (clients accept it). Field numbers follow k8s.io/api generated.proto.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

MAGIC = b"k8s\x00"
Obj = dict[str, Any]


class ProtobufError(ValueError):
    """A body that is not a Kubernetes protobuf envelope of a kind this decoder knows."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) pairs: ints for varints, bytes for length-delimited values."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            yield number, value
        elif wire == 2:
            length, pos = _varint(data, pos)
            yield number, data[pos : pos + length]
            pos += length
        elif wire == 1:
            yield number, int.from_bytes(data[pos : pos + 8], "little")
            pos += 8
        elif wire == 5:
            yield number, int.from_bytes(data[pos : pos + 4], "little")
            pos += 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")


def _text(value: int | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _entry(value: int | bytes) -> tuple[str, bytes]:
    key, val = "", b""
    for number, item in fields(value if isinstance(value, bytes) else b""):
        if number == 1:
            key = _text(item)
        elif number == 2:
            val = item if isinstance(item, bytes) else str(item).encode()
    return key, val


def _time(value: int | bytes) -> str:
    seconds = 0
    for number, item in fields(value if isinstance(value, bytes) else b""):
        if number == 1 and isinstance(item, int):
            seconds = item
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _owner_reference(value: bytes) -> Obj:
    names = {1: "kind", 3: "name", 4: "uid", 5: "apiVersion"}
    ref: Obj = {}
    for number, item in fields(value):
        if number in names:
            ref[names[number]] = _text(item)
        elif number == 6:
            ref["controller"] = bool(item)
        elif number == 7:
            ref["blockOwnerDeletion"] = bool(item)
    return ref


def object_meta(data: bytes) -> Obj:
    strings = {1: "name", 2: "generateName", 3: "namespace", 5: "uid", 6: "resourceVersion"}
    meta: Obj = {}
    for number, value in fields(data):
        if number in strings:
            meta[strings[number]] = _text(value)
        elif number == 7:
            meta["generation"] = value
        elif number in (11, 12):
            key, val = _entry(value)
            meta.setdefault("labels" if number == 11 else "annotations", {})[key] = val.decode()
        elif number == 13 and isinstance(value, bytes):
            meta.setdefault("ownerReferences", []).append(_owner_reference(value))
        elif number == 14:
            meta.setdefault("finalizers", []).append(_text(value))
        elif number == 8:
            meta["creationTimestamp"] = _time(value)
    return meta


def _map_into(obj: Obj, key: str, value: int | bytes, binary: bool) -> None:
    name, raw = _entry(value)
    obj.setdefault(key, {})[name] = base64.b64encode(raw).decode() if binary else raw.decode()


def _secret(data: bytes) -> Obj:
    obj: Obj = {"apiVersion": "v1", "kind": "Secret"}
    for number, value in fields(data):
        if number == 1 and isinstance(value, bytes):
            obj["metadata"] = object_meta(value)
        elif number == 2:
            _map_into(obj, "data", value, binary=True)
        elif number == 3:
            obj["type"] = _text(value)
        elif number == 4:
            _map_into(obj, "stringData", value, binary=False)
        elif number == 5:
            obj["immutable"] = bool(value)
    return obj


def _configmap(data: bytes) -> Obj:
    obj: Obj = {"apiVersion": "v1", "kind": "ConfigMap"}
    for number, value in fields(data):
        if number == 1 and isinstance(value, bytes):
            obj["metadata"] = object_meta(value)
        elif number == 2:
            _map_into(obj, "data", value, binary=False)
        elif number == 3:
            _map_into(obj, "binaryData", value, binary=True)
        elif number == 4:
            obj["immutable"] = bool(value)
    return obj


def _namespace(data: bytes) -> Obj:
    obj: Obj = {"apiVersion": "v1", "kind": "Namespace"}
    for number, value in fields(data):
        if number == 1 and isinstance(value, bytes):
            obj["metadata"] = object_meta(value)
        elif number == 2 and isinstance(value, bytes):
            finalizers = [_text(v) for n, v in fields(value) if n == 1]
            obj["spec"] = {"finalizers": finalizers} if finalizers else {}
    return obj


def _service_account(data: bytes) -> Obj:
    obj: Obj = {"apiVersion": "v1", "kind": "ServiceAccount"}
    for number, value in fields(data):
        if number == 1 and isinstance(value, bytes):
            obj["metadata"] = object_meta(value)
        elif number == 3 and isinstance(value, bytes):
            name = next((_text(v) for n, v in fields(value) if n == 1), "")
            obj.setdefault("imagePullSecrets", []).append({"name": name})
        elif number == 4:
            obj["automountServiceAccountToken"] = bool(value)
    return obj


def _delete_options(data: bytes) -> Obj:
    obj: Obj = {"kind": "DeleteOptions", "apiVersion": "v1"}
    for number, value in fields(data):
        if number == 1:
            obj["gracePeriodSeconds"] = value
        elif number == 2 and isinstance(value, bytes):
            pre = {({1: "uid", 2: "resourceVersion"}[n]): _text(v) for n, v in fields(value) if n in (1, 2)}
            obj["preconditions"] = pre
        elif number == 3:
            obj["orphanDependents"] = bool(value)
        elif number == 4:
            obj["propagationPolicy"] = _text(value)
        elif number == 5:
            obj.setdefault("dryRun", []).append(_text(value))
    return obj


DECODERS: dict[str, Callable[[bytes], Obj]] = {
    "Secret": _secret,
    "ConfigMap": _configmap,
    "Namespace": _namespace,
    "ServiceAccount": _service_account,
    "DeleteOptions": _delete_options,
}


def decode(body: bytes, expected_kind: str | None = None) -> Obj:
    """Decode a ``k8s\\x00``-prefixed runtime.Unknown envelope into a JSON-style object."""
    if not body.startswith(MAGIC):
        raise ProtobufError("the body is not a Kubernetes protobuf envelope")
    kind, raw = "", b""
    for number, value in fields(body[len(MAGIC) :]):
        if number == 1 and isinstance(value, bytes):
            kind = next((_text(v) for n, v in fields(value) if n == 2), "")
        elif number == 2 and isinstance(value, bytes):
            raw = value
    decoder = DECODERS.get(kind)
    if decoder is None or (expected_kind and kind not in (expected_kind, "DeleteOptions")):
        raise ProtobufError(f"protobuf bodies of kind {kind or '?'} are not supported by the lab emulator; send JSON")
    return decoder(raw)
