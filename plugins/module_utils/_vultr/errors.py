# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Vultr error bodies -> the collection's typed errors.

Why: Vultr answers ``{"error": "<text>", "status": <int>}`` and reports a missing cluster or node
pool either as HTTP 404 or through the messages ``Invalid resource ID`` / ``Invalid NodePool ID``
(Terraform's ``checkIsMissing`` matches the same strings). Callers only ever see
``NotFoundError`` for "absent" and ``ApiError`` for everything else, never a vultr-python type.
"""

from __future__ import annotations

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    ApiError,
    InputError,
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


def map_error(
    status: int, message: str, *, method: str, path: str, retry_after: float | None = None
) -> MetalplaneError:
    """The typed error for a non-2xx Vultr response (the message never carries the API key).

    ``retry_after`` (seconds, from the ``Retry-After`` header) is kept in ``details`` so that a
    caller that sends a create again honours it like the retry layer does.
    """
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
    return ApiError(
        f"Vultr {method} {path} failed with HTTP {status}: {text}",
        status=status,
        method=method,
        url=path,
        details={"error": text, **({"retry_after": retry_after} if retry_after is not None else {})},
    )


def is_server_error(exc: BaseException) -> bool:
    """A 5xx that survived the retry layer (the server may or may not have acted)."""
    return isinstance(exc, ApiError) and exc.status is not None and exc.status >= 500


def is_ambiguous_write_failure(exc: BaseException) -> bool:
    """A write whose outcome is unknown: a lost response or a 5xx. Re-read before doing anything."""
    return isinstance(exc, TransportError) or is_server_error(exc)


def retry_after_of(exc: BaseException) -> float | None:
    """The ``Retry-After`` seconds an error response carried, if any."""
    details = getattr(exc, "details", None) or {}
    value = details.get("retry_after")
    return float(value) if isinstance(value, (int, float)) else None


def is_ineligible_plan(exc: BaseException) -> bool:
    """A create POST answered "Invalid NodePool ID": VKE's (misleading) refusal of a plan.

    On a create there is no node pool id to be invalid; VKE answers this for a plan that exists and
    may be sold in the region but is not accepted in node pools. Only a third-party report shows this;
    Vultr's API documentation (https://www.vultr.com/api/) lists neither the message nor the plans
    VKE accepts.
    """
    return isinstance(exc, NotFoundError) and "invalid nodepool id" in exc.msg.lower()


def ineligible_plan_error(field: str, plan: str, region: str | None, exc: BaseException) -> InputError:
    """``InputError`` naming the plan option, with the way out."""
    where = f" (region: {region}, available_only: true)" if region else ""
    return InputError(
        field,
        f"plan {plan!r} is not accepted by VKE for node pools: the create was refused with 'Invalid NodePool ID' "
        "(VKE's answer for an ineligible plan; availability in a region is necessary but not sufficient). "
        f"Choose another plan: metalplane.inference.vultr_gpu_plan_info{where} lists the GPU plans sold there; "
        "VKE node pools accept only some of them and have refused fractional vGPU slices (plans[].fractional).",
        details={"plan": plan, "api_error": getattr(exc, "msg", str(exc))},
    )


VPC_ONLY_EXPLANATION = (
    "VKE refused to create {what} with vpc_only: true (HTTP {status}: {error}). VKE has failed "
    "creation for VPC-only node pools (without vpc_only, nodes keep public interfaces). Check that "
    "the cluster's VPC has a NAT gateway in region {region}, or set vpc_only: false. Nothing was left "
    "behind{cleanup}."
)


def vpc_only_error(what: str, exc: ApiError, region: str | None, cleanup: str) -> ApiError:
    """The error that explains a failed VPC-only create (after any partial object was deleted)."""
    error = exc.details.get("error") or exc.msg
    return ApiError(
        VPC_ONLY_EXPLANATION.format(what=what, status=exc.status, error=error, region=region, cleanup=cleanup),
        status=exc.status,
        details={"vpc_only": True},
    )
