"""Module-level argument errors of the Vultr modules: a clear message naming the field, zero requests."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.metalplane.inference.plugins.module_utils._vultr.client import VultrClient
from ansible_collections.metalplane.inference.plugins.modules import (
    vke_cluster,
    vke_cluster_info,
    vke_node_pool,
)

BASE = {"api_key": "secret-test-key", "api_endpoint": "http://127.0.0.1:9"}
GPU = "vcg-l40s-16c-180g-48vram"


@pytest.fixture
def requests_made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    made: list[str] = []

    def fake_req(self: VultrClient, method: str, url: str, data: Any = None, params: Any = None) -> Any:
        made.append(f"{method} {url}")
        raise AssertionError("no request expected")

    monkeypatch.setattr(VultrClient, "request", fake_req)
    return made


def run(main: Any, args: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    with patch_module_args({**BASE, **args}), pytest.raises(SystemExit):
        main()
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("module", "args", "field"),
    [
        (vke_cluster, {"label": "c", "vpc_only": True}, "vpc_id"),
        (vke_cluster, {"label": "c", "version": "1.x"}, "version"),
        (vke_cluster, {"label": "c", "system_pool": {"node_quantity": -1}}, "system_pool.node_quantity"),
        (
            vke_cluster,
            {"label": "c", "node_pools": [{"label": "g", "plan": GPU, "min_nodes": 3, "max_nodes": 1}]},
            "node_pools[0].min_nodes",
        ),
        (
            vke_cluster,
            {"label": "c", "node_pools": [{"label": "g", "plan": GPU}, {"label": "g", "plan": GPU}]},
            "node_pools",
        ),
        (vke_cluster, {"label": "c", "node_pools": [{"label": "system", "plan": GPU}]}, "node_pools"),
        (vke_cluster, {"label": "c", "api_timeout": 0}, "api_timeout"),
        (vke_node_pool, {"cluster": "c", "label": "g", "plan": GPU, "node_quantity": -2}, "node_quantity"),
        (vke_node_pool, {"cluster": "c", "label": "g", "plan": GPU, "min_nodes": 5, "max_nodes": 2}, "min_nodes"),
        (vke_node_pool, {"cluster": "c", "label": "g", "plan": GPU, "auto_scaler": True}, "max_nodes"),
        (vke_node_pool, {"cluster": "c", "label": "bad label!", "plan": GPU}, "label"),
        (vke_cluster_info, {"kubeconfig_path": "/tmp/x"}, "kubeconfig_path"),
    ],
)
def test_bad_input_fails_before_any_request(
    module: Any, args: dict[str, Any], field: str, requests_made: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    result = run(module.main, args, capsys)
    assert result["failed"] is True
    assert result["msg"].startswith(f"{field}:"), result["msg"]
    assert result["error"]["field"] == field
    assert requests_made == []
    assert "secret-test-key" not in json.dumps(result)


def test_missing_api_key(
    monkeypatch: pytest.MonkeyPatch, requests_made: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("VULTR_API_KEY", raising=False)
    with patch_module_args({"label": "c"}), pytest.raises(SystemExit):
        vke_cluster.main()
    result = json.loads(capsys.readouterr().out)
    assert result["msg"].startswith("api_key:")
    assert requests_made == []


def test_plan_required_for_present(requests_made: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    result = run(vke_node_pool.main, {"cluster": "c", "label": "g"}, capsys)
    assert result["failed"] is True
    assert "plan" in result["msg"]
    assert requests_made == []
