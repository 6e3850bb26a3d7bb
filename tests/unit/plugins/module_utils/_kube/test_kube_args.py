"""Connection options: kubernetes.core's names and K8S_AUTH_* fallbacks."""

from __future__ import annotations

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._kube.args import (
    env_names,
    kube_argument_spec,
    resolve_auth,
)


def test_spec_marks_the_token_no_log() -> None:
    spec = kube_argument_spec()
    assert spec["api_key"]["no_log"] is True
    assert "default" not in spec["validate_certs"]


@pytest.mark.parametrize(
    ("option", "names"),
    [
        ("kubeconfig", ("K8S_AUTH_KUBECONFIG",)),
        ("context", ("K8S_AUTH_CONTEXT",)),
        ("host", ("K8S_AUTH_HOST",)),
        ("api_key", ("K8S_AUTH_API_KEY",)),
        ("validate_certs", ("K8S_AUTH_VALIDATE_CERTS", "K8S_AUTH_VERIFY_SSL")),
        ("ca_cert", ("K8S_AUTH_CA_CERT", "K8S_AUTH_SSL_CA_CERT")),
    ],
)
def test_env_names_match_kubernetes_core(option: str, names: tuple[str, ...]) -> None:
    assert env_names(option) == names


def test_options_win_over_environment() -> None:
    env = {"K8S_AUTH_KUBECONFIG": "/env/config", "K8S_AUTH_CONTEXT": "env-ctx"}
    assert resolve_auth({"kubeconfig": "/opt/config", "context": None}, env) == {
        "kubeconfig": "/opt/config",
        "context": "env-ctx",
    }


@pytest.mark.parametrize(
    ("value", "expected"), [("false", False), ("No", False), ("0", False), ("true", True), ("yes", True)]
)
def test_boolean_from_environment(value: str, expected: bool) -> None:
    assert resolve_auth({}, {"K8S_AUTH_VERIFY_SSL": value}) == {"validate_certs": expected}


def test_host_token_and_ca_from_environment() -> None:
    env = {"K8S_AUTH_HOST": "https://127.0.0.1:6443", "K8S_AUTH_API_KEY": "t0k", "K8S_AUTH_SSL_CA_CERT": "/ca.pem"}
    assert resolve_auth({"validate_certs": False}, env) == {
        "host": "https://127.0.0.1:6443",
        "api_key": "t0k",
        "ca_cert": "/ca.pem",
        "validate_certs": False,
    }


def test_empty_values_are_unset() -> None:
    assert resolve_auth({"context": ""}, {"K8S_AUTH_HOST": ""}) == {}
