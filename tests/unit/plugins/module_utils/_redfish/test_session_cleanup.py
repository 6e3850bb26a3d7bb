"""Every session a client opens is deleted, whichever step after the login fails.

sushy (its ``Sushy`` root, its session auth and its ``Connector._op``) is faked by a tiny BMC
that counts open sessions: the login of ``connect`` works, then locating the System fails the
way a wrong ``system_id`` (404) or a BMC still starting after a reset (503 SYS518) does. The
readiness polls of ``wait_ready`` log in on every poll, so each failed poll must delete its own
session; cleanup itself never raises.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import WaitTimeout
from ansible_collections.metalplane.inference.plugins.module_utils._redfish import session as session_mod
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.args import connection_params
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.errors import BmcNotReady, RedfishError
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.session import RedfishClient

SESSIONS = "/redfish/v1/SessionService/Sessions/"
PARAMS = connection_params(
    {"bmc_url": "https://bmc.example", "username": "root", "password": "pw", "api_timeout": 5, "auth": "session"}
)


class _Resp:
    def __init__(self, status: int, body: Any = None) -> None:
        self.status_code = status
        self._body = body
        self.headers: dict[str, str] = {}
        self.text = ""

    def json(self) -> Any:
        return self._body


def _dell_error(status: int, message_id: str) -> dict[str, Any]:
    return {
        "error": {
            "code": "Base.1.2.GeneralError",
            "message": "A general error has occurred.",
            "@Message.ExtendedInfo": [{"MessageId": message_id, "Message": message_id, "Severity": "Critical"}],
        }
    }


class FakeBmc:
    """Sessions by id, and what locating the System does on each successive login."""

    def __init__(self, outcomes: list[str], *, delete_fails: bool = False) -> None:
        self.outcomes: Iterator[str] = iter(outcomes)
        self.delete_fails = delete_fails
        self.sessions: set[str] = set()
        self.logins = 0
        self.deletes: list[str] = []

    def login(self) -> str:
        self.logins += 1
        sid = str(self.logins)
        self.sessions.add(sid)
        return SESSIONS + sid

    def load_system(self) -> Any:
        import sushy

        outcome = next(self.outcomes)
        url = "https://bmc.example/redfish/v1/Systems/1"
        if outcome == "sys518":
            raise sushy.exceptions.ServerSideError("GET", url, _Resp(503, _dell_error(503, "IDRAC.2.8.SYS518")))
        if outcome == "404":
            raise sushy.exceptions.ResourceNotFoundError("GET", url, _Resp(404, _dell_error(404, "Base.1.2.X")))
        if outcome == "boom":
            raise RuntimeError("unexpected")
        return type("System", (), {"path": "/redfish/v1/Systems/1"})()


@pytest.fixture
def bmc_factory(monkeypatch: pytest.MonkeyPatch) -> Any:
    import sushy

    made: list[FakeBmc] = []

    def make(outcomes: list[str], *, delete_fails: bool = False) -> FakeBmc:
        bmc = FakeBmc(outcomes, delete_fails=delete_fails)
        made.append(bmc)
        return bmc

    class FakeAuth:
        def __init__(self, username: str, password: str) -> None:
            self.uri: str | None = None

        def get_session_resource_id(self) -> str | None:
            return self.uri

        def get_session_key(self) -> str | None:
            return "token" if self.uri else None

        def reset_session_attrs(self) -> None:
            self.uri = None

    class FakeSushy:
        def __init__(self, _base_url: str, *, root_prefix: str, auth: FakeAuth, connector: Any) -> None:
            auth.uri = made[-1].login()  # what sushy's session auth does in Sushy.__init__
            self._auth = auth
            self.json: dict[str, Any] = {}

    def fake_op(_conn: Any, method: str, path: str = "", *_args: Any, **_kw: Any) -> Any:
        bmc = made[-1]
        if method != "DELETE" or not path.startswith(SESSIONS):
            raise AssertionError(f"unexpected {method} {path}")
        bmc.deletes.append(path)
        if bmc.delete_fails:
            raise sushy.exceptions.ServerSideError("DELETE", path, _Resp(503, _dell_error(503, "IDRAC.2.8.SYS518")))
        bmc.sessions.discard(path.rsplit("/", 1)[-1])
        return _Resp(204)

    monkeypatch.setattr(session_mod.sushy, "Sushy", FakeSushy)
    monkeypatch.setattr(session_mod.sushy_auth, "SessionOrBasicAuth", FakeAuth)
    monkeypatch.setattr(sushy.connector.Connector, "_op", fake_op)
    monkeypatch.setattr(RedfishClient, "_load_system", lambda _self: made[-1].load_system())
    monkeypatch.setattr(RedfishClient, "probe", lambda _self: "up")
    monkeypatch.setattr(RedfishClient, "manager", property(lambda _self: object()))
    return make


@pytest.mark.parametrize(
    ("outcome", "error"),
    [
        ("404", RedfishError),  # wrong system_id (the lab test checks the message)
        ("sys518", BmcNotReady),  # the BMC is still starting
        ("boom", RedfishError),  # anything else, wrapped
    ],
)
def test_connect_deletes_the_session_when_a_later_step_fails(
    bmc_factory: Any, outcome: str, error: type[Exception]
) -> None:
    bmc = bmc_factory([outcome])
    client = RedfishClient(PARAMS)
    with pytest.raises(error):
        client.connect()
    assert (bmc.logins, bmc.deletes, bmc.sessions) == (1, [SESSIONS + "1"], set())
    assert client._conn is None
    client.close()  # a second close sends nothing
    assert bmc.deletes == [SESSIONS + "1"]


def test_cleanup_never_raises_and_the_first_error_stands(bmc_factory: Any) -> None:
    bmc = bmc_factory(["sys518"], delete_fails=True)
    client = RedfishClient(PARAMS)
    client.busy_sleep = lambda _s: None
    with pytest.raises(BmcNotReady):  # the SYS518 of the System read, not the DELETE's
        client.connect()
    assert bmc.deletes == [SESSIONS + "1"] * 4  # a busy BMC is asked again to delete the session, then left
    assert client._conn is None


@pytest.mark.parametrize(
    ("outcomes", "polls"),
    [
        (["ok"], 1),
        (["sys518", "ok"], 2),
        (["sys518", "sys518", "sys518", "ok"], 4),
    ],
)
def test_wait_ready_deletes_the_session_of_every_failed_poll(bmc_factory: Any, outcomes: list[str], polls: int) -> None:
    bmc = bmc_factory(["ok", *outcomes])
    with RedfishClient(PARAMS) as client:
        assert client.wait_ready(60, sleep=lambda _s: None, down_timeout=0) == polls
        # the first session (before the reset) and every failed poll's are gone; one is open
        assert bmc.logins == 1 + polls
        assert bmc.sessions == {str(bmc.logins)}
    assert bmc.sessions == set()
    assert sorted(bmc.deletes) == sorted(SESSIONS + str(n) for n in range(1, bmc.logins + 1))


def test_wait_ready_timing_out_leaves_no_session(bmc_factory: Any) -> None:
    bmc = bmc_factory(["ok", "sys518"])
    client = RedfishClient(PARAMS)
    client.connect()
    with pytest.raises(WaitTimeout):  # a zero timeout: one poll, still SYS518
        client.wait_ready(0, sleep=lambda _s: None, down_timeout=0)
    assert (bmc.logins, bmc.sessions) == (2, set())
    client.close()
    assert bmc.sessions == set()


class FakeClock:
    """Monotonic time that moves only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.mark.parametrize(
    ("down_after", "waited"),
    [
        (0, 0.0),  # the old session fails at once: no waiting for the reset to show
        (3, None),  # it keeps serving for two more checks, then goes down: some waiting, less than the cap
        (None, session_mod.DOWN_TIMEOUT),  # it never seems to go down: the whole cap, then readiness decides
    ],
)
def test_wait_ready_waits_for_the_reset_to_show_at_most_down_timeout(
    bmc_factory: Any, monkeypatch: pytest.MonkeyPatch, down_after: int | None, waited: float | None
) -> None:
    checks: list[float] = []
    clock = FakeClock()

    def went_down(_self: RedfishClient) -> bool:
        checks.append(clock.now)
        return down_after is not None and len(checks) > down_after

    monkeypatch.setattr(RedfishClient, "went_down", went_down)
    bmc_factory(["ok", "ok"])
    with RedfishClient(PARAMS) as client:
        assert client.wait_ready(60, sleep=clock.sleep, clock=clock) == 1  # then one readiness poll: up
    down_wait = checks[-1]  # the fake time of the last "went down?" check: all waiting before it
    if waited is None:
        assert 0 < down_wait < session_mod.DOWN_TIMEOUT
        assert len(checks) == down_after + 1
    else:
        assert down_wait == pytest.approx(waited)
        assert clock.now == pytest.approx(waited)  # readiness answered at once: nothing slept after
