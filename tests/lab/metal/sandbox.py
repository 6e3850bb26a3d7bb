"""A simulated host's running OS: namespaces and an overlay root over its "disk", entered per session.

Why namespaces and not a chroot or a container engine: the lab must run without root, without
Docker and without system packages, yet Ansible's ordinary modules (command, shell, copy, file,
stat, slurp, setup) must run unchanged *on the host*. ``unshare --user --map-root-user --mount
--pid --uts`` (util-linux, essential on every distribution) gives a process that is root over its
own mounts only, so an overlayfs root (Linux >= 5.11 allows it in a user namespace) can make the
real ``/usr`` and ``/etc`` read-only lower layers under a per-host upper directory, the host's
disk. PID 1 of the namespace (``sandbox_init.py``) builds that root and detaches the real one;
each SSH session joins it with ``nsenter``. Killing PID 1 ends every process of the host at once,
which is exactly what a power loss does.

Where a kernel refuses (unprivileged user namespaces switched off, no overlayfs in a user
namespace), ``probe()`` fails in seconds with a message naming the fix - never a hang.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

INIT_SCRIPT = Path(__file__).with_name("sandbox_init.py")
UNSHARE_ARGS = ("--user", "--map-root-user", "--mount", "--pid", "--uts", "--fork")
NSENTER_ARGS = ("--user", "--mount", "--pid", "--uts", "--root", "--wd")
# How long a sandbox's PID 1 gets to build its root and say "ready": a few mounts, well under 1 s; only a failure
# waits this long, and a loaded CI runner must not turn a slow start into one.
START_TIMEOUT = 60.0
PROBE_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0
# The skeleton every host's root starts from (merged-/usr layout, as Debian 12, EL 9+, Ubuntu).
SKELETON_DIRS = {
    "root": 0o700,
    "home": 0o755,
    "tmp": 0o1777,
    "var": 0o755,
    "var/tmp": 0o1777,
    "var/log": 0o755,
    "var/lib": 0o755,
    "opt": 0o755,
    "srv": 0o755,
    "mnt": 0o755,
    "media": 0o755,
    "boot": 0o755,
    "proc": 0o555,
    "sys": 0o555,
    "dev": 0o755,
    "run": 0o755,
    "usr": 0o755,
    "etc": 0o755,
}
SKELETON_LINKS = {"bin": "usr/bin", "sbin": "usr/sbin", "lib": "usr/lib", "lib64": "usr/lib64"}
# The overlays a host's disk is made of: the mount point inside the host and its upper directory.
DISK_LAYERS = ("usr", "etc", "root")
ROOTFS_FIX = (
    "unprivileged user namespaces are switched off on this machine. Enable them as root: "
    "`sysctl -w kernel.unprivileged_userns_clone=1` (Debian), `sysctl -w user.max_user_namespaces=15000` "
    "(RHEL), or `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` (Ubuntu 24.04+), "
    "and make it permanent in /etc/sysctl.d/"
)
OVERLAY_FIX = (
    "overlayfs cannot be mounted inside a user namespace here (it needs Linux >= 5.11 and the "
    "overlay module: `modprobe overlay` as root)"
)


class SandboxUnavailable(RuntimeError):
    """The kernel or the machine cannot run the host sandboxes; the message names the fix."""


@dataclass(frozen=True)
class Tools:
    unshare: str
    nsenter: str
    python: str  # runs sandbox_init.py (stdlib only) before the root is swapped


def find_tools() -> Tools:
    unshare, nsenter = shutil.which("unshare"), shutil.which("nsenter")
    if unshare is None or nsenter is None:
        raise SandboxUnavailable(
            "the simulated hosts need util-linux's unshare and nsenter (missing here): "
            "`apt-get install util-linux` / `dnf install util-linux` as root"
        )
    return Tools(unshare, nsenter, sys.executable)


def probe(tools: Tools | None = None, timeout: float = PROBE_TIMEOUT) -> Tools:
    """Check that user+mount+PID namespaces and an overlay inside them work here; raise with the fix."""
    tools = tools or find_tools()
    with tempfile.TemporaryDirectory(prefix="metal-probe-") as tmp:
        try:
            proc = subprocess.run(
                [tools.unshare, *UNSHARE_ARGS, tools.python, str(INIT_SCRIPT), "--probe", tmp],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise SandboxUnavailable(f"the namespace probe did not finish in {timeout:g}s") from exc
    output = (proc.stdout + proc.stderr).strip()
    if proc.returncode == 0 and output.endswith("ok"):
        return tools
    if output.startswith("overlay:"):
        raise SandboxUnavailable(f"{OVERLAY_FIX} (probe said: {output})")
    raise SandboxUnavailable(f"{ROOTFS_FIX} (unshare said: {output or f'exit {proc.returncode}'})")


# ---------------------------------------------------------------------------------- the disk
class Disk:
    """A host's disk: one overlay upper (and work) directory per mounted layer, plus what was installed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.record_path = path / "installed.json"
        # The running OS's root as the lab sees it (``/proc/<PID 1>/root``) while the host is up, else None. Writes
        # into an overlay's upper directory while it is mounted are undefined (overlayfs caches what it looked up:
        # a file the OS looked for before the lab wrote it stays missing), so the lab's shims go through the mount.
        self.live: Path | None = None

    def layer(self, inside: str) -> str:
        """Which overlay a path inside the host belongs to (its upper directory holds the file)."""
        first = inside.strip("/").split("/", 1)[0]
        return first if first in ("usr", "etc") else "root"

    def upper(self, layer: str) -> Path:
        return self.path / layer / "upper"

    def work(self, layer: str) -> Path:
        return self.path / layer / "work"

    def host_path(self, inside: str) -> Path:
        """Where the lab reaches a file inside the host: through the running OS's root, else its layer's upper."""
        if self.live is not None:
            return self.live / inside.strip("/")
        layer = self.layer(inside)
        relative = inside.strip("/")
        if layer != "root":
            relative = relative.split("/", 1)[1] if "/" in relative else ""
        return self.upper(layer) / relative

    def wipe(self) -> None:
        """What partitioning does: nothing of the old installation is left."""
        for layer in DISK_LAYERS:
            shutil.rmtree(self.path / layer, ignore_errors=True)
            self.upper(layer).mkdir(parents=True)
            self.work(layer).mkdir(parents=True)
        self.record_path.unlink(missing_ok=True)

    def ensure(self) -> None:
        for layer in DISK_LAYERS:
            self.upper(layer).mkdir(parents=True, exist_ok=True)
            self.work(layer).mkdir(parents=True, exist_ok=True)

    def write(self, inside: str, content: bytes, mode: int = 0o644) -> None:
        target = self.host_path(inside)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        target.chmod(mode)

    def mkdir(self, inside: str, mode: int = 0o755) -> None:
        target = self.host_path(inside)
        target.mkdir(parents=True, exist_ok=True)
        target.chmod(mode)

    def read(self, inside: str) -> bytes | None:
        """A file as the installation left it in the upper layer (None if it is not there)."""
        try:
            return self.host_path(inside).read_bytes()
        except OSError:
            return None

    @property
    def installed(self) -> dict[str, object] | None:
        try:
            record = json.loads(self.record_path.read_text())
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) else None

    def mark_installed(self, record: dict[str, object]) -> None:
        tmp = self.record_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=2))
        tmp.replace(self.record_path)


def make_skeleton(path: Path) -> Path:
    """The lab's root skeleton (directories and merged-/usr links), shared read-only by every host."""
    path.mkdir(parents=True, exist_ok=True)
    for name, mode in SKELETON_DIRS.items():
        (path / name).mkdir(parents=True, exist_ok=True)
        (path / name).chmod(mode)
    for name, target in SKELETON_LINKS.items():
        if not (path / name).is_symlink():
            (path / name).symlink_to(target)
    return path


# ------------------------------------------------------------------------------- the sandbox
@dataclass(frozen=True)
class SandboxLayout:
    """Everything one host's sandbox mounts: lower layers, its disk, its control directory."""

    skeleton: Path
    firmware: Path  # per host: fake /sys files (DMI, NIC addresses)
    shims_usr: Path  # the shims, layered over the real /usr
    disk: Disk
    control_dir: Path  # bound at /run/metal-lab (the shims' socket)
    mountpoint: Path


class Sandbox:
    """One boot of a host's OS: PID 1 in fresh namespaces over the host's disk."""

    def __init__(self, layout: SandboxLayout, tools: Tools, *, hostname: str, boot_id: str) -> None:
        self.layout = layout
        self.tools = tools
        self.hostname = hostname
        self.boot_id = boot_id
        self._proc: subprocess.Popen[str] | None = None
        self.init_pid: int | None = None
        self._lock = threading.Lock()

    def start(self, timeout: float = START_TIMEOUT) -> None:
        layout = self.layout
        layout.disk.ensure()
        layout.mountpoint.mkdir(parents=True, exist_ok=True)
        spec = {
            "mountpoint": str(layout.mountpoint),
            "root_lower": [str(layout.firmware), str(layout.skeleton)],
            "usr_lower": [str(layout.shims_usr), "/usr"],
            "etc_lower": ["/etc"],
            "control_dir": str(layout.control_dir),
            "boot_id": self.boot_id,
            "hostname": self.hostname,
        }
        for layer in DISK_LAYERS:
            spec[f"{layer}_upper"] = str(layout.disk.upper(layer))
            spec[f"{layer}_work"] = str(layout.disk.work(layer))
        spec_path = layout.mountpoint.parent / "sandbox.json"
        spec_path.write_text(json.dumps(spec))
        proc = subprocess.Popen(
            [self.tools.unshare, *UNSHARE_ARGS, self.tools.python, str(INIT_SCRIPT), str(spec_path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._proc = proc
        line = _read_line(proc.stdout, timeout)
        if line != "ready":
            self.stop()
            raise SandboxUnavailable(f"the sandbox of {self.hostname} did not start: {line or 'no answer'}")
        self.init_pid = _only_child(proc.pid)
        if self.init_pid is None:
            self.stop()
            raise SandboxUnavailable(f"the sandbox of {self.hostname} has no PID 1")

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def root(self) -> Path:
        """The host's root as seen from the lab (``/proc/<PID 1>/root``): where SFTP works."""
        if self.init_pid is None:
            raise SandboxUnavailable("the host is not running")
        return Path(f"/proc/{self.init_pid}/root")

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run inside the host, as root of its namespaces, from its root directory."""
        if self.init_pid is None:
            raise SandboxUnavailable("the host is not running")
        return [self.tools.nsenter, "--target", str(self.init_pid), *NSENTER_ARGS, "--", *argv]

    def stop(self) -> None:
        """Power loss: PID 1 dies, and with it every process of the host."""
        with self._lock:
            proc, self._proc = self._proc, None
            pid, self.init_pid = self.init_pid, None
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=STOP_TIMEOUT)
            if proc.stdout is not None:
                proc.stdout.close()


def _read_line(stream: IO[str] | None, timeout: float) -> str:
    if stream is None:
        return ""
    result: list[str] = []
    reader = threading.Thread(target=lambda: result.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return result[0].strip() if result else ""


def _only_child(pid: int, wait: float = 2.0) -> int | None:
    """The single child of ``unshare --fork``: PID 1 of the new namespace, seen from here."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            return None
        if children:
            return int(children[0])
        time.sleep(0.01)
    return None
