# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Vultr error bodies -> the collection's typed errors.

Why: Vultr answers ``{"error": "<text>", "status": <int>}`` and reports a missing cluster or node
pool either as HTTP 404 or through the messages ``Invalid resource ID`` / ``Invalid NodePool ID``
(Terraform's ``checkIsMissing`` matches the same strings). Callers only ever see
``NotFoundError`` for "absent" and ``ApiError`` for everything else, never a vultr-python type.

This file is PRIVATE to the collection: other collections must not import it.
"""

from __future__ import annotations

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    ApiError,
    MetalplaneError,
    NotFoundError,
)

# Messages Vultr uses for "no such object" (with 404, and sometimes with 400).
NOT_FOUND_MESSAGES = ("invalid resource id", "invalid nodepool id")


class TransportError(ApiError):
    """No HTTP response arrived (connection reset, timeout, lost response).

    For a POST this is ambiguous: the server may have acted. Callers re-read before retrying.
    """

    kind = "transport"


def is_not_found(status: int | None, message: str) -> bool:
    """404, or one of Vultr's "not found" messages whatever the status."""
    text = (message or "").lower()
    return status == 404 or any(marker in text for marker in NOT_FOUND_MESSAGES)


def map_error(status: int, message: str, *, method: str, path: str) -> MetalplaneError:
    """The typed error for a non-2xx Vultr response (the message never carries the API key)."""
    text = message or "(empty body)"
    if is_not_found(status, text):
        return NotFoundError(
            f"Vultr {method} {path}: not found ({text})",
            details={"status": status, "method": method, "path": path},
        )
    if status in (401, 403):
        return ApiError(
            f"Vultr {method} {path} was refused (HTTP {status}: {text}); check api_key and its IP access control",
            status=status,
            method=method,
            url=path,
        )
    return ApiError(f"Vultr {method} {path} failed with HTTP {status}: {text}", status=status, method=method, url=path)


def is_server_error(exc: BaseException) -> bool:
    """A 5xx that survived the retry layer (the server may or may not have acted)."""
    return isinstance(exc, ApiError) and exc.status is not None and exc.status >= 500


def is_ambiguous_write_failure(exc: BaseException) -> bool:
    """A write whose outcome is unknown: a lost response or a 5xx. Re-read before doing anything."""
    return isinstance(exc, TransportError) or is_server_error(exc)
