"""The sushy internals ``sushy_adapter`` relies on, checked against the installed sushy.

Why: they are private to sushy and may move in any release. Each test drives the real sushy
(``Connector``, ``Sushy``, its auth classes, ``System``) against a tiny loopback Redfish service and
fails naming the member and the sushy version (``support.library_pins.moved``), so a bump of the
pin in requirements.txt shows at once what to adapt. It also checks the two public sushy behaviours
the client relies on instead of internals: ``response_callback`` sees every response, and a PATCH
with ``If-Match`` only in its headers is not resent without it on a 412.
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version
from typing import Any

import pytest
import sushy
from sushy import auth as sushy_auth
from sushy import exceptions as sushy_exceptions
from sushy.resources.system import system as sushy_system

from ansible_collections.metalplane.inference.plugins.module_utils._redfish.sushy_adapter import (
    SUSHY_PRIVATE_MEMBERS,
    InterceptingConnector,
    set_root_auth,
    system_from_document,
)
from support.library_pins import moved, pinned

ADAPTER = "plugins/module_utils/_redfish/sushy_adapter.py"
ROOT_PATH = "/redfish/v1/"
SYSTEM_PATH = "/redfish/v1/Systems/1"
BUSY_PATH = "/redfish/v1/Managers/1"  # always answers 503: sushy would retry it
PRECONDITION_FAILED = 412
DOCUMENTS: dict[str, dict[str, Any]] = {
    ROOT_PATH: {
        "@odata.id": ROOT_PATH,
        "@odata.type": "#ServiceRoot.v1_5_0.ServiceRoot",
        "Id": "RootService",
        "Name": "Root Service",
        "RedfishVersion": "1.6.0",
        "UUID": "92384634-2938-2342-8820-489239905423",
        "Systems": {"@odata.id": "/redfish/v1/Systems"},
    },
    SYSTEM_PATH: {
        "@odata.id": SYSTEM_PATH,
        "@odata.type": "#ComputerSystem.v1_13_0.ComputerSystem",
        "Id": "1",
        "Name": "System",
        "PowerState": "Off",
        "Boot": {"BootSourceOverrideTarget": "None", "BootSourceOverrideEnabled": "Disabled"},
    },
}


class _Handler(BaseHTTPRequestHandler):
    """GET of DOCUMENTS, 503 on BUSY_PATH, 412 to every PATCH; every request is recorded."""

    seen: list[tuple[str, str, dict[str, str]]]

    def log_message(self, *_args: Any) -> None:
        return

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _record(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.server.seen.append((self.command, self.path, dict(self.headers)))  # type: ignore[attr-defined]

    def do_GET(self) -> None:
        self._record()
        if self.path == BUSY_PATH:
            self._reply(503, {"error": {"code": "Base.1.0.ServiceTemporarilyUnavailable"}})
        elif self.path in DOCUMENTS:
            self._reply(200, DOCUMENTS[self.path])
        else:
            self._reply(404, {"error": {"code": "Base.1.0.ResourceMissingAtURI"}})

    def do_PATCH(self) -> None:
        self._record()
        self._reply(PRECONDITION_FAILED, {"error": {"code": "Base.1.0.PreconditionFailed"}})


@pytest.fixture
def service() -> Iterator[tuple[str, list[tuple[str, str, dict[str, str]]]]]:
    """``(base_url, requests seen)`` of a loopback Redfish service."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.seen  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


class _Recording(InterceptingConnector):
    """What a subclass sees through the public override point."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.intercepted: list[tuple[str, str, bool]] = []

    def intercept(self, method: str, path: str, send: Callable[..., Any], *, allow_reauth: bool) -> Any:
        self.intercepted.append((method, path, allow_reauth))
        return send(allow_reauth=allow_reauth)


def _connector(base_url: str, **kwargs: Any) -> _Recording:
    # no sushy retries or sleeps: one request each
    return _Recording(base_url, server_side_retries=0, server_side_retries_delay=0, **kwargs)


def _resolve(dotted: str) -> type:
    module, _unused, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _defines(klass: type, name: str) -> bool:
    """Whether ``klass`` (or a base) has ``name`` as a member or assigns ``self.<name>`` in its code."""
    if any(name in vars(k) for k in klass.__mro__ if k is not object):
        return True
    for k in klass.__mro__:
        if k.__module__.split(".")[0] == "sushy" and re.search(rf"self\.{name}\s*=", inspect.getsource(k)):
            return True
    return False


@pytest.mark.parametrize(
    ("owner", "name"), [(owner, name) for owner, names in SUSHY_PRIVATE_MEMBERS.items() for name in names]
)
def test_the_private_members_still_exist(owner: str, name: str) -> None:
    assert _defines(_resolve(owner), name), moved("sushy", ADAPTER, f"{owner}.{name} (gone)")


def test_the_installed_sushy_is_the_range_the_adapter_was_checked_against() -> None:
    assert version("sushy") in pinned("sushy"), moved("sushy", ADAPTER, "version (outside the pin)")


def test_intercept_sees_every_request_and_response_callback_every_response(
    service: tuple[str, list[Any]],
) -> None:
    base_url, seen = service
    responses: list[Any] = []
    conn = _connector(base_url, response_callback=responses.append)
    assert conn.get(SYSTEM_PATH).json()["Id"] == "1"
    with pytest.raises(sushy_exceptions.ServerSideError):
        conn.get(BUSY_PATH, server_side_retries_left=0)
    assert conn.intercepted == [("GET", SYSTEM_PATH, True), ("GET", BUSY_PATH, True)], moved(
        "sushy", ADAPTER, "Connector._op (no longer every request's way)"
    )
    assert [r.status_code for r in responses] == [200, 503], moved("sushy", ADAPTER, "response_callback")
    assert [(m, p) for m, p, _h in seen] == [("GET", SYSTEM_PATH), ("GET", BUSY_PATH)]


def test_allow_reauth_reaches_intercept(service: tuple[str, list[Any]]) -> None:
    base_url, _seen = service
    conn = _connector(base_url)
    conn.get(SYSTEM_PATH, allow_reauth=False)
    assert conn.intercepted == [("GET", SYSTEM_PATH, False)], moved("sushy", ADAPTER, "Connector._op's allow_reauth")


@pytest.mark.parametrize(
    ("auth", "basic"),
    [
        ("basic", True),  # sushy's BasicAuth puts the credentials on the connector's session
        ("session-token", False),  # SessionAuth's token replaces them
        ("reset", False),  # SessionAuth.reset_session_attrs clears them directly
    ],
)
def test_sends_basic_follows_what_sushy_auth_sets(service: tuple[str, list[Any]], auth: str, basic: bool) -> None:
    base_url, _seen = service
    conn = _connector(base_url)
    basic_auth = sushy_auth.BasicAuth(username="root", password="pw")
    basic_auth.set_context(object(), conn)
    basic_auth.authenticate()
    if auth == "session-token":
        conn.set_http_session_auth("token")
    elif auth == "reset":
        session_auth = sushy_auth.SessionAuth(username="root", password="pw")
        session_auth.set_context(object(), conn)
        session_auth.reset_session_attrs()
    assert conn.sends_basic is basic, moved("sushy", ADAPTER, "Connector._session.auth (where Basic is recorded)")


def test_get_unmanaged_sends_the_credentials_once_without_sushys_handler(service: tuple[str, list[Any]]) -> None:
    base_url, seen = service
    responses: list[Any] = []
    conn = _connector(base_url, response_callback=responses.append)
    conn.set_http_basic_auth("root", "pw")
    response = conn.get_unmanaged(base_url + BUSY_PATH, verify=True, timeout=5)
    assert response.status_code == 503  # no exception, no retry, no re-login
    assert len(seen) == 1
    assert seen[0][2].get("Authorization", "").startswith("Basic "), moved(
        "sushy", ADAPTER, "Connector._session (the credentials are no longer on it)"
    )
    assert conn.intercepted == []
    assert responses == []  # the caller logs it


def test_a_patch_with_if_match_only_in_its_headers_is_not_resent(service: tuple[str, list[Any]]) -> None:
    base_url, seen = service
    conn = _connector(base_url)
    with pytest.raises(sushy_exceptions.HTTPError) as refused:
        conn.patch(SYSTEM_PATH, data={"Boot": {}}, headers={"If-Match": '"v1"'})
    assert refused.value.status_code == PRECONDITION_FAILED
    patches = [headers.get("If-Match") for method, _path, headers in seen if method == "PATCH"]
    assert patches == ['"v1"'], moved("sushy", ADAPTER, f"Connector.patch on a 412 (sent If-Match {patches})")


class _SpyAuth:
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_set_root_auth_decides_what_sushy_closes_on_deletion(service: tuple[str, list[Any]]) -> None:
    base_url, _seen = service
    root = sushy.Sushy(
        base_url, auth=sushy_auth.BasicAuth(username="root", password="pw"), connector=_connector(base_url)
    )
    spy = _SpyAuth()
    set_root_auth(root, spy)
    root.__del__()
    assert spy.closed == 1, moved("sushy", ADAPTER, "Sushy._auth (Sushy.__del__ no longer closes it)")
    set_root_auth(root, None)
    root.__del__()  # nothing to close: no error, no second close
    assert spy.closed == 1


def test_system_from_document_is_the_system_sushy_builds(service: tuple[str, list[Any]]) -> None:
    base_url, seen = service
    conn = _connector(base_url)
    root = sushy.Sushy(base_url, auth=sushy_auth.BasicAuth(username="root", password="pw"), connector=conn)
    del seen[:]
    built = system_from_document(root, conn, DOCUMENTS[SYSTEM_PATH])
    assert seen == []  # built from the document: no GET
    read = sushy_system.System(
        conn, SYSTEM_PATH, redfish_version=root.redfish_version, registries=root.lazy_registries, root=root
    )
    what = "System.__init__ (it now sets up more than ResourceBase.__init__)"
    assert sorted(vars(built)) == sorted(vars(read)), moved("sushy", ADAPTER, what)
    assert (built.path, built.identity, built.power_state) == (read.path, read.identity, read.power_state)
    built.refresh()  # later refreshes read the System's own path
    assert [(m, p) for m, p, _h in seen] == [("GET", SYSTEM_PATH), ("GET", SYSTEM_PATH)]
