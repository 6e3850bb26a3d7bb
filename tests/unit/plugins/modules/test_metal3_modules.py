"""metal3_host and metal3_host_info through main(): bad input fails before any request, secrets stay out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.metalplane.inference.plugins.modules import metal3_host, metal3_host_info

SECRET = "bmc-s3cret"
# A server nobody listens on: a request would fail with a connection error, so an input error proves order.
KUBECONFIG = """apiVersion: v1
kind: Config
current-context: mp
clusters: [{name: mp, cluster: {server: "https://127.0.0.1:9"}}]
contexts: [{name: mp, context: {cluster: mp, user: u}}]
users: [{name: u, user: {token: t}}]
"""
HOST = {
    "name": "r730-a",
    "bmc_url": "https://127.0.0.1:9",
    "username": "root",
    "password": SECRET,
    "personality": "idrac8",
    "boot_mac": "00:5c:52:31:3a:9c",
}
IMAGE = {"url": "http://images.example/node.qcow2", "checksum": "c" * 64, "disk_format": "qcow2"}


@pytest.mark.parametrize(
    ("module", "args", "message"),
    [
        (metal3_host, {"image": {**IMAGE, "checksum_type": "sha1"}}, "checksum_type"),
        (metal3_host, {"image": {**IMAGE, "disk_format": "iso"}}, "disk_format"),
        (metal3_host, {"image": {"imageURL": IMAGE["url"]}}, "image.checksum: is required"),
        (metal3_host, {"hosts": [{**HOST, "boot_mac": "00:5c:52"}]}, "hosts[0].boot_mac"),
        (metal3_host, {"network": {"node_ip": "192.0.2.10/24", "gateway": "10.0.0.1"}}, "network.gateway"),
        (metal3_host_info, {"cluster": "Not A Name"}, "cluster"),
    ],
)
def test_bad_input_fails_before_any_request(
    module: Any, args: dict[str, Any], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "mp.kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    base: dict[str, Any] = {"kubeconfig": str(kubeconfig), "pool": "r730", "hosts": [HOST], "cluster": "dc1"}
    if module is metal3_host:
        base.update(
            image=IMAGE,
            network={"node_ip": "192.0.2.10/24", "gateway": "192.0.2.1", "dns": ["192.0.2.53"]},
            ssh_authorized_key="ssh-ed25519 AAAA op@ctl",
        )
    with patch_module_args({**base, **args}), pytest.raises(SystemExit):
        module.main()
    result = json.loads(capsys.readouterr().out)
    assert result["failed"] is True
    assert message in result["msg"]
    assert "127.0.0.1:9" not in result["msg"]  # no request was made
    assert SECRET not in json.dumps(result)
