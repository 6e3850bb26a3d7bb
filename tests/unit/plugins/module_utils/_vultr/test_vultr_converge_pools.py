"""``vke_cluster``'s ``node_pools`` on an existing cluster: every pool is planned, and the plans it would
create or replace are checked against the region, before the first write (no network: a recording client)."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ConflictError, InputError
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.client import VultrClient
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.cluster_ops import (
    _converge_pools,
    _pool_specs,
)

GPU = "vcg-l40s-16c-180g-48vram"
GPU_2 = "vcg-a16-6c-64g-16vram"
AVAILABILITY = "/regions/ewr/availability"


class Recorder(VultrClient):
    """Answers the region's availability; any other request is a write this test forbids."""

    def __init__(self) -> None:
        super().__init__("k", api_endpoint="http://127.0.0.1:9")
        self.paths: list[str] = []

    def request(self, method: str, url: str, data: Any = None, params: dict[str, Any] | None = None) -> Any:
        path = self._path(url)
        self.paths.append(f"{method.upper()} {path}")
        if method.upper() == "GET" and path == AVAILABILITY:
            return {"available_plans": ["vc2-6c-16gb", GPU, GPU_2]}
        raise AssertionError(f"unexpected request {method} {path}")


def observed(label: str, plan: str, quantity: int = 1) -> dict[str, Any]:
    spec = _pool_specs({"node_pools": [{"label": label, "plan": plan, "node_quantity": quantity}]})[0][0]
    return {"id": f"id-{label}", "status": "active", "nodes": [], **spec.as_dict()}


CLUSTER = {"id": "c1", "label": "inf", "region": "ewr", "node_pools": [observed("gpu", GPU), observed("gpu2", GPU_2)]}


def converge(items: list[dict[str, Any]], client: Recorder) -> dict[str, Any]:
    params = {"node_pools": items, "wait": True, "wait_timeout": 60}
    return _converge_pools(client, CLUSTER, _pool_specs(params), params=params, check=False).cluster


# (node_pools, error type, field or text in the message, requests made before the error)
REFUSED = [
    ([{"label": "g3", "plan": "vcg-nope-1c-1g-1vram"}], InputError, "node_pools[0].plan", [f"GET {AVAILABILITY}"]),
    (
        [{"label": "gpu", "plan": GPU, "node_quantity": 2}, {"label": "g3", "plan": "vcg-nope-1c-1g-1vram"}],
        InputError,
        "node_pools[1].plan",
        [f"GET {AVAILABILITY}"],
    ),
    (
        [{"label": "gpu", "plan": "vcg-nope-1c-1g-1vram", "replace": True}],
        InputError,
        "node_pools[0].plan",
        [f"GET {AVAILABILITY}"],
    ),
    (
        [{"label": "gpu", "plan": GPU, "node_quantity": 2}, {"label": "gpu2", "plan": GPU}],
        ConflictError,
        "replace: true",
        [],  # a conflict needs no request at all
    ),
]


@pytest.mark.parametrize(("items", "error", "text", "requests"), REFUSED)
def test_refused_before_any_write(items: list[dict[str, Any]], error: type, text: str, requests: list[str]) -> None:
    client = Recorder()
    with pytest.raises(error) as caught:
        converge(items, client)
    assert text in str(caught.value)
    assert client.paths == requests


def test_nothing_to_create_costs_no_request() -> None:
    client = Recorder()
    items = [{"label": "gpu", "plan": GPU, "node_quantity": 1}, {"label": "gpu2", "plan": GPU_2, "node_quantity": 1}]
    assert converge(items, client) is CLUSTER
    assert client.paths == []
