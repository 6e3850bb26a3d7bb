"""Kill anywhere, VKE path (issue 20, part 1): site.yml SIGKILLed with its modules at a point of the up run, then run
again to completion; afterwards the platforms hold exactly what the inventory declares.

A point is a condition on the emulators' own state (the cluster exists, a GPU pool exists, the control plane holds
the adoption's Secret), so the kill lands mid-run wherever the time goes, with whatever request is in flight. After
the second run: one VKE cluster for the inventory cluster, its pools exactly the declared ones (the system pool and
the GPU pools, no duplicate of a label), one InferenceCluster and no other, one kubeconfig file, mode 0600.
``make test`` runs the first point; ``make reliability`` runs every point (about a minute each).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from integration.reliability.vke_lab import INVENTORY, SITE, VkeLab, VkeLabContext

from support.figures import record
from support.playbook import SHORT_TMP_ROOT, run_playbook, run_playbook_killed_when

API_KEY = "lab-vultr-api-key-kills"
CLUSTER = "lab-ewr-1"
DECLARED_POOLS = {"system", "a16-1x", "l40s-1x"}  # inventories/lab: the fixed system pool and two GPU pools
SIGKILLED = -9
ALL = os.environ.get("METALPLANE_VKE_KILLS") == "1"  # set by make reliability
MP_API = "modelplane.ai/v1alpha1"


def pools(lab: VkeLab) -> list[str]:
    return [p["label"] for c in lab.vultr.clusters.values() for p in c.get("node_pools") or []]


def adopted(lab: VkeLab) -> bool:
    return any(s["metadata"]["name"].startswith(CLUSTER) for s in lab.mp.api.list("v1", "Secret", "modelplane-system"))


POINTS: dict[str, Callable[[VkeLab], bool]] = {
    "the cluster was created": lambda lab: bool(lab.vultr.clusters),
    "a GPU pool was created": lambda lab: len(pools(lab)) >= 2,
    "the adoption's Secret was written": adopted,
}


EVERY_POINT = [pytest.mark.slow, pytest.mark.skipif(not ALL, reason="every point: make reliability")]


@pytest.mark.parametrize(
    "point", [pytest.param(name, marks=[] if index == 0 else EVERY_POINT) for index, name in enumerate(POINTS)]
)
def test_up_killed_at_a_point_then_run_again_holds_exactly_the_inventory(point: str, tmp_path: Path) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="mp-kill-", dir=SHORT_TMP_ROOT))
    try:
        with VkeLabContext(tmp_path, tmp, api_key=API_KEY) as lab:
            killed = run_playbook_killed_when(
                SITE,
                lambda: POINTS[point](lab),
                inventory=INVENTORY,
                env=lab.env(),
                limit="vke_clusters",
                timeout=900,
            )
            assert killed.rc == SIGKILLED, f"the run ended before {point!r}: " + killed.stdout[-2000:]
            again = run_playbook(SITE, inventory=INVENTORY, env=lab.env(), limit="vke_clusters", timeout=900)
            assert again.rc == 0, again.stdout[-4000:] + again.stderr[-2000:]
            found = held(lab)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    record(
        f"kill_vke_{list(POINTS).index(point) + 1}",
        {
            "point": point,
            "kills": 1,
            "converged": 1,
            **{k: v for k, v in found.items() if k not in ("pools", "kubeconfigs")},
            "kubeconfigs": {name: f"{mode:04o}" for name, mode in found["kubeconfigs"].items()},
        },
        "site.yml up of the lab's VKE cluster SIGKILLed (process group) when the point held, then run again; counted "
        "on the emulators: clusters, pools, InferenceClusters, kubeconfig files",
    )
    assert found["clusters"] == 1
    assert sorted(found["pools"]) == sorted(DECLARED_POOLS)
    assert found["duplicate pools"] == 0
    assert found["InferenceClusters"] == 1
    assert len(found["kubeconfigs"]) == 1, found["kubeconfigs"]
    assert set(found["kubeconfigs"].values()) == {0o600}


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
