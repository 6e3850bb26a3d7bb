"""The Modelplane emulator serves the XRD-derived CRDs when the reference exists, and both sources work.

Why: ``lab.modelplane.crds`` generates the control plane's CRDs from Modelplane's XRDs (as Crossplane
does) and falls back to a hand-written schema without ``../shared``. This checks, through the
emulator's API, that the reference is what is served, that it enforces what only the XRDs say, and
that the simulated controller's status writes survive either schema (nothing pruned), so the
modules' readiness checks see the same thing with or without the reference tree.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.inference_cluster import (
    inference_cluster,
)
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.kubeconfig_secret import (
    kubeconfig_secret,
)
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.readiness import unmet
from lab.common.reference import SKIP_PREFIX, reference_path, require
from lab.kube.api import ApiError
from lab.modelplane.crds import (
    CRDS,
    FALLBACK,
    KINDS,
    PLURALS,
    SOURCE_ANNOTATION,
    SOURCES,
    XRD_DIR,
    fallback_crds,
)
from lab.modelplane.server import ModelplaneEmulator, model_replica

MP = "modelplane.ai/v1alpha1"
CRD_API = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
EXAMPLES = reference_path("modelplane", "examples")
# A kubeconfig whose server refuses connections: the controller's slice publishing fails quietly.
UNREACHABLE_KUBECONFIG = yaml.safe_dump(
    {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "w", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "w", "user": {"token": "t"}}],
        "contexts": [{"name": "w", "context": {"cluster": "w", "user": "w"}}],
        "current-context": "w",
    }
)
CLASS = {
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


def require_reference_crds() -> None:
    for plural in PLURALS.values():
        require(XRD_DIR / f"{plural}.yaml", f"Modelplane XRD {plural}")


@pytest.fixture(scope="module")
def reference_mp() -> Iterator[ModelplaneEmulator]:
    require_reference_crds()
    with ModelplaneEmulator(delay_scale=0.0, backend_ready_after=0.0) as emulator:
        yield emulator
    assert emulator.errors == []


@pytest.fixture(scope="module")
def fallback_mp() -> Iterator[ModelplaneEmulator]:
    with ModelplaneEmulator(delay_scale=0.0, backend_ready_after=0.0, crds=fallback_crds()) as emulator:
        yield emulator
    assert emulator.errors == []


def emulator_for(source: str, request: pytest.FixtureRequest) -> ModelplaneEmulator:
    return request.getfixturevalue("reference_mp" if source == "reference" else "fallback_mp")


def test_the_default_emulator_serves_the_xrd_derived_crds(reference_mp: ModelplaneEmulator) -> None:
    assert reference_mp.crds is CRDS
    for crd in CRDS:
        kind = crd["spec"]["names"]["kind"]
        served = reference_mp.api.call("GET", f"{CRD_API}/{crd['metadata']['name']}")
        assert served["metadata"]["annotations"][SOURCE_ANNOTATION] == SOURCES[kind] != FALLBACK
        assert served["spec"]["versions"][0]["schema"] == crd["spec"]["versions"][0]["schema"], kind
        assert (
            "crossplane"
            in served["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        )


def test_the_fallback_emulator_serves_the_fallback(fallback_mp: ModelplaneEmulator) -> None:
    for plural in PLURALS.values():
        served = fallback_mp.api.call("GET", f"{CRD_API}/{plural}.modelplane.ai")
        assert served["metadata"]["annotations"][SOURCE_ANNOTATION] == FALLBACK


def cluster_with(name: str, pools: list[dict[str, Any]] | None = None, **cluster: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"cluster": cluster, **({"nodePools": pools} if pools else {})}
    return {"apiVersion": MP, "kind": "InferenceCluster", "metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize(
    ("obj", "needle"),
    [
        # Provider blocks and capacityBlock are open in the fallback; the XRDs bound them.
        (cluster_with("long-region", source="Vultr", vultr={"region": "r" * 33}), "region"),
        (
            cluster_with(
                "bad-reservation",
                pools=[{"name": "p", "className": "c", "capacityBlock": {"capacityReservationId": "nope"}}],
                source="EKS",
                eks={"region": "us-west-2"},
            ),
            "capacityReservationId",
        ),
    ],
)
def test_xrd_only_constraints_are_enforced_by_the_reference_crds(
    reference_mp: ModelplaneEmulator, fallback_mp: ModelplaneEmulator, obj: dict[str, Any], needle: str
) -> None:
    url = f"/apis/{MP}/inferenceclusters"
    with pytest.raises(ApiError) as caught:
        reference_mp.api.call("POST", url, obj, {"dryRun": "All"})
    assert caught.value.code == 422
    assert needle in caught.value.message
    # The permissive fallback accepts it: this is a constraint the lab has only from the XRDs.
    assert fallback_mp.api.call("POST", url, obj, {"dryRun": "All"})["metadata"]["name"] == obj["metadata"]["name"]


@pytest.mark.parametrize("source", ["reference", "fallback"])
def test_a_replica_missing_members_is_rejected_and_the_helper_one_accepted(
    source: str, request: pytest.FixtureRequest
) -> None:
    mp = emulator_for(source, request)
    url = f"/apis/{MP}/namespaces/default/modelreplicas"
    bare = {**model_replica("r", "c"), "spec": {"clusterName": "c", "engines": [{"name": "vllm"}]}}
    with pytest.raises(ApiError) as caught:
        mp.api.call("POST", url, bare, {"dryRun": "All"})
    assert caught.value.code == 422
    assert "members" in caught.value.message
    created = mp.api.call("POST", url, model_replica("r", "c"), {"dryRun": "All", "fieldValidation": "Strict"})
    assert created["spec"]["engines"][0]["members"][0]["nodePoolName"] == "gpu"


def wait_for(check: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.05)
    return result


@pytest.mark.parametrize("source", ["reference", "fallback"])
def test_the_controllers_status_survives_the_schema(source: str, request: pytest.FixtureRequest) -> None:
    """Every status field the controller writes (and the modules read) is declared, so none is pruned."""
    mp = emulator_for(source, request)
    name = f"status-{source}"
    mp.api.create({**CLASS, "metadata": {"name": f"{name}-class"}})
    mp.api.create(kubeconfig_secret(f"{name}-kubeconfig", UNREACHABLE_KUBECONFIG, cluster=name))
    mp.api.create(
        inference_cluster(
            name, secret_name=f"{name}-kubeconfig", node_pools=[{"name": "l40s", "className": f"{name}-class"}]
        )
    )
    ready = wait_for(lambda: (obj := mp.api.get(MP, "InferenceCluster", name)) and not unmet(obj) and obj)
    status = ready["status"]
    assert status["gateway"] == {"address": mp.gateway_address(name)}
    assert status["namespace"] == "modelplane-system"
    assert status["providerConfigRef"]["name"].startswith(f"{name}-cluster-kubeconfig-")
    assert status["cache"] == {"storageClassName": "modelplane-rwx-longhorn"}
    assert status["gpuPools"][0]["devices"][0]["capacity"] == {"memory": {"value": "46068Mi"}}
    assert {c["type"] for c in status["conditions"]} == {"Synced", "Ready", "ClusterReady", "BackendReady"}
    assert all(c["reason"] and c["lastTransitionTime"] for c in status["conditions"])
    mp.api.delete(MP, "InferenceCluster", name)
    wait_for(lambda: mp.api.get(MP, "InferenceCluster", name) is None)
    mp.api.delete(MP, "InferenceClass", f"{name}-class")


def contains(stored: Any, sent: Any) -> bool:
    """Whether everything ``sent`` says is in ``stored`` (which may add schema defaults at any depth)."""
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(k in stored and contains(stored[k], v) for k, v in sent.items())
    if isinstance(sent, list):
        return isinstance(stored, list) and len(stored) == len(sent) and all(map(contains, stored, sent))
    return stored == sent


def example_objects() -> list[Any]:
    if not EXAMPLES.is_dir():
        return [pytest.param("", {}, marks=pytest.mark.skip(reason=f"{SKIP_PREFIX} {EXAMPLES}"))]
    found = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("apiVersion") == MP and doc.get("kind") in KINDS:
                found.append(pytest.param(str(path.relative_to(EXAMPLES)), doc, id=f"{path.stem}-{doc['kind']}"))
    return found


@pytest.mark.parametrize(("path", "obj"), example_objects())
def test_the_fallback_accepts_every_example(fallback_mp: ModelplaneEmulator, path: str, obj: dict[str, Any]) -> None:
    """The fallback is never stricter than Modelplane: its own examples pass (the reference CRDs are
    checked the same way in test_modelplane_emulator.py)."""
    rtype = fallback_mp.api.server_api.type_for(obj["apiVersion"], obj["kind"])
    namespace = obj["metadata"].get("namespace", "default") if rtype.namespaced else None
    if namespace:
        fallback_mp.ensure_namespace(namespace)
    url = fallback_mp.api.server_api.path_for(rtype, namespace)
    created = fallback_mp.api.call("POST", url, obj, {"dryRun": "All", "fieldValidation": "Strict"})
    assert contains(created["spec"], obj["spec"]), path
