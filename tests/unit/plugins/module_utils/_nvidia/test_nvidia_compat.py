"""The compatibility matrix, table-driven: architecture x module flavour x branch boundary, OS/kernel, BIOS."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._nvidia.compat import (
    RULES,
    BiosFacts,
    GpuSpec,
    Target,
    decide,
    parse_kernel,
)
from ansible_collections.metalplane.inference.plugins.module_utils._nvidia.driver_version import parse_version
from ansible_collections.metalplane.inference.plugins.module_utils._nvidia.gpus import SOURCES, lookup

# One representative GPU per architecture (and the two open-only platforms).
ARCH_GPUS = {
    "Pascal": "P100",
    "Volta": "V100-PCIE-32GB",
    "Turing": "T4",
    "Ampere": "A100",
    "Ada Lovelace": "L40S",
    "Hopper": "H100 PCIe",
    "Grace Hopper": "GH200",
    "Blackwell": "B200",
}
GOOD_BIOS = BiosFacts(secure_boot=False, boot_mode="UEFI", mmio_above_4gb=True)


def target(*models: str, driver: str = "580.126.20", module: str = "auto", **kw: Any) -> Target:
    gpus = tuple(GpuSpec(f"gpus[{i}]", m, 1, lookup(m)) for i, m in enumerate(models))
    return Target(gpus=gpus, driver=parse_version(driver), kernel_module_type=module, **kw)


def refusals(decision: Any) -> list[tuple[str, str]]:
    return [(p.rule, p.field) for p in decision.problems]


# (architecture, kernel_module_type, driver) -> (module chosen or None, refusals as (rule, field))
MATRIX = [
    # Pascal/Volta: proprietary only, branch <= 580.
    ("Pascal", "auto", "580.126.20", "proprietary", []),
    ("Pascal", "proprietary", "580", "proprietary", []),
    ("Pascal", "auto", "581.10", None, [("branch-last", "driver_version")]),
    ("Pascal", "open", "580.126.20", None, [("module-open-unsupported", "kernel_module_type")]),
    ("Volta", "auto", "580.126.20", "proprietary", []),
    ("Volta", "auto", "580.x", "proprietary", []),
    ("Volta", "proprietary", "579.1", "proprietary", []),
    ("Volta", "auto", "590.48.01", None, [("branch-last", "driver_version")]),
    ("Volta", "proprietary", "595.91.07", None, [("branch-last", "driver_version")]),
    ("Volta", "open", "580.126.20", None, [("module-open-unsupported", "kernel_module_type")]),
    (
        "Volta",
        "open",
        "590.48.01",
        None,
        [("branch-last", "driver_version"), ("module-open-unsupported", "kernel_module_type")],
    ),
    ("Volta", "proprietary", "383.1", None, [("branch-first", "driver_version")]),
    ("Volta", "proprietary", "384.81", "proprietary", []),
    # Turing..Hopper: either flavour; auto follows the branch's default (open from 560).
    ("Turing", "auto", "590.48.01", "open", []),
    ("Turing", "auto", "560.28.03", "open", []),
    ("Turing", "auto", "555.42.02", "proprietary", []),
    ("Turing", "open", "515.43.04", "open", []),
    ("Turing", "open", "510.47.03", None, [("module-open-branch", "driver_version")]),
    ("Turing", "proprietary", "595.91.07", "proprietary", []),
    ("Ampere", "auto", "580.126.20", "open", []),
    ("Ampere", "proprietary", "580.126.20", "proprietary", []),
    ("Ampere", "auto", "440.1", None, [("branch-first", "driver_version")]),
    ("Ada Lovelace", "auto", "520.61.05", "proprietary", []),
    ("Ada Lovelace", "open", "580.126.20", "open", []),
    ("Ada Lovelace", "auto", "515.43.04", None, [("branch-first", "driver_version")]),
    ("Hopper", "auto", "595.91.07", "open", []),
    ("Hopper", "proprietary", "580.126.20", "proprietary", []),
    # Grace Hopper and Blackwell: open only; Blackwell from 570.
    ("Grace Hopper", "auto", "555.42.02", "open", []),
    ("Grace Hopper", "proprietary", "580.126.20", None, [("module-open-required", "kernel_module_type")]),
    ("Blackwell", "auto", "570.86.15", "open", []),
    ("Blackwell", "open", "595.91.07", "open", []),
    ("Blackwell", "auto", "565.57.01", None, [("branch-first", "driver_version")]),
    ("Blackwell", "proprietary", "580.126.20", None, [("module-open-required", "kernel_module_type")]),
]


@pytest.mark.parametrize(("arch", "module", "driver", "chosen", "refused"), MATRIX)
def test_architecture_module_branch_matrix(
    arch: str, module: str, driver: str, chosen: str | None, refused: list[tuple[str, str]]
) -> None:
    decision = decide(target(ARCH_GPUS[arch], driver=driver, module=module))
    assert sorted(refusals(decision)) == sorted(refused)
    assert decision.kernel_module_type == chosen
    for problem in decision.problems:
        assert problem.fix
        assert problem.source
        assert problem.msg


def test_the_v100_message_names_the_field_and_the_fix() -> None:
    decision = decide(target("Tesla V100-PCIE-32GB", driver="590.48.01", module="open"))
    by_field = {p.field: p for p in decision.problems}
    assert "kernel_module_type=proprietary" in by_field["kernel_module_type"].fix
    assert "<= 580.x" in by_field["kernel_module_type"].fix
    assert "<= 580.x" in by_field["driver_version"].fix
    assert "2x" not in by_field["driver_version"].msg
    assert "1x Tesla V100-PCIE-32GB (Volta)" in by_field["driver_version"].msg


def test_gpus_needing_different_flavours_in_one_host_are_refused() -> None:
    decision = decide(target("V100", "B200", driver="580.126.20"))
    assert ("gpu-mixed-flavours", "gpus") in refusals(decision)
    assert decision.kernel_module_type is None


@pytest.mark.parametrize(
    ("models", "module", "driver", "gsp", "can_disable"),
    [
        (("V100",), "auto", "580", False, False),  # no GSP on Volta
        (("P100",), "proprietary", "580", False, False),
        (("T4",), "open", "580", True, False),  # open needs GSP firmware
        (("A100",), "proprietary", "580", True, True),  # NVreg_EnableGpuFirmware=0 possible
        (("H100",), "auto", "590", True, False),
        (("B200",), "auto", "580", True, False),
    ],
)
def test_gsp_firmware_follows_the_module_flavour(
    models: tuple[str, ...], module: str, driver: str, gsp: bool, can_disable: bool
) -> None:
    decision = decide(target(*models, driver=driver, module=module))
    assert decision.problems == []
    assert (decision.gsp_firmware, decision.gsp_firmware_can_disable) == (gsp, can_disable)
    assert any(r["rule"] == "gsp-firmware" for r in decision.rows)


# (model, (os_family, os_version, kernel), driver) -> refused rules; ok rules expected among rows
OS_ROWS = [
    ("V100", ("ubuntu", "24.04", "6.8.0-45-generic"), "580", ["os-known-bad"], []),
    ("V100", ("el", "10", "6.12.0-55.el10.x86_64"), "580.126.20", [], ["os-known-good", "kernel-min"]),
    ("V100", ("ubuntu", "24.04", "6.11.0-1-generic"), "580", [], ["kernel-min"]),  # a different series
    ("V100", ("ubuntu", "22.04", "6.8.0-45-generic"), "580", [], ["kernel-min"]),
    ("A100", ("ubuntu", "24.04", "6.8.0-45-generic"), "580", [], ["kernel-min"]),  # observed with Volta only
    ("V100", ("el", "7", "3.9.0"), "580", ["kernel-min"], []),
    ("V100", ("el", "7", "3.10.0-1160.el7.x86_64"), "580", [], ["kernel-min"]),
]


@pytest.mark.parametrize(("model", "os", "driver", "refused", "ok"), OS_ROWS)
def test_os_and_kernel_rows(
    model: str, os: tuple[str, str, str], driver: str, refused: list[str], ok: list[str]
) -> None:
    family, version, kernel = os
    decision = decide(target(model, driver=driver, os_family=family, os_version=version, kernel=parse_kernel(kernel)))
    assert [p.rule for p in decision.problems] == refused
    outcomes = {r["rule"]: r["outcome"] for r in decision.rows}
    for rule in ok:
        assert outcomes[rule] == "ok"
    if refused == ["os-known-bad"]:
        problem = decision.problems[0]
        assert problem.field == "os_version"
        assert "os_family=el" in problem.fix


BIOS_ROWS = [
    # (bios, boot_mode, model) -> refused (rule, field) and warned rules
    (GOOD_BIOS, "UEFI", "V100", [], []),
    (
        BiosFacts(secure_boot=True, boot_mode="UEFI", mmio_above_4gb=True, where={"secure_boot": "bmc: X.SecureBoot"}),
        "UEFI",
        "V100",
        [("bios-secure-boot", "bmc: X.SecureBoot")],
        [],
    ),
    (
        BiosFacts(secure_boot=False, boot_mode="Legacy", mmio_above_4gb=True),
        "UEFI",
        "V100",
        [("bios-boot-mode", "boot_mode")],
        [],
    ),
    (BiosFacts(secure_boot=False, boot_mode="Legacy", mmio_above_4gb=True), "Legacy", "V100", [], []),
    (
        BiosFacts(secure_boot=False, boot_mode="UEFI", mmio_above_4gb=False, where={"mmio_above_4gb": "bmc: M"}),
        "UEFI",
        "V100",
        [("bios-mmio-above-4gb", "bmc: M")],
        [],
    ),
    (BiosFacts(secure_boot=False, boot_mode="UEFI", mmio_above_4gb=False), "UEFI", "T4", [], []),  # small BAR
    (
        BiosFacts(secure_boot=None, boot_mode=None, mmio_above_4gb=None),
        "UEFI",
        "V100",
        [],
        ["bios-secure-boot", "bios-boot-mode", "bios-mmio-above-4gb"],
    ),
    (GOOD_BIOS, None, "V100", [], ["bios-boot-mode"]),  # the installer's mode not given
    (
        BiosFacts(secure_boot=True, boot_mode="Legacy", mmio_above_4gb=False),
        "UEFI",
        "A100",
        [
            ("bios-secure-boot", "Secure Boot"),
            ("bios-boot-mode", "boot_mode"),
            ("bios-mmio-above-4gb", "MMIO above 4 GB"),
        ],
        [],
    ),
]


@pytest.mark.parametrize(("bios", "boot_mode", "model", "refused", "warned"), BIOS_ROWS)
def test_bios_rows(
    bios: BiosFacts, boot_mode: str | None, model: str, refused: list[tuple[str, str]], warned: list[str]
) -> None:
    decision = decide(target(model, bios=bios, boot_mode=boot_mode))
    assert refusals(decision) == refused
    assert [w.rule for w in decision.warnings] == warned


def test_secure_boot_refusal_says_module_signing_is_out_of_scope() -> None:
    decision = decide(target("V100", bios=BiosFacts(secure_boot=True, boot_mode="UEFI", mmio_above_4gb=True)))
    (problem,) = decision.problems
    assert "out of scope" in problem.msg
    assert "SecureBoot=Disabled" in problem.fix


def test_without_bios_or_os_those_rows_do_not_apply() -> None:
    decision = decide(target("V100"))
    assert {r["rule"] for r in decision.rows} == {
        "branch-last",
        "branch-first",
        "module-open-unsupported",
        "module-auto",
        "gsp-firmware",
    }


def test_every_rule_cites_known_sources_and_every_row_carries_it() -> None:
    for rule in RULES:
        assert rule.sources, rule.id
        assert set(rule.sources) <= set(SOURCES), rule.id
    decision = decide(target("V100", bios=GOOD_BIOS, boot_mode="UEFI", os_family="el", os_version="10", kernel=(6, 12)))
    assert decision.rows
    assert all(r["source"] for r in decision.rows)


@pytest.mark.parametrize(
    ("text", "series"), [("6.12.0-55.el10.x86_64", (6, 12)), ("6.8.0-45-generic", (6, 8)), ("3.10", (3, 10))]
)
def test_parse_kernel(text: str, series: tuple[int, int]) -> None:
    assert parse_kernel(text) == series


@pytest.mark.parametrize("text", ["", "linux", "6", "v6.8"])
def test_parse_kernel_refuses_what_is_not_uname_r(text: str) -> None:
    with pytest.raises(ValueError, match="uname -r"):
        parse_kernel(text)
