"""Bad input, inventory variables of the bare-metal path (issue 20, part 3), in two site.yml runs.

Inventories of bare-metal clusters (group ``metal_clusters``) and host pools (groups ``pool_<name>``), each cluster
wrong in exactly one way a new user could get it wrong: a node IP without its prefix or outside its gateway's subnet,
DNS names where IPs belong, an unknown pool, a MAC, BMC URL or root disk a pool host cannot have, GPU counts that are
words or that no host has, a provisioner, OS family, installer URL or checksum that does not exist, a plain password
where a crypt hash belongs, a key file's path where the key belongs, driver and Kubernetes versions that are not
versions, CIDRs that overlap each other, another cluster or a reserved network, a node IP twice, cluster names that
are not DNS labels, a state that does not exist, ports above 65535. A wrong type (a word for a count, a device name
for the root disk's mapping) is a problem of the preflight too, listed with the others: Ansible's argument conversion
would fail alone, naming neither the cluster nor the host.

Why through ``playbooks/site.yml`` and not the module: what a user writes are inventory variables, and between them
and ``metal_preflight`` sit ``playbooks/vars/site.yml`` (which variable fills which field) and the ``metal_pools``
filter (the pool hosts' variables); a variable the mapping forgets is never checked, however good the module's rules
are (``test_metal_preflight_lab.py`` holds the module-level cases). The preflight checks the whole inventory before
anything is claimed, so the first run must refuse every case at once, each problem naming its field
(``clusters[<i>].<key>``, ``pools.<pool>.hosts[<i>].<key>``) and the bad value (never a secret). The second run
holds the cases only the platforms refuse (a wrong BMC password, a BMC certificate without its CA, a closed BMC
port, a boot MAC that is not the server's, GPUs no host has, an ISO whose checksum does not match or that is not
there): the preflight asks the BMCs and the ISO once the inventory's shape is sound. Across both runs nothing may be
written: no request but GET on the Modelplane control plane (no claim Lease, and no run-lock Lease either: the lock
is taken after the preflight) and on every BMC, no power change, no ISO built.
The VKE path's inventory corpus is test_bad_inventory_corpus.py, the module options' bad_input_corpus.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import yaml
from integration.metal.metal_site import INVENTORY, MetalLab, metal_lab

from lab.redfish.personality import DEFAULT_BMCS, LAB_PASSWORD, LAB_USERNAME
from support.figures import record
from support.playbook import PlaybookRun

PREFLIGHT = "Check every bare-metal cluster and its pool (rules, claims, BMC inventories, installer ISOs; no write)"
WRITES = ("POST", "PUT", "PATCH", "DELETE")
# The lab's BMCs (r730-1, r740-1, gen-1 in pool_lab) and three more, each the one host of a pool of the second run.
EXTRA_BMCS = {"r730-2": "idrac8", "r730-3": "idrac8", "r740-2": "idrac9"}
RESERVED = ["127.0.0.0/8", "10.40.0.0/16"]
# Secrets the cases write: no problem may show them.
SECRETS = ("lab-root", "calvin1")
LAB_GATEWAY = "127.77.0.1"
# The lab's installer ISO as a file on the controller (verified in place, never copied into the ISO cache).
LOCAL_ISO = {
    "baremetal_host_installer_iso_url": (
        "{{ lab_state_dir }}/artifacts/{{ lab.emulators.artifacts.installer_isos.debian12.url | basename }}"
    )
}


class Case(NamedTuple):
    """One cluster (its inventory host name and its variables over ``good()``), the field its problem names and
    the words that problem's message must contain (the bad value, or what is wrong where the value is a secret or
    not there).

    ``field`` names a cluster by ``{host}``, its ``clusters[<i>]`` (the position in group ``metal_clusters``)."""

    host: str
    variables: dict[str, Any]
    field: str
    words: str


def case(host: str, field: str, words: str, **variables: Any) -> Case:
    return Case(host, variables, field, words)


def good(index: int) -> dict[str, Any]:
    """A sound cluster of its own: a node IP and networks (10.100.0.0/16 up, 10.200.0.0/20 up) no other cluster
    of the corpus uses, and no LoadBalancer range (the group's one range would be every cluster's)."""
    return {
        "baremetal_host_pool": "lab",
        "baremetal_host_requirements": {"gpu_model": "V100", "gpu_count": 2},
        "baremetal_host_node_ip": f"127.77.0.{40 + index}/24",
        "baremetal_host_gateway": LAB_GATEWAY,
        "baremetal_host_dns": [LAB_GATEWAY],
        "cluster_networks": [f"10.{100 + index}.0.0/16", f"10.{200 + index}.0.0/20"],
        "kubeadm_node_lb_pool": [],
    }


def pool_host(url: str, index: int, changes: dict[str, Any]) -> dict[str, Any]:
    """A pool host's variables (as group_vars/pool_lab.yml sets them) over ``changes`` (None: not set). The URL is
    the lab's port with a BMC name it does not serve: the first run never asks a BMC."""
    variables = {
        "bmc_url": url,
        "bmc_username": "root",
        "bmc_password": "calvin",
        "bmc_personality": "idrac8",
        "boot_mac": f"02:00:5e:00:53:{index:02x}",
        "root_disk": {"wwn": f"0x5000c500a1b2c3{index:02x}"},
        "host_facts": {"gpu_model": "Tesla V100-PCIE-16GB", "gpu_count": 2},
        **changes,
    }
    return {key: value for key, value in variables.items() if value is not None}


def lab_host(lab: MetalLab, bmc: str, **changes: Any) -> dict[str, Any]:
    """The variables of one of the lab's BMCs as a pool host (as group_vars/pool_lab.yml sets them), over
    ``changes`` (None: not set)."""
    host = lab.fleet.describe()["hosts"][bmc]
    variables = {
        "bmc_url": lab.redfish.url(bmc),
        "bmc_username": LAB_USERNAME,
        "bmc_password": LAB_PASSWORD,
        "bmc_personality": EXTRA_BMCS[bmc],
        "bmc_ca_cert": lab.redfish.ca_path,
        "boot_mac": host["boot_mac"],
        "root_disk": {"wwn": host["root_disk"]["wwn"]},
        "host_facts": {"gpu_model": "Tesla V100-PCIE-16GB", "gpu_count": 2},
        **changes,
    }
    return {key: value for key, value in variables.items() if value is not None}


# What the inventory's rules refuse without any request: the first run.
SHAPE: list[Case] = [
    # The node's network.
    case("node-ip-no-prefix", "{node-ip-no-prefix}.node_ip", "127.77.0.31", baremetal_host_node_ip="127.77.0.31"),
    case("node-ip-name", "{node-ip-name}.node_ip", "gpu-1.lab/24", baremetal_host_node_ip="gpu-1.lab/24"),
    case("gateway-off-subnet", "{gateway-off-subnet}.gateway", "127.77.1.1", baremetal_host_gateway="127.77.1.1"),
    case("gateway-name", "{gateway-name}.gateway", "router.lab", baremetal_host_gateway="router.lab"),
    case("dns-name", "{dns-name}.dns", "dns.google", baremetal_host_dns=["dns.google"]),
    case("ip-a", "{ip-b}.node_ip", "127.77.0.30", baremetal_host_node_ip="127.77.0.30/24"),
    case("ip-b", "{ip-b}.node_ip", "127.77.0.30", baremetal_host_node_ip="127.77.0.30/24"),
    case("ssh-port", "{ssh-port}.ssh_port", "70000", baremetal_host_ssh_port=70000),
    case("hostname", "{hostname}.hostname", "gpu_node_01", baremetal_host_hostname="gpu_node_01"),
    # The pool and what the host must have.
    case("pool-unknown", "{pool-unknown}.pool", "lab2", baremetal_host_pool="lab2"),
    case("provisioner", "{provisioner}.provisioner", "ipmi", baremetal_host_provisioner="ipmi"),
    case(
        "gpu-word",
        "{gpu-word}.requirements.gpu_count",
        "'two'",
        baremetal_host_requirements={"gpu_model": "V100", "gpu_count": "two"},
    ),
    case("gpu-negative", "{gpu-negative}.requirements.gpu_count", "-1", baremetal_host_requirements={"gpu_count": -1}),
    case("requirements-word", "{requirements-word}.requirements", "'V100'", baremetal_host_requirements="V100"),
    case(
        "requirements-key",
        "{requirements-key}.requirements",
        "gpus",
        baremetal_host_requirements={"gpu_model": "V100", "gpus": 2},
    ),
    # The installer.
    case("os-family", "{os-family}.os_family", "centos", baremetal_host_os_family="centos"),
    case("os-version", "{os-version}.os_version", "bookworm", baremetal_host_os_version="bookworm"),
    case(
        "iso-ftp",
        "{iso-ftp}.installer_iso_url",
        "ftp://mirror.lab/debian-12.iso",
        baremetal_host_installer_iso_url="ftp://mirror.lab/debian-12.iso",
    ),
    # The sha1 of SHA1SUMS where the sha256 belongs.
    case("iso-sha1", "{iso-sha1}.installer_iso_sha256", "ab" * 20, baremetal_host_installer_iso_sha256="ab" * 20),
    # A secret: the message says what is wrong, never the value.
    case(
        "root-plain",
        "{root-plain}.root_password_hash",
        "plain passwords are refused",
        baremetal_host_root_password_hash="lab-root",
    ),
    case(
        "ssh-key-path",
        "{ssh-key-path}.ssh_authorized_key",
        "'~/.ssh/id_ed25519.pub' is a file name",
        baremetal_host_ssh_authorized_key="~/.ssh/id_ed25519.pub",
    ),
    case(
        "ssh-private-missing",
        "{ssh-private-missing}.ssh_private_key_file",
        "/nonexistent/id_ed25519",
        baremetal_host_ssh_private_key_file="/nonexistent/id_ed25519",
    ),
    # The node software.
    case(
        "module-type",
        "{module-type}.nvidia_driver_kernel_module_type",
        "nvidia-open",
        nvidia_driver_kernel_module_type="nvidia-open",
    ),
    case(
        "open-on-v100",
        "{open-on-v100}.nvidia_driver_kernel_module_type",
        "kernel_module_type=proprietary",
        nvidia_driver_kernel_module_type="open",
    ),
    case("driver-version", "{driver-version}.nvidia_driver_version", "latest", nvidia_driver_version="latest"),
    case(
        "driver-sha",
        "{driver-sha}.nvidia_driver_installer_sha256",
        "sha256:TODO",
        nvidia_driver_installer_sha256="sha256:TODO",
    ),
    case(
        "kube-no-v", "{kube-no-v}.kubeadm_node_kubernetes_version", "'1.34.2'", kubeadm_node_kubernetes_version="1.34.2"
    ),
    case(
        "kube-old", "{kube-old}.kubeadm_node_kubernetes_version", "v1.29.4", kubeadm_node_kubernetes_version="v1.29.4"
    ),
    case("api-port", "{api-port}.kubeadm_node_api_port", "70000", kubeadm_node_api_port=70000),
    case("labels-list", "{labels-list}.kubeadm_node_labels", "team=ml", kubeadm_node_labels=["team=ml"]),
    case(
        "lb-off-subnet",
        "{lb-off-subnet}.kubeadm_node_lb_pool[0]",
        "192.168.1.200-192.168.1.210",
        kubeadm_node_lb_pool=["192.168.1.200-192.168.1.210"],
    ),
    # The networks.
    case(
        "service-in-pods",
        "{service-in-pods}.kubeadm_node_service_cidr",
        "172.20.128.0/17",
        cluster_networks=["172.20.0.0/16", "172.21.0.0/20"],
        kubeadm_node_service_cidr="172.20.128.0/17",
    ),
    case("host-bits", "{host-bits}.networks[0]", "172.22.0.1/16", cluster_networks=["172.22.0.1/16", "172.23.0.0/20"]),
    case("reserved", "{reserved}.networks[1]", "10.40.0.0/20", cluster_networks=["172.24.0.0/16", "10.40.0.0/20"]),
    case("net-a", "{net-b}.networks[0]", "10.60.8.0/21", cluster_networks=["10.60.0.0/20", "172.25.0.0/20"]),
    case("net-b", "{net-b}.networks[0]", "10.60.8.0/21", cluster_networks=["10.60.8.0/21", "172.26.0.0/20"]),
    # The cluster's name (its inventory host name) and state.
    case("a" * 300, "{" + "a" * 300 + "}.name", "(300 characters)"),
    case("clüster-gpu", "{clüster-gpu}.name", "clüster-gpu"),
    case("Lab-GPU", "{Lab-GPU}.name", "Lab-GPU"),
    case("lab_gpu_1", "{lab_gpu_1}.name", "lab_gpu_1"),
    case("state", "{state}.state", "destroyed", cluster_state="destroyed"),
    case(
        "protected",
        "{protected}.protected",
        "set protected: false",
        cluster_state="absent",
        baremetal_host_protected=True,
    ),
    # Pool hosts, one pool each (SHAPE_POOLS): the variables of group pool_<name>.
    case("pool-mac", "pools.bad_mac.hosts[0].boot_mac", "00:5c:52:31:3a", baremetal_host_pool="bad_mac"),
    case("pool-bmc-ftp", "pools.ftp_bmc.hosts[0].bmc_url", "ftp://bmc.lab", baremetal_host_pool="ftp_bmc"),
    case("pool-bmc-no-host", "pools.hostless.hosts[0].bmc_url", "https:///redfish/v1", baremetal_host_pool="hostless"),
    case("pool-disk-device", "pools.dev_disk.hosts[0].root_disk.wwn", "/dev/sda", baremetal_host_pool="dev_disk"),
    case("pool-disk-string", "pools.disk_word.hosts[0].root_disk", "/dev/nvme0n1", baremetal_host_pool="disk_word"),
    case("pool-no-disk", "pools.no_disk.hosts[0].root_disk", "missing", baremetal_host_pool="no_disk"),
    case("pool-no-user", "pools.no_user.hosts[0].username", "required", baremetal_host_pool="no_user"),
]
# group pool_<name> -> (its one host, the changes to pool_host()) of the first run.
SHAPE_POOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "bad_mac": ("bmc-mac", {"boot_mac": "00:5c:52:31:3a"}),
    "ftp_bmc": ("bmc-ftp", {"bmc_url": "ftp://bmc.lab/redfish/v1"}),
    "hostless": ("bmc-hostless", {"bmc_url": "https:///redfish/v1"}),
    "dev_disk": ("bmc-dev-disk", {"root_disk": {"wwn": "/dev/sda"}}),
    "disk_word": ("bmc-disk-word", {"root_disk": "/dev/nvme0n1"}),
    "no_disk": ("bmc-no-disk", {"root_disk": None}),
    "no_user": ("bmc-no-user", {"bmc_username": None}),
}
# What only the platforms refuse, asked once the inventory's shape is sound: the BMCs (GETs, in the order host_claim
# would ask them) and the installer ISO (verified). The second run; its pools are platform_pools().
PLATFORM: list[Case] = [
    case(
        "gpu-count",
        "{gpu-count}.pool",
        "'gpu_count': 8",
        baremetal_host_requirements={"gpu_model": "V100", "gpu_count": 8},
    ),
    case(
        "gpu-model",
        "{gpu-model}.pool",
        "'gpu_model': 'A100'",
        baremetal_host_requirements={"gpu_model": "A100", "gpu_count": 2},
    ),
    # A secret: the BMC's refusal is named, never the password.
    case("bmc-password", "{bmc-password}.pool", "Check username/password", baremetal_host_pool="wrong_password"),
    case("bmc-no-ca", "{bmc-no-ca}.pool", "CERTIFICATE_VERIFY_FAILED", baremetal_host_pool="no_ca"),
    case("bmc-port", "{bmc-port}.pool", "127.0.0.1:9", baremetal_host_pool="closed_port"),
    case("boot-mac", "{boot-mac}.pool", "boot_mac: 02:00:5e:00:53:99", baremetal_host_pool="wrong_mac"),
    case("iso-sha", "{iso-sha}.installer_iso_sha256", "0" * 64, baremetal_host_installer_iso_sha256="0" * 64),
    case(
        "iso-missing",
        "{iso-missing}.installer_iso_url",
        "debian-13.iso",
        baremetal_host_installer_iso_url="{{ lab.emulators.artifacts.base_url }}/debian-13.iso",
    ),
]


def platform_pools(lab: MetalLab) -> dict[str, tuple[str, dict[str, Any]]]:
    """The second run's pools: a lab BMC each (a BMC in two pools is a problem of the first stage), one thing
    wrong."""
    return {
        "wrong_password": ("r730-2", lab_host(lab, "r730-2", bmc_password="calvin1")),
        "no_ca": ("r740-2", lab_host(lab, "r740-2", bmc_ca_cert=None)),
        "closed_port": ("bmc-closed", pool_host("https://127.0.0.1:9/redfish/v1", 1, {})),
        "wrong_mac": ("r730-3", lab_host(lab, "r730-3", boot_mac="02:00:5e:00:53:99")),
    }


def inventory(
    directory: Path, cases: list[Case], pools: dict[str, tuple[str, dict[str, Any]]], **overrides: Any
) -> Path:
    """The lab inventory's group variables, the cases' clusters (over ``good()`` and ``overrides``) as group
    metal_clusters in the cases' order, the lab's pool and ``pools``."""
    assert len(cases) <= 55, "good() has networks for 56 clusters"
    directory.mkdir()
    (directory / "group_vars").mkdir()
    for name in ("all.yml", "metal_clusters.yml", "pool_lab.yml"):
        (directory / "group_vars" / name).write_text((INVENTORY / "group_vars" / name).read_text())
    clusters = {c.host: {**good(index), **overrides, **c.variables} for index, c in enumerate(cases)}
    children: dict[str, Any] = {
        "metal_clusters": {"hosts": clusters},
        "pool_lab": {"hosts": dict.fromkeys(DEFAULT_BMCS)},
        **{f"pool_{pool}": {"hosts": {host: variables}} for pool, (host, variables) in pools.items()},
    }
    hosts = {"all": {"hosts": {"localhost": {"ansible_connection": "local"}}, "children": children}}
    (directory / "hosts.yml").write_text(yaml.safe_dump(hosts, sort_keys=False, allow_unicode=True))
    return directory


def refused(run: PlaybookRun, cases: list[Case]) -> tuple[list[str], list[str]]:
    """The preflight's problems, and the cases none of them names (its field, with the words in its message)."""
    assert run.rc != 0, run.stdout[-3000:]
    failed = [
        result
        for play in run.report.get("plays", [])
        for task in play["tasks"]
        if task["task"]["name"] == PREFLIGHT
        for result in task["hosts"].values()
        if result.get("failed")
    ]
    assert len(failed) == 1, (run.stdout[-3000:], run.stderr[-3000:])
    found = [(p["field"], p["msg"]) for p in failed[0].get("error", {}).get("problems", [])]
    assert found, failed[0].get("msg")
    # The clusters are the preflight's list in inventory order (ansible_play_hosts_all).
    where = {c.host: f"clusters[{index}]" for index, c in enumerate(cases)}
    missed = [c.host for c in cases if not any(f == c.field.format_map(where) and c.words in msg for f, msg in found)]
    return [f"{f}: {msg}" for f, msg in found], missed


def test_every_bad_metal_inventory_variable_is_refused_and_nothing_is_written(ansible_tmp: Path) -> None:
    with metal_lab(ansible_tmp, bmcs={**DEFAULT_BMCS, **EXTRA_BMCS}) as lab:
        power = {name: state.power_state for name, state in lab.redfish.states.items()}
        unserved = f"https://{lab.redfish.host}:{lab.redfish.port}/bmc"
        shape_pools = {
            pool: (host, pool_host(f"{unserved}/{host}", 16 + index, changes))
            for index, (pool, (host, changes)) in enumerate(SHAPE_POOLS.items())
        }
        shape = lab.site(inventory=inventory(ansible_tmp / "shape", SHAPE, shape_pools), reserved_networks=RESERVED)
        asked_by_shape = sum(len(state.requests) for state in lab.redfish.states.values())
        # The ISO is the lab's, verified in place (a file on the controller): the run leaves no copy in the cache.
        platform = lab.site(
            inventory=inventory(ansible_tmp / "platform", PLATFORM, platform_pools(lab), **LOCAL_ISO),
            reserved_networks=RESERVED,
        )
        bmc_requests = {name: list(state.requests) for name, state in lab.redfish.states.items()}
        power_after = {name: state.power_state for name, state in lab.redfish.states.items()}
        mp_requests = list(lab.modelplane.api.requests)
        isos = lab.isos()
    (shape_problems, shape_missed), (platform_problems, platform_missed) = (
        refused(shape, SHAPE),
        refused(platform, PLATFORM),
    )
    mp_writes = [f"{r.method} {r.path}" for r in mp_requests if r.method not in ("GET", "HEAD")]
    bmc_writes = [f"{name}: {r.method} {r.path}" for name, rs in bmc_requests.items() for r in rs if r.method in WRITES]
    power_changes = [name for name in power if power_after[name] != power[name]]
    record(
        "bad_input_metal_inventory",
        {
            "cases": len(SHAPE) + len(PLATFORM),
            "refused naming the field": len(SHAPE) + len(PLATFORM) - len(shape_missed) - len(platform_missed),
            "control-plane writes": len(mp_writes),
            "BMC writes": len(bmc_writes),
            "BMC power changes": len(power_changes),
            "ISOs built": len(isos),
        },
        "two site.yml runs over inventories of bare-metal clusters and pool hosts each wrong in one way (the rules, "
        "then what only the BMCs and the installer ISO can say); a case counts as refused when a preflight problem "
        "names its field and the value (what is wrong, for a secret); writes counted on the emulators",
    )
    assert shape_missed == [], "\n".join(shape_problems)
    assert platform_missed == [], "\n".join(platform_problems)
    assert [p for p in shape_problems + platform_problems if any(secret in p for secret in SECRETS)] == []
    assert mp_writes == []
    assert bmc_writes == []
    assert power_changes == []
    assert isos == []
    # The rules need no request: the first run asked no BMC. The second asked the BMCs its pools list (GETs).
    assert asked_by_shape == 0
    assert bmc_requests["r730-2"], "the second run never asked the BMC with the wrong password"
