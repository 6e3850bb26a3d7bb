"""The VKE twin: a workload Kubernetes API per Vultr cluster (lab.vultr.twin), driven over HTTP."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from kubernetes import client, config

from lab.vultr.contract import assert_no_violations, contract_or_skip
from lab.vultr.server import VultrEmulator
from lab.vultr.twin import WORKLOADS, plan_gpus, workload_for

AUTH = {"Authorization": "Bearer lab-vultr-api-key"}
TIMEOUT = 10
L40S = "vcg-l40s-16c-180g-48vram"


def eventually(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        else:
            if result is not False:
                return result
            if time.monotonic() > deadline:
                raise AssertionError("condition never held")
        time.sleep(0.1)


@pytest.fixture
def emu() -> Iterator[VultrEmulator]:
    # delay_scale 0.02: cluster active after 0.6 s, nodes 0.4 s; the validator waits for validator_ready().
    with VultrEmulator(
        delay_scale=0.02, contract=contract_or_skip(), twin=True, validator_ready_after=None
    ) as emulator:
        yield emulator
    assert_no_violations(emulator)  # contract violations and internal errors


def call(emu: VultrEmulator, method: str, path: str, body: Any = None) -> requests.Response:
    return requests.request(method, emu.base_url + path, json=body, headers=AUTH, timeout=TIMEOUT)


def create_cluster(emu: VultrEmulator) -> str:
    pool = {
        "node_quantity": 2,
        "label": "gpu",
        "plan": L40S,
        "labels": {"modelplane.ai/pool": "l40s"},
        "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
    }
    body = {"label": "twin", "region": "ewr", "version": "v1.35.6+1", "node_pools": [pool]}
    response = call(emu, "POST", "/kubernetes/clusters", body)
    assert response.status_code == 201, response.text
    return response.json()["vke_cluster"]["id"]


def core_api(emu: VultrEmulator, cluster_id: str, tmp_path: Path) -> tuple[client.CoreV1Api, client.AppsV1Api, str]:
    response = call(emu, "GET", f"/kubernetes/clusters/{cluster_id}/config")
    assert response.status_code == 200
    text = base64.b64decode(response.json()["kube_config"]).decode()
    server = yaml.safe_load(text)["clusters"][0]["cluster"]["server"]
    path = tmp_path / f"{cluster_id}.kubeconfig"
    path.write_text(text)
    api_client = config.new_client_from_config(config_file=str(path))
    return client.CoreV1Api(api_client), client.AppsV1Api(api_client), server


@pytest.mark.parametrize(
    ("plan", "product", "count", "fraction"),
    [
        ("vcg-l40s-16c-180g-48vram", "NVIDIA-L40S", 1, 1.0),
        ("vcg-a16-6c-64g-16vram", "NVIDIA-A16", 1, 1.0),
        ("vcg-a40-8c-40g-16vram", "NVIDIA-A40", 1, 0.333),
        ("vcg-a40-12c-60g-24vram", "NVIDIA-A40", 1, 0.5),
        ("vcg-a100-96c-960g-640vram", "NVIDIA-A100-80GB-PCIe", 8, 1.0),
        ("vcg-h100-216c-1914gb-640vram", "NVIDIA-H100-80GB-HBM3", 8, 1.0),
    ],
)
def test_plan_gpus(plan: str, product: str, count: int, fraction: float) -> None:
    gpus = plan_gpus(plan)
    assert gpus is not None
    assert (gpus.product, gpus.count, gpus.fraction) == (product, count, fraction)


def test_cpu_plan_has_no_gpus() -> None:
    assert plan_gpus("vc2-4c-8gb") is None


def test_workload_cluster_follows_the_vke_cluster(emu: VultrEmulator, tmp_path: Path) -> None:
    cluster_id = create_cluster(emu)
    eventually(
        lambda: call(emu, "GET", f"/kubernetes/clusters/{cluster_id}").json()["vke_cluster"]["status"] == "active"
    )
    core, apps, server = core_api(emu, cluster_id, tmp_path)
    assert server.startswith("https://127.0.0.1:")
    assert workload_for(server) is emu.twin.workloads[cluster_id]

    cluster = call(emu, "GET", f"/kubernetes/clusters/{cluster_id}").json()["vke_cluster"]
    pool = cluster["node_pools"][0]
    vultr_names = {n["label"] for n in pool["nodes"]}

    def nodes() -> dict[str, Any]:
        return {n.metadata.name: n for n in core.list_node().items}

    found = eventually(lambda: nodes() if set(nodes()) == vultr_names else False)
    for node in found.values():
        assert node.metadata.labels["modelplane.ai/pool"] == "l40s"
        assert node.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-L40S"
        assert node.status.allocatable["nvidia.com/gpu"] == "1"
        assert [(t.key, t.value, t.effect) for t in node.spec.taints] == [("nvidia.com/gpu", "present", "NoSchedule")]

    # The validator is unready until validation finishes, then ready on both nodes.
    ds = apps.read_namespaced_daemon_set("nvidia-operator-validator", "gpu-operator")
    assert not ds.status.number_ready
    emu.twin.workloads[cluster_id].gpu.validator_ready()
    eventually(
        lambda: (
            apps.read_namespaced_daemon_set("nvidia-operator-validator", "gpu-operator").status.desired_number_scheduled
            == 2
        )
    )
    eventually(
        lambda: apps.read_namespaced_daemon_set("nvidia-operator-validator", "gpu-operator").status.number_ready == 2
    )

    # Resize: 2 -> 3 -> 1 nodes.
    assert call(emu, "PATCH", f"/kubernetes/clusters/{cluster_id}/node-pools/{pool['id']}", {"node_quantity": 3}).ok
    eventually(lambda: len(nodes()) == 3)
    assert call(emu, "PATCH", f"/kubernetes/clusters/{cluster_id}/node-pools/{pool['id']}", {"node_quantity": 1}).ok
    eventually(lambda: len(nodes()) == 1)
    remaining = call(emu, "GET", f"/kubernetes/clusters/{cluster_id}").json()["vke_cluster"]["node_pools"][0]["nodes"]
    assert set(nodes()) == {n["label"] for n in remaining}

    # A label added on the pool reaches the node.
    added = call(
        emu, "POST", f"/kubernetes/clusters/{cluster_id}/node-pools/{pool['id']}/labels", {"key": "tier", "value": "a"}
    )
    assert added.status_code == 201, added.text
    eventually(lambda: all(n.metadata.labels.get("tier") == "a" for n in nodes().values()))

    # Delete: the workload API stops.
    assert call(emu, "DELETE", f"/kubernetes/clusters/{cluster_id}").status_code == 204
    eventually(lambda: cluster_id not in emu.twin.workloads)
    assert server not in WORKLOADS
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(server + "/version", verify=False, timeout=2)


def test_twin_is_off_by_default() -> None:
    with VultrEmulator(delay_scale=0.0, contract=contract_or_skip()) as emulator:
        assert emulator.twin is None
    assert_no_violations(emulator)


VALIDATOR = ("daemonsets", "gpu-operator", "nvidia-operator-validator")  # the workload API's hold key


def test_validator_ready_after_the_delay(tmp_path: Path) -> None:
    """validator_ready_after (x delay_scale) counts from activation: never ready earlier (load only delays).

    Judged from the emulators' own state, never from the test's clock: the instant the cluster became
    active (``VkeState``'s ``ready_at``) and the instant until which the workload API holds the
    validator unready (its ``controllers.holds``), both on the emulators' monotonic clock; the
    validator seen at activation; and every poll's reading of the DaemonSet next to whether the API
    still held it at that moment.
    """
    delay_scale, ready_after = 0.02, 75  # the validator is held 1.5 s past activation
    emu = VultrEmulator(
        delay_scale=delay_scale, contract=contract_or_skip(), twin=True, validator_ready_after=ready_after
    )
    at_activation: dict[str, Any] = {}

    def activated(cluster: dict[str, Any]) -> None:  # chained after the twin's own hook (workload API started)
        api = emu.twin.workloads[cluster["id"]]
        validator = api.get("apps/v1", "DaemonSet", VALIDATOR[2], VALIDATOR[1]) or {}
        at_activation.update(
            active_since=emu.state.clusters[cluster["id"]].ready_at,
            held_until=api.controllers.holds.get(VALIDATOR),
            number_ready=(validator.get("status") or {}).get("numberReady", 0),
        )

    emu.on_cluster_active = activated
    polls: list[tuple[int, bool]] = []  # (numberReady read, held by the API right after that read)
    with emu:
        cluster_id = create_cluster(emu)
        _core, apps, _server = core_api_when_active(emu, cluster_id, tmp_path)
        api = emu.twin.workloads[cluster_id]

        def validator_ready() -> bool:
            ds = apps.read_namespaced_daemon_set(VALIDATOR[2], VALIDATOR[1])
            obj = api.get("apps/v1", "DaemonSet", VALIDATOR[2], VALIDATOR[1])
            polls.append((ds.status.number_ready or 0, api.controllers.held(*VALIDATOR, obj)))
            return ds.status.number_ready == 2

        eventually(validator_ready)
    assert_no_violations(emu)  # contract violations and internal errors

    assert at_activation, "the cluster never became active"
    # The hold starts at activation, not at the create: it ends validator_ready_after x delay_scale past it.
    assert at_activation["held_until"] is not None, at_activation
    assert at_activation["held_until"] - at_activation["active_since"] >= ready_after * delay_scale, at_activation
    assert at_activation["number_ready"] == 0, at_activation
    # Never ready while held: a read that saw ready pods was followed by a "not held" (the read comes first).
    assert not [poll for poll in polls if poll[0] > 0 and poll[1]], polls


def core_api_when_active(
    emu: VultrEmulator, cluster_id: str, tmp_path: Path
) -> tuple[client.CoreV1Api, client.AppsV1Api, str]:
    eventually(
        lambda: call(emu, "GET", f"/kubernetes/clusters/{cluster_id}").json()["vke_cluster"]["status"] == "active"
    )
    return core_api(emu, cluster_id, tmp_path)


def test_workload_kubeconfigs_live_in_the_given_state_dir(tmp_path: Path) -> None:
    """labctl passes its state directory, so no lab kubeconfig or key lands in /tmp (issue 6)."""
    state = tmp_path / "workloads"
    with VultrEmulator(
        delay_scale=0.02, contract=contract_or_skip(), twin=True, validator_ready_after=None, workload_state_dir=state
    ) as emulator:
        cluster_id = create_cluster(emulator)
        eventually(lambda: cluster_id in emulator.twin.workloads)
        api = emulator.twin.workloads[cluster_id]
        assert api.kubeconfig_path.is_file()
        assert api.kubeconfig_path.is_relative_to(state)
        assert "kubeconfig" in api.kubeconfig_path.name
    assert_no_violations(emulator)
