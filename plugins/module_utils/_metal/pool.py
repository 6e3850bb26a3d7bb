# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A pool's hosts, the cluster's requirements, and whether a host meets them.

Why: a pool is what the inventory says (group ``pool_<name>``: BMC address, credentials, boot MAC and
the facts a person wrote down), and a claim must not trust it blindly: a host whose BMC does not
answer, or whose Redfish inventory (model, PCIe GPUs, memory, NICs) contradicts the cluster's
requirements, is reported and never claimed. Parsing and matching are pure functions (table-tested);
the one function that talks to a BMC, ``read_inventory``, reuses the Redfish client of the Redfish
modules (``_redfish/session.py``) and its PCIe/NIC readers (``_redfish/info.py``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError

# An EUI-48 MAC as Metal3's ``bootMACAddress`` and Redfish ``MACAddress`` write it (``xx:xx:xx:xx:xx:xx``);
# dashes are accepted on input (Windows/Dell tools print them) and normalised to colons, lower case.
_MAC = re.compile(r"^[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(\1[0-9A-Fa-f]{2}){4}$")
# Keys a host entry may carry; anything else is a typo that would be silently ignored.
HOST_KEYS = (
    "name",
    "bmc_url",
    "username",
    "password",
    "personality",
    "boot_mac",
    "validate_certs",
    "ca_cert",
    "facts",
    "root_disk",
    "system_path",
)
# Facts a person may write about a host, checked against the requirements before any BMC is asked.
FACT_KEYS = ("gpu_model", "gpu_count", "memory_gib", "disks", "model")
# A host name becomes part of a Lease name and a label value; Ansible inventory names are looser, so only
# control characters and whitespace (never valid in an inventory host name) are refused here.
_HOST_NAME = re.compile(r"^[^\s\x00-\x1f]{1,253}$")


@dataclass(frozen=True)
class Requirements:
    """What a free host must have for the cluster (all optional; an empty one matches every host)."""

    gpu_model: str | None = None  # case-insensitive substring of the GPU's Redfish Model/Name, e.g. "V100"
    gpu_count: int | None = None  # at least this many GPUs
    min_memory_gib: int | None = None  # MemorySummary.TotalSystemMemoryGiB at least this

    def as_dict(self) -> dict[str, Any]:
        return {"gpu_model": self.gpu_model, "gpu_count": self.gpu_count, "min_memory_gib": self.min_memory_gib}


@dataclass(frozen=True)
class Host:
    """One BMC of the pool, validated. ``password`` never leaves this object (not in ``public()``)."""

    name: str
    bmc_url: str
    username: str
    password: str = field(repr=False)
    boot_mac: str
    personality: str | None = None
    validate_certs: bool = True
    ca_cert: str | None = None
    facts: Mapping[str, Any] = field(default_factory=dict)
    # The install disk by a stable identity, ``{"wwn": "0x..."}`` or ``{"serial": "..."}``; recorded with the
    # claim at install time, so a teardown wipes that disk even if the inventory changed since.
    root_disk: Mapping[str, str] = field(default_factory=dict)
    # The Redfish System of a BMC that serves several (``/redfish/v1/Systems/<id>``); Metal3's generic
    # redfish-virtualmedia address names it. An iDRAC has one, at a fixed path.
    system_path: str | None = None

    def credentials(self) -> dict[str, str]:
        """The BMC login, as a Metal3 credentials Secret holds it (``username``, ``password``)."""
        return {"username": self.username, "password": self.password}

    def public(self) -> dict[str, Any]:
        """What a result may show about the host (no credentials)."""
        return {
            "name": self.name,
            "bmc_url": self.bmc_url,
            "boot_mac": self.boot_mac,
            "personality": self.personality,
            "facts": dict(self.facts),
            "root_disk": dict(self.root_disk),
            "system_path": self.system_path,
        }


@dataclass
class Inventory:
    """What a BMC says about its server (the parts the requirements look at)."""

    manufacturer: str | None = None
    model: str | None = None
    memory_gib: float | None = None
    gpus: list[str] = field(default_factory=list)  # one model string per GPU
    macs: list[str] = field(default_factory=list)  # normalised NIC MACs

    def as_dict(self) -> dict[str, Any]:
        return {
            "manufacturer": self.manufacturer,
            "model": self.model,
            "memory_gib": self.memory_gib,
            "gpu_count": len(self.gpus),
            "gpus": list(self.gpus),
            "macs": list(self.macs),
        }


# The inventory variables of a pool host (group ``pool_<name>``) and the host entry key each one fills; the
# variable names are the collection's inventory convention (docs/roles/baremetal_host.md), the keys ``HOST_KEYS``.
POOL_HOST_VARIABLES: tuple[tuple[str, str, Any], ...] = (
    # (entry key, inventory variable, value when the variable is not set)
    ("bmc_url", "bmc_url", ""),
    ("username", "bmc_username", ""),
    ("password", "bmc_password", ""),
    ("personality", "bmc_personality", None),
    ("boot_mac", "boot_mac", ""),
    ("validate_certs", "bmc_validate_certs", True),
    ("ca_cert", "bmc_ca_cert", None),
    ("root_disk", "root_disk", {}),
    ("system_path", "bmc_system_path", None),
    ("facts", "host_facts", {}),
)
POOL_GROUP_PREFIX = "pool_"


def pools_from_inventory(
    pool_names: Sequence[str], groups: Mapping[str, Sequence[str]], host_vars: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """``[{name, hosts}]`` for each distinct pool name, its hosts as ``host_claim`` takes them.

    A variable the inventory does not set is passed empty (not left out), so the module that checks the entry
    names the field (``hosts[<i>].bmc_url``) instead of a Jinja undefined-variable error naming nothing useful.
    """
    pools: list[dict[str, Any]] = []
    for pool in dict.fromkeys(str(name) for name in pool_names if name):
        hosts = []
        for host in groups.get(POOL_GROUP_PREFIX + pool, ()):
            known = host_vars.get(host, {})
            entry = {"name": host}
            for key, variable, missing in POOL_HOST_VARIABLES:
                value = known.get(variable)
                entry[key] = missing if value is None else value
            hosts.append(entry)
        pools.append({"name": pool, "hosts": hosts})
    return pools


def normalise_mac(field_name: str, value: Any) -> str:
    """``AA-BB-...`` or ``aa:bb:...`` -> ``aa:bb:...``; anything else is an InputError naming the field."""
    text = str(value or "").strip()
    if not _MAC.match(text):
        raise InputError(field_name, f"{text!r} is not a MAC address; write six hex pairs, e.g. 00:5c:52:31:3a:9c")
    return text.replace("-", ":").lower()


def _positive_int(field_name: str, value: Any) -> int | None:
    """A whole number of at least 1, or None; a string of digits counts (``"2"``, as Ansible's int options take
    it), a word, a fraction or a boolean does not."""
    if value is None:
        return None
    if isinstance(value, str) and re.match(r"^\s*[-+]?\d+\s*$", value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(field_name, f"must be a whole number, got {value!r}")
    if value < 1:
        raise InputError(field_name, f"must be 1 or more, got {value}")
    return value


def parse_requirements(value: Mapping[str, Any] | None) -> Requirements:
    """Validate the ``requirements`` option."""
    value = value or {}
    unknown = sorted(set(value) - {"gpu_model", "gpu_count", "min_memory_gib"})
    if unknown:
        raise InputError("requirements", f"unknown keys {unknown}; allowed: gpu_model, gpu_count, min_memory_gib")
    model = value.get("gpu_model")
    if model is not None and not str(model).strip():
        raise InputError("requirements.gpu_model", "must not be empty; omit it to accept any GPU model")
    return Requirements(
        gpu_model=str(model).strip() if model is not None else None,
        gpu_count=_positive_int("requirements.gpu_count", value.get("gpu_count")),
        min_memory_gib=_positive_int("requirements.min_memory_gib", value.get("min_memory_gib")),
    )


def parse_root_disk(field_name: str, value: Any) -> dict[str, str]:
    """``{"wwn": "0x<hex>"}`` or ``{"serial": "..."}`` (none when not given); InputError naming ``field_name``."""
    from .host_settings import validate_disk

    if not value or not any(v not in (None, "") for v in dict(value).values()):
        return {}
    if not isinstance(value, Mapping):
        raise InputError(field_name, f"must be a mapping with wwn or serial, got {type(value).__name__}")
    try:
        kind, ident = validate_disk(dict(value))
    except InputError as exc:
        raise InputError(field_name + exc.field.removeprefix("disk"), exc.msg.split(": ", 1)[-1]) from None
    return {"wwn": f"0x{ident}"} if kind == "wwn" else {"serial": ident}


def _system_path(field_name: str, value: Any) -> str | None:
    if value in (None, ""):
        return None
    path = str(value).strip().rstrip("/")
    if not re.match(r"^/redfish/v1/Systems/[^/\s]+$", path):
        raise InputError(field_name, f"{value!r} must be a Redfish System path, e.g. /redfish/v1/Systems/1")
    return path


def parse_hosts(value: Sequence[Mapping[str, Any]] | None, pool: str) -> list[Host]:
    """Validate the ``hosts`` option: at least one host, unique names and MACs, well-formed fields."""
    # Imported here: ``_redfish.args`` imports Ansible's env_fallback, which the unit tests have anyway.
    from ansible_collections.metalplane.inference.plugins.module_utils._redfish.args import parse_bmc_url

    if not value:
        raise InputError("hosts", f"pool {pool!r} has no hosts; list the BMCs of group pool_{pool}")
    hosts: list[Host] = []
    names: set[str] = set()
    macs: dict[str, str] = {}
    for index, entry in enumerate(value):
        where = f"hosts[{index}]"
        if not isinstance(entry, Mapping):
            raise InputError(
                where,
                f"must be a mapping with name, bmc_url, username, password and boot_mac, got {type(entry).__name__}",
            )
        unknown = sorted(set(entry) - set(HOST_KEYS))
        if unknown:
            raise InputError(where, f"unknown keys {unknown}; allowed: {', '.join(HOST_KEYS)}")
        name = str(entry.get("name") or "").strip()
        if not _HOST_NAME.match(name):
            raise InputError(f"{where}.name", f"{name!r} is not a host name (1 to 253 characters, no spaces)")
        if name in names:
            raise InputError(f"{where}.name", f"host {name!r} is listed twice in pool {pool!r}")
        names.add(name)
        if not entry.get("bmc_url"):
            raise InputError(f"{where}.bmc_url", f"host {name!r} has no bmc_url; write https://<bmc>[:port]")
        try:
            parse_bmc_url(str(entry["bmc_url"]))
        except InputError as exc:
            raise InputError(f"{where}.bmc_url", exc.msg.split(": ", 1)[-1]) from None
        for key in ("username", "password"):
            if not entry.get(key):
                raise InputError(f"{where}.{key}", f"host {name!r} has no BMC {key} (keep it in a vault)")
        mac = normalise_mac(f"{where}.boot_mac", entry.get("boot_mac"))
        if mac in macs:
            raise InputError(f"{where}.boot_mac", f"{mac} is also the boot MAC of host {macs[mac]!r}")
        macs[mac] = name
        facts = entry.get("facts") or {}
        if not isinstance(facts, Mapping):
            raise InputError(f"{where}.facts", f"must be a mapping, got {type(facts).__name__}")
        validate_certs = entry.get("validate_certs")
        hosts.append(
            Host(
                name=name,
                bmc_url=str(entry["bmc_url"]).strip(),
                username=str(entry["username"]),
                password=str(entry["password"]),
                boot_mac=mac,
                personality=str(entry["personality"]) if entry.get("personality") else None,
                validate_certs=True if validate_certs is None else bool(validate_certs),
                ca_cert=str(entry["ca_cert"]) if entry.get("ca_cert") else None,
                facts=dict(facts),
                root_disk=parse_root_disk(f"{where}.root_disk", entry.get("root_disk")),
                system_path=_system_path(f"{where}.system_path", entry.get("system_path")),
            )
        )
    return hosts


def _gpu_matches(wanted: str, model: str) -> bool:
    """Case-insensitive substring, ignoring spaces, dashes and underscores ("v100" in "Tesla V100-PCIE-32GB")."""

    def squash(text: str) -> str:
        return re.sub(r"[\s_-]+", "", text).lower()

    return squash(wanted) in squash(model)


def fact_mismatches(requirements: Requirements, facts: Mapping[str, Any]) -> list[str]:
    """Requirements the inventory's own facts already rule out (no BMC needed); one line each."""
    reasons: list[str] = []
    model = facts.get("gpu_model")
    if requirements.gpu_model and model and not _gpu_matches(requirements.gpu_model, str(model)):
        reasons.append(f"gpu_model: the inventory says {model!r}, the cluster needs {requirements.gpu_model!r}")
    count = facts.get("gpu_count")
    if requirements.gpu_count and isinstance(count, int) and count < requirements.gpu_count:
        reasons.append(f"gpu_count: the inventory says {count}, the cluster needs at least {requirements.gpu_count}")
    memory = facts.get("memory_gib")
    if requirements.min_memory_gib and isinstance(memory, (int, float)) and memory < requirements.min_memory_gib:
        reasons.append(
            f"min_memory_gib: the inventory says {memory:g} GiB,"
            f" the cluster needs at least {requirements.min_memory_gib}"
        )
    return reasons


def inventory_mismatches(requirements: Requirements, inventory: Inventory, boot_mac: str) -> list[str]:
    """Where the BMC's inventory contradicts the requirements or the host entry; one line each, empty = fits."""
    reasons: list[str] = []
    if requirements.gpu_model or requirements.gpu_count:
        matching = (
            [g for g in inventory.gpus if _gpu_matches(requirements.gpu_model, g)]
            if requirements.gpu_model
            else list(inventory.gpus)
        )
        needed = requirements.gpu_count or 1
        if len(matching) < needed:
            seen = ", ".join(inventory.gpus) if inventory.gpus else "no GPU"
            what = f"{needed} GPU(s)" + (f" matching {requirements.gpu_model!r}" if requirements.gpu_model else "")
            field_name = "gpu_model" if requirements.gpu_model and inventory.gpus and not matching else "gpu_count"
            reasons.append(f"{field_name}: Redfish lists {seen} among the PCIe devices, the cluster needs {what}")
    if requirements.min_memory_gib:
        if inventory.memory_gib is None:
            reasons.append("min_memory_gib: Redfish reports no MemorySummary.TotalSystemMemoryGiB to check it against")
        elif inventory.memory_gib < requirements.min_memory_gib:
            reasons.append(
                f"min_memory_gib: Redfish reports {inventory.memory_gib:g} GiB, "
                f"the cluster needs at least {requirements.min_memory_gib}"
            )
    # A BMC that lists NICs but not the boot MAC would have the installer wait for a DHCP/boot that never comes.
    if inventory.macs and boot_mac not in inventory.macs:
        reasons.append(f"boot_mac: {boot_mac} is not one of the server's NICs ({', '.join(inventory.macs)})")
    return reasons


def inventory_from(
    system: Mapping[str, Any], pcie: Sequence[Mapping[str, Any]], nics: Sequence[Mapping[str, Any]]
) -> Inventory:
    """An ``Inventory`` from the System document and ``_redfish.info``'s PCIe and NIC readings."""
    from ansible_collections.metalplane.inference.plugins.module_utils._redfish.info import is_gpu

    memory = (system.get("MemorySummary") or {}).get("TotalSystemMemoryGiB")
    macs = []
    for nic in nics:
        mac = str(nic.get("mac") or "")
        if _MAC.match(mac):
            macs.append(mac.replace("-", ":").lower())
    return Inventory(
        manufacturer=system.get("Manufacturer"),
        model=system.get("Model"),
        memory_gib=float(memory) if isinstance(memory, (int, float)) else None,
        gpus=[str(d.get("model") or d.get("name") or "unknown GPU") for d in pcie if is_gpu(dict(d))],
        macs=macs,
    )


def read_inventory(client: Any, requirements: Requirements) -> Inventory:
    """Read what the requirements need from an open ``RedfishClient``: the System (already read at login),
    its PCIe devices only when a GPU is required, its NICs for the boot MAC check."""
    from ansible_collections.metalplane.inference.plugins.module_utils._redfish.info import nics, pcie_devices

    pcie = pcie_devices(client) if (requirements.gpu_model or requirements.gpu_count) else []
    return inventory_from(client.system.json, pcie, nics(client))
