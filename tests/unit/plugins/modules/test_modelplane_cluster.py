"""modelplane_cluster: main() end to end against an in-memory control plane."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.metalplane.inference.plugins.module_utils._modelplane import adoption
from ansible_collections.metalplane.inference.plugins.modules import modelplane_cluster

TOKEN = "m0dule-t0ken"
KUBECONFIG = f"""apiVersion: v1
kind: Config
current-context: w
clusters: [{{name: w, cluster: {{server: "https://127.0.0.1:6443", certificate-authority-data: Q0EK}}}}]
contexts: [{{name: w, context: {{cluster: w, user: u}}}}]
users: [{{name: u, user: {{token: {TOKEN}}}}}]
"""


class Recorder:
    """A control plane that has nothing and records every call (check mode must make no write)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def get(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append("get")

    def list(self, *args: Any, **kwargs: Any) -> list[Any]:
        self.calls.append("list")
        return []

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append("create")
        return body

    def replace(self, body: dict[str, Any]) -> dict[str, Any]:  # pragma: no cover - must not happen here
        self.calls.append("replace")
        return body

    def delete(self, *args: Any, **kwargs: Any) -> bool:  # pragma: no cover - must not happen here
        self.calls.append("delete")
        return True

    def close(self) -> None:
        self.calls.append("close")


def run_main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: dict[str, Any]) -> Any:
    recorder = Recorder()
    monkeypatch.setattr(adoption, "connect", lambda _params, _which: recorder)
    with patch_module_args(args), pytest.raises(SystemExit):
        modelplane_cluster.main()
    return json.loads(capsys.readouterr().out), recorder


def test_check_mode_through_main_plans_and_never_shows_the_kubeconfig(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "w.kubeconfig"
    path.write_text(KUBECONFIG)
    result, recorder = run_main(
        monkeypatch,
        capsys,
        {
            "kubeconfig": "/cp",
            "name": "c1",
            "workload_kubeconfig": str(path),
            "node_pools": [{"name": "l40s", "class_name": "l40s-1x", "node_count": 2}],
            "gpu_inventory": {"n1": {"pool": "l40s", "count": 1, "memory": "46068Mi", "source": "labels"}},
            "_ansible_check_mode": True,
            "_ansible_diff": True,
        },
    )
    assert result["changed"] is True, result
    assert result["actions"][-1] == "create InferenceCluster c1"
    assert "create" not in recorder.calls
    assert recorder.calls[-1] == "close"
    assert TOKEN not in json.dumps(result)
    assert result["diff"]["after"]["secret"]["data"] == {"kubeconfig": "<redacted, changed>"}


def test_present_needs_the_workload_kubeconfig(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    result, recorder = run_main(monkeypatch, capsys, {"kubeconfig": "/cp", "name": "c1", "node_pools": [{"name": "p"}]})
    assert result["failed"] is True
    assert "workload_kubeconfig" in result["msg"]
    assert recorder.calls == []


def test_kubeconfig_falls_back_to_modelplane_kubeconfig_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("K8S_AUTH_KUBECONFIG", "/workload")
    monkeypatch.delenv("MODELPLANE_KUBECONFIG", raising=False)
    result, recorder = run_main(monkeypatch, capsys, {"name": "c1", "state": "absent"})
    assert result["failed"] is True
    assert result["error"]["field"] == "kubeconfig"
    assert recorder.calls == []
    monkeypatch.setenv("MODELPLANE_KUBECONFIG", "/cp")
    result, recorder = run_main(monkeypatch, capsys, {"name": "c1", "state": "absent"})
    assert result["changed"] is False, result
    assert recorder.calls[0] == "get"
