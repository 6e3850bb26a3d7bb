# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA driver versions and branches, and what a host's driver says about itself.

Why: the preflight decides by branch (580 is the last with Volta), the driver role must know
whether the wanted version and flavour are already loaded before it installs anything, and both
must read the same text the same way. Everything here is pure: text in, values out.

Formats, as NVIDIA documents and prints them:

* A driver version is ``<branch>.<minor>[.<patch>]`` (``580.126.20``, ``580.65``); the branch is its
  first number. The ``.run`` installer is ``NVIDIA-Linux-<arch>-<version>.run``. The preflight also
  accepts a bare branch (``580``) or ``580.x`` when the exact release is not chosen yet.
* ``/proc/driver/nvidia/version``, first line: ``NVRM version: NVIDIA UNIX x86_64 Kernel Module
  <version>  <build date>`` for the proprietary flavour and ``NVRM version: NVIDIA UNIX Open Kernel
  Module for x86_64  <version>  Release Build  (<builder>)  <date>`` for the open one (the driver
  README, chapter "Kernel Modules": this file tells which flavour is loaded); then ``GCC version:``.
* ``nvidia-smi`` (no arguments): a banner ``NVIDIA-SMI <v>  Driver Version: <v>  CUDA Version: <c>``
  and one two-line block per GPU (index, name, persistence mode, bus id, ...; then memory
  ``<used>MiB / <total>MiB``), or ``No devices were found``, or ``NVIDIA-SMI has failed because it
  couldn't communicate with the NVIDIA driver``.
* ``nvidia-smi -q -x``: the XML document ``nvidia_smi_log`` (DTD ``nvsmi_device_v*.dtd`` shipped with
  the driver): ``driver_version``, ``cuda_version``, ``attached_gpus`` and one ``gpu`` element per GPU
  (``product_name``, ``product_architecture``, ``pci/pci_device_id`` as ``<device><vendor>`` in hex,
  ``fb_memory_usage/total``, ``bar1_memory_usage/total``, ``gsp_firmware_version``).
* ``nvidia-smi --query-gpu=<fields> --format=csv,noheader[,nounits]``: one comma-separated line per GPU.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET  # parses the local nvidia-smi's own output
from dataclasses import dataclass, field
from typing import Any

_VERSION = re.compile(r"^(\d{3,4})(?:\.(\d+|x)(?:\.(\d+))?)?$")
_INSTALLER = re.compile(r"NVIDIA-Linux-(x86_64|aarch64)-(\d{3,4}\.\d+(?:\.\d+)?)\.run$")
_PROC = re.compile(
    r"NVRM version:\s+NVIDIA UNIX\s+(?:(?P<open>Open) Kernel Module for (?P<arch_open>\S+)|"
    r"(?P<arch>\S+) Kernel Module)\s+(?P<version>\d+\.\d+(?:\.\d+)?)"
)
_GCC = re.compile(r"^GCC version:\s+(.*?)\s*$", re.MULTILINE)
_SMI_BANNER = re.compile(
    r"NVIDIA-SMI\s+(?P<smi>\S+)\s+Driver Version:\s+(?P<driver>\d+\.\d+(?:\.\d+)?)"
    r"(?:\s+CUDA Version:\s+(?P<cuda>[\d.]+|N/A))?"
)
_SMI_GPU = re.compile(
    r"^\|\s+(?P<index>\d+)\s+(?P<name>.+?)\s+(?:On|Off)\s+\|\s+"
    r"(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s"
)
_SMI_MEMORY = re.compile(r"(?P<used>\d+)MiB\s*/\s*(?P<total>\d+)MiB")
_MIB = re.compile(r"^(\d+)\s*MiB$")
# What nvidia-smi prints instead of a table when it cannot report GPUs.
SMI_NO_DEVICES = "No devices were found"
SMI_NO_DRIVER = "couldn't communicate with the NVIDIA driver"


class DriverTextError(ValueError):
    """The text is not what the named NVIDIA format says it should be; the message says what was expected."""


@dataclass(frozen=True, order=True)
class DriverVersion:
    """A driver version or branch. ``minor``/``patch`` are None when only the branch is known."""

    branch: int
    minor: int | None = None
    patch: int | None = None
    # As written: NVIDIA pads the patch level ("590.48.01"), which the installer's file name keeps.
    text: str = field(default="", compare=False)

    def __str__(self) -> str:
        if self.minor is None:
            return f"{self.branch}.x"
        return self.text or ".".join(str(p) for p in (self.branch, self.minor, self.patch) if p is not None)

    @property
    def exact(self) -> bool:
        return self.minor is not None


def parse_version(text: str) -> DriverVersion:
    """``580.126.20``, ``580.65``, ``580`` or ``580.x``; raises ``DriverTextError`` with the expected form."""
    match = _VERSION.match(str(text).strip())
    if not match:
        raise DriverTextError(
            f"{text!r} is not an NVIDIA driver version; write <branch>.<minor>[.<patch>] such as 580.126.20, "
            "or a branch such as 580"
        )
    branch, minor, patch = match.groups()
    if minor in (None, "x"):
        if patch is not None:
            raise DriverTextError(f"{text!r}: a branch written as {branch}.x has no patch level")
        return DriverVersion(int(branch))
    return DriverVersion(int(branch), int(minor), int(patch) if patch is not None else None, text=str(text).strip())


def version_from_installer(name: str) -> DriverVersion:
    """The version in a ``.run`` installer's file name or URL (``.../NVIDIA-Linux-x86_64-580.126.20.run``)."""
    match = _INSTALLER.search(name.strip())
    if not match:
        raise DriverTextError(f"{name!r} does not end in NVIDIA-Linux-<x86_64|aarch64>-<version>.run")
    return parse_version(match.group(2))


def parse_driver(text: str) -> DriverVersion:
    """What a user may write for a driver: a version or branch, or the ``.run`` installer's name or URL."""
    value = str(text).strip()
    return version_from_installer(value) if value.endswith(".run") else parse_version(value)


@dataclass(frozen=True)
class LoadedModule:
    """What ``/proc/driver/nvidia/version`` says: the loaded kernel module's version and flavour."""

    version: DriverVersion
    kernel_module_type: str  # "open" or "proprietary"
    arch: str
    gcc: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": str(self.version),
            "branch": self.version.branch,
            "kernel_module_type": self.kernel_module_type,
            "arch": self.arch,
            "gcc": self.gcc,
        }


def parse_proc_version(text: str) -> LoadedModule:
    """Parse ``/proc/driver/nvidia/version``; raises ``DriverTextError`` when no NVRM line is found."""
    match = _PROC.search(text)
    if not match:
        raise DriverTextError(
            "no 'NVRM version: NVIDIA UNIX ... Kernel Module <version>' line: the nvidia module is not loaded "
            "or this is not /proc/driver/nvidia/version"
        )
    gcc = _GCC.search(text)
    return LoadedModule(
        version=parse_version(match.group("version")),
        kernel_module_type="open" if match.group("open") else "proprietary",
        arch=match.group("arch_open") or match.group("arch"),
        gcc=gcc.group(1) if gcc else None,
    )


@dataclass(frozen=True)
class SmiGpu:
    index: int
    name: str
    bus_id: str
    memory_total_mib: int | None = None
    architecture: str | None = None  # -q -x only
    pci_device_id: str | None = None  # -q -x only: lower-case hex device id without 0x
    bar1_total_mib: int | None = None  # -q -x only
    gsp_firmware_version: str | None = None  # -q -x only; None when N/A (no GSP, or GSP off)

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "bus_id": self.bus_id,
            "memory_total_mib": self.memory_total_mib,
            "architecture": self.architecture,
            "pci_device_id": self.pci_device_id,
            "bar1_total_mib": self.bar1_total_mib,
            "gsp_firmware_version": self.gsp_firmware_version,
        }


@dataclass(frozen=True)
class SmiReport:
    driver_version: DriverVersion
    cuda_version: str | None
    gpus: list[SmiGpu] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "driver_version": str(self.driver_version),
            "branch": self.driver_version.branch,
            "cuda_version": self.cuda_version,
            "gpus": [g.as_dict() for g in self.gpus],
        }


def _smi_failure(text: str) -> None:
    if SMI_NO_DRIVER in text:
        raise DriverTextError("nvidia-smi could not communicate with the NVIDIA driver: the module is not loaded")
    if SMI_NO_DEVICES in text:
        raise DriverTextError("nvidia-smi found no devices: the driver is loaded but initialised no GPU")


def parse_smi(text: str) -> SmiReport:
    """Parse plain ``nvidia-smi`` output (the banner and the per-GPU table)."""
    _smi_failure(text)
    banner = _SMI_BANNER.search(text)
    if not banner:
        raise DriverTextError("no 'NVIDIA-SMI ... Driver Version: ...' banner: this is not nvidia-smi output")
    lines = text.splitlines()
    gpus: list[SmiGpu] = []
    for number, line in enumerate(lines):
        row = _SMI_GPU.match(line)
        if not row:
            continue
        memory = _SMI_MEMORY.search(lines[number + 1]) if number + 1 < len(lines) else None
        gpus.append(
            SmiGpu(
                index=int(row.group("index")),
                name=row.group("name"),
                bus_id=row.group("bus"),
                memory_total_mib=int(memory.group("total")) if memory else None,
            )
        )
    cuda = banner.group("cuda")
    return SmiReport(parse_version(banner.group("driver")), None if cuda in (None, "N/A") else cuda, gpus)


def _text(element: ET.Element, path: str) -> str | None:
    found = element.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if value in ("", "N/A") else value


def _mib(value: str | None) -> int | None:
    match = _MIB.match(value or "")
    return int(match.group(1)) if match else None


def _device_id(value: str | None) -> str | None:
    """The PCI device id of nvidia-smi's ``pci_device_id``: device then vendor, 8 hex digits, written
    ``233510DE`` in ``-q -x`` (driver 580) and ``0x233510DE`` by ``--query-gpu=pci.device_id``."""
    match = re.fullmatch(r"(?:0x)?([0-9a-f]{4})([0-9a-f]{4})", (value or "").strip().lower())
    return match.group(1) if match else None


def parse_smi_xml(text: str) -> SmiReport:
    """Parse ``nvidia-smi -q -x``."""
    _smi_failure(text)
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise DriverTextError(f"nvidia-smi -q -x output is not XML ({exc})") from exc
    if root.tag != "nvidia_smi_log":
        raise DriverTextError(f"the XML root is <{root.tag}>, not <nvidia_smi_log>: this is not nvidia-smi -q -x")
    driver = _text(root, "driver_version")
    if driver is None:
        raise DriverTextError("nvidia-smi -q -x has no <driver_version>")
    gpus: list[SmiGpu] = []
    for index, gpu in enumerate(root.findall("gpu")):
        device = _text(gpu, "pci/pci_device_id")
        minor = _text(gpu, "minor_number") or ""
        gpus.append(
            SmiGpu(
                index=int(minor) if minor.isdigit() else index,
                name=_text(gpu, "product_name") or "",
                bus_id=gpu.get("id", ""),
                memory_total_mib=_mib(_text(gpu, "fb_memory_usage/total")),
                architecture=_text(gpu, "product_architecture"),
                pci_device_id=_device_id(device),
                bar1_total_mib=_mib(_text(gpu, "bar1_memory_usage/total")),
                gsp_firmware_version=_text(gpu, "gsp_firmware_version"),
            )
        )
    return SmiReport(parse_version(driver), _text(root, "cuda_version"), gpus)


def parse_smi_query(text: str, fields: list[str]) -> list[dict[str, str]]:
    """Rows of ``nvidia-smi --query-gpu=<fields> --format=csv,noheader``: one dict per GPU, by field name."""
    _smi_failure(text)
    rows = []
    for number, line in enumerate(row for row in text.splitlines() if row.strip()):
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(fields):
            raise DriverTextError(
                f"line {number + 1} has {len(values)} values, the query asked for {len(fields)} ({', '.join(fields)})"
            )
        rows.append(dict(zip(fields, values, strict=True)))
    return rows
