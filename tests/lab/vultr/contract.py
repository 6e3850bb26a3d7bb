"""Check every exchange with the Vultr emulator against ``vke-subset-overlay.json`` (openapi-core).

Why: an emulator that drifts from the real API makes the modules pass against a fiction. The
overlay is the VKE subset of Vultr's official OpenAPI spec plus the post-2023 fields, each marked
``x-source`` (the spec is the 2023-12 ``blob/v0.0.1.json`` of vultr/vultr-java; the later fields come
from vultr/vultr-mcp's ``openapi.json`` and govultr). The check is strict:

* requests: unknown paths and methods, undeclared query parameters, wrong bodies, unknown body
  fields (``additionalProperties`` defaults to *forbid*), a missing Bearer header on a secured
  operation, a body that is not ``application/json``;
* responses: undeclared status codes, wrong types, missing documented fields (every documented
  property is *required*), undocumented fields, and a ``Content-Type`` that is not exactly
  ``application/json`` (vultr-python 0.2.0 parses JSON only then).

Exemptions are explicit, never silent: the spec gaps below (``KNOWN_RESPONSE_GAPS``: fields the live
API sends that the overlay lacks) are counted in ``VultrContract.gap_hits``; an injected fault whose
status the operation does not declare is recorded as exempt; a test that sends an invalid request on
purpose wraps it in ``emu.expect_violations(reason)`` (see ``lab.vultr.server``).

The spec is not copied into the repository: it is read from ``<repo>/../shared/reference/vultr/``.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from lab.common.reference import reference_path, require

SPEC_DIR = reference_path("vultr")
OVERLAY = SPEC_DIR / "vke-subset-overlay.json"

# The contract report the out-of-process emulator keeps in its state directory (``--contract``):
# ``VultrEmulator.contract_report()`` as JSON, rewritten at start, on every violation and at shutdown.
# labctl reads it (``lab.common.registry``), so it is named here, where importing costs no HTTP server.
CONTRACT_REPORT = "vultr-contract.json"
# What starts each violation line the out-of-process emulator prints on stderr.
VIOLATION_PREFIX = "CONTRACT VIOLATION:"

# The synthetic origin used for validation; the spec's ``servers`` is rewritten to it, so the
# emulator's real port never matters.
_ORIGIN = "http://vultr.lab"
_BASE_PATH = "/v2"
_HTTP_METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


@dataclass(frozen=True)
class Gap:
    """A field the live API sends that the overlay does not document."""

    name: str  # the property
    where: str  # regex on the dotted path of the object holding it (list indexes are "*")
    why: str


KNOWN_RESPONSE_GAPS: tuple[Gap, ...] = (
    Gap("status", r"(^|\.)(nodes|worker_nodes)\.\*$", "nodepool-instances: every example has status"),
    Gap("gpu_vram_gb", r"^plans\.\*$", "plan GPU fields, govultr plans.go / Terraform"),
    Gap("gpu_type", r"^plans\.\*$", "plan GPU fields, govultr plans.go / Terraform"),
)
# ``/resources`` arrays carry ``minItems: 1`` in the spec, yet a cluster without volumes or load
# balancers has none: an empty list there is a spec quirk, not an emulator error.
_EMPTY_LIST_GAP = re.compile(r"^resources\.(block_storage|load_balancer)$")

_ADDITIONAL = re.compile(r"Additional properties are not allowed \((.*) (?:was|were) unexpected\)")


@dataclass
class Exchange:
    """One request and its response (``status`` None: the response was deliberately lost)."""

    method: str
    path: str  # including /v2, without the query string
    query: list[tuple[str, str]]
    headers: dict[str, str]
    body: bytes
    content_type: str
    status: int | None = None
    response_headers: dict[str, str] = field(default_factory=dict)
    response_body: bytes = b""
    fault: str | None = None


def overlay_available(path: Path = OVERLAY) -> bool:
    return path.is_file()


@lru_cache(maxsize=4)
def _load(path_text: str) -> tuple[Any, Any, dict[str, Any]]:
    from openapi_core import OpenAPI
    from openapi_core.configurations import Config

    spec = json.loads(Path(path_text).read_text(encoding="utf-8"))
    spec["servers"] = [{"url": _ORIGIN + _BASE_PATH}]
    requests_api = OpenAPI.from_dict(spec, config=Config(additional_properties_default_policy="forbid"))
    responses_api = OpenAPI.from_dict(
        spec,
        config=Config(additional_properties_default_policy="forbid", response_properties_default_policy="required"),
    )
    return requests_api, responses_api, spec


def _dotted(path: Any) -> str:
    return ".".join("*" if isinstance(p, int) else str(p) for p in path)


class VultrContract:
    """Validates exchanges; thread-safe (the emulator serves from several threads)."""

    def __init__(self, spec_path: str | Path | None = None) -> None:
        path = Path(spec_path) if spec_path is not None else OVERLAY
        if not path.is_file():
            raise FileNotFoundError(f"Vultr overlay spec not found at {path}")
        self.spec_path = path
        self._requests_api, self._responses_api, self.spec = _load(str(path))
        self._lock = threading.Lock()
        self.gap_hits: Counter[str] = Counter()
        self._templates = sorted(
            ((self._template_regex(t), t) for t in self.spec["paths"]),
            key=lambda item: item[1].count("{"),  # literal segments win over parameters
        )

    @staticmethod
    def _template_regex(template: str) -> re.Pattern[str]:
        parts = re.split(r"(\{[^}]+\})", template)
        return re.compile("^" + "".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts) + "$")

    def operation(self, method: str, path: str) -> tuple[str, dict[str, Any]] | None:
        """The spec template and operation for a concrete path below /v2 (None: not in the spec)."""
        for regex, template in self._templates:
            if regex.match(path):
                item = self.spec["paths"][template]
                op = item.get(method.lower())
                return (template, op) if isinstance(op, dict) else None
        return None

    def declared_statuses(self, method: str, path: str) -> set[str]:
        found = self.operation(method, path)
        return set(found[1].get("responses", {})) if found else set()

    # ---- the check ------------------------------------------------------------------------------

    @staticmethod
    def label(ex: Exchange) -> str:
        """What every violation of ``ex`` starts with (then ``": "`` and the reason)."""
        return f"{ex.method} {ex.path}" + (f" -> {ex.status}" if ex.status is not None else " -> (lost)")

    def check(self, ex: Exchange) -> tuple[list[str], list[str]]:
        """Return (violations, exemption notes) for one exchange."""
        from openapi_core.testing import MockRequest, MockResponse

        label = self.label(ex)
        below = ex.path[len(_BASE_PATH) :] if ex.path.startswith(_BASE_PATH + "/") else ex.path
        violations: list[str] = []
        notes: list[str] = []
        request = MockRequest(
            _ORIGIN,
            ex.method.lower(),
            ex.path,
            args=ex.query,  # type: ignore[arg-type]  # a list of pairs keeps repeated keys
            headers=ex.headers,
            data=ex.body or None,
            content_type=ex.content_type,
        )
        with self._lock:
            request_errors = list(self._requests_api.iter_request_errors(request))
        violations += [f"{label}: request: {self._describe(e)}" for e in request_errors]
        found = self.operation(ex.method, below)
        if found is not None:
            declared = {p["name"] for p in self._parameters(found[0], found[1]) if p.get("in") == "query"}
            violations += [
                f"{label}: request: undeclared query parameter {k!r}" for k in dict(ex.query) if k not in declared
            ]
        if ex.status is None:
            return violations, notes
        if ex.fault is not None and str(ex.status) not in self.declared_statuses(ex.method, below):
            notes.append(f"{label}: injected fault {ex.fault!r}: status not declared by the spec")
            return violations, notes
        ctype = ex.response_headers.get("Content-Type")
        if ex.response_body and ctype != "application/json":
            violations.append(f"{label}: response Content-Type {ctype!r} is not exactly 'application/json'")
        if ex.status == 204 and ex.response_body:
            violations.append(f"{label}: a 204 response has a body")
        response = MockResponse(
            ex.response_body, status_code=ex.status, content_type=ctype or "", headers=ex.response_headers
        )
        with self._lock:
            response_errors = list(self._responses_api.iter_response_errors(request, response))
        for error in response_errors:
            violations += [f"{label}: response: {msg}" for msg in self._response_messages(error)]
        return violations, notes

    def _parameters(self, template: str, op: dict[str, Any]) -> list[dict[str, Any]]:
        return [*self.spec["paths"][template].get("parameters", []), *op.get("parameters", [])]

    @staticmethod
    def _describe(error: BaseException) -> str:
        cause = error.__cause__
        schema_errors = getattr(cause, "schema_errors", None)
        if schema_errors:
            return "; ".join(f"{_dotted(se.absolute_path) or '<body>'}: {se.message}" for se in schema_errors)
        try:
            text = str(error)
        except Exception:  # openapi-core's own __str__ fails on bodies that are not UTF-8
            text = "(undescribable)"
        return f"{type(error).__name__}: {text}" + (f" ({cause!r})" if cause is not None else "")

    def _response_messages(self, error: BaseException) -> list[str]:
        schema_errors = getattr(error.__cause__, "schema_errors", None)
        if not schema_errors:
            return [self._describe(error)]
        out = []
        for se in schema_errors:
            where = _dotted(se.absolute_path)
            match = _ADDITIONAL.search(se.message)
            if match:
                names = re.findall(r"'([^']+)'", match[1])
                left = [n for n in names if not self._gap(n, where)]
                if left:
                    out.append(f"{where or '<body>'}: undocumented field(s) {', '.join(left)}")
                continue
            if se.validator == "minItems" and se.instance == [] and _EMPTY_LIST_GAP.match(where):
                with self._lock:
                    self.gap_hits["empty resources list (minItems: 1)"] += 1
                continue
            out.append(f"{where or '<body>'}: {se.message}")
        return out

    def _gap(self, name: str, where: str) -> bool:
        for gap in KNOWN_RESPONSE_GAPS:
            if gap.name == name and re.search(gap.where, where):
                with self._lock:
                    self.gap_hits[f"{gap.name} ({gap.why})"] += 1
                return True
        return False


def assert_no_violations(emu: Any) -> None:
    """Fail (``AssertionError``) if the emulator saw a contract violation or an internal error."""
    problems = [*emu.contract_violations, *(f"emulator internal error: {e}" for e in emu.internal_errors)]
    if problems:
        shown = "\n  ".join(problems[:30])
        more = f"\n  ... and {len(problems) - 30} more" if len(problems) > 30 else ""
        raise AssertionError(f"{len(problems)} Vultr contract violation(s):\n  {shown}{more}")


def contract_or_skip(spec_path: str | Path | None = None) -> VultrContract:
    """A contract for tests; skips the test with the reason when the shared spec is absent."""
    path = Path(spec_path) if spec_path is not None else OVERLAY
    return VultrContract(require(path, "the Vultr overlay spec"))
