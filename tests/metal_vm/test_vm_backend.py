"""The QEMU backend against real QEMU, without an installer: each BMC action reaches the VM (part of the lane).

Why: the short lane exercises power on, the one-time CD boot and ForceOff; this covers what it does not, in
seconds: a CD inserted and ejected while the VM runs (QMP ``blockdev-change-medium`` and ``eject``, read back
with ``query-block``), GracefulShutdown as the ACPI button (the firmware's idle guest does not power off, so
PowerState stays ``On``), and the VM's files and process gone after ``stop()``.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab.metal.identity import disk_identity
from lab.redfish.bmc import BmcSpec, BmcState
from lab.redfish.tree import Tree
from lab.vm import qmp
from lab.vm.host import QemuHost, wait_until
from lab.vm.machine import VIRTUAL_CD_ID, VmSpec
from metal_vm.conftest import Prerequisites
from metal_vm.lane import lane_processes

START_TIMEOUT = 60.0  # seconds for the BMC's power-on and QEMU's start
pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def served_image() -> Iterator[str]:
    """A 1 MiB image on a loopback HTTP server (what a BMC mounts)."""
    directory = Path(tempfile.mkdtemp(prefix="mvm-img-", dir="/tmp"))
    (directory / "disk.iso").write_bytes(b"\0" * 1024 * 1024)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/disk.iso"
    server.shutdown()
    server.server_close()
    shutil.rmtree(directory, ignore_errors=True)


def _cd(host: QemuHost) -> dict[str, Any]:
    return next(b for b in host.query(qmp.query_block()) if b.get("qdev", "").endswith(VIRTUAL_CD_ID))


def test_bmc_actions_reach_a_running_vm(prerequisites: Prerequisites, served_image: str, lane_workdir: Path) -> None:
    state = BmcState(BmcSpec(name="gen-vm", personality="generic", power_delay=0.5), delay_scale=1.0)
    tree = Tree(state)
    disk = disk_identity("gen-vm")
    workdir = lane_workdir
    spec = VmSpec(name="gen-vm", mac=state.macs[0], disk_serial=disk.serial, disk_wwn=disk.wwn, ssh_port=0)
    host = QemuHost(state, spec, workdir / "vm", prerequisites.accel).start()
    try:
        assert state.reset_system("On").status == 204
        assert wait_until(lambda: host.running, START_TIMEOUT), host.log.errors
        assert host.log.boots[-1]["device"] == "Hdd"  # the generic BMC's order: the (empty) disk
        assert host.query(qmp.query_status())["running"] is True
        assert "inserted" not in _cd(host)

        tree.finish_insert("Cd", {"Image": served_image}, served_image, None)
        assert wait_until(lambda: "inserted" in _cd(host), START_TIMEOUT), host.log.errors
        assert _cd(host)["inserted"]["file"].endswith("/media/Cd.iso")
        assert qmp.change_medium(VIRTUAL_CD_ID, workdir / "vm" / "media" / "Cd.iso") in host.log.qmp_commands

        tree.eject("Cd")
        assert wait_until(lambda: "inserted" not in _cd(host), START_TIMEOUT)
        assert qmp.eject(VIRTUAL_CD_ID) in host.log.qmp_commands
        assert not (workdir / "vm" / "media" / "Cd.iso").exists()

        assert state.reset_system("GracefulShutdown").status == 204
        assert wait_until(lambda: qmp.power_button() in host.log.qmp_commands, START_TIMEOUT)
        assert state.power_state == "On"  # the firmware's idle guest ignores the button
        assert host.running

        pid = host.pid
        assert state.reset_system("ForceOff").status == 204
        assert wait_until(lambda: not host.running, START_TIMEOUT)
        assert state.power_state == "Off"
        assert not host.log.errors
    finally:
        host.stop()
    assert not lane_processes(pid)
    assert not (workdir / "vm").exists()
