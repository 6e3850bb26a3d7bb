"""``vke_cluster`` version handling without a network: which requests a version check costs, and its errors."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.client import VultrClient
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.cluster import cluster_spec_from_params
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.cluster_ops import (
    _existing,
    _upgrade_target,
)

UPGRADES = "/kubernetes/clusters/c1/available-upgrades"


class Recorder(VultrClient):
    """Answers ``available-upgrades`` with a fixed list and records every request."""

    def __init__(self, upgrades: list[str]) -> None:
        super().__init__("k", api_endpoint="http://127.0.0.1:9")
        self.upgrades = upgrades
        self.paths: list[str] = []

    def request(self, method: str, url: str, data: Any = None, params: dict[str, Any] | None = None) -> Any:
        path = self._path(url)
        self.paths.append(f"{method.upper()} {path}")
        if path == UPGRADES:
            return {"available_upgrades": list(self.upgrades)}
        raise AssertionError(f"unexpected request {method} {path}")


def spec(version: str) -> Any:
    return cluster_spec_from_params({"label": "inf", "region": "ewr", "version": version, "ha_controlplanes": True})


def cluster(version: str) -> dict[str, Any]:
    system = {"label": "system", "plan": "vc2-6c-16gb", "tag": "metalplane.inference/cluster", "node_quantity": 1}
    system.update(auto_scaler=True, min_nodes=1, max_nodes=2, labels={"modelplane.ai/pool": "system"}, taints=[])
    return {
        "id": "c1",
        "label": "inf",
        "region": "ewr",
        "version": version,
        "ha_controlplanes": True,
        "node_pools": [system],
    }


# (requested, running, available upgrades, expected target, requests made)
TARGETS = [
    ("latest", "v1.35.6+1", ["v1.36.2+1", "v1.36.1+1"], "v1.36.2+1", 1),
    ("latest", "v1.36.2+1", [], None, 1),
    ("1.36", "v1.36.2+1", ["v1.37.0+1"], None, 0),  # satisfied: no request
    ("v1.36.2+1", "v1.36.2+1", [], None, 0),
    ("1.36", "v1.35.6+1", ["v1.36.1+1", "v1.36.2+1"], "v1.36.2+1", 1),
    ("1.36.2+1", "v1.35.6+1", ["v1.36.2+1"], "v1.36.2+1", 1),
]


@pytest.mark.parametrize(("requested", "running", "upgrades", "target", "requests"), TARGETS)
def test_upgrade_target(requested: str, running: str, upgrades: list[str], target: str | None, requests: int) -> None:
    client = Recorder(upgrades)
    assert _upgrade_target(client, spec(requested), cluster(running)) == target
    assert len(client.paths) == requests


@pytest.mark.parametrize(
    ("requested", "upgrades", "listed"),
    [
        ("v1.99.0+1", ["v1.36.2+1"], "available upgrades: v1.36.2+1"),
        ("1.37", ["v1.36.2+1"], "available upgrades: v1.36.2+1"),
        ("v1.34.9+2", ["v1.36.2+1"], "available upgrades: v1.36.2+1"),  # no downgrade
        ("v1.36.2+1", [], "available upgrades: none (an upgrade may already be in progress)"),
    ],
)
def test_upgrade_target_not_offered_is_an_input_error(requested: str, upgrades: list[str], listed: str) -> None:
    with pytest.raises(InputError) as info:
        _upgrade_target(Recorder(upgrades), spec(requested), cluster("v1.35.6+1"))
    assert info.value.field == "version"
    assert listed in info.value.msg
    assert info.value.details["available_upgrades"] == sorted(upgrades)


@pytest.mark.parametrize(
    ("requested", "drift"),
    [
        ("latest", None),  # not checked without allow_upgrade: it would cost a request
        ("1.35", None),
        ("v1.35.6+1", None),
        ("1.36", "1.36"),
        ("1.36.2+1", "v1.36.2+1"),
    ],
)
def test_without_allow_upgrade_version_drift_costs_no_request(requested: str, drift: str | None) -> None:
    client = Recorder([])
    params = {"allow_upgrade": False, "wait": True, "wait_timeout": 60}
    step = _existing(client, spec(requested), cluster("v1.35.6+1"), params=params, check=False)
    assert client.paths == []
    assert step.changed is False
    versions = [d["desired"] for d in step.drift if d["field"] == "version"]
    assert versions == ([] if drift is None else [drift])


def test_check_mode_upgrade_is_planned_not_posted() -> None:
    client = Recorder(["v1.36.2+1"])
    params = {"allow_upgrade": True, "wait": True, "wait_timeout": 60}
    step = _existing(client, spec("1.36"), cluster("v1.35.6+1"), params=params, check=True)
    assert step.changed is True
    assert step.actions == ["upgrade v1.35.6+1 -> v1.36.2+1"]
    assert client.paths == [f"GET {UPGRADES}"]
