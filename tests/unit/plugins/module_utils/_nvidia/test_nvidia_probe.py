"""The node probe behind ``nvidia_driver_info``: its parsers, the reading over a fake node, the plan and checks.

Samples follow the documented formats (proc(5), mokutil(1), dkms(8)); the ``nvidia-smi -q -x`` cases read the
real H200 capture in ``tests/unit/fixtures/nvidia``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._nvidia.inventory import gpu_inventory
from ansible_collections.metalplane.inference.plugins.module_utils._nvidia.probe import (
    EFI_DIR,
    EFI_SECURE_BOOT,
    PROC_MODULES,
    PROC_VERSION,
    DkmsEntry,
    Reading,
    dkms_for_kernel,
    expected_counts,
    parse_dkms_status,
    parse_efivar_secure_boot,
    parse_license,
    parse_modules,
    parse_sb_state,
    plan,
    problems,
    read_node,
    smi_gpu_facts,
)

CAPTURE = Path(__file__).resolve().parents[3] / "fixtures" / "nvidia" / "h200-580.159.04-open"
KERNEL = "6.12.0-55.el10.x86_64"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nvidia_uvm 1875968 - - Live 0xffffffffc080c000 (O)\nnvidia 14299136 - - Live 0xffffffffc0400000 (O)\n",
         {"nvidia_uvm", "nvidia"}),
        ("Module                  Size  Used by\nnouveau              2813952  0\ndrm_ttm_helper 16384  1 nouveau\n",
         {"nouveau", "drm_ttm_helper"}),
        ("", set()),
    ],
)  # fmt: skip
def test_parse_modules_reads_proc_modules_and_lsmod(text: str, expected: set[str]) -> None:
    assert parse_modules(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("SecureBoot enabled\n", True),
        ("SecureBoot disabled\n", False),
        ("EFI variables are not supported on this system\n", False),
        ("Failed to read SecureBoot\n", None),
    ],
)
def test_parse_sb_state(text: str, expected: bool | None) -> None:
    assert parse_sb_state(text) is expected


@pytest.mark.parametrize(
    ("blob", "expected"),
    [(b"\x06\x00\x00\x00\x01", True), (b"\x06\x00\x00\x00\x00", False), (b"\x06\x00\x00\x00", None)],
)
def test_parse_efivar_secure_boot(blob: bytes, expected: bool | None) -> None:
    assert parse_efivar_secure_boot(blob) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nvidia/580.126.20, 6.12.0-55.el10.x86_64, x86_64: installed\n",
         [DkmsEntry("nvidia", "580.126.20", "6.12.0-55.el10.x86_64", "x86_64", "installed")]),
        ("nvidia, 580.65, 6.8.0-31-generic, x86_64: installed (WARNING! Diff between built and installed module!)\n",
         [DkmsEntry("nvidia", "580.65", "6.8.0-31-generic", "x86_64", "installed")]),
        ("nvidia/580.126.20: added\n", [DkmsEntry("nvidia", "580.126.20", None, None, "added")]),
        ("Error! no such thing\n\n", []),
    ],
)  # fmt: skip
def test_parse_dkms_status_both_formats(text: str, expected: list[DkmsEntry]) -> None:
    assert parse_dkms_status(text) == expected


@pytest.mark.parametrize(
    ("lines", "kernel", "installed"),
    [
        (["nvidia/580.126.20, 6.12.0-55.el10.x86_64, x86_64: installed"], KERNEL, "580.126.20"),
        (["nvidia/580.126.20, 6.12.0-40.el10.x86_64, x86_64: installed"], KERNEL, None),  # a kernel update
        (["nvidia/580.126.20, 6.12.0-55.el10.x86_64, x86_64: built"], KERNEL, None),
        (["zfs/2.2.0, 6.12.0-55.el10.x86_64, x86_64: installed"], KERNEL, None),
    ],
)
def test_dkms_for_kernel(lines: list[str], kernel: str, installed: str | None) -> None:
    assert dkms_for_kernel(parse_dkms_status("\n".join(lines)), kernel)["installed_version"] == installed


@pytest.mark.parametrize(
    ("text", "expected"), [("Dual MIT/GPL\n", "open"), ("NVIDIA\n", "proprietary"), ("GPL\n", None), ("", None)]
)
def test_parse_license(text: str, expected: str | None) -> None:
    assert parse_license(text) == expected


def test_smi_gpu_facts_from_a_real_capture_feed_the_inventory_filter() -> None:
    version, gpus, persistence = smi_gpu_facts((CAPTURE / "nvidia-smi-q.xml").read_text())
    assert version == "580.159.04"
    assert persistence is True
    assert gpus == [
        {
            "index": 0,
            "name": "NVIDIA H200",
            "uuid": "GPU-00000000-0000-0000-0000-000000000000",
            "pci_bus_id": "00000000:00:06.0",
            "memory_total_mib": 143771,
            "compute_capability": "9.0",
        }
    ]
    facts = Reading(kernel=KERNEL, loaded=True, version=version, gpus=gpus, persistence_mode=True).facts()
    entry = gpu_inventory("node", facts, "pool")["node"]
    assert (entry["count"], entry["memory"], entry["cuda_compute_capability"]) == (1, "143771Mi", "9.0.0")


@dataclass
class FakeNode:
    """A node made of files and command outputs; records what was run."""

    files: dict[str, bytes] = field(default_factory=dict)
    commands: dict[str, tuple[int, str, str]] = field(default_factory=dict)
    ran: list[list[str]] = field(default_factory=list)

    def which(self, name: str) -> str | None:
        return f"/usr/bin/{name}" if any(key.split()[0] == name for key in self.commands) else None

    def run(self, argv: list[str]) -> tuple[int, str, str]:
        self.ran.append(argv)
        key = " ".join([Path(argv[0]).name, *argv[1:]])
        return self.commands.get(key, (127, "", f"{key}: not answered"))

    def read(self, path: str) -> bytes | None:
        return self.files.get(path)

    def exists(self, path: str) -> bool:
        return path in self.files


SMI_XML = (CAPTURE / "nvidia-smi-q.xml").read_text()
PROC = (CAPTURE / "proc-version.txt").read_bytes()
DKMS_OK = (0, f"nvidia/580.159.04, {KERNEL}, x86_64: installed\n", "")

READINGS: list[tuple[str, FakeNode, Mapping[str, Any]]] = [
    (
        "a fresh host: nouveau loaded, no driver, legacy boot",
        FakeNode(files={PROC_MODULES: b"nouveau 2813952 0 - Live 0x0\n"}),
        {"loaded": False, "nouveau_loaded": True, "version": None, "secure_boot": False, "gpus": []},
    ),
    (
        "the driver loaded (proc and nvidia-smi), Secure Boot off by mokutil",
        FakeNode(
            files={PROC_VERSION: PROC},
            commands={
                "lsmod": (0, "Module Size Used by\nnvidia 14299136 0\n", ""),
                "nvidia-smi -q -x": (0, SMI_XML, ""),
                "mokutil --sb-state": (0, "SecureBoot disabled\n", ""),
                "dkms status": DKMS_OK,
            },
        ),
        {"loaded": True, "version": "580.159.04", "kernel_module_type": "open", "secure_boot": False,
         "persistence_mode": True},
    ),
    (
        "no /proc/driver file (the lab): version from nvidia-smi, flavour from modinfo, Secure Boot from efivars",
        FakeNode(
            files={EFI_DIR: b"", EFI_SECURE_BOOT: b"\x06\x00\x00\x00\x01"},
            commands={
                "lsmod": (0, "nvidia 1 0\n", ""),
                "nvidia-smi -q -x": (0, SMI_XML, ""),
                "modinfo -F license nvidia": (0, "NVIDIA\n", ""),
            },
        ),
        {"loaded": True, "version": "580.159.04", "kernel_module_type": "proprietary", "secure_boot": True},
    ),
    (
        "the module loaded but nvidia-smi cannot talk to it",
        FakeNode(
            files={EFI_DIR: b""},
            commands={
                "lsmod": (0, "nvidia 1 0\n", ""),
                "nvidia-smi -q -x": (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                                        "driver.\n", ""),
            },
        ),
        {"loaded": True, "version": None, "secure_boot": None, "gpus": []},
    ),
]  # fmt: skip


@pytest.mark.parametrize(("node", "expected"), [r[1:] for r in READINGS], ids=[r[0] for r in READINGS])
def test_read_node(node: FakeNode, expected: Mapping[str, Any]) -> None:
    reading = read_node(node, KERNEL)
    observed = {**vars(reading), **reading.facts()}
    assert {k: observed[k] for k in expected} == dict(expected)
    if expected.get("loaded") is False:
        assert not any(Path(argv[0]).name == "nvidia-smi" for argv in node.ran)  # nothing loads the module


def test_read_node_reports_dkms_for_the_given_kernel() -> None:
    node = FakeNode(commands={"dkms status": DKMS_OK})
    assert read_node(node, KERNEL).dkms["installed_version"] == "580.159.04"
    assert read_node(node, "6.12.0-99.el10.x86_64").dkms["installed_version"] is None


def _loaded(version: str = "580.126.20", flavour: str = "proprietary", **kw: Any) -> Reading:
    base: dict[str, Any] = {
        "kernel": KERNEL,
        "loaded": True,
        "version": version,
        "kernel_module_type": flavour,
        "gpus": [{"name": "Tesla V100-PCIE-16GB"}] * 2,
        "dkms": {"present": True, "installed_version": version},
    }
    return Reading(**{**base, **kw})


@pytest.mark.parametrize(
    ("reading", "version", "flavour", "action"),
    [
        (Reading(kernel=KERNEL), "580.126.20", "proprietary", "install"),
        (_loaded(), "580.126.20", "proprietary", "none"),
        (_loaded(), "580.126.20", "auto", "none"),
        (_loaded(), "580.105.08", "proprietary", "upgrade"),
        (_loaded(flavour="open"), "580.126.20", "proprietary", "upgrade"),
        (_loaded(), None, "auto", "none"),
    ],
)
def test_plan_is_idempotent_by_the_loaded_driver(reading: Reading, version: str, flavour: str, action: str) -> None:
    assert plan(reading, version, flavour)["action"] == action


V100X2 = [{"model": "V100-PCIE-16GB", "count": 2}]


@pytest.mark.parametrize(
    ("reading", "expected", "found"),
    [
        (_loaded(), V100X2, []),
        (_loaded(), ["Tesla V100-PCIE-16GB", "Tesla V100-PCIE-16GB"], []),
        (_loaded(gpus=[{"name": "Tesla V100-PCIE-16GB"}]), V100X2, ["nvidia-smi reports 1x"]),
        (_loaded(gpus=[{"name": "NVIDIA L4"}] * 2), V100X2, ["nvidia-smi reports 2x NVIDIA L4"]),
        (_loaded(secure_boot=True), V100X2, ["Secure Boot is on"]),
        (Reading(kernel=KERNEL), V100X2, ["not loaded"]),
        (_loaded(dkms={"present": True, "installed_version": None}), V100X2, ["DKMS has no nvidia module"]),
        (_loaded(version="580.105.08"), V100X2, ["driver 580.105.08 is loaded"]),
        (_loaded(flavour="open"), V100X2, ["the open kernel module is loaded"]),
    ],
)
def test_problems(reading: Reading, expected: list[Any], found: list[str]) -> None:
    got = problems(reading, "580.126.20", "proprietary", expected)
    assert len(got) == len(found), got
    for text, problem in zip(found, got, strict=True):
        assert text in problem


def test_expected_counts_by_the_gpu_table() -> None:
    assert expected_counts(["V100-PCIE-16GB", {"model": "Tesla V100-PCIE-16GB", "count": 1}]) == {
        "Tesla V100-PCIE-16GB": 2
    }
