"""``auth: session`` with a wrong ``system_id``: the task fails clearly and leaves no session.

The login works, then locating the System answers 404. Before the fix the client forgot the
session without a DELETE, and iDRAC8 (about four sessions) ran out after a handful of such tasks.
Here every Redfish module fails that way five times on each personality: every failure must name
``system_id`` and the Systems the BMC has, every session created must be deleted (the BMC's own
request log shows one DELETE per login), and a correct task afterwards must get a session of its
own (no refused login; with leaked sessions the iDRAC8 table would be full).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from integration.redfish._requestlog import select
from integration.redfish.conftest import PERSONALITIES, StartLab

from lab.redfish.server import BmcSpec, RedfishLab

FQ = "metalplane.inference."
SESSIONS = "/redfish/v1/SessionService/Sessions"
WRONG = "System.Embedded.9"
REAL_SYSTEM = {"idrac8": "System.Embedded.1", "idrac9": "System.Embedded.1", "generic": "1"}
C = {
    "bmc_url": "{{ bmc_url }}",
    "username": "root",
    "password": "calvin",
    "ca_cert": "{{ ca_path }}",
    "auth": "session",
}
BAD = {**C, "system_id": WRONG}
# One task per module, each with the wrong system_id: five logins, more than iDRAC8's four sessions.
FAILING = {
    "info, wrong system": FQ + "redfish_info",
    "power, wrong system": FQ + "redfish_power",
    "boot, wrong system": FQ + "redfish_boot",
    "media, wrong system": FQ + "redfish_virtual_media",
    "reset, wrong system": FQ + "bmc_reset",
}
ARGS = {
    FQ + "redfish_info": {},
    FQ + "redfish_power": {"state": "on"},
    FQ + "redfish_boot": {"device": "pxe"},
    FQ + "redfish_virtual_media": {"state": "ejected"},
    FQ + "bmc_reset": {"wait_timeout": 30},
}


@pytest.fixture(scope="module")
def lab(start_redfish_lab: StartLab) -> RedfishLab:
    return start_redfish_lab([BmcSpec(name=p, personality=p, power_state="Off") for p in PERSONALITIES])


def test_wrong_system_id_leaves_no_session(
    playbook: Callable[..., Any], lab: RedfishLab, tmp_path: Path, ansible_tmp: Path
) -> None:
    tasks: list[dict[str, Any]] = [
        {"name": name, module: {**BAD, **ARGS[module]}, "ignore_errors": True} for name, module in FAILING.items()
    ]
    tasks.append({"name": "info, right system", FQ + "redfish_info": C})
    hosts = {p: {"ansible_connection": "local", "bmc_url": lab.url(p), "ca_path": lab.ca_path} for p in PERSONALITIES}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    play = {"name": "wrong system_id", "hosts": "all", "gather_facts": False, "tasks": tasks}
    run = playbook([play], inventory=inventory, env={"TMPDIR": str(ansible_tmp)})
    assert run.rc == 0, run.stdout[-4000:] + run.stderr[-2000:]

    for personality in PERSONALITIES:
        bmc = lab.bmc(personality)
        for name in FAILING:
            result = run.task(name, host=personality)
            assert result.get("failed") is True, (personality, name, result)
            assert result["error"] == {"kind": "input", "field": "system_id"}, (personality, name)
            msg = result["msg"]
            assert msg.startswith(f"system_id: the BMC at {lab.url(personality)} has no System '{WRONG}'"), msg
            assert f"its Systems are: {REAL_SYSTEM[personality]}." in msg, msg
            assert "calvin" not in msg
        right = run.task("info, right system", host=personality)
        assert right["redfish"]["power_state"] == "Off"

        # nothing was changed, every login was matched by the DELETE of its own session
        assert (bmc.power_state, bmc.resets) == ("Off", 0)
        assert bmc.sessions == {}, personality
        assert bmc.counters["session_login"] == bmc.counters["session_logout"] == len(FAILING) + 1, personality
        assert bmc.counters["session_refused"] == 0, personality
        logins = select(bmc.requests, method="POST", path_endswith=SESSIONS, status=201)
        deletes = select(bmc.requests, method="DELETE", path_contains=SESSIONS + "/")
        assert len(logins) == len(deletes) == len(FAILING) + 1, personality
        assert all(d.status in (200, 204) for d in deletes), personality
