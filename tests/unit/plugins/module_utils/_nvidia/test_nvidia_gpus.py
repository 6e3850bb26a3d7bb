"""The GPU table: names and PCI ids resolve to the right row, every row is well-formed and cited."""

from __future__ import annotations

import re

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._nvidia import gpus
from ansible_collections.metalplane.inference.plugins.module_utils._nvidia.gpus import (
    ARCHITECTURES,
    MODELS,
    OPEN_REQUIRED,
    OPEN_SUPPORTED,
    OPEN_UNSUPPORTED,
    SOURCES,
    UnknownGpu,
    lookup,
)


@pytest.mark.parametrize(
    ("given", "model", "architecture"),
    [
        ("Tesla V100-PCIE-32GB", "Tesla V100-PCIE-32GB", "Volta"),  # nvidia-smi's name
        ("V100-PCIE-32GB", "Tesla V100-PCIE-32GB", "Volta"),
        ("NVIDIA Tesla V100-PCIE-16GB", "Tesla V100-PCIE-16GB", "Volta"),  # the lab BMC's PCIe device name
        ("GV100GL [Tesla V100 PCIe 32GB]", "Tesla V100-PCIE-32GB", "Volta"),  # lspci style
        ("v100", "Tesla V100", "Volta"),  # family row
        ("0x1DB6", "Tesla V100-PCIE-32GB", "Volta"),
        ("10de:1db6", "Tesla V100-PCIE-32GB", "Volta"),
        ("Tesla P100-PCIE-16GB", "Tesla P100-PCIE-16GB", "Pascal"),
        ("P40", "Tesla P40", "Pascal"),  # not P4
        ("Tesla T4", "Tesla T4", "Turing"),
        ("0x1EB8", "Tesla T4", "Turing"),
        ("A100", "NVIDIA A100", "Ampere"),  # not A10; and not a PCI id although it is hex
        ("NVIDIA A10", "NVIDIA A10", "Ampere"),
        ("NVIDIA A100 80GB PCIe", "NVIDIA A100 80GB PCIe", "Ampere"),
        ("L40S", "NVIDIA L40S", "Ada Lovelace"),  # not L40 or L4
        ("NVIDIA L4", "NVIDIA L4", "Ada Lovelace"),
        ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe", "Hopper"),
        ("H100 NVL", "NVIDIA H100 NVL", "Hopper"),
        ("GH200 480GB", "NVIDIA GH200", "Hopper"),  # not H200
        ("NVIDIA H200", "NVIDIA H200", "Hopper"),
        ("B200", "NVIDIA B200", "Blackwell"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "NVIDIA RTX PRO 6000 Blackwell Server Edition", "Blackwell"),
    ],
)
def test_lookup(given: str, model: str, architecture: str) -> None:
    found = lookup(given)
    assert (found.name, found.architecture) == (model, architecture)


@pytest.mark.parametrize("given", ["Radeon Instinct MI300X", "0x9999", "10de:ffff", "GeForce 8800", ""])
def test_unknown_gpus_are_refused_with_the_known_list(given: str) -> None:
    with pytest.raises(UnknownGpu, match=r"known: .*V100"):
        lookup(given)


@pytest.mark.parametrize(
    ("given", "support"),
    [
        ("V100", OPEN_UNSUPPORTED),
        ("P100", OPEN_UNSUPPORTED),
        ("T4", OPEN_SUPPORTED),
        ("H100", OPEN_SUPPORTED),
        ("GH200", OPEN_REQUIRED),
        ("B200", OPEN_REQUIRED),
    ],
)
def test_open_module_support(given: str, support: str) -> None:
    assert lookup(given).open_support == support


def test_every_row_is_well_formed_and_cited() -> None:
    ids: dict[str, str] = {}
    for model in MODELS:
        assert model.architecture in ARCHITECTURES, model.name
        assert model.sources, f"{model.name}: no source"
        assert set(model.sources) <= set(SOURCES), model.name
        assert gpus.fold(model.name), model.name
        for pci in model.pci_ids:
            assert re.fullmatch(r"[0-9a-f]{4}", pci), (model.name, pci)
            assert pci not in ids, f"{pci} in both {ids.get(pci)} and {model.name}"
            ids[pci] = model.name
            assert lookup(f"0x{pci}") is model
        assert lookup(model.name) is model, f"{model.name} resolves to another row"
    for arch in ARCHITECTURES.values():
        assert set(arch.sources) <= set(SOURCES), arch.name
        assert arch.gsp is (arch.open_module != OPEN_UNSUPPORTED), arch.name  # GSP from Turing on


def test_as_dict_carries_the_facts_the_role_uses() -> None:
    row = lookup("0x1DB6").as_dict()
    assert row["pci_ids"] == ["0x1DB6"]
    assert (row["open_module"], row["gsp"], row["large_bar"], row["last_branch"]) == (
        OPEN_UNSUPPORTED,
        False,
        True,
        580,
    )
