# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA GPU models and architectures: what the driver preflight needs to know about each GPU.

Why: which kernel module flavour a GPU can run (proprietary, open, or only one of them), which
driver branches still support it, whether it carries a GSP and whether its BAR needs memory-mapped
I/O above 4 GB are facts of the GPU, not of the host; writing them once, as data with a source per
row, lets the preflight decide before anything is installed and lets a new GPU be one table row.

A GPU is named the way users and BMCs name it: a model name (``Tesla V100-PCIE-32GB``, ``V100``,
``NVIDIA H100 PCIe``) or a PCI device id (``0x1DB6``, ``10de:1db6``). Names are matched after
folding case and dropping everything but letters and digits, the longest known name contained in
the given one winning (``Tesla V100-PCIE-32GB`` is the V100 PCIe 32 GB row, not the ``V100`` family).
A bare four-digit hex string is never taken for a PCI id (``A100`` is valid hex).

Sources (cited per row by key):

* ``open-readme``: NVIDIA/open-gpu-kernel-modules ``README.md``, section "Compatible GPUs": "can be
  used on any Turing or later GPU", with the product / PCI ID table the ids below come from.
* ``driver-readme``: the NVIDIA Linux driver README (``README.txt`` in every ``.run``), Appendix A
  "Supported NVIDIA GPU Products" (PCI ids of the GPUs the open table does not list: Pascal, Volta)
  and chapter "Kernel Modules": the proprietary flavour "is required for older GPUs from the Maxwell,
  Pascal, or Volta architectures"; the open flavour is the default since the 560 series.
* ``legacy-580``: NVIDIA's Unix driver deprecation notice: "The release 580 series will be the last
  to support GPUs based on the Maxwell, Pascal, and Volta architectures."
* ``open-transition``: NVIDIA technical blog "NVIDIA Transitions Fully Towards Open-Source GPU Kernel
  Modules" (July 2024): Grace Hopper and Blackwell platforms must use the open modules; the
  proprietary ones are unsupported there.
* ``cuda-cc``: the CUDA C++ Programming Guide, "Compute Capabilities" (per-GPU table on NVIDIA's
  "CUDA GPUs" page): the compute capability of each row.
* ``cuda-release-notes``: the CUDA Toolkit release notes ("Table 3: CUDA Toolkit and Corresponding
  Driver Versions" plus the release's new-architecture note): the first driver branch that supports an
  architecture is the one that shipped with the first CUDA release for it (CUDA 8.0 / 367 Pascal,
  9.0 / 384 Volta, 10.0 / 410 Turing, 11.0 / 450 Ampere, 11.8 / 520 Ada Lovelace and Hopper,
  12.8 / 570 Blackwell).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# How a GPU relates to the open kernel module flavour.
OPEN_UNSUPPORTED = "unsupported"  # proprietary only (Maxwell, Pascal, Volta)
OPEN_SUPPORTED = "supported"  # either flavour; open is the default since OPEN_DEFAULT_BRANCH
OPEN_REQUIRED = "required"  # open only (Grace Hopper, Blackwell)

# The first branch whose installer picks the open flavour by default for GPUs that support it
# (driver-readme, "Kernel Modules"); before it the installer's default was proprietary.
OPEN_DEFAULT_BRANCH = 560
# The first branch that shipped the open kernel modules at all (open-readme history: 515.43.04).
OPEN_FIRST_BRANCH = 515

PCI_VENDOR_NVIDIA = "10de"

# The documents the rows and rules cite, by key (full names in the module docstring above and in
# docs/modules/nvidia.md). Returned with every matrix row so a decision carries its evidence.
SOURCES: dict[str, str] = {
    "open-readme": "NVIDIA/open-gpu-kernel-modules README.md: 'Compatible GPUs', 'Supported Linux Kernel Versions'",
    "driver-readme": "NVIDIA Linux driver README: Appendix A 'Supported NVIDIA GPU Products', chapter 'Kernel Modules'",
    "legacy-580": "NVIDIA Unix driver deprecation notice: the 580 series is the last for Maxwell, Pascal and Volta",
    "open-transition": "NVIDIA technical blog 'NVIDIA Transitions Fully Towards Open-Source GPU Kernel Modules' (2024)",
    "cuda-cc": "CUDA C++ Programming Guide: 'Compute Capabilities'",
    "cuda-release-notes": "CUDA Toolkit release notes: 'CUDA Toolkit and Corresponding Driver Versions'",
    "gsp-readme": "NVIDIA Linux driver README: chapter 'GSP Firmware' (NVreg_EnableGpuFirmware)",
    "installer": "nvidia-installer --help: --module-signing-secret-key, --module-signing-public-key",
    "reference-deployment": "this collection's reference deployment: Dell R730, 2x Tesla V100-PCIE-32GB, driver 580",
    "dell-bios": "Dell PowerEdge BIOS attributes via iDRAC Redfish: Bios.Attributes SecureBoot, BootMode, MmioAbove4Gb",
    "dmtf-secureboot": "DMTF Redfish schema SecureBoot v1 (SecureBootEnable, SecureBootCurrentBoot)",
    "dmtf-boot": "DMTF Redfish schema ComputerSystem v1 (Boot.BootSourceOverrideMode)",
    "bar1": "nvidia-smi -q 'BAR1 Memory Usage: Total': a BAR1 above 4 GiB is placed only with MMIO above 4 GB on",
}


@dataclass(frozen=True)
class Architecture:
    """One GPU architecture and what every GPU of it shares."""

    name: str  # as NVML/go-nvlib spell it (the DRA driver's ``architecture`` attribute)
    open_module: str  # OPEN_* above: the default for the architecture's GPUs
    gsp: bool  # carries a GPU System Processor (Turing and later); open modules need its firmware
    first_branch: int  # the first driver branch that supports it (cuda-release-notes)
    last_branch: int | None  # the last driver branch that supports it; None = current
    sources: tuple[str, ...]


ARCHITECTURES: dict[str, Architecture] = {
    # Pascal and Volta: proprietary only (driver-readme), no GSP, last branch 580 (legacy-580).
    "Pascal": Architecture(
        "Pascal", OPEN_UNSUPPORTED, False, 367, 580, ("driver-readme", "legacy-580", "cuda-release-notes")
    ),
    "Volta": Architecture(
        "Volta", OPEN_UNSUPPORTED, False, 384, 580, ("driver-readme", "legacy-580", "cuda-release-notes")
    ),
    # Turing and later: open supported (open-readme), GSP present.
    "Turing": Architecture("Turing", OPEN_SUPPORTED, True, 410, None, ("open-readme", "cuda-release-notes")),
    "Ampere": Architecture("Ampere", OPEN_SUPPORTED, True, 450, None, ("open-readme", "cuda-release-notes")),
    "Ada Lovelace": Architecture(
        "Ada Lovelace", OPEN_SUPPORTED, True, 520, None, ("open-readme", "cuda-release-notes")
    ),
    "Hopper": Architecture("Hopper", OPEN_SUPPORTED, True, 520, None, ("open-readme", "cuda-release-notes")),
    # Blackwell: open only (open-transition); first supported by the 570 branch (cuda-release-notes).
    "Blackwell": Architecture("Blackwell", OPEN_REQUIRED, True, 570, None, ("open-transition", "cuda-release-notes")),
}


@dataclass(frozen=True)
class GpuModel:
    """One GPU product (or a family of products that share every fact below)."""

    name: str  # canonical name, as nvidia-smi prints it where known
    architecture: str  # key of ARCHITECTURES
    compute_capability: str  # "7.0" (cuda-cc)
    memory_gib: int | None  # None for a family row whose members differ
    pci_ids: tuple[str, ...]  # PCI device ids, lower-case hex without 0x (open-readme / driver-readme)
    aliases: tuple[str, ...] = ()  # other names users and BMCs write
    # BAR1 above 4 GiB: the GPU maps (much of) its memory through a 64-bit BAR that the firmware
    # only places when "memory-mapped I/O above 4 GB" is on. True for the data center boards with
    # 16 GiB or more (nvidia-smi -q, "BAR1 Memory Usage: Total"); the T4 maps 256 MiB.
    large_bar: bool = True
    open_module: str | None = None  # overrides the architecture's (Grace Hopper: required)
    sources: tuple[str, ...] = ()

    @property
    def arch(self) -> Architecture:
        return ARCHITECTURES[self.architecture]

    @property
    def open_support(self) -> str:
        return self.open_module or self.arch.open_module

    def as_dict(self) -> dict[str, object]:
        return {
            "model": self.name,
            "architecture": self.architecture,
            "compute_capability": self.compute_capability,
            "memory_gib": self.memory_gib,
            "pci_ids": [f"0x{i.upper()}" for i in self.pci_ids],
            "open_module": self.open_support,
            "gsp": self.arch.gsp,
            "large_bar": self.large_bar,
            "last_branch": self.arch.last_branch,
            "sources": list(self.sources or self.arch.sources),
        }


MODELS: tuple[GpuModel, ...] = (
    # ---- Pascal (driver-readme Appendix A; cuda-cc 6.0 / 6.1)
    GpuModel("Tesla P100-PCIE-16GB", "Pascal", "6.0", 16, ("15f8",), sources=("driver-readme",)),
    GpuModel("Tesla P100-PCIE-12GB", "Pascal", "6.0", 12, ("15f7",), sources=("driver-readme",)),
    GpuModel("Tesla P100-SXM2-16GB", "Pascal", "6.0", 16, ("15f9",), sources=("driver-readme",)),
    GpuModel("Tesla P100", "Pascal", "6.0", None, (), aliases=("P100",), sources=("driver-readme",)),
    GpuModel("Tesla P40", "Pascal", "6.1", 24, ("1b38",), aliases=("P40",), sources=("driver-readme",)),
    GpuModel("Tesla P4", "Pascal", "6.1", 8, ("1bb3",), aliases=("P4",), large_bar=False, sources=("driver-readme",)),
    # ---- Volta (driver-readme Appendix A; cuda-cc 7.0). The reference R730 carries 2x V100-PCIE-32GB.
    GpuModel("Tesla V100-SXM2-16GB", "Volta", "7.0", 16, ("1db1",), sources=("driver-readme",)),
    GpuModel("Tesla V100-PCIE-16GB", "Volta", "7.0", 16, ("1db4",), sources=("driver-readme",)),
    GpuModel("Tesla V100-SXM2-32GB", "Volta", "7.0", 32, ("1db5",), sources=("driver-readme",)),
    GpuModel("Tesla V100-PCIE-32GB", "Volta", "7.0", 32, ("1db6",), sources=("driver-readme",)),
    GpuModel("Tesla V100S-PCIE-32GB", "Volta", "7.0", 32, ("1df6",), aliases=("V100S",), sources=("driver-readme",)),
    GpuModel("Tesla V100", "Volta", "7.0", None, (), aliases=("V100", "GV100"), sources=("driver-readme",)),
    # ---- Turing (open-readme "Tesla T4 | 1EB8"; cuda-cc 7.5)
    GpuModel("Tesla T4", "Turing", "7.5", 16, ("1eb8",), aliases=("T4",), large_bar=False, sources=("open-readme",)),
    # ---- Ampere (open-readme; cuda-cc 8.0 for GA100, 8.6 for GA10x)
    GpuModel("NVIDIA A100-SXM4-40GB", "Ampere", "8.0", 40, ("20b0",), sources=("open-readme",)),
    GpuModel("NVIDIA A100-SXM4-80GB", "Ampere", "8.0", 80, ("20b2",), sources=("open-readme",)),
    GpuModel(
        "NVIDIA A100 80GB PCIe", "Ampere", "8.0", 80, ("20b5",), aliases=("A100-PCIE-80GB",), sources=("open-readme",)
    ),
    GpuModel("NVIDIA A100-PCIE-40GB", "Ampere", "8.0", 40, ("20f1",), sources=("open-readme",)),
    GpuModel("NVIDIA A100", "Ampere", "8.0", None, (), aliases=("A100",), sources=("open-readme",)),
    GpuModel("NVIDIA A30", "Ampere", "8.0", 24, ("20b7",), aliases=("A30",), sources=("open-readme",)),
    GpuModel("NVIDIA A40", "Ampere", "8.6", 48, ("2235",), aliases=("A40",), sources=("open-readme",)),
    GpuModel("NVIDIA A10", "Ampere", "8.6", 24, ("2236",), aliases=("A10",), sources=("open-readme",)),
    # The A16 shares device id 25B6 with the A2 (told apart by the subsystem id); both GA107, 8.6.
    GpuModel("NVIDIA A16", "Ampere", "8.6", 16, ("25b6",), aliases=("A16",), sources=("open-readme",)),
    # ---- Ada Lovelace (open-readme; cuda-cc 8.9)
    GpuModel("NVIDIA L4", "Ada Lovelace", "8.9", 24, ("27b8",), aliases=("L4",), sources=("open-readme",)),
    GpuModel("NVIDIA L40", "Ada Lovelace", "8.9", 48, ("26b5",), aliases=("L40",), sources=("open-readme",)),
    GpuModel("NVIDIA L40S", "Ada Lovelace", "8.9", 48, ("26b9",), aliases=("L40S",), sources=("open-readme",)),
    # ---- Hopper (open-readme; cuda-cc 9.0)
    GpuModel("NVIDIA H100 PCIe", "Hopper", "9.0", 80, ("2331",), sources=("open-readme",)),
    GpuModel("NVIDIA H100 80GB HBM3", "Hopper", "9.0", 80, ("2330",), aliases=("H100 SXM",), sources=("open-readme",)),
    GpuModel("NVIDIA H100 NVL", "Hopper", "9.0", 94, ("2321",), sources=("open-readme",)),
    GpuModel("NVIDIA H100", "Hopper", "9.0", None, (), aliases=("H100",), sources=("open-readme",)),
    GpuModel("NVIDIA H200", "Hopper", "9.0", 141, ("2335",), aliases=("H200",), sources=("open-readme",)),
    # Grace Hopper: open modules only (open-transition).
    GpuModel(
        "NVIDIA GH200",
        "Hopper",
        "9.0",
        None,
        ("2342",),
        aliases=("GH200",),
        open_module=OPEN_REQUIRED,
        sources=("open-readme", "open-transition"),
    ),
    # ---- Blackwell (open-transition; cuda-cc 10.0 data center, 12.0 RTX PRO). PCI ids not listed
    # here: the README version this table was checked against predates them; match by name.
    GpuModel("NVIDIA B200", "Blackwell", "10.0", None, (), aliases=("B200",), sources=("open-transition", "cuda-cc")),
    GpuModel(
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "Blackwell",
        "12.0",
        96,
        (),
        aliases=("RTX PRO 6000 Blackwell",),
        sources=("open-transition", "cuda-cc"),
    ),
)

_PCI_ID = re.compile(r"^(?:0x([0-9a-f]{4})|(?:10de:)([0-9a-f]{4}))$")


class UnknownGpu(ValueError):
    """The name or PCI id matches no row; the message lists what is known."""


def fold(text: str) -> str:
    """Case-folded letters and digits only: ``Tesla V100-PCIE-32GB`` -> ``teslav100pcie32gb``."""
    return re.sub(r"[^0-9a-z]", "", text.lower())


def _names(model: GpuModel) -> list[str]:
    return [fold(n) for n in (model.name, *model.aliases)] + [fold(_short(model.name))]


def _short(name: str) -> str:
    """The name without the vendor/brand prefix (``NVIDIA``, ``Tesla``)."""
    return re.sub(r"^(nvidia\s+)?(tesla\s+)?", "", name, flags=re.IGNORECASE)


def pci_id(text: str) -> str | None:
    """The device id of ``0x1DB6`` or ``10de:1db6`` (lower-case hex), else None."""
    match = _PCI_ID.match(text.strip().lower())
    return (match.group(1) or match.group(2)) if match else None


def lookup(text: str) -> GpuModel:
    """The row for a model name or PCI device id; raises ``UnknownGpu``."""
    device = pci_id(text)
    if device is not None:
        for model in MODELS:
            if device in model.pci_ids:
                return model
        raise UnknownGpu(f"PCI device id {text!r} is not a known NVIDIA GPU ({known_summary()})")
    folded = fold(text)
    best: tuple[int, GpuModel] | None = None
    for model in MODELS:
        for name in _names(model):
            if name and name in folded and (best is None or len(name) > best[0]):
                best = (len(name), model)
    if best is None:
        raise UnknownGpu(f"{text!r} is not a known NVIDIA GPU model ({known_summary()})")
    return best[1]


def known_summary() -> str:
    return "known: " + ", ".join(sorted({_short(m.name) for m in MODELS}))
