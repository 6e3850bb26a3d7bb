"""The bad-input corpus: values a new user, a typo or a copied example sends, and the field each must be refused on.

Why a corpus of its own: each module has tests for its own refusals, but the promise to the user is about the
whole collection: whatever is wrong is refused before any request that changes something, naming the field (and,
where the value is short enough to show, the value). One place lists the cases across every platform, so a module
that starts acting on a bad value, or refuses it on the wrong field, fails the suite.

A case is ``(id, module, options, field, shows)``: the options may name the lab's endpoints (``Lab``); ``field``
is the option path the refusal must name (the ``error.field`` of this collection's errors, or the option Ansible's
own argument validation names); ``shows`` is text the message must contain (the value, or the rule).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

LONG = "x" * 300  # a 300-character name: past every name limit of Kubernetes, Vultr's UI and DNS


@dataclass(frozen=True)
class Lab:
    """What a case may point at: the emulators' endpoints and credentials."""

    vultr_endpoint: str
    vultr_key: str
    kubeconfig: str
    bmc_url: str
    bmc_username: str
    bmc_password: str
    bmc_ca: str
    tmp: str


@dataclass(frozen=True)
class Case:
    id: str
    module: str
    options: Callable[[Lab], dict[str, Any]]
    field: str
    shows: str | None = None


def vultr(lab: Lab, **options: Any) -> dict[str, Any]:
    return {"api_key": lab.vultr_key, "api_endpoint": lab.vultr_endpoint, "wait": False, **options}


def bmc(lab: Lab, **options: Any) -> dict[str, Any]:
    base = {"bmc_url": lab.bmc_url, "username": lab.bmc_username, "password": lab.bmc_password, "ca_cert": lab.bmc_ca}
    return {**base, **options}


def kube(lab: Lab, **options: Any) -> dict[str, Any]:
    return {"kubeconfig": lab.kubeconfig, **options}


def pool_host(lab: Lab, **overrides: Any) -> dict[str, Any]:
    host = {
        "name": "r730-a",
        "bmc_url": lab.bmc_url,
        "username": lab.bmc_username,
        "password": lab.bmc_password,
        "personality": "idrac8",
        "boot_mac": "00:5c:52:31:3a:9c",
        "ca_cert": lab.bmc_ca,
    }
    return {**host, **overrides}


SYSTEM = {"label": "system", "plan": "vc2-4c-8gb", "node_quantity": 1}
GPU_POOL = {"label": "gpu", "plan": "vcg-l40s-16c-180g-48vram", "node_quantity": 1}
IMAGE = {"url": "http://images.example/node.qcow2", "checksum": "c" * 64, "disk_format": "qcow2"}
NETWORK = {"node_ip": "192.0.2.10/24", "gateway": "192.0.2.1", "dns": ["192.0.2.53"]}
ISO_NETWORK = {"address": "192.0.2.10/24", "gateway": "192.0.2.1", "dns": ["192.0.2.53"], "mac": "00:5c:52:31:3a:9c"}
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHxL op@controller"


def metal3(lab: Lab, **overrides: Any) -> dict[str, Any]:
    base = {
        "kubeconfig": lab.kubeconfig,
        "cluster": "dc1",
        "pool": "r730",
        "hosts": [pool_host(lab)],
        "image": IMAGE,
        "network": NETWORK,
        "ssh_authorized_key": KEY,
    }
    return {**base, **overrides}


V100S = [{"model": "Tesla V100-PCIE-32GB", "count": 2}]
MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
ROOT_HASH = "$6$metalplane$" + "B" * 86  # a sha512-crypt hash's shape (of no real password)


def cluster(lab: Lab, **overrides: Any) -> dict[str, Any]:
    """modelplane_cluster's options with everything required present, then ``overrides``."""
    base = {
        "kubeconfig": lab.kubeconfig,
        "name": "c1",
        "workload_kubeconfig": lab.kubeconfig,
        "node_pools": [{"name": "gpu", "node_count": 1}],
    }
    return {**base, **overrides}


def claim(lab: Lab, **overrides: Any) -> dict[str, Any]:
    return {"kubeconfig": lab.kubeconfig, "cluster": "dc1", "pool": "r730", "hosts": [pool_host(lab)], **overrides}


CASES: tuple[Case, ...] = (
    # ---- Vultr VKE: names, versions, sizes, Kubernetes label and taint syntax, credentials, URLs
    Case(
        "vke cluster label of 300 characters",
        "vke_cluster",
        lambda lab: vultr(lab, label=LONG, region="ewr", system_pool=SYSTEM),
        "label",
    ),
    Case(
        "vke cluster label with a slash",
        "vke_cluster",
        lambda lab: vultr(lab, label="prod/inference", region="ewr", system_pool=SYSTEM),
        "label",
        "prod/inference",
    ),
    Case(
        "vke cluster label with unicode",
        "vke_cluster",
        lambda lab: vultr(lab, label="inférence", region="ewr", system_pool=SYSTEM),
        "label",
    ),
    Case(
        "vke cluster version not a version",
        "vke_cluster",
        lambda lab: vultr(lab, label="c1", region="ewr", version="1.x", system_pool=SYSTEM),
        "version",
        "1.x",
    ),
    Case(
        "vke cluster vpc_only without vpc_id",
        "vke_cluster",
        lambda lab: vultr(lab, label="c1", region="ewr", vpc_only=True, system_pool=SYSTEM),
        "vpc_id",
    ),
    Case(
        "vke cluster system pool of 0 nodes",
        "vke_cluster",
        lambda lab: vultr(lab, label="c1", region="ewr", system_pool={**SYSTEM, "node_quantity": 0}),
        "system_pool.node_quantity",
    ),
    Case(
        "vke cluster two pools of one label",
        "vke_cluster",
        lambda lab: vultr(lab, label="c1", region="ewr", system_pool=SYSTEM, node_pools=[GPU_POOL, GPU_POOL]),
        "node_pools",
    ),
    Case(
        "vke cluster without an API key",
        "vke_cluster",
        lambda lab: {
            "api_endpoint": lab.vultr_endpoint,
            "label": "c1",
            "region": "ewr",
            "system_pool": SYSTEM,
            "api_key": "",
        },
        "api_key",
    ),
    Case(
        "vke cluster API endpoint over ftp",
        "vke_cluster",
        lambda lab: vultr(lab, api_endpoint="ftp://api.vultr.com/v2", label="c1", region="ewr", system_pool=SYSTEM),
        "api_endpoint",
    ),
    Case(
        "vke cluster wait_timeout negative",
        "vke_cluster",
        lambda lab: vultr(lab, label="c1", region="ewr", system_pool=SYSTEM, wait=True, wait_timeout=-5),
        "wait_timeout",
    ),
    Case(
        "vke pool label with spaces",
        "vke_node_pool",
        lambda lab: vultr(lab, cluster="c1", label="gpu pool", plan="vc2-4c-8gb", node_quantity=1),
        "label",
        "gpu pool",
    ),
    Case(
        "vke pool label of 300 characters",
        "vke_node_pool",
        lambda lab: vultr(lab, cluster="c1", label=LONG, plan="vc2-4c-8gb", node_quantity=1),
        "label",
    ),
    Case(
        "vke pool without a plan",
        "vke_node_pool",
        lambda lab: vultr(lab, cluster="c1", label="gpu", node_quantity=1),
        "plan",
    ),
    Case(
        "vke pool of -1 nodes",
        "vke_node_pool",
        lambda lab: vultr(lab, cluster="c1", label="gpu", plan="vc2-4c-8gb", node_quantity=-1),
        "node_quantity",
    ),
    Case(
        "vke pool min above max",
        "vke_node_pool",
        lambda lab: vultr(
            lab, cluster="c1", label="gpu", plan="vc2-4c-8gb", auto_scaler=True, min_nodes=3, max_nodes=1
        ),
        "min_nodes",
    ),
    Case(
        "vke pool node label key with a space",
        "vke_node_pool",
        lambda lab: vultr(lab, cluster="c1", label="gpu", plan="vc2-4c-8gb", node_quantity=1, labels={"bad key": "x"}),
        "labels",
        "bad key",
    ),
    Case(
        "vke pool node label value of 64 characters",
        "vke_node_pool",
        lambda lab: vultr(
            lab, cluster="c1", label="gpu", plan="vc2-4c-8gb", node_quantity=1, labels={"team": "v" * 64}
        ),
        "labels",
    ),
    Case(
        "vke pool node label key prefix not DNS",
        "vke_node_pool",
        lambda lab: vultr(
            lab, cluster="c1", label="gpu", plan="vc2-4c-8gb", node_quantity=1, labels={"Example_Corp/team": "a"}
        ),
        "labels",
    ),
    Case(
        "vke pool taint effect unknown",
        "vke_node_pool",
        lambda lab: vultr(
            lab,
            cluster="c1",
            label="gpu",
            plan="vc2-4c-8gb",
            node_quantity=1,
            taints=[{"key": "gpu", "value": "true", "effect": "Sometimes"}],
        ),
        "taints",
        "Sometimes",
    ),
    Case(
        "vke pool taint key with a space",
        "vke_node_pool",
        lambda lab: vultr(
            lab,
            cluster="c1",
            label="gpu",
            plan="vc2-4c-8gb",
            node_quantity=1,
            taints=[{"key": "bad key", "value": "x", "effect": "NoSchedule"}],
        ),
        "taints",
        "bad key",
    ),
    Case(
        "vke preflight overlapping reserved CIDR",
        "vke_preflight",
        lambda lab: vultr(
            lab,
            clusters=[{"name": "c1", "region": "ewr", "networks": ["10.8.0.0/16"]}],
            reserved_networks=["10.8.0.0/12"],
        ),
        "clusters[0].networks",
    ),
    # ---- Redfish BMCs: URLs, choices, timeouts
    Case(
        "redfish power without a scheme",
        "redfish_power",
        lambda lab: bmc(lab, bmc_url="idrac-r730.example", state="on"),
        "bmc_url",
        "idrac-r730.example",
    ),
    Case("redfish power unknown state", "redfish_power", lambda lab: bmc(lab, state="explode"), "state", "explode"),
    Case(
        "redfish power negative graceful timeout",
        "redfish_power",
        lambda lab: bmc(lab, state="off", graceful_timeout=-1),
        "graceful_timeout",
    ),
    Case("redfish boot unknown device", "redfish_boot", lambda lab: bmc(lab, device="floppy"), "device", "floppy"),
    Case(
        "redfish boot order with an unknown device",
        "redfish_boot",
        lambda lab: bmc(lab, order=["Tape.Embedded.9-1"]),
        "order",
        "Tape.Embedded.9-1",
    ),
    Case(
        "virtual media over ftp",
        "redfish_virtual_media",
        lambda lab: bmc(lab, state="inserted", image_url="ftp://mirror.example/a.iso"),
        "image_url",
        "ftp",
    ),
    Case(
        "virtual media insert without an image",
        "redfish_virtual_media",
        lambda lab: bmc(lab, state="inserted"),
        "image_url",
    ),
    Case("bmc reset negative wait", "bmc_reset", lambda lab: bmc(lab, wait_timeout=-30), "wait_timeout"),
    Case("redfish info with an empty password", "redfish_info", lambda lab: bmc(lab, password=""), "password"),
    # ---- Kubernetes and Modelplane: names, namespaces, kubeconfigs
    Case(
        "modelplane cluster name with capitals",
        "modelplane_cluster",
        lambda lab: cluster(lab, name="Prod_Cluster"),
        "name",
        "Prod_Cluster",
    ),
    Case(
        "modelplane cluster name of 300 characters", "modelplane_cluster", lambda lab: cluster(lab, name=LONG), "name"
    ),
    Case(
        "modelplane cluster name with unicode", "modelplane_cluster", lambda lab: cluster(lab, name="clüster"), "name"
    ),
    Case(
        "modelplane cluster node label key with a space",
        "modelplane_cluster",
        lambda lab: cluster(lab, labels={"bad key": "x"}),
        "labels",
        "bad key",
    ),
    Case(
        "modelplane cluster taint effect unknown",
        "modelplane_cluster",
        lambda lab: cluster(lab, taints=[{"key": "gpu", "value": "x", "effect": "Always"}]),
        "taints",
        "Always",
    ),
    Case(
        "modelplane smoke gpus 0", "modelplane_smoke", lambda lab: kube(lab, cluster="c1", model=MODEL, gpus=0), "gpus"
    ),
    Case(
        "modelplane smoke namespace with capitals",
        "modelplane_smoke",
        lambda lab: kube(lab, cluster="c1", model=MODEL, namespace="Smoke"),
        "namespace",
        "Smoke",
    ),
    Case(
        "kube ready missing kubeconfig file",
        "kube_ready",
        lambda lab: {"kubeconfig": f"{lab.tmp}/absent.kubeconfig", "kind": "Node"},
        "kubeconfig",
    ),
    Case("kube ready negative wait", "kube_ready", lambda lab: kube(lab, kind="Node", wait_timeout=-1), "wait_timeout"),
    Case("gpu ready zero GPUs per node", "gpu_ready", lambda lab: kube(lab, gpus_per_node=0), "gpus_per_node"),
    # ---- Bare metal: pools, claims, ISOs, Metal3, the driver matrix
    Case(
        "host claim boot MAC of five octets",
        "host_claim",
        lambda lab: claim(lab, hosts=[pool_host(lab, boot_mac="00:5c:52:31:3a")]),
        "hosts[0].boot_mac",
        "00:5c:52:31:3a",
    ),
    Case("host claim cluster with capitals", "host_claim", lambda lab: claim(lab, cluster="DC1"), "cluster", "DC1"),
    Case(
        "host claim zero GPUs required",
        "host_claim",
        lambda lab: claim(lab, requirements={"gpu_count": 0}),
        "requirements.gpu_count",
    ),
    Case(
        "host claim BMC URL without a scheme",
        "host_claim",
        lambda lab: claim(lab, hosts=[pool_host(lab, bmc_url="idrac.example")]),
        "hosts[0].bmc_url",
    ),
    Case(
        "host pool name with a space",
        "host_pool_info",
        lambda lab: {k: v for k, v in claim(lab, pool="r730 lab").items() if k != "cluster"},  # no cluster option
        "pool",
        "r730 lab",
    ),
    Case(
        "boot iso unknown OS family",
        "boot_iso",
        lambda lab: {"dest": f"{lab.tmp}/a.iso", "os_family": "windows", "iso_url": "https://mirror.example/a.iso"},
        "os_family",
        "windows",
    ),
    Case(
        "boot iso checksum not hex",
        "boot_iso",
        lambda lab: {
            "dest": f"{lab.tmp}/a.iso",
            "os_family": "el",
            "iso_url": "https://mirror.example/a.iso",
            "iso_checksum": "sha256:xyz",
            "hostname": "n1",
            "network": ISO_NETWORK,
            "disk": {"wwn": "0x5000c500a1b2c3d4"},
            "ssh_authorized_keys": [KEY],
            "root_password_hash": ROOT_HASH,
            "cluster_name": "c1",
            "generation": 1,
        },
        "iso_checksum",
    ),
    Case(
        "metal3 image URL without checksum",
        "metal3_host",
        lambda lab: metal3(lab, image={"url": IMAGE["url"]}),
        "image.checksum",
    ),
    Case(
        "metal3 checksum type crc32",
        "metal3_host",
        lambda lab: metal3(lab, image={**IMAGE, "checksum_type": "crc32"}),
        "checksum_type",
        "crc32",
    ),
    Case(
        "metal3 disk format iso",
        "metal3_host",
        lambda lab: metal3(lab, image={**IMAGE, "disk_format": "iso"}),
        "disk_format",
        "iso",
    ),
    Case(
        "metal3 gateway outside the subnet",
        "metal3_host",
        lambda lab: metal3(lab, network={**NETWORK, "gateway": "198.51.100.1"}),
        "network.gateway",
        "198.51.100.1",
    ),
    Case(
        "driver check open module on V100",
        "gpu_driver_check",
        lambda lab: {"driver_version": "580.105.08", "kernel_module_type": "open", "gpus": V100S},
        "kernel_module_type",
    ),
    Case(
        "driver check driver version not a version",
        "gpu_driver_check",
        lambda lab: {"driver_version": "latest", "gpus": V100S},
        "driver_version",
        "latest",
    ),
)
