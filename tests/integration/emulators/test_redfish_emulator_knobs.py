"""The Redfish emulator's BmcSpec knobs for recovery tests: the busy answer, an OS that ignores the button.

Why: ``tests/integration/redfish/test_redfish_recovery_paths.py`` trusts these to behave as
documented in ``docs/lab/redfish.md``; here they are pinned with raw HTTPS, without the modules.
"""

from __future__ import annotations

import pytest
import requests

from lab.redfish.server import BmcSpec, RedfishLab

SYSTEM = {"idrac8": "System.Embedded.1", "idrac9": "System.Embedded.1", "generic": "1"}
MANAGER = {"idrac8": "iDRAC.Embedded.1", "idrac9": "iDRAC.Embedded.1", "generic": "1"}


def _raw(lab: RedfishLab, name: str, method: str, path: str, **kwargs: object) -> requests.Response:
    return requests.request(
        method, lab.url(name) + path, auth=("root", "calvin"), verify=lab.ca_path, timeout=10, **kwargs
    )


@pytest.mark.parametrize(
    ("personality", "busy_message", "status", "message_id"),
    [
        ("idrac8", None, 503, "IDRAC.1.6.SYS518"),  # the Dell default
        ("idrac9", "SWC0700", 400, "IDRAC.2.8.SWC0700"),
        ("idrac8", "ServiceTemporarilyUnavailable", 503, "Base.1.2.ServiceTemporarilyUnavailable"),
        ("generic", None, 503, "Base.1.16.ServiceTemporarilyUnavailable"),  # a plain 503, no Dell id
    ],
)
def test_busy_phase_answer(personality: str, busy_message: str | None, status: int, message_id: str) -> None:
    spec = BmcSpec(
        name="b", personality=personality, reset_down=0, reset_busy=30, reset_unauth=0, busy_message=busy_message
    )
    with RedfishLab(bmcs=[spec], delay_scale=1.0) as lab:
        reset = f"/redfish/v1/Managers/{MANAGER[personality]}/Actions/Manager.Reset"
        assert _raw(lab, "b", "POST", reset, json={"ResetType": "GracefulRestart"}).status_code == 204
        for path in ("/redfish/v1/Managers", "/redfish/v1"):  # every path, the public root too
            answer = _raw(lab, "b", "GET", path)
            assert answer.status_code == status
            assert answer.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"] == message_id
        assert lab.bmc("b").counters[f"busy:{busy_message or message_id.rsplit('.', 1)[-1]}"] == 2


def test_busy_message_must_suit_the_personality() -> None:
    with pytest.raises(ValueError, match=r"SWC0700.*not a Dell"):
        BmcSpec(name="g", personality="generic", busy_message="SWC0700")
    with pytest.raises(ValueError, match="busy_message must be one of"):
        BmcSpec(name="d", personality="idrac8", busy_message="SYS999")


@pytest.mark.parametrize("personality", ["idrac9", "generic"])
def test_os_ignores_graceful_shutdown(personality: str) -> None:
    spec = BmcSpec(name="h", personality=personality, power_state="On", ignore_graceful_shutdown=True)
    with RedfishLab(bmcs=[spec], delay_scale=0.0) as lab:
        reset = f"/redfish/v1/Systems/{SYSTEM[personality]}/Actions/ComputerSystem.Reset"
        for reset_type in ("GracefulShutdown", "PushPowerButton"):  # the button press is the same event
            assert _raw(lab, "h", "POST", reset, json={"ResetType": reset_type}).status_code == 204
            assert lab.bmc("h").power_state == "On"
        assert lab.bmc("h").counters["graceful_shutdown_ignored"] == 2
        assert _raw(lab, "h", "POST", reset, json={"ResetType": "ForceOff"}).status_code == 204
        assert lab.bmc("h").power_state == "Off"  # forcing still works
        assert _raw(lab, "h", "POST", reset, json={"ResetType": "PushPowerButton"}).status_code == 204
        assert lab.bmc("h").power_state == "On"  # the button powers on as usual
