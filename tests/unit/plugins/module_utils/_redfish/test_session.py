"""Session client pieces that need no BMC: readiness probe, request log, session close, and the
retry of a write HTTP Basic may not make (decision and connector hook, with sushy's ``_op`` faked)."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from ansible_collections.metalplane.inference.plugins.module_utils._redfish.args import connection_params
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.errors import AuthenticationError
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.session import (
    RedfishClient,
    RequestLog,
    _Connector,
    needs_session_for_write,
)

PARAMS = connection_params({"bmc_url": "https://bmc.example", "username": "root", "password": "pw", "api_timeout": 5})


class _Resp:
    def __init__(self, status: int, body: Any = None) -> None:
        self.status_code = status
        self._body = body
        self.text = "" if body is None else str(body)

    def json(self) -> Any:
        if self._body is None:
            raise ValueError("no JSON")
        return self._body


def _dell(mid: str) -> dict[str, Any]:
    return {"error": {"code": "Base.1.2.GeneralError", "@Message.ExtendedInfo": [{"MessageId": f"IDRAC.2.8.{mid}"}]}}


@pytest.mark.parametrize(
    ("reply", "state"),
    [
        (_Resp(200, {}), "up"),
        (_Resp(401), "up"),  # the BMC answers: credentials are checked at login
        (_Resp(403), "up"),
        (_Resp(503), "wait"),
        (_Resp(503, _dell("SYS518")), "wait"),
        (_Resp(400, _dell("SWC0700")), "wait"),
        (_Resp(500, {"error": {"code": "Base.1.2.InternalError"}}), "wait"),
        (requests.ConnectionError("refused"), "wait"),
        (requests.ReadTimeout("slow"), "wait"),
    ],
)
def test_probe(monkeypatch: pytest.MonkeyPatch, reply: Any, state: str) -> None:
    def fake_get(_self: requests.Session, url: str, **_kw: Any) -> Any:
        assert url == "https://bmc.example/redfish/v1/Managers"
        if isinstance(reply, Exception):
            raise reply
        return reply

    monkeypatch.setattr(requests.Session, "get", fake_get)
    assert RedfishClient(PARAMS).probe() == state


def test_request_log_summary() -> None:
    log = RequestLog()

    class R:
        def __init__(self, method: str, url: str, status: int) -> None:
            self.request = type("Req", (), {"method": method})()
            self.url = url
            self.status_code = status

    for method, url, status in [
        ("GET", "https://b/redfish/v1/", 200),
        ("POST", "https://b/x?y=1", 201),
        ("GET", "https://b/z", 401),
    ]:
        log.hook(R(method, url, status))
    assert log.count == 3
    assert log.summary() == {"GET": 2, "POST": 1}
    assert log.entries[1] == ("POST", "/x", 201)


def test_close_deletes_the_session_without_logging_in_again() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    class FakeConn:
        def delete(self, path: str, **kw: Any) -> None:
            calls.append((path, kw))
            raise RuntimeError("401: session already gone")  # must be swallowed

        def close(self) -> None:
            calls.append(("closed", {}))

    class FakeAuth:
        reset = False

        def get_session_resource_id(self) -> str:
            return "/redfish/v1/SessionService/Sessions/7"

        def reset_session_attrs(self) -> None:
            FakeAuth.reset = True

    client = RedfishClient(PARAMS)
    client._conn, client._auth = FakeConn(), FakeAuth()
    client.close()
    assert calls[0] == ("/redfish/v1/SessionService/Sessions/7", {"allow_reauth": False})
    assert calls[-1] == ("closed", {})
    assert FakeAuth.reset is True
    assert client._conn is None


class _Listing:
    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body

    def json(self) -> dict[str, Any]:
        return self.body


class _FakeRoot:
    """Just what ``_load_system`` touches: the root JSON and ``get_system``."""

    redfish_version = "1.4.0"
    lazy_registries: dict[str, Any] = {}

    def __init__(self, root_json: dict[str, Any], missing: set[str]) -> None:
        self.json = root_json
        self.missing = missing
        self.read: list[str] = []

    def get_system(self, path: str) -> Any:
        import sushy

        self.read.append(path)
        if path in self.missing:
            raise sushy.exceptions.ResourceNotFoundError("GET", path, _Resp(404, {}))
        return type("System", (), {"path": path})()


ONE_SYSTEM = {"Members": [{"@odata.id": "/redfish/v1/Systems/Self"}]}


@pytest.mark.parametrize(
    ("system_id", "root_json", "missing", "listing", "reads", "path"),
    [
        # system_id: that member, nothing listed
        ("S1", {"Vendor": "Dell"}, set(), None, ["/redfish/v1/Systems/S1"], "/redfish/v1/Systems/S1"),
        # Dell: the fixed id first
        (
            None,
            {"Vendor": "Dell"},
            set(),
            None,
            ["/redfish/v1/Systems/System.Embedded.1"],
            "/redfish/v1/Systems/System.Embedded.1",
        ),
        # Dell with another id: the 404 falls back to listing
        (
            None,
            {"Vendor": "Dell"},
            {"/redfish/v1/Systems/System.Embedded.1"},
            ("/redfish/v1/Systems", ONE_SYSTEM),
            ["/redfish/v1/Systems/System.Embedded.1", "/redfish/v1/Systems/Self"],
            "/redfish/v1/Systems/Self",
        ),
        # no vendor hint, no ?only: list, then read the first member
        (
            None,
            {"Vendor": "Contoso"},
            set(),
            ("/redfish/v1/Systems", ONE_SYSTEM),
            ["/redfish/v1/Systems/Self"],
            "/redfish/v1/Systems/Self",
        ),
        # ?only advertised but several members: the collection comes back, read the first member
        (
            None,
            {"ProtocolFeaturesSupported": {"OnlyMemberQuery": True}},
            set(),
            ("/redfish/v1/Systems?only", {"Members": [{"@odata.id": "/redfish/v1/Systems/A"}, {"@odata.id": "x"}]}),
            ["/redfish/v1/Systems/A"],
            "/redfish/v1/Systems/A",
        ),
    ],
)
def test_load_system_locates_with_few_requests(
    *,
    system_id: str | None,
    root_json: dict[str, Any],
    missing: set[str],
    listing: tuple[str, dict[str, Any]] | None,
    reads: list[str],
    path: str,
) -> None:
    gets: list[str] = []

    class Conn:
        def get(self, url: str) -> _Listing:
            gets.append(url)
            if listing is None or url != listing[0]:
                raise AssertionError(f"unexpected GET {url}")
            return _Listing(listing[1])

    params = connection_params(
        {"bmc_url": "https://bmc.example", "username": "root", "password": "pw", "system_id": system_id}
    )
    client = RedfishClient(params)
    client.root, client._conn = _FakeRoot(root_json, missing), Conn()
    assert client._load_system().path == path
    assert client.root.read == reads
    assert gets == ([listing[0]] if listing else [])


def test_only_member_answer_builds_the_system_without_another_get() -> None:
    body = {
        "@odata.id": "/redfish/v1/Systems/1",
        "@odata.type": "#ComputerSystem.v1_13_0.ComputerSystem",
        "Id": "1",
        "PowerState": "Off",
    }

    class Conn:
        calls: list[str] = []

        def get(self, url: str, **_kw: Any) -> _Listing:
            Conn.calls.append(url)
            return _Listing(body)

    params = connection_params({"bmc_url": "https://bmc.example", "username": "root", "password": "pw"})
    client = RedfishClient(params)
    client.root = _FakeRoot({"ProtocolFeaturesSupported": {"OnlyMemberQuery": True}}, set())
    client._conn = Conn()
    system = client._load_system()
    assert (system.path, system.identity, system.power_state.value) == ("/redfish/v1/Systems/1", "1", "Off")
    assert Conn.calls == ["/redfish/v1/Systems?only"]
    assert client.root.read == []


@pytest.mark.parametrize(
    ("method", "status", "basic", "reads_ok", "expected"),
    [
        ("POST", 401, True, True, True),  # the case: Basic refused for a write after reads worked
        ("PATCH", 401, True, True, True),
        ("PUT", 403, True, True, True),
        ("delete", 403, True, True, True),  # method case does not matter
        ("GET", 401, True, True, False),  # a refused read is no write problem
        ("POST", 401, True, False, False),  # no read worked yet: wrong credentials, not a policy
        ("POST", 401, False, True, False),  # already a session (or the login POST itself)
        ("POST", 400, True, True, False),  # other errors stand
        ("POST", 503, True, True, False),
        ("POST", None, True, True, False),
    ],
)
def test_needs_session_for_write(
    method: str, status: int | None, *, basic: bool, reads_ok: bool, expected: bool
) -> None:
    assert needs_session_for_write(method, status, basic=basic, reads_ok=reads_ok) is expected


def _access_error(status: int) -> Exception:
    import sushy

    return sushy.exceptions.AccessError(
        "POST", "https://bmc.example/x", _Resp(status, {"error": {"code": "Base.1.0.X"}})
    )


def _scripted_op(script: list[int], calls: list[tuple[str, bool]]) -> Any:
    """sushy's ``Connector._op`` answering ``script``'s statuses in turn (an AccessError from 400 up); ``calls``
    collects (method, allow_reauth) of each request."""
    replies = iter(script)

    def fake_op(self: Any, method: str, path: str = "", *_args: Any, allow_reauth: bool = True, **_kw: Any) -> Any:
        calls.append((method, allow_reauth))
        status = next(replies)
        if status >= 400:
            raise _access_error(status)
        return _Resp(status, {})

    return fake_op


class _Owner:
    """What the connector asks of its client: open a session (switching it off Basic), name the error."""

    def __init__(self, conn: Any, *, session_ok: bool = True) -> None:
        self.conn = conn
        self.session_ok = session_ok
        self.opened: list[tuple[str, str, int]] = []

    def open_session_for_writes(self, method: str, path: str, refused: Any) -> None:
        self.opened.append((method, path, refused.status_code))
        if not self.session_ok:
            raise AuthenticationError("session refused too")
        self.conn.set_http_session_auth("token")  # what sushy's SessionAuth does: the token replaces Basic

    def refused_with_session(self, method: str, path: str, refused: Any, again: Any) -> Exception:
        return AuthenticationError(f"{method} {path}: {refused.status_code} then {again.status_code}")


@pytest.mark.parametrize(
    ("script", "session_ok", "outcome", "sent", "opened"),
    [
        # read OK, write refused -> session, the write once more (no sushy re-login), then OK
        ([200, 401, 204], True, "ok", [("GET", True), ("POST", True), ("POST", False)], 1),
        # 403 is the same refusal
        ([200, 403, 204], True, "ok", [("GET", True), ("POST", True), ("POST", False)], 1),
        # refused again with the session: the typed privilege error, no third try
        ([200, 401, 401], True, "again", [("GET", True), ("POST", True), ("POST", False)], 1),
        # the session cannot be opened: its error, the write is not sent again
        ([200, 401], False, "session", [("GET", True), ("POST", True)], 1),
        # no read worked first (wrong password): sushy's error stands, no session
        ([401], True, "sushy", [("POST", True)], 0),
        # a refused read: sushy's error stands
        ([401], True, "sushy-get", [("GET", True)], 0),
    ],
)
def test_connector_retries_a_refused_basic_write_once_with_a_session(
    monkeypatch: pytest.MonkeyPatch, script: list[int], *, session_ok: bool, outcome: str, sent: list[Any], opened: int
) -> None:
    import sushy

    calls: list[tuple[str, bool]] = []
    monkeypatch.setattr(sushy.connector.Connector, "_op", _scripted_op(script, calls))
    conn = _Connector("https://bmc.example", client=None)
    owner = _Owner(conn, session_ok=session_ok)
    conn.client = owner
    conn.set_http_basic_auth("root", "pw")
    if outcome == "sushy-get":
        with pytest.raises(sushy.exceptions.AccessError):
            conn.get("/redfish/v1/Systems/1")
    elif outcome == "sushy":
        with pytest.raises(sushy.exceptions.AccessError):
            conn.post("/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", data={"ResetType": "On"})
    else:
        conn.get("/redfish/v1/Systems/1")
        reset = "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset"
        if outcome == "ok":
            assert conn.post(reset, data={"ResetType": "On"}).status_code == 204
        else:
            with pytest.raises(AuthenticationError) as err:
                conn.post(reset, data={"ResetType": "On"})
            expected = "session refused too" if outcome == "session" else "401 then 401"
            assert expected in err.value.msg
    assert calls == sent
    assert len(owner.opened) == opened


# (case, method, statuses answered in turn (sushy's own retries of a GET nest inside: "nested" marks them), whether
# the request ends well, the connector's sleeps between its tries)
BUSY_REQUESTS = [
    ("GET busy once", "GET", [503, 200], True, [2.0]),
    ("POST busy twice (not processed: sent again)", "POST", [429, 503, 204], True, [2.0, 4.0]),
    ("PATCH busy past the allowance", "PATCH", [503, 503, 503, 503], False, [2.0, 4.0, 8.0]),
    ("POST internal error: maybe applied, never sent again", "POST", [500], False, []),
    ("GET not found: not busy", "GET", [404], False, []),
]


@pytest.mark.parametrize(
    ("method", "script", "succeeds", "sleeps"), [pytest.param(*c[1:], id=c[0]) for c in BUSY_REQUESTS]
)
def test_connector_asks_a_busy_bmc_again_for_every_method(
    monkeypatch: pytest.MonkeyPatch, method: str, script: list[int], succeeds: bool, sleeps: list[float]
) -> None:
    import sushy

    replies = iter(script)
    sent: list[str] = []

    def fake_op(self: Any, verb: str, path: str = "", *_args: Any, allow_reauth: bool = True, **_kw: Any) -> Any:
        sent.append(verb)
        response = _Resp(next(replies), {"error": {"code": "Base.1.0.ServiceTemporarilyUnavailable"}})
        if response.status_code >= 400:
            sushy.exceptions.raise_for_response(verb, "https://bmc.example/x", response)
        return response

    monkeypatch.setattr(sushy.connector.Connector, "_op", fake_op)
    conn = _Connector("https://bmc.example", client=None)
    slept: list[float] = []
    conn.client = type("Client", (), {"busy_sleep": staticmethod(slept.append)})()
    request = getattr(conn, method.lower())
    if succeeds:
        assert request("/redfish/v1/Systems/1").status_code == script[-1]
    else:
        with pytest.raises(sushy.exceptions.HTTPError):
            request("/redfish/v1/Systems/1")
    assert slept == sleeps
    assert len(sent) == len(sleeps) + 1


def test_sushys_own_retries_inside_a_request_are_not_multiplied(monkeypatch: pytest.MonkeyPatch) -> None:
    """sushy retries a GET's 5xx by calling ``_op`` again: those nested tries pass straight through."""
    import sushy

    sent: list[str] = []

    def fake_op(self: Any, verb: str, path: str = "", *_args: Any, allow_reauth: bool = True, **kw: Any) -> Any:
        nested = kw.get("nested", 0)
        sent.append(f"{verb}@{nested}")
        if nested < 2:  # sushy's retry, as its handler does it: through self._op
            return self._op(verb, path, nested=nested + 1)
        sushy.exceptions.raise_for_response(verb, "https://bmc.example/x", _Resp(503, {}))
        return None

    monkeypatch.setattr(sushy.connector.Connector, "_op", fake_op)
    conn = _Connector("https://bmc.example", client=None)
    slept: list[float] = []
    conn.client = type("Client", (), {"busy_sleep": staticmethod(slept.append)})()
    with pytest.raises(sushy.exceptions.ServerSideError):
        conn.get("/redfish/v1/Systems/1")
    assert slept == [2.0, 4.0, 8.0]  # the outer request's tries only
    assert len(sent) == 4 * 3  # four outer tries of three nested sends each
    assert conn.depth == 0


BMC_OPTIONS = {"bmc_url": "https://bmc.example", "username": "root", "password": "pw"}
# (case, refused_login_retries, statuses the logins fail with before one succeeds, whether one succeeds, sleeps)
REFUSED_LOGINS = [
    ("refused, no retries allowed: no second login", 0, [401], False, []),
    ("refused once while restarting, one retry allowed", 1, [401], True, [15.0]),
    ("refused twice while restarting", 2, [401, 401], True, [15.0, 15.0]),
    ("refused past the retries allowed (a wrong password)", 2, [401, 401, 401], False, [15.0, 15.0]),
    ("busy past the connector's tries: reported, not a refusal", 3, [503], False, []),
    ("internal error: no second login", 3, [500], False, []),
]


@pytest.mark.parametrize(
    ("refused_retries", "failures", "succeeds", "sleeps"), [pytest.param(*c[1:], id=c[0]) for c in REFUSED_LOGINS]
)
def test_a_restarting_bmc_is_asked_again_to_log_in_only_as_often_as_allowed(
    monkeypatch: pytest.MonkeyPatch, refused_retries: int, failures: list[int], succeeds: bool, sleeps: list[float]
) -> None:
    from ansible_collections.metalplane.inference.plugins.module_utils._common import api_retries
    from ansible_collections.metalplane.inference.plugins.module_utils._redfish.errors import RedfishError

    answers = list(failures)
    params = connection_params({**BMC_OPTIONS, "refused_login_retries": refused_retries})
    client = RedfishClient(params)
    slept: list[float] = []
    client.busy_sleep = slept.append

    def connect_once() -> None:
        if answers:
            status = answers.pop(0)
            raise RedfishError(f"Logging in failed: HTTP {status}", status=status)

    monkeypatch.setattr(client, "_connect_once", connect_once)
    before = api_retries.taken()
    if succeeds:
        client.connect()
    else:
        with pytest.raises(RedfishError):
            client.connect()
    assert slept == sleeps
    assert api_retries.taken() - before == len(sleeps)  # each refused login tried again is a retry of the run


@pytest.mark.parametrize("value", [-1, 4])
def test_refused_login_retries_out_of_range_is_refused_naming_the_option(value: int) -> None:
    from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError

    with pytest.raises(InputError, match="refused_login_retries") as err:
        connection_params({**BMC_OPTIONS, "refused_login_retries": value})
    assert "0 to 3" in str(err.value)


def test_each_busy_answer_counts_as_a_retry_of_the_module_run() -> None:
    from ansible_collections.metalplane.inference.plugins.module_utils._common import api_retries

    class _Answer:
        def __init__(self, status: int) -> None:
            self.status_code = status
            self.url = "https://bmc.example/redfish/v1/Systems"
            self.request = type("R", (), {"method": "GET"})()

    log, before = RequestLog(), api_retries.taken()
    for status in (503, 200, 429, 500, 404):
        log.hook(_Answer(status))
    assert api_retries.taken() - before == 2


class _RestartOwner(_Owner):
    """A client with the refused-login allowance (``RedfishClient.spend_refused_retry``) and a recorded sleep."""

    def __init__(self, conn: Any, *, retries: int, session_status: int | None) -> None:
        super().__init__(conn, session_ok=session_status is None)
        self.refused_left = retries
        self.session_status = session_status
        self.slept: list[float] = []

    def busy_sleep(self, seconds: float) -> None:
        self.slept.append(seconds)

    def spend_refused_retry(self) -> bool:
        if self.refused_left <= 0:
            return False
        self.refused_left -= 1
        return True

    def open_session_for_writes(self, method: str, path: str, refused: Any) -> None:
        self.opened.append((method, path, refused.status_code))
        if self.session_status is not None:
            raise AuthenticationError("the session login was refused", status=self.session_status)
        self.conn.set_http_session_auth("token")


# (case, refused_login_retries, first request's statuses (a GET that proves the credentials, or none), the request
# ("GET" or "POST") and its statuses in turn, the status a write's session login is refused with (None: it opens),
# whether the request ends well, the sleeps between its tries)
REFUSED_AFTER_A_RESTART = [
    ("a read refused after reads worked: asked again 15 s later", 1, [200], "GET", [401, 200], None, True, [15.0]),
    ("no allowance (the default): the refusal stands", 0, [200], "GET", [401], None, False, []),
    ("refused before any read worked (a wrong password): stands", 2, [], "GET", [401], None, False, []),
    ("refused past the allowance", 1, [200], "GET", [401, 401], None, False, [15.0]),
    ("a forbidden read (403) is a privilege, not a restart", 2, [200], "GET", [403], None, False, []),
    (
        "a write refused, its session refused too (restarting), then the write goes through with Basic",
        1, [200], "POST", [401, 204], 401, True, [15.0],
    ),
    ("a write whose session login is refused past the allowance", 1, [200], "POST", [401, 401], 401, False, [15.0]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("retries", "proof", "method", "script", "session_status", "succeeds", "sleeps"),
    [pytest.param(*c[1:], id=c[0]) for c in REFUSED_AFTER_A_RESTART],
)
def test_a_request_refused_after_the_credentials_worked_waits_out_a_restart(
    monkeypatch: pytest.MonkeyPatch,
    retries: int,
    proof: list[int],
    method: str,
    script: list[int],
    *,
    session_status: int | None,
    succeeds: bool,
    sleeps: list[float],
) -> None:
    import sushy

    monkeypatch.setattr(sushy.connector.Connector, "_op", _scripted_op(proof + script, []))
    conn = _Connector("https://bmc.example", client=None)
    owner = _RestartOwner(conn, retries=retries, session_status=session_status)
    conn.client = owner
    conn.set_http_basic_auth("root", "pw")
    for _status in proof:
        conn.get("/redfish/v1/Systems/1")
    request = conn.get if method == "GET" else conn.post
    if succeeds:
        assert request("/redfish/v1/Managers/iDRAC.Embedded.1/Jobs/JID_1").status_code == script[-1]
    else:
        with pytest.raises((sushy.exceptions.AccessError, AuthenticationError)):
            request("/redfish/v1/Managers/iDRAC.Embedded.1/Jobs/JID_1")
    assert owner.slept == sleeps
