"""Driver versions, branches and what a host's driver prints, parsed as NVIDIA documents the formats.

The samples below are written to the documented shapes (the driver README's /proc file, nvidia-smi's
banner and table, the ``nvidia_smi_log`` XML); real captures go to ``tests/unit/fixtures/nvidia/``
(see its README.md) and are checked by ``test_captured_outputs_agree`` below.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.metalplane.inference.plugins.module_utils._nvidia.driver_version import (
    DriverTextError,
    DriverVersion,
    parse_driver,
    parse_proc_version,
    parse_smi,
    parse_smi_query,
    parse_smi_xml,
    parse_version,
    version_from_installer,
)
from ansible_collections.metalplane.inference.plugins.module_utils._nvidia.gpus import lookup

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "nvidia"

PROC_PROPRIETARY = """\
NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.126.20  Tue Jan 13 18:37:22 UTC 2026
GCC version:  gcc version 14.2.1 20250110 (Red Hat 14.2.1-7) (GCC)
"""
PROC_OPEN = """\
NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  590.48.01  Release Build  (builder@host)  Mon Dec  1 2025
GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)
"""
PROC_AARCH64_OPEN = "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  570.86.15  Release Build  (b@h)  date\n"

SMI = """\
Mon Jan 19 10:00:00 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.126.20             Driver Version: 580.126.20     CUDA Version: 13.0     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  Tesla V100-PCIE-32GB           On  |   00000000:04:00.0 Off |                    0 |
| N/A   34C    P0             37W /  250W |       0MiB /  32768MiB |      0%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+
|   1  Tesla V100-PCIE-32GB           On  |   00000000:82:00.0 Off |                    0 |
| N/A   33C    P0             36W /  250W |       0MiB /  32768MiB |      0%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+
"""
SMI_OLD_BANNER = """\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 535.54.03    Driver Version: 535.54.03    CUDA Version: 12.2     |
|-------------------------------+----------------------+----------------------+
|   0  NVIDIA A100-SXM...  Off  | 00000000:07:00.0 Off |                    0 |
| N/A   30C    P0    52W / 400W |      0MiB / 40960MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+
"""
SMI_XML = """\
<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
  <timestamp>Mon Jan 19 10:00:00 2026</timestamp>
  <driver_version>580.126.20</driver_version>
  <cuda_version>13.0</cuda_version>
  <attached_gpus>1</attached_gpus>
  <gpu id="00000000:04:00.0">
    <product_name>Tesla V100-PCIE-32GB</product_name>
    <product_architecture>Volta</product_architecture>
    <minor_number>0</minor_number>
    <gsp_firmware_version>N/A</gsp_firmware_version>
    <pci>
      <pci_device_id>1DB610DE</pci_device_id>
    </pci>
    <fb_memory_usage><total>32768 MiB</total><used>0 MiB</used></fb_memory_usage>
    <bar1_memory_usage><total>32768 MiB</total></bar1_memory_usage>
  </gpu>
</nvidia_smi_log>
"""


@pytest.mark.parametrize(
    ("text", "version", "exact"),
    [
        ("580.126.20", DriverVersion(580, 126, 20), True),
        ("580.65", DriverVersion(580, 65), True),
        ("580", DriverVersion(580), False),
        ("580.x", DriverVersion(580), False),
        (" 595.91.07 ", DriverVersion(595, 91, 7), True),
    ],
)
def test_parse_version(text: str, version: DriverVersion, exact: bool) -> None:
    parsed = parse_version(text)
    assert parsed == version
    assert parsed.exact is exact


@pytest.mark.parametrize("text", ["", "r580", "58", "580.x.1", "580.126.20.1", "latest", "580-126"])
def test_parse_version_refuses_with_the_expected_form(text: str) -> None:
    with pytest.raises(DriverTextError):
        parse_version(text)


def test_versions_order_and_print() -> None:
    assert parse_version("580.126.20") < parse_version("580.126.21") < parse_version("590.48.01")
    assert (str(parse_version("580")), str(parse_version("580.65.06"))) == ("580.x", "580.65.06")


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("NVIDIA-Linux-x86_64-580.126.20.run", "580.126.20"),
        ("https://download.example/NVIDIA-Linux-x86_64-580.178.04.run", "580.178.04"),
        ("/tmp/NVIDIA-Linux-aarch64-570.86.15.run", "570.86.15"),
    ],
)
def test_version_from_installer(name: str, version: str) -> None:
    assert str(version_from_installer(name)) == version


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("580.126.20", "580.126.20"),
        ("580", "580.x"),
        ("https://x.example/d/NVIDIA-Linux-x86_64-580.126.20.run", "580.126.20"),
    ],
)
def test_parse_driver_takes_a_version_or_the_installer(text: str, version: str) -> None:
    assert str(parse_driver(text)) == version


def test_version_from_installer_refuses_other_files() -> None:
    with pytest.raises(DriverTextError, match="NVIDIA-Linux-"):
        version_from_installer("cuda_12.8.0_570.86.10_linux.run")


@pytest.mark.parametrize(
    ("text", "version", "flavour", "arch"),
    [
        (PROC_PROPRIETARY, "580.126.20", "proprietary", "x86_64"),
        (PROC_OPEN, "590.48.01", "open", "x86_64"),
        (PROC_AARCH64_OPEN, "570.86.15", "open", "aarch64"),
    ],
)
def test_parse_proc_version(text: str, version: str, flavour: str, arch: str) -> None:
    loaded = parse_proc_version(text)
    assert (str(loaded.version), loaded.kernel_module_type, loaded.arch) == (version, flavour, arch)


def test_parse_proc_version_gcc_and_missing_module() -> None:
    assert parse_proc_version(PROC_PROPRIETARY).gcc == "gcc version 14.2.1 20250110 (Red Hat 14.2.1-7) (GCC)"
    with pytest.raises(DriverTextError, match="not loaded"):
        parse_proc_version("cat: /proc/driver/nvidia/version: No such file or directory\n")


def test_parse_smi() -> None:
    report = parse_smi(SMI)
    assert (str(report.driver_version), report.cuda_version) == ("580.126.20", "13.0")
    assert [(g.index, g.name, g.bus_id, g.memory_total_mib) for g in report.gpus] == [
        (0, "Tesla V100-PCIE-32GB", "00000000:04:00.0", 32768),
        (1, "Tesla V100-PCIE-32GB", "00000000:82:00.0", 32768),
    ]


def test_parse_smi_older_banner_and_truncated_name() -> None:
    report = parse_smi(SMI_OLD_BANNER)
    assert str(report.driver_version) == "535.54.03"
    assert [(g.name, g.memory_total_mib) for g in report.gpus] == [("NVIDIA A100-SXM...", 40960)]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("No devices were found\n", "no devices"),
        (
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
            "latest NVIDIA driver is installed and running.\n",
            "not loaded",
        ),
        ("bash: nvidia-smi: command not found\n", "not nvidia-smi output"),
    ],
)
def test_parse_smi_failures(text: str, match: str) -> None:
    with pytest.raises(DriverTextError, match=match):
        parse_smi(text)


def test_parse_smi_xml() -> None:
    report = parse_smi_xml(SMI_XML)
    (gpu,) = report.gpus
    assert (str(report.driver_version), report.cuda_version) == ("580.126.20", "13.0")
    assert (gpu.name, gpu.architecture, gpu.pci_device_id, gpu.bus_id) == (
        "Tesla V100-PCIE-32GB",
        "Volta",
        "1db6",
        "00000000:04:00.0",
    )
    assert (gpu.memory_total_mib, gpu.bar1_total_mib, gpu.gsp_firmware_version) == (32768, 32768, None)
    assert lookup(f"0x{gpu.pci_device_id}").name == gpu.name


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("<nvidia_smi_log><timestamp/></nvidia_smi_log>", "no <driver_version>"),
        ("<html/>", "not nvidia-smi"),
        ("{", "not XML"),
    ],
)
def test_parse_smi_xml_failures(text: str, match: str) -> None:
    with pytest.raises(DriverTextError, match=match):
        parse_smi_xml(text)


def test_parse_smi_query() -> None:
    text = "Tesla V100-PCIE-32GB, 580.126.20, 32768 MiB\nTesla V100-PCIE-32GB, 580.126.20, 32768 MiB\n"
    rows = parse_smi_query(text, ["name", "driver_version", "memory.total"])
    assert rows == [{"name": "Tesla V100-PCIE-32GB", "driver_version": "580.126.20", "memory.total": "32768 MiB"}] * 2
    with pytest.raises(DriverTextError, match="asked for 2"):
        parse_smi_query(text, ["name", "driver_version"])


# ---------------------------------------------------------------------- real captures (see fixtures/nvidia/README.md)
QUERY_FIELDS = ["name", "driver_version", "memory.total", "pci.device_id"]
CAPTURES = sorted(p for p in FIXTURES.iterdir() if p.is_dir()) if FIXTURES.is_dir() else []


@pytest.mark.parametrize("capture", CAPTURES, ids=[p.name for p in CAPTURES])
def test_captured_outputs_agree(capture: Path) -> None:
    """Every output of one real host parses; they agree on the driver and GPUs; ``expected.yml`` holds."""
    versions = {}
    names: dict[str, list[str]] = {}
    if (capture / "proc-version.txt").is_file():
        loaded = parse_proc_version((capture / "proc-version.txt").read_text())
        versions["proc"] = loaded.version
    if (capture / "nvidia-smi.txt").is_file():
        report = parse_smi((capture / "nvidia-smi.txt").read_text())
        versions["smi"] = report.driver_version
        names["smi"] = [g.name for g in report.gpus]
    if (capture / "nvidia-smi-q.xml").is_file():
        xml_report = parse_smi_xml((capture / "nvidia-smi-q.xml").read_text())
        versions["xml"] = xml_report.driver_version
        names["xml"] = [g.name for g in xml_report.gpus]
        for gpu in xml_report.gpus:  # every captured GPU is in the table, by name and by PCI id
            assert lookup(gpu.name).architecture == gpu.architecture or gpu.architecture is None
            if gpu.pci_device_id:
                assert lookup(f"0x{gpu.pci_device_id}").architecture == lookup(gpu.name).architecture
    if (capture / "query.csv").is_file():  # --query-gpu=name,driver_version,memory.total,pci.device_id
        rows = parse_smi_query((capture / "query.csv").read_text(), QUERY_FIELDS)
        versions["query"] = parse_version(rows[0]["driver_version"])
        names["query"] = [row["name"] for row in rows]
        for row in rows:
            assert lookup(row["pci.device_id"][:6]).architecture == lookup(row["name"]).architecture
    assert versions, f"{capture}: none of proc-version.txt, nvidia-smi.txt, nvidia-smi-q.xml, query.csv"
    assert len(set(versions.values())) == 1, f"{capture}: the outputs disagree on the driver: {versions}"
    assert len({len(found) for found in names.values()}) <= 1, f"{capture}: GPU counts differ: {names}"
    expected_file = capture / "expected.yml"
    if expected_file.is_file():
        expected = yaml.safe_load(expected_file.read_text())
        assert str(next(iter(versions.values()))) == str(expected["driver_version"])
        if "kernel_module_type" in expected:
            assert (
                parse_proc_version((capture / "proc-version.txt").read_text()).kernel_module_type
                == expected["kernel_module_type"]
            )
        if "gpus" in expected:
            assert next(iter(names.values())) == expected["gpus"]
