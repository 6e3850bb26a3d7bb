"""Protobuf request bodies (client-go typed clients, helm's release storage) and their limits."""

from __future__ import annotations

import pytest
from kubeconf_support import KubeTarget

PROTOBUF = {"Content-Type": "application/vnd.kubernetes.protobuf"}


def _varint(value: int) -> bytes:
    out = b""
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out += bytes([byte | 0x80])
        else:
            return out + bytes([byte])


def field(number: int, value: bytes | str | int) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def entry(number: int, key: str, value: bytes | str) -> bytes:
    return field(number, field(1, key) + field(2, value))


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    return b"k8s\x00" + field(1, field(1, api_version) + field(2, kind)) + field(2, raw)


def meta(name: str, labels: dict[str, str]) -> bytes:
    return field(1, name) + b"".join(entry(11, k, v) for k, v in labels.items())


@pytest.mark.emulator_only
def test_protobuf_secret_create_update_and_delete(kube_target: KubeTarget, ns: str) -> None:
    secret = envelope(
        "v1",
        "Secret",
        field(1, meta("release", {"owner": "helm"}))
        + entry(2, "release", b"\x00\xffbin")
        + field(3, "helm.sh/release.v1"),
    )
    code, body = kube_target.raw("POST", f"/api/v1/namespaces/{ns}/secrets", secret, PROTOBUF)
    assert code == 201, body
    assert body["data"] == {"release": "AP9iaW4="}
    assert (body["type"], body["metadata"]["labels"]) == ("helm.sh/release.v1", {"owner": "helm"})
    code, body = kube_target.raw("PUT", f"/api/v1/namespaces/{ns}/secrets/release", secret, PROTOBUF)
    assert code == 200, body
    delete_options = envelope("v1", "DeleteOptions", field(4, "Background"))
    code, body = kube_target.raw("DELETE", f"/api/v1/namespaces/{ns}/secrets/release", delete_options, PROTOBUF)
    assert code == 200, body
    assert kube_target.raw("GET", f"/api/v1/namespaces/{ns}/secrets/release")[0] == 404


@pytest.mark.emulator_only
@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (envelope("apps/v1", "Deployment", field(1, meta("d", {}))), 415),
        (b"not protobuf at all", 415),
    ],
    ids=["unsupported-kind", "no-envelope"],
)
def test_unsupported_protobuf_is_415(kube_target: KubeTarget, ns: str, body: bytes, expected: int) -> None:
    code, status = kube_target.raw("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body, PROTOBUF)
    assert code == expected
    assert status["reason"] == "UnsupportedMediaType"
