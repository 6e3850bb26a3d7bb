"""The Vultr VKE emulator (``lab.vultr.server``): behaviour, faults, CLI, and conformance to the overlay spec.

Plain ``requests`` is the client on purpose, so these tests do not depend on the collection's Vultr
client. Every test that uses the ``emu`` fixture ends with ``assert_no_violations``: each request and
response was validated against ``shared/reference/vultr/vke-subset-overlay.json`` with openapi-core.
"""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from lab.common.emulator import free_port, lab_command, lab_environment
from lab.vultr.contract import VultrContract, assert_no_violations, contract_or_skip
from lab.vultr.server import DEFAULT_API_KEY, VultrEmulator
from lab.vultr.state import DEFAULT_GPU_PLANS, Delays

AUTH = {"Authorization": f"Bearer {DEFAULT_API_KEY}"}
SYSTEM_POOL = {"label": "system", "plan": "vc2-6c-16gb", "node_quantity": 2}
GPU_PLAN = "vcg-l40s-16c-180g-48vram"
TIMEOUT = 10


@pytest.fixture(scope="module")
def contract() -> VultrContract:
    return contract_or_skip()


@pytest.fixture
def emu(contract: VultrContract) -> Iterator[VultrEmulator]:
    with VultrEmulator(delay_scale=0.0, contract=contract) as emulator:
        yield emulator
        assert_no_violations(emulator)


class Api:
    """A tiny requests wrapper: JSON bodies, the lab key, the emulator's base URL."""

    def __init__(self, emu: VultrEmulator) -> None:
        self.base = emu.base_url
        self.session = requests.Session()
        self.session.headers.update(AUTH)

    def __call__(self, method: str, path: str, body: Any = None, **kwargs: Any) -> requests.Response:
        if body is not None:
            kwargs["json"] = body
        return self.session.request(method, self.base + path, timeout=TIMEOUT, **kwargs)


@pytest.fixture
def api(emu: VultrEmulator) -> Api:
    return Api(emu)


def create_cluster(api: Api, **extra: Any) -> dict[str, Any]:
    body = {"label": "infer", "region": "ewr", "version": "v1.35.6+1", "node_pools": [SYSTEM_POOL]} | extra
    response = api("POST", "/kubernetes/clusters", body)
    assert response.status_code == 201, response.text
    return response.json()["vke_cluster"]


def create_pool(api: Api, cluster_id: str, **extra: Any) -> dict[str, Any]:
    body = {"label": "gpu", "plan": GPU_PLAN, "node_quantity": 1} | extra
    response = api("POST", f"/kubernetes/clusters/{cluster_id}/node-pools", body)
    assert response.status_code == 201, response.text
    return response.json()["node_pool"]


# --------------------------------------------------------------------------------------------------
# Every endpoint, in one stateful walk, against the contract


def test_every_endpoint_conforms_to_the_overlay(emu: VultrEmulator, api: Api, contract: VultrContract) -> None:
    cluster = create_cluster(api, ha_controlplanes=True, enable_firewall=True, vpc_id="vpc-1")
    c = f"/kubernetes/clusters/{cluster['id']}"
    pool = create_pool(api, cluster["id"], labels={"modelplane.ai/pool": "gpu"}, auto_scaler=True, max_nodes=3)
    p = f"{c}/node-pools/{pool['id']}"
    node_id = pool["nodes"][0]["id"]
    label_id = api("GET", f"{p}/labels").json()["labels"][0]["id"]
    taint = api("POST", f"{p}/taints", {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"})
    steps: list[tuple[str, str, Any, int]] = [
        ("GET", "/kubernetes/versions", None, 200),
        ("GET", "/plans?type=all&per_page=500", None, 200),
        ("GET", "/regions", None, 200),
        ("GET", "/regions/ewr/availability?type=vcg", None, 200),
        ("GET", "/kubernetes/clusters?per_page=10", None, 200),
        ("GET", c, None, 200),
        ("PUT", c, {"label": "renamed"}, 204),
        ("GET", f"{c}/resources", None, 200),
        ("GET", f"{c}/config", None, 200),
        ("GET", f"{c}/available-upgrades", None, 200),
        ("GET", f"{c}/node-pools", None, 200),
        ("GET", p, None, 200),
        ("PATCH", p, {"node_quantity": 2, "tag": "owned"}, 202),
        ("GET", f"{p}/nodes", None, 200),
        ("POST", f"{p}/nodes/{node_id}/recycle", None, 204),
        ("DELETE", f"{p}/nodes/{node_id}", None, 204),
        ("GET", f"{p}/labels", None, 200),
        ("POST", f"{p}/labels", {"key": "modelplane.ai/gpu", "value": "l40s"}, 201),
        ("GET", f"{p}/labels/{label_id}", None, 200),
        ("DELETE", f"{p}/labels/{label_id}", None, 204),
        ("GET", f"{p}/taints", None, 200),
        ("GET", f"{p}/taints/{taint.json()['taint']['id']}", None, 200),
        ("DELETE", f"{p}/taints/{taint.json()['taint']['id']}", None, 204),
        ("POST", f"{c}/upgrades", {"upgrade_version": "v1.36.2+1"}, 202),
        ("DELETE", p, None, 204),
        ("DELETE", f"{c}/delete-with-linked-resources", None, 204),
    ]
    for method, path, body, status in steps:
        response = api(method, path, body)
        assert response.status_code == status, (method, path, response.text)
    second = create_cluster(api)
    assert api("DELETE", f"/kubernetes/clusters/{second['id']}").status_code == 204
    assert_no_violations(emu)
    # Every operation of the overlay was exercised, except the one the emulator leaves out on purpose.
    seen = set()
    for entry in emu.requests:
        found = contract.operation(entry["method"], entry["path"].removeprefix("/v2"))
        assert found is not None, entry
        seen.add((entry["method"], found[0]))
    declared = {
        (method.upper(), template)
        for template, item in contract.spec["paths"].items()
        for method in item
        if method in ("get", "put", "post", "delete", "patch")
    }
    assert declared - seen == {("GET", "/plans-metal")}


def test_contract_check_catches_a_wrong_response(contract: VultrContract) -> None:
    """The check is not a rubber stamp: a response of the wrong type and an unknown path are flagged."""
    with VultrEmulator(contract=contract) as emu:
        emu.state.versions = (1, 2)  # type: ignore[assignment]  # integers where the spec says strings
        assert requests.get(emu.base_url + "/kubernetes/versions", timeout=TIMEOUT).status_code == 200
        assert any("is not of type 'string'" in v for v in emu.contract_violations), emu.contract_violations
        with pytest.raises(AssertionError, match="contract violation"):
            assert_no_violations(emu)
        emu.contract_violations.clear()
        with emu.expect_violations("path outside the spec"):
            response = requests.get(emu.base_url + "/kubernetes/nowhere", headers=AUTH, timeout=TIMEOUT)
        assert response.status_code == 404
        assert any("PathNotFound" in v for _unused, v in emu.contract_exempted)
        with pytest.raises(AssertionError, match="none was recorded"), emu.expect_violations("a valid request"):
            requests.get(emu.base_url + "/regions", timeout=TIMEOUT)
        assert_no_violations(emu)


# --------------------------------------------------------------------------------------------------
# Status transitions


def test_instant_transitions(emu: VultrEmulator, api: Api) -> None:
    cluster = create_cluster(api)
    assert cluster["status"] == "pending"
    assert cluster["ip"] == "0.0.0.0"
    assert {n["status"] for p in cluster["node_pools"] for n in p["nodes"]} == {"pending"}
    now = api("GET", f"/kubernetes/clusters/{cluster['id']}").json()["vke_cluster"]
    assert now["status"] == "active"
    assert now["ip"] != "0.0.0.0"
    assert [p["status"] for p in now["node_pools"]] == ["active"]
    assert {n["status"] for n in now["node_pools"][0]["nodes"]} == {"active"}


def _wait(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def test_delayed_transitions_and_lifecycle_hooks(contract: VultrContract) -> None:
    active: list[str] = []
    deleted: list[str] = []
    delays = Delays(cluster=0.4, node=0.2, upgrade=0.3, delete=0.3)
    with VultrEmulator(
        delay_scale=1.0,
        contract=contract,
        delays=delays,
        on_cluster_active=lambda c: active.append(c["id"]),
        on_cluster_deleted=lambda c: deleted.append(c["id"]),
    ) as emu:
        api = Api(emu)
        cluster = create_cluster(api)
        path = f"/kubernetes/clusters/{cluster['id']}"
        assert api("GET", path).json()["vke_cluster"]["status"] == "pending"
        # The hook fires without polling (the ticker advances time).
        _wait(lambda: active == [cluster["id"]])
        assert api("GET", path).json()["vke_cluster"]["status"] == "active"
        # Resizing puts the pool back to pending until its new node is active.
        pool = cluster["node_pools"][0]
        resized = api("PATCH", f"{path}/node-pools/{pool['id']}", {"node_quantity": 3}).json()["node_pool"]
        assert resized["status"] == "pending"
        assert len(resized["nodes"]) == 3
        _wait(lambda: api("GET", f"{path}/node-pools/{pool['id']}").json()["node_pool"]["status"] == "active")
        # An upgrade moves the version after its delay.
        assert api("POST", f"{path}/upgrades", {"upgrade_version": "v1.36.2+1"}).status_code == 202
        assert api("GET", path).json()["vke_cluster"]["version"] == "v1.35.6+1"
        _wait(lambda: api("GET", path).json()["vke_cluster"]["version"] == "v1.36.2+1")
        # Deletion: visible for the delete delay, then 404 and the hook.
        assert api("DELETE", path).status_code == 204
        assert api("GET", path).status_code == 200
        _wait(lambda: deleted == [cluster["id"]])
        assert api("GET", path).status_code == 404
        assert emu.deleted_clusters == [(cluster["id"], False)]
        assert_no_violations(emu)


# --------------------------------------------------------------------------------------------------
# Envelope: pagination, 404 bodies, content types, auth


@pytest.mark.parametrize("per_page", [1, 2, 7, 500])
def test_plans_pagination_follows_next_cursor(api: Api, per_page: int) -> None:
    everything = api("GET", "/plans?type=all&per_page=500").json()
    ids: list[str] = []
    cursor = ""
    pages = 0
    while True:
        query = f"/plans?type=all&per_page={per_page}" + (f"&cursor={cursor}" if cursor else "")
        page = api("GET", query).json()
        pages += 1
        assert page["meta"]["total"] == everything["meta"]["total"]
        assert (page["meta"]["links"]["prev"] == "") == (pages == 1)
        ids += [p["id"] for p in page["plans"]]
        cursor = page["meta"]["links"]["next"]
        if not cursor:
            break
    assert ids == [p["id"] for p in everything["plans"]]
    assert pages == -(-len(ids) // per_page)


def test_cluster_list_pagination_and_duplicate_labels(api: Api) -> None:
    # Vultr does not make cluster labels unique; the module must cope with duplicates, so neither
    # does the emulator.
    made = [create_cluster(api, label="same")["id"] for _attempt in range(3)]
    first = api("GET", "/kubernetes/clusters?per_page=2").json()
    assert first["meta"]["total"] == 3
    assert len(first["vke_clusters"]) == 2
    second = api("GET", f"/kubernetes/clusters?per_page=2&cursor={first['meta']['links']['next']}").json()
    assert second["meta"]["links"]["next"] == ""
    assert [c["id"] for c in first["vke_clusters"] + second["vke_clusters"]] == made
    assert {c["label"] for c in first["vke_clusters"] + second["vke_clusters"]} == {"same"}


def test_not_found_bodies(api: Api) -> None:
    cluster = create_cluster(api)
    c = f"/kubernetes/clusters/{cluster['id']}"
    pool = cluster["node_pools"][0]["id"]
    cases = [
        ("GET", "/kubernetes/clusters/00000000-0000-4000-8000-000000000000", "Invalid resource ID"),
        ("DELETE", "/kubernetes/clusters/00000000-0000-4000-8000-000000000000", "Invalid resource ID"),
        ("GET", f"{c}/node-pools/00000000-0000-4000-8000-000000000000", "Invalid NodePool ID"),
        ("GET", f"{c}/node-pools/{pool}/labels/missing", "Not found."),
        ("DELETE", f"{c}/node-pools/{pool}/nodes/missing", "Invalid resource ID"),
    ]
    for method, path, message in cases:
        response = api(method, path)
        assert response.status_code == 404
        assert response.headers["Content-Type"] == "application/json"
        assert response.json() == {"error": message, "status": 404}
    api("DELETE", c)
    response = api("GET", c)
    assert response.json() == {"error": "Invalid resource ID", "status": 404}


def test_content_type_is_exact_and_bodies_need_json(emu: VultrEmulator, api: Api) -> None:
    for path in ("/kubernetes/versions", "/plans", "/regions", "/kubernetes/clusters"):
        assert api("GET", path).headers["Content-Type"] == "application/json"
    body = json.dumps({"region": "ewr", "version": "v1.35.6+1", "node_pools": [SYSTEM_POOL]})
    for content_type in (None, "text/plain"):
        headers = {} if content_type is None else {"Content-Type": content_type}
        with emu.expect_violations("body sent without Content-Type: application/json"):
            response = api("POST", "/kubernetes/clusters", data=body, headers=headers)
        assert response.status_code == 400
        assert response.json() == {"error": "Bad request.", "status": 400}
    assert emu.clusters == {}
    assert api("DELETE", "/kubernetes/clusters/x").headers.get("Content-Type") == "application/json"


def test_auth(emu: VultrEmulator) -> None:
    base = emu.base_url
    with emu.expect_violations("request without credentials"):
        response = requests.get(base + "/kubernetes/clusters", timeout=TIMEOUT)
    assert response.status_code == 401
    assert response.json()["status"] == 401
    # A wrong key is a valid request by the spec, answered with a declared 401: no exemption needed.
    bad = requests.get(base + "/kubernetes/clusters", headers={"Authorization": "Bearer no"}, timeout=TIMEOUT)
    assert bad.status_code == 401
    # /plans, /regions and /kubernetes/versions are public (security: [] in the spec).
    for path in ("/plans", "/regions", "/kubernetes/versions", "/regions/ewr/availability"):
        assert requests.get(base + path, timeout=TIMEOUT).status_code == 200


# --------------------------------------------------------------------------------------------------
# Semantics: PATCH is additive, labels/taints endpoints, create-only fields, uniqueness, GPU plans


def test_patch_labels_and_taints_are_additive(api: Api) -> None:
    cluster = create_cluster(api)
    pool = create_pool(
        api,
        cluster["id"],
        labels={"modelplane.ai/pool": "gpu"},
        taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
    )
    p = f"/kubernetes/clusters/{cluster['id']}/node-pools/{pool['id']}"
    patched = api(
        "PATCH",
        p,
        {
            "labels": {"modelplane.ai/gpu": "l40s"},
            "taints": [{"key": "dedicated", "value": "inference", "effect": "NoExecute"}],
        },
    ).json()["node_pool"]
    assert patched["labels"] == {"modelplane.ai/pool": "gpu", "modelplane.ai/gpu": "l40s"}
    assert {(t["key"], t["effect"]) for t in patched["taints"]} == {
        ("nvidia.com/gpu", "NoSchedule"),
        ("dedicated", "NoExecute"),
    }
    # An empty PATCH removes nothing; only the labels endpoint deletes.
    assert api("PATCH", p, {"labels": {}, "taints": []}).json()["node_pool"]["labels"] == patched["labels"]
    labels = api("GET", f"{p}/labels").json()["labels"]
    gone = next(lb for lb in labels if lb["key"] == "modelplane.ai/pool")
    assert api("DELETE", f"{p}/labels/{gone['id']}").status_code == 204
    assert api("GET", p).json()["node_pool"]["labels"] == {"modelplane.ai/gpu": "l40s"}


def test_label_and_taint_endpoints(emu: VultrEmulator, api: Api) -> None:
    cluster = create_cluster(api)
    p = f"/kubernetes/clusters/{cluster['id']}/node-pools/{cluster['node_pools'][0]['id']}"
    assert api("GET", p).json()["node_pool"]["labels"] is None
    assert api("GET", f"{p}/labels").json() == {"labels": []}
    made = api("POST", f"{p}/labels", {"key": "modelplane.ai/pool", "value": "system"})
    assert made.status_code == 201
    label = made.json()["label"]
    assert label["key"] == "modelplane.ai/pool"
    assert api("GET", f"{p}/labels/{label['id']}").json() == {"label": label}
    duplicate = api("POST", f"{p}/labels", {"key": "modelplane.ai/pool", "value": "other"})
    assert duplicate.status_code == 400
    taint = api("POST", f"{p}/taints", {"key": "k", "value": "v", "effect": "PreferNoSchedule"}).json()["taint"]
    assert api("GET", f"{p}/taints").json() == {"taints": [taint]}
    assert api("GET", p).json()["node_pool"]["taints"] == [{"key": "k", "value": "v", "effect": "PreferNoSchedule"}]
    with emu.expect_violations("taint effect outside the enum"):
        assert api("POST", f"{p}/taints", {"key": "k", "value": "v", "effect": "Sometimes"}).status_code == 400
    assert api("DELETE", f"{p}/taints/{taint['id']}").status_code == 204
    assert api("GET", f"{p}/taints/{taint['id']}").status_code == 404
    assert api("DELETE", f"{p}/labels/{label['id']}").status_code == 204
    assert api("GET", f"{p}/labels").json() == {"labels": []}


def test_create_only_fields_are_ignored_and_flagged(emu: VultrEmulator, api: Api) -> None:
    cluster = create_cluster(api)
    c = f"/kubernetes/clusters/{cluster['id']}"
    with emu.expect_violations("create-only cluster field in PUT"):
        assert api("PUT", c, {"label": "new", "region": "lax", "ha_controlplanes": True}).status_code == 204
    now = api("GET", c).json()["vke_cluster"]
    assert (now["label"], now["region"], now["ha_controlplanes"]) == ("new", "ewr", False)
    pool = now["node_pools"][0]
    with emu.expect_violations("create-only pool fields in PATCH"):
        response = api("PATCH", f"{c}/node-pools/{pool['id']}", {"plan": "vc2-8c-32gb", "label": "x"})
    assert response.status_code == 202
    assert (response.json()["node_pool"]["plan"], response.json()["node_pool"]["label"]) == ("vc2-6c-16gb", "system")


@pytest.mark.parametrize(
    ("pool", "message"),
    [
        ({"label": "system", "plan": "vc2-2c-4gb", "node_quantity": 1}, "Node pool labels must be unique"),
        ({"label": "tiny", "plan": "vc2-1c-1gb", "node_quantity": 1}, "Invalid NodePool ID"),
        ({"label": "frac", "plan": "vcg-a16-2c-8g-2vram", "node_quantity": 1}, "Invalid NodePool ID"),
        ({"label": "nope", "plan": "vcg-unknown", "node_quantity": 1}, "Invalid plan."),
        ({"label": "zero", "plan": "vc2-2c-4gb", "node_quantity": 0}, "node_quantity must be at least 1."),
        (
            {
                "label": "mm",
                "plan": "vc2-2c-4gb",
                "node_quantity": 1,
                "auto_scaler": True,
                "min_nodes": 3,
                "max_nodes": 2,
            },
            "min_nodes must be at least 1 and no greater than max_nodes.",
        ),
    ],
)
def test_node_pool_create_rejections(emu: VultrEmulator, api: Api, pool: dict[str, Any], message: str) -> None:
    cluster = create_cluster(api)
    response = api("POST", f"/kubernetes/clusters/{cluster['id']}/node-pools", pool)
    assert response.status_code == 400
    assert response.json() == {"error": message, "status": 400}
    assert len(emu.clusters[cluster["id"]]["node_pools"]) == 1


def test_gpu_plans_listing_and_configurable_eligibility(contract: VultrContract) -> None:
    with VultrEmulator(contract=contract, gpu_plans=["vcg-a100-12c-120g-80vram"]) as emu:
        api = Api(emu)
        every = api("GET", "/plans?type=all&per_page=500").json()["plans"]
        gpu = {p["id"]: p for p in every if p["id"].startswith("vcg-")}
        assert gpu[GPU_PLAN]["type"] == "vdm"
        assert gpu[GPU_PLAN]["gpu_vram_gb"] == 48
        assert gpu[GPU_PLAN]["gpu_type"] == "NVIDIA_L40S"
        only_vcg = {p["id"] for p in api("GET", "/plans?type=vcg").json()["plans"]}
        assert GPU_PLAN not in only_vcg
        assert only_vcg < set(gpu)
        available = api("GET", "/regions/ewr/availability").json()["available_plans"]
        assert GPU_PLAN in available
        assert GPU_PLAN not in api("GET", "/regions/sea/availability").json()["available_plans"]
        cluster = create_cluster(api)
        refused = api(
            "POST",
            f"/kubernetes/clusters/{cluster['id']}/node-pools",
            {"label": "g", "plan": GPU_PLAN, "node_quantity": 1},
        )
        assert refused.status_code == 400
        create_pool(api, cluster["id"], plan="vcg-a100-12c-120g-80vram")
        assert_no_violations(emu)
    assert GPU_PLAN in DEFAULT_GPU_PLANS


def test_upgrades(emu: VultrEmulator, api: Api) -> None:
    cluster = create_cluster(api)
    c = f"/kubernetes/clusters/{cluster['id']}"
    assert api("GET", f"{c}/available-upgrades").json() == {"available_upgrades": ["v1.36.2+1"]}
    bad = api("POST", f"{c}/upgrades", {"upgrade_version": "v1.30.0+1"})
    assert bad.status_code == 500
    assert bad.json()["error"] == "VKE server error: Cluster upgrade failed: invalid upgrade version"
    assert api("POST", f"{c}/upgrades", {"upgrade_version": "v1.36.2+1"}).status_code == 202
    assert api("GET", c).json()["vke_cluster"]["version"] == "v1.36.2+1"
    assert api("GET", f"{c}/available-upgrades").json() == {"available_upgrades": []}


def test_kubeconfig_is_base64_yaml_and_pluggable(emu: VultrEmulator, api: Api) -> None:
    cluster = create_cluster(api)
    encoded = api("GET", f"/kubernetes/clusters/{cluster['id']}/config").json()["kube_config"]
    config = yaml.safe_load(base64.b64decode(encoded))
    assert config["kind"] == "Config"
    assert config["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:1"
    assert cluster["id"] in config["current-context"]
    emu.kubeconfig_factory = lambda c: f"# custom for {c['id']}\n"
    encoded = api("GET", f"/kubernetes/clusters/{cluster['id']}/config").json()["kube_config"]
    assert base64.b64decode(encoded).decode() == f"# custom for {cluster['id']}\n"


@pytest.mark.parametrize("where", ["cluster", "pool"])
def test_vpc_only_fails_with_500_and_leaves_nothing(contract: VultrContract, where: str) -> None:
    with VultrEmulator(contract=contract) as emu:
        api = Api(emu)
        vpc_pool = SYSTEM_POOL | {"vpc_only": True}
        if where == "cluster":
            response = api(
                "POST",
                "/kubernetes/clusters",
                {"region": "ewr", "version": "v1.35.6+1", "vpc_id": "v", "node_pools": [vpc_pool]},
            )
            assert emu.clusters == {}
        else:
            cluster = create_cluster(api)
            response = api("POST", f"/kubernetes/clusters/{cluster['id']}/node-pools", vpc_pool | {"label": "vpc"})
            assert len(emu.clusters[cluster["id"]]["node_pools"]) == 1
        assert response.status_code == 500
        assert response.json()["status"] == 500
        assert_no_violations(emu)
    with VultrEmulator(contract=contract, vpc_only_fails=False) as emu:
        cluster = create_cluster(Api(emu), vpc_id="v", node_pools=[SYSTEM_POOL | {"vpc_only": True}])
        assert cluster["node_pools"][0]["vpc_only"] is True
        assert_no_violations(emu)


# --------------------------------------------------------------------------------------------------
# Faults


# (fault, retry_after given to inject, expected status, expected Retry-After header)
STATUS_FAULTS = [("429", 2, 429, "2"), ("500", 1, 500, None), ("503", 3, 503, "3"), ("503", None, 503, None)]


@pytest.mark.parametrize("case", STATUS_FAULTS, ids=["429", "500", "503-retry-after", "503-bare"])
def test_status_faults_hit_next_matching_requests_only(
    emu: VultrEmulator, api: Api, case: tuple[str, int | None, int, str | None]
) -> None:
    fault, retry_after, status, header = case
    emu.inject(method="POST", path=r"/kubernetes/clusters$", fault=fault, count=2, retry_after=retry_after)
    assert api("GET", "/kubernetes/clusters").status_code == 200  # another method: untouched
    body = {"region": "ewr", "version": "v1.35.6+1", "node_pools": [SYSTEM_POOL]}
    for _attempt in range(2):
        response = api("POST", "/kubernetes/clusters", body)
        assert response.status_code == status
        assert response.headers.get("Retry-After") == header
        assert response.headers["Content-Type"] == "application/json"
        assert response.json()["status"] == status
    assert emu.clusters == {}  # a failed request has no effect
    assert api("POST", "/kubernetes/clusters", body).status_code == 201
    assert [r["fault"] for r in emu.requests] == [None, fault, fault, None]
    assert emu.counters[f"status {status}"] == 2
    if fault == "503":  # the spec lists no 503: exempt, and said so
        assert [reason for reason, _unused in emu.contract_exempted] == ["injected fault", "injected fault"]


def test_probabilistic_faults_are_seeded(contract: VultrContract) -> None:
    def run(seed: int) -> list[int]:
        with VultrEmulator(contract=contract, seed=seed) as emu:
            emu.inject(fault="429", path=r"^/kubernetes/versions$", probability=0.3)
            session = requests.Session()
            statuses = [
                session.get(emu.base_url + "/kubernetes/versions", timeout=TIMEOUT).status_code for _try in range(40)
            ]
            assert_no_violations(emu)
            return statuses

    first = run(7)
    assert first == run(7)
    assert 3 <= first.count(429) <= 25
    assert set(first) == {200, 429}


def test_latency_fault(emu: VultrEmulator) -> None:
    emu.inject(fault="latency", path=r"^/kubernetes/versions$", latency=2.0)
    with pytest.raises(requests.exceptions.ReadTimeout):
        requests.get(emu.base_url + "/kubernetes/versions", timeout=0.3)
    assert requests.get(emu.base_url + "/kubernetes/versions", timeout=TIMEOUT).status_code == 200


def test_lost_response_takes_effect(emu: VultrEmulator, api: Api) -> None:
    emu.inject(method="POST", path=r"/kubernetes/clusters$", fault="lost_response")
    with pytest.raises(requests.exceptions.ConnectionError):
        api(
            "POST",
            "/kubernetes/clusters",
            {"label": "lost", "region": "ewr", "version": "v1.35.6+1", "node_pools": [SYSTEM_POOL]},
        )
    listed = api("GET", "/kubernetes/clusters").json()["vke_clusters"]
    assert [c["label"] for c in listed] == ["lost"]
    assert emu.requests[0]["status"] is None
    assert emu.requests[0]["fault"] == "lost_response"


def test_control_endpoints(emu: VultrEmulator) -> None:
    root = emu.endpoint
    made = requests.post(root + "/lab/faults", json={"fault": "429", "path": "^/regions$", "count": 1}, timeout=TIMEOUT)
    assert made.status_code == 201
    assert requests.get(root + "/lab/faults", timeout=TIMEOUT).json()["faults"][0]["fault"] == "429"
    assert requests.get(emu.base_url + "/regions", timeout=TIMEOUT).status_code == 429
    assert requests.get(emu.base_url + "/regions", timeout=TIMEOUT).status_code == 200
    log = requests.get(root + "/lab/requests", timeout=TIMEOUT).json()
    assert [(r["path"], r["status"]) for r in log["requests"]] == [("/v2/regions", 429), ("/v2/regions", 200)]
    assert requests.post(root + "/lab/faults", json={"fault": "418"}, timeout=TIMEOUT).status_code == 400
    requests.post(root + "/lab/faults", json={"fault": "500"}, timeout=TIMEOUT)
    assert requests.delete(root + "/lab/faults", timeout=TIMEOUT).status_code == 204
    assert requests.get(emu.base_url + "/regions", timeout=TIMEOUT).status_code == 200


# --------------------------------------------------------------------------------------------------
# The CLI, as labctl starts it


def test_cli_serves_until_sigterm(tmp_path: Path) -> None:
    port = free_port()
    args = lab_command("lab.vultr.server", "--port", str(port), "--delay-scale", "0", "--state-dir", str(tmp_path))
    process = subprocess.Popen(
        [*args, "--gpu-plans", "vcg-a16-2c-8g-2vram"], stderr=subprocess.PIPE, env=lab_environment()
    )
    try:
        base = f"http://127.0.0.1:{port}/v2"
        deadline = time.monotonic() + 20
        while True:
            try:
                response = requests.get(base + "/kubernetes/versions", timeout=1)
                break
            except requests.exceptions.ConnectionError:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                assert time.monotonic() < deadline, "emulator did not start"
                time.sleep(0.1)
        assert response.json()["versions"]
        body = {
            "region": "ewr",
            "version": "v1.35.6+1",
            "node_pools": [{"label": "g", "plan": "vcg-a16-2c-8g-2vram", "node_quantity": 1}],
        }
        assert requests.post(base + "/kubernetes/clusters", json=body, headers=AUTH, timeout=TIMEOUT).status_code == 201
    finally:
        process.send_signal(signal.SIGTERM)
        returncode = process.wait(timeout=15)
    assert returncode == 0
    log = json.loads((tmp_path / "vultr-requests.json").read_text())
    assert [r["status"] for r in log["requests"]] == [200, 201]


@pytest.mark.parametrize(
    "raw",
    [b"\x00", b"\xff\xfe", b"[]", b'{"region": 5}', b'{"region": "ewr", "version": "v1.35.6+1", "node_pools": [1]}'],
    ids=["nul", "not-utf8", "array", "wrong-type", "pool-not-object"],
)
def test_malformed_bodies_are_400_not_crashes(emu: VultrEmulator, api: Api, raw: bytes) -> None:
    with emu.expect_violations("malformed body on purpose"):
        response = api("POST", "/kubernetes/clusters", data=raw, headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert response.json() == {"error": "Bad request.", "status": 400}
    assert emu.internal_errors == []
    assert emu.clusters == {}
