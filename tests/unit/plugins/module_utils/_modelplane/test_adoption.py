"""modelplane_cluster's planning (plan.py) and orchestration (adoption.py) against an in-memory control plane.

Every InferenceClass and InferenceCluster the orchestration writes is checked against the XRDs.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from modelplane_xrd import schema_errors

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    ApiError,
    ConflictError,
    InputError,
    NotFoundError,
    WaitTimeout,
)
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane import plan
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.adoption import run_modelplane_cluster
from ansible_collections.metalplane.inference.plugins.modules.modelplane_cluster import argument_spec

MP = "modelplane.ai/v1alpha1"
NS = "modelplane-system"
MANAGED = {"app.kubernetes.io/managed-by": "metalplane.inference"}
TOKEN = "t0ken-that-must-never-leak"
KUBECONFIG = f"""apiVersion: v1
kind: Config
current-context: vke
clusters:
- name: vke
  cluster:
    server: https://127.0.0.1:41234
    certificate-authority-data: Q0EK
contexts:
- name: vke
  context: {{cluster: vke, user: admin}}
users:
- name: admin
  user: {{token: {TOKEN}}}
"""
L40S = {"count": 1, "model": "NVIDIA-L40S", "source": "labels", "memory": "46068Mi", "allocatable": 1}
H100_DRA = {
    "count": 8,
    "model": "NVIDIA H100 80GB HBM3",
    "source": "dra",
    "architecture": "Hopper",
    "cuda_compute_capability": "9.0.0",
    "memory": "81559Mi",
}
CLASS_SPEC = {
    "devices": [
        {
            "name": "gpu",
            "driver": "gpu.nvidia.com",
            "deviceClassName": "gpu.nvidia.com",
            "capacity": {"memory": {"value": "46068Mi"}},
        }
    ]
}
READY_STATUS = {
    "conditions": [
        {"type": "ClusterReady", "status": "True", "reason": "ClusterRunning"},
        {"type": "BackendReady", "status": "True", "reason": "BackendHealthy"},
        {"type": "Ready", "status": "True", "reason": "Available"},
    ],
    "gateway": {"address": "192.0.2.7"},
}
SELECTOR_KEYS = ("modelplane.ai/cluster",)


# --- an in-memory control plane ------------------------------------------------------------------


class FakeKube:
    """get/list/create/replace/delete/close like control.KubeObjects, with resourceVersions and 409s."""

    def __init__(self, *, ready: bool = True) -> None:
        self.objects: dict[tuple[str, str, str | None, str], dict[str, Any]] = {}
        self.writes: list[tuple[str, dict[str, Any]]] = []
        self.version = 0
        self.ready = ready  # the simulated controller marks new clusters ready
        self.on_get: Callable[[FakeKube, str, str], None] | None = None
        self.conflict_next_create: dict[str, Any] | None = None  # created by "another run" just before ours

    @staticmethod
    def key(obj: dict[str, Any]) -> tuple[str, str, str | None, str]:
        meta = obj["metadata"]
        return (obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])

    def seed(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self.version)
        self.objects[self.key(stored)] = stored
        return stored

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        if self.on_get is not None:
            self.on_get(self, kind, name)
        found = self.objects.get((api_version, kind, namespace, name))
        return copy.deepcopy(found) if found else None

    def list(
        self, api_version: str, kind: str, *, namespace: str | None = None, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        return [
            copy.deepcopy(o)
            for (v, k, ns, _n), o in sorted(self.objects.items(), key=lambda item: str(item[0]))
            if v == api_version and k == kind and (namespace is None or ns == namespace)
        ]

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.conflict_next_create is not None and body["kind"] == "InferenceClass":
            self.seed(self.conflict_next_create)
            self.conflict_next_create = None
        if self.key(body) in self.objects:
            raise ApiError("AlreadyExists", status=409)
        self.writes.append(("create", copy.deepcopy(body)))
        stored = self.seed(body)
        if body["kind"] == "InferenceCluster" and self.ready:
            stored["status"] = copy.deepcopy(READY_STATUS)
        return copy.deepcopy(stored)

    def replace(self, body: dict[str, Any]) -> dict[str, Any]:
        current = self.objects.get(self.key(body))
        if current is None:
            raise ApiError("NotFound", status=404)
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise ApiError("Conflict", status=409)
        self.writes.append(("replace", copy.deepcopy(body)))
        stored = self.seed(body)
        if "status" in current:
            stored["status"] = current["status"]
        return copy.deepcopy(stored)

    def delete(
        self, api_version: str, kind: str, name: str, namespace: str | None = None, *, propagation: str | None = None
    ) -> bool:
        self.writes.append(("delete", {"kind": kind, "name": name, "namespace": namespace, "propagation": propagation}))
        return self.objects.pop((api_version, kind, namespace, name), None) is not None

    def close(self) -> None:
        pass

    def names(self, kind: str) -> list[str]:
        return sorted(k[3] for k in self.objects if k[1] == kind)


class FakeModule:
    def __init__(self, params: dict[str, Any], *, check: bool = False, diff: bool = True) -> None:
        self.params = params
        self.check_mode = check
        self.diff_mode = diff
        self.secrets: set[str] = set()
        self.warnings: list[str] = []

    def log_secret(self, value: str | None) -> None:
        if value:
            self.secrets.add(value)

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def require(self, library: str, trace: str | None) -> None:
        pass


def params(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    """The module's parameters as AnsibleModule would pass them (defaults filled in)."""
    path = tmp_path / "workload.kubeconfig"
    path.write_text(KUBECONFIG)
    out = {name: spec.get("default") for name, spec in argument_spec().items()}
    out.update(
        kubeconfig="/cp.kubeconfig",
        name="c1",
        workload_kubeconfig=str(path),
        node_pools=[{"name": "l40s", "class_name": "l40s-1x", "node_count": 2}],
        gpu_inventory={"n1": {**L40S, "pool": "l40s"}, "n2": {**L40S, "pool": "l40s"}},
        wait_timeout=5,
    )
    out.update(overrides)
    return out


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def run(
    control: FakeKube,
    tmp_path: Path,
    *,
    check: bool = False,
    workload: FakeKube | None = None,
    **overrides: Any,
) -> tuple[dict[str, Any], FakeModule]:
    module = FakeModule(params(tmp_path, **overrides), check=check)
    clock = Clock()

    def connector(_params: Any, which: str) -> FakeKube:
        if which == "workload":
            assert workload is not None, "the workload cluster was not supposed to be read"
            return workload
        return control

    result = run_modelplane_cluster(module, connector, clock=clock, sleep=clock.sleep)
    return result, module


def assert_writes_valid(control: FakeKube) -> int:
    plurals = {"InferenceClass": "inferenceclasses", "InferenceCluster": "inferenceclusters"}
    checked = 0
    for verb, obj in control.writes:
        if verb == "delete" or obj["kind"] not in plurals:
            continue
        body = {
            "apiVersion": obj["apiVersion"],
            "kind": obj["kind"],
            "metadata": {"name": obj["metadata"]["name"], "labels": obj["metadata"].get("labels", {})},
            "spec": obj["spec"],
        }
        assert schema_errors(plurals[obj["kind"]], body) == [], obj["metadata"]["name"]
        checked += 1
    return checked


def foreign(kind: str, name: str, spec: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "v1" if kind == "Secret" else MP, "kind": kind, "metadata": meta, "spec": spec}


def ic(name: str, class_name: str, *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": MP,
        "kind": "InferenceCluster",
        "metadata": {"name": name, "labels": MANAGED if labels is None else labels},
        "spec": {
            "cluster": {"source": "Existing", "existing": {"secretRef": {"name": f"{name}-kubeconfig"}}},
            "nodePools": [{"name": "p", "className": class_name}],
        },
    }


def replica(name: str, cluster: str, *, label: bool = True, spec: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": MP,
        "kind": "ModelReplica",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "labels": {"modelplane.ai/cluster": cluster} if label else {},
        },
        "spec": {"clusterName": cluster if spec else "elsewhere", "engines": [{"name": "e"}]},
    }


# --- plan: pure pieces ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ([{"name": "gpu"}], [{"name": "gpu", "className": "gpu"}]),
        (
            [{"name": "gpu", "class_name": "l40s", "node_count": 2, "min_node_count": None, "max_node_count": None}],
            [{"name": "gpu", "className": "l40s", "nodeCount": 2}],
        ),
        (
            [{"name": "a", "class_name": "x", "min_node_count": 1, "max_node_count": 3, "node_count": 2}],
            [{"name": "a", "className": "x", "nodeCount": 2, "minNodeCount": 1, "maxNodeCount": 3}],
        ),
    ],
)
def test_node_pools_option(value: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert plan.node_pools(value) == want


@pytest.mark.parametrize(
    ("value", "field"),
    [(None, "node_pools"), ([], "node_pools"), ([{"name": "a", "zones": ["x"]}], "node_pools[0]")],
)
def test_node_pools_option_rejects(value: Any, field: str) -> None:
    with pytest.raises(InputError) as caught:
        plan.node_pools(value)
    assert caught.value.field == field


LIVE_CLUSTER = {
    "apiVersion": MP,
    "kind": "InferenceCluster",
    "metadata": {"name": "c1", "labels": {**MANAGED, "team": "x", "added-by-someone": "y"}, "resourceVersion": "7"},
    "spec": {
        "crossplane": {"compositionRef": {"name": "inferenceclusters"}},
        "cluster": {
            "source": "Existing",
            "existing": {"secretRef": {"name": "c1-kubeconfig"}, "cache": {"storageClassName": "rwx"}},
        },
        "nodePools": [{"name": "p", "className": "k"}],
    },
    "status": {"conditions": []},
}
DESIRED_CLUSTER = {
    "apiVersion": MP,
    "kind": "InferenceCluster",
    "metadata": {"name": "c1", "labels": {**MANAGED, "team": "x"}},
    "spec": {
        "cluster": {
            "source": "Existing",
            "existing": {
                "secretRef": {"name": "c1-kubeconfig", "key": "kubeconfig"},
                "cache": {"storageClassName": "rwx"},
            },
        },
        "nodePools": [{"name": "p", "className": "k", "nodeCount": 1}],
    },
}


def _with(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    node = out
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node[part]
    if value is None:
        node.pop(parts[-1], None)
    elif parts[-1].isdigit():
        node[int(parts[-1])] = value
    else:
        node[parts[-1]] = value
    return out


@pytest.mark.parametrize(
    ("case", "desired", "differs"),
    [
        ("server defaults and spec.crossplane are no drift", DESIRED_CLUSTER, False),
        ("another pool count", _with(DESIRED_CLUSTER, "spec.nodePools.0.nodeCount", 3), True),
        (
            "autoscaling range added",
            _with(DESIRED_CLUSTER, "spec.nodePools.0", {"name": "p", "className": "k", "maxNodeCount": 2}),
            True,
        ),
        ("another class", _with(DESIRED_CLUSTER, "spec.nodePools.0.className", "other"), True),
        ("cache removed", _with(DESIRED_CLUSTER, "spec.cluster.existing.cache", None), True),
        ("a taint", _with(DESIRED_CLUSTER, "spec.taints", [{"key": "k", "effect": "NoSchedule"}]), True),
        ("a new label", _with(DESIRED_CLUSTER, "metadata.labels", {**MANAGED, "team": "y"}), True),
        ("fewer labels than live", _with(DESIRED_CLUSTER, "metadata.labels", MANAGED), False),
    ],
)
def test_cluster_differs(case: str, desired: dict[str, Any], differs: bool) -> None:
    assert plan.cluster_differs(desired, LIVE_CLUSTER) is differs, case


def test_updated_cluster_keeps_foreign_fields_and_locks_on_the_version() -> None:
    desired = _with(DESIRED_CLUSTER, "spec.nodePools.0.nodeCount", 3)
    out = plan.updated_cluster(desired, LIVE_CLUSTER)
    assert out["metadata"]["resourceVersion"] == "7"
    assert out["metadata"]["labels"] == {**MANAGED, "team": "x", "added-by-someone": "y"}
    assert out["spec"]["crossplane"] == LIVE_CLUSTER["spec"]["crossplane"]
    assert out["spec"]["nodePools"] == [{"name": "p", "className": "k", "nodeCount": 3}]
    assert "status" not in out


@pytest.mark.parametrize(
    ("live_spec", "differs"),
    [
        ({"devices": [{**CLASS_SPEC["devices"][0], "claim": "DRA", "count": 1}]}, False),  # XRD defaults stored
        (CLASS_SPEC, False),
        ({"devices": [{**CLASS_SPEC["devices"][0], "count": 2}]}, True),
        ({"devices": [{**CLASS_SPEC["devices"][0], "capacity": {"memory": {"value": "48Gi"}}}]}, True),
        ({**CLASS_SPEC, "description": "x"}, True),
    ],
)
def test_class_differs(live_spec: dict[str, Any], differs: bool) -> None:
    desired = {"spec": plan.normalise_class_spec(CLASS_SPEC)}
    assert plan.class_differs(desired, {"spec": live_spec}) is differs


def test_provisioning_defaults_are_no_drift() -> None:
    given = {
        **CLASS_SPEC,
        "provisioning": {"provider": "GKE", "gke": {"machineType": "g2", "accelerator": {"type": "l4", "count": 1}}},
    }
    stored = copy.deepcopy(given)
    stored["provisioning"]["gke"]["diskSizeGb"] = 100
    assert not plan.class_differs({"spec": given}, {"spec": stored})


@pytest.mark.parametrize(
    ("replicas", "want"),
    [
        ([replica("a", "c1")], ["ml/a"]),
        ([replica("a", "c1", label=False)], ["ml/a"]),  # spec.clusterName only
        ([replica("a", "c1", spec=False)], ["ml/a"]),  # the ClusterUsage label only
        ([replica("a", "c2"), replica("b", "c1")], ["ml/b"]),
        ([], []),
    ],
)
def test_replica_refs(replicas: list[dict[str, Any]], want: list[str]) -> None:
    assert plan.replica_refs(replicas, "c1") == want


def test_class_users_excludes_the_cluster_itself() -> None:
    clusters = [ic("c1", "k"), ic("c2", "k"), ic("c3", "other")]
    assert plan.class_users(clusters, "k", besides="c1") == ["c2"]
    assert plan.class_users(clusters, "other", besides="c3") == []


@pytest.mark.parametrize(
    ("inventory", "labels", "want"),
    [
        ({"n1": {**L40S, "pool": "a"}}, {}, {"a": ["n1"]}),
        ({"n1": L40S, "n2": L40S}, {"n1": "a", "n2": "b"}, {"a": ["n1"], "b": ["n2"]}),
        ({"n1": {**L40S, "pool": "a"}}, {"n1": "b"}, {"a": ["n1"]}),  # the entry wins over the label
        ([{"node": "n1", **L40S}], {"n1": "a"}, {"a": ["n1"]}),
        ({"n1": L40S}, {}, {}),  # no pool known: not used
    ],
)
def test_inventory_pools(inventory: Any, labels: dict[str, str], want: dict[str, list[str]]) -> None:
    grouped = plan.inventory_pools(inventory, labels)
    assert {pool: sorted(nodes) for pool, nodes in grouped.items()} == want


def test_generated_classes_union_of_pools_sharing_a_class() -> None:
    grouped = {"a": {"n1": H100_DRA}, "b": {"n2": H100_DRA}}
    classes = plan.generated_classes({"h100-8x": ["a", "b"]}, grouped)
    (device,) = classes["h100-8x"]["spec"]["devices"]
    assert device["count"] == 8
    assert device["attributes"] == {
        "productName": {"string": "NVIDIA H100 80GB HBM3"},
        "architecture": {"string": "Hopper"},
        "cudaComputeCapability": {"version": "9.0.0"},
    }
    assert device["capacity"] == {"memory": {"value": "81559Mi"}}


@pytest.mark.parametrize(
    ("grouped", "needle"),
    [
        ({"a": {"n1": H100_DRA}}, "no node of pool 'b'"),
        ({"a": {"n1": H100_DRA}, "b": {"n2": L40S}}, "same GPUs"),
        ({"a": {"n1": {**L40S, "memory": None}}, "b": {"n2": L40S}}, "memory"),
    ],
)
def test_generated_classes_rejects(grouped: dict[str, Any], needle: str) -> None:
    with pytest.raises(InputError) as caught:
        plan.generated_classes({"k": ["a", "b"]}, grouped)
    assert needle in caught.value.msg


def test_secret_view_never_shows_data() -> None:
    secret = {"metadata": {"name": "s", "namespace": NS, "labels": {}}, "data": {"kubeconfig": "Zm9v"}}
    assert plan.secret_view(secret)["data"] == {"kubeconfig": plan.REDACTED}
    assert plan.secret_view(secret, data_changed=True)["data"] == {"kubeconfig": plan.REDACTED_CHANGED}


def test_with_taint_is_idempotent() -> None:
    tainted = plan.with_taint(LIVE_CLUSTER, plan.DRAIN_TAINT)
    assert tainted is not None
    assert tainted["spec"]["taints"] == [plan.DRAIN_TAINT]
    assert plan.with_taint(tainted, plan.DRAIN_TAINT) is None


# --- adoption: present ------------------------------------------------------------------------------


def test_first_adoption_writes_secret_class_cluster_in_order(tmp_path: Path) -> None:
    control = FakeKube()
    result, module = run(control, tmp_path)
    assert [(verb, obj["kind"]) for verb, obj in control.writes] == [
        ("create", "Secret"),
        ("create", "InferenceClass"),
        ("create", "InferenceCluster"),
    ]
    assert result["changed"] is True
    assert result["cluster"]["ready"] is True
    assert result["cluster"]["gateway_address"] == "192.0.2.7"
    assert result["classes"] == [{"name": "l40s-1x", "action": "created", "managed": True}]
    assert result["pools"][0]["node_selector"] == "modelplane.ai/pool=l40s"
    assert result["pools"][0]["gpu_device"]["capacity"] == {"memory": {"value": "46068Mi"}}
    assert assert_writes_valid(control) == 2
    # The kubeconfig is masked for the whole run and never part of the result (nor of the diff).
    assert KUBECONFIG in module.secrets
    encoded = base64.b64encode(KUBECONFIG.encode()).decode()
    assert TOKEN not in json.dumps(result)
    assert encoded not in json.dumps(result)
    assert result["diff"]["after"]["secret"]["data"] == {"kubeconfig": plan.REDACTED_CHANGED}


def test_second_run_changes_nothing(tmp_path: Path) -> None:
    control = FakeKube()
    run(control, tmp_path)
    writes = len(control.writes)
    result, _module = run(control, tmp_path)
    assert result["changed"] is False
    assert result["actions"] == []
    assert len(control.writes) == writes
    assert result["classes"] == [{"name": "l40s-1x", "action": "unchanged", "managed": True}]


def test_check_mode_writes_nothing_and_reports_the_plan(tmp_path: Path) -> None:
    control = FakeKube()
    result, _module = run(control, tmp_path, check=True)
    assert control.writes == []
    assert result["changed"] is True
    assert result["actions"] == [
        f"create Secret {NS}/c1-kubeconfig",
        "create InferenceClass l40s-1x",
        "create InferenceCluster c1",
    ]
    assert result["cluster"]["exists"] is False
    assert result["diff"]["after"]["cluster"]["spec"]["nodePools"] == [
        {"name": "l40s", "className": "l40s-1x", "nodeCount": 2}
    ]


@pytest.mark.parametrize(
    ("overrides", "action"),
    [
        ({"node_pools": [{"name": "l40s", "class_name": "l40s-1x", "node_count": 3}]}, "update InferenceCluster c1"),
        ({"labels": {"region": "ewr"}}, "update InferenceCluster c1"),
        ({"server": "https://10.0.0.5:6443"}, f"update Secret {NS}/c1-kubeconfig"),
        ({"storage_class_name": ""}, "update InferenceCluster c1"),
        ({"taints": [{"key": "maintenance", "value": None, "effect": "NoSchedule"}]}, "update InferenceCluster c1"),
    ],
)
def test_a_change_updates_only_that_object(tmp_path: Path, overrides: dict[str, Any], action: str) -> None:
    control = FakeKube()
    run(control, tmp_path)
    before = len(control.writes)
    result, _module = run(control, tmp_path, **overrides)
    assert result["actions"] == [action]
    assert [verb for verb, _obj in control.writes[before:]] == ["replace"]
    assert assert_writes_valid(control) >= 2


def test_class_created_meanwhile_by_another_run_is_not_a_failure(tmp_path: Path) -> None:
    control = FakeKube()
    generated = plan.generated_classes({"l40s-1x": ["l40s"]}, {"l40s": {"n1": L40S}})["l40s-1x"]
    control.conflict_next_create = generated
    result, _module = run(control, tmp_path)
    assert {"name": "l40s-1x", "action": "unchanged", "managed": True} in result["classes"]
    assert control.names("InferenceCluster") == ["c1"]


def test_stale_class_of_ours_is_updated_with_the_resource_version(tmp_path: Path) -> None:
    control = FakeKube()
    stale = plan.generated_classes({"l40s-1x": ["l40s"]}, {"l40s": {"n1": {**L40S, "memory": "48Gi"}}})["l40s-1x"]
    control.seed(stale)
    result, _module = run(control, tmp_path)
    assert {"name": "l40s-1x", "action": "updated", "managed": True} in result["classes"]
    stored = control.get(MP, "InferenceClass", "l40s-1x")
    assert stored is not None
    assert stored["spec"]["devices"][0]["capacity"] == {"memory": {"value": "46068Mi"}}


def test_foreign_class_is_used_when_equal_and_refused_when_different(tmp_path: Path) -> None:
    control = FakeKube()
    generated = plan.generated_classes({"l40s-1x": ["l40s"]}, {"l40s": {"n1": L40S}})["l40s-1x"]
    equal = copy.deepcopy(generated)
    equal["metadata"]["labels"] = {}
    control.seed(equal)
    result, _module = run(control, tmp_path)
    assert {"name": "l40s-1x", "action": "unchanged", "managed": False} in result["classes"]

    other = FakeKube()
    different = copy.deepcopy(equal)
    different["spec"]["devices"][0]["count"] = 4
    other.seed(different)
    with pytest.raises(ConflictError, match="refusing to overwrite"):
        run(other, tmp_path)
    assert other.writes == []


@pytest.mark.parametrize(
    ("seeded", "needle"),
    [
        (ic("c1", "l40s-1x", labels={}), "not created by metalplane.inference"),
        ({**ic("c1", "l40s-1x"), "spec": {"cluster": {"source": "Vultr", "vultr": {"region": "ewr"}}}}, "Vultr"),
        (
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c1-kubeconfig", "namespace": NS}, "data": {}},
            "Secret",
        ),
        (
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": "c1-kubeconfig",
                    "namespace": NS,
                    "labels": {**MANAGED, "metalplane.inference/cluster": "c9"},
                },
                "data": {},
            },
            "belongs to InferenceCluster 'c9'",
        ),
    ],
)
def test_foreign_objects_are_refused_before_any_write(tmp_path: Path, seeded: dict[str, Any], needle: str) -> None:
    control = FakeKube()
    control.seed(seeded)
    with pytest.raises(ConflictError) as caught:
        run(control, tmp_path)
    assert needle in caught.value.msg
    assert control.writes == []


def test_referenced_class_must_exist_without_inventory(tmp_path: Path) -> None:
    control = FakeKube()
    with pytest.raises(NotFoundError, match="l40s-1x"):
        run(control, tmp_path, gpu_inventory=None)
    assert control.writes == []
    control.seed(foreign("InferenceClass", "l40s-1x", CLASS_SPEC))
    result, _module = run(control, tmp_path, gpu_inventory=None)
    assert result["classes"] == [{"name": "l40s-1x", "action": "used", "managed": False}]


def test_explicit_class_wins_over_the_inventory(tmp_path: Path) -> None:
    control = FakeKube()
    result, _module = run(control, tmp_path, classes=[{"name": "l40s-1x", "spec": CLASS_SPEC}], gpu_inventory={})
    stored = control.get(MP, "InferenceClass", "l40s-1x")
    assert stored is not None
    assert stored["spec"] == plan.normalise_class_spec(CLASS_SPEC)
    assert result["classes"][0]["action"] == "created"
    assert assert_writes_valid(control) == 2


def test_pool_of_a_node_is_read_from_the_workload_labels(tmp_path: Path) -> None:
    workload = FakeKube()
    for node, pool in (("n1", "l40s"), ("n2", "l40s"), ("cpu", "system")):
        workload.seed(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": {"modelplane.ai/pool": pool}}}
        )
    control = FakeKube()
    result, _module = run(
        control, tmp_path, workload=workload, gpu_inventory={"n1": L40S, "n2": L40S, "cpu": {"count": 0}}
    )
    assert result["classes"][0]["action"] == "created"


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"name": "Not_A_Label"}, "name"),
        ({"kubeconfig": None}, "kubeconfig"),
        ({"wait_timeout": -1}, "wait_timeout"),
        ({"workload_kubeconfig": "/nonexistent/kubeconfig"}, "workload_kubeconfig"),
        ({"node_pools": [{"name": "l40s", "class_name": "l40s-1x", "node_count": 0}]}, "node_pools[0].nodeCount"),
        ({"classes": [{"name": "x", "spec": {"devices": [{"name": "gpu", "driver": "d"}]}}]}, "classes[0]"),
        ({"gpu_inventory": {"n1": {**L40S, "pool": "elsewhere"}}}, "gpu_inventory"),
        ({"server": "not a url"}, "server"),
    ],
)
def test_bad_input_fails_before_any_request(tmp_path: Path, overrides: dict[str, Any], field: str) -> None:
    control = FakeKube()
    with pytest.raises(InputError) as caught:
        run(control, tmp_path, **overrides)
    assert caught.value.field.startswith(field)
    assert control.writes == []
    assert TOKEN not in caught.value.msg


def test_wait_times_out_naming_what_is_unmet(tmp_path: Path) -> None:
    control = FakeKube(ready=False)
    with pytest.raises(WaitTimeout) as caught:
        run(control, tmp_path)
    assert "condition Ready not reported yet" in caught.value.msg
    assert "status.gateway.address is empty" in caught.value.msg


def test_no_wait_returns_after_writing(tmp_path: Path) -> None:
    control = FakeKube(ready=False)
    result, _module = run(control, tmp_path, wait=False)
    assert result["cluster"]["ready"] is False
    assert result["cluster"]["exists"] is True


def test_class_deleted_by_a_parallel_unadopt_is_created_again(tmp_path: Path) -> None:
    control = FakeKube(ready=False)
    polls = {"n": 0}

    def controller(fake: FakeKube, kind: str, name: str) -> None:
        if kind != "InferenceCluster" or (MP, kind, None, name) not in fake.objects:
            return
        polls["n"] += 1
        stored = fake.objects[(MP, kind, None, name)]
        if polls["n"] == 1:  # another run deletes the shared class just after ours created it
            fake.objects.pop((MP, "InferenceClass", None, "l40s-1x"), None)
            stored["status"] = {
                "conditions": [{"type": "ClusterReady", "status": "False", "reason": "WaitingForClasses"}]
            }
        elif (MP, "InferenceClass", None, "l40s-1x") in fake.objects:
            stored["status"] = copy.deepcopy(READY_STATUS)

    control.on_get = controller
    result, module = run(control, tmp_path)
    assert result["cluster"]["ready"] is True
    assert control.names("InferenceClass") == ["l40s-1x"]
    assert any("created again" in w for w in module.warnings)


# --- adoption: absent ------------------------------------------------------------------------------


def adopted(tmp_path: Path) -> FakeKube:
    control = FakeKube()
    run(control, tmp_path)
    control.writes.clear()
    return control


def test_unadopt_refuses_while_replicas_target_the_cluster(tmp_path: Path) -> None:
    control = adopted(tmp_path)
    control.seed(replica("r1", "c1"))
    control.seed(replica("r2", "c2"))
    with pytest.raises(ConflictError) as caught:
        run(control, tmp_path, state="absent")
    assert "ml/r1" in caught.value.msg
    assert "ml/r2" not in caught.value.msg
    assert caught.value.details["model_replicas"] == ["ml/r1"]
    assert control.writes == []


def test_unadopt_with_drain_taints_deletes_replicas_then_cluster_secret_class(tmp_path: Path) -> None:
    control = adopted(tmp_path)
    control.seed(replica("r1", "c1"))
    result, _module = run(control, tmp_path, state="absent", drain=True)
    assert result["drained"] == ["ml/r1"]
    kinds = [(verb, obj["kind"]) for verb, obj in control.writes]
    assert kinds == [
        ("replace", "InferenceCluster"),  # the NoExecute taint first: nothing new is placed on it
        ("delete", "ModelReplica"),
        ("delete", "InferenceCluster"),
        ("delete", "Secret"),
        ("delete", "InferenceClass"),
    ]
    assert control.writes[0][1]["spec"]["taints"] == [plan.DRAIN_TAINT]
    assert control.writes[2][1]["propagation"] == "Foreground"
    assert result["classes"] == [{"name": "l40s-1x", "managed": True, "action": "deleted"}]
    assert control.objects == {}
    assert assert_writes_valid(control) == 1


def test_unadopt_keeps_a_class_another_cluster_uses_and_foreign_classes(tmp_path: Path) -> None:
    control = adopted(tmp_path)
    control.seed(ic("c2", "l40s-1x"))
    control.seed(foreign("InferenceClass", "byo", CLASS_SPEC))
    result, _module = run(
        control,
        tmp_path,
        state="absent",
        node_pools=[{"name": "l40s", "class_name": "l40s-1x"}, {"name": "b", "class_name": "byo"}],
    )
    assert control.names("InferenceClass") == ["byo", "l40s-1x"]
    assert result["classes"] == [
        {"name": "byo", "managed": False, "action": "kept", "reason": "not created by metalplane.inference"},
        {"name": "l40s-1x", "managed": True, "action": "kept", "reason": "used by c2", "used_by": ["c2"]},
    ]
    assert control.names("InferenceCluster") == ["c2"]


def test_unadopt_check_mode_deletes_nothing(tmp_path: Path) -> None:
    control = adopted(tmp_path)
    objects = copy.deepcopy(control.objects)
    result, _module = run(control, tmp_path, state="absent", check=True)
    assert control.objects == objects
    assert result["actions"] == [
        "delete InferenceCluster c1",
        f"delete Secret {NS}/c1-kubeconfig",
        "delete InferenceClass l40s-1x",
    ]


def test_unadopt_of_nothing_changes_nothing(tmp_path: Path) -> None:
    control = FakeKube()
    result, _module = run(control, tmp_path, state="absent")
    assert result["changed"] is False
    assert control.writes == []


def test_unadopt_waits_until_the_cluster_is_gone(tmp_path: Path) -> None:
    control = adopted(tmp_path)
    held = copy.deepcopy(control.objects[(MP, "InferenceCluster", None, "c1")])
    gets = {"n": 0}

    def finalizer(fake: FakeKube, kind: str, name: str) -> None:
        # The controller's finalizer keeps the object for three more reads after the delete.
        if kind != "InferenceCluster" or not any(verb == "delete" for verb, _o in fake.writes):
            return
        if gets["n"] < 3:
            gets["n"] += 1
            fake.objects[(MP, kind, None, name)] = held
        else:
            fake.objects.pop((MP, kind, None, name), None)

    control.on_get = finalizer
    run(control, tmp_path, state="absent")
    assert gets["n"] == 3
    assert control.names("Secret") == []

    stuck = adopted(tmp_path)
    stuck_obj = copy.deepcopy(stuck.objects[(MP, "InferenceCluster", None, "c1")])

    def never(fake: FakeKube, kind: str, name: str) -> None:
        if kind == "InferenceCluster":
            fake.objects[(MP, kind, None, name)] = stuck_obj

    stuck.on_get = never
    with pytest.raises(WaitTimeout, match="to be deleted"):
        run(stuck, tmp_path, state="absent")
    assert stuck.names("Secret") == ["c1-kubeconfig"]  # the Secret outlives the cluster


@pytest.mark.parametrize(
    "pools",
    [
        [{"name": "l40s", "class_name": "l40s-1x", "node_count": 2}],
        [{"name": "l40s", "class_name": "l40s-1x", "node_count": 2, "min_node_count": 1, "max_node_count": 4}],
        [
            {"name": "l40s", "class_name": "l40s-1x", "node_count": 1},
            {"name": "more-l40s", "class_name": "l40s-1x", "node_count": 1000},
        ],
    ],
)
def test_every_written_object_is_valid_against_the_xrds(tmp_path: Path, pools: list[dict[str, Any]]) -> None:
    control = FakeKube()
    inventory = {f"n{i}": {**L40S, "pool": pool["name"]} for i, pool in enumerate(pools)}
    run(
        control,
        tmp_path,
        node_pools=pools,
        gpu_inventory=inventory,
        labels={"modelplane.ai/region": "ewr"},
        taints=[{"key": "maintenance", "value": "true", "effect": "NoSchedule"}],
        classes=[{"name": "extra", "spec": {**CLASS_SPEC, "description": "given"}}],
    )
    assert assert_writes_valid(control) == 3
