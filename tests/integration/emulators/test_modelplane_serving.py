"""lab.modelplane.serving: the gateway, the scheduler and the OpenAI-compatible stand-ins of the lab control plane.

Why: the smoke test (modelplane_smoke) is only proven against the lab if the lab schedules as Modelplane does
(Ready with a gateway address, matching labels and class, no untolerated taint) and routes the public URL to
the replica's own cluster. Objects are created through the API, so each is validated by the XRD-generated
CRDs; ModelDeployment and ModelService are the smoke test's own builders.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from ansible_collections.metalplane.inference.plugins.module_utils._modelplane import engines, smoke
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.inference_cluster import (
    inference_cluster,
)
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.kubeconfig_secret import (
    kubeconfig_secret,
)
from lab.modelplane.server import ModelplaneEmulator
from lab.modelplane.serving import cel_matches, request_matches

MP = "modelplane.ai/v1alpha1"
NS = "ml-team"
KUBECONFIG = yaml.safe_dump(
    {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "w", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "w", "user": {"token": "t"}}],
        "contexts": [{"name": "w", "context": {"cluster": "w", "user": "w"}}],
        "current-context": "w",
    }
)
L40S = {
    "name": "gpu",
    "driver": "gpu.nvidia.com",
    "deviceClassName": "gpu.nvidia.com",
    "count": 1,
    "attributes": {"productName": {"string": "NVIDIA L40S"}, "cudaComputeCapability": {"version": "8.9.0"}},
    "capacity": {"memory": {"value": "46068Mi"}},
}


@pytest.mark.parametrize(
    ("cel", "matches"),
    [
        ('device.driver == "gpu.nvidia.com"', True),
        ('device.driver == "gpu.example.com"', False),
        ('device.attributes["gpu.nvidia.com"].productName == "NVIDIA L40S"', True),
        ('device.attributes["gpu.nvidia.com"].productName == "NVIDIA A16"', False),
        ('device.attributes["gpu.example.com"].productName == "NVIDIA L40S"', False),  # another driver's domain
        ('device.attributes["gpu.nvidia.com"].productName != "NVIDIA A16"', True),
        ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("20Gi")) >= 0', True),
        ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("48Gi")) >= 0', False),  # nominal != reported
        ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("46068Mi")) == 0', True),
        (
            'device.driver == "gpu.nvidia.com" && '
            'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("1Ti")) < 0',
            True,
        ),
        ("semver(device.attributes['gpu.nvidia.com'].driverVersion) >= semver('550.0.0')", True),  # not evaluated
    ],
)
def test_cel_selectors(cel: str, matches: bool) -> None:
    assert cel_matches(cel, L40S) is matches


@pytest.mark.parametrize(
    ("count", "cel", "found"),
    [(1, 'device.driver == "gpu.nvidia.com"', True), (2, 'device.driver == "gpu.nvidia.com"', False)],
)
def test_request_matches_the_count_per_node(count: int, cel: str, found: bool) -> None:
    request = {"name": "gpu", "count": count, "selectors": [{"cel": cel}]}
    assert (request_matches(request, [L40S]) is not None) is found


@pytest.fixture
def mp() -> Iterator[ModelplaneEmulator]:
    with ModelplaneEmulator(delay_scale=0.0, backend_ready_after=0.0, publish_slices=False) as emulator:
        emulator.ensure_namespace(NS)
        yield emulator
        assert emulator.errors == []


def wait_for(check: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.05)
    return result


def adopt(
    mp: ModelplaneEmulator, name: str, *, secret: bool = True, taints: list[dict[str, str]] | None = None
) -> None:
    if mp.api.get(MP, "InferenceClass", "l40s-1x") is None:
        mp.api.create(
            {"apiVersion": MP, "kind": "InferenceClass", "metadata": {"name": "l40s-1x"}, "spec": {"devices": [L40S]}}
        )
    if secret:
        mp.api.create(kubeconfig_secret(f"{name}-kubeconfig", KUBECONFIG, cluster=name))
    mp.api.create(
        inference_cluster(
            name,
            secret_name=f"{name}-kubeconfig",
            node_pools=[{"name": "l40s", "className": "l40s-1x"}],
            labels={"modelplane.ai/region": "ewr"},
            taints=taints,
        )
    )


def deploy(mp: ModelplaneEmulator, cluster: str, *, gpus: int = 1, name: str = "smoke") -> None:
    target = smoke.Target(cluster=cluster, pool="l40s", class_name="l40s-1x", device=L40S)
    engine = engines.engine_for(L40S, model="Qwen/Q", served_model_name="qwen", gpus=1, image=None)
    deployment = smoke.model_deployment(name, NS, target, gpus=1, engine=engine)
    deployment["spec"]["template"]["spec"]["engines"][0]["members"][0]["nodeSelector"]["devices"][0]["count"] = gpus
    mp.api.create(deployment)
    mp.api.create(smoke.model_service(name, NS, cluster, name))


def condition(obj: dict[str, Any] | None, kind: str) -> tuple[str, str, str]:
    found = next((c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c["type"] == kind), {})
    return found.get("status", ""), found.get("reason", ""), found.get("message", "")


def replicas(mp: ModelplaneEmulator, name: str = "smoke") -> list[dict[str, Any]]:
    return mp.api.list(MP, "ModelReplica", namespace=NS, label_selector=f"modelplane.ai/deployment={name}")


def post(url: str, body: dict[str, Any]) -> tuple[int, str]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def gateway_address(mp: ModelplaneEmulator) -> str:
    mp.api.create(
        {
            "apiVersion": MP,
            "kind": "InferenceGateway",
            "metadata": {"name": "default"},
            "spec": {"backend": "Traefik", "traefik": {"version": "40.2.0"}},
        }
    )
    ready = wait_for(
        lambda: (
            condition(mp.api.get(MP, "InferenceGateway", "default"), "Ready")[0] == "True"
            and mp.api.get(MP, "InferenceGateway", "default")
        )
    )
    return ready["status"]["address"]


def test_a_replica_goes_to_the_ready_cluster_its_selector_names(mp: ModelplaneEmulator) -> None:
    adopt(mp, "east")
    adopt(mp, "west")
    deploy(mp, "west")
    [replica] = wait_for(lambda: replicas(mp))
    assert replica["spec"]["clusterName"] == "west"
    assert replica["metadata"]["labels"] == {"modelplane.ai/deployment": "smoke", "modelplane.ai/cluster": "west"}
    member = replica["spec"]["engines"][0]["members"][0]
    assert member["nodePoolName"] == "l40s"
    assert member["deviceRequests"][0]["deviceClassName"] == "gpu.nvidia.com"
    wait_for(lambda: condition(mp.api.get(MP, "ModelDeployment", "smoke", NS), "Ready")[0] == "True")
    md = mp.api.get(MP, "ModelDeployment", "smoke", NS)
    assert md["status"]["replicas"] == {"total": 1, "ready": 1}
    assert condition(md, "ReplicasScheduled")[:2] == ("True", "AllScheduled")


@pytest.mark.parametrize(
    ("setup", "why"),
    [
        (lambda mp: adopt(mp, "west", secret=False), "west: not Ready with a gateway address"),
        (lambda mp: adopt(mp, "east"), "east: clusterSelector does not match"),
        (lambda mp: adopt(mp, "west", taints=[{"key": "drain", "effect": "NoSchedule"}]), "taint drain:NoSchedule"),
    ],
    ids=["not-ready", "other-cluster", "tainted"],
)
def test_nothing_is_scheduled_where_modelplane_would_not(mp: ModelplaneEmulator, setup: Any, why: str) -> None:
    setup(mp)
    deploy(mp, "west")
    status, reason, message = wait_for(
        lambda: (c := condition(mp.api.get(MP, "ModelDeployment", "smoke", NS), "ReplicasScheduled"))[0] and c
    )
    assert (status, reason) == ("False", "InsufficientCapacity")
    assert why in message
    time.sleep(0.5)
    assert replicas(mp) == []


def test_more_gpus_than_a_node_has_is_not_scheduled(mp: ModelplaneEmulator) -> None:
    adopt(mp, "west")
    deploy(mp, "west", gpus=2)
    message = wait_for(lambda: condition(mp.api.get(MP, "ModelDeployment", "smoke", NS), "ReplicasScheduled")[2])
    assert "west: no pool has devices for every device request" in message


def test_the_public_url_is_answered_by_the_replicas_cluster(mp: ModelplaneEmulator) -> None:
    address = gateway_address(mp)
    assert address.startswith("127.0.0.1:")
    url = f"http://{address}/{NS}/smoke/v1/chat/completions"
    body = {"model": "qwen", "messages": [{"role": "user", "content": "are you there?"}], "max_tokens": 64}
    assert post(url, body) == (404, "404 page not found\n")  # no ModelService yet
    adopt(mp, "west")
    deploy(mp, "west")
    wait_for(lambda: condition(mp.api.get(MP, "ModelService", "smoke", NS), "Ready")[0] == "True")
    service = mp.api.get(MP, "ModelService", "smoke", NS)
    assert service["status"]["address"] == f"http://{address}/{NS}/smoke"
    status, text = post(url, body)
    assert status == 200, text
    answer = json.loads(text)
    assert answer["object"] == "chat.completion"
    assert answer["model"] == "qwen"
    content = answer["choices"][0]["message"]["content"]
    assert content.startswith("Hello from the metalplane lab stand-in on west (smoke-")
    assert content.endswith("you asked: are you there?")
    again = json.loads(post(url, body)[1])  # deterministic: the same request, the same completion
    assert (again["id"], again["choices"]) == (answer["id"], answer["choices"])
    record = mp.requests[0]
    assert record["cluster"] == "west"
    assert record["body"] == body
    assert record["path"] == "v1/chat/completions"
    # Another model name: vLLM's 404. The workload gateway itself answers only for its own replicas.
    status, text = post(url, {**body, "model": "other"})
    assert status == 404
    assert "The model `other` does not exist." in text
    # The deployment gone: its replica goes, and the route has no server.
    mp.api.delete(MP, "ModelDeployment", "smoke", NS)
    wait_for(lambda: replicas(mp) == [])
    assert post(url, body) == (503, "no available server\n")


def test_max_tokens_truncates_the_stand_in_answer(mp: ModelplaneEmulator) -> None:
    address = gateway_address(mp)
    adopt(mp, "west")
    deploy(mp, "west")
    wait_for(lambda: condition(mp.api.get(MP, "ModelService", "smoke", NS), "Ready")[0] == "True")
    status, text = post(
        f"http://{address}/{NS}/smoke/v1/chat/completions",
        {"model": "qwen", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3},
    )
    assert status == 200
    answer = json.loads(text)
    assert answer["choices"][0]["message"]["content"] == "Hello from the"
    assert answer["choices"][0]["finish_reason"] == "length"


def test_a_gateway_not_named_default_never_gets_ready(mp: ModelplaneEmulator) -> None:
    mp.api.create(
        {
            "apiVersion": MP,
            "kind": "InferenceGateway",
            "metadata": {"name": "other"},
            "spec": {"backend": "Traefik", "traefik": {"version": "40.2.0"}},
        }
    )
    message = wait_for(lambda: condition(mp.api.get(MP, "InferenceGateway", "other"), "Ready")[2])
    assert "must be named 'default'" in message
