"""Watches (resume, selectors, 410 Gone, dropped streams) and the emulator's fault injection."""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import pytest
import urllib3
from kubeconf_support import KubeTarget, eventually
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException


def collect(target: KubeTarget, ns: str, count: int, **kwargs: Any) -> list[tuple[str, str]]:
    """Up to ``count`` (type, name) events from a ConfigMap watch in ``ns``."""
    api = client.CoreV1Api(target.api_client())
    events: list[tuple[str, str]] = []
    stream = watch.Watch()
    for event in stream.stream(api.list_namespaced_config_map, ns, timeout_seconds=10, **kwargs):
        name = event["object"].metadata.name
        if name != "kube-root-ca.crt":
            events.append((event["type"], name))
        if len(events) >= count:
            stream.stop()
    return events


def in_background(action: Any, delay: float = 0.3) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)
        action()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_watch_from_list_resource_version_sees_every_change(kube_target: KubeTarget, ns: str) -> None:
    api = client.CoreV1Api(kube_target.api_client())
    api.create_namespaced_config_map(ns, {"metadata": {"name": "before"}})
    rv = api.list_namespaced_config_map(ns).metadata.resource_version

    def changes() -> None:
        api.create_namespaced_config_map(ns, {"metadata": {"name": "w"}, "data": {"a": "1"}})
        api.patch_namespaced_config_map("w", ns, {"data": {"a": "2"}})
        api.delete_namespaced_config_map("w", ns)

    thread = in_background(changes)
    events = collect(kube_target, ns, 3, resource_version=rv)
    thread.join()
    assert events == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]


def test_watch_without_resource_version_starts_with_current_objects(kube_target: KubeTarget, ns: str) -> None:
    api = client.CoreV1Api(kube_target.api_client())
    api.create_namespaced_config_map(ns, {"metadata": {"name": "existing"}})
    assert collect(kube_target, ns, 1) == [("ADDED", "existing")]


def test_watch_with_label_selector_filters_and_reports_leaving(kube_target: KubeTarget, ns: str) -> None:
    api = client.CoreV1Api(kube_target.api_client())
    rv = api.list_namespaced_config_map(ns).metadata.resource_version

    def changes() -> None:
        api.create_namespaced_config_map(ns, {"metadata": {"name": "other", "labels": {"pick": "no"}}})
        api.create_namespaced_config_map(ns, {"metadata": {"name": "picked", "labels": {"pick": "yes"}}})
        api.patch_namespaced_config_map("picked", ns, {"metadata": {"labels": {"pick": "no"}}})

    thread = in_background(changes)
    events = collect(kube_target, ns, 2, resource_version=rv, label_selector="pick=yes")
    thread.join()
    assert events == [("ADDED", "picked"), ("DELETED", "picked")]


def test_watch_events_carry_increasing_resource_versions(kube_target: KubeTarget, ns: str) -> None:
    api = client.CoreV1Api(kube_target.api_client())
    rv = int(api.list_namespaced_config_map(ns).metadata.resource_version)
    thread = in_background(
        lambda: [api.create_namespaced_config_map(ns, {"metadata": {"name": f"r{i}"}}) for i in range(3)]
    )
    seen: list[int] = []
    stream = watch.Watch()
    for event in stream.stream(api.list_namespaced_config_map, ns, resource_version=str(rv), timeout_seconds=10):
        if event["object"].metadata.name.startswith("r"):
            seen.append(int(event["object"].metadata.resource_version))
        if len(seen) == 3:
            stream.stop()
    thread.join()
    assert seen == sorted(seen)
    assert seen[0] > rv


@pytest.mark.emulator_only
def test_watch_from_a_compacted_resource_version_is_410_gone(kube_target: KubeTarget, ns: str) -> None:
    api = client.CoreV1Api(kube_target.api_client())
    old_rv = api.list_namespaced_config_map(ns).metadata.resource_version
    api.create_namespaced_config_map(ns, {"metadata": {"name": "later"}})
    kube_target.emulator.compact()
    code, body = kube_target.raw(
        "GET", f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={old_rv}&timeoutSeconds=2"
    )
    assert code == 200
    first = json.loads(body.splitlines()[0]) if isinstance(body, str) else body
    assert first["type"] == "ERROR"
    assert first["object"]["code"] == 410
    with pytest.raises(ApiException) as info:
        collect(kube_target, ns, 1, resource_version=old_rv)
    assert info.value.status == 410


@pytest.mark.emulator_only
def test_drop_watches_ends_open_streams(private_emulator: Any) -> None:
    target = KubeTarget("emulator", private_emulator.kubeconfig_path, private_emulator)
    api = client.CoreV1Api(target.api_client())
    rv = api.list_namespaced_config_map("default").metadata.resource_version
    ended = threading.Event()
    received: list[str] = []

    def watcher() -> None:
        for event in watch.Watch().stream(
            api.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=30, _request_timeout=30
        ):
            received.append(event["object"].metadata.name)
        ended.set()

    thread = threading.Thread(target=watcher, daemon=True)
    thread.start()
    eventually(lambda: private_emulator.store.watchers, what="watch to be open")
    private_emulator.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "seen", "namespace": "default"}}
    )
    eventually(lambda: received, what="first event")
    assert private_emulator.drop_watches() >= 1
    assert ended.wait(10), "the watch stream did not end after drop_watches()"
    # The stream is really over: a write after the drop reaches no one (the watch asked for 30 s).
    private_emulator.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "after-drop", "namespace": "default"}}
    )
    assert private_emulator.store.watchers == []
    assert received == ["seen"]
    target.close()


@pytest.mark.emulator_only
def test_fail_next_answers_500_then_recovers(private_emulator: Any) -> None:
    target = KubeTarget("emulator", private_emulator.kubeconfig_path, private_emulator)
    private_emulator.fail_next(2, status=500)
    assert target.raw("GET", "/api/v1/namespaces")[0] == 500
    code, body = target.raw("GET", "/api/v1/namespaces")
    assert (code, body["kind"], body["code"]) == (500, "Status", 500)
    assert target.raw("GET", "/api/v1/namespaces")[0] == 200


@pytest.mark.emulator_only
def test_unavailable_with_503(private_emulator: Any) -> None:
    target = KubeTarget("emulator", private_emulator.kubeconfig_path, private_emulator)
    private_emulator.make_unavailable(0.5, mode="503")
    assert target.raw("GET", "/api/v1/namespaces")[0] == 503
    eventually(lambda: target.raw("GET", "/api/v1/namespaces")[0] == 200, timeout=5)


@pytest.mark.emulator_only
def test_unavailable_refuses_connections_then_comes_back(private_emulator: Any) -> None:
    target = KubeTarget("emulator", private_emulator.kubeconfig_path, private_emulator)
    private_emulator.make_unavailable(0.8)
    with pytest.raises((urllib3.exceptions.HTTPError, ConnectionError)):
        target.raw("GET", "/api/v1/namespaces")
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", private_emulator.port), 1):
        pass

    def back() -> bool:
        try:
            return target.raw("GET", "/api/v1/namespaces")[0] == 200
        except (urllib3.exceptions.HTTPError, ConnectionError):
            return False

    eventually(back, timeout=10, what="API to come back")
    # Objects survive the outage: it is the transport that went away, not the cluster.
    assert private_emulator.get("v1", "Namespace", "default") is not None


@pytest.mark.emulator_only
def test_lab_control_endpoints_work_without_auth(private_emulator: Any) -> None:
    target = KubeTarget("emulator", private_emulator.kubeconfig_path, private_emulator)
    code, _body = target.raw("POST", "/lab/fail-next?n=1&status=503", token="")
    assert code == 200
    assert target.raw("GET", "/api/v1/nodes")[0] == 503
    assert target.raw("GET", "/api/v1/nodes")[0] == 200
    code, body = target.raw("POST", "/lab/gpu/nodes", {"name": "lab-node", "gpus": 2, "product": "L40S"}, token="")
    assert code == 201
    assert body["status"]["allocatable"]["nvidia.com/gpu"] == "2"
    code, body = target.raw("GET", "/lab/requests", token="")
    assert {"method": "GET", "path": "/api/v1/nodes", "query": "", "status": 503} in body["requests"]
    # The request log does not include the control endpoints themselves.
    assert not any(r["path"].startswith("/lab/") for r in body["requests"])


@pytest.mark.emulator_only
def test_request_log_records_method_path_query_status(private_emulator: Any) -> None:
    target = KubeTarget("emulator", private_emulator.kubeconfig_path, private_emulator)
    before = len(private_emulator.requests)
    target.raw("GET", "/api/v1/namespaces/default/configmaps?labelSelector=a%3Db")
    target.raw("GET", "/api/v1/namespaces/default/configmaps/missing")
    records = private_emulator.requests[before:]
    assert [(r.method, r.path, r.query, r.status) for r in records] == [
        ("GET", "/api/v1/namespaces/default/configmaps", "labelSelector=a%3Db", 200),
        ("GET", "/api/v1/namespaces/default/configmaps/missing", "", 404),
    ]
