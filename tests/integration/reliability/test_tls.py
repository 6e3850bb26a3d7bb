"""TLS (issue 20, part 5): every connection verifies by default; an untrusted server fails at once naming the option.

Against the lab's own CA (its BMCs and the Kubernetes API serve certificates no system trusts): each platform is
called once without the CA (no ``validate_certs`` given, so the default is what is tested), which must fail with a
message that names the option that trusts it, without waiting out a timeout, and once with it, which must pass.
The Vultr emulator serves plain HTTP, so the Vultr client's verification (requests' default, never turned off by
this collection) is not exercised here; neither is boot_iso's ISO download (``iso_validate_certs``).
"""

from __future__ import annotations

import base64
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.modelplane.server import ModelplaneEmulator
from lab.redfish.personality import LAB_PASSWORD, LAB_USERNAME
from lab.redfish.server import BmcSpec, RedfishLab
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
        "called without it and without validate_certs (the default verifies), then with it; Vultr (plain HTTP "
        "emulator) and boot_iso's ISO download are not covered",
    )
