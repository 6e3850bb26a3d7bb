# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node-software rules of the bare-metal preflight: NVIDIA driver, Kubernetes version, CIDRs, LB range, labels.

Why here, before any write: every one of these settings is consumed late, on the node, after a host was claimed,
powered on and installed (the driver installer, ``kubeadm init``, Cilium's LoadBalancer IP pool). A driver that
cannot drive a V100, a pod CIDR on the node's LAN or a LoadBalancer range outside it would surface only after the
claim and the install; each is knowable from the inventory alone. So ``metal_preflight`` runs these rules in its
first stage (pure, no request) and reports every problem with the cluster entry's field (the inventory variable's
name: ``clusters[0].nvidia_driver_installer_sha256``) and the fix.

The driver rules do not restate the compatibility matrix: they build ``_nvidia.compat``'s ``Target`` from the
inventory (the requirements' GPU model and count, the driver version, the module flavour, the OS release) and call
its ``decide``; its problems are renamed onto the inventory's fields (``FIELDS``). The same ``decide`` runs again
in the preflight's second stage with the GPUs and the BIOS settings read from the BMC of the host a cluster would
claim (``bmc_matrix_problems``), which is where Secure Boot is refused.

Pure: no I/O; the package repository check (``kube_release``) is the one optional read.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._common.problems import Problem
from ansible_collections.metalplane.inference.plugins.module_utils._nvidia import compat
from ansible_collections.metalplane.inference.plugins.module_utils._nvidia.driver_version import (
    DriverTextError,
    DriverVersion,
    parse_version,
    version_from_installer,
)
from ansible_collections.metalplane.inference.plugins.module_utils._nvidia.gpus import UnknownGpu, lookup
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.bios import BiosReading

from . import boot_iso
from .pool import _positive_int

# typing.Union, not "|": pylint (ansible-test sanity) rejects "|" between classes outside annotations.
Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]  # noqa: UP007

# The kubeadm_node role's defaults (its meta/argument_specs.yml; kubeadm's own defaults for the service subnet,
# Flannel's/Cilium's customary pod subnet). An entry passed empty gets these, as the role would.
DEFAULT_POD_CIDR = "10.244.0.0/16"
DEFAULT_SERVICE_CIDR = "10.96.0.0/12"
DEFAULT_API_PORT = 6443
# The baremetal_host role's default for baremetal_host_ssh_port.
DEFAULT_SSH_PORT = 22
MODULE_TYPES = compat.MODULE_TYPES

# kubeadm's configuration API v1beta4, the only one the kubeadm_node role writes, was introduced with Kubernetes
# v1.31 (https://kubernetes.io/docs/reference/config-api/kubeadm-config.v1beta4/, "A list of changes since
# v1beta3", first entry v1.31); an older kubeadm rejects the file.
KUBEADM_V1BETA4_MIN = (1, 31)
# Modelplane's NVIDIA DRA driver publishes ResourceSlices in resource.k8s.io/v1, which Kubernetes serves from v1.34
# ("Kubernetes v1.34: DRA has graduated to GA", https://kubernetes.io/blog/2025/09/01/kubernetes-v1-34-dra-updates/:
# "the default API version for DRA is now the stable v1 version").
MODELPLANE_MIN = (1, 34)
# What "v1.34.2" must look like: kubeadm's kubernetesVersion and the pinned kubelet/kubeadm package versions.
# Labels such as "stable-1.34" are refused: they need dl.k8s.io at init time and pin nothing.
_KUBE_VERSION = re.compile(r"^v(\d+)\.(\d+)\.(\d+)$")

# Label syntax (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set;
# k8s.io/apimachinery pkg/util/validation/validation.go: IsQualifiedName, IsValidLabelValue).
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_NAME_MAX = 63
LABEL_PREFIX_MAX = 253
# Labels the kubeadm_node role sets itself (the contract with modelplane_adopt and gpu_ready); a user value would
# be overwritten or, worse, disagree with the pool the cluster is adopted into.
ROLE_LABELS = ("modelplane.ai/pool",)
# The OS releases boot_iso installs, as the compatibility matrix names the family (compat.OS_FAMILIES).
MATRIX_OS_FAMILY = {"el": "el", "ubuntu": "ubuntu"}
_OS_VERSION = re.compile(r"^\d+(\.\d+)?$")
# The matrix rule that compares the BIOS boot mode with the installer's: the redfish provisioner's ISO is hybrid
# (BIOS and UEFI boot records, iso_hybrid.py) and boots in whatever mode the BIOS is in, so it does not apply here.
NOT_APPLICABLE_RULES = ("bios-boot-mode",)

# compat's problem fields -> the cluster entry's fields (the inventory variables).
FIELDS = {
    "kernel_module_type": "nvidia_driver_kernel_module_type",
    "gpus": "requirements.gpu_model",
    "os_version": "os_version",
    "kernel_version": "os_version",
    "boot_mode": "os_family",
}


@dataclass
class NodeSoftware:
    """The valid part of a cluster's node-software settings (None where a setting had a problem)."""

    driver: DriverVersion | None = None
    driver_field: str = "nvidia_driver_version"  # where the version came from (or the URL it was parsed from)
    kernel_module_type: str = "auto"
    gpus: tuple[compat.GpuSpec, ...] = ()
    os_family: str | None = None
    os_version: str | None = None
    kubernetes: tuple[int, int, int] | None = None
    pod_cidr: Network | None = None
    service_cidr: Network | None = None
    lb_ranges: list[tuple[str, ipaddress.IPv4Address, ipaddress.IPv4Address]] = field(default_factory=list)
    decision: compat.Decision | None = None
    package_family: str = "el"  # the OS family whose package index says which Kubernetes versions exist
    package_repository: str = ""  # kubeadm_node_package_repository, or empty for pkgs.k8s.io

    def summary(self) -> dict[str, Any]:
        decision = self.decision
        return {
            "driver_version": str(self.driver) if self.driver else None,
            "kernel_module_type": decision.kernel_module_type if decision else None,
            "gsp_firmware": decision.gsp_firmware if decision else None,
            "kubernetes_version": "v{}.{}.{}".format(*self.kubernetes) if self.kubernetes else None,
            "pod_cidr": str(self.pod_cidr) if self.pod_cidr else None,
            "service_cidr": str(self.service_cidr) if self.service_cidr else None,
            "matrix": list(decision.rows) if decision else [],
        }


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


# --------------------------------------------------------------------------------------------- driver
def check_driver(problems: list[Problem], where: str, entry: Mapping[str, Any], node: NodeSoftware) -> None:
    """Installer URL (required, a scheme boot_iso fetches), its sha256 (required), the version, the flavour."""
    url = _text(entry.get("nvidia_driver_installer_url"))
    sha = _text(entry.get("nvidia_driver_installer_sha256"))
    at = f"{where}.nvidia_driver_installer_url"
    if not url:
        problems.append(
            Problem(
                at,
                "is required: the NVIDIA .run installer (https://.../NVIDIA-Linux-x86_64-<version>.run, file:// or "
                "an absolute path on the controller)",
            )
        )
    else:
        try:
            boot_iso.check_iso_url(url)
        except InputError as exc:
            problems.append(Problem(at, f"{exc.msg.split(': ', 1)[-1]}; write https://, http://, file:// or a path"))
    sha_at = f"{where}.nvidia_driver_installer_sha256"
    if url and not sha:
        problems.append(
            Problem(
                sha_at,
                "is required with nvidia_driver_installer_url: an installer is never run unverified; give its "
                "sha256 as 'sha256:<64 hex digits>' (sha256sum of the .run, or NVIDIA's published checksum)",
            )
        )
    elif sha:
        try:
            boot_iso.parse_checksum(sha)
        except InputError:
            problems.append(
                Problem(sha_at, f"{sha!r} is not a sha256; write 'sha256:<64 hex digits>' or the 64 hex digits")
            )
    version = _text(entry.get("nvidia_driver_version"))
    if version:
        try:
            node.driver = parse_version(version)
        except DriverTextError as exc:
            problems.append(Problem(f"{where}.nvidia_driver_version", f"{exc}"))
    elif url:
        try:
            node.driver = version_from_installer(url)
            node.driver_field = "nvidia_driver_installer_url"
        except DriverTextError:
            problems.append(
                Problem(
                    f"{where}.nvidia_driver_version",
                    f"is not given and cannot be read from the installer URL {url!r} (no "
                    "NVIDIA-Linux-x86_64-<version>.run at its end); set nvidia_driver_version, e.g. 580.105.08",
                )
            )
    flavour = _text(entry.get("nvidia_driver_kernel_module_type")) or "auto"
    if flavour not in MODULE_TYPES:
        problems.append(
            Problem(
                f"{where}.nvidia_driver_kernel_module_type",
                f"{flavour!r} is not a kernel module type; use one of {', '.join(MODULE_TYPES)}",
            )
        )
    else:
        node.kernel_module_type = flavour


def check_gpus(problems: list[Problem], where: str, requirements: Mapping[str, Any], node: NodeSoftware) -> None:
    """The requirements' GPU model must be a row of the GPU table, or the matrix cannot decide for it."""
    model = _text(requirements.get("gpu_model"))
    if not model:
        return  # nothing to decide from before the BMC is read: the second stage decides with the BMC's GPUs
    try:
        found = lookup(model)
    except UnknownGpu as exc:
        problems.append(
            Problem(
                f"{where}.requirements.gpu_model",
                f"{exc}; write a model the driver matrix knows (V100, Tesla V100-PCIE-32GB, L40S, ...) or add the "
                "model to the GPU table (plugins/module_utils/_nvidia/gpus.py)",
            )
        )
        return
    try:
        count = _positive_int("requirements.gpu_count", requirements.get("gpu_count")) or 1
    except InputError:
        count = 1  # the requirements' own check names it
    node.gpus = (compat.GpuSpec("requirements.gpu_model", model, count, found),)


def check_os_version(problems: list[Problem], where: str, entry: Mapping[str, Any], node: NodeSoftware) -> None:
    node.os_family = MATRIX_OS_FAMILY.get(_text(entry.get("os_family")))
    version = _text(entry.get("os_version"))
    if not version:
        return
    if not _OS_VERSION.match(version):
        problems.append(
            Problem(f"{where}.os_version", f"{version!r} is not an OS release; write 10 (EL 10), 24.04 or 12")
        )
        return
    node.os_version = version


def _matrix_problem(where: str, problem: compat.Problem, driver_field: str) -> Problem:
    name = driver_field if problem.field == "driver_version" else FIELDS.get(problem.field, problem.field)
    return Problem(f"{where}.{name}", f"{problem.msg}; fix: {problem.fix} (driver matrix rule {problem.rule})")


def _rules() -> tuple[compat.Rule, ...]:
    return tuple(rule for rule in compat.RULES if rule.id not in NOT_APPLICABLE_RULES)


def decide_from_inventory(problems: list[Problem], where: str, node: NodeSoftware) -> None:
    """The matrix for the requirements' GPUs: flavour, branch, OS (the BIOS rules wait for the BMC's reading)."""
    if node.driver is None or not node.gpus:
        return
    target = compat.Target(
        gpus=node.gpus,
        driver=node.driver,
        kernel_module_type=node.kernel_module_type,
        os_family=node.os_family,
        os_version=node.os_version,
    )
    node.decision = compat.decide(target, _rules())
    problems.extend(_matrix_problem(where, p, node.driver_field) for p in node.decision.problems)


def bmc_matrix_problems(
    cluster_where: str,
    host_where: str,
    node: NodeSoftware,
    gpu_models: Sequence[str],
    bios: BiosReading | None,
) -> tuple[list[Problem], list[str]]:
    """The matrix again, with the GPUs and the BIOS of the host the cluster would claim: (problems, warnings).

    The BIOS problems name the host's BIOS attribute (``pools.lab.hosts[0].bios.Bios.Attributes.SecureBoot``),
    the GPU problems the host's PCIe inventory.
    """
    if node.driver is None:
        return [], []
    problems: list[Problem] = []
    counts: dict[str, tuple[int, Any, str]] = {}
    for text in gpu_models:
        try:
            model = lookup(text)
        except UnknownGpu as exc:
            problems.append(
                Problem(f"{host_where}.gpus", f"the BMC reports a GPU the driver matrix does not know: {exc}")
            )
            continue
        count, _model, given = counts.get(model.name, (0, model, text))
        counts[model.name] = (count + 1, model, given)
    gpus = tuple(compat.GpuSpec(f"{host_where}.gpus", given, n, model) for n, model, given in counts.values())
    if not gpus:
        gpus = node.gpus
    if not gpus or problems:
        return problems, []
    facts = None
    if bios is not None:
        facts = compat.BiosFacts(
            secure_boot=bios.secure_boot,
            boot_mode=bios.boot_mode,
            mmio_above_4gb=bios.mmio_above_4gb,
            where={k: f"{host_where}.bios.{v}" for k, v in bios.where.items()},
        )
    target = compat.Target(
        gpus=gpus,
        driver=node.driver,
        kernel_module_type=node.kernel_module_type,
        os_family=node.os_family,
        os_version=node.os_version,
        bios=facts,
    )
    decision = compat.decide(target, _rules())
    node.decision = decision
    for problem in decision.problems:
        if problem.field == "gpus":  # the GPUs are the BMC's here
            text = f"{problem.msg}; fix: {problem.fix} (driver matrix rule {problem.rule})"
            problems.append(Problem(f"{host_where}.gpus", text))
        elif problem.field.startswith(host_where):
            problems.append(
                Problem(problem.field, f"{problem.msg}; fix: {problem.fix} (driver matrix rule {problem.rule})")
            )
        else:
            problems.append(_matrix_problem(cluster_where, problem, node.driver_field))
    warnings = [f"{w.field}: {w.msg}; {w.fix}" for w in decision.warnings]
    return problems, warnings


# --------------------------------------------------------------------------------------------- Kubernetes
def parse_kubernetes_version(text: str) -> tuple[int, int, int]:
    """``v1.34.2`` -> (1, 34, 2); raises ValueError with the expected form."""
    match = _KUBE_VERSION.match(text)
    if not match:
        msg = f"{text!r} is not a Kubernetes release; write v<major>.<minor>.<patch>, e.g. v1.34.2"
        raise ValueError(msg)
    major, minor, patch = (int(g) for g in match.groups())
    return major, minor, patch


def check_kubernetes_version(problems: list[Problem], where: str, entry: Mapping[str, Any], node: NodeSoftware) -> None:
    at = f"{where}.kubeadm_node_kubernetes_version"
    text = _text(entry.get("kubeadm_node_kubernetes_version"))
    if not text:
        problems.append(Problem(at, "is required: the Kubernetes release to install, e.g. v1.34.2"))
        return
    try:
        version = parse_kubernetes_version(text)
    except ValueError as exc:
        problems.append(Problem(at, str(exc)))
        return
    if version[:2] < KUBEADM_V1BETA4_MIN:
        problems.append(
            Problem(
                at,
                f"{text} is older than v{KUBEADM_V1BETA4_MIN[0]}.{KUBEADM_V1BETA4_MIN[1]}, the first kubeadm that "
                "reads the v1beta4 configuration the kubeadm_node role writes; use "
                f"v{MODELPLANE_MIN[0]}.{MODELPLANE_MIN[1]}.x or later",
            )
        )
        return
    if version[:2] < MODELPLANE_MIN:
        problems.append(
            Problem(
                at,
                f"{text} does not serve resource.k8s.io/v1 (GA from v{MODELPLANE_MIN[0]}.{MODELPLANE_MIN[1]}), where "
                f"Modelplane's NVIDIA DRA driver publishes the GPUs; use v{MODELPLANE_MIN[0]}.{MODELPLANE_MIN[1]}.2 or "
                "later",
            )
        )
        return
    node.kubernetes = version


# --------------------------------------------------------------------------------------------- networks
def _cidr(problems: list[Problem], at: str, value: Any, default: str) -> Network | None:
    text = _text(value) or default
    try:
        return ipaddress.ip_network(text, strict=True)
    except ValueError as exc:
        hint = ""
        try:
            hint = f"; did you mean {ipaddress.ip_network(text, strict=False)}?"
        except ValueError:
            hint = "; write a CIDR such as 10.244.0.0/16"
        problems.append(Problem(at, f"{text!r} is not a network ({exc}){hint}"))
        return None


def check_cidrs(problems: list[Problem], where: str, entry: Mapping[str, Any], node: NodeSoftware) -> None:
    """Pod and service CIDRs parse and do not overlap each other (the node subnet and the other clusters' and
    reserved networks are compared with the cluster's other networks in ``preflight._check_overlaps``)."""
    node.pod_cidr = _cidr(
        problems, f"{where}.kubeadm_node_pod_cidr", entry.get("kubeadm_node_pod_cidr"), DEFAULT_POD_CIDR
    )
    node.service_cidr = _cidr(
        problems, f"{where}.kubeadm_node_service_cidr", entry.get("kubeadm_node_service_cidr"), DEFAULT_SERVICE_CIDR
    )
    if node.pod_cidr is not None and node.service_cidr is not None and node.pod_cidr.overlaps(node.service_cidr):
        problems.append(
            Problem(
                f"{where}.kubeadm_node_service_cidr",
                f"{node.service_cidr} overlaps the pod CIDR {node.pod_cidr} (kubeadm_node_pod_cidr); give pods and "
                "services ranges of their own",
            )
        )


def cluster_extra_networks(
    where: str, node: NodeSoftware, listed: Sequence[tuple[str, Network]]
) -> list[tuple[str, Network]]:
    """The pod and service CIDRs to compare like ``cluster_networks`` entries: those not already inside one (a
    CIDR inside a listed network is checked through it; listing it again would report it as its own overlap)."""
    extra: list[tuple[str, Network]] = []
    for key, net in (("kubeadm_node_pod_cidr", node.pod_cidr), ("kubeadm_node_service_cidr", node.service_cidr)):
        if net is None:
            continue
        if any(net.version == other.version and net.subnet_of(other) for _at, other in listed):  # type: ignore[arg-type]
            continue
        extra.append((f"{where}.{key}", net))
    # Pod against service is reported by check_cidrs; keep only one of an overlapping pair here.
    if len(extra) == 2 and extra[0][1].overlaps(extra[1][1]):
        extra = extra[:1]
    return extra


def _range(text: str) -> tuple[ipaddress.IPv4Address, ipaddress.IPv4Address]:
    if "/" in text:
        net = ipaddress.IPv4Network(text, strict=True)
        return net.network_address, net.broadcast_address
    first, sep, last = text.partition("-")
    if not sep:
        address = ipaddress.IPv4Address(first.strip())
        return address, address
    start, end = ipaddress.IPv4Address(first.strip()), ipaddress.IPv4Address(last.strip())
    if start > end:
        msg = f"the range starts after it ends ({start} > {end})"
        raise ValueError(msg)
    return start, end


def check_lb_pool(
    problems: list[Problem],
    where: str,
    entry: Mapping[str, Any],
    interface: ipaddress.IPv4Interface | None,
    node: NodeSoftware,
) -> None:
    """Each range (``a-b``, a CIDR, one address) inside the node's subnet, without the node, its gateway, the
    subnet's network or broadcast address: Cilium's L2 announcements answer ARP for these on the node's LAN."""
    value = entry.get("kubeadm_node_lb_pool")
    if value in (None, "", []):
        return
    at = f"{where}.kubeadm_node_lb_pool"
    if isinstance(value, (str, Mapping)) or not isinstance(value, Sequence):
        problems.append(Problem(at, "must be a list of ranges such as 192.168.120.200-192.168.120.210 or CIDRs"))
        return
    taken: list[tuple[str, ipaddress.IPv4Address | None]] = []
    if interface is not None:
        taken = [
            ("the node's own address (node_ip)", interface.ip),
            ("the subnet's network address", interface.network.network_address),
            ("the subnet's broadcast address", interface.network.broadcast_address),
        ]
    gateway = _text(entry.get("gateway"))
    with contextlib.suppress(ValueError):  # a bad gateway is reported on gateway
        taken.append(("the gateway", ipaddress.IPv4Address(gateway) if gateway else None))
    for index, item in enumerate(value):
        item_at = f"{at}[{index}]"
        try:
            start, end = _range(_text(item))
        except ValueError as exc:
            problems.append(
                Problem(
                    item_at, f"{item!r} is not an IPv4 range ({exc}); write 192.168.120.200-192.168.120.210 or a CIDR"
                )
            )
            continue
        if interface is not None and not (start in interface.network and end in interface.network):
            problems.append(
                Problem(
                    item_at,
                    f"{item} is not inside the node's subnet {interface.network} (node_ip): LoadBalancer addresses "
                    "are announced on the node's LAN; pick free addresses of that subnet",
                )
            )
            continue
        clashes = [f"{what} {address}" for what, address in taken if address is not None and start <= address <= end]
        if clashes:
            problems.append(
                Problem(item_at, f"{item} contains {', '.join(clashes)}; leave them out of the LoadBalancer range")
            )
            continue
        for other_at, other_start, other_end in node.lb_ranges:
            if start <= other_end and other_start <= end:
                problems.append(Problem(item_at, f"{item} overlaps {other_at}; list each address once"))
                break
        else:
            node.lb_ranges.append((item_at, start, end))


def check_lb_across(clusters: Sequence[tuple[str, str, ipaddress.IPv4Interface | None, NodeSoftware]]) -> list[Problem]:
    """LoadBalancer ranges of different clusters (name, where, node interface, node) on one LAN: no range may hold
    another cluster's node address or overlap another cluster's range (two nodes would answer ARP for it)."""
    problems: list[Problem] = []

    def holds(owner: tuple[str, str, Any, NodeSoftware], other: tuple[str, str, Any, NodeSoftware]) -> None:
        name, _where, _iface, node = owner
        other_name, other_where, other_iface, _other = other
        if other_iface is None:
            return
        problems.extend(
            Problem(
                at,
                f"contains {other_iface.ip}, the node address of cluster {other_name!r} ({other_where}.node_ip); "
                f"give cluster {name!r} other addresses",
            )
            for at, start, end in node.lb_ranges
            if start <= other_iface.ip <= end
        )

    for index, later in enumerate(clusters):
        for earlier in clusters[:index]:
            holds(earlier, later)
            holds(later, earlier)
            for at, start, end in later[3].lb_ranges:
                clash = next((o for o in earlier[3].lb_ranges if start <= o[2] and o[1] <= end), None)
                if clash is not None:
                    problems.append(
                        Problem(at, f"overlaps {clash[0]} of cluster {earlier[0]!r}; give each cluster its own range")
                    )
    return problems


# --------------------------------------------------------------------------------------------- the rest
def check_port(problems: list[Problem], at: str, value: Any, default: int) -> None:
    """A TCP port (1 to 65535) or nothing (the role's ``default``); the problem names ``at`` and the value."""
    if value in (None, ""):
        return
    try:
        port = int(str(value).strip())
    except ValueError:
        port = 0
    if isinstance(value, bool) or not 1 <= port <= 65535:
        problems.append(Problem(at, f"{value!r} is not a TCP port; write a number from 1 to 65535 (default {default})"))


def check_api_port(problems: list[Problem], where: str, entry: Mapping[str, Any]) -> None:
    check_port(problems, f"{where}.kubeadm_node_api_port", entry.get("kubeadm_node_api_port"), DEFAULT_API_PORT)


def label_key_problem(key: str) -> str | None:
    """What is wrong with a label key, or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > LABEL_PREFIX_MAX or not _DNS_SUBDOMAIN.match(prefix)):
        return f"its prefix {prefix!r} is not a DNS subdomain (lower case, digits, '-', '.'; at most 253)"
    if not name or len(name) > LABEL_NAME_MAX or not _LABEL_NAME.match(name):
        return f"its name {name!r} must be 1 to 63 characters, alphanumeric at both ends, with '-', '_', '.' between"
    if key in ROLE_LABELS:
        return "the kubeadm_node role sets it from the pool (modelplane.ai/pool); remove it here"
    return None


def check_labels(problems: list[Problem], where: str, entry: Mapping[str, Any]) -> None:
    labels = entry.get("kubeadm_node_labels")
    if labels in (None, "", {}):
        return
    at = f"{where}.kubeadm_node_labels"
    if not isinstance(labels, Mapping):
        problems.append(Problem(at, f"must be a mapping of label keys to values, e.g. {{team: ml}}; got {labels!r}"))
        return
    for key, value in labels.items():
        wrong = label_key_problem(str(key))
        if wrong:
            problems.append(Problem(f"{at}.{key}", f"{key!r} is not a valid label key: {wrong}"))
            continue
        text = "" if value is None else str(value)
        if text and (len(text) > LABEL_NAME_MAX or not _LABEL_NAME.match(text)):
            problems.append(
                Problem(
                    f"{at}.{key}",
                    f"{text!r} is not a valid label value: at most 63 characters, alphanumeric at both ends, with "
                    "'-', '_', '.' between (or empty); quote numbers and booleans in YAML",
                )
            )


def check_private_key(problems: list[Problem], where: str, entry: Mapping[str, Any]) -> None:
    """The private half of ssh_authorized_key must be a file on the controller (the SSH probe and the node's
    connection use it); its content is never read here."""
    at = f"{where}.ssh_private_key_file"
    text = _text(entry.get("ssh_private_key_file"))
    if not text:
        problems.append(
            Problem(
                at, "is required: the private key (on the controller) of ssh_authorized_key, e.g. ~/.ssh/id_ed25519"
            )
        )
        return
    path = Path(text).expanduser()
    if not path.is_file():
        problems.append(
            Problem(
                at, f"{text} is not a file on the controller; create the pair (ssh-keygen -t ed25519) or fix the path"
            )
        )


def check_node_software(
    problems: list[Problem],
    where: str,
    entry: Mapping[str, Any],
    interface: ipaddress.IPv4Interface | None,
) -> NodeSoftware:
    """Every node-software rule of one present cluster entry; the valid parts for the later stages."""
    node = NodeSoftware(
        package_family=_text(entry.get("os_family")) or "el",
        package_repository=_text(entry.get("kubeadm_node_package_repository")),
    )
    check_driver(problems, where, entry, node)
    requirements = entry.get("requirements")
    check_gpus(problems, where, requirements if isinstance(requirements, Mapping) else {}, node)
    check_os_version(problems, where, entry, node)
    decide_from_inventory(problems, where, node)
    check_kubernetes_version(problems, where, entry, node)
    check_cidrs(problems, where, entry, node)
    check_lb_pool(problems, where, entry, interface, node)
    check_api_port(problems, where, entry)
    check_labels(problems, where, entry)
    check_private_key(problems, where, entry)
    return node
