"""gpu_driver_check's main(): options in, the decision or every problem out (the BMC read faked)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.metalplane.inference.plugins.module_utils._nvidia import check
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.bios import BiosReading
from ansible_collections.metalplane.inference.plugins.modules import gpu_driver_check


def run_module(capsys: pytest.CaptureFixture[str], args: dict[str, Any]) -> dict[str, Any]:
    with patch_module_args(args), pytest.raises(SystemExit):
        gpu_driver_check.main()
    return json.loads(capsys.readouterr().out)


V100S = [{"model": "V100-PCIE-32GB", "count": 2}]


@pytest.mark.parametrize("check_mode", [False, True])
def test_v100_on_580_auto_is_proprietary_without_gsp(capsys: pytest.CaptureFixture[str], check_mode: bool) -> None:
    result = run_module(
        capsys,
        {
            "gpus": V100S,
            "driver_version": "580.126.20",
            "os_family": "el",
            "os_version": "10",
            "kernel_version": "6.12.0-55.el10.x86_64",
            "_ansible_check_mode": check_mode,
        },
    )
    assert result.get("failed") is not True, result
    nvidia = result["nvidia"]
    assert (nvidia["kernel_module_type"], nvidia["gsp_firmware"], result["changed"]) == ("proprietary", False, False)
    assert nvidia["gpus"][0]["count"] == 2
    assert nvidia["gpus"][0]["architecture"] == "Volta"
    assert "os-known-good" in {r["rule"] for r in nvidia["rows"]}
    assert "requests" not in result  # no BMC asked


def test_all_problems_fail_at_once_naming_field_and_fix(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(
        capsys,
        {
            "gpus": [*V100S, {"model": "Radeon MI300X"}],
            "driver_version": "590.48.01",
            "kernel_module_type": "open",
            "kernel_version": "linux",
        },
    )
    assert result["failed"] is True
    fields = sorted(p["field"] for p in result["error"]["problems"])
    assert fields == ["driver_version", "gpus[1].model", "kernel_module_type", "kernel_version"]
    assert "Tesla V100-PCIE-32GB (Volta) needs kernel_module_type=proprietary and a driver <= 580.x" in result["msg"]
    assert all(p["fix"] for p in result["error"]["problems"])


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"gpus": V100S, "driver_version": "latest"}, "driver_version"),
        ({"gpus": [{"model": "V100", "count": 0}], "driver_version": "580"}, "gpus[0].count"),
        ({"driver_version": "580"}, "gpus"),
    ],
)
def test_bad_input(capsys: pytest.CaptureFixture[str], args: dict[str, Any], field: str) -> None:
    result = run_module(capsys, args)
    assert result["failed"] is True
    assert [p["field"] for p in result["error"]["problems"]] == [field]


def observation(devices: list[dict[str, Any]], **bios: Any) -> check.BmcObservation:
    where = {
        "secure_boot": "SecureBoot.SecureBootEnable",
        "boot_mode": "Boot.BootSourceOverrideMode",
    }
    return check.BmcObservation(devices, BiosReading(where=where, **bios), "generic", 7)


H100 = {"id": "1", "name": "NVIDIA H100 PCIe", "model": None, "pci_ids": ["10de:2331"]}
BY_ID = {"id": "2", "name": "3D controller", "model": None, "pci_ids": ["10de:2331"]}
BMC = {"bmc_url": "https://bmc.example", "username": "root", "password": "s3cret-pw"}


def test_gpus_and_bios_from_the_bmc(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    seen = observation([H100, BY_ID], secure_boot=False, boot_mode="UEFI")
    monkeypatch.setattr(check, "read_bmc", lambda params: seen)
    result = run_module(capsys, {"driver_version": "595.91.07", "boot_mode": "UEFI", "bmc": BMC})
    assert result.get("failed") is not True, result
    nvidia = result["nvidia"]
    assert [(g["model"], g["count"]) for g in nvidia["gpus"]] == [("NVIDIA H100 PCIe", 2)]
    assert (nvidia["kernel_module_type"], nvidia["gsp_firmware"], nvidia["gpus_from"]) == ("open", True, "bmc")
    assert result["requests"] == 7
    # MMIO above 4 GB has no standard name on a generic BMC: a warning, not a failure
    assert [w["rule"] for w in nvidia["warnings"]] == ["bios-mmio-above-4gb"]
    assert "s3cret-pw" not in json.dumps(result)


class FakeModule:
    """What ``run_gpu_driver_check`` uses of ``MetalplaneModule``; records warnings.

    (In-process, ``AnsibleModule.warn`` output depends on what else the test process imported, so the
    warnings are checked here and, for real, through ansible-playbook in the lab integration test.)
    """

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = params
        self.warnings: list[str] = []

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def require(self, _library: str, _error: str | None) -> None:
        pass


def test_every_warning_reaches_the_operator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check, "read_bmc", lambda params: observation([H100], secure_boot=None, boot_mode="UEFI"))
    module = FakeModule({"driver_version": "595.91.07", "kernel_module_type": "auto", "boot_mode": "UEFI", "bmc": BMC})
    result = check.run_gpu_driver_check(module)
    assert [w["rule"] for w in result["nvidia"]["warnings"]] == ["bios-secure-boot", "bios-mmio-above-4gb"]
    assert len(module.warnings) == 2
    assert module.warnings[0].startswith(
        "bmc: SecureBoot.SecureBootEnable: the BMC does not report whether Secure Boot"
    )
    assert "memory-mapped I/O above 4 GB" in module.warnings[1]


def test_the_inventory_must_match_the_bmc(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check, "read_bmc", lambda params: observation([H100], secure_boot=False, boot_mode="UEFI"))
    result = run_module(capsys, {"gpus": V100S, "driver_version": "580", "boot_mode": "UEFI", "bmc": BMC})
    assert result["failed"] is True
    (problem,) = [p for p in result["error"]["problems"] if p["field"] == "gpus"]
    assert "2x Volta" in problem["msg"]
    assert "1x NVIDIA H100 PCIe" in problem["msg"]


def test_an_unknown_gpu_on_the_bmc_is_named(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    odd = {"id": "9", "name": "AMD Instinct MI300X", "model": "MI300X", "pci_ids": ["1002:74a1"]}
    monkeypatch.setattr(check, "read_bmc", lambda params: observation([odd], secure_boot=False, boot_mode="UEFI"))
    result = run_module(capsys, {"driver_version": "580", "bmc": BMC})
    assert result["failed"] is True
    assert "PCIe device 9" in result["msg"]
