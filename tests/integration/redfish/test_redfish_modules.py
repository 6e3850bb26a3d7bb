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
from typing import Any

import pytest
from integration.redfish.conftest import PERSONALITIES, conn
from integration.redfish.images import ImageServer

from lab.redfish import RedfishLab

FQ = "metalplane.inference."
FIRST_BOOT_ENTRY = {
    "idrac8": "NIC.Integrated.1-1-1",  # BootSources FQDD
    "idrac9": "PXE Device 1: Integrated NIC 1 Port 1 Partition 1",  # BootOption display name
    "generic": "Boot0001",  # BootOption id
}
EXPECTED = {
    "idrac8": {"generation": 8, "quirks": "dell_idrac8", "vcd": "Dell SCP ImportSystemConfiguration", "slot": "CD"},
    "idrac9": {"generation": 9, "quirks": "dell_idrac9", "vcd": "BootSourceOverride", "slot": "1"},
    "generic": {"generation": None, "quirks": "generic", "vcd": "BootSourceOverride", "slot": "Cd"},
}


def _fault(lab: RedfishLab, name: str, fault: str) -> dict[str, Any]:
    return {
        "name": f"arm {fault}",
        "ansible.builtin.uri": {
            "url": f"https://127.0.0.1:{lab.port}/lab/bmc/{name}/faults",
            "method": "POST",
            "body_format": "json",
            "body": {"fault": fault, "count": 1},
            "ca_path": lab.ca_path,
        },
    }


@pytest.mark.parametrize("personality", PERSONALITIES)
def test_modules_against_lab(
    playbook: Callable[..., Any], redfish_lab: RedfishLab, images: ImageServer, personality: str
) -> None:
    name = f"{personality}-1"
    c = conn(redfish_lab, name)
    iso = images.url()
    media = {**c, "retry_delay": 0, "verify_timeout": 5, "bmc_ready_timeout": 60}
    tasks: list[dict[str, Any]] = [
        {"name": "info", FQ + "redfish_info": c, "register": "facts"},
        {"name": "on check", FQ + "redfish_power": {**c, "state": "on"}, "check_mode": True},
        {"name": "on", FQ + "redfish_power": {**c, "state": "on", "wait_timeout": 30}},
        {"name": "on again", FQ + "redfish_power": {**c, "state": "on"}},
        {"name": "virtual cd once", FQ + "redfish_boot": {**c, "device": "virtual_cd"}},
        _fault(redfish_lab, name, "boot_order_reverts"),
        {
            "name": "order",
            FQ + "redfish_boot": {
                **c,
                "order": [FIRST_BOOT_ENTRY[personality]],
                "verify_after_reboot": True,
                "wait_timeout": 60,
            },
        },
        {"name": "order again", FQ + "redfish_boot": {**c, "order": [FIRST_BOOT_ENTRY[personality]]}},
        {
            "name": "mode check",
            FQ + "redfish_boot": {
                **c,
                "mode": "{{ 'Legacy' if facts.redfish.boot.override_mode == 'UEFI' else 'UEFI' }}",
            },
            "check_mode": True,
        },
        {"name": "same mode", FQ + "redfish_boot": {**c, "mode": "{{ facts.redfish.boot.override_mode }}"}},
        _fault(redfish_lab, name, "insert_sys446"),
        {"name": "insert sys446", FQ + "redfish_virtual_media": {**media, "state": "inserted", "image_url": iso}},
        {"name": "eject all", FQ + "redfish_virtual_media": {**media, "state": "ejected"}},
        _fault(redfish_lab, name, "insert_vrm0021_until_reset"),
        {"name": "insert vrm0021", FQ + "redfish_virtual_media": {**media, "state": "inserted", "image_url": iso}},
        {"name": "insert again", FQ + "redfish_virtual_media": {**media, "state": "inserted", "image_url": iso}},
        {"name": "bmc reset", FQ + "bmc_reset": {**c, "wait_timeout": 60}},
        {"name": "info after", FQ + "redfish_info": c},
        {"name": "off", FQ + "redfish_power": {**c, "state": "off", "graceful_timeout": 10, "wait_timeout": 30}},
        {"name": "unknown device", FQ + "redfish_boot": {**c, "device": "floppy"}, "ignore_errors": True},
        {
            "name": "ftp image",
            FQ + "redfish_virtual_media": {**media, "state": "inserted", "image_url": "ftp://127.0.0.1/x.iso"},
            "ignore_errors": True,
        },
        {
            "name": "wrong password",
            FQ + "redfish_power": {**c, "password": "wrong-pw", "state": "on"},
            "ignore_errors": True,
        },
    ]
    run = playbook(tasks, diff=True)
    assert run.rc == 0, run.stdout[-4000:] + run.stderr[-2000:]
    bmc = redfish_lab.bmc(name)
    want = EXPECTED[personality]

    facts = run.task("info")["redfish"]
    assert (facts["generation"], facts["quirks"], facts["power_state"]) == (want["generation"], want["quirks"], "Off")
    assert facts["nics"]
    assert all(n["mac"] for n in facts["nics"])
    assert facts["gpus"]
    assert next(s["id"] for s in facts["virtual_media"]) == want["slot"]
    if personality == "idrac8":
        assert facts["boot"]["order_source"] == "BootSources.BootSeq"
        assert facts["boot"]["boot_sources"]

    # power: check mode plans without acting; then on; then idempotent
    assert run.task("on check")["changed"] is True
    assert run.task("on check")["power_state"] == "Off"
    on = run.task("on")
    assert (on["changed"], on["power_state"], on["diff"]["after"]) == (True, "On", {"power_state": "On"})
    assert run.task("on again")["changed"] is False

    vcd = run.task("virtual cd once")
    assert vcd["changed"] is True
    assert vcd["actions"][0]["method"] == want["vcd"]
    if personality == "idrac8":
        assert len(bmc.scp_imports) == 1  # Cd would boot the physical drive on 13G

    order = run.task("order")
    assert (order["changed"], order["rebooted"], order["reapplied"]) == (True, True, True)
    assert bmc.counters["boot_order_reverted"] == 1
    assert run.task("order again")["changed"] is False

    mode = run.task("mode check")
    assert mode["changed"] is True
    assert mode["plan"]["mode"] in ("UEFI", "Legacy")
    assert run.task("same mode")["changed"] is False  # never re-sent when unchanged

    sys446 = run.task("insert sys446")
    assert (sys446["changed"], sys446["recovered_by"], sys446["slot"]) == (True, "eject_retry", want["slot"])
    assert run.task("eject all")["ejected"] == [want["slot"]]
    vrm = run.task("insert vrm0021")
    assert (vrm["changed"], vrm["recovered_by"]) == (True, "bmc_reset")
    assert vrm["logins"] == 2  # logged in again after the reset
    assert run.task("insert again")["changed"] is False

    reset = run.task("bmc reset")
    assert (reset["changed"], reset["ready"]) == (True, True)
    assert bmc.resets == 2  # one by the recovery ladder, one by bmc_reset
    slot_after = next(s for s in run.task("info after")["redfish"]["virtual_media"] if s["id"] == want["slot"])
    assert slot_after["inserted"] is False  # a BMC reset drops mounted media, as on iDRAC

    off = run.task("off")
    assert (off["changed"], off["power_state"]) == (True, "Off")

    # bad input: clear errors, nothing changed
    assert run.task("unknown device")["failed"] is True
    assert "floppy" in run.task("unknown device")["msg"]
    ftp = run.task("ftp image")
    assert ftp["error"] == {"kind": "input", "field": "image_url"}
    wrong = run.task("wrong password")
    assert wrong["error"]["kind"] == "redfish_auth"
    assert "401" in wrong["msg"]
    assert "wrong-pw" not in run.stdout
    assert bmc.power_state == "Off"
    assert bmc.sessions == {}  # every session was closed, also across the BMC resets
