"""Two site.yml runs over one inventory started together (issue 20, part 6): a scheduled reconcile overlapping a
manual run.

Without a lock the two converge the same VKE cluster at once: both install the same Helm release (one fails with
"release: already exists"), and when their cluster lists interleave, both create the cluster. With site.yml's run
lock (``run_lock``) one run waits in phase ``lock`` for the other, then converges nothing. Afterwards the platforms
hold exactly the inventory: one VKE cluster, its declared pools, one InferenceCluster, one kubeconfig file (0600),
and no lock left behind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from integration.reliability.test_vke_kill_points import DECLARED_POOLS, held
from integration.reliability.vke_lab import INVENTORY, SITE, VkeLab, VkeLabContext

from support.figures import record
from support.playbook import SHORT_TMP_ROOT, PlaybookRun, run_playbook

API_KEY = "lab-vultr-api-key-two-runs"
LOCK_TASK = "Hold the clusters for this run, or wait for the runs that hold them"
# About 80 s: make reliability runs it; make test proves the lock itself with test_run_lock_lab.py (real runs, ~25 s).
FULL = os.environ.get("METALPLANE_RELIABILITY_FULL") == "1"


@pytest.mark.slow
@pytest.mark.skipif(not FULL, reason="make reliability (about 80 s)")
def test_two_runs_at_once_converge_once_and_the_second_waits_for_the_first(tmp_path: Path) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="mp-two-", dir=SHORT_TMP_ROOT))
    try:
        with VkeLabContext(tmp_path, tmp, api_key=API_KEY) as lab:

            def site() -> PlaybookRun:
                return run_playbook(SITE, inventory=INVENTORY, env=lab.env(), limit="vke_clusters", timeout=900)

            with ThreadPoolExecutor(2) as pool:
                runs = [future.result() for future in [pool.submit(site), pool.submit(site)]]
            found = held(lab)
            creates = [r for r in lab.vultr.log.entries if r["method"] == "POST"]
            deadline = time.monotonic() + 30  # each run's renewer releases its lock within a second or two
            while run_locks(lab) and time.monotonic() < deadline:
                time.sleep(0.2)
            locks_left = run_locks(lab)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for run in runs:
        assert run.rc == 0, run.stdout[-4000:] + run.stderr[-2000:]
    locks = [run.task(LOCK_TASK, "lab-ewr-1")["clusters"]["lab-ewr-1"] for run in runs]
    waited = sorted(locks, key=lambda lock: lock["waited_seconds"])
    assert waited[0]["waited_for"] is None
    assert waited[1]["waited_for"] == waited[0]["lock"]["holder"]
    second = runs[locks.index(waited[1])]
    record(
        "concurrent_two_runs",
        {
            "runs": 2,
            "both succeeded": 2,
            "second waited (s)": waited[1]["waited_seconds"],
            "changes by the second after its wait": second.changed("lab-ewr-1"),
            **{k: v for k, v in found.items() if k not in ("pools", "kubeconfigs")},
            "Vultr POSTs": len(creates),
        },
        "two site.yml up runs of the lab's VKE cluster started together; counted on the emulators afterwards",
    )
    assert found["clusters"] == 1
    assert sorted(found["pools"]) == sorted(DECLARED_POOLS)
    assert found["InferenceClusters"] == 1
    assert set(found["kubeconfigs"].values()) == {0o600}
    assert second.changed("lab-ewr-1") == 0, "after its wait the second run has nothing left to do"
    assert locks_left == []


def run_locks(lab: VkeLab) -> list[str]:
    leases = lab.mp.api.list("coordination.k8s.io/v1", "Lease", "modelplane-system")
    return [lease["metadata"]["name"] for lease in leases if lease["metadata"]["name"].startswith("metalplane-run.")]
