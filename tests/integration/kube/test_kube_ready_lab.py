"""kube_ready through ansible-playbook against the Kubernetes emulator (or the real lane)."""

from __future__ import annotations

from typing import Any

import pytest
from kube_helpers import drop_until_relisted, list_requests, watch_requests, when_watching

WIDGETS = "/apis/test.metalplane.io/v1/namespaces/default/widgets"


def task(kube: Any, name: str | None = None, **options: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"kubeconfig": kube.kubeconfig, "api_version": "test.metalplane.io/v1", "kind": "Widget",
                            "namespace": "default", "wait_timeout": 10, **options}  # fmt: skip
    if name:
        args["name"] = name
    return {"name": "wait", "metalplane.inference.kube_ready": args, "register": "out", "ignore_errors": True}


@pytest.fixture(autouse=True)
def widget_kind(kube: Any) -> None:
    kube.ensure_widget_kind()


def test_ready_at_once(kube: Any, unique: str, playbook: Any) -> None:
    kube.widget(unique, "True")
    run = playbook([task(kube, unique)])
    result = run.task("wait")
    assert result.get("failed") is not True, result
    assert result["ready"] is True
    assert result["objects"][0]["name"] == unique
    assert result["changed"] is False


def test_ready_after_a_delay_is_noticed_from_the_watch(kube: Any, unique: str, playbook: Any) -> None:
    kube.widget(unique, "False", reason="Provisioning")
    when_watching(kube, WIDGETS, lambda: kube.widget_status(unique, "True", reason="Available"))
    result = playbook([task(kube, unique, wait_timeout=kube.pick(20, 60))]).task("wait")
    assert result.get("failed") is not True, result
    assert result["objects"][0]["conditions"][0]["reason"] == "Available"
    assert len(list_requests(kube, WIDGETS)) == 1  # one list, then events: no polling
    assert len(watch_requests(kube, WIDGETS)) == 1


def test_never_ready_fails_with_per_object_diagnostics(kube: Any, unique: str, playbook: Any) -> None:
    kube.widget(f"{unique}-a", "False", reason="QuotaExceeded", message="no GPU quota", labels={"set": unique})
    kube.widget(f"{unique}-b", "True", labels={"set": unique})
    result = playbook([task(kube, label_selectors=[f"set={unique}"], wait_timeout=2)]).task("wait")
    assert result["failed"] is True
    assert result["msg"].startswith("Timed out after 2s waiting for Widget (test.metalplane.io/v1) in default")
    assert (
        f"1 of 2 not ready: default/{unique}-a [value=False, Ready=False (QuotaExceeded: no GPU quota)]"
        in result["msg"]
    )
    objects = {o["name"]: o for o in result["error"]["objects"]}
    assert objects[f"{unique}-a"]["conditions"][0]["message"] == "no GPU quota"
    assert objects[f"{unique}-b"]["ready"] is True


def test_missing_object_times_out_saying_nothing_matched(kube: Any, unique: str, playbook: Any) -> None:
    result = playbook([task(kube, unique, wait_timeout=1)]).task("wait")
    assert result["failed"] is True
    assert "no matching object was found" in result["msg"]


def test_check_mode_reports_without_waiting(kube: Any, unique: str, playbook: Any) -> None:
    kube.widget(unique, "False")
    result = playbook([task(kube, unique, wait_timeout=60)], check=True).task("wait")
    # Waiting would end in a failed timeout (the Widget never becomes ready): check mode reports the
    # one evaluation instead, not ready and not failed.
    assert result.get("failed") is not True, result
    assert result["ready"] is False
    assert result["objects"][0]["ready"] is False
    assert result["elapsed"] == 0.0
    assert len(list_requests(kube, WIDGETS)) == 1  # one list, no watch
    assert watch_requests(kube, WIDGETS) == []


def test_api_down_mid_wait_is_survived(kube: Any, unique: str, playbook: Any) -> None:
    kube.widget(unique, "False")

    def outage() -> None:
        # Emulator: connections refused for 1.5 s, then the Widget becomes ready while the API is
        # still down (seeded in-process). Real lane: kube-apiserver stopped for 1.5 s and started
        # again (same flags, certificates, etcd), then the Widget becomes ready.
        kube.outage(1.5)
        kube.widget_status(unique, "True")

    when_watching(kube, WIDGETS, outage)
    result = playbook([task(kube, unique, wait_timeout=kube.pick(20, 240))]).task("wait")
    assert result.get("failed") is not True, result
    assert result["ready"] is True
    assert len(list_requests(kube, WIDGETS)) >= 2  # it listed again once the API was back


def test_dropped_watch_is_followed_by_a_relist(kube: Any, unique: str, playbook: Any) -> None:
    kube.widget(unique, "False")
    when_watching(kube, WIDGETS, lambda: drop_until_relisted(kube, WIDGETS))
    when_watching(kube, WIDGETS, lambda: kube.widget_status(unique, "True"), nth=2)
    result = playbook([task(kube, unique, wait_timeout=kube.pick(20, 60))]).task("wait")
    assert result.get("failed") is not True, result
    assert result["ready"] is True
    assert len(list_requests(kube, WIDGETS)) == 2
    assert len(watch_requests(kube, WIDGETS)) == 2


@pytest.mark.emulator_only
def test_5xx_answers_are_retried(kube: Any, unique: str, playbook: Any) -> None:
    kube.widget(unique, "True")
    kube.emulator.fail_next(3, status=503)  # discovery and the first list fail, then the API recovers
    result = playbook([task(kube, unique, wait_timeout=20)]).task("wait")
    assert result.get("failed") is not True, result
    assert result["ready"] is True
