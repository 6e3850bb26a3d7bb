"""The Redfish modules' argument handling, run in-process through ``main()`` (no BMC needed).

Bad input must fail before any request: ``bmc_url`` that points nowhere reachable is fine here,
because validation fails first. A real request would raise a connection error instead of the
asserted input error, so these tests also prove that nothing was sent.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.metalplane.inference.plugins.modules import (
    bmc_reset,
    redfish_boot,
    redfish_info,
    redfish_power,
    redfish_virtual_media,
)

UNREACHABLE = "https://127.0.0.1:9"  # discard port: any request would fail with a connection error


def _run(module: Any, args: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    with patch_module_args(args), pytest.raises(SystemExit):
        module.main()
    return json.loads(capsys.readouterr().out)


def _base(**kw: Any) -> dict[str, Any]:
    return {"bmc_url": UNREACHABLE, "username": "root", "password": "s3cret-pw", **kw}


@pytest.mark.parametrize(
    ("module", "args", "field"),
    [
        (redfish_info, _base(bmc_url="idrac.example"), "bmc_url"),
        (redfish_info, _base(bmc_url="ftp://idrac.example"), "bmc_url"),
        (redfish_power, _base(bmc_url="https://", state="on"), "bmc_url"),
        (redfish_virtual_media, _base(state="inserted", image_url="nfs://10.0.0.5/x.iso"), "image_url"),
        (redfish_virtual_media, _base(state="inserted", image_url="/local/x.iso"), "image_url"),
        (redfish_info, _base(api_timeout=0), "api_timeout"),
    ],
)
def test_bad_input_fails_before_any_request(
    module: Any, args: dict[str, Any], field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    result = _run(module, args, capsys)
    assert result["failed"] is True
    assert result["error"] == {"kind": "input", "field": field}
    assert result["msg"].startswith(f"{field}: ")
    assert "s3cret-pw" not in json.dumps(result)


@pytest.mark.parametrize(
    ("module", "args", "fragment"),
    [
        (redfish_boot, _base(), "one of the following is required: device, mode, order"),
        (redfish_boot, _base(device="floppy"), "value of device must be one of"),
        (redfish_boot, _base(mode="BIOS"), "value of mode must be one of"),
        (redfish_power, _base(state="hibernate"), "value of state must be one of"),
        (redfish_virtual_media, _base(state="inserted"), "image_url"),
        (redfish_info, {"bmc_url": UNREACHABLE, "username": "root"}, "password"),
    ],
)
def test_argument_spec_rejects(
    module: Any,
    args: dict[str, Any],
    fragment: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("REDFISH_PASSWORD", raising=False)
    result = _run(module, args, capsys)
    assert result["failed"] is True
    assert fragment in result["msg"]


def test_env_fallback_and_unreachable_bmc(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDFISH_USERNAME", "root")
    monkeypatch.setenv("REDFISH_PASSWORD", "env-s3cret")
    result = _run(bmc_reset, {"bmc_url": UNREACHABLE, "api_timeout": 2}, capsys)
    assert result["failed"] is True
    assert result["error"]["kind"] == "redfish_not_ready"  # unreachable: typed, one failure at the top
    assert "Logging in to https://127.0.0.1:9" in result["msg"]
    assert "env-s3cret" not in json.dumps(result)
