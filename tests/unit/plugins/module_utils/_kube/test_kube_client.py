"""Client configuration (kubernetes.core's precedence) and error classification."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ApiError
from ansible_collections.metalplane.inference.plugins.module_utils._kube.client import (
    TransientApiError,
    build_configuration,
    translate,
)

pytest.importorskip("kubernetes")
from kubernetes.client.exceptions import ApiException


def bearer(cfg: object) -> str | None:
    """The Authorization header the client will send (as kubernetes' own auth_settings builds it)."""
    return cfg.auth_settings().get("BearerToken", {}).get("value")  # type: ignore[attr-defined]


def kubeconfig(tmp_path: Path) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "a", "cluster": {"server": "https://127.0.0.1:1111", "insecure-skip-tls-verify": True}},
            {"name": "b", "cluster": {"server": "https://127.0.0.1:2222"}},
        ],
        "users": [{"name": "u", "user": {"token": "tok-a"}}, {"name": "v", "user": {"token": "tok-b"}}],
        "contexts": [
            {"name": "ctx-a", "context": {"cluster": "a", "user": "u"}},
            {"name": "ctx-b", "context": {"cluster": "b", "user": "v"}},
        ],
        "current-context": "ctx-a",
    }
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_kubeconfig_current_context(tmp_path: Path) -> None:
    cfg = build_configuration({"kubeconfig": str(kubeconfig(tmp_path))})
    assert cfg.host == "https://127.0.0.1:1111"
    assert cfg.verify_ssl is False
    assert bearer(cfg) == "Bearer tok-a"


def test_kubeconfig_named_context_and_overrides(tmp_path: Path) -> None:
    cfg = build_configuration(
        {"kubeconfig": str(kubeconfig(tmp_path)), "context": "ctx-b", "validate_certs": False, "ca_cert": "/ca.pem"}
    )
    assert cfg.host == "https://127.0.0.1:2222"
    assert bearer(cfg) == "Bearer tok-b"
    assert cfg.verify_ssl is False
    assert cfg.ssl_ca_cert == "/ca.pem"


def test_kubeconfig_as_a_dict(tmp_path: Path) -> None:
    doc = yaml.safe_load(kubeconfig(tmp_path).read_text())
    assert build_configuration({"kubeconfig": doc, "context": "ctx-b"}).host == "https://127.0.0.1:2222"


def test_host_and_token_skip_the_kubeconfig(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/config")
    cfg = build_configuration({"host": "https://10.0.0.1:6443/", "api_key": "s3cret"})
    assert cfg.host == "https://10.0.0.1:6443"
    assert bearer(cfg) == "Bearer s3cret"
    assert cfg.verify_ssl is True  # TLS verification stays on unless asked otherwise


def test_api_key_overrides_the_kubeconfig_token(tmp_path: Path) -> None:
    cfg = build_configuration({"kubeconfig": str(kubeconfig(tmp_path)), "api_key": "override"})
    assert bearer(cfg) == "Bearer override"


def test_unknown_context_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ApiError, match="Cannot load Kubernetes configuration"):
        build_configuration({"kubeconfig": str(kubeconfig(tmp_path)), "context": "nope"})


@pytest.mark.parametrize(
    ("status", "transient"),
    [(500, True), (503, True), (429, True), (410, True), (403, False), (401, False), (422, False)],
)
def test_translate_statuses(status: int, transient: bool) -> None:
    err = translate(ApiException(status=status, reason="X"), "Listing Node")
    assert isinstance(err, TransientApiError) is transient
    assert err.status == status


def test_translate_connection_errors_are_transient() -> None:
    assert isinstance(translate(ConnectionRefusedError("refused"), "Listing Node"), TransientApiError)


def test_translate_uses_the_status_message() -> None:
    exc = ApiException(status=403, reason="Forbidden")
    exc.body = '{"kind":"Status","message":"nodes is forbidden: User \\"x\\" cannot list"}'
    assert translate(exc, "Listing Node").msg == 'Listing Node: HTTP 403: nodes is forbidden: User "x" cannot list'


def test_the_client_import_leaves_kubernetes_validate_out_and_importable() -> None:
    """A module process that imports the client first does not load kubernetes-validate (and jsonschema), and
    anyone importing it afterwards still gets it. In a fresh interpreter: this process may have imported both."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("kubernetes_validate") is None:
        pytest.skip("kubernetes-validate is not installed in this lane: nothing to leave out")
    probe = (
        "import sys\n"
        "from ansible_collections.metalplane.inference.plugins.module_utils._kube import client\n"
        "import kubernetes.dynamic.client as dynamic\n"
        "assert client.KUBERNETES_IMPORT_ERROR is None, client.KUBERNETES_IMPORT_ERROR\n"
        "assert not dynamic.HAS_KUBERNETES_VALIDATE\n"
        "assert 'kubernetes_validate' not in sys.modules and 'jsonschema' not in sys.modules\n"
        "import kubernetes_validate\n"
    )
    from ansible_collections.metalplane.inference.plugins.module_utils._kube import client

    root = Path(client.__file__).parents[6]  # the directory that holds ansible_collections/
    command = [sys.executable, "-c", probe]
    done = subprocess.run(command, env={"PYTHONPATH": str(root)}, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
