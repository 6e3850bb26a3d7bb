# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one Vultr API client of this collection, built on vultr-python.

Why: vultr-python (``vultr.Vultr``) gives the Bearer-authenticated ``requests`` session and the
verb helpers, but hard-codes a 10 s timeout, has no pagination, no base-URL option and raises one
exception type for everything. This subclass (through ``vultr_adapter.VultrBase``, the one file that
touches vultr-python's internals) keeps its session and verbs and adds:

* the base URL from ``api_endpoint`` (vultr.cloud convention: ``https://api.vultr.com``, ``/v2`` appended);
* ``Content-Type: application/json`` on every request (the API rejects requests without it);
* a urllib3 ``Retry`` mounted on the session (:class:`VultrRetry`): 429 and 503 are retried for every
  method honouring ``Retry-After``; other 5xx and read errors only for idempotent methods, so a POST
  is never blindly replayed. :meth:`VultrClient.create` re-reads after an ambiguous POST failure and
  sends the create again only when the re-read shows it did not take effect (bounded, with backoff);
* cursor pagination (``meta.links.next``) and typed errors (see ``errors.py``);
* a per-instance request counter (no global state), reported by the modules for the benchmark.
"""

from __future__ import annotations

import random
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ApiError, InputError

from .errors import TransportError, is_ambiguous_write_failure, is_server_error, map_error, retry_after_of
from .vultr_adapter import VultrBase

VULTR_IMPORT_ERROR: str | None
try:
    import requests
    from requests.adapters import HTTPAdapter
    from urllib3.exceptions import (
        ConnectTimeoutError,
        NewConnectionError,
        ProtocolError,
        ReadTimeoutError,
        SSLError,
    )
    from urllib3.util.retry import Retry
    from vultr import VultrException

    VULTR_IMPORT_ERROR = None
except ImportError:  # pragma: no cover - exercised by the sanity import test
    VULTR_IMPORT_ERROR = traceback.format_exc()
    Retry = object  # type: ignore[assignment,misc]
    # Never raised without urllib3: the classification below then finds no known cause.
    ConnectTimeoutError = NewConnectionError = ProtocolError = ReadTimeoutError = SSLError = type(  # type: ignore[misc]
        "_Absent", (Exception,), {}
    )

T = TypeVar("T")

DEFAULT_ENDPOINT = "https://api.vultr.com"  # the API lives under <endpoint>/v2
API_PREFIX = "/v2"
# Statuses that mean "not processed, come back later": retried for EVERY method, Retry-After honoured.
THROTTLE_STATUSES = frozenset({429, 503})
# Other server errors: the request may have been processed, so only idempotent methods are retried.
SERVER_ERROR_STATUSES = frozenset({500, 502, 504})
# Methods safe to replay. PATCH is included because this collection only PATCHes absolute values
# (node_quantity, autoscaler bounds, tag); additive labels/taints go through their own endpoints.
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "PATCH"})
PAGE_SIZE = 500  # Vultr's maximum per_page: a list costs one request up to 500 objects
RETRY_AFTER_MAX = 120.0  # never sleep longer than this on one Retry-After
# A create whose POST failed ambiguously (5xx or lost response) and whose re-read found nothing is
# sent at most this many times in total.
CREATE_ATTEMPTS = 3
# The retry layer's backoff (urllib3 Retry), also used between the sends of a create.
BACKOFF_FACTOR = 0.5
BACKOFF_JITTER = 0.25


def should_retry_status(method: str, status: int) -> bool:
    """Retry classification of a response status (pure, unit-tested)."""
    if status in THROTTLE_STATUSES:
        return True
    return status in SERVER_ERROR_STATUSES and method.upper() in IDEMPOTENT_METHODS


@dataclass
class RequestCounter:
    """Requests made by one client: ``calls`` logical calls, ``retries`` extra wire requests."""

    calls: int = 0
    retries: int = 0
    by_method: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.calls + self.retries

    def as_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "retries": self.retries, "total": self.total, "by_method": dict(self.by_method)}


class VultrRetry(Retry):  # type: ignore[misc,valid-type]
    """urllib3 Retry with this collection's classification and a shared request counter.

    ``allowed_methods`` stays the idempotent set, so urllib3 never replays a POST after a read
    error (the request may have been processed); :meth:`is_retry` widens *status* retries to every
    method for 429/503 only.
    """

    counter: RequestCounter | None = None

    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        if not self.total:
            return False
        return should_retry_status(method, status_code)

    def get_retry_after(self, response: Any) -> float | None:
        requested = super().get_retry_after(response)
        return None if requested is None else min(requested, RETRY_AFTER_MAX)

    def new(self, **kw: Any) -> VultrRetry:
        fresh = super().new(**kw)
        fresh.counter = self.counter
        return fresh

    def increment(self, *args: Any, **kwargs: Any) -> VultrRetry:
        fresh = super().increment(*args, **kwargs)
        if self.counter is not None:
            self.counter.retries += 1
        return fresh


def endpoint_url(api_endpoint: str | None) -> str:
    """``https://api.vultr.com`` -> ``https://api.vultr.com/v2`` (a trailing ``/v2`` is accepted)."""
    base = (api_endpoint or DEFAULT_ENDPOINT).rstrip("/")
    scheme, _sep, rest = base.partition("://")
    if scheme.lower() not in ("https", "http") or not rest:
        raise InputError("api_endpoint", f"{api_endpoint!r} is not an http(s) URL; write https://api.vultr.com")
    return base if base.endswith(API_PREFIX) else base + API_PREFIX


class VultrClient(VultrBase):
    """vultr-python's ``Vultr`` with retries, timeouts, pagination, typed errors and counting."""

    def __init__(
        self,
        api_key: str,
        *,
        api_endpoint: str | None = None,
        timeout: float = 60.0,
        retries: int = 5,
        retry_max_delay: float = 12.0,
        validate_certs: bool = True,
        ca_cert: str | None = None,
        user_agent: str = "metalplane.inference",
    ) -> None:
        super().__init__(api_key=api_key)
        self.url = endpoint_url(api_endpoint)  # instance attribute shadows Vultr.url
        self.timeout = timeout
        self.retry_max_delay = retry_max_delay
        self.sleep: Callable[[float], None] = time.sleep  # replaced in unit tests
        self.counter = RequestCounter()
        # A CA bundle verifies against it (a TLS-inspecting proxy's CA); validate_certs false turns verification off.
        # Passed with each request too: requests lets REQUESTS_CA_BUNDLE override a session's verify (psf/requests
        # #3829), which would silently ignore ca_cert on the many controllers that set that variable.
        self.verify: bool | str = ca_cert if (ca_cert and validate_certs) else validate_certs
        self.http_session.verify = self.verify
        self.http_session.headers.update(
            {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": user_agent}
        )
        retry = VultrRetry(
            total=retries,
            connect=retries,
            read=retries,
            status=retries,
            backoff_factor=BACKOFF_FACTOR,
            backoff_max=retry_max_delay,
            backoff_jitter=BACKOFF_JITTER,
            allowed_methods=IDEMPOTENT_METHODS,
            status_forcelist=THROTTLE_STATUSES | SERVER_ERROR_STATUSES,
            respect_retry_after_header=True,
            raise_on_status=False,  # the last 429/5xx reaches our error mapping
        )
        retry.counter = self.counter
        adapter = HTTPAdapter(max_retries=retry)
        self.http_session.mount("https://", adapter)
        self.http_session.mount("http://", adapter)

    def _path(self, url: str) -> str:
        return "/" + url[len(self.url) :].lstrip("/") if url.startswith(self.url) else url

    def request(self, method: str, url: str, data: Any = None, params: dict[str, Any] | None = None) -> Any:
        """One API call (vultr-python's transport, replaced for timeout, errors and counting)."""
        verb = method.upper()
        path = self._path(url)
        self.counter.calls += 1
        self.counter.by_method[verb] = self.counter.by_method.get(verb, 0) + 1
        retries_before = self.counter.retries
        try:
            response = self.http_session.request(
                verb, url, params=params, json=data, timeout=self.timeout, verify=self.verify
            )
        except requests.RequestException as exc:
            attempts = 1 + self.counter.retries - retries_before
            raise transport_error(verb, path, exc, timeout=self.timeout, attempts=attempts) from None
        if not response.ok:
            error = VultrException(response)
            raise map_error(error.status, error.error, method=verb, path=path, retry_after=_retry_after(response))
        if response.status_code == 204 or not response.content:
            return None
        if response.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            raise ApiError(
                f"Vultr {verb} {path}: expected a JSON response, got {response.headers.get('content-type')!r}",
                status=response.status_code,
                method=verb,
                url=path,
            )
        return response.json()

    # -- verbs with explicit bodies (vultr-python's post/patch/put take **kwargs) -----------------

    def call(
        self, method: str, path: str, body: dict[str, Any] | None = None, params: dict[str, Any] | None = None
    ) -> Any:
        return self.request(method, f"{self.url}/{path.lstrip('/')}", body, params=params)

    def list_all(self, path: str, key: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Every item of a cursor-paginated list (``meta.links.next`` until empty)."""
        query: dict[str, Any] = {"per_page": PAGE_SIZE, **(params or {})}
        items: list[dict[str, Any]] = []
        seen: set[str] = set()
        while True:
            page = self.get(path, params=query) or {}
            items.extend(page.get(key) or [])
            cursor = ((page.get("meta") or {}).get("links") or {}).get("next") or ""
            if not cursor or cursor in seen:  # a repeated cursor would loop forever
                return items
            seen.add(cursor)
            query = {**query, "cursor": cursor}

    def create(
        self,
        path: str,
        body: dict[str, Any],
        key: str,
        find: Callable[[], dict[str, Any] | None],
        *,
        attempts: int = CREATE_ATTEMPTS,
        server_error_is_final: bool = False,
    ) -> tuple[dict[str, Any], bool]:
        """POST a create, never replaying it blindly; return ``(object, recovered)``.

        After a lost response or a 5xx, ``find()`` re-reads (list by label/marker). If the object
        exists, the create took effect: it is returned with ``recovered=True`` and never sent again.
        If it does not, the create is sent again after the retry layer's backoff (or the
        ``Retry-After`` the error carried), up to ``attempts`` sends in total; then the last error is
        raised, naming the endpoint. ``server_error_is_final``: a 5xx is raised at once, without a
        re-read (for creates whose 5xx has a known meaning the caller handles, such as vpc_only).
        """
        sends = max(1, attempts)
        last: ApiError | None = None
        for attempt in range(sends):
            try:
                created = self.call("POST", path, body) or {}
                return created.get(key) or {}, False
            except ApiError as exc:
                if not is_ambiguous_write_failure(exc) or (server_error_is_final and is_server_error(exc)):
                    raise
                last = exc
            found = find()
            if found is not None:
                return found, True
            if attempt + 1 < sends:
                self.sleep(self.resend_delay(attempt, last))
        if last is None:  # unreachable: the loop returns or records an error
            raise ApiError(f"Vultr POST {path}: create failed", method="POST", url=path)
        raise last.__class__(
            f"Vultr POST {path}: the create failed {sends} times (last: {last.msg}); after each failure a re-read "
            "found nothing created, so nothing was left behind",
            status=last.status,
            method="POST",
            url=path,
            details={"attempts": sends},
        ) from None

    def resend_delay(self, attempt: int, exc: BaseException) -> float:
        """Seconds before sending a create again: ``Retry-After`` if given, else the retry backoff."""
        requested = retry_after_of(exc)
        if requested is not None:
            return min(max(requested, 0.0), RETRY_AFTER_MAX)
        backoff = min(self.retry_max_delay, BACKOFF_FACTOR * (2**attempt))
        return backoff + random.random() * BACKOFF_JITTER


# What went wrong on the wire, as told to the user (see ``transport_failure``).
READ_TIMEOUT = "read timeout"  # connected, but no answer within api_timeout
CONNECT_TIMEOUT = "connect timeout"  # no TCP/TLS connection within api_timeout
CONNECTION_FAILED = "connection failed"  # refused, no route, name not resolved
CONNECTION_LOST = "connection lost"  # closed or reset before the answer (a lost response)
TLS_FAILED = "TLS error"  # handshake or certificate verification failed
# What OpenSSL says when the server's certificate does not chain to a trusted CA (inside requests' SSLError).
CERTIFICATE_FAILED = "CERTIFICATE_VERIFY_FAILED"
NO_RESPONSE = "no response"  # anything else requests raised


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and everything it wraps, outermost first.

    requests hides urllib3's error: a read timeout that outlasted the retries arrives as
    ``requests.ConnectionError(MaxRetryError(reason=ReadTimeoutError))``, the cause sitting in
    ``args`` and ``reason``, not always in ``__cause__``.
    """
    found: list[BaseException] = []
    pending: list[Any] = [exc]
    while pending:
        current = pending.pop(0)
        if not isinstance(current, BaseException) or any(current is seen for seen in found):
            continue
        found.append(current)
        pending += [getattr(current, "reason", None), current.__cause__, current.__context__, *current.args]
    return found


def transport_failure(exc: BaseException) -> str:
    """Classify an exception of the transport (requests/urllib3/socket) by its outermost known cause."""
    causes = _causes(exc)
    # Per cause, most specific first. NewConnectionError subclasses ConnectTimeoutError (urllib3), so it is
    # looked for before it; requests' own timeouts are the outer types when no urllib3 cause is kept.
    checks: tuple[tuple[Any, str], ...] = (
        (NewConnectionError, CONNECTION_FAILED),
        (ReadTimeoutError, READ_TIMEOUT),
        (ConnectTimeoutError, CONNECT_TIMEOUT),
        (requests.exceptions.ReadTimeout, READ_TIMEOUT),
        (requests.exceptions.ConnectTimeout, CONNECT_TIMEOUT),
        ((SSLError, requests.exceptions.SSLError), TLS_FAILED),
        ((ProtocolError, ConnectionResetError, ConnectionAbortedError), CONNECTION_LOST),
        (ConnectionRefusedError, CONNECTION_FAILED),
        (TimeoutError, READ_TIMEOUT),  # socket.timeout: a bare timeout is met while reading
    )
    for cause in causes:  # the outermost known cause wins: it is what finally happened
        for types, kind in checks:
            if isinstance(cause, types):
                return kind
    return NO_RESPONSE


def transport_error(verb: str, path: str, exc: BaseException, *, timeout: float, attempts: int) -> TransportError:
    """The error for a request that got no HTTP answer, saying what happened (never the API key)."""
    kind = transport_failure(exc)
    tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
    if kind == READ_TIMEOUT:
        msg = (
            f"Vultr {verb} {path}: timed out after {timeout:g} s ({kind}: no answer within api_timeout) on {tries}; "
            "the API is slow or overloaded: retry later or raise api_timeout"
        )
    elif kind == TLS_FAILED and any(CERTIFICATE_FAILED in str(cause) for cause in _causes(exc)):
        # Final: no retry makes a certificate trusted. Name the option that trusts it.
        msg = (
            f"Vultr {verb} {path}: the API's TLS certificate is not trusted ({CERTIFICATE_FAILED}): give its CA bundle "
            "with ca_cert (for example a TLS-inspecting proxy's CA); validate_certs: false only for a throwaway lab"
        )
    elif kind == CONNECT_TIMEOUT:
        msg = (
            f"Vultr {verb} {path}: timed out after {timeout:g} s ({kind}: no connection within api_timeout) on "
            f"{tries}; the API may be unreachable: check api_endpoint and the network"
        )
    else:
        msg = (
            f"Vultr {verb} {path}: no response ({kind}, {type(exc).__name__}) on {tries}; "
            "the API may be unreachable: check api_endpoint and the network"
        )
    return TransportError(
        msg, method=verb, url=path, details={"transport": kind, "timeout": timeout, "attempts": attempts}
    )


def _retry_after(response: Any) -> float | None:
    """``Retry-After`` in seconds (the integer form Vultr documents), or None."""
    value = response.headers.get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
