"""gpu_driver_check against the lab BMCs: GPUs from the PCIe inventory and the BIOS settings, per personality.

The reads run in-process (``check.read_bmc``, what the module calls), one BMC per personality plus BMCs whose
BIOS is wrong (Secure Boot on, MMIO above 4 GB off); one ansible-playbook run then drives the module itself
through the ``nvidia`` action group, nested ``bmc`` options, check mode, a warning, and a refusal naming its fields.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from integration.redfish.conftest import INSTANT_BUT_RESET, PERSONALITIES, StartLab

from ansible_collections.metalplane.inference.plugins.module_utils._nvidia.check import evaluate, read_bmc
from ansible_collections.metalplane.inference.plugins.module_utils._nvidia.compat import CompatibilityError
from lab.redfish.bmc import GPU_MODEL
from lab.redfish.server import BmcSpec, RedfishLab

# Per personality: (secure_boot, boot_mode, mmio_above_4gb) as the reader must see the lab's defaults, and where.
DEFAULTS = {
    "idrac8": ((False, "Legacy", True), "Bios.Attributes.SecureBoot"),  # 13G default BootMode Bios
    "idrac9": ((False, "UEFI", True), "Bios.Attributes.SecureBoot"),
    "generic": ((False, "UEFI", None), "SecureBoot.SecureBootEnable"),  # no standard MMIO attribute
}


@pytest.fixture(scope="module")
def lab(start_redfish_lab: StartLab) -> RedfishLab:
    specs = [BmcSpec(name=p, personality=p, **INSTANT_BUT_RESET) for p in PERSONALITIES]
    specs += [
        BmcSpec(name="idrac8-bad", personality="idrac8", secure_boot=True, mmio_above_4gb=False, **INSTANT_BUT_RESET),
        BmcSpec(name="generic-sb", personality="generic", secure_boot=True, **INSTANT_BUT_RESET),
    ]
    return start_redfish_lab(specs, delay_scale=1.0)


def bmc(lab: RedfishLab, name: str) -> dict[str, Any]:
    return {"bmc_url": lab.url(name), "username": "root", "password": "calvin", "ca_cert": lab.ca_path}


@pytest.mark.parametrize("personality", PERSONALITIES)
def test_reads_gpus_and_bios_per_personality(lab: RedfishLab, personality: str) -> None:
    observation = read_bmc(bmc(lab, personality))
    reading = observation.bios
    expected, secure_boot_at = DEFAULTS[personality]
    assert (reading.secure_boot, reading.boot_mode, reading.mmio_above_4gb) == expected
    assert reading.where["secure_boot"] == secure_boot_at
    assert [d["model"] for d in observation.devices] == [GPU_MODEL, GPU_MODEL]
    assert observation.quirks == {"idrac8": "dell_idrac8", "idrac9": "dell_idrac9", "generic": "generic"}[personality]
    writes = [r for r in lab.bmc(personality).requests if r.method != "GET"]
    assert writes == []  # read-only


@pytest.mark.parametrize(
    ("name", "expected"),
    [("idrac8-bad", (True, "Legacy", False)), ("generic-sb", (True, "UEFI", None))],
)
def test_reads_a_wrong_bios(lab: RedfishLab, name: str, expected: tuple[Any, ...]) -> None:
    reading = read_bmc(bmc(lab, name)).bios
    assert (reading.secure_boot, reading.boot_mode, reading.mmio_above_4gb) == expected


def test_a_wrong_bios_is_refused_with_every_field(lab: RedfishLab) -> None:
    params = {"driver_version": "580.126.20", "kernel_module_type": "auto", "boot_mode": "UEFI", "gpus": None}
    with pytest.raises(CompatibilityError) as raised:
        evaluate(params, read_bmc(bmc(lab, "idrac8-bad")))
    fields = {p.field: p.rule for p in raised.value.problems}
    assert fields == {
        "bmc: Bios.Attributes.SecureBoot": "bios-secure-boot",
        "boot_mode": "bios-boot-mode",
        "bmc: Bios.Attributes.MmioAbove4Gb": "bios-mmio-above-4gb",
    }


FQ = "metalplane.inference."
BMC = {"bmc_url": "{{ bmc_url }}", "username": "root", "password": "calvin", "ca_cert": "{{ ca_path }}"}


def test_module_through_ansible(playbook: Callable[..., Any], lab: RedfishLab) -> None:
    tasks = [
        {
            "name": "idrac9",
            FQ + "gpu_driver_check": {"boot_mode": "UEFI", "bmc": {**BMC, "bmc_url": lab.url("idrac9")}},
            "check_mode": True,
        },
        {
            "name": "idrac8 bad",
            FQ + "gpu_driver_check": {"boot_mode": "UEFI", "bmc": {**BMC, "bmc_url": lab.url("idrac8-bad")}},
            "ignore_errors": True,
        },
        {
            "name": "generic",
            FQ + "gpu_driver_check": {"boot_mode": "UEFI", "bmc": {**BMC, "bmc_url": lab.url("generic")}},
        },
    ]
    play = {
        "name": "check",
        "hosts": "localhost",
        "gather_facts": False,
        "vars": {"ca_path": lab.ca_path, "bmc_url": "unused"},
        "module_defaults": {"group/metalplane.inference.nvidia": {"driver_version": "580.126.20"}},
        "tasks": tasks,
    }
    run = playbook([play])
    ok = run.task("idrac9")
    assert ok.get("failed") is not True, ok
    assert ok["changed"] is False
    assert (ok["nvidia"]["kernel_module_type"], ok["nvidia"]["gsp_firmware"], ok["nvidia"]["gpus_from"]) == (
        "proprietary",
        False,
        "bmc",
    )
    assert ok["nvidia"]["gpus"][0]["count"] == 2
    assert ok["requests"] > 0
    assert "calvin" not in str(ok)
    generic = run.task("generic")  # no standard name for MMIO above 4 GB: a warning to the operator
    assert generic.get("failed") is not True, generic
    assert "memory-mapped I/O above 4 GB" in json.dumps(generic.get("warnings"))
    bad = run.task("idrac8 bad")
    assert bad["failed"] is True
    assert {p["field"] for p in bad["error"]["problems"]} == {
        "bmc: Bios.Attributes.SecureBoot",
        "boot_mode",
        "bmc: Bios.Attributes.MmioAbove4Gb",
    }
    assert "out of scope" in bad["msg"]
