"""Redfish error bodies and the fault table of the Redfish BMC emulator (``lab.redfish.server``).

Why a module of its own: the modules under test classify failures by the ``MessageId`` inside
``error.@Message.ExtendedInfo`` (``SYS446``, ``RAC0904``, ``VRM0021``, ...), so every error the
emulator sends is built here, in the shape iDRAC uses (``{"error": {"code", "message",
"@Message.ExtendedInfo": [...]}}``), and the set of injectable faults is named here once.

The Dell message IDs and their meaning follow openstack/ironic (``drivers/modules/redfish/boot.py``),
microsoft/lisa (``idrac.py``, ``_reset_if_idrac_error``), dell/iDRAC-Redfish-Scripting issues and
openstack/sushy (``connector.py``, SYS518). The message *texts* are the emulator's paraphrase of what
those sources say each ID means; only the
IDs (and the ``SYS518`` text that sushy keys on) are part of the contract.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Fault names accepted by ``BmcState.inject`` and ``POST /lab/bmc/<name>/faults``.
#   insert_sys446               the next ``count`` InsertMedia actions fail with 500 SYS446
#   insert_vrm0021_until_reset  every InsertMedia fails with 400 VRM0021 until a Manager reset
#   eject_stuck_until_reset     EjectMedia answers 204 but the media stays inserted until a reset
#   boot_order_reverts          the next ``count`` host boots that changed the persistent order
#                               put it back to the order seen when the fault was injected
#   one_time_boot_lost          the next ``count`` host boots with a one-time boot pending (Dell's SCP
#                               ``BootOnce``, or a ``Once`` override) while the disk holds an installed OS
#                               lose it to the persistent order (the reference R730's iDRAC8 quirk: the
#                               one-shot boot of the virtual CD loses to the OS on the disk); only a fixed
#                               persistent order (the virtual CD first) then boots the inserted image
#   busy_503                    the next ``count`` requests (any path but /lab) answer 503
#   latency                     the next ``count`` requests are delayed by ``seconds`` (kw)
#   session_limit               the next ``count`` session logins fail as if the table were full
#   error                       the next ``count`` requests matching ``method``/``path`` (kw,
#                               substring) answer ``status`` with ``message_id`` (kw)
#   scp_job_running             the next ``count`` SCP imports fail with 400 RAC0679
#   basic_writes_refused        the next ``count`` writes (POST/PATCH/PUT/DELETE) sent with valid HTTP
#                               Basic credentials answer ``status`` (kw: 401 NoValidSession, the default,
#                               or 403 InsufficientPrivilege); reads and session-token writes still work
#   concurrent_order_change     the next ``count`` PATCHes of Boot.BootOrder find the order changed by
#                               another writer just before (first entry moved last, so the ETag changed)
FAULTS = (
    "insert_sys446",
    "insert_vrm0021_until_reset",
    "eject_stuck_until_reset",
    "boot_order_reverts",
    "one_time_boot_lost",
    "busy_503",
    "latency",
    "session_limit",
    "error",
    "scp_job_running",
    "basic_writes_refused",
    "concurrent_order_change",
)

# Faults that only a Manager reset (or clear_faults) removes; their count is ignored.
UNTIL_RESET = frozenset({"insert_vrm0021_until_reset", "eject_stuck_until_reset"})

# What the BMC answers during the busy phase of a Manager reset window (``BmcSpec.busy_message``):
#   SYS518                         503, Dell "iDRAC is not yet ready" (default on a Dell; sushy retries it)
#   SWC0700                        400, Dell "iDRAC is not ready" (a 4xx a client must still wait on)
#   ServiceTemporarilyUnavailable  503 with the DMTF Base message, no Dell id (default elsewhere)
BUSY_MESSAGES = ("SYS518", "SWC0700", "ServiceTemporarilyUnavailable")
DELL_BUSY_MESSAGES = frozenset({"SYS518", "SWC0700"})

# Dell message IDs the emulator can send: id -> (HTTP status, message text, resolution).
DELL_MESSAGES: dict[str, tuple[int, str, str]] = {
    "SYS446": (
        500,
        "Unable to complete the operation because of an internal error in the virtual media service.",
        "Eject all virtual media, wait and retry. If the issue persists, reset the iDRAC.",
    ),
    "RAC0904": (
        400,
        "Unable to connect to the image because the remote file location is not accessible.",
        "Make sure the image URL is reachable from the iDRAC (DNS, routing, no redirects) and retry.",
    ),
    "VRM0021": (
        400,
        "Unable to attach the image because Virtual Media is attached to the other device or in use.",
        "Eject the media from the other virtual device, or eject all and reset the iDRAC, then retry.",
    ),
    "VRM0012": (
        400,
        "Unable to complete the operation because the Virtual Media device is already in use.",
        "Eject the media currently attached and retry.",
    ),
    "SYS518": (
        503,
        "iDRAC is not yet ready after the previous operation.",
        "Wait for a few minutes and retry the operation.",
    ),
    "SWC0700": (
        400,
        "iDRAC is not ready. The configuration values cannot be accessed.",
        "Wait until the iDRAC has finished starting and retry.",
    ),
    "RAC0679": (
        400,
        "Unable to run the operation because another configuration job is running.",
        "Wait for the running job to complete and retry.",
    ),
    "RAC0218": (
        400,
        "The maximum number of user sessions is reached.",
        "Close one or more sessions and retry.",
    ),
    "SYS053": (
        200,
        "Successfully imported and applied Server Configuration Profile.",
        "No response action is required.",
    ),
}

# DMTF Base registry messages used by the emulator: name -> (HTTP status, message text).
BASE_MESSAGES: dict[str, tuple[int, str]] = {
    "InternalError": (500, "The request failed due to an internal service error.  The service is still operational."),
    "GeneralError": (400, "A general error has occurred. See Resolution for information on how to resolve the error."),
    "ServiceTemporarilyUnavailable": (503, "The service is temporarily unavailable.  Retry in a few seconds."),
    "NoValidSession": (401, "There is no valid session established with the implementation."),
    "InsufficientPrivilege": (
        403,
        "There are insufficient privileges for the account or credentials associated with the current session"
        " to perform the requested operation.",
    ),
    "SessionLimitExceeded": (
        503,
        "The session establishment failed due to the number of simultaneous sessions exceeding the limit"
        " of the implementation.",
    ),
    "ResourceNotFound": (404, "The requested resource was not found."),
    "ActionParameterMissing": (400, "The action requires the parameter Image to be present in the request body."),
    "ActionParameterNotSupported": (400, "The parameter is not supported by the action."),
    "ActionParameterValueNotInList": (400, "The value for the parameter is not in the list of acceptable values."),
    "PropertyValueNotInList": (400, "The value for the property is not in the list of acceptable values."),
    "PropertyNotWritable": (400, "The property is a read only property and cannot be assigned a value."),
    "PropertyValueTypeError": (400, "The value for the property is not a type that the property can accept."),
    "PreconditionFailed": (412, "The ETag supplied did not match the ETag required to change this resource."),
    "ActionNotSupported": (409, "The action is not supported by the resource in its current state."),
    "ResourceInUse": (
        409,
        "The change to the requested resource failed because the resource is in use or in transition.",
    ),
    "MalformedJSON": (
        400,
        "The request body submitted was malformed JSON and could not be parsed by the receiving service.",
    ),
    "OperationNotAllowed": (405, "The HTTP method is not allowed on this resource."),
}


def _message(message_id: str, text: str, resolution: str, severity: str, args: list[str]) -> dict[str, Any]:
    return {
        "@odata.type": "#Message.v1_1_1.Message",
        "MessageId": message_id,
        "Message": text,
        "MessageArgs": args,
        "Severity": severity,
        "MessageSeverity": severity,
        "Resolution": resolution,
        "RelatedProperties": [],
    }


def error_body(
    message_id: str,
    text: str,
    *,
    base_version: str,
    resolution: str = "",
    severity: str = "Critical",
    args: list[str] | None = None,
) -> dict[str, Any]:
    """A Redfish error document whose single extended message is ``message_id``."""
    return {
        "error": {
            "code": f"Base.{base_version}.GeneralError",
            "message": "A general error has occurred. See ExtendedInfo for more information.",
            "@Message.ExtendedInfo": [_message(message_id, text, resolution, severity, args or [])],
        }
    }


@dataclass
class Fault:
    """One injected fault: how many more times it fires, and its keyword options."""

    name: str
    count: int = 1
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def sticky(self) -> bool:
        return self.name in UNTIL_RESET

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "count": self.count, **{k: v for k, v in self.options.items() if k != "to"}}
