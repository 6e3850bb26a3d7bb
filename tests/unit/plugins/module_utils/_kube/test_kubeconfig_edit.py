"""The kubeadm node's kubeconfigs on the controller: admin.conf re-pointed, the token kubeconfig for Modelplane."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._kube.kubeconfig_edit import (
    token_kubeconfig,
    with_server,
)

CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nlab\n-----END CERTIFICATE-----\n").decode()
ADMIN: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [
        {"name": "kubernetes", "cluster": {"server": "https://10.0.0.5:6443", "certificate-authority-data": CA}}
    ],
    "users": [{"name": "kubernetes-admin", "user": {"client-certificate-data": "Y2VydA==", "client-key-data": "a2V5"}}],
    "contexts": [
        {"name": "kubernetes-admin@kubernetes", "context": {"cluster": "kubernetes", "user": "kubernetes-admin"}}
    ],
    "current-context": "kubernetes-admin@kubernetes",
}
SERVER = "https://192.168.120.70:6443"


def test_with_server_rewrites_every_cluster_and_keeps_the_rest() -> None:
    two = {**ADMIN, "clusters": [*ADMIN["clusters"], {"name": "b", "cluster": {"server": "https://x:1"}}]}
    edited = with_server(two, SERVER)
    assert [c["cluster"]["server"] for c in edited["clusters"]] == [SERVER, SERVER]
    assert edited["clusters"][0]["cluster"]["certificate-authority-data"] == CA
    assert edited["users"] == ADMIN["users"]
    assert two["clusters"][0]["cluster"]["server"] == "https://10.0.0.5:6443"  # the input is not changed


# (case, kubeconfig, server, the field named)
BAD_REWRITES: list[tuple[str, Any, str, str]] = [
    ("not a mapping", "apiVersion: v1", SERVER, "kubeconfig"),
    ("no clusters", {**ADMIN, "clusters": []}, SERVER, "kubeconfig"),
    ("cluster entry without cluster", {**ADMIN, "clusters": [{"name": "a"}]}, SERVER, "kubeconfig"),
    ("plain http", ADMIN, "http://192.168.120.70:6443", "server"),
]


@pytest.mark.parametrize(("case", "config", "server", "field"), BAD_REWRITES, ids=[b[0] for b in BAD_REWRITES])
def test_with_server_refuses(case: str, config: Any, server: str, field: str) -> None:
    with pytest.raises(InputError) as raised:
        with_server(config, server)
    assert raised.value.field == field, case


def secret(**data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token", "data": data}


def test_token_kubeconfig_decodes_the_token_and_keeps_the_ca_encoded() -> None:
    token = base64.b64encode(b"opaque-token").decode()
    config = token_kubeconfig(secret(token=token, **{"ca.crt": CA}), SERVER, "r730")
    assert config["clusters"] == [{"name": "r730", "cluster": {"server": SERVER, "certificate-authority-data": CA}}]
    assert config["users"] == [{"name": "r730-modelplane", "user": {"token": "opaque-token"}}]
    assert config["current-context"] == "r730"
    assert config["contexts"][0]["context"] == {"cluster": "r730", "user": "r730-modelplane"}


BAD_SECRETS: list[tuple[str, Any, str]] = [
    ("not filled yet", secret(), "secret"),
    ("no CA", secret(token=base64.b64encode(b"t").decode()), "secret"),
    ("token not base64", secret(token="***", **{"ca.crt": CA}), "secret"),
    ("not a Secret", None, "secret"),
]


@pytest.mark.parametrize(("case", "obj", "field"), BAD_SECRETS, ids=[b[0] for b in BAD_SECRETS])
def test_token_kubeconfig_refuses(case: str, obj: Any, field: str) -> None:
    with pytest.raises(InputError) as raised:
        token_kubeconfig(obj, SERVER, "r730")
    assert raised.value.field == field, case
