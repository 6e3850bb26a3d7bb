# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Vendor quirks behind one small interface (``BootOps``).

Why: the modules express intent (boot the virtual CD once, put PXE first, reset the BMC, find the
virtual media slots); each BMC family fulfils it its own way. Keeping every family in its own small
file, behind the same five methods, means a new firmware oddity is one file and one table row,
and the planners and modules never test for a vendor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from .bios_settings import BiosSettings


@dataclass
class BootOrderState:
    """The persistent boot order as the BMC shows it.

    ``order`` holds the ids the BMC orders (iDRAC9/generic: BootOption ids like ``Boot0003``;
    iDRAC8: BootSources ids like ``NIC.Integrated.1-1-1``); ``names`` maps every alias a user may
    write (display name, id) to its id. ``raw`` keeps what is needed to write it back.
    """

    order: list[str]
    names: dict[str, str] = field(default_factory=dict)
    source: str = "Boot.BootOrder"
    etag: str | None = None
    raw: Any = None


class BootOps(Protocol):
    """What differs between BMC families; every method takes an open ``RedfishClient``."""

    name: str
    bios_settings: BiosSettings  # where the GPU driver preflight reads Secure Boot, boot mode, MMIO above 4 GB

    def virtual_media_slots(self, client: Any) -> list[Any]:
        """The sushy ``VirtualMedia`` resources of this BMC (Systems- or Managers-side)."""

    def set_one_time_boot(self, client: Any, device: str, persistent: bool) -> dict[str, Any]:
        """Boot ``device`` (module vocabulary: pxe, hdd, cd, virtual_cd, ...) next time or always."""

    def set_boot_mode(self, client: Any, mode: str) -> dict[str, Any]:
        """Switch UEFI/Legacy (only called when it differs)."""

    def read_boot_order(self, client: Any) -> BootOrderState:
        """The persistent boot order."""

    def set_boot_order(self, client: Any, state: BootOrderState, new_order: list[str]) -> dict[str, Any]:
        """Write the full new order; returns ``{"job_id": ...}`` when a BIOS job applies it at reboot."""

    def commit_bios(self, client: Any) -> str | None:
        """Create the one BIOS config job pending writes need (iDRAC8); None where writes apply alone."""

    def reset_bmc(self, client: Any) -> str:
        """Restart the BMC itself; returns the reset that was requested."""


def for_name(name: str) -> BootOps:
    from .dell_idrac8 import DellIdrac8
    from .dell_idrac9 import DellIdrac9
    from .generic import Generic

    table: dict[str, type[Generic]] = {"dell_idrac8": DellIdrac8, "dell_idrac9": DellIdrac9, "generic": Generic}
    return table[name]()
