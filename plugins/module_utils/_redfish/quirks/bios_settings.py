# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where each BMC family keeps the BIOS settings the GPU driver preflight reads, and what the values mean.

Why: "is Secure Boot on", "which boot mode" and "is memory-mapped I/O above 4 GB on" are one
question each, but every vendor answers them under its own attribute names (Redfish standardises
the ``Bios`` resource, not its ``Attributes``). One table per family keeps the names out of the
readers, and a new vendor is one more table.

* Dell (iDRAC8 13G, iDRAC9 14G+): ``Bios.Attributes`` ``SecureBoot`` (``Enabled``/``Disabled``),
  ``BootMode`` (``Uefi``/``Bios``) and ``MmioAbove4Gb`` (``Enabled``/``Disabled``), as the Dell
  PowerEdge BIOS attribute registry names them (Dell's iDRAC Redfish API guide, BIOS attributes;
  dellemc.openmanage ``idrac_bios`` examples use the same names).
* Generic DMTF: Secure Boot is the ``SecureBoot`` resource's ``SecureBootEnable`` (DMTF schema
  SecureBoot v1: "enable UEFI Secure Boot on the next boot"), the boot mode the System's
  ``Boot.BootSourceOverrideMode`` (ComputerSystem v1). No standard attribute names MMIO above 4 GB:
  the generic reader reports it unknown, and the preflight warns instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Where a setting is read from.
BIOS_ATTRIBUTE = "Bios.Attributes"  # an attribute of the System's Bios resource
SECURE_BOOT_RESOURCE = "SecureBoot"  # a property of the System's SecureBoot resource (DMTF)
SYSTEM_BOOT = "Boot"  # a property of the System's Boot object (DMTF)

ENABLED_DISABLED = {"Enabled": True, "Disabled": False}


@dataclass(frozen=True)
class BiosSource:
    """One setting: the resource (``kind``), the property or attribute ``name``, raw value -> meaning."""

    kind: str
    name: str
    values: dict[Any, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.kind}.{self.name}"


@dataclass(frozen=True)
class BiosSettings:
    """The preflight's BIOS questions for one BMC family; None where the family has no answer."""

    secure_boot: BiosSource | None
    boot_mode: BiosSource | None
    mmio_above_4gb: BiosSource | None


DELL = BiosSettings(
    secure_boot=BiosSource(BIOS_ATTRIBUTE, "SecureBoot", ENABLED_DISABLED),
    boot_mode=BiosSource(BIOS_ATTRIBUTE, "BootMode", {"Uefi": "UEFI", "Bios": "Legacy"}),
    mmio_above_4gb=BiosSource(BIOS_ATTRIBUTE, "MmioAbove4Gb", ENABLED_DISABLED),
)

GENERIC = BiosSettings(
    secure_boot=BiosSource(SECURE_BOOT_RESOURCE, "SecureBootEnable", {True: True, False: False}),
    boot_mode=BiosSource(SYSTEM_BOOT, "BootSourceOverrideMode", {"UEFI": "UEFI", "Legacy": "Legacy"}),
    mmio_above_4gb=None,
)
