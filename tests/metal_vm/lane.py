"""The real-boot VM lane: a QEMU VM behind the lab's iDRAC8 boots the Debian installer ISO ``boot_iso`` builds.

Why: the simulated hosts (``lab.metal``) read an ISO and act out what it configures; only a real boot shows
that the firmware finds the edited boot paths (SeaBIOS: ISOLINUX; OVMF: shim, GRUB, the stub chain), that the
loader starts the edited entry without a menu, that debian-installer takes the preseed without a question and
configures the network the preseed names. docs/testing/metal-vm.md says what each lane proves and what it
does not (the EL and Ubuntu installers are not booted).

The flow is the collection's: ``boot_iso`` builds and serves the host's ISO, ``redfish_virtual_media``,
``redfish_boot`` (iDRAC8: Dell's SCP one-time boot from the virtual CD) and ``redfish_power`` drive the lab's
iDRAC8, whose host is a ``lab.vm.host.QemuHost``. The playbooks drive the modules directly; the
``baremetal_host`` role (not merged yet) replaces them once it is (see the note in ``playbooks/``).

``LaneFailure`` messages say what went wrong in the installer's own terms (the question it showed, the network
it configured), read from its serial console by ``lab.vm.evidence``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lab.common.emulator import LOOPBACK, free_port
from lab.metal.identity import disk_identity
from lab.redfish.bmc import BmcSpec
from lab.redfish.server import RedfishLab
from lab.vm import evidence
from lab.vm.accel import probe
from lab.vm.host import QemuHost
from lab.vm.machine import DNS, GATEWAY, GUEST_ADDRESS, OVMF_CODE, OVMF_VARS, PREFIX, QEMU, QEMU_IMG, VmSpec
from support.collection import REPO_ROOT
from support.playbook import PlaybookRun, run_playbook
from support.vm_installer_iso import INSTALLER_DIR, InstallerFilesMissing, build

PLAYBOOKS = Path(__file__).parent / "playbooks"
APT_SOURCES = REPO_ROOT / "scripts" / "k8s-real" / "apt-sources.sh"
INSTALL_COMMAND = "sudo scripts/install-vm-lane.sh (or: make metal-vm-deps as root)"
REQUIRED_ENV = "METALPLANE_VM_LANE_REQUIRED"  # set by the make targets: a missing prerequisite fails
BMC_NAME = "r730-vm"
PERSONALITY = "idrac8"
HOSTNAME = "r730-vm.lab.example"
CLUSTER = "vm-lane"
# The lab BMC's own power transition, at the emulator's realistic scale (seconds).
POWER_DELAY = 3.0
# Deadlines (seconds), TCG's on a shared two-core machine (docs/testing/metal-vm.md has the measured times).
# Each is a deadline to give up at, never a check on how long something took; each is several times what was
# measured under TCG with other engineers' tests running, so a stuck boot (a loader waiting at its menu) fails
# the short lane in minutes, not hours.
VM_START_TIMEOUT = 120.0  # power on -> the QEMU process runs (the CD's image is copied first)
INSTALLER_LOG_TIMEOUT = 1200.0  # power on -> the installer's log window (measured 125 s quiet, 475 s at load 7)
NETWORK_TIMEOUT = 600.0  # the log window -> the installer fetched from the mirror with its network (~50 s)
VERDICT_GRACE = 240.0  # after netcfg's answers: how long a connection to the mirror may take to appear
INSTALL_TIMEOUT = 2400.0  # full lane: power on -> the installer powers the VM off
OS_BOOT_TIMEOUT = 600.0  # full lane: power on from disk -> SSH answers
POLL = 2.0
LANE_TEST_TIMEOUT = 2400  # one short-lane test, whole (pytest-timeout)
FULL_LANE_TEST_TIMEOUT = 10800  # the full lane's test, whole
SCREEN_LOG_WINDOW = b"\x014"  # GNU screen: Ctrl-A 4, the installer's log window (rootskel's /etc/screenrc)
TIMINGS_DIR = REPO_ROOT / ".build" / "metal-vm" / "timings"
# Every lane test works in a fresh directory under /tmp (short: QMP's and the serial console's Unix sockets
# must fit in 108 bytes) holding OWNER_FILE, the pid of the pytest process that made it. A directory whose
# owner is gone was left by a lane that was killed before its teardown (SIGKILL, a power cut): the next
# lane session kills what it started (its QEMU, boot_iso's ISO server) and deletes it (``sweep_stale``).
WORKDIR_ROOT = Path("/tmp")
WORKDIR_PREFIX = "mvm-"
OWNER_FILE = "lane.owner"
STOP_TIMEOUT = 10.0  # seconds a left-over process gets after SIGTERM before SIGKILL


class LaneFailure(AssertionError):
    """The VM did not do what the lane proves; the message says what it did instead."""


def _unavailable(reason: str) -> None:
    """Skip with the reason (plain pytest), or fail with it under the make targets (never a silent pass)."""
    if os.environ.get(REQUIRED_ENV) == "1":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def require_qemu() -> None:
    missing = [
        str(path)
        for path in (shutil.which(QEMU), shutil.which(QEMU_IMG), OVMF_CODE, OVMF_VARS)
        if path is None or not Path(path).exists()
    ]
    if shutil.which(QEMU) is None:
        missing.insert(0, QEMU)
    if shutil.which(QEMU_IMG) is None:
        missing.insert(0, QEMU_IMG)
    missing = [m for m in missing if m != "None"]
    if missing:
        _unavailable(
            f"the VM lane needs QEMU, qemu-img and OVMF (missing: {', '.join(missing)}): run {INSTALL_COMMAND}"
        )


def installer_iso() -> Path:
    try:
        return build(INSTALLER_DIR)
    except InstallerFilesMissing as exc:
        _unavailable(str(exc))
        raise


def mirror_host() -> str:
    """The Debian mirror this machine's apt uses (``apt-sources.sh``), as the preseed's ``mirror/http/hostname``."""
    env = {**os.environ, "K8S_REAL_DEBIAN_SECURITY_MIRROR": "none"}
    proc = subprocess.run([str(APT_SOURCES), "bookworm"], capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        _unavailable(f"no Debian mirror for the installer: {proc.stderr.strip()}")
    uri = next(line.split()[1] for line in proc.stdout.splitlines() if line.startswith("deb "))
    return mirror_of(uri)


def mirror_of(uri: str) -> str:
    """``host[:port]`` of a Debian archive URI; boot_iso's preseed reads the archive at ``/debian`` on it."""
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme != "http" or parts.path.rstrip("/") != "/debian":
        _unavailable(
            f"the machine's Debian mirror {uri} is not http://<host>/debian, the only form boot_iso's preseed "
            "writes (mirror/http/hostname with /debian): set K8S_REAL_DEBIAN_MIRROR to such a mirror"
        )
    return parts.netloc


@dataclass
class Timings:
    """Seconds since the lane's start at each phase's end (written to .build/metal-vm/timings/)."""

    name: str
    started: float = field(default_factory=time.monotonic)
    phases: dict[str, float] = field(default_factory=dict)

    def mark(self, phase: str) -> None:
        self.phases[phase] = round(time.monotonic() - self.started, 1)

    def write(self, extra: dict[str, Any]) -> Path:
        TIMINGS_DIR.mkdir(parents=True, exist_ok=True)
        path = TIMINGS_DIR / f"{self.name}.json"
        path.write_text(json.dumps({"lane": self.name, "phases": self.phases, **extra}, indent=2) + "\n")
        return path


@dataclass
class Network:
    """What the lane gives ``boot_iso`` as the VM's network (the user network's, unless a test breaks it)."""

    mac: str
    address: str = GUEST_ADDRESS
    prefix: int = PREFIX
    gateway: str = GATEWAY
    dns: str = DNS

    def expected(self) -> dict[str, str]:
        """What the installer must configure for the VM's network (always the user network's values)."""
        return {"address": GUEST_ADDRESS, "gateway": GATEWAY, "nameservers": DNS, "netmask": evidence.netmask(PREFIX)}


class VmLane:
    """One lab iDRAC8 with a QEMU VM behind it, the ISO server, and the playbooks that drive them."""

    def __init__(self, workdir: Path, *, mode: str, accel: str, iso: Path, mirror: str, name: str) -> None:
        self.workdir = workdir
        self.mode = mode
        self.accel = accel
        self.iso = iso
        self.mirror = mirror
        self.timings = Timings(name)
        self.lab = RedfishLab(
            bmcs=[BmcSpec(name=BMC_NAME, personality=PERSONALITY, boot_mode=mode, power_delay=POWER_DELAY)],
            delay_scale=1.0,
            state_dir=workdir / "redfish",
        )
        self.host: QemuHost | None = None
        self.key = workdir / "id_ed25519"
        self.iso_dest = workdir / "isos" / f"{BMC_NAME}.iso"
        self.ssh_port = free_port(LOOPBACK)
        self.connections: set[evidence.Connection] = set()
        self.verdict: dict[str, Any] = {}
        self.network: Network | None = None  # what the last extra_vars() gave boot_iso

    # ------------------------------------------------------------------ set-up and teardown
    def start(self) -> VmLane:
        (self.workdir / "redfish").mkdir(parents=True, exist_ok=True)
        self.lab.start()
        bmc = self.lab.bmc(BMC_NAME)
        disk = disk_identity(BMC_NAME)
        spec = VmSpec(
            name=BMC_NAME, mac=bmc.macs[0], disk_serial=disk.serial, disk_wwn=disk.wwn, ssh_port=self.ssh_port
        )
        self.host = QemuHost(bmc, spec, self.workdir / "vm", self.accel).start()
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "vm-lane", "-f", str(self.key)], check=True
        )
        self.timings.mark("lab started")
        return self

    def stop(self) -> None:
        """Stop the VM, boot_iso's ISO server (when a test failed before the teardown playbook) and the lab."""
        try:
            if self.host is not None:
                self.host.stop()
        finally:
            for pid in iso_server_pids(self.workdir):
                _terminate(pid)
            self.lab.stop()

    @property
    def vm(self) -> QemuHost:
        assert self.host is not None
        return self.host

    def extra_vars(self, network: Network | None = None) -> dict[str, Any]:
        net = network or Network(mac=self.vm.spec.mac)
        self.network = net
        digest = subprocess.run(["sha256sum", str(self.iso)], capture_output=True, text=True, check=True)
        return {
            "bmc_url": self.lab.url(BMC_NAME),
            "bmc_username": "root",
            "bmc_password": "calvin",
            "ca_path": self.lab.ca_path,
            "vendor_iso": str(self.iso),
            "vendor_iso_checksum": "sha256:" + digest.stdout.split()[0],
            "iso_dest": str(self.iso_dest),
            "iso_cache": str(self.workdir / "iso-cache"),
            "iso_port": free_port(LOOPBACK),
            "hostname": HOSTNAME,
            "cluster": CLUSTER,
            "generation": 1,
            "boot_mac": net.mac,
            "address": f"{net.address}/{net.prefix}",
            "gateway": net.gateway,
            "dns": [net.dns],
            "disk_serial": self.vm.spec.disk_serial,
            "mirror": self.mirror,
            "authorized_key": (self.key.with_suffix(".pub")).read_text().strip(),
            "root_password_hash": _password_hash(),
            "boot_order": BOOT_ORDER[self.mode],
        }

    def playbook(self, name: str, extra: dict[str, Any]) -> PlaybookRun:
        run = run_playbook(PLAYBOOKS / name, extra_vars=extra, timeout=900)
        self.timings.mark(f"playbook {name}")
        if run.rc != 0:
            raise LaneFailure(f"{name} failed (rc {run.rc}):\n{run.stdout[-4000:]}\n{run.stderr[-2000:]}")
        return run

    # ------------------------------------------------------------------ watching the installer
    def text(self) -> str:
        return evidence.plain_text(self.vm.serial_text())

    def _poll_network(self) -> None:
        self.connections.update(evidence.usernet_connections(self.vm.monitor("info usernet")))

    def wait_for_installer_log(self, timeout: float = INSTALLER_LOG_TIMEOUT) -> None:
        """Until the serial console shows the installer's log window (switching screen to it as it starts)."""
        deadline = time.monotonic() + timeout
        last_switch = 0.0
        while time.monotonic() < deadline:
            raw = self.vm.serial_text()
            text = evidence.plain_text(raw)
            if "Linux version" in text and "kernel" not in self.timings.phases:
                self.timings.mark("kernel")
            if evidence.SCREEN_WINDOWS.search(text):
                if "installer started" not in self.timings.phases:
                    self.timings.mark("installer started")
                if evidence.showing_log(text):
                    self.timings.mark("installer log window")
                    return
                if time.monotonic() - last_switch > 15:
                    self.vm.send_serial(SCREEN_LOG_WINDOW)
                    last_switch = time.monotonic()
            self._check_alive("before the installer's log window")
            self._check_early_command(text)
            time.sleep(POLL)
        raise LaneFailure(self._stalled("no installer log window on the serial console", timeout))

    def wait_for_network(self, network: Network, timeout: float = NETWORK_TIMEOUT) -> dict[str, Any]:
        """Until the installer reached the mirror from the preseed's address, or showed why it cannot."""
        deadline = time.monotonic() + timeout
        answered_at: float | None = None
        mirror_addresses = _addresses(self.mirror)
        while time.monotonic() < deadline:
            self._check_alive("while the installer configured its network")
            self._poll_network()
            trace = evidence.installer_trace(self.text())
            used = trace.network()
            if "gateway" in used and answered_at is None:
                answered_at = time.monotonic()
                self.timings.mark("network configured")
            self._check_early_command(self.text())
            problems = evidence.nic_problems(self.vm.spec.mac, trace)
            problems += evidence.network_problems(network.expected(), used) if answered_at else []
            reached = sorted(
                {c for c in self.connections if c.destination in mirror_addresses and c.proto == "TCP"},
                key=lambda c: c.source_port,
            )
            self.verdict = {
                "network_used": used,
                "questions_shown": trace.shown,
                "dhcp_log": trace.dhcp,
                "menu_items": trace.menu_items,
                "mirror_connections": [
                    f"{c.source}:{c.source_port} -> {c.destination}:{c.destination_port}" for c in reached
                ],
            }
            overdue = answered_at is not None and time.monotonic() - answered_at > VERDICT_GRACE
            if trace.shown or trace.dhcp or overdue:
                raise LaneFailure(self._explain(problems, trace, reached))
            if reached and answered_at and not problems:
                self.timings.mark("mirror reached")
                return self.verdict
            time.sleep(POLL)
        raise LaneFailure(self._stalled("the installer never configured its network and reached the mirror", timeout))

    def _check_early_command(self, text: str) -> None:
        """Fail at once, naming the MAC, when the installer shows that a preseeded command failed."""
        if not evidence.COMMAND_FAILED.search(text):
            return
        preseed_mac = self.network.mac if self.network else self.vm.spec.mac
        problems = evidence.nic_problems(self.vm.spec.mac, evidence.installer_trace(text))
        problems = problems or evidence.mac_problems(preseed_mac, self.vm.spec.mac)
        lines = ["the installer stopped at preseed/command_failed (a preseeded command failed):"]
        lines += [f"  - {p}" for p in problems] or ["  - the MACs match: see the console"]
        raise LaneFailure("\n".join([*lines, self._tail()]))

    def _check_alive(self, when: str) -> None:
        """Fail at once when the VM stopped (its guest powered off, it crashed, or something killed it)."""
        if self.vm.running or not self.vm.log.boots:
            return
        exits = self.vm.log.exits
        reason = exits[-1]["reason"] if exits else "unknown"
        stderr = self.vm.files.directory / "qemu.stderr"
        said = stderr.read_text(errors="replace").strip()[-500:] if stderr.exists() else ""
        raise LaneFailure(f"the VM stopped {when} ({reason}); QEMU said: {said or 'nothing'}\n{self._tail()}")

    def _explain(self, problems: list[str], trace: evidence.InstallerTrace, reached: list[evidence.Connection]) -> str:
        lines = ["the installer did not reach the Debian mirror with the preseed's static network:"]
        lines += [f"  - {p}" for p in problems]
        if trace.dhcp:
            lines.append(f"  - it ran a DHCP client: {trace.dhcp[0]}")
        if trace.shown:
            lines.append(f"  - it stopped at a question: {', '.join(trace.shown)}")
        if not reached:
            lines.append(f"  - no connection from {GUEST_ADDRESS} to {self.mirror} appeared on the VM's network")
        lines.append(f"  network it configured (its own log): {trace.network()}")
        lines.append("  last lines of its serial console:")
        lines += ["    " + line for line in self.text().splitlines()[-25:]]
        return "\n".join(lines)

    def _tail(self) -> str:
        tail = "\n".join("    " + line for line in self.text().splitlines()[-30:])
        return f"last lines of the serial console:\n{tail}"

    def _stalled(self, what: str, timeout: float) -> str:
        return f"{what} within {timeout:g}s ({self.accel}); {self._tail()}"

    def wait_powered_off(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.lab.bmc(BMC_NAME).power_state == "Off" and not self.vm.running:
                return
            time.sleep(POLL * 5)
        raise LaneFailure(self._stalled("the installer did not power the VM off", timeout))


# The iDRAC8's persistent order with the disk first, as the BMC reports it per boot mode (lab.redfish.bmc):
# what the teardown restores (and, after a one-time boot, finds unchanged).
BOOT_ORDER = {
    "Bios": ["HardDisk.List.1-1", "NIC.Integrated.1-1-1", "Optical.SATAEmbedded.J-1"],
    "Uefi": ["RAID.Integrated.1-1", "NIC.PxeDevice.1-1", "Optical.SATAEmbedded.J-1"],
}


def _password_hash() -> str:
    """A sha512-crypt hash of a throw-away root password (root logs in by key only; boot_iso needs a hash)."""
    proc = subprocess.run(
        ["openssl", "passwd", "-6", "-salt", "vmlanesalt", "vm-lane-root"], capture_output=True, text=True, check=True
    )
    return proc.stdout.strip()


def _addresses(host: str) -> set[str]:
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return {info[4][0] for info in socket.getaddrinfo(name, 80, proto=socket.IPPROTO_TCP)}


def accelerator() -> tuple[str, str]:
    return probe(INSTALLER_DIR / "vmlinuz")


def make_workdir(root: Path = WORKDIR_ROOT) -> Path:
    """A fresh lane directory that names its owner (this process), for ``sweep_stale``."""
    workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX, dir=root))
    (workdir / OWNER_FILE).write_text(f"{os.getpid()}\n")
    return workdir


def stale_workdirs(root: Path, alive: Callable[[int], bool]) -> list[Path]:
    """Lane directories under ``root`` whose owner process is gone; a directory without an owner is not one."""
    stale = []
    for directory in sorted(root.glob(f"{WORKDIR_PREFIX}*")):
        try:
            owner = int((directory / OWNER_FILE).read_text().strip())
        except (OSError, ValueError):
            continue
        if not alive(owner):
            stale.append(directory)
    return stale


def _argv(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def started_by(directory: Path, pid: int, argv: Callable[[int], bytes] = _argv) -> bool:
    """Whether ``pid`` is a process of this lane directory: its command line names a file inside it.

    QEMU's names its disk, sockets and pid file; boot_iso's ISO server names the ISO. A recycled pid names
    something else, so nothing but the lane's own processes is ever signalled.
    """
    return pid > 0 and (str(directory) + "/").encode() in argv(pid)


def iso_server_pids(directory: Path) -> list[int]:
    """boot_iso's detached ISO servers under ``directory`` (their pid files sit beside the ISO) still running."""
    pids = []
    for record in directory.glob("isos/*.server.json"):
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            pid = int(json.loads(record.read_text()).get("pid", 0))
            if started_by(directory, pid):
                pids.append(pid)
    return pids


def _qemu_pids(directory: Path) -> list[int]:
    pids = []
    for pidfile in directory.glob("**/qemu.pid"):
        with contextlib.suppress(OSError, ValueError):
            pid = int(pidfile.read_text().strip())
            if started_by(directory, pid):
                pids.append(pid)
    return pids


def _terminate(pid: int) -> None:
    """SIGTERM, then SIGKILL after ``STOP_TIMEOUT`` (a process this lane started)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        while time.monotonic() < deadline and lane_processes(pid):
            time.sleep(0.2)
        if lane_processes(pid):
            os.kill(pid, signal.SIGKILL)


def lane_pids(directory: Path) -> list[int]:
    """The processes a lane directory's pid files name that still run: its QEMU and boot_iso's ISO server."""
    return _qemu_pids(directory) + iso_server_pids(directory)


def leftovers(directory: Path, pids: list[int]) -> list[str]:
    """What is left of a lane after its teardown: those of ``pids`` still running (read before the directory
    was deleted), and the directory itself with its files."""
    found = [f"process {pid}: {_argv(pid)[:120]!r}" for pid in pids if started_by(directory, pid)]
    if directory.exists():
        found.append(f"{directory} ({sum(1 for _path in directory.rglob('*'))} files)")
    return found


def sweep_stale(root: Path = WORKDIR_ROOT) -> list[Path]:
    """Kill what killed lanes left running (QEMU, the ISO server) and delete their directories."""
    swept = stale_workdirs(root, lane_processes)
    for directory in swept:
        for pid in lane_pids(directory):
            _terminate(pid)
        shutil.rmtree(directory, ignore_errors=True)
    return swept


def lane_processes(pid: int | None) -> bool:
    """Whether the process ``pid`` still exists (a QEMU the lane started)."""
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
