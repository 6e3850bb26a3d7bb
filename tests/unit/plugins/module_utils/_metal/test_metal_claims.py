"""Lease naming, the claim record and the pure planner ``choose_host`` (table-driven, no network)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._metal import claims as c
from ansible_collections.metalplane.inference.plugins.module_utils._metal.claim_run import hint_action
from ansible_collections.metalplane.inference.plugins.module_utils._metal.pool import Host, Requirements

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@pytest.mark.parametrize(
    ("pool", "host", "readable"),
    [
        ("r730", "r730-a", True),
        ("r730", "r730-a.dc1.example", True),
        ("r730_lab", "r730-a", False),  # '_' is no DNS character
        ("r730", "R730-A", False),  # upper case
        ("r730", "x" * 250, False),  # too long
        ("R730", "a", False),
    ],
)
def test_lease_names_are_dns_subdomains(pool: str, host: str, readable: bool) -> None:
    name = c.lease_name(pool, host)
    assert DNS_SUBDOMAIN.match(name)
    assert len(name) <= c.DNS_SUBDOMAIN_MAX
    assert name.startswith(c.LEASE_PREFIX)
    assert (name == f"{c.LEASE_PREFIX}{pool}.{host}") is readable


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("a", "b-c"), ("a-b", "c")),
        (("r730", "R730-A"), ("r730", "r730-a")),
        (("r730_lab", "a"), ("r730-lab", "a")),
        (("p", "x" * 250 + "1"), ("p", "x" * 250 + "2")),
    ],
)
def test_lease_names_never_collide(first: tuple[str, str], second: tuple[str, str]) -> None:
    assert c.lease_name(*first) != c.lease_name(*second)


@pytest.mark.parametrize("value", ["r730", "r730_lab", "R730", "a" * 63, "a" * 64, "-x", "with space", "ü"])
def test_label_values_are_valid_and_stable(value: str) -> None:
    label = c.label_value(value)
    assert LABEL_VALUE.match(label)
    assert len(label) <= c.LABEL_VALUE_MAX
    assert c.label_value(value) == label
    assert (label == value) == (len(value) <= 63 and bool(LABEL_VALUE.match(value)))


def _host(name: str, **facts: Any) -> Host:
    mac = f"00:5c:52:31:3a:{sum(map(ord, name)) % 256:02x}"
    return Host(name=name, bmc_url=f"https://{name}.bmc", username="root", password="pw", boot_mac=mac, facts=facts)


HOSTS = [_host("a"), _host("b", gpu_count=1), _host("c"), _host("d")]


def _lease(host: str, holder: str, generation: int = 1) -> dict[str, Any]:
    return c.lease_body(
        c.DEFAULT_NAMESPACE,
        "r730",
        _host(host),
        cluster=holder,
        claimer="ops@ctl",
        since="2026-08-22T09:14:03.123456Z",
        generation=generation,
    )


@pytest.mark.parametrize(
    ("leases", "requirements", "expected"),
    [
        ([], Requirements(), ([], ["a", "b", "c", "d"], [], [])),
        ([], Requirements(gpu_count=2), ([], ["a", "c", "d"], [("b", "mismatched")], [])),
        ([_lease("c", "dc1")], Requirements(), (["c"], ["a", "b", "d"], [], [])),
        ([_lease("a", "dc2")], Requirements(), ([], ["b", "c", "d"], [("a", "claimed")], [])),
        ([_lease("a", "")], Requirements(), ([], ["a", "b", "c", "d"], [], [])),  # released: free again
        ([_lease("zz", "dc1")], Requirements(), ([], ["a", "b", "c", "d"], [], ["zz"])),
        ([_lease("d", "dc1"), _lease("b", "dc1")], Requirements(), (["b", "d"], ["a", "c"], [], [])),
    ],
)
def test_choose_host(
    leases: list[dict[str, Any]],
    requirements: Requirements,
    expected: tuple[list[str], list[str], list[tuple[str, str]], list[str]],
) -> None:
    held, candidates, skipped, strays = expected
    plan = c.choose_host("r730", HOSTS, leases, "dc1", requirements)
    assert [h.host for h in plan.held] == held
    assert [h.name for h in plan.candidates] == candidates
    assert [(s["name"], s["status"]) for s in plan.skipped] == skipped
    assert [s.host for s in plan.strays] == strays


def test_the_claim_record_reads_back() -> None:
    lease = _lease("a", "dc1", generation=3)
    lease["metadata"].update(resourceVersion="42", uid="u-1")
    claim = c.claim_from_lease(lease)
    assert (claim.host, claim.pool, claim.cluster, claim.claimer, claim.generation) == (
        "a",
        "r730",
        "dc1",
        "ops@ctl",
        3,
    )
    assert (claim.since, claim.resource_version, claim.uid, claim.held) == (
        "2026-08-22T09:14:03.123456Z",
        "42",
        "u-1",
        True,
    )
    assert "leaseDurationSeconds" not in lease["spec"]  # a claim never expires
    assert lease["metadata"]["labels"][c.POOL_LABEL] == "r730"


def test_an_update_keeps_the_resource_version_and_counts_transitions() -> None:
    released = _lease("a", "")
    released["metadata"].update(resourceVersion="7")
    released["metadata"]["annotations"]["note"] = "kept"
    released["spec"]["leaseTransitions"] = 2
    body = c.lease_body(
        c.DEFAULT_NAMESPACE, "r730", _host("a"), cluster="dc1", claimer="me", since="t", generation=1, previous=released
    )
    assert body["metadata"]["resourceVersion"] == "7"
    assert body["metadata"]["annotations"]["note"] == "kept"
    assert body["spec"]["leaseTransitions"] == 3


@pytest.mark.parametrize(
    ("current", "wanted", "action"),
    [
        ("", "mp:dc1", "write"),
        (None, "mp:dc1", "write"),
        ("mp:dc1", "mp:dc1", "unchanged"),
        ("mp:old", "mp:dc1", "write"),  # a stale hint of ours
        ("FIN-00042", "mp:dc1", "kept"),  # a person's asset tag
        ("mp:dc1", None, "clear"),
        ("FIN-00042", None, "unchanged"),
        ("", None, "unchanged"),
    ],
)
def test_hint_action(current: str | None, wanted: str | None, action: str) -> None:
    assert hint_action(current, wanted) == action
