"""metal_preflight through main(): AnsibleModule's spec (suboptions, defaults, no_log), check mode, the result.

The control plane, the BMCs and the ISO check are the in-memory fakes of the claim tests, injected by wrapping
the module's ``run_metal_preflight``; everything else (argument parsing, masking of secrets in the output that
Ansible prints, fail_json) is the real module.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "module_utils" / "_metal"))
from metal_fakes import FakeBmc, FakeBmcs, MemoryLeaseStore, v100_inventory
from metal_support import AUTHORIZED_KEY, NODE_SOFTWARE, ROOT_HASH

from ansible_collections.metalplane.inference.plugins.module_utils._metal import preflight
from ansible_collections.metalplane.inference.plugins.modules import metal_preflight

SECRET = "idrac-s3cret-pw"
MACS = {"r1": "00:5c:52:31:3a:01", "r2": "00:5c:52:31:3a:02"}
SHA = "cd" * 32


def _args(**cluster: Any) -> dict[str, Any]:
    return {
        "kubeconfig": "/nonexistent/kubeconfig",
        "clusters": [
            {
                "name": "lab-r730",
                "pool": "lab",
                "requirements": {"gpu_model": "V100", "gpu_count": 2},
                "node_ip": "192.168.120.70/24",
                "gateway": "192.168.120.1",
                "dns": ["192.168.120.1"],
                "networks": ["10.244.0.0/16", "10.96.0.0/12"],
                "os_family": "el",
                "installer_iso_url": "https://mirror.example/dvd.iso",
                "installer_iso_sha256": f"sha256:{SHA}",
                "ssh_authorized_key": AUTHORIZED_KEY,
                "root_password_hash": ROOT_HASH,
                **NODE_SOFTWARE,
                **cluster,
            }
        ],
        "pools": [
            {
                "name": "lab",
                "hosts": [
                    {
                        "name": n,
                        "bmc_url": f"https://{n}.bmc.example",
                        "username": "root",
                        "password": SECRET,
                        "boot_mac": m,
                        "root_disk": {"serial": f"SN-{n}"},
                    }
                    for n, m in MACS.items()
                ],
            }
        ],
    }


class Fakes:
    def __init__(self) -> None:
        self.store = MemoryLeaseStore()
        self.bmcs = FakeBmcs({n: FakeBmc(v100_inventory(m)) for n, m in MACS.items()})
        self.isos: list[tuple[str, str, bool]] = []
        self.indexes: list[str] = []

    def index(self, url: str) -> bytes | None:
        """The package repository: kubeadm 1.34.2 in pkgs.k8s.io's v1.34 Debian index (check_package_repositories
        defaults to true, so the module reads it)."""
        self.indexes.append(url)
        return b"Package: kubeadm\nVersion: 1.34.2-1.1\n" if url.endswith("/v1.34/deb/Packages") else None

    def iso(self, url: str, sha256: str, install: bool) -> dict[str, Any]:
        self.isos.append((url, sha256, install))
        return {"status": "cached", "verified": True, "path": f"/cache/{sha256}.iso"}


def _run(
    args: dict[str, Any], fakes: Fakes, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> dict[str, Any]:
    run = functools.partial(
        preflight.run_metal_preflight,
        store_factory=lambda _p: fakes.store,
        bmc_opener=fakes.bmcs,
        iso_check=fakes.iso,
        release_fetch=fakes.index,
    )
    monkeypatch.setattr(metal_preflight, "run_metal_preflight", run)
    with patch_module_args(args), pytest.raises(SystemExit):
        metal_preflight.main()
    return json.loads(capsys.readouterr().out)


def test_a_good_inventory_in_check_mode_plans_and_writes_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fakes = Fakes()
    result = _run({**_args(os_family="debian"), "_ansible_check_mode": True}, fakes, monkeypatch, capsys)
    assert result.get("failed") is not True, result
    assert result["changed"] is False
    assert fakes.indexes == ["https://pkgs.k8s.io/core:/stable:/v1.34/deb/Packages"]
    assert result["clusters"][0]["node"]["kernel_module_type"] == "proprietary"
    (cluster,) = result["clusters"]
    assert (cluster["state"], cluster["provisioner"], cluster["claim"]) == ("present", "redfish", "new")
    assert cluster["host"]["name"] == "r1"
    assert cluster["host"]["root_disk"] == {"serial": "SN-r1"}
    assert cluster["iso"]["status"] == "cached"
    assert fakes.isos == [("https://mirror.example/dvd.iso", SHA, True)]  # a new claim installs from it
    assert fakes.store.writes() == []
    assert all(b.writes == [] for b in fakes.bmcs.bmcs.values())
    dumped = json.dumps(result)
    assert SECRET not in dumped
    assert ROOT_HASH not in dumped


@pytest.mark.parametrize(
    ("cluster", "fields"),
    [
        ({"pool": "nope"}, ["clusters[0].pool"]),
        ({"gateway": "10.1.1.1", "os_family": "arch"}, ["clusters[0].gateway", "clusters[0].os_family"]),
        ({"root_password_hash": "plain-text-pw"}, ["clusters[0].root_password_hash"]),
        ({"requirements": {"gpu_model": "A100"}}, ["clusters[0].pool"]),
        ({"host": "r2", "state": "absent", "protected": True}, ["clusters[0].protected"]),
        # Taken as given by the spec, so they are problems of the preflight, listed with any other, rather than
        # Ansible's conversion failing alone without naming the cluster.
        ({"requirements": {"gpu_model": "V100", "gpu_count": "two"}}, ["clusters[0].requirements.gpu_count"]),
        ({"requirements": {"gpu_model": "V100", "gpus": 2}}, ["clusters[0].requirements"]),
        ({"kubeadm_node_labels": ["team=ml"]}, ["clusters[0].kubeadm_node_labels"]),
        ({"ssh_port": 70000, "hostname": "gpu_node_01"}, ["clusters[0].ssh_port", "clusters[0].hostname"]),
    ],
)
def test_bad_input_fails_once_listing_every_field(
    cluster: dict[str, Any], fields: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fakes = Fakes()
    result = _run(_args(**cluster), fakes, monkeypatch, capsys)
    assert result["failed"] is True
    assert result["error"]["kind"] == "input"
    assert [p["field"] for p in result["error"]["problems"]] == fields
    assert fakes.store.writes() == []
    dumped = json.dumps(result)
    assert SECRET not in dumped
    assert "plain-text-pw" not in dumped
    assert ROOT_HASH not in dumped


def test_a_claim_of_another_cluster_on_the_pinned_host_fails_on_host(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fakes = Fakes()
    args = _args(host="r2")
    hosts = preflight.check_pools([], args["pools"])["lab"].hosts
    body = preflight.c.lease_body(
        "modelplane-system", "lab", hosts[1], cluster="dc9", claimer="ops@x", since="t", generation=1
    )
    fakes.store.put(body)
    result = _run(args, fakes, monkeypatch, capsys)
    assert [p["field"] for p in result["error"]["problems"]] == ["clusters[0].host"]
    assert "claimed by cluster 'dc9'" in result["error"]["problems"][0]["msg"]
    assert fakes.store.writes() == []


def test_an_unknown_suboption_is_refused_by_the_spec(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    result = _run(_args(gatway="192.168.120.1"), Fakes(), monkeypatch, capsys)
    assert result["failed"] is True
    assert "gatway" in result["msg"]
    assert SECRET not in json.dumps(result)


def test_a_root_disk_written_as_a_device_name_is_a_problem_of_its_host(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _args()
    args["pools"][0]["hosts"][1]["root_disk"] = "/dev/sda"
    args["pools"][0]["hosts"][0]["facts"] = "2x V100"
    result = _run(args, Fakes(), monkeypatch, capsys)
    assert result["failed"] is True
    problems = result["error"]["problems"]
    assert [p["field"] for p in problems] == ["pools.lab.hosts[0].facts", "pools.lab.hosts[1].root_disk"]
    assert "'/dev/sda' is not a mapping" in problems[1]["msg"]
    assert SECRET not in json.dumps(result)


def test_requirements_as_ansible_converted_them_still_pass(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _args(os_family="debian", requirements={"gpu_model": "V100", "gpu_count": "2"})
    result = _run(args, Fakes(), monkeypatch, capsys)
    assert result.get("failed") is not True, result
    assert result["clusters"][0]["host"]["name"] == "r1"
