"""``auth: basic`` on a BMC that takes HTTP Basic for reads but refuses it for writes.

The reference leaves open whether every iDRAC8 firmware accepts Basic auth for POST/PATCH (one
field report says writes need a session). The lab BMCs here refuse exactly that: the modules must
still succeed with the default ``auth: basic`` by opening one session for the refused write, say
so (``auth_fallback``, a warning naming ``auth: session``), leave no session behind, and cost the
predicted requests. A BMC that refuses the session too must fail clearly with nothing changed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from integration.redfish.conftest import StartLab
from integration.redfish.images import ImageServer

from lab.redfish.server import BmcSpec, RedfishLab

FQ = "metalplane.inference."
FALLBACK = "r730-basic-ro"  # iDRAC8 firmware that refuses every write sent with HTTP Basic
FORBIDDEN = "gen-403"  # generic BMC armed (control API) to answer one Basic write with 403
LOCKED = "r730-locked"  # iDRAC8 refusing Basic writes and, its session table full, sessions too
# The fallback costs exactly three requests over the default's budget (REQUESTS in
# test_redfish_modules.py): the refused write, the session login (POST) and its logout (DELETE).
FALLBACK_EXTRA = 3
BASIC_REQUESTS = {"on": 4, "insert": 8, "virtual cd once": 5}

C = {"bmc_url": "{{ bmc_url }}", "username": "root", "password": "calvin", "ca_cert": "{{ ca_path }}"}
MEDIA = {**C, "retry_delay": 0, "verify_timeout": 5, "bmc_ready_timeout": 60}
ISO = "{{ iso }}"


@pytest.fixture(scope="module")
def lab(start_redfish_lab: StartLab) -> RedfishLab:
    return start_redfish_lab(
        [
            BmcSpec(name=FALLBACK, personality="idrac8", power_state="Off", basic_writes_refused=True),
            BmcSpec(name=FORBIDDEN, personality="generic", power_state="Off"),
            BmcSpec(name=LOCKED, personality="idrac8", power_state="Off", basic_writes_refused=True),
        ]
    )


def _play(host: str, tasks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": host, "hosts": host, "gather_facts": False, "tasks": tasks}


PLAYS = [
    _play(
        FALLBACK,
        [
            {"name": "on", FQ + "redfish_power": {**C, "state": "on", "wait_timeout": 30}},
            {"name": "insert", FQ + "redfish_virtual_media": {**MEDIA, "state": "inserted", "image_url": ISO}},
            # what the warning advises: the session from the start, no refused request
            {"name": "eject, session", FQ + "redfish_virtual_media": {**MEDIA, "state": "ejected", "auth": "session"}},
            # the fallback survives a BMC reset: the client logs in again with a session
            {"name": "bmc reset", FQ + "bmc_reset": {**C, "wait_timeout": 60}},
            {"name": "info", FQ + "redfish_info": C},
        ],
    ),
    _play(
        FORBIDDEN,
        [
            {
                "name": "arm basic_writes_refused 403",
                "ansible.builtin.uri": {
                    "url": "{{ lab_control }}/faults",
                    "method": "POST",
                    "body_format": "json",
                    "body": {"fault": "basic_writes_refused", "count": 1, "status": 403},
                    "ca_path": "{{ ca_path }}",
                },
            },
            {"name": "virtual cd once", FQ + "redfish_boot": {**C, "device": "virtual_cd"}},
        ],
    ),
    _play(
        LOCKED,
        [
            {"name": "on", FQ + "redfish_power": {**C, "state": "on"}, "ignore_errors": True},
            {
                "name": "insert",
                FQ + "redfish_virtual_media": {**MEDIA, "state": "inserted", "image_url": ISO},
                "ignore_errors": True,
            },
        ],
    ),
]


def test_basic_writes_refused(
    playbook: Callable[..., Any], lab: RedfishLab, images: ImageServer, tmp_path: Path, ansible_tmp: Path
) -> None:
    locked = lab.bmc(LOCKED)
    locked.inject("session_limit", count=100)  # every login refused: iDRAC8 answers 401
    hosts = {
        name: {
            "ansible_connection": "local",
            "bmc_url": lab.url(name),
            "lab_control": f"https://127.0.0.1:{lab.port}/lab/bmc/{name}",
            "ca_path": lab.ca_path,
            "iso": images.url(),
        }
        for name in (FALLBACK, FORBIDDEN, LOCKED)
    }
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    run = playbook(PLAYS, inventory=inventory, env={"TMPDIR": str(ansible_tmp)})
    assert run.rc == 0, run.stdout[-4000:] + run.stderr[-2000:]

    # -- iDRAC8 refusing Basic writes: every write task succeeds through a session ----------
    bmc = lab.bmc(FALLBACK)
    on = run.task("on", host=FALLBACK)
    assert (on["changed"], on["power_state"], on["auth_fallback"]) == (True, "On", True)
    assert on["requests"] == BASIC_REQUESTS["on"] + FALLBACK_EXTRA == 7
    assert any("auth: session" in w and "HTTP 401" in w for w in on["warnings"])
    insert = run.task("insert", host=FALLBACK)
    assert (insert["changed"], insert["recovered_by"], insert["auth_fallback"]) == (True, "none", True)
    assert insert["requests"] == BASIC_REQUESTS["insert"] + FALLBACK_EXTRA == 11
    assert bmc.counters["insert_media"] == 1  # the refused insert was not applied; the retry was
    session_eject = run.task("eject, session", host=FALLBACK)
    assert (session_eject["ejected"], session_eject["auth_fallback"]) == (["CD"], False)
    assert not session_eject.get("warnings")
    reset = run.task("bmc reset", host=FALLBACK)
    assert (reset["ready"], reset["auth_fallback"]) == (True, True)
    assert run.task("info", host=FALLBACK)["auth_fallback"] is False  # reads alone never need the session
    assert bmc.power_state == "On"
    assert bmc.counters["system_reset:On"] == 1
    # one refused Basic write per write task (power, insert, reset), none with a session
    assert bmc.counters["basic_write_refused"] == 3
    assert bmc.counters["session_login"] == bmc.counters["session_logout"] + bmc.resets
    assert bmc.sessions == {}  # every session deleted, the one a BMC reset dropped included

    # -- generic BMC, one Basic write answered 403 (armed through the control API) ----------
    vcd = run.task("virtual cd once", host=FORBIDDEN)
    assert (vcd["changed"], vcd["auth_fallback"]) == (True, True)
    assert vcd["requests"] == BASIC_REQUESTS["virtual cd once"] + FALLBACK_EXTRA == 8
    assert any("HTTP 403" in w for w in vcd["warnings"])
    forbidden = lab.bmc(FORBIDDEN)
    assert forbidden.counters["fault:basic_writes_refused"] == 1
    assert (forbidden.boot["target"], forbidden.boot["enabled"]) == ("Cd", "Once")
    assert forbidden.sessions == {}
    assert forbidden.counters["session_login"] == forbidden.counters["session_logout"] == 1

    # -- sessions refused too: a clear typed error, nothing changed -------------------------
    for name in ("on", "insert"):
        failed = run.task(name, host=LOCKED)
        assert failed["failed"] is True
        assert failed["error"]["kind"] == "redfish_auth"
        assert "could not be created" in failed["msg"]
        assert "auth: session" in failed["msg"]
        assert "privilege" in failed["msg"]
        assert "calvin" not in failed["msg"]
    assert locked.power_state == "Off"
    assert not any(slot["inserted"] for slot in locked.virtual_media.values())
    assert locked.counters["insert_media"] == 0
    assert locked.counters["session_refused"] == 2
    assert locked.sessions == {}
    # each task: its reads, the refused write, the refused login, and no further request
    writes = [(r.method, r.status) for r in locked.requests if r.method != "GET"]
    assert writes == [("POST", 401), ("POST", 401)] * 2
    assert "calvin" not in run.stdout
