"""The Modelplane control-plane emulator (lab.modelplane.server): CRDs, the simulated controller, deletion.

The workload cluster is a VKE twin (lab.vultr.twin) so the controller's DRA ResourceSlices are checked
in the cluster the kubeconfig Secret names.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from kubernetes import client, config, dynamic
from kubernetes.client.rest import ApiException

from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.inference_cluster import (
    inference_cluster,
)
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.kubeconfig_secret import (
    kubeconfig_secret,
)
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.readiness import unmet
from lab.common.reference import SKIP_PREFIX, reference_path, require
from lab.kube.api import ApiError
from lab.modelplane.crds import KINDS
from lab.modelplane.server import FINALIZER, ModelplaneEmulator, model_replica
from lab.vultr.contract import assert_no_violations, contract_or_skip
from lab.vultr.server import VultrEmulator
from lab.vultr.twin import workload_for

EXAMPLES = reference_path("modelplane", "examples")
MP = "modelplane.ai/v1alpha1"
AUTH = {"Authorization": "Bearer lab-vultr-api-key"}

L40S_CLASS: dict[str, Any] = {
    "apiVersion": MP,
    "kind": "InferenceClass",
    "metadata": {"name": "l40s-1x"},
    "spec": {
        "devices": [
            {
                "name": "gpu",
                "driver": "gpu.nvidia.com",
                "deviceClassName": "gpu.nvidia.com",
                "attributes": {"architecture": {"string": "Ada Lovelace"}},
                "capacity": {"memory": {"value": "46068Mi"}},
            }
        ]
    },
}


def eventually(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        else:
            if result:  # a truthy value ends the wait (empty lists keep waiting)
                return result
            if time.monotonic() > deadline:
                raise AssertionError("condition never held")
        time.sleep(0.1)


def contains(stored: Any, sent: Any) -> bool:
    """Whether everything ``sent`` says is in ``stored`` (which may add schema defaults at any depth)."""
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(k in stored and contains(stored[k], v) for k, v in sent.items())
    if isinstance(sent, list):
        return isinstance(stored, list) and len(stored) == len(sent) and all(map(contains, stored, sent))
    return stored == sent


def example_objects() -> list[tuple[str, dict[str, Any]]]:
    if not EXAMPLES.is_dir():
        return []
    found = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("apiVersion") == MP and doc.get("kind") in KINDS:
                found.append((str(path.relative_to(EXAMPLES)), doc))
    return found


@pytest.fixture(scope="module")
def mp() -> Iterator[ModelplaneEmulator]:
    # backend_ready_after 1 s at delay_scale 1: the Installing phase is observable.
    with ModelplaneEmulator(delay_scale=1.0, backend_ready_after=1.0) as emulator:
        yield emulator
    assert emulator.errors == []


@pytest.fixture(scope="module")
def dyn(mp: ModelplaneEmulator) -> dynamic.DynamicClient:
    return dynamic.DynamicClient(config.new_client_from_config(config_file=str(mp.kubeconfig_path)))


def test_examples_found() -> None:
    require(EXAMPLES, "Modelplane examples")
    kinds = {doc["kind"] for _path, doc in example_objects()}
    assert {"InferenceClass", "InferenceCluster"} <= kinds


@pytest.mark.parametrize(
    ("path", "obj"),
    example_objects() or [pytest.param("", {}, marks=pytest.mark.skip(reason=f"{SKIP_PREFIX} {EXAMPLES}"))],
)
def test_crds_accept_every_example(mp: ModelplaneEmulator, path: str, obj: dict[str, Any]) -> None:
    rtype = mp.api.server_api.type_for(obj["apiVersion"], obj["kind"])
    namespace = obj["metadata"].get("namespace", "default") if rtype.namespaced else None
    if namespace:
        mp.ensure_namespace(namespace)
    url = mp.api.server_api.path_for(rtype, namespace)
    created = mp.api.call("POST", url, obj, {"dryRun": "All", "fieldValidation": "Strict"})
    # Strict validation: an unknown (pruned) field would have been a 400; defaults may add fields (nested too).
    assert contains(created["spec"], obj["spec"]), path


@pytest.mark.parametrize(
    ("kind", "spec", "needle"),
    [
        ("InferenceClass", {}, "devices"),
        ("InferenceClass", {"devices": []}, "devices"),
        ("InferenceClass", {"devices": [{"name": "gpu", "driver": "d", "claim": "Maybe"}]}, "claim"),
        ("InferenceCluster", {"cluster": {"source": "Kind"}}, "source"),
        ("InferenceCluster", {"cluster": {"source": "Existing", "existing": {}}}, "secretRef"),
        ("InferenceCluster", {"cluster": {"source": "Existing"}, "nodePools": [{"name": "p"}]}, "className"),
    ],
)
def test_crds_reject_invalid_objects(mp: ModelplaneEmulator, kind: str, spec: dict[str, Any], needle: str) -> None:
    with pytest.raises(ApiError) as caught:
        mp.api.create({"apiVersion": MP, "kind": kind, "metadata": {"name": "bad"}, "spec": spec})
    assert caught.value.code == 422
    assert needle in caught.value.message


def test_cluster_defaults(mp: ModelplaneEmulator) -> None:
    obj = inference_cluster("defaults", secret_name="s", node_pools=[{"name": "p", "className": "c"}])
    created = mp.api.call("POST", f"/apis/{MP}/inferenceclusters", obj, {"dryRun": "All"})
    assert created["spec"]["cluster"]["existing"]["secretRef"]["key"] == "kubeconfig"
    assert created["spec"]["nodePools"][0]["nodeCount"] == 1


def conditions(obj: Any) -> dict[str, tuple[str, str]]:
    status = obj.to_dict().get("status") or {}
    return {c["type"]: (c["status"], c.get("reason", "")) for c in status.get("conditions") or []}


def test_adoption_sets_conditions_and_publishes_slices(
    mp: ModelplaneEmulator, dyn: dynamic.DynamicClient, tmp_path: Path
) -> None:
    ics = dyn.resources.get(api_version=MP, kind="InferenceCluster")
    classes = dyn.resources.get(api_version=MP, kind="InferenceClass")
    core = client.CoreV1Api(dyn.client)
    with VultrEmulator(delay_scale=0.0, twin=True, validator_ready_after=0, contract=contract_or_skip()) as vultr:
        pool = {
            "node_quantity": 2,
            "label": "gpu",
            "plan": "vcg-l40s-16c-180g-48vram",
            "labels": {"modelplane.ai/pool": "l40s"},
        }
        # A second pool outside the InferenceCluster: its node must get no ResourceSlice.
        other = {
            "node_quantity": 1,
            "label": "a40",
            "plan": "vcg-a40-8c-40g-16vram",
            "labels": {"modelplane.ai/pool": "x"},
        }
        body = {"label": "mp", "region": "ewr", "version": "v1.35.6+1", "node_pools": [pool, other]}
        created = requests.post(vultr.base_url + "/kubernetes/clusters", json=body, headers=AUTH, timeout=10)
        vke = created.json()["vke_cluster"]["id"]
        reply = requests.get(f"{vultr.base_url}/kubernetes/clusters/{vke}/config", headers=AUTH, timeout=10)
        kubeconfig = base64.b64decode(reply.json()["kube_config"]).decode()
        workload = workload_for(yaml.safe_load(kubeconfig)["clusters"][0]["cluster"]["server"])
        assert workload is not None
        eventually(lambda: len(workload.list("v1", "Node")) == 3)
        l40s_nodes = {
            n["metadata"]["name"] for n in workload.list("v1", "Node", label_selector="modelplane.ai/pool=l40s")
        }

        # 1. The class is missing: ClusterReady=False/WaitingForClasses.
        ics.create(
            body=inference_cluster(
                "vke-ewr", secret_name="vke-ewr-kubeconfig", node_pools=[{"name": "l40s", "className": "l40s-1x"}]
            )
        )
        eventually(lambda: conditions(ics.get(name="vke-ewr")).get("ClusterReady") == ("False", "WaitingForClasses"))
        assert FINALIZER in ics.get(name="vke-ewr").metadata.finalizers

        # 2. Class present, Secret missing: ClusterRunning but the backend cannot install.
        classes.create(body=L40S_CLASS)
        eventually(lambda: conditions(ics.get(name="vke-ewr")).get("ClusterReady") == ("True", "ClusterRunning"))
        time.sleep(1.2)
        observed = ics.get(name="vke-ewr")
        assert conditions(observed)["BackendReady"] == ("False", "Installing")
        assert conditions(observed)["Ready"][0] == "False"
        assert "status.gateway.address is empty" in unmet(observed.to_dict())

        # 3. Secret present: Installing for ~1 s, then what the modules wait for.
        secret = kubeconfig_secret("vke-ewr-kubeconfig", kubeconfig, cluster="vke-ewr")
        core.create_namespaced_secret("modelplane-system", secret)
        eventually(lambda: unmet(ics.get(name="vke-ewr").to_dict()) == [], timeout=10)
        ready = ics.get(name="vke-ewr").to_dict()
        assert ready["status"]["gateway"]["address"] == mp.gateway_address("vke-ewr")  # its stand-in, on loopback
        assert ready["status"]["gateway"]["address"].startswith("127.0.0.1:")
        # Devices copied from the class as stored (with the CRD defaults claim DRA, count 1).
        devices = [{**L40S_CLASS["spec"]["devices"][0], "claim": "DRA", "count": 1}]
        assert ready["status"]["gpuPools"] == [{"name": "l40s", "nodes": 1, "devices": devices}]

        # DRA ResourceSlices appear in the workload cluster, one per GPU node, with L40S capacity.
        slices = eventually(lambda: (s := workload.list("resource.k8s.io/v1", "ResourceSlice")) and len(s) == 2 and s)
        assert {s["spec"]["nodeName"] for s in slices} == l40s_nodes
        assert slices[0]["spec"]["devices"][0]["capacity"]["memory"]["value"] == "46068Mi"

        # 4. A pinned ModelReplica holds the deletion (the ClusterUsage guard), foreground deletion then completes.
        replicas = dyn.resources.get(api_version=MP, kind="ModelReplica")
        replicas.create(body=model_replica("r1", "vke-ewr", pool="l40s"), namespace="default")
        ics.delete(name="vke-ewr", body={"propagationPolicy": "Foreground"})
        time.sleep(0.6)
        held = ics.get(name="vke-ewr")
        assert held.metadata.deletionTimestamp
        assert len(workload.list("resource.k8s.io/v1", "ResourceSlice")) == 2
        replicas.delete(name="r1", namespace="default")

        def gone() -> bool:
            try:
                ics.get(name="vke-ewr")
            except ApiException as exc:
                return exc.status == 404
            return False

        eventually(gone)
        assert workload.list("resource.k8s.io/v1", "ResourceSlice") == []
    classes.delete(name="l40s-1x")
    assert_no_violations(vultr)


def test_labctl_entry_writes_the_kubeconfig(tmp_path: Path) -> None:
    from lab.common.registry import EMULATORS

    (entry,) = [e for e in EMULATORS if e.name == "modelplane"]
    assert entry.script.is_file()
    endpoint = entry.endpoint("127.0.0.1", 1, tmp_path)
    assert endpoint["kubeconfig"] == str(tmp_path / "modelplane.kubeconfig")
    assert entry.ready_files(tmp_path) == [tmp_path / "modelplane.kubeconfig"]


def test_fractional_gpu_slice_reports_the_plan_vram(mp: ModelplaneEmulator, dyn: dynamic.DynamicClient) -> None:
    ics = dyn.resources.get(api_version=MP, kind="InferenceCluster")
    a40_class = {**L40S_CLASS, "metadata": {"name": "a40-16g"}}
    mp.api.create(a40_class)
    with VultrEmulator(delay_scale=0.0, twin=True, validator_ready_after=0, contract=contract_or_skip()) as vultr:
        pool = {
            "node_quantity": 1,
            "label": "a40",
            "plan": "vcg-a40-8c-40g-16vram",
            "labels": {"modelplane.ai/pool": "a40"},
        }
        body = {"label": "frac", "region": "ewr", "version": "v1.35.6+1", "node_pools": [pool]}
        vke = requests.post(vultr.base_url + "/kubernetes/clusters", json=body, headers=AUTH, timeout=10).json()
        reply = requests.get(
            f"{vultr.base_url}/kubernetes/clusters/{vke['vke_cluster']['id']}/config", headers=AUTH, timeout=10
        )
        kubeconfig = base64.b64decode(reply.json()["kube_config"]).decode()
        workload = workload_for(yaml.safe_load(kubeconfig)["clusters"][0]["cluster"]["server"])
        assert workload is not None
        mp.api.create(kubeconfig_secret("frac-kubeconfig", kubeconfig, cluster="frac"))
        ics.create(
            body=inference_cluster(
                "frac", secret_name="frac-kubeconfig", node_pools=[{"name": "a40", "className": "a40-16g"}]
            )
        )
        slices = eventually(lambda: workload.list("resource.k8s.io/v1", "ResourceSlice"))
        (device,) = slices[0]["spec"]["devices"]
        assert device["attributes"]["productName"] == {"string": "NVIDIA A40"}
        assert device["capacity"]["memory"] == {"value": "16384Mi"}  # a 16 GB vGPU slice, not the whole A40
        ics.delete(name="frac")
        eventually(lambda: mp.api.get(MP, "InferenceCluster", "frac") is None)
    mp.api.delete(MP, "InferenceClass", "a40-16g")
    assert_no_violations(vultr)


def _wait_port(port: int, timeout: float = 20.0) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while True:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"nothing listens on {port}")
        time.sleep(0.1)


def test_out_of_process_lab_publishes_slices_across_processes(tmp_path: Path) -> None:
    """As labctl runs them: two processes; the controller reaches the twin only through the kubeconfig."""
    import subprocess

    from lab.common.emulator import free_port, lab_command, lab_environment

    vultr_port, mp_port = free_port(), free_port()
    common = ["--host", "127.0.0.1", "--delay-scale", "0", "--state-dir", str(tmp_path)]
    procs = [
        subprocess.Popen(
            lab_command("lab.vultr.server", "--port", str(vultr_port), *common, "--workload-clusters"),
            env=lab_environment(),
        ),
        subprocess.Popen(lab_command("lab.modelplane.server", "--port", str(mp_port), *common), env=lab_environment()),
    ]
    try:
        _wait_port(vultr_port)
        published = tmp_path / "modelplane.kubeconfig"
        eventually(published.is_file, timeout=20)
        base = f"http://127.0.0.1:{vultr_port}/v2"
        pool = {
            "node_quantity": 1,
            "label": "gpu",
            "plan": "vcg-l40s-16c-180g-48vram",
            "labels": {"modelplane.ai/pool": "l40s"},
        }
        body = {"label": "xp", "region": "ewr", "version": "v1.35.6+1", "node_pools": [pool]}
        vke = requests.post(base + "/kubernetes/clusters", json=body, headers=AUTH, timeout=10).json()["vke_cluster"][
            "id"
        ]
        eventually(
            lambda: (
                requests.get(f"{base}/kubernetes/clusters/{vke}", headers=AUTH, timeout=10).json()["vke_cluster"][
                    "status"
                ]
                == "active"
            )
        )
        reply = requests.get(f"{base}/kubernetes/clusters/{vke}/config", headers=AUTH, timeout=10)
        kubeconfig = base64.b64decode(reply.json()["kube_config"]).decode()
        (tmp_path / "workload.kubeconfig").write_text(kubeconfig)

        control = dynamic.DynamicClient(config.new_client_from_config(config_file=str(published)))
        client.CoreV1Api(control.client).create_namespaced_secret(
            "modelplane-system", kubeconfig_secret("xp-kubeconfig", kubeconfig, cluster="xp")
        )
        control.resources.get(api_version=MP, kind="InferenceClass").create(body=L40S_CLASS)
        ics = control.resources.get(api_version=MP, kind="InferenceCluster")
        ics.create(
            body=inference_cluster(
                "xp", secret_name="xp-kubeconfig", node_pools=[{"name": "l40s", "className": "l40s-1x"}]
            )
        )
        eventually(lambda: unmet(ics.get(name="xp").to_dict()) == [], timeout=20)

        workload = client.CustomObjectsApi(
            config.new_client_from_config(config_file=str(tmp_path / "workload.kubeconfig"))
        )
        slices = eventually(
            lambda: workload.list_cluster_custom_object("resource.k8s.io", "v1", "resourceslices")["items"], timeout=20
        )
        assert len(slices) == 1
        assert slices[0]["spec"]["devices"][0]["attributes"]["productName"] == {"string": "NVIDIA L40S"}
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            assert proc.wait(timeout=20) == 0
