"""metal_preflight for clusters with provisioner metal3: planned from BareMetalHosts as metal3_host would claim.

Each case lays out the namespace's BareMetalHosts (or none: the pool's hosts would be registered first) and expects
the plan (claim, host, BareMetalHost) or exactly the problems' fields, so a planner that drifts from metal3_host's
choice, or a check that fires on the wrong field, fails here.
"""

from __future__ import annotations

from typing import Any

import pytest
from metal_fakes import FakeModule
from test_metal_preflight import MACS, _inventory, _no_bmc, _no_iso, _params, _second

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ApiError
from ansible_collections.metalplane.inference.plugins.module_utils._common.problems import PreflightError
from ansible_collections.metalplane.inference.plugins.module_utils._metal import preflight as pf
from ansible_collections.metalplane.inference.plugins.module_utils._metal3 import bmh as b

IMAGE = {"imageURL": "http://images.example/node.qcow2", "imageChecksum": "a" * 64, "imageDiskFormat": "qcow2"}
NS = "metal3"


def metal3_inventory(*, state: str = "present", two: bool = False, **metal3: Any) -> dict[str, Any]:
    inventory = _inventory()
    if two:
        _second()(inventory)
    for cluster in inventory["clusters"]:
        cluster.update(provisioner="metal3", state=state, metal3={"image": IMAGE, **metal3})
    return inventory


def bmh(
    name: str,
    *,
    state: str = b.STATE_AVAILABLE,
    holder: str | None = None,
    mac: str | None = None,
    owned: bool = True,
    error: str = "",
) -> dict[str, Any]:
    labels = {b.POOL_LABEL: "lab"}
    if owned:
        labels[b.MANAGED_BY_LABEL] = b.MANAGED_BY
    spec: dict[str, Any] = {"bootMACAddress": mac or MACS[name], "online": False}
    if holder:
        spec["consumerRef"] = b.consumer_ref(holder, NS)
    return {
        "apiVersion": b.API_VERSION,
        "kind": b.KIND,
        "metadata": {"name": name, "namespace": NS, "labels": labels, "annotations": {b.GENERATION_ANNOTATION: "3"}},
        "spec": spec,
        "status": {"provisioning": {"state": state}, "operationalStatus": "OK", "errorMessage": error},
    }


def plan(inventory: dict[str, Any], hosts: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    checked, problems = pf.check_inventory(**inventory)
    assert problems == []
    plans, problems = pf.plan_claims(checked, {}, None, "modelplane-system", {(None, NS): hosts})
    return [p.summary(checked.pools) for p in plans], [p.field for p in problems]


def outcome(summary: dict[str, Any]) -> tuple[Any, ...]:
    return (summary["claim"], (summary["host"] or {}).get("name"), summary["bare_metal_host"])


@pytest.mark.parametrize(
    ("hosts", "expected"),
    [
        ([], ("new", "r1", "metal3/r1")),  # none registered yet: metal3_host registers the pool, claims the first
        ([bmh("r1", holder="lab-r730"), bmh("r2")], ("held", "r1", "metal3/r1")),
        ([bmh("r1", holder="capm3-machine"), bmh("r2")], ("new", "r2", "metal3/r2")),
        ([bmh("r1", state=b.STATE_INSPECTING), bmh("r2")], ("new", "r2", "metal3/r2")),
        ([bmh("r1", error="Virtual media mount failed"), bmh("r2", holder="x")], ("new", "r3", "metal3/r3")),
    ],
)
def test_the_host_metal3_host_would_claim(hosts: list[dict[str, Any]], expected: tuple[Any, ...]) -> None:
    summaries, fields = plan(metal3_inventory(), hosts)
    assert fields == []
    assert outcome(summaries[0]) == expected
    assert summaries[0]["lease"] is None


def test_a_held_host_keeps_its_generation() -> None:
    summaries, _fields = plan(metal3_inventory(), [bmh("r2", holder="lab-r730")])
    assert (summaries[0]["claim"], summaries[0]["generation"]) == ("held", 3)


def test_two_clusters_of_one_pool_never_get_the_same_host() -> None:
    summaries, fields = plan(metal3_inventory(two=True), [bmh("r1"), bmh("r2", holder="other"), bmh("r3")])
    assert fields == []
    assert [outcome(s) for s in summaries] == [("new", "r1", "metal3/r1"), ("new", "r3", "metal3/r3")]
    assert {"name": "r1", "status": "planned", "reason": "planned for cluster 'lab-r730'"} in summaries[1][
        "skipped_hosts"
    ]


def test_no_free_host_names_every_reason() -> None:
    hosts = [bmh("r1", holder="a"), bmh("r2", holder="b"), bmh("r3", state=b.STATE_PROVISIONED, holder="c")]
    checked, problems = pf.check_inventory(**metal3_inventory())
    _plans, problems = pf.plan_claims(checked, {}, None, "modelplane-system", {(None, NS): hosts})
    assert [p.field for p in problems] == ["clusters[0].pool"]
    assert "r1: held by MetalCluster metal3/a" in problems[0].msg
    assert "r3: held by" in problems[0].msg


def test_a_foreign_bare_metal_host_under_a_pool_hosts_name_is_the_hosts_problem() -> None:
    foreign = bmh("r2", owned=False, mac="00:5c:52:31:3a:99")
    _summaries, fields = plan(metal3_inventory(), [foreign])
    assert fields == ["pools.lab.hosts[1]"]


def test_absent_releases_what_the_cluster_holds() -> None:
    summaries, fields = plan(metal3_inventory(state="absent"), [bmh("r1"), bmh("r3", holder="lab-r730")])
    assert fields == []
    assert (summaries[0]["claim"], summaries[0]["releases"]) == ("release", ["r3"])


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"image": {"imageURL": "http://images.example/node.qcow2"}}, "clusters[0].metal3.image.checksum"),
        ({"image": {**IMAGE, "imageDiskFormat": "iso"}}, "clusters[0].metal3.image.disk_format"),
        ({"image": {**IMAGE, "imageChecksumType": "crc32"}}, "clusters[0].metal3.image.checksum_type"),
        ({"image": None}, "clusters[0].metal3.image"),
        ({"namespace": "Metal3 NS"}, "clusters[0].metal3.namespace"),
        ({"host_selector": ["pool=lab"]}, "clusters[0].metal3.host_selector"),
    ],
)
def test_bad_metal3_settings_name_the_field(change: dict[str, Any], field: str) -> None:
    inventory = metal3_inventory()
    inventory["clusters"][0]["metal3"].update(change)
    _checked, problems = pf.check_inventory(**inventory)
    assert [p.field for p in problems] == [field]


def test_a_generic_bmc_needs_its_system_path() -> None:
    inventory = metal3_inventory()
    inventory["pools"][0]["hosts"][1]["personality"] = None
    _checked, problems = pf.check_inventory(**inventory)
    assert [p.field for p in problems] == ["pools.lab.hosts[1].system_path"]
    inventory["pools"][0]["hosts"][1]["system_path"] = "/redfish/v1/Systems/1"
    assert pf.check_inventory(**inventory)[1] == []


class Namespaces:
    """A read-only store of BareMetalHosts by namespace; records what was listed (nothing else may be called)."""

    def __init__(self, hosts: dict[str, list[dict[str, Any]]]) -> None:
        self.hosts = hosts
        self.listed: list[tuple[str, str, str | None]] = []

    def list(self, _api_version: str, kind: str, namespace: str, selector: str | None) -> list[dict[str, Any]]:
        self.listed.append((kind, namespace, selector))
        return self.hosts.get(namespace, [])


def test_the_module_reads_each_namespace_once_and_no_lease() -> None:
    namespaces = Namespaces({NS: [bmh("r1", holder="x"), bmh("r2")]})

    def no_leases(_params: dict[str, Any]) -> Any:
        raise AssertionError("a metal3-only inventory reads no Lease")

    result = pf.run_metal_preflight(
        FakeModule(_params(metal3_inventory(two=True))),
        store_factory=no_leases,
        metal3_store_factory=lambda _p: namespaces,
        bmc_opener=_no_bmc,
        iso_check=_no_iso,
    )
    assert namespaces.listed == [("BareMetalHost", NS, None)]
    assert [c["bare_metal_host"] for c in result["clusters"]] == ["metal3/r2", "metal3/r3"]


def test_an_unreadable_management_cluster_is_one_problem() -> None:
    def refused(_params: dict[str, Any]) -> Any:
        raise ApiError("Listing BareMetalHost: connection refused")

    inventory = metal3_inventory(kubeconfig="/etc/metal3/mgmt.kubeconfig")
    with pytest.raises(PreflightError) as caught:
        pf.run_metal_preflight(
            FakeModule(_params(inventory)), metal3_store_factory=refused, bmc_opener=_no_bmc, iso_check=_no_iso
        )
    assert [p["field"] for p in caught.value.details["problems"]] == ["clusters[0].metal3.kubeconfig"]
