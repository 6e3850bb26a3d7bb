"""metal_preflight through real ansible-playbook against the lab: the Kubernetes API emulator as the Modelplane
control plane (one Lease already held by another cluster), Redfish BMCs (iDRAC8, iDRAC9, a generic one without
GPUs) and an HTTP server for the installer ISO.

What must hold: the good inventory passes, in check mode without downloading and then for real with the ISO in
boot_iso's cache; each bad inventory is rejected naming its field; and across all runs nothing was written: the
control plane saw only GETs (no Lease created or changed), every BMC saw only GETs (no PATCH, no POST, not even a
session), and no ISO was built.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._metal import claims as c
from ansible_collections.metalplane.inference.plugins.module_utils._metal.pool import Host
from lab.kube.server import KubeEmulator
from lab.redfish.server import BmcSpec, RedfishLab
from support.playbook import PlaybookRun

NS = "modelplane-system"
POOL = "lab"
PASSWORD = "calvin-s3cret"
# A valid sha512-crypt hash (of no real password) and a public key: the shapes the inventory carries.
ROOT_HASH = "$6$metalplane$" + "B" * 86
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKv0ql3rV7FQ1Cq5xQ9e2dM0wB9aT4n8c3y7cR1zX6pE ops@controller"
# name -> (personality, GPUs). "r730-3" is claimed by another cluster; "bare" has no GPU (mismatched).
BMCS = {"r730-3": ("idrac8", 2), "bare": ("generic", 0), "r730-1": ("idrac8", 2), "r730-2": ("idrac9", 2)}
MAC = {name: f"00:5c:52:31:3a:0{i}" for i, name in enumerate(BMCS, start=1)}
INSTANT = {"power_delay": 0.0, "lc_delay": 0.0, "task_delay": 0.0}
ISO_BODY = b"an installer ISO stand-in; only its sha256 matters here\n" * 512
ISO_SHA = hashlib.sha256(ISO_BODY).hexdigest()
WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}

pytestmark = pytest.mark.slow


class _IsoServer(BaseHTTPRequestHandler):
    def log_message(self, *_args: Any) -> None:
        pass

    def do_HEAD(self) -> None:
        if self.path != "/dvd.iso":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(ISO_BODY)))
        self.end_headers()

    def do_GET(self) -> None:
        self.do_HEAD()
        if self.path == "/dvd.iso":
            self.wfile.write(ISO_BODY)


@pytest.fixture(scope="module")
def labs() -> Iterator[tuple[KubeEmulator, RedfishLab, str]]:
    bmcs = [
        BmcSpec(name=n, personality=p, gpus=g, password=PASSWORD, macs=(MAC[n], "00:5c:52:31:3b:00"), **INSTANT)
        for n, (p, g) in BMCS.items()
    ]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _IsoServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    with KubeEmulator(delay_scale=0.0, name="modelplane") as kube, RedfishLab(bmcs=bmcs, delay_scale=0.0) as lab:
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        claimed = Host(name="r730-3", bmc_url=lab.url("r730-3"), username="root", password="x", boot_mac=MAC["r730-3"])
        kube.create(
            c.lease_body(
                NS,
                POOL,
                claimed,
                cluster="other",
                claimer="ops@elsewhere",
                since="2026-08-20T10:00:00.000000Z",
                generation=1,
            )
        )
        yield kube, lab, f"http://127.0.0.1:{server.server_address[1]}/dvd.iso"
    server.shutdown()
    server.server_close()


def _cluster(name: str, iso_url: str, **overrides: Any) -> dict[str, Any]:
    index = {"lab-r730": 70, "lab-two": 71, "lab-three": 72}[name]
    return {
        "name": name,
        "state": "present",
        "pool": POOL,
        "provisioner": "redfish",
        "requirements": {"gpu_model": "V100", "gpu_count": 2, "min_memory_gib": 128},
        "node_ip": f"192.168.120.{index}/24",
        "gateway": "192.168.120.1",
        "dns": ["192.168.120.1"],
        "networks": [f"10.{index}.0.0/16", f"10.{index + 100}.0.0/16"],
        "os_family": "el",
        "installer_iso_url": iso_url,
        "installer_iso_sha256": ISO_SHA,
        "ssh_authorized_key": SSH_KEY,
        "root_password_hash": ROOT_HASH,
        "protected": False,
        # The node software (only checked, never fetched): the R730's V100s on branch 580, pods and services in the
        # cluster's own networks. The private key file only has to exist; this test file stands in for it.
        "ssh_private_key_file": __file__,
        "os_version": "10",
        "nvidia_driver_installer_url": "https://us.download.nvidia.com/tesla/580.105.08/NVIDIA-Linux-x86_64-580.105.08.run",
        "nvidia_driver_installer_sha256": "ef" * 32,
        "nvidia_driver_kernel_module_type": "auto",
        "kubeadm_node_kubernetes_version": "v1.34.2",
        "kubeadm_node_pod_cidr": f"10.{index}.0.0/16",
        "kubeadm_node_service_cidr": f"10.{index + 100}.0.0/16",
        **overrides,
    }


def _good(lab: RedfishLab, iso_url: str) -> dict[str, Any]:
    hosts = [
        {
            "name": name,
            "bmc_url": lab.url(name),
            "username": "root",
            "password": PASSWORD,
            "personality": personality,
            "boot_mac": MAC[name],
            "ca_cert": str(lab.ca_path),
            "root_disk": {"wwn": f"0x5000c500a1b2c3d{i}"},
        }
        for i, (name, (personality, _gpus)) in enumerate(BMCS.items())
    ]
    return {
        "clusters": [_cluster("lab-r730", iso_url), _cluster("lab-two", iso_url)],
        "pools": [{"name": POOL, "hosts": hosts}],
    }


Change = Callable[[dict[str, Any], str], None]


def _at(cluster: int, **values: Any) -> Change:
    return lambda inv, _url: inv["clusters"][cluster].update(values)


# name -> (change to the good inventory, the field the failure must name)
BAD: dict[str, tuple[Change, str]] = {
    "unknown pool": (_at(0, pool="r740"), "clusters[0].pool"),
    "no free matching host": (
        lambda inv, url: inv["clusters"].append(_cluster("lab-three", url)),
        "clusters[2].pool",
    ),
    "mac not a mac": (
        lambda inv, _url: inv["pools"][0]["hosts"][2].update(boot_mac="00:5c:52:31:3a"),
        "pools.lab.hosts[2].boot_mac",
    ),
    "ip outside its prefix": (_at(0, node_ip="192.168.120.255/24"), "clusters[0].node_ip"),
    "gateway outside the subnet": (_at(0, gateway="192.168.121.1"), "clusters[0].gateway"),
    "iso checksum mismatch": (_at(0, installer_iso_sha256="0" * 64), "clusters[0].installer_iso_sha256"),
    "unsupported os family": (_at(1, os_family="windows"), "clusters[1].os_family"),
    # Another sha256 than the good one's: an ISO already cached under its sha256 is not fetched again (boot_iso
    # would not fetch it either), so only an uncached ISO's URL is asked.
    "unreachable iso url": (
        _at(0, installer_iso_url="http://127.0.0.1:9/dvd.iso", installer_iso_sha256="1" * 64),
        "clusters[0].installer_iso_url",
    ),
    "duplicate node ips": (_at(1, node_ip="192.168.120.70/24"), "clusters[1].node_ip"),
    "claim owned by another cluster": (_at(0, host="r730-3"), "clusters[0].host"),
    "open module on the V100s": (
        _at(0, nvidia_driver_kernel_module_type="open"),
        "clusters[0].nvidia_driver_kernel_module_type",
    ),
    "driver without checksum": (
        _at(1, nvidia_driver_installer_sha256=""),
        "clusters[1].nvidia_driver_installer_sha256",
    ),
}


def _task(name: str, inventory: str, *, check: bool = False) -> dict[str, Any]:
    args = {
        "kubeconfig": "{{ kubeconfig }}",
        "iso_cache_dir": "{{ cache_dir }}",
        "reserved_networks": ["10.8.0.0/16"],
        "other_networks": ["10.40.0.0/20"],
        # No Kubernetes package repository here (the lookup is unit-tested with a fake index).
        "check_package_repositories": False,
        "clusters": f"{{{{ inventories[{inventory!r}].clusters }}}}",
        "pools": f"{{{{ inventories[{inventory!r}].pools }}}}",
    }
    task = {"name": name, "metalplane.inference.metal_preflight": args, "ignore_errors": True}
    if check:
        task["check_mode"] = True
    return task


def _writes(records: list[Any]) -> list[str]:
    return [f"{r.method} {r.path}" for r in records if r.method in WRITE_METHODS]


def test_good_inventory_passes_and_each_bad_one_is_rejected_with_nothing_written(
    labs: tuple[KubeEmulator, RedfishLab, str], playbook: Callable[..., PlaybookRun], ansible_tmp: Path
) -> None:
    kube, lab, iso_url = labs
    good = _good(lab, iso_url)
    inventories = {"good": good}
    for name, (change, _field) in BAD.items():
        inventories[name] = copy.deepcopy(good)
        change(inventories[name], iso_url)
    cache = ansible_tmp / "isos"
    kube_seen, bmc_seen = len(kube.requests), {n: len(lab.bmc(n).requests) for n in BMCS}
    leases_before = kube.list("coordination.k8s.io/v1", "Lease", namespace=NS)

    run = playbook(
        [
            _task("good, check mode", "good", check=True),
            _task("good", "good"),
            *(_task(name, name) for name in BAD),
        ],
        extra_vars={"kubeconfig": str(kube.kubeconfig_path), "cache_dir": str(cache), "inventories": inventories},
        env={"TMPDIR": str(ansible_tmp)},
    )
    output = run.stdout + run.stderr
    assert PASSWORD not in output
    assert ROOT_HASH not in output

    dry = run.task("good, check mode")
    assert dry.get("failed") is not True, dry
    assert [(s["name"], s["claim"], s["host"]["name"]) for s in dry["clusters"]] == [
        ("lab-r730", "new", "r730-1"),
        ("lab-two", "new", "r730-2"),
    ]
    assert [(s["name"], s["status"]) for s in dry["clusters"][1]["skipped_hosts"]] == [
        ("r730-3", "claimed"),
        ("bare", "mismatched"),
        ("r730-1", "planned"),
    ]
    assert dry["clusters"][0]["iso"]["status"] == "reachable"
    assert dry["clusters"][0]["host"]["root_disk"] == {"wwn": "5000c500a1b2c3d2"}

    real = run.task("good")
    assert real.get("failed") is not True, real
    assert (real["changed"], real["clusters"][0]["iso"]["status"]) == (False, "downloaded")
    assert real["clusters"][1]["iso"]["status"] == "downloaded"  # one download serves every cluster naming it
    assert sorted(p.name for p in cache.iterdir()) == [f"{ISO_SHA}.iso"]  # what boot_iso will find
    assert (cache / f"{ISO_SHA}.iso").read_bytes() == ISO_BODY

    for name, (_change, field) in BAD.items():
        result = run.task(name)
        assert result.get("failed") is True, (name, result)
        fields = [p["field"] for p in result["error"]["problems"]]
        assert fields == [field], (name, result["error"]["problems"])
        assert result["msg"].startswith("preflight found 1 problem(s)"), name

    # Nothing written: the control plane and every BMC saw only reads; the Leases are as they were.
    assert _writes(kube.requests[kube_seen:]) == []
    assert any("/leases" in r.path for r in kube.requests[kube_seen:])
    assert kube.list("coordination.k8s.io/v1", "Lease", namespace=NS) == leases_before
    for name in BMCS:
        assert _writes(lab.bmc(name).requests[bmc_seen[name] :]) == [], name
    assert len(lab.bmc("r730-1").requests) > bmc_seen["r730-1"]  # the BMCs were read
    assert lab.bmc("r730-3").requests[bmc_seen["r730-3"] :] == []  # a claimed host's BMC is never asked
    assert sorted(p.name for p in cache.iterdir()) == [f"{ISO_SHA}.iso"]  # the mismatch left nothing behind
    assert json.dumps(run.report).count(PASSWORD) == 0
