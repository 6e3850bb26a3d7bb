"""The state of one emulated BMC and the host behind it (``lab.redfish.server``).

Why: the modules under test must see the *behaviour* of an iDRAC, not a static tree: power that
takes time to change, a one-time boot consumed by the next boot, BIOS changes that wait for a job
and a reboot, virtual media that really fetches its URL, a Manager reset with a downtime window.
Time-driven changes are evaluated lazily from timestamps (no timer threads), so a delay scale of
0 makes every transition instant and tests stay deterministic.

Everything here is in terms of canonical paths (``/redfish/v1/...``); the HTTP layer adds and
strips the per-BMC mount prefix.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import ssl
import threading
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lab.redfish.faults import (
    BASE_MESSAGES,
    BUSY_MESSAGES,
    DELL_BUSY_MESSAGES,
    DELL_MESSAGES,
    FAULTS,
    Fault,
    error_body,
)
from lab.redfish.personality import PERSONALITIES, Personality

WRITE_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})

# How long the emulated BMC waits for an image URL before it reports it unreachable (seconds).
IMAGE_FETCH_TIMEOUT = 3.0

# Persistent boot devices: (name, kind). The kind decides what the host "boots from".
# The iDRAC's virtual optical drive is an entry of its own (``Optical.iDRACVirtual.1-1``): first in the
# order it boots the inserted image, with nothing inserted the BIOS moves on to the next entry. Listed last by
# default, so the one-time boot alone decides whether an install starts (and an OS on the disk can win).
VIRTUAL_CD_DEVICE = "Optical.iDRACVirtual.1-1"
LEGACY_DEVICES = (
    ("HardDisk.List.1-1", "Hdd"),
    ("NIC.Integrated.1-1-1", "Pxe"),
    ("Optical.SATAEmbedded.J-1", "PhysicalCD"),
    (VIRTUAL_CD_DEVICE, "VirtualCD"),
)
UEFI_DEVICES = (
    ("RAID.Integrated.1-1", "Hdd"),
    ("NIC.PxeDevice.1-1", "Pxe"),
    ("Optical.SATAEmbedded.J-1", "PhysicalCD"),
    (VIRTUAL_CD_DEVICE, "VirtualCD"),
)
# BootOptions for services with Boot.BootOrder: id -> (display name, kind).
BOOT_OPTIONS = {
    "Boot0001": ("PXE Device 1: Integrated NIC 1 Port 1 Partition 1", "Pxe"),
    "Boot0002": ("RAID Controller in SL 3: Ubuntu", "Hdd"),
    "Boot0003": ("Embedded SATA Port Optical Drive J", "PhysicalCD"),
}
DEFAULT_BOOT_ORDER = ("Boot0002", "Boot0001", "Boot0003")

GPU_MODEL = "Tesla V100-PCIE-16GB"
# Values of Dell's Enabled/Disabled BIOS attributes (SecureBoot, MmioAbove4Gb, ProcVirtualization).
ENABLED, DISABLED = "Enabled", "Disabled"
ENABLED_DISABLED_ATTRIBUTES = ("SecureBoot", "MmioAbove4Gb", "ProcVirtualization", "SriovGlobalEnable", "BootSeqRetry")

_job_numbers = itertools.count(int(time.time()) % 10**6 * 1000)


def disk_identity(name: str) -> dict[str, str]:
    """The one disk of the server behind BMC ``name``: its device, WWN (NAA) and serial, stable per name.

    The BMC's storage inventory reports it, and the simulated host (``lab.metal``) installs onto it, so both
    read it from here.
    """
    digest = hashlib.sha256(f"disk/{name}".encode()).hexdigest()
    return {"device": "/dev/sda", "wwn": f"0x5000c500{digest[:8]}", "serial": f"WFK{digest[8:13].upper()}"}


@dataclass
class BmcSpec:
    """What a lab BMC is: its name, personality, credentials and timings (seconds, scaled)."""

    name: str
    personality: str = "idrac8"
    username: str = "root"
    password: str = "calvin"
    power_state: str = "Off"
    port: int | None = None  # also serve this BMC at the root of its own port (0 = pick a free one)
    boot_mode: str | None = None  # BIOS BootMode "Uefi" or "Bios"; default per personality
    max_sessions: int | None = None  # default per personality (iDRAC8: 4)
    asset_tag: str = ""
    serial: str | None = None
    macs: tuple[str, ...] | None = None
    gpus: int = 2
    power_delay: float = 3.0  # PoweringOn/PoweringOff duration
    reset_down: float = 30.0  # after Manager.Reset: connection refused / dropped
    reset_busy: float = 10.0  # then ``busy_message`` (a Dell: 503 SYS518, else a plain 503)
    reset_unauth: float = 15.0  # then 401 for valid credentials
    lc_delay: float = 5.0  # iDRAC9: LCStatus NotReady after the reset window
    task_delay: float = 2.0  # SCP import task runtime
    only_member_query: bool | None = None  # serve DSP0266 ``?only``; default per personality (generic)
    # Firmware that accepts HTTP Basic for reads only: every write with Basic credentials gets 401
    # (an unconfirmed field report about iDRAC8); the fault of the same name does it N times.
    basic_writes_refused: bool = False
    # The answer during the busy phase of a reset window: one of ``lab.redfish.faults.BUSY_MESSAGES``
    # (Dell's 503 SYS518 or 400 SWC0700, or a plain DMTF 503; the Dell ids only on a Dell).
    # Default: SYS518 on a Dell, ServiceTemporarilyUnavailable otherwise.
    busy_message: str | None = None
    # BIOS settings the GPU driver preflight reads. A Dell keeps them as BIOS attributes (``SecureBoot``,
    # ``MmioAbove4Gb``: Enabled/Disabled); the generic BMC serves the DMTF ``SecureBoot`` resource
    # (``SecureBootEnable``) and, like most non-Dell BMCs, no standard name for MMIO above 4 GB.
    secure_boot: bool = False
    mmio_above_4gb: bool = True
    # The host OS ignores an ACPI power-button event: GracefulShutdown (and PushPowerButton while
    # on) is accepted with 204 and the server stays on, as with a hung or misconfigured OS.
    ignore_graceful_shutdown: bool = False
    # Virtual media needs a licence on a Dell (iDRAC8 Express has none, Enterprise has it): False serves no
    # VirtualMedia collection at all, as such a BMC does.
    virtual_media: bool = True

    def __post_init__(self) -> None:
        if self.personality not in PERSONALITIES:
            msg = f"unknown personality {self.personality!r}; choose one of {sorted(PERSONALITIES)}"
            raise ValueError(msg)
        if self.busy_message is not None and self.busy_message not in BUSY_MESSAGES:
            msg = f"busy_message must be one of {BUSY_MESSAGES}, not {self.busy_message!r}"
            raise ValueError(msg)
        if self.busy_message in DELL_BUSY_MESSAGES and not PERSONALITIES[self.personality].dell:
            msg = f"busy_message {self.busy_message!r} is a Dell message id; {self.personality!r} is not a Dell"
            raise ValueError(msg)
        if self.power_state not in ("On", "Off"):
            msg = f"power_state must be On or Off, not {self.power_state!r}"
            raise ValueError(msg)


@dataclass
class Reply:
    """What a handler answers: status, JSON body (or None) and extra headers."""

    status: int
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    text: str | None = None  # a non-JSON body ($metadata)
    content_type: str = "application/json;odata.metadata=minimal;charset=utf-8"


@dataclass
class RequestRecord:
    time: float
    method: str
    path: str
    status: int
    duration: float


@dataclass
class Slot:
    id: str
    media_types: tuple[str, ...]
    inserted: bool = False
    image: str | None = None
    write_protected: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "media_types": list(self.media_types),
            "inserted": self.inserted,
            "image": self.image,
            "write_protected": self.write_protected,
        }


def _mac(name: str, index: int) -> str:
    digest = hashlib.sha256(f"{name}/{index}".encode()).digest()
    return "f8:bc:12:" + ":".join(f"{b:02x}" for b in digest[:3])


def _seq_entries(key: str, devices: tuple[tuple[str, str], ...]) -> list[dict[str, Any]]:
    return [
        {
            "Enabled": True,
            "Id": f"BIOS.Setup.1-1#{key}#{name}#{hashlib.md5(name.encode()).hexdigest()[:32]}",
            "Index": i,
            "Name": name,
        }
        for i, (name, _kind) in enumerate(devices)
    ]


class BmcError(Exception):
    """Raised inside handlers; carries the Reply to send."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply.status)
        self.reply = reply


class BmcState:
    """One BMC: host power, boot settings, BIOS, virtual media, jobs, sessions, faults, log."""

    def __init__(self, spec: BmcSpec, delay_scale: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.spec = spec
        self.name = spec.name
        self.p: Personality = PERSONALITIES[spec.personality]
        if spec.only_member_query is not None:
            self.p = dataclasses.replace(self.p, only_member_query=spec.only_member_query)
        self.delay_scale = delay_scale
        self.clock = clock
        self.lock = threading.RLock()
        self.requests: list[RequestRecord] = []
        self.counters: Counter[str] = Counter()
        self.faults: dict[str, Fault] = {}
        self.resets = 0
        self.on_reset: Callable[[BmcState], None] | None = None  # set by the HTTP layer
        # The simulated server behind this BMC (lab.metal.host.MetalHost, or lab.vm.host.QemuHost), told
        # about power changes (``power_changed(state)``) and boots (``booted(record)``); both only queue
        # work, so they are called under the lock. It calls back ``host_power_off()`` and ``reboot()``.
        # A host may also have ``media_changed(slot, image, media_types)`` (told of every insert and
        # eject) and ``acpi_power_button()``: then GracefulShutdown and PushPowerButton press its button
        # and the power stays on until the host's OS powers it off (a VM decides that itself).
        self.host: Any = None
        # host power
        self._power = spec.power_state
        self._notified_power = spec.power_state
        self._steps: list[tuple[float, str, bool]] = []  # (at, new state, is a boot)
        self.boot_history: list[dict[str, Any]] = []
        # boot override
        self.override_target = "None"
        self.override_enabled = "Disabled"
        self.uefi_target: str | None = None
        self.scp_boot: dict[str, str] = {}
        # persistent order
        self.boot_options_order = list(DEFAULT_BOOT_ORDER)
        self.pending_boot_order: list[str] | None = None
        self.boot_seq = {
            "BootSeq": _seq_entries("BootSeq", LEGACY_DEVICES),
            "UefiBootSeq": _seq_entries("UefiBootSeq", UEFI_DEVICES),
        }
        self.pending_boot_seq: dict[str, list[dict[str, Any]]] = {}
        # BIOS
        self.bios: dict[str, Any] = {
            "BootMode": spec.boot_mode or self.p.default_boot_mode,
            "SystemModelName": self.p.model,
            "ProcVirtualization": "Enabled",
            "SriovGlobalEnable": "Disabled",
            "BootSeqRetry": "Enabled",
            "AssetTag": spec.asset_tag,
        }
        if self.p.dell:
            self.bios["SecureBoot"] = ENABLED if spec.secure_boot else DISABLED
            self.bios["MmioAbove4Gb"] = ENABLED if spec.mmio_above_4gb else DISABLED
        self.secure_boot_enable = spec.secure_boot  # the DMTF SecureBoot resource (not on a Dell here)
        self.pending_bios: dict[str, Any] = {}
        # virtual media, jobs, sessions
        self.slots = {sid: Slot(sid, types) for sid, types in self.p.vm_slots} if spec.virtual_media else {}
        self.jobs: dict[str, dict[str, Any]] = {}
        self.sessions: dict[str, dict[str, Any]] = {}
        self._session_ids = itertools.count(1)
        self.scp_imports: list[dict[str, Any]] = []
        # manager reset window
        self._reset_at: float | None = None
        self._lc_ready_at = 0.0
        self.macs = list(spec.macs) if spec.macs else [_mac(spec.name, i) for i in range(4)]
        self.serial = spec.serial or ("CN7" + hashlib.sha256(spec.name.encode()).hexdigest()[:7].upper())
        self.uuid = "4c4c4544-" + hashlib.sha256(spec.name.encode()).hexdigest()[:4] + "-3010-8052-b4c04f4b3232"
        self.disk = disk_identity(spec.name)

    # ------------------------------------------------------------------ time
    def scaled(self, seconds: float) -> float:
        return seconds * self.delay_scale

    def _advance(self) -> None:
        now = self.clock()
        while self._steps and self._steps[0][0] <= now:
            _at, state, is_boot = self._steps.pop(0)
            self._power = state
            if is_boot:
                self._host_boot()
        self._notify_power()

    def _notify_power(self) -> None:
        if self._power != self._notified_power:
            self._notified_power = self._power
            if self.host is not None:
                self.host.power_changed(self._power)

    def host_power_off(self) -> None:
        """The host's OS switched the server off (``poweroff``, an installer's final power-off)."""
        with self.lock:
            self._advance()
            self._steps = []
            self._power = "Off"
            self._notify_power()

    @property
    def power_state(self) -> str:
        with self.lock:
            self._advance()
            return self._power

    # ------------------------------------------------------------ messages
    def error(self, message_id: str, *, status: int | None = None, text: str | None = None) -> BmcError:
        """An error Reply: Dell IDs get the personality's prefix, others come from the Base registry."""
        if message_id in DELL_MESSAGES:
            dstatus, dtext, resolution = DELL_MESSAGES[message_id]
            full_id = f"{self.p.dell_prefix or 'IDRAC.2.8.'}{message_id}"
            body = error_body(full_id, text or dtext, base_version=self.p.base_version, resolution=resolution)
            return BmcError(Reply(status or dstatus, body))
        bstatus, btext = BASE_MESSAGES.get(message_id, (status or 400, text or message_id))
        body = error_body(f"Base.{self.p.base_version}.{message_id}", text or btext, base_version=self.p.base_version)
        return BmcError(Reply(status or bstatus, body))

    # --------------------------------------------------------------- faults
    def inject(self, fault: str, count: int = 1, **options: Any) -> None:
        """Arm ``fault`` for the next ``count`` occurrences (see ``lab.redfish.faults.FAULTS``)."""
        if fault not in FAULTS:
            msg = f"unknown fault {fault!r}; choose one of {FAULTS}"
            raise ValueError(msg)
        with self.lock:
            if fault == "boot_order_reverts":
                options.setdefault("to", self._current_order_snapshot())
            self.faults[fault] = Fault(fault, count, options)

    def clear_faults(self) -> None:
        with self.lock:
            self.faults.clear()

    def fire(self, fault: str) -> Fault | None:
        """Consume one occurrence of ``fault`` if armed; sticky faults stay until a reset."""
        with self.lock:
            armed = self.faults.get(fault)
            if armed is None:
                return None
            if not armed.sticky:
                armed.count -= 1
                if armed.count <= 0:
                    del self.faults[fault]
            self.counters[f"fault:{fault}"] += 1
            return armed

    def peek(self, fault: str) -> Fault | None:
        return self.faults.get(fault)

    # ------------------------------------------------------- reset window
    def phase(self) -> str:
        """``up``, or during a Manager reset window ``down`` -> ``busy`` -> ``unauth``."""
        with self.lock:
            if self._reset_at is None:
                return "up"
            elapsed = self.clock() - self._reset_at
            for name, length in (
                ("down", self.spec.reset_down),
                ("busy", self.spec.reset_busy),
                ("unauth", self.spec.reset_unauth),
            ):
                scaled = self.scaled(length)
                if elapsed < scaled:
                    return name
                elapsed -= scaled
            self._reset_at = None
            return "up"

    def busy_error(self) -> BmcError:
        """The answer to any request in the busy phase of a reset window (``BmcSpec.busy_message``)."""
        message = self.spec.busy_message or ("SYS518" if self.p.dell else "ServiceTemporarilyUnavailable")
        with self.lock:
            self.counters[f"busy:{message}"] += 1
        return self.error(message)

    def reset_window_end(self) -> float:
        total = self.scaled(self.spec.reset_down + self.spec.reset_busy + self.spec.reset_unauth)
        return (self._reset_at or self.clock()) + total

    def down_until(self) -> float:
        return (self._reset_at or self.clock()) + self.scaled(self.spec.reset_down)

    def manager_reset(self) -> None:
        """What a BMC reboot does: sessions dropped, sticky faults and media cleared, downtime starts."""
        with self.lock:
            self.resets += 1
            self.counters["manager_reset"] += 1
            self.sessions.clear()
            for name in [n for n, f in self.faults.items() if f.sticky]:
                del self.faults[name]
            for sid, slot in self.slots.items():
                was_inserted = slot.inserted
                slot.inserted, slot.image = False, None
                if was_inserted:
                    self.media_changed(sid)
            self._reset_at = self.clock()
            self._lc_ready_at = self.reset_window_end() + self.scaled(self.spec.lc_delay)
        if self.on_reset is not None:
            self.on_reset(self)

    def lc_ready(self) -> bool:
        return self.phase() == "up" and self.clock() >= self._lc_ready_at

    # ------------------------------------------------------------ sessions
    def check_credentials(self, username: str | None, password: str | None) -> bool:
        return username == self.spec.username and password == self.spec.password

    def login(self, username: Any, password: Any) -> Reply:
        with self.lock:
            if not self.check_credentials(username, password) or self.phase() == "unauth":
                raise self.error("NoValidSession", status=401, text="Login failed: invalid user name or password.")
            limit = self.spec.max_sessions or self.p.max_sessions
            if self.fire("session_limit") is not None or len(self.sessions) >= limit:
                self.counters["session_refused"] += 1
                if self.p.name == "idrac8":
                    # iDRAC8 answers a full session table with a misleading 401.
                    raise self.error("NoValidSession", status=401, text="Unable to create a session.")
                if self.p.dell:
                    raise self.error("RAC0218")
                raise self.error("SessionLimitExceeded")
            sid = str(next(self._session_ids))
            token = hashlib.sha256(f"{self.name}/{sid}/{time.time_ns()}".encode()).hexdigest()[:32]
            self.sessions[sid] = {"Id": sid, "UserName": username, "token": token}
            self.counters["session_login"] += 1
            uri = f"/redfish/v1/SessionService/Sessions/{sid}"
            body = {
                "@odata.id": uri,
                "@odata.type": "#Session.v1_0_2.Session",
                "Id": sid,
                "Name": "User Session",
                "UserName": username,
            }
            return Reply(201, body, {"X-Auth-Token": token, "Location": uri})

    def basic_write_refusal(self, method: str) -> BmcError | None:
        """The answer to a write sent with valid HTTP Basic credentials, if this BMC refuses it."""
        if method not in WRITE_METHODS:
            return None
        status = 401
        if not self.spec.basic_writes_refused:
            fault = self.fire("basic_writes_refused")
            if fault is None:
                return None
            status = int(fault.options.get("status", 401))
        self.counters["basic_write_refused"] += 1
        if status == 403:
            return self.error("InsufficientPrivilege", status=403)
        err = self.error("NoValidSession", status=401)
        err.reply.headers["WWW-Authenticate"] = 'Basic realm="RedfishService"'
        return err

    def token_valid(self, token: str) -> bool:
        return any(s["token"] == token for s in self.sessions.values())

    def logout(self, sid: str) -> Reply:
        with self.lock:
            if self.sessions.pop(sid, None) is None:
                raise self.error("ResourceNotFound")
            self.counters["session_logout"] += 1
            return Reply(204)

    # ---------------------------------------------------------------- power
    def reset_system(self, reset_type: Any) -> Reply:
        with self.lock:
            self._advance()
            if reset_type not in self.p.reset_types:
                raise self.error("ActionParameterValueNotInList", text=f"ResetType {reset_type!r} is not allowed.")
            self.counters["system_reset"] += 1
            self.counters[f"system_reset:{reset_type}"] += 1
            d = self.scaled(self.spec.power_delay)
            now = self.clock()
            on = self._power in ("On", "PoweringOn")
            if reset_type == "Nmi":
                return Reply(204)
            if reset_type == "PushPowerButton":
                reset_type = "GracefulShutdown" if on else "On"
            if reset_type == "GracefulShutdown" and on and self._os_handles_button():
                return Reply(204)  # accepted; the power stays on unless the OS powers off
            if reset_type in ("On", "ForceOn"):
                if on:
                    return self._already("On")
                self._power, self._steps = "PoweringOn", [(now + d, "On", True)]
            elif reset_type in ("ForceOff", "GracefulShutdown"):
                if not on:
                    return self._already("Off")
                off_after = d * (0.5 if reset_type == "ForceOff" else 1.5)
                self._power, self._steps = "PoweringOff", [(now + off_after, "Off", False)]
            else:  # GracefulRestart, ForceRestart, PowerCycle
                if not on and self.p.dell:
                    return self._already("Off")
                self._power = "PoweringOff" if on else "PoweringOn"
                self._steps = [(now + d / 2, "PoweringOn", False), (now + d, "On", True)]
            self._advance()
            return Reply(204)

    def _os_handles_button(self) -> bool:
        """The power button's event goes to the OS: one that ignores it, or a host (a VM) whose OS decides."""
        if self.spec.ignore_graceful_shutdown:
            self.counters["graceful_shutdown_ignored"] += 1
            return True
        if hasattr(self.host, "acpi_power_button"):
            self.counters["acpi_power_button"] += 1
            self.host.acpi_power_button()  # the host calls host_power_off() if its OS powers off
            return True
        return False

    def _already(self, state: str) -> Reply:
        if self.p.dell:
            raise self.error(
                "ActionNotSupported", text=f"Unable to perform the operation: the server is already {state}."
            )
        return Reply(204)

    def reboot(self) -> None:
        """Test helper: the host reboots now (power on if it was off) and goes through a boot."""
        with self.lock:
            self._advance()
            self._steps = []
            self._power = "On"
            self._host_boot()

    def power_cycle(self) -> None:
        """Test helper: power off and on at once, with a boot."""
        self.reboot()

    # ---------------------------------------------------------- host boot
    def _current_order_snapshot(self) -> dict[str, Any]:
        return {
            "options": list(self.boot_options_order),
            "seq": {k: [dict(e) for e in v] for k, v in self.boot_seq.items()},
        }

    def put_first_in_boot_seq(self, kind: str) -> None:
        """Test helper: what an administrator did in the BIOS setup (F2), or a job applied long ago: the devices of
        ``kind`` (``VirtualCD``, ``Hdd``...) first in both of a Dell's persistent boot sequences, the rest in their
        order, at once and without a job."""
        kinds = dict(LEGACY_DEVICES + UEFI_DEVICES)
        with self.lock:
            for key, seq in self.boot_seq.items():
                ordered = sorted(seq, key=lambda e: (kinds.get(e["Name"]) != kind, e["Index"]))
                self.boot_seq[key] = [{**entry, "Index": index} for index, entry in enumerate(ordered)]

    def seq_key(self) -> str:
        return "UefiBootSeq" if self.bios["BootMode"] == "Uefi" else "BootSeq"

    def _host_boot(self) -> None:
        """One POST: apply scheduled BIOS jobs, maybe revert the order, pick the device, consume one-shots.

        A Dell BIOS configuration job is applied by the Lifecycle Controller during the POST that follows the
        power-on, and the server then resets so the new settings take effect: the job costs one more POST before
        the boot device runs. The host is told (``settings_jobs``) and spends that POST.
        """
        settings_jobs = 0
        for job in self.jobs.values():
            if job["JobType"] == "BIOSConfiguration" and job["JobState"] == "Scheduled":
                self._apply_bios_job(job)
                settings_jobs += 1
        if self.p.boot_order and not self.p.boot_order_pending:
            pass  # generic: applied at PATCH time
        elif self.pending_boot_order is not None:
            self.boot_options_order, self.pending_boot_order = self.pending_boot_order, None
        if not self.p.dell and self.pending_bios:
            self.bios.update(self.pending_bios)
            self.pending_bios = {}
        revert = self.peek("boot_order_reverts")
        if revert is not None and self._current_order_snapshot() != revert.options["to"]:
            self.fire("boot_order_reverts")
            snap = revert.options["to"]
            self.boot_options_order = list(snap["options"])
            self.boot_seq = {k: [dict(e) for e in v] for k, v in snap["seq"].items()}
            self.counters["boot_order_reverted"] += 1
        lost = self._one_time_boot_lost()
        device, via = self._boot_device(overrides=not lost)
        if self.override_enabled == "Once":
            self.override_enabled, self.override_target = "Disabled", "None"
        self.scp_boot = {}
        self.counters["host_boot"] += 1
        boot = {"device": device, "via": via, "mode": self.bios["BootMode"]}
        if lost:
            boot["one_time_boot_lost"] = True
        if settings_jobs:
            boot["settings_jobs"] = settings_jobs
        self.boot_history.append(boot)
        self._notify_power()
        if self.host is not None:
            cd = next((s.image for s in self.slots.values() if s.inserted and "CD" in s.media_types), None)
            self.host.booted({**self.boot_history[-1], "cd_image": cd})

    def _one_time_boot_lost(self) -> bool:
        """The ``one_time_boot_lost`` fault: a pending one-time boot is dropped before the device is picked.

        Only while the disk holds an installed OS, as on the reference R730 (the one-shot boot of the virtual CD
        loses to that OS). The one-time boot is consumed and no override reaches this POST (a ``Continuous`` one,
        Ironic's disk boot after a deploy, stays set for later boots): the BIOS's persistent order decides, the
        disk unless the virtual CD was put first. Called under the lock, during the POST.
        """
        pending = self.scp_boot.get("BootOnce") == "Enabled" or self.override_enabled == "Once"
        if not pending or not self._disk_holds_os() or self.fire("one_time_boot_lost") is None:
            return False
        self.scp_boot = {}
        self.override_enabled, self.override_target = "Disabled", "None"
        return True

    def _disk_holds_os(self) -> bool:
        """Whether the simulated server's disk holds an installed OS (a host without a disk model: no)."""
        disk = getattr(self.host, "disk", None)
        return getattr(disk, "installed", None) is not None

    def media_changed(self, sid: str) -> None:
        """Tell a host that follows the virtual media (a VM's CD drive) what slot ``sid`` now holds."""
        slot = self.slots[sid]
        if self.host is not None and hasattr(self.host, "media_changed"):
            self.host.media_changed(sid, slot.image if slot.inserted else None, slot.media_types)

    def _override_device(self) -> tuple[str, str] | None:
        """The device the iDRAC's boot settings pick (SCP one-time boot, then the override), None to use the order."""
        scp = self.scp_boot
        if scp.get("BootOnce") == "Enabled" and scp.get("FirstBootDevice") == "VCD-DVD" and self._cd_inserted():
            return "VirtualCD", "scp"
        if self.override_enabled in ("Once", "Continuous") and self.override_target != "None":
            target = self.override_target
            if target == "Cd":
                # iDRAC8: Cd is the physical optical drive (dell/iDRAC-Redfish-Scripting#90); 14G+/generic: virtual CD.
                if self.p.name != "idrac8" and self._cd_inserted():
                    return "VirtualCD", "override"
                return "PhysicalCD", "override"
            return target, "override"
        return None

    def _cd_inserted(self) -> bool:
        return any(s.inserted and "CD" in s.media_types for s in self.slots.values())

    def _boot_device(self, *, overrides: bool = True) -> tuple[str, str]:
        """The device this POST boots: Dell's SCP one-time boot, the override, else the persistent order.

        ``overrides=False``: the iDRAC's overrides do not reach this POST (``one_time_boot_lost``), so the BIOS's
        own persistent order decides, whatever override is set.
        """
        overridden = self._override_device() if overrides else None
        if overridden is not None:
            return overridden
        if self.p.boot_sources and not self.p.boot_order:
            kinds = dict(LEGACY_DEVICES + UEFI_DEVICES)
            for entry in sorted(self.boot_seq[self.seq_key()], key=lambda e: e["Index"]):
                kind = kinds.get(entry["Name"], entry["Name"])
                if entry["Enabled"] and (kind != "VirtualCD" or self._cd_inserted()):
                    return kind, "order"
        for option in self.boot_options_order:
            return BOOT_OPTIONS[option][1], "order"
        return "None", "order"

    # ----------------------------------------------------------------- BIOS
    def _apply_bios_job(self, job: dict[str, Any]) -> None:
        self.bios.update(self.pending_bios)
        self.pending_bios = {}
        for key, seq in self.pending_boot_seq.items():
            self.boot_seq[key] = seq
        self.pending_boot_seq = {}
        if self.pending_boot_order is not None:
            self.boot_options_order, self.pending_boot_order = self.pending_boot_order, None
        job.update(
            JobState="Completed",
            PercentComplete=100,
            Message="Job completed successfully.",
            MessageId="PR19",
            EndTime=_now_iso(),
        )

    def has_pending_bios(self) -> bool:
        return bool(self.pending_bios or self.pending_boot_seq or self.pending_boot_order is not None)

    def create_job(
        self, job_type: str, name: str, target: str | None = None, state: str = "Scheduled"
    ) -> dict[str, Any]:
        jid = f"JID_{next(_job_numbers):012d}"
        job = {
            "Id": jid,
            "Name": name,
            "JobType": job_type,
            "JobState": state,
            "Message": "Task successfully scheduled." if state == "Scheduled" else "Job in progress.",
            "MessageId": "JCP001" if state == "Scheduled" else "SYS058",
            "PercentComplete": 0,
            "StartTime": "TIME_NOW",
            "EndTime": "TIME_NA",
            "TargetSettingsURI": target,
            "created": self.clock(),
        }
        self.jobs[jid] = job
        self.counters["job_created"] += 1
        return job

    def job_view(self, job: dict[str, Any]) -> dict[str, Any]:
        """Advance a time-driven job (SCP import) and return it."""
        running_import = job["JobType"] == "ImportConfiguration" and job["JobState"] == "Running"
        if running_import and self.clock() >= job["created"] + self.scaled(self.spec.task_delay):
            job.update(
                JobState="Completed",
                PercentComplete=100,
                MessageId="SYS053",
                Message=DELL_MESSAGES["SYS053"][1],
                EndTime=_now_iso(),
            )
        return job

    # ------------------------------------------------------- virtual media
    def fetch_image(self, url: str) -> str | None:
        """HEAD (then a one-byte GET) the image like a BMC would; None when reachable, else why not."""

        class _NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *_args: Any, **_kwargs: Any) -> None:
                return None  # iDRAC does not follow redirects: a 3xx is "not accessible"

        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        opener = urllib.request.build_opener(_NoRedirect(), urllib.request.HTTPSHandler(context=context))
        self.counters["image_fetch"] += 1
        last = "unreachable"
        for method, headers in (("HEAD", {}), ("GET", {"Range": "bytes=0-0"})):
            request = urllib.request.Request(url, method=method, headers=headers)
            try:
                with opener.open(request, timeout=IMAGE_FETCH_TIMEOUT) as response:
                    if response.status < 300:
                        return None
                    last = f"HTTP {response.status}"
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}"
                if exc.code not in (405, 501):
                    return last
            except (OSError, ValueError) as exc:
                return str(exc)
        return last

    # ---------------------------------------------------------------- views
    @property
    def boot(self) -> dict[str, Any]:
        with self.lock:
            self._advance()
            return {
                "target": self.override_target,
                "enabled": self.override_enabled,
                "mode": "UEFI" if self.bios["BootMode"] == "Uefi" else "Legacy",
                "order": list(self.boot_options_order) if self.p.boot_order else None,
                "pending_order": list(self.pending_boot_order) if self.pending_boot_order is not None else None,
                "boot_seq": [e["Name"] for e in sorted(self.boot_seq[self.seq_key()], key=lambda e: e["Index"])],
                "pending_boot_seq": (
                    [e["Name"] for e in sorted(self.pending_boot_seq[self.seq_key()], key=lambda e: e["Index"])]
                    if self.seq_key() in self.pending_boot_seq
                    else None
                ),
                "scp_boot": dict(self.scp_boot),
                "history": [dict(b) for b in self.boot_history],
            }

    @property
    def virtual_media(self) -> dict[str, dict[str, Any]]:
        with self.lock:
            return {sid: slot.as_dict() for sid, slot in self.slots.items()}

    def snapshot(self) -> dict[str, Any]:
        """Everything a test or an out-of-process client may want to look at (JSON-safe)."""
        with self.lock:
            return {
                "name": self.name,
                "personality": self.p.name,
                "power_state": self.power_state,
                "phase": self.phase(),
                "boot": self.boot,
                "bios": dict(self.bios),
                "pending_bios": dict(self.pending_bios),
                "secure_boot_enable": self.secure_boot_enable,
                "virtual_media": self.virtual_media,
                "jobs": {jid: {k: v for k, v in j.items() if k != "created"} for jid, j in self.jobs.items()},
                "resets": self.resets,
                "sessions": len(self.sessions),
                "faults": {n: f.as_dict() for n, f in self.faults.items()},
                "counters": dict(self.counters),
                "requests": len(self.requests),
                "scp_imports": list(self.scp_imports),
            }

    def record(self, method: str, path: str, status: int, started: float) -> None:
        with self.lock:
            self.requests.append(RequestRecord(time.time(), method, path, status, time.monotonic() - started))
            self.counters[method] += 1
            self.counters[f"status:{status}"] += 1


def _now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())


def parse_scp_buffer(buffer: str) -> dict[str, str]:
    """``{"FQDD/Attribute": value}`` from an SCP XML ImportBuffer; raises ValueError when malformed."""
    try:
        root = ET.fromstring(buffer)
    except ET.ParseError as exc:
        msg = f"ImportBuffer is not valid XML: {exc}"
        raise ValueError(msg) from exc
    if root.tag != "SystemConfiguration":
        msg = "ImportBuffer must have a SystemConfiguration root element"
        raise ValueError(msg)
    values: dict[str, str] = {}
    for component in root.iter("Component"):
        fqdd = component.get("FQDD", "")
        for attribute in component.iter("Attribute"):
            values[f"{fqdd}/{attribute.get('Name', '')}"] = (attribute.text or "").strip()
    return values
