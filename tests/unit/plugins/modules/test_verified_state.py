"""verified_state: when a phase's record holds, and when it must not (an in-memory API with 409 semantics)."""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    InputError,
    MetalplaneError,
    NotFoundError,
)
from ansible_collections.metalplane.inference.plugins.module_utils._kube.object_store import Conflict
from ansible_collections.metalplane.inference.plugins.modules import verified_state

NS = "longhorn-system"
DS_READY = "status.numberReady == status.desiredNumberScheduled"


class MemoryApi:
    """Objects by (apiVersion, kind, namespace, name); uid and resourceVersion stamped as a server does."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        self.writes: list[str] = []
        self.reads = 0
        self._versions = itertools.count(1)
        self._uids = itertools.count(1)
        self.before_replace: Callable[[], None] | None = None
        self.not_served: set[str] = set()

    def put(self, api_version: str, kind: str, namespace: str, name: str, **fields: Any) -> dict[str, Any]:
        obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "uid": f"u{next(self._uids)}"}}
        if namespace:
            obj["metadata"]["namespace"] = namespace
        obj["metadata"].update(fields.pop("metadata", {}))
        obj.update(fields)
        obj["metadata"]["resourceVersion"] = str(next(self._versions))
        self.objects[(api_version, kind, namespace, name)] = obj
        return obj

    def touch(self, api_version: str, kind: str, namespace: str, name: str, **changes: Any) -> None:
        obj = self.objects[(api_version, kind, namespace, name)]
        for path, value in changes.items():
            target = obj
            *parents, last = path.split("__")
            for part in parents:
                target = target.setdefault(part, {})
            target[last] = value
        obj["metadata"]["resourceVersion"] = str(next(self._versions))

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        self.reads += 1
        found = self.objects.get((api_version, kind, namespace, name))
        return copy.deepcopy(found) if found else None

    def list(self, api_version: str, kind: str, namespace: str, label_selector: str | None) -> list[dict[str, Any]]:
        self.reads += 1
        if kind in self.not_served:
            raise NotFoundError(f"The API server does not serve kind {kind!r} in {api_version!r}")
        terms = dict(t.split("=", 1) for t in label_selector.split(",")) if label_selector else {}
        return [
            copy.deepcopy(o)
            for (v, k, ns, _n), o in sorted(self.objects.items())
            if (v, k) == (api_version, kind)
            and (not namespace or ns == namespace)
            and all((o["metadata"].get("labels") or {}).get(key) == value for key, value in terms.items())
        ]

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        self.writes.append("create")
        meta = body["metadata"]
        key = (body["apiVersion"], body["kind"], meta["namespace"], meta["name"])
        if key in self.objects:
            raise Conflict("exists", status=409)
        return self.put(*key, **{k: v for k, v in copy.deepcopy(dict(body)).items() if k not in ("apiVersion", "kind")})

    def replace(self, body: Mapping[str, Any]) -> dict[str, Any]:
        if self.before_replace:
            hook, self.before_replace = self.before_replace, None
            hook()
        self.writes.append("replace")
        meta = body["metadata"]
        key = (body["apiVersion"], body["kind"], meta["namespace"], meta["name"])
        current = self.objects.get(key)
        if current is None or current["metadata"]["resourceVersion"] != meta.get("resourceVersion"):
            raise Conflict("changed", status=409)
        obj = copy.deepcopy(dict(body))
        obj["metadata"]["resourceVersion"] = str(next(self._versions))
        self.objects[key] = obj
        return copy.deepcopy(obj)

    def record(self) -> dict[str, Any]:
        found = self.objects.get(("v1", "ConfigMap", NS, "metalplane-verified"))
        return {k: json.loads(v) for k, v in ((found or {}).get("data") or {}).items()}


class FakeModule:
    def __init__(self, params: dict[str, Any], *, check_mode: bool = False) -> None:
        defaults = {"state": "query", "record": "metalplane-verified", "namespace": NS, "phase": "storage"}
        self.params = {**defaults, **params}
        self.check_mode = check_mode

    def require(self, _library: str, _traceback: str | None) -> None:
        return None


WATCH = [
    {"kind": "Node"},
    {"api_version": "apps/v1", "kind": "DaemonSet", "namespace": NS, "name": "longhorn-manager",
     "identity": "generation", "expression": DS_READY},
    {"kind": "Secret", "namespace": NS, "label_selectors": ["owner=helm", "name=longhorn", "status=deployed"]},
    {"api_version": "storage.k8s.io/v1", "kind": "StorageClass", "name": "rwx", "identity": "version"},
]  # fmt: skip


def release_labels(version: str) -> dict[str, str]:
    """The labels Helm 3 puts on a release Secret."""
    return {"owner": "helm", "name": "longhorn", "status": "deployed", "version": version}


def cluster() -> MemoryApi:
    api = MemoryApi()
    api.put("v1", "Node", "", "n1")
    api.put("v1", "Node", "", "n2")
    api.put("v1", "Namespace", "", NS)
    api.put("apps/v1", "DaemonSet", NS, "longhorn-manager", metadata={"generation": 1},
            status={"numberReady": 2, "desiredNumberScheduled": 2})  # fmt: skip
    api.put("v1", "Secret", NS, "sh.helm.release.v1.longhorn.v1", metadata={"labels": release_labels("1")})
    api.put("storage.k8s.io/v1", "StorageClass", "", "rwx", provisioner="driver.longhorn.io")
    return api


def run(api: MemoryApi, check_mode: bool = False, **params: Any) -> dict[str, Any]:
    args = {"digest": "d1", "watch": WATCH, **params}
    return verified_state.run(FakeModule(args, check_mode=check_mode), store_factory=lambda _p: api)


def recorded() -> MemoryApi:
    api = cluster()
    assert run(api, state="present")["changed"] is True
    return api


def new_helm_revision(api: MemoryApi) -> None:
    api.touch("v1", "Secret", NS, "sh.helm.release.v1.longhorn.v1", metadata__labels__status="superseded")
    api.put("v1", "Secret", NS, "sh.helm.release.v1.longhorn.v2", metadata={"labels": release_labels("2")})


def recreate_storage_class(api: MemoryApi) -> None:
    del api.objects[("storage.k8s.io/v1", "StorageClass", "", "rwx")]
    api.put("storage.k8s.io/v1", "StorageClass", "", "rwx", provisioner="driver.longhorn.io")


# (what happens after the record was written, whether it still holds, a piece of the first reason)
AFTER_RECORD: list[tuple[str, Callable[[MemoryApi], Any], bool, str]] = [
    ("nothing", lambda api: None, True, ""),
    (
        "status-only update of a generation-watched DaemonSet",
        lambda api: api.touch("apps/v1", "DaemonSet", NS, "longhorn-manager", status__numberReady=2),
        True,
        "",
    ),
    ("a node heartbeat (uid-watched)", lambda api: api.touch("v1", "Node", "", "n1", status__heartbeat="t2"), True, ""),
    (
        "the DaemonSet's spec edited",
        lambda api: api.touch("apps/v1", "DaemonSet", NS, "longhorn-manager", metadata__generation=2),
        False,
        "now apps/v1 DaemonSet longhorn-system/longhorn-manager uid=u4 generation=2",
    ),
    (
        "the DaemonSet not ready now",
        lambda api: api.touch("apps/v1", "DaemonSet", NS, "longhorn-manager", status__numberReady=1),
        False,
        "DaemonSet longhorn-system/longhorn-manager: not ready (expression gave False)",
    ),
    ("a node added", lambda api: api.put("v1", "Node", "", "n3"), False, "now v1 Node n3 uid="),
    ("a new Helm revision", new_helm_revision, False, "watched objects changed"),
    ("the StorageClass recreated", recreate_storage_class, False, "was storage.k8s.io/v1 StorageClass rwx uid=u6"),
    (
        "the StorageClass edited (version-watched)",
        lambda api: api.touch("storage.k8s.io/v1", "StorageClass", "", "rwx", metadata__annotations={"x": "y"}),
        False,
        "watched objects changed",
    ),
    (
        "the DaemonSet deleted",
        lambda api: api.objects.pop(("apps/v1", "DaemonSet", NS, "longhorn-manager")),
        False,
        "watched objects changed",
    ),
    (
        "the record deleted",
        lambda api: api.objects.pop(("v1", "ConfigMap", NS, "metalplane-verified")),
        False,
        "no record",
    ),
]


@pytest.mark.parametrize(("change", "holds", "reason"), [c[1:] for c in AFTER_RECORD], ids=[c[0] for c in AFTER_RECORD])
def test_the_record_holds_only_while_nothing_of_the_phase_changed(
    change: Callable[[MemoryApi], Any], holds: bool, reason: str
) -> None:
    api = recorded()
    change(api)
    writes = list(api.writes)
    answer = run(api)
    assert answer["verified"] is holds, answer["reasons"]
    assert answer["changed"] is False
    if not holds:
        assert any(reason in r for r in answer["reasons"]), answer["reasons"]
    assert api.writes == writes  # a query never writes


def test_a_kind_not_served_yet_is_a_reason_not_an_error() -> None:
    api = recorded()
    api.not_served.add("Node")
    answer = run(api)
    assert answer["verified"] is False
    assert "Node (v1): The API server does not serve kind 'Node' in 'v1'" in answer["reasons"]


def test_other_inputs_do_not_verify() -> None:
    api = recorded()
    answer = run(api, digest="d2")
    assert answer["verified"] is False
    assert answer["reasons"] == ["the phase's inputs changed since it was verified"]


def test_no_record_yet() -> None:
    answer = run(cluster())
    assert answer == {
        "changed": False,
        "verified": False,
        "reasons": ["no record of a verified state"],
        "verified_at": None,
        "objects": answer["objects"],
    }
    assert len(answer["objects"]) == 5  # two nodes, the DaemonSet, the release Secret, the StorageClass


def test_present_is_idempotent_and_keeps_other_phases() -> None:
    api = recorded()
    assert run(api, state="present", phase="adoption", watch=[{"kind": "Node"}])["changed"] is True
    writes = list(api.writes)
    again = run(api, state="present")
    assert again["changed"] is False
    assert api.writes == writes
    assert set(api.record()) == {"storage", "adoption"}
    entry = api.record()["storage"]
    assert entry["digest"] == "d1"
    assert "apps/v1 DaemonSet longhorn-system/longhorn-manager uid=u4 generation=1" in entry["objects"]
    assert entry["verified_at"].endswith("Z")


def test_present_refuses_an_unverified_state_and_writes_nothing() -> None:
    api = cluster()
    api.touch("apps/v1", "DaemonSet", NS, "longhorn-manager", status__numberReady=0)
    with pytest.raises(MetalplaneError, match=r"Not recording phase 'storage' as verified: DaemonSet .* not ready"):
        run(api, state="present")
    api.objects.pop(("storage.k8s.io/v1", "StorageClass", "", "rwx"))
    with pytest.raises(MetalplaneError, match="StorageClass rwx: not found"):
        run(api, state="present")
    assert api.writes == []


def test_check_mode_says_what_it_would_write_and_writes_nothing() -> None:
    api = cluster()
    assert run(api, check_mode=True, state="present")["changed"] is True
    assert api.writes == []
    api = recorded()
    writes = list(api.writes)
    assert run(api, check_mode=True, state="absent")["changed"] is True
    assert api.writes == writes


def test_absent_forgets_the_phase_once() -> None:
    api = recorded()
    assert run(api, state="absent")["changed"] is True
    assert api.record() == {}
    assert run(api, state="absent")["changed"] is False
    assert run(api)["reasons"] == ["no record of a verified state"]


def test_a_concurrent_record_update_is_read_again_not_lost() -> None:
    api = recorded()

    def other_phase_writes() -> None:
        assert run(api, state="present", phase="adoption", watch=[{"kind": "Node"}])["changed"] is True

    api.touch("apps/v1", "DaemonSet", NS, "longhorn-manager", metadata__generation=2)
    api.before_replace = other_phase_writes
    assert run(api, state="present")["changed"] is True
    assert api.writes.count("replace") == 3  # ours lost the race once, the other's, ours again
    assert set(api.record()) == {"storage", "adoption"}
    assert run(api)["verified"] is True


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"watch": []}, "watch"),
        ({"digest": ""}, "digest"),
        ({"phase": "a/b"}, "phase"),
        ({"namespace": "Not_A_Label"}, "namespace"),
        ({"watch": [{"kind": ""}]}, "watch[0].kind"),
        ({"watch": [{"kind": "Node", "identity": "name"}]}, "watch[0].identity"),
        ({"watch": [{"kind": "Node", "name": "n1", "label_selectors": ["a=b"]}]}, "watch[0].label_selectors"),
        ({"watch": [{"kind": "Node", "label_selectors": ["=b"]}]}, "watch[0].label_selectors"),
        ({"watch": [{"kind": "Node", "expression": "status.["}]}, "watch[0].expression"),
    ],
)
def test_bad_input_is_named_before_any_request(params: dict[str, Any], field: str) -> None:
    api = cluster()
    with pytest.raises(InputError) as raised:
        run(api, state="present", **params)
    assert raised.value.field == field
    assert api.reads == 0
    assert api.writes == []
