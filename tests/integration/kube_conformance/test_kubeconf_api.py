"""Core API behaviour: discovery, auth, CRUD, selectors, patches, apply, deletion, dryRun.

Each test states one behaviour kube-apiserver has; the suite runs on the emulator and (with
MP_KUBE_TARGET=real) on the real lane, which is the judge when the two disagree.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from kubeconf_support import HELD, KubeTarget, eventually, wait_deleted
from kubernetes import client
from kubernetes.client.exceptions import ApiException


def core(target: KubeTarget) -> client.CoreV1Api:
    return client.CoreV1Api(target.api_client())


def apps(target: KubeTarget) -> client.AppsV1Api:
    return client.AppsV1Api(target.api_client())


def status_of(call: Any) -> int:
    with pytest.raises(ApiException) as info:
        call()
    return info.value.status


def deployment(name: str, image: str = "nginx:1.27", replicas: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {
                "containers": [{"name": "web", "image": image}, {"name": "side", "image": "busybox:1"}],
                "nodeSelector": {"nvidia.com/gpu.present": "true"},
            },
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": spec}


# --- discovery, version, auth -------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/version", "/version/"])
def test_version_answers_with_and_without_trailing_slash(kube_target: KubeTarget, path: str) -> None:
    code, body = kube_target.raw("GET", path)
    assert code == 200
    assert body["major"] == "1"
    assert body["gitVersion"].startswith("v1.")


def test_version_api_of_the_python_client(kube_target: KubeTarget) -> None:
    assert client.VersionApi(kube_target.api_client()).get_code().git_version.startswith("v1.")


@pytest.mark.parametrize(
    ("path", "kind", "expect"),
    [
        ("/api", "APIVersions", "v1"),
        ("/apis", "APIGroupList", "apps"),
        ("/api/v1", "APIResourceList", "namespaces"),
        ("/apis/apps/v1", "APIResourceList", "daemonsets/status"),
        ("/apis/apiextensions.k8s.io/v1", "APIResourceList", "customresourcedefinitions"),
        ("/apis/storage.k8s.io/v1", "APIResourceList", "storageclasses"),
    ],
)
def test_discovery_documents(kube_target: KubeTarget, path: str, kind: str, expect: str) -> None:
    code, body = kube_target.raw("GET", path)
    assert code == 200
    assert body["kind"] == kind
    names = (
        body.get("versions")
        or [g["name"] for g in body.get("groups", [])]
        or [r["name"] for r in body.get("resources", [])]
    )
    assert expect in names


def test_resource_list_marks_scope(kube_target: KubeTarget) -> None:
    _code, body = kube_target.raw("GET", "/api/v1")
    scope = {r["name"]: r["namespaced"] for r in body["resources"]}
    assert scope["nodes"] is False
    assert scope["namespaces"] is False
    assert scope["configmaps"] is True


@pytest.mark.parametrize(
    ("api_version", "kind"), [("apps/v1", "DaemonSet"), ("v1", "Node"), ("storage.k8s.io/v1", "CSIDriver")]
)
def test_dynamic_client_finds_builtin_kinds(kube_target: KubeTarget, api_version: str, kind: str) -> None:
    resource = kube_target.dynamic().resources.get(api_version=api_version, kind=kind)
    assert resource.kind == kind


@pytest.mark.emulator_only
@pytest.mark.parametrize("kind", ["ResourceSlice", "DeviceClass"])
def test_dynamic_client_finds_dra_kinds(kube_target: KubeTarget, kind: str) -> None:
    resource = kube_target.dynamic().resources.get(api_version="resource.k8s.io/v1", kind=kind)
    assert resource.namespaced is False


@pytest.mark.parametrize("token", ["", "wrong-token"])
def test_requests_without_the_token_get_401(kube_target: KubeTarget, token: str) -> None:
    code, body = kube_target.raw("GET", "/api/v1/namespaces", token=token)
    assert code == 401
    assert body["kind"] == "Status"


def test_default_namespaces_and_root_ca_configmap(kube_target: KubeTarget, ns: str) -> None:
    names = {n.metadata.name for n in core(kube_target).list_namespace().items}
    assert {"default", "kube-system", "kube-public", "kube-node-lease", ns} <= names
    cm = eventually(lambda: _read_or_none(lambda: core(kube_target).read_namespaced_config_map("kube-root-ca.crt", ns)))
    assert "BEGIN CERTIFICATE" in cm.data["ca.crt"]
    assert eventually(lambda: _read_or_none(lambda: core(kube_target).read_namespaced_service_account("default", ns)))


def _read_or_none(read: Any) -> Any:
    try:
        return read()
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


# --- create / read / replace / delete -----------------------------------------------------------


def test_create_populates_server_metadata(kube_target: KubeTarget, ns: str) -> None:
    cm = core(kube_target).create_namespaced_config_map(ns, {"metadata": {"name": "meta"}, "data": {"a": "1"}})
    assert cm.metadata.uid
    assert cm.metadata.resource_version
    assert cm.metadata.creation_timestamp is not None
    assert cm.metadata.namespace == ns
    assert cm.metadata.managed_fields


def test_create_duplicate_is_409_already_exists(kube_target: KubeTarget, ns: str) -> None:
    api = core(kube_target)
    api.create_namespaced_config_map(ns, {"metadata": {"name": "dup"}})
    with pytest.raises(ApiException) as info:
        api.create_namespaced_config_map(ns, {"metadata": {"name": "dup"}})
    assert info.value.status == 409
    assert '"reason":"AlreadyExists"' in info.value.body.replace(" ", "")


def test_get_missing_is_404(kube_target: KubeTarget, ns: str) -> None:
    assert status_of(lambda: core(kube_target).read_namespaced_config_map("missing", ns)) == 404


def test_generate_name(kube_target: KubeTarget, ns: str) -> None:
    cm = core(kube_target).create_namespaced_config_map(ns, {"metadata": {"generateName": "gen-"}})
    assert cm.metadata.name.startswith("gen-")
    assert len(cm.metadata.name) > len("gen-")


def test_create_in_missing_namespace_is_404(kube_target: KubeTarget) -> None:
    assert (
        status_of(lambda: core(kube_target).create_namespaced_config_map("no-such-ns-x1", {"metadata": {"name": "x"}}))
        == 404
    )


@pytest.mark.parametrize("name", ["UPPER", "under_score", "-dash"])
def test_invalid_names_are_422(kube_target: KubeTarget, ns: str, name: str) -> None:
    assert status_of(lambda: core(kube_target).create_namespaced_config_map(ns, {"metadata": {"name": name}})) == 422


def test_replace_with_stale_resource_version_is_409(kube_target: KubeTarget, ns: str) -> None:
    api = core(kube_target)
    cm = api.create_namespaced_config_map(ns, {"metadata": {"name": "rv"}, "data": {"a": "1"}})
    stale = cm.metadata.resource_version
    cm.data = {"a": "2"}
    updated = api.replace_namespaced_config_map("rv", ns, cm)
    assert updated.metadata.resource_version != stale
    cm.data = {"a": "3"}
    cm.metadata.resource_version = stale
    assert status_of(lambda: api.replace_namespaced_config_map("rv", ns, cm)) == 409
    assert api.read_namespaced_config_map("rv", ns).data == {"a": "2"}


def test_noop_update_keeps_resource_version(kube_target: KubeTarget, ns: str) -> None:
    api = core(kube_target)
    cm = api.create_namespaced_config_map(ns, {"metadata": {"name": "noop"}, "data": {"a": "1"}})
    again = api.patch_namespaced_config_map("noop", ns, {"data": {"a": "1"}})
    assert again.metadata.resource_version == cm.metadata.resource_version


def test_cluster_scoped_object_through_a_namespaced_url_is_404(kube_target: KubeTarget, ns: str) -> None:
    code, _body = kube_target.raw("GET", f"/api/v1/namespaces/{ns}/nodes/{kube_target.gpu_nodes[0]}")
    assert code == 404
    code, _body = kube_target.raw("GET", f"/api/v1/nodes/{kube_target.gpu_nodes[0]}")
    assert code == 200


def test_secret_string_data_is_stored_base64_in_data(kube_target: KubeTarget, ns: str) -> None:
    secret = core(kube_target).create_namespaced_secret(ns, {"metadata": {"name": "s"}, "stringData": {"k": "v"}})
    assert secret.data == {"k": base64.b64encode(b"v").decode()}
    assert secret.type == "Opaque"


def test_service_gets_a_cluster_ip_and_defaults(kube_target: KubeTarget, ns: str) -> None:
    svc = core(kube_target).create_namespaced_service(
        ns, {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}], "selector": {"a": "b"}}}
    )
    assert svc.spec.cluster_ip
    assert svc.spec.type == "ClusterIP"
    assert svc.spec.ports[0].protocol == "TCP"
    assert svc.spec.ports[0].target_port == 80


# --- lists and selectors ------------------------------------------------------------------------


@pytest.fixture
def labelled(kube_target: KubeTarget, ns: str) -> str:
    api = core(kube_target)
    for name, labels in (
        ("red-a", {"color": "red", "tier": "a"}),
        ("red-b", {"color": "red", "tier": "b"}),
        ("blue", {"color": "blue"}),
        ("plain", {}),
    ):
        api.create_namespaced_config_map(ns, {"metadata": {"name": name, "labels": labels}})
    return ns


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("color=red", {"red-a", "red-b"}),
        ("color==red,tier=b", {"red-b"}),
        ("color!=red", {"blue", "plain", "kube-root-ca.crt"}),
        ("color in (red,blue)", {"red-a", "red-b", "blue"}),
        ("color notin (red)", {"blue", "plain", "kube-root-ca.crt"}),
        ("tier", {"red-a", "red-b"}),
        ("!color", {"plain", "kube-root-ca.crt"}),
    ],
)
def test_label_selectors(kube_target: KubeTarget, labelled: str, selector: str, expected: set[str]) -> None:
    eventually(
        lambda: _read_or_none(lambda: core(kube_target).read_namespaced_config_map("kube-root-ca.crt", labelled))
    )
    items = core(kube_target).list_namespaced_config_map(labelled, label_selector=selector).items
    assert {i.metadata.name for i in items} == expected


def test_field_selector_metadata_name(kube_target: KubeTarget, labelled: str) -> None:
    items = core(kube_target).list_namespaced_config_map(labelled, field_selector="metadata.name=blue").items
    assert [i.metadata.name for i in items] == ["blue"]


def test_unsupported_field_selector_is_400(kube_target: KubeTarget, labelled: str) -> None:
    def call() -> Any:
        return core(kube_target).list_namespaced_config_map(labelled, field_selector="data.x=1")

    assert status_of(call) == 400


def test_list_has_kind_and_resource_version(kube_target: KubeTarget, labelled: str) -> None:
    code, body = kube_target.raw("GET", f"/api/v1/namespaces/{labelled}/configmaps")
    assert code == 200
    assert body["kind"] == "ConfigMapList"
    assert int(body["metadata"]["resourceVersion"]) > 0


def test_list_pagination_with_limit_and_continue(kube_target: KubeTarget, labelled: str) -> None:
    """Pages hold at most ``limit`` items (a real server may return fewer when a selector filters)."""
    api = core(kube_target)
    names: list[str] = []
    token = None
    for _page in range(10):
        page = api.list_namespaced_config_map(labelled, limit=2, label_selector="color", _continue=token)
        assert len(page.items) <= 2
        names += [i.metadata.name for i in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert sorted(names) == ["blue", "red-a", "red-b"]
    first = api.list_namespaced_config_map(labelled, limit=1)
    assert len(first.items) == 1
    assert first.metadata._continue


def test_cross_namespace_list_and_isolation(kube_target: KubeTarget, labelled: str, ns: str) -> None:
    all_cms = core(kube_target).list_config_map_for_all_namespaces(label_selector="color=red").items
    assert {(c.metadata.namespace, c.metadata.name) for c in all_cms} >= {(labelled, "red-a"), (labelled, "red-b")}
    other = core(kube_target).create_namespace({"metadata": {"generateName": "kc-other-"}}).metadata.name
    try:
        assert core(kube_target).list_namespaced_config_map(other, label_selector="color").items == []
    finally:
        core(kube_target).delete_namespace(other)


# --- patches ------------------------------------------------------------------------------------


def test_merge_patch_null_deletes_a_key(kube_target: KubeTarget, ns: str) -> None:
    api = core(kube_target)
    api.create_namespaced_config_map(ns, {"metadata": {"name": "m"}, "data": {"a": "1", "b": "2"}})
    code, body = kube_target.raw(
        "PATCH",
        f"/api/v1/namespaces/{ns}/configmaps/m",
        {"data": {"a": None, "c": "3"}},
        {"Content-Type": "application/merge-patch+json"},
    )
    assert code == 200
    assert body["data"] == {"b": "2", "c": "3"}


def test_json_patch(kube_target: KubeTarget, ns: str) -> None:
    api = core(kube_target)
    api.create_namespaced_config_map(ns, {"metadata": {"name": "j"}, "data": {"a": "1"}})
    ops = [{"op": "add", "path": "/data/b", "value": "2"}, {"op": "remove", "path": "/data/a"}]
    assert api.patch_namespaced_config_map("j", ns, ops).data == {"b": "2"}
    bad = [{"op": "remove", "path": "/data/missing"}]
    assert status_of(lambda: api.patch_namespaced_config_map("j", ns, bad)) in (422, 500)


def test_strategic_merge_merges_containers_by_name(kube_target: KubeTarget, ns: str) -> None:
    apps(kube_target).create_namespaced_deployment(ns, deployment("smp"))
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.28"}]}}}}
    code, body = kube_target.raw(
        "PATCH",
        f"/apis/apps/v1/namespaces/{ns}/deployments/smp",
        patch,
        {"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert code == 200
    containers = {c["name"]: c["image"] for c in body["spec"]["template"]["spec"]["containers"]}
    assert containers == {"web": "nginx:1.28", "side": "busybox:1"}


def test_merge_patch_replaces_lists(kube_target: KubeTarget, ns: str) -> None:
    apps(kube_target).create_namespaced_deployment(ns, deployment("mp"))
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.28"}]}}}}
    code, body = kube_target.raw(
        "PATCH",
        f"/apis/apps/v1/namespaces/{ns}/deployments/mp",
        patch,
        {"Content-Type": "application/merge-patch+json"},
    )
    assert code == 200
    assert [c["name"] for c in body["spec"]["template"]["spec"]["containers"]] == ["web"]


def test_deployment_defaults_and_generation(kube_target: KubeTarget, ns: str) -> None:
    api = apps(kube_target)
    created = api.create_namespaced_deployment(ns, deployment("gen"))
    assert created.spec.replicas == 1
    assert created.metadata.generation == 1
    assert created.spec.template.spec.containers[0].image_pull_policy == "IfNotPresent"
    labelled = api.patch_namespaced_deployment("gen", ns, {"metadata": {"labels": {"x": "y"}}})
    assert labelled.metadata.generation == 1
    scaled = api.patch_namespaced_deployment("gen", ns, {"spec": {"replicas": 3}})
    assert scaled.metadata.generation == 2


def test_invalid_builtin_is_422(kube_target: KubeTarget, ns: str) -> None:
    bad = deployment("bad")
    bad["spec"]["replicas"] = "one"
    code, body = kube_target.raw("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", bad)
    assert code in (400, 422)
    assert body["kind"] == "Status"
    bad = deployment("bad")
    bad["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    code, body = kube_target.raw("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", bad)
    assert code == 422
    assert body["reason"] == "Invalid"


def test_status_subresource_is_separate(kube_target: KubeTarget, ns: str) -> None:
    api = apps(kube_target)
    api.create_namespaced_daemon_set(
        ns,
        {
            "metadata": {"name": "sub"},
            "spec": {
                "selector": {"matchLabels": {"a": "sub"}},
                "template": {
                    "metadata": {"labels": {"a": "sub"}},
                    "spec": {"nodeSelector": {"kc/none": "x"}, "containers": [{"name": "c", "image": "busybox:1"}]},
                },
            },
        },
    )
    code, body = kube_target.raw(
        "PATCH",
        f"/apis/apps/v1/namespaces/{ns}/daemonsets/sub",
        {"status": {"numberReady": 7}},
        {"Content-Type": "application/merge-patch+json"},
    )
    assert code == 200
    assert body["status"].get("numberReady", 0) != 7
    status = {
        "status": {"numberReady": 7, "desiredNumberScheduled": 7, "currentNumberScheduled": 7, "numberMisscheduled": 0}
    }
    code, body = kube_target.raw(
        "PATCH",
        f"/apis/apps/v1/namespaces/{ns}/daemonsets/sub/status",
        status,
        {"Content-Type": "application/merge-patch+json"},
    )
    assert code == 200
    assert body["status"]["numberReady"] == 7


def test_node_status_advertises_gpus(kube_target: KubeTarget) -> None:
    node = core(kube_target).read_node(kube_target.gpu_nodes[0])
    assert int(node.status.allocatable["nvidia.com/gpu"]) > 0
    assert node.metadata.labels["nvidia.com/gpu.present"] == "true"


# --- server-side apply --------------------------------------------------------------------------


def _apply(target: KubeTarget, ns: str, data: dict[str, str], manager: str, force: bool = False) -> tuple[int, Any]:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa", "namespace": ns}, "data": data}
    query = f"?fieldManager={manager}" + ("&force=true" if force else "")
    return target.raw(
        "PATCH",
        f"/api/v1/namespaces/{ns}/configmaps/ssa{query}",
        body,
        {"Content-Type": "application/apply-patch+yaml"},
    )


def test_server_side_apply_creates_updates_and_records_managers(kube_target: KubeTarget, ns: str) -> None:
    code, body = _apply(kube_target, ns, {"a": "1", "b": "2"}, "alpha")
    assert code == 201
    assert [m["manager"] for m in body["metadata"]["managedFields"]] == ["alpha"]
    assert body["metadata"]["managedFields"][0]["operation"] == "Apply"
    code, body = _apply(kube_target, ns, {"a": "1", "b": "3"}, "alpha")
    assert code == 200
    assert body["data"] == {"a": "1", "b": "3"}


def test_server_side_apply_conflict_is_409_unless_forced(kube_target: KubeTarget, ns: str) -> None:
    _apply(kube_target, ns, {"a": "1"}, "alpha")
    code, body = _apply(kube_target, ns, {"a": "2"}, "beta")
    assert code == 409
    assert body["reason"] == "Conflict"
    assert "alpha" in body["message"]
    code, body = _apply(kube_target, ns, {"a": "2"}, "beta", force=True)
    assert code == 200
    assert body["data"] == {"a": "2"}
    owners = {m["manager"]: m["fieldsV1"] for m in body["metadata"]["managedFields"]}
    assert "f:a" in owners["beta"]["f:data"]
    assert "f:a" not in (owners.get("alpha") or {}).get("f:data", {})


def test_server_side_apply_same_value_is_shared_without_conflict(kube_target: KubeTarget, ns: str) -> None:
    _apply(kube_target, ns, {"a": "1"}, "alpha")
    code, _body = _apply(kube_target, ns, {"a": "1"}, "beta")
    assert code == 200


def test_server_side_apply_removes_fields_a_manager_stops_applying(kube_target: KubeTarget, ns: str) -> None:
    _apply(kube_target, ns, {"a": "1", "b": "2"}, "alpha")
    code, body = _apply(kube_target, ns, {"a": "1"}, "alpha")
    assert code == 200
    assert body["data"] == {"a": "1"}


def test_update_takes_ownership_from_an_applier_without_conflict(kube_target: KubeTarget, ns: str) -> None:
    _apply(kube_target, ns, {"a": "1"}, "alpha")
    core(kube_target).patch_namespaced_config_map("ssa", ns, {"data": {"a": "9"}}, field_manager="editor")
    code, body = _apply(kube_target, ns, {"a": "1"}, "alpha")
    assert code == 409
    assert "editor" in body["message"]


# --- deletion -----------------------------------------------------------------------------------


def test_finalizer_holds_deletion_until_removed(kube_target: KubeTarget, ns: str) -> None:
    api = core(kube_target)
    api.create_namespaced_config_map(ns, {"metadata": {"name": "fin", "finalizers": [HELD]}})
    api.delete_namespaced_config_map("fin", ns)
    held = api.read_namespaced_config_map("fin", ns)
    assert held.metadata.deletion_timestamp is not None
    api.patch_namespaced_config_map("fin", ns, {"metadata": {"finalizers": None}})
    wait_deleted(lambda: api.read_namespaced_config_map("fin", ns))


def test_delete_returns_status_then_404(kube_target: KubeTarget, ns: str) -> None:
    api = core(kube_target)
    api.create_namespaced_config_map(ns, {"metadata": {"name": "gone"}})
    code, body = kube_target.raw("DELETE", f"/api/v1/namespaces/{ns}/configmaps/gone")
    assert code == 200
    assert body["kind"] in ("Status", "ConfigMap")
    assert status_of(lambda: api.read_namespaced_config_map("gone", ns)) == 404


@pytest.mark.parametrize("verb", ["create", "delete"])
def test_dry_run_persists_nothing(kube_target: KubeTarget, ns: str, verb: str) -> None:
    api = core(kube_target)
    if verb == "create":
        made = api.create_namespaced_config_map(ns, {"metadata": {"name": "dry"}}, dry_run="All")
        assert made.metadata.name == "dry"
        assert made.metadata.uid  # the would-be object, defaulted...
        assert made.metadata.resource_version is None  # ...but never stored
        assert status_of(lambda: api.read_namespaced_config_map("dry", ns)) == 404
    else:
        api.create_namespaced_config_map(ns, {"metadata": {"name": "dry"}})
        api.delete_namespaced_config_map("dry", ns, dry_run="All")
        assert api.read_namespaced_config_map("dry", ns).metadata.name == "dry"


CM = "/api/v1/namespaces/{ns}/configmaps"


def _dry_write(target: KubeTarget, ns: str, verb: str, value: str, dry_run: str = "All") -> tuple[int, Any]:
    """Set data.a of ConfigMap ``dry`` to ``value`` with one write verb, as a dry run."""
    path = CM.format(ns=ns) + "/dry"
    if verb == "patch":
        return target.raw(
            "PATCH",
            f"{path}?dryRun={dry_run}",
            {"data": {"a": value}},
            {"Content-Type": "application/merge-patch+json"},
        )
    if verb == "replace":
        _code, current = target.raw("GET", path)
        current["data"] = {"a": value}
        return target.raw("PUT", f"{path}?dryRun={dry_run}", current)
    if verb == "apply":
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dry"}, "data": {"a": value}}
        query = f"?dryRun={dry_run}&fieldManager=dry-applier&force=true"
        return target.raw("PATCH", path + query, body, {"Content-Type": "application/apply-patch+yaml"})
    if verb == "create":
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dry-new"}, "data": {"a": value}}
        return target.raw("POST", f"{CM.format(ns=ns)}?dryRun={dry_run}", body)
    return target.raw("DELETE", f"{path}?dryRun={dry_run}")


@pytest.mark.parametrize("verb", ["patch", "replace", "apply"])
def test_dry_run_update_answers_the_would_be_object_and_changes_nothing(
    kube_target: KubeTarget, ns: str, verb: str
) -> None:
    api = core(kube_target)
    before = api.create_namespaced_config_map(ns, {"metadata": {"name": "dry"}, "data": {"a": "1"}})
    rv = before.metadata.resource_version
    code, would_be = _dry_write(kube_target, ns, verb, "2")
    assert code == 200, would_be
    assert would_be["data"] == {"a": "2"}
    assert would_be["metadata"]["resourceVersion"] == rv  # not bumped: nothing was written
    if verb == "apply":
        assert "dry-applier" in {m["manager"] for m in would_be["metadata"]["managedFields"]}
    after = api.read_namespaced_config_map("dry", ns)
    assert after.data == {"a": "1"}
    assert after.metadata.resource_version == rv
    assert "dry-applier" not in {m.manager for m in after.metadata.managed_fields or []}


@pytest.mark.parametrize(
    ("verb", "options"),
    [
        ("create", "CreateOptions"),
        ("patch", "PatchOptions"),
        ("replace", "UpdateOptions"),
        ("apply", "PatchOptions"),
        ("delete", "DeleteOptions"),
    ],
)
def test_unknown_dry_run_value_is_422_and_changes_nothing(
    kube_target: KubeTarget, ns: str, verb: str, options: str
) -> None:
    api = core(kube_target)
    rv = api.create_namespaced_config_map(
        ns, {"metadata": {"name": "dry"}, "data": {"a": "1"}}
    ).metadata.resource_version
    code, body = _dry_write(kube_target, ns, verb, "2", dry_run="Bogus")
    unsupported = 'Unsupported value: []string{"Bogus"}: supported values: "All"'
    assert (code, body["reason"]) == (422, "Invalid"), body
    assert body["message"] == f'{options}.meta.k8s.io "" is invalid: dryRun: {unsupported}'
    assert (body["details"]["group"], body["details"]["kind"]) == ("meta.k8s.io", options)
    assert body["details"]["causes"] == [
        {"reason": "FieldValueNotSupported", "field": "dryRun", "message": unsupported}
    ]
    after = api.read_namespaced_config_map("dry", ns)
    assert (after.data, after.metadata.resource_version) == ({"a": "1"}, rv)
    assert status_of(lambda: api.read_namespaced_config_map("dry-new", ns)) == 404


def _owner_and_dependent(target: KubeTarget, ns: str) -> tuple[Any, str]:
    api = core(target)
    owner = api.create_namespaced_config_map(ns, {"metadata": {"name": "owner"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    api.create_namespaced_config_map(ns, {"metadata": {"name": "dependent", "ownerReferences": [ref]}})
    return api, "dependent"


@pytest.mark.parametrize("policy", ["Background", "Foreground"])
def test_garbage_collection_follows_owner_references(kube_target: KubeTarget, ns: str, policy: str) -> None:
    api, dependent = _owner_and_dependent(kube_target, ns)
    api.delete_namespaced_config_map("owner", ns, propagation_policy=policy)
    wait_deleted(lambda: api.read_namespaced_config_map(dependent, ns), what="dependent to be collected")
    wait_deleted(lambda: api.read_namespaced_config_map("owner", ns), what="owner to be deleted")


def test_orphan_policy_keeps_dependents(kube_target: KubeTarget, ns: str) -> None:
    api, dependent = _owner_and_dependent(kube_target, ns)
    api.delete_namespaced_config_map("owner", ns, propagation_policy="Orphan")
    wait_deleted(lambda: api.read_namespaced_config_map("owner", ns))

    def orphaned() -> Any:
        found = api.read_namespaced_config_map(dependent, ns)
        return None if found.metadata.owner_references else found

    kept = eventually(orphaned, what="dependent to lose its ownerReference")
    assert kept.metadata.name == dependent


def test_namespace_deletion_cascades_and_blocks_new_content(kube_target: KubeTarget) -> None:
    api = core(kube_target)
    name = api.create_namespace({"metadata": {"generateName": "kc-cascade-"}}).metadata.name
    api.create_namespaced_config_map(name, {"metadata": {"name": "held", "finalizers": [HELD]}})
    api.create_namespaced_secret(name, {"metadata": {"name": "plain"}, "stringData": {"a": "b"}})
    api.delete_namespace(name)
    assert api.read_namespace(name).status.phase == "Terminating"
    wait_deleted(lambda: api.read_namespaced_secret("plain", name), what="namespace content to be deleted")
    code, body = kube_target.raw("POST", f"/api/v1/namespaces/{name}/configmaps", {"metadata": {"name": "late"}})
    assert code == 403
    assert "being terminated" in body["message"]
    api.patch_namespaced_config_map("held", name, {"metadata": {"finalizers": None}})
    wait_deleted(lambda: api.read_namespace(name), what="namespace to be removed")


def test_unknown_fields_are_pruned(kube_target: KubeTarget, ns: str) -> None:
    body = {"metadata": {"name": "prune"}, "data": {"a": "1"}, "bogus": 1}
    code, created = kube_target.raw("POST", f"/api/v1/namespaces/{ns}/configmaps", body)
    assert code == 201
    assert "bogus" not in created
    assert created["data"] == {"a": "1"}


@pytest.mark.emulator_only  # fieldValidation arrived in 1.25 (GA 1.27); the 1.20 lane ignores it
def test_strict_field_validation_rejects_unknown_fields(kube_target: KubeTarget, ns: str) -> None:
    body = {"metadata": {"name": "strict"}, "spec": {"containers": [{"name": "c", "image": "x:1", "colour": "red"}]}}
    code, status = kube_target.raw("POST", f"/api/v1/namespaces/{ns}/pods?fieldValidation=Strict", body)
    assert code == 400
    assert 'unknown field "spec.containers[0].colour"' in status["message"]
