"""Session client pieces that need no BMC: readiness probe, request log, session close."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from ansible_collections.metalplane.inference.plugins.module_utils._redfish.args import connection_params
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.session import RedfishClient, RequestLog

PARAMS = connection_params({"bmc_url": "https://bmc.example", "username": "root", "password": "pw", "timeout": 5})


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
