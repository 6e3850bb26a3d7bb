# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Typed errors shared by every module of the collection.

Why: modules raise these deep inside the API clients and planners and fail exactly once, at the top
(see ``module.MetalplaneModule.run``). That keeps the code free of ``{"ret": False}`` dictionaries
and makes every failure carry a message written for the operator plus structured details that a
playbook can inspect (``result.error``).
"""

from __future__ import annotations

from typing import Any


class MetalplaneError(Exception):
    """Base class: a failure the operator can act on.

    ``msg`` is the one-line, user-facing explanation (what failed and how to fix it).
    ``details`` is JSON-serialisable context returned under ``error`` in the module result;
    it must never contain a secret.
    """

    kind = "error"

    def __init__(self, msg: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(msg)
        self.msg = msg
        self.details: dict[str, Any] = dict(details or {})

    def to_result(self) -> dict[str, Any]:
        """The ``error`` entry of a failed module result."""
        return {"kind": self.kind, **self.details}


class InputError(MetalplaneError):
    """The user's input is invalid; raised before anything is created or changed.

    ``field`` names the option (dotted for nested options) so the message can point at it.
    """

    kind = "input"

    def __init__(self, field: str, msg: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{field}: {msg}", details={"field": field, **(details or {})})
        self.field = field


class NotFoundError(MetalplaneError):
    """A resource the caller required does not exist."""

    kind = "not_found"


class ConflictError(MetalplaneError):
    """The observed state forbids the requested change (immutable field, foreign owner, ...)."""

    kind = "conflict"


class ApiError(MetalplaneError):
    """A remote API answered with an error that no retry or recovery could fix."""

    kind = "api"

    def __init__(
        self,
        msg: str,
        *,
        status: int | None = None,
        method: str | None = None,
        url: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        extra = {"status": status, "method": method, "url": url}
        super().__init__(msg, details={**{k: v for k, v in extra.items() if v is not None}, **(details or {})})
        self.status = status


class WaitTimeout(MetalplaneError):
    """A wait ran past its deadline; ``last_seen`` says what the last observation was."""

    kind = "timeout"

    def __init__(self, msg: str, *, last_seen: Any = None, details: dict[str, Any] | None = None) -> None:
        super().__init__(msg, details={"last_seen": last_seen, **(details or {})})
        self.last_seen = last_seen
