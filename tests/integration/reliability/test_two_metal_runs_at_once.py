"""Two site.yml runs over one bare-metal inventory started together (issue 20, part 6), the metal twin of
test_two_runs_at_once.py.

What is at stake on this path: two runs that both saw the R730 free could each claim it, and two installs over one
BMC would fight over its virtual media and power. The durable host claim (a Lease with optimistic concurrency)
already keeps two claims from both winning; the run lock (``run_lock``, a Lease its holder renews) keeps the second
run from even starting the phases while the first is in them. The second waits in phase ``lock``, then finds the
host claimed by this cluster, installed, adopted, and changes nothing. Afterwards the lab holds exactly one claim,
one install, one InferenceCluster, no ISO and no run lock.

Slow (a whole up run, then a second that waits for it and checks everything; about four minutes on two cores):
``make reliability`` runs it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from integration.metal.metal_site import CLUSTER, MetalLab, metal_lab
from integration.metal.test_baremetal_site import assert_adopted, assert_provisioned

from support.figures import record
from support.playbook import PlaybookRun

FULL = os.environ.get("METALPLANE_RELIABILITY_FULL") == "1"
BMC = "r730-1"
LOCK_TASK = "Hold the clusters for this run, or wait for the runs that hold them"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not FULL, reason="make reliability (about 4 min)")]


@pytest.fixture
def lab(ansible_tmp: Path) -> Iterator[MetalLab]:
    with metal_lab(ansible_tmp) as metal:
        yield metal


@pytest.mark.timeout(2400)
def test_two_metal_runs_at_once_claim_and_install_once(lab: MetalLab) -> None:
    def site() -> PlaybookRun:
        return lab.site()

    with ThreadPoolExecutor(2) as pool:
        runs = [future.result() for future in [pool.submit(site), pool.submit(site)]]
    deadline = time.monotonic() + 30  # each run's renewer deletes its lock within a second or two of the run's end
    while lab.run_locks() and time.monotonic() < deadline:
        time.sleep(0.2)

    for run in runs:
        assert run.rc == 0, run.stdout[-4000:] + run.stderr[-2000:]
    locks = [run.task(LOCK_TASK, CLUSTER)["clusters"][CLUSTER] for run in runs]
    waited = sorted(locks, key=lambda lock: lock["waited_seconds"])
    assert waited[0]["waited_for"] is None
    assert waited[1]["waited_for"] == waited[0]["lock"]["holder"]
    second = runs[locks.index(waited[1])]
    inference_clusters = lab.modelplane.api.list("modelplane.ai/v1alpha1", "InferenceCluster")
    state = lab.redfish.states[BMC]
    record(
        "concurrent_two_metal_runs",
        {
            "runs": 2,
            "both succeeded": 2,
            "second waited (s)": waited[1]["waited_seconds"],
            "changes by the second after its wait": second.changed(CLUSTER),
            "host claims": len(lab.held_by(CLUSTER)),
            "installs": lab.host(BMC)["installs"],
            "InferenceClusters": len(inference_clusters),
            "ISOs left": len(lab.isos()),
            "virtual media inserts": state.counters.get("insert_media", 0),
        },
        "two site.yml up runs of the lab's bare-metal cluster (R730, iDRAC8) started together; counted on the BMC, "
        "the simulated server and the control plane afterwards",
    )
    assert_provisioned(lab, BMC)  # one claim, generation 1, one install, the ISO gone, no media inserted
    assert_adopted(lab)
    assert len(inference_clusters) == 1
    assert second.changed(CLUSTER) == 0, "after its wait the second run has nothing left to do"
    assert lab.run_locks() == []
