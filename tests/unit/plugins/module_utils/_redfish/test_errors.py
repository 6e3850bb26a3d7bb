"""Classification of Redfish / Dell MessageIds into typed errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
import sushy.exceptions as sx

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ApiError, InputError
from ansible_collections.metalplane.inference.plugins.module_utils._redfish import errors as e


@pytest.mark.parametrize(
    ("message_id", "short"),
    [
        ("IDRAC.2.8.SYS446", "SYS446"),
        ("Base.1.8.InternalError", "InternalError"),
        ("SYS518", "SYS518"),
        ("IDRAC.1.6.VRM0021", "VRM0021"),
    ],
)
def test_short_message_id(message_id: str, short: str) -> None:
    assert e.short_message_id(message_id) == short


def _body(*ids: str, code: str = "Base.1.8.GeneralError") -> dict[str, Any]:
    return {"error": {"code": code, "message": "x", "@Message.ExtendedInfo": [{"MessageId": i} for i in ids]}}


def test_message_ids_prefers_extended_info() -> None:
    assert e.message_ids(_body("IDRAC.2.8.SYS446")) == ["SYS446", "GeneralError"]
    assert e.message_ids(None) == []
    assert e.message_ids({"error": {}}) == []


@pytest.mark.parametrize(
    ("status", "ids", "text", "category"),
    [
        (500, ["SYS446"], "", e.MEDIA_RECOVERABLE),
        (400, ["RAC0904"], "", e.MEDIA_RECOVERABLE),
        (400, ["VRM0021"], "", e.MEDIA_RECOVERABLE),
        (400, ["VRM0012"], "", e.MEDIA_RECOVERABLE),
        (500, ["RAC0508"], "", e.MEDIA_RECOVERABLE),
        (500, ["InternalError"], "", e.MEDIA_RECOVERABLE),
        (500, ["GeneralError"], "The virtual media provider is not ready", e.MEDIA_RECOVERABLE),
        (400, ["SWC0700"], "", e.NOT_READY),
        (503, ["SYS518"], "", e.NOT_READY),
        (503, [], "", e.NOT_READY),
        (400, ["GeneralError"], "iDRAC is not yet ready", e.NOT_READY),
        (401, [], "", e.AUTH),
        (403, ["InsufficientPrivilege"], "", e.AUTH),
        (400, ["LC068"], "", e.JOB_BUSY),
        (400, ["RAC0679"], "", e.JOB_BUSY),
        (400, ["PropertyValueNotInList"], "", e.INVALID),
        (400, ["SYS410"], "", e.INVALID),
        (500, ["GeneralError"], "boom", e.OTHER),
        (404, [], "", e.OTHER),
    ],
)
def test_classify(status: int, ids: list[str], text: str, category: str) -> None:
    assert e.classify(status, ids, text) == category


class _Response:
    def __init__(self, status: int, body: dict[str, Any] | None) -> None:
        self.status_code = status
        self._body = body

    def json(self) -> dict[str, Any]:
        if self._body is None:
            raise ValueError("no body")
        return json.loads(json.dumps(self._body))


@pytest.mark.parametrize(
    ("exc_cls", "status", "body", "typed", "category"),
    [
        (sx.ServerSideError, 500, _body("IDRAC.2.8.SYS446"), e.MediaError, e.MEDIA_RECOVERABLE),
        (sx.BadRequestError, 400, _body("IDRAC.2.8.VRM0021"), e.MediaError, e.MEDIA_RECOVERABLE),
        (sx.BadRequestError, 400, _body("IDRAC.2.8.SWC0700"), e.BmcNotReady, e.NOT_READY),
        (sx.ServerSideError, 503, None, e.BmcNotReady, e.NOT_READY),
        (sx.AccessError, 401, None, e.AuthenticationError, e.AUTH),
        (sx.BadRequestError, 400, _body("IDRAC.2.8.LC068"), e.JobBusyError, e.JOB_BUSY),
        (sx.BadRequestError, 400, _body("Base.1.8.PropertyValueNotInList"), e.RedfishError, e.INVALID),
    ],
)
def test_from_sushy_http(exc_cls: type, status: int, body: Any, typed: type, category: str) -> None:
    exc = exc_cls("POST", "https://bmc/redfish/v1/x", _Response(status, body))
    err = e.from_sushy(exc, "Doing it")
    assert err.__class__ is typed
    assert isinstance(err, ApiError)
    assert err.category == category
    assert err.status == status
    assert err.msg.startswith("Doing it failed: HTTP")
    assert err.to_result()["category"] == category


def test_auth_message_names_the_fix_but_no_secret() -> None:
    exc = sx.AccessError("GET", "https://bmc/redfish/v1/Systems", _Response(401, None))
    err = e.from_sushy(exc, "Logging in")
    assert "REDFISH_PASSWORD" in err.msg
    assert "calvin" not in err.msg


def test_from_sushy_non_http() -> None:
    assert isinstance(e.from_sushy(sx.ConnectionError(url="u", error="refused"), "x"), e.BmcNotReady)
    assert isinstance(e.from_sushy(sx.MissingAttributeError(attribute="a", resource="r"), "x"), e.UnsupportedError)
    assert isinstance(
        e.from_sushy(sx.InvalidParameterValueError(parameter="p", value="v", valid_values="w"), "x"), InputError
    )
    already = e.MediaError("m")
    assert e.from_sushy(already, "x") is already
