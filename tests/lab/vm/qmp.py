"""QMP, the QEMU Machine Protocol: the commands the lab's QEMU backend sends, and a small client for them.

Why a client of its own: QMP is JSON lines over a Unix socket (docs/interop/qmp-spec.rst in QEMU's source), a
few dozen lines with the standard library; qemu.qmp from PyPI would add a dependency and asyncio for the same
five commands. The command builders are pure, so what the BMC's actions turn into is unit-tested without
QEMU: each returns the QMP message ``{"execute": name, "arguments": {...}}``.

Commands and their QEMU 7.2 schema (qapi/*.json in QEMU's source):

- ``blockdev-change-medium`` (qapi/block.json): ``id`` (the guest device's qdev id), ``filename``, ``format``,
  ``read-only-mode``; inserts a medium into a removable drive, closing the tray - what a BMC's InsertMedia does
  to the virtual CD.
- ``eject`` (qapi/block.json): ``id``, ``force`` - opens the tray and removes the medium (EjectMedia).
- ``system_powerdown`` (qapi/machine.json): the ACPI power button (GracefulShutdown, PushPowerButton).
- ``quit`` (qapi/control.json): QEMU exits at once - the power is cut (ForceOff).
- ``query-status`` (qapi/run-state.json): ``running`` and ``status`` - the VM's power state, read back.
- ``query-block`` (qapi/block-core.json): each drive's medium - what the virtual CD holds, read back.
- ``human-monitor-command`` (qapi/control.json) ``info usernet``: the user network's connections, which show
  the guest's source address (how the lane tells a static address from a DHCP lease).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CONNECT_TIMEOUT = 10.0  # seconds for QEMU's QMP socket to appear and greet after the process starts
REPLY_TIMEOUT = 30.0  # seconds one command may take (blockdev-change-medium opens a file; nothing is slower)
QMP_VERSION_MAJOR = 7  # the greeting's QEMU version this backend is written against (Debian 12: 7.2)


class QmpError(RuntimeError):
    """QEMU answered a command with an error, or the connection failed."""


def command(name: str, **arguments: Any) -> dict[str, Any]:
    """One QMP message; Python names with underscores become QMP's dashed argument names."""
    message: dict[str, Any] = {"execute": name}
    if arguments:
        message["arguments"] = {key.replace("_", "-"): value for key, value in arguments.items()}
    return message


def change_medium(device_id: str, path: Path | str) -> dict[str, Any]:
    """Insert the image at ``path`` into the CD drive ``device_id``, read-only (a BMC's virtual CD is)."""
    return command("blockdev-change-medium", id=device_id, filename=str(path), format="raw", read_only_mode="read-only")


def eject(device_id: str) -> dict[str, Any]:
    """Remove the CD's medium even if the guest locked the tray (a BMC's eject does not ask the OS)."""
    return command("eject", id=device_id, force=True)


def power_button() -> dict[str, Any]:
    return command("system_powerdown")


def power_cut() -> dict[str, Any]:
    return command("quit")


def query_status() -> dict[str, Any]:
    return command("query-status")


def query_block() -> dict[str, Any]:
    """Every drive and its medium (``inserted``, absent when the tray is empty), by qdev id."""
    return command("query-block")


def monitor(text: str) -> dict[str, Any]:
    return command("human-monitor-command", command_line=text)


class QmpClient:
    """One QMP connection: commands in order, events handed to ``on_event`` from a reader thread."""

    def __init__(self, path: Path, on_event: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.path = path
        self.on_event = on_event
        self.greeting: dict[str, Any] = {}
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()  # one command at a time
        self._replies: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._closed = False
        self._reader: threading.Thread | None = None

    def connect(self, timeout: float = CONNECT_TIMEOUT, alive: Callable[[], bool] | None = None) -> QmpClient:
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if alive is not None and not alive():
                raise QmpError(f"QEMU exited before its QMP socket {self.path} answered")
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(str(self.path))
            except OSError as exc:
                sock.close()
                last = exc
                time.sleep(0.05)
                continue
            self._sock = sock
            break
        if self._sock is None:
            raise QmpError(f"no QMP socket at {self.path} after {timeout:g}s: {last}")
        self._file = self._sock.makefile("rb")
        self.greeting = json.loads(self._file.readline() or b"{}")
        if "QMP" not in self.greeting:
            raise QmpError(f"QEMU's QMP socket {self.path} did not greet: {self.greeting}")
        self._reader = threading.Thread(target=self._read, name=f"qmp-{self.path.name}", daemon=True)
        self._reader.start()
        self.execute(command("qmp_capabilities"))
        return self

    def _read(self) -> None:
        while True:
            try:
                line = self._file.readline()
            except (OSError, ValueError):
                line = b""
            if not line:
                with self._cond:
                    self._closed = True
                    self._cond.notify_all()
                return
            message = json.loads(line)
            if "event" in message:
                if self.on_event is not None:
                    self.on_event(message)
                continue
            with self._cond:
                self._replies.append(message)
                self._cond.notify_all()

    def execute(self, message: dict[str, Any], timeout: float = REPLY_TIMEOUT) -> Any:
        """Send one command and return its ``return`` value; QmpError on ``error`` or a closed socket."""
        with self._lock:
            if self._sock is None or self._closed:
                raise QmpError(f"QMP connection {self.path} is closed ({message['execute']})")
            self._sock.sendall(json.dumps(message).encode() + b"\n")
            deadline = time.monotonic() + timeout
            with self._cond:
                while not self._replies:
                    remaining = deadline - time.monotonic()
                    if self._closed:
                        if message["execute"] == "quit":
                            return {}  # QEMU may close before it answers quit
                        raise QmpError(f"QEMU closed QMP during {message['execute']}")
                    if remaining <= 0:
                        raise QmpError(f"no QMP reply to {message['execute']} within {timeout:g}s")
                    self._cond.wait(remaining)
                reply = self._replies.pop(0)
        if "error" in reply:
            error = reply["error"]
            raise QmpError(f"{message['execute']}: {error.get('class')}: {error.get('desc')}")
        return reply.get("return")

    def close(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()
        if self._reader is not None:
            self._reader.join(timeout=2)
