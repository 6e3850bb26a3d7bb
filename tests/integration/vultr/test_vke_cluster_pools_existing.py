"""``vke_cluster`` on an EXISTING cluster: ``node_pools`` checked before any write; readiness waited for.

Issue 3 audit follow-ups: an unknown plan in ``node_pools`` once reached VKE as a raw
"HTTP 400: Invalid plan" after earlier pools had already been changed; an active cluster whose pools
were still pending (an interrupted run) was not waited for. Real ansible-playbook runs against the
contract-checked emulator.
"""

from __future__ import annotations

import math
from typing import Any

from integration.vultr._tasks import cluster_task, failing

from lab.vultr.server import VultrEmulator

GPU_PLAN = "vcg-l40s-16c-180g-48vram"
GPU_PLAN_2 = "vcg-a16-6c-64g-16vram"
UNKNOWN_PLAN = "vcg-nope-1c-1g-1vram"
WRITES = ("POST", "PATCH", "PUT", "DELETE")


def gpu(label: str, plan: str = GPU_PLAN, **options: Any) -> dict[str, Any]:
    return {"label": label, "plan": plan, "node_quantity": 1, **options}


def test_node_pools_checked_before_any_write(vplay: Any, emu: VultrEmulator) -> None:
    setup = vplay([cluster_task("create", node_pools=[gpu("gpu"), gpu("gpu2", GPU_PLAN_2)])])
    assert setup.rc == 0, setup.stdout[-3000:]
    before = {p["label"]: dict(p) for p in next(iter(emu.clusters.values()))["node_pools"]}
    emu.log.clear()
    run = vplay(
        [
            failing(cluster_task("unknown plan", node_pools=[gpu("gpu3", UNKNOWN_PLAN)])),
            # pool 0 would be resized first; pool 1's plan is unknown
            failing(
                cluster_task("resize then unknown", node_pools=[gpu("gpu", node_quantity=2), gpu("g4", UNKNOWN_PLAN)])
            ),
            # a replace POSTs a pool too
            failing(cluster_task("replace to unknown", node_pools=[gpu("gpu", UNKNOWN_PLAN, replace=True)])),
            # pool 0 would be resized first; pool 1 changes its plan without replace
            failing(
                cluster_task("resize then conflict", node_pools=[gpu("gpu", node_quantity=2), gpu("gpu2", GPU_PLAN)])
            ),
        ]
    )
    for name, field in (
        ("unknown plan", "node_pools[0].plan"),
        ("resize then unknown", "node_pools[1].plan"),
        ("replace to unknown", "node_pools[0].plan"),
    ):
        result = run.task(name)
        assert result.get("failed") is True, (name, result)
        assert result["msg"].startswith(f"{field}: plan {UNKNOWN_PLAN!r} is not available in region 'ewr'"), result
        assert GPU_PLAN in result["msg"], result["msg"]  # the plans that are available are listed
        assert "HTTP 400" not in result["msg"]
    conflict = run.task("resize then conflict")
    assert conflict.get("failed") is True, conflict
    assert "replace: true" in conflict["msg"], conflict["msg"]
    assert [r for r in emu.requests if r["method"] in WRITES] == []
    after = {p["label"]: dict(p) for p in next(iter(emu.clusters.values()))["node_pools"]}
    assert after == before


def test_active_cluster_with_pending_pool_is_waited_for(vplay: Any, emu: VultrEmulator) -> None:
    setup = vplay([cluster_task("create")])
    assert setup.rc == 0, setup.stdout[-3000:]
    cluster = next(iter(emu.state.clusters.values()))
    node = cluster.node_pools[0].nodes[0]
    node.status, node.ready_at = "pending", math.inf  # an interrupted run: cluster active, node not yet
    listing = emu.state.list_clusters

    def list_then_ready() -> list[dict[str, Any]]:
        rendered = listing()
        node.ready_at = 0.0  # the module sees it pending in the list, active at its next read
        return rendered

    assert cluster.status == "active"
    emu.log.clear()
    emu.state.list_clusters = list_then_ready  # type: ignore[method-assign]
    run = vplay([cluster_task("again")])
    assert run.rc == 0, run.stdout[-3000:]
    again = run.task("again")
    assert again["changed"] is False
    assert again["cluster"]["node_pools"][0]["nodes"][0]["status"] == "active"
    assert emu.request_count("GET", rf"/kubernetes/clusters/{cluster.id}$") >= 1  # waited
    assert emu.request_count("POST") + emu.request_count("PATCH") + emu.request_count("DELETE") == 0
