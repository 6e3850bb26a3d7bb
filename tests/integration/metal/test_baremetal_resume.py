"""A site.yml run killed (SIGKILL, like a lost controller) right after a task, then run again: one claim, one install.

Why: the bare-metal role promises that every step is resumable. A run that dies after any task and is started
again must end where an uninterrupted run ends, with exactly one claim Lease for the cluster and exactly one
install on the server (the simulated host counts its installs), and a teardown killed anywhere must still end
with the BMC off, empty, the claim released and no ISO left.

The kill comes from a test-only callback (``kill_plugins/kill_after.py``) that SIGKILLs ansible-playbook when the
named task's result comes back. Opt-in (about two minutes per kill point on a busy two-core machine, see
docs/testing/metal.md): METALPLANE_METAL_FULL=1 runs the representative kill points (``make test-metal``),
METALPLANE_METAL_KILL_MATRIX=1 every task of both task files (``make test-metal-kill-matrix``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from integration.metal.metal_site import CLUSTER, MetalLab, metal_lab
from integration.metal.test_baremetal_site import assert_provisioned, assert_torn_down

from support.figures import record

ROLE_TASKS = Path(__file__).resolve().parents[3] / "roles" / "baremetal_host" / "tasks"
FULL = os.environ.get("METALPLANE_METAL_FULL") == "1"
MATRIX = os.environ.get("METALPLANE_METAL_KILL_MATRIX") == "1"
SIGKILLED = -9
# The runs stop at the host (the role under test): what follows on the node (driver, Kubernetes, storage, adoption)
# has no kill point here and would triple each run's time. A user's --tags run is the same (docs/playbooks.md).
HOST_PHASES = "phase:preflight,phase:claim,phase:boot,phase:install,phase:recovery"
TEARDOWN_PHASES = "phase:preflight,phase:teardown,phase:wipe,phase:release"

# The representative points: after the record of the disk, a scheduled BIOS job, the recorded power-on into the
# installer (a rerun must not install again), the installer's power-off, the eject, the power-on from the disk.
PRESENT_POINTS = (
    "Record the install disk and the boot order with the claim",
    "Put the virtual CD ahead of the disk in the persistent boot order",
    "Record the install and power the server on into the installer",
    "Wait for the installer to finish (it powers the server off)",
    "Eject the virtual media",
    "Power the server on from its disk",
)
ABSENT_POINTS = (
    "Erase the file system and partition signatures of the install disk",
    "Record the wipe with the claim",
    "Restore the boot order the host had before it was claimed",
    "Power the server off (graceful, forced after the timeout)",
)


def task_names(file_name: str) -> list[str]:
    """Every task name of one of the role's task files, blocks included, in order."""

    def walk(items: list[dict[str, Any]]) -> Iterator[str]:
        for item in items:
            if "block" in item:
                yield from walk(item["block"])
            elif item.get("name"):
                yield str(item["name"])

    return list(walk(yaml.safe_load((ROLE_TASKS / file_name).read_text())))


def points(direction: str) -> list[str]:
    if MATRIX:
        return task_names(f"{direction}_redfish.yml")
    return list(PRESENT_POINTS if direction == "provision" else ABSENT_POINTS)


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (FULL or MATRIX), reason="opt-in: METALPLANE_METAL_FULL=1 or METALPLANE_METAL_KILL_MATRIX=1"
    ),
]


@pytest.fixture
def lab(ansible_tmp: Path) -> Iterator[MetalLab]:
    with metal_lab(ansible_tmp) as metal:
        yield metal


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("kill_after", points("provision"))
def test_up_killed_after_a_task_then_run_again(lab: MetalLab, kill_after: str) -> None:
    killed = lab.site(kill_after=kill_after, tags=HOST_PHASES)
    assert killed.rc in (SIGKILLED, 0), killed.stderr[-2000:]
    again = lab.site(tags=HOST_PHASES)
    assert again.rc == 0, again.stdout[-3000:] + again.stderr[-2000:]
    record_point(lab, "up", kill_after, killed.rc)
    assert_provisioned(lab, "r730-1")  # one claim, one install, the ISO gone
    assert len(lab.leases()) == 1


@pytest.mark.timeout(2400)
@pytest.mark.parametrize("kill_after", points("deprovision"))
def test_down_killed_after_a_task_then_run_again(lab: MetalLab, kill_after: str) -> None:
    order_before = lab.redfish.states["r730-1"].boot["boot_seq"]
    up = lab.site(tags=HOST_PHASES)
    assert up.rc == 0, up.stdout[-3000:]
    killed = lab.site(cluster_state="absent", kill_after=kill_after, tags=TEARDOWN_PHASES)
    assert killed.rc in (SIGKILLED, 0), killed.stderr[-2000:]
    again = lab.site(cluster_state="absent", tags=TEARDOWN_PHASES)
    assert again.rc == 0, again.stdout[-3000:] + again.stderr[-2000:]
    record_point(lab, "down", kill_after, killed.rc)
    assert_torn_down(lab, "r730-1", order_before)
    assert lab.host("r730-1")["installs"] == 1
    assert lab.held_by(CLUSTER) == []


def record_point(lab: MetalLab, direction: str, kill_after: str, rc: int) -> None:
    """The kill point's figures for make reliability (the assertions that follow fail on any of them)."""
    installs = lab.host("r730-1")["installs"]
    claims = len(lab.held_by(CLUSTER))
    power = lab.redfish.states["r730-1"].power_state
    media = sum(slot["inserted"] for slot in lab.redfish.states["r730-1"].virtual_media.values())
    expected_claims = 1 if direction == "up" else 0
    record(
        f"kill_metal_{direction}_{'_'.join(kill_after.lower().split()[:6])}",
        {
            "point": f"{direction}, after {kill_after!r}",
            "kills": int(rc == SIGKILLED),
            "converged": 1,
            "duplicates": max(installs - 1, 0),
            "orphans": len(lab.isos()) + media + int(direction == "down" and power != "Off"),
            "double claims": max(claims - expected_claims, 0),
        },
        "site.yml (the host's phases) SIGKILLed after the task, then run again; counted on the simulated host and "
        "BMC: installs beyond one (duplicates), ISOs left, media inserted, a torn-down server left on (orphans), "
        "claims beyond the cluster's one (double claims)",
    )
