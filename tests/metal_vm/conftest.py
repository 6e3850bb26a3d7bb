"""Fixtures of the VM lane: its prerequisites once per session, one lab iDRAC8 with a VM per test.

Why here: the lane is opt-in (``make test-metal-vm``, outside ``testpaths``); a machine without QEMU or the
installer files skips with the reason under plain pytest and fails under the make targets
(``METALPLANE_VM_LANE_REQUIRED=1``), so a missing QEMU never reads as a pass. Each test's VM and files are
removed at its end, pass or fail, and the fixture checks that they are (an error names what is left).

Cleanup when the lane is interrupted: SIGTERM and SIGHUP (``timeout``, a CI job cancelled, a closed terminal)
raise ``KeyboardInterrupt`` as SIGINT does, so pytest still runs the fixtures' teardown; QEMU runs in a
session of its own and would otherwise outlive pytest. What a SIGKILL leaves, the next session sweeps
(``metal_vm.lane.sweep_stale``).
"""

from __future__ import annotations

import shutil
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from metal_vm.lane import (
    TIMINGS_DIR,
    VmLane,
    accelerator,
    installer_iso,
    lane_pids,
    leftovers,
    make_workdir,
    mirror_host,
    require_qemu,
    sweep_stale,
)

# Signals that end a run from outside; each becomes KeyboardInterrupt so the teardown below still runs.
INTERRUPTING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


@dataclass(frozen=True)
class Prerequisites:
    iso: Path
    mirror: str
    accel: str
    accel_reason: str


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}: stopping the VM lane")


@pytest.fixture(scope="session", autouse=True)
def interruptible() -> Iterator[None]:
    """While the lane runs, SIGTERM/SIGHUP unwind like Ctrl-C (teardown runs); what killed lanes left is swept."""
    previous = {sig: signal.signal(sig, _interrupt) for sig in INTERRUPTING_SIGNALS}
    sweep_stale()
    yield
    for sig, handler in previous.items():
        signal.signal(sig, handler)


@pytest.fixture(scope="session")
def prerequisites() -> Prerequisites:
    require_qemu()
    iso = installer_iso()
    mirror = mirror_host()
    accel, reason = accelerator()
    return Prerequisites(iso, mirror, accel, reason)


@pytest.fixture
def lane_workdir() -> Iterator[Path]:
    """A lane directory (``make_workdir``); at the end, its processes stopped and the directory deleted, checked."""
    workdir = make_workdir()
    yield workdir
    pids = lane_pids(workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    left = leftovers(workdir, pids)
    assert not left, f"the VM lane left behind: {left}"


@pytest.fixture
def vm_lane(prerequisites: Prerequisites) -> Iterator[Callable[[str, str], VmLane]]:
    """``vm_lane(mode, name)``: a started lane (lab iDRAC8 + VM) in a short /tmp directory, stopped at the end."""
    lanes: list[tuple[VmLane, Path]] = []

    def _make(mode: str, name: str) -> VmLane:
        workdir = make_workdir()
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

    try:
        yield _make
    finally:
        left = []
        for lane, workdir in lanes:
            pids = lane_pids(workdir)
            try:
                lane.stop()
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
            left += leftovers(workdir, pids)
        assert not left, f"the VM lane left behind: {left}"


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
