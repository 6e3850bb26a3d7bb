"""host_claim and host_pool_info through real ansible-playbook: the lab's Kubernetes API as the Modelplane control
plane (Leases with resourceVersion conflicts) and the lab's BMCs (iDRAC8, iDRAC9, generic Redfish).

Why one playbook: the claim's promises are about sequences (claim, re-claim returns the same host, a second
cluster gets another, an impossible requirement fails naming the pool, a foreign release fails naming force,
reinstall bumps the generation, release is idempotent and clears the BMC hint), so they are checked in the
order an operator meets them, against the Leases and the BMCs' AssetTags the runs leave behind.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lab.kube.server import KubeEmulator
from lab.redfish.server import BmcSpec, RedfishLab
from support.playbook import PlaybookRun

FQ = "metalplane.inference."
NS = "modelplane-system"
POOL = "r730"
PASSWORD = "calvin-s3cret"
UNREACHABLE_URL = "https://127.0.0.1:9"  # discard port: connection refused
# name -> (personality, GPUs); host "bare" has no GPU (mismatched), "gone" has no BMC (unreachable).
BMCS = {"h8": ("idrac8", 2), "h9": ("idrac9", 2), "hg": ("generic", 2), "bare": ("generic", 0)}
MAC = {"h8": "00:5c:52:31:3a:01", "h9": "00:5c:52:31:3a:02", "hg": "00:5c:52:31:3a:03", "bare": "00:5c:52:31:3a:04"}
INSTANT = {"power_delay": 0.0, "lc_delay": 0.0, "task_delay": 0.0}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def labs() -> Iterator[tuple[KubeEmulator, RedfishLab]]:
    bmcs = [
        BmcSpec(name=n, personality=p, gpus=g, password=PASSWORD, macs=(MAC[n], "00:5c:52:31:3b:00"), **INSTANT)
        for n, (p, g) in BMCS.items()
    ]
    with KubeEmulator(delay_scale=0.0, name="modelplane") as kube, RedfishLab(bmcs=bmcs, delay_scale=0.0) as lab:
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        yield kube, lab


def _hosts(lab: RedfishLab) -> list[dict[str, Any]]:
    hosts = [
        {
            "name": name,
            "bmc_url": lab.url(name),
            "username": "root",
            "password": PASSWORD,
            "personality": personality,
            "boot_mac": MAC[name].upper().replace(":", "-"),
            "ca_cert": lab.ca_path,
            "facts": {"disks": ["/dev/sda"]},
        }
        for name, (personality, _gpus) in BMCS.items()
    ]
    # Listed second: a dead BMC is passed over (the claim for the second cluster moves on to h9).
    hosts.insert(1, {"name": "gone", "bmc_url": UNREACHABLE_URL, "username": "root", "password": PASSWORD,
                     "boot_mac": "00:5c:52:31:3a:09"})  # fmt: skip
    return hosts


def _claim(cluster: str, name: str, **extra: Any) -> dict[str, Any]:
    args = {
        "kubeconfig": "{{ kubeconfig }}",
        "pool": POOL,
        "hosts": "{{ pool_hosts }}",
        "cluster": cluster,
        "requirements": {"gpu_model": "V100", "gpu_count": 2, "min_memory_gib": 128},
        **extra,
    }
    return {"name": name, FQ + "host_claim": args, "register": name.replace(" ", "_"), "ignore_errors": True}


def _info(name: str) -> dict[str, Any]:
    args = {
        "kubeconfig": "{{ kubeconfig }}",
        "pool": POOL,
        "hosts": "{{ pool_hosts }}",
        "requirements": {"gpu_model": "V100", "gpu_count": 2},
    }
    return {"name": name, FQ + "host_pool_info": args}


def _leases(kube: KubeEmulator) -> dict[str, dict[str, Any]]:
    items = kube.list("coordination.k8s.io/v1", "Lease", namespace=NS)
    return {i["metadata"]["annotations"]["metalplane.inference/host"]: i for i in items}


def _tags(lab: RedfishLab) -> dict[str, str]:
    return {name: lab.bmc(name).bios.get("AssetTag", "") for name in BMCS}


def _statuses(result: dict[str, Any]) -> dict[str, str]:
    return {h["name"]: h["status"] for h in result["hosts"]}


def test_claim_reclaim_release_against_the_lab(
    labs: tuple[KubeEmulator, RedfishLab], playbook: Callable[..., PlaybookRun], ansible_tmp: Path
) -> None:
    kube, lab = labs
    lab.bmc("hg").bios["AssetTag"] = "FIN-00042"  # a person's asset tag: never overwritten
    run = playbook(
        [
            {**_claim("dc1", "claim dc1 dry"), "check_mode": True},
            _claim("dc1", "claim dc1"),
            _claim("dc1", "claim dc1 again"),
            _claim("dc2", "claim dc2"),
            _claim("dc3", "claim dc3"),
            _claim("dc4", "claim dc4 impossible", requirements={"gpu_count": 8}),
            _claim("dc1", "release dc2 as dc1", state="absent", host="h9"),
            _claim("dc1", "reinstall dc1", reinstall=True),
            _claim("dc1", "release dc1", state="absent"),
            _claim("dc1", "release dc1 again", state="absent"),
            _claim("dc1", "force release of dc2", state="absent", host="h9", force=True),
            _claim("dc5", "claim dc5"),
            _info("pool after"),
        ],
        extra_vars={"kubeconfig": str(kube.kubeconfig_path), "pool_hosts": _hosts(lab)},
        env={"TMPDIR": str(ansible_tmp)},
        diff=True,
    )
    assert PASSWORD not in run.stdout + run.stderr

    dry = run.task("claim dc1 dry")
    assert (dry["changed"], dry["host"]["name"], dry["host"]["since"]) == (True, "h8", None)
    assert dry["diff"]["after"]["spec"]["holderIdentity"] == "dc1"

    claim = run.task("claim dc1")
    assert claim.get("failed") is not True, claim
    assert claim["changed"] is True
    assert claim["diff"]["before"] == {}, "the dry run wrote a Lease"
    host = claim["host"]
    assert (host["name"], host["generation"], host["boot_mac"], host["personality"]) == ("h8", 1, MAC["h8"], "idrac8")
    assert host["inventory"]["gpu_count"] == 2
    assert claim["bmc_hint"] == {"status": "written", "value": "mp:dc1"}

    again = run.task("claim dc1 again")
    assert again["changed"] is False
    assert (again["host"]["name"], again["host"]["since"]) == ("h8", host["since"])
    assert again["bmc_hint"]["status"] == "unchanged"

    dc2 = run.task("claim dc2")
    assert dc2["host"]["name"] == "h9"
    assert [(s["name"], s["status"]) for s in dc2["skipped_hosts"]] == [("h8", "claimed"), ("gone", "unreachable")]
    dc3 = run.task("claim dc3")
    assert dc3["host"]["name"] == "hg"
    assert dc3["bmc_hint"]["status"] == "kept"

    impossible = run.task("claim dc4 impossible")
    assert impossible["failed"] is True
    assert impossible["error"]["field"] == "pool"
    assert {s["name"]: s["status"] for s in impossible["error"]["skipped_hosts"]} == {
        "h8": "claimed",
        "gone": "unreachable",
        "h9": "claimed",
        "hg": "claimed",
        "bare": "mismatched",
    }
    bare = next(s for s in impossible["error"]["skipped_hosts"] if s["name"] == "bare")
    assert bare["reason"] == "gpu_count: Redfish lists no GPU among the PCIe devices, the cluster needs 8 GPU(s)"

    foreign = run.task("release dc2 as dc1")
    assert foreign["failed"] is True
    assert foreign["error"]["field"] == "force"

    reinstall = run.task("reinstall dc1")
    assert (reinstall["changed"], reinstall["host"]["name"], reinstall["host"]["generation"]) == (True, "h8", 2)
    assert reinstall["host"]["since"] == host["since"]
    assert reinstall["diff"]["before"]["annotations"]["metalplane.inference/generation"] == "1"
    assert reinstall["diff"]["after"]["annotations"]["metalplane.inference/generation"] == "2"

    released = run.task("release dc1")
    assert (released["changed"], [(r["name"], r["generation"]) for r in released["released"]]) == (True, [("h8", 2)])
    assert released["bmc_hint"]["status"] == "cleared"
    assert run.task("release dc1 again")["changed"] is False
    assert run.task("force release of dc2")["changed"] is True
    assert run.task("claim dc5")["host"]["name"] == "h8"  # a released host is claimable again, first one first

    after = run.task("pool after")
    assert _statuses(after) == {"h8": "claimed", "gone": "unreachable", "h9": "free", "hg": "claimed",
                                "bare": "mismatched"}  # fmt: skip
    assert after["counts"] == {"free": 1, "claimed": 2, "unreachable": 1, "mismatched": 1}
    bare_row = next(h for h in after["hosts"] if h["name"] == "bare")
    assert bare_row["source"] == "redfish"
    assert bare_row["reasons"] == ["gpu_count: Redfish lists no GPU among the PCIe devices, the cluster needs 2 GPU(s) "
                                   "matching 'V100'"]  # fmt: skip
    h8 = next(h for h in after["hosts"] if h["name"] == "h8")
    assert (h8["claim"]["cluster"], h8["claim"]["generation"]) == ("dc5", 1)

    leases = _leases(kube)
    assert {h: lease["spec"]["holderIdentity"] for h, lease in leases.items()} == {"h8": "dc5", "hg": "dc3"}
    assert all("leaseDurationSeconds" not in lease["spec"] for lease in leases.values())
    assert PASSWORD not in json.dumps(leases)
    assert _tags(lab) == {"h8": "mp:dc5", "h9": "", "hg": "FIN-00042", "bare": ""}
    assert lab.bmc("h9").counters["etag_mismatch"] == 0
