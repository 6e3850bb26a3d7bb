"""The client's retry layer on the wire (emulator faults): which statuses are retried for which method."""

from __future__ import annotations

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ApiError
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.client import VultrClient
from lab.vultr.server import VultrEmulator

API_KEY = "lab-vultr-api-key"  # the emulator fixture's key (conftest.API_KEY)


def client(emu: VultrEmulator) -> VultrClient:
    return VultrClient(API_KEY, api_endpoint=emu.endpoint, retries=3, timeout=5)


def count(emu: VultrEmulator, method: str, path: str) -> int:
    return sum(1 for r in emu.requests if r["method"] == method and r["path"].endswith(path))


def test_429_and_503_are_retried_for_post(emu: VultrEmulator) -> None:
    emu.inject("429", method="POST", path=r"/kubernetes/clusters$", count=1, retry_after=1)
    emu.inject("503", method="POST", path=r"/kubernetes/clusters$", count=1, retry_after=0)
    vultr = client(emu)
    body = {"label": "w", "region": "ewr", "version": "v1.36.2+1"}
    body["node_pools"] = [{"label": "s", "plan": "vc2-6c-16gb", "node_quantity": 1}]
    created = vultr.call("POST", "/kubernetes/clusters", body)["vke_cluster"]
    assert created["label"] == "w"
    assert count(emu, "POST", "/kubernetes/clusters") == 3
    assert vultr.counter.calls == 1
    assert vultr.counter.retries == 2
    assert len(emu.clusters) == 1


def test_500_is_retried_for_get_but_not_for_post(emu: VultrEmulator) -> None:
    emu.inject("500", method="GET", path=r"/kubernetes/versions$", count=2)
    vultr = client(emu)
    assert vultr.call("GET", "/kubernetes/versions")["versions"]
    assert count(emu, "GET", "/kubernetes/versions") == 3
    emu.inject("500", method="POST", path=r"/kubernetes/clusters$", count=1)
    with pytest.raises(ApiError) as info:
        vultr.call("POST", "/kubernetes/clusters", {"region": "ewr", "version": "v1.36.2+1"})
    assert info.value.status == 500
    assert count(emu, "POST", "/kubernetes/clusters") == 1
