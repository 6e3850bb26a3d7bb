"""Table-driven tests of the Vultr planners: versions, GPU plans, node pools, clusters."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.cluster import (
    CLUSTER_OWNER_TAG,
    cluster_drift,
    cluster_spec_from_params,
    create_body,
    find_by_label,
    is_vpc_only,
    version_drift,
)
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.node_pool import (
    Taint,
    plan_pool,
    pool_spec_from_params,
    replacement_label,
    select_pools,
)
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.plans import describe_gpu_plan, parse_plan_id
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.versions import matches, resolve_version

VERSIONS = ["v1.34.9+2", "v1.36.2+1", "v1.35.6+1", "v1.36.10+1", "v1.36.2+3"]


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        ("latest", "v1.36.10+1"),
        ("1.36", "v1.36.10+1"),
        ("v1.35", "v1.35.6+1"),
        ("1.36.2", "v1.36.2+3"),
        ("v1.36.2+1", "v1.36.2+1"),
        ("1", "v1.36.10+1"),
    ],
)
def test_resolve_version(requested: str, expected: str) -> None:
    assert resolve_version(requested, VERSIONS) == expected


@pytest.mark.parametrize("requested", ["1.37", "v1.36.2+9", "2"])
def test_resolve_version_without_match_lists_choices(requested: str) -> None:
    with pytest.raises(InputError, match=r"^version: no VKE version matches .*v1\.34\.9\+2"):
        resolve_version(requested, VERSIONS)


@pytest.mark.parametrize("requested", ["one.two", "1.36-rc1", ""])
def test_resolve_version_rejects_garbage(requested: str) -> None:
    with pytest.raises(InputError, match=r"^version:"):
        resolve_version(requested, VERSIONS)


@pytest.mark.parametrize(
    ("requested", "version", "expected"),
    [
        ("1.36", "v1.36.2+1", True),
        ("1.36", "v1.3.6+1", False),
        ("1.3", "v1.36.2+1", False),
        ("latest", "v1.0.0+1", True),
    ],
)
def test_matches(requested: str, version: str, expected: bool) -> None:
    assert matches(requested, version) is expected


@pytest.mark.parametrize(
    ("plan", "expected"),
    [
        ("vcg-l40s-16c-180g-48vram", {"gpu_model": "l40s", "vcpu_count": 16, "ram_gb": 180, "gpu_vram_gb": 48}),
        ("vcg-h100-216c-1914gb-640vram", {"gpu_model": "h100", "vcpu_count": 216, "ram_gb": 1914, "gpu_vram_gb": 640}),
        ("vcg-a16-2c-8g-2vram", {"gpu_model": "a16", "vcpu_count": 2, "ram_gb": 8, "gpu_vram_gb": 2}),
        ("vc2-6c-16gb", None),
        ("vcg-weird", None),
    ],
)
def test_parse_plan_id(plan: str, expected: dict[str, Any] | None) -> None:
    assert parse_plan_id(plan) == expected


@pytest.mark.parametrize(
    ("plan", "count", "per_gpu", "fractional"),
    [
        ({"id": "vcg-a100-96c-960g-640vram", "gpu_vram_gb": 640, "gpu_type": "NVIDIA_A100"}, 8, 80, False),
        ({"id": "vcg-h100-216c-1914gb-640vram"}, 8, 80, False),
        ({"id": "vcg-b200-248c-2826g-1536vram", "gpu_type": "NVIDIA_B200"}, 8, 192, False),
        ({"id": "vcg-l40s-16c-180g-48vram", "gpu_vram_gb": 48}, 1, 48, False),
        ({"id": "vcg-a16-2c-8g-2vram", "gpu_vram_gb": 2, "gpu_type": "NVIDIA_A16"}, 1, 2, True),
        ({"id": "vcg-a40-8c-40g-16vram", "gpu_vram_gb": 16}, 1, 16, True),
        ({"id": "vcg-zz9-8c-40g-16vram"}, None, 16, False),
    ],
)
def test_describe_gpu_plan(plan: dict[str, Any], count: int | None, per_gpu: int, fractional: bool) -> None:
    described = describe_gpu_plan(plan)
    assert described is not None
    assert (described["gpu_count"], described["gpu_vram_gb_per_gpu"], described["fractional"]) == (
        count,
        per_gpu,
        fractional,
    )


def test_describe_gpu_plan_ignores_cpu_plans() -> None:
    assert describe_gpu_plan({"id": "vc2-6c-16gb"}) is None


GPU = "vcg-l40s-16c-180g-48vram"


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"label": "g", "plan": GPU, "node_quantity": 2}, (2, False, 2, 2)),
        ({"label": "g", "plan": GPU, "node_quantity": 2, "max_nodes": 4}, (2, True, 2, 4)),
        ({"label": "g", "plan": GPU, "max_nodes": 4}, (1, True, 1, 4)),
        ({"label": "g", "plan": GPU, "min_nodes": 2, "max_nodes": 4}, (2, True, 2, 4)),
        ({"label": "g", "plan": GPU, "node_quantity": 3, "min_nodes": 1, "max_nodes": 4}, (3, True, 1, 4)),
    ],
)
def test_pool_autoscaler_semantics(params: dict[str, Any], expected: tuple[int, bool, int, int]) -> None:
    spec = pool_spec_from_params(params)
    assert (spec.node_quantity, spec.auto_scaler, spec.min_nodes, spec.max_nodes) == expected


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"label": "g", "plan": GPU, "node_quantity": -1}, "node_quantity"),
        ({"label": "g", "plan": GPU, "node_quantity": 0}, "node_quantity"),
        ({"label": "g", "plan": GPU, "min_nodes": 3, "max_nodes": 2}, "min_nodes"),
        ({"label": "g", "plan": GPU, "node_quantity": 5, "max_nodes": 2}, "node_quantity"),
        ({"label": "g", "plan": GPU, "auto_scaler": True}, "max_nodes"),
        ({"label": "g", "plan": GPU, "auto_scaler": False, "max_nodes": 3}, "auto_scaler"),
        ({"label": "", "plan": GPU}, "label"),
        ({"label": "g", "plan": ""}, "plan"),
        ({"label": "g", "plan": GPU, "taints": [{"key": "a", "effect": "Sometimes"}]}, "taints"),
    ],
)
def test_pool_input_errors_name_the_field(params: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as info:
        pool_spec_from_params(params, prefix="node_pools[0].")
    assert info.value.field == f"node_pools[0].{field}"


def test_gpu_pool_defaults() -> None:
    spec = pool_spec_from_params({"label": "gpu", "plan": GPU})
    assert spec.labels == {"modelplane.ai/pool": "gpu", "modelplane.ai/gpu": "l40s"}
    assert spec.taints == (Taint("nvidia.com/gpu", "true", "NoSchedule"),)
    cpu = pool_spec_from_params({"label": "cpu", "plan": "vc2-4c-8gb"})
    assert cpu.labels == {"modelplane.ai/pool": "cpu"}
    assert cpu.taints == ()
    explicit = pool_spec_from_params({"label": "gpu", "plan": GPU, "taints": [], "labels": {}})
    assert (explicit.labels, explicit.taints) == ({}, ())


def observed_pool(**overrides: Any) -> dict[str, Any]:
    pool = {
        "id": "p1",
        "label": "gpu",
        "plan": GPU,
        "tag": "metalplane.inference",
        "node_quantity": 2,
        "auto_scaler": False,
        "min_nodes": 2,
        "max_nodes": 2,
        "labels": {"modelplane.ai/pool": "gpu", "modelplane.ai/gpu": "l40s"},
        "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
    }
    pool.update(overrides)
    return pool


@pytest.mark.parametrize(
    ("params", "observed", "expected"),
    [
        # no-op
        ({"node_quantity": 2}, {}, {}),
        # resize
        ({"node_quantity": 3}, {}, {"patch": {"node_quantity": 3}}),
        # autoscaler on
        ({"node_quantity": 2, "max_nodes": 4}, {}, {"patch": {"auto_scaler": True, "min_nodes": 2, "max_nodes": 4}}),
        # autoscaler on: a count inside the bounds belongs to the autoscaler
        ({"node_quantity": 2, "max_nodes": 4}, {"auto_scaler": True, "node_quantity": 4, "max_nodes": 4}, {}),
        # autoscaler on: a count outside the bounds is clamped
        (
            {"node_quantity": 2, "max_nodes": 4},
            {"auto_scaler": True, "node_quantity": 6, "max_nodes": 4},
            {"patch": {"node_quantity": 4}},
        ),
        # autoscaler off
        ({"node_quantity": 2}, {"auto_scaler": True, "max_nodes": 4}, {"patch": {"auto_scaler": False}}),
        # labels and taints exact
        (
            {"node_quantity": 2},
            {
                "labels": {"modelplane.ai/pool": "old", "x": "1"},
                "taints": [{"key": "t", "value": "", "effect": "NoExecute"}],
            },
            {
                "add_labels": {"modelplane.ai/pool": "gpu", "modelplane.ai/gpu": "l40s"},
                "remove_labels": ["modelplane.ai/pool", "x"],
                "add_taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
                "remove_taints": [{"key": "t", "value": "", "effect": "NoExecute"}],
            },
        ),
        # labels null from the API
        ({"node_quantity": 2, "labels": {}}, {"labels": None}, {}),
        # immutable plan
        (
            {"node_quantity": 2},
            {"plan": "vcg-a16-6c-64g-16vram"},
            {"immutable": {"plan": {"observed": "vcg-a16-6c-64g-16vram", "desired": GPU}}},
        ),
        # tag adopted
        ({"node_quantity": 2}, {"tag": "other"}, {"patch": {"tag": "metalplane.inference"}}),
        # vpc_only is create-only: a difference is drift (reported), never a patch
        (
            {"node_quantity": 2, "vpc_only": True},
            {"vpc_only": False},
            {"drift": {"vpc_only": {"observed": False, "desired": True}}},
        ),
        (
            {"node_quantity": 2, "vpc_only": False},
            {"vpc_only": True},
            {"drift": {"vpc_only": {"observed": True, "desired": False}}},
        ),
        # not compared when not asked for, nor when the API does not report it
        ({"node_quantity": 2}, {"vpc_only": True}, {}),
        ({"node_quantity": 2, "vpc_only": True}, {}, {}),
        ({"node_quantity": 2, "vpc_only": True}, {"vpc_only": True}, {}),
    ],
)
def test_plan_pool(params: dict[str, Any], observed: dict[str, Any], expected: dict[str, Any]) -> None:
    spec = pool_spec_from_params({"label": "gpu", "plan": GPU, **params})
    summary = plan_pool(spec, observed_pool(**observed)).summary()
    empty = {
        "create": False,
        "patch": {},
        "add_labels": {},
        "remove_labels": [],
        "add_taints": [],
        "remove_taints": [],
        "immutable": {},
        "drift": {},
    }
    assert summary == {**empty, **expected}
    assert plan_pool(spec, observed_pool(**observed)).changed is bool(set(expected) - {"drift"})


def test_plan_pool_absent_creates() -> None:
    spec = pool_spec_from_params({"label": "gpu", "plan": GPU})
    plan = plan_pool(spec, None)
    assert plan.create
    assert plan.changed
    body = spec.create_body()
    assert body["tag"] == "metalplane.inference"
    assert body["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]


@pytest.mark.parametrize(("vpc_only", "sent"), [(None, False), (False, False), (True, True)])
def test_pool_create_body_vpc_only(vpc_only: bool | None, sent: bool) -> None:
    spec = pool_spec_from_params({"label": "gpu", "plan": GPU, "vpc_only": vpc_only})
    assert spec.vpc_only is vpc_only
    assert ("vpc_only" in spec.create_body()) is sent
    if sent:
        assert spec.create_body()["vpc_only"] is True


def test_select_pools_generations_and_foreign() -> None:
    spec = pool_spec_from_params({"label": "gpu", "plan": GPU})
    new_label = replacement_label("gpu", GPU)
    pools = [
        observed_pool(id="old", plan="vcg-a16-6c-64g-16vram"),
        observed_pool(id="new", label=new_label),
        observed_pool(id="other", label="gpu-other"),
        observed_pool(id="x", label="gpux", tag="someone"),
    ]
    current, stale, foreign = select_pools(spec, pools)
    assert current is not None
    assert current["id"] == "new"
    assert [p["id"] for p in stale] == ["old"]
    assert foreign is None
    _unused, _unused2, foreign = select_pools(spec, [observed_pool(tag="someone")])
    assert foreign is not None


CLUSTER_PARAMS = {"label": "inf", "region": "ewr", "version": "1.36", "ha_controlplanes": True}


SYSTEM_POOL: dict[str, Any] = {
    "label": "system",
    "plan": "vc2-6c-16gb",
    "tag": CLUSTER_OWNER_TAG,
    "node_quantity": 1,
    "auto_scaler": True,
    "min_nodes": 1,
    "max_nodes": 2,
    "labels": {"modelplane.ai/pool": "system"},
    "taints": [],
}


def cluster(**overrides: Any) -> dict[str, Any]:
    obj = {
        "id": "c1",
        "label": "inf",
        "region": "ewr",
        "version": "v1.36.2+1",
        "ha_controlplanes": True,
        "firewall_group_id": "",
        "vpcs": [{"id": "vpc-1"}],
        "node_pools": [dict(SYSTEM_POOL)],
    }
    obj.update(overrides)
    return obj


def test_cluster_create_body_has_marker_and_vpc_only() -> None:
    spec = cluster_spec_from_params({**CLUSTER_PARAMS, "vpc_id": "vpc-1", "vpc_only": True})
    body = create_body(spec, "v1.36.2+1")
    (pool,) = body["node_pools"]
    assert pool["tag"] == CLUSTER_OWNER_TAG
    assert pool["vpc_only"] is True
    assert (pool["auto_scaler"], pool["min_nodes"], pool["max_nodes"]) == (True, 1, 2)
    assert body["vpc_id"] == "vpc-1"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"vpc_only": True}, "vpc_id"),
        ({"label": ""}, "label"),
        ({"version": "x.y"}, "version"),
        ({"system_pool": {"min_nodes": 3, "max_nodes": 2}}, "system_pool.min_nodes"),
    ],
)
def test_cluster_input_errors(params: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as info:
        cluster_spec_from_params({**CLUSTER_PARAMS, **params})
    assert info.value.field == field


@pytest.mark.parametrize(
    ("params", "observed", "fields"),
    [
        ({}, {}, set()),
        ({"region": "ams"}, {}, {"region"}),
        ({"ha_controlplanes": False}, {}, {"ha_controlplanes"}),
        ({"enable_firewall": True}, {}, {"enable_firewall"}),
        ({"vpc_id": "vpc-2"}, {}, {"vpc_id"}),
        ({"system_pool": {"plan": "vc2-8c-32gb"}}, {}, {"system_pool.plan"}),
        ({"system_pool": {"max_nodes": 3}}, {}, {"system_pool.max_nodes"}),
        ({"system_pool": {"taints": [{"key": "a", "value": "b", "effect": "NoSchedule"}]}}, {}, {"system_pool.taints"}),
        ({}, {"node_pools": []}, {"system_pool"}),
        # vpc_only (of the system pool) is create-only: reported under the cluster option's name
        ({"vpc_id": "vpc-1", "vpc_only": True}, {"node_pools": [{**SYSTEM_POOL, "vpc_only": False}]}, {"vpc_only"}),
        ({}, {"node_pools": [{**SYSTEM_POOL, "vpc_only": True}]}, {"vpc_only"}),
        ({}, {"node_pools": [{**SYSTEM_POOL, "vpc_only": False}]}, set()),
    ],
)
def test_cluster_drift(params: dict[str, Any], observed: dict[str, Any], fields: set[str]) -> None:
    spec = cluster_spec_from_params({**CLUSTER_PARAMS, **params})
    assert {d["field"] for d in cluster_drift(spec, cluster(**observed))} == fields


@pytest.mark.parametrize(
    ("version", "observed", "drift"),
    [
        ("1.36", "v1.36.2+1", False),
        ("1.35", "v1.36.2+1", True),
        ("v1.36.2+1", "v1.36.2+1", False),
        ("1.36.2+2", "v1.36.2+1", True),
    ],
)
def test_version_drift(version: str, observed: str, drift: bool) -> None:
    spec = cluster_spec_from_params({**CLUSTER_PARAMS, "version": version})
    assert version_drift(spec, observed) is drift


@pytest.mark.parametrize(
    ("pools", "expected"),
    [
        ([{**SYSTEM_POOL, "vpc_only": True}], True),
        ([{**SYSTEM_POOL, "vpc_only": False}, {"label": "g", "tag": "metalplane.inference", "vpc_only": True}], False),
        ([SYSTEM_POOL], None),  # the API did not report it
        ([{"label": "default", "tag": "", "vpc_only": True}], None),  # no marker pool
    ],
)
def test_is_vpc_only_reads_the_marker_pool(pools: list[dict[str, Any]], expected: bool | None) -> None:
    assert is_vpc_only(cluster(node_pools=pools)) is expected


def test_find_by_label_uses_the_marker() -> None:
    ours = cluster()
    foreign = cluster(id="c2", node_pools=[{"label": "default", "tag": ""}])
    other = cluster(id="c3", label="else")
    assert find_by_label([ours, foreign, other], "inf") == ([ours], [foreign])
