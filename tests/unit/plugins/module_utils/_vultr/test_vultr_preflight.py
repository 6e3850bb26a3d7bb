"""Preflight of an inventory of VKE clusters: every problem named by its field, nothing missed.

Table-driven: each case is one inventory mistake a platform engineer makes, and the field the
message must point at.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._vultr.preflight import (
    Catalog,
    check_catalog,
    check_inventory,
)

L40S = "vcg-l40s-16c-180g-48vram"
A16 = "vcg-a16-6c-64g-16vram"


def cluster(name: str = "ewr-1", **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": name,
        "state": "present",
        "region": "ewr",
        "version": "latest",
        "networks": ["10.40.0.0/20"],
        "gpu_pools": [
            {"name": "l40s-1x", "plan": L40S, "gpu": {"type": "L40S", "count": 1}, "node_quantity": 1, "max_nodes": 2},
            {"name": "a16-1x", "plan": A16, "gpu": {"type": "NVIDIA A16", "count": 1}, "node_quantity": 2},
        ],
    }
    base.update(changes)
    return base


def pool_change(index: int, **changes: Any) -> dict[str, Any]:
    c = cluster()
    c["gpu_pools"][index] = {**c["gpu_pools"][index], **changes}
    return c


CATALOG = Catalog(
    regions={"ewr", "ord"},
    plans={
        L40S: {"id": L40S, "gpu_model": "l40s", "gpu_count": 1},
        A16: {"id": A16, "gpu_model": "a16", "gpu_count": 1},
        "vcg-a100-96c-960g-640vram": {"id": "vcg-a100-96c-960g-640vram", "gpu_model": "a100", "gpu_count": 8},
    },
    available={"ewr": {L40S, A16}, "ord": {A16}},
    versions=["v1.35.4+1", "v1.36.2+1"],
    clusters=[
        {"id": "c-foreign", "label": "theirs", "node_pools": [{"tag": "someone-else"}]},
        {"id": "c-ours", "label": "ewr-1", "node_pools": [{"tag": "metalplane.inference/cluster"}]},
    ],
)


# A class asking for two GPUs per node, for pools whose nodes have one (every pool of cluster()).
TWO_GPU_CLASS = {
    "name": "l40s-1x",
    "spec": {"devices": [{"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com", "count": 2}]},
}


def fields(problems: list[Any]) -> list[str]:
    return [p.field for p in problems]


def test_a_sound_inventory_has_no_problem() -> None:
    # replace and class_name are vke_cluster_gpu_pools keys the playbooks pass through
    clusters = [pool_change(0, replace=True, class_name="l40s"), cluster("ewr-2", networks=["10.41.0.0/20"])]
    assert check_inventory(clusters, ["10.8.0.0/16"]) == []
    assert check_catalog(clusters, CATALOG) == []


@pytest.mark.parametrize(
    ("clusters", "reserved", "field", "words"),
    [
        ([], None, "clusters", "at least one"),
        ([cluster("Ewr_1")], None, "Ewr_1.name", "DNS label"),
        ([cluster(), cluster()], None, "ewr-1.name", "unique"),
        ([cluster(state="gone")], None, "ewr-1.state", "present or absent"),
        ([cluster(region="")], None, "ewr-1.region", "required"),
        ([cluster(vpc_only=True)], None, "ewr-1.vpc_only", "vpc_id"),
        # VKE's known 500 on vpc_only creates (Vultr ticket YTM-97SIL), refused without the override.
        ([cluster(vpc_only=True, vpc_id="vpc-1")], None, "ewr-1.vpc_only", "HTTP 500, Vultr ticket YTM-97SIL"),
        ([cluster(vpc_only="True", vpc_id="vpc-1")], None, "ewr-1.vpc_only", "YTM-97SIL"),
        # No GPU fabric between VKE GPU nodes: more GPUs than one node has is multi-node serving.
        ([cluster(classes=[TWO_GPU_CLASS])], None, "ewr-1.modelplane_classes[l40s-1x].spec.devices[0].count", "fabric"),
        ([cluster(smoke={"model": "m", "gpus": 2})], None, "ewr-1.modelplane_smoke.gpus", "no GPU fabric"),
        ([cluster(smoke={"model": "m", "pool": "a16-1x", "gpus": "4"})], None, "ewr-1.modelplane_smoke.gpus", "have 1"),
        ([cluster(smoke={"model": "m", "pool": "h100"})], None, "ewr-1.modelplane_smoke.pool", "not a GPU pool"),
        ([cluster(smoke={"gpus": 1})], None, "ewr-1.modelplane_smoke.model", "required"),
        ([cluster(gpu_pools=[])], None, "ewr-1.gpu_pools", "at least one"),
        ([cluster(size=3)], None, "ewr-1", "unknown key(s) size"),
        ([pool_change(0, plan="")], None, "ewr-1.gpu_pools[l40s-1x].plan", "required"),
        ([pool_change(0, plan="vc2-4c-8gb")], None, "ewr-1.gpu_pools[l40s-1x].plan", "not a GPU plan"),
        ([pool_change(0, name="L40S_Pool")], None, "ewr-1.gpu_pools[L40S_Pool].name", "DNS label"),
        ([pool_change(1, name="l40s-1x")], None, "ewr-1.gpu_pools", "used twice"),
        ([pool_change(1, name="system")], None, "ewr-1.gpu_pools", "the system pool"),
        ([pool_change(0, gpu="L40S")], None, "ewr-1.gpu_pools[l40s-1x].gpu", "mapping"),
        ([pool_change(0, gpu={"count": 1})], None, "ewr-1.gpu_pools[l40s-1x].gpu.type", "required"),
        ([pool_change(0, gpu={"type": "NVIDIA", "count": 1})], None, "ewr-1.gpu_pools[l40s-1x].gpu.type", "no GPU"),
        ([pool_change(0, gpu={"type": "L40S", "count": 0})], None, "ewr-1.gpu_pools[l40s-1x].gpu.count", "between"),
        ([pool_change(0, node_quantity=0)], None, "ewr-1.gpu_pools[l40s-1x].node_quantity", "between 1 and 1000"),
        ([pool_change(0, node_quantity="two")], None, "ewr-1.gpu_pools[l40s-1x].node_quantity", "whole number"),
        ([pool_change(0, node_quantity=3)], None, "ewr-1.gpu_pools[l40s-1x].node_quantity", "above max_nodes (2)"),
        ([pool_change(0, min_nodes=2, node_quantity=1)], None, "ewr-1.gpu_pools[l40s-1x].node_quantity", "below"),
        ([pool_change(1, min_nodes=1)], None, "ewr-1.gpu_pools[a16-1x].min_nodes", "needs max_nodes"),
        ([pool_change(0, replicas=2)], None, "ewr-1.gpu_pools[l40s-1x]", "unknown key(s) replicas"),
        # Node labels and taints, with Kubernetes' rules, before the cluster exists (vke_node_pool's own checks)
        ([pool_change(0, labels={"bad key!": "x"})], None, "ewr-1.gpu_pools[l40s-1x].labels.bad key!", "label key"),
        ([pool_change(0, labels=["a=b"])], None, "ewr-1.gpu_pools[l40s-1x].labels", "mapping"),
        ([pool_change(0, taints=[{"key": "k", "effect": "Never"}])], None, "ewr-1.gpu_pools[l40s-1x].taints", "Never"),
        ([pool_change(0, taints=[{"effect": "NoSchedule"}])], None, "ewr-1.gpu_pools[l40s-1x].taints", "needs a key"),
        ([pool_change(0, taints="gpu=true:NoSchedule")], None, "ewr-1.gpu_pools[l40s-1x].taints", "list"),
        ([cluster("a" * 64)], None, f"{'a' * 64}.name", "(64 characters)"),
        ([cluster(networks=["10.40.0.1/20"])], None, "ewr-1.networks[0]", "did you mean 10.40.0.0/20"),
        ([cluster(networks="10.40.0.0/20")], None, "ewr-1.networks", "list of CIDRs"),
        ([cluster(networks=["10.244.128.0/20"])], None, "ewr-1.networks", "VKE's fixed pod/service subnet"),
        ([cluster(networks=["10.100.0.0/16"])], None, "ewr-1.networks", "10.96.0.0/12"),
        ([cluster()], ["10.40.8.0/24"], "ewr-1.networks", "reserved network 10.40.8.0/24"),
        ([cluster(), cluster("ewr-2", networks=["10.40.0.0/16"])], None, "ewr-2.networks", "cluster 'ewr-1'"),
        ([cluster()], ["300.1.0.0/16"], "reserved_networks[0]", "not a network"),
    ],
)
def test_inventory_problem_names_its_field(clusters: Any, reserved: Any, field: str, words: str) -> None:
    problems = check_inventory(clusters, reserved)
    matching = [p for p in problems if p.field == field]
    assert matching, f"expected a problem on {field}, got {[(p.field, p.msg) for p in problems]}"
    assert any(words in p.msg for p in matching), [p.msg for p in matching]


@pytest.mark.parametrize(
    "changes",
    [
        {"vpc_only": True, "vpc_id": "vpc-1", "allow_vpc_only": True},  # the explicit override
        {"vpc_only": "false"},
        {"classes": [{"name": "l40s-1x", "spec": {"devices": [{"name": "gpu", "driver": "gpu.nvidia.com"}]}}]},
        {"classes": [{**TWO_GPU_CLASS, "name": "other"}]},  # a class no pool of this cluster uses
        {"smoke": {"model": "m", "gpus": 1}},
        {"smoke": {}},
    ],
    ids=["vpc-only-override", "vpc-only-string-false", "class-fits", "unused-class", "smoke-fits", "no-smoke"],
)
def test_limits_accept_what_a_node_serves(changes: dict[str, Any]) -> None:
    assert check_inventory([cluster(**changes)]) == []


def test_every_problem_is_reported_at_once() -> None:
    bad = cluster(region="", vpc_only=True, networks=["10.244.0.0/24"])
    bad["gpu_pools"][0]["node_quantity"] = 0
    bad["gpu_pools"][1]["plan"] = "vc2-1c-1gb"
    assert set(fields(check_inventory([bad]))) >= {
        "ewr-1.region",
        "ewr-1.vpc_only",
        "ewr-1.networks",
        "ewr-1.gpu_pools[l40s-1x].node_quantity",
        "ewr-1.gpu_pools[a16-1x].plan",
    }


def test_two_clusters_on_the_same_vpc_may_declare_its_subnet() -> None:
    one = cluster(vpc_id="vpc-1", networks=["10.40.0.0/20"])
    two = cluster("ewr-2", vpc_id="vpc-1", networks=["10.40.0.0/20"])
    assert check_inventory([one, two]) == []
    three = cluster("ewr-3", vpc_id="vpc-2", networks=["10.40.0.0/20"])
    assert "ewr-3.networks" in fields(check_inventory([one, three]))


def test_an_absent_cluster_needs_no_region_or_pools() -> None:
    assert check_inventory([{"name": "old-1", "state": "absent"}]) == []
    assert check_catalog([{"name": "old-1", "state": "absent", "region": "mars"}], CATALOG) == []


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"region": "mars"}, "ewr-1.region", "unknown region 'mars'; known: ewr, ord"),
        ({"region": "ord"}, "ewr-1.gpu_pools[l40s-1x].plan", "not available in ord"),
        ({"version": "1.20"}, "ewr-1.version", "no VKE version matches '1.20'"),
        ({"name": "theirs"}, "theirs.name", "without this collection's marker"),
    ],
)
def test_catalog_problem_names_its_field(change: dict[str, Any], field: str, words: str) -> None:
    problems = check_catalog([cluster(**change)], CATALOG)
    assert any(p.field == field and words in p.msg for p in problems), [(p.field, p.msg) for p in problems]


@pytest.mark.parametrize(
    ("pool", "field", "words"),
    [
        ({"plan": "vcg-h100-1c-1g-80vram"}, "plan", "not a GPU plan Vultr lists"),
        ({"gpu": {"type": "A16", "count": 1}}, "gpu.type", "a l40s plan"),
        ({"gpu": {"type": "L40S", "count": 2}}, "gpu.count", "which has 1"),
        ({"plan": "vcg-a100-96c-960g-640vram", "gpu": {"type": "A100", "count": 8}}, "plan", "not available in ewr"),
    ],
)
def test_plan_facts_must_match_the_pool(pool: dict[str, Any], field: str, words: str) -> None:
    c = copy.deepcopy(cluster())
    c["gpu_pools"][0].update(pool)
    problems = check_catalog([c], CATALOG)
    assert any(p.field == f"ewr-1.gpu_pools[l40s-1x].{field}" and words in p.msg for p in problems), [
        (p.field, p.msg) for p in problems
    ]


@pytest.mark.parametrize(
    ("running", "refused"),
    [
        ([], True),  # a new pool needs its plan in stock
        ([{"label": "l40s-1x", "plan": L40S}], False),  # already runs on it: a sold-out region is no reason to fail
        ([{"label": "l40s-1x-0a1b2c", "plan": L40S}], False),  # a replacement generation counts as the pool
        ([{"label": "l40s-1x", "plan": A16}], True),  # changing the plan creates a new pool
        ([{"label": "l40s-2x", "plan": L40S}], True),  # another pool on that plan is not this one
    ],
)
def test_availability_is_only_required_for_new_pools(running: list[dict[str, Any]], refused: bool) -> None:
    owned = {"id": "c-ours", "label": "ord-1", "node_pools": [{"tag": "metalplane.inference/cluster"}, *running]}
    catalog = copy.deepcopy(CATALOG)
    catalog.clusters = [owned]
    c = cluster("ord-1", region="ord")  # ord sells no L40S
    del c["gpu_pools"][1]
    problems = check_catalog([c], catalog)
    assert ("ord-1.gpu_pools[l40s-1x].plan" in fields(problems)) is refused, [(p.field, p.msg) for p in problems]
