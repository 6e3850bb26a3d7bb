"""StorageClass updates: parameters, provisioner, reclaimPolicy and volumeBindingMode are immutable.

Why: a role that recomputes a StorageClass parameter (longhorn_rwx's replica count after a scale-up)
works against a server that takes any update and fails on a real one with a 422. These tests pin the
apiserver's answer (message, causes, nothing stored) on the emulator and, with MP_KUBE_TARGET=real,
on the real lane, where every expectation below was first observed (kube-apiserver v1.20.2).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubeconf_support import KubeTarget

BASE = "/apis/storage.k8s.io/v1/storageclasses"
MERGE = {"Content-Type": "application/merge-patch+json"}
APPLY = {"Content-Type": "application/apply-patch+yaml"}
FORBIDDEN = {
    name: {"reason": "FieldValueForbidden", "field": name, "message": f"Forbidden: updates to {name} are forbidden."}
    for name in ("parameters", "provisioner", "reclaimPolicy")
}
BINDING_MODE = {
    "reason": "FieldValueInvalid",
    "field": "volumeBindingMode",
    "message": 'Invalid value: "WaitForFirstConsumer": field is immutable',
}


def storage_class(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "driver.longhorn.io",
        **fields,
    }


@pytest.fixture
def make_class(kube_target: KubeTarget) -> Iterator[Any]:
    """Create StorageClasses (cluster-scoped: unique names) and delete them afterwards."""
    names: list[str] = []

    def make(**fields: Any) -> dict[str, Any]:
        name = f"kc-sc-{uuid.uuid4().hex[:8]}"
        code, body = kube_target.raw("POST", BASE, storage_class(name, **fields))
        assert code == 201, body
        names.append(name)
        return body

    yield make
    for name in names:
        kube_target.raw("DELETE", f"{BASE}/{name}")


def rejected(body: dict[str, Any], name: str, causes: list[dict[str, str]]) -> None:
    text = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
    text = f"[{text}]" if len(causes) > 1 else text
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "Invalid", 422), body
    assert body["message"] == f'StorageClass.storage.k8s.io "{name}" is invalid: {text}'
    assert (body["details"]["name"], body["details"]["group"], body["details"]["kind"]) == (
        name,
        "storage.k8s.io",
        "StorageClass",
    )
    assert body["details"]["causes"] == causes


@pytest.mark.parametrize(
    ("patch", "causes"),
    [
        ({"parameters": {"numberOfReplicas": "2"}}, [FORBIDDEN["parameters"]]),
        ({"parameters": {"fsType": None}}, [FORBIDDEN["parameters"]]),
        ({"parameters": {"dataLocality": "best-effort"}}, [FORBIDDEN["parameters"]]),
        ({"provisioner": "rancher.io/local-path"}, [FORBIDDEN["provisioner"]]),
        ({"reclaimPolicy": "Retain"}, [FORBIDDEN["reclaimPolicy"]]),
        ({"volumeBindingMode": "WaitForFirstConsumer"}, [BINDING_MODE]),
        (
            {
                "parameters": {"numberOfReplicas": "3"},
                "provisioner": "rancher.io/local-path",
                "reclaimPolicy": "Retain",
                "volumeBindingMode": "WaitForFirstConsumer",
            },
            [FORBIDDEN["parameters"], FORBIDDEN["provisioner"], FORBIDDEN["reclaimPolicy"], BINDING_MODE],
        ),
    ],
    ids=["replicas", "drop-param", "add-param", "provisioner", "reclaim", "binding-mode", "all-four"],
)
def test_immutable_fields_are_422_and_nothing_changes(
    kube_target: KubeTarget, make_class: Any, patch: dict[str, Any], causes: list[dict[str, str]]
) -> None:
    created = make_class(parameters={"numberOfReplicas": "1", "fsType": "ext4"})
    name = created["metadata"]["name"]
    code, body = kube_target.raw("PATCH", f"{BASE}/{name}", patch, headers=MERGE)
    assert code == 422, body
    rejected(body, name, causes)
    code, after = kube_target.raw("GET", f"{BASE}/{name}")
    assert code == 200
    assert after["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert after["parameters"] == {"numberOfReplicas": "1", "fsType": "ext4"}


def test_defaults_and_mutable_fields(kube_target: KubeTarget, make_class: Any) -> None:
    created = make_class(parameters={"numberOfReplicas": "1"})
    assert (created["reclaimPolicy"], created["volumeBindingMode"]) == ("Delete", "Immediate")
    name = created["metadata"]["name"]
    # Labels, allowVolumeExpansion, mountOptions may change; the same parameters and the defaulted
    # fields sent again (or left out: defaulting fills them in) are no change of theirs.
    patch = {
        "metadata": {"labels": {"tier": "rwx"}},
        "allowVolumeExpansion": True,
        "mountOptions": ["nfsvers=4.1"],
        "parameters": {"numberOfReplicas": "1"},
        "reclaimPolicy": "Delete",
        "volumeBindingMode": None,
    }
    code, body = kube_target.raw("PATCH", f"{BASE}/{name}", patch, headers=MERGE)
    assert code == 200, body
    assert body["allowVolumeExpansion"] is True
    assert body["metadata"]["labels"] == {"tier": "rwx"}
    assert (body["reclaimPolicy"], body["volumeBindingMode"]) == ("Delete", "Immediate")


def test_replace_with_other_parameters_is_422(kube_target: KubeTarget, make_class: Any) -> None:
    created = make_class(parameters={"numberOfReplicas": "1"})
    name = created["metadata"]["name"]
    changed = {**created, "parameters": {"numberOfReplicas": "2"}}
    code, body = kube_target.raw("PUT", f"{BASE}/{name}", changed)
    assert code == 422, body
    rejected(body, name, [FORBIDDEN["parameters"]])


def test_empty_parameters_are_not_stored_and_sending_them_later_is_a_change(
    kube_target: KubeTarget, make_class: Any
) -> None:
    """Go's map with omitempty: {} at create comes back as no parameters; {} on update then differs."""
    created = make_class(parameters={})
    name = created["metadata"]["name"]
    assert "parameters" not in created
    code, body = kube_target.raw("PUT", f"{BASE}/{name}", created)
    assert code == 200, body
    code, body = kube_target.raw("PUT", f"{BASE}/{name}", {**body, "parameters": {}})
    assert code == 422, body
    rejected(body, name, [FORBIDDEN["parameters"]])


def test_dry_run_and_server_side_apply_are_refused_too(kube_target: KubeTarget, make_class: Any) -> None:
    created = make_class(parameters={"numberOfReplicas": "1"})
    name = created["metadata"]["name"]
    code, body = kube_target.raw("PATCH", f"{BASE}/{name}?dryRun=All", {"provisioner": "x.io/y"}, headers=MERGE)
    assert code == 422, body
    rejected(body, name, [FORBIDDEN["provisioner"]])
    applied = storage_class(name, parameters={"numberOfReplicas": "2"})
    code, body = kube_target.raw("PATCH", f"{BASE}/{name}?fieldManager=kc-test&force=true", applied, headers=APPLY)
    assert code == 422, body
    rejected(body, name, [FORBIDDEN["parameters"]])
