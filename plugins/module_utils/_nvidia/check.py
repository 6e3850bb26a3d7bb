# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The body of ``gpu_driver_check``: parse the inputs, read the BMC when one is given, decide, report.

Why: the decision (``compat.decide``) is pure and table-driven; this file only turns module options
and Redfish readings into its ``Target``, collects every input problem next to the matrix's, and
fails once with all of them. It reads the BMC (PCIe inventory and the BIOS settings) and changes
nothing, so check mode runs exactly the same.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._redfish import info
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.args import connection_params
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.bios import BiosReading, read_bios
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.detect import detect_quirks
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.quirks import for_name
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.session import (
    SUSHY_IMPORT_ERROR,
    RedfishClient,
)

from .compat import BiosFacts, CompatibilityError, Decision, GpuSpec, Problem, Target, decide, parse_kernel
from .driver_version import DriverTextError, DriverVersion, parse_driver
from .gpus import PCI_VENDOR_NVIDIA, UnknownGpu, lookup

INPUT = "input"  # the ``rule`` of a problem with an option itself, not with a combination


@dataclass(frozen=True)
class BmcObservation:
    """What the BMC reported: its GPU-class PCIe devices, the BIOS reading, the quirks used, requests made."""

    devices: list[dict[str, Any]]
    bios: BiosReading
    quirks: str
    requests: int


def read_bmc(bmc: Mapping[str, Any]) -> BmcObservation:
    """Read the GPUs (PCIe inventory) and the BIOS settings over Redfish (read-only; one client, closed)."""
    client = RedfishClient(connection_params(dict(bmc)))
    with client:
        quirks = for_name(detect_quirks(client))
        devices = [d for d in info.pcie_devices(client) if info.is_gpu(d)]
        bios = read_bios(client, quirks.bios_settings)
    return BmcObservation(devices, bios, quirks.name, client.log.count)


def declared_gpus(entries: Sequence[Mapping[str, Any]], problems: list[Problem]) -> list[GpuSpec]:
    specs = []
    for index, entry in enumerate(entries):
        where = f"gpus[{index}]"
        count = entry.get("count", 1)
        if count is None or int(count) < 1:
            problems.append(Problem(f"{where}.count", f"must be 1 or more, got {count}", "give how many", INPUT))
            continue
        try:
            specs.append(GpuSpec(where, str(entry["model"]), int(count), lookup(str(entry["model"]))))
        except UnknownGpu as exc:
            problems.append(
                Problem(f"{where}.model", str(exc), "write a known model name or a PCI id such as 0x1DB6", INPUT)
            )
    return specs


def observed_gpus(devices: Sequence[Mapping[str, Any]], problems: list[Problem]) -> list[GpuSpec]:
    """One GpuSpec per model among the BMC's GPU-class PCIe devices (by model, name, then PCI id)."""
    counts: Counter[str] = Counter()
    models: dict[str, GpuSpec] = {}
    for device in devices:
        texts = [str(device[k]) for k in ("model", "name") if device.get(k)]
        ids = [i for i in device.get("pci_ids") or [] if i.startswith(f"{PCI_VENDOR_NVIDIA}:")]
        found = None
        for text in [*texts, *ids]:
            try:
                found = lookup(text)
                break
            except UnknownGpu:
                continue
        if found is None:
            label = " / ".join(texts + list(device.get("pci_ids") or [])) or str(device.get("id"))
            problems.append(
                Problem(
                    "bmc",
                    f"PCIe device {device.get('id')} ({label}) is a GPU this check does not know (not an NVIDIA GPU "
                    "in its table)",
                    "give the GPUs with gpus (a known model or PCI id), or add the model to the GPU table",
                    INPUT,
                )
            )
            continue
        counts[found.name] += 1
        models.setdefault(found.name, GpuSpec("bmc", texts[0] if texts else ids[0], 1, found))
    return [GpuSpec(s.field, s.given, counts[name], s.model) for name, s in models.items()]


def _by_architecture(specs: Sequence[GpuSpec]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for spec in specs:
        counts[spec.model.architecture] += spec.count
    return counts


def _describe(counts: Counter[str]) -> str:
    return ", ".join(f"{n}x {arch}" for arch, n in sorted(counts.items())) or "none"


def choose_gpus(
    declared: list[GpuSpec],
    observed: list[GpuSpec] | None,
    problems: list[Problem],
    warnings: list[Problem],
    *,
    given: bool = False,
) -> tuple[list[GpuSpec], str]:
    """The GPUs to decide for and where they came from (``bmc`` or ``gpus``); a mismatch is a problem."""
    if observed:
        if declared and _by_architecture(declared) != _by_architecture(observed):
            problems.append(
                Problem(
                    "gpus",
                    f"says {_describe(_by_architecture(declared))} but the BMC reports "
                    f"{', '.join(f'{s.count}x {s.model.name}' for s in observed)}",
                    "make gpus (the inventory's facts) match what is installed",
                    INPUT,
                )
            )
        return observed, "bmc"
    if observed is not None and declared:
        warnings.append(
            Problem(
                "bmc",
                "the BMC lists no GPUs in its PCIe inventory, so the GPUs in gpus were checked instead",
                "make sure the GPUs are seated and the BMC's inventory is current",
                INPUT,
            )
        )
    if not declared and not given:  # entries given but all invalid are already problems of their own
        problems.append(
            Problem(
                "gpus",
                "no GPUs given and none read from a BMC",
                "give gpus (model and count) or bmc (to read the PCIe inventory)",
                INPUT,
            )
        )
    return declared, "gpus"


def bios_facts(reading: BiosReading) -> BiosFacts:
    return BiosFacts(
        secure_boot=reading.secure_boot,
        boot_mode=reading.boot_mode,
        mmio_above_4gb=reading.mmio_above_4gb,
        where={k: f"bmc: {v}" for k, v in reading.where.items()},
    )


def _parse(field: str, parser: Any, value: Any, fix: str, problems: list[Problem]) -> Any:
    if value is None:
        return None
    try:
        return parser(value)
    except (DriverTextError, ValueError) as exc:
        problems.append(Problem(field, str(exc), fix, INPUT))
        return None


def evaluate(params: Mapping[str, Any], observation: BmcObservation | None) -> dict[str, Any]:
    """Pure given the observation: the module's ``nvidia`` result; raises ``CompatibilityError`` on any problem."""
    problems: list[Problem] = []
    warnings: list[Problem] = []
    driver: DriverVersion | None = _parse(
        "driver_version",
        parse_driver,
        params["driver_version"],
        "write it as 580.126.20, 580, or the installer's URL (.../NVIDIA-Linux-x86_64-580.126.20.run)",
        problems,
    )
    kernel = _parse(
        "kernel_version", parse_kernel, params.get("kernel_version"), "give uname -r of the installed OS", problems
    )
    declared = declared_gpus(params.get("gpus") or [], problems)
    observed = observed_gpus(observation.devices, problems) if observation else None
    gpus, gpus_from = choose_gpus(declared, observed, problems, warnings, given=bool(params.get("gpus")))
    result: dict[str, Any] = {
        "kernel_module_type_requested": params.get("kernel_module_type") or "auto",
        "driver_version": str(driver) if driver else params["driver_version"],
        "driver_branch": driver.branch if driver else None,
        "gpus": [g.as_dict() for g in gpus],
        "gpus_from": gpus_from,
        "bios": observation.bios.as_dict() if observation else None,
        "quirks": observation.quirks if observation else None,
    }
    decision = Decision()
    if driver is not None and gpus:
        target = Target(
            gpus=tuple(gpus),
            driver=driver,
            kernel_module_type=params.get("kernel_module_type") or "auto",
            os_family=params.get("os_family"),
            os_version=params.get("os_version"),
            kernel=kernel,
            boot_mode=params.get("boot_mode"),
            bios=bios_facts(observation.bios) if observation else None,
        )
        decision = decide(target)
    result.update(decision.as_dict())
    result["problems"] = [p.as_dict() for p in problems + decision.problems]
    result["warnings"] = [w.as_dict() for w in warnings + decision.warnings]
    if problems or decision.problems:
        raise CompatibilityError(problems + decision.problems, decision=result)
    return result


def run_gpu_driver_check(module: Any) -> dict[str, Any]:
    params = module.params
    observation = None
    if params.get("bmc"):
        module.require("sushy", SUSHY_IMPORT_ERROR)
        observation = read_bmc(params["bmc"])
    result = evaluate(params, observation)
    for warning in result["warnings"]:
        module.warn(f"{warning['field']}: {warning['msg']}; {warning['fix']}")
    out: dict[str, Any] = {"changed": False, "nvidia": result}
    if observation is not None:
        out["requests"] = observation.requests
    return out
