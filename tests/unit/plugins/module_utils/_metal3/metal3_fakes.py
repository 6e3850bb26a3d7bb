"""An in-memory ObjectStore with the API server's semantics that matter to a claim, and a scripted Metal3.

``MemoryObjects`` keeps ``resourceVersion`` per object, answers a stale replace with 409 (``Conflict``), applies JSON
merge patches (``None`` deletes), filters lists by an equality label selector, and stores Secrets' ``stringData`` as
base64 ``data`` as the API server does. ``ScriptedMetal3`` moves BareMetalHosts through Metal3's states one step per
``sleep`` of the run, so a wait loop is exercised without real time passing.
"""

from __future__ import annotations

import base64
import copy
import itertools
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._kube.object_store import Conflict

Key = tuple[str, str, str]


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class MemoryObjects:
    def __init__(self) -> None:
        self.objects: dict[Key, dict[str, Any]] = {}
        self.versions = itertools.count(1)
        self.writes: list[str] = []
        self.before_replace: Callable[[dict[str, Any]], None] | None = None

    def _key(self, kind: str, namespace: str, name: str) -> Key:
        return (kind, namespace, name)

    def _stamp(self, body: dict[str, Any]) -> dict[str, Any]:
        body["metadata"]["resourceVersion"] = str(next(self.versions))
        if body.get("kind") == "Secret" and "stringData" in body:
            data = {k: base64.b64encode(v.encode()).decode() for k, v in body.pop("stringData").items()}
            body["data"] = data
        return body

    def list(self, _api_version: str, kind: str, namespace: str, label_selector: str | None) -> list[dict[str, Any]]:
        wanted = dict(pair.split("=", 1) for pair in (label_selector or "").split(",") if pair)
        out = []
        for (k, ns, _name), obj in sorted(self.objects.items()):
            labels = obj["metadata"].get("labels") or {}
            if k == kind and ns == namespace and all(labels.get(a) == v for a, v in wanted.items()):
                out.append(copy.deepcopy(obj))
        return out

    def get(self, _api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        found = self.objects.get(self._key(kind, namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        meta = body["metadata"]
        key = self._key(body["kind"], meta["namespace"], meta["name"])
        if key in self.objects:
            raise Conflict(f"{key} exists", status=409)
        obj = self._stamp(copy.deepcopy(dict(body)))
        obj["metadata"]["uid"] = f"uid-{meta['name']}"
        self.objects[key] = obj
        self.writes.append(f"create {body['kind']} {meta['name']}")
        return copy.deepcopy(obj)

    def replace(self, body: Mapping[str, Any]) -> dict[str, Any]:
        if self.before_replace is not None:
            hook, self.before_replace = self.before_replace, None
            hook(dict(body))
        meta = body["metadata"]
        key = self._key(body["kind"], meta["namespace"], meta["name"])
        current = self.objects.get(key)
        if current is None or current["metadata"]["resourceVersion"] != meta.get("resourceVersion"):
            raise Conflict(f"{key} changed", status=409)
        obj = self._stamp(copy.deepcopy(dict(body)))
        obj["metadata"]["uid"] = current["metadata"].get("uid")
        if "status" in current:
            obj["status"] = current["status"]  # the main resource never writes status
        self.objects[key] = obj
        self.writes.append(f"replace {body['kind']} {meta['name']}")
        return copy.deepcopy(obj)

    def patch(
        self, _api_version: str, kind: str, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> dict[str, Any]:
        key = self._key(kind, namespace, name)
        current = self.objects[key]
        merged = merge_patch({k: v for k, v in current.items() if k != "status"}, dict(patch))
        merged["status"] = current.get("status")
        obj = self._stamp(merged)
        if obj["status"] is None:
            obj.pop("status")
        self.objects[key] = obj
        self.writes.append(f"patch {kind} {name} {sorted(patch.get('spec') or {})}")
        return copy.deepcopy(obj)

    def delete(self, _api_version: str, kind: str, namespace: str, name: str) -> bool:
        self.writes.append(f"delete {kind} {name}")
        return self.objects.pop(self._key(kind, namespace, name), None) is not None

    # ------------------------------------------------------------------ test helpers
    def set_status(self, name: str, namespace: str = "metal3", **status: Any) -> None:
        obj = self.objects[("BareMetalHost", namespace, name)]
        current = obj.setdefault("status", {})
        for key, value in status.items():
            if key == "state":
                current.setdefault("provisioning", {})["state"] = value
            else:
                current[key] = value
        obj["metadata"]["resourceVersion"] = str(next(self.versions))

    def secret(self, name: str, namespace: str = "metal3") -> dict[str, str]:
        obj = self.objects[("Secret", namespace, name)]
        return {k: base64.b64decode(v).decode() for k, v in obj["data"].items()}


class ScriptedMetal3:
    """One Metal3 step per tick: the happy path unless ``fail`` says otherwise (host name -> status fields)."""

    def __init__(self, store: MemoryObjects, namespace: str = "metal3") -> None:
        self.store = store
        self.namespace = namespace
        self.now = 0.0
        self.fail: dict[str, dict[str, Any]] = {}
        self.ticks = 0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.5)
        self.ticks += 1
        for (kind, ns, name), obj in list(self.store.objects.items()):
            if kind == "BareMetalHost" and ns == self.namespace:
                self.step(name, obj)

    def step(self, name: str, obj: dict[str, Any]) -> None:
        if name in self.fail:
            self.store.set_status(name, self.namespace, **self.fail[name])
            return
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        state = (status.get("provisioning") or {}).get("state", "")
        nxt: dict[str, Any] = {}
        if state == "":
            nxt = {"state": "registering", "operationalStatus": "OK", "poweredOn": False}
        elif state == "registering":
            nxt = {"state": "inspecting" if spec.get("inspectionMode") != "disabled" else "available"}
        elif state == "inspecting":
            nxt = {"state": "available"}
        elif state == "available" and (spec.get("image") or {}).get("url") and spec.get("online"):
            nxt = {"state": "provisioning"}
        elif state == "available":
            nxt = {"poweredOn": bool(spec.get("online"))}
        elif state == "provisioning":
            nxt = {"state": "provisioned", "poweredOn": True}
        elif state == "provisioned" and not spec.get("image"):
            nxt = {"state": "deprovisioning"}
        elif state == "deprovisioning":
            nxt = {"state": "available", "poweredOn": False}
        if nxt:
            self.store.set_status(name, self.namespace, **nxt)
