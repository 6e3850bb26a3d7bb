# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The BareMetalHost (``metal3.io/v1alpha1``) this collection writes, and the checks before it writes one.

Why here, in pure Python: Metal3's controller accepts a BareMetalHost that its CRD schema allows and only then finds
out, minutes later and after a boot, that the image has no checksum or that ``redfish-virtualmedia://`` was pointed
at a Dell. Every such mistake is cheaper as an error naming the field before the first write, so the inputs are
checked here against the same rules (``apis/metal3.io/v1alpha1/baremetalhost_types.go`` of metal3-io/
baremetal-operator, and its user guide), and the objects are built here, where the unit tests validate them against
Metal3's own CRD schema.

Ownership: a BareMetalHost this collection registers carries ``app.kubernetes.io/managed-by=metalplane.inference``.
Hosts registered by someone else (the platform team's inventory, as in the reference MetalCluster setup) are used,
never deleted, and never have their BMC fields rewritten.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError

API_VERSION = "metal3.io/v1alpha1"
KIND = "BareMetalHost"

# status.provisioning.state values (baremetalhost_types.go, ProvisioningState constants).
STATE_NONE = ""
STATE_UNMANAGED = "unmanaged"
STATE_REGISTERING = "registering"
STATE_MATCH_PROFILE = "match profile"
STATE_PREPARING = "preparing"
STATE_READY = "ready"
STATE_AVAILABLE = "available"
STATE_PROVISIONING = "provisioning"
STATE_PROVISIONED = "provisioned"
STATE_EXTERNALLY_PROVISIONED = "externally provisioned"
STATE_DEPROVISIONING = "deprovisioning"
STATE_INSPECTING = "inspecting"
STATE_POWERING_OFF_BEFORE_DELETE = "powering off before delete"
STATE_DELETING = "deleting"
PROVISIONING_STATES = (
    STATE_NONE,
    STATE_UNMANAGED,
    STATE_REGISTERING,
    STATE_MATCH_PROFILE,
    STATE_PREPARING,
    STATE_READY,
    STATE_AVAILABLE,
    STATE_PROVISIONING,
    STATE_PROVISIONED,
    STATE_EXTERNALLY_PROVISIONED,
    STATE_DEPROVISIONING,
    STATE_INSPECTING,
    STATE_POWERING_OFF_BEFORE_DELETE,
    STATE_DELETING,
)
# A host a new consumer may take (CAPM3's chooseHost: "ready" is the deprecated spelling of "available").
FREE_STATES = (STATE_AVAILABLE, STATE_READY)
# status.operationalStatus values (OperationalStatus constants).
OPERATIONAL_OK = "OK"
OPERATIONAL_DISCOVERED = "discovered"
OPERATIONAL_ERROR = "error"
OPERATIONAL_DELAYED = "delayed"
OPERATIONAL_DETACHED = "detached"
OPERATIONAL_SERVICING = "servicing"

# spec enums, as the CRD lists them.
CHECKSUM_TYPES = ("md5", "sha256", "sha512", "auto")
DISK_FORMATS = ("raw", "qcow2", "vdi", "vmdk", "live-iso")
BOOT_MODES = ("UEFI", "UEFISecureBoot", "legacy")
CLEANING_MODES = ("metadata", "disabled")
INSPECTION_MODES = ("disabled", "agent", "fast")
INSPECTION_DISABLED = "disabled"
# Hex digest lengths of the checksum types, to catch a sha256 value labelled md5 before Ironic does (after a boot).
DIGEST_HEX_LENGTHS = {"md5": 32, "sha256": 64, "sha512": 128}
_HEX = re.compile(r"^[0-9a-fA-F]+$")

# Labels and annotations (the same vocabulary as the Lease claims, _metal/claims.py).
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "metalplane.inference"
POOL_LABEL = "metalplane.inference/pool"
CLUSTER_LABEL = "metalplane.inference/cluster"
CLAIMER_ANNOTATION = "metalplane.inference/claimer"
CLAIMED_AT_ANNOTATION = "metalplane.inference/claimed-at"
GENERATION_ANNOTATION = "metalplane.inference/generation"
# Metal3 annotations a consumer must respect (CAPM3's chooseHost skips hosts that carry them).
PAUSED_ANNOTATION = "baremetalhost.metal3.io/paused"
DETACHED_ANNOTATION = "baremetalhost.metal3.io/detached"
# The consumer a claim writes into spec.consumerRef: this collection's clusters are not Kubernetes objects, so the
# reference names the cluster as a kind of our own group (any ObjectReference is valid; CAPM3 writes its
# Metal3Machine). Another consumer (CAPM3) sees a non-empty consumerRef and never takes the host.
CONSUMER_API_VERSION = "inference.metalplane.io/v1alpha1"
CONSUMER_KIND = "MetalCluster"

# Secret keys Metal3 reads (baremetal-operator host_config_data.go; cluster-api-provider-metal3 docs/api.md).
USER_DATA_KEY = "userData"
NETWORK_DATA_KEY = "networkData"
CREDENTIALS_KEYS = ("username", "password")

# The System path iDRAC8/9 serve their one server at (Metal3's idrac-virtualmedia examples use it verbatim).
DELL_SYSTEM_PATH = "/redfish/v1/Systems/System.Embedded.1"
DELL_PERSONALITIES = ("idrac8", "idrac9", "dell_idrac8", "dell_idrac9")  # the inventory's and the quirk names
# Virtual-media schemes: the only ones that boot over L3 with no DHCP on the segment (this collection's premise).
# Metal3 documents that redfish-virtualmedia must not be used for Dell: idrac-virtualmedia drives Dell's OEM
# virtual-media actions, which iDRAC8 needs.
DELL_SCHEME = "idrac-virtualmedia"
GENERIC_SCHEME = "redfish-virtualmedia"

DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_SUBDOMAIN_MAX = 253
# Suffixes of the Secrets written per host; a BareMetalHost name leaves room for them in 253 characters.
CREDENTIALS_SUFFIX = "-bmc-secret"
USER_DATA_SUFFIX = "-user-data"
NETWORK_DATA_SUFFIX = "-network-data"
PREPROVISIONING_SUFFIX = "-preprov-network-data"


@dataclass(frozen=True)
class Image:
    """``spec.image``: what Ironic writes to the disk."""

    url: str
    checksum: str | None = None
    checksum_type: str | None = None
    disk_format: str | None = None

    def spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {"url": self.url}
        if self.checksum:
            out["checksum"] = self.checksum
        if self.checksum_type:
            out["checksumType"] = self.checksum_type
        if self.disk_format:
            out["format"] = self.disk_format
        return out


# The reference user's MetalCluster image values (metal.kube.farm/v1alpha1 spec), accepted as they are.
METALCLUSTER_IMAGE_KEYS = {
    "imageURL": "url",
    "imageChecksum": "checksum",
    "imageChecksumType": "checksum_type",
    "imageDiskFormat": "disk_format",
}
IMAGE_KEYS = ("url", "checksum", "checksum_type", "disk_format")


def parse_image(value: Mapping[str, Any] | None, field_name: str = "image") -> Image:
    """Validate ``image`` (``url``, ``checksum``, ``checksum_type``, ``disk_format``, or the MetalCluster names)."""
    if not value:
        raise InputError(field_name, "is required: the node image's url, checksum and disk_format (qcow2 or raw)")
    given: dict[str, Any] = {}
    for key, raw in value.items():
        name = METALCLUSTER_IMAGE_KEYS.get(key, key)
        if name not in IMAGE_KEYS:
            allowed = ", ".join((*IMAGE_KEYS, *METALCLUSTER_IMAGE_KEYS))
            raise InputError(f"{field_name}.{key}", f"is not an image option; allowed: {allowed}")
        if raw not in (None, ""):
            given[name] = str(raw).strip()
    url = given.get("url")
    if not url:
        raise InputError(f"{field_name}.url", "is required: the http(s) URL the node image is downloaded from")
    scheme = urlsplit(url).scheme
    if scheme not in ("http", "https", "oci", "file"):
        raise InputError(f"{field_name}.url", f"{url!r} must be an http://, https://, oci:// or file:// URL")
    disk_format = given.get("disk_format")
    if disk_format is not None and disk_format not in DISK_FORMATS:
        raise InputError(f"{field_name}.disk_format", f"{disk_format!r} is not one of {', '.join(DISK_FORMATS)}")
    checksum_type = given.get("checksum_type")
    if checksum_type is not None and checksum_type not in CHECKSUM_TYPES:
        raise InputError(f"{field_name}.checksum_type", f"{checksum_type!r} is not one of {', '.join(CHECKSUM_TYPES)}")
    checksum = given.get("checksum")
    needs_checksum = disk_format != "live-iso" and scheme != "oci"
    if needs_checksum and not checksum:
        raise InputError(
            f"{field_name}.checksum",
            f"is required for {url}: Ironic refuses an image it cannot verify; give the hex digest or the URL of a "
            "checksum file (only live-iso and oci:// images go without)",
        )
    if checksum and not urlsplit(checksum).scheme:
        if not _HEX.match(checksum):
            raise InputError(f"{field_name}.checksum", "must be a hex digest or the URL of a checksum file")
        expected = DIGEST_HEX_LENGTHS.get(checksum_type or "")
        if expected and len(checksum) != expected:
            raise InputError(
                f"{field_name}.checksum",
                f"has {len(checksum)} hex digits, but a {checksum_type} digest has {expected}; fix checksum_type",
            )
    return Image(url=url, checksum=checksum, checksum_type=checksum_type, disk_format=disk_format)


def bmc_address(bmc_url: str, personality: str | None, system_path: str | None = None) -> str:
    """Metal3's ``bmc.address`` for a pool host: virtual media, Dell's own scheme for an iDRAC.

    ``bmc_url`` is the pool's ``https://host[:port][/prefix]``; the System path is Dell's fixed one for an iDRAC
    personality, else ``system_path`` (``/redfish/v1/Systems/<id>``), which a generic BMC needs.
    """
    parts = urlsplit(bmc_url.strip())
    prefix = parts.path.rstrip("/")
    prefix = prefix.removesuffix("/redfish/v1")
    if personality in DELL_PERSONALITIES:
        scheme, path = DELL_SCHEME, system_path or DELL_SYSTEM_PATH
    else:
        if not system_path:
            raise InputError(
                "system_path",
                f"is required for a {personality or 'generic'} BMC with the metal3 provisioner: Metal3's "
                "redfish-virtualmedia address names the System, e.g. /redfish/v1/Systems/1 (for a Dell, set the "
                "host's personality to idrac8 or idrac9 instead)",
            )
        scheme, path = GENERIC_SCHEME, system_path
    if not path.startswith("/redfish/v1/Systems/"):
        raise InputError("system_path", f"{path!r} must look like /redfish/v1/Systems/<id>")
    transport = "+http" if parts.scheme == "http" else "+https"
    return f"{scheme}{transport}://{parts.netloc}{prefix}{path}"


def host_name(pool_host: str) -> str:
    """The BareMetalHost name of a pool host: its inventory name, which must then be a DNS subdomain."""
    name = pool_host.strip()
    longest = DNS_SUBDOMAIN_MAX - len(PREPROVISIONING_SUFFIX)
    if not DNS_SUBDOMAIN_RE.match(name) or len(name) > longest:
        raise InputError(
            "hosts[].name",
            f"{pool_host!r} cannot name a BareMetalHost: use lower-case letters, digits, '-' and '.' "
            f"(at most {longest} characters)",
        )
    return name


def root_device_hints(root_disk: Mapping[str, str]) -> dict[str, str]:
    """``rootDeviceHints`` from a pool host's ``root_disk`` (WWN or serial: stable across reboots, unlike sdX)."""
    if root_disk.get("wwn"):
        return {"wwn": str(root_disk["wwn"])}
    if root_disk.get("serial"):
        return {"serialNumber": str(root_disk["serial"])}
    return {}


@dataclass(frozen=True)
class Registration:
    """What registers one pool host as a BareMetalHost (the BMC half; no provisioning yet)."""

    name: str
    namespace: str
    pool: str
    address: str
    boot_mac: str
    boot_mode: str
    disable_certificate_verification: bool
    root_device_hints: Mapping[str, str] = field(default_factory=dict)
    inspection_mode: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def credentials_name(self) -> str:
        return self.name + CREDENTIALS_SUFFIX

    def host(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "online": False,
            "bootMACAddress": self.boot_mac,
            "bootMode": self.boot_mode,
            "bmc": {
                "address": self.address,
                "credentialsName": self.credentials_name,
                "disableCertificateVerification": self.disable_certificate_verification,
            },
        }
        if self.root_device_hints:
            spec["rootDeviceHints"] = dict(self.root_device_hints)
        if self.inspection_mode:
            spec["inspectionMode"] = self.inspection_mode
        return {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {**self.labels, MANAGED_BY_LABEL: MANAGED_BY, POOL_LABEL: self.pool},
            },
            "spec": spec,
        }


def owned(host: Mapping[str, Any]) -> bool:
    """Whether this collection registered the BareMetalHost (and may delete it)."""
    return ((host.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY


def consumer_ref(cluster: str, namespace: str) -> dict[str, str]:
    return {"apiVersion": CONSUMER_API_VERSION, "kind": CONSUMER_KIND, "name": cluster, "namespace": namespace}


def consumer_of(host: Mapping[str, Any]) -> dict[str, Any] | None:
    """The host's ``spec.consumerRef``, or None when it is free."""
    ref = (host.get("spec") or {}).get("consumerRef")
    return dict(ref) if ref else None


def held_by(host: Mapping[str, Any], cluster: str) -> bool:
    ref = consumer_of(host)
    return bool(ref) and ref.get("kind") == CONSUMER_KIND and ref.get("name") == cluster  # type: ignore[union-attr]


def status_of(host: Mapping[str, Any]) -> dict[str, Any]:
    """The part of ``status`` a wait and a failure message look at."""
    status = host.get("status") or {}
    return {
        "state": (status.get("provisioning") or {}).get("state", STATE_NONE),
        "operational_status": status.get("operationalStatus"),
        "powered_on": status.get("poweredOn"),
        "error_type": status.get("errorType") or None,
        "error_message": status.get("errorMessage") or None,
        "error_count": status.get("errorCount") or 0,
        "image": ((status.get("provisioning") or {}).get("image") or {}).get("url"),
    }


@dataclass(frozen=True)
class Provisioning:
    """The spec fields that provision a claimed host (setting ``image.url`` is what starts it)."""

    image: Image
    user_data: str  # Secret names, in the host's namespace
    network_data: str
    preprovisioning_network_data: str
    automated_cleaning_mode: str

    def patch(self, namespace: str) -> dict[str, Any]:
        return {
            "spec": {
                "online": True,
                "image": self.image.spec(),
                "userData": {"name": self.user_data, "namespace": namespace},
                "networkData": {"name": self.network_data, "namespace": namespace},
                "preprovisioningNetworkDataName": self.preprovisioning_network_data,
                "automatedCleaningMode": self.automated_cleaning_mode,
            }
        }


# CAPM3's MachineManager.Delete() patch: the image and the config-drive data go, and the server goes off, in one
# write, so Metal3 deprovisions (and cleans, with automatedCleaningMode: metadata) exactly once.
DEPROVISION_PATCH: dict[str, Any] = {
    "spec": {
        "image": None,
        "userData": None,
        "metaData": None,
        "networkData": None,
        "customDeploy": None,
        "online": False,
    }
}


def provisioning_drift(host: Mapping[str, Any], wanted: Provisioning, namespace: str) -> list[str]:
    """The provisioning fields that differ from ``wanted`` (empty: nothing to write)."""
    spec = host.get("spec") or {}
    patch = wanted.patch(namespace)["spec"]
    drift = []
    for key, value in patch.items():
        current = spec.get(key)
        if key == "automatedCleaningMode" and current is None:
            current = "metadata"  # the CRD's default
        if current != value:
            drift.append(key)
    return drift
