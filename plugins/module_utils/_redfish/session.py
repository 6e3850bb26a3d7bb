# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One sushy client per BMC: timeouts, TLS, a session that is always closed, request counting.

Why: iDRAC8 allows only a handful of concurrent sessions and answers a misleading 401 when they
run out. With ``auth: basic`` (the default) no session exists at all; with ``auth: session`` every
task opens one session and deletes it on the way out, even when it fails. Some firmware is said to
accept HTTP Basic for reads but not for writes (one unconfirmed iDRAC8 field report): when a write is refused
with 401/403 after reads worked, the client opens a session with sushy's ``SessionAuth``, retries
that one write, keeps the session for the rest of the task and deletes it on the way out
(``auth_fallback``). That lives in one place, the sushy ``Connector`` subclass below, because every
request (ours and sushy's own, e.g. ``reset_system``, ``insert_media``, the Dell SCP import) goes
through its ``intercept`` (``sushy_adapter.py`` is the one file that touches sushy's internals).
The System is located with as few requests as the service allows (``system_id``; Dell's fixed
id; DSP0266's ``?only`` where the root advertises it; else listing the collection) and kept: it is
what every module reads first, and with Basic auth its GET is also the credential check. The
client counts every HTTP exchange (sushy's ``response_callback`` on this client's own connector,
no globals), which is what the benchmark and the integration tests read. Waiting for a BMC to
come back after a reset lives here too, because it has to drop and re-create the client.
"""

from __future__ import annotations

import contextlib
import re
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ansible_collections.metalplane.inference.plugins.module_utils._common.api_retries import record_retry
from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    InputError,
    MetalplaneError,
    NotFoundError,
)
from ansible_collections.metalplane.inference.plugins.module_utils._common.waiting import Backoff, Poll, wait_for

from .args import ConnectionParams
from .detect import default_member_id
from .errors import (
    AUTH,
    INVALID,
    NOT_READY,
    AuthenticationError,
    PreconditionFailed,
    classify,
    from_sushy,
    message_ids,
)
from .sushy_adapter import InterceptingConnector, set_root_auth, system_from_document

try:
    import requests
    import sushy
    from sushy import auth as sushy_auth
    from sushy import exceptions as sushy_exceptions

    SUSHY_IMPORT_ERROR: str | None = None
except ImportError:  # pragma: no cover - exercised by the sanity import test
    SUSHY_IMPORT_ERROR = traceback.format_exc()

CONNECT_TIMEOUT = 10  # seconds to open TCP/TLS: an unreachable BMC fails fast, a slow one may still read
# sushy retries GETs on 5xx and any request on SYS518; keep it short, our own waits do the rest.
SERVER_SIDE_RETRIES = 3
SERVER_SIDE_RETRIES_DELAY = 1
DOWN_TIMEOUT = 45  # seconds a reset BMC may keep serving before it goes down (iDRAC8: ~10-30 s)
DOWN_BACKOFF = Backoff(initial=0.5, cap=5.0, factor=1.5, jitter=0.1)
READY_BACKOFF = Backoff(initial=2.0, cap=15.0, factor=1.5, jitter=0.1)
# Requests that change something. A BMC that refuses one with 401/403 has not applied it: it
# checks the credentials (and the privilege) before it acts, so sending it once more is safe.
WRITE_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
REFUSED_STATUSES = frozenset({401, 403})
# "Busy, ask again": a BMC overloaded, or starting after a reset (Dell SYS518 comes with 503). Either status says
# the request was not processed (RFC 9110 15.5.20 and 15.6.4), so any method may be sent again, as sushy already does
# for SYS518 and client-go for every verb.
BUSY_STATUSES = frozenset({429, 503})
# Seconds between the tries of a request the BMC answered busy (Dell: "Retry in a few seconds"); about 15 s in all,
# after sushy's own retries of a GET. A BMC still busy then is reported (a reset BMC is waited for by ``wait_ready``).
BUSY_REQUEST_DELAYS = (2.0, 4.0, 8.0)
# A login refused although the caller proved the credentials, or a request refused after reads with the same
# credentials worked in the task: the BMC restarted (an iDRAC refuses valid credentials for a moment after its
# reboot). Seconds between the tries (option ``refused_login_retries``, one allowance per task for both): spread so
# that even the most tries stay below an iDRAC's count of failed logins within a minute (IPBlocking).
REFUSED_LOGIN_STATUS = 401
REFUSED_LOGIN_DELAY = 15.0
# HTTP 412: an If-Match ETag no longer matches; the resource changed since it was read.
PRECONDITION_FAILED = 412
_WEAK_ETAG = re.compile(r'^W/("[^"]*")$')


def needs_session_for_write(method: str, status: int | None, *, basic: bool, reads_ok: bool) -> bool:
    """Whether a refused request is "a write HTTP Basic may not make" (pure).

    True for a write answered 401/403 while the connector sends HTTP Basic credentials and a read
    with the same credentials already worked in this task: the credentials are right, so a session
    may succeed where Basic did not. A refused read, a refused login, a request sent with a session
    or a write before any read succeeded (wrong password) is not: that error stands.
    """
    return basic and reads_ok and method.upper() in WRITE_METHODS and status in REFUSED_STATUSES


@dataclass
class RequestLog:
    """Every HTTP exchange of one client: (method, path, status)."""

    entries: list[tuple[str, str, int]] = field(default_factory=list)

    def hook(self, response: Any, *_args: Any, **_kwargs: Any) -> None:
        status = int(response.status_code)
        self.entries.append((str(response.request.method), urlsplit(response.url).path, status))
        if status in BUSY_STATUSES:
            # sushy or the connector asks again: a module that ends well got past each of these, and its result
            # says so (api_requests.retries, a recovery on the timeline).
            record_retry()

    @property
    def count(self) -> int:
        return len(self.entries)

    def summary(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for method, _path, _status in self.entries:
            counts[method] = counts.get(method, 0) + 1
        return counts


class _Connector(InterceptingConnector):
    """sushy's ``Connector`` plus two hooks: a busy answer is asked again, a write refused to HTTP Basic is retried
    with a session.

    ``intercept`` sees every sushy request (``get``/``post``/``patch``/``put``/``delete``, sushy's
    own retries and re-logins). sushy gives up on an ``AccessError`` under Basic auth ("no way to
    recover"); here the owning client may open a session instead and the write is sent exactly once
    more, with ``allow_reauth=False`` so sushy adds no third try.
    """

    def __init__(self, *args: Any, client: RedfishClient, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.client = client
        self.basic_reads_ok = False  # a GET with HTTP Basic credentials succeeded in this task
        self.depth = 0  # requests in flight through intercept: more than one while sushy retries inside one

    def intercept(self, method: str, path: str, send: Callable[..., Any], *, allow_reauth: bool) -> Any:
        """Send one request; a busy answer (429, 503) is asked again, a write Basic may not make takes a session.

        sushy's own retries (a GET's 5xx, SYS518) come back through here nested in the outer call; only the outer
        call waits out a busy BMC, so the tries add up instead of multiplying.
        """
        if self.depth:
            return self._send(method, path, send, allow_reauth=allow_reauth)
        delays = iter(BUSY_REQUEST_DELAYS)
        self.depth += 1
        try:
            while True:
                try:
                    return self._send(method, path, send, allow_reauth=allow_reauth)
                except sushy_exceptions.HTTPError as exc:
                    if exc.status_code in BUSY_STATUSES and (delay := next(delays, None)) is not None:
                        pass  # the request log counted the busy answer as a retry
                    elif self._restarted(exc.status_code):
                        delay = REFUSED_LOGIN_DELAY
                    else:
                        raise
                except AuthenticationError as exc:
                    # A write refused to HTTP Basic whose session login was refused too (no session was opened, so
                    # the connector still sends Basic): after a restart that login is what the BMC refuses.
                    if not (self.sends_basic and self._restarted(exc.status)):
                        raise
                    delay = REFUSED_LOGIN_DELAY
                self.client.busy_sleep(delay)
        finally:
            self.depth -= 1

    def _restarted(self, status: int | None) -> bool:
        """A request refused with 401 after a read with the same credentials worked in this task: the BMC restarted
        meanwhile (it refuses valid credentials for a moment after its reboot), so it is asked again 15 s later,
        within the client's ``refused_login_retries`` (what a refused login spends too)."""
        return status == REFUSED_LOGIN_STATUS and self.basic_reads_ok and self.client.spend_refused_retry()

    def _send(self, method: str, path: str, send: Callable[..., Any], *, allow_reauth: bool) -> Any:
        basic = self.sends_basic
        try:
            response = send(allow_reauth=allow_reauth)
        except sushy_exceptions.AccessError as exc:
            if not needs_session_for_write(method, exc.status_code, basic=basic, reads_ok=self.basic_reads_ok):
                raise
            self.client.open_session_for_writes(method, path, exc)
            # The refused write was not applied (401/403 come before the BMC acts), so sending it
            # once more, now with the session, cannot apply it twice.
            try:
                return send(allow_reauth=False)
            except sushy_exceptions.AccessError as again:
                raise self.client.refused_with_session(method, path, exc, again) from again
        if basic and method.upper() == "GET":
            self.basic_reads_ok = True
        return response


class RedfishClient:
    """Context manager around ``sushy.Sushy`` for one BMC.

    ``with RedfishClient(params) as client: client.system ...``; the session is deleted on exit.
    """

    def __init__(self, params: ConnectionParams, *, log: RequestLog | None = None) -> None:
        self.params = params
        self.log = log or RequestLog()
        self.root: Any = None
        self._auth: Any = None
        self._conn: Any = None
        self._system: Any = None
        self._manager: Any = None
        self._system_path: str | None = None
        self.logins = 0
        # HTTP status of the write HTTP Basic was refused, once the task switched to a session.
        self.fallback_status: int | None = None
        self.busy_sleep: Callable[[float], None] = time.sleep  # between the tries of a busy request, a refused login
        # Refusals (401) the task may still wait out: logins, and requests refused after the credentials worked.
        self.refused_left = params.refused_login_retries

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> RedfishClient:
        self.connect()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def connect(self) -> None:
        """Open the client and log in; typed errors (auth, unreachable) on failure.

        A BMC that answers "busy, ask again" (503 or 429: overloaded, or still starting after a reset) is asked
        again by the connector, as for every request. A login refused with 401 is tried again only as often as the
        caller allows (``refused_login_retries``): right after a restart a BMC refuses valid credentials for a
        moment, but a wrong password tried again counts toward the BMC's blocking of this address.
        """
        while True:
            try:
                self._connect_once()
                return
            except MetalplaneError as exc:
                if exc.details.get("status") != REFUSED_LOGIN_STATUS or not self.spend_refused_retry():
                    raise
            self.busy_sleep(REFUSED_LOGIN_DELAY)

    def spend_refused_retry(self) -> bool:
        """Whether a refusal (401) may be waited out once more in this task; counts it as a retry if so."""
        if self.refused_left <= 0:
            return False
        self.refused_left -= 1
        record_retry()
        return True

    def _connect_once(self) -> None:
        p = self.params
        conn = _Connector(
            p.base_url,
            client=self,
            verify=p.verify,
            server_side_retries=SERVER_SIDE_RETRIES,
            server_side_retries_delay=SERVER_SIDE_RETRIES_DELAY,
            default_request_timeout=p.timeout,
            connect_timeout=min(CONNECT_TIMEOUT, p.timeout),
            response_callback=self.log.hook,
        )
        self._conn = conn
        if self.auth_used == "session":  # asked for, or Basic was refused a write earlier in the task
            self._auth = sushy_auth.SessionOrBasicAuth(username=p.username, password=p.password)
        else:
            self._auth = sushy_auth.BasicAuth(username=p.username, password=p.password)
        try:
            self.root = sushy.Sushy(p.base_url, root_prefix=p.root_prefix, auth=self._auth, connector=conn)
            # Basic auth (chosen, or sushy's silent fallback) sends no login request: a wrong
            # password shows on the first GET, so read the System, which every module needs, now.
            self._system = self._load_system()
            self._system_path = str(self._system.path)
        except Exception as exc:
            # The login may have worked (a session exists on the BMC) although a later step failed:
            # a wrong system_id (404), a BMC still starting after a reset (503 SYS518). Delete it.
            self.close()
            if isinstance(exc, MetalplaneError):
                raise
            raise from_sushy(exc, f"Logging in to {p.bmc_url}") from exc
        self.logins += 1

    def close(self) -> None:
        """Delete the session (if any) and close the HTTP connection pool; never raises."""
        try:
            self._delete_session()
        finally:
            self._drop()

    def _delete_session(self) -> None:
        """Best effort DELETE of the open session (the BMC may be rebooting); never raises."""
        if self._auth is None or self._conn is None:
            return
        with contextlib.suppress(Exception):
            session_uri = self._session_uri()
            if session_uri:
                # allow_reauth=False: on a 401 (session already gone, e.g. after a BMC reset) sushy
                # would log in again to retry the DELETE, and leak that new session.
                self._conn.delete(session_uri, allow_reauth=False)
        with contextlib.suppress(Exception):
            self._auth.reset_session_attrs()

    def _drop(self) -> None:
        """Forget the client without a request; never raises."""
        if self.root is not None:
            set_root_auth(self.root, None)  # we closed it; keep Sushy.__del__ from trying again
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        self.root = None
        self._auth = None
        self._conn = None
        self._system = None
        self._manager = None

    def reconnect(self) -> None:
        self.close()
        self.connect()

    def _session_uri(self) -> str | None:
        """The open session's URI; None with Basic auth (chosen, or sushy's fallback)."""
        getter = getattr(self._auth, "get_session_resource_id", None)
        return getter() if getter is not None else None

    @property
    def session_auth(self) -> bool:
        getter = getattr(self._auth, "get_session_key", None)
        return getter is not None and getter() is not None

    @property
    def auth_fallback(self) -> bool:
        """True once this task switched from HTTP Basic to a session because a write was refused."""
        return self.fallback_status is not None

    @property
    def auth_used(self) -> str:
        """``session`` when asked for or after the fallback, else ``basic``."""
        return "session" if self.params.auth == "session" or self.auth_fallback else "basic"

    # -- HTTP Basic refused for a write: one session for the rest of the task ----------------
    def open_session_for_writes(self, method: str, path: str, refused: Any) -> None:
        """Log in with sushy's ``SessionAuth`` after ``refused`` (a write HTTP Basic may not make).

        The session replaces Basic on the connector for every later request, and ``close`` deletes
        it like any session. Raises ``AuthenticationError`` (nothing was changed) when the BMC
        refuses the session too.
        """
        p = self.params
        auth = sushy_auth.SessionAuth(username=p.username, password=p.password)
        auth.set_context(self.root, self._conn)
        what = _request_name(method, path)
        try:
            auth.authenticate()
        except sushy_exceptions.ConnectionError as exc:
            raise from_sushy(exc, f"Opening a Redfish session to retry {what}") from exc
        except sushy_exceptions.SushyError as exc:
            status = getattr(exc, "status_code", None)
            ids = message_ids({"error": exc.body} if getattr(exc, "body", None) else None)
            got = f"HTTP {status} {', '.join(ids)}".strip() if status else _short_text(exc)
            raise AuthenticationError(
                f"{what} was refused with HTTP {refused.status_code} under HTTP Basic auth although reads with"
                f" the same credentials worked, and the Redfish session to retry it could not be created"
                f" ({got}). Nothing was changed by this request. Check that the user has the privilege to change"
                " this BMC (iDRAC: the Operator or Administrator role). If it has, the BMC wants a session for"
                " writes: set auth: session for it and make sure a session can be opened (iDRAC8 allows about"
                " four; close stale ones).",
                category=AUTH,
                message_ids=ids,
                status=status,
                method=method.upper(),
            ) from exc
        self._auth = auth
        if self.root is not None:
            set_root_auth(self.root, auth)
        self.fallback_status = int(refused.status_code)

    def refused_with_session(self, method: str, path: str, refused: Any, again: Any) -> MetalplaneError:
        """The typed error when the session was refused the same write: a privilege problem."""
        ids = message_ids({"error": again.body} if getattr(again, "body", None) else None)
        return AuthenticationError(
            f"{_request_name(method, path)} was refused with HTTP {refused.status_code} under HTTP Basic auth and"
            f" again with HTTP {again.status_code} {', '.join(ids)} with a Redfish session, although reads with"
            " the same credentials worked. Nothing was changed. The user may read this BMC but not change it:"
            " give it the privilege on the BMC (iDRAC: the Operator or Administrator role); auth: session does"
            " not help here.",
            category=AUTH,
            message_ids=ids,
            status=again.status_code,
            method=method.upper(),
        )

    # -- resources -------------------------------------------------------------------------
    @property
    def connector(self) -> Any:
        """The open client's sushy ``Connector``, for sushy resources built from documents already read."""
        return self._conn

    def _member_path(self, collection: str, identity: str | None) -> str:
        prefix = self.params.root_prefix
        if identity:
            return f"{prefix}{collection}/{identity}"
        return self._first_member(self._conn.get(f"{prefix}{collection}").json(), collection)

    def _first_member(self, body: dict[str, Any], collection: str) -> str:
        members = body.get("Members") or []
        if not members:
            raise NotFoundError(f"The BMC at {self.params.bmc_url} lists no {collection}")
        return str(members[0]["@odata.id"])

    def _load_system(self) -> Any:
        """Locate and read the System with one GET where the service allows it.

        ``system_id`` -> that member; a Dell root -> ``System.Embedded.1`` (a 404 falls back to
        listing); a root advertising ``ProtocolFeaturesSupported.OnlyMemberQuery`` ->
        ``Systems?only``, which returns the member itself when it is the only one (DSP0266);
        otherwise list ``Systems`` and read the first member.
        """
        prefix = self.params.root_prefix
        if self._system_path:  # located before (a reconnect after a BMC reset)
            return self.root.get_system(self._system_path)
        if self.params.system_id:
            try:
                return self.root.get_system(self._member_path("Systems", self.params.system_id))
            except sushy_exceptions.ResourceNotFoundError:
                raise self._unknown_system() from None
        root_json = self.root.json or {}
        guess = default_member_id(root_json, "Systems")
        if guess:
            try:
                return self.root.get_system(f"{prefix}Systems/{guess}")
            except sushy_exceptions.ResourceNotFoundError:
                pass
        if (root_json.get("ProtocolFeaturesSupported") or {}).get("OnlyMemberQuery"):
            body = self._conn.get(f"{prefix}Systems?only").json()
            if "Members" in body or not body.get("@odata.id"):
                return self.root.get_system(self._first_member(body, "Systems"))
            return system_from_document(self.root, self._conn, body)
        return self.root.get_system(self._member_path("Systems", None))

    def _unknown_system(self) -> InputError:
        """``system_id`` names no System: say which ones exist (one more GET, on this failure only)."""
        prefix = self.params.root_prefix
        try:
            members = self._conn.get(f"{prefix}Systems").json().get("Members") or []
            ids = [str(m["@odata.id"]).rstrip("/").rsplit("/", 1)[-1] for m in members if m.get("@odata.id")]
        except Exception:  # the listing is a hint only; the error stands without it
            ids = []
        known = f"its Systems are: {', '.join(ids)}" if ids else "it did not list its Systems"
        return InputError(
            "system_id",
            f"the BMC at {self.params.bmc_url} has no System {self.params.system_id!r}"
            f" (GET {prefix}Systems/{self.params.system_id} answered 404); {known}."
            " Set system_id to one of them, or leave it unset to use the BMC's first (usually only) System.",
        )

    def system_path(self) -> str:
        if self._system is not None:
            return str(self._system.path)
        if self._system_path is None:
            self._system_path = self._member_path("Systems", self.params.system_id)
        return self._system_path

    @property
    def system(self) -> Any:
        if self._system is None:
            self._system = self.call("Reading the system", self.root.get_system, self.system_path())
        return self._system

    @property
    def manager(self) -> Any:
        if self._manager is None:
            path = None if self.params.manager_id else self._managed_by()
            if path is None:
                path = self.call("Listing managers", self._member_path, "Managers", self.params.manager_id)
            self._manager = self.call("Reading the manager", self.root.get_manager, path)
        return self._manager

    def _managed_by(self) -> str | None:
        """The System's own manager (``Links.ManagedBy``): saves listing the Managers collection."""
        links = (self.system.json.get("Links") or {}).get("ManagedBy") or []
        first = links[0] if links and isinstance(links[0], dict) else {}
        return str(first["@odata.id"]) if first.get("@odata.id") else None

    def forget(self) -> None:
        """Invalidate cached resources (after a change, before verifying)."""
        self._system = None
        self._manager = None

    def call(self, doing: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run a sushy call; any failure becomes a typed error that names ``doing``."""
        try:
            return fn(*args, **kwargs)
        except MetalplaneError:
            raise
        except Exception as exc:
            raise from_sushy(exc, doing) from exc

    # -- raw JSON (sushy has no API for BootOrder, BootSources, Dell jobs) ----------------
    def get_json(self, path: str, doing: str) -> dict[str, Any]:
        return dict(self.call(doing, self._conn.get, path).json())

    def get_with_etag(self, path: str, doing: str) -> tuple[dict[str, Any], str | None]:
        response = self.call(doing, self._conn.get, path)
        return dict(response.json()), response.headers.get("ETag")

    def patch(self, path: str, data: dict[str, Any], doing: str, etag: str | None = None) -> Any:
        """PATCH ``path``; with ``etag``, guarded by ``If-Match`` and never sent without it.

        Given its ``etag`` argument, sushy's ``Connector.patch`` answers a 412 by sending the PATCH
        again without ``If-Match``, which lets a plan made from a stale read overwrite a concurrent
        writer. The ETag therefore goes in the ``If-Match`` header, never in that argument: then
        sushy raises the 412. A weak ETag the BMC refuses is tried once in its strong form (sushy's
        one safe workaround), and a 412 to every form raises ``PreconditionFailed`` for the caller
        to re-read and re-plan.
        """
        if not etag:
            return self.call(doing, self._conn.patch, path, data=data)
        refused: Exception | None = None
        for tag in etag_forms(etag):
            try:
                return self._conn.patch(path, data=data, headers={"If-Match": tag})
            except sushy_exceptions.HTTPError as exc:
                if exc.status_code != PRECONDITION_FAILED:
                    raise from_sushy(exc, doing) from exc
                refused = exc
            except MetalplaneError:
                raise
            except Exception as exc:
                raise from_sushy(exc, doing) from exc
        raise PreconditionFailed(
            f"{doing} failed: HTTP 412, the resource changed since it was read (ETag {etag} no longer matches)",
            category=INVALID,
            message_ids=message_ids({"error": refused.body} if getattr(refused, "body", None) else None),
            status=PRECONDITION_FAILED,
            method="PATCH",
        ) from refused

    def post(self, path: str, data: dict[str, Any] | None, doing: str) -> Any:
        return self.call(doing, self._conn.post, path, data=data)

    def delete(self, path: str, doing: str) -> Any:
        return self.call(doing, self._conn.delete, path)

    # -- readiness after a BMC reset ------------------------------------------------------
    def probe(self) -> str:
        """One unauthenticated look at the BMC: ``up`` (200/401), ``wait`` (down/503/not ready)."""
        url = self.params.base_url + self.params.root_prefix + "Managers"
        session = requests.Session()
        session.hooks["response"].append(self.log.hook)
        try:
            response = session.get(
                url,
                verify=self.params.verify,
                timeout=(min(CONNECT_TIMEOUT, self.params.timeout), self.params.timeout),
                headers={"Connection": "close"},
            )
        except requests.RequestException:
            return "wait"
        finally:
            session.close()
        if response.status_code in (200, 401, 403):
            return "up"
        try:
            body = response.json()
        except ValueError:
            body = None
        if classify(response.status_code, message_ids(body), response.text[:500]) == NOT_READY:
            return "wait"
        return "wait" if response.status_code >= 500 else "up"

    def went_down(self) -> bool:
        """True once the old session stops working (reset took effect: refused, 401, 503)."""
        try:
            response = self._conn.get_unmanaged(
                self.params.base_url + self.manager.path,
                verify=self.params.verify,
                timeout=(min(CONNECT_TIMEOUT, self.params.timeout), self.params.timeout),
            )
        except requests.RequestException:
            return True
        self.log.hook(response)
        return response.status_code in (401, 403) or response.status_code >= 500

    def wait_ready(
        self, timeout: float, *, sleep: Any = None, clock: Any = None, down_timeout: float = DOWN_TIMEOUT
    ) -> int:
        """After a reset: see it go down, drop the client, wait until it answers, log in again.

        A BMC keeps answering for a few seconds after accepting a reset, so "up" right after the
        request proves nothing: first wait (at most ``down_timeout``) until the old session stops
        working. A BMC that never seems to go down (the reset was instant, or ignored) costs that
        wait and no error: readiness decides. Returns the number of readiness polls.
        """

        do_sleep = sleep or time.sleep
        now = clock or time.monotonic
        if self._conn is not None and down_timeout > 0:
            with contextlib.suppress(MetalplaneError):  # it may have restarted between two polls
                wait_for(
                    lambda: Poll(self.went_down(), "still serving the old session"),
                    timeout=down_timeout,
                    what="the BMC to go down for its reset",
                    backoff=DOWN_BACKOFF,
                    sleep=do_sleep,
                    clock=now,
                )
        self.close()
        polls = 0
        last: dict[str, str] = {"seen": "not polled"}

        def observe() -> Poll[str]:
            nonlocal polls
            polls += 1
            state = self.probe()
            last["seen"] = state
            if state != "up":
                return Poll(False, state)
            try:
                self._connect_once()  # this wait polls a refusing BMC itself
                self.manager  # noqa: B018 - a real authenticated read: the BMC serves again
            except MetalplaneError as exc:
                if getattr(exc, "category", None) in (NOT_READY, AUTH) or isinstance(exc, AuthenticationError):
                    self.close()
                    return Poll(False, f"login: {exc.msg}")
                raise
            return Poll(True, "ready")

        wait_for(
            observe,
            timeout=timeout,
            what=f"the BMC at {self.params.bmc_url} to be ready",
            backoff=READY_BACKOFF,
            sleep=do_sleep,
            clock=now,
        )
        return polls


def etag_forms(etag: str) -> list[str]:
    """The ``If-Match`` values to try for ``etag``: as read, then a weak tag's strong form (pure).

    Some BMCs hand out weak ETags (``W/"x"``) but compare ``If-Match`` strongly (RFC 9110 asks
    for it), so the read tag can never match; ``"x"`` still names the same version.
    """
    match = _WEAK_ETAG.match(etag.strip())
    return [etag, match.group(1)] if match else [etag]


def _request_name(method: str, path: str) -> str:
    """``POST /redfish/v1/...`` (the path only: never a query string or credentials)."""
    return f"{method.upper()} {urlsplit(path).path or path}"


def _short_text(exc: Exception) -> str:
    text = str(exc)
    return text if len(text) < 300 else text[:300] + "..."


def sushy_error_types() -> tuple[type[BaseException], ...]:
    return (sushy_exceptions.SushyError,)
