"""kube_ready: waiting, check mode, timeout diagnostics (FakeFeed, no network)."""

from __future__ import annotations

import pytest
from kube_module_support import FakeFeed, obj, run_module

from ansible_collections.metalplane.inference.plugins.modules import kube_ready

BASE = {"api_version": "modelplane.ai/v1alpha1", "kind": "InferenceCluster", "name": "r730", "wait_timeout": 2}


def test_ready_after_an_event(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    feed = FakeFeed(
        {"objects": [{"items": [obj("r730", ready="False")], "events": [{"type": "MODIFIED", "object": obj("r730")}]}]}
    )
    result = run_module(monkeypatch, capsys, kube_ready.main, feed, BASE)
    assert result["changed"] is False
    assert result["ready"] is True
    assert result["objects"][0]["name"] == "r730"
    spec = next(c[2] for c in feed.calls if c[0] == "list")
    assert spec.field_selector == "metadata.name=r730"
    assert spec.kind == "InferenceCluster"


def test_timeout_fails_with_values_and_conditions(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stuck = obj("r730", ready="False")
    stuck["status"]["conditions"][0]["message"] = "waiting for gateway"
    feed = FakeFeed({"objects": [{"items": [stuck]}]})
    result = run_module(monkeypatch, capsys, kube_ready.main, feed, {**BASE, "wait_timeout": 1})
    assert result["failed"] is True
    assert result["msg"].startswith("Timed out after 1s waiting for InferenceCluster (modelplane.ai/v1alpha1) 'r730'")
    assert "r730 [value=False, Ready=False (RFalse: waiting for gateway)]" in result["msg"]
    assert result["error"]["kind"] == "timeout"
    assert result["error"]["objects"][0]["conditions"][0]["message"] == "waiting for gateway"


def test_check_mode_reports_without_waiting_or_failing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    feed = FakeFeed({"objects": [{"items": [obj("r730", ready="False")]}]})
    result = run_module(
        monkeypatch, capsys, kube_ready.main, feed, {**BASE, "wait_timeout": 60, "_ansible_check_mode": True}
    )
    assert result.get("failed") is not True
    assert result["ready"] is False
    assert feed.count("watch") == 0


def test_label_selectors_and_custom_expression(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = {"metadata": {"name": "w", "namespace": "ml"}, "spec": {"replicas": 2}, "status": {"readyReplicas": 2}}
    feed = FakeFeed({"objects": [{"items": [ds]}]})
    args = {
        "api_version": "apps/v1",
        "kind": "Deployment",
        "namespace": "ml",
        "label_selectors": ["app=w", "tier=gpu"],
        "expression": "status.readyReplicas == spec.replicas",
        "wait_timeout": 1,
    }
    result = run_module(monkeypatch, capsys, kube_ready.main, feed, args)
    assert result["ready"] is True
    spec = feed.calls[0][2]
    assert (spec.namespace, spec.label_selector, spec.field_selector) == ("ml", "app=w,tier=gpu", None)


def test_bad_expression_fails_before_any_request(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    feed = FakeFeed({"objects": [{"items": []}]})
    result = run_module(monkeypatch, capsys, kube_ready.main, feed, {**BASE, "expression": "status.[["})
    assert result["failed"] is True
    assert result["msg"].startswith("expression: not a valid JMESPath expression")
    assert feed.calls == []


def test_name_and_label_selectors_are_exclusive(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_module(monkeypatch, capsys, kube_ready.main, FakeFeed({}), {**BASE, "label_selectors": ["a=b"]})
    assert result["failed"] is True
    assert "mutually exclusive" in result["msg"]
