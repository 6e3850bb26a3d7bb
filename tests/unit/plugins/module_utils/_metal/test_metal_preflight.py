"""metal_preflight's planners: every bad input names its field, the claim plan matches host_claim's choice, the
ISOs are verified once, and nothing is written (no Lease, no BMC change).

The inventory below is valid; each bad case changes one thing and must produce exactly the problem(s) listed, so
a check that stops firing, or fires on the wrong field, fails here.
"""

from __future__ import annotations

import copy
import hashlib
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from metal_fakes import FakeBmc, FakeBmcs, FakeModule, MemoryLeaseStore, v100_inventory
from metal_support import AUTHORIZED_KEY, NODE_SOFTWARE, ROOT_HASH

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ApiError, InputError
from ansible_collections.metalplane.inference.plugins.module_utils._common.problems import PreflightError
from ansible_collections.metalplane.inference.plugins.module_utils._metal import claims as c
from ansible_collections.metalplane.inference.plugins.module_utils._metal import preflight as pf
from ansible_collections.metalplane.inference.plugins.module_utils._metal.pool import Host

NS = c.DEFAULT_NAMESPACE
SECRET = "bmc-pw-s3cret"
SHA = "ab" * 32
MACS = {"r1": "00:5c:52:31:3a:01", "r2": "00:5c:52:31:3a:02", "r3": "00:5c:52:31:3a:03"}


def _host(name: str, **overrides: Any) -> dict[str, Any]:
    return {
        "name": name,
        "bmc_url": f"https://{name}.bmc.example",
        "username": "root",
        "password": SECRET,
        "personality": "idrac8",
        "boot_mac": MACS.get(name, "00:5c:52:31:3a:ff"),
        "validate_certs": True,
        "ca_cert": None,
        "facts": {"gpu_model": "V100", "gpu_count": 2, "memory_gib": 256},
        "root_disk": {"wwn": "0x5000c500a1b2c3d4", "serial": None},
        **overrides,
    }


def _cluster(name: str = "lab-r730", **overrides: Any) -> dict[str, Any]:
    return {
        "name": name,
        "state": "present",
        "pool": "lab",
        "provisioner": "redfish",
        "host": None,
        "requirements": {"gpu_model": "V100", "gpu_count": 2, "min_memory_gib": 256},
        "node_ip": "192.168.120.70/24",
        "gateway": "192.168.120.1",
        "dns": ["192.168.120.1"],
        "networks": ["10.244.0.0/16", "10.96.0.0/12"],
        "os_family": "el",
        "installer_iso_url": "https://mirror.example/dvd.iso",
        "installer_iso_sha256": SHA,
        "ssh_authorized_key": AUTHORIZED_KEY,
        "root_password_hash": ROOT_HASH,
        "protected": False,
        **NODE_SOFTWARE,
        **overrides,
    }


def _inventory() -> dict[str, Any]:
    return {
        "clusters": [_cluster()],
        "pools": [{"name": "lab", "hosts": [_host("r1"), _host("r2"), _host("r3")]}],
        "reserved_networks": ["10.8.0.0/16"],
        "other_networks": ["10.40.0.0/20"],
    }


def _second(**overrides: Any) -> Callable[[dict[str, Any]], None]:
    """Add a second, valid cluster (other node IP and networks), with ``overrides``."""
    nets = overrides.get("networks", ["10.245.0.0/16", "10.112.0.0/12"])
    base = {
        "name": "lab-two",
        "node_ip": "192.168.120.71/24",
        "networks": nets,
        # Its pods and services in its own networks, no LoadBalancer range (the first cluster's would be shared).
        "kubeadm_node_pod_cidr": nets[0],
        "kubeadm_node_service_cidr": nets[1] if len(nets) > 1 else "10.112.0.0/12",
        "kubeadm_node_lb_pool": [],
    }
    return lambda inv: inv["clusters"].append(_cluster(**{**base, **overrides}))


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """``clusters.0.gateway`` = value (a None value deletes nothing: it sets None, as Ansible would)."""

    def change(inv: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = inv
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        if isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value

    return change


def _problems(inv: dict[str, Any]) -> list[pf.Problem]:
    _checked, problems = pf.check_inventory(
        inv["clusters"], inv["pools"], inv.get("reserved_networks"), inv.get("other_networks")
    )
    return problems


def test_the_good_inventory_has_no_problem() -> None:
    checked, problems = pf.check_inventory(**_inventory())
    assert problems == []
    assert [h.name for h in checked.pools["lab"].hosts] == ["r1", "r2", "r3"]
    assert checked.pools["lab"].root_disks["r1"] == {"wwn": "5000c500a1b2c3d4"}
    assert str(checked.clusters[0].interface) == "192.168.120.70/24"


BAD: list[tuple[str, Callable[[dict[str, Any]], None], list[str]]] = [
    ("unknown pool", _set("clusters.0.pool", "nope"), ["clusters[0].pool"]),
    ("no pool", _set("clusters.0.pool", None), ["clusters[0].pool"]),
    ("empty pool", _set("pools.0.hosts", []), ["clusters[0].pool"]),
    ("bad pool name", _set("pools.0.name", "lab pool"), ["pools[0].name", "clusters[0].pool"]),
    ("mac too short", _set("pools.0.hosts.1.boot_mac", "00:5c:52:31:3a"), ["pools.lab.hosts[1].boot_mac"]),
    ("mac not hex", _set("pools.0.hosts.0.boot_mac", "zz:5c:52:31:3a:01"), ["pools.lab.hosts[0].boot_mac"]),
    ("mac twice", _set("pools.0.hosts.2.boot_mac", MACS["r1"]), ["pools.lab.hosts[2].boot_mac"]),
    ("bmc url scheme", _set("pools.0.hosts.0.bmc_url", "idrac.example"), ["pools.lab.hosts[0].bmc_url"]),
    ("no password", _set("pools.0.hosts.0.password", None), ["pools.lab.hosts[0].password"]),
    ("host name twice", _set("pools.0.hosts.1.name", "r1"), ["pools.lab.hosts[1].name"]),
    (
        "host in two pools",
        lambda inv: inv["pools"].append({"name": "other", "hosts": [_host("r2", boot_mac="00:5c:52:31:3a:aa")]}),
        ["pools.other.hosts[0].name"],
    ),
    (
        "bmc in two pools",
        lambda inv: inv["pools"].append(
            {"name": "other", "hosts": [_host("x9", bmc_url="https://R1.bmc.example/", boot_mac="00:5c:52:31:3a:aa")]}
        ),
        ["pools.other.hosts[0].bmc_url"],
    ),
    (
        "root disk empty",
        _set("pools.0.hosts.0.root_disk", {"wwn": None, "serial": None}),
        ["pools.lab.hosts[0].root_disk"],
    ),
    ("root disk device", _set("pools.0.hosts.0.root_disk", {"wwn": "/dev/sda"}), ["pools.lab.hosts[0].root_disk.wwn"]),
    (
        "root disk both",
        _set("pools.0.hosts.0.root_disk", {"wwn": "0x5000c500a1b2c3d4", "serial": "S1"}),
        ["pools.lab.hosts[0].root_disk"],
    ),
    ("node ip is the network", _set("clusters.0.node_ip", "192.168.120.0/24"), ["clusters[0].node_ip"]),
    ("node ip is broadcast", _set("clusters.0.node_ip", "192.168.120.255/24"), ["clusters[0].node_ip"]),
    ("prefix out of range", _set("clusters.0.node_ip", "192.168.120.70/33"), ["clusters[0].node_ip"]),
    ("node ip no prefix", _set("clusters.0.node_ip", "192.168.120.70"), ["clusters[0].node_ip"]),
    ("node ip missing", _set("clusters.0.node_ip", None), ["clusters[0].node_ip"]),
    ("gateway outside", _set("clusters.0.gateway", "192.168.121.1"), ["clusters[0].gateway"]),
    ("gateway is the node", _set("clusters.0.gateway", "192.168.120.70"), ["clusters[0].gateway"]),
    ("gateway not an ip", _set("clusters.0.gateway", "router"), ["clusters[0].gateway"]),
    ("dns not an ip", _set("clusters.0.dns", ["dns.example"]), ["clusters[0].dns"]),
    ("no dns", _set("clusters.0.dns", []), ["clusters[0].dns"]),
    ("os family", _set("clusters.0.os_family", "windows"), ["clusters[0].os_family"]),
    ("provisioner", _set("clusters.0.provisioner", "pxe"), ["clusters[0].provisioner"]),
    (
        "iso url scheme",
        _set("clusters.0.installer_iso_url", "ftp://mirror.example/dvd.iso"),
        ["clusters[0].installer_iso_url"],
    ),
    ("iso url missing", _set("clusters.0.installer_iso_url", None), ["clusters[0].installer_iso_url"]),
    ("sha256 short", _set("clusters.0.installer_iso_sha256", "abc123"), ["clusters[0].installer_iso_sha256"]),
    ("sha256 md5", _set("clusters.0.installer_iso_sha256", "md5:" + "a" * 32), ["clusters[0].installer_iso_sha256"]),
    ("duplicate node ip", _second(node_ip="192.168.120.70/24"), ["clusters[1].node_ip"]),
    (
        "networks overlap each other",
        _set("clusters.0.networks", ["10.244.0.0/16", "10.244.8.0/24"]),
        ["clusters[0].networks[1]"],
    ),
    ("network overlaps node subnet", _set("clusters.0.networks", ["192.168.0.0/16"]), ["clusters[0].networks[0]"]),
    ("network overlaps reserved", _set("clusters.0.networks", ["10.8.4.0/24"]), ["clusters[0].networks[0]"]),
    ("network overlaps other clusters", _set("clusters.0.networks", ["10.40.0.0/16"]), ["clusters[0].networks[0]"]),
    ("networks of two clusters overlap", _second(networks=["10.244.128.0/17"]), ["clusters[1].networks[0]"]),
    (
        "earlier network covers a later node subnet",
        lambda inv: (
            _set("clusters.0.networks", ["172.16.0.0/12", "10.244.0.0/16", "10.96.0.0/12"])(inv),
            _second(node_ip="172.20.0.5/24", gateway="172.20.0.1", networks=["10.245.0.0/16"])(inv),
        ),
        ["clusters[0].networks[0]"],
    ),
    ("network host bits", _set("clusters.0.networks", ["10.244.0.1/16"]), ["clusters[0].networks[0]"]),
    ("networks not a list", _set("clusters.0.networks", "10.244.0.0/16"), ["clusters[0].networks"]),
    ("bad reserved network", lambda inv: inv.update(reserved_networks=["10.8/33"]), ["reserved_networks[0]"]),
    ("ssh key missing", _set("clusters.0.ssh_authorized_key", None), ["clusters[0].ssh_authorized_key"]),
    (
        "ssh key private",
        _set("clusters.0.ssh_authorized_key", "-----BEGIN OPENSSH PRIVATE KEY-----"),
        ["clusters[0].ssh_authorized_key"],
    ),
    ("plain root password", _set("clusters.0.root_password_hash", "hunter2"), ["clusters[0].root_password_hash"]),
    (
        "md5 root hash",
        _set("clusters.0.root_password_hash", "$1$salt$abcdefghijklmnopqrstuv"),
        ["clusters[0].root_password_hash"],
    ),
    ("duplicate cluster names", _second(name="lab-r730"), ["clusters[1].name"]),
    ("cluster name not a label", _set("clusters.0.name", "Lab_R730"), ["clusters[0].name"]),
    ("state", _set("clusters.0.state", "gone"), ["clusters[0].state"]),
    (
        "protected teardown",
        lambda inv: inv["clusters"][0].update(state="absent", protected=True),
        ["clusters[0].protected"],
    ),
    ("gpu count zero", _set("clusters.0.requirements", {"gpu_count": 0}), ["clusters[0].requirements.gpu_count"]),
    # The module takes requirements as given (a raw option), so these reach the preflight, not Ansible's conversion.
    (
        "gpu count a word beside a model",
        _set("clusters.0.requirements", {"gpu_model": "V100", "gpu_count": "two"}),
        ["clusters[0].requirements.gpu_count"],
    ),
    ("requirements not a mapping", _set("clusters.0.requirements", "V100"), ["clusters[0].requirements"]),
    ("requirements unknown key", _set("clusters.0.requirements", {"gpus": 2}), ["clusters[0].requirements"]),
    ("ssh port above 65535", _set("clusters.0.ssh_port", 70000), ["clusters[0].ssh_port"]),
    ("ssh port a word", _set("clusters.0.ssh_port", "ssh"), ["clusters[0].ssh_port"]),
    ("hostname not a host name", _set("clusters.0.hostname", "gpu_node_01"), ["clusters[0].hostname"]),
    ("root disk a device name", _set("pools.0.hosts.0.root_disk", "/dev/sda"), ["pools.lab.hosts[0].root_disk"]),
    ("facts not a mapping", _set("pools.0.hosts.0.facts", "2x V100"), ["pools.lab.hosts[0].facts"]),
    ("labels a list", _set("clusters.0.kubeadm_node_labels", ["team=ml"]), ["clusters[0].kubeadm_node_labels"]),
    ("pinned host not in pool", _set("clusters.0.host", "r9"), ["clusters[0].host"]),
    (
        "pinned host with a bad entry",
        lambda inv: (_set("clusters.0.host", "r2")(inv), _set("pools.0.hosts.1.boot_mac", "bad")(inv)),
        ["pools.lab.hosts[1].boot_mac"],
    ),
    ("no clusters", lambda inv: inv.update(clusters=[]), ["clusters"]),
]


@pytest.mark.parametrize(("change", "fields"), [(b[1], b[2]) for b in BAD], ids=[b[0] for b in BAD])
def test_each_bad_input_is_one_problem_naming_its_field(
    change: Callable[[dict[str, Any]], None], fields: list[str]
) -> None:
    inventory = _inventory()
    change(inventory)
    problems = _problems(inventory)
    assert [p.field for p in problems] == fields, problems
    text = " ".join(p.msg for p in problems)
    assert SECRET not in text
    assert "hunter2" not in text
    assert "$1$salt$" not in text


# (change, its problem's field, words the message must hold: the value, never a secret), for problems whose value
# a user must see to find the line to fix.
NAMED: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    (
        "gpu count a word",
        _set("clusters.0.requirements", {"gpu_count": "two"}),
        "clusters[0].requirements.gpu_count",
        "'two'",
    ),
    ("requirements not a mapping", _set("clusters.0.requirements", "V100"), "clusters[0].requirements", "'V100'"),
    ("ssh port", _set("clusters.0.ssh_port", 70000), "clusters[0].ssh_port", "70000"),
    ("hostname", _set("clusters.0.hostname", "gpu_node_01"), "clusters[0].hostname", "gpu_node_01"),
    (
        "root disk a device name",
        _set("pools.0.hosts.0.root_disk", "/dev/nvme0n1"),
        "pools.lab.hosts[0].root_disk",
        "'/dev/nvme0n1' is not a mapping",
    ),
    ("facts not a mapping", _set("pools.0.hosts.0.facts", "2x V100"), "pools.lab.hosts[0].facts", "'2x V100'"),
    (
        "labels a list",
        _set("clusters.0.kubeadm_node_labels", ["team=ml"]),
        "clusters[0].kubeadm_node_labels",
        "team=ml",
    ),
    (
        "ssh key a file name",
        _set("clusters.0.ssh_authorized_key", "~/.ssh/id_ed25519.pub"),
        "clusters[0].ssh_authorized_key",
        "'~/.ssh/id_ed25519.pub' is a file name",
    ),
    (
        "ssh key of an unsupported type",
        _set("clusters.0.ssh_authorized_key", "ssh-dss AAAAB3NzaC1kc3MAAACBAP ops@x"),
        "clusters[0].ssh_authorized_key",
        "'ssh-dss' is not a key type",
    ),
    ("cluster name too long", _set("clusters.0.name", "a" * 300), "clusters[0].name", "(300 characters)"),
]


@pytest.mark.parametrize(("change", "field", "words"), [n[1:] for n in NAMED], ids=[n[0] for n in NAMED])
def test_the_problem_names_the_value(change: Callable[[dict[str, Any]], None], field: str, words: str) -> None:
    inventory = _inventory()
    change(inventory)
    problems = _problems(inventory)
    assert [p.field for p in problems] == [field], problems
    assert words in problems[0].msg


def test_a_private_key_in_place_of_the_public_one_is_never_echoed() -> None:
    inventory = _inventory()
    body = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"
    key = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----"
    _set("clusters.0.ssh_authorized_key", key)(inventory)
    (problem,) = _problems(inventory)
    assert problem.field == "clusters[0].ssh_authorized_key"
    assert "private key" in problem.msg
    assert body not in problem.msg


@pytest.mark.parametrize(
    ("path", "value"),
    [
        # As Ansible's int options took them before the module took requirements as given.
        ("clusters.0.requirements", {"gpu_model": "V100", "gpu_count": "2", "min_memory_gib": " 256 "}),
        ("clusters.0.ssh_port", "2222"),
        ("clusters.0.ssh_port", ""),
        ("clusters.0.hostname", "GPU-Node-1.lab.example"),
    ],
)
def test_values_that_are_right_pass(path: str, value: Any) -> None:
    inventory = _inventory()
    _set(path, value)(inventory)
    assert _problems(inventory) == []


def test_every_problem_is_reported_at_once() -> None:
    inventory = _inventory()
    for change in (
        _set("clusters.0.gateway", "10.0.0.1"),
        _set("clusters.0.os_family", "bsd"),
        _set("pools.0.hosts.2.boot_mac", "nope"),
    ):
        change(inventory)
    with pytest.raises(PreflightError) as caught:
        pf.run_metal_preflight(
            FakeModule(_params(inventory)), store_factory=_no_store, bmc_opener=_no_bmc, iso_check=_no_iso
        )
    fields = [p["field"] for p in caught.value.details["problems"]]
    assert fields == ["pools.lab.hosts[2].boot_mac", "clusters[0].gateway", "clusters[0].os_family"]
    assert caught.value.msg.startswith("preflight found 3 problem(s)")


def test_an_absent_cluster_is_checked_for_name_pool_and_claim_only() -> None:
    inventory = _inventory()
    inventory["clusters"][0].update(state="absent", node_ip=None, gateway="x", os_family="bsd", networks=["bad"])
    assert _problems(inventory) == []


METAL3_IMAGE = {"imageURL": "http://images.example/node.qcow2", "imageChecksum": "a" * 64, "imageDiskFormat": "qcow2"}


def test_metal3_needs_no_iso_and_no_root_hash() -> None:
    inventory = _inventory()
    inventory["clusters"][0].update(
        provisioner="metal3",
        installer_iso_url=None,
        installer_iso_sha256=None,
        root_password_hash=None,
        metal3={"image": METAL3_IMAGE},
    )
    for host in inventory["pools"][0]["hosts"]:
        host["personality"] = "idrac8"
    assert _problems(inventory) == []


# --------------------------------------------------------------------------------------------- claims
def _checked(inventory: dict[str, Any] | None = None) -> pf.Checked:
    checked, problems = pf.check_inventory(**(inventory or _inventory()))
    assert problems == []
    return checked


def _lease(host: str, cluster: str, generation: int = 1) -> dict[str, Any]:
    entry = Host(name=host, bmc_url=f"https://{host}.bmc.example", username="u", password="p", boot_mac=MACS[host])
    store = MemoryLeaseStore()
    return store.put(
        c.lease_body(
            NS, "lab", entry, cluster=cluster, claimer="ops@ctl", since="2026-08-22T09:00:00Z", generation=generation
        )
    )


class Probes:
    """A probe answering from a table (default: fits), recording what it was asked."""

    def __init__(self, **answers: tuple[str, Any]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    def __call__(self, host: Host, _requirements: Any) -> tuple[str, Any]:
        self.asked.append(host.name)
        return self.answers.get(host.name, ("ok", {}))


def _plan(
    inventory: dict[str, Any] | None = None, leases: list[dict[str, Any]] | None = None, probe: Any = None
) -> tuple[list[pf.ClusterPlan], list[str]]:
    plans, problems = pf.plan_claims(_checked(inventory), {"lab": leases or []}, probe or Probes(), NS)
    return plans, [p.field for p in problems]


def test_a_new_cluster_gets_the_first_free_host_that_fits() -> None:
    probe = Probes(r2=("unreachable", "Logging in to https://r2 failed: Connection refused"))
    plans, fields = _plan(leases=[_lease("r1", "dc9")], probe=probe)
    assert fields == []
    summary = plans[0].summary(_checked().pools)
    assert (summary["claim"], summary["host"]["name"], summary["generation"]) == ("new", "r3", None)
    assert summary["host"]["root_disk"] == {"wwn": "5000c500a1b2c3d4"}
    assert "password" not in summary["host"]
    assert [(s["name"], s["status"]) for s in summary["skipped_hosts"]] == [("r1", "claimed"), ("r2", "unreachable")]
    assert probe.asked == ["r2", "r3"]  # a claimed host's BMC is never asked


def test_a_held_claim_is_kept_and_no_bmc_is_asked() -> None:
    probe = Probes()
    plans, fields = _plan(leases=[_lease("r2", "lab-r730", generation=3)], probe=probe)
    assert fields == []
    assert (plans[0].claim, plans[0].host.name, plans[0].generation) == ("held", "r2", 3)
    assert plans[0].lease == f"{NS}/metal-claim.lab.r2"
    assert probe.asked == []


def test_clusters_sharing_a_pool_need_as_many_free_hosts() -> None:
    inventory = _inventory()
    _second()(inventory)
    _second(name="lab-three", node_ip="192.168.120.72/24", networks=["10.246.0.0/16", "10.128.0.0/12"])(inventory)
    plans, fields = _plan(inventory, leases=[_lease("r1", "dc9")])
    assert fields == ["clusters[2].pool"]
    assert [p.host.name if p.host else None for p in plans] == ["r2", "r3", None]
    assert [(s["name"], s["status"]) for s in plans[2].skipped] == [
        ("r1", "claimed"),
        ("r2", "planned"),
        ("r3", "planned"),
    ]


def test_no_host_that_fits_fails_on_the_pool_with_every_reason() -> None:
    probe = Probes(r1=("mismatched", {"reasons": ["gpu_count: Redfish lists no GPU"], "inventory": {}}))
    inventory = _inventory()
    inventory["pools"][0]["hosts"][1]["facts"] = {"gpu_model": "T4"}
    _plans, fields = _plan(inventory, leases=[_lease("r3", "dc9")], probe=probe)
    assert fields == ["clusters[0].pool"]
    _plans, problems = pf.plan_claims(_checked(inventory), {"lab": [_lease("r3", "dc9")]}, probe, NS)
    assert "r1: mismatched (gpu_count: Redfish lists no GPU)" in problems[0].msg
    assert "r2: mismatched (gpu_model: the inventory says 'T4'" in problems[0].msg
    assert "r3: claimed (claimed by cluster 'dc9'" in problems[0].msg


@pytest.mark.parametrize(
    ("state", "pin", "leases", "fields", "claim"),
    [
        ("present", "r1", [("r1", "dc9")], ["clusters[0].host"], "none"),  # pinned, another cluster holds it
        ("absent", "r1", [("r1", "dc9")], ["clusters[0].host"], "none"),  # a release would need force
        ("present", "r1", [("r2", "lab-r730")], ["clusters[0].host"], "held"),  # holds another host than the pin
        ("present", "r2", [], [], "new"),
        ("absent", None, [("r2", "lab-r730"), ("r3", "dc9")], [], "release"),
        ("absent", None, [("r3", "dc9")], [], "none"),
        ("absent", "r1", [("r1", "lab-r730")], [], "release"),
    ],
)
def test_pins_and_releases_only_touch_the_clusters_own_claims(
    state: str, pin: str | None, leases: list[tuple[str, str]], fields: list[str], claim: str
) -> None:
    inventory = _inventory()
    inventory["clusters"][0].update(state=state, host=pin)
    plans, found = _plan(inventory, leases=[_lease(h, cl) for h, cl in leases])
    assert (found, plans[0].claim) == (fields, claim)


def test_a_claim_on_a_host_the_pool_no_longer_lists_fails_on_the_pool() -> None:
    stray = _lease("r3", "lab-r730")
    inventory = _inventory()
    del inventory["pools"][0]["hosts"][2]
    _plans, fields = _plan(inventory, leases=[stray])
    assert fields == ["clusters[0].pool"]


def test_the_host_a_redfish_cluster_gets_needs_a_root_disk() -> None:
    inventory = _inventory()
    inventory["pools"][0]["hosts"][0]["root_disk"] = None
    _plans, fields = _plan(inventory)
    assert fields == ["pools.lab.hosts[0].root_disk"]
    inventory["clusters"][0].update(provisioner="metal3", metal3={"image": METAL3_IMAGE})
    for host in inventory["pools"][0]["hosts"]:
        host["personality"] = "idrac8"
    assert _plan(inventory)[1] == []  # Ironic picks the disk by rootDeviceHints, or its own rule without them


def test_the_bmc_probe_asks_each_host_once_and_closes_it() -> None:
    bmcs = FakeBmcs({n: FakeBmc(v100_inventory(m)) for n, m in MACS.items()}, down=("r1",))
    probe = pf.bmc_probe(bmcs)
    checked = _checked()
    hosts = checked.pools["lab"].hosts
    requirements = checked.clusters[0].requirements
    assert probe(hosts[0], requirements)[0] == "unreachable"
    assert probe(hosts[1], requirements)[0] == "ok"
    assert probe(hosts[1], requirements)[0] == "ok"
    assert bmcs.opened == ["r1", "r2"]
    assert bmcs.bmcs["r2"].closed is True


# --------------------------------------------------------------------------------------------- ISOs
def test_each_iso_is_checked_once_and_its_errors_name_the_cluster_field() -> None:
    inventory = _inventory()
    _second()(inventory)
    _second(
        name="lab-three",
        node_ip="192.168.120.72/24",
        networks=["10.246.0.0/16", "10.128.0.0/12"],
        installer_iso_url="https://mirror.example/bad.iso",
    )(inventory)
    asked: list[str] = []

    def check(url: str, sha256: str, _install: bool) -> dict[str, Any]:
        asked.append(url)
        if "bad" in url:
            raise InputError("iso_checksum", f"{url} has sha256 00..., not the expected {sha256}")
        return {"status": "downloaded", "verified": True, "path": "/cache/x.iso"}

    plans = [pf.ClusterPlan(cluster) for cluster in _checked(inventory).clusters]
    problems = pf.check_isos(plans, check)
    assert asked == ["https://mirror.example/dvd.iso", "https://mirror.example/bad.iso"]
    assert [p.field for p in problems] == ["clusters[2].installer_iso_sha256"]
    assert [p.iso["status"] for p in plans] == ["downloaded", "downloaded", "failed"]


class _IsoHandler(BaseHTTPRequestHandler):
    body = b"not really an ISO, but bytes with a sha256" * 100

    def log_message(self, *_args: Any) -> None:
        pass

    def do_HEAD(self) -> None:
        if self.path != "/dvd.iso":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()

    def do_GET(self) -> None:
        self.do_HEAD()
        if self.path == "/dvd.iso":
            self.wfile.write(self.body)


@pytest.fixture(scope="module")
def iso_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _IsoHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


ISO_SHA = hashlib.sha256(_IsoHandler.body).hexdigest()


def _checker(cache: Path, *, download: bool = True) -> pf.IsoCheck:
    return pf.iso_checker(cache, download=download, timeout=5, validate_certs=True, ca_cert=None)


def test_the_iso_is_downloaded_into_boot_isos_cache_then_found_there(iso_server: str, tmp_path: Path) -> None:
    check = _checker(tmp_path)
    first = check(f"{iso_server}/dvd.iso", ISO_SHA, True)
    assert (first["status"], first["verified"]) == ("downloaded", True)
    assert (tmp_path / f"{ISO_SHA}.iso").read_bytes() == _IsoHandler.body
    assert check(f"{iso_server}/dvd.iso", ISO_SHA, True)["status"] == "cached"
    assert check(f"{iso_server}/dvd.iso", ISO_SHA, False)["status"] == "cached"


def test_an_iso_no_cluster_installs_from_is_asked_for_its_headers_not_downloaded(
    iso_server: str, tmp_path: Path
) -> None:
    found = _checker(tmp_path)(f"{iso_server}/dvd.iso", ISO_SHA, False)
    assert (found["status"], found["verified"]) == ("reachable", False)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(InputError) as caught:
        _checker(tmp_path)(f"{iso_server}/missing.iso", ISO_SHA, False)
    assert caught.value.field == "iso_url"


@pytest.mark.parametrize(
    ("case", "field"),
    [
        (("/dvd.iso", "0" * 64, "run"), "iso_checksum"),
        (("/missing.iso", ISO_SHA, "run"), "iso_url"),
        (("/missing.iso", ISO_SHA, "check"), "iso_url"),
        (("unreachable", ISO_SHA, "run"), "iso_url"),
    ],
)
def test_a_bad_iso_fails_and_leaves_nothing_in_the_cache(
    iso_server: str, tmp_path: Path, case: tuple[str, str, str], field: str
) -> None:
    path, sha, mode = case
    url = "http://127.0.0.1:9/dvd.iso" if path == "unreachable" else f"{iso_server}{path}"
    with pytest.raises(InputError) as caught:
        _checker(tmp_path, download=mode == "run")(url, sha, True)
    assert caught.value.field == field
    assert list(tmp_path.iterdir()) == []


def _iso_plan(name: str, claim: str, url: str, *, provisioner: str = "redfish", present: bool = True) -> Any:
    cluster = SimpleNamespace(
        name=name, where=f"clusters[{name}]", present=present, provisioner=provisioner, iso_url=url, iso_sha256=SHA
    )
    return pf.ClusterPlan(cluster=cluster, claim=claim)  # type: ignore[arg-type]


def test_only_an_iso_a_cluster_installs_from_is_fetched_for_installing() -> None:
    plans = [
        _iso_plan("a", "new", "https://m/one.iso"),
        _iso_plan("b", "held", "https://m/one.iso"),  # shares a's ISO: one check, which installs
        _iso_plan("c", "held", "https://m/two.iso"),  # holds its host: found in the cache or reached, not fetched
        _iso_plan("d", "new", "https://m/three.iso", provisioner="metal3"),  # writes a node image: never fetched
        _iso_plan("e", "release", "https://m/four.iso", present=False),
    ]
    asked: list[tuple[str, bool]] = []

    def check(url: str, _sha: str, install: bool) -> dict[str, Any]:
        asked.append((url, install))
        return {"status": "downloaded" if install else "reachable", "verified": install, "path": None}

    assert pf.check_isos(plans, check) == []
    assert asked == [("https://m/one.iso", True), ("https://m/two.iso", False)]
    assert [(plan.iso or {}).get("status") for plan in plans] == ["downloaded", "downloaded", "reachable", None, None]


def test_check_mode_downloads_nothing_but_asks_for_the_headers(iso_server: str, tmp_path: Path) -> None:
    found = _checker(tmp_path, download=False)(f"{iso_server}/dvd.iso", ISO_SHA, True)
    assert (found["status"], found["verified"]) == ("reachable", False)
    assert list(tmp_path.iterdir()) == []


def test_a_local_iso_is_verified_in_place(tmp_path: Path) -> None:
    iso = tmp_path / "dvd.iso"
    iso.write_bytes(_IsoHandler.body)
    cache = tmp_path / "cache"
    assert _checker(cache)(iso.as_uri(), ISO_SHA, False)["status"] == "local"
    with pytest.raises(InputError) as caught:
        _checker(cache)(str(iso), SHA, True)
    assert caught.value.field == "iso_checksum"
    assert not cache.exists()


# --------------------------------------------------------------------------------------------- the run
def _params(inventory: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    return {
        "kubeconfig": "/nonexistent/kubeconfig",
        "namespace": NS,
        "api_timeout": 30,
        "check_bmcs": True,
        "iso_cache_dir": "/nonexistent/cache",
        **inventory,
        **overrides,
    }


def _no_store(_params: Any) -> Any:
    raise AssertionError("the control plane was asked although the inventory is bad")


def _no_bmc(_host: Host) -> Any:
    raise AssertionError("a BMC was asked although the inventory is bad")


def _no_iso(_url: str, _sha: str, _install: bool) -> dict[str, Any]:
    raise AssertionError("an ISO was fetched although the inventory is bad")


def _fits(_url: str, _sha: str, _install: bool) -> dict[str, Any]:
    return {"status": "cached", "verified": True, "path": "/cache/x.iso"}


def test_a_good_run_reads_and_plans_but_writes_nothing() -> None:
    store = MemoryLeaseStore()
    store.objects[(NS, "metal-claim.lab.r1")] = _lease("r1", "dc9")
    bmcs = FakeBmcs({n: FakeBmc(v100_inventory(m)) for n, m in MACS.items()})
    inventory = _inventory()
    _second()(inventory)
    result = pf.run_metal_preflight(
        FakeModule(_params(inventory), check_mode=True),
        store_factory=lambda _p: store,
        bmc_opener=bmcs,
        iso_check=_fits,
    )
    assert result["changed"] is False
    assert [(s["name"], s["claim"], s["host"]["name"]) for s in result["clusters"]] == [
        ("lab-r730", "new", "r2"),
        ("lab-two", "new", "r3"),
    ]
    assert store.calls == ["list"]
    assert store.writes() == []
    assert all(b.writes == [] for b in bmcs.bmcs.values())
    assert bmcs.opened == ["r2", "r3"]
    assert SECRET not in repr(result)
    assert ROOT_HASH not in repr(result)


def test_an_unreadable_control_plane_is_a_problem_on_kubeconfig_and_isos_are_still_checked() -> None:
    def broken(_params: Any) -> Any:
        raise ApiError("Listing Lease: connection refused")

    asked: list[str] = []

    def check(url: str, _sha: str, _install: bool) -> dict[str, Any]:
        asked.append(url)
        raise InputError("iso_url", f"cannot download {url}: Connection refused")

    with pytest.raises(PreflightError) as caught:
        pf.run_metal_preflight(
            FakeModule(_params(_inventory())), store_factory=broken, bmc_opener=_no_bmc, iso_check=check
        )
    assert [p["field"] for p in caught.value.details["problems"]] == ["kubeconfig", "clusters[0].installer_iso_url"]
    assert asked == ["https://mirror.example/dvd.iso"]


@pytest.mark.parametrize(
    ("overrides", "field"), [({"kubeconfig": None}, "kubeconfig"), ({"api_timeout": 0}, "api_timeout")]
)
def test_options_are_checked_with_the_inventory(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(PreflightError) as caught:
        pf.run_metal_preflight(
            FakeModule(_params(_inventory(), **overrides)),
            store_factory=_no_store,
            bmc_opener=_no_bmc,
            iso_check=_no_iso,
        )
    assert [p["field"] for p in caught.value.details["problems"]] == [field]


def test_check_bmcs_false_plans_from_leases_and_facts_alone() -> None:
    result = pf.run_metal_preflight(
        FakeModule(_params(copy.deepcopy(_inventory()), check_bmcs=False)),
        store_factory=lambda _p: MemoryLeaseStore(),
        bmc_opener=_no_bmc,
        iso_check=_fits,
    )
    assert result["clusters"][0]["host"]["name"] == "r1"
