"""Fixtures of the VM lane: its prerequisites once per session, one lab iDRAC8 with a VM per test.

Why here: the lane is opt-in (``make test-metal-vm``, outside ``testpaths``); a machine without QEMU or the
installer files skips with the reason under plain pytest and fails under the make targets
(``METALPLANE_VM_LANE_REQUIRED=1``), so a missing QEMU never reads as a pass. Each test's VM and files are
removed at its end, and the test checks that they are.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from metal_vm.lane import TIMINGS_DIR, VmLane, accelerator, installer_iso, mirror_host, require_qemu


@dataclass(frozen=True)
class Prerequisites:
    iso: Path
    mirror: str
    accel: str
    accel_reason: str


@pytest.fixture(scope="session")
def prerequisites() -> Prerequisites:
    require_qemu()
    iso = installer_iso()
    mirror = mirror_host()
    accel, reason = accelerator()
    return Prerequisites(iso, mirror, accel, reason)


@pytest.fixture
def vm_lane(prerequisites: Prerequisites) -> Iterator[Callable[[str, str], VmLane]]:
    """``vm_lane(mode, name)``: a started lane (lab iDRAC8 + VM) in a short /tmp directory, stopped at the end."""
    lanes: list[tuple[VmLane, Path]] = []

    def _make(mode: str, name: str) -> VmLane:
        # Short paths: QMP's and the serial console's Unix sockets must fit in 108 bytes.
        workdir = Path(tempfile.mkdtemp(prefix="mvm-", dir="/tmp"))
        lane = VmLane(
            workdir,
            mode=mode,
            accel=prerequisites.accel,
            iso=prerequisites.iso,
            mirror=prerequisites.mirror,
            name=name,
        )
        lanes.append((lane, workdir))
        return lane.start()

    yield _make
    for lane, workdir in lanes:
        lane.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The phases each lane test measured (also in .build/metal-vm/timings/*.json)."""
    if not TIMINGS_DIR.is_dir():
        return
    import json

    files = sorted(TIMINGS_DIR.glob("*.json"))
    if files:
        terminalreporter.section("VM lane timings (seconds since the lane's start)")
        for path in files:
            data = json.loads(path.read_text())
            phases = ", ".join(f"{k} {v}" for k, v in data["phases"].items())
            terminalreporter.write_line(f"{data['lane']} [{data.get('accel')}]: {phases}")
