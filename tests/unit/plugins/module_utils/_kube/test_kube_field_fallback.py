"""KubeFeed's optional field selector: sent while the server supports it, else applied client-side.

Why: gpu_ready narrows ResourceSlices with ``fieldSelector=spec.driver=...``; a CRD standing in for
``resource.k8s.io`` on a server older than 1.30 answers 400 (no ``selectableFields``), and the wait
must then see the same objects by filtering them itself.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ApiError
from ansible_collections.metalplane.inference.plugins.module_utils._kube import gpu, runners
from ansible_collections.metalplane.inference.plugins.module_utils._kube.watch import (
    KubeFeed,
    WatchSpec,
    follow,
    matches_fields,
    parse_field_selector,
)

SLICES = WatchSpec(
    key="slices",
    api_version="resource.k8s.io/v1",
    kind="ResourceSlice",
    optional_field_selector="spec.driver=gpu.nvidia.com",
)


def resource_slice(name: str, driver: str, node: str = "g1", gpus: int = 2) -> dict[str, Any]:
    devices = [{"name": f"gpu-{i}", "attributes": {"type": {"string": "gpu"}}} for i in range(gpus)]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {"driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1}, "devices": devices},
    }


class FakeResponse:
    """A watch response: JSON lines, then held open until the feed interrupts it."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events
        self.closed = threading.Event()

    def stream(self, amt: Any = None, decode_content: bool = False) -> Iterator[bytes]:
        for event in self.events:
            yield json.dumps(event).encode() + b"\n"
        self.closed.wait(10)

    def close(self) -> None:
        self.closed.set()

    def release_conn(self) -> None:
        self.closed.set()


class IdleStream:
    """An open watch with nothing to say."""

    def __init__(self) -> None:
        self.closed = threading.Event()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self.closed.wait(10)
        return iter(())

    def close(self) -> None:
        self.closed.set()

    def interrupt(self) -> None:
        self.closed.set()


class FakeResource:
    kind = "ResourceSlice"


class FakeClient:
    """A ``KubeClient`` whose server applies field selectors on ``spec.driver`` only if ``selectable``."""

    def __init__(self, items: list[dict[str, Any]], *, selectable: bool, events: list[dict[str, Any]] = ()) -> None:
        self.items, self.selectable, self.events = items, selectable, list(events)
        self.lists: list[str | None] = []
        self.watches: list[str | None] = []
        self.responses: list[FakeResponse] = []

    def resource(self, api_version: str, kind: str) -> FakeResource:
        return FakeResource()

    def _select(self, field_selector: str | None) -> list[dict[str, Any]]:
        if field_selector and "spec.driver" in field_selector and not self.selectable:
            # What kube-apiserver 1.20 answers for a CRD without selectableFields.
            raise ApiError(
                'Listing ResourceSlice: HTTP 400: field label not supported: spec.driver for kind "ResourceSlice"',
                status=400,
            )
        requirements = parse_field_selector(field_selector or "")
        return [item for item in self.items if matches_fields(item, requirements)]

    def list(self, resource: Any, *, field_selector: str | None = None, **_: Any) -> tuple[list[dict[str, Any]], str]:
        self.lists.append(field_selector)
        return self._select(field_selector), "7"

    def open_watch(self, resource: Any, *, field_selector: str | None = None, **_: Any) -> FakeResponse:
        self.watches.append(field_selector)
        self._select(field_selector)
        response = FakeResponse(self.events)
        self.responses.append(response)
        return response


def test_supported_selector_is_sent_and_nothing_is_filtered_client_side() -> None:
    client = FakeClient(
        [resource_slice("a", "gpu.nvidia.com"), resource_slice("b", "net.example.com")], selectable=True
    )
    feed = KubeFeed(client)  # type: ignore[arg-type]
    items, version = feed.list(SLICES, 5)
    assert [i["metadata"]["name"] for i in items] == ["a"]
    assert version == "7"
    assert client.lists == ["spec.driver=gpu.nvidia.com"]
    assert feed.client_side == set()


def test_rejected_selector_falls_back_to_client_side_filtering() -> None:
    client = FakeClient(
        [resource_slice("a", "gpu.nvidia.com"), resource_slice("b", "net.example.com")],
        selectable=False,
        events=[
            {"type": "ADDED", "object": resource_slice("c", "net.example.com")},
            {"type": "ADDED", "object": resource_slice("d", "gpu.nvidia.com", node="g2")},
        ],
    )
    feed = KubeFeed(client)  # type: ignore[arg-type]
    items, _version = feed.list(SLICES, 5)
    assert [i["metadata"]["name"] for i in items] == ["a"]
    # One rejected list with the selector, one without; later lists and the watch skip it at once.
    assert client.lists == ["spec.driver=gpu.nvidia.com", None]
    assert feed.client_side == {SLICES}
    feed.list(SLICES, 5)
    assert client.lists[-1] is None
    stream = feed.watch(SLICES, "7", 5)
    seen = []
    for event in stream:
        seen.append((event["type"], event["object"]["metadata"]["name"]))
        if len(seen) == 2:
            break
    stream.close()
    assert client.watches == [None]
    # The other driver's slice is reported DELETED (never kept), as a field-selected watch would.
    assert seen == [("DELETED", "c"), ("ADDED", "d")]


def test_other_specs_keep_their_selector_after_one_falls_back() -> None:
    client = FakeClient([resource_slice("a", "gpu.nvidia.com")], selectable=False)
    feed = KubeFeed(client)  # type: ignore[arg-type]
    feed.list(SLICES, 5)
    plain = WatchSpec(key="nodes", api_version="v1", kind="Node", field_selector="metadata.name=g1")
    feed.list(plain, 5)
    assert client.lists[-1] == "metadata.name=g1"


def test_a_400_without_an_optional_selector_is_final() -> None:
    client = FakeClient([], selectable=False)
    feed = KubeFeed(client)  # type: ignore[arg-type]
    strict = WatchSpec(key="slices", api_version="resource.k8s.io/v1", kind="ResourceSlice",
                       field_selector="spec.driver=gpu.nvidia.com")  # fmt: skip
    with pytest.raises(ApiError) as raised:
        feed.list(strict, 5)
    assert raised.value.status == 400
    assert feed.client_side == set()


def test_gpu_ready_dra_wait_on_a_server_without_the_selector() -> None:
    """The whole dra wait through ``follow``: other drivers' slices never count towards a node."""
    nodes = WatchSpec(key="nodes", api_version="v1", kind="Node")
    client = FakeClient(
        [resource_slice("a", "gpu.nvidia.com", gpus=2), resource_slice("b", "gpu.example.com", gpus=8)],
        selectable=False,
    )
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "g1"}}

    class Feed(KubeFeed):
        def list(self, spec: WatchSpec, timeout: float) -> tuple[list[dict[str, Any]], str]:
            if spec.key == "nodes":
                return [node], "1"
            return super().list(spec, timeout)

        def watch(self, spec: WatchSpec, resource_version: str, timeout: float) -> Any:
            if spec.key == "nodes":
                return IdleStream()
            return super().watch(spec, resource_version, timeout)

    criteria = gpu.GpuCriteria(checks=("dra",), gpus_per_node=2, dra_driver="gpu.nvidia.com", validator="x/y")
    params = {"node_selector": None, "dra_api_version": "resource.k8s.io/v1"}
    specs = runners.gpu_specs(params, criteria)
    assert specs[-1].optional_field_selector == "spec.driver=gpu.nvidia.com"
    assert specs[-1].field_selector is None
    feed = Feed(client)  # type: ignore[arg-type]
    outcome = follow(feed, [nodes, specs[-1]], runners.gpu_check(criteria), timeout=3)
    for response in client.responses:
        response.close()
    assert outcome.ready is True, outcome.summary
    assert [s["metadata"]["name"] for s in outcome.state["slices"].values()] == ["a"]
    assert outcome.summary["nodes"]["g1"]["count"] == 2
    assert specs[-1] in feed.client_side


@pytest.mark.parametrize(
    ("selector", "obj", "expected"),
    [
        ("spec.driver=gpu.nvidia.com", {"spec": {"driver": "gpu.nvidia.com"}}, True),
        ("spec.driver==gpu.nvidia.com", {"spec": {"driver": "gpu.example.com"}}, False),
        ("spec.driver!=gpu.nvidia.com", {"spec": {"driver": "gpu.example.com"}}, True),
        (
            "spec.driver=gpu.nvidia.com,spec.nodeName=g1",
            {"spec": {"driver": "gpu.nvidia.com", "nodeName": "g2"}},
            False,
        ),
        ("spec.nodeName=", {"spec": {}}, True),
        ("spec.allNodes=true", {"spec": {"allNodes": True}}, True),
    ],
)
def test_client_side_field_matching(selector: str, obj: dict[str, Any], expected: bool) -> None:
    assert matches_fields(obj, parse_field_selector(selector)) is expected


def test_a_malformed_selector_is_rejected() -> None:
    with pytest.raises(ValueError, match="not a field selector term"):
        parse_field_selector("spec.driver")
