# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Problems a preflight collects, and the one error that reports them all.

Why a list and not the first ``InputError``: a preflight checks a whole inventory before anything is created,
and an operator fixing one typo per run would need as many runs as there are typos. Each problem names the field
that holds it (``clusters[0].gateway``) and what to do about it; the module fails once, with all of them in
``error.problems``. Shared by the preflights of every platform (``vke_preflight``, ``metal_preflight``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InputError, MetalplaneError


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the inventory: where (``field``) and what to do about it."""

    field: str
    msg: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "msg": self.msg}

    @classmethod
    def from_input_error(cls, exc: InputError, prefix: str = "", rename: dict[str, str] | None = None) -> Problem:
        """An ``InputError`` raised by a validator shared with another module, re-homed under ``prefix``: its
        field (``network.gateway``, renamed to ``gateway`` by ``rename``) becomes ``<prefix>.gateway``."""
        name = (rename or {}).get(exc.field, exc.field)
        text = exc.msg.split(": ", 1)[-1] if exc.msg.startswith(f"{exc.field}: ") else exc.msg
        return cls(f"{prefix}.{name}" if prefix else name, text)


class PreflightError(MetalplaneError):
    """The inventory has problems; all of them are listed, nothing was created."""

    kind = "input"

    def __init__(self, problems: list[Problem]) -> None:
        lines = "; ".join(f"{p.field}: {p.msg}" for p in problems)
        super().__init__(
            f"preflight found {len(problems)} problem(s), nothing was created: {lines}",
            details={"problems": [p.as_dict() for p in problems]},
        )
        self.problems = problems
