"""An in-memory control plane for the gateway and smoke-test unit tests (get/list/create/replace/delete/close).

Why not test_adoption's FakeKube: these tests need label selectors and a tiny "Modelplane" that reacts to
a ModelDeployment (places a replica on a chosen cluster, marks it Ready or not), table-driven per case.
"""

from __future__ import annotations

import copy
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ApiError

MP = "modelplane.ai/v1alpha1"


def selected(obj: dict[str, Any], selector: str | None) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in (selector or "").split(","):
        if term:
            key, _eq, value = term.partition("=")
            if labels.get(key) != value:
                return False
    return True


class FakeControl:
    """Objects by (apiVersion, kind, namespace, name); ``writes`` records every write in order."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str | None, str], dict[str, Any]] = {}
        self.writes: list[tuple[str, str, str]] = []
        self.created: list[dict[str, Any]] = []
        self.version = 0
        # What the simulated Modelplane does with a new ModelDeployment.
        self.place_on: str | None = None  # cluster a replica is placed on (None: not scheduled)
        self.replica_ready = True
        self.scheduled_condition = {"type": "ReplicasScheduled", "status": "False", "reason": "InsufficientCapacity"}

    def seed(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        stored = copy.deepcopy(obj)
        meta = stored["metadata"]
        meta["resourceVersion"] = str(self.version)
        self.objects[(stored["apiVersion"], stored["kind"], meta.get("namespace"), meta["name"])] = stored
        return stored

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        found = self.objects.get((api_version, kind, namespace, name))
        return copy.deepcopy(found) if found else None

    def list(
        self, api_version: str, kind: str, *, namespace: str | None = None, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        return [
            copy.deepcopy(o)
            for (v, k, ns, _n), o in sorted(self.objects.items(), key=lambda item: str(item[0]))
            if v == api_version and k == kind and (namespace is None or ns == namespace) and selected(o, label_selector)
        ]

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        meta = body["metadata"]
        key = (body["apiVersion"], body["kind"], meta.get("namespace"), meta["name"])
        if key in self.objects:
            raise ApiError("AlreadyExists", status=409)
        self.writes.append(("create", body["kind"], meta["name"]))
        self.created.append(copy.deepcopy(body))
        stored = self.seed(body)
        if body["kind"] == "ModelDeployment":
            self._react(stored)
        return copy.deepcopy(stored)

    def _react(self, deployment: dict[str, Any]) -> None:
        meta = deployment["metadata"]
        if self.place_on is None:
            deployment["status"] = {"conditions": [self.scheduled_condition]}
            return
        ready = {"type": "Ready", "status": "True" if self.replica_ready else "False", "reason": "Creating"}
        self.seed(
            {
                "apiVersion": MP,
                "kind": "ModelReplica",
                "metadata": {
                    "name": f"{meta['name']}-abcde",
                    "namespace": meta["namespace"],
                    "labels": {"modelplane.ai/deployment": meta["name"], "modelplane.ai/cluster": self.place_on},
                },
                "spec": {"clusterName": self.place_on},
                "status": {"conditions": [ready]},
            }
        )

    def replace(self, body: dict[str, Any]) -> dict[str, Any]:
        meta = body["metadata"]
        key = (body["apiVersion"], body["kind"], meta.get("namespace"), meta["name"])
        current = self.objects.get(key)
        if current is None:
            raise ApiError("NotFound", status=404)
        if meta.get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise ApiError("Conflict", status=409)
        self.writes.append(("replace", body["kind"], meta["name"]))
        stored = self.seed(body)
        if "status" in current:  # the status subresource: a replace of the object keeps it
            stored["status"] = current["status"]
        return copy.deepcopy(stored)

    def delete(
        self, api_version: str, kind: str, name: str, namespace: str | None = None, *, propagation: str | None = None
    ) -> bool:
        self.writes.append(("delete", kind, name))
        gone = self.objects.pop((api_version, kind, namespace, name), None)
        if kind == "ModelDeployment":  # Modelplane removes the deployment's replicas
            for key in [
                k
                for k, o in self.objects.items()
                if k[1] == "ModelReplica" and selected(o, f"modelplane.ai/deployment={name}")
            ]:
                del self.objects[key]
        return gone is not None

    def close(self) -> None:
        pass


class FakeModule:
    def __init__(self, params: dict[str, Any], *, check: bool = False) -> None:
        self.params = params
        self.check_mode = check
        self.diff_mode = True
        self.warnings: list[str] = []

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def log_secret(self, value: str | None) -> None:
        pass

    def require(self, library: str, trace: str | None) -> None:
        pass


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
