"""The commands that would touch hardware, as shims: recorded, and turned into the host's state changes.

Why shims: inside a simulated host, ``reboot`` must reboot *the simulated host* (through its BMC),
``poweroff`` must power its BMC's system off, and ``wipefs -a`` on its root disk must leave a
machine that no longer boots - while nothing reaches the real machine's kernel or disks. Each shim
is a tiny program placed over the real command in the host's ``/usr`` overlay (so ``reboot``,
``/sbin/reboot`` and ``/usr/sbin/reboot`` all reach it). It sends its argv to the lab over the
host's control socket (``/run/metal-lab/control.sock``) and prints what the lab answers; the lab
records the call and applies its effect (``lab.metal.host``).

``sudo`` is a shim of another kind: the sessions already run as root of the host's user namespace,
where a setuid binary cannot work, so ``sudo [options] cmd`` runs ``cmd`` (Ansible's ``become``).

Later hardware-facing steps (packages, the NVIDIA ``.run`` installer, kubeadm) need their host's state
(its disk, its GPUs, its loaded modules): they ``register()`` a handler of their own, in a file of their own
imported by ``lab.metal.node_shims``, instead of growing ``interpret``.
"""

from __future__ import annotations

import json
import re
import socketserver
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from lab.metal.sandbox import Disk

CONTROL_SOCKET = "control.sock"  # in the host's control directory, bound at /run/metal-lab
# Commands a shim replaces, and where the real one lives under /usr (merged /usr: /sbin -> usr/sbin).
SHIMS = {
    "reboot": "sbin",
    "poweroff": "sbin",
    "halt": "sbin",
    "shutdown": "sbin",
    "modprobe": "sbin",
    "wipefs": "sbin",
    "blkdiscard": "sbin",
}
SHIM_PROGRAM = "lib/metal-lab/shim"  # under /usr
SHIM_TIMEOUT = 30.0  # seconds a shim waits for the lab's answer
# systemd's shutdown(8): "now" and "+0" act at once; "+m" waits m minutes; "hh:mm" is not simulated.
MINUTE = 60.0

SHIM_SOURCE = '''#!/usr/bin/python3
"""metal-lab shim: the lab simulates this command (see lab.metal.shims); nothing touches hardware."""
import json, os, socket, sys

def main():
    request = {"argv": [os.path.basename(sys.argv[0])] + sys.argv[1:], "cwd": os.getcwd()}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(@TIMEOUT@)
            conn.connect("/run/metal-lab/@SOCKET@")
            conn.sendall(json.dumps(request).encode() + b"\\n")
            reply = json.loads(conn.makefile("rb").readline())
    except (OSError, ValueError) as exc:
        sys.stderr.write("%s: the lab's control socket is unreachable: %s\\n" % (request["argv"][0], exc))
        return 1
    sys.stdout.write(reply.get("stdout", ""))
    sys.stderr.write(reply.get("stderr", ""))
    return int(reply.get("rc", 1))

sys.exit(main())
'''.replace("@TIMEOUT@", str(SHIM_TIMEOUT)).replace("@SOCKET@", CONTROL_SOCKET)

# sudo(8) options that take an argument; Ansible's become sends ``sudo -H -S -n -u root /bin/sh -c ...``.
SUDO_SOURCE = """#!/bin/sh
# metal-lab sudo shim: sessions already run as root of the host's user namespace.
while [ $# -gt 0 ]; do
  case "$1" in
    -u|-g|-p|-C|-h|-r|-t|-U|-D|-R|-T) shift 2 ;;
    --) shift; break ;;
    -*) shift ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || exec "${SHELL:-/bin/sh}"
exec "$@"
"""


class ShimHost(Protocol):
    """What a registered shim handler may read or change of its host (``lab.metal.host.MetalHost``)."""

    name: str
    directory: Path  # the host's lab directory (records, logs; outside the host)
    disk: Disk  # the host's disk: what its OS sees under / (``disk.host_path("/etc/x")``)
    modules: set[str]  # kernel modules loaded now (the modprobe shim keeps it)

    @property
    def address(self) -> str: ...  # the host's address on the lab network

    @property
    def gpu_models(self) -> list[str]: ...  # the GPUs in its PCIe slots, as its BMC reports them


ShimHandler = Callable[[list[str], ShimHost], "Effect"]
# command -> (its directory under /usr, the handler): filled by register() from the files node_shims imports.
HANDLERS: dict[str, tuple[str, ShimHandler]] = {}


def register(command: str, directory: str, handler: ShimHandler) -> None:
    """Place a shim over ``/usr/<directory>/<command>`` whose calls ``handler`` answers with the host in hand."""
    HANDLERS[command] = (directory, handler)


# Called with (host, event) when a host's OS goes down ("halt": power off, reboot, halt), comes up ("boot") or the
# lab stops ("stop"): state a shim family keeps outside the host (the API server kubeadm started) follows its host.
HostHook = Callable[[ShimHost, str], None]
HOST_HOOKS: list[HostHook] = []


def on_host_event(hook: HostHook) -> None:
    """Call ``hook(host, event)`` on every host's ``halt``, ``boot`` and ``stop``."""
    HOST_HOOKS.append(hook)


def notify_host(host: ShimHost, event: str) -> None:
    for hook in HOST_HOOKS:
        hook(host, event)


def install_shims(shims_usr: Path) -> Path:
    """Write the shim program, its links and the sudo shim into a directory layered over /usr."""
    program = shims_usr / SHIM_PROGRAM
    program.parent.mkdir(parents=True, exist_ok=True)
    program.write_text(SHIM_SOURCE)
    program.chmod(0o755)
    for name, directory in {**SHIMS, **{c: d for c, (d, _h) in HANDLERS.items()}}.items():
        link = shims_usr / directory / name
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(Path("..") / SHIM_PROGRAM)
    sudo = shims_usr / "bin" / "sudo"
    sudo.parent.mkdir(parents=True, exist_ok=True)
    sudo.write_text(SUDO_SOURCE)
    sudo.chmod(0o755)
    return shims_usr


@dataclass(frozen=True)
class Effect:
    """What a shim call does: its exit status and output, and the state change it asks for."""

    rc: int = 0
    stdout: str = ""
    stderr: str = ""
    action: str | None = None  # "poweroff" | "reboot" | "halt" | "wipe" | "load" | "unload"
    delay: float = 0.0  # seconds (unscaled: a shutdown's +m is the user's own wait)
    target: str | None = None  # the disk or module acted on


@dataclass
class ShimCall:
    time: float
    argv: list[str]
    rc: int
    action: str | None = None
    target: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {"time": self.time, "argv": self.argv, "rc": self.rc, "action": self.action, "target": self.target}


def _when(words: list[str]) -> tuple[float, str | None]:
    """shutdown's TIME argument -> delay in seconds, or an error."""
    for word in words:
        if word in {"now", "+0", "0"}:
            return 0.0, None
        if re.fullmatch(r"\+?\d+", word):
            return float(word.lstrip("+")) * MINUTE, None
        if re.fullmatch(r"\d{1,2}:\d{2}", word):
            return 0.0, f"shutdown: absolute time {word} is not simulated in the lab\n"
    return MINUTE, None  # systemd: no time means "+1"


def interpret(argv: list[str], is_root_disk: Callable[[str], bool]) -> Effect:  # noqa: PLR0911
    """The effect of one shim call (pure: the host applies it)."""
    name, args = argv[0], argv[1:]
    flags = {a for a in args if a.startswith("-")}
    if name in ("reboot", "poweroff", "halt"):
        if "--help" in flags:
            return Effect(stdout=f"{name} [OPTIONS...]\n")
        if "-w" in flags or "--wtmp-only" in flags:
            return Effect()
        action = "reboot" if name == "reboot" or "--reboot" in flags else name
        if name == "halt" and ("-p" in flags or "--poweroff" in flags):
            action = "poweroff"
        return Effect(action=action)
    if name == "shutdown":
        if "-c" in flags:
            return Effect()
        delay, error = _when([a for a in args if not a.startswith("-")])
        if error:
            return Effect(rc=1, stderr=error)
        action = "reboot" if "-r" in flags or "--reboot" in flags else "poweroff"
        if "-H" in flags or "--halt" in flags:
            action = "halt"
        return Effect(action=action, delay=delay)
    if name == "modprobe":
        modules = [a for a in args if not a.startswith("-")]
        if not modules:
            return Effect(rc=1, stderr="modprobe: ERROR: missing parameters. See -h.\n")
        remove = "-r" in flags or "--remove" in flags
        return Effect(action="unload" if remove else "load", target=" ".join(modules))
    if name in ("wipefs", "blkdiscard"):
        devices = [a for a in args if a.startswith("/dev/")]
        if not devices:
            return Effect(rc=1, stderr=f"{name}: no device specified\n")
        if name == "wipefs" and not ({"-a", "--all"} & flags or any(a.startswith("-a") for a in flags)):
            return Effect()  # listing signatures changes nothing
        device = devices[0]
        if not is_root_disk(device):
            return Effect(rc=1, stderr=f"{name}: {device}: No such file or directory\n")
        return Effect(action="wipe", target=device)
    return Effect(rc=127, stderr=f"{name}: no lab shim\n")


# ------------------------------------------------------------------------ the control socket
@dataclass
class ShimServer:
    """The lab end of one host's control socket: each shim call is handed to ``handle``."""

    directory: Path
    handle: Callable[[list[str]], Effect]
    _server: socketserver.ThreadingUnixStreamServer | None = field(default=None, init=False)

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / CONTROL_SOCKET
        path.unlink(missing_ok=True)
        handle = self.handle

        class _Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                try:
                    request = json.loads(self.rfile.readline())
                    argv = [str(a) for a in request["argv"]]
                except (ValueError, KeyError, TypeError):
                    return
                effect = handle(argv)
                reply = {"rc": effect.rc, "stdout": effect.stdout, "stderr": effect.stderr}
                self.wfile.write(json.dumps(reply).encode() + b"\n")

        server = socketserver.ThreadingUnixStreamServer(str(path), _Handler)
        server.daemon_threads = True
        path.chmod(0o666)
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        (self.directory / CONTROL_SOCKET).unlink(missing_ok=True)
