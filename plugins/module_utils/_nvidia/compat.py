# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA driver compatibility matrix: GPUs x driver branch x module flavour x OS/kernel x BIOS.

Why: every one of these combinations fails late and obscurely when it is wrong (a V100 under the
open module installs "with a warning" and then finds no GPU; a 590 driver has no Volta; Secure Boot
refuses an unsigned module at ``modprobe``; a GPU whose BAR cannot be placed is "not found"). Each
is known before anything is installed, so the preflight refuses it with the field to change and
how. The matrix is a table of rules (``RULES``), each with its source; ``decide`` runs all of them,
so one run reports every problem, and returns the rows that applied, which is the evidence for the
decision it took (the module flavour when ``auto``, GSP firmware on or off).

Pure: no I/O. ``Target`` is what was asked and observed; ``Decision`` is the answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import MetalplaneError

from .driver_version import DriverVersion
from .gpus import OPEN_DEFAULT_BRANCH, OPEN_FIRST_BRANCH, OPEN_REQUIRED, OPEN_UNSUPPORTED, SOURCES, GpuModel

MODULE_TYPES = ("auto", "proprietary", "open")
OS_FAMILIES = ("el", "ubuntu")
BOOT_MODES = ("UEFI", "Legacy")
# The oldest kernel the driver supports (open-readme, "Supported Linux Kernel Versions": "Linux
# kernel 3.10 or newer", the same range as the proprietary modules).
MIN_KERNEL = (3, 10)
# What the reference deployment saw on the same two V100s with a 580 driver: Ubuntu 24.04 with its
# 6.8 kernel never initialised the GPUs; CentOS Stream 10 with 6.12 worked at once. The cause was not
# established (Volta has no GSP, so the GSP timeouts reported for Turing+ on 24.04 cannot be it).
KNOWN_BAD_OS = (("ubuntu", "24.04", (6, 8), "Volta"),)
KNOWN_GOOD_OS = (("el", "10", (6, 12), "Volta", 580),)

OK, REFUSED, WARNING = "ok", "refused", "warning"


@dataclass(frozen=True)
class Problem:
    """One reason to refuse (or to warn): the field to change, what is wrong, the fix, the rule and its source."""

    field: str
    msg: str
    fix: str
    rule: str = ""
    source: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "msg": self.msg, "fix": self.fix, "rule": self.rule, "source": self.source}

    def line(self) -> str:
        return f"{self.field}: {self.msg}; fix: {self.fix}"


class CompatibilityError(MetalplaneError):
    """The requested driver cannot work on this host; every problem is listed, nothing was installed."""

    kind = "input"

    def __init__(self, problems: Sequence[Problem], decision: dict[str, Any] | None = None) -> None:
        lines = " | ".join(p.line() for p in problems)
        super().__init__(
            f"NVIDIA driver preflight found {len(problems)} problem(s), nothing was installed: {lines}",
            details={"problems": [p.as_dict() for p in problems], "decision": decision or {}},
        )
        self.problems = list(problems)


@dataclass(frozen=True)
class GpuSpec:
    """One GPU entry, resolved: where it came from (``field``), what was written, how many, its row."""

    field: str  # "gpus[0]" or "bmc" (read from the BMC's PCIe inventory)
    given: str
    count: int
    model: GpuModel

    def as_dict(self) -> dict[str, Any]:
        return {"field": self.field, "given": self.given, "count": self.count, **self.model.as_dict()}


@dataclass(frozen=True)
class BiosFacts:
    """The BIOS settings that matter, as read over Redfish; None = the BMC does not expose it.

    ``where`` names, per concern (``secure_boot``, ``boot_mode``, ``mmio_above_4gb``), the resource and
    attribute it was read from (``Bios.Attributes.SecureBoot``), which is the field a problem names.
    """

    secure_boot: bool | None = None
    boot_mode: str | None = None  # "UEFI" or "Legacy"
    mmio_above_4gb: bool | None = None
    where: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "secure_boot": self.secure_boot,
            "boot_mode": self.boot_mode,
            "mmio_above_4gb": self.mmio_above_4gb,
            "read_from": dict(self.where),
        }


@dataclass(frozen=True)
class Target:
    """What is asked (driver, flavour, OS, installer boot mode) and what is there (GPUs, BIOS)."""

    gpus: tuple[GpuSpec, ...]
    driver: DriverVersion
    kernel_module_type: str = "auto"
    os_family: str | None = None
    os_version: str | None = None
    kernel: tuple[int, int] | None = None
    boot_mode: str | None = None
    bios: BiosFacts | None = None


@dataclass
class Decision:
    kernel_module_type: str | None = None  # the flavour to install (auto resolved); None when refused
    gsp_firmware: bool | None = None  # whether GSP firmware runs with that flavour on these GPUs
    gsp_firmware_can_disable: bool = False  # proprietary on Turing+: NVreg_EnableGpuFirmware=0 turns it off
    rows: list[dict[str, str]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kernel_module_type": self.kernel_module_type,
            "gsp_firmware": self.gsp_firmware,
            "gsp_firmware_can_disable": self.gsp_firmware_can_disable,
            "rows": list(self.rows),
            "problems": [p.as_dict() for p in self.problems],
            "warnings": [w.as_dict() for w in self.warnings],
        }


@dataclass(frozen=True)
class Rule:
    """One matrix rule: ``check`` returns None where it does not apply, else (outcome, detail, problem)."""

    id: str
    title: str
    sources: tuple[str, ...]
    check: Callable[[Target, Decision], tuple[str, str, Problem | None] | None]

    def source(self) -> str:
        return "; ".join(SOURCES[s] for s in self.sources)


# ---------------------------------------------------------------------------------------------- helpers
def _label(spec: GpuSpec) -> str:
    return f"{spec.count}x {spec.model.name} ({spec.model.architecture})"


def _with(target: Target, support: str) -> list[GpuSpec]:
    return [g for g in target.gpus if g.model.open_support == support]


def parse_kernel(text: str) -> tuple[int, int]:
    """``6.12.0-55.el10.x86_64`` -> (6, 12); raises ValueError with the expected form."""
    match = re.match(r"^\s*(\d+)\.(\d+)", str(text))
    if not match:
        msg = f"{text!r} is not a kernel release; write what uname -r prints, such as 6.12.0-55.el10.x86_64"
        raise ValueError(msg)
    return int(match.group(1)), int(match.group(2))


def resolve_module_type(target: Target) -> str | None:
    """The flavour ``auto`` means for these GPUs and this branch (None when no flavour fits all of them).

    As nvidia-installer decides (``kernel.c: valid_kernel_module_types``): open is ruled out when a
    GPU lacks open support, proprietary when a GPU requires open; of what is left, the branch's default
    (open from 560, proprietary before).
    """
    if target.kernel_module_type != "auto":
        return target.kernel_module_type
    unsupported, required = _with(target, OPEN_UNSUPPORTED), _with(target, OPEN_REQUIRED)
    if unsupported and required:
        return None
    if unsupported:
        return "proprietary"
    if required:
        return "open"
    return "open" if target.driver.branch >= OPEN_DEFAULT_BRANCH else "proprietary"


# ---------------------------------------------------------------------------------------------- rules
def _branch_max(target: Target, _d: Decision) -> tuple[str, str, Problem | None] | None:
    capped = [g for g in target.gpus if g.model.arch.last_branch is not None]
    if not capped:
        return None
    too_new = [g for g in capped if target.driver.branch > (g.model.arch.last_branch or 0)]
    if not too_new:
        last = min(g.model.arch.last_branch or 0 for g in capped)
        return OK, f"branch {target.driver.branch} <= {last}, the last branch for {_label(capped[0])}", None
    last = min(g.model.arch.last_branch or 0 for g in too_new)
    names = ", ".join(_label(g) for g in too_new)
    return (
        REFUSED,
        f"{names}: supported up to branch {last}",
        Problem(
            "driver_version",
            f"{target.driver} is branch {target.driver.branch}, but {names} is supported only up to the {last} branch",
            f"use a driver <= {last}.x (the {last} branch is the last with {too_new[0].model.architecture})",
        ),
    )


def _branch_min(target: Target, _d: Decision) -> tuple[str, str, Problem | None] | None:
    too_old = [g for g in target.gpus if target.driver.branch < g.model.arch.first_branch]
    if not too_old:
        first = max(g.model.arch.first_branch for g in target.gpus)
        return OK, f"branch {target.driver.branch} >= {first}, the first branch for every GPU", None
    first = max(g.model.arch.first_branch for g in too_old)
    names = ", ".join(_label(g) for g in too_old)
    return (
        REFUSED,
        f"{names}: needs branch {first} or later",
        Problem(
            "driver_version",
            f"{target.driver} is branch {target.driver.branch}, older than the first branch for {names} ({first})",
            f"use a driver >= {first}",
        ),
    )


def _open_unsupported(target: Target, decision: Decision) -> tuple[str, str, Problem | None] | None:
    old = _with(target, OPEN_UNSUPPORTED)
    if not old or decision.kernel_module_type is None:  # None: gpu-mixed-flavours refuses it
        return None
    if decision.kernel_module_type != "open":
        return OK, f"{', '.join(_label(g) for g in old)}: proprietary module", None
    names = ", ".join(_label(g) for g in old)
    last = min(g.model.arch.last_branch or 0 for g in old)
    return (
        REFUSED,
        f"{names}: the open module does not support it",
        Problem(
            "kernel_module_type",
            f"{names} needs kernel_module_type=proprietary and a driver <= {last}.x: the open module supports "
            "Turing and later only (the installer warns the GPU is 'not expected to work', and it does not initialise)",
            f"set kernel_module_type=proprietary (or auto) and use a driver <= {last}.x",
        ),
    )


def _open_required(target: Target, decision: Decision) -> tuple[str, str, Problem | None] | None:
    new = _with(target, OPEN_REQUIRED)
    if not new or decision.kernel_module_type is None:
        return None
    if decision.kernel_module_type != "proprietary":
        return OK, f"{', '.join(_label(g) for g in new)}: open module", None
    names = ", ".join(_label(g) for g in new)
    return (
        REFUSED,
        f"{names}: requires the open module",
        Problem(
            "kernel_module_type",
            f"proprietary was asked, but {names} is supported only with the open kernel module",
            "set kernel_module_type=open (or auto)",
        ),
    )


def _mixed(target: Target, _d: Decision) -> tuple[str, str, Problem | None] | None:
    old, new = _with(target, OPEN_UNSUPPORTED), _with(target, OPEN_REQUIRED)
    if not (old and new):
        return None
    return (
        REFUSED,
        "no module flavour supports every GPU",
        Problem(
            "gpus",
            f"{', '.join(_label(g) for g in old)} needs the proprietary module and {', '.join(_label(g) for g in new)} "
            "the open one; one host loads one flavour",
            "put these GPUs in different hosts",
        ),
    )


def _open_branch(target: Target, decision: Decision) -> tuple[str, str, Problem | None] | None:
    if decision.kernel_module_type != "open":
        return None
    if target.driver.branch >= OPEN_FIRST_BRANCH:
        return OK, f"branch {target.driver.branch} ships the open module (since {OPEN_FIRST_BRANCH})", None
    return (
        REFUSED,
        f"no open module before branch {OPEN_FIRST_BRANCH}",
        Problem(
            "driver_version",
            f"branch {target.driver.branch} has no open kernel module (first released with {OPEN_FIRST_BRANCH})",
            f"use a driver >= {OPEN_FIRST_BRANCH} or kernel_module_type=proprietary",
        ),
    )


def _auto(target: Target, decision: Decision) -> tuple[str, str, Problem | None] | None:
    if target.kernel_module_type != "auto" or decision.kernel_module_type is None:
        return None
    if _with(target, OPEN_UNSUPPORTED):
        why = "a GPU lacks open-module support"
    elif _with(target, OPEN_REQUIRED):
        why = "a GPU requires the open module"
    elif decision.kernel_module_type == "open":
        why = f"every GPU supports open, the default from branch {OPEN_DEFAULT_BRANCH}"
    else:
        why = f"branch {target.driver.branch} predates the open default ({OPEN_DEFAULT_BRANCH})"
    return OK, f"auto -> {decision.kernel_module_type}: {why}", None


def _gsp(target: Target, decision: Decision) -> tuple[str, str, Problem | None] | None:
    if decision.kernel_module_type is None:
        return None
    with_gsp = [g for g in target.gpus if g.model.arch.gsp]
    if not with_gsp:
        decision.gsp_firmware = False
        return OK, "GSP firmware off: no GPU here has a GSP (Pascal/Volta)", None
    decision.gsp_firmware = True
    if decision.kernel_module_type == "open":
        return OK, "GSP firmware on: the open module runs only with GSP firmware", None
    decision.gsp_firmware_can_disable = True
    return (
        OK,
        "GSP firmware on by default with the proprietary module; NVreg_EnableGpuFirmware=0 turns it off",
        None,
    )


def _kernel_min(target: Target, _d: Decision) -> tuple[str, str, Problem | None] | None:
    if target.kernel is None:
        return None
    wanted = ".".join(map(str, MIN_KERNEL))
    if target.kernel >= MIN_KERNEL:
        return OK, f"kernel {target.kernel[0]}.{target.kernel[1]} >= {wanted}", None
    return (
        REFUSED,
        f"kernel older than {wanted}",
        Problem("kernel_version", f"the driver needs Linux {wanted} or newer", f"use a kernel >= {wanted}"),
    )


def _os_key(target: Target) -> tuple[str | None, str | None, tuple[int, int] | None, set[str]]:
    return target.os_family, target.os_version, target.kernel, {g.model.architecture for g in target.gpus}


def _known_bad_os(target: Target, _d: Decision) -> tuple[str, str, Problem | None] | None:
    family, version, kernel, archs = _os_key(target)
    for bad_family, bad_version, bad_kernel, arch in KNOWN_BAD_OS:
        if (family, version, kernel) == (bad_family, bad_version, bad_kernel) and arch in archs:
            return (
                REFUSED,
                f"{family} {version} with kernel {kernel[0]}.{kernel[1]} never initialised {arch} GPUs",
                Problem(
                    "os_version",
                    f"{family} {version} with kernel {kernel[0]}.{kernel[1]} never initialised its {arch} GPUs on "
                    "the reference deployment (same GPUs and driver worked on el 10 with kernel 6.12)",
                    "use os_family=el, os_version=10 (CentOS Stream 10, kernel 6.12)",
                ),
            )
    return None


def _known_good_os(target: Target, _d: Decision) -> tuple[str, str, Problem | None] | None:
    family, version, kernel, archs = _os_key(target)
    for good_family, good_version, good_kernel, arch, branch in KNOWN_GOOD_OS:
        if (family, version, kernel, target.driver.branch) == (
            good_family,
            good_version,
            good_kernel,
            branch,
        ) and arch in archs:
            return OK, f"{family} {version}, kernel 6.12, branch {branch}: worked with {arch} GPUs", None
    return None


def _secure_boot(target: Target, _d: Decision) -> tuple[str, str, Problem | None] | None:
    if target.bios is None:
        return None
    where = target.bios.where.get("secure_boot", "Secure Boot")
    if target.bios.secure_boot is False:
        return OK, "Secure Boot off", None
    if target.bios.secure_boot is None:
        return (
            WARNING,
            "Secure Boot state unknown",
            Problem(
                where,
                "the BMC does not report whether Secure Boot is on",
                "check in the BIOS setup that Secure Boot is off (module signing is out of scope)",
            ),
        )
    return (
        REFUSED,
        "Secure Boot on",
        Problem(
            where,
            "Secure Boot is on: the kernel would refuse the unsigned NVIDIA modules; this collection does not sign "
            "them (module signing for Secure Boot is out of scope)",
            "turn Secure Boot off in the BIOS (Dell: BIOS attribute SecureBoot=Disabled, applied by a BIOS job and "
            "a reboot)",
        ),
    )


def _boot_mode(target: Target, _d: Decision) -> tuple[str, str, Problem | None] | None:
    if target.bios is None:
        return None
    where = target.bios.where.get("boot_mode", "boot mode")
    seen, wanted = target.bios.boot_mode, target.boot_mode
    if seen is None:
        return (
            WARNING,
            "BIOS boot mode unknown",
            Problem(where, "the BMC does not report the boot mode", f"check that the BIOS boots in {wanted or 'UEFI'}"),
        )
    if wanted is None:
        return (
            WARNING,
            f"BIOS boots {seen}; the installer's mode was not given",
            Problem(
                "boot_mode", f"not given; the BIOS boots {seen}", f"set boot_mode={seen} if the installer is {seen}"
            ),
        )
    if seen == wanted:
        return OK, f"BIOS boots {seen}, as the installer", None
    return (
        REFUSED,
        f"BIOS boots {seen}, the installer is {wanted}",
        Problem(
            "boot_mode",
            f"the installer boots {wanted} but the BIOS is in {seen} mode ({where})",
            f"switch the BIOS to {wanted} (metalplane.inference.redfish_boot mode: {wanted}) or use a {seen} installer",
        ),
    )


def _mmio(target: Target, _d: Decision) -> tuple[str, str, Problem | None] | None:
    if target.bios is None:
        return None
    large = [g for g in target.gpus if g.model.large_bar]
    where = target.bios.where.get("mmio_above_4gb", "MMIO above 4 GB")
    if not large:
        return OK, "no GPU with a BAR above 4 GiB", None
    names = ", ".join(_label(g) for g in large)
    if target.bios.mmio_above_4gb is True:
        return OK, f"MMIO above 4 GB on for {names}", None
    if target.bios.mmio_above_4gb is None:
        return (
            WARNING,
            "MMIO above 4 GB unknown",
            Problem(
                where,
                f"the BMC does not report memory-mapped I/O above 4 GB, which {names} needs",
                "check in the BIOS setup that memory-mapped I/O above 4 GB (above-4G decoding) is on",
            ),
        )
    return (
        REFUSED,
        f"MMIO above 4 GB off with {names}",
        Problem(
            where,
            f"memory-mapped I/O above 4 GB is off, but {names} has a BAR above 4 GiB that the firmware then "
            "cannot place (the GPU is not initialised)",
            "turn it on in the BIOS (Dell: BIOS attribute MmioAbove4Gb=Enabled, applied by a BIOS job and a reboot)",
        ),
    )


RULES: tuple[Rule, ...] = (
    Rule(
        "gpu-mixed-flavours", "GPUs that need different module flavours", ("driver-readme", "open-transition"), _mixed
    ),
    Rule("branch-last", "the last driver branch of each architecture", ("legacy-580",), _branch_max),
    Rule("branch-first", "the first driver branch of each architecture", ("cuda-release-notes",), _branch_min),
    Rule(
        "module-open-unsupported",
        "GPUs the open module does not support",
        ("open-readme", "driver-readme"),
        _open_unsupported,
    ),
    Rule("module-open-required", "GPUs that require the open module", ("open-transition",), _open_required),
    Rule("module-open-branch", "branches that ship the open module", ("open-readme",), _open_branch),
    Rule("module-auto", "what auto chooses", ("driver-readme",), _auto),
    Rule("gsp-firmware", "GSP firmware follows the module flavour", ("open-readme", "gsp-readme"), _gsp),
    Rule("kernel-min", "the oldest supported kernel", ("open-readme",), _kernel_min),
    Rule("os-known-bad", "OS/kernel combinations that failed", ("reference-deployment",), _known_bad_os),
    Rule("os-known-good", "OS/kernel combinations that worked", ("reference-deployment",), _known_good_os),
    Rule("bios-secure-boot", "Secure Boot must be off", ("dell-bios", "dmtf-secureboot", "installer"), _secure_boot),
    Rule("bios-boot-mode", "the BIOS boot mode matches the installer's", ("dell-bios", "dmtf-boot"), _boot_mode),
    Rule("bios-mmio-above-4gb", "MMIO above 4 GB for large-BAR GPUs", ("dell-bios", "bar1"), _mmio),
)


def decide(target: Target, rules: Sequence[Rule] = RULES) -> Decision:
    """Run every rule; the decision, the rows that applied, all problems and warnings."""
    decision = Decision(kernel_module_type=resolve_module_type(target))
    for rule in rules:
        result = rule.check(target, decision)
        if result is None:
            continue
        outcome, detail, problem = result
        decision.rows.append({"rule": rule.id, "outcome": outcome, "detail": detail, "source": rule.source()})
        if problem is not None:
            stamped = Problem(problem.field, problem.msg, problem.fix, rule.id, rule.source())
            (decision.problems if outcome == REFUSED else decision.warnings).append(stamped)
    if decision.problems:
        decision.kernel_module_type = None
        decision.gsp_firmware = None
        decision.gsp_firmware_can_disable = False
    return decision
