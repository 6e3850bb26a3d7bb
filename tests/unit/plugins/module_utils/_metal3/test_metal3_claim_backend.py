"""host_claim's metal3 backend: the BareMetalHost's consumerRef is the claim, taken and released with nothing else.

The same in-memory API server and scripted Metal3 as metal3_host's tests: hosts are registered and made available by
a metal3_host run of a warm-up cluster (as a platform team's registration would leave them), then claimed here.
"""

from __future__ import annotations

from typing import Any

import pytest
from metal3_fakes import MemoryObjects, ScriptedMetal3
from test_metal3_run import Module, params, run

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    ConflictError,
    InputError,
    NotFoundError,
)
from ansible_collections.metalplane.inference.plugins.module_utils._metal3 import bmh as b
from ansible_collections.metalplane.inference.plugins.module_utils._metal3.run import run_metal3_claim

# What host_claim passes: the pool options and the claim's own (no image, network or key).
CLAIM_ONLY = ("image", "network", "ssh_authorized_key", "boot_mode", "automated_cleaning_mode", "wait")


def claim(store: MemoryObjects, *, check_mode: bool = False, **overrides: Any) -> dict[str, Any]:
    base = {k: v for k, v in params(backend="metal3", force=False, reinstall=False).items() if k not in CLAIM_ONLY}
    module = Module({**base, **overrides}, check_mode=check_mode)
    return run_metal3_claim(module, store_factory=lambda _p: store)


@pytest.fixture
def available() -> MemoryObjects:
    """Both pool hosts registered and available, none claimed."""
    store = MemoryObjects()
    metal3 = ScriptedMetal3(store)
    run(store, metal3, cluster="warmup")
    run(store, metal3, cluster="warmup", state="absent")
    return store


def bmh(store: MemoryObjects, name: str) -> dict[str, Any]:
    found = store.get(b.API_VERSION, b.KIND, "metal3", name)
    assert found is not None
    return found


def test_claims_the_first_available_host_by_name_and_returns_it_again(available: MemoryObjects) -> None:
    first = claim(available)
    assert first["changed"] is True
    host = first["host"]
    assert (host["name"], host["bare_metal_host"], host["lease"], host["generation"]) == (
        "r730-a",
        "metal3/r730-a",
        None,
        1,
    )
    assert host["claimer"] == "op@controller"
    assert host["since"]
    assert bmh(available, "r730-a")["spec"]["consumerRef"]["name"] == "dc1"
    assert "image" not in bmh(available, "r730-a")["spec"]  # a claim, not a provisioning
    again = claim(available)
    assert (again["changed"], again["host"]["name"]) == (False, "r730-a")


def test_check_mode_names_the_host_and_writes_nothing(available: MemoryObjects) -> None:
    writes = len(available.writes)
    result = claim(available, check_mode=True)
    assert (result["changed"], result["host"]["name"]) == (True, "r730-a")
    assert len(available.writes) == writes
    assert "consumerRef" not in bmh(available, "r730-a")["spec"]


def with_facts(b_facts: dict[str, Any], a_facts: dict[str, Any]) -> list[dict[str, Any]]:
    hosts = params()["hosts"]  # r730-b, r730-a
    return [{**hosts[0], "facts": b_facts}, {**hosts[1], "facts": a_facts}]


V100 = {"gpu_model": "Tesla V100-PCIE-32GB", "gpu_count": 2}
T4 = {"gpu_model": "Tesla T4", "gpu_count": 1}


@pytest.mark.parametrize(
    ("overrides", "claimed", "skipped"),
    [
        ({}, "r730-a", {}),
        ({"host": "r730-b"}, "r730-b", {}),
        ({"requirements": {"gpu_model": "V100"}, "hosts": with_facts(V100, T4)}, "r730-b", {"r730-a": "mismatched"}),
        ({"requirements": {"gpu_count": 2}, "hosts": with_facts(V100, V100)}, "r730-a", {}),
    ],
)
def test_which_host_is_claimed(
    available: MemoryObjects, overrides: dict[str, Any], claimed: str, skipped: dict[str, str]
) -> None:
    result = claim(available, **overrides)
    assert result["host"]["name"] == claimed
    assert {s["name"]: s["status"] for s in result["skipped_hosts"]} == skipped


def test_a_host_another_consumer_holds_is_skipped_as_claimed(available: MemoryObjects) -> None:
    claim(available, cluster="other")
    result = claim(available)
    assert result["host"]["name"] == "r730-b"
    assert result["skipped_hosts"] == [
        {"name": "r730-a", "status": "claimed", "reason": "held by MetalCluster metal3/other"}
    ]
    with pytest.raises(NotFoundError, match=r"r730-a: held by.*r730-b: held by"):
        claim(available, cluster="third")


def test_release_clears_only_the_claim_and_is_idempotent(available: MemoryObjects) -> None:
    claim(available)
    released = claim(available, state="absent")
    assert released["changed"] is True
    assert released["released"] == [{"name": "r730-a", "cluster": "dc1", "bare_metal_host": "metal3/r730-a"}]
    spec = bmh(available, "r730-a")["spec"]
    assert "consumerRef" not in spec
    assert spec["bmc"]  # the registration stays
    assert claim(available, state="absent") == {"changed": False, "released": [], "bmc_hint": {"status": "disabled"}}


def test_another_clusters_host_needs_force(available: MemoryObjects) -> None:
    claim(available, cluster="other")
    with pytest.raises(InputError, match="force"):
        claim(available, state="absent", host="r730-a")
    assert bmh(available, "r730-a")["spec"]["consumerRef"]["name"] == "other"
    released = claim(available, state="absent", host="r730-a", force=True)
    assert released["released"][0]["cluster"] == "other"
    assert "consumerRef" not in bmh(available, "r730-a")["spec"]


def test_a_host_another_metal3_consumer_holds_is_never_released(available: MemoryObjects) -> None:
    key = ("BareMetalHost", "metal3", "r730-a")
    available.objects[key]["spec"]["consumerRef"] = {"kind": "Metal3Machine", "name": "capm3-m", "namespace": "metal3"}
    with pytest.raises(ConflictError, match="Metal3Machine"):
        claim(available, state="absent", host="r730-a", force=True)
    assert bmh(available, "r730-a")["spec"]["consumerRef"]["kind"] == "Metal3Machine"


def test_a_provisioned_host_is_not_released_under_a_running_node() -> None:
    store = MemoryObjects()
    run(store, ScriptedMetal3(store))  # dc1 holds r730-a, provisioned
    with pytest.raises(ConflictError, match=r"still provisioned.*metal3_host state=absent"):
        claim(store, state="absent")
    assert bmh(store, "r730-a")["spec"]["consumerRef"]["name"] == "dc1"


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"reinstall": True}, "reinstall"),
        ({"cluster": "Not_A_Name"}, "cluster"),
        ({"namespace": "Bad Namespace"}, "namespace"),
    ],
)
def test_bad_input_fails_before_any_call(overrides: dict[str, Any], field: str) -> None:
    store = MemoryObjects()
    with pytest.raises(InputError) as caught:
        claim(store, **overrides)
    assert caught.value.field == field
    assert store.writes == []


@pytest.mark.parametrize(
    ("ram_mebibytes", "min_memory_gib", "claimed"),
    [
        (262144, 256, "r730-a"),  # 256 GiB inspected: fits
        (131072, 256, "r730-b"),  # 128 GiB inspected: r730-a is passed over, r730-b was not inspected
        (None, 256, "r730-a"),  # not inspected: only the pool's facts decide
        (131072, None, "r730-a"),  # no memory requirement
    ],
)
def test_the_memory_metal3_inspected_is_a_requirement(
    available: MemoryObjects, ram_mebibytes: int | None, min_memory_gib: int | None, claimed: str
) -> None:
    key = ("BareMetalHost", "metal3", "r730-a")
    if ram_mebibytes is not None:
        available.objects[key]["status"]["hardwareDetails"] = {"ramMebibytes": ram_mebibytes}
    requirements = {"min_memory_gib": min_memory_gib} if min_memory_gib else None
    result = claim(available, requirements=requirements)
    assert result["host"]["name"] == claimed
    if claimed == "r730-b":
        assert result["skipped_hosts"] == [
            {
                "name": "r730-a",
                "status": "mismatched",
                "reason": "does not meet the requirements: min_memory_gib: Metal3's inspection found 128 GiB, the "
                "cluster needs at least 256",
            }
        ]
