"""Boot.BootOrder written with If-Match against a fake connector: a 412 re-reads and re-plans once,
a second 412 is a ConflictError naming ``order``, and no PATCH ever goes out without If-Match
(given its ``etag`` argument, sushy would resend it bare and overwrite a concurrent writer; that
sushy raises the 412 when the tag is only in the header is checked in test_sushy_adapter.py)."""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace
from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ConflictError
from ansible_collections.metalplane.inference.plugins.module_utils._redfish import boot
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.args import connection_params
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.errors import PreconditionFailed
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.quirks.generic import Generic
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.session import RedfishClient, etag_forms

SYSTEM = "/redfish/v1/Systems/1"
START = ["Boot0001", "Boot0002", "Boot0003"]


class _Resp:
    def __init__(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        self.status_code = status
        self._body = body
        self.headers = headers or {}
        self.text = json.dumps(body) if body is not None else ""

    def json(self) -> Any:
        return self._body


class FakeBmc:
    """The System's boot order with an ETag; ``races`` are other writers' orders, one applied
    right before each of the next PATCHes (the window between our read and our write)."""

    def __init__(self, races: list[list[str]], *, weak: bool = False) -> None:
        self.order = list(START)
        self.races = list(races)
        self.weak = weak
        self.patches: list[tuple[str | None, list[str], int]] = []  # (If-Match, order, status)
        self.gets = 0

    def etag(self) -> str:
        return '"' + hashlib.sha256(json.dumps(self.order).encode()).hexdigest()[:12] + '"'

    def get(self, path: str, **_kw: Any) -> _Resp:
        if path != SYSTEM:
            raise AssertionError(f"unexpected GET {path}")
        self.gets += 1
        tag = ("W/" if self.weak else "") + self.etag()
        return _Resp(200, {"@odata.id": SYSTEM, "Boot": {"BootOrder": list(self.order)}}, {"ETag": tag})

    def patch(
        self, path: str = "", data: Any = None, headers: Any = None, etag: str | None = None, **_kw: Any
    ) -> _Resp:
        import sushy

        # sushy's own etag argument resends a 412'd PATCH without If-Match (its _etag_handler)
        assert etag is None, "the ETag must go in the If-Match header, never in sushy's etag argument"
        if path != SYSTEM:
            raise AssertionError(f"unexpected PATCH {path}")
        if self.races:
            self.order = self.races.pop(0)
        if_match = (headers or {}).get("If-Match")
        wanted = list(data["Boot"]["BootOrder"])
        # strong comparison: a weak tag never matches (RFC 9110 If-Match)
        status = 412 if if_match is None or if_match != self.etag() else 200
        self.patches.append((if_match, wanted, status))
        if status == 412:
            body = {"error": {"code": "Base.1.16.GeneralError", "@Message.ExtendedInfo": [{"MessageId": "x"}]}}
            raise sushy.exceptions.HTTPError("PATCH", "https://bmc.example" + path, _Resp(412, body))
        self.order = wanted
        return _Resp(200, {}, {})


def _client(bmc: FakeBmc) -> RedfishClient:
    params = connection_params(
        {"bmc_url": "https://bmc.example", "username": "root", "password": "pw", "system_id": "1"}
    )
    client = RedfishClient(params)
    client._conn = bmc
    return client


@pytest.mark.parametrize(
    ("etag", "forms"),
    [
        ('"abc"', ['"abc"']),
        ('W/"abc"', ['W/"abc"', '"abc"']),
        ("W/abc", ["W/abc"]),  # not a quoted tag: sent as read only
    ],
)
def test_etag_forms(etag: str, forms: list[str]) -> None:
    assert etag_forms(etag) == forms


@pytest.mark.parametrize(
    ("races", "weak", "desired", "outcome", "final", "patches"),
    [
        # nobody else writes: one PATCH with the ETag read
        ([], False, ["Boot0003"], "written", ["Boot0003", "Boot0001", "Boot0002"], 1),
        # another writer reversed the order between read and PATCH: 412, re-read, re-plan from its order
        (
            [["Boot0003", "Boot0002", "Boot0001"]],
            False,
            ["Boot0002"],
            "replanned",
            ["Boot0002", "Boot0003", "Boot0001"],
            2,
        ),
        # the other writer already put what we want first: re-plan finds nothing to write
        (
            [["Boot0003", "Boot0001", "Boot0002"]],
            False,
            ["Boot0003"],
            "converged",
            ["Boot0003", "Boot0001", "Boot0002"],
            1,
        ),
        # it changes again before our second PATCH: ConflictError, its order stands
        (
            [["Boot0003", "Boot0002", "Boot0001"], ["Boot0001", "Boot0003", "Boot0002"]],
            False,
            ["Boot0002"],
            "conflict",
            ["Boot0001", "Boot0003", "Boot0002"],
            2,
        ),
        # weak ETag refused by strong comparison: its strong form, still with If-Match
        ([], True, ["Boot0003"], "written", ["Boot0003", "Boot0001", "Boot0002"], 2),
    ],
)
def test_write_order_replans_once_and_never_drops_if_match(
    races: list[list[str]], *, weak: bool, desired: list[str], outcome: str, final: list[str], patches: int
) -> None:
    bmc = FakeBmc(races, weak=weak)
    client = _client(bmc)
    quirks = Generic()
    state = quirks.read_boot_order(client)
    planned = boot.plan_order(desired, state)
    assert planned is not None
    if outcome == "conflict":
        with pytest.raises(ConflictError) as err:
            boot.write_order(client, quirks, desired, state, planned)
        assert err.value.msg.startswith("order: another writer changed the boot order")
        assert err.value.details["field"] == "order"
    else:
        done, written, seen = boot.write_order(client, quirks, desired, state, planned)
        if outcome == "converged":
            assert (done, written) == (None, None)
        else:
            assert written == final
            assert bool(done.get("replanned")) is (outcome == "replanned")
        assert (seen is state) is (outcome == "written")
    assert bmc.order == final
    assert len(bmc.patches) == patches
    assert all(if_match for if_match, _order, _status in bmc.patches)  # never a bare PATCH
    # every PATCH that went through carried the ETag of the order it was planned from
    assert [status for _tag, _order, status in bmc.patches].count(200) == (
        0 if outcome in ("conflict", "converged") else 1
    )


def test_apply_reports_the_replanned_order() -> None:
    """Through ``apply``: plan, diff and actions show the order re-read after the 412."""
    bmc = FakeBmc([["Boot0003", "Boot0002", "Boot0001"]])
    client = _client(bmc)
    client._system = SimpleNamespace(path=SYSTEM, boot=SimpleNamespace(target="None", enabled="Disabled", mode="UEFI"))
    result = boot.apply(client, Generic(), {"order": ["Boot0002"]}, check_mode=False)
    assert result["changed"] is True
    assert result["plan"]["order"] == ["Boot0002", "Boot0003", "Boot0001"]
    assert result["diff"]["before"]["order"] == ["Boot0003", "Boot0002", "Boot0001"]
    assert result["diff"]["after"]["order"] == ["Boot0002", "Boot0003", "Boot0001"]
    assert result["actions"] == [{"method": "Boot.BootOrder", "job_id": None, "replanned": True}]
    assert bmc.order == ["Boot0002", "Boot0003", "Boot0001"]


def test_apply_unchanged_when_the_other_writer_did_it() -> None:
    bmc = FakeBmc([["Boot0002", "Boot0001", "Boot0003"]])
    client = _client(bmc)
    client._system = SimpleNamespace(path=SYSTEM, boot=SimpleNamespace(target="None", enabled="Disabled", mode="UEFI"))
    result = boot.apply(client, Generic(), {"order": ["Boot0002"], "reboot": True}, check_mode=False)
    assert (result["changed"], result["actions"], result["rebooted"]) == (False, [], False)
    assert result["plan"]["order"] is None


def test_precondition_failed_is_raised_by_the_client_patch() -> None:
    bmc = FakeBmc([["Boot0003", "Boot0002", "Boot0001"]])
    client = _client(bmc)
    with pytest.raises(PreconditionFailed) as err:
        client.patch(SYSTEM, {"Boot": {"BootOrder": START}}, "Setting Boot.BootOrder", etag=bmc.etag())
    assert err.value.status == 412
    assert bmc.patches == [(bmc.patches[0][0], START, 412)]
