"""Pool host parsing and requirement matching (pure): every bad entry names its field; every mismatch says why."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._metal import pool
from ansible_collections.metalplane.inference.plugins.module_utils._metal.pool import (
    Inventory,
    Requirements,
    fact_mismatches,
    inventory_from,
    inventory_mismatches,
    normalise_mac,
    parse_hosts,
    parse_requirements,
)

MAC = "00:5c:52:31:3a:9c"


def _host(**overrides: Any) -> dict[str, Any]:
    return {
        "name": "r730-a",
        "bmc_url": "https://idrac-a.example",
        "username": "root",
        "password": "pw-secret",
        "boot_mac": MAC,
        **overrides,
    }


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("00:5c:52:31:3a:9c", "00:5c:52:31:3a:9c"),
        ("00:5C:52:31:3A:9C", "00:5c:52:31:3a:9c"),
        ("00-5C-52-31-3A-9C", "00:5c:52:31:3a:9c"),
        (" 00:5c:52:31:3a:9c ", "00:5c:52:31:3a:9c"),
    ],
)
def test_macs_are_normalised(value: str, expected: str) -> None:
    assert normalise_mac("boot_mac", value) == expected


@pytest.mark.parametrize(
    "value",
    ["", None, "00:5c:52:31:3a", "00:5c:52:31:3a:9c:00", "00:5c-52:31:3a:9c", "005c.5231.3a9c", "zz:5c:52:31:3a:9c"],
)
def test_a_mac_that_is_not_a_mac_is_refused(value: Any) -> None:
    with pytest.raises(InputError) as caught:
        normalise_mac("hosts[0].boot_mac", value)
    assert caught.value.field == "hosts[0].boot_mac"


@pytest.mark.parametrize(
    ("hosts", "field"),
    [
        ([], "hosts"),
        (None, "hosts"),
        (["r730-a"], "hosts[0]"),
        ([_host(color="red")], "hosts[0]"),
        ([_host(name="")], "hosts[0].name"),
        ([_host(name="has space")], "hosts[0].name"),
        ([_host(), _host(boot_mac="00:5c:52:31:3a:9d")], "hosts[1].name"),
        ([_host(bmc_url="")], "hosts[0].bmc_url"),
        ([_host(bmc_url="idrac-a.example")], "hosts[0].bmc_url"),
        ([_host(bmc_url="ftp://idrac-a.example")], "hosts[0].bmc_url"),
        ([_host(password="")], "hosts[0].password"),
        ([_host(username=None)], "hosts[0].username"),
        ([_host(boot_mac="not-a-mac")], "hosts[0].boot_mac"),
        ([_host(), _host(name="r730-b", boot_mac=MAC.upper())], "hosts[1].boot_mac"),
        ([_host(facts=["gpu"])], "hosts[0].facts"),
    ],
)
def test_bad_hosts_name_the_field(hosts: Any, field: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_hosts(hosts, "r730")
    assert caught.value.field == field
    assert "pw-secret" not in caught.value.msg


def test_hosts_are_parsed_with_defaults_and_no_password_in_public_view() -> None:
    (host,) = parse_hosts([_host(boot_mac="00-5C-52-31-3A-9C", validate_certs=None, facts=None)], "r730")
    assert (host.boot_mac, host.validate_certs, dict(host.facts)) == (MAC, True, {})
    assert "pw-secret" not in repr(host)
    assert "password" not in host.public()


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"gpu_modle": "V100"}, "requirements"),
        ({"gpu_model": " "}, "requirements.gpu_model"),
        ({"gpu_count": 0}, "requirements.gpu_count"),
        ({"gpu_count": True}, "requirements.gpu_count"),
        ({"min_memory_gib": -1}, "requirements.min_memory_gib"),
        ({"min_memory_gib": "lots"}, "requirements.min_memory_gib"),
    ],
)
def test_bad_requirements_name_the_field(value: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_requirements(value)
    assert caught.value.field == field


def _inventory(gpus: list[str], memory: float | None = 256.0, macs: list[str] | None = None) -> Inventory:
    return Inventory(manufacturer="Dell Inc.", model="PowerEdge R730", memory_gib=memory, gpus=gpus, macs=macs or [MAC])


V100 = "Tesla V100-PCIE-32GB"


@pytest.mark.parametrize(
    ("requirements", "inventory", "expected"),
    [
        (Requirements(), _inventory([]), []),
        (Requirements(gpu_model="V100", gpu_count=2), _inventory([V100, V100]), []),
        (Requirements(gpu_model="v100 pcie", gpu_count=1), _inventory([V100]), []),
        (Requirements(gpu_count=2), _inventory(["NVIDIA A16"] * 2), []),
        (
            Requirements(gpu_model="V100", gpu_count=2),
            _inventory([V100]),
            [
                "gpu_count: Redfish lists Tesla V100-PCIE-32GB among the PCIe devices, "
                "the cluster needs 2 GPU(s) matching 'V100'"
            ],
        ),
        (
            Requirements(gpu_model="A100"),
            _inventory([V100]),
            [
                "gpu_model: Redfish lists Tesla V100-PCIE-32GB among the PCIe devices, "
                "the cluster needs 1 GPU(s) matching 'A100'"
            ],
        ),
        (
            Requirements(gpu_count=1),
            _inventory([]),
            ["gpu_count: Redfish lists no GPU among the PCIe devices, the cluster needs 1 GPU(s)"],
        ),
        (
            Requirements(min_memory_gib=512),
            _inventory([], memory=256),
            ["min_memory_gib: Redfish reports 256 GiB, the cluster needs at least 512"],
        ),
        (
            Requirements(min_memory_gib=64),
            _inventory([], memory=None),
            ["min_memory_gib: Redfish reports no MemorySummary.TotalSystemMemoryGiB to check it against"],
        ),
        (
            Requirements(),
            _inventory([], macs=["aa:bb:cc:dd:ee:ff"]),
            [f"boot_mac: {MAC} is not one of the server's NICs (aa:bb:cc:dd:ee:ff)"],
        ),
        (Requirements(), Inventory(macs=[]), []),  # a BMC that lists no NIC cannot contradict the MAC
    ],
)
def test_inventory_mismatches(requirements: Requirements, inventory: Inventory, expected: list[str]) -> None:
    assert inventory_mismatches(requirements, inventory, MAC) == expected


@pytest.mark.parametrize(
    ("requirements", "facts", "expected_fields"),
    [
        (Requirements(gpu_model="V100", gpu_count=2, min_memory_gib=128), {}, []),
        (Requirements(gpu_model="V100"), {"gpu_model": V100}, []),
        (Requirements(gpu_model="A100"), {"gpu_model": V100}, ["gpu_model"]),
        (Requirements(gpu_count=2), {"gpu_count": 1}, ["gpu_count"]),
        (Requirements(gpu_count=2), {"gpu_count": 4}, []),
        (Requirements(min_memory_gib=512), {"memory_gib": 256}, ["min_memory_gib"]),
        (Requirements(), {"gpu_count": 0, "memory_gib": 1}, []),
    ],
)
def test_fact_mismatches(requirements: Requirements, facts: dict[str, Any], expected_fields: list[str]) -> None:
    assert [r.split(":")[0] for r in fact_mismatches(requirements, facts)] == expected_fields


def test_inventory_from_redfish_readings() -> None:
    system = {"Manufacturer": "Dell Inc.", "Model": "PowerEdge R730", "MemorySummary": {"TotalSystemMemoryGiB": 384}}
    pcie = [
        {"name": "NVIDIA Tesla V100", "manufacturer": "NVIDIA Corporation", "model": V100, "classes": []},
        {"name": "PERC H730P", "manufacturer": "Broadcom / LSI", "model": "PERC H730P Mini", "classes": []},
        {"name": "3D", "manufacturer": "x", "model": "GPU-X", "classes": ["ProcessingAccelerators"]},
    ]
    nics = [{"mac": "00-5C-52-31-3A-9C"}, {"mac": None}, {"mac": "garbage"}]
    inventory = inventory_from(system, pcie, nics)
    assert inventory.as_dict() == {
        "manufacturer": "Dell Inc.",
        "model": "PowerEdge R730",
        "memory_gib": 384.0,
        "gpu_count": 2,
        "gpus": [V100, "GPU-X"],
        "macs": [MAC],
    }


# ------------------------------------------------------------------------------------- pools from the inventory
FULL_HOST_VARS = {
    "bmc_url": "https://idrac-1.example",
    "bmc_username": "root",
    "bmc_password": "secret",
    "bmc_personality": "idrac8",
    "boot_mac": "00:5c:52:31:3a:9c",
    "bmc_validate_certs": False,
    "bmc_ca_cert": "/etc/ca.pem",
    "root_disk": {"wwn": "0x5000c500a1b2c3d4"},
    "host_facts": {"gpu_model": "V100", "gpu_count": 2},
    "bmc_system_path": "/redfish/v1/Systems/System.Embedded.1",
    "ansible_connection": "local",  # not a pool host key: never passed on
}
FULL_ENTRY = {
    "name": "r730-1",
    "bmc_url": "https://idrac-1.example",
    "username": "root",
    "password": "secret",
    "personality": "idrac8",
    "boot_mac": "00:5c:52:31:3a:9c",
    "validate_certs": False,
    "ca_cert": "/etc/ca.pem",
    "root_disk": {"wwn": "0x5000c500a1b2c3d4"},
    "system_path": "/redfish/v1/Systems/System.Embedded.1",
    "facts": {"gpu_model": "V100", "gpu_count": 2},
}
EMPTY_ENTRY = {
    "name": "r730-1",
    "bmc_url": "",
    "username": "",
    "password": "",
    "personality": None,
    "boot_mac": "",
    "validate_certs": True,
    "ca_cert": None,
    "root_disk": {},
    "system_path": None,
    "facts": {},
}


@pytest.mark.parametrize(
    ("names", "groups", "host_vars", "expected"),
    [
        pytest.param(
            ["lab"],
            {"pool_lab": ["r730-1"]},
            {"r730-1": FULL_HOST_VARS},
            [{"name": "lab", "hosts": [FULL_ENTRY]}],
            id="every-variable",
        ),
        pytest.param(
            ["lab"],
            {"pool_lab": ["r730-1"]},
            {"r730-1": {}},
            [{"name": "lab", "hosts": [EMPTY_ENTRY]}],
            id="none-set-passed-empty",
        ),
        pytest.param(
            ["lab"],
            {"pool_lab": ["r730-1"]},
            {"r730-1": {"bmc_validate_certs": None, "host_facts": None}},
            [{"name": "lab", "hosts": [EMPTY_ENTRY]}],
            id="null-is-not-set",
        ),
        pytest.param(
            ["lab", "lab", ""], {"pool_lab": []}, {}, [{"name": "lab", "hosts": []}], id="distinct-names-only"
        ),
        pytest.param(
            ["gone"], {"pool_lab": ["r730-1"]}, {}, [{"name": "gone", "hosts": []}], id="unknown-pool-is-empty"
        ),
        pytest.param(
            ["b", "a"],
            {"pool_a": ["a-1"], "pool_b": ["b-1"]},
            {},
            [
                {"name": "b", "hosts": [{**EMPTY_ENTRY, "name": "b-1"}]},
                {"name": "a", "hosts": [{**EMPTY_ENTRY, "name": "a-1"}]},
            ],
            id="order-kept",
        ),
    ],
)
def test_pools_from_inventory(
    names: list[str], groups: dict[str, list[str]], host_vars: dict[str, dict[str, Any]], expected: list[dict[str, Any]]
) -> None:
    assert pool.pools_from_inventory(names, groups, host_vars) == expected


def test_pool_entries_carry_only_host_claim_keys() -> None:
    """Every key the filter fills is one ``parse_hosts`` accepts, so no inventory entry is refused as a typo."""
    entry = pool.pools_from_inventory(["lab"], {"pool_lab": ["r730-1"]}, {"r730-1": FULL_HOST_VARS})[0]["hosts"][0]
    assert set(entry) == set(pool.HOST_KEYS)
