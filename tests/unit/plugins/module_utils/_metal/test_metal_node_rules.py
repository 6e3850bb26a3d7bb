"""metal_preflight's node-software rules: one row per rule, each bad input one problem naming its field and the fix.

Why through ``check_inventory`` (and ``run_metal_preflight`` for the BMC's BIOS): a rule that is written but not
wired into the preflight, or that reports on another field, must fail here. The good inventory below passes; each
row changes one thing. The driver matrix rows are ``_nvidia.compat``'s own rules (the preflight calls ``decide``),
so every refusal of the matrix is reached from the inventory or the BMC, except the documented few that need the
installed kernel (``NEEDS_THE_NODE``) or do not apply to the hybrid installer ISO.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from metal_fakes import FakeBmc, FakeBmcs, FakeModule, MemoryLeaseStore, v100_inventory
from metal_support import AUTHORIZED_KEY, NODE_SOFTWARE, ROOT_HASH

from ansible_collections.metalplane.inference.plugins.module_utils._common.problems import PreflightError
from ansible_collections.metalplane.inference.plugins.module_utils._metal import node_rules
from ansible_collections.metalplane.inference.plugins.module_utils._metal import preflight as pf
from ansible_collections.metalplane.inference.plugins.module_utils._nvidia import compat
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.bios import BiosReading

MACS = {"r1": "00:5c:52:31:3a:01", "r2": "00:5c:52:31:3a:02"}
DELL_WHERE = {
    "secure_boot": "Bios.Attributes.SecureBoot",
    "boot_mode": "Bios.Attributes.BootMode",
    "mmio_above_4gb": "Bios.Attributes.MmioAbove4Gb",
}
RUN = "https://us.download.nvidia.com/tesla/{v}/NVIDIA-Linux-x86_64-{v}.run"
# Matrix rules the preflight cannot reach before the host is installed, and why (docs/playbooks.md says so too).
NEEDS_THE_NODE = {
    "kernel-min": "the kernel is known from uname -r on the installed node (the nvidia_driver role checks it)",
    "os-known-bad": "the known-bad row is an OS release with its kernel, known on the installed node",
    "bios-boot-mode": "the redfish provisioner's ISO is hybrid and boots in the BIOS's mode",
}


def _cluster(**overrides: Any) -> dict[str, Any]:
    return {
        "name": "lab-r730",
        "state": "present",
        "pool": "lab",
        "provisioner": "redfish",
        "requirements": {"gpu_model": "V100", "gpu_count": 2},
        "node_ip": "192.168.120.70/24",
        "gateway": "192.168.120.1",
        "dns": ["192.168.120.1"],
        "networks": ["10.244.0.0/16", "10.96.0.0/12"],
        "os_family": "el",
        "installer_iso_url": "https://mirror.example/dvd.iso",
        "installer_iso_sha256": "ab" * 32,
        "ssh_authorized_key": AUTHORIZED_KEY,
        "root_password_hash": ROOT_HASH,
        **copy.deepcopy(NODE_SOFTWARE),
        **overrides,
    }


def _pools() -> list[dict[str, Any]]:
    hosts = [
        {
            "name": name,
            "bmc_url": f"https://{name}.bmc.example",
            "username": "root",
            "password": "pw",
            "boot_mac": mac,
            "root_disk": {"wwn": "0x5000c500a1b2c3d4"},
        }
        for name, mac in MACS.items()
    ]
    return [{"name": "lab", "hosts": hosts}]


def _problems(*clusters: dict[str, Any]) -> list[pf.Problem]:
    _checked, problems = pf.check_inventory(list(clusters), _pools(), ["10.8.0.0/16"], ["10.40.0.0/20"])
    return problems


def test_the_good_node_software_has_no_problem_and_the_matrix_decided() -> None:
    checked, problems = pf.check_inventory([_cluster()], _pools(), ["10.8.0.0/16"], ["10.40.0.0/20"])
    assert problems == []
    node = checked.clusters[0].node.summary()
    assert (node["driver_version"], node["kernel_module_type"], node["gsp_firmware"]) == (
        "580.105.08",
        "proprietary",
        False,
    )
    assert node["kubernetes_version"] == "v1.34.2"
    assert {row["rule"] for row in node["matrix"]} >= {"branch-last", "module-open-unsupported", "module-auto"}


# (id, change to the good cluster, field, text of the fix, matrix rule or "")
Row = tuple[str, dict[str, Any], str, str, str]
ROWS: list[Row] = [
    # the driver installer
    (
        "driver url without sha256",
        {"nvidia_driver_installer_sha256": ""},
        "nvidia_driver_installer_sha256",
        "sha256:<64 hex digits>",
        "",
    ),
    (
        "malformed sha256",
        {"nvidia_driver_installer_sha256": "sha256:abc"},
        "nvidia_driver_installer_sha256",
        "the 64 hex digits",
        "",
    ),
    (
        "no driver url",
        {"nvidia_driver_installer_url": None, "nvidia_driver_installer_sha256": None},
        "nvidia_driver_installer_url",
        "is required",
        "",
    ),
    (
        "driver url scheme",
        {"nvidia_driver_installer_url": "ftp://x/NVIDIA-Linux-x86_64-580.105.08.run"},
        "nvidia_driver_installer_url",
        "write https://, http://, file:// or a path",
        "",
    ),
    (
        "version neither in url nor given",
        {"nvidia_driver_installer_url": "https://mirror.example/nvidia.run"},
        "nvidia_driver_version",
        "set nvidia_driver_version",
        "",
    ),
    ("version malformed", {"nvidia_driver_version": "latest"}, "nvidia_driver_version", "such as 580.126.20", ""),
    (
        "module type unknown",
        {"nvidia_driver_kernel_module_type": "closed"},
        "nvidia_driver_kernel_module_type",
        "use one of auto, proprietary, open",
        "",
    ),
    ("os version malformed", {"os_version": "stream10"}, "os_version", "write 10 (EL 10)", ""),
    # the compatibility matrix, from the requirements' GPU model
    (
        "unknown gpu model",
        {"requirements": {"gpu_model": "Voodoo5", "gpu_count": 2}},
        "requirements.gpu_model",
        "write a model the driver matrix knows",
        "",
    ),
    (
        "open module on v100",
        {"nvidia_driver_kernel_module_type": "open"},
        "nvidia_driver_kernel_module_type",
        "set kernel_module_type=proprietary (or auto) and use a driver <= 580.x",
        "module-open-unsupported",
    ),
    (
        "v100 on branch 590 (url)",
        {"nvidia_driver_installer_url": RUN.format(v="590.48.01")},
        "nvidia_driver_installer_url",
        "use a driver <= 580.x",
        "branch-last",
    ),
    (
        "v100 on branch 590 (version)",
        {"nvidia_driver_version": "590.48.01"},
        "nvidia_driver_version",
        "use a driver <= 580.x",
        "branch-last",
    ),
    (
        "h100 on branch 470",
        {"requirements": {"gpu_model": "H100"}, "nvidia_driver_version": "470.256.02"},
        "nvidia_driver_version",
        "use a driver >= 520",
        "branch-first",
    ),
    (
        "b200 with proprietary",
        {"requirements": {"gpu_model": "B200"}, "nvidia_driver_kernel_module_type": "proprietary"},
        "nvidia_driver_kernel_module_type",
        "set kernel_module_type=open",
        "module-open-required",
    ),
    (
        "t4 open before 515",
        {
            "requirements": {"gpu_model": "T4"},
            "nvidia_driver_version": "470.256.02",
            "nvidia_driver_kernel_module_type": "open",
        },
        "nvidia_driver_version",
        "use a driver >= 515 or kernel_module_type=proprietary",
        "module-open-branch",
    ),
    # Kubernetes
    (
        "kubernetes version missing",
        {"kubeadm_node_kubernetes_version": ""},
        "kubeadm_node_kubernetes_version",
        "is required",
        "",
    ),
    (
        "kubernetes version malformed",
        {"kubeadm_node_kubernetes_version": "1.34"},
        "kubeadm_node_kubernetes_version",
        "e.g. v1.34.2",
        "",
    ),
    (
        "kubernetes below v1beta4",
        {"kubeadm_node_kubernetes_version": "v1.30.14"},
        "kubeadm_node_kubernetes_version",
        "v1beta4",
        "",
    ),
    (
        "kubernetes below modelplane",
        {"kubeadm_node_kubernetes_version": "v1.33.5"},
        "kubeadm_node_kubernetes_version",
        "use v1.34.2 or later",
        "",
    ),
    ("api port out of range", {"kubeadm_node_api_port": 70000}, "kubeadm_node_api_port", "1 to 65535", ""),
    # networks
    (
        "pod cidr overlaps the node network",
        {"kubeadm_node_pod_cidr": "192.168.0.0/16"},
        "kubeadm_node_pod_cidr",
        "node subnet 192.168.120.0/24",
        "",
    ),
    (
        "pod cidr overlaps a reserved network",
        {"kubeadm_node_pod_cidr": "10.8.0.0/16"},
        "kubeadm_node_pod_cidr",
        "reserved network 10.8.0.0/16",
        "",
    ),
    (
        "pod cidr overlaps another path's cluster",
        {"kubeadm_node_pod_cidr": "10.40.0.0/16"},
        "kubeadm_node_pod_cidr",
        "which another cluster uses",
        "",
    ),
    (
        "service cidr overlaps the pod cidr",
        {"kubeadm_node_service_cidr": "10.244.0.0/20"},
        "kubeadm_node_service_cidr",
        "give pods and services ranges of their own",
        "",
    ),
    (
        "pod cidr host bits",
        {"kubeadm_node_pod_cidr": "10.244.0.1/16"},
        "kubeadm_node_pod_cidr",
        "did you mean 10.244.0.0/16",
        "",
    ),
    (
        "lb range outside the node subnet",
        {"kubeadm_node_lb_pool": ["192.168.121.200-192.168.121.210"]},
        "kubeadm_node_lb_pool[0]",
        "pick free addresses of that subnet",
        "",
    ),
    (
        "lb range holds the node",
        {"kubeadm_node_lb_pool": ["192.168.120.64/28"]},
        "kubeadm_node_lb_pool[0]",
        "the node's own address (node_ip) 192.168.120.70",
        "",
    ),
    (
        "lb range holds the gateway",
        {"kubeadm_node_lb_pool": ["192.168.120.1-192.168.120.9"]},
        "kubeadm_node_lb_pool[0]",
        "the gateway 192.168.120.1",
        "",
    ),
    (
        "lb range backwards",
        {"kubeadm_node_lb_pool": ["192.168.120.210-192.168.120.200"]},
        "kubeadm_node_lb_pool[0]",
        "starts after it ends",
        "",
    ),
    (
        "lb ranges overlap",
        {"kubeadm_node_lb_pool": ["192.168.120.200-192.168.120.210", "192.168.120.205"]},
        "kubeadm_node_lb_pool[1]",
        "list each address once",
        "",
    ),
    # labels
    (
        "label key invalid",
        {"kubeadm_node_labels": {"-rack": "r1"}},
        "kubeadm_node_labels.-rack",
        "alphanumeric at both ends",
        "",
    ),
    (
        "label prefix invalid",
        {"kubeadm_node_labels": {"Example.COM/rack": "r1"}},
        "kubeadm_node_labels.Example.COM/rack",
        "is not a DNS subdomain",
        "",
    ),
    (
        "label value invalid",
        {"kubeadm_node_labels": {"example.com/rack": "rack 12"}},
        "kubeadm_node_labels.example.com/rack",
        "not a valid label value",
        "",
    ),
    (
        "label the role sets",
        {"kubeadm_node_labels": {"modelplane.ai/pool": "x"}},
        "kubeadm_node_labels.modelplane.ai/pool",
        "remove it here",
        "",
    ),
    # SSH
    ("ssh key missing", {"ssh_authorized_key": ""}, "ssh_authorized_key", "is required", ""),
    (
        "ssh private key file missing",
        {"ssh_private_key_file": "/nonexistent/id_ed25519"},
        "ssh_private_key_file",
        "ssh-keygen -t ed25519",
        "",
    ),
    ("ssh private key file not given", {"ssh_private_key_file": None}, "ssh_private_key_file", "is required", ""),
]


@pytest.mark.parametrize(("change", "field", "fix", "rule"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_each_bad_node_setting_is_one_problem_with_its_field_and_fix(
    change: dict[str, Any], field: str, fix: str, rule: str
) -> None:
    problems = _problems(_cluster(**change))
    assert [p.field for p in problems] == [f"clusters[0].{field}"], problems
    assert fix in problems[0].msg, problems[0].msg
    if rule:
        assert f"driver matrix rule {rule}" in problems[0].msg


def test_an_absent_cluster_needs_no_node_software() -> None:
    bare = dict.fromkeys(NODE_SOFTWARE)
    assert _problems(_cluster(state="absent", **bare)) == []


def test_load_balancer_ranges_of_two_clusters_on_one_lan() -> None:
    second = {
        "name": "lab-two",
        "node_ip": "192.168.120.205/24",
        "networks": ["10.245.0.0/16", "10.112.0.0/12"],
        "kubeadm_node_pod_cidr": "10.245.0.0/16",
        "kubeadm_node_service_cidr": "10.112.0.0/12",
        "kubeadm_node_lb_pool": ["192.168.120.208-192.168.120.215"],
    }
    problems = _problems(_cluster(), _cluster(**second))
    assert [p.field for p in problems] == ["clusters[0].kubeadm_node_lb_pool[0]", "clusters[1].kubeadm_node_lb_pool[0]"]
    assert "contains 192.168.120.205, the node address of cluster 'lab-two'" in problems[0].msg
    assert "overlaps clusters[0].kubeadm_node_lb_pool[0] of cluster 'lab-r730'" in problems[1].msg


def test_the_pod_and_service_cidrs_are_other_clusters_networks_too() -> None:
    """Two clusters with the default pod CIDR and no cluster_networks: the second's overlaps the first's."""
    first = _cluster(networks=[])
    second = _cluster(name="lab-two", node_ip="192.168.120.71/24", networks=[], kubeadm_node_lb_pool=[])
    fields = [p.field for p in _problems(first, second)]
    assert fields == ["clusters[1].kubeadm_node_pod_cidr", "clusters[1].kubeadm_node_service_cidr"]


# --------------------------------------------------------------------------------------------- with the BMC
def _bios(secure_boot: bool | None = False, mmio: bool | None = True) -> BiosReading:
    return BiosReading(secure_boot=secure_boot, boot_mode="UEFI", mmio_above_4gb=mmio, where=dict(DELL_WHERE))


def _run(
    bmc_gpus: list[str] | None = None,
    bios: BiosReading | None = None,
    release_fetch: Any = None,
    **change: Any,
) -> dict[str, Any]:
    inventory = v100_inventory(MACS["r1"])
    if bmc_gpus is not None:
        inventory.gpus = bmc_gpus
    bmcs = FakeBmcs({"r1": FakeBmc(inventory, bios_reading=bios), "r2": FakeBmc(v100_inventory(MACS["r2"]))})
    module = FakeModule(
        {
            "kubeconfig": "/nonexistent/kubeconfig",
            "namespace": "modelplane-system",
            "api_timeout": 30,
            "check_bmcs": True,
            "iso_cache_dir": "/nonexistent/cache",
            "clusters": [_cluster(**change)],
            "pools": _pools(),
            "reserved_networks": [],
            "other_networks": [],
            "check_package_repositories": release_fetch is not None,
        },
        check_mode=True,
    )
    store = MemoryLeaseStore()
    result = pf.run_metal_preflight(
        module,
        store_factory=lambda _p: store,
        bmc_opener=bmcs,
        iso_check=lambda _u, _s, _i: {"status": "cached", "verified": True, "path": "/c.iso"},
        release_fetch=release_fetch,
    )
    assert store.writes() == []
    assert all(b.writes == [] for b in bmcs.bmcs.values())
    return {"result": result, "warnings": module.warnings}


BMC_ROWS: list[tuple[str, dict[str, Any], str, str, str]] = [
    (
        "secure boot on",
        {"bios": _bios(secure_boot=True)},
        "pools.lab.hosts[0].bios.Bios.Attributes.SecureBoot",
        "turn Secure Boot off in the BIOS",
        "bios-secure-boot",
    ),
    (
        "mmio above 4 GB off",
        {"bios": _bios(mmio=False)},
        "pools.lab.hosts[0].bios.Bios.Attributes.MmioAbove4Gb",
        "MmioAbove4Gb=Enabled",
        "bios-mmio-above-4gb",
    ),
    (
        "gpus needing both flavours",
        {"bmc_gpus": ["Tesla V100-PCIE-32GB"] * 2 + ["NVIDIA B200"], "bios": _bios()},
        "pools.lab.hosts[0].gpus",
        "put these GPUs in different hosts",
        "gpu-mixed-flavours",
    ),
    (
        "a gpu the matrix does not know",
        {"bmc_gpus": ["Tesla V100-PCIE-32GB"] * 2 + ["Matrox G200"], "bios": _bios()},
        "pools.lab.hosts[0].gpus",
        "does not know",
        "",
    ),
]


@pytest.mark.parametrize(("given", "field", "fix", "rule"), [r[1:] for r in BMC_ROWS], ids=[r[0] for r in BMC_ROWS])
def test_the_host_to_claim_is_checked_with_its_bmcs_gpus_and_bios(
    given: dict[str, Any], field: str, fix: str, rule: str
) -> None:
    with pytest.raises(PreflightError) as caught:
        _run(**given)
    problems = caught.value.problems
    assert [p.field for p in problems] == [field], problems
    assert fix in problems[0].msg
    assert "host 'r1', which cluster 'lab-r730' would claim" in problems[0].msg
    if rule:
        assert f"driver matrix rule {rule}" in problems[0].msg


def test_a_bios_setting_the_bmc_does_not_expose_is_a_warning() -> None:
    outcome = _run(bios=BiosReading(secure_boot=None, boot_mode="UEFI", mmio_above_4gb=True, where=dict(DELL_WHERE)))
    assert [c["node"]["kernel_module_type"] for c in outcome["result"]["clusters"]] == ["proprietary"]
    assert len(outcome["warnings"]) == 1
    assert "does not report whether Secure Boot is on" in outcome["warnings"][0]


def test_a_good_bios_passes_and_the_boot_mode_row_does_not_apply() -> None:
    outcome = _run(bios=_bios())
    assert outcome["warnings"] == []
    rules = {row["rule"] for row in outcome["result"]["clusters"][0]["node"]["matrix"]}
    assert {"bios-secure-boot", "bios-mmio-above-4gb"} <= rules
    assert "bios-boot-mode" not in rules


def test_every_refusal_of_the_matrix_is_reached_or_documented_as_needing_the_node() -> None:
    reached = {r[4] for r in ROWS if r[4]} | {r[4] for r in BMC_ROWS if r[4]}
    refusing = {rule.id for rule in compat.RULES} - {"module-auto", "gsp-firmware", "os-known-good"}
    assert reached | set(NEEDS_THE_NODE) == refusing
    assert set(node_rules.NOT_APPLICABLE_RULES) <= set(NEEDS_THE_NODE)


def _el_repository(url: str) -> bytes | None:
    """pkgs.k8s.io's v1.34 rpm repository with kubeadm 1.34.1 and 1.34.2 (404 for any other minor)."""
    base = "https://pkgs.k8s.io/core:/stable:/v1.34/rpm/"
    primary = (
        '<metadata xmlns="http://linux.duke.edu/metadata/common">'
        + "".join(
            f'<package type="rpm"><name>kubeadm</name><version epoch="0" ver="{v}" rel="1.1"/></package>'
            for v in ("1.34.1", "1.34.2")
        )
        + "</metadata>"
    )
    served = {
        base + "repodata/repomd.xml": b'<repomd xmlns="http://linux.duke.edu/metadata/repo">'
        b'<data type="primary"><location href="repodata/p.xml"/></data></repomd>',
        base + "repodata/p.xml": primary.encode(),
    }
    return served.get(url)


@pytest.mark.parametrize(
    ("version", "fix"),
    [
        ("v1.34.9", "kubeadm versions there: 1.34.1, 1.34.2); use one of them"),
        ("v1.36.0", "there is no package repository for v1.36"),
    ],
)
def test_a_kubernetes_version_its_repository_does_not_offer_is_not_available(version: str, fix: str) -> None:
    with pytest.raises(PreflightError) as caught:
        _run(bios=_bios(), release_fetch=_el_repository, kubeadm_node_kubernetes_version=version)
    problems = caught.value.problems
    assert [p.field for p in problems] == ["clusters[0].kubeadm_node_kubernetes_version"]
    assert fix in problems[0].msg
    assert f"{version} is not available" in problems[0].msg


def test_an_offered_kubernetes_version_passes() -> None:
    assert _run(bios=_bios(), release_fetch=_el_repository)["warnings"] == []
