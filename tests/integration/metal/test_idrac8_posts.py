"""How many times an R730 POSTs from power-on to a reachable node, by the persistent boot order it starts with.

Why: each POST of an R730 costs minutes, and on an iDRAC8 every change of the persistent boot order is a BIOS job
that the Lifecycle Controller applies in a POST of its own before it resets the server. The install needs the
virtual CD ahead of the disk (its one-time boot can lose to an OS already on the disk); once there, it stays until
the teardown restores the recorded order, so a server whose order is already right POSTs twice, the installer's and
the installed system's, as the issue's goal asks. ``baremetal_host_disk_first_after_install`` buys the disk-first
order back between install and teardown at the price of one more job and POST; the lifecycle test
(test_baremetal_site.py) covers the default from a disk-first order: three POSTs.

Only the host's phases run (about a minute each on two cores). The teardown's restore is a BIOS job too, waiting
for the next power-on, which is the next claim's install: the last test (``make test-metal``, about 2 minutes) takes
the R730 up, down, up and down, and the second claim must restore the order the server had before the first.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from integration.metal.metal_site import CLUSTER, MetalLab, metal_lab, single_host_inventory
from integration.metal.test_baremetal_site import assert_provisioned, task

from ansible_collections.metalplane.inference.plugins.module_utils._metal.claims import PROVISIONING_ANNOTATION
from lab.redfish.bmc import VIRTUAL_CD_DEVICE, BmcState
from support.figures import record

BMC = "r730-1"
HOST_PHASES = "phase:preflight,phase:lock,phase:claim,phase:boot,phase:install,phase:recovery"
TEARDOWN_PHASES = "phase:preflight,phase:lock,phase:teardown,phase:wipe,phase:release"
METAL_FULL = os.environ.get("METALPLANE_METAL_FULL") == "1"
VIRTUAL_CD_FIRST = "Put the virtual CD ahead of the disk in the persistent boot order"
DISK_FIRST = "Put the disk first in the persistent boot order"


@pytest.fixture
def lab(ansible_tmp: Path) -> Iterator[MetalLab]:
    with metal_lab(ansible_tmp) as metal:
        yield metal


def bios_jobs(state: BmcState) -> int:
    return sum(job["JobType"] == "BIOSConfiguration" for job in state.jobs.values())


def changed(run: object, name: str) -> bool:
    return bool(task(run, name).get("changed"))


@pytest.mark.timeout(1200)
def test_an_r730_whose_order_is_already_right_posts_twice(lab: MetalLab, tmp_path: Path) -> None:
    state = lab.redfish.states[BMC]
    state.put_first_in_boot_seq("VirtualCD")  # as the reference deployment's unstick-vmedia-boot operation leaves it
    run = lab.site(inventory=single_host_inventory(tmp_path, BMC), tags=HOST_PHASES)
    assert run.rc == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert_provisioned(lab, BMC)
    posts = lab.host(BMC)["posts"]
    assert posts == ["VirtualCD", "Hdd"], posts  # the installer's, then the installed system's
    assert not changed(run, VIRTUAL_CD_FIRST)
    assert not changed(run, DISK_FIRST)
    assert bios_jobs(state) == 0  # the one-time boot is an SCP import (an iDRAC attribute), applied without a POST
    assert state.boot["boot_seq"][0] == VIRTUAL_CD_DEVICE
    record(
        "posts_idrac8_order_right",
        {"POSTs": len(posts), "BIOS jobs": bios_jobs(state)},
        "the host's phases of site.yml on the lab's R730 (iDRAC8) whose persistent order already has the virtual CD "
        "ahead of the disk: POSTs from the power-on to the node answering SSH, counted by the simulated server",
    )


@pytest.mark.slow
@pytest.mark.skipif(not METAL_FULL, reason="make test-metal (about 90 s)")
@pytest.mark.timeout(1200)
def test_the_disk_first_after_the_install_costs_one_job_and_one_post(lab: MetalLab, tmp_path: Path) -> None:
    state = lab.redfish.states[BMC]
    inventory = single_host_inventory(tmp_path, BMC)
    run = lab.site(inventory=inventory, tags=HOST_PHASES, baremetal_host_disk_first_after_install=True)
    assert run.rc == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert_provisioned(lab, BMC)
    posts = lab.host(BMC)["posts"]
    assert posts == ["bios-settings", "VirtualCD", "bios-settings", "Hdd"], posts
    assert changed(run, VIRTUAL_CD_FIRST)
    assert changed(run, DISK_FIRST)
    assert state.boot["boot_seq"][0] == "HardDisk.List.1-1", state.boot
    assert bios_jobs(state) == 2

    again = lab.site(inventory=inventory, tags=HOST_PHASES, baremetal_host_disk_first_after_install=True)
    assert again.rc == 0, again.stdout[-4000:]
    assert again.changed(CLUSTER) == 0, again.stdout[-3000:]  # the disk stays first: verified, nothing changed
    assert lab.host(BMC)["posts"] == posts


@pytest.mark.slow
@pytest.mark.skipif(not METAL_FULL, reason="make test-metal (about 2 min)")
@pytest.mark.timeout(2400)
def test_the_next_claim_restores_the_order_the_first_found(lab: MetalLab, tmp_path: Path) -> None:
    state = lab.redfish.states[BMC]
    original = state.boot["boot_seq"]  # disk first, as the server came
    inventory = single_host_inventory(tmp_path, BMC)
    recorded: list[list[str]] = []
    for direction in ("up", "down", "up", "down"):
        extra = {"cluster_state": "absent"} if direction == "down" else {}
        run = lab.site(inventory=inventory, tags=HOST_PHASES if direction == "up" else TEARDOWN_PHASES, **extra)
        assert run.rc == 0, f"{direction}: " + run.stdout[-3000:] + run.stderr[-2000:]
        if direction == "up":
            (claim,) = lab.held_by(CLUSTER)
            recorded.append(json.loads(claim["metadata"]["annotations"][PROVISIONING_ANNOTATION])["boot_order"])
        else:  # the restore waits for the next power-on as a scheduled job
            assert state.boot["pending_boot_seq"] == original, state.boot
    assert recorded == [original, original]  # the second claim read the order the next POST applies
    assert lab.host(BMC)["installs"] == 2
    assert lab.host(BMC)["posts"] == ["bios-settings", "VirtualCD", "Hdd"] * 2, lab.host(BMC)["posts"]
