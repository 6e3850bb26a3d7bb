"""The modelplane_adopt role through real ansible-playbook: a VKE twin adopted into the Modelplane emulator.

Why: adoption is wiring across two APIs (the workload cluster's GPU inventory and DRA slices, the
control plane's Secret, classes and InferenceCluster) plus a guarded teardown; only running it proves
the order, the idempotence, check mode and the ModelReplica guard. Every InferenceClass and
InferenceCluster the runs write is checked against Modelplane's XRD schemas (the shared reference).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from lab.modelplane.server import ModelplaneEmulator, model_replica
from lab.vultr.contract import assert_no_violations, contract_or_skip
from lab.vultr.server import VultrEmulator
from lab.vultr.twin import workload_for

REPO = Path(__file__).resolve().parents[3]
MP = "modelplane.ai/v1alpha1"
NS = "modelplane-system"
AUTH = {"Authorization": "Bearer lab-vultr-api-key"}
CLUSTER = "vke-ewr-1"
CLASS = "l40s-1x"
MANAGED = {"app.kubernetes.io/managed-by": "metalplane.inference"}
# Task names as the JSON callback reports them (role-prefixed).
ROLE = "metalplane.inference.modelplane_adopt : "
ADOPT = ROLE + "Adopt the cluster (kubeconfig Secret, InferenceClasses, InferenceCluster) and wait until it serves"
UNADOPT = ROLE + "Un-adopt the cluster (InferenceCluster, then its Secret and the classes no other cluster uses)"
DRA_CHECK = ROLE + "Wait until the DRA driver publishes each pool's GPUs as its class describes them"
PLURALS = {"InferenceClass": "inferenceclasses", "InferenceCluster": "inferenceclusters"}
LABEL_POOL = ROLE + "Label the workload nodes of each pool with modelplane.ai/pool"
UNPLANNABLE = ROLE + "Say why a dry run cannot plan classes generated from nodes it labels"
# What the NVIDIA DRA driver publishes for these GPUs (lab.kube.gpu's table, as the twin's slices do).
L40S_ATTRIBUTES = {
    "productName": {"string": "NVIDIA L40S"},
    "architecture": {"string": "Ada Lovelace"},
    "cudaComputeCapability": {"version": "8.9.0"},
}
A16_ATTRIBUTES = {
    "productName": {"string": "NVIDIA A16"},
    "architecture": {"string": "Ampere"},
    "cudaComputeCapability": {"version": "8.6.0"},
}

pytestmark = pytest.mark.slow


def _xrd_validator() -> Any:
    """tests/unit/.../modelplane_xrd.py (the offline XRD validator), loaded by path."""
    path = REPO / "tests" / "unit" / "plugins" / "module_utils" / "_modelplane" / "modelplane_xrd.py"
    spec = importlib.util.spec_from_file_location("modelplane_xrd_for_roles", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Writes:
    """Every InferenceClass/InferenceCluster/Secret write the control plane applied, as (event, kind, object)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def __call__(self, rtype: Any, event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if rtype.kind in (*PLURALS, "Secret"):
            with self._lock:
                self.events.append((event, rtype.kind, obj))

    def mark(self) -> int:
        with self._lock:
            return len(self.events)

    def since(self, mark: int) -> list[tuple[str, str, dict[str, Any]]]:
        with self._lock:
            return list(self.events[mark:])


def twin_lab(
    tmp_path: Path, *, plan: str, pool_labels: dict[str, str]
) -> Iterator[tuple[ModelplaneEmulator, Any, Path, Writes]]:
    """The Modelplane emulator and a VKE twin cluster with one 2-node GPU pool of ``plan`` (a fixture body:
    fixtures delegate with ``yield from``, so pytest's teardown runs its cleanup)."""
    with (
        ModelplaneEmulator(delay_scale=0.0, backend_ready_after=0.0) as mp,
        VultrEmulator(delay_scale=0.0, contract=contract_or_skip(), twin=True, validator_ready_after=0) as vultr,
    ):
        writes = Writes()
        mp.api.server_api.on_write.append(writes)
        pool = {"node_quantity": 2, "label": "gpu", "plan": plan, "labels": pool_labels}
        body = {"label": CLUSTER, "region": "ewr", "version": "v1.35.6+1", "node_pools": [pool]}
        created = requests.post(vultr.base_url + "/kubernetes/clusters", json=body, headers=AUTH, timeout=10)
        vke = created.json()["vke_cluster"]["id"]
        reply = requests.get(f"{vultr.base_url}/kubernetes/clusters/{vke}/config", headers=AUTH, timeout=10)
        kubeconfig = base64.b64decode(reply.json()["kube_config"]).decode()
        path = tmp_path / "workload.kubeconfig"
        path.write_text(kubeconfig)
        path.chmod(0o600)
        workload = workload_for(yaml.safe_load(kubeconfig)["clusters"][0]["cluster"]["server"])
        assert workload is not None
        deadline = time.monotonic() + 10
        while len(workload.list("v1", "Node", label_selector="nvidia.com/gpu.present=true")) < 2:
            assert time.monotonic() < deadline, "the twin never created the pool's nodes"
            time.sleep(0.1)
        yield mp, workload, path, writes
        assert mp.errors == []
    assert_no_violations(vultr)


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[tuple[ModelplaneEmulator, Any, Path, Writes]]:
    """An L40S pool whose VKE node pool labels its nodes modelplane.ai/pool=l40s."""
    yield from twin_lab(tmp_path, plan="vcg-l40s-16c-180g-48vram", pool_labels={"modelplane.ai/pool": "l40s"})


@pytest.fixture
def unlabelled_lab(tmp_path: Path) -> Iterator[tuple[ModelplaneEmulator, Any, Path, Writes]]:
    """An A16 pool whose nodes carry no modelplane.ai/pool label (a cluster built without it)."""
    yield from twin_lab(tmp_path, plan="vcg-a16-6c-64g-16vram", pool_labels={})


def run_role(
    playbook: Callable[..., Any],
    mp: ModelplaneEmulator,
    workload_kubeconfig: Path,
    ansible_tmp: Path,
    *,
    check: bool = False,
    timeline: Path | None = None,
    **role_vars: Any,
) -> Any:
    params = {
        "modelplane_kubeconfig": str(mp.kubeconfig_path),
        "modelplane_workload_kubeconfig": str(workload_kubeconfig),
        "modelplane_node_pools": [{"name": "l40s", "class_name": CLASS, "node_count": 2}],
        "modelplane_labels": {"modelplane.ai/region": "ewr"},
        "modelplane_wait_timeout": 30,
        **role_vars,
    }
    plays = [
        {
            "name": "adoption",
            "hosts": CLUSTER,
            "gather_facts": False,
            "roles": [{"role": "metalplane.inference.modelplane_adopt", "vars": params}],
        }
    ]
    env = {"TMPDIR": str(ansible_tmp)}
    if timeline is not None:
        env.update(ANSIBLE_CALLBACKS_ENABLED="metalplane.inference.timeline", METALPLANE_TIMELINE_DIR=str(timeline))
    return playbook(plays, inventory=f"{CLUSTER},", env=env, check=check, timeout=300)


def phase_tasks(timeline: Path) -> dict[str, int]:
    """Tasks per phase of the cluster, from the timeline callback's report."""
    report = json.loads((timeline / "timeline.json").read_text())
    return {phase: record["tasks"] for phase, record in report["clusters"][CLUSTER]["phases"].items()}


def failure(run: Any) -> str:
    failed = [
        (task["task"]["name"], host.get("msg"))
        for play in run.report.get("plays", [])
        for task in play.get("tasks", [])
        for host in task.get("hosts", {}).values()
        if host.get("failed")
    ]
    return f"rc={run.rc} failed={failed} stderr={run.stderr[-1500:]}"


def validate_writes(events: list[tuple[str, str, dict[str, Any]]]) -> int:
    """Check every written class and cluster (name, labels, spec) against its XRD; return how many were checked."""
    xrd = _xrd_validator()
    checked = 0
    for event, kind, obj in events:
        if event == "DELETED" or kind not in PLURALS:
            continue
        meta = obj["metadata"]
        body = {
            "apiVersion": obj["apiVersion"],
            "kind": kind,
            "metadata": {"name": meta["name"], "labels": meta.get("labels") or {}},
            "spec": obj["spec"],
        }
        assert xrd.schema_errors(PLURALS[kind], body) == [], (kind, meta["name"])
        checked += 1
    return checked


def test_modelplane_adopt_lifecycle(
    lab: tuple[ModelplaneEmulator, Any, Path, Writes], playbook: Callable[..., Any], ansible_tmp: Path, tmp_path: Path
) -> None:
    mp, workload, kubeconfig, writes = lab

    # 1. Check mode on a cluster never adopted: the plan is reported, nothing is written.
    mark = writes.mark()
    dry = run_role(playbook, mp, kubeconfig, ansible_tmp, check=True)
    assert dry.rc == 0, failure(dry)
    planned = dry.task(ADOPT, CLUSTER)
    assert planned["changed"] is True
    assert planned["actions"] == [
        f"create Secret {NS}/{CLUSTER}-kubeconfig",
        f"create InferenceClass {CLASS}",
        f"create InferenceCluster {CLUSTER}",
    ]
    assert writes.since(mark) == []
    # A dry run before the cluster (and so its kubeconfig) exists says so instead of failing.
    early = run_role(playbook, mp, kubeconfig.with_name("not-yet.kubeconfig"), ansible_tmp, check=True)
    assert early.rc == 0, failure(early)
    assert "does not exist yet" in early.task(ROLE + "Say why a dry run cannot plan the adoption", CLUSTER)["msg"]
    assert writes.since(mark) == []

    # 2. Adoption: Secret, class generated from the nodes' GPUs, cluster, readiness, DRA devices.
    up = run_role(playbook, mp, kubeconfig, ansible_tmp, timeline=tmp_path / "up")
    assert up.rc == 0, failure(up)
    # The role's tasks count as adoption for the timeline, its two gpu_ready waits as gpu_ready (the argument
    # validation and the include as other).
    assert phase_tasks(tmp_path / "up").keys() == {"adoption", "gpu_ready", "other"}
    assert phase_tasks(tmp_path / "up")["adoption"] >= 6
    adopted = up.task(ADOPT, CLUSTER)
    assert adopted["cluster"]["ready"] is True
    assert adopted["cluster"]["gateway_address"] == mp.gateway_address(CLUSTER)
    assert adopted["classes"] == [{"name": CLASS, "action": "created", "managed": True}]
    assert adopted["secret"] == {"name": f"{CLUSTER}-kubeconfig", "namespace": NS}
    dra = up.task(DRA_CHECK, CLUSTER)
    assert dra["ready"] is True
    assert dra["pools"]["l40s"]["ready"] is True

    ic = mp.api.get(MP, "InferenceCluster", CLUSTER)
    assert ic is not None
    # The cluster's own label, which pins a ModelDeployment to it (the smoke test's clusterSelector).
    assert ic["metadata"]["labels"] == {
        **MANAGED,
        "modelplane.ai/region": "ewr",
        "metalplane.inference/cluster": CLUSTER,
    }
    assert ic["spec"]["cluster"] == {
        "source": "Existing",
        "existing": {
            "secretRef": {"name": f"{CLUSTER}-kubeconfig", "key": "kubeconfig"},
            "cache": {"storageClassName": "modelplane-rwx-longhorn"},
        },
    }
    assert ic["spec"]["nodePools"] == [{"name": "l40s", "className": CLASS, "nodeCount": 2}]
    conditions = {c["type"]: (c["status"], c.get("reason")) for c in ic["status"]["conditions"]}
    assert conditions["Ready"][0] == "True"
    assert conditions["ClusterReady"] == ("True", "ClusterRunning")
    assert conditions["BackendReady"] == ("True", "BackendHealthy")
    klass = mp.api.get(MP, "InferenceClass", CLASS)
    assert klass is not None
    assert klass["metadata"]["labels"] == MANAGED
    (device,) = klass["spec"]["devices"]
    assert device["driver"] == device["deviceClassName"] == "gpu.nvidia.com"
    assert device["count"] == 1
    assert device["capacity"] == {"memory": {"value": "46068Mi"}}  # what the DRA driver reports for an L40S
    # Generated from the nodes' GPU Feature Discovery labels (the inventory ran with checks [allocatable]):
    # productName turned back from GFD's NVIDIA-L40S, architecture from the family and compute labels.
    assert device["attributes"] == L40S_ATTRIBUTES
    # The DRA check after adoption matched the twin's ResourceSlices against exactly those attributes (its
    # device_match is the pool's gpu_device), and every device of every node satisfied them.
    assert dra["pools"]["l40s"]["device_match"]["attributes"] == L40S_ATTRIBUTES
    checked = dra["pools"]["l40s"]["nodes"]
    assert len(checked) == 2
    assert all(n["matching_devices"] == 1 for n in checked.values())
    assert all(not n.get("device_mismatches") for n in checked.values())
    secret = mp.api.get("v1", "Secret", f"{CLUSTER}-kubeconfig", NS)
    assert secret is not None
    assert secret["metadata"]["labels"]["metalplane.inference/cluster"] == CLUSTER
    assert base64.b64decode(secret["data"]["kubeconfig"]).decode() == kubeconfig.read_text()
    # The kubeconfig (its token) appears nowhere in the run's output.
    token = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
    assert token not in up.stdout
    assert token not in up.stderr

    # 3. Second run: nothing to do.
    again = run_role(playbook, mp, kubeconfig, ansible_tmp)
    assert again.rc == 0, failure(again)
    assert again.changed(CLUSTER) == 0, again.stats

    # 4. A ModelReplica pinned to the cluster: un-adoption refuses and names it.
    mp.api.create(model_replica("chat-0", CLUSTER))
    refused = run_role(playbook, mp, kubeconfig, ansible_tmp, modelplane_state="absent")
    assert refused.rc != 0
    message = refused.task(UNADOPT, CLUSTER)["msg"]
    assert "default/chat-0" in message
    assert "drain" in message
    assert mp.api.get(MP, "InferenceCluster", CLUSTER) is not None

    # 5. With drain: the replica is deleted, then the cluster, its Secret and the now unused class.
    down = run_role(
        playbook,
        mp,
        kubeconfig,
        ansible_tmp,
        timeline=tmp_path / "down",
        modelplane_state="absent",
        modelplane_drain=True,
    )
    assert down.rc == 0, failure(down)
    assert phase_tasks(tmp_path / "down").keys() == {"teardown", "other"}
    removed = down.task(UNADOPT, CLUSTER)
    assert removed["drained"] == ["default/chat-0"]
    assert removed["classes"] == [{"name": CLASS, "managed": True, "action": "deleted"}]
    assert mp.api.get(MP, "ModelReplica", "chat-0", "default") is None
    assert mp.api.list(MP, "InferenceClass") == []
    assert mp.api.list(MP, "InferenceCluster") == []
    assert mp.api.list("v1", "Secret", namespace=NS) == []
    # The emulated DRA driver went with the serving stack.
    assert workload.list("resource.k8s.io/v1", "ResourceSlice") == []

    # Every class and cluster written during the whole life cycle is valid against the XRDs.
    assert validate_writes(writes.since(0)) >= 3


def test_modelplane_adopt_labels_the_pool_nodes_it_is_given(
    unlabelled_lab: tuple[ModelplaneEmulator, Any, Path, Writes], playbook: Callable[..., Any], ansible_tmp: Path
) -> None:
    """modelplane_pool_nodes: nodes without the pool label are labelled first, then inventoried and adopted."""
    mp, workload, kubeconfig, writes = unlabelled_lab
    names = sorted(n["metadata"]["name"] for n in workload.list("v1", "Node", label_selector="nvidia.com/gpu.present"))
    assert workload.list("v1", "Node", label_selector="modelplane.ai/pool") == []
    pool_vars = {
        "modelplane_node_pools": [{"name": "a16", "class_name": "a16-1x", "node_count": 2}],
        "modelplane_pool_nodes": {"a16": names},
    }

    # Check mode: the labels are reported as to be set and nothing is written on either side. The class is
    # generated from the inventory of nodes that only this run labels, so the dry run says it cannot plan it.
    dry = run_role(playbook, mp, kubeconfig, ansible_tmp, check=True, **pool_vars)
    assert dry.rc == 0, failure(dry)
    planned = dry.task(LABEL_POOL, CLUSTER)
    assert [r["changed"] for r in planned["results"]] == [True, True]
    assert "cannot plan" in dry.task(UNPLANNABLE, CLUSTER)["msg"]
    assert dry.task(ADOPT, CLUSTER).get("skipped") is True
    assert workload.list("v1", "Node", label_selector="modelplane.ai/pool") == []
    assert writes.since(0) == []

    up = run_role(playbook, mp, kubeconfig, ansible_tmp, **pool_vars)
    assert up.rc == 0, failure(up)
    labelled = up.task(LABEL_POOL, CLUSTER)
    assert sorted(r["item"][1] for r in labelled["results"] if r["changed"]) == names
    pools = {
        n["metadata"]["name"]: n["metadata"]["labels"].get("modelplane.ai/pool") for n in workload.list("v1", "Node")
    }
    assert {name: pools[name] for name in names} == dict.fromkeys(names, "a16")
    # The class of the now labelled pool, from the A16 nodes' GFD labels, and the DRA check against it.
    klass = mp.api.get(MP, "InferenceClass", "a16-1x")
    assert klass is not None
    (device,) = klass["spec"]["devices"]
    assert device["attributes"] == A16_ATTRIBUTES
    assert device["capacity"] == {"memory": {"value": "15356Mi"}}
    assert up.task(DRA_CHECK, CLUSTER)["pools"]["a16"]["ready"] is True
    ic = mp.api.get(MP, "InferenceCluster", CLUSTER)
    assert ic is not None
    assert ic["spec"]["nodePools"] == [{"name": "a16", "className": "a16-1x", "nodeCount": 2}]

    # Second run: the labels are in place, nothing changes.
    again = run_role(playbook, mp, kubeconfig, ansible_tmp, **pool_vars)
    assert again.rc == 0, failure(again)
    assert [r["changed"] for r in again.task(LABEL_POOL, CLUSTER)["results"]] == [False, False]
    assert again.changed(CLUSTER) == 0, again.stats
    assert validate_writes(writes.since(0)) >= 2
