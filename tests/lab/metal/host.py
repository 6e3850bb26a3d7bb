"""One simulated bare-metal server: the OS lifecycle its BMC's power, boot and media state drive.

Why a state machine of its own: the collection's bare-metal path is judged by what a *server* does
after the BMC calls - does it install, from which configuration, does it power itself off at the
end or loop, does it come up where Ansible expects it, with the host key the controller pinned.
The BMC (``lab.redfish.bmc.BmcState``) tells the host about power changes and boots (through its
``host`` listener); the host calls back ``host_power_off()`` and ``reboot()`` when its OS powers
off or reboots. Every delay is scaled by the lab's delay scale; state changes happen in one worker
thread, so BMC calls never wait on the host.

Lifecycle (``phase``)::

    off -> post -> installing -> (poweroff) off | (reboot) post ... | (halt) installer-halted
                -> installer-waiting (the configuration would prompt) / installer-failed (also when the
                   virtual CD is ejected under the running installer: it reads its packages from there)
                -> os-booting -> os-up (reachable, or not: ``unreachable`` says why) / os-halted
                -> agent-running (a provisioning agent's ramdisk: lab.metal3 writes an image with
                   ``image_written`` or cleans the disk with ``metadata_cleaned``)
                -> no-boot-device (PXE, the empty physical drive, a disk without an OS, an ISO the
                   firmware cannot boot)

What is checked, as a real one would fail: the configuration's network must name the BMC's boot
NIC (by MAC, by ``eno1``, or as the first NIC with link), be static (the lab network has no DHCP),
carry the lab's address for this host and its gateway (the controller is not on the host's subnet);
the root disk it names must exist; an SSH server must be installed. A configuration without an
authorized key installs a host that answers SSH but lets nobody in.
"""

from __future__ import annotations

import json
import queue
import shutil
import ssl
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import asyncssh

from lab.metal import node_shims  # noqa: F401  # pylint: disable=unused-import  # registers the node software's shims
from lab.metal.driver import modules_at_boot
from lab.metal.identity import NIC_NAME_PREFIX, HostIdentity, network_problem
from lab.metal.iso_reader import InstallConfig, MediaError, read_install_media
from lab.metal.sandbox import Disk, Sandbox, SandboxLayout, SandboxUnavailable, Tools
from lab.metal.shims import HANDLERS, Effect, ShimCall, ShimServer, interpret, notify_host
from lab.metal.sshd import SshService
from lab.redfish.bmc import GPU_MODEL

# Simulated durations in seconds, multiplied by the lab's delay scale (0 = instant).
POST_SECONDS = 4.0  # power-on self test until the boot loader runs (an R730 takes minutes)
INSTALL_SECONDS = 20.0  # the installer's run, from partitioning to its final action
OS_BOOT_SECONDS = 6.0  # from the boot loader to sshd accepting connections
OS_SHUTDOWN_SECONDS = 2.0  # from `poweroff`/`reboot` to the power going off / the next POST
# Real seconds an OS-initiated power action waits at least, whatever the scale: the shim's answer
# (and the SSH channel's exit status) must reach the client before the host goes down.
MIN_OS_ACTION_SECONDS = 0.3
# Real seconds an install takes at least, whatever the scale. A real installer runs for minutes, so the power-on
# into it is always seen before its final power-off; scaled below a second, a busy controller's first look after the
# power-on could come after the power-off (seen as "waiting for power state On; last seen 'Off'" under make test).
MIN_INSTALL_SECONDS = 2.0
TICK = 0.1  # seconds between the worker's looks at the BMC's lazily advanced power state
ISO_FETCH_TIMEOUT = 30.0
INSTALL_RECORD = "/etc/metal-lab/installed.json"  # inside the host: what was installed, and from what
FIRST_UID = 1000

OFF, POST, INSTALLING, INSTALLER_WAITING, INSTALLER_FAILED, INSTALLER_HALTED = (
    "off",
    "post",
    "installing",
    "installer-waiting",
    "installer-failed",
    "installer-halted",
)
OS_BOOTING, OS_UP, OS_HALTED, NO_BOOT_DEVICE, POWER_TRANSITION = (
    "os-booting",
    "os-up",
    "os-halted",
    "no-boot-device",
    "power-transition",
)
# A provisioning agent's ramdisk runs (lab.metal3's stand-in for Ironic Python Agent, booted from the virtual CD):
# the agent writes images and cleans disks when its controller says so (``image_written``, ``metadata_cleaned``).
AGENT_RUNNING = "agent-running"
# The ISO 9660 volume identifier that marks an ISO as that ramdisk: the host runs the agent instead of an
# installer. Kept equal to lab.metal3.controller's deploy ISO (which imports it).
AGENT_VOLUME_ID = "METALPLANE_LAB_IPA"
ISO_VOLUME_ID = slice(16 * 2048 + 40, 16 * 2048 + 72)  # the primary volume descriptor's volume identifier bytes


def iso_volume_id(path: Path) -> str:
    """The volume identifier of the ISO 9660 image at ``path`` ("" when it has none)."""
    with path.open("rb") as image:
        image.seek(ISO_VOLUME_ID.start)
        return image.read(ISO_VOLUME_ID.stop - ISO_VOLUME_ID.start).decode("ascii", "replace").strip()


class Bmc(Protocol):
    """The narrow interface of ``lab.redfish.bmc.BmcState`` a host uses."""

    host: Any
    macs: list[str]

    @property
    def power_state(self) -> str: ...

    def host_power_off(self) -> None: ...

    def reboot(self) -> None: ...


@dataclass
class SharedParts:
    """What every host of one lab shares: the tools, the skeleton and shims, the SSH service."""

    tools: Tools
    skeleton: Path
    shims_usr: Path
    sshd: SshService
    control_root: Path  # short path (Unix socket paths are limited to 108 bytes)
    delay_scale: float = 1.0


@dataclass
class _Timer:
    at: float
    name: str
    action: Callable[[], None]


@dataclass
class HostLog:
    """What happened to the host, for tests and ``labctl status``."""

    boots: list[dict[str, Any]] = field(default_factory=list)
    installs: list[dict[str, Any]] = field(default_factory=list)
    phases: list[tuple[float, str, str | None]] = field(default_factory=list)
    shim_calls: list[ShimCall] = field(default_factory=list)


class MetalHost:
    """The server behind one lab BMC."""

    def __init__(self, identity: HostIdentity, bmc: Bmc, directory: Path, shared: SharedParts) -> None:
        self.identity = identity
        self.name = identity.name
        self.bmc = bmc
        self.directory = directory
        self.shared = shared
        self.disk = Disk(directory / "disk")
        self.firmware = directory / "firmware"
        self.control_dir = shared.control_root / identity.name
        self.log = HostLog()
        self.phase = OFF
        self.reason: str | None = None
        self.unreachable: str | None = None
        self.last_config: dict[str, Any] | None = None
        self.modules: set[str] = set()
        self.boot_id: str | None = None
        self._sandbox: Sandbox | None = None
        self._shim_server: ShimServer | None = None
        self._events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._timer: _Timer | None = None
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"metal-{self.name}", daemon=True)
        self._changed = threading.Condition(self._lock)

    # ------------------------------------------------------------------ BMC listener (non-blocking)
    def power_changed(self, state: str) -> None:
        self._events.put(("power", state))

    def booted(self, boot: dict[str, Any]) -> None:
        self._events.put(("boot", dict(boot)))

    def media_changed(self, slot: str, image: str | None, media_types: tuple[str, ...]) -> None:
        if "CD" in media_types:
            self._events.put(("media", image))

    # ------------------------------------------------------------------------------ lifecycle
    def start(self) -> MetalHost:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.disk.ensure()
        self._write_firmware()
        self.bmc.host = self
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=10)
        self._halt_os()
        notify_host(self, "stop")
        if getattr(self.bmc, "host", None) is self:
            self.bmc.host = None

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                kind, payload = self._events.get(timeout=TICK)
            except queue.Empty:
                kind, payload = "", None
            try:
                if kind == "power":
                    self._on_power(payload)
                elif kind == "boot":
                    self._on_boot(payload)
                elif kind == "shim":
                    self._on_shim(payload)
                elif kind == "media":
                    self._on_media(payload)
                timer = self._timer
                if timer is not None and time.monotonic() >= timer.at:
                    self._timer = None
                    timer.action()
                _unused = self.bmc.power_state  # let the BMC apply transitions that are due
            except Exception as exc:
                self._set_phase(self.phase, f"lab error: {type(exc).__name__}: {exc}")

    def _after(self, seconds: float, name: str, action: Callable[[], None], floor: float = 0.0) -> None:
        delay = max(floor, seconds * self.shared.delay_scale)
        self._timer = _Timer(time.monotonic() + delay, name, action)

    def _set_phase(self, phase: str, reason: str | None = None) -> None:
        with self._changed:
            self.phase, self.reason = phase, reason
            self.log.phases.append((time.time(), phase, reason))
            self._changed.notify_all()

    def wait_for(self, predicate: Callable[[MetalHost], bool], timeout: float) -> bool:
        """Block until ``predicate(self)`` holds (tests); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(self):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(min(remaining, TICK))
        return True

    # ---------------------------------------------------------------------------------- events
    def _on_power(self, state: str) -> None:
        if state == "On":
            return  # the boot event follows; a PoweringOn -> On restart is a boot too
        self._timer = None
        self._halt_os()
        self._set_phase(OFF if state == "Off" else POWER_TRANSITION, None if state == "Off" else state)

    def _on_media(self, image: str | None) -> None:
        """The virtual CD ejected under a running installer: it reads its packages (or, for a live installer, its
        root file system) from that CD, so it stops at an error screen and waits there; the server stays on."""
        if image is None and self.phase == INSTALLING:
            self._timer = None
            self._set_phase(INSTALLER_FAILED, "the installer lost its media (the virtual CD was ejected) and waits")

    def _on_boot(self, boot: dict[str, Any]) -> None:
        self._halt_os()
        if boot.get("settings_jobs"):
            # Dell: the Lifecycle Controller applies the BIOS jobs in this POST, then resets the server; the boot
            # device runs after the POST that follows.
            self.log.boots.append({"time": time.time(), **boot, "post_for": "bios-settings"})
            self._set_phase(POST, f"applying {boot['settings_jobs']} BIOS configuration job(s), then a reset")
            self._after(POST_SECONDS, "settings-reset", lambda: self._on_boot({**boot, "settings_jobs": 0}))
            return
        self.log.boots.append({"time": time.time(), **boot, "post_for": boot.get("device")})
        self._set_phase(POST, f"booting from {boot.get('device')}")
        self._after(POST_SECONDS, "boot-device", lambda: self._start_from(boot))

    def _start_from(self, boot: dict[str, Any]) -> None:
        device = boot.get("device")
        if device == "VirtualCD":
            self._boot_installer(boot.get("cd_image"), str(boot.get("mode") or "Bios"))
        elif device == "Hdd":
            self._boot_disk()
        elif device == "Pxe":
            self._set_phase(NO_BOOT_DEVICE, "PXE: no DHCP offer (the lab network has no PXE server)")
        elif device == "PhysicalCD":
            self._set_phase(
                NO_BOOT_DEVICE,
                "the physical optical drive is empty (on iDRAC8, BootSourceOverrideTarget=Cd boots the physical "
                "drive, not the virtual CD)",
            )
        else:
            self._set_phase(NO_BOOT_DEVICE, f"no bootable device ({device})")

    # ------------------------------------------------------------------------------- installer
    def _fetch(self, url: str) -> Path:
        target = self.directory / "virtual-cd.iso"
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # a BMC streams the image without verifying it
        with (
            urllib.request.urlopen(url, timeout=ISO_FETCH_TIMEOUT, context=context) as answer,
            target.open("wb") as out,
        ):
            shutil.copyfileobj(answer, out)
        return target

    def _boot_installer(self, url: str | None, firmware: str) -> None:  # noqa: PLR0911 - one exit per way it ends
        if not url:
            self._set_phase(NO_BOOT_DEVICE, "the virtual CD holds no image")
            return
        try:
            iso = self._fetch(url)
            if iso_volume_id(iso) == AGENT_VOLUME_ID:
                self._set_phase(AGENT_RUNNING, f"the provisioning agent's ramdisk from {url} runs")
                return
            config = read_install_media(iso, firmware)
        except (OSError, urllib.error.URLError) as exc:
            self._set_phase(NO_BOOT_DEVICE, f"the virtual CD image {url} cannot be read: {exc}")
            return
        except MediaError as exc:
            self._set_phase(NO_BOOT_DEVICE, f"{firmware} firmware cannot boot {url}: {exc}")
            return
        self.last_config = config.summary()
        if config.prompt:
            self._set_phase(INSTALLER_WAITING, config.prompt)
            return
        if config.error:
            self._set_phase(INSTALLER_FAILED, config.error)
            return
        if not self.identity.disk.matches(config.root_disk):
            self._set_phase(
                INSTALLER_FAILED,
                f"the configuration installs to {config.root_disk}, but this host's only disk is "
                f"{self.identity.disk.device} (wwn {self.identity.disk.wwn}, serial {self.identity.disk.serial})",
            )
            return
        self.disk.wipe()  # partitioning: from here on the old installation is gone
        self._set_phase(INSTALLING, f"{config.flavour} from {config.source}")
        self._after(INSTALL_SECONDS, "install-done", lambda: self._install_done(config), floor=MIN_INSTALL_SECONDS)

    def _install_done(self, config: InstallConfig) -> None:
        self._write_installation(config)
        self.log.installs.append({"time": time.time(), **config.summary()})
        if config.final_action == "poweroff":
            self._set_phase(OFF, "the installer powered the server off")
            self.bmc.host_power_off()
        elif config.final_action == "reboot":
            self._set_phase(POST, "the installer rebooted the server")
            self.bmc.reboot()
        else:
            self._set_phase(INSTALLER_HALTED, "the installer halted and waits for a key at its completion screen")

    def _write_installation(self, config: InstallConfig) -> None:
        disk = self.disk
        for path, mode in config.dirs.items():
            disk.mkdir(path, mode)
        for path, spec in config.files.items():
            disk.write(path, spec.content, spec.mode)
        accounts = self._accounts(config.users)
        for user, keys in config.authorized_keys.items():
            home = accounts.get(user)
            if home is None:
                continue
            existing = (disk.read(f"{home}/.ssh/authorized_keys") or b"").decode()
            lines = [line for line in existing.splitlines() if line.strip()]
            lines += [k for k in keys if k not in lines]
            disk.mkdir(f"{home}/.ssh", 0o700)
            disk.write(f"{home}/.ssh/authorized_keys", ("\n".join(lines) + "\n").encode(), 0o600)
        if config.hostname:
            disk.write("/etc/hostname", f"{config.hostname}\n".encode())
        record = {
            "flavour": config.flavour,
            "hostname": config.hostname or self.name,
            "networks": [vars(n) for n in config.networks],
            "ssh_server": config.ssh_server,
            "entry": {"title": config.entry.title, "cmdline": list(config.entry.cmdline)},
            "installed_at": time.time(),
            "install": len(self.log.installs) + 1,
        }
        disk.write(INSTALL_RECORD, json.dumps(record, indent=2).encode())
        disk.mark_installed(record)

    def _accounts(self, users: list[str]) -> dict[str, str]:
        """Users of the installed OS -> home; adds the non-root ones to the disk's /etc/passwd and /etc/group."""
        homes = {"root": "/root"}
        extra = [u for u in dict.fromkeys(users) if u != "root"]
        if not extra:
            return homes
        passwd = Path("/etc/passwd").read_text().splitlines()
        group = Path("/etc/group").read_text().splitlines() if Path("/etc/group").exists() else []
        known = {line.split(":", 1)[0] for line in passwd}
        for offset, user in enumerate(extra):
            homes[user] = f"/home/{user}"
            self.disk.mkdir(homes[user], 0o755)
            if user not in known:
                uid = FIRST_UID + offset
                passwd.append(f"{user}:x:{uid}:{uid}::/home/{user}:/bin/bash")
                group.append(f"{user}:x:{uid}:")
        self.disk.write("/etc/passwd", ("\n".join(passwd) + "\n").encode())
        self.disk.write("/etc/group", ("\n".join(group) + "\n").encode())
        return homes

    # --------------------------------------------------------------- provisioning agent (lab.metal3)
    def image_written(self, config: InstallConfig) -> None:
        """The running provisioning agent wrote a disk image whose first boot applies ``config`` (its config
        drive, as cloud-init reads it: lab.metal3.configdrive): the old installation is gone, and the next boot
        from disk comes up as ``config`` says, through the installer path's record and network rules."""
        with self._lock:
            if self.phase != AGENT_RUNNING:
                msg = f"{self.name}: no provisioning agent runs (phase {self.phase})"
                raise RuntimeError(msg)
            self.disk.wipe()
            self.last_config = config.summary()
            self._write_installation(config)
            self.log.installs.append({"time": time.time(), **config.summary()})

    def metadata_cleaned(self) -> None:
        """The running provisioning agent erased the disk's metadata (Ironic's automated cleaning in
        ``metadata`` mode wipes partition tables): nothing on the disk boots any more."""
        with self._lock:
            if self.phase != AGENT_RUNNING:
                msg = f"{self.name}: no provisioning agent runs (phase {self.phase})"
                raise RuntimeError(msg)
            self.disk.wipe()

    # ------------------------------------------------------------------------------ installed OS
    def _boot_disk(self) -> None:
        record = self.disk.installed
        if record is None:
            self._set_phase(NO_BOOT_DEVICE, "the disk holds no bootable OS")
            return
        self._set_phase(OS_BOOTING, f"booting the installed {record.get('flavour')} system")
        self._after(OS_BOOT_SECONDS, "os-up", lambda: self._os_up(record))

    def _os_up(self, record: dict[str, Any]) -> None:
        problem = network_problem(list(record.get("networks") or []), self.identity)
        if problem is None and not record.get("ssh_server"):
            problem = "no SSH server was installed"
        self.unreachable = problem
        if problem is None:
            try:
                self._start_os(str(record.get("hostname") or self.name))
            except (SandboxUnavailable, OSError, asyncssh.Error, TimeoutError) as exc:
                self._halt_os()
                self.unreachable = f"the lab could not start the host: {exc}"
        self._set_phase(OS_UP, self.unreachable)

    def host_key_blobs(self) -> list[bytes]:
        """The installed OS's private host keys (sshd-keygen makes an ed25519 one at first boot if none)."""
        keys = []
        for kind in ("ed25519", "ecdsa", "rsa"):
            blob = self.disk.read(f"/etc/ssh/ssh_host_{kind}_key")
            if blob:
                keys.append(blob)
        if not keys:
            key = asyncssh.generate_private_key("ssh-ed25519", comment=f"root@{self.name}")
            blob = key.export_private_key()
            self.disk.write("/etc/ssh/ssh_host_ed25519_key", blob, 0o600)
            self.disk.write("/etc/ssh/ssh_host_ed25519_key.pub", key.export_public_key(), 0o644)
            keys.append(blob)
        return keys

    def _start_os(self, hostname: str) -> None:
        self.boot_id = str(uuid.uuid4())
        layout = SandboxLayout(
            skeleton=self.shared.skeleton,
            firmware=self.firmware,
            shims_usr=self.shared.shims_usr,
            disk=self.disk,
            control_dir=self.control_dir,
            mountpoint=self.directory / "mnt",
        )
        self._shim_server = ShimServer(self.control_dir, self._shim)
        self._shim_server.start()
        sandbox = Sandbox(layout, self.shared.tools, hostname=hostname, boot_id=self.boot_id)
        sandbox.start()
        self._sandbox = sandbox
        self.disk.live = sandbox.root
        self.modules |= modules_at_boot(self)  # nouveau for the GPUs unless blacklisted, or an installed nvidia
        notify_host(self, "boot")
        self.shared.sshd.start_host(self, self.identity.address, self.identity.port, self.host_key_blobs())

    def _halt_os(self) -> None:
        self.shared.sshd.stop_host(self.name)
        if self._shim_server is not None:
            self._shim_server.stop()
            self._shim_server = None
        self.disk.live = None
        if self._sandbox is not None:
            self._sandbox.stop()
            self._sandbox = None
            notify_host(self, "halt")
        self.modules.clear()

    # ------------------------------------------------------------------------------ shims
    @property
    def address(self) -> str:
        return self.identity.address

    @property
    def gpu_models(self) -> list[str]:
        """The GPUs its BMC inventories (``BmcSpec.gpus`` of ``GPU_MODEL``); none behind a BMC without a spec."""
        spec = getattr(self.bmc, "spec", None)
        if spec is None:
            return []
        return [GPU_MODEL] * int(getattr(spec, "gpus", 0))

    def _shim(self, argv: list[str]) -> Effect:
        """Called from the control socket's thread: record, answer, and queue the state change."""
        registered = HANDLERS.get(argv[0])
        effect = registered[1](argv, self) if registered else interpret(argv, self.identity.disk.matches)
        with self._lock:
            self.log.shim_calls.append(ShimCall(time.time(), argv, effect.rc, effect.action, effect.target))
        with (self.directory / "shim-calls.jsonl").open("a") as out:
            out.write(json.dumps(self.log.shim_calls[-1].as_dict()) + "\n")
        if effect.action in ("load", "unload") and effect.target:
            for module in effect.target.split():
                (self.modules.add if effect.action == "load" else self.modules.discard)(module)
        elif effect.action is not None:
            self._events.put(("shim", effect))
        return effect

    def _on_shim(self, effect: Effect) -> None:
        if effect.action == "wipe":
            self.disk.record_path.unlink(missing_ok=True)  # the running OS runs on; it will not boot again
            return
        if self.phase != OS_UP:
            return
        delay = OS_SHUTDOWN_SECONDS * self.shared.delay_scale + effect.delay * self.shared.delay_scale
        action = {"poweroff": self._os_poweroff, "reboot": self._os_reboot, "halt": self._os_halt}[str(effect.action)]
        self._timer = _Timer(time.monotonic() + max(MIN_OS_ACTION_SECONDS, delay), str(effect.action), action)

    def _os_poweroff(self) -> None:
        self._halt_os()
        self._set_phase(OFF, "the OS powered the server off")
        self.bmc.host_power_off()

    def _os_reboot(self) -> None:
        self._halt_os()
        self._set_phase(POST, "the OS rebooted")
        self.bmc.reboot()

    def _os_halt(self) -> None:
        self._halt_os()
        self._set_phase(OS_HALTED, "the OS halted (the server stays on)")

    # ------------------------------------------------------------------------ sshd runtime
    def account(self, username: str) -> tuple[str, str] | None:
        sandbox = self._sandbox
        if sandbox is None:
            return None
        try:
            lines = (sandbox.root / "etc/passwd").read_text().splitlines()
        except OSError:
            return None
        for line in lines:
            fields = line.split(":")
            if len(fields) >= 7 and fields[0] == username:
                return fields[5] or "/", fields[6] or "/bin/sh"
        return None

    def authorized_keys(self, username: str) -> str | None:
        account, sandbox = self.account(username), self._sandbox
        if account is None or sandbox is None:
            return None
        try:
            return (sandbox.root / account[0].lstrip("/") / ".ssh/authorized_keys").read_text()
        except OSError:
            return None

    def session_command(self, argv: list[str]) -> list[str]:
        if self._sandbox is None:
            raise SandboxUnavailable(f"{self.name} is not running")
        return self._sandbox.command(argv)

    def root_path(self) -> str:
        if self._sandbox is None:
            raise SandboxUnavailable(f"{self.name} is not running")
        return str(self._sandbox.root)

    # ------------------------------------------------------------------------------ firmware
    def _write_firmware(self) -> None:
        """What the OS sees of the hardware: DMI identity and NIC addresses under /sys (read-only facts)."""
        dmi = self.firmware / "sys/devices/virtual/dmi/id"  # where sysfs keeps it; /sys/class/dmi/id links there
        dmi.mkdir(parents=True, exist_ok=True)
        link = self.firmware / "sys/class/dmi/id"
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to("../../devices/virtual/dmi/id")
        values = {
            "sys_vendor": "Dell Inc.",
            "product_name": self.identity.model,
            "product_serial": self.identity.serial,
            "product_uuid": self.identity.uuid,
            "chassis_vendor": "Dell Inc.",
            "bios_vendor": "Dell Inc.",
        }
        for key, value in values.items():
            (dmi / key).write_text(f"{value}\n")
        for index, mac in enumerate(self.identity.macs):
            nic = self.firmware / f"sys/class/net/{NIC_NAME_PREFIX}{index + 1}"
            nic.mkdir(parents=True, exist_ok=True)
            (nic / "address").write_text(f"{mac}\n")

    # ------------------------------------------------------------------------------ views
    def snapshot(self) -> dict[str, Any]:
        boot = self.log.boots[-1] if self.log.boots else {}
        slots = getattr(self.bmc, "virtual_media", {}) or {}
        media = next(
            (s["image"] for s in slots.values() if s.get("inserted") and "CD" in s.get("media_types", [])), None
        )
        return {
            "name": self.name,
            "power": self.bmc.power_state,
            "boot_device": boot.get("device"),
            "media": media,  # the virtual CD now
            "booted_media": boot.get("cd_image"),  # the virtual CD at the last boot
            "phase": self.phase,
            "reason": self.reason,
            "reachable": self.phase == OS_UP and self.unreachable is None,
            "unreachable": self.unreachable if self.phase == OS_UP else None,
            "ssh": f"{self.identity.address}:{self.identity.port}",
            "installed": self.disk.installed is not None,
            "installs": len(self.log.installs),
            "boots": len(self.log.boots),  # power-on self-tests
            "posts": [b.get("post_for") for b in self.log.boots],  # what each POST was for, in order
            "shim_calls": [c.as_dict() for c in self.log.shim_calls],
            "modules": sorted(self.modules),
            "config": self.last_config,
        }
