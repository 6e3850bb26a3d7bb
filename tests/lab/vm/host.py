"""A QEMU VM behind one lab BMC: the real-boot backend of the Redfish emulator (``lab.redfish``).

Why: the simulated hosts (``lab.metal``) read an installer ISO and act out what it configures; this one boots
it. It plugs into the same seam of ``lab.redfish.bmc.BmcState`` as ``lab.metal.host.MetalHost``: the BMC tells
its ``host`` about power changes (``power_changed``) and boots (``booted``), and the host calls back
``host_power_off()`` and ``reboot()`` when the OS powers off or reboots. Two more listener calls, which the BMC
makes only to hosts that have them, let the VM own what a real server owns: ``media_changed`` (InsertMedia
and EjectMedia reach the VM's CD drive) and ``acpi_power_button`` (GracefulShutdown and PushPowerButton are
the ACPI button, and the *guest* decides whether the power goes off).

What each BMC action does to the VM:

- a boot (power on, a restart, the guest's own reboot): a fresh QEMU process with the firmware of the BIOS
  ``BootMode`` (SeaBIOS or OVMF), the boot device the BMC picked as the only bootable one, and the virtual
  CD's image if one is inserted (``lab.vm.machine``);
- ForceOff (the BMC's power going Off): QMP ``quit``, the power is cut;
- GracefulShutdown / PushPowerButton: QMP ``system_powerdown``;
- InsertMedia: the image is downloaded from its URL (the BMC checked it is reachable; a real BMC streams it,
  the VM reads a local copy) into the VM's directory and, when the VM runs, QMP ``blockdev-change-medium``
  puts it in the drive; EjectMedia: QMP ``eject`` and the copy is deleted;
- the guest powers off (QMP event ``SHUTDOWN``, reason ``guest-shutdown``, and QEMU exits): the BMC's power
  goes Off; the guest reboots (``guest-reset``; ``-no-reboot`` ends the process): the BMC runs a boot, which
  starts the next process. A QEMU that dies without either is reported and powered off. So the BMC's
  ``PowerState`` is the VM's, read back within a tick.

Everything is done by one worker thread in order (a boot after an insert waits for the download), and the
BMC's calls only queue work. ``stop()`` ends the QEMU process (and kills its process group if it does not
quit) and deletes every file the VM wrote: disk, UEFI variables, media copies, sockets, serial log (tests read
``serial_text()`` before).
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.vm import qmp
from lab.vm.machine import OVMF_VARS, QEMU, QEMU_IMG, VIRTUAL_CD_ID, VmFiles, VmSpec, disk_create_argv, qemu_argv

TICK = 0.1  # seconds between the worker's looks at the BMC (its power transitions are evaluated lazily)
QUIT_TIMEOUT = 10.0  # seconds QEMU gets to exit after ``quit`` before its process group is killed
MEDIA_FETCH_TIMEOUT = 60.0  # seconds for one read of the image URL (the ISO server is on the same machine)
MEDIA_CHUNK = 1024 * 1024
# What a QEMU SHUTDOWN event's reason means for the BMC (qapi/run-state.json ShutdownCause).
GUEST_POWER_OFF, GUEST_RESET = "guest-shutdown", "guest-reset"


@dataclass
class VmLog:
    """What happened, for tests and the lane's report."""

    boots: list[dict[str, Any]] = field(default_factory=list)  # mode, device, via, cd_image, accel, started
    exits: list[dict[str, Any]] = field(default_factory=list)  # reason, returncode, at
    qmp_commands: list[dict[str, Any]] = field(default_factory=list)
    media: list[dict[str, Any]] = field(default_factory=list)  # slot, url, path, action
    errors: list[str] = field(default_factory=list)


class _Process:
    """One QEMU process (one boot): its Popen, QMP connection and the last SHUTDOWN reason it sent."""

    def __init__(self, popen: subprocess.Popen[bytes], client: qmp.QmpClient) -> None:
        self.popen = popen
        self.client = client
        self.shutdown_reason: str | None = None


class QemuHost:
    """The VM behind one BMC (``bmc``: a ``lab.redfish.bmc.BmcState``)."""

    def __init__(  # noqa: PLR0917
        self,
        bmc: Any,
        spec: VmSpec,
        directory: Path,
        accel: str,
        qemu: str = QEMU,
        qemu_img: str = QEMU_IMG,
    ) -> None:
        self.bmc = bmc
        self.last_power_state: str | None = None
        self.spec = spec
        self.files = VmFiles(Path(directory))
        self.accel = accel
        self.qemu = qemu
        self.qemu_img = qemu_img
        self.log = VmLog()
        self.name = spec.name
        self._queue: queue.Queue[tuple[str, tuple[Any, ...]]] = queue.Queue()
        self._process: _Process | None = None
        self._media: dict[str, Path] = {}  # slot id -> local copy of its image
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> QemuHost:
        self.files.directory.mkdir(parents=True, exist_ok=True)
        self.files.media_dir.mkdir(exist_ok=True)
        subprocess.run(disk_create_argv(self.files, self.spec, self.qemu_img), check=True, capture_output=True)
        shutil.copyfile(OVMF_VARS, self.files.uefi_vars)
        self._worker = threading.Thread(target=self._run, name=f"vm-{self.name}", daemon=True)
        self._worker.start()
        self.bmc.host = self
        return self

    def stop(self) -> None:
        """End the VM and delete everything it wrote (the directory itself too)."""
        if self.bmc.host is self:
            self.bmc.host = None
        self._stop.set()
        if self._worker is not None:
            self._worker.join(timeout=QUIT_TIMEOUT + 5)
        self._end_process("lab stopped")
        shutil.rmtree(self.files.directory, ignore_errors=True)

    def __enter__(self) -> QemuHost:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ BMC listener (queue only)
    def power_changed(self, state: str) -> None:
        self._queue.put(("power", (state,)))

    def booted(self, boot: dict[str, Any]) -> None:
        self._queue.put(("boot", (dict(boot),)))

    def media_changed(self, slot: str, image: str | None, media_types: tuple[str, ...]) -> None:
        if "CD" in media_types:
            self._queue.put(("media", (slot, image)))

    def acpi_power_button(self) -> None:
        self._queue.put(("button", ()))

    # ------------------------------------------------------------------ observing
    @property
    def running(self) -> bool:
        process = self._process
        return process is not None and process.popen.poll() is None

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.popen.pid if process is not None and process.popen.poll() is None else None

    def serial_text(self) -> str:
        """The serial console so far (the firmware's, the loader's, the kernel's and the installer's output)."""
        try:
            return self.files.serial.read_bytes().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def send_serial(self, data: bytes) -> bool:
        """Type ``data`` into the serial console (what a person at the serial-over-LAN console types)."""
        if not self.running:
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            try:
                sock.connect(str(self.files.serial_socket))
                sock.sendall(data)
            except OSError:
                return False
        return True

    def query(self, message: dict[str, Any]) -> Any:
        """One read-only QMP command on the running VM (``query-status``, ``query-block``); None when off."""
        process = self._process
        if process is None or process.popen.poll() is not None:
            return None
        return process.client.execute(message)

    def monitor(self, text: str) -> str:
        """A human monitor command (``info usernet``) on the running VM; empty when it is not running."""
        process = self._process
        if process is None or process.popen.poll() is not None:
            return ""
        try:
            return str(process.client.execute(qmp.monitor(text)))
        except qmp.QmpError:
            return ""

    def snapshot(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "running": self.running,
            "pid": self.pid,
            "accel": self.accel,
            "boots": [dict(b) for b in self.log.boots],
            "exits": [dict(e) for e in self.log.exits],
            "media": {slot: str(path) for slot, path in self._media.items()},
            "errors": list(self.log.errors),
        }

    # ------------------------------------------------------------------ worker
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                kind, args = self._queue.get(timeout=TICK)
            except queue.Empty:
                self._tick()
                continue
            try:
                {"power": self._on_power, "boot": self._on_boot, "media": self._on_media, "button": self._on_button}[
                    kind
                ](*args)
            except Exception as exc:
                self.log.errors.append(f"{kind}: {type(exc).__name__}: {exc}")

    def _tick(self) -> None:
        # Reading the power state advances the BMC's timed transitions, which queue boots and power changes.
        self.last_power_state = self.bmc.power_state
        process = self._process
        if process is None or process.popen.poll() is None:
            return
        self._process = None
        reason = process.shutdown_reason or f"QEMU exited with status {process.popen.returncode}"
        process.client.close()
        self.log.exits.append({"reason": reason, "returncode": process.popen.returncode, "at": time.time()})
        if reason == GUEST_RESET:
            self.bmc.reboot()  # the server reboots itself: a POST, the BMC picks the boot device
        elif self.bmc.power_state in ("On", "PoweringOn"):
            if reason != GUEST_POWER_OFF:
                self.log.errors.append(f"QEMU ended without the guest powering off: {reason}")
            self.bmc.host_power_off()

    def _on_power(self, state: str) -> None:
        if state == "Off" and self.running:
            self._end_process("the BMC's power went off")

    def _on_button(self) -> None:
        if self.running:
            self._send(qmp.power_button())

    def _on_boot(self, boot: dict[str, Any]) -> None:
        self._end_process("the BMC restarts the server")
        cd = self._media.get(self._cd_slot()) if boot.get("cd_image") else None
        argv = qemu_argv(self.spec, self.files, str(boot["mode"]), str(boot["device"]), self.accel, cd, self.qemu)
        self.files.qmp.unlink(missing_ok=True)
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(self.files.directory / "qemu.stderr", "ab"),  # noqa: SIM115 - Popen keeps it
            start_new_session=True,  # its own process group: stop() can kill whatever it started
        )
        client = qmp.QmpClient(self.files.qmp)
        process = _Process(popen, client)
        client.on_event = lambda event: self._on_event(process, event)
        try:
            client.connect(alive=lambda: popen.poll() is None)
        except qmp.QmpError as exc:
            stderr = (self.files.directory / "qemu.stderr").read_text(errors="replace")[-2000:]
            self._kill(popen)
            raise qmp.QmpError(f"{exc}; QEMU said: {stderr.strip()}") from exc
        self._process = process
        self.log.boots.append(
            {
                "mode": boot["mode"],
                "device": boot["device"],
                "via": boot.get("via"),
                "cd_image": str(cd) if cd else None,
                "accel": self.accel,
                "started": time.time(),
                "argv": argv,
            }
        )

    def _on_event(self, process: _Process, event: dict[str, Any]) -> None:
        if event.get("event") == "SHUTDOWN":
            process.shutdown_reason = str(event.get("data", {}).get("reason"))

    def _cd_slot(self) -> str:
        return next(iter(self._media), "")

    def _on_media(self, slot: str, image: str | None) -> None:
        old = self._media.pop(slot, None)
        if image is None:
            if self.running:
                self._send(qmp.eject(VIRTUAL_CD_ID))
            if old is not None:
                old.unlink(missing_ok=True)
            self.log.media.append({"slot": slot, "url": None, "action": "ejected"})
            return
        path = self.files.media_dir / f"{slot}.iso"
        partial = path.with_suffix(".partial")
        with urllib.request.urlopen(image, timeout=MEDIA_FETCH_TIMEOUT) as response, partial.open("wb") as out:
            for chunk in iter(lambda: response.read(MEDIA_CHUNK), b""):
                out.write(chunk)
        partial.replace(path)
        self._media[slot] = path
        if self.running:
            self._send(qmp.change_medium(VIRTUAL_CD_ID, path))
        self.log.media.append({"slot": slot, "url": image, "path": str(path), "action": "inserted"})

    def _send(self, message: dict[str, Any]) -> Any:
        process = self._process
        if process is None:
            return None
        self.log.qmp_commands.append(message)
        return process.client.execute(message)

    def _end_process(self, why: str) -> None:
        process = self._process
        if process is None:
            return
        self._process = None
        if process.popen.poll() is None:
            self.log.qmp_commands.append(qmp.power_cut())
            with contextlib.suppress(qmp.QmpError):  # QEMU may close before it answers
                process.client.execute(qmp.power_cut(), timeout=QUIT_TIMEOUT)
            try:
                process.popen.wait(timeout=QUIT_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._kill(process.popen)
        process.client.close()
        self.log.exits.append({"reason": why, "returncode": process.popen.returncode, "at": time.time()})

    @staticmethod
    def _kill(popen: subprocess.Popen[bytes]) -> None:
        """Kill the process group QEMU leads (it was started in a session of its own)."""
        if popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGKILL)
            popen.wait(timeout=QUIT_TIMEOUT)


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.5) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
