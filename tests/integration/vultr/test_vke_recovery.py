"""VKE modules against the emulator: upgrades, vpc_only, create re-sends, ineligible plans, no-op cost.

Issue 3 audit follow-ups. Every run goes through real ansible-playbook; every exchange is checked
against the overlay spec by the ``emu`` fixture. Emulator switches are flipped on the running
emulator (``emu.state``), so the shared fixture stays as it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from integration.vultr._tasks import cluster_task, failing, pool_task

from lab.vultr.server import VultrEmulator

GPU_PLAN = "vcg-l40s-16c-180g-48vram"
GPU_PLAN_2 = "vcg-a16-6c-64g-16vram"
CLUSTERS = r"/kubernetes/clusters$"


def only_cluster(emu: VultrEmulator) -> dict[str, Any]:
    clusters = list(emu.clusters.values())
    assert len(clusters) == 1, [c["label"] for c in clusters]
    return clusters[0]


def pools_by_label(emu: VultrEmulator) -> dict[str, dict[str, Any]]:
    return {p["label"]: p for p in only_cluster(emu)["node_pools"]}


def posts(emu: VultrEmulator, path: str) -> int:
    return emu.request_count("POST", path)


# ---- 1. vpc_only under the override: a 500 that left a partial cluster or pool-----------------------------------


def test_vpc_only_partial_cluster_is_deleted_and_explained(vplay: Any, emu: VultrEmulator) -> None:
    emu.state.vpc_only_partial = True  # VKE creates the cluster, then answers 500
    run = vplay([failing(cluster_task("vpc", vpc_only=True, vpc_id="vpc-1", allow_vpc_only=True))])
    result = run.task("vpc")
    assert result.get("failed") is True, result
    assert "vpc_only" in result["msg"]
    assert "NAT gateway" in result["msg"]
    assert "partially created cluster" in result["msg"]
    assert result["error"]["vpc_only"] is True
    assert emu.clusters == {}  # nothing left behind...
    assert len(emu.deleted_clusters) == 1
    assert emu.deleted_clusters[0][1] is True  # ...deleted with its linked resources
    assert posts(emu, CLUSTERS) == 1  # never re-sent
    assert emu.request_count("DELETE", r"/delete-with-linked-resources$") == 1


def test_vpc_only_partial_pool_is_deleted_and_explained(vplay: Any, emu: VultrEmulator) -> None:
    run = vplay([cluster_task("cluster")])
    assert run.rc == 0, run.stdout[-3000:]
    emu.state.vpc_only_partial = True
    run = vplay([failing(pool_task("pool", label="gpu", plan=GPU_PLAN, vpc_only=True, allow_vpc_only=True))])
    result = run.task("pool")
    assert result.get("failed") is True, result
    assert "node pool 'gpu'" in result["msg"]
    assert "vpc_only" in result["msg"]
    assert "partially created pool" in result["msg"]
    assert list(pools_by_label(emu)) == ["system"]
    assert posts(emu, r"/node-pools$") == 1


# ---- 5. vpc_only reaches every pool (when VKE accepts it, under the override) ----------------------------------------


def test_vpc_only_is_passed_to_pools_and_drift_is_reported(vplay: Any, emu: VultrEmulator) -> None:
    emu.state.vpc_only_fails = False  # a VPC with a NAT gateway: VKE accepts VPC-only pools
    gpu = {"label": "gpu", "plan": GPU_PLAN}
    run = vplay(
        [
            cluster_task("cluster", vpc_only=True, vpc_id="vpc-1", node_pools=[gpu], allow_vpc_only=True),
            pool_task("inherits", label="gpu2", plan=GPU_PLAN_2, allow_vpc_only=True),
            # Inherited without the override: refused before its create (the cluster lookup is the only request).
            failing(pool_task("inherits refused", label="gpu4", plan=GPU_PLAN_2)),
            pool_task("public", label="gpu3", plan=GPU_PLAN_2, vpc_only=False),
            pool_task("drift", label="gpu3", plan=GPU_PLAN_2, vpc_only=True, allow_vpc_only=True),
            cluster_task("cluster drift", node_pools=[{**gpu, "vpc_only": False}]),
        ]
    )
    assert run.rc == 0, run.stdout[-3000:]
    pools = pools_by_label(emu)
    assert {label: p["vpc_only"] for label, p in pools.items()} == {
        "system": True,
        "gpu": True,
        "gpu2": True,
        "gpu3": False,
    }
    refused = run.task("inherits refused")
    assert refused.get("failed") is True, refused
    assert refused["error"]["field"] == "vpc_only"
    assert "YTM-97SIL" in refused["msg"]
    drift = run.task("drift")
    assert drift["changed"] is False
    assert drift["drift"] == [{"field": "vpc_only", "observed": False, "desired": True}]
    assert drift["api_requests"]["total"] == 1  # reported, never applied
    cluster_drift = run.task("cluster drift")
    assert cluster_drift["changed"] is False
    fields = {d["field"]: d for d in cluster_drift["drift"]}
    # the cluster option (default false) against the VPC-only system pool, and the pool's own value
    assert fields["vpc_only"]["observed"] is True
    assert fields["node_pools[0].vpc_only"] == {"field": "node_pools[0].vpc_only", "observed": True, "desired": False}
    assert emu.request_count("PATCH") == 0


# ---- 2. upgrades ----------------------------------------------------------------------------------


def test_upgrade_drift_invalid_target_and_valid_upgrade(vplay: Any, emu: VultrEmulator) -> None:
    run = vplay(
        [
            cluster_task("create", version="1.35"),
            cluster_task("drift", version="1.36"),
            failing(cluster_task("invalid", version="v1.99.0+1", allow_upgrade=True)),
            failing(cluster_task("invalid prefix", version="1.37", allow_upgrade=True)),
            cluster_task("upgrade", version="1.36", allow_upgrade=True),
            cluster_task("again", version="1.36", allow_upgrade=True),
            cluster_task("latest", version="latest", allow_upgrade=True),
        ]
    )
    assert run.rc == 0, run.stdout[-3000:]  # the failing tasks ignore their errors
    assert run.task("create")["cluster"]["version"] == "v1.35.6+1", run.stdout[-3000:]

    drift = run.task("drift")
    assert drift["changed"] is False
    assert {"field": "version", "observed": "v1.35.6+1", "desired": "1.36", "reason": "running version differs"} in (
        drift["drift"]
    )
    assert drift["api_requests"]["total"] == 1  # a plain comparison: no available-upgrades read

    for name in ("invalid", "invalid prefix"):
        invalid = run.task(name)
        assert invalid.get("failed") is True, invalid
        assert invalid["msg"].startswith("version: "), invalid["msg"]
        assert "available upgrades: v1.36.2+1" in invalid["msg"]
        assert invalid["error"]["available_upgrades"] == ["v1.36.2+1"]

    upgraded = run.task("upgrade")
    assert upgraded["changed"] is True
    assert upgraded["actions"] == ["upgrade v1.35.6+1 -> v1.36.2+1"]
    assert upgraded["cluster"]["version"] == "v1.36.2+1"
    again = run.task("again")
    assert again["changed"] is False
    assert again["api_requests"]["total"] == 1
    latest = run.task("latest")
    assert latest["changed"] is False
    assert latest["api_requests"]["total"] == 2  # allow_upgrade with latest: one available-upgrades read

    assert only_cluster(emu)["version"] == "v1.36.2+1"
    assert posts(emu, r"/upgrades$") == 1  # only the valid upgrade was POSTed


def test_upgrade_5xx_succeeds_only_if_it_took(vplay: Any, emu: VultrEmulator) -> None:
    run = vplay([cluster_task("create", version="1.35")])
    assert run.rc == 0, run.stdout[-3000:]
    emu.inject("500", method="POST", path=r"/upgrades$", count=1)  # refused: nothing started
    run = vplay([failing(cluster_task("refused", version="1.36", allow_upgrade=True))])
    refused = run.task("refused")
    assert refused.get("failed") is True, refused
    assert "did not start" in refused["msg"]
    assert only_cluster(emu)["version"] == "v1.35.6+1"
    emu.inject("500_applied", method="POST", path=r"/upgrades$", count=1)  # accepted, answered 500
    run = vplay([cluster_task("accepted", version="1.36", allow_upgrade=True)])
    assert run.rc == 0, run.stdout[-3000:]
    assert run.task("accepted")["cluster"]["version"] == "v1.36.2+1"
    assert posts(emu, r"/upgrades$") == 2  # one per run, never re-sent


def test_upgrade_timeout_shows_a_short_status_view(vplay: Any, emu: VultrEmulator) -> None:
    run = vplay([cluster_task("create", version="1.35", node_pools=[{"label": "gpu", "plan": GPU_PLAN}])])
    assert run.rc == 0, run.stdout[-3000:]
    emu.state.delay_scale = 1.0
    emu.state.delays.upgrade = 3600.0  # the upgrade never finishes within the task
    run = vplay([failing(cluster_task("slow", version="1.36", allow_upgrade=True, wait_timeout=3))])
    slow = run.task("slow")
    assert slow.get("failed") is True, slow
    assert "to run v1.36.2+1" in slow["msg"]
    last_seen = slow["error"]["last_seen"]
    assert last_seen["version"] == "v1.35.6+1"
    assert last_seen["status"] == "active"
    assert set(last_seen["node_pools"]) == {"system", "gpu"}
    for text in ("date_created", "endpoint", "oidc", "cluster_subnet", "plan"):
        assert text not in slow["msg"], text


# ---- 3. cost of a no-op with the default version: latest -----------------------------------------


@pytest.mark.parametrize("gpu_pools", [0, 3])
def test_noop_with_latest_costs_one_request_two_with_kubeconfig(
    vplay: Any, emu: VultrEmulator, tmp_path: Path, gpu_pools: int
) -> None:
    pools = [{"label": f"gpu{i}", "plan": GPU_PLAN, "node_quantity": 1} for i in range(gpu_pools)]
    kubeconfig = str(tmp_path / "kubeconfig")
    task = cluster_task("create", version="latest", node_pools=pools, kubeconfig_path=kubeconfig)
    run = vplay(
        [
            task,
            {**task, "name": "no-op"},
            cluster_task("no-op without kubeconfig", version="latest", node_pools=pools),
            {"name": "default version", "metalplane.inference.vke_cluster": {"label": "inf", "node_pools": pools}},
        ]
    )
    assert run.rc == 0, run.stdout[-3000:]
    noop = run.task("no-op")
    assert noop["changed"] is False
    assert noop["api_requests"]["total"] == 2  # clusters list + kubeconfig (was 3: + available-upgrades)
    assert noop["api_requests"]["by_method"] == {"GET": 2}
    for name in ("no-op without kubeconfig", "default version"):
        assert run.task(name)["changed"] is False
        assert run.task(name)["api_requests"]["total"] == 1
    assert emu.request_count("GET", r"/available-upgrades$") == 0


# ---- 4. a create POST that failed with 5xx ---------------------------------------------------------


def test_create_after_5xx_is_resent_only_when_it_did_not_take_effect(vplay: Any, emu: VultrEmulator) -> None:
    emu.inject("500", method="POST", path=CLUSTERS, count=2)  # refused twice, nothing created
    emu.inject("500_applied", method="POST", path=r"/node-pools$", count=1)  # created, answered 500
    run = vplay([cluster_task("cluster", node_pools=[{"label": "gpu", "plan": GPU_PLAN}])])
    assert run.rc == 0, run.stdout[-3000:]
    assert posts(emu, CLUSTERS) == 3  # two 500s re-read as "not created", then re-sent
    assert len(emu.clusters) == 1
    assert posts(emu, r"/node-pools$") == 1  # the re-read found the pool: never re-sent
    assert sorted(pools_by_label(emu)) == ["gpu", "system"]
    assert run.task("cluster")["api_requests"]["by_method"]["POST"] == 4


def test_create_gives_up_after_three_500s(vplay: Any, emu: VultrEmulator) -> None:
    emu.inject("500", method="POST", path=CLUSTERS, count=3)
    run = vplay([failing(cluster_task("cluster"))])
    result = run.task("cluster")
    assert result.get("failed") is True, result
    assert "POST /kubernetes/clusters" in result["msg"]
    assert "3 times" in result["msg"]
    assert emu.clusters == {}
    assert posts(emu, CLUSTERS) == 3


# ---- 6. a GPU plan sold in the region that VKE does not accept ----------------------------------


def test_ineligible_plan_names_the_plan_option(vplay: Any, emu: VultrEmulator) -> None:
    emu.state.gpu_plans = (GPU_PLAN_2,)  # GPU_PLAN is available in ewr but not VKE-eligible
    run = vplay(
        [
            failing(cluster_task("system plan", system_pool={"plan": "vc2-1c-1gb"})),
            cluster_task("cluster"),
            failing(pool_task("pool", label="gpu", plan=GPU_PLAN)),
            failing(
                cluster_task(
                    "cluster pools", node_pools=[{"label": "ok", "plan": GPU_PLAN_2}, {"label": "g", "plan": GPU_PLAN}]
                )
            ),
        ]
    )
    expected = {"system plan": "system_pool.plan", "pool": "plan", "cluster pools": "node_pools[1].plan"}
    for name, field in expected.items():
        result = run.task(name)
        assert result.get("failed") is True, (name, result)
        assert result["msg"].startswith(f"{field}: "), (name, result["msg"])
        assert "not accepted by VKE" in result["msg"]
        assert "vultr_gpu_plan_info" in result["msg"]
        assert result["error"]["kind"] == "input"
    assert sorted(pools_by_label(emu)) == ["ok", "system"]
