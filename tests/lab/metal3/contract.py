"""Metal3's BareMetalHost contract as data: the CRD, the state names, the BMC address schemes.

Why a module apart from the controller: ``provisioner: metal3`` is judged against what Metal3 itself
declares, not against what the lab happens to do. The CRD (``data/metal3.io_baremetalhosts.yaml``) is
upstream's file, unchanged; the state names below are checked against upstream's Go constants
(``data/baremetalhost_types_states.go.txt``) by a unit test; the BMC address parsing follows
``pkg/hardwareutils/bmc`` (``<driver>[+<http|https>]://host/path``). Everything here is pure.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

DATA_DIR = Path(__file__).parent / "data"
CRD_FILE = DATA_DIR / "metal3.io_baremetalhosts.yaml"
STATES_EXCERPT = DATA_DIR / "baremetalhost_types_states.go.txt"

GROUP = "metal3.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "BareMetalHost"
# BareMetalHostFinalizer in baremetalhost_types.go: BMO holds every host's deletion with it until the
# host is powered off and deregistered.
FINALIZER = "baremetalhost.metal3.io"

# ProvisioningState values (baremetalhost_types.go; equality checked by test_metal3_contract.py).
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

# OperationalStatus values.
OPERATIONAL_OK = "OK"
OPERATIONAL_DISCOVERED = "discovered"
OPERATIONAL_ERROR = "error"
OPERATIONAL_DELAYED = "delayed"
OPERATIONAL_DETACHED = "detached"
OPERATIONAL_SERVICING = "servicing"
OPERATIONAL_STATUSES = (
    OPERATIONAL_OK,
    OPERATIONAL_DISCOVERED,
    OPERATIONAL_ERROR,
    OPERATIONAL_DELAYED,
    OPERATIONAL_DETACHED,
    OPERATIONAL_SERVICING,
)

# ErrorType values.
ERROR_PROVISIONED_REGISTRATION = "provisioned registration error"
ERROR_REGISTRATION = "registration error"
ERROR_INSPECTION = "inspection error"
ERROR_PREPARATION = "preparation error"
ERROR_PROVISIONING = "provisioning error"
ERROR_POWER_MANAGEMENT = "power management error"
ERROR_DETACH = "detach error"
ERROR_SERVICING = "servicing error"
ERROR_TYPES = (
    ERROR_PROVISIONED_REGISTRATION,
    ERROR_REGISTRATION,
    ERROR_INSPECTION,
    ERROR_PREPARATION,
    ERROR_PROVISIONING,
    ERROR_POWER_MANAGEMENT,
    ERROR_DETACH,
    ERROR_SERVICING,
)

# Spec values the controller acts on (enums of the CRD).
INSPECTION_DISABLED = "disabled"
CLEANING_METADATA = "metadata"
CLEANING_DISABLED = "disabled"
DETACHED_ANNOTATION = "baremetalhost.metal3.io/detached"

# Secret keys BMO reads: the BMC credentials (bmc.credentialsName), cloud-init's user data and network data
# (spec.userData / spec.networkData / spec.preprovisioningNetworkDataName).
CREDENTIALS_KEYS = ("username", "password")
USER_DATA_KEY = "userData"
NETWORK_DATA_KEY = "networkData"

# Address schemes (pkg/hardwareutils/bmc RegisterFactory) the lab serves: every virtual media driver, each with
# its ``+http``/``+https`` transport suffix; the bare scheme means https, as in BMO.
IDRAC_VIRTUALMEDIA = "idrac-virtualmedia"
REDFISH_VIRTUALMEDIA = "redfish-virtualmedia"
VIRTUALMEDIA_DRIVERS = (IDRAC_VIRTUALMEDIA, REDFISH_VIRTUALMEDIA)
TRANSPORTS = ("http", "https")
SYSTEMS_SEGMENT = "/redfish/v1/Systems/"


@functools.cache
def bmh_crd() -> dict[str, Any]:
    """Upstream's BareMetalHost CustomResourceDefinition (a fresh copy is the caller's to keep: cached, so
    do not mutate it)."""
    return yaml.safe_load(CRD_FILE.read_text())


class AddressError(ValueError):
    """A ``spec.bmc.address`` BMO would refuse at registration."""


@dataclass(frozen=True)
class BmcAddress:
    """A parsed ``spec.bmc.address``: the driver, and the Redfish URL of the BMC and of its system."""

    driver: str  # idrac-virtualmedia | redfish-virtualmedia
    transport: str  # http | https
    netloc: str  # host:port
    root: str  # the path up to and including /redfish/v1 (a lab BMC's /bmc/<name> prefix kept)
    system_path: str  # the ComputerSystem's path, e.g. <root>/Systems/System.Embedded.1

    @property
    def base_url(self) -> str:
        return f"{self.transport}://{self.netloc}"

    @property
    def bmc_name(self) -> str | None:
        """The lab BMC's name from a ``/bmc/<name>/redfish/v1`` prefix, None for one served at a port's root."""
        parts = self.root.strip("/").split("/")
        return parts[1] if len(parts) >= 4 and parts[0] == "bmc" else None


def parse_bmc_address(address: str) -> BmcAddress:
    """``idrac-virtualmedia+https://127.0.0.1:8443/bmc/r730/redfish/v1/Systems/System.Embedded.1`` -> parts.

    BMO takes the scheme's part before ``+`` as the driver and the part after it (default https) as the
    transport; the virtual media drivers need the system's path (``/redfish/v1/Systems/<id>``).
    """
    split = urlsplit(address)
    driver, _plus, transport = split.scheme.partition("+")
    transport = transport or "https"
    if driver not in VIRTUALMEDIA_DRIVERS:
        msg = f"Unknown BMC type '{split.scheme}' for address {address}"  # bmc.UnknownBMCTypeError's text
        raise AddressError(msg)
    if transport not in TRANSPORTS:
        msg = f"Unknown BMC type '{split.scheme}' for address {address}"  # BMO registers +http/+https only
        raise AddressError(msg)
    if not split.netloc:
        msg = f"missing host in BMC address {address}"
        raise AddressError(msg)
    path = split.path.rstrip("/")
    root, found, system = path.partition(SYSTEMS_SEGMENT)
    if not found or not system or "/" in system:
        msg = f"BMC address {address} must name the system: <scheme>://host[:port]/redfish/v1/Systems/<id>"
        raise AddressError(msg)
    return BmcAddress(driver, transport, split.netloc, root + "/redfish/v1", path)
