"""Recovery and refusal paths of the Redfish modules (issue 4), through real ansible-playbook.

``test_redfish_modules.py`` walks the happy surface plus SYS446 and VRM0021. This file covers the
paths an operator meets when a BMC or its host misbehaves, end to end against the lab:

- the virtual-media ladder for the other known message ids (RAC0904, VRM0012, InternalError),
  each id on both rungs and both rungs on each personality, and an image URL the BMC can never
  reach (eject all, reset, retry once, fail with nothing mounted) on each personality;
- a BMC reset whose downtime window is long enough to be seen: connections refused, then busy
  (Dell's SYS518 or SWC0700, or a plain 503), then 401, then up; by ``bmc_reset`` and by the
  ladder's last rung; with the reset action each personality must get;
- ``redfish_power`` against an OS that ignores the power button (forced, or a clear timeout when
  forcing is not allowed), restarts and power cycles on iDRAC8 and iDRAC9 (the generic BMC's
  AllowableValues give the iDRAC9 plan), idempotence;
- a real boot mode change with a reboot, and its re-run that writes nothing;
- bad input that must fail naming the field without the BMC seeing a single write.

Every task's own requests are told apart by the task's start and end in the JSON report: the
emulator timestamps each request, so a task window is the slice of one BMC's request log that
the task produced. Every host is its own BMC and faults are armed before the play where they
can be; independent sequences run side by side (``strategy: free``) to keep wall time small.
"""

from __future__ import annotations

import datetime
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from integration.redfish._requestlog import WRITES, select
from integration.redfish.conftest import PERSONALITIES, StartLab
from integration.redfish.images import ImageServer

from lab.common.emulator import free_port
from lab.redfish.bmc import RequestRecord
from lab.redfish.server import BmcSpec, RedfishLab

FQ = "metalplane.inference."
C = {"bmc_url": "{{ bmc_url }}", "username": "root", "password": "calvin", "ca_cert": "{{ ca_path }}"}
MEDIA = {**C, "retry_delay": 0, "verify_timeout": 5, "bmc_ready_timeout": 60}
MANAGER = {"idrac8": "iDRAC.Embedded.1", "idrac9": "iDRAC.Embedded.1", "generic": "1"}
SYSTEM = {"idrac8": "System.Embedded.1", "idrac9": "System.Embedded.1", "generic": "1"}
CD_SLOT = {"idrac8": "CD", "idrac9": "1", "generic": "Cd"}
USB_SLOT = {"idrac8": "RemovableDisk", "idrac9": "2", "generic": "Usb"}
# What each personality must be sent to restart its BMC, and the request that carries it.
RESET_METHOD = {
    "idrac8": "Manager.Reset GracefulRestart",  # the only Manager.Reset value a 13G allows
    "idrac9": "DelliDRACCardService.iDRACReset",  # Dell's own reset, sushy's reset_idrac
    "generic": "Manager.Reset GracefulRestart",
}
RESET_PATH = {
    "idrac8": "/redfish/v1/Managers/iDRAC.Embedded.1/Actions/Manager.Reset",
    "idrac9": "/redfish/v1/Dell/Managers/iDRAC.Embedded.1/DelliDRACCardService/Actions/DelliDRACCardService.iDRACReset",
    "generic": "/redfish/v1/Managers/1/Actions/Manager.Reset",
}


# ------------------------------------------------------------------------------ helpers
def _inventory(path: Path, hosts: dict[str, dict[str, Any]]) -> Path:
    inventory = path / "hosts.yml"
    local = {name: {"ansible_connection": "local", **values} for name, values in hosts.items()}
    inventory.write_text(yaml.safe_dump({"all": {"hosts": local}}))
    return inventory


def _host_vars(lab: RedfishLab, bmc: str, *, own_port: bool = False) -> dict[str, Any]:
    return {
        "bmc_url": lab.port_url(bmc) if own_port else lab.url(bmc),
        "ca_path": lab.ca_path,
    }


def _epoch(stamp: str) -> float:
    """The JSON callback's ``2025-01-01T10:00:00.123456Z`` (UTC) as seconds since the epoch."""
    parsed = datetime.datetime.fromisoformat(stamp.rstrip("Z")).replace(tzinfo=datetime.UTC)
    return parsed.timestamp()


class Run:
    """A finished playbook run plus the lab, to read a task's result and the requests it made."""

    def __init__(self, run: Any, lab: RedfishLab) -> None:
        self.run = run
        self.lab = lab

    def task(self, name: str, host: str) -> dict[str, Any]:
        return self.run.task(name, host=host)

    def window(self, name: str, host: str) -> tuple[float, float]:
        """Start and end of task ``name`` on ``host`` (one entry per task, or per host with ``free``)."""
        found = None
        for play in self.run.report.get("plays", []):
            for task in play.get("tasks", []):
                if task["task"]["name"] == name and host in task.get("hosts", {}):
                    found = task["task"]["duration"]
        if found is None:
            raise KeyError(f"task {name!r} did not run on {host!r}")
        return _epoch(found["start"]), _epoch(found["end"])

    def requests(self, name: str, host: str) -> list[RequestRecord]:
        """The requests the BMC of ``host`` (same name) recorded while task ``name`` ran there."""
        start, end = self.window(name, host)
        return select(self.lab.bmc(host).requests, start=start, end=end)

    def writes(self, name: str, bmc: str) -> list[str]:
        return [f"{r.method} {r.path}" for r in select(self.requests(name, bmc), method=WRITES)]


def _failed(run: Any) -> str:
    """Every failed task result (host / task: msg; expected failures included), else the output's end."""
    failures = [
        f"{host} / {task['task']['name']}: {result.get('msg')}"
        for play in run.report.get("plays", [])
        for task in play.get("tasks", [])
        for host, result in task.get("hosts", {}).items()
        if result.get("failed")
    ]
    return "\n".join(failures) or run.stdout[-6000:] + run.stderr[-2000:]


# ------------------------------------------------------------------ a) the media ladder
# Reset windows scaled to about a second (0.6 s dropped, 0.2 s busy, 0.3 s 401): the ladder's
# reset rung then sees the BMC go down at once and takes one readiness poll interval. With a
# window of zero the BMC never looks down and the module waits its full "went down" timeout.
LADDER_SCALE = 0.02
LADDER_IDS = ("RAC0904", "VRM0012", "InternalError")
# Which message id fails once (first rung, eject all + retry) and which fails twice (second rung,
# BMC reset) on which personality. The id -> category table is one pure table for every
# personality (_redfish/errors.py, unit-tested for each id); what differs per personality is the
# slot, the insert path, the reset action and the MessageId's registry prefix. So every
# personality climbs both rungs, with two different ids, and every id climbs both rungs, on two
# different personalities: a Latin square instead of every id on every personality.
RETRY_ID = {"idrac8": "VRM0012", "idrac9": "InternalError", "generic": "RAC0904"}
RESET_ID = {"idrac8": "RAC0904", "idrac9": "VRM0012", "generic": "InternalError"}


def _ladder_cases() -> dict[str, tuple[str, str, str | None]]:
    """BMC name -> (personality, case, message id). One BMC per case: faults are armed up front."""
    cases: dict[str, tuple[str, str, str | None]] = {}
    for p in PERSONALITIES:
        cases[f"{p}-{RETRY_ID[p]}"] = (p, "eject_retry", RETRY_ID[p])
        cases[f"{p}-reset"] = (p, "bmc_reset", RESET_ID[p])
        cases[f"{p}-unreachable"] = (p, "unreachable", None)
    return cases


LADDER = _ladder_cases()


def test_ladder_cases_are_a_latin_square() -> None:
    """Each id once on each rung, two different ids per personality, both rungs on each one."""
    assert sorted(RETRY_ID.values()) == sorted(RESET_ID.values()) == sorted(LADDER_IDS)
    assert all(RETRY_ID[p] != RESET_ID[p] for p in PERSONALITIES)
    for p in PERSONALITIES:
        assert sorted(case for personality, case, _id in LADDER.values() if personality == p) == [
            "bmc_reset",
            "eject_retry",
            "unreachable",
        ]


@pytest.fixture(scope="module")
def ladder_lab(start_redfish_lab: StartLab) -> RedfishLab:
    specs = [BmcSpec(name=name, personality=p, power_state="On") for name, (p, _case, _id) in LADDER.items()]
    return start_redfish_lab(specs, LADDER_SCALE)


def test_media_recovery_ladder(
    playbook: Callable[..., Any], ladder_lab: RedfishLab, images: ImageServer, tmp_path: Path
) -> None:
    """RAC0904, VRM0012 and InternalError climb the ladder alike on every personality (see RETRY_ID).

    Once: eject all + retry (``eject_retry``); twice: the BMC reset too (``bmc_reset``). An URL the
    BMC never reaches fails after the whole ladder, naming the URL, with nothing left mounted.
    """
    unreachable = f"http://127.0.0.1:{free_port()}/gone.iso"  # nothing listens: refused at once
    hosts: dict[str, dict[str, Any]] = {}
    for name, (_personality, case, message_id) in LADDER.items():
        if message_id is not None:
            count = 1 if case == "eject_retry" else 2
            ladder_lab.bmc(name).inject("error", count=count, method="POST", path="InsertMedia", message_id=message_id)
        first = {"first_image": images.url(), "first_media": "cd"}
        if case == "unreachable":  # something in the other slot, for "eject all" to eject
            first = {"first_image": images.url("other.iso"), "first_media": "removable_disk"}
        hosts[name] = {**_host_vars(ladder_lab, name), **first, "unreachable": unreachable, "case": case}
    insert = {**MEDIA, "state": "inserted"}
    tasks = [
        {
            "name": "insert",
            FQ + "redfish_virtual_media": {
                **insert,
                "image_url": "{{ first_image }}",
                "media_type": "{{ first_media }}",
            },
        },
        {
            "name": "unreachable image",
            FQ + "redfish_virtual_media": {**insert, "image_url": "{{ unreachable }}"},
            "when": "case == 'unreachable'",
            "ignore_errors": True,
        },
    ]
    play = {"name": "ladder", "hosts": "all", "gather_facts": False, "tasks": tasks}
    result = playbook([play], inventory=_inventory(tmp_path, hosts), env={"ANSIBLE_FORKS": "8"})
    assert result.rc == 0, _failed(result)
    run = Run(result, ladder_lab)
    for name, (p, case, message_id) in LADDER.items():
        if case == "eject_retry":
            _check_eject_retry(run, name, p, str(message_id))
        elif case == "bmc_reset":
            _check_reset_rung(run, name, p, str(message_id))
        else:
            _check_unreachable(run, name, p, unreachable)


def _check_eject_retry(run: Run, name: str, p: str, message_id: str) -> None:
    cd = CD_SLOT[p]
    done = run.task("insert", name)
    assert (done["changed"], done["recovered_by"], done["slot"]) == (True, "eject_retry", cd), (name, done)
    # the failed insert, "eject all" (nothing was mounted), the retry that worked
    ids = [message_id, "GeneralError"]  # the extended message first, then the error's code
    assert done["steps"] == [f"recover: eject all after {ids}", f"insert {cd}"], (name, done["steps"])
    assert run.writes("insert", name) == [f"POST {_insert_path(p, cd)}"] * 2
    bmc = run.lab.bmc(name)
    assert bmc.counters["fault:error"] == 1
    assert (bmc.virtual_media[cd]["inserted"], bmc.resets) == (True, 0)


def _check_reset_rung(run: Run, name: str, p: str, message_id: str) -> None:
    cd = CD_SLOT[p]
    done = run.task("insert", name)
    assert (done["changed"], done["recovered_by"]) == (True, "bmc_reset"), (name, done)
    ids = [message_id, "GeneralError"]
    steps = done["steps"]
    assert steps[:3] == [f"recover: eject all after {ids}", f"recover: BMC reset after {ids}", RESET_METHOD[p]]
    assert re.fullmatch(r"BMC ready after \d+ polls", steps[3]), steps
    assert steps[4:] == [f"insert {cd}"]
    assert done["logins"] == 2  # logged in again after the reset
    writes = run.writes("insert", name)
    assert writes == [f"POST {_insert_path(p, cd)}"] * 2 + [f"POST {RESET_PATH[p]}", f"POST {_insert_path(p, cd)}"]
    bmc = run.lab.bmc(name)
    assert (bmc.counters["fault:error"], bmc.resets) == (2, 1)
    assert bmc.virtual_media[cd]["inserted"] is True
    assert bmc.sessions == {}


def _check_unreachable(run: Run, name: str, p: str, unreachable: str) -> None:
    """Eject everything (the USB image), retry, reset, retry, fail naming the URL; nothing mounted."""
    cd, usb = CD_SLOT[p], USB_SLOT[p]
    usb_insert = run.task("insert", name)
    assert (usb_insert["slot"], usb_insert["recovered_by"]) == (usb, "none")
    failed = run.task("unreachable image", name)
    assert failed["failed"] is True
    assert failed["error"]["kind"] == "redfish_media", failed
    assert failed["error"]["recovery_tried"] == ["eject_retry", "bmc_reset"]
    assert unreachable in failed["msg"]
    assert "still failing after eject+retry and a BMC reset" in failed["msg"]
    fetch_failure = "InternalError" if p == "generic" else "RAC0904"
    assert failed["error"]["message_ids"] == [fetch_failure, "GeneralError"]
    writes = run.writes("unreachable image", name)
    assert writes == [
        f"POST {_insert_path(p, cd)}",
        f"POST {_eject_path(p, usb)}",
        f"POST {_insert_path(p, cd)}",
        f"POST {RESET_PATH[p]}",
        f"POST {_insert_path(p, cd)}",
    ], (name, writes)
    inserts = [r.status for r in run.requests("unreachable image", name) if r.path == _insert_path(p, cd)]
    # 13G holds one image at a time across devices: the first insert is refused (VRM0021), not fetched
    first = 400 if p == "idrac8" else _fetch_status(p)
    assert inserts == [first, _fetch_status(p), _fetch_status(p)], (name, inserts)
    bmc = run.lab.bmc(name)
    assert bmc.counters["insert_unreachable"] == (2 if p == "idrac8" else 3)
    assert all(not slot["inserted"] for slot in bmc.virtual_media.values()), bmc.virtual_media
    assert bmc.resets == 1
    assert bmc.sessions == {}


def _fetch_status(p: str) -> int:
    return 500 if p == "generic" else 400


def _vm_base(p: str) -> str:
    if p == "idrac8":
        return f"/redfish/v1/Managers/{MANAGER[p]}/VirtualMedia"
    return f"/redfish/v1/Systems/{SYSTEM[p]}/VirtualMedia"


def _insert_path(p: str, slot: str) -> str:
    return f"{_vm_base(p)}/{slot}/Actions/VirtualMedia.InsertMedia"


def _eject_path(p: str, slot: str) -> str:
    return f"{_vm_base(p)}/{slot}/Actions/VirtualMedia.EjectMedia"


# ------------------------------------------------------------ b) the BMC reset window
# A window long enough for the module's readiness polls (every ~2 s, then ~3 s, growing) to
# meet every phase once: the first poll falls in "down" (t ~ 0, own port: connection refused),
# the second (t ~ 1.8-2.2 s) in "busy", the third (t ~ 4.5-5.5 s) in "401", the fourth
# (t >= 8.55 s) finds the BMC up. Phases are seconds at delay scale 1.
WINDOW = {"reset_down": 1.0, "reset_busy": 3.2, "reset_unauth": 4.3, "lc_delay": 0.5, "power_delay": 0.1}
# BMC name -> (personality, busy answer): one Dell id per Dell personality, the plain 503 on the
# generic BMC. Each has a twin for the ladder's reset rung ("<name>-media"), so that both run at once.
BUSY = {
    "idrac8": ("idrac8", "SYS518"),
    "idrac9": ("idrac9", "SWC0700"),
    "generic": ("generic", "ServiceTemporarilyUnavailable"),
}
BUSY_STATUS = {"SYS518": 503, "SWC0700": 400, "ServiceTemporarilyUnavailable": 503}
PROBE_PATH = "/redfish/v1/Managers"  # the module's unauthenticated readiness probe


@pytest.fixture(scope="module")
def window_lab(start_redfish_lab: StartLab) -> RedfishLab:
    specs = [
        BmcSpec(name=name, personality=personality, power_state="On", port=0, busy_message=message, **WINDOW)
        for host, (personality, message) in BUSY.items()
        for name in (host, f"{host}-media")
    ]
    return start_redfish_lab(specs, 1.0)


def test_bmc_reset_waits_through_the_downtime_window(
    playbook: Callable[..., Any], window_lab: RedfishLab, images: ImageServer, tmp_path: Path
) -> None:
    """Refused, then SYS518 / SWC0700 / plain 503, then 401, then up: bmc_reset and the ladder wait.

    ``strategy: free`` lets the ``bmc_reset`` BMCs and the ladder's BMCs go through their windows
    at the same time (each task is skipped on the other half).
    """
    hosts: dict[str, dict[str, Any]] = {}
    for host in BUSY:
        hosts[host] = {**_host_vars(window_lab, host, own_port=True), "role": "reset"}
        media = f"{host}-media"
        window_lab.bmc(media).inject("insert_vrm0021_until_reset")  # only a BMC reset clears it
        hosts[media] = {**_host_vars(window_lab, media, own_port=True), "role": "media", "iso": images.url()}
    tasks = [
        {"name": "bmc reset", FQ + "bmc_reset": {**C, "wait_timeout": 90}, "when": "role == 'reset'"},
        {
            "name": "insert through the window",
            FQ + "redfish_virtual_media": {**MEDIA, "state": "inserted", "image_url": "{{ iso }}"},
            "when": "role == 'media'",
        },
    ]
    play = {"name": "window", "hosts": "all", "gather_facts": False, "strategy": "free", "tasks": tasks}
    result = playbook([play], inventory=_inventory(tmp_path, hosts), env={"ANSIBLE_FORKS": "6"})
    assert result.rc == 0, _failed(result)
    run = Run(result, window_lab)
    for host, (personality, _busy) in BUSY.items():
        reset = run.task("bmc reset", host)
        assert (reset["changed"], reset["ready"], reset["reset"]) == (True, True, RESET_METHOD[personality])
        assert run.writes("bmc reset", host) == [f"POST {RESET_PATH[personality]}"]
        _check_phases(run, "bmc reset", host, reset["polls"])

        name = f"{host}-media"
        media = run.task("insert through the window", name)
        assert (media["changed"], media["recovered_by"], media["logins"]) == (True, "bmc_reset", 2), media
        assert RESET_METHOD[personality] in media["steps"]
        polls = re.fullmatch(r"BMC ready after (\d+) polls", media["steps"][-2])
        assert polls is not None, media["steps"]
        _check_phases(run, "insert through the window", name, int(polls.group(1)))
        for bmc in (window_lab.bmc(host), window_lab.bmc(name)):
            assert bmc.resets == 1
            assert bmc.sessions == {}
            if personality == "idrac9":
                assert bmc.counters["dell_idrac_reset"] == 1  # Dell's action, never Manager.Reset
        assert window_lab.bmc(name).virtual_media[CD_SLOT[personality]]["inserted"] is True


def _check_phases(run: Run, task: str, host: str, polls: int) -> None:
    """After the reset the module met every phase, and was ready only once the BMC was up.

    The readiness probe is unauthenticated, so a BMC that serves again answers it 401 (that is
    "up" for the probe); the login that follows tells the 401 phase (refused) from up (200).
    """
    personality, message = BUSY[host.removesuffix("-media")]
    seen = run.requests(task, host)
    reset_at = next(i for i, r in enumerate(seen) if r.path == RESET_PATH[personality])
    after = seen[reset_at + 1 :]
    probes = [r.status for r in after if r.path == PROBE_PATH and r.method == "GET"]
    logins = [r.status for r in after if r.path == f"/redfish/v1/Systems/{SYSTEM[personality]}" and r.method == "GET"]
    detail = (host, task, polls, [(r.method, r.path, r.status) for r in after])
    # down: the listener is closed, so the first poll never reaches the BMC (nothing recorded)
    assert polls > len(probes), detail
    assert _phases(probes) == [BUSY_STATUS[message], 401], detail  # busy, then serving again
    assert _phases(logins) == [401, 200], detail  # the 401 window refuses the login, then it works
    assert run.lab.bmc(host).counters[f"busy:{message}"] >= 1


def _phases(statuses: list[int]) -> list[int]:
    """``[503, 503, 401, 401]`` -> ``[503, 401]``: one entry per run of equal answers."""
    return [status for i, status in enumerate(statuses) if i == 0 or statuses[i - 1] != status]


# ------------------------------------- c) power, d) boot mode, e) bad input: one play
# Instant transitions (delay scale 0). One BMC whose OS ignores the power button (role "power",
# named after its personality) and one per personality for the boot mode and the bad input (role
# "boot", "<p>-boot"); with ``strategy: free`` the sequences run side by side.
# Power runs on the two Dell personalities only: redfish_power has no quirks, its plan is a pure
# function of the sorted set of AllowableValues (unit-tested in test_power*.py), and the generic
# BMC's set gives exactly the iDRAC9 plan for every state here (GracefulShutdown then ForceOff,
# ForceRestart, PowerCycle). iDRAC8 (no GracefulShutdown, ForceRestart or PowerCycle) is the
# personality whose power plan differs.
POWER_PERSONALITIES = ("idrac8", "idrac9")
NEW_MODE = {"idrac8": "UEFI", "idrac9": "Legacy", "generic": "Legacy"}  # the other one than the default
BIOS_MODE = {"UEFI": "Uefi", "Legacy": "Bios"}
POWER = {**C, "wait_timeout": 30}
# ResetTypes the module must choose from each personality's AllowableValues.
POWER_ACTIONS = {
    # 13G: no GracefulShutdown, ForceRestart or PowerCycle
    "idrac8": {"off": ["ForceOff"], "restarted": ["GracefulRestart"], "cycled": ["ForceOff", "On"]},
    "idrac9": {"off": ["GracefulShutdown", "ForceOff"], "restarted": ["ForceRestart"], "cycled": ["PowerCycle"]},
    "generic": {"off": ["GracefulShutdown", "ForceOff"], "restarted": ["ForceRestart"], "cycled": ["PowerCycle"]},
}
# Bad input whose handling is the same on every personality runs on one host only.
ONCE_HOST = "idrac8-boot"
ONCE = {"when": f"inventory_hostname == '{ONCE_HOST}'", "ignore_errors": True}
ON_POWER = {"when": "role == 'power'"}
ON_BOOT = {"when": "role == 'boot'"}
STATE_TASKS: list[dict[str, Any]] = [
    {
        "name": "off, forcing not allowed",
        FQ + "redfish_power": {
            **POWER,
            "state": "off",
            "force_off_after_timeout": False,
            "graceful_timeout": 1,
            "wait_timeout": 2,
        },
        "ignore_errors": True,
        **ON_POWER,
    },
    {"name": "off", FQ + "redfish_power": {**POWER, "state": "off", "graceful_timeout": 1}, **ON_POWER},
    {"name": "off again", FQ + "redfish_power": {**POWER, "state": "off"}, **ON_POWER},
    {"name": "on", FQ + "redfish_power": {**POWER, "state": "on"}, **ON_POWER},
    {"name": "on again", FQ + "redfish_power": {**POWER, "state": "on"}, **ON_POWER},
    {"name": "restarted", FQ + "redfish_power": {**POWER, "state": "restarted"}, **ON_POWER},
    {"name": "cycled", FQ + "redfish_power": {**POWER, "state": "cycled"}, **ON_POWER},
    {
        "name": "mode",
        FQ + "redfish_boot": {**C, "mode": "{{ new_mode }}", "reboot": True, "wait_timeout": 60},
        **ON_BOOT,
    },
    {
        "name": "mode again",
        FQ + "redfish_boot": {**C, "mode": "{{ new_mode }}", "reboot": True, "wait_timeout": 60},
        **ON_BOOT,
    },
    {"name": "unknown device", FQ + "redfish_boot": {**C, "device": "floppy"}, **ONCE},
    {
        "name": "unknown entry",
        FQ + "redfish_boot": {**C, "order": ["NoSuchBootEntry"]},
        "ignore_errors": True,
        **ON_BOOT,
    },
    {
        "name": "ftp image",
        FQ + "redfish_virtual_media": {**MEDIA, "state": "inserted", "image_url": "ftp://127.0.0.1/boot.iso"},
        **ONCE,
    },
    {
        "name": "unknown slot",
        FQ + "redfish_virtual_media": {**MEDIA, "state": "inserted", "image_url": "{{ iso }}", "slot": "NoSuchSlot"},
        **ONCE,
    },
]


@pytest.fixture(scope="module")
def state_lab(start_redfish_lab: StartLab) -> RedfishLab:
    specs = [
        BmcSpec(name=p, personality=p, power_state="On", ignore_graceful_shutdown=True) for p in POWER_PERSONALITIES
    ]
    specs += [BmcSpec(name=f"{p}-boot", personality=p, power_state="On") for p in PERSONALITIES]
    return start_redfish_lab(specs)


def test_power_boot_mode_and_bad_input(
    playbook: Callable[..., Any], state_lab: RedfishLab, images: ImageServer, tmp_path: Path
) -> None:
    hosts: dict[str, dict[str, Any]] = {p: {**_host_vars(state_lab, p), "role": "power"} for p in POWER_PERSONALITIES}
    for p in PERSONALITIES:
        boot = f"{p}-boot"
        hosts[boot] = {**_host_vars(state_lab, boot), "role": "boot", "iso": images.url(), "new_mode": NEW_MODE[p]}
    play = {"name": "state", "hosts": "all", "gather_facts": False, "strategy": "free", "tasks": STATE_TASKS}
    result = playbook([play], inventory=_inventory(tmp_path, hosts), diff=True, env={"ANSIBLE_FORKS": "6"})
    assert result.rc == 0, _failed(result)
    run = Run(result, state_lab)
    for personality in POWER_PERSONALITIES:
        _check_power(run, personality)
    for personality in PERSONALITIES:
        _check_boot_mode(run, personality)
        _check_bad_input(run, personality)


def _check_power(run: Run, p: str) -> None:
    reset_path = f"POST /redfish/v1/Systems/{SYSTEM[p]}/Actions/ComputerSystem.Reset"
    want = POWER_ACTIONS[p]
    # The OS ignores the button and forcing is not allowed: a clear error, the server still on.
    refused = run.task("off, forcing not allowed", p)
    assert refused["failed"] is True
    if p == "idrac8":  # no GracefulShutdown at all: refused before anything is sent
        assert refused["error"]["kind"] == "unsupported", refused
        assert "force_off_after_timeout" in refused["msg"]
        assert run.writes("off, forcing not allowed", p) == []
    else:
        assert refused["error"]["kind"] == "timeout", refused
        assert refused["error"]["last_seen"] == "On"
        assert "still 'On' 2s after GracefulShutdown" in refused["msg"]
        assert "force_off_after_timeout is false" in refused["msg"]  # the option that would force it
        assert run.writes("off, forcing not allowed", p) == [reset_path]  # GracefulShutdown, nothing more

    off = run.task("off", p)
    assert (off["changed"], off["forced"], off["power_state"]) == (True, True, "Off"), off
    assert off["actions"] == want["off"]
    assert off["diff"] == {"before": {"power_state": "On"}, "after": {"power_state": "Off"}}
    assert run.writes("off", p) == [reset_path] * len(want["off"])
    off_again = run.task("off again", p)
    assert (off_again["changed"], off_again["actions"], run.writes("off again", p)) == (False, [], [])

    assert (run.task("on", p)["changed"], run.task("on", p)["actions"]) == (True, ["On"])
    assert (run.task("on again", p)["changed"], run.writes("on again", p)) == (False, [])
    for state in ("restarted", "cycled"):
        done = run.task(state, p)
        assert (done["changed"], done["actions"], done["power_state"]) == (True, want[state], "On"), done
        assert run.writes(state, p) == [reset_path] * len(want[state])

    # What the emulator saw by the end, counted by ResetType: exactly what the results say was sent.
    emulator = run.lab.bmc(p).snapshot()
    sent = Counter[str]()
    for name in ("off", "on", "restarted", "cycled"):
        sent.update(run.task(name, p)["actions"])
    ignored = 0 if p == "idrac8" else 2  # two GracefulShutdowns, both ignored by the OS
    if ignored:
        sent["GracefulShutdown"] += 1  # the one of the task that was not allowed to force
    seen = {k.split(":", 1)[1]: v for k, v in emulator["counters"].items() if k.startswith("system_reset:")}
    assert seen == dict(sent), (p, seen, sent)
    assert emulator["counters"].get("graceful_shutdown_ignored", 0) == ignored
    assert emulator["counters"]["host_boot"] == 3  # on, restarted, cycled: each one a boot
    assert emulator["power_state"] == "On"


def _check_boot_mode(run: Run, p: str) -> None:
    host = f"{p}-boot"
    bmc = run.lab.bmc(host)
    new = NEW_MODE[p]
    system = f"/redfish/v1/Systems/{SYSTEM[p]}"
    done = run.task("mode", host)
    assert (done["changed"], done["rebooted"], done["plan"]["mode"]) == (True, True, new), done
    assert done["diff"]["after"]["override"]["mode"] == new
    writes = run.writes("mode", host)
    if p == "idrac8":  # 13G: BIOS BootMode + a BIOS config job, applied by the reboot
        assert done["actions"] == [{"method": "Bios.BootMode", "mode": new, "needs_job": True}]
        assert len(done["jobs"]) == 1
        job = bmc.jobs[done["jobs"][0]]
        assert (job["JobType"], job["JobState"]) == ("BIOSConfiguration", "Completed")
        assert job["TargetSettingsURI"] == f"{system}/Bios/Settings"
        assert writes == [
            f"PATCH {system}/Bios/Settings",
            f"POST /redfish/v1/Managers/{MANAGER[p]}/Jobs",
            f"POST {system}/Actions/ComputerSystem.Reset",
        ]
    elif p == "idrac9":  # 14G: the PATCH queues a BIOS job; the module waits for it after the reboot
        assert bmc.counters["mode_job"] == 1
        assert list(bmc.jobs) == done["jobs"]
        assert done["actions"] == [{"method": "BootSourceOverrideMode", "mode": new, "job_id": done["jobs"][0]}]
        assert bmc.jobs[done["jobs"][0]]["JobState"] == "Completed"
        assert [r.path for r in run.requests("mode", host)][
            -1
        ] == f"/redfish/v1/Managers/{MANAGER[p]}/Jobs/{done['jobs'][0]}"
        assert writes == [f"PATCH {system}", f"POST {system}/Actions/ComputerSystem.Reset"]
    else:  # DMTF: applied as written, no job
        assert (done["actions"], done["jobs"], bmc.jobs) == (
            [{"method": "BootSourceOverrideMode", "mode": new}],
            [],
            {},
        )
        assert writes == [f"PATCH {system}", f"POST {system}/Actions/ComputerSystem.Reset"]
    assert bmc.boot["mode"] == new
    assert bmc.bios["BootMode"] == BIOS_MODE[new]
    assert bmc.boot["history"][-1]["mode"] == BIOS_MODE[new]  # the reboot booted in the new mode

    again = run.task("mode again", host)
    assert (again["changed"], again["rebooted"], again["actions"], again["plan"]["mode"]) == (False, False, [], None)
    assert run.writes("mode again", host) == []  # the mode is never re-sent, and no reboot


def _check_bad_input(run: Run, p: str) -> None:
    host = f"{p}-boot"
    entry = run.task("unknown entry", host)
    assert entry["error"] == {"kind": "input", "field": "order"}, entry
    assert "NoSuchBootEntry" in entry["msg"]
    assert run.requests("unknown entry", host)  # it had to read the order first ...
    assert run.writes("unknown entry", host) == []  # ... and wrote nothing
    if host != ONCE_HOST:
        return
    device = run.task("unknown device", host)
    assert device["failed"] is True
    assert "device" in device["msg"]
    assert "floppy" in device["msg"]
    ftp = run.task("ftp image", host)
    assert ftp["error"] == {"kind": "input", "field": "image_url"}
    assert "ftp://127.0.0.1/boot.iso" in ftp["msg"]
    for name in ("unknown device", "ftp image"):  # refused before the BMC is even contacted
        assert run.requests(name, host) == [], (host, name)

    slot = run.task("unknown slot", host)
    assert slot["error"]["kind"] == "not_found", slot
    assert "NoSuchSlot" in slot["msg"]
    assert run.requests("unknown slot", host)
    assert run.writes("unknown slot", host) == []
