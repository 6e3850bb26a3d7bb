"""TLS (issue 20, part 5): every connection verifies by default; an untrusted server fails at once naming the option.

Against the lab's own CA (its BMCs and the Kubernetes API serve certificates no system trusts): each platform is
called once without the CA (no ``validate_certs`` given, so the default is what is tested), which must fail with a
message that names the option that trusts it, without waiting out a timeout, and once with it, which must pass.
The Vultr emulator serves HTTPS here (``tls_dir``) and boot_iso's download is pointed at an HTTPS file server, each
with a CA of its own.
"""

from __future__ import annotations

import base64
import hashlib
import ssl
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.common.tls import issue_server_certificate
from lab.modelplane.server import ModelplaneEmulator
from lab.redfish.personality import LAB_PASSWORD, LAB_USERNAME
from lab.redfish.server import BmcSpec, RedfishLab
from lab.vultr.server import VultrEmulator
from support.collection import install_collection_finder
from support.figures import record
from support.playbook import SHORT_TMP_ROOT, run_playbook

BMC = "r730-tls"


@pytest.fixture(scope="module")
def tls_run() -> Iterator[dict[str, Any]]:
    tmp = Path(tempfile.mkdtemp(prefix="mp-tls-", dir=SHORT_TMP_ROOT))
    with (
        RedfishLab([BmcSpec(name=BMC, personality="idrac8")], delay_scale=0.0, state_dir=tmp) as redfish,
        ModelplaneEmulator(delay_scale=0.0) as mp,
    ):
        config = yaml.safe_load(mp.kubeconfig_path.read_text())
        ca_file = tmp / "kube-ca.pem"
        for entry in config["clusters"]:
            cluster = entry["cluster"]
            cluster.pop("insecure-skip-tls-verify", None)
            data = cluster.pop("certificate-authority-data", None)
            if data:
                ca_file.write_bytes(base64.b64decode(data))
            if cluster.get("certificate-authority"):
                ca_file.write_bytes(Path(cluster.pop("certificate-authority")).read_bytes())
        untrusted = tmp / "no-ca.kubeconfig"
        untrusted.write_text(yaml.safe_dump(config))
        untrusted.chmod(0o600)
        bmc = {"bmc_url": redfish.url(BMC), "username": LAB_USERNAME, "password": LAB_PASSWORD}
        # The Namespace exists from the start; the expression only has to be true once TLS lets the list through.
        kube = {"kind": "Namespace", "name": "default", "expression": "metadata.name == 'default'", "wait_timeout": 120}
        tasks = [
            {"name": "bmc without CA", "metalplane.inference.redfish_info": bmc, "ignore_errors": True},
            {"name": "bmc with CA", "metalplane.inference.redfish_info": {**bmc, "ca_cert": redfish.ca_path}},
            {
                "name": "kube without CA",
                "metalplane.inference.kube_ready": {**kube, "kubeconfig": str(untrusted)},
                "ignore_errors": True,
            },
            {
                "name": "kube with ca_cert",
                "metalplane.inference.kube_ready": {**kube, "kubeconfig": str(untrusted), "ca_cert": str(ca_file)},
            },
            {
                "name": "control plane without CA",
                "metalplane.inference.modelplane_gateway": {"kubeconfig": str(untrusted), "manage": False},
                "ignore_errors": True,
            },
        ]
        yield {"run": run_playbook(tasks, env={"TMPDIR": str(tmp)}, timeout=600), "ca": ca_file}


@pytest.mark.parametrize(
    ("task", "names"),
    [
        ("bmc without CA", "ca_cert"),
        ("kube without CA", "certificate-authority"),
        ("control plane without CA", "certificate-authority"),
    ],
)
def test_an_untrusted_server_is_refused_naming_the_option(tls_run: dict[str, Any], task: str, names: str) -> None:
    result = tls_run["run"].task(task)
    assert result.get("failed") is True, result
    assert "CERTIFICATE_VERIFY_FAILED" in result["msg"], result["msg"]
    assert names in result["msg"], result["msg"]
    assert "Timed out" not in result["msg"]  # refused at once, not retried until the wait's deadline


def test_the_same_servers_pass_with_their_ca(tls_run: dict[str, Any]) -> None:
    run = tls_run["run"]
    assert run.rc == 0, run.stdout[-3000:]
    assert run.task("bmc with CA").get("failed") is not True
    assert run.task("kube with ca_cert").get("failed") is not True
    record(
        "tls",
        {"platforms": 2, "refused without the CA": 3, "passed with it": 2},
        "the lab's BMC (redfish_info) and Kubernetes API (kube_ready, modelplane_gateway) with their own CA: "
        "called without it and without validate_certs (the default verifies), then with it",
    )


def test_the_vultr_api_and_an_iso_server_are_refused_without_their_ca_and_pass_with_it(tmp_path: Path) -> None:
    """The Vultr client (requests) and boot_iso's download (Ansible's open_url) against HTTPS servers of a lab CA."""
    with VultrEmulator(delay_scale=0.0, api_key="lab-vultr-tls", tls_dir=tmp_path / "vultr") as vultr:
        assert vultr.ca_path is not None
        api = {"api_key": "lab-vultr-tls", "api_endpoint": vultr.endpoint, "api_retries": 2}
        run = run_playbook(
            [
                {"name": "vultr without CA", "metalplane.inference.vultr_gpu_plan_info": api, "ignore_errors": True},
                {
                    "name": "vultr with CA",
                    "metalplane.inference.vultr_gpu_plan_info": {**api, "ca_cert": str(vultr.ca_path)},
                },
            ],
            timeout=300,
        )
        assert len(vultr.log.entries) == 1, "only the call with the CA reached the API"
    refused = run.task("vultr without CA")
    assert refused.get("failed") is True, refused
    assert "CERTIFICATE_VERIFY_FAILED" in refused["msg"], refused["msg"]
    assert "ca_cert" in refused["msg"], refused["msg"]
    assert run.rc == 0, run.stdout[-3000:]
    assert run.task("vultr with CA")["plans"], "the lab's catalogue has GPU plans"

    install_collection_finder()
    from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
    from ansible_collections.metalplane.inference.plugins.module_utils._metal.boot_iso import fetch_verified

    iso = b"an installer ISO, as far as this test is concerned\n" * 64
    sha256 = hashlib.sha256(iso).hexdigest()
    with TlsFileServer(tmp_path / "iso-server", {"/netinst.iso": iso}) as server:
        url = server.url("/netinst.iso")
        options = {"download": True, "timeout": 30, "validate_certs": True}
        with pytest.raises(InputError) as caught:
            fetch_verified(url, sha256, tmp_path / "cache", ca_cert=None, **options)
        path, downloaded = fetch_verified(url, sha256, tmp_path / "cache", ca_cert=str(server.ca_path), **options)
    assert "CERTIFICATE_VERIFY_FAILED" in caught.value.msg, caught.value.msg
    assert "ca_cert" in caught.value.msg, caught.value.msg
    assert downloaded
    assert path is not None
    assert path.read_bytes() == iso
    record(
        "tls_vultr_iso",
        {"platforms": 2, "refused without the CA": 2, "passed with it": 2},
        "the Vultr emulator over HTTPS (vultr_gpu_plan_info) and an HTTPS file server (boot_iso's download, "
        "fetch_verified) with their own CA: called without it (the default verifies), then with it",
    )


class TlsFileServer:
    """Serves a few files over HTTPS with a certificate of a CA of its own."""

    def __init__(self, directory: Path, files: dict[str, bytes]) -> None:
        material = issue_server_certificate("iso-lab-ca", ["localhost", "127.0.0.1"])
        directory.mkdir(parents=True)
        self.ca_path = directory / "ca.crt"
        self.ca_path.write_bytes(material.ca_pem)
        (directory / "server.pem").write_bytes(material.cert_pem + material.ca_pem + material.key_pem)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(directory / "server.pem")
        content = dict(files)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = content.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.server.server_address[1]}{path}"

    def __enter__(self) -> TlsFileServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
