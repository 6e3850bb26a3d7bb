"""VKE modules through real ansible-playbook against the VKE emulator (contract-checked).

Runs are grouped: each ansible-playbook run costs ~2 s, so one play carries several tasks and the
assertions read every task's result.
"""

from __future__ import annotations

import base64
import stat
from pathlib import Path
from typing import Any

from integration.vultr._tasks import cluster_task, failing, pool_task

from lab.vultr.server import VultrEmulator

GPU_PLAN = "vcg-l40s-16c-180g-48vram"
GPU_PLAN_2 = "vcg-a16-6c-64g-16vram"


def creating_requests(emu: VultrEmulator) -> list[dict[str, Any]]:
    """Requests that could create something (every POST)."""
    return [r for r in emu.requests if r["method"] == "POST"]


def only_cluster(emu: VultrEmulator) -> dict[str, Any]:
    clusters = list(emu.clusters.values())
    assert len(clusters) == 1, [c["label"] for c in clusters]
    return clusters[0]


def pool(emu: VultrEmulator, label: str) -> dict[str, Any]:
    return next(p for p in only_cluster(emu)["node_pools"] if p["label"] == label)


def test_cluster_lifecycle(vplay: Any, emu: VultrEmulator, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "inf.kubeconfig"
    create = cluster_task("create", kubeconfig_path=str(kubeconfig))
    run = vplay(
        [
            {**cluster_task("check create"), "check_mode": True},
            create,
            {**create, "name": "again"},
            cluster_task("drift", system_pool={"plan": "vc2-8c-32gb"}, ha_controlplanes=False),
            {"name": "info", "metalplane.inference.vke_cluster_info": {"label": "inf"}},
        ],
        diff=True,
    )
    assert run.rc == 0, run.stdout[-3000:]
    checked = run.task("check create")
    assert checked["changed"] is True
    assert checked["api_requests"]["by_method"].get("POST", 0) == 0
    created = run.task("create")
    assert created["changed"] is True
    assert created["cluster"]["status"] == "active"
    assert created["cluster"]["version"] == "v1.36.2+1"
    assert "kube_config" not in str(created)
    assert "apiVersion" not in str(created)
    system = created["cluster"]["node_pools"][0]
    assert system["tag"] == "metalplane.inference/cluster"
    assert system["labels"] == {"modelplane.ai/pool": "system"}
    assert (system["auto_scaler"], system["min_nodes"], system["max_nodes"]) == (True, 1, 2)
    assert kubeconfig.read_bytes().startswith(b"apiVersion")
    assert stat.S_IMODE(kubeconfig.stat().st_mode) == 0o600
    again = run.task("again")
    assert again["changed"] is False
    assert again["api_requests"]["total"] == 2  # cluster list + kubeconfig
    drift = run.task("drift")
    assert drift["changed"] is False
    fields = {d["field"] for d in drift["drift"]}
    assert {"system_pool.plan", "ha_controlplanes"} <= fields
    assert pool(emu, "system")["plan"] == "vc2-6c-16gb"  # create-only: reported, not applied
    info = run.task("info")
    assert [c["owned"] for c in info["clusters"]] == [True]
    assert len(creating_requests(emu)) == 1

    run = vplay([cluster_task("delete", state="absent"), cluster_task("delete again", state="absent")])
    assert run.rc == 0, run.stdout[-3000:]
    assert run.task("delete")["changed"] is True
    assert run.task("delete again")["changed"] is False
    assert emu.clusters == {}
    assert emu.deleted_clusters[-1][1] is True  # with linked resources


def test_node_pool_lifecycle(vplay: Any, emu: VultrEmulator) -> None:
    gpu = {"label": "gpu", "plan": GPU_PLAN, "node_quantity": 2}
    run = vplay(
        [
            cluster_task("cluster"),
            pool_task("create pool", **gpu),
            pool_task("again", **gpu),
            pool_task("resize", **{**gpu, "node_quantity": 3}),
            pool_task("autoscaler on", **{**gpu, "node_quantity": 3, "max_nodes": 5}),
            pool_task("autoscaler on again", **{**gpu, "node_quantity": 2, "max_nodes": 5}),
        ]
    )
    assert run.rc == 0, run.stdout[-3000:]
    created = run.task("create pool")
    assert created["changed"] is True
    gpu_pool = created["node_pool"]
    assert gpu_pool["tag"] == "metalplane.inference"
    assert gpu_pool["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert gpu_pool["labels"] == {"modelplane.ai/pool": "gpu", "modelplane.ai/gpu": "l40s"}
    assert all(n["status"] == "active" for n in gpu_pool["nodes"])
    assert run.task("again")["changed"] is False
    assert run.task("again")["api_requests"]["total"] == 1
    assert run.task("resize")["node_pool"]["node_quantity"] == 3
    on = run.task("autoscaler on")
    assert on["changed"] is True
    assert on["plan"]["patch"] == {"auto_scaler": True, "min_nodes": 3, "max_nodes": 5}
    assert (pool(emu, "gpu")["auto_scaler"], pool(emu, "gpu")["max_nodes"]) == (True, 5)
    # With the autoscaler on, node_quantity is the autoscaler's: min defaults to it, so this moves min only.
    assert run.task("autoscaler on again")["plan"]["patch"] == {"min_nodes": 2}

    # Drift made behind our back: an extra label and taint, a missing default label.
    cluster_id = only_cluster(emu)["id"]
    pool_id = pool(emu, "gpu")["id"]
    state_pool = emu.state.cluster(cluster_id).pool(pool_id)
    emu.state.update_pool(
        cluster_id, pool_id, {"labels": {"extra": "x"}, "taints": [{"key": "t", "value": "1", "effect": "NoExecute"}]}
    )
    state_pool.labels = [lb for lb in state_pool.labels if lb.key != "modelplane.ai/gpu"]
    run = vplay(
        [
            pool_task("repair", **gpu, max_nodes=5, min_nodes=2),
            pool_task("autoscaler off", **gpu),
            pool_task("plan change", label="gpu", plan=GPU_PLAN_2, node_quantity=2),
        ]
    )
    repaired = run.task("repair")
    assert repaired["changed"] is True, run.stdout[-2000:]
    assert pool(emu, "gpu")["labels"] == {"modelplane.ai/pool": "gpu", "modelplane.ai/gpu": "l40s"}
    assert pool(emu, "gpu")["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    off = run.task("autoscaler off")
    assert off["changed"] is True
    assert pool(emu, "gpu")["auto_scaler"] is False
    assert pool(emu, "gpu")["node_quantity"] == 2
    failed = run.task("plan change")
    assert failed.get("failed") is True
    assert "plan" in failed["msg"]
    assert "replace: true" in failed["msg"]

    posts_before = len(creating_requests(emu))
    run = vplay(
        [
            pool_task("replace", label="gpu", plan=GPU_PLAN_2, node_quantity=2, replace=True),
            pool_task("replace again", label="gpu", plan=GPU_PLAN_2, node_quantity=2, replace=True),
            pool_task("foreign absent", label="system", state="absent"),
            pool_task("absent", label="gpu", state="absent"),
            pool_task("absent again", label="gpu", state="absent"),
        ]
    )
    assert run.rc == 0, run.stdout[-3000:]
    replaced = run.task("replace")
    assert replaced["changed"] is True
    # (the emulator is read after the whole play, which ends by deleting the pool: use the task results)
    new_pool = replaced["node_pool"]
    assert new_pool["label"].startswith("gpu-")
    assert new_pool["plan"] == GPU_PLAN_2
    assert all(n["status"] == "active" for n in new_pool["nodes"])
    assert any(a.startswith("deleted pool gpu ") for a in replaced["actions"])
    assert run.task("replace again")["changed"] is False
    assert len(creating_requests(emu)) == posts_before + 1  # one new pool, nothing else created
    assert run.task("foreign absent")["changed"] is False
    foreign = run.task("foreign absent")
    assert foreign["skipped_pools"] == ["pool system (tag 'metalplane.inference/cluster') is not ours; left alone"]
    # Not Ansible's reserved "skipped": a list there is warned about, made True and shown as a skipped task.
    assert "skipped" not in foreign, foreign
    assert "converted to bool" not in run.stderr + run.stdout
    assert run.task("absent")["changed"] is True
    assert run.task("absent again")["changed"] is False
    assert [p["label"] for p in only_cluster(emu)["node_pools"]] == ["system"]


def test_faults_converge_without_duplicates(vplay: Any, emu: VultrEmulator) -> None:
    emu.inject("lost_response", method="POST", path=r"/kubernetes/clusters$", count=1)
    emu.inject("lost_response", method="POST", path=r"/node-pools$", count=1)
    tasks = [
        cluster_task("cluster", node_pools=[{"label": "gpu", "plan": GPU_PLAN, "max_nodes": 2}]),
        pool_task("pool", label="gpu2", plan=GPU_PLAN_2),
    ]
    run = vplay(tasks)
    assert run.rc == 0, run.stdout[-3000:]
    assert len(emu.clusters) == 1
    assert sorted(p["label"] for p in only_cluster(emu)["node_pools"]) == ["gpu", "gpu2", "system"]
    assert "found" in " ".join(run.task("cluster")["actions"])
    emu.clear_faults()
    # ~30 % of every request fails with 429/500/503; the run still converges.
    for fault in ("429", "500", "503"):
        emu.inject(fault, probability=0.1, retry_after=0)
    run = vplay(
        [
            cluster_task("cluster", node_pools=[{"label": "gpu", "plan": GPU_PLAN, "max_nodes": 3}]),
            pool_task("pool", label="gpu2", plan=GPU_PLAN_2, node_quantity=2),
            pool_task("pool3", label="gpu3", plan=GPU_PLAN_2),
        ]
    )
    emu.clear_faults()
    assert run.rc == 0, run.stdout[-3000:]
    retries = sum(run.task(t)["api_requests"]["retries"] for t in ("cluster", "pool", "pool3"))
    assert retries > 0
    assert sorted(p["label"] for p in only_cluster(emu)["node_pools"]) == ["gpu", "gpu2", "gpu3", "system"]
    assert pool(emu, "gpu")["max_nodes"] == 3
    assert pool(emu, "gpu2")["node_quantity"] == 2


def test_bad_input_fails_before_creating(vplay: Any, emu: VultrEmulator) -> None:
    run = vplay(
        [
            {**cluster_task("unknown region", region="xx1"), "ignore_errors": True},
            {**cluster_task("unknown plan", system_pool={"plan": "vc2-99c-1tb"}), "ignore_errors": True},
            {
                **cluster_task("gpu plan elsewhere", region="sea", node_pools=[{"label": "g", "plan": GPU_PLAN}]),
                "ignore_errors": True,
            },
            {**cluster_task("vpc_only", vpc_only=True), "ignore_errors": True},
            {
                **cluster_task("negative", node_pools=[{"label": "g", "plan": GPU_PLAN, "node_quantity": -1}]),
                "ignore_errors": True,
            },
            {
                **cluster_task(
                    "min>max", node_pools=[{"label": "g", "plan": GPU_PLAN, "min_nodes": 3, "max_nodes": 2}]
                ),
                "ignore_errors": True,
            },
            {**pool_task("pool min>max", label="g", plan=GPU_PLAN, min_nodes=4, max_nodes=2), "ignore_errors": True},
            {**cluster_task("bad version", version="one.two"), "ignore_errors": True},
        ]
    )
    expected = {
        "unknown region": "region",
        "unknown plan": "system_pool.plan",
        "gpu plan elsewhere": "node_pools[0].plan",
        "vpc_only": "vpc_id",
        "negative": "node_pools[0].node_quantity",
        "min>max": "node_pools[0].min_nodes",
        "pool min>max": "min_nodes",
        "bad version": "version",
    }
    for name, field in expected.items():
        result = run.task(name)
        assert result.get("failed") is True, (name, result)
        assert result["msg"].startswith(f"{field}:"), (name, result["msg"])
    assert creating_requests(emu) == []
    assert emu.clusters == {}


def test_vpc_only_refused_before_any_request(vplay: Any, emu: VultrEmulator) -> None:
    """VKE's known 500 (ticket YTM-97SIL): without the override nothing is sent, not even a read (one run, three
    tasks: the cluster's vpc_only, a pool's in vke_cluster, and vke_node_pool's)."""
    tasks = {
        "cluster": (cluster_task("cluster", vpc_only=True, vpc_id="vpc-1"), "vpc_only"),
        "cluster pool": (
            cluster_task(
                "cluster pool", vpc_id="vpc-1", node_pools=[{"label": "gpu", "plan": GPU_PLAN, "vpc_only": True}]
            ),
            "node_pools[0].vpc_only",
        ),
        "node pool": (pool_task("node pool", label="gpu", plan=GPU_PLAN, vpc_only=True), "vpc_only"),
    }
    run = vplay([failing(task) for task, _field in tasks.values()])
    for name, (_task, field) in tasks.items():
        result = run.task(name)
        assert result.get("failed") is True, result
        assert result["msg"].startswith(f"{field}: VKE fails cluster and node pool creation with vpc_only"), name
        assert "YTM-97SIL" in result["msg"]
        assert "HTTP 500" in result["msg"]
        assert result["error"]["field"] == field
    assert emu.request_count() == 0


def test_vpc_only_500_explained_and_nothing_left(vplay: Any, emu: VultrEmulator) -> None:
    run = vplay([failing(cluster_task("vpc", vpc_only=True, vpc_id="vpc-1", allow_vpc_only=True))])
    result = run.task("vpc")
    assert result.get("failed") is True
    assert "vpc_only" in result["msg"]
    assert "NAT gateway" in result["msg"]
    assert emu.clusters == {}
    assert len(creating_requests(emu)) == 1  # never replayed


def test_gpu_plan_info(vplay: Any, emu: VultrEmulator, tmp_path: Path) -> None:
    run = vplay(
        [
            {"name": "all", "metalplane.inference.vultr_gpu_plan_info": {"region": "ewr"}},
            {
                "name": "one",
                "metalplane.inference.vultr_gpu_plan_info": {"plan": [GPU_PLAN, "vcg-nope"], "region": "sea"},
            },
            cluster_task("cluster"),
            {
                "name": "kubeconfig",
                "metalplane.inference.vke_cluster_info": {"label": "inf", "kubeconfig_path": str(tmp_path / "k")},
            },
        ]
    )
    assert run.rc == 0, run.stdout[-3000:]
    plans = {p["id"]: p for p in run.task("all")["plans"]}
    assert all(pid.startswith("vcg-") for pid in plans)
    assert plans["vcg-a100-96c-960g-640vram"]["gpu_count"] == 8
    assert plans["vcg-a100-96c-960g-640vram"]["gpu_vram_gb_per_gpu"] == 80
    assert plans["vcg-l40s-16c-180g-48vram"]["available"] is True
    one = run.task("one")
    assert one["missing"] == ["vcg-nope"]
    assert one["plans"][0]["available"] is False
    assert run.task("kubeconfig")["changed"] is True
    # The file holds exactly the kubeconfig the API serves (base64 in kube_config), decoded.
    cluster_id = only_cluster(emu)["id"]
    served = base64.b64decode(emu.state.kube_config(cluster_id, emu.kubeconfig_factory), validate=True)
    assert (tmp_path / "k").read_bytes() == served
    assert f"token: lab-vke-token-{cluster_id}".encode() in served  # this cluster's, not some other text
