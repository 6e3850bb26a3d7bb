# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Classify Redfish and Dell iDRAC failures into the collection's typed errors.

Why: an iDRAC answers the same HTTP status for very different situations. A 500 with ``SYS446``
means "eject everything and try again", a 400 with ``SWC0700`` means "the iDRAC is still booting,
wait", a 401 right after a reset means "it is up again". The recovery ladder and the waits decide
on these categories, never on raw status codes or message strings scattered through the code.
The table below is the one place that maps Dell/DMTF MessageIds to a category.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    ApiError,
    InputError,
    MetalplaneError,
)

# Categories a failure falls into; the recovery ladder and the waits key on these.
MEDIA_RECOVERABLE = "media_recoverable"  # eject all + retry, then BMC reset + retry once
NOT_READY = "not_ready"  # the BMC is (re)starting: wait and poll again
AUTH = "auth"  # wrong credentials or session limit reached
JOB_BUSY = "job_busy"  # a configuration job is pending or running
INVALID = "invalid"  # the request itself is wrong (bad value, unsupported target)
OTHER = "other"
# What OpenSSL says when the BMC's certificate does not chain to a trusted CA (inside requests' SSLError).
CERTIFICATE_FAILED = "CERTIFICATE_VERIFY_FAILED"

# MessageId (registry prefix and version stripped, e.g. "IDRAC.2.8.SYS446" -> "SYS446") -> category.
# Sources: openstack/ironic ``ironic/drivers/modules/redfish/boot.py`` (InsertMedia retries, story 2008504) and
# ``drac/management.py``; openstack/sushy ``sushy/connector.py`` (SYS518 retries); microsoft/lisa ``idrac.py``
# (``_reset_if_idrac_error``); dell/iDRAC-Redfish-Scripting issues #60, #90, #116 and #265; dellemc.openmanage
# ``idrac_virtual_media`` (VRM0021/VRM0012); ansible-collections/community.general#5091 (SYS410/SYS444).
MESSAGE_CATEGORIES: dict[str, str] = {
    "SYS446": MEDIA_RECOVERABLE,  # virtual media attach failed (iDRAC8 stale handle)
    "RAC0508": MEDIA_RECOVERABLE,  # unexpected error while mounting
    "RAC0904": MEDIA_RECOVERABLE,  # remote file location not accessible (stale handle or bad URL)
    "VRM0021": MEDIA_RECOVERABLE,  # media attached to the other virtual device / in use
    "VRM0012": MEDIA_RECOVERABLE,  # virtual media already in use
    "InternalError": MEDIA_RECOVERABLE,  # Base.*.InternalError on InsertMedia
    "SYS518": NOT_READY,  # iDRAC is not yet ready
    "SWC0700": NOT_READY,  # iDRAC is not ready (400)
    "ServiceTemporarilyUnavailable": NOT_READY,
    "LC068": JOB_BUSY,  # configuration changes pending
    "RAC0679": JOB_BUSY,  # a job is already running
    "SYS011": JOB_BUSY,  # pending configuration job exists
    "PropertyValueNotInList": INVALID,
    "ActionParameterValueNotInList": INVALID,
    "PropertyValueTypeError": INVALID,
    "ActionParameterMissing": INVALID,
    "SYS410": INVALID,  # property read-only (BootSourceOverrideMode on 13G)
    "SYS444": INVALID,  # property dependent on another
    "InsufficientPrivilege": AUTH,
    "NoValidSession": AUTH,
}

# Free-text markers some firmware uses without a MessageId.
TEXT_CATEGORIES: tuple[tuple[str, str], ...] = (
    ("provider is not ready", MEDIA_RECOVERABLE),
    ("is not yet ready", NOT_READY),
    ("not ready", NOT_READY),
)

_ID_TAIL = re.compile(r"([A-Za-z]+[0-9]*)$")


def short_message_id(message_id: str) -> str:
    """``"IDRAC.2.8.SYS446"`` -> ``"SYS446"``; ``"Base.1.8.InternalError"`` -> ``"InternalError"``."""
    tail = message_id.rsplit(".", 1)[-1]
    match = _ID_TAIL.search(tail)
    return match.group(1) if match else tail


def message_ids(body: Mapping[str, Any] | None) -> list[str]:
    """Short MessageIds of a Redfish error body (``{"error": {...}}`` or the inner object)."""
    if not body:
        return []
    error = body.get("error", body)
    ids: list[str] = []
    code = error.get("code")
    if isinstance(code, str):
        ids.append(short_message_id(code))
    for info in error.get("@Message.ExtendedInfo") or []:
        if isinstance(info, Mapping) and isinstance(info.get("MessageId"), str):
            ids.append(short_message_id(info["MessageId"]))
    # Most specific first: extended info beats the generic code.
    return list(dict.fromkeys(reversed(ids)))


def classify(status: int | None, ids: Iterable[str], text: str = "") -> str:
    """Category of a failure from its HTTP status, MessageIds and message text (pure)."""
    ids = list(ids)
    for mid in ids:
        category = MESSAGE_CATEGORIES.get(mid)
        if category:
            return category
    lowered = text.lower()
    for marker, category in TEXT_CATEGORIES:
        if marker in lowered:
            return category
    if status == 503:
        return NOT_READY
    if status in (401, 403):
        return AUTH
    if status in (400, 405, 409, 412, 422) and ids:
        return INVALID
    return OTHER


class RedfishError(ApiError):
    """A Redfish request failed; ``category`` and ``message_ids`` say how (see ``classify``)."""

    kind = "redfish"

    def __init__(
        self,
        msg: str,
        *,
        category: str = OTHER,
        message_ids: list[str] | None = None,
        status: int | None = None,
        method: str | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(
            msg,
            status=status,
            method=method,
            url=url,
            details={"category": category, "message_ids": list(message_ids or [])},
        )
        self.category = category
        self.message_ids = list(message_ids or [])


class MediaError(RedfishError):
    """Virtual media insert/eject failed with a message the recovery ladder knows."""

    kind = "redfish_media"


class BmcNotReady(RedfishError):
    """The BMC is restarting or busy (SYS518, SWC0700, 503, connection refused)."""

    kind = "redfish_not_ready"


class AuthenticationError(RedfishError):
    """The BMC refused the credentials (or the session limit is reached)."""

    kind = "redfish_auth"


class JobBusyError(RedfishError):
    """A BIOS/configuration job is pending or running and blocks the change."""

    kind = "redfish_job_busy"


class PreconditionFailed(RedfishError):
    """A PATCH with ``If-Match`` was refused with 412: the resource changed since it was read.

    Raised to the planner (``boot.py``), which re-reads, re-plans and writes once more; it never
    reaches the user as such (a second 412 becomes a ``ConflictError`` naming the option).
    """

    kind = "redfish_precondition_failed"


class UnsupportedError(MetalplaneError):
    """The BMC does not offer what was asked (no such action, target or resource)."""

    kind = "unsupported"


_CLASSES: dict[str, type[RedfishError]] = {
    MEDIA_RECOVERABLE: MediaError,
    NOT_READY: BmcNotReady,
    AUTH: AuthenticationError,
    JOB_BUSY: JobBusyError,
}


def from_sushy(exc: Exception, doing: str) -> MetalplaneError:  # noqa: PLR0911
    """Turn a sushy (or requests) exception raised while ``doing`` something into a typed error.

    The message names the action, the HTTP status and the BMC's own message, never credentials.
    """
    import sushy.exceptions as sx  # sushy is present whenever a sushy exception exists

    if isinstance(exc, MetalplaneError):
        return exc
    if isinstance(exc, sx.HTTPError):
        ids = message_ids({"error": exc.body} if exc.body else None)
        detail = exc.detail or exc.code or ""
        category = classify(exc.status_code, ids, str(detail))
        cls = _CLASSES.get(category, RedfishError)
        url = _url_of(exc)
        hint = ""
        if category == AUTH:
            hint = " Check username/password (REDFISH_USERNAME/REDFISH_PASSWORD) and the BMC's session limit."
        msg = f"{doing} failed: HTTP {exc.status_code} {', '.join(ids) or exc.code}: {detail}.{hint}"
        return cls(msg, category=category, message_ids=ids, status=exc.status_code, url=url)
    if isinstance(exc, sx.ConnectionError) and CERTIFICATE_FAILED in str(exc):
        # Final, not "not ready": no wait makes a certificate trusted. Name the option that trusts it.
        return RedfishError(
            f"{doing} failed: the BMC's TLS certificate is not trusted ({CERTIFICATE_FAILED}): give its CA with "
            "ca_cert (inventory variable bmc_ca_cert); validate_certs: false only for a throwaway lab",
            category=OTHER,
        )
    if isinstance(exc, sx.ConnectionError):
        return BmcNotReady(f"{doing} failed: the BMC is unreachable ({_short(exc)})", category=NOT_READY)
    if isinstance(exc, sx.MissingActionError | sx.MissingAttributeError | sx.OEMExtensionNotFoundError):
        return UnsupportedError(f"{doing}: the BMC does not support it ({_short(exc)})")
    if isinstance(exc, sx.InvalidParameterValueError):
        return InputError("parameters", f"{doing}: {_short(exc)}")
    if isinstance(exc, sx.SushyError):
        return RedfishError(f"{doing} failed: {_short(exc)}")
    return RedfishError(f"{doing} failed: {type(exc).__name__}: {exc}")


def _url_of(exc: Exception) -> str | None:
    match = re.search(r"(https?://\S+)", str(exc))
    return match.group(1) if match else None


def _short(exc: Exception) -> str:
    text = str(exc)
    return text if len(text) < 400 else text[:400] + "..."
