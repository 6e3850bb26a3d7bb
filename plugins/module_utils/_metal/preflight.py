# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight of a whole inventory of bare-metal clusters: every problem found before a host is claimed.

Why a module of its own, run once for all clusters: the bare-metal path writes early and undoes slowly. The
claim (a Lease on the control plane) comes first, then the BMC (virtual media, boot order, power), then an
installer that wipes a disk. A MAC typo, a gateway outside the node's subnet or an ISO whose checksum does not
match would otherwise surface after a host was claimed and powered on, or half-way through an install. So the
whole inventory is checked first and every problem is reported at once with the field that holds it
(``clusters[0].gateway``, ``pools.lab.hosts[1].boot_mac``), its value (never a secret) and the fix.

Three stages, each only when the one before found nothing (a typo must not cost a multi-GB download):

1. The inventory's shape, without any request (``check_inventory``, pure): names, pools and their hosts, MACs,
   BMC URLs, root disks, node IP, gateway, DNS, CIDR overlaps, OS family, provisioner, ISO URL and checksum
   syntax, SSH key, root password hash. The validators are the ones ``host_claim`` and ``boot_iso`` use, so the
   preflight cannot pass what the later module refuses.
2. The control plane and the BMCs, read-only (``plan_claims``, pure given the Leases and a probe): one Lease
   list per pool, then for each present cluster without a claim the host ``host_claim`` would give it, in the
   order it does (first free host of the pool, in inventory order, whose facts and Redfish inventory fit).
   Clusters sharing a pool are planned in inventory order and never get the same host, so three clusters on a
   pool need three free matching hosts. A pinned ``host`` another cluster holds, or a release of a host another
   cluster holds, is a problem.
3. The installer ISOs: downloaded once into the cache ``boot_iso`` uses (``<sha256>.iso``) and verified, so a
   checksum mismatch or an unreachable URL fails here and the later ``boot_iso`` finds the ISO cached. An ISO
   already in the cache is not fetched again, exactly as ``boot_iso`` would not (the cache holds verified ISOs
   only, under their sha256). In check mode nothing is downloaded: a cached or local ISO is verified, a remote
   one is asked for its headers only.

Nothing is written anywhere but the ISO cache: no Lease, no BMC request other than GETs, no ISO built.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError, MetalplaneError
from ansible_collections.metalplane.inference.plugins.module_utils._common.problems import PreflightError, Problem

from . import boot_iso, host_settings, kube_release, node_rules
from . import claims as c
from .pool import _HOST_NAME, Host, Requirements, _system_path, normalise_mac, parse_requirements

# typing.Union, not "|": pylint (ansible-test sanity) rejects "|" between classes outside annotations.
Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]  # noqa: UP007

STATES = ("present", "absent")
# The provisioners of the baremetal_host role (docs/architecture.md, "Adding a provisioner").
PROVISIONERS = ("redfish", "metal3")
# The provisioner whose claim is a BareMetalHost's consumerRef, planned by ``_metal3/preflight.py``.
METAL3 = "metal3"
# Provisioners that install from the vendor installer ISO over virtual media (``boot_iso``): they need the ISO,
# the root password hash and the root disk of the host.
ISO_PROVISIONERS = ("redfish",)
# Keys of ``boot_iso``'s errors -> the cluster entry's keys here.
NETWORK_FIELDS = {"network.address": "node_ip", "network.gateway": "gateway", "network.dns": "dns"}
ISO_FIELDS = {"iso_url": "installer_iso_url", "iso_checksum": "installer_iso_sha256"}
DISK_FIELDS = {"disk": "root_disk", "disk.wwn": "root_disk.wwn", "disk.serial": "root_disk.serial"}
# What a cluster's claim is, or will be after the run: "held" (it holds the host), "new" (host_claim would claim
# it), "release" (state=absent and it holds hosts), "none" (state=absent and it holds nothing).
CLAIM_STATES = ("held", "new", "release", "none")

# (host, requirements) -> ("ok", inventory) | ("unreachable", error) | ("mismatched", {reasons, inventory}).
Probe = Callable[[Host, Requirements], tuple[str, Any]]
# (url, sha256, install) -> what was verified, as a result entry; raises InputError on iso_url / iso_checksum.
# ``install``: a cluster of this run will install from it (its claim is new), so the ISO is downloaded now; otherwise
# (every cluster naming it holds its host already) a cached copy is enough, and an uncached one is asked for its
# headers only: a scheduled reconcile in a fresh AWX container must not fetch a multi-GB ISO it will not use.
IsoCheck = Callable[[str, str, bool], dict[str, Any]]


# --------------------------------------------------------------------------------------------- stage 1: shape
@dataclass
class Pool:
    """One pool's valid hosts, and where each came from (for field paths)."""

    name: str
    where: str  # "pools.lab"
    hosts: list[Host] = field(default_factory=list)
    entry_index: dict[str, int] = field(default_factory=dict)  # host name -> index in the pool's hosts list
    root_disks: dict[str, dict[str, str]] = field(default_factory=dict)  # host name -> {wwn|serial: value}
    listed: int = 0  # entries in the inventory, valid or not
    names: set[str] = field(default_factory=set)  # the names of all entries, valid or not

    def host(self, name: str) -> Host | None:
        return next((h for h in self.hosts if h.name == name), None)

    def host_where(self, name: str) -> str:
        return f"{self.where}.hosts[{self.entry_index[name]}]"


@dataclass
class Cluster:
    """One cluster entry, validated as far as it is valid (the problems say what is not)."""

    index: int
    name: str
    state: str
    pool: str
    provisioner: str
    requirements: Requirements
    host: str | None = None
    interface: ipaddress.IPv4Interface | None = None
    networks: list[Network] = field(default_factory=list)
    iso_url: str | None = None
    iso_sha256: str | None = None
    protected: bool = False
    node: node_rules.NodeSoftware = field(default_factory=node_rules.NodeSoftware)
    metal3: Any = None  # _metal3.preflight.Metal3Settings, with provisioner metal3

    @property
    def where(self) -> str:
        return f"clusters[{self.index}]"

    @property
    def present(self) -> bool:
        return self.state == "present"


@dataclass
class Checked:
    clusters: list[Cluster] = field(default_factory=list)
    pools: dict[str, Pool] = field(default_factory=dict)


def _networks(problems: list[Problem], where: str, value: Any) -> list[tuple[str, Network]]:
    """(field, network) for each entry of a CIDR list; a non-network entry is a problem naming its index."""
    parsed: list[tuple[str, Network]] = []
    if value is None:
        return parsed
    if isinstance(value, (str, Mapping)) or not isinstance(value, Sequence):
        problems.append(Problem(where, "must be a list of CIDRs such as 10.244.0.0/16"))
        return parsed
    for index, cidr in enumerate(value):
        at = f"{where}[{index}]"
        try:
            parsed.append((at, ipaddress.ip_network(str(cidr), strict=True)))
        except ValueError as exc:
            hint = ""
            try:
                hint = f"; did you mean {ipaddress.ip_network(str(cidr), strict=False)}?"
            except ValueError:
                hint = ""
            problems.append(Problem(at, f"{cidr!r} is not a network ({exc}){hint}"))
    return parsed


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _check_root_disk(problems: list[Problem], where: str, value: Any) -> dict[str, str] | None:
    """A pool host's ``root_disk``: ``{wwn|serial: identity}``, or None (not given, or a problem)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        problems.append(
            Problem(
                f"{where}.root_disk",
                f"{value!r} is not a mapping; give the install disk as {{wwn: 0x...}} or {{serial: ...}} from the "
                "BMC's storage inventory (a device name such as /dev/sda can change between boots)",
            )
        )
        return None
    try:
        kind, identity = host_settings.validate_disk(dict(value))
    except InputError as exc:
        problem = Problem.from_input_error(exc, where, DISK_FIELDS)
        problems.append(Problem(problem.field, problem.msg.replace("disk.", "root_disk.")))
        return None
    return {kind: identity}


def _check_host(
    problems: list[Problem], where: str, entry: Mapping[str, Any]
) -> tuple[Host | None, dict[str, str] | None]:
    """One BMC host entry: every field checked (all problems, not the first), the Host when all are valid."""
    from ansible_collections.metalplane.inference.plugins.module_utils._redfish.args import parse_bmc_url

    found = len(problems)
    name = _text(entry.get("name"))
    if not _HOST_NAME.match(name):
        problems.append(Problem(f"{where}.name", f"{name!r} is not a host name (1 to 253 characters, no spaces)"))
    bmc_url = _text(entry.get("bmc_url"))
    if not bmc_url:
        problems.append(Problem(f"{where}.bmc_url", "is required; write https://<bmc>[:port]"))
    else:
        try:
            parse_bmc_url(bmc_url)
        except InputError as exc:
            problems.append(Problem.from_input_error(exc, where))
    for key in ("username", "password"):
        if not entry.get(key):
            problems.append(Problem(f"{where}.{key}", f"is required: the BMC {key} (keep it in a vault)"))
    mac = ""
    try:
        mac = normalise_mac(f"{where}.boot_mac", entry.get("boot_mac"))
    except InputError as exc:
        problems.append(Problem(exc.field, exc.msg.split(": ", 1)[-1]))
    facts = entry.get("facts") or {}
    if not isinstance(facts, Mapping):
        problems.append(
            Problem(f"{where}.facts", f"must be a mapping such as {{gpu_model: V100, gpu_count: 2}}, got {facts!r}")
        )
    disk = _check_root_disk(problems, where, entry.get("root_disk"))
    system_path = None
    try:
        system_path = _system_path(f"{where}.system_path", entry.get("system_path"))
    except InputError as exc:
        problems.append(Problem(exc.field, exc.msg.split(": ", 1)[-1]))
    if len(problems) > found:
        return None, None
    host = Host(
        name=name,
        bmc_url=bmc_url,
        username=str(entry["username"]),
        password=str(entry["password"]),
        boot_mac=mac,
        personality=_text(entry.get("personality")) or None,
        validate_certs=entry.get("validate_certs") is not False,
        ca_cert=_text(entry.get("ca_cert")) or None,
        facts=dict(facts),
        root_disk=dict(disk or {}),
        system_path=system_path,
    )
    return host, disk


def check_pools(problems: list[Problem], value: Any) -> dict[str, Pool]:
    """The ``pools`` option: valid, unique pool names; every host entry; no host, BMC or boot MAC twice."""
    from .claim_run import _POOL_NAME, NAME_MAX

    pools: dict[str, Pool] = {}
    seen_hosts: dict[str, str] = {}  # host name -> where it was first listed
    seen_macs: dict[str, str] = {}
    seen_bmcs: dict[str, str] = {}
    for index, entry in enumerate(value or []):
        if not isinstance(entry, Mapping):
            problems.append(Problem(f"pools[{index}]", "must be a mapping with name and hosts"))
            continue
        name = _text(entry.get("name"))
        valid = len(name) <= NAME_MAX and bool(_POOL_NAME.match(name))
        where = f"pools.{name}" if valid and name not in pools else f"pools[{index}]"
        if not valid:
            problems.append(
                Problem(
                    f"{where}.name",
                    f"{name!r} is not a pool name: letters, digits, '_' and '-', at most {NAME_MAX} characters "
                    "(the <name> of inventory group pool_<name>)",
                )
            )
            continue
        if name in pools:
            problems.append(Problem(f"{where}.name", f"pool {name!r} is listed twice; list each pool once"))
            continue
        hosts = entry.get("hosts") or []
        pool = Pool(name=name, where=where, listed=len(hosts))
        pools[name] = pool
        for host_index, raw in enumerate(hosts):
            at = f"{where}.hosts[{host_index}]"
            if isinstance(raw, Mapping):
                pool.names.add(_text(raw.get("name")))
            if not isinstance(raw, Mapping):
                problems.append(Problem(at, "must be a mapping with name, bmc_url, username, password, boot_mac"))
                continue
            host, disk = _check_host(problems, at, raw)
            if host is None:
                continue
            duplicates = [
                ("name", host.name, seen_hosts, "host name"),
                ("boot_mac", host.boot_mac, seen_macs, "boot MAC"),
                ("bmc_url", host.bmc_url.rstrip("/").lower(), seen_bmcs, "BMC"),
            ]
            clash = next(((key, ident, seen, what) for key, ident, seen, what in duplicates if ident in seen), None)
            if clash is not None:  # one problem per repeated host: its name, else its BMC, else its boot MAC
                key, ident, seen, what = clash
                problems.append(
                    Problem(
                        f"{at}.{key}",
                        f"{what} {ident!r} is also listed at {seen[ident]}; a BMC host belongs to one pool, once",
                    )
                )
                continue
            for _key, ident, seen, _what in duplicates:
                seen[ident] = at
            pool.hosts.append(host)
            pool.entry_index[host.name] = host_index
            if disk is not None:
                pool.root_disks[host.name] = disk
    return pools


def _check_network(problems: list[Problem], where: str, entry: Mapping[str, Any]) -> ipaddress.IPv4Interface | None:
    """node_ip (a host address of its prefix), gateway (on that subnet, not the node), dns (IPs)."""
    interface = None
    if not entry.get("node_ip"):
        problems.append(Problem(f"{where}.node_ip", "is required: the node's IPv4 address/prefix, e.g. 10.0.0.70/24"))
    else:
        try:
            interface = host_settings.validate_interface(entry.get("node_ip"))
        except InputError as exc:
            problems.append(Problem.from_input_error(exc, where, NETWORK_FIELDS))
    if interface is not None:
        try:
            host_settings.validate_gateway(entry.get("gateway"), interface)
        except InputError as exc:
            problems.append(Problem.from_input_error(exc, where, NETWORK_FIELDS))
    try:
        host_settings.validate_dns(entry.get("dns"))
    except InputError as exc:
        problems.append(Problem.from_input_error(exc, where, NETWORK_FIELDS))
    return interface


def _check_iso(problems: list[Problem], where: str, entry: Mapping[str, Any], cluster: Cluster) -> None:
    """The installer ISO's URL and sha256, syntax only (stage 3 fetches it); required for ISO provisioners."""
    url = _text(entry.get("installer_iso_url"))
    sha = _text(entry.get("installer_iso_sha256"))
    if not url and cluster.provisioner not in ISO_PROVISIONERS:
        return
    if not url:
        problems.append(Problem(f"{where}.installer_iso_url", "is required: the vendor installer ISO's URL"))
    else:
        try:
            boot_iso.check_iso_url(url)
            cluster.iso_url = url
        except InputError as exc:
            problems.append(Problem.from_input_error(exc, where, ISO_FIELDS))
    if not sha:
        problems.append(Problem(f"{where}.installer_iso_sha256", "is required: the ISO's sha256 (SHA256SUMS)"))
    else:
        try:
            cluster.iso_sha256 = boot_iso.parse_checksum(sha)
        except InputError as exc:
            text = exc.msg.split(": ", 1)[-1]
            problems.append(Problem(f"{where}.installer_iso_sha256", f"{sha!r} is not a sha256: {text}"))


def _check_install(problems: list[Problem], where: str, entry: Mapping[str, Any], cluster: Cluster) -> None:
    """OS family, installer ISO, SSH key and root password hash (the ISO ones only for ISO provisioners)."""
    try:
        host_settings.validate_os_family(entry.get("os_family"))
    except InputError as exc:
        problems.append(Problem.from_input_error(exc, where))
    _check_iso(problems, where, entry, cluster)
    key = _text(entry.get("ssh_authorized_key"))
    if not key:
        problems.append(
            Problem(f"{where}.ssh_authorized_key", "is required: the public key the provisioner logs in with")
        )
    else:
        try:
            host_settings.validate_authorized_keys([key])
        except InputError as exc:
            problems.append(Problem(f"{where}.ssh_authorized_key", exc.msg.split(": ", 1)[-1]))
    node_rules.check_port(problems, f"{where}.ssh_port", entry.get("ssh_port"), node_rules.DEFAULT_SSH_PORT)
    hostname = _text(entry.get("hostname"))
    if hostname and cluster.provisioner in ISO_PROVISIONERS:  # boot_iso writes it into the installer's answers
        try:
            host_settings.validate_hostname(hostname)
        except InputError as exc:
            problems.append(Problem.from_input_error(exc, where))
    if cluster.provisioner in ISO_PROVISIONERS or entry.get("root_password_hash"):
        try:
            host_settings.validate_root_password_hash(entry.get("root_password_hash"))
        except InputError as exc:  # the message never echoes the value
            problems.append(Problem.from_input_error(exc, where))


def _check_requirements(problems: list[Problem], where: str, value: Any) -> Requirements:
    """The cluster's ``requirements`` (taken as given: a word for a count or a string for the mapping is named
    here with the value, not by Ansible's conversion alone); empty ones where they have a problem."""
    if value is not None and not isinstance(value, Mapping):
        problems.append(
            Problem(
                f"{where}.requirements",
                f"{value!r} is not a mapping; write e.g. {{gpu_model: V100, gpu_count: 2}} (keys gpu_model, "
                "gpu_count, min_memory_gib)",
            )
        )
        return Requirements()
    try:
        return parse_requirements({k: v for k, v in (value or {}).items() if v is not None})
    except InputError as exc:
        problems.append(Problem.from_input_error(exc, where))
        return Requirements()


def _check_cluster(problems: list[Problem], index: int, entry: Mapping[str, Any], pools: Mapping[str, Pool]) -> Cluster:
    from .claim_run import _cluster

    where = f"clusters[{index}]"
    name = _text(entry.get("name"))
    try:
        _cluster({"cluster": name})
    except InputError as exc:
        problems.append(Problem.from_input_error(exc, where, {"cluster": "name"}))
    state = _text(entry.get("state")) or "present"
    if state not in STATES:
        problems.append(Problem(f"{where}.state", f"{state!r} is not a state; use present or absent"))
    provisioner = _text(entry.get("provisioner")) or "redfish"
    if provisioner not in PROVISIONERS:
        problems.append(
            Problem(f"{where}.provisioner", f"{provisioner!r} is not supported; use one of {', '.join(PROVISIONERS)}")
        )
    requirements = _check_requirements(problems, where, entry.get("requirements"))
    cluster = Cluster(
        index=index,
        name=name,
        state=state,
        pool=_text(entry.get("pool")),
        provisioner=provisioner,
        requirements=requirements,
        host=_text(entry.get("host")) or None,
        protected=entry.get("protected") is True,
    )
    pool = pools.get(cluster.pool)
    if not cluster.pool:
        problems.append(Problem(f"{where}.pool", "is required: the <name> of the inventory group pool_<name>"))
    elif pool is None:
        known = ", ".join(sorted(pools)) or "none"
        problems.append(
            Problem(f"{where}.pool", f"unknown pool {cluster.pool!r} (known: {known}); add group pool_{cluster.pool}")
        )
    elif not pool.listed:
        problems.append(
            Problem(f"{where}.pool", f"pool {cluster.pool!r} has no hosts; add the BMCs to group pool_{cluster.pool}")
        )
    if pool is not None and cluster.host and cluster.host not in pool.names and pool.listed:
        problems.append(Problem(f"{where}.host", f"{cluster.host!r} is not one of the hosts of pool {cluster.pool!r}"))
    if cluster.state == "absent" and cluster.protected:
        problems.append(
            Problem(f"{where}.protected", f"cluster {name!r} is protected; set protected: false to tear it down")
        )
    if provisioner == METAL3:
        from ansible_collections.metalplane.inference.plugins.module_utils._metal3 import preflight as m3

        cluster.metal3 = m3.check_entry(problems, where, entry.get("metal3"), present=cluster.present)
    if cluster.present:
        cluster.interface = _check_network(problems, where, entry)
        _check_install(problems, where, entry, cluster)
        cluster.node = node_rules.check_node_software(problems, where, entry, cluster.interface)
    return cluster


def _check_overlaps(
    problems: list[Problem],
    clusters: Sequence[tuple[Cluster, list[tuple[str, Network]]]],
    reserved: list[tuple[str, Network]],
    others: list[tuple[str, Network]],
) -> None:
    """Each present cluster's networks against each other, its node subnet, the reserved networks, the networks
    other clusters use (``other_networks``) and the networks and node subnets of the inventory's other clusters.

    Node subnets are not compared with each other: several single-node clusters on one LAN is the normal case.
    """
    earlier_nets: list[tuple[str, Network]] = []  # (where, network) of earlier clusters' networks
    earlier_subnets: list[tuple[str, Network]] = []  # (description, subnet) of earlier clusters' node subnets
    for cluster, nets in clusters:
        subnet = cluster.interface.network if cluster.interface is not None else None
        for position, (at, net) in enumerate(nets):
            clashes = [f"{other} ({other_at}) of the same cluster" for other_at, other in nets[:position]
                       if net.overlaps(other)]  # fmt: skip
            if subnet is not None and net.overlaps(subnet):
                clashes.append(f"the cluster's node subnet {subnet} (node_ip)")
            clashes += [f"reserved network {other} ({other_at})" for other_at, other in reserved if net.overlaps(other)]
            clashes += [f"{other}, which another cluster uses ({other_at})" for other_at, other in others
                        if net.overlaps(other)]  # fmt: skip
            clashes += [f"{other} ({other_at})" for other_at, other in earlier_nets if net.overlaps(other)]
            clashes += [f"{what}" for what, other in earlier_subnets if net.overlaps(other)]
            problems.extend(Problem(at, f"{net} overlaps {clash}; give it a range of its own") for clash in clashes)
        if subnet is not None:  # earlier clusters' networks against this cluster's node subnet
            what = f"the node subnet {subnet} of cluster {cluster.name!r} ({cluster.where}.node_ip)"
            problems.extend(
                Problem(other_at, f"{other} overlaps {what}; give it a range of its own")
                for other_at, other in earlier_nets
                if other.overlaps(subnet)
            )
            earlier_subnets.append((what, subnet))
        earlier_nets.extend(nets)


def check_inventory(
    clusters: Any, pools: Any, reserved_networks: Any = None, other_networks: Any = None
) -> tuple[Checked, list[Problem]]:
    """Every problem of the inventory that needs no request, and what of it is valid."""
    problems: list[Problem] = []
    checked = Checked(pools=check_pools(problems, pools))
    reserved = _networks(problems, "reserved_networks", reserved_networks)
    others = _networks(problems, "other_networks", other_networks)
    if not isinstance(clusters, list) or not clusters:
        problems.append(Problem("clusters", "must list at least one cluster (the hosts of group metal_clusters)"))
        return checked, problems
    names: dict[str, int] = {}
    node_ips: dict[ipaddress.IPv4Address, Cluster] = {}
    with_networks: list[tuple[Cluster, list[tuple[str, Network]]]] = []
    for index, entry in enumerate(clusters):
        if not isinstance(entry, Mapping):
            problems.append(Problem(f"clusters[{index}]", "must be a mapping"))
            continue
        cluster = _check_cluster(problems, index, entry, checked.pools)
        checked.clusters.append(cluster)
        if cluster.name in names:
            problems.append(
                Problem(
                    f"{cluster.where}.name",
                    f"{cluster.name!r} is also the name of clusters[{names[cluster.name]}]; cluster names are unique",
                )
            )
        names.setdefault(cluster.name, index)
        if not cluster.present:
            continue
        if cluster.interface is not None:
            first = node_ips.setdefault(cluster.interface.ip, cluster)
            if first is not cluster:
                problems.append(
                    Problem(
                        f"{cluster.where}.node_ip",
                        f"{cluster.interface.ip} is also the node IP of cluster {first.name!r} ({first.where}); "
                        "give each node its own address",
                    )
                )
        nets = _networks(problems, f"{cluster.where}.networks", entry.get("networks"))
        # The pod and service CIDRs are the cluster's networks too: compared like cluster_networks entries
        # unless one of those already holds them.
        nets += node_rules.cluster_extra_networks(cluster.where, cluster.node, nets)
        cluster.networks = [net for _at, net in nets]
        with_networks.append((cluster, nets))
    _check_overlaps(problems, with_networks, reserved, others)
    metal3_pools = sorted({cl.pool for cl in checked.clusters if cl.metal3 is not None and cl.pool in checked.pools})
    if metal3_pools:
        from ansible_collections.metalplane.inference.plugins.module_utils._metal3 import preflight as m3

        for name in metal3_pools:
            pool = checked.pools[name]
            m3.check_hosts(problems, pool.where, pool.entry_index, pool.hosts)
    problems.extend(
        node_rules.check_lb_across(
            [(cl.name, cl.where, cl.interface, cl.node) for cl in checked.clusters if cl.present]
        )
    )
    return checked, problems


# --------------------------------------------------------------------------------------------- stage 2: claims
@dataclass
class ClusterPlan:
    """What a cluster holds or would get; ``skipped`` says why other hosts were passed over."""

    cluster: Cluster
    claim: str = "none"  # one of CLAIM_STATES
    host: Host | None = None
    generation: int | None = None
    lease: str | None = None
    bare_metal_host: str | None = None  # namespace/name, with provisioner metal3
    releases: list[str] = field(default_factory=list)  # hosts a state=absent run releases
    skipped: list[dict[str, Any]] = field(default_factory=list)
    iso: dict[str, Any] | None = None
    # What the BMC of a newly planned host reported when it was probed: its GPU models and BIOS reading.
    observed: dict[str, Any] | None = None

    def summary(self, pools: Mapping[str, Pool]) -> dict[str, Any]:
        cluster = self.cluster
        host = None
        if self.host is not None:
            pool = pools[cluster.pool]
            host = {**self.host.public(), "root_disk": pool.root_disks.get(self.host.name)}
        return {
            "name": cluster.name,
            "state": cluster.state,
            "pool": cluster.pool,
            "provisioner": cluster.provisioner,
            "node_ip": str(cluster.interface) if cluster.interface is not None else None,
            "claim": self.claim,
            "host": host,
            "generation": self.generation,
            "lease": self.lease,
            "bare_metal_host": self.bare_metal_host,
            "releases": list(self.releases),
            "skipped_hosts": list(self.skipped),
            "iso": self.iso,
            "node": cluster.node.summary() if cluster.present else None,
        }


def _skip_line(skipped: Sequence[Mapping[str, Any]]) -> str:
    return "; ".join(f"{s['name']}: {s['status']} ({s['reason']})" for s in skipped) or "the pool lists no valid host"


def _plan_absent(cluster: Cluster, pool: Pool, leases: Sequence[Mapping[str, Any]], plan: ClusterPlan) -> list[Problem]:
    """A release only ever touches this cluster's own claims: a pinned host someone else holds is the problem."""
    if cluster.host:
        claim = c.claims_by_host(pool.name, pool.hosts, leases).get(cluster.host)
        if claim is not None and claim.held and claim.cluster != cluster.name:
            return [
                Problem(
                    f"{cluster.where}.host",
                    f"host {cluster.host!r} of pool {pool.name!r} is claimed by cluster {claim.cluster!r} "
                    f"(since {claim.since}, by {claim.claimer or 'unknown'}), not {cluster.name!r}; a release would "
                    "need force: correct the host, or release it from that cluster",
                )
            ]
        held = [claim] if claim is not None and claim.held else []
    else:
        held = [c.claim_from_lease(o) for o in leases if (o.get("spec") or {}).get("holderIdentity") == cluster.name]
    plan.releases = sorted(h.host or h.lease for h in held)
    plan.claim = "release" if held else "none"
    return []


def _first_fit(
    plan: ClusterPlan, pool: Pool, candidates: Sequence[Host], probe: Probe | None, planned: dict[tuple[str, str], str]
) -> None:
    """The first candidate not planned for an earlier cluster whose BMC answers and fits (host_claim's order)."""
    for host in candidates:
        other = planned.get((pool.name, host.name))
        if other is not None:
            reason = f"planned for cluster {other!r}, listed earlier in the inventory"
            plan.skipped.append({"name": host.name, "status": "planned", "reason": reason})
            continue
        detail: Any = None
        if probe is not None:
            status, detail = probe(host, plan.cluster.requirements)
            if status != "ok":
                reason = str(detail) if status == "unreachable" else "; ".join(detail["reasons"])
                plan.skipped.append({"name": host.name, "status": status, "reason": reason})
                continue
        plan.claim, plan.host = "new", host
        plan.observed = detail if probe is not None and isinstance(detail, dict) else None
        planned[(pool.name, host.name)] = plan.cluster.name
        return


def _plan_present(
    plan: ClusterPlan,
    pool: Pool,
    leases: Sequence[Mapping[str, Any]],
    probe: Probe | None,
    *,
    planned: dict[tuple[str, str], str],
    namespace: str,
) -> list[Problem]:
    cluster = plan.cluster
    choice = c.choose_host(pool.name, pool.hosts, leases, cluster.name, cluster.requirements, only=cluster.host)
    if choice.held:
        claim = choice.held[0]
        plan.claim, plan.host, plan.generation = "held", pool.host(claim.host), claim.generation
        plan.lease = f"{namespace}/{claim.lease}"
        if cluster.host and claim.host != cluster.host:
            return [
                Problem(
                    f"{cluster.where}.host",
                    f"cluster {cluster.name!r} already holds host {claim.host!r} of pool {pool.name!r}, not "
                    f"{cluster.host!r}; release it first (state: absent) or pin {claim.host!r}",
                )
            ]
        return _root_disk_problems(plan, pool)
    if choice.strays:
        names = ", ".join(s.host or s.lease for s in choice.strays)
        return [
            Problem(
                f"{cluster.where}.pool",
                f"cluster {cluster.name!r} holds host(s) {names} of pool {pool.name!r}, which the pool no longer "
                "lists; put them back in the pool or release them (host_claim state=absent, host=<name>)",
            )
        ]
    plan.skipped = list(choice.skipped)
    _first_fit(plan, pool, choice.candidates, probe, planned)
    if plan.host is not None:
        return _root_disk_problems(plan, pool)
    wanted = cluster.requirements.as_dict()
    if cluster.host:
        return [
            Problem(
                f"{cluster.where}.host",
                f"host {cluster.host!r} of pool {pool.name!r} cannot be claimed for cluster {cluster.name!r} "
                f"(requirements {wanted}): {_skip_line(plan.skipped)}",
            )
        ]
    return [
        Problem(
            f"{cluster.where}.pool",
            f"no free host of pool {pool.name!r} fits cluster {cluster.name!r} (requirements {wanted}): "
            f"{_skip_line(plan.skipped)}; add a host to group pool_{pool.name} or release one",
        )
    ]


# (kubeconfig or None for the module's own, namespace) -> every BareMetalHost there.
BareMetalHosts = Mapping[tuple[Union[str, None], str], Sequence[Mapping[str, Any]]]  # noqa: UP007


def metal3_reads(checked: Checked) -> list[tuple[str | None, str]]:
    """The (kubeconfig, namespace) pairs whose BareMetalHosts stage 2 reads: one list call each."""
    return sorted(
        {(cl.metal3.kubeconfig, cl.metal3.namespace) for cl in checked.clusters if cl.metal3 is not None},
        key=lambda pair: (pair[0] or "", pair[1]),
    )


def _plan_metal3(
    plan: ClusterPlan, pool: Pool, bare_metal_hosts: BareMetalHosts, planned: dict[tuple[str, str], str]
) -> list[Problem]:
    from ansible_collections.metalplane.inference.plugins.module_utils._metal3 import preflight as m3

    cluster = plan.cluster
    settings = cluster.metal3
    outcome, problems = m3.plan_cluster(
        cluster=cluster.name,
        where=cluster.where,
        present=cluster.present,
        pinned=cluster.host,
        pool=pool.name,
        pool_where=pool.where,
        entry_index=pool.entry_index,
        hosts=pool.hosts,
        requirements=cluster.requirements,
        settings=settings,
        in_namespace=bare_metal_hosts.get((settings.kubeconfig, settings.namespace), []),
        planned=planned,
    )
    plan.claim, plan.generation, plan.bare_metal_host = outcome.claim, outcome.generation, outcome.bare_metal_host
    plan.host = pool.host(outcome.host) if outcome.host else None
    plan.releases, plan.skipped = outcome.releases, outcome.skipped
    return problems


def plan_claims(
    checked: Checked,
    leases_by_pool: Mapping[str, Sequence[Mapping[str, Any]]],
    probe: Probe | None,
    namespace: str,
    bare_metal_hosts: BareMetalHosts | None = None,
) -> tuple[list[ClusterPlan], list[Problem]]:
    """Per cluster, the host it holds or the one ``host_claim`` (``metal3_host`` with provisioner metal3) would give
    it (pure, given the Leases, the BareMetalHosts and the probe). Clusters are planned in inventory order; a host
    planned for one is not planned for a later one."""
    problems: list[Problem] = []
    plans: list[ClusterPlan] = []
    planned: dict[tuple[str, str], str] = {}  # (pool, host) -> the cluster it is planned for in this run
    for cluster in checked.clusters:
        plan = ClusterPlan(cluster)
        plans.append(plan)
        pool = checked.pools.get(cluster.pool)
        if pool is None:
            continue
        if cluster.metal3 is not None:
            problems.extend(_plan_metal3(plan, pool, bare_metal_hosts or {}, planned))
            continue
        leases = leases_by_pool.get(pool.name, [])
        if cluster.present:
            problems.extend(_plan_present(plan, pool, leases, probe, planned=planned, namespace=namespace))
        else:
            problems.extend(_plan_absent(cluster, pool, leases, plan))
    return plans, problems


def _root_disk_problems(plan: ClusterPlan, pool: Pool) -> list[Problem]:
    """An ISO install writes one disk, named by WWN or serial: the host a cluster gets must say which."""
    host = plan.host
    if host is None or plan.cluster.provisioner not in ISO_PROVISIONERS or host.name in pool.root_disks:
        return []
    how = "holds" if plan.claim == "held" else "would get"
    return [
        Problem(
            f"{pool.host_where(host.name)}.root_disk",
            f"host {host.name!r}, which cluster {plan.cluster.name!r} {how}, has no root_disk: give the install "
            "disk's wwn or serial from the BMC's storage inventory (the installer writes to that disk only)",
        )
    ]


# --------------------------------------------------------------------------------------------- stage 2b: matrix
def check_bmc_matrix(plans: Sequence[ClusterPlan], pools: Mapping[str, Pool]) -> tuple[list[Problem], list[str]]:
    """The driver matrix with the GPUs and BIOS (Secure Boot, MMIO above 4 GB) of each host a cluster would claim.

    Only new claims: they are what the run is about to write. A held host was checked before it was claimed, and
    the nvidia_driver role reads Secure Boot again on the node before it installs anything.
    """
    problems: list[Problem] = []
    warnings: list[str] = []
    for plan in plans:
        if plan.claim != "new" or plan.host is None or plan.observed is None:
            continue
        pool = pools[plan.cluster.pool]
        found, warned = node_rules.bmc_matrix_problems(
            plan.cluster.where,
            pool.host_where(plan.host.name),
            plan.cluster.node,
            plan.observed.get("gpus") or [],
            plan.observed.get("bios"),
        )
        problems.extend(
            Problem(p.field, f"host {plan.host.name!r}, which cluster {plan.cluster.name!r} would claim: {p.msg}")
            for p in found
        )
        warnings.extend(f"{plan.cluster.name}: {w}" for w in warned)
    return problems, warnings


def check_kubernetes_releases(checked: Checked, fetch: kube_release.Fetch) -> tuple[list[Problem], list[str]]:
    """Each present cluster's Kubernetes version against the package repository of its minor (read-only)."""
    wanted = [
        kube_release.Wanted(
            cluster.where,
            cluster.node.kubernetes,
            cluster.node.package_family,
            cluster.node.package_repository or kube_release.DEFAULT_REPOSITORY,
        )
        for cluster in checked.clusters
        if cluster.present and cluster.node.kubernetes is not None
    ]
    return kube_release.check_available(wanted, fetch)


# --------------------------------------------------------------------------------------------- stage 3: ISOs
def check_isos(plans: Sequence[ClusterPlan], check: IsoCheck) -> list[Problem]:
    """Each distinct (URL, sha256) once: downloaded and verified when a cluster installs from it (a new claim),
    else found in the cache or reached (and, in check mode, only ever reached) by ``check``."""
    problems: list[Problem] = []
    using = [
        plan
        for plan in plans
        if plan.cluster.present
        and plan.cluster.iso_url
        and plan.cluster.iso_sha256
        # Set but unused by other provisioners (metal3 writes a node image): not fetched.
        and plan.cluster.provisioner in ISO_PROVISIONERS
    ]
    installs: dict[tuple[str, str], bool] = {}
    for plan in using:
        key = (str(plan.cluster.iso_url), str(plan.cluster.iso_sha256))
        installs[key] = installs.get(key, False) or plan.claim == "new"
    done: dict[tuple[str, str], dict[str, Any] | InputError] = {}
    for key, install in installs.items():
        try:
            done[key] = check(*key, install)
        except InputError as exc:
            done[key] = exc
    for plan in using:
        cluster = plan.cluster
        outcome = done[(str(cluster.iso_url), str(cluster.iso_sha256))]
        if isinstance(outcome, InputError):
            problems.append(Problem.from_input_error(outcome, cluster.where, ISO_FIELDS))
            plan.iso = {"url": cluster.iso_url, "sha256": cluster.iso_sha256, "status": "failed"}
        else:
            plan.iso = {"url": cluster.iso_url, "sha256": cluster.iso_sha256, **outcome}
    return problems


def iso_checker(
    cache_dir: Path, *, download: bool, timeout: int, validate_certs: bool, ca_cert: str | None
) -> IsoCheck:
    """The real ``IsoCheck``: ``boot_iso``'s cache and verification, downloading only when ``download`` (not check
    mode) and a cluster installs from the ISO; otherwise a cached or local ISO, or a HEAD request."""

    def check(url: str, sha256: str, install: bool) -> dict[str, Any]:
        path, downloaded = boot_iso.fetch_verified(
            url,
            sha256,
            cache_dir,
            download=download and install,
            timeout=timeout,
            validate_certs=validate_certs,
            ca_cert=ca_cert,
        )
        if path is not None:
            status = "downloaded" if downloaded else ("cached" if path.parent == cache_dir else "local")
            return {"status": status, "path": str(path), "verified": True}
        boot_iso.source_reachable(url, timeout=timeout, validate_certs=validate_certs, ca_cert=ca_cert)
        return {"status": "reachable", "path": None, "verified": False}

    return check


# --------------------------------------------------------------------------------------------- the module
def bmc_probe(open_bmc: Any) -> Probe:
    """A ``Probe`` over ``host_claim``'s read-only BMC check, asked once per host and requirements."""
    from .claim_run import _probe

    seen: dict[tuple[str, Requirements], tuple[str, Any]] = {}

    def probe(host: Host, requirements: Requirements) -> tuple[str, Any]:
        key = (host.name, requirements)
        if key not in seen:
            status, detail, bmc = _probe(open_bmc, host, requirements)
            if bmc is not None:
                # The host fits, so it is the one the cluster would claim: read its BIOS with the same connection
                # (GETs only) for the driver matrix. A BMC that cannot say reads as unknown, never as a failure.
                read_bios = getattr(bmc, "bios", None)
                try:
                    detail = {**detail, "bios": read_bios() if read_bios is not None else None}
                except MetalplaneError:
                    detail = {**detail, "bios": None}
                finally:
                    bmc.close()
            seen[key] = (status, detail)
        return seen[key]

    return probe


def read_leases(store: Any, namespace: str, pools: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """One Lease list per pool (the pool's label selector), as ``host_claim`` reads it."""
    return {pool: store.list(namespace, c.pool_selector(pool)) for pool in pools}


def _check_options(module: Any) -> tuple[Checked, list[Problem]]:
    """Stage 1 over the module's options (the BMC passwords and root hashes are no_log suboptions)."""
    params = module.params
    pools = params.get("pools") or []
    checked, problems = check_inventory(
        params.get("clusters") or [], pools, params.get("reserved_networks"), params.get("other_networks")
    )
    timeout = params.get("api_timeout")
    if not isinstance(timeout, int) or timeout <= 0:
        problems.append(Problem("api_timeout", f"must be a positive number of seconds, got {timeout!r}"))
    if not params.get("kubeconfig"):
        problems.append(
            Problem(
                "kubeconfig", "the Modelplane control plane's kubeconfig is required (or set MODELPLANE_KUBECONFIG)"
            )
        )
    return checked, problems


def _read_claims(
    module: Any, checked: Checked, store_factory: Callable[[Mapping[str, Any]], Any] | None, namespace: str
) -> tuple[dict[str, list[dict[str, Any]]], list[Problem]]:
    """Stage 2's one read of the control plane: the Leases of every pool a cluster names."""
    from .claim_run import opened_store

    used = sorted({cl.pool for cl in checked.clusters if cl.pool in checked.pools and cl.metal3 is None})
    if not used:  # only metal3 clusters: their claims are BareMetalHosts, read by _read_bare_metal_hosts
        return {}, []
    try:
        with opened_store(module, store_factory) as store:
            return read_leases(store, namespace, used), []
    except MetalplaneError as exc:
        return {}, [
            Problem(
                "kubeconfig", f"cannot read the host claims (Leases in {namespace}) on the control plane: {exc.msg}"
            )
        ]


def _read_bare_metal_hosts(
    module: Any, checked: Checked, store_factory: Callable[[Mapping[str, Any]], Any] | None
) -> tuple[dict[tuple[str | None, str], list[dict[str, Any]]], list[Problem]]:
    """Stage 2's read for metal3 clusters: every BareMetalHost of each namespace they name (one list call each)."""
    from ansible_collections.metalplane.inference.plugins.module_utils._kube import object_store
    from ansible_collections.metalplane.inference.plugins.module_utils._metal3 import bmh as b

    found: dict[tuple[str | None, str], list[dict[str, Any]]] = {}
    problems: list[Problem] = []
    for kubeconfig, namespace in metal3_reads(checked):
        where = next(cl.where for cl in checked.clusters if cl.metal3 is not None and cl.metal3.namespace == namespace)
        reader = _Reader(module, {**module.params, "kubeconfig": kubeconfig or module.params.get("kubeconfig")})
        try:
            with object_store.opened_store(reader, store_factory, object_store.connect) as store:
                found[(kubeconfig, namespace)] = store.list(b.API_VERSION, b.KIND, namespace, None)
        except MetalplaneError as exc:
            field_name = f"{where}.metal3.kubeconfig" if kubeconfig else "kubeconfig"
            problems.append(Problem(field_name, f"cannot read the BareMetalHosts in {namespace}: {exc.msg}"))
    return found, problems


class _Reader:
    """The module, seen with another kubeconfig (a metal3 cluster's management cluster)."""

    def __init__(self, module: Any, params: Mapping[str, Any]) -> None:
        self.module = module
        self.params = params

    def require(self, library: str, import_traceback: str | None) -> None:
        self.module.require(library, import_traceback)


def run_metal_preflight(
    module: Any,
    *,
    store_factory: Callable[[Mapping[str, Any]], Any] | None = None,
    metal3_store_factory: Callable[[Mapping[str, Any]], Any] | None = None,
    bmc_opener: Callable[[Host], Any] | None = None,
    iso_check: IsoCheck | None = None,
    release_fetch: kube_release.Fetch | None = None,
) -> dict[str, Any]:
    """``metal_preflight``: shape, then claims and BMCs, then ISOs; fail once listing every problem."""
    from .claim_run import open_redfish, require_sushy

    params = module.params
    checked, problems = _check_options(module)
    if problems:
        raise PreflightError(problems)
    namespace = str(params.get("namespace") or c.DEFAULT_NAMESPACE)
    timeout = int(params["api_timeout"])
    probe: Probe | None = None
    if params.get("check_bmcs", True) is not False:
        if bmc_opener is None:
            require_sushy(module)
            bmc_opener = open_redfish(timeout)
        probe = bmc_probe(bmc_opener)
    leases, problems = _read_claims(module, checked, store_factory, namespace)
    bare_metal_hosts, more_problems = _read_bare_metal_hosts(module, checked, metal3_store_factory)
    problems.extend(more_problems)
    plans = [ClusterPlan(cluster) for cluster in checked.clusters]
    warnings: list[str] = []
    if not problems:
        plans, problems = plan_claims(checked, leases, probe, namespace, bare_metal_hosts)
    if not problems:
        problems, warnings = check_bmc_matrix(plans, checked.pools)
    if not problems and params.get("check_package_repositories") is True:  # the module defaults it to true
        problems, more = check_kubernetes_releases(checked, release_fetch or kube_release.http_fetch(timeout))
        warnings.extend(more)
    if iso_check is None:
        iso_check = iso_checker(
            Path(params.get("iso_cache_dir") or boot_iso.DEFAULT_CACHE_DIR).expanduser(),
            download=not module.check_mode,
            timeout=timeout,
            validate_certs=params.get("iso_validate_certs", True) is not False,
            ca_cert=params.get("iso_ca_cert"),
        )
    problems.extend(check_isos(plans, iso_check))
    if problems:
        raise PreflightError(problems)
    for warning in warnings:
        module.warn(warning)
    return {"changed": False, "clusters": [plan.summary(checked.pools) for plan in plans]}
