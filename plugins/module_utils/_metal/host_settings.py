# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validate one host's install settings and normalise them, before anything is downloaded or written.

Why: every value here ends up inside a kickstart, preseed or autoinstall file and inside shell scripts that run
as root on the installer, so each one is checked against a strict grammar (which also keeps it shell-safe), and
a bad one fails naming the option, before the ISO cache or the output is touched. The disk is named by a stable
identity only (WWN or serial from the BMC's storage inventory): ``/dev/sdX`` names change between boots and
between the installer and the installed system.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError

OS_FAMILIES = ("el", "debian", "ubuntu")

# Packages the later roles need (NVIDIA .run driver with DKMS, Longhorn's iSCSI and NFSv4.1 client).
# EL: kernel-devel/kernel-headers come from the same compose as the kernel, so they match it; dkms is in EPEL.
# Debian/Ubuntu: the linux-headers meta package follows the installed linux-image meta package.
DEFAULT_PACKAGES = {
    "el": (
        "kernel-devel",
        "kernel-headers",
        "dkms",
        "gcc",
        "make",
        "elfutils-libelf-devel",
        "nfs-utils",
        "iscsi-initiator-utils",
    ),
    "debian": ("linux-headers-amd64", "dkms", "gcc", "make", "nfs-common", "open-iscsi"),
    "ubuntu": ("linux-headers-generic", "dkms", "gcc", "make", "nfs-common", "open-iscsi"),
}

_MAC = re.compile(r"^[0-9a-f]{2}([:-])[0-9a-f]{2}(\1[0-9a-f]{2}){4}$")
_HOST_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_PACKAGE = re.compile(r"^[A-Za-z0-9@^][A-Za-z0-9+._:@^-]*$")
_TIMEZONE = re.compile(r"^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$")
_WWN = re.compile(r"^(?:0x|naa\.|eui\.|wwn-0x|wwn-)?([0-9a-f]{16}|[0-9a-f]{32})$")
_SERIAL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_SSH_PUBLIC = re.compile(
    r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com)"
    r" [A-Za-z0-9+/]+={0,3}( [^\n\r']*)?$"
)
# crypt(3) hashes the installers accept; MD5-crypt and DES are refused as too weak.
_CRYPT = {
    "sha512-crypt": re.compile(r"^\$6\$(rounds=\d+\$)?[./A-Za-z0-9]{1,16}\$[./A-Za-z0-9]{86}$"),
    "sha256-crypt": re.compile(r"^\$5\$(rounds=\d+\$)?[./A-Za-z0-9]{1,16}\$[./A-Za-z0-9]{43}$"),
    "yescrypt": re.compile(r"^\$(y|gy|7)\$[./A-Za-z0-9]+\$[./A-Za-z0-9]+\$[./A-Za-z0-9]{43}$"),
    "bcrypt": re.compile(r"^\$2[aby]\$\d{2}\$[./A-Za-z0-9]{53}$"),
}


@dataclass(frozen=True)
class Network:
    mac: str
    interface: ipaddress.IPv4Interface
    gateway: ipaddress.IPv4Address
    dns: tuple[str, ...]


@dataclass(frozen=True)
class HostSettings:
    """Everything the unattended configuration says about one host (secrets included: never put in results)."""

    os_family: str
    hostname: str
    network: Network
    disk_by: str  # wwn | serial
    disk_id: str  # normalised: lower-case hex for a WWN (no 0x/naa./eui. prefix), as given for a serial
    authorized_keys: tuple[str, ...]
    root_password_hash: str
    packages: tuple[str, ...]
    cluster_name: str
    generation: int
    timezone: str
    el_epel: bool
    debian_mirror: str


def validate_os_family(value: Any) -> str:
    if value not in OS_FAMILIES:
        raise InputError("os_family", f"{value!r} is not supported; use one of {', '.join(OS_FAMILIES)}")
    return str(value)


def validate_mac(value: Any, field: str = "network.mac") -> str:
    text = str(value or "").strip().lower()
    if not _MAC.match(text):
        raise InputError(field, f"{value!r} is not a MAC address; write six hex pairs, e.g. 24:6e:96:0a:1b:2c")
    return text.replace("-", ":")


def validate_interface(address: Any, prefix: Any = None, field: str = "network.address") -> ipaddress.IPv4Interface:
    """``IP/prefix`` (or the bare IP with ``prefix``) that is a host address of its prefix."""
    given = str(address or "")
    raw = f"{given}/{prefix}" if "/" not in given and prefix is not None else given
    try:
        interface = ipaddress.IPv4Interface(raw)
    except ValueError:
        raise InputError(
            field, f"{raw!r} is not an IPv4 address with a prefix (0 to 32), e.g. 192.168.120.70/24"
        ) from None
    if "/" not in raw:
        raise InputError(field, f"{raw!r} has no prefix; write it as IP/prefix, e.g. 192.168.120.70/24")
    net = interface.network
    if net.prefixlen < 31 and interface.ip in (net.network_address, net.broadcast_address):
        raise InputError(
            field,
            f"{interface} is the {'network' if interface.ip == net.network_address else 'broadcast'} address of "
            f"{net}, not a host address in that prefix",
        )
    return interface


def validate_gateway(
    value: Any, interface: ipaddress.IPv4Interface, field: str = "network.gateway"
) -> ipaddress.IPv4Address:
    """An IPv4 address on ``interface``'s subnet that is not the host itself."""
    try:
        gateway = ipaddress.IPv4Address(str(value or ""))
    except ValueError:
        raise InputError(field, f"{value!r} is not an IPv4 address") from None
    net = interface.network
    if gateway not in net or gateway == interface.ip:
        reason = "is the host's own address" if gateway == interface.ip else f"is outside the host's subnet {net}"
        raise InputError(field, f"{gateway} {reason}; give the router on {net}")
    return gateway


def validate_dns(values: Any, field: str = "network.dns") -> tuple[str, ...]:
    """At least one DNS server, each an IP address."""
    if isinstance(values, str):
        values = [values]
    dns: list[str] = []
    for server in values or []:
        try:
            dns.append(str(ipaddress.ip_address(str(server))))
        except ValueError:
            raise InputError(field, f"{server!r} is not an IP address") from None
    if not dns:
        raise InputError(field, "give at least one DNS server (the installer resolves package mirrors)")
    return tuple(dns)


def validate_network(network: dict[str, Any] | None) -> Network:
    if not network:
        raise InputError("network", "the static network is required: mac, address (IP/prefix), gateway, dns")
    mac = validate_mac(network.get("mac"))
    interface = validate_interface(network.get("address"), network.get("prefix"))
    gateway = validate_gateway(network.get("gateway"), interface)
    return Network(mac, interface, gateway, validate_dns(network.get("dns")))


def validate_disk(disk: dict[str, Any] | None) -> tuple[str, str]:
    """``("wwn", hex)`` or ``("serial", serial)``: exactly one stable identity, never a device name."""
    disk = {k: v for k, v in (disk or {}).items() if v not in (None, "")}
    if not disk:
        raise InputError(
            "disk", "the disk identity is missing: give disk.wwn or disk.serial from the BMC's storage inventory"
        )
    if set(disk) - {"wwn", "serial"} or len(disk) != 1:
        raise InputError("disk", "give exactly one of disk.wwn or disk.serial (no device names: /dev/sdX changes)")
    kind, value = next(iter(disk.items()))
    text = str(value).strip()
    if text.startswith("/dev/") or (text.startswith("sd") and len(text) <= 4):
        raise InputError(f"disk.{kind}", f"{text!r} is a device name; give the disk's {kind} (stable across boots)")
    if kind == "wwn":
        match = _WWN.match(text.lower())
        if not match:
            raise InputError("disk.wwn", f"{text!r} is not a WWN: 16 or 32 hex digits, optionally 0x/naa./eui.")
        return "wwn", match.group(1)
    if not _SERIAL.match(text):
        raise InputError("disk.serial", f"{text!r} is not a disk serial (letters, digits, '.', '_', '-')")
    return "serial", text


def validate_root_password_hash(value: Any) -> str:
    text = str(value or "")
    if not any(pattern.match(text) for pattern in _CRYPT.values()):
        # The value is a secret: never echo it.
        raise InputError(
            "root_password_hash",
            "is not a crypt(3) hash (sha512-crypt $6$, sha256-crypt $5$, yescrypt $y$ or bcrypt $2b$); plain "
            "passwords are refused: hash it, e.g. {{ password | password_hash('sha512') }}",
        )
    return text


def validate_hostname(value: Any) -> str:
    text = str(value or "").strip().lower()
    labels = text.split(".")
    if not text or len(text) > 253 or not all(_HOST_LABEL.match(label) for label in labels):
        raise InputError("hostname", f"{value!r} is not a host name (letters, digits and '-', labels of 1-63)")
    return text


def authorized_key_problem(key: str) -> str:
    """Why ``key`` is not one OpenSSH public key line, naming it where that is safe: a private key is never echoed,
    a file name is (the usual mistake: the path of the .pub file where its content belongs)."""
    text = "is not one OpenSSH public key line (type base64 [comment])"
    if "PRIVATE KEY" in key:
        return f"{text}: this is a private key; give its public half (the line of the .pub file)"
    if re.match(r"^(~|/|\.{1,2}/)\S*$", key) or re.match(r"^\S+\.pub$", key):
        return (
            f"{text}: {key!r} is a file name, not the key; write the key itself, e.g. "
            f"\"{{{{ lookup('file', '{key}') }}}}\""
        )
    first = key.split(maxsplit=1)[0]
    # Only a word shaped like a key type is echoed (ssh-dss, an options field's name), never an opaque blob.
    if re.match(r"^[a-z][a-z0-9@.-]{0,39}$", first) and not _SSH_PUBLIC.match(f"{first} AAAA"):
        return f"{text}: {first!r} is not a key type; use ssh-ed25519, ssh-rsa or ecdsa-sha2-nistp256/384/521"
    return text


def validate_authorized_keys(values: Any) -> tuple[str, ...]:
    keys = [str(v).strip() for v in (values or []) if str(v).strip()]
    if not keys:
        raise InputError("ssh_authorized_keys", "give at least one public key: the provisioner logs in with it")
    for index, key in enumerate(keys):
        if not _SSH_PUBLIC.match(key):
            raise InputError(f"ssh_authorized_keys[{index}]", authorized_key_problem(key))
    return tuple(keys)


def validate_packages(values: Any, field: str) -> tuple[str, ...]:
    packages = tuple(str(v) for v in (values or []))
    for package in packages:
        if not _PACKAGE.match(package):
            raise InputError(field, f"{package!r} is not a package name")
    return packages


def host_settings(params: dict[str, Any]) -> HostSettings:
    """Validate the module options that describe the host; the first bad one raises InputError."""
    family = validate_os_family(params.get("os_family"))
    hostname = validate_hostname(params.get("hostname"))
    network = validate_network(params.get("network"))
    disk_by, disk_id = validate_disk(params.get("disk"))
    keys = validate_authorized_keys(params.get("ssh_authorized_keys"))
    password = validate_root_password_hash(params.get("root_password_hash"))
    base = params.get("packages")
    packages = validate_packages(DEFAULT_PACKAGES[family] if base is None else base, "packages")
    extra = validate_packages(params.get("extra_packages"), "extra_packages")
    cluster = str(params.get("cluster_name") or "")
    if not _NAME.match(cluster):
        raise InputError("cluster_name", f"{cluster!r} is not a name (letters, digits, '.', '_', '-')")
    generation = params.get("generation")
    if not isinstance(generation, int) or generation < 0:
        raise InputError("generation", f"{generation!r} is not the claim's generation (an integer >= 0)")
    timezone = str(params.get("timezone") or "UTC")
    if not _TIMEZONE.match(timezone):
        raise InputError("timezone", f"{timezone!r} is not a tz database name, e.g. UTC or Europe/Berlin")
    mirror = str(params.get("debian_mirror") or "deb.debian.org")
    if not re.match(r"^[A-Za-z0-9.-]+(:\d+)?$", mirror):
        raise InputError("debian_mirror", f"{mirror!r} is not a host name (the mirror's host, e.g. deb.debian.org)")
    return HostSettings(
        os_family=family,
        hostname=hostname,
        network=network,
        disk_by=disk_by,
        disk_id=disk_id,
        authorized_keys=keys,
        root_password_hash=password,
        packages=tuple(dict.fromkeys(packages + extra)),
        cluster_name=cluster,
        generation=generation,
        timezone=timezone,
        el_epel=bool(params.get("el_epel", True)),
        debian_mirror=mirror,
    )
