"""Cross-check: the generic paths against sushy-tools' emulator (fake driver), not our own lab.

Power, one-time boot and virtual media through real ansible-playbook runs, over TLS with the
emulator's certificate as ``ca_cert``. sushy-tools has no sessions (Basic auth fallback), no
ETags, no Manager.Reset and reports ``BootSourceOverrideEnabled`` as Continuous always
(as observed with sushy-tools 2.2.0); assertions stay within what it implements.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from integration.redfish.images import ImageServer
from integration.redfish.sushy_tools_server import SushyToolsBmc

pytestmark = [pytest.mark.sushy_tools, pytest.mark.slow]

FQ = "metalplane.inference."


@pytest.fixture(scope="module")
def sushy_bmc() -> Iterator[SushyToolsBmc]:
    bmc = SushyToolsBmc(power_state="Off", power_delay=1).start()
    try:
        yield bmc
    finally:
        bmc.stop()


def _task(name: str, module: str, args: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, FQ + module: args, **extra}


def test_generic_paths_against_sushy_tools(
    playbook: Callable[..., Any], sushy_bmc: SushyToolsBmc, images: ImageServer
) -> None:
    conn = sushy_bmc.module_args()
    iso = images.url("boot.iso")
    run = playbook(
        [
            _task("info", "redfish_info", conn),
            _task("on check", "redfish_power", {**conn, "state": "on"}, check_mode=True),
            _task("on", "redfish_power", {**conn, "state": "on", "wait_timeout": 60}),
            _task("on again", "redfish_power", {**conn, "state": "on"}),
            _task("boot cd once", "redfish_boot", {**conn, "device": "virtual_cd"}),
            _task("boot pxe always", "redfish_boot", {**conn, "device": "pxe", "persistent": True}),
            _task("boot pxe always again", "redfish_boot", {**conn, "device": "pxe", "persistent": True}),
            _task("insert", "redfish_virtual_media", {**conn, "state": "inserted", "image_url": iso}),
            _task("insert again", "redfish_virtual_media", {**conn, "state": "inserted", "image_url": iso}),
            _task("eject", "redfish_virtual_media", {**conn, "state": "ejected"}),
            _task("eject again", "redfish_virtual_media", {**conn, "state": "ejected"}),
            _task("forced off", "redfish_power", {**conn, "state": "forced_off", "wait_timeout": 60}),
            _task("bmc reset unsupported", "bmc_reset", conn, ignore_errors=True),
        ],
        diff=True,
    )
    assert run.rc == 0, run.stdout[-3000:] + run.stderr[-3000:]

    info = run.task("info")["redfish"]
    assert info["quirks"] == "generic"
    assert info["generation"] is None
    assert info["power_state"] == "Off"
    assert [s["id"] for s in info["virtual_media"]] == ["Cd", "Floppy"]
    assert info["nics"][0]["mac"] == "00:5c:52:31:3a:9c"

    check = run.task("on check")
    assert check["changed"] is True
    assert check["planned"] == ["On"]
    assert check["power_state"] == "Off"  # check mode sent nothing
    on = run.task("on")
    assert (on["changed"], on["actions"], on["power_state"]) == (True, ["On"], "On")
    assert on["diff"] == {"before": {"power_state": "Off"}, "after": {"power_state": "On"}}
    assert run.task("on again")["changed"] is False

    cd = run.task("boot cd once")
    assert cd["changed"] is True
    assert cd["actions"] == [{"method": "BootSourceOverride", "target": "Cd", "enabled": "Once", "verified": True}]
    assert run.task("boot pxe always")["changed"] is True
    assert run.task("boot pxe always again")["changed"] is False

    insert = run.task("insert")
    assert (insert["changed"], insert["recovered_by"], insert["slot"]) == (True, "none", "Cd")
    cd_slot = next(s for s in insert["slots"] if s["id"] == "Cd")
    assert (cd_slot["inserted"], cd_slot["image"]) == (True, iso)
    assert run.task("insert again")["changed"] is False
    eject = run.task("eject")
    assert (eject["changed"], eject["ejected"]) == (True, ["Cd"])
    assert all(not s["inserted"] for s in eject["slots"])
    assert run.task("eject again")["changed"] is False

    off = run.task("forced off")
    assert (off["changed"], off["power_state"]) == (True, "Off")
    reset = run.task("bmc reset unsupported")
    assert reset.get("failed") is True
    assert "Manager.Reset" in reset["msg"]


def test_wrong_password_and_bad_input_against_sushy_tools(
    playbook: Callable[..., Any], sushy_bmc: SushyToolsBmc
) -> None:
    conn = sushy_bmc.module_args()
    run = playbook(
        [
            _task("wrong password", "redfish_power", {**conn, "password": "nope", "state": "on"}, ignore_errors=True),
            _task("not https", "redfish_info", {**conn, "bmc_url": "ftp://127.0.0.1"}, ignore_errors=True),
            _task(
                "nfs image",
                "redfish_virtual_media",
                {**conn, "state": "inserted", "image_url": "nfs://h/x.iso"},
                ignore_errors=True,
            ),
            _task("no ca", "redfish_info", {**conn, "ca_cert": None}, ignore_errors=True),
            _task("still off", "redfish_info", conn),
        ]
    )
    wrong = run.task("wrong password")
    assert wrong["failed"] is True
    assert "HTTP 401" in wrong["msg"]
    assert "REDFISH_PASSWORD" in wrong["msg"]
    assert "nope" not in run.stdout
    assert wrong["error"]["kind"] == "redfish_auth"
    bad_url = run.task("not https")
    assert bad_url["error"] == {"kind": "input", "field": "bmc_url"}
    assert "https://" in bad_url["msg"]
    nfs = run.task("nfs image")
    assert nfs["error"]["field"] == "image_url"
    no_ca = run.task("no ca")
    assert no_ca["failed"] is True  # the emulator's self-signed certificate is not trusted by default
    assert "CERTIFICATE_VERIFY_FAILED" in no_ca["msg"] or "certificate" in no_ca["msg"].lower()
    assert run.task("still off")["redfish"]["power_state"] == "Off"  # nothing was changed
