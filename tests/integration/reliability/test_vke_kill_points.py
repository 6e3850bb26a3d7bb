"""Kill anywhere, VKE path (issue 20, part 1): site.yml SIGKILLed with its modules, then run again to completion;
afterwards the platforms hold exactly what the inventory declares, and nothing is left behind.

Where the kills land:

- ``make test``, one lab, a chain of five kills: each run is killed when the emulators reach the next milestone of an
  up (the cluster created, a GPU pool created, Longhorn's Helm release installed, the adoption's Secret written, the
  InferenceCluster created), so the next run resumes from a killed one, five times, before a run completes.
- ``make reliability`` (``METALPLANE_VKE_KILLS=1``), a fresh lab per point: a first run of up (and of down) is
  counted in requests to the platforms (Vultr, the workload API, the control plane), and 20 up points and 10 down
  points are spread evenly over those counts, so a kill lands mid-request wherever the run spends its requests.

Counted after each: VKE clusters and their pools (exactly the declared ones, no duplicate label), InferenceClusters
(one up, none down), kubeconfig files (one, mode 0600; none after a down), Modelplane Secrets of the cluster, run
locks left on the control plane (none). Figures: ``kills K, converged C, duplicates D, orphans O``.
"""

from __future__ import annotations

import math
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from integration.reliability.vke_lab import INVENTORY, SITE, VkeLab, VkeLabContext

from support.figures import record
from support.playbook import SHORT_TMP_ROOT, PlaybookRun, run_playbook, run_playbook_killed_when

API_KEY = "lab-vultr-api-key-kills"
CLUSTER = "lab-ewr-1"
DECLARED_POOLS = {"system", "a16-1x", "l40s-1x"}  # inventories/lab: the fixed system pool and two GPU pools
SIGKILLED = -9
ALL = os.environ.get("METALPLANE_VKE_KILLS") == "1"  # set by make reliability
MP_API = "modelplane.ai/v1alpha1"
UP_POINTS = 20
DOWN_POINTS = 10
# Seconds a killed run's renewer takes to free the run lock (it checks once a second); only a failure waits this long.
LOCK_PATIENCE = 30.0


def pools(lab: VkeLab) -> list[str]:
    return [p["label"] for c in lab.vultr.clusters.values() for p in c.get("node_pools") or []]


def adopted(lab: VkeLab) -> bool:
    return any(s["metadata"]["name"].startswith(CLUSTER) for s in lab.mp.api.list("v1", "Secret", "modelplane-system"))


def longhorn_installed(lab: VkeLab) -> bool:
    workloads = list(lab.vultr.twin.workloads.values()) if lab.vultr.twin else []
    return any(
        s["metadata"]["name"].startswith("sh.helm.release.v1.longhorn.")
        for api in workloads
        for s in api.list("v1", "Secret", "longhorn-system")
    )


class Requests:
    """Requests the platforms have answered in a lab so far: Vultr, every workload API, the control plane.

    Monotonic: a deleted cluster's workload API goes away with its request log, so each API's count is remembered.
    """

    def __init__(self, lab: VkeLab) -> None:
        self.lab = lab
        self.workloads: dict[str, int] = {}

    def __call__(self) -> int:
        twin = self.lab.vultr.twin
        current: dict[str, Any] = {}
        for _attempt in range(5):  # the twin's thread may change the dict while it is copied: copy it again
            try:
                current = dict(twin.workloads) if twin else {}
                break
            except RuntimeError:
                continue
        for cluster_id, api in current.items():
            self.workloads[cluster_id] = max(self.workloads.get(cluster_id, 0), len(api.requests))
        return len(self.lab.vultr.log.entries) + len(self.lab.mp.api.requests) + sum(self.workloads.values())


# The milestones of an up, in the order a run reaches them (the make test chain kills at each in turn).
MILESTONES: dict[str, Callable[[VkeLab], bool]] = {
    "the cluster was created": lambda lab: bool(lab.vultr.clusters),
    "a GPU pool was created": lambda lab: len(pools(lab)) >= 2,
    "Longhorn's Helm release was installed": longhorn_installed,
    "the adoption's Secret was written": adopted,
    "the InferenceCluster was created": lambda lab: bool(lab.mp.api.list(MP_API, "InferenceCluster")),
}


class FreshLab:
    """A fresh VKE lab in a short temporary directory (the SSH control paths need one), removed afterwards."""

    def __init__(self, root: Path, seed: int = 0) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix="mp-kill-", dir=SHORT_TMP_ROOT))
        self.context = VkeLabContext(root, self.tmp, api_key=API_KEY, seed=seed)

    def __enter__(self) -> VkeLab:
        return self.context.__enter__()

    def __exit__(self, *exc: object) -> None:
        try:
            self.context.__exit__(*exc)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)


def site(lab: VkeLab, state: str = "present") -> PlaybookRun:
    run = run_playbook(SITE, inventory=INVENTORY, env=lab.env(), limit="vke_clusters", timeout=900, **extra(state))
    assert run.rc == 0, run.stdout[-4000:] + run.stderr[-2000:]
    return run


def site_killed_when(lab: VkeLab, when: Callable[[], bool], state: str = "present") -> PlaybookRun:
    return run_playbook_killed_when(
        SITE, when, inventory=INVENTORY, env=lab.env(), limit="vke_clusters", timeout=900, **extra(state)
    )


def extra(state: str) -> dict[str, Any]:
    return {} if state == "present" else {"extra_vars": {"cluster_state": state}}


def run_locks(lab: VkeLab) -> list[str]:
    """The run locks on the control plane once the killed and finished runs' renewers have freed theirs."""
    deadline = time.monotonic() + LOCK_PATIENCE
    while True:
        leases = lab.mp.api.list("coordination.k8s.io/v1", "Lease", "modelplane-system")
        names = [n for n in (lease["metadata"]["name"] for lease in leases) if n.startswith("metalplane-run.")]
        if not names or time.monotonic() > deadline:
            return names
        time.sleep(0.2)


def held(lab: VkeLab) -> dict[str, Any]:
    labels = pools(lab)
    kubeconfigs = sorted((lab.state / "kubeconfigs").glob("*"))
    return {
        "clusters": len(lab.vultr.clusters),
        "pools": labels,
        "duplicate pools": len(labels) - len(set(labels)),
        "InferenceClusters": len(lab.mp.api.list(MP_API, "InferenceCluster")),
        "kubeconfigs": {p.name: stat.S_IMODE(p.stat().st_mode) for p in kubeconfigs},
    }


def counted_up(lab: VkeLab) -> dict[str, Any]:
    found = held(lab)
    found["run locks"] = run_locks(lab)
    found["duplicates"] = max(found["clusters"] - 1, 0) + found["duplicate pools"]
    found["orphans"] = (
        len(set(found["pools"]) - DECLARED_POOLS)
        + max(found["InferenceClusters"] - 1, 0)
        + max(len(found["kubeconfigs"]) - 1, 0)
        + len(found["run locks"])
    )
    return found


def assert_exactly_the_inventory(found: dict[str, Any]) -> None:
    assert found["clusters"] == 1
    assert sorted(found["pools"]) == sorted(DECLARED_POOLS)
    assert found["duplicate pools"] == 0
    assert found["InferenceClusters"] == 1
    assert len(found["kubeconfigs"]) == 1, found["kubeconfigs"]
    assert set(found["kubeconfigs"].values()) == {0o600}
    assert found["run locks"] == []


def counted_down(lab: VkeLab) -> dict[str, Any]:
    secrets = [s for s in lab.mp.api.list("v1", "Secret", "modelplane-system") if CLUSTER in s["metadata"]["name"]]
    found = {
        "clusters": len(lab.vultr.clusters),
        "InferenceClusters": len(lab.mp.api.list(MP_API, "InferenceCluster")),
        "Secrets": len(secrets),
        "kubeconfigs": len(list((lab.state / "kubeconfigs").glob("*"))),
        "run locks": run_locks(lab),
    }
    found["duplicates"] = 0
    found["orphans"] = sum(v if isinstance(v, int) else len(v) for k, v in found.items() if k != "duplicates")
    return found


def figures(point: str, kills: int, found: dict[str, Any]) -> dict[str, Any]:
    return {
        "point": point,
        "kills": kills,
        "converged": 1,
        "duplicates": found["duplicates"],
        "orphans": found["orphans"],
        "double claims": 0,  # the VKE path claims nothing
    }


COUNTS = (
    "site.yml SIGKILLed (process group) at the point, then run again to completion; counted on the emulators: VKE "
    "clusters and pools beyond the inventory's (duplicates), InferenceClusters, kubeconfig files and run locks beyond "
    "it (orphans)"
)


def test_up_killed_at_five_milestones_in_a_row_then_run_again_holds_exactly_the_inventory(tmp_path: Path) -> None:
    kills = []
    with FreshLab(tmp_path) as lab:
        requests = Requests(lab)
        for milestone, reached in MILESTONES.items():
            before = requests()
            # A milestone the previous run already reached would kill this one before it did anything: wait for a
            # request of its own too.
            killed = site_killed_when(lab, lambda: reached(lab) and requests() > before)  # noqa: B023
            assert killed.rc == SIGKILLED, f"the run ended before {milestone!r}: " + killed.stdout[-2000:]
            kills.append(milestone)
        site(lab)
        found = counted_up(lab)
    record("kill_vke_chain", figures(" -> ".join(kills), len(kills), found), COUNTS)
    assert_exactly_the_inventory(found)


EVERY_POINT = [pytest.mark.slow, pytest.mark.skipif(not ALL, reason="every point: make reliability")]


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, int]]:
    """Requests a whole up and a whole down of the lab's cluster make, from one run of each on a fresh lab."""
    with FreshLab(tmp_path_factory.mktemp("profile")) as lab:
        requests = Requests(lab)
        site(lab)
        up = requests()
        site(lab, "absent")
        yield {"present": up, "absent": requests() - up}


def threshold(total: int, index: int, points: int) -> int:
    """The request count of point ``index`` (1-based) of ``points`` spread evenly over ``total`` requests."""
    return math.ceil(total * index / (points + 1))


@pytest.mark.parametrize("index", [pytest.param(i, marks=EVERY_POINT) for i in range(1, UP_POINTS + 1)])
def test_up_killed_at_a_point_then_run_again_holds_exactly_the_inventory(
    index: int, profile: dict[str, int], tmp_path: Path
) -> None:
    after = threshold(profile["present"], index, UP_POINTS)
    with FreshLab(tmp_path) as lab:
        requests = Requests(lab)
        killed = site_killed_when(lab, lambda: requests() >= after)
        assert killed.rc == SIGKILLED, f"the run ended before request {after}: " + killed.stdout[-2000:]
        site(lab)
        found = counted_up(lab)
    record(f"kill_vke_up_{index:02d}", figures(f"up, request {after} of {profile['present']}", 1, found), COUNTS)
    assert_exactly_the_inventory(found)


@pytest.mark.parametrize("index", [pytest.param(i, marks=EVERY_POINT) for i in range(1, DOWN_POINTS + 1)])
def test_down_killed_at_a_point_then_run_again_leaves_nothing(
    index: int, profile: dict[str, int], tmp_path: Path
) -> None:
    after = threshold(profile["absent"], index, DOWN_POINTS)
    with FreshLab(tmp_path) as lab:
        requests = Requests(lab)
        site(lab)
        start = requests()
        killed = site_killed_when(lab, lambda: requests() - start >= after, "absent")
        assert killed.rc == SIGKILLED, f"the down ended before request {after}: " + killed.stdout[-2000:]
        site(lab, "absent")
        found = counted_down(lab)
    record(f"kill_vke_down_{index:02d}", figures(f"down, request {after} of {profile['absent']}", 1, found), COUNTS)
    assert found["orphans"] == 0, found
