"""A node's driver facts -> the GPU inventory entry its InferenceClass is generated from."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.inference_class import (
    inference_class_from_inventory,
)
from ansible_collections.metalplane.inference.plugins.module_utils._nvidia.inventory import (
    expected_gpus,
    gpu_inventory,
    memory_quantity,
)


def facts(*gpus: tuple[str, int], version: str = "580.105.08") -> dict[str, Any]:
    return {
        "version": version,
        "gpus": [{"index": i, "name": name, "memory_total_mib": mib} for i, (name, mib) in enumerate(gpus)],
    }


@pytest.mark.parametrize(
    ("mib", "quantity"),
    [
        (16384, "16Gi"),  # a V100-16GB as recent drivers report it
        (32768, "32Gi"),
        (16160, "16160Mi"),  # not a whole GiB: Kubernetes keeps Mi
        (46068, "46068Mi"),  # an L40S (Modelplane's example class)
        (1, "1Mi"),
    ],
)
def test_memory_is_written_as_kubernetes_writes_the_bytes(mib: int, quantity: str) -> None:
    assert memory_quantity(mib) == quantity


def test_two_v100s_become_one_entry_with_the_model_facts() -> None:
    found = gpu_inventory("r730", facts(("Tesla V100-PCIE-32GB", 32768), ("Tesla V100-PCIE-32GB", 32768)), "gpu")
    assert found == {
        "r730": {
            "pool": "gpu",
            "count": 2,
            "product": "Tesla V100-PCIE-32GB",
            "architecture": "Volta",
            "cuda_compute_capability": "7.0.0",
            "memory": "32Gi",
            "driver_version": "580.105.08",
        }
    }


def test_the_entry_makes_a_class_the_dra_driver_would_match() -> None:
    inventory = gpu_inventory("r730", facts(("Tesla V100-PCIE-16GB", 16384), ("Tesla V100-PCIE-16GB", 16384)), "gpu")
    made = inference_class_from_inventory("r730", inventory)
    device = made["spec"]["devices"][0]
    assert device["count"] == 2
    assert device["capacity"] == {"memory": {"value": "16Gi"}}
    assert device["attributes"] == {
        "productName": {"string": "Tesla V100-PCIE-16GB"},
        "architecture": {"string": "Volta"},
        "cudaComputeCapability": {"version": "7.0.0"},
    }


def test_a_reported_compute_capability_wins_over_the_table() -> None:
    given = facts(("NVIDIA L40S", 46068))
    given["gpus"][0]["compute_capability"] = "8.9"
    assert gpu_inventory("n1", given, "p")["n1"]["cuda_compute_capability"] == "8.9.0"


@pytest.mark.parametrize(
    ("given", "field", "says"),
    [
        (None, "nvidia_driver_facts", "mapping"),
        ({"gpus": []}, "nvidia_driver_facts.gpus", "no GPU"),
        (facts(("Tesla V100-PCIE-16GB", 16384), ("NVIDIA L40S", 46068)), "nvidia_driver_facts.gpus", "one model"),
        (facts(("Tesla V100-PCIE-16GB", 16384), ("Tesla V100-PCIE-16GB", 16160)), "nvidia_driver_facts.gpus", "one"),
        (facts(("", 16384)), "nvidia_driver_facts.gpus", "without its name"),
        (facts(("Tesla V100-PCIE-16GB", 0)), "nvidia_driver_facts.gpus", "without its name or memory"),
        (facts(("Quadro Imaginary 9000", 1024)), "nvidia_driver_facts.gpus[0].name", "not a known"),
        ({"gpus": [{"name": "Tesla V100-PCIE-16GB", "memory_total_mib": "16 GiB"}]}, "nvidia_driver_facts.gpus", "MiB"),
    ],
)
def test_what_cannot_make_one_class_is_refused(given: Any, field: str, says: str) -> None:
    with pytest.raises(InputError) as caught:
        gpu_inventory("r730", given, "gpu")
    assert caught.value.field == field
    assert says in caught.value.msg


@pytest.mark.parametrize(
    ("bmc_gpus", "expected"),
    [
        ([], []),
        (
            [{"model": "Tesla V100-PCIE-16GB"}, {"model": "Tesla V100-PCIE-16GB"}],
            [{"model": "Tesla V100-PCIE-16GB", "count": 2}],
        ),
        (
            [{"model": "NVIDIA L40S"}, {"model": "Tesla T4"}, {"model": "NVIDIA L40S"}],
            [{"model": "NVIDIA L40S", "count": 2}, {"model": "Tesla T4", "count": 1}],
        ),
    ],
)
def test_expected_gpus_groups_the_bmc_models(bmc_gpus: list[dict[str, str]], expected: list[dict[str, object]]) -> None:
    assert expected_gpus(bmc_gpus) == expected


@pytest.mark.parametrize(
    ("bmc_gpus", "field"),
    [({"model": "x"}, "gpus"), ([{"model": ""}], "gpus[0].model"), ([{"model": "T4"}, {}], "gpus[1].model")],
)
def test_expected_gpus_refuses_entries_without_a_model(bmc_gpus: object, field: str) -> None:
    with pytest.raises(InputError) as caught:
        expected_gpus(bmc_gpus)
    assert caught.value.field == field
