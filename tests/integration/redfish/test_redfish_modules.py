"""The Redfish modules through real ansible-playbook against the lab, for every personality.

One playbook per personality walks the whole surface (grouped to keep runtime small): facts,
power with check mode and idempotency, one-time virtual-CD boot, boot order with a BMC that
reverts it after the next boot (-> ``reapplied``), virtual media with a first-insert SYS446
(-> ``eject_retry``) and a VRM0021 that only a BMC reset clears (-> ``bmc_reset``), a BMC reset,
and bad input that must fail clearly without changing anything. Faults are armed between tasks
through the lab's loopback control API, the way an operator's BMC misbehaves mid-run.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from integration.redfish.conftest import PERSONALITIES
from integration.redfish.images import ImageServer

from lab.redfish.server import RedfishLab

FQ = "metalplane.inference."
FIRST_BOOT_ENTRY = {
    "idrac8": "NIC.Integrated.1-1-1",  # BootSources FQDD
    "idrac9": "PXE Device 1: Integrated NIC 1 Port 1 Partition 1",  # BootOption display name
    "generic": "Boot0001",  # BootOption id
}
# HTTP requests per task with the default ``auth: basic`` (counted by the module, every exchange).
# The benchmark's anchor, community.general.redfish_command, makes 4 / 5 / 8 without verifying.
# ``auth: session`` adds exactly two (login POST, logout DELETE).
REQUESTS = {
    # power on (Off -> On, read back); one-time virtual CD (iDRAC8: SCP import + task poll); insert + read back
    "idrac8": {"on": 4, "virtual cd once": 5, "insert clean": 8},
    "idrac9": {"on": 4, "virtual cd once": 5, "insert clean": 7},
    "generic": {"on": 4, "virtual cd once": 5, "insert clean": 7},
}
EXPECTED = {
    "idrac8": {"generation": 8, "quirks": "dell_idrac8", "vcd": "Dell SCP ImportSystemConfiguration", "slot": "CD"},
    "idrac9": {"generation": 9, "quirks": "dell_idrac9", "vcd": "BootSourceOverride", "slot": "1"},
    "generic": {"generation": None, "quirks": "generic", "vcd": "BootSourceOverride", "slot": "Cd"},
}


def _fault(fault: str) -> dict[str, Any]:
    return {
        "name": f"arm {fault}",
        "ansible.builtin.uri": {
            "url": "{{ lab_control }}/faults",
            "method": "POST",
            "body_format": "json",
            "body": {"fault": fault, "count": 1},
            "ca_path": "{{ ca_path }}",
        },
    }


C = {"bmc_url": "{{ bmc_url }}", "username": "root", "password": "calvin", "ca_cert": "{{ ca_path }}"}
MEDIA = {**C, "retry_delay": 0, "verify_timeout": 5, "bmc_ready_timeout": 60}
ISO = "{{ iso }}"
TASKS: list[dict[str, Any]] = [
    {"name": "info", FQ + "redfish_info": C, "register": "facts"},
    {"name": "on check", FQ + "redfish_power": {**C, "state": "on"}, "check_mode": True},
    {"name": "on", FQ + "redfish_power": {**C, "state": "on", "wait_timeout": 30}},
    {"name": "on again", FQ + "redfish_power": {**C, "state": "on"}},
    {"name": "on again, session", FQ + "redfish_power": {**C, "state": "on", "auth": "session"}},
    {"name": "virtual cd once", FQ + "redfish_boot": {**C, "device": "virtual_cd"}},
    _fault("boot_order_reverts"),
    {
        "name": "order",
        FQ + "redfish_boot": {**C, "order": ["{{ first_entry }}"], "verify_after_reboot": True, "wait_timeout": 60},
    },
    {"name": "order again", FQ + "redfish_boot": {**C, "order": ["{{ first_entry }}"]}},
    {
        "name": "mode check",
        FQ + "redfish_boot": {**C, "mode": "{{ 'Legacy' if facts.redfish.boot.override_mode == 'UEFI' else 'UEFI' }}"},
        "check_mode": True,
    },
    {"name": "same mode", FQ + "redfish_boot": {**C, "mode": "{{ facts.redfish.boot.override_mode }}"}},
    {"name": "insert clean", FQ + "redfish_virtual_media": {**MEDIA, "state": "inserted", "image_url": ISO}},
    {"name": "eject clean", FQ + "redfish_virtual_media": {**MEDIA, "state": "ejected", "auth": "session"}},
    _fault("insert_sys446"),
    {"name": "insert sys446", FQ + "redfish_virtual_media": {**MEDIA, "state": "inserted", "image_url": ISO}},
    {"name": "eject all", FQ + "redfish_virtual_media": {**MEDIA, "state": "ejected"}},
    _fault("insert_vrm0021_until_reset"),
    {"name": "insert vrm0021", FQ + "redfish_virtual_media": {**MEDIA, "state": "inserted", "image_url": ISO}},
    {"name": "insert again", FQ + "redfish_virtual_media": {**MEDIA, "state": "inserted", "image_url": ISO}},
    _fault("busy_503"),
    {"name": "info through a 503", FQ + "redfish_info": C},
    _fault("session_limit"),
    {"name": "info with sessions full", FQ + "redfish_info": {**C, "auth": "session"}},
    {"name": "bmc reset", FQ + "bmc_reset": {**C, "wait_timeout": 60}},
    {"name": "info after", FQ + "redfish_info": C},
    {"name": "off", FQ + "redfish_power": {**C, "state": "off", "graceful_timeout": 10, "wait_timeout": 30}},
    {"name": "unknown device", FQ + "redfish_boot": {**C, "device": "floppy"}, "ignore_errors": True},
    {
        "name": "ftp image",
        FQ + "redfish_virtual_media": {**MEDIA, "state": "inserted", "image_url": "ftp://127.0.0.1/x.iso"},
        "ignore_errors": True,
    },
    {
        "name": "wrong password",
        FQ + "redfish_power": {**C, "password": "wrong-pw", "state": "on"},
        "ignore_errors": True,
    },
]


def test_modules_against_lab(
    playbook: Callable[..., Any], redfish_lab: RedfishLab, images: ImageServer, tmp_path: Path
) -> None:
    """All three personalities in one run: one inventory host each, in parallel (forks)."""
    hosts = {
        personality: {
            "ansible_connection": "local",
            "bmc_url": redfish_lab.url(f"{personality}-1"),
            "lab_control": f"https://127.0.0.1:{redfish_lab.port}/lab/bmc/{personality}-1",
            "ca_path": redfish_lab.ca_path,
            "iso": images.url(),
            "first_entry": FIRST_BOOT_ENTRY[personality],
        }
        for personality in PERSONALITIES
    }
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    play = {"name": "redfish", "hosts": "all", "gather_facts": False, "tasks": TASKS}
    run = playbook([play], inventory=inventory, diff=True)
    assert run.rc == 0, run.stdout[-4000:] + run.stderr[-2000:]
    for personality in PERSONALITIES:
        _check(run, redfish_lab, personality)


def _check(run: Any, redfish_lab: RedfishLab, personality: str) -> None:
    bmc = redfish_lab.bmc(f"{personality}-1")
    want = EXPECTED[personality]

    def task(name: str) -> dict[str, Any]:
        return run.task(name, host=personality)

    facts = task("info")["redfish"]
    assert (facts["generation"], facts["quirks"], facts["power_state"]) == (want["generation"], want["quirks"], "Off")
    assert facts["nics"]
    assert all(n["mac"] for n in facts["nics"])
    assert facts["gpus"]
    assert next(s["id"] for s in facts["virtual_media"]) == want["slot"]
    if personality == "idrac8":
        assert facts["boot"]["order_source"] == "BootSources.BootSeq"
        assert facts["boot"]["boot_sources"]

    # power: check mode plans without acting; then on; then idempotent
    assert task("on check")["changed"] is True
    assert task("on check")["power_state"] == "Off"
    on = task("on")
    assert (on["changed"], on["power_state"], on["diff"]["after"]) == (True, "On", {"power_state": "On"})
    assert task("on again")["changed"] is False
    # the request budget (issue 4): no more than community.general, with the result read back
    for name, count in REQUESTS[personality].items():
        assert task(name)["requests"] == count, (name, task(name)["requests"])
    # auth: session = the same reads plus one login and one logout, and the session is gone after
    session_on = task("on again, session")
    assert (session_on["changed"], session_on["requests"]) == (False, task("on again")["requests"] + 2)
    assert bmc.counters["session_login"] == bmc.counters["session_logout"] >= 2

    vcd = task("virtual cd once")
    assert vcd["changed"] is True
    assert vcd["actions"][0]["method"] == want["vcd"]
    if personality == "idrac8":
        assert len(bmc.scp_imports) == 1  # Cd would boot the physical drive on 13G

    order = task("order")
    assert (order["changed"], order["rebooted"], order["reapplied"]) == (True, True, True)
    assert bmc.counters["boot_order_reverted"] == 1
    assert task("order again")["changed"] is False

    mode = task("mode check")
    assert mode["changed"] is True
    assert mode["plan"]["mode"] in ("UEFI", "Legacy")
    assert task("same mode")["changed"] is False  # never re-sent when unchanged

    clean = task("insert clean")
    assert (clean["changed"], clean["recovered_by"], clean["slot"]) == (True, "none", want["slot"])
    assert task("eject clean")["ejected"] == [want["slot"]]
    sys446 = task("insert sys446")
    assert (sys446["changed"], sys446["recovered_by"], sys446["slot"]) == (True, "eject_retry", want["slot"])
    assert task("eject all")["ejected"] == [want["slot"]]
    vrm = task("insert vrm0021")
    assert (vrm["changed"], vrm["recovered_by"]) == (True, "bmc_reset")
    assert vrm["logins"] == 2  # logged in again after the reset
    assert task("insert again")["changed"] is False

    # a 503 burst is retried; with auth: session a full session table falls back to Basic auth
    assert task("info through a 503")["redfish"]["power_state"] == "On"
    assert bmc.counters["fault:busy_503"] == 1
    assert task("info with sessions full")["redfish"]["quirks"] == want["quirks"]
    assert bmc.counters["session_refused"] == 1

    reset = task("bmc reset")
    assert (reset["changed"], reset["ready"]) == (True, True)
    assert bmc.resets == 2  # one by the recovery ladder, one by bmc_reset
    slot_after = next(s for s in task("info after")["redfish"]["virtual_media"] if s["id"] == want["slot"])
    assert slot_after["inserted"] is False  # a BMC reset drops mounted media, as on iDRAC

    off = task("off")
    assert (off["changed"], off["power_state"]) == (True, "Off")

    # bad input: clear errors, nothing changed
    assert task("unknown device")["failed"] is True
    assert "floppy" in task("unknown device")["msg"]
    ftp = task("ftp image")
    assert ftp["error"] == {"kind": "input", "field": "image_url"}
    wrong = task("wrong password")
    assert wrong["error"]["kind"] == "redfish_auth"
    assert "401" in wrong["msg"]
    assert "wrong-pw" not in run.stdout
    assert bmc.power_state == "Off"
    assert bmc.sessions == {}  # every session was closed, also across the BMC resets
