"""The full VM lane (``make test-metal-vm-full``): install Debian from the mirror, boot it from disk, log in.

The short lane's start, then the whole installation (partitioning the disk found by its serial number, the
base system and packages from the Debian mirror, GRUB, the late command with the keys and the marker), the
installer's own power-off, then through the modules: eject, power on from the disk; SSH reaches the installed
system through the VM's loopback port forward with the lane's key, the host key is the one boot_iso pinned,
and ``/etc/metalplane/provisioned`` carries the generation; then the teardown. BIOS only: the UEFI boot path
is the short lane's, and the installation is the same.
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from lab.vm.machine import GUEST_ADDRESS
from metal_vm.lane import (
    BMC_NAME,
    FULL_LANE_TEST_TIMEOUT,
    INSTALL_TIMEOUT,
    OS_BOOT_TIMEOUT,
    LaneFailure,
    Network,
    VmLane,
    lane_processes,
)

# pytest-timeout's 300 s default (pyproject.toml) is far below a boot under TCG.
pytestmark = pytest.mark.timeout(FULL_LANE_TEST_TIMEOUT)
# The stand-in kernel module's DKMS package (its dkms.conf names it), copied to /usr/src/<name>-<version>.
STANDIN = Path(__file__).parent / "standin"
STANDIN_PACKAGE = "metalplane-standin/1.0"
DKMS_TIMEOUT = 900  # seconds: compiling one small module under TCG
# What the nvidia_driver role needs from the installed system before it runs the NVIDIA installer (boot_iso's
# Debian packages): the running kernel's headers, DKMS and a compiler; proved by a DKMS build and a load.
DKMS_BUILD = f"""set -e
test -d /lib/modules/$(uname -r)/build
dpkg-query -W -f='${{Package}} ${{Status}}\\n' dkms gcc make "linux-headers-$(uname -r)"
dkms add {STANDIN_PACKAGE}
dkms install {STANDIN_PACKAGE} -k "$(uname -r)"
modprobe metalplane_standin
grep '^metalplane_standin ' /proc/modules
"""


def _standin_tar() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(STANDIN.iterdir()):
            tar.add(path, arcname=path.name)
    return buffer.getvalue()


def _ssh(
    lane: VmLane, known_hosts: str, command: str, stdin: bytes | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [
            "ssh",
            "-i",
            str(lane.key),
            "-p",
            str(lane.ssh_port),
            "-o",
            f"UserKnownHostsFile={known_hosts}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "ConnectTimeout=10",
            "-o",
            "BatchMode=yes",
            "root@127.0.0.1",
            command,
        ],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        timeout=timeout,
        check=False,
    )


def test_install_boot_from_disk_and_log_in(vm_lane: Callable[[str, str], VmLane]) -> None:
    lane = vm_lane("Bios", "full-bios")
    run = lane.playbook("provision.yml", lane.extra_vars())
    public_key = run.task("Installer ISO for the host (served to the BMC)")["ssh_host_public_key"]
    lane.wait_for_installer_log()
    lane.wait_for_network(Network(mac=lane.vm.spec.mac))
    lane.wait_powered_off(INSTALL_TIMEOUT)
    lane.timings.mark("installed and powered off")
    assert lane.vm.log.exits[-1]["reason"] == "guest-shutdown", lane.vm.log.exits

    extra = lane.extra_vars()
    lane.playbook("boot_disk.yml", extra)
    assert lane.vm.log.boots[-1]["device"] == "Hdd", lane.vm.log.boots[-1]
    known_hosts = lane.workdir / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{lane.ssh_port} {' '.join(public_key.split()[:2])}\n")
    deadline = time.monotonic() + OS_BOOT_TIMEOUT
    result = _ssh(lane, str(known_hosts), "cat /etc/metalplane/provisioned; ip -4 -o addr show; hostname")
    while result.returncode != 0 and time.monotonic() < deadline:
        time.sleep(10)
        result = _ssh(lane, str(known_hosts), "cat /etc/metalplane/provisioned; ip -4 -o addr show; hostname")
    if result.returncode != 0:
        raise LaneFailure(f"no SSH login within {OS_BOOT_TIMEOUT:g}s: {result.stderr!r}\n{lane.text()[-3000:]}")
    lane.timings.mark("ssh with the key")
    out = result.stdout.decode()
    marker = json.loads(out.splitlines()[0])
    assert marker == {"cluster": "vm-lane", "generation": 1, "hostname": "r730-vm.lab.example"}
    assert f"inet {GUEST_ADDRESS}/24" in out  # the installed system kept the static address

    source = f"/usr/src/{STANDIN_PACKAGE.replace('/', '-')}"
    copied = _ssh(lane, str(known_hosts), f"mkdir -p {source} && tar -x -C {source}", stdin=_standin_tar())
    assert copied.returncode == 0, copied.stderr
    built = _ssh(lane, str(known_hosts), DKMS_BUILD, timeout=DKMS_TIMEOUT)
    assert built.returncode == 0, f"DKMS build of the stand-in module failed:\n{built.stdout!r}\n{built.stderr!r}"
    lane.timings.mark("dkms build and load")

    pid = lane.vm.pid
    teardown = lane.playbook("teardown.yml", lane.extra_vars())
    assert teardown.task("Power off")["changed"]
    assert lane.lab.bmc(BMC_NAME).power_state == "Off"
    lane.stop()
    assert not lane_processes(pid)
    assert not lane.vm.files.directory.exists()
    lane.timings.mark("torn down")
    lane.timings.write({"accel": lane.accel, "mode": "Bios"})
