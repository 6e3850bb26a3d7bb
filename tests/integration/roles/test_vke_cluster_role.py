"""The vke_cluster role through real ansible-playbook against the Vultr emulator with workload twins.

Why: the role is wiring between two modules (variables -> vke_cluster with every pool -> one gpu_ready over
every pool, and the reverse order on teardown), and wiring is only proven by running it. The
emulator's twin gives every active cluster a live Kubernetes API whose nodes follow the pools (labels,
taints, GPUs of the plan), so the GPU readiness wait and the inventory fact are real too. Every
exchange is checked against the Vultr overlay spec.
"""

from __future__ import annotations

import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lab.vultr.contract import assert_no_violations, contract_or_skip
from lab.vultr.server import VultrEmulator

API_KEY = "lab-vultr-api-key"
A16 = "vcg-a16-6c-64g-16vram"
L40S = "vcg-l40s-16c-180g-48vram"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
POOLS: list[dict[str, Any]] = [
    {"name": "gpu-a16", "plan": A16, "gpu": {"type": "A16", "count": 1}, "node_quantity": 1},
    {
        "name": "gpu-l40s",
        "plan": L40S,
        "gpu": {"type": "L40S", "count": 1},
        "node_quantity": 2,
        "max_nodes": 3,
        "labels": {"team": "ml"},
    },
]
# Published by the role; read back through a debug task.
FACTS = (
    "vke_cluster_id",
    "vke_cluster_kubeconfig_path",
    "vke_cluster_gpu_inventory",
    "vke_cluster_gpu_by_pool",
    "vke_cluster_result",
)

# How the JSON report names the role's tasks.
ROLE_PREFIX = "metalplane.inference.vke_cluster : "

pytestmark = pytest.mark.slow


@pytest.fixture
def emu() -> Iterator[VultrEmulator]:
    # delay_scale 0: clusters, pools and nodes are active at once, and the twin's validator is ready at once.
    emulator = VultrEmulator(delay_scale=0.0, api_key=API_KEY, contract=contract_or_skip(), seed=7, twin=True)
    emulator.start()
    try:
        yield emulator
    finally:
        emulator.stop()
    assert emulator.internal_errors == []
    assert_no_violations(emulator)


def run_role(
    playbook: Callable[..., Any],
    emu: VultrEmulator,
    ansible_tmp: Path,
    *,
    check: bool = False,
    via_module_defaults: bool = False,
    **role_vars: Any,
) -> Any:
    """One play, one host (localhost), the role, then a task that shows the facts it published."""
    params: dict[str, Any] = {
        "vke_cluster_label": "inference-lab",
        "vke_cluster_region": "ewr",
        "vke_cluster_gpu_pools": POOLS,
        "vke_cluster_kubeconfig_dir": str(ansible_tmp / "kube"),
        "vke_cluster_wait_timeout": 60,
        "vke_cluster_gpu_wait_timeout": 30,
        **role_vars,
    }
    params = {k: v for k, v in params.items() if v is not None}
    play: dict[str, Any] = {
        "name": "vke",
        "hosts": "localhost",
        "gather_facts": False,
        "roles": [{"role": "metalplane.inference.vke_cluster", "vars": params}],
        "tasks": [
            {"name": "facts", "ansible.builtin.debug": {"msg": {f: f"{{{{ {f} | default(None) }}}}" for f in FACTS}}}
        ],
    }
    env = {"TMPDIR": str(ansible_tmp)}
    if via_module_defaults:
        # Credentials from the play's group defaults only: the role must not hide them.
        play["module_defaults"] = {
            "group/metalplane.inference.vultr": {"api_key": API_KEY, "api_endpoint": emu.endpoint}
        }
    else:
        env |= {"VULTR_API_KEY": API_KEY, "VULTR_API_ENDPOINT": emu.endpoint}
    return playbook([play], env=env, check=check, timeout=300)


def failure(run: Any) -> str:
    """The failed tasks with their messages (and those of their failed loop items)."""
    failed = [
        (
            task["task"]["name"],
            host.get("msg"),
            [r.get("msg") for r in host.get("results", []) if r.get("failed") or "exception" in r],
        )
        for play in run.report.get("plays", [])
        for task in play.get("tasks", [])
        for host in task.get("hosts", {}).values()
        if host.get("failed")
    ]
    return f"rc={run.rc} failed={failed} stderr={run.stderr[-1500:]}"


def changed_tasks(run: Any) -> list[str]:
    """Names of the changed tasks, without the role prefix."""
    return [
        task["task"]["name"].removeprefix(ROLE_PREFIX)
        for play in run.report.get("plays", [])
        for task in play.get("tasks", [])
        if task["hosts"].get("localhost", {}).get("changed")
    ]


def writes(emu: VultrEmulator) -> list[tuple[str, str]]:
    return [(r["method"], r["path"]) for r in emu.requests if r["method"] != "GET"]


def our_cluster(emu: VultrEmulator, label: str = "inference-lab") -> dict[str, Any]:
    found = [c for c in emu.clusters.values() if c["label"] == label]
    assert len(found) == 1, found
    return found[0]


def test_up_again_shrink_and_teardown(emu: VultrEmulator, playbook: Callable[..., Any], ansible_tmp: Path) -> None:
    up = run_role(playbook, emu, ansible_tmp)
    assert up.rc == 0, failure(up)

    # The cluster: system pool inline (the ownership marker), then the two GPU pools.
    cluster = our_cluster(emu)
    assert cluster["region"] == "ewr"
    pools = {p["label"]: p for p in cluster["node_pools"]}
    assert set(pools) == {"system", "gpu-a16", "gpu-l40s"}
    assert pools["gpu-a16"]["plan"] == A16
    assert pools["gpu-a16"]["tag"] == "metalplane.inference"
    assert pools["gpu-a16"]["labels"] == {"modelplane.ai/pool": "gpu-a16", "modelplane.ai/gpu": "a16"}
    assert pools["gpu-l40s"]["labels"] == {"modelplane.ai/pool": "gpu-l40s", "modelplane.ai/gpu": "l40s", "team": "ml"}
    assert (pools["gpu-l40s"]["auto_scaler"], pools["gpu-l40s"]["min_nodes"], pools["gpu-l40s"]["max_nodes"]) == (
        True,
        2,
        3,
    )
    for label in ("gpu-a16", "gpu-l40s"):
        assert [(t["key"], t["value"], t["effect"]) for t in pools[label]["taints"]] == [
            ("nvidia.com/gpu", "true", "NoSchedule")
        ]

    # The workload cluster's nodes carry the labels and the taint.
    api = emu.twin.workloads[cluster["id"]]
    nodes = api.list("v1", "Node", label_selector="modelplane.ai/pool")
    by_pool: dict[str, list[dict[str, Any]]] = {}
    for node in nodes:
        by_pool.setdefault(node["metadata"]["labels"]["modelplane.ai/pool"], []).append(node)
    assert {k: len(v) for k, v in by_pool.items()} == {"system": 1, "gpu-a16": 1, "gpu-l40s": 2}
    for pool, gpu in (("gpu-a16", "a16"), ("gpu-l40s", "l40s")):
        for node in by_pool[pool]:
            assert node["metadata"]["labels"]["modelplane.ai/gpu"] == gpu
            assert node["spec"]["taints"] == [GPU_TAINT]

    # The kubeconfig: 0600 in the 0700 directory, named after the label.
    kube_dir = ansible_tmp / "kube"
    kubeconfig = kube_dir / "inference-lab.kubeconfig"
    assert stat.S_IMODE(kube_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(kubeconfig.stat().st_mode) == 0o600
    assert api.url.split("//")[1] in kubeconfig.read_text()

    # The facts: id, path, per-node GPU inventory with the pool, per-pool summary.
    facts = up.task("facts")["msg"]
    assert facts["vke_cluster_id"] == cluster["id"]
    assert facts["vke_cluster_kubeconfig_path"] == str(kubeconfig)
    inventory = facts["vke_cluster_gpu_inventory"]
    assert {n: (i["pool"], i["count"], i["ready"]) for n, i in inventory.items()} == {
        n["metadata"]["name"]: (pool, 1, True) for pool in ("gpu-a16", "gpu-l40s") for n in by_pool[pool]
    }
    assert {i["model"] for i in inventory.values()} == {"NVIDIA-A16", "NVIDIA-L40S"}
    summary = facts["vke_cluster_gpu_by_pool"]
    assert summary["gpu-l40s"]["ready"] is True
    assert summary["gpu-l40s"]["nodes"] == sorted(n["metadata"]["name"] for n in by_pool["gpu-l40s"])
    assert summary["gpu-a16"]["inference_class_devices"]
    assert facts["vke_cluster_result"]["cluster"]["id"] == cluster["id"]
    assert "kube_config" not in str(facts["vke_cluster_result"])

    # Second run: nothing to do, and no write request.
    mark = len(emu.requests)
    again = run_role(playbook, emu, ansible_tmp)
    assert again.rc == 0, failure(again)
    assert again.changed() == 0, changed_tasks(again)
    # One vke_cluster run: the cluster list (it embeds every pool) and the kubeconfig, whatever the pool count
    # (it was 5 GETs with two pools when the role looked the cluster up and ran vke_node_pool per pool).
    assert [(r["method"], r["path"]) for r in emu.requests[mark:]] == [
        ("GET", "/v2/kubernetes/clusters"),
        ("GET", f"/v2/kubernetes/clusters/{cluster['id']}/config"),
    ]

    # The kubeconfig directory was 0700, so the second run spent no module run on it; loosened behind the role's
    # back, the next run makes it 0700 again.
    assert again.task(ROLE_PREFIX + "Create the kubeconfig directory").get("skipped") is True
    kube_dir.chmod(0o755)
    loosened = run_role(playbook, emu, ansible_tmp)
    assert loosened.rc == 0, failure(loosened)
    assert loosened.task(ROLE_PREFIX + "Create the kubeconfig directory")["changed"] is True
    assert stat.S_IMODE(kube_dir.stat().st_mode) == 0o700

    # The L40S pool is dropped from the list: with vke_cluster_remove_extra_pools it is deleted, the system pool stays.
    shrink = run_role(playbook, emu, ansible_tmp, vke_cluster_gpu_pools=POOLS[:1], vke_cluster_remove_extra_pools=True)
    assert shrink.rc == 0, failure(shrink)
    assert {p["label"] for p in our_cluster(emu)["node_pools"]} == {"system", "gpu-a16"}
    assert set(shrink.task("facts")["msg"]["vke_cluster_gpu_by_pool"]) == {"gpu-a16"}

    # Teardown: our pools first, then the cluster with its linked resources, then the kubeconfig.
    mark = len(emu.requests)
    down = run_role(playbook, emu, ansible_tmp, vke_cluster_state="absent")
    assert down.rc == 0, failure(down)
    deletes = [r["path"] for r in emu.requests[mark:] if r["method"] == "DELETE"]
    base = f"/v2/kubernetes/clusters/{cluster['id']}"
    assert deletes == [f"{base}/node-pools/{pools['gpu-a16']['id']}", f"{base}/delete-with-linked-resources"]
    assert emu.clusters == {}
    assert emu.deleted_clusters == [(cluster["id"], True)]
    assert not kubeconfig.exists()
    assert down.task("facts")["msg"]["vke_cluster_kubeconfig_path"] == ""


def test_check_mode_and_teardown_of_nothing_create_nothing(
    emu: VultrEmulator, playbook: Callable[..., Any], ansible_tmp: Path
) -> None:
    dry = run_role(playbook, emu, ansible_tmp, check=True, via_module_defaults=True)
    assert dry.rc == 0, failure(dry)
    assert "Converge VKE cluster inference-lab" in changed_tasks(dry)
    assert dry.task(ROLE_PREFIX + "Wait for the GPU stack of every pool").get("skipped") is True
    assert writes(emu) == []
    assert emu.clusters == {}
    assert not (ansible_tmp / "kube").exists()
    # The preflight read the plans even in check mode (credentials came from the play's module_defaults):
    # the region's availability and the plan catalogue, which the GPU counts were checked against.
    reads = {r["path"] for r in emu.requests if r["method"] == "GET"}
    assert {"/v2/regions/ewr/availability", "/v2/plans"} <= reads

    # Teardown of a cluster that does not exist changes nothing.
    gone = run_role(playbook, emu, ansible_tmp, vke_cluster_state="absent")
    assert gone.rc == 0, failure(gone)
    assert gone.changed() == 0, changed_tasks(gone)
    assert writes(emu) == []


@pytest.mark.parametrize(
    ("role_vars", "expected"),
    [
        ({"vke_cluster_region": None}, "vke_cluster_region"),
        ({"vke_cluster_gpu_pools": [{k: v for k, v in POOLS[0].items() if k != "plan"}]}, "plan"),
        (
            {"vke_cluster_gpu_pools": [{**POOLS[0], "gpu": {"type": "L40S", "count": 1}}]},
            "vke_cluster_gpu_pools[0]",
        ),
        ({"vke_cluster_gpu_pools": [POOLS[0], {**POOLS[1], "name": "gpu-a16"}]}, "must be unique"),
        ({"vke_cluster_label": "bad/label"}, "vke_cluster_label"),
        # Preflight (reads only): the plan has 1 GPU per node, not 2.
        ({"vke_cluster_gpu_pools": [{**POOLS[1], "gpu": {"type": "L40S", "count": 2}}]}, "has 1 GPU(s) per node"),
    ],
    ids=["no-region", "pool-without-plan", "gpu-type-not-the-plans", "duplicate-pool", "label-with-slash", "gpu-count"],
)
def test_bad_input_fails_before_anything_is_created(
    emu: VultrEmulator, playbook: Callable[..., Any], ansible_tmp: Path, role_vars: dict[str, Any], expected: str
) -> None:
    run = run_role(playbook, emu, ansible_tmp, **role_vars)
    assert run.rc != 0
    assert expected in failure(run)
    if expected == "plan":
        assert "vke_cluster_gpu_pools" in failure(run)
    assert writes(emu) == []
    assert emu.clusters == {}
    assert not (ansible_tmp / "kube").exists()
