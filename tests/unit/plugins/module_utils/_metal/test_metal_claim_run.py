"""host_claim / host_pool_info bodies over an in-memory Lease store and fake BMCs.

What must hold: re-running returns the same host; bad input and refusals happen before any write; a race
lost on the Lease moves on (or, for the same cluster, adopts the winner); release is idempotent and only
for the owner (or ``force``); the AssetTag hint never overwrites a person's tag; check mode writes nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from metal_fakes import FakeBmc, FakeBmcs, FakeModule, MemoryLeaseStore, v100_inventory

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ConflictError, InputError
from ansible_collections.metalplane.inference.plugins.module_utils._metal import claims as c
from ansible_collections.metalplane.inference.plugins.module_utils._metal.claim_run import (
    run_host_claim,
    run_host_pool_info,
)
from ansible_collections.metalplane.inference.plugins.module_utils._metal.pool import parse_hosts

POOL = "r730"
NS = c.DEFAULT_NAMESPACE
NAMES = ("a", "b", "c")
MACS = {n: f"00:5c:52:31:3a:0{i}" for i, n in enumerate(NAMES, start=1)}
SECRET = "pw-very-secret"


def _hosts() -> list[dict[str, Any]]:
    return [
        {"name": n, "bmc_url": f"https://{n}.bmc.example", "username": "root", "password": SECRET, "boot_mac": m}
        for n, m in MACS.items()
    ]


def _params(cluster: str = "dc1", **overrides: Any) -> dict[str, Any]:
    return {
        "kubeconfig": "/nonexistent/kubeconfig",
        "pool": POOL,
        "hosts": _hosts(),
        "requirements": {"gpu_model": "V100", "gpu_count": 2, "min_memory_gib": None},
        "namespace": NS,
        "api_timeout": 30,
        "cluster": cluster,
        "state": "present",
        "claimer": "ops@ctl",
        **overrides,
    }


def _bmcs(**inventories: Any) -> FakeBmcs:
    return FakeBmcs({n: FakeBmc(inventories.get(n) or v100_inventory(MACS[n])) for n in NAMES})


def _claim(
    store: MemoryLeaseStore, bmcs: FakeBmcs, *, check_mode: bool = False, **params: Any
) -> tuple[dict[str, Any], FakeModule]:
    module = FakeModule(_params(**params), check_mode=check_mode)
    result = run_host_claim(module, store_factory=lambda _p: store, bmc_opener=bmcs)
    return result, module


def _holders(store: MemoryLeaseStore) -> dict[str, str]:
    return {
        o["metadata"]["annotations"][c.HOST_ANNOTATION]: o["spec"].get("holderIdentity", "")
        for o in store.objects.values()
    }


def test_a_claim_is_returned_again_on_every_rerun() -> None:
    store, bmcs = MemoryLeaseStore(), _bmcs()
    first, _unused = _claim(store, bmcs)
    assert (first["changed"], first["host"]["name"], first["host"]["generation"]) == (True, "a", 1)
    assert first["host"]["lease"] == f"{NS}/{c.LEASE_PREFIX}{POOL}.a"
    assert first["bmc_hint"] == {"status": "written", "value": "mp:dc1"}
    assert first["diff"]["before"] == {}
    assert first["diff"]["after"]["spec"]["holderIdentity"] == "dc1"
    store.calls.clear()
    again, _unused = _claim(store, bmcs)
    assert (again["changed"], again["host"]["name"], again["host"]["since"]) == (False, "a", first["host"]["since"])
    assert store.writes() == []
    assert "diff" not in again
    assert SECRET not in repr(first) + repr(again)


def test_a_second_cluster_gets_the_next_free_host_and_skips_report_why() -> None:
    store = MemoryLeaseStore()
    bmcs = _bmcs(b=v100_inventory(MACS["b"], gpus=1))
    _claim(store, bmcs, cluster="dc1")
    second, _unused = _claim(store, bmcs, cluster="dc2")
    assert second["host"]["name"] == "c"
    assert [(s["name"], s["status"]) for s in second["skipped_hosts"]] == [("a", "claimed"), ("b", "mismatched")]
    assert "matching 'V100'" in second["skipped_hosts"][1]["reason"]
    assert _holders(store) == {"a": "dc1", "c": "dc2"}


def test_an_unreachable_bmc_is_reported_and_never_claimed() -> None:
    store, bmcs = MemoryLeaseStore(), _bmcs()
    bmcs.down = {"a"}
    result, _unused = _claim(store, bmcs)
    assert result["host"]["name"] == "b"
    assert result["skipped_hosts"][0]["status"] == "unreachable"
    assert "Connection refused" in result["skipped_hosts"][0]["reason"]


def test_no_free_matching_host_fails_naming_the_pool_before_any_write() -> None:
    store, bmcs = MemoryLeaseStore(), _bmcs()
    store.put(
        c.lease_body(NS, POOL, parse_hosts(_hosts(), POOL)[0], cluster="dc9", claimer="x", since="t", generation=1)
    )
    with pytest.raises(InputError) as caught:
        _claim(store, bmcs, requirements={"gpu_model": "A100"})
    assert caught.value.field == "pool"
    assert [(s["name"], s["status"]) for s in caught.value.details["skipped_hosts"]] == [
        ("a", "claimed"),
        ("b", "mismatched"),
        ("c", "mismatched"),
    ]
    assert store.writes() == []


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"hosts": []}, "hosts"),
        ({"pool": "no such pool"}, "pool"),
        ({"cluster": "DC_1"}, "cluster"),
        ({"kubeconfig": None}, "kubeconfig"),
        ({"namespace": "Bad_NS"}, "namespace"),
        ({"api_timeout": 0}, "api_timeout"),
        ({"refused_login_retries": 4}, "refused_login_retries"),
        ({"hosts": [{**_hosts()[0], "boot_mac": "00:11:22"}]}, "hosts[0].boot_mac"),
        ({"host": "zz"}, "host"),
        ({"requirements": {"gpu_count": 0}}, "requirements.gpu_count"),
    ],
)
def test_bad_input_is_refused_before_connecting(overrides: dict[str, Any], field: str) -> None:
    connected: list[Any] = []

    def factory(_params: Any) -> MemoryLeaseStore:
        connected.append(True)
        return MemoryLeaseStore()

    module = FakeModule(_params(**overrides))
    with pytest.raises(InputError) as caught:
        run_host_claim(module, store_factory=factory, bmc_opener=_bmcs())
    assert caught.value.field == field
    assert SECRET not in caught.value.msg
    assert connected == []


def test_release_by_another_cluster_needs_force_and_writes_nothing() -> None:
    store, bmcs = MemoryLeaseStore(), _bmcs()
    _claim(store, bmcs, cluster="dc1")
    store.calls.clear()
    with pytest.raises(InputError) as caught:
        _claim(store, bmcs, cluster="dc2", state="absent", host="a")
    assert caught.value.field == "force"
    assert store.writes() == []
    forced, _unused = _claim(store, bmcs, cluster="dc2", state="absent", host="a", force=True)
    assert forced["changed"] is True
    assert [r["cluster"] for r in forced["released"]] == ["dc1"]
    assert forced["bmc_hint"]["status"] == "cleared"
    assert bmcs.bmcs["a"].tag == ""


def test_release_is_idempotent_and_frees_the_host() -> None:
    store, bmcs = MemoryLeaseStore(), _bmcs()
    _claim(store, bmcs, cluster="dc1")
    released, _unused = _claim(store, bmcs, cluster="dc1", state="absent")
    assert (released["changed"], [r["name"] for r in released["released"]]) == (True, ["a"])
    assert released["diff"]["before"]["spec"]["holderIdentity"] == "dc1"
    again, _unused = _claim(store, bmcs, cluster="dc1", state="absent")
    assert (again["changed"], again["released"]) == (False, [])
    assert _claim(store, bmcs, cluster="dc2")[0]["host"]["name"] == "a"


def test_reinstall_bumps_the_generation_and_a_reclaim_keeps_it() -> None:
    store, bmcs = MemoryLeaseStore(), _bmcs()
    first, _unused = _claim(store, bmcs)
    bumped, _unused = _claim(store, bmcs, reinstall=True)
    assert (bumped["changed"], bumped["host"]["generation"], bumped["host"]["since"]) == (
        True,
        2,
        first["host"]["since"],
    )
    kept, _unused = _claim(store, bmcs)
    assert (kept["changed"], kept["host"]["generation"]) == (False, 2)


def test_check_mode_plans_without_writing() -> None:
    store, bmcs = MemoryLeaseStore(), _bmcs()
    planned, _unused = _claim(store, bmcs, check_mode=True)
    assert (planned["changed"], planned["host"]["name"], planned["host"]["since"]) == (True, "a", None)
    assert planned["bmc_hint"] == {"status": "write", "planned": True}
    assert store.writes() == []
    assert bmcs.bmcs["a"].writes == []
    _claim(store, bmcs)
    store.calls.clear()
    for extra in ({"reinstall": True}, {"state": "absent"}):
        result, _unused = _claim(store, bmcs, check_mode=True, **extra)
        assert result["changed"] is True
    assert store.writes() == []


def test_a_persons_asset_tag_is_kept_and_a_failed_hint_only_warns() -> None:
    store, bmcs = MemoryLeaseStore(), _bmcs()
    bmcs.bmcs["a"].tag = "FIN-00042"
    kept, _unused = _claim(store, bmcs, cluster="dc1")
    assert kept["bmc_hint"]["status"] == "kept"
    assert bmcs.bmcs["a"].tag == "FIN-00042"
    bmcs.bmcs["b"].tag_fails = True
    failed, module = _claim(store, bmcs, cluster="dc2")
    assert (failed["host"]["name"], failed["bmc_hint"]["status"]) == ("b", "failed")
    assert any("claim holds" in w for w in module.warnings)
    assert _holders(store)["b"] == "dc2"


def test_losing_the_lease_race_moves_on_to_the_next_host() -> None:
    store, bmcs = MemoryLeaseStore(), _bmcs()
    hosts = parse_hosts(_hosts(), POOL)

    def rival(verb: str, body: Any) -> None:
        if body["metadata"]["name"] == c.lease_name(POOL, "a") and c.lease_name(POOL, "a") not in {
            k[1] for k in store.objects
        }:
            store.put(c.lease_body(NS, POOL, hosts[0], cluster="rival", claimer="x", since="t", generation=1))

    store.before_write = rival
    result, _unused = _claim(store, bmcs)
    assert result["host"]["name"] == "b"
    assert result["skipped_hosts"] == [{"name": "a", "status": "claimed", "reason": "cluster 'rival' claimed it first"}]
    assert _holders(store) == {"a": "rival", "b": "dc1"}


def test_a_concurrent_run_for_the_same_cluster_is_settled_to_one_host() -> None:
    store, bmcs = MemoryLeaseStore(), _bmcs()
    hosts = parse_hosts(_hosts(), POOL)
    # While this run is about to claim "b" (a is down for it), another run of dc1 claimed "a".
    bmcs.down = {"a"}

    def twin(verb: str, body: Any) -> None:
        if verb == "create" and body["metadata"]["name"] == c.lease_name(POOL, "b"):
            store.put(c.lease_body(NS, POOL, hosts[0], cluster="dc1", claimer="twin", since="t0", generation=1))

    store.before_write = twin
    result, module = _claim(store, bmcs)
    assert result["host"]["name"] == "a"
    assert _holders(store) == {"a": "dc1"}
    assert any("released its own claim" in w for w in module.warnings)


def test_a_claim_on_a_host_no_longer_listed_is_a_conflict() -> None:
    store, bmcs = MemoryLeaseStore(), _bmcs()
    _claim(store, bmcs)
    with pytest.raises(ConflictError, match="no longer names"):
        _claim(store, bmcs, hosts=_hosts()[1:])
    released, _unused = _claim(store, bmcs, hosts=_hosts()[1:], state="absent", host="a")
    assert released["changed"] is True
    assert store.objects == {}


def test_the_pool_report_says_why_for_every_host() -> None:
    store = MemoryLeaseStore()
    bmcs = _bmcs(c=v100_inventory(MACS["c"], memory=64))
    _claim(store, bmcs, cluster="dc1")
    bmcs.down = {"b"}
    hosts = [*_hosts(), {**_hosts()[0], "name": "d", "boot_mac": "00:5c:52:31:3a:09", "facts": {"gpu_count": 1}}]
    module = FakeModule({**_params(requirements={"gpu_count": 2, "min_memory_gib": 128}), "hosts": hosts})
    store.calls.clear()
    report = run_host_pool_info(module, store_factory=lambda _p: store, bmc_opener=bmcs)
    rows = {r["name"]: r for r in report["hosts"]}
    assert {n: r["status"] for n, r in rows.items()} == {
        "a": "claimed",
        "b": "unreachable",
        "c": "mismatched",
        "d": "mismatched",
    }
    assert rows["a"]["claim"]["cluster"] == "dc1"
    assert rows["c"]["reasons"] == ["min_memory_gib: Redfish reports 64 GiB, the cluster needs at least 128"]
    assert (rows["c"]["source"], rows["d"]["source"]) == ("redfish", "facts")
    assert report["counts"] == {"free": 0, "claimed": 1, "unreachable": 1, "mismatched": 2}
    assert store.calls == ["list"]  # one list call, read-only
    assert SECRET not in repr(report)
