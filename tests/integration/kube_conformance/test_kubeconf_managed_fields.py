"""managedFields after a sequence of writes: which manager owns what, how it is encoded, in what order.

Why: server-side apply decides conflicts and removals from managedFields, and ``kubectl get
--show-managed-fields`` shows them to users. The expected values were recorded on the real lane
(Kubernetes 1.20.2) and hold on the emulator: entries sorted by operation (Apply before Update),
time, then manager; a field the object no longer has is owned by no one and an entry left empty is
dropped; an Apply owns leaves and keyed list items only (no ``.`` for maps), an Update also owns
the maps and lists it creates (``.``), and a node owned without owned children is ``{}``.

Not compared: ``time``, and ``subresource`` (1.20 predates it; the emulator, like 1.22+, records
``status`` there). Known emulator difference, not tested here: for built-in kinds created by an
Update, the apiserver does not own struct fields its Go types always carry (``spec``,
``template``), the emulator marks them (docs/lab/kube.md).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubeconf_support import KubeTarget, eventually, thing_crd

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


class Writer:
    """Writes through the API as named field managers and reads managedFields back."""

    def __init__(self, target: KubeTarget, collection: str) -> None:
        self.target, self.collection = target, collection

    def send(
        self, method: str, name: str | None, body: Any, manager: str, content_type: str = "application/json", *,
        force: bool = False,
    ) -> dict[str, Any]:  # fmt: skip
        query = f"?fieldManager={manager}" + ("&force=true" if force else "")
        path = self.collection + (f"/{name}" if name else "") + query
        data = json.dumps(body).encode()
        code, answer = self.target.raw(method, path, data, headers={"Content-Type": content_type})
        assert code in (200, 201), answer
        return answer

    @staticmethod
    def managed(obj: dict[str, Any]) -> list[tuple[str, str, Any]]:
        return [(e["manager"], e["operation"], e["fieldsV1"]) for e in obj["metadata"]["managedFields"]]


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


@pytest.fixture
def configmaps(kube_target: KubeTarget, ns: str) -> Writer:
    return Writer(kube_target, f"/api/v1/namespaces/{ns}/configmaps")


def test_fields_removed_from_the_object_are_owned_by_no_one(configmaps: Writer) -> None:
    configmaps.send("PATCH", "a", configmap("a", mode="fast", region="ewr"), "kubectl", APPLY, force=True)
    configmaps.send("PATCH", "a", {"data": {"mode": "slow"}}, "kubectl-patch", STRATEGIC)
    got = configmaps.send("PATCH", "a", [{"op": "remove", "path": "/data/region"}], "kubectl-patch", JSON_PATCH)
    # kubectl-patch took mode; region is gone: the applier owns nothing and its entry is dropped.
    assert Writer.managed(got) == [("kubectl-patch", "Update", {"f:data": {"f:mode": {}}})]


def test_an_update_that_removes_a_field_takes_it_from_its_applier(configmaps: Writer) -> None:
    configmaps.send("PATCH", "d", configmap("d", a="1", b="2"), "applier", APPLY)
    current = configmaps.send("PATCH", "d", {}, "noop", MERGE)
    current["data"] = {"a": "1"}
    got = configmaps.send("PUT", "d", current, "putter")
    assert Writer.managed(got) == [("applier", "Apply", {"f:data": {"f:a": {}}})]


def test_entries_are_sorted_apply_first_then_by_time(configmaps: Writer) -> None:
    cm = configmap("b", k1="v")
    cm["metadata"]["labels"] = {"x": "1"}
    configmaps.send("POST", None, cm, "tests")
    configmaps.send("PATCH", "b", configmap("b", k2="v"), "kubectl", APPLY, force=True)
    time.sleep(1.1)  # entries are ordered by time to the second
    configmaps.send("PATCH", "b", configmap("b", k3="v"), "zeta", APPLY, force=True)
    configmaps.send("PATCH", "b", {"data": {"k4": "v"}}, "alpha", MERGE)
    time.sleep(1.1)
    configmaps.send("PATCH", "b", configmap("b", k2="v", k5="v"), "kubectl", APPLY, force=True)
    got = configmaps.send("PATCH", "b", {"data": {"k1": "w"}}, "beta", MERGE)
    assert Writer.managed(got) == [
        ("zeta", "Apply", {"f:data": {"f:k3": {}}}),
        ("kubectl", "Apply", {"f:data": {"f:k2": {}, "f:k5": {}}}),
        # The creating Update owns the maps it created (data now without owned keys: {}).
        ("tests", "Update", {"f:data": {}, "f:metadata": {"f:labels": {".": {}, "f:x": {}}}}),
        ("alpha", "Update", {"f:data": {"f:k4": {}}}),
        ("beta", "Update", {"f:data": {"f:k1": {}}}),
    ]


@pytest.fixture
def things(kube_target: KubeTarget) -> Iterator[Writer]:
    spec = {
        "type": "object",
        "properties": {
            "size": {"type": "integer"},
            "inner": {"type": "object", "properties": {"a": {"type": "string"}}},
            "tags": {"type": "object", "additionalProperties": {"type": "string"}},
            "items": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "required": ["name"],
                          "properties": {"name": {"type": "string"}, "v": {"type": "string"}}},
            },
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }  # fmt: skip
    schema = {
        "type": "object",
        "properties": {"spec": spec, "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
    }
    crd = thing_crd(schema, prefix="mf", status_subresource=True)
    group = crd["spec"]["group"]
    code, body = kube_target.raw("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert code == 201, body
    collection = f"/apis/{group}/v1/namespaces/default/things"
    eventually(lambda: kube_target.raw("GET", collection)[0] == 200, timeout=60, what="the Thing kind served")
    try:
        yield Writer(kube_target, collection)
    finally:
        kube_target.raw("DELETE", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/things.{group}")


def test_custom_resource_update_apply_and_status_managers(things: Writer) -> None:
    api_version = things.collection.split("/")[2] + "/v1"
    spec = {"size": 1, "inner": {"a": "x"}, "tags": {"t": "1"}, "items": [{"name": "n1", "v": "1"}],
            "free": {"x": {"y": 1}}}  # fmt: skip
    body = {"apiVersion": api_version, "kind": "Thing", "metadata": {"name": "t1", "labels": {"l": "1"},
            "annotations": {"a": "1"}}, "spec": spec}  # fmt: skip
    posted = things.send("POST", None, body, "poster")
    item = {".": {}, "f:name": {}, "f:v": {}}
    assert Writer.managed(posted) == [
        ("poster", "Update", {
            "f:metadata": {"f:annotations": {".": {}, "f:a": {}}, "f:labels": {".": {}, "f:l": {}}},
            "f:spec": {".": {}, "f:free": {".": {}, "f:x": {}}, "f:inner": {".": {}, "f:a": {}},
                       "f:items": {".": {}, 'k:{"name":"n1"}': item}, "f:size": {}, "f:tags": {".": {}, "f:t": {}}},
        }),
    ]  # fmt: skip

    applied = {**body, "metadata": {"name": "t2", "labels": {"l": "1"}}}
    things.send("PATCH", "t2", applied, "applier", APPLY)
    things.send("PATCH", "t2", {"spec": {"inner": None}}, "m", MERGE)
    things.send("PATCH", "t2", {"spec": {"inner": {"a": "z"}}}, "m", MERGE)
    got = things.send(
        "PATCH", "t2/status", {"status": {"conditions": [{"type": "Ready"}], "obs": {"x": 1}}}, "st", MERGE
    )
    applied_spec = {"f:free": {"f:x": {}}, "f:items": {'k:{"name":"n1"}': item}, "f:size": {}, "f:tags": {"f:t": {}}}
    apply_set = {"f:metadata": {"f:labels": {"f:l": {}}}, "f:spec": applied_spec}
    assert Writer.managed(got) == [
        ("applier", "Apply", apply_set),  # inner went with the merge patch that removed it
        ("m", "Update", {"f:spec": {"f:inner": {".": {}, "f:a": {}}}}),
        # Fields the schema leaves to preserve-unknown-fields are leaves, whatever their value.
        ("st", "Update", {"f:status": {".": {}, "f:conditions": {}, "f:obs": {}}}),
    ]
