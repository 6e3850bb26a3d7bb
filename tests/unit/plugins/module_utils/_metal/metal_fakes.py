"""In-memory stand-ins for the control plane's Lease API and for BMCs, with the semantics the claim relies on.

``MemoryLeaseStore`` behaves like the API server where it matters: ``create`` of an existing name and ``replace``
or ``delete`` with a stale ``resourceVersion``/``uid`` raise ``Conflict`` (409); every write bumps the
``resourceVersion``; list filters by label selector. ``FakeBmc`` answers with a chosen inventory and AssetTag.
Both record every call, so a test can assert that nothing was written.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ApiError
from ansible_collections.metalplane.inference.plugins.module_utils._kube.object_store import Conflict
from ansible_collections.metalplane.inference.plugins.module_utils._metal.pool import Host, Inventory, Requirements

WRITES = ("create", "replace", "delete")


class MemoryLeaseStore:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[str] = []
        self._versions = itertools.count(100)
        self._uids = itertools.count(1)
        # Called before a write is applied: lets a test play "another controller wrote first".
        self.before_write: Callable[[str, Mapping[str, Any]], None] | None = None

    def writes(self) -> list[str]:
        return [c for c in self.calls if c.split(" ")[0] in WRITES]

    def _key(self, body: Mapping[str, Any]) -> tuple[str, str]:
        return body["metadata"]["namespace"], body["metadata"]["name"]

    def list(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        self.calls.append("list")
        wanted = dict(term.split("=", 1) for term in label_selector.split(",") if term)
        return [
            copy.deepcopy(obj)
            for (ns, _name), obj in sorted(self.objects.items())
            if ns == namespace and all(obj["metadata"].get("labels", {}).get(k) == v for k, v in wanted.items())
        ]

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.calls.append(f"get {name}")
        found = self.objects.get((namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def put(self, body: Mapping[str, Any], *, holder: str | None = None) -> dict[str, Any]:
        """Seed a Lease directly (another controller's earlier run)."""
        obj = copy.deepcopy(dict(body))
        if holder is not None:
            obj["spec"]["holderIdentity"] = holder
        obj["metadata"].pop("resourceVersion", None)
        obj["metadata"]["uid"] = f"uid-{next(self._uids)}"
        obj["metadata"]["resourceVersion"] = str(next(self._versions))
        self.objects[self._key(obj)] = obj
        return copy.deepcopy(obj)

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        self.calls.append(f"create {body['metadata']['name']}")
        if self.before_write is not None:
            self.before_write("create", body)
        if self._key(body) in self.objects:
            raise Conflict("AlreadyExists", status=409)
        return self.put(body)

    def replace(self, body: Mapping[str, Any]) -> dict[str, Any]:
        self.calls.append(f"replace {body['metadata']['name']}")
        if self.before_write is not None:
            self.before_write("replace", body)
        live = self.objects.get(self._key(body))
        if live is None or live["metadata"]["resourceVersion"] != body["metadata"].get("resourceVersion"):
            raise Conflict("Conflict", status=409)
        obj = copy.deepcopy(dict(body))
        obj["metadata"]["uid"] = live["metadata"]["uid"]
        obj["metadata"]["resourceVersion"] = str(next(self._versions))
        self.objects[self._key(obj)] = obj
        return copy.deepcopy(obj)

    def delete(self, namespace: str, name: str, *, uid: str, resource_version: str) -> bool:
        self.calls.append(f"delete {name}")
        live = self.objects.get((namespace, name))
        if live is None:
            return False
        if live["metadata"]["uid"] != uid or live["metadata"]["resourceVersion"] != resource_version:
            raise Conflict("precondition", status=409)
        del self.objects[(namespace, name)]
        return True


@dataclass
class FakeBmc:
    inventory_: Inventory
    tag: str | None = ""
    tag_fails: bool = False
    writes: list[str] = field(default_factory=list)
    closed: bool = False
    # What ``bios()`` answers (``_redfish.bios.BiosReading``); None: the BMC exposes none of the settings.
    bios_reading: Any = None

    def inventory(self, requirements: Requirements) -> Inventory:
        return self.inventory_

    def bios(self) -> Any:
        return self.bios_reading

    def asset_tag(self) -> str | None:
        return self.tag

    def set_asset_tag(self, value: str) -> None:
        if self.tag_fails:
            raise ApiError("Writing the system's AssetTag failed: HTTP 400", status=400)
        self.writes.append(value)
        self.tag = value

    def close(self) -> None:
        self.closed = True


def v100_inventory(mac: str, gpus: int = 2, memory: float = 256.0) -> Inventory:
    return Inventory(
        manufacturer="Dell Inc.",
        model="PowerEdge R730",
        memory_gib=memory,
        gpus=["Tesla V100-PCIE-32GB"] * gpus,
        macs=[mac, "00:5c:52:31:3b:00"],
    )


class FakeBmcs:
    """``bmc_opener``: one FakeBmc per host name; names in ``down`` raise like an unreachable BMC."""

    def __init__(self, bmcs: dict[str, FakeBmc], down: tuple[str, ...] = ()) -> None:
        self.bmcs = bmcs
        self.down = set(down)
        self.opened: list[str] = []

    def __call__(self, host: Host) -> FakeBmc:
        self.opened.append(host.name)
        if host.name in self.down:
            raise ApiError(f"Logging in to {host.bmc_url} failed: the BMC is unreachable (Connection refused)")
        return self.bmcs[host.name]


class FakeModule:
    def __init__(self, params: dict[str, Any], *, check_mode: bool = False, diff_mode: bool = True) -> None:
        self.params = params
        self.check_mode = check_mode
        self.diff_mode = diff_mode
        self.warnings: list[str] = []

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def require(self, _library: str, _traceback: str | None) -> None:
        return None
