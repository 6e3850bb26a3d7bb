# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a node's NVIDIA driver is now, read on the node: the body of ``nvidia_driver_info``.

Why: the ``nvidia_driver`` role decides everything from one reading: whether the wanted driver and flavour
are already loaded (then it does nothing), whether nouveau holds the GPUs (then a blacklist needs a reboot),
whether Secure Boot would refuse an unsigned module, whether DKMS built the module for the running kernel
after a kernel update, and whether the GPUs ``nvidia-smi`` reports are the ones the BMC inventoried. The
readings are commands and files on the node; the parsers below are pure and table-tested, and the reading
goes through a small ``Node`` interface so tests feed it captured outputs.

Sources of each format:

* ``/proc/modules`` (proc(5)): ``<name> <size> <refcount> <deps> <state> <address> [(taints)]``; ``lsmod``
  prints the same modules under a ``Module  Size  Used by`` header (kmod's lsmod reads /proc/modules).
* ``mokutil --sb-state`` (mokutil(1), from the shim project): ``SecureBoot enabled`` / ``SecureBoot
  disabled``, or ``EFI variables are not supported on this system`` on a legacy-BIOS boot.
* The EFI variable ``SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c`` (UEFI spec 2.x, 3.3 "Globally
  Defined Variables"; efivarfs prefixes the 4-byte attributes): its fifth byte is 1 when Secure Boot is on.
* ``dkms status`` (dkms(8)): ``nvidia/580.126.20, 6.12.0-55.el10.x86_64, x86_64: installed`` (dkms 3) or
  ``nvidia, 580.126.20, 6.8.0-31-generic, x86_64: installed`` (dkms 2); ``nvidia/580.126.20: added`` before
  a build; a trailing `` (WARNING ...)`` note may follow.
* ``modinfo -F license nvidia``: the open flavour declares ``Dual MIT/GPL``
  (NVIDIA/open-gpu-kernel-modules, ``kernel-open/nvidia/nv.c`` MODULE_LICENSE), the proprietary one ``NVIDIA``.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET  # parses the local nvidia-smi's own output
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import MetalplaneError

from .driver_version import DriverTextError, parse_proc_version, parse_smi_xml, parse_version
from .gpus import UnknownGpu, lookup

PROC_VERSION = "/proc/driver/nvidia/version"
PROC_MODULES = "/proc/modules"
EFI_DIR = "/sys/firmware/efi"
# UEFI's global variable GUID (EFI_GLOBAL_VARIABLE); efivarfs names a variable <Name>-<GUID>.
EFI_SECURE_BOOT = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
EFIVAR_ATTRIBUTE_BYTES = 4  # efivarfs prepends the variable's 32-bit attributes to its data
LICENSE_OPEN = "Dual MIT/GPL"
LICENSE_PROPRIETARY = "NVIDIA"
NVIDIA_MODULE = "nvidia"
NOUVEAU_MODULE = "nouveau"
# ``dkms status`` states, in build order (dkms(8)).
DKMS_STATES = ("added", "built", "installed")

_DKMS_LINE = re.compile(
    r"^(?P<module>[^/,\s]+)(?:/|,\s*)(?P<version>[^,:\s]+)"
    r"(?:,\s*(?P<kernel>[^,:\s]+)(?:,\s*(?P<arch>[^:\s]+))?)?:\s*(?P<state>\w+)"
)


class ProbeError(MetalplaneError):
    """The node's driver is not as the role needs it (not loaded, other GPUs, Secure Boot on); the message says why."""


# ------------------------------------------------------------------------------------------- pure parsers
def parse_modules(text: str) -> set[str]:
    """Loaded module names from ``/proc/modules`` or ``lsmod`` output."""
    names = set()
    for line in text.splitlines():
        words = line.split()
        if not words or words[0] == "Module":
            continue
        names.add(words[0])
    return names


def parse_sb_state(text: str) -> bool | None:
    """``mokutil --sb-state`` -> True (on), False (off, or no EFI: a legacy boot has no Secure Boot), None."""
    lowered = text.lower()
    if "secureboot enabled" in lowered:
        return True
    if "secureboot disabled" in lowered or "efi variables are not supported" in lowered:
        return False
    return None


def parse_efivar_secure_boot(blob: bytes) -> bool | None:
    """The efivarfs SecureBoot variable: 4 attribute bytes, then one data byte (1 = on)."""
    if len(blob) <= EFIVAR_ATTRIBUTE_BYTES:
        return None
    return blob[EFIVAR_ATTRIBUTE_BYTES] == 1


@dataclass(frozen=True)
class DkmsEntry:
    module: str
    version: str
    kernel: str | None
    arch: str | None
    state: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "module": self.module,
            "version": self.version,
            "kernel": self.kernel,
            "arch": self.arch,
            "state": self.state,
        }


def parse_dkms_status(text: str) -> list[DkmsEntry]:
    """Every ``dkms status`` line (dkms 2 and 3 formats); lines that are not an entry are skipped."""
    entries = []
    for line in text.splitlines():
        match = _DKMS_LINE.match(line.strip())
        if match:
            entries.append(
                DkmsEntry(
                    match.group("module"),
                    match.group("version"),
                    match.group("kernel"),
                    match.group("arch"),
                    match.group("state").lower(),
                )
            )
    return entries


def dkms_for_kernel(entries: Sequence[DkmsEntry], kernel: str, module: str = NVIDIA_MODULE) -> dict[str, Any]:
    """What DKMS has of ``module`` for ``kernel``: the installed version (None when not built and installed)."""
    mine = [e for e in entries if e.module == module]
    installed = [e for e in mine if e.kernel == kernel and e.state == "installed"]
    return {
        "kernel": kernel,
        "installed_version": installed[-1].version if installed else None,
        "entries": [e.as_dict() for e in mine],
    }


def parse_license(text: str) -> str | None:
    """``modinfo -F license nvidia`` -> ``open``/``proprietary`` (None when unknown)."""
    value = text.strip()
    if value == LICENSE_OPEN:
        return "open"
    if value == LICENSE_PROPRIETARY:
        return "proprietary"
    return None


def _xml_text(element: ET.Element, path: str) -> str | None:
    found = element.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if value in ("", "N/A") else value


def smi_gpu_facts(text: str) -> tuple[str, list[dict[str, Any]], bool]:
    """``nvidia-smi -q -x`` -> (driver version, the contract's GPU entries, persistence mode on every GPU)."""
    report = parse_smi_xml(text)
    root = ET.fromstring(text)
    gpus = []
    persistence = []
    for element, gpu in zip(root.findall("gpu"), report.gpus, strict=True):
        try:
            capability: str | None = lookup(gpu.name).compute_capability
        except UnknownGpu:
            capability = None
        persistence.append(_xml_text(element, "persistence_mode") == "Enabled")
        gpus.append(
            {
                "index": gpu.index,
                "name": gpu.name,
                "uuid": _xml_text(element, "uuid"),
                "pci_bus_id": _xml_text(element, "pci/pci_bus_id") or gpu.bus_id,
                "memory_total_mib": gpu.memory_total_mib,
                "compute_capability": capability,
            }
        )
    return str(report.driver_version), gpus, bool(persistence) and all(persistence)


# ------------------------------------------------------------------------------------------------ reading
class Node(Protocol):
    """The node, as the probe reads it (``AnsibleNode`` on a real node, a fake in tests)."""

    def which(self, name: str) -> str | None: ...

    def run(self, argv: list[str]) -> tuple[int, str, str]: ...

    def read(self, path: str) -> bytes | None: ...

    def exists(self, path: str) -> bool: ...


class AnsibleNode:
    """``Node`` over an AnsibleModule: ``run_command`` and ``get_bin_path`` (sbin included), files read locally."""

    def __init__(self, ansible: Any) -> None:
        self.ansible = ansible

    def which(self, name: str) -> str | None:
        return self.ansible.get_bin_path(name, opt_dirs=["/usr/sbin", "/sbin", "/usr/local/sbin"])

    def run(self, argv: list[str]) -> tuple[int, str, str]:
        rc, out, err = self.ansible.run_command(argv)
        return int(rc), str(out), str(err)

    def read(self, path: str) -> bytes | None:
        try:
            with open(path, "rb") as handle:
                return handle.read()
        except OSError:
            return None

    def exists(self, path: str) -> bool:
        return os.path.exists(path)


@dataclass
class Reading:
    """One probe of the node's driver state."""

    kernel: str
    loaded: bool = False
    nouveau_loaded: bool = False
    version: str | None = None
    kernel_module_type: str | None = None
    gpus: list[dict[str, Any]] = field(default_factory=list)
    persistence_mode: bool = False
    secure_boot: bool | None = None
    dkms: dict[str, Any] = field(default_factory=dict)
    smi_error: str | None = None

    def facts(self) -> dict[str, Any]:
        """``nvidia_driver_facts`` in the shape ``nvidia_gpu_inventory`` reads (``changed_by`` set by the role)."""
        return {
            "version": self.version,
            "kernel_module_type": self.kernel_module_type,
            "gpus": self.gpus,
            "persistence_mode": self.persistence_mode,
            "changed_by": None,
        }


def _modules(node: Node) -> set[str]:
    lsmod = node.which("lsmod")
    if lsmod:
        rc, out, _err = node.run([lsmod])
        if rc == 0:
            return parse_modules(out)
    return parse_modules((node.read(PROC_MODULES) or b"").decode(errors="replace"))


def _secure_boot(node: Node) -> bool | None:
    mokutil = node.which("mokutil")
    if mokutil:
        rc, out, err = node.run([mokutil, "--sb-state"])
        state = parse_sb_state(out + err)
        if state is not None or rc == 0:
            return state
    blob = node.read(EFI_SECURE_BOOT)
    if blob is not None:
        return parse_efivar_secure_boot(blob)
    if not node.exists(EFI_DIR):
        return False  # a legacy BIOS boot: no Secure Boot
    return None  # booted by UEFI, but the variable is not readable


def read_node(node: Node, kernel: str | None = None) -> Reading:
    """Probe the driver state (read-only: the same in check mode)."""
    reading = Reading(kernel=kernel or os.uname().release)
    modules = _modules(node)
    reading.loaded = NVIDIA_MODULE in modules
    reading.nouveau_loaded = NOUVEAU_MODULE in modules
    proc = node.read(PROC_VERSION)
    if proc:
        try:
            loaded = parse_proc_version(proc.decode(errors="replace"))
            reading.version, reading.kernel_module_type = str(loaded.version), loaded.kernel_module_type
            reading.loaded = True
        except DriverTextError:
            pass
    smi = node.which("nvidia-smi")
    if smi and reading.loaded:
        rc, out, err = node.run([smi, "-q", "-x"])
        try:
            if rc != 0:
                raise DriverTextError((out + err).strip() or f"nvidia-smi -q -x exited {rc}")
            version, reading.gpus, reading.persistence_mode = smi_gpu_facts(out)
            reading.version = reading.version or version
        except (DriverTextError, ET.ParseError) as exc:
            reading.smi_error = str(exc)
    if reading.loaded and reading.kernel_module_type is None:
        modinfo = node.which("modinfo")
        if modinfo:
            rc, out, _err = node.run([modinfo, "-F", "license", NVIDIA_MODULE])
            reading.kernel_module_type = parse_license(out) if rc == 0 else None
    reading.secure_boot = _secure_boot(node)
    dkms = node.which("dkms")
    entries: list[DkmsEntry] = []
    if dkms:
        rc, out, _err = node.run([dkms, "status"])
        entries = parse_dkms_status(out) if rc == 0 else []
    reading.dkms = {**dkms_for_kernel(entries, reading.kernel), "present": dkms is not None}
    return reading


# ------------------------------------------------------------------------------------------ plan and verify
INSTALL, UPGRADE, NONE = "install", "upgrade", "none"
SECURE_BOOT_ON = (
    "Secure Boot is on (it was off at the preflight, or the BIOS was changed since): the NVIDIA module the role "
    "builds is unsigned and would not load, and module signing is out of scope of this collection; turn Secure "
    "Boot off in the BIOS and run again"
)


def plan(reading: Reading, version: str | None, kernel_module_type: str | None) -> dict[str, Any]:
    """What the role must do to have ``version``/``kernel_module_type`` loaded: ``none``, ``install`` or ``upgrade``.

    Idempotent by the loaded driver: the same version and flavour loaded is ``none``. A driver installed for the
    running kernel but not loaded (before the first load, or nouveau held the GPUs) is installed again: the
    installer is the only place that loads and checks it the way the role needs.
    """
    if not version:
        return {"action": NONE, "reason": "no driver version asked for"}
    want = str(parse_version(version))
    flavour = kernel_module_type if kernel_module_type in ("open", "proprietary") else None
    if reading.loaded and reading.version:
        same_flavour = flavour is None or reading.kernel_module_type in (None, flavour)
        if reading.version == want and same_flavour:
            return {"action": NONE, "reason": f"{want} ({reading.kernel_module_type or 'loaded'}) is loaded"}
        return {
            "action": UPGRADE,
            "reason": f"{reading.version} ({reading.kernel_module_type}) is loaded; {want} ({flavour}) is wanted",
        }
    return {"action": INSTALL, "reason": f"no NVIDIA driver is loaded; {want} ({flavour}) is wanted"}


def expected_counts(expected: Sequence[Any]) -> Counter[str]:
    """``expected_gpus`` as model -> count: entries are model names or ``{model, count}`` mappings."""
    counts: Counter[str] = Counter()
    for entry in expected:
        if isinstance(entry, Mapping):
            counts[_model_key(str(entry.get("model") or ""))] += int(entry.get("count", 1) or 1)
        else:
            counts[_model_key(str(entry))] += 1
    return counts


def _model_key(name: str) -> str:
    try:
        return lookup(name).name
    except UnknownGpu:
        return name


def problems(
    reading: Reading, version: str | None, kernel_module_type: str | None, expected: Sequence[Any]
) -> list[str]:
    """Why the node's driver is not as wanted (empty when it is): what the role's verification fails with."""
    found: list[str] = []
    if reading.secure_boot:
        found.append(SECURE_BOOT_ON)
    if not reading.loaded:
        found.append("the nvidia kernel module is not loaded")
    elif reading.smi_error:
        found.append(f"nvidia-smi fails: {reading.smi_error}")
    if version and reading.version and reading.version != str(parse_version(version)):
        found.append(f"driver {reading.version} is loaded, {version} was asked for")
    if kernel_module_type in ("open", "proprietary") and reading.kernel_module_type not in (None, kernel_module_type):
        found.append(f"the {reading.kernel_module_type} kernel module is loaded, {kernel_module_type} was asked for")
    if reading.loaded and reading.dkms.get("present") and reading.dkms.get("installed_version") is None:
        found.append(
            f"DKMS has no nvidia module installed for the running kernel {reading.kernel}: rebuild it with "
            f"`dkms autoinstall -k {reading.kernel}` (kernel headers for it must be installed)"
        )
    if expected:
        want = expected_counts(expected)
        have = Counter(_model_key(str(g.get("name") or "")) for g in reading.gpus)
        if want != have and reading.loaded and not reading.smi_error:
            found.append(
                f"nvidia-smi reports {_describe(have)} but the BMC inventory lists {_describe(want)}: "
                "a GPU is missing, failed to initialise or is another model"
            )
    return found


def _describe(counts: Counter[str]) -> str:
    return ", ".join(f"{n}x {name}" for name, n in sorted(counts.items())) or "no GPU"


def run_nvidia_driver_info(module: Any) -> dict[str, Any]:
    params = module.params
    reading = read_node(AnsibleNode(module.ansible), params.get("kernel"))
    result: dict[str, Any] = {
        "changed": False,
        "nvidia_driver_facts": reading.facts(),
        "loaded": reading.loaded,
        "nouveau_loaded": reading.nouveau_loaded,
        "secure_boot": reading.secure_boot,
        "dkms": reading.dkms,
        "kernel": reading.kernel,
        "smi_error": reading.smi_error,
        "plan": plan(reading, params.get("version"), params.get("kernel_module_type")),
    }
    if params.get("refuse_secure_boot") and reading.secure_boot:
        raise ProbeError(SECURE_BOOT_ON, details={"field": "secure_boot"})
    found = problems(
        reading, params.get("version"), params.get("kernel_module_type"), params.get("expected_gpus") or []
    )
    result["problems"] = found
    if params.get("verify") and found:
        raise ProbeError("; ".join(found), details={"problems": found, "nvidia_driver_facts": reading.facts()})
    return result
